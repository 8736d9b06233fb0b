// wasm/init.mjs — init(): loads dist/fx.mjs + dist/fx.wasm once (memoized) and resolves to the
// API object. The loaded module goes to runtime.mjs, where every other façade module reads it.
import createFxModule from '../dist/fx.mjs';
import { FxError } from './errors.mjs';
import { M, ck, setModule, isNode, importNode } from './runtime.mjs';
import {
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
} from './codec.mjs';
import { Node, mapArg, mapAggregate } from './node.mjs';
import { Graph, InsertPoint } from './graph.mjs';
import { GraphModule } from './graph_module.mjs';
import { Interpreter, Transformer, AttributeRef } from './interpreter.mjs';
import { threadsUnavailable, relaxedSimdUnavailable, prepareThreaded, THREAD_FILES, RELAXED_FILES } from './threads.mjs';
import { passNames, passInfo, runPasses, replacePattern, matchPattern, loadPassRegistry } from './passes.mjs';
import { onnxMetaKeys, loadONNX, tensorFromONNX, tensorToONNX, valueFromONNX, loadOnnxMetaKeys } from './onnx.mjs';
import { lowerToTorch, loweringCoverage, toFolder, torchPackage } from './torch_codegen.mjs';

/** fx::set_limits: {maxTensorBytes, maxRunBytes, maxElements} (absent or 0: the default). */
function setLimits(limits) {
  if (limits === null || typeof limits !== 'object') throw new FxError('TypeError', 'setLimits: expected {maxTensorBytes, maxRunBytes, maxElements}');
  M.setLimits(limits);
  ck();
}

/**
 * Sets how many threads the kernels use, from 1 to what init({threads}) started (the threaded
 * module's Workers are fixed when it loads); returns the count they got. Results do not depend on
 * it (tests/js/threads_wasm.test.mjs).
 */
function setThreads(n) {
  if (!Number.isInteger(n) || n < 1) throw new FxError('ValueError', `setThreads(n): expected an integer >= 1, got ${String(n)}`);
  return M.setNumThreads(Math.min(n, threadInfo.build === 'threads' ? threadInfo.requested : 1));
}

/** The memoized init() promise. */
let initPromise = null;
/** The API object init() resolves to. */
let api = null;


/**
 * Where browsers fetch fx.wasm: next to dist/fx.mjs, written as `new URL(..., import.meta.url)`,
 * which Vite and webpack 5 recognise, so a bundle ships the file and rewrites the URL.
 */
function defaultWasmUrl() {
  return new URL('../dist/fx.wasm', import.meta.url).href;
}

async function readNodeWasm(options) {
  const fs = await importNode('fs/promises');
  let where = new URL('../dist/fx.wasm', import.meta.url);
  if (typeof options.locateFile === 'function') {
    const dir = new URL(/* @vite-ignore */ '../dist/', import.meta.url);
    const p = options.locateFile('fx.wasm', dir.protocol === 'file:' ? decodeURIComponent(dir.pathname) : dir.href);
    where = p instanceof URL || /^file:/.test(p) ? new URL(p) : p;
  }
  return fs.readFile(where);
}

/**
 * Calls an Emscripten factory. Under Node, the 3.1.6 loader reads __dirname (undefined in ES
 * modules) and installs process-wide uncaughtException/unhandledRejection handlers: give it the
 * first, take back the second; `lend` adds globals for the call only (threads.mjs: `require`),
 * and the threaded glue's global.Worker is taken back too.
 */
function callFactory(create, moduleOptions, lend) {
  const before = isNode
    ? { uncaughtException: process.listeners('uncaughtException'), unhandledRejection: process.listeners('unhandledRejection') }
    : {};
  // __dirname only if there is none; `lend`'s globals (and the Worker the glue sets) always.
  const defaults = isNode ? { __dirname: decodeURIComponent(new URL(/* @vite-ignore */ '../dist/', import.meta.url).pathname), Worker: undefined } : {};
  const lent = { ...defaults, ...lend };
  const saved = {};
  for (const k of Object.keys(lent)) {
    saved[k] = Object.getOwnPropertyDescriptor(globalThis, k);
    if (lent[k] !== undefined && (!saved[k] || k in lend))
      Object.defineProperty(globalThis, k, { value: lent[k], writable: true, configurable: true });
  }
  try {
    return create(moduleOptions);
  } finally {
    for (const k of Object.keys(lent)) {
      if (saved[k]) Object.defineProperty(globalThis, k, saved[k]);
      else delete globalThis[k];
    }
    for (const [event, old] of Object.entries(before))
      for (const l of process.listeners(event)) if (!old.includes(l)) process.removeListener(event, l);
  }
}

