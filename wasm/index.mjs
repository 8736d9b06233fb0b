// wasm/index.mjs — the ESM façade of fxwasm: torch.fx's Graph, Node and GraphModule in JS.
//
//   import { init } from 'fxwasm';
//   const fx = await init();
//   const g = new fx.Graph();
//   const x = g.placeholder('x');
//   const add = g.callFunction('operator.add', [x, 1]);
//   g.output(add);
//   console.log(g.print());
//   g.delete();
//
// Layers: dist/fx.mjs + dist/fx.wasm are the Embind module built from wasm/bindings.cpp; this
// file turns its flat, id-based functions into classes, checks the pending-error slot after
// every call and throws FxError, and converts argument values both ways (see "Values" below).
// Names mirror the C++/Python ones in camelCase, one to one (erase_node -> eraseNode).
import createFxModule from '../dist/fx.mjs';

/** The loaded Embind module (null until init() resolves). */
let M = null;
/** The memoized init() promise. */
let initPromise = null;
/** The API object init() resolves to. */
let api = null;

const PRIVATE = Symbol('fxwasm.private');
const MAX_DEPTH = 256; // same limit as kMaxDepth in wasm/bindings.cpp
const disposeSymbol = Symbol.dispose ?? Symbol.for('Symbol.dispose');
const inspectSymbol = Symbol.for('nodejs.util.inspect.custom');

const isNode =
  typeof process === 'object' &&
  typeof process.versions === 'object' &&
  typeof process.versions.node === 'string';

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/**
 * Every failure of fxwasm: `kind` is fx::error_kind_name ("GraphError", "LintError",
 * "StaleHandleError", "TypeError", "ValueError", ...), `node` the node involved, if any.
 */
export class FxError extends Error {
  constructor(kind, message, node) {
    super(message);
    this.name = 'FxError';
    this.kind = kind;
    this.node = node ?? undefined;
  }
}

function raise() {
  const e = M.takeError();
  throw new FxError(e.kind, e.message, e.node);
}

/** Returns `r` unless the call that produced it left a pending error, which is thrown. */
function ck(r) {
  if (M.errPending()) raise();
  return r;
}

/** For functions returning a node id: 0 means the call failed (ids start at 1). */
function ckId(id) {
  if (id === 0) raise();
  return id;
}

function requireModule() {
  if (!M) throw new FxError('RuntimeError', 'fxwasm is not initialised yet: call `await init()` first');
}

function typeError(message) {
  return new FxError('TypeError', message);
}

// ---------------------------------------------------------------------------------------------
// Values: JS <-> Python-like argument values
// ---------------------------------------------------------------------------------------------

/** A Python tuple: an Array subclass, so it indexes and iterates like an array. */
export class FxTuple extends Array {}

/** A Python float whose value is integral (`1.0`); non-integral JS numbers are floats anyway. */
export class FxFloat {
  constructor(value) {
    if (typeof value !== 'number') throw typeError('fx.float() needs a number');
    this.value = value;
  }
  valueOf() {
    return this.value;
  }
  toString() {
    return Number.isInteger(this.value) ? this.value.toFixed(1) : String(this.value);
  }
}

/** A Python complex number. */
export class FxComplex {
  constructor(re, im) {
    if (typeof re !== 'number' || typeof im !== 'number')
      throw typeError('fx.complex() needs two numbers');
    this.re = re;
    this.im = im;
  }
}

/** A Python slice(start, stop, step). */
export class FxSlice {
  constructor(start = null, stop = null, step = null) {
    this.start = start;
    this.stop = stop;
    this.step = step;
  }
}

/** Python's Ellipsis (`...`); use the singleton `fx.ellipsis`. */
export class FxEllipsis {
  toString() {
    return 'Ellipsis';
  }
}
export const ellipsis = Object.freeze(new FxEllipsis());

/** A torch dtype such as `torch.float32`. */
export class FxDtype {
  constructor(name) {
    if (typeof name !== 'string') throw typeError('fx.dtype() needs a name such as "float32"');
    this.name = name.startsWith('torch.') ? name.slice(6) : name;
  }
  toString() {
    return 'torch.' + this.name;
  }
}

/** A torch.device: `type` ("cpu", "cuda") and optional `index`. */
export class FxDevice {
  constructor(type, index = null) {
    if (typeof type !== 'string') throw typeError('fx.device() needs a type such as "cpu"');
    const colon = type.indexOf(':');
    if (colon >= 0 && index == null) {
      index = Number(type.slice(colon + 1));
      type = type.slice(0, colon);
    }
    if (index != null && !(Number.isInteger(index) && index >= 0))
      throw new FxError('ValueError', `device index must be a non-negative integer, got ${index}`);
    this.type = type;
    this.index = index ?? null;
  }
  toString() {
    return this.index == null ? this.type : `${this.type}:${this.index}`;
  }
}

/** A torch.memory_format such as `torch.channels_last`. */
export class FxMemoryFormat {
  constructor(name) {
    if (typeof name !== 'string') throw typeError('fx.memoryFormat() needs a name');
    this.name = name.startsWith('torch.') ? name.slice(6) : name;
  }
  toString() {
    return 'torch.' + this.name;
  }
}

/** A torch.layout such as `torch.strided`. */
export class FxLayout {
  constructor(name) {
    if (typeof name !== 'string') throw typeError('fx.layout() needs a name');
    this.name = name.startsWith('torch.') ? name.slice(6) : name;
  }
  toString() {
    return 'torch.' + this.name;
  }
}

