// wasm/graph.mjs — Graph (torch.fx.Graph) and InsertPoint.
import { typeError } from './errors.mjs';
import { M, PRIVATE, ck, ckId, requireModule, liveGraphs, finalizer, disposeSymbol, inspectSymbol } from './runtime.mjs';
import { enc, encArgs, encKwargs, decode } from './codec.mjs';
import { Node, idsToNodes, optNode, checkNode, ownNode, optString, jsonValue } from './node.mjs';

/** {src, globals} of generated code, as a plain object. */
export function pythonCodeResult(r) {
  return { src: r.src, globals: { ...r.globals } };
}

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

  /** `for (const n of graph)`: the nodes in order (a snapshot, so erasing while iterating is safe). */
  [Symbol.iterator]() {
    return this.nodes[Symbol.iterator]();
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

  /**
   * torch.fx.Graph.find_nodes (torch 2.x): the nodes with opcode `op` and, when given, target
   * `target` (a string, as node.target), in graph order (`sort: false` changes nothing here: the
   * order is always the graph's).
   */
  findNodes({ op, target, sort = true } = {}) {
    const ops = ['placeholder', 'get_attr', 'call_function', 'call_method', 'call_module', 'output'];
    if (!ops.includes(op)) throw typeError(`findNodes: op must be one of ${ops.join(', ')}`);
    if (target !== undefined && typeof target !== 'string') throw typeError('findNodes: target must be a string');
    void sort;
    return this.nodes.filter((n) => n.op === op && (target === undefined || n.target === target));
  }

  /**
   * The graph as plain JSON data for visualisers and tools: `{nodes: [{name, op, target, args,
   * kwargs, users, type, meta}]}` in graph order, where a Node inside args/kwargs/meta is
   * `{node: name}` (see jsonValue for the other Python values). `JSON.stringify(graph)` uses it.
   */
  toJSON() {
    return {
      nodes: this.nodes.map((n) => ({
        name: n.name,
        op: n.op,
        target: n.target,
        args: jsonValue(n.args),
        kwargs: jsonValue(n.kwargs),
        users: n.users.map((u) => u.name),
        type: n.type,
        meta: jsonValue(n.meta),
      })),
    };
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
