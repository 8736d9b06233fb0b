// wasm/graph_module.mjs — GraphModule (torch.fx.GraphModule): a Graph plus its attribute tree.
import { FxError, typeError } from './errors.mjs';
import { M, PRIVATE, ck, requireModule, liveGraphs, finalizer, disposeSymbol } from './runtime.mjs';
import { MAX_DEPTH, enc, decode, decodeMeta, plainObject } from './codec.mjs';
import { Graph, pythonCodeResult } from './graph.mjs';
import { encodeTensors, encodeValues, valueFromWasm } from './tensors.mjs';
import { Node } from './node.mjs';

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
 * `options.root` the attributes its get_attr / call_module nodes reference. `options.root` is a
 * module spec, or another GraphModule (whose tensors are then shared, and whose module meta,
 * such as an imported model's opsets, is copied).
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
    if (options?.root instanceof GraphModule) {
      // torch.fx.GraphModule(root_module, graph): the attributes the graph references, shared.
      if (options.root._deleted) throw new FxError('StaleHandleError', 'GraphModule: the root module was deleted');
      this._id = ck(M.gmNewWithRoot(graph._gid, options.root._id, className));
    } else {
      const [desc, blob] = options?.root != null ? encodeModuleSpec(options?.root) : ['', new Uint8Array(0)];
      this._id = ck(M.gmNew(graph._gid, desc, blob, className));
    }
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

  /**
   * A constant tensor in the graph, as torch.fx's `_tensor_constant` attributes: registers
   * `tensor` (`{data, shape, dtype}` or an ort.Tensor) as a buffer of the module under a fresh
   * name (`options.name` + a number, default `_tensor_constant0`, `1`...) and adds a get_attr node
   * reading it at the graph's insert point. Returns that node; toONNX writes it as an initializer.
   */
  constant(tensor, options = {}) {
    const base = options?.name ?? '';
    if (typeof base !== 'string') throw typeError('constant: options.name must be a string');
    const [t] = encodeTensors([tensor], 'constant');
    const name = ck(M.gmAddConstant(this._id, base, t));
    return this.graph.getAttr(name);
  }

  getTensorData(target) {
    if (typeof target !== 'string') throw typeError('getTensorData: target must be a string');
    return ck(M.gmTensorData(this._id, target));
  }

  /**
   * The names `run(feeds)` takes: each placeholder's target, which for an imported model is the
   * ONNX graph input's name (as onnxruntime's `session.inputNames`).
   */
  get inputNames() {
    return this.graph.nodes.filter((n) => n.op === 'placeholder').map((n) => String(n.target));
  }

  /**
   * The names `run(feeds)` returns its outputs under: the ONNX graph output names of an imported
   * model (as onnxruntime's `session.outputNames`), else the returned nodes' names.
   */
  get outputNames() {
    const out = this.graph.outputNode;
    if (!out) return [];
    // (onnx.mjs's onnxMetaKeys.outputs, read from C++ here: onnx.mjs imports this module.)
    const onnx = out.meta[ck(M.onnxMetaKeys()).outputs];
    const arg = out.args[0];
    const returned = Array.isArray(arg) ? arg : [arg];
    if (Array.isArray(onnx) && onnx.length === returned.length) return onnx.map(String);
    return returned.map((a, i) => (a instanceof Node ? a.name : `output_${i}`));
  }

  /**
   * Runs the graph on fxwasm's kernels (onnx.* nodes). `inputs`: one tensor per placeholder, in
   * order, `{ data: TypedArray, shape: number[], dtype?: string }` (or onnxruntime's
   * `{ data, dims, type }`, e.g. an `ort.Tensor`); or, as onnxruntime's `session.run(feeds)`, an
   * object keyed by {@link GraphModule.inputNames}, in which case the outputs come back as an
   * object keyed by {@link GraphModule.outputNames}. `options.probe`: node names whose values to
   * return too. `options.profile: true`: also the time of every op the run executed, in order
   * (`profile: [{ node, op, ms }]`; a node fused into the op before it, such as a Relu after a
   * Conv, is timed within that op). With either option the result is `{ outputs, probes,
   * profile? }`. The run is synchronous (see runAsync).
   */
  run(inputs, options = {}) {
    const probe = options?.probe ?? [];
    if (!Array.isArray(probe) || probe.some((p) => typeof p !== 'string'))
      throw typeError('run: options.probe must be an array of node names');
    const profile = options?.profile ?? false;
    if (typeof profile !== 'boolean') throw typeError('run: options.profile must be a boolean');
    const byName = inputs !== null && typeof inputs === 'object' && !Array.isArray(inputs);
    const positional = byName ? this._feedsInOrder(inputs) : inputs;
    const r = ck(M.gmRun(this._id, encodeValues(positional, 'run'), Array.from(probe), profile));
    let outputs = Array.from(r.outputs, valueFromWasm);
    if (byName) {
      const names = this.outputNames;
      outputs = Object.fromEntries(outputs.map((v, i) => [names[i] ?? `output_${i}`, v]));
    }
    if (options?.probe === undefined && !profile) return outputs;
    const probes = Object.fromEntries(Array.from(r.probes, (p) => [p.node, valueFromWasm(p)]));
    if (!profile) return { outputs, probes };
    // (Names and times as three fields, split here; objects only where a name holds a newline.)
    const nodes = r.profile ? r.profile.map((t) => t.node) : r.profileNodes.split('\n');
    const ops = r.profile ? r.profile.map((t) => t.op) : r.profileOps.split('\n');
    const times = r.profile ? r.profile.map((t) => t.ms) : r.profileMs;
    return { outputs, probes, profile: Array.from(times, (ms, i) => Object.freeze({ node: nodes[i], op: ops[i], ms })) };
  }

  /**
   * {@link GraphModule.run}, as a Promise: it yields to the event loop first (so a page can paint
   * a "running…" state), then runs. For runs that must not block at all, run in a worker.
   */
  async runAsync(inputs, options = {}) {
    await new Promise((resolve) => setTimeout(resolve, 0));
    return this.run(inputs, options);
  }

  /** feeds keyed by input name -> the positional list, naming unknown and missing names. */
  _feedsInOrder(feeds) {
    const names = this.inputNames;
    const unknown = Object.keys(feeds).filter((k) => !names.includes(k));
    const missing = names.filter((n) => !(n in feeds));
    if (unknown.length || missing.length)
      throw new FxError(
        'ValueError',
        `run: ${[unknown.length ? `unknown input(s) ${unknown.map((k) => `'${k}'`).join(', ')}` : '', missing.length ? `missing input(s) ${missing.map((k) => `'${k}'`).join(', ')}` : '']
          .filter(Boolean)
          .join('; ')} (the model's inputs are ${names.map((k) => `'${k}'`).join(', ') || 'none'})`,
      );
    return names.map((n) => feeds[n]);
  }

  /**
   * 'tensor', 'sequence' or 'optional' for each graph input and output, from their ONNX types
   * (valueFromONNX needs it to read their test data).
   */
  valueKinds() {
    const k = ck(M.gmValueKinds(this._id));
    return { inputs: Array.from(k.inputs), outputs: Array.from(k.outputs) };
  }

  /**
   * Serializes the module as an ONNX ModelProto (onnx.* call_function nodes; names, opsets and
   * metadata of an imported model are kept). `embedExternalData`: write tensors that live in
   * external files into the model instead of referencing the files. `defaultOpset`: the opset
   * when the module records none (a graph built by hand; default 17). `opset`: the opset to
   * write (default: the module's own, raised to what fused ops need: LayerNormalization 17);
   * pinned, a newer op is written in older ops or fails naming the node. `gelu`: how a fused
   * Gelu is written: 'decomposed' (default), 'com.microsoft' (onnxruntime) or 'opset20'.
   */
  toONNX(options = {}) {
    const opset = options?.opset ?? 0;
    if (!Number.isInteger(opset) || opset < 0) throw typeError('toONNX: opset must be a positive integer');
    const gelu = options?.gelu ?? '';
    if (typeof gelu !== 'string') throw typeError("toONNX: gelu must be 'decomposed', 'com.microsoft' or 'opset20'");
    return ck(M.gmToOnnx(this._id, !!options?.embedExternalData, options?.defaultOpset ?? 0, opset, gelu));
  }

  /** Metadata of the module as a whole (an imported model's opsets, producer, doc strings...). */
  get meta() {
    return plainObject(decodeMeta(ck(M.gmMeta(this._id)), null));
  }

  /**
   * A copy of the GraphModule at attribute path `target` (the body of an imported If/Loop/Scan),
   * owned by the caller: delete() it when done.
   */
  submodule(target) {
    if (typeof target !== 'string') throw typeError('submodule: target must be a string');
    return new GraphModule(PRIVATE, ck(M.gmSubmoduleGraphModule(this._id, target)));
  }

  /**
   * A new module computing the nodes named in `outputs` from those named in `inputs` (like
   * onnx.utils.extract_model on an FX graph): the inputs become placeholders, everything between
   * is copied with the attributes it reads. Owned by the caller: delete() it when done. Throws a
   * ValueError naming an unknown name, and a GraphError naming the node that needs a value from
   * outside `inputs`.
   */
  extractSubgraph(inputs, outputs) {
    const names = (a, what) => {
      if (!Array.isArray(a)) throw typeError(`extractSubgraph: ${what} must be an array of node names or Nodes`);
      return a.map((x) => (x instanceof Node ? x.name : x));
    };
    return new GraphModule(PRIVATE, ck(M.gmExtractSubgraph(this._id, names(inputs, 'inputs'), names(outputs, 'outputs'))));
  }

  /**
   * torch.fx.passes.split_module.split_module: `callback(node)` gives each call_* node its
   * partition (an integer); each partition becomes a submodule `submod_<id>` of the returned
   * module, which calls them in order. `options.keepOriginalOrder` calls them in first-seen
   * order; `options.qualnameMap` (a Map) receives "submod_<id>.a_b" -> "a.b" for renamed
   * call_module targets. The result is owned by the caller.
   */
  splitModule(callback, options = {}) {
    if (typeof callback !== 'function') throw typeError('splitModule: callback must be a function (node) => partition');
    const qualnameMap = options?.qualnameMap;
    if (qualnameMap != null && !(qualnameMap instanceof Map)) throw typeError('splitModule: options.qualnameMap must be a Map');
    const partitions = [];
    for (const n of this.graph.nodes) {
      if (n.op === 'placeholder' || n.op === 'get_attr' || n.op === 'output') continue;
      const p = callback(n);
      if (!Number.isSafeInteger(p))
        throw typeError(`splitModule: the callback returned ${String(p)} for node '${n.name}', not an integer`);
      partitions.push([n.name, p]);
    }
    const r = ck(M.gmSplitModule(this._id, partitions, !!options?.keepOriginalOrder));
    const module = new GraphModule(PRIVATE, r.module);
    if (qualnameMap) for (const [now, old] of r.qualnameMap) qualnameMap.set(now, old);
    return module;
  }

  /**
   * torch.fx.experimental.const_fold.split_const_subgraphs (the graph surgery): pure nodes whose
   * inputs are all constant move to `constSubgraphModule` (null when there are none), which
   * computes them; `module` reads them from the attribute `attrsName`. `options.skipFoldingNode`:
   * `(node) => boolean`, nodes that stay in `module`. Both modules are owned by the caller.
   */
  splitConstSubgraphs(options = {}) {
    const skip = options?.skipFoldingNode;
    if (skip != null && typeof skip !== 'function') throw typeError('splitConstSubgraphs: skipFoldingNode must be a function (node) => boolean');
    const skipped = skip ? this.graph.nodes.filter((n) => skip(n)).map((n) => n.name) : [];
    const r = ck(M.gmSplitConstSubgraphs(this._id, skipped));
    return {
      module: new GraphModule(PRIVATE, r.module),
      constSubgraphModule: r.constSubgraphModule ? new GraphModule(PRIVATE, r.constSubgraphModule) : null,
      attrsName: r.attrsName,
    };
  }

  /**
   * The nodes that cannot run (unknown targets...), found before running, then the nodes that
   * break their ONNX op schema (see checkSchemas), which toONNX would refuse.
   */
  coverage() {
    const gaps = Array.from(ck(M.gmCoverage(this._id)), (g) => ({ node: g.node, target: g.target, reason: g.reason }));
    const seen = new Set(gaps.map((g) => g.node));
    for (const p of this.checkSchemas()) if (!seen.has(p.node)) gaps.push({ node: p.node, target: p.target, reason: p.rule });
    return gaps;
  }

  /**
   * Every onnx.* node checked against ONNX's own op schema at the module's opset (`opset`
   * overrides the default domain's), from onnx.defs: inputs are tensors or omitted and as many as
   * the schema takes, declared outputs, attribute names, types and required ones. `[]` when
   * onnx.checker's schema checks would accept the graph. Ops of other domains, ops newer than the
   * opset (fused ones, which toONNX raises the opset for) and deprecated ones are not checked.
   */
  checkSchemas(options = {}) {
    const opset = options?.opset ?? 0;
    if (!Number.isInteger(opset) || opset < 0) throw typeError('checkSchemas: opset must be a positive integer');
    return Array.from(ck(M.gmCheckSchemas(this._id, opset)), (p) => ({ node: p.node, target: p.target, rule: p.rule }));
  }

  /**
   * graph.lint() (torch.fx's checks) and then the ONNX schema checks: throws a LintError, or a
   * SchemaError naming the first node that breaks its op's schema and the rule.
   */
  lint() {
    this.graph.lint();
    const [p, ...more] = this.checkSchemas();
    if (p)
      throw new FxError('SchemaError', `node '${p.node}' (${p.target}): ${p.rule}${more.length ? ` (and ${more.length} more; checkSchemas() lists them)` : ''}`, p.node);
  }

  /**
   * ShapeProp. With inputs: runs the graph once and records meta["tensor_meta"] (shape, dtype)
   * on every node. Without: inferShapes() (no data, no run).
   */
  shapeProp(inputs) {
    if (inputs === undefined) return this.inferShapes();
    M.gmShapeProp(this._id, encodeTensors(inputs, 'shapeProp'));
    ck();
    return undefined;
  }

  /**
   * Shape inference without data (C++ `fx::exec::infer_shapes`): meta["tensor_meta"] on every
   * node whose dtype and shape follow from the inputs' declared types (or `inputShapes`) and the
   * ONNX ops' shape rules. Named sizes stay symbolic ('batch', '4*batch', 'seq + 1'); a dim that
   * depends on data is null. Untyped nodes lose any earlier tensor_meta and are listed in `gaps`.
   */
  inferShapes(options = {}) {
    if (options === null || typeof options !== 'object')
      throw new FxError('ValueError', 'inferShapes: options must be an object');
    const r = ck(M.gmInferShapes(this._id, options.inputShapes ?? null));
    return { typed: r.typed, total: r.total, gaps: Array.from(r.gaps, (g) => ({ node: g.node, target: g.target, reason: g.reason })) };
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