export const tuple = (items = []) => {
  if (items == null || typeof items[Symbol.iterator] !== 'function')
    throw typeError('fx.tuple() needs an array (or any iterable) of values');
  return FxTuple.from(items);
};
export const float = (value) => new FxFloat(value);
export const complex = (re, im) => new FxComplex(re, im);
export const slice = (start = null, stop = null, step = null) => new FxSlice(start, stop, step);
export const dtype = (name) => new FxDtype(name);
export const device = (type, index = null) => new FxDevice(type, index);
export const memoryFormat = (name) => new FxMemoryFormat(name);
export const layout = (name) => new FxLayout(name);

const INT64_MIN = -9223372036854775808;
const INT64_LIMIT = 9223372036854775808;

function numText(x) {
  return Object.is(x, -0) ? '-0' : String(x);
}

function isPlainObject(v) {
  const p = Object.getPrototypeOf(v);
  return p === Object.prototype || p === null;
}

// Encodes `v` in the token format of wasm/bindings.cpp ("Argument codec").
function enc(v, depth) {
  if (depth > MAX_DEPTH)
    throw new FxError('ValueError', `value nested deeper than ${MAX_DEPTH} levels`);
  if (v === null) return 'N';
  switch (typeof v) {
    case 'boolean':
      return v ? 'T' : 'F';
    case 'number':
      if (Number.isInteger(v) && v >= INT64_MIN && v < INT64_LIMIT)
        return 'i' + (Number.isSafeInteger(v) ? String(v === 0 ? 0 : v) : BigInt(v).toString()) + ';';
      return 'd' + numText(v) + ';';
    case 'bigint':
      return 'i' + v.toString() + ';';
    case 'string':
      return 's' + JSON.stringify(v);
    case 'object':
      break;
    case 'undefined':
      throw typeError('undefined is not an fx value (use null for None)');
    default:
      throw typeError(`a ${typeof v} is not an fx value`);
  }
  if (v instanceof Node) return '#' + v.graph._gid + ':' + v.id + ';';
  if (v instanceof FxTuple) {
    let s = '(';
    for (const x of v) s += enc(x, depth + 1);
    return s + ')';
  }
  if (Array.isArray(v)) {
    let s = '[';
    for (const x of v) s += enc(x, depth + 1);
    return s + ']';
  }
  if (v instanceof FxFloat) return 'd' + numText(v.value) + ';';
  if (v instanceof FxSlice) return 'S' + enc(v.start, depth + 1) + enc(v.stop, depth + 1) + enc(v.step, depth + 1);
  if (v instanceof FxEllipsis) return 'E';
  if (v instanceof FxDtype) return 'D' + JSON.stringify(v.name);
  if (v instanceof FxDevice) return 'V' + JSON.stringify(v.type) + (v.index == null ? 'N' : 'i' + v.index + ';');
  if (v instanceof FxMemoryFormat) return 'M' + JSON.stringify(v.name);
  if (v instanceof FxLayout) return 'L' + JSON.stringify(v.name);
  if (v instanceof FxComplex) return 'C' + numText(v.re) + ';' + numText(v.im) + ';';
  if (v instanceof Map) {
    let s = '{';
    for (const [k, x] of v) s += enc(k, depth + 1) + enc(x, depth + 1);
    return s + '}';
  }
  if (isPlainObject(v)) {
    let s = '{';
    for (const k of Object.keys(v)) s += 's' + JSON.stringify(k) + enc(v[k], depth + 1);
    return s + '}';
  }
  throw typeError(`cannot pass a ${v.constructor?.name ?? 'object'} as an fx value`);
}

function encArgs(args) {
  if (args == null) return '[]';
  if (!Array.isArray(args)) throw typeError('args must be an array of values');
  let s = '[';
  for (const x of args) s += enc(x, 1);
  return s + ']';
}

function encKwargs(kwargs) {
  if (kwargs == null) return '';
  if (!(kwargs instanceof Map) && (typeof kwargs !== 'object' || !isPlainObject(kwargs)))
    throw typeError('kwargs must be a plain object (or a Map) with string keys');
  return enc(kwargs, 0);
}

// Array-index-like keys would be reordered by JS objects, so such dicts read back as Maps.
const INDEX_KEY = /^(0|[1-9][0-9]*)$/;

