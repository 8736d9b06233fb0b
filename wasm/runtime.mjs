// wasm/runtime.mjs — the module-level state every façade module shares, in one place so that no
// module holds a copy: the loaded Embind module `M` (set once by init.mjs), the checks run after
// each call into it (the pending-error slot of wasm/handles.h), and the JS side of the handle
// tables (live Graph wrappers, the FinalizationRegistry safety net).
import { FxError } from './errors.mjs';

/** The loaded Embind module (null until init() resolves). Read it as a live import binding. */
export let M = null;
/** node:fs, loaded by init() under Node (sync reads of external data); null elsewhere. */
export let nodeFs = null;

/** Called once by init.mjs when the module has loaded. */
export function setModule(module, fs) {
  M = module;
  // What wasm/exec.cpp's tensor_to_js calls: copies of a shape and a bytes view of the heap.
  M.fxRawTensor = (dtype, shape, bytes) => ({ dtype, shape: Array.from(shape), bytes: bytes.slice() });
  // ... and what it copies a run's inputs (and shapes) into the heap with.
  M.fxCopyInto = (view, source) => view.set(source);
  nodeFs = fs;
}

/** Passed by the façade to constructors that JS users must not call directly. */
export const PRIVATE = Symbol('fxwasm.private');
/** Brands Node handles, so the codec recognises them without importing node.mjs (which imports it). */
export const NODE_HANDLE = Symbol('fxwasm.node');
export const disposeSymbol = Symbol.dispose ?? Symbol.for('Symbol.dispose');
export const inspectSymbol = Symbol.for('nodejs.util.inspect.custom');

export const isNode =
  typeof process === 'object' &&
  typeof process.versions === 'object' &&
  typeof process.versions.node === 'string';

/** Throws the pending error as an FxError. */
export function raise() {
  const e = M.takeError();
  throw new FxError(e.kind, e.message, e.node);
}

/** Returns `r` unless the call that produced it left a pending error, which is thrown. */
export function ck(r) {
  if (M.errPending()) raise();
  return r;
}

/** For functions returning a node id: 0 means the call failed (ids start at 1). */
export function ckId(id) {
  if (id === 0) raise();
  return id;
}

export function requireModule() {
  if (!M) throw new FxError('RuntimeError', 'fxwasm is not initialised yet: call `await init()` first');
}

// ---------------------------------------------------------------------------------------------
// Ownership: explicit delete() plus a FinalizationRegistry safety net
// ---------------------------------------------------------------------------------------------

/** gid -> WeakRef<Graph>: lets decoded values find the JS wrapper of a graph. */
export const liveGraphs = new Map();

export const finalizer = new FinalizationRegistry(({ kind, id }) => {
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

/**
 * Node's built-in modules, imported by a specifier bundlers do not follow: a browser bundle of the
 * package then contains no `node:` import at all (this code only runs under Node).
 */
export function importNode(name) {
  const specifier = ['node', name].join(':');
  return import(/* webpackIgnore: true */ /* @vite-ignore */ specifier);
}
