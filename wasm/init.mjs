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
import { passNames, passInfo, runPasses, replacePattern, matchPattern, loadPassRegistry } from './passes.mjs';
import { onnxMetaKeys, loadONNX, tensorFromONNX, tensorToONNX, valueFromONNX, loadOnnxMetaKeys } from './onnx.mjs';
import { lowerToTorch, loweringCoverage, toFolder, torchPackage } from './torch_codegen.mjs';

/** fx::set_limits: {maxTensorBytes, maxRunBytes, maxElements} (absent or 0: the default). */
function setLimits(limits) {
  if (limits === null || typeof limits !== 'object') throw new FxError('TypeError', 'setLimits: expected {maxTensorBytes, maxRunBytes, maxElements}');
  M.setLimits(limits);
  ck();
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
  } else {
    moduleOptions.locateFile = (name) => (name === 'fx.wasm' ? defaultWasmUrl() : name);
  }
  // What the browser fetches, for the error if it cannot.
  const wasmUrl = moduleOptions.wasmBinary ? null : moduleOptions.locateFile?.('fx.wasm', new URL(/* @vite-ignore */ '../dist/', import.meta.url).href);
  let pending;
  if (isNode) {
    // The 3.1.6 loader reads __dirname (undefined in ES modules) and installs process-wide
    // uncaughtException/unhandledRejection handlers; give it the first, take back the second.
    const before = {
      uncaughtException: process.listeners('uncaughtException'),
      unhandledRejection: process.listeners('unhandledRejection'),
    };
    const hadDirname = Object.prototype.hasOwnProperty.call(globalThis, '__dirname');
    if (!hadDirname) globalThis.__dirname = decodeURIComponent(new URL(/* @vite-ignore */ '../dist/', import.meta.url).pathname);
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
  let module;
  try {
    module = await pending;
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
  setModule(module, isNode ? await importNode('fs') : null);
  loadPassRegistry();
  loadOnnxMetaKeys();
  if (options.limits != null) setLimits(options.limits);
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