// Decodes C++'s token text. Nodes resolve through `graph` (or the graph registry).
class Reader {
  constructor(s, graph) {
    this.s = s;
    this.i = 0;
    this.graph = graph;
  }
  until() {
    const end = this.s.indexOf(';', this.i);
    const t = this.s.slice(this.i, end);
    this.i = end + 1;
    return t;
  }
  str() {
    const s = this.s;
    const start = this.i;
    let j = start + 1;
    while (s[j] !== '"') j += s[j] === '\\' ? 2 : 1;
    this.i = j + 1;
    return JSON.parse(s.slice(start, j + 1));
  }
  value() {
    const s = this.s;
    const c = s[this.i++];
    switch (c) {
      case 'N':
        return null;
      case 'T':
        return true;
      case 'F':
        return false;
      case 'E':
        return ellipsis;
      case 'i': {
        const t = this.until();
        const n = Number(t);
        return Number.isSafeInteger(n) ? n : BigInt(t);
      }
      case 'd': {
        const x = Number(this.until());
        return Number.isInteger(x) ? new FxFloat(x) : x;
      }
      case 'C': {
        const re = Number(this.until());
        return new FxComplex(re, Number(this.until()));
      }
      case 's':
        return this.str();
      case '(': {
        const a = new FxTuple();
        while (s[this.i] !== ')') a.push(this.value());
        this.i++;
        return a;
      }
      case '[': {
        const a = [];
        while (s[this.i] !== ']') a.push(this.value());
        this.i++;
        return a;
      }
      case '{': {
        const keys = [];
        const vals = [];
        let plain = true;
        while (s[this.i] !== '}') {
          const k = this.value();
          if (typeof k !== 'string' || INDEX_KEY.test(k) || k === '__proto__') plain = false;
          keys.push(k);
          vals.push(this.value());
        }
        this.i++;
        if (!plain) return new Map(keys.map((k, i) => [k, vals[i]]));
        const o = {};
        for (let i = 0; i < keys.length; i++) o[keys[i]] = vals[i];
        return o;
      }
      case 'S': {
        const a = this.value();
        const b = this.value();
        return new FxSlice(a, b, this.value());
      }
      case 'D':
        return new FxDtype(this.str());
      case 'M':
        return new FxMemoryFormat(this.str());
      case 'L':
        return new FxLayout(this.str());
      case 'V': {
        const type = this.str();
        if (s[this.i] === 'N') {
          this.i++;
          return new FxDevice(type, null);
        }
        this.i++;
        return new FxDevice(type, Number(this.until()));
      }
      case '#': {
        const colon = s.indexOf(':', this.i);
        const gid = Number(s.slice(this.i, colon));
        this.i = colon + 1;
        const nid = Number(this.until());
        const g = this.graph && this.graph._gid === gid ? this.graph : liveGraphs.get(gid)?.deref();
        if (!g) throw new FxError('InternalError', `internal error: a value refers to unknown graph #${gid}`);
        return g._node(nid);
      }
      default:
        throw new FxError('InternalError', `internal error: cannot decode value at ${this.i - 1}: ${s.slice(this.i - 1, this.i + 20)}`);
    }
  }
}

function decode(s, graph) {
  return new Reader(s, graph).value();
}

// Kwargs and meta keys are always strings: keep them a plain object even for index-like keys.
function plainObject(d) {
  return d instanceof Map ? Object.fromEntries(d) : d;
}

// ---------------------------------------------------------------------------------------------
// Ownership: explicit delete() plus a FinalizationRegistry safety net
// ---------------------------------------------------------------------------------------------

/** gid -> WeakRef<Graph>: lets decoded values find the JS wrapper of a graph. */
const liveGraphs = new Map();

const finalizer = new FinalizationRegistry(({ kind, id }) => {
  if (!M) return;
  if (kind === 'graph') {
    M.graphDelete(id);
    if (liveGraphs.get(id)?.deref() === undefined) liveGraphs.delete(id);
  } else {
    const gid = M.gmGraphId(id);
    M.gmDelete(id);
    if (liveGraphs.get(gid)?.deref() === undefined) liveGraphs.delete(gid);
  }
  if (M.errPending()) M.takeError();
});

function idsToNodes(graph, ids) {
  const out = new Array(ids.length);
  for (let i = 0; i < ids.length; i++) out[i] = graph._node(ids[i]);
  return out;
}

function optNode(graph, id) {
  return id < 0 ? null : graph._node(id);
}

function checkNode(node, what) {
  if (!(node instanceof Node)) throw typeError(`${what}: expected a Node handle`);
  return node;
}

function ownNode(graph, node, what) {
  checkNode(node, what);
  if (node.graph !== graph)
    throw new FxError('GraphError', `${what}: Node '${safeName(node)}' does not belong to this Graph`, safeName(node));
  return node;
}

function safeName(node) {
  try {
    return node.name;
  } catch {
    return `#${node.id}`;
  }
}

function optString(v, what) {
  if (v == null) return null;
  if (typeof v !== 'string') throw typeError(`${what} must be a string`);
  return v;
}

function pythonCodeResult(r) {
  return { src: r.src, globals: { ...r.globals } };
}

// ---------------------------------------------------------------------------------------------
// Graph
// ---------------------------------------------------------------------------------------------

/**
 * torch.fx.Graph. Owns its C++ graph until delete() (or until a GraphModule takes it over).
 */
export class Graph {
  constructor(...args) {
    if (args[0] === PRIVATE) {
      this._init(args[1]);
      return;
    }
    requireModule();
    this._init(ck(M.graphNew()));
  }

  _init(gid) {
    this._gid = gid;
    this._nodes = new Map();
    this._owner = null;
    this._deleted = false;
    liveGraphs.set(gid, new WeakRef(this));
    finalizer.register(this, { kind: 'graph', id: gid }, this);
  }

  /** The (cached) handle of node `id`. */
  _node(id) {
    let n = this._nodes.get(id);
    if (n === undefined) {
      n = new Node(PRIVATE, this, id);
      this._nodes.set(id, n);
    }
    return n;
  }

  get owningModule() {
    return this._owner;
  }

  delete() {
    if (this._owner || this._deleted) return;
    this._deleted = true;
    finalizer.unregister(this);
    M.graphDelete(this._gid);
    ck();
    this._nodes.clear();
    liveGraphs.delete(this._gid);
  }

  [disposeSymbol]() {
    this.delete();
  }

  get nodes() {
    return idsToNodes(this, ck(M.graphNodes(this._gid)));
  }

  get size() {
    return ck(M.graphSize(this._gid));
  }

  placeholder(name, options = {}) {
    if (typeof name !== 'string') throw typeError('placeholder: name must be a string');
    const has = options?.defaultValue !== undefined;
    const def = has ? enc(options?.defaultValue, 0) : '';
    return this._node(ckId(M.graphPlaceholder(this._gid, name, optString(options?.type, 'type'), def, has)));
  }

