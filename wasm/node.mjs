// wasm/node.mjs — Node, a lightweight handle (graph, id) to an fx::Node, and the helpers the
// façade uses to check and convert node handles.
import { FxError, typeError } from './errors.mjs';
import { M, PRIVATE, NODE_HANDLE, ck, inspectSymbol } from './runtime.mjs';
import { enc, encArgs, encKwargs, decode, decodeMeta, plainObject, FxTuple, FxSlice, FxFloat, FxComplex, FxEllipsis } from './codec.mjs';

/** Arrays and plain objects frozen all the way down (nodes and Fx value objects are left as they are). */
function frozen(v) {
  if (Array.isArray(v)) {
    for (const x of v) frozen(x);
    return Object.freeze(v);
  }
  if (v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
    for (const x of Object.values(v)) frozen(x);
    return Object.freeze(v);
  }
  return v;
}

export function idsToNodes(graph, ids) {
  const out = new Array(ids.length);
  for (let i = 0; i < ids.length; i++) out[i] = graph._node(ids[i]);
  return out;
}

export function optNode(graph, id) {
  return id < 0 ? null : graph._node(id);
}

export function checkNode(node, what) {
  if (!(node instanceof Node)) throw typeError(`${what}: expected a Node handle`);
  return node;
}

export function ownNode(graph, node, what) {
  checkNode(node, what);
  if (node.graph !== graph)
    throw new FxError('GraphError', `${what}: Node '${safeName(node)}' does not belong to this Graph`, safeName(node));
  return node;
}

export function safeName(node) {
  try {
    return node.name;
  } catch {
    return `#${node.id}`;
  }
}

export function optString(v, what) {
  if (v == null) return null;
  if (typeof v !== 'string') throw typeError(`${what} must be a string`);
  return v;
}


/** A lightweight handle (graph, id) to an fx::Node; every use is checked in C++. */
export class Node {
  constructor(token, graph, id) {
    if (token !== PRIVATE) throw typeError('Node handles come from Graph methods');
    this.graph = graph;
    this.id = id;
  }

  get [NODE_HANDLE]() {
    return true;
  }

  get name() {
    return ck(M.nodeName(this.graph._gid, this.id));
  }
  get op() {
    return ck(M.nodeOp(this.graph._gid, this.id));
  }
  get target() {
    return ck(M.nodeTarget(this.graph._gid, this.id));
  }
  get type() {
    return ck(M.nodeType(this.graph._gid, this.id));
  }
  set type(t) {
    M.nodeSetType(this.graph._gid, this.id, optString(t, 'type'));
    ck();
  }
  /**
   * The positional arguments, frozen like torch.fx's immutable tuple: `n.args[0] = x` throws
   * instead of changing a copy. Assign a new array (`n.args = [x, ...n.args.slice(1)]`) or use
   * replaceInputWith / updateArg.
   */
  get args() {
    return frozen(decode(ck(M.nodeArgs(this.graph._gid, this.id)), this.graph));
  }
  set args(args) {
    this.setArgs(args);
  }
  /** The keyword arguments, frozen (see {@link Node.args}); assign a new object to change them. */
  get kwargs() {
    return frozen(plainObject(decode(ck(M.nodeKwargs(this.graph._gid, this.id)), this.graph)));
  }
  /** JSON.stringify(node) (and of args holding nodes) gives the node's name, as torch.fx prints it. */
  toJSON() {
    return this.name;
  }
  set kwargs(kwargs) {
    this.setKwargs(kwargs);
  }
  get users() {
    return idsToNodes(this.graph, ck(M.nodeUsers(this.graph._gid, this.id)));
  }
  get allInputNodes() {
    return idsToNodes(this.graph, ck(M.nodeAllInputNodes(this.graph._gid, this.id)));
  }
  get next() {
    return optNode(this.graph, ck(M.nodeNext(this.graph._gid, this.id)));
  }
  get prev() {
    return optNode(this.graph, ck(M.nodePrev(this.graph._gid, this.id)));
  }
  get erased() {
    return ck(M.nodeErased(this.graph._gid, this.id));
  }
  get stackTrace() {
    return ck(M.nodeStackTrace(this.graph._gid, this.id));
  }
  set stackTrace(trace) {
    M.nodeSetStackTrace(this.graph._gid, this.id, optString(trace, 'stackTrace'));
    ck();
  }
  get meta() {
    return plainObject(decodeMeta(ck(M.nodeMeta(this.graph._gid, this.id)), null));
  }

  prepend(x) {
    ownNode(this.graph, x, 'prepend');
    M.nodePrepend(this.graph._gid, this.id, x.id);
    ck();
  }

  append(x) {
    ownNode(this.graph, x, 'append');
    M.nodeAppend(this.graph._gid, this.id, x.id);
    ck();
  }

  replaceAllUsesWith(replaceWith, deleteUserCb) {
    ownNode(this.graph, replaceWith, 'replaceAllUsesWith');
    let keep = '';
    if (deleteUserCb != null) {
      if (typeof deleteUserCb !== 'function') throw typeError('replaceAllUsesWith: deleteUserCb must be a function');
      keep = '[';
      for (const u of this.users) if (deleteUserCb(u)) keep += 'i' + u.id + ';';
      keep += ']';
    }
    return idsToNodes(this.graph, ck(M.nodeReplaceAllUsesWith(this.graph._gid, this.id, replaceWith.id, keep)));
  }