/** The single-thread module dist/fx.mjs + dist/fx.wasm. */
async function loadSingle(options) {
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
  } else {
    moduleOptions.locateFile = (name) => (name === 'fx.wasm' ? defaultWasmUrl() : name);
  }
  // What the browser fetches, for the error if it cannot.
  const wasmUrl = moduleOptions.wasmBinary ? null : moduleOptions.locateFile?.('fx.wasm', new URL(/* @vite-ignore */ '../dist/', import.meta.url).href);
  try {
    return await callFactory(createFxModule, moduleOptions, {});
  } catch (e) {
    // Emscripten's own words ("both async and sync fetching of the wasm failed") name neither
    // the URL nor the way out.
    const why = e instanceof Error ? e.message : String(e);
    throw new FxError(
      'RuntimeError',
      wasmUrl
        ? `cannot load fx.wasm from ${wasmUrl} (${why}). Serve dist/fx.wasm from the package there, or tell init() ` +
            'where it is: init({ locateFile: (name) => url }) or init({ wasmBinary: bytes })'
        : `cannot instantiate fx.wasm (${why}): is wasmBinary the package's dist/fx.wasm?`,
    );
  }
}

/**
 * A threaded module (threads.mjs: `files`, THREAD_FILES or RELAXED_FILES), with `threads` - 1
 * Workers; throws if it cannot load.
 */
async function loadThreaded(options, threads, files) {
  const { create, moduleOptions, globals, started, failure, loaded } = await prepareThreaded(options, threads, files);
  try {
    const module = await Promise.race([callFactory(create, moduleOptions, globals), failure]);
    loaded();
    return module;
  } catch (e) {
    for (const w of started) w.terminate();
    throw e;
  } finally {
    // Loaded (or dead): Workers parked in the pool must not keep a Node process alive.
    for (const w of started) w.unref?.();
  }
}

/** init({threads})'s value: undefined -> 1; otherwise an integer in [1, 256]. */
function threadsOption(t) {
  if (t === undefined || t === null) return 1;
  if (!Number.isInteger(t) || t < 1 || t > 256)
    throw new FxError('ValueError', `init({threads}): expected an integer from 1 to 256, got ${String(t)}`);
  return t;
}

/** init({relaxedSimd})'s value: undefined -> true; otherwise a boolean. */
function relaxedOption(r) {
  if (r === undefined || r === null) return true;
  if (typeof r !== 'boolean') throw new FxError('ValueError', `init({relaxedSimd}): expected a boolean, got ${String(r)}`);
  return r;
}

/**
 * What init() loaded ({build, requested, reason, simd, simdReason}); threads() adds the kernels'
 * count now.
 */
let threadInfo = null;

/** A failed load's words. */
const why = (e) => (e instanceof Error ? e.message : String(e));