  getAttr(qualifiedName, options = {}) {
    if (typeof qualifiedName !== 'string') throw typeError('getAttr: qualifiedName must be a string');
    return this._node(ckId(M.graphGetAttr(this._gid, qualifiedName, optString(options?.type, 'type'))));
  }

  _call(fn, what, target, args, kwargs, options) {
    if (typeof target !== 'string') throw typeError(`${what}: target must be a string`);
    const a = encArgs(args);
    const k = encKwargs(kwargs);
    return this._node(ckId(fn(this._gid, target, a, k, optString(options?.type, 'type'))));
  }

  callFunction(target, args, kwargs, options) {
    return this._call(M.graphCallFunction, 'callFunction', target, args, kwargs, options);
  }

  callMethod(methodName, args, kwargs, options) {
    return this._call(M.graphCallMethod, 'callMethod', methodName, args, kwargs, options);
  }

  callModule(moduleName, args, kwargs, options) {
    return this._call(M.graphCallModule, 'callModule', moduleName, args, kwargs, options);
  }

  output(result, options = {}) {
    return this._node(ckId(M.graphOutput(this._gid, enc(result, 0), optString(options?.type, 'type'))));
  }

  createNode(op, target, args, kwargs, options = {}) {
    if (typeof op !== 'string') throw typeError('createNode: op must be a string');
    if (typeof target !== 'string') throw typeError('createNode: target must be a string');
    const a = encArgs(args);
    const k = encKwargs(kwargs);
    return this._node(
      ckId(M.graphCreateNode(this._gid, op, target, a, k, optString(options?.name, 'name'), optString(options?.type, 'type'))),
    );
  }

  eraseNode(node) {
    ownNode(this, node, 'eraseNode');
    M.graphEraseNode(this._gid, node.id);
    ck();
  }

  insertingBefore(node = null) {
    if (node != null) ownNode(this, node, 'insertingBefore');
    return new InsertPoint(PRIVATE, this, ck(M.graphInserting(this._gid, node == null ? -1 : node.id, false)));
  }

  insertingAfter(node = null) {
    if (node != null) ownNode(this, node, 'insertingAfter');
    return new InsertPoint(PRIVATE, this, ck(M.graphInserting(this._gid, node == null ? -1 : node.id, true)));
  }

  nodeCopy(node, argTransform) {
    checkNode(node, 'nodeCopy');
    let table = '';
    if (argTransform != null) {
      if (typeof argTransform !== 'function') throw typeError('nodeCopy: argTransform must be a function');
      table = '[';
      for (const input of node.allInputNodes) table += '(i' + input.id + ';' + enc(argTransform(input), 1) + ')';
      table += ']';
    }
    return this._node(ckId(M.graphNodeCopy(this._gid, node.graph._gid, node.id, table)));
  }

  graphCopy(other, valMap) {
    if (!(other instanceof Graph)) throw typeError('graphCopy: expected a Graph');
    let table = '[';
    if (valMap != null) {
      if (!(valMap instanceof Map)) throw typeError('graphCopy: valMap must be a Map<Node, value>');
      for (const [k, v] of valMap) {
        ownNode(other, k, 'graphCopy valMap');
        table += '(i' + k.id + ';' + enc(v, 1) + ')';
      }
    }
    table += ']';
    const r = decode(ck(M.graphGraphCopy(this._gid, other._gid, table)), this);
    if (valMap != null) for (const [id, v] of r[1]) valMap.set(other._node(id), v);
    return r[0];
  }

  clone() {
    return new Graph(PRIVATE, ck(M.graphClone(this._gid)));
  }

  print(options = {}) {
    return ck(M.graphStr(this._gid, !!options?.numUsers));
  }

  toString() {
    return this.print();
  }

  tabular() {
    return ck(M.graphTabular(this._gid));
  }

  pythonCode(options = {}) {
    const root = options?.rootModule ?? 'self';
    if (typeof root !== 'string') throw typeError('pythonCode: rootModule must be a string');
    return pythonCodeResult(ck(M.graphPythonCode(this._gid, root, !!options?.verbose, !!options?.torch113Bugs)));
  }

  lint() {
    M.graphLint(this._gid);
    ck();
  }

  eliminateDeadCode() {
    return ck(M.graphEliminateDeadCode(this._gid));
  }

  findNode(name) {
    if (typeof name !== 'string') throw typeError('findNode: name must be a string');
    return optNode(this, ck(M.graphFindNode(this._gid, name)));
  }

  get outputNode() {
    return optNode(this, ck(M.graphOutputNode(this._gid)));
  }

  [inspectSymbol]() {
    return this._deleted ? 'Graph <deleted>' : `Graph <${M.graphAlive(this._gid) ? this.size + ' nodes' : 'deleted'}>`;
  }
}

// ---------------------------------------------------------------------------------------------
// InsertPoint
// ---------------------------------------------------------------------------------------------

/**
 * Returned by insertingBefore/After: new nodes go there until restore() (or [Symbol.dispose],
 * e.g. with `using`). An InsertPoint that is never restored stays in force.
 */
export class InsertPoint {
  constructor(token, graph, id) {
    if (token !== PRIVATE) throw typeError('InsertPoints come from Graph.insertingBefore/After');
    this.graph = graph;
    this._id = id;
    this._done = false;
  }

  restore() {
    if (this._done) return;
    this._done = true;
    M.graphRestoreInsert(this.graph._gid, this._id);
    ck();
  }

  keep() {
    if (this._done) return;
    this._done = true;
    M.graphKeepInsert(this.graph._gid, this._id);
    ck();
  }

  [disposeSymbol]() {
    this.restore();
  }
}

