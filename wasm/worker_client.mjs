// wasm/worker_client.mjs — createWorker(): fxwasm in a worker (a Web Worker in browsers, a worker
// thread under Node) behind promises, so a page stays responsive while a model imports, runs or
// goes through passes. The worker (wasm/worker.mjs) owns its own wasm instance and the models.
import { FxError, typeError } from './errors.mjs';
import { isNode, importNode } from './runtime.mjs';
import { reviveValue } from './tensors.mjs';

/** A model loaded in a worker: the GraphModule's asynchronous mirror. */
export class WorkerModel {
  constructor(worker, info) {
    this.worker = worker;
    this.id = info.id;
    /** As GraphModule.inputNames / outputNames. */
    this.inputNames = info.inputNames;
    this.outputNames = info.outputNames;
  }
  /** GraphModule.run in the worker (positional inputs or feeds by name); the outputs' buffers are transferred back. */
  async run(inputs, options) {
    const r = await this.worker._call('run', [this.id, inputs, options]);
    if (Array.isArray(r)) return r.map(reviveValue);
    if (r && Array.isArray(r.outputs)) {
      const probes = Object.fromEntries(Object.entries(r.probes).map(([k, v]) => [k, reviveValue(v)]));
      return r.profile ? { outputs: r.outputs.map(reviveValue), probes, profile: r.profile } : { outputs: r.outputs.map(reviveValue), probes };
    }
    return Object.fromEntries(Object.entries(r).map(([k, v]) => [k, reviveValue(v)]));
  }
  /** runPasses with registered pass names (JS functions cannot cross into the worker). */
  runPasses(names, options) {
    if (!Array.isArray(names) || names.some((n) => typeof n !== 'string')) throw typeError('WorkerModel.runPasses: names must be pass names (JS passes cannot cross into a worker)');
    return this.worker._call('runPasses', [this.id, names, options]);
  }
  code() {
    return this.worker._call('code', [this.id]);
  }
  print() {
    return this.worker._call('print', [this.id]);
  }
  coverage() {
    return this.worker._call('coverage', [this.id]);
  }
  checkSchemas(options) {
    return this.worker._call('checkSchemas', [this.id, options]);
  }
  toONNX(options) {
    return this.worker._call('toONNX', [this.id, options]);
  }
  /** graph.toJSON() of the model. */
  toJSON() {
    return this.worker._call('toJSON', [this.id]);
  }
  /** torchPackage(lowerToTorch(model), name): the zip of a Python package. */
  torchPackage(name) {
    return this.worker._call('torchPackage', [this.id, name]);
  }
  delete() {
    return this.worker._call('delete', [this.id]);
  }
}

/** The handle createWorker() resolves to. */
export class FxWorker {
  constructor(token, w) {
    if (token !== TOKEN) throw typeError('FxWorker: use createWorker()');
    this._w = w;
    this._pending = new Map();
    this._next = 1;
    this._dead = null;
    this.version = '';
  }
  _onMessage({ id, ok, result, error }) {
    const p = this._pending.get(id);
    if (!p) return;
    this._pending.delete(id);
    if (this._pending.size === 0) this._w.unref?.(); // idle: does not keep Node alive
    if (ok) p.resolve(result);
    else p.reject(new FxError(error.kind, error.message, error.node || undefined));
  }
  _onError(e) {
    this._dead = new FxError('RuntimeError', `the fxwasm worker failed: ${e?.message ?? e}`);
    for (const p of this._pending.values()) p.reject(this._dead);
    this._pending.clear();
  }
  _call(method, args, transfer = []) {
    if (this._dead) return Promise.reject(this._dead);
    return new Promise((resolve, reject) => {
      const id = this._next++;
      this._pending.set(id, { resolve, reject });
      this._w.ref?.(); // a pending call keeps Node alive until its reply
      try {
        this._w.postMessage({ id, method, args }, transfer);
      } catch (e) {
        this._pending.delete(id);
        reject(new FxError('TypeError', `${method}: ${e.message} (arguments must be structured-clonable)`));
      }
    });
  }
  /**
   * loadONNX in the worker: bytes (copied), a path (Node) or URL, a Blob/File. Resolves to a
   * {@link WorkerModel}.
   */
  async loadONNX(source, options) {
    return new WorkerModel(this, await this._call('loadONNX', [source, options]));
  }
  /** Stops the worker and its wasm instance; pending calls reject. */
  async terminate() {
    this._onError(new Error('terminated'));
    await this._w.terminate();
  }
}

const TOKEN = Symbol('fxwasm.worker');

/**
 * Starts fxwasm in a worker and resolves to an {@link FxWorker} once its wasm instance is ready.
 * `options` are init()'s, minus functions (they cannot cross): `{ wasmBinary, limits }`. In
 * browsers the worker is `new Worker(new URL('./worker.mjs', import.meta.url), { type: 'module' })`,
 * which Vite and webpack bundle as a worker chunk.
 */
export async function createWorker(options = {}) {
  if (options && Object.values(options).some((v) => typeof v === 'function'))
    throw typeError('createWorker: options cannot hold functions (locateFile); pass wasmBinary instead');
  let w;
  let fw;
  if (isNode) {
    const { Worker } = await importNode('worker_threads');
    // The worker inherits Node's flags, except --input-type (only valid for -e/stdin scripts).
    const execArgv = process.execArgv.filter((a) => !a.startsWith('--input-type'));
    w = new Worker(new URL('./worker.mjs', import.meta.url), { execArgv });
    fw = new FxWorker(TOKEN, w);
    w.on('message', (m) => fw._onMessage(m));
    w.on('error', (e) => fw._onError(e));
  } else {
    w = new Worker(new URL('./worker.mjs', import.meta.url), { type: 'module' });
    fw = new FxWorker(TOKEN, w);
    w.onmessage = (e) => fw._onMessage(e.data);
    w.onerror = (e) => fw._onError(e);
  }
  const { version } = await fw._call('init', [options ?? {}]);
  fw.version = version;
  return fw;
}
