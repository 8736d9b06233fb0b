// wasm/interpreter.mjs — Interpreter and Transformer (torch.fx.Interpreter / torch.fx.Transformer)
// in JS: a node-by-node walk whose per-opcode methods a subclass overrides. The Interpreter runs
// call_function nodes of ONNX ops on fxwasm's kernels, one op at a time (gmCallOp); the
// Transformer builds a new graph from what those methods return.
import { FxError, typeError } from './errors.mjs';
import { M, ck } from './runtime.mjs';
import { FxTuple, encArgs, encKwargs } from './codec.mjs';
import { Node, mapArg } from './node.mjs';
import { Graph } from './graph.mjs';
import { GraphModule } from './graph_module.mjs';
import { encodeValues, valueFromWasm } from './tensors.mjs';
import { onnxMetaKeys } from './onnx.mjs';

/**
 * What the Interpreter's getAttr gives for a module attribute: a reference to it, so weights
 * stay in wasm memory when they only go into the next op. `tensor()` copies a parameter or
 * buffer out as `{data, shape, dtype}`.
 */
export class AttributeRef {
  constructor(module, target) {
    this.module = module;
    this.target = target;
  }
  tensor() {
    const info = [...this.module.namedParameters(), ...this.module.namedBuffers()].find(([n]) => n === this.target)?.[1];
    if (!info) throw new FxError('AttributeError', `'${this.target}' is not a parameter or buffer of the module`);
    const bytes = this.module.getTensorData(this.target);
    return valueFromWasm({ dtype: info.dtype, shape: info.shape, bytes: bytes ?? new Uint8Array(0) });
  }
}

const isTensor = (v) =>
  v !== null && typeof v === 'object' && (ArrayBuffer.isView(v.data) || Array.isArray(v.data)) && (Array.isArray(v.shape) || Array.isArray(v.dims));
// A sequence value (what run() gives for an ONNX sequence): a plain array of tensors.
const isSequence = (v) => Array.isArray(v) && !(v instanceof FxTuple) && v.length > 0 && v.every(isTensor);

/** How many values a node produces: its ONNX outputs, else one past its largest getitem index. */
function outputsOf(node) {
  const names = node.getMeta(onnxMetaKeys.outputs);
  if (Array.isArray(names) && names.length > 1) return names.length;
  let n = 1;
  for (const u of node.users)
    if (u.op === 'call_function' && u.target === 'operator.getitem' && Number.isInteger(u.args[1])) n = Math.max(n, u.args[1] + 1);
  return n;
}

/**
 * torch.fx.Interpreter: `run(...inputs)` walks the graph in order; `runNode(n)` fetches the
 * node's argument values from `env` and calls the method of its opcode (`placeholder`,
 * `getAttr`, `callFunction`, `callMethod`, `callModule`, `output`) with (target, args, kwargs).
 * Override any of them in a subclass. call_function nodes of `onnx.*` targets run on fxwasm's
 * kernels (one call per node, so slower than `gm.run`, which plans and fuses); values are
 * tensors `{data, shape, dtype}`, arrays of tensors (sequences), null (an empty optional), or
 * an FxTuple of them for a node with several outputs.
 */
export class Interpreter {
  constructor(module, options = {}) {
    if (!(module instanceof GraphModule)) throw typeError('Interpreter: expected a GraphModule');
    this.module = module;
    this.graph = module.graph;
    this.garbageCollectValues = options?.garbageCollectValues ?? true;
    /** Node -> its value, during run(). */
    this.env = new Map();
    /** The node runNode is running. */
    this.currentNode = null;
    this._args = null;
  }

  /** Runs the graph on `inputs` (one per placeholder) and returns what the output node returns. */
  run(...inputs) {
    this.env = new Map();
    this._args = inputs[Symbol.iterator]();
    const nodes = this.graph.nodes;
    // Values are dropped after their last use (torch's user_to_last_uses).
    const lastUses = new Map();
    if (this.garbageCollectValues) {
      const seen = new Set();
      for (let i = nodes.length - 1; i >= 0; i--)
        for (const input of nodes[i].allInputNodes)
          if (!seen.has(input.id)) {
            seen.add(input.id);
            if (!lastUses.has(nodes[i].id)) lastUses.set(nodes[i].id, []);
            lastUses.get(nodes[i].id).push(input);
          }
    }
    try {
      for (const node of nodes) {
        if (this.env.has(node)) continue;
        this.currentNode = node;
        let value;
        try {
          value = this.runNode(node);
        } catch (e) {
          if (e instanceof FxError && !e.message.includes(`'${node.name}'`)) e.message = `While executing node '${node.name}': ${e.message}`;
          throw e;
        }
        this.env.set(node, value);
        for (const dead of lastUses.get(node.id) ?? []) this.env.delete(dead);
        if (node.op === 'output') return value;
      }
      return undefined;
    } finally {
      this.currentNode = null;
      this._args = null;
    }
  }

  /** Runs one node: its argument values from `env`, then the method of its opcode. */
  runNode(n) {
    const [args, kwargs] = this.fetchArgsKwargsFromEnv(n);
    switch (n.op) {
      case 'placeholder':
        return this.placeholder(n.target, args, kwargs);
      case 'get_attr':
        return this.getAttr(n.target, args, kwargs);
      case 'call_function':
        return this.callFunction(n.target, args, kwargs);
      case 'call_method':
        return this.callMethod(n.target, args, kwargs);
      case 'call_module':
        return this.callModule(n.target, args, kwargs);
      case 'output':
        return this.output(n.target, args, kwargs);
      default:
        throw new FxError('RuntimeError', `unknown opcode ${n.op}`);
    }
  }