  replaceInputWith(oldInput, newInput) {
    ownNode(this.graph, oldInput, 'replaceInputWith');
    ownNode(this.graph, newInput, 'replaceInputWith');
    M.nodeReplaceInputWith(this.graph._gid, this.id, oldInput.id, newInput.id);
    ck();
  }

  updateArg(idx, arg) {
    if (!Number.isInteger(idx)) throw typeError('updateArg: index must be an integer');
    M.nodeUpdateArg(this.graph._gid, this.id, idx, enc(arg, 0));
    ck();
  }

  updateKwarg(key, arg) {
    if (typeof key !== 'string') throw typeError('updateKwarg: key must be a string');
    M.nodeUpdateKwarg(this.graph._gid, this.id, key, enc(arg, 0));
    ck();
  }

  setArgs(args) {
    M.nodeSetArgs(this.graph._gid, this.id, encArgs(args));
    ck();
  }

  setKwargs(kwargs) {
    M.nodeSetKwargs(this.graph._gid, this.id, encKwargs(kwargs ?? {}));
    ck();
  }

  getMeta(key) {
    if (typeof key !== 'string') throw typeError('getMeta: key must be a string');
    const r = ck(M.nodeGetMeta(this.graph._gid, this.id, key));
    return r === null ? undefined : decodeMeta(r, null);
  }

  setMeta(key, value) {
    if (typeof key !== 'string') throw typeError('setMeta: key must be a string');
    M.nodeSetMeta(this.graph._gid, this.id, key, enc(value, 0));
    ck();
  }

  deleteMeta(key) {
    if (typeof key !== 'string') throw typeError('deleteMeta: key must be a string');
    return ck(M.nodeDeleteMeta(this.graph._gid, this.id, key));
  }

  isImpure() {
    return ck(M.nodeIsImpure(this.graph._gid, this.id));
  }

  formatNode(options = {}) {
    return ck(M.nodeFormatNode(this.graph._gid, this.id, !!options?.numUsers));
  }

  toString() {
    return safeName(this);
  }

  [inspectSymbol]() {
    return `Node(${safeName(this)})`;
  }
}

/**
 * torch.fx.node.map_aggregate: `fn` applied to every leaf of an argument value (tuples, lists,
 * plain objects and slices are walked, and rebuilt with the same kind).
 */
export function mapAggregate(a, fn) {
  if (typeof fn !== 'function') throw typeError('mapAggregate: fn must be a function');
  const walk = (x, depth) => {
    if (depth > 256) throw new FxError('ValueError', 'mapAggregate: value nested too deeply');
    if (x instanceof FxTuple) return FxTuple.from(x, (e) => walk(e, depth + 1));
    if (Array.isArray(x)) return x.map((e) => walk(e, depth + 1));
    if (x instanceof FxSlice) return new FxSlice(walk(x.start, depth + 1), walk(x.stop, depth + 1), walk(x.step, depth + 1));
    if (x !== null && typeof x === 'object' && Object.getPrototypeOf(x) === Object.prototype)
      return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, walk(v, depth + 1)]));
    return fn(x);
  };
  return walk(a, 0);
}

/** torch.fx.node.map_arg: `fn(node)` replaces every Node inside an argument value. */
export function mapArg(a, fn) {
  if (typeof fn !== 'function') throw typeError('mapArg: fn must be a function');
  return mapAggregate(a, (x) => (x instanceof Node ? fn(x) : x));
}

/**
 * An argument or meta value as plain JSON data for visualisers: a Node becomes {node: name}, a
 * tuple an array, a float its number, a slice {slice: [start, stop, step]}, a complex {re, im},
 * a bigint its decimal string, and dtypes, devices and the like their Python spelling.
 */
export function jsonValue(x, depth = 0) {
  if (depth > 256) throw new FxError('ValueError', 'toJSON: value nested too deeply');
  if (x === undefined || x === null) return null;
  if (x instanceof Node) return { node: x.name };
  if (Array.isArray(x)) return Array.from(x, (e) => jsonValue(e, depth + 1));
  if (typeof x === 'bigint') return String(x);
  if (typeof x === 'number') return Number.isFinite(x) ? x : String(x);
  if (typeof x !== 'object') return x;
  if (x instanceof FxFloat) return jsonValue(x.value, depth + 1);
  if (x instanceof FxSlice) return { slice: [jsonValue(x.start, depth + 1), jsonValue(x.stop, depth + 1), jsonValue(x.step, depth + 1)] };
  if (x instanceof FxComplex) return { re: x.re, im: x.im };
  if (x instanceof FxEllipsis) return '...';
  if (ArrayBuffer.isView(x)) return Array.from(x, (e) => jsonValue(e, depth + 1));
  if (Object.getPrototypeOf(x) === Object.prototype)
    return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, jsonValue(v, depth + 1)]));
  return String(x);
}