async function load(options) {
  const requested = threadsOption(options.threads);
  const relaxedWanted = relaxedOption(options.relaxedSimd);
  let module = null;
  let reason = null;
  let simdReason = 'Relaxed SIMD comes with the threaded module: init({ threads: N }) with N >= 2';
  if (requested > 1) {
    reason = threadsUnavailable();
    if (reason) {
      simdReason = 'no threaded module here';
    } else {
      // The relaxed-SIMD module first where the engine has it, then the plain threaded one.
      simdReason = relaxedWanted ? relaxedSimdUnavailable() : 'init({ relaxedSimd: false })';
      if (!simdReason) {
        try {
          module = await loadThreaded(options, requested, RELAXED_FILES);
        } catch (e) {
          simdReason = `the relaxed-SIMD module did not load (${why(e)})`;
        }
      }
      if (!module) {
        try {
          module = await loadThreaded(options, requested, THREAD_FILES);
        } catch (e) {
          reason = `the threaded module did not load (${why(e)})`;
          simdReason = 'no threaded module here';
        }
      }
    }
  }
  const threaded = module !== null;
  const relaxed = threaded && !simdReason;
  if (!threaded) module = await loadSingle(options);
  setModule(module, isNode ? await importNode('fs') : null);
  loadPassRegistry();
  loadOnnxMetaKeys();
  if (options.limits != null) setLimits(options.limits);
  // The kernels' pool: the calling thread and the module's Workers (threaded module only).
  if (threaded) M.setNumThreads(requested);
  threadInfo = { build: threaded ? 'threads' : 'single', requested, reason, simd: relaxed ? 'relaxed' : 'simd128', simdReason: relaxed ? null : simdReason };
  api = Object.freeze({
    version: M.version(),
    Graph,
    GraphModule,
    Node,
    InsertPoint,
    Interpreter,
    Transformer,
    AttributeRef,
    mapArg,
    mapAggregate,
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
    matchPattern,
    passNames,
    passInfo,
    onnxMetaKeys,
    loadONNX,
    tensorFromONNX,
    tensorToONNX,
    valueFromONNX,
    lowerToTorch,
    loweringCoverage,
    toFolder,
    torchPackage,
    setLimits,
    limits: () => ck(M.getLimits()),
    heapUsed: () => M.heapUsed(),
    releaseCachedMemory: () => M.releaseCachedMemory(),
    heapSize: () => M.HEAP8.length,
    liveHandles: () => M.liveHandles(),
    // The count as the kernels report it now (setThreads, and releaseCachedMemory restarts the
    // Workers' threads).
    threads: () =>
      Object.freeze({
        build: threadInfo.build,
        threads: M.numThreads(),
        requested: threadInfo.requested,
        reason: threadInfo.reason,
        simd: threadInfo.simd,
        simdReason: threadInfo.simdReason,
      }),
    setThreads,
  });
  return api;
}

/**
 * Loads the wasm module once (memoized) and resolves to the API object. Options only matter on
 * the first call: `wasmBinary` (the bytes of fx.wasm) or `locateFile(name, dir)` (where to find
 * it; default: next to dist/fx.mjs); `threads: N` (N >= 2) loads the threaded module
 * dist/fx-threads.* instead when the environment allows it (Node; a cross-origin isolated page or
 * worker), and the single-thread one otherwise, saying why in `threads().reason`. With threads,
 * where the engine has Relaxed SIMD (Chromium, Firefox; Node under
 * --experimental-wasm-relaxed-simd), dist/fx-threads-relaxed.* (fused multiply-adds: faster, and
 * results may differ from the other modules in the last bits); `relaxedSimd: false` keeps the
 * plain one. `threads().simd` says which ('relaxed' or 'simd128'), `simdReason` why not relaxed.
 */
export function init(options = {}) {
  if (!initPromise) {
    firstOptions = options ?? {};
    initPromise = load(firstOptions).catch((e) => {
      initPromise = null;
      throw e;
    });
  } else if (!sameOptions(firstOptions, options ?? {})) {
    // Silently ignoring them would run with other limits or another wasm than asked for.
    return Promise.reject(
      new FxError('ValueError', 'init(options): fxwasm is already initialised with other options; they apply only on the ' +
        'first init() (call init() without options to get the API, and setLimits() to change limits)'),
    );
  }
  return initPromise;
}

let firstOptions = null;

/**
 * Whether a later init()'s options ask for nothing different: none given, or the same values. A
 * function counts as the same when its source is (a fresh `() => url` closure per call is
 * common); wasm bytes when their size is; limits when they are equal.
 */
function sameOptions(first, later) {
  const keys = Object.keys(later).filter((k) => later[k] !== undefined);
  return keys.every((k) => {
    const a = first[k];
    const b = later[k];
    if (a === b) return true;
    if (k === 'limits') return JSON.stringify(a ?? null) === JSON.stringify(b);
    if (typeof a === 'function' && typeof b === 'function') return String(a) === String(b);
    if (a != null && b != null && a.byteLength !== undefined) return a.byteLength === b.byteLength;
    return false;
  });
}

export default init;