  /** The next input of run(), or the placeholder's default value. */
  placeholder(target, args) {
    const next = this._args?.next();
    if (next && !next.done) return next.value;
    if (args.length > 0) return args[0];
    throw new FxError('RuntimeError', `Expected positional argument for parameter ${target}, but one was not passed in!`);
  }

  getAttr(target) {
    return this.fetchAttr(target);
  }

  /** An {@link AttributeRef} to the module attribute at `target`. */
  fetchAttr(target) {
    return new AttributeRef(this.module, target);
  }

  /**
   * operator.getitem picks from a multi-output value or a sequence; any other target runs as an
   * op of the executor (an `onnx.*` target, with the current node's meta: its output names,
   * captures and domain).
   */
  callFunction(target, args, kwargs) {
    if (target === 'operator.getitem') {
      const [v, i] = args;
      if (!Array.isArray(v)) throw new FxError('TypeError', 'operator.getitem: the value is not a tuple or sequence');
      if (!Number.isInteger(i) || i < -v.length || i >= v.length) throw new FxError('IndexError', `operator.getitem: index ${i} out of range`);
      return v[i < 0 ? i + v.length : i];
    }
    return this._callOp(target, args, kwargs);
  }

  callMethod(target) {
    throw new FxError('NotImplementedError', `call_method '${target}': fxwasm's kernels run call_function nodes; override callMethod to run it`);
  }

  callModule(target) {
    throw new FxError('NotImplementedError', `call_module '${target}': fxwasm's kernels run call_function nodes; override callModule to run it`);
  }

  output(target, args) {
    return args[0];
  }

  /** [args, kwargs] of node `n` with every Node replaced by its value in `env`. */
  fetchArgsKwargsFromEnv(n) {
    return [this.mapNodesToValues(n.args, n), this.mapNodesToValues(n.kwargs, n)];
  }

  mapNodesToValues(args, n) {
    return mapArg(args, (x) => {
      if (!this.env.has(x)) throw new FxError('RuntimeError', `Node ${n.name} referenced nonexistent value ${x.name}! Run Graph.lint() to diagnose such issues`);
      return this.env.get(x);
    });
  }

  _callOp(target, args, kwargs) {
    const g = new Graph();
    try {
      const inputs = [];
      const toGraph = (v, depth) => {
        if (depth > 64) throw new FxError('ValueError', 'callFunction: value nested too deeply');
        if (isTensor(v) || isSequence(v) || (v !== null && typeof v === 'object' && Array.isArray(v.sequence))) {
          inputs.push(v);
          return g.placeholder(`input_${inputs.length - 1}`);
        }
        if (v instanceof AttributeRef) return g.getAttr(v.target);
        if (v instanceof FxTuple) return FxTuple.from(v, (e) => toGraph(e, depth + 1));
        if (Array.isArray(v)) return v.map((e) => toGraph(e, depth + 1));
        if (v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype)
          return Object.fromEntries(Object.entries(v).map(([k, e]) => [k, toGraph(e, depth + 1)]));
        return v;
      };
      const a = Array.from(args ?? [], (e) => toGraph(e, 1));
      const k = toGraph({ ...(kwargs ?? {}) }, 0);
      const cur = this.currentNode;
      const nOut = cur && cur.op === 'call_function' ? outputsOf(cur) : 1;
      const r = ck(
        M.gmCallOp(this.module._id, g._gid, target, encArgs(a), encKwargs(k), encodeValues(inputs, 'callFunction'), nOut, cur ? cur.graph._gid : -1, cur ? cur.id : 0),
      );
      const values = Array.from(r, valueFromWasm);
      return nOut === 1 ? values[0] : FxTuple.from(values);
    } finally {
      g.delete();
    }
  }
}

/**
 * torch.fx.Transformer: an Interpreter whose methods build a new graph instead of computing:
 * each returns the new graph's Node for the old one (keeping its name where it can, and its
 * meta). `transform()` gives a new GraphModule over the same attributes (owned by the caller).
 * Override `callFunction` (etc.) to emit something else, calling `super.callFunction` with the
 * new target, args and kwargs.
 */
export class Transformer extends Interpreter {
  constructor(module) {
    super(module, { garbageCollectValues: false });
    this.newGraph = new Graph();
  }

  _copyMeta(node) {
    const cur = this.currentNode;
    if (!cur || !(node instanceof Node)) return node;
    for (const [k, v] of Object.entries(cur.meta)) if (node.getMeta(k) === undefined) node.setMeta(k, v);
    return node;
  }

  placeholder(target, args) {
    const n = this.newGraph.placeholder(target, args.length > 0 ? { defaultValue: args[0] } : {});
    return this._copyMeta(n);
  }

  getAttr(target) {
    return this._copyMeta(this.newGraph.getAttr(target));
  }

  callFunction(target, args, kwargs) {
    return this._copyMeta(this.newGraph.callFunction(target, args, kwargs));
  }

  callMethod(target, args, kwargs) {
    return this._copyMeta(this.newGraph.callMethod(target, args, kwargs));
  }

  callModule(target, args, kwargs) {
    return this._copyMeta(this.newGraph.callModule(target, args, kwargs));
  }

  output(target, args) {
    const out = this.newGraph.output(args[0]);
    return this._copyMeta(out);
  }

  /** Builds the new graph and wraps it in a GraphModule over the original's attributes and meta. */
  transform() {
    this.run();
    return new GraphModule(this.newGraph, { root: this.module, className: this.module.className });
  }
}