// ---------------------------------------------------------------------------------------------
// Node
// ---------------------------------------------------------------------------------------------

/** A lightweight handle (graph, id) to an fx::Node; every use is checked in C++. */
export class Node {
  constructor(token, graph, id) {
    if (token !== PRIVATE) throw typeError('Node handles come from Graph methods');
    this.graph = graph;
    this.id = id;
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
  get args() {
    return decode(ck(M.nodeArgs(this.graph._gid, this.id)), this.graph);
  }
  set args(args) {
    this.setArgs(args);
  }
  get kwargs() {
    return plainObject(decode(ck(M.nodeKwargs(this.graph._gid, this.id)), this.graph));
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
    return plainObject(decode(ck(M.nodeMeta(this.graph._gid, this.id)), null));
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
    return r === null ? undefined : decode(r, null);
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

// ---------------------------------------------------------------------------------------------
// GraphModule
// ---------------------------------------------------------------------------------------------

function bytesOf(data, where) {
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (Object.prototype.toString.call(data) === '[object ArrayBuffer]') return new Uint8Array(data);
  throw typeError(`${where}: data must be an ArrayBuffer or a typed array`);
}

// Turns a ModuleSpec into (encoded description, one Uint8Array holding all tensor bytes).
function encodeModuleSpec(spec) {
  const chunks = [];
  let total = 0;
  const tensor = (t, where) => {
    if (t == null || typeof t !== 'object') throw typeError(`${where}: a tensor spec must be an object`);
    const out = {};
    for (const [k, v] of Object.entries(t)) {
      if (v === undefined) continue;
      if (k === 'data') {
        const b = bytesOf(v, where);
        out.data = [total, b.length];
        chunks.push(b);
        total += b.length;
      } else {
        out[k] = v;
      }
    }
    return out;
  };
  const module = (m, where, depth) => {
    if (m == null || typeof m !== 'object') throw typeError(`${where}: a module spec must be an object`);
    if (depth > MAX_DEPTH / 2) throw new FxError('ValueError', `${where}: modules nested too deeply`);
    const out = {};
    for (const [k, v] of Object.entries(m)) {
      if (v === undefined) continue;
      if ((k === 'modules' || k === 'parameters' || k === 'buffers') && (v === null || typeof v !== 'object'))
        throw typeError(`${where}: ${k} must be an object`);
      if (k === 'modules') {
        out.modules = {};
        for (const [name, sub] of Object.entries(v)) out.modules[name] = module(sub, `${where}.${name}`, depth + 1);
      } else if (k === 'parameters' || k === 'buffers') {
        out[k] = {};
        for (const [name, t] of Object.entries(v)) out[k][name] = tensor(t, `${where}.${name}`);
      } else {
        out[k] = v;
      }
    }
    return out;
  };
  const desc = enc(module(spec, 'root', 0), 0);
  const blob = new Uint8Array(total);
  let off = 0;
  for (const c of chunks) {
    blob.set(c, off);
    off += c.length;
  }
  return [desc, blob];
}

/**
 * torch.fx.GraphModule: takes over `graph` (which stays usable as `gm.graph`) and copies from
 * `options.root` the attributes its get_attr / call_module nodes reference.
 */
export class GraphModule {
  constructor(graph, options = {}) {
    if (graph === PRIVATE) {
      // [gm id, graph id] of a GraphModule made in C++ (loadONNX, submodule()).
      const [id, gid] = options;
      this._id = id;
      this._graph = new Graph(PRIVATE, gid);
      this._deleted = false;
      finalizer.unregister(this._graph);
      this._graph._owner = this;
      finalizer.register(this, { kind: 'gm', id: this._id }, this);
      return;
    }
    requireModule();
    if (!(graph instanceof Graph)) throw typeError('GraphModule: expected a Graph');
    const className = options?.className ?? 'GraphModule';
    if (typeof className !== 'string') throw typeError('GraphModule: className must be a string');
    const [desc, blob] = options?.root != null ? encodeModuleSpec(options?.root) : ['', new Uint8Array(0)];
    this._id = ck(M.gmNew(graph._gid, desc, blob, className));
    this._graph = graph;
    this._deleted = false;
    finalizer.unregister(graph);
    graph._owner = this;
    finalizer.register(this, { kind: 'gm', id: this._id }, this);
  }

  get graph() {
    return this._graph;
  }

  get className() {
    return ck(M.gmClassName(this._id));
  }

  get code() {
    return ck(M.gmCode(this._id));
  }

  recompile() {
    return pythonCodeResult(ck(M.gmRecompile(this._id)));
  }

  pythonCode() {
    return pythonCodeResult(ck(M.gmPythonCode(this._id)));
  }

  printReadable() {
    return ck(M.gmPrintReadable(this._id));
  }

  toString() {
    return ck(M.gmStr(this._id));
  }

  setTorch113Bugs(on) {
    M.gmSetTorch113Bugs(this._id, !!on);
    ck();
  }

  addSubmodule(target, module) {
    if (typeof target !== 'string') throw typeError('addSubmodule: target must be a string');
    const [desc, blob] = encodeModuleSpec(module);
    return ck(M.gmAddSubmodule(this._id, target, desc, blob));
  }

  deleteSubmodule(target) {
    if (typeof target !== 'string') throw typeError('deleteSubmodule: target must be a string');
    return ck(M.gmDeleteSubmodule(this._id, target));
  }

  deleteAllUnusedSubmodules() {
    M.gmDeleteAllUnusedSubmodules(this._id);
    ck();
  }

  namedModules() {
    return Array.from(decode(ck(M.gmNamedModules(this._id)), null), (p) => [p[0], p[1]]);
  }

  namedParameters() {
    return Array.from(decode(ck(M.gmNamedParameters(this._id)), null), (p) => [p[0], { ...p[1], shape: [...p[1].shape] }]);
  }

  namedBuffers() {
    return Array.from(decode(ck(M.gmNamedBuffers(this._id)), null), (p) => [p[0], { ...p[1], shape: [...p[1].shape] }]);
  }

  getTensorData(target) {
    if (typeof target !== 'string') throw typeError('getTensorData: target must be a string');
    return ck(M.gmTensorData(this._id, target));
  }

  /**
   * Runs the graph on fxwasm's kernels (onnx.* nodes). `inputs`: one tensor per placeholder,
   * `{ data: TypedArray, shape: number[], dtype?: string }`. `options.probe`: node names whose
   * values to return too. Resolves nothing asynchronously: the run is synchronous.
   */
  run(inputs, options = {}) {
    const probe = options?.probe ?? [];
    if (!Array.isArray(probe) || probe.some((p) => typeof p !== 'string'))
      throw typeError('run: options.probe must be an array of node names');
    const r = ck(M.gmRun(this._id, encodeTensors(inputs, 'run'), probe));
    const outputs = Array.from(r.outputs, tensorFromWasm);
    if (options?.probe === undefined) return outputs;
    return { outputs, probes: Object.fromEntries(Array.from(r.probes, (p) => [p.node, tensorFromWasm(p)])) };
  }

  /**
   * Serializes the module as an ONNX ModelProto (onnx.* call_function nodes; names, opsets and
   * metadata of an imported model are kept). `embedExternalData`: write tensors that live in
   * external files into the model instead of referencing the files. `defaultOpset`: the opset
   * when the module records none (a graph built by hand; default 17).
   */
  toONNX(options = {}) {
    return ck(M.gmToOnnx(this._id, !!options?.embedExternalData, options?.defaultOpset ?? 0));
  }

  /** Metadata of the module as a whole (an imported model's opsets, producer, doc strings...). */
  get meta() {
    return plainObject(decode(ck(M.gmMeta(this._id)), null));
  }

  /**
   * A copy of the GraphModule at attribute path `target` (the body of an imported If/Loop/Scan),
   * owned by the caller: delete() it when done.
   */
  submodule(target) {
    if (typeof target !== 'string') throw typeError('submodule: target must be a string');
    return new GraphModule(PRIVATE, ck(M.gmSubmoduleGraphModule(this._id, target)));
  }

  /** The nodes that cannot run (unknown targets...), found before running. */
  coverage() {
    return Array.from(ck(M.gmCoverage(this._id)), (g) => ({ node: g.node, target: g.target, reason: g.reason }));
  }

  /** Runs the graph once and records meta["tensor_meta"] (shape, dtype) on every node. */
  shapeProp(inputs) {
    M.gmShapeProp(this._id, encodeTensors(inputs, 'shapeProp'));
    ck();
  }

  delete() {
    if (this._deleted) return;
    this._deleted = true;
    finalizer.unregister(this);
    M.gmDelete(this._id);
    ck();
    this._graph._nodes.clear();
    liveGraphs.delete(this._graph._gid);
  }

  [disposeSymbol]() {
    this.delete();
  }
}

// ---------------------------------------------------------------------------------------------
// Tensors, passes, rewriting
// ---------------------------------------------------------------------------------------------

const typedArrayDtypes = [
  [Float32Array, 'float32'],
  [Float64Array, 'float64'],
  [BigInt64Array, 'int64'],
  [Int32Array, 'int32'],
  [Int16Array, 'int16'],
  [Int8Array, 'int8'],
  [Uint8Array, 'uint8'],
];
const dtypeArrays = {
  float32: Float32Array,
  float64: Float64Array,
  int64: BigInt64Array,
  int32: Int32Array,
  int16: Int16Array,
  int8: Int8Array,
  uint8: Uint8Array,
  bool: Uint8Array,
};

function encodeTensors(inputs, what) {
  if (!Array.isArray(inputs)) throw typeError(`${what}: inputs must be an array of tensors`);
  return inputs.map((t, i) => {
    if (t == null || !ArrayBuffer.isView(t.data) || !Array.isArray(t.shape))
      throw typeError(`${what}: input ${i} must be { data: TypedArray, shape: number[], dtype? }`);
    const inferred = typedArrayDtypes.find(([C]) => t.data instanceof C)?.[1];
    const dt = t.dtype ?? inferred;
    if (typeof dt !== 'string') throw typeError(`${what}: input ${i} needs a dtype`);
    return { dtype: dt, shape: t.shape, data: t.data };
  });
}

function tensorFromWasm(t) {
  const C = dtypeArrays[t.dtype];
  const bytes = t.bytes;
  const data = C ? new C(bytes.buffer, bytes.byteOffset, bytes.byteLength / C.BYTES_PER_ELEMENT) : bytes;
  return { dtype: t.dtype, shape: Array.from(t.shape), data };
}

/** The pass names runPasses accepts. */
export const passNames = Object.freeze([
  'dce',
  'cse',
  'remove-dropout',
  'fold',
  'fuse-conv-bn',
  'fuse-matmul-add',
  'fuse-gelu',
  'fuse-layernorm',
]);

/**
 * Runs passes on `gm` in order (fx::PassManager): lint after each, recompile when modified.
 * `options.checkEquivalence`: inputs to run before and after every modifying pass; the first
 * pass that changes the outputs beyond `rtol`/`atol` throws an FxError naming it and the first
 * diverging node. `options.maxIterations` repeats the pipeline until nothing changes.
 */
export function runPasses(gm, names, options = {}) {
  requireModule();
  if (!(gm instanceof GraphModule)) throw typeError('runPasses: expected a GraphModule');
  if (!Array.isArray(names) || names.some((n) => typeof n !== 'string'))
    throw typeError('runPasses: names must be an array of pass names');
  const check = options?.checkEquivalence != null ? encodeTensors(options.checkEquivalence, 'runPasses') : null;
  const r = ck(
    M.gmRunPasses(gm._id, names, check, options?.rtol ?? 1e-4, options?.atol ?? 1e-5, options?.maxIterations ?? 1),
  );
  return Array.from(r, (x) => ({ ...x }));
}

/**
 * torch.fx.subgraph_rewriter.replace_pattern with Graphs as pattern and replacement. Returns one
 * `{ anchor, nodesMap }` per replaced match (`nodesMap`: [patternNodeName, graphNodeName or
 * literal value]). `options.filters` (replace_pattern_with_filters): functions
 * `(match, originalGraph, patternGraph) => boolean`; a match is replaced when every filter
 * returns true. `match` is `{ anchors, nodesMap, placeholderNodes, returningNodes }` (anchors:
 * pattern node names; the rest graph node names;
 * a literal a placeholder bound is given as its value). A filter that throws stops the call with
 * its error before anything is replaced.
 */
export function replacePattern(gm, pattern, replacement, options = {}) {
  requireModule();
  if (!(gm instanceof GraphModule) || !(pattern instanceof Graph) || !(replacement instanceof Graph))
    throw typeError('replacePattern: expected (GraphModule, Graph, Graph)');
  const filters = options?.filters ?? [];
  if (!Array.isArray(filters) || filters.some((f) => typeof f !== 'function'))
    throw typeError('replacePattern: options.filters must be an array of functions');
  let thrown = null;
  const value = ([v, isNode]) => (isNode ? v : decode(v, null));
  const filter =
    filters.length === 0
      ? undefined
      : (m) => {
          const match = {
            anchors: Array.from(m.anchors),
            nodesMap: Array.from(m.nodesMap, ([p, v, isNode]) => [p, value([v, isNode])]),
            placeholderNodes: Array.from(m.placeholderNodes, value),
            returningNodes: Array.from(m.returningNodes),
          };
          try {
            return filters.every((f) => f(match, gm.graph, pattern) === true);
          } catch (e) {
            thrown = e;
            return null;
          }
        };
  let r;
  try {
    r = ck(M.gmReplacePattern(gm._id, pattern._gid, replacement._gid, filter));
  } catch (e) {
    if (thrown) throw thrown;
    throw e;
  }
  return Array.from(r, (m) => ({
    anchor: m.anchor,
    nodesMap: Array.from(m.nodesMap, ([p, g, isNode]) => [p, isNode ? g : decode(g, null)]),
  }));
}

// ---------------------------------------------------------------------------------------------
// ONNX
// ---------------------------------------------------------------------------------------------

let nodeFs = null;  // node:fs, loaded by init() under Node (sync reads of external data)

function asBytes(data, what) {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return data;
  throw typeError(`${what}: expected a Uint8Array or ArrayBuffer`);
}

function blobRange(blob, offset, length, location) {
  if (typeof FileReaderSync === 'undefined')
    throw new FxError(
      'ValueError',
      `external data '${location}' is a Blob, which can only be read synchronously in a Web Worker; ` +
        'read it into a Uint8Array first (await blob.arrayBuffer()) or load the model in a worker',
    );
  const part = length >= 0 ? blob.slice(offset, offset + length) : blob.slice(offset);
  return new Uint8Array(new FileReaderSync().readAsArrayBuffer(part));
}

// The reader C++ calls (location, offset, length) -> Uint8Array | null, over what the caller gave.
function externalReader(externalData) {
  if (externalData == null) return null;
  let read;
  if (typeof externalData === 'function') {
    read = externalData;
  } else if (typeof externalData === 'string') {
    if (!nodeFs) throw typeError('loadONNX: externalData as a folder path works in Node only');
    const dir = externalData;
    read = (location, offset, length) => {
      if (location.startsWith('/') || location.split(/[\\/]/).includes('..'))
        throw new FxError('ValueError', `external data location '${location}' must stay inside the model's folder`);
      const fd = nodeFs.openSync(`${dir}/${location}`, 'r');
      try {
        const size = nodeFs.fstatSync(fd).size;
        const n = length >= 0 ? length : size - offset;
        if (offset + n > size)
          throw new FxError('ParseError', `external data '${location}' is ${size} bytes, shorter than offset ${offset} + length ${n}`);
        const out = new Uint8Array(n);
        nodeFs.readSync(fd, out, 0, n, offset);
        return out;
      } finally {
        nodeFs.closeSync(fd);
      }
    };
  } else if (typeof externalData === 'object') {
    const get = externalData instanceof Map ? (k) => externalData.get(k) : (k) => externalData[k];
    read = (location, offset, length) => {
      const src = get(location);
      if (src == null) return null;
      if (typeof Blob !== 'undefined' && src instanceof Blob) return blobRange(src, offset, length, location);
      const b = asBytes(src, `externalData['${location}']`);
      const end = length >= 0 ? offset + length : b.byteLength;
      if (end > b.byteLength)
        throw new FxError('ParseError', `external data '${location}' is ${b.byteLength} bytes, shorter than offset ${offset} + length ${length}`);
      return b.subarray(offset, end);
    };
  } else {
    throw typeError('loadONNX: externalData must be a function, an object/Map of location -> bytes, or (Node) a folder path');
  }
  // A JS exception must not unwind through C++ frames: report it as "not supplied" plus its text.
  return (location, offset, length) => {
    try {
      return read(location, offset, length) ?? null;
    } catch (e) {
      lastReaderError = e;
      return null;
    }
  };
}
let lastReaderError = null;

/**
 * Imports an ONNX model (the bytes of a .onnx file) as a GraphModule: graph inputs become
 * placeholders, initializers get_attr nodes over the module's parameters, every node a
 * call_function of `onnx.<OpType>` with its attributes as kwargs. `options.externalData` resolves
 * tensors stored outside the model, lazily (when they are first needed): a function
 * `(location, offset, length) => Uint8Array`, an object or Map from location to bytes (or a
 * Blob, inside a Web Worker), or under Node the folder the files live in.
 */
export function loadONNX(bytes, options = {}) {
  requireModule();
  const data = asBytes(bytes, 'loadONNX');
  const reader = externalReader(options?.externalData);
  lastReaderError = null;
  const ids = M.loadOnnx(data, reader);
  try {
    ck();
  } catch (e) {
    if (lastReaderError) e.message += ` (${lastReaderError.message})`;
    throw e;
  }
  return new GraphModule(PRIVATE, ids);
}

/** Decodes an ONNX TensorProto (e.g. ONNX test data `input_0.pb`) into `{ name, dtype, shape, data }`. */
export function tensorFromONNX(bytes) {
  requireModule();
  const t = ck(M.tensorFromOnnx(asBytes(bytes, 'tensorFromONNX')));
  return { name: t.name, ...tensorFromWasm(t) };
}

/** Encodes a tensor `{ data, shape, dtype? }` as an ONNX TensorProto named `name`. */
export function tensorToONNX(tensor, name = '') {
  requireModule();
  const [t] = encodeTensors([tensor], 'tensorToONNX');
  return ck(M.tensorToOnnx(t, String(name)));
}

// ---------------------------------------------------------------------------------------------
// init
// ---------------------------------------------------------------------------------------------

async function readNodeWasm(options) {
  const fs = await import(/* webpackIgnore: true */ 'node:fs/promises');
  let where = new URL('../dist/fx.wasm', import.meta.url);
  if (typeof options.locateFile === 'function') {
    const dir = new URL('../dist/', import.meta.url);
    const p = options.locateFile('fx.wasm', dir.protocol === 'file:' ? decodeURIComponent(dir.pathname) : dir.href);
    where = p instanceof URL || /^file:/.test(p) ? new URL(p) : p;
  }
  return fs.readFile(where);
}

async function load(options) {
  const moduleOptions = {};
  if (options.wasmBinary != null) {
    moduleOptions.wasmBinary = options.wasmBinary;
  } else if (isNode) {
    // Debian's emscripten 3.1.6 loader cannot read a .wasm by path under Node >= 18 (it tries
    // fetch), so read the bytes here.
    try {
      moduleOptions.wasmBinary = await readNodeWasm(options);
    } catch (e) {
      throw new FxError('RuntimeError', `cannot read fx.wasm (${e.message}); build it or pass init({ wasmBinary })`);
    }
  } else if (typeof options.locateFile === 'function') {
    moduleOptions.locateFile = options.locateFile;
  }
  let pending;
  if (isNode) {
    // The 3.1.6 loader reads __dirname (undefined in ES modules) and installs process-wide
    // uncaughtException/unhandledRejection handlers; give it the first, take back the second.
    const before = {
      uncaughtException: process.listeners('uncaughtException'),
      unhandledRejection: process.listeners('unhandledRejection'),
    };
    const hadDirname = Object.prototype.hasOwnProperty.call(globalThis, '__dirname');
    if (!hadDirname) globalThis.__dirname = decodeURIComponent(new URL('../dist/', import.meta.url).pathname);
    try {
      pending = createFxModule(moduleOptions);
    } finally {
      if (!hadDirname) delete globalThis.__dirname;
      for (const [event, old] of Object.entries(before))
        for (const l of process.listeners(event)) if (!old.includes(l)) process.removeListener(event, l);
    }
  } else {
    pending = createFxModule(moduleOptions);
  }
  M = await pending;
  if (isNode) nodeFs = await import(/* webpackIgnore: true */ 'node:fs');
  api = Object.freeze({
    version: M.version(),
    Graph,
    GraphModule,
    Node,
    InsertPoint,
    FxError,
    FxTuple,
    FxFloat,
    FxComplex,
    FxSlice,
    FxEllipsis,
    FxDtype,
    FxDevice,
    FxMemoryFormat,
    FxLayout,
    tuple,
    float,
    complex,
    slice,
    ellipsis,
    dtype,
    device,
    memoryFormat,
    layout,
    runPasses,
    replacePattern,
    passNames,
    loadONNX,
    tensorFromONNX,
    tensorToONNX,
    heapUsed: () => M.heapUsed(),
    heapSize: () => M.HEAP8.length,
    liveHandles: () => M.liveHandles(),
  });
  return api;
}

/**
 * Loads the wasm module once (memoized) and resolves to the API object. Options only matter on
 * the first call: `wasmBinary` (the bytes of fx.wasm) or `locateFile(name, dir)` (where to find
 * it; default: next to dist/fx.mjs).
 */
export function init(options = {}) {
  if (!initPromise) {
    initPromise = load(options ?? {}).catch((e) => {
      initPromise = null;
      throw e;
    });
  }
  return initPromise;
}

export default init;
