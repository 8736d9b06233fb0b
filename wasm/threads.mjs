// wasm/threads.mjs — the threaded module (dist/fx-threads.mjs + .wasm + .worker.js, built with
// -pthread): whether this environment can run it, and how to load it. init.mjs calls these for
// init({ threads: N }) with N >= 2 and falls back to dist/fx.mjs when they say no.
//
// The module's Workers all start inside its factory call (PTHREAD_POOL_SIZE=Module.fxPoolSize,
// N - 1 of them: the calling thread is the kernels' first), and the factory resolves once each
// has loaded the wasm, so no thread ever waits for a Worker to start later.
//
// Under Node, Debian's emscripten 3.1.6 glue assumes CommonJS: its Node branch calls
// require('worker_threads') when the factory runs, sets global.Worker, and starts each Worker
// from fx-threads.worker.js, a CommonJS script (a `.js` file that Node would read as an ES module
// in this "type": "module" package). So for the factory call only, init() lends it a `require`
// whose worker_threads.Worker runs that script's text as CommonJS (eval), and takes back the
// globals afterwards; the Workers are unref()'d once loaded so they never keep a process alive.
import { isNode, importNode } from './runtime.mjs';

/**
 * A threaded module's files, named `${base}.mjs`, `.wasm` and `.worker.js` as locateFile() is
 * asked for them, and `url(name)`: where a browser finds them by default, next to dist/fx.mjs.
 * Each default is its own `new URL('<literal>', import.meta.url)` (the three functions), so that
 * Vite and webpack 5 ship the files as assets and rewrite the URLs (the glue is then imported
 * from its URL, not bundled: its Workers import the same file).
 */
function moduleFiles(base, glueUrl, wasmUrl, workerUrl) {
  const glue = `${base}.mjs`;
  const wasm = `${base}.wasm`;
  const worker = `${base}.worker.js`;
  const url = (name) => (name === glue ? glueUrl() : name === wasm ? wasmUrl() : workerUrl()).href;
  return Object.freeze({ glue, wasm, worker, url });
}

/** The threaded module. */
export const THREAD_FILES = moduleFiles(
  'fx-threads',
  () => new URL('../dist/fx-threads.mjs', import.meta.url),
  () => new URL('../dist/fx-threads.wasm', import.meta.url),
  () => new URL('../dist/fx-threads.worker.js', import.meta.url),
);

/**
 * The same module with Relaxed SIMD (build/wasm-threads, its GEMM micro-kernel by clang 16 with
 * -mrelaxed-simd): the kernels' multiply-adds are f32x4.relaxed_madd, fused on CPUs with FMA. Loaded instead of THREAD_FILES
 * where the engine validates relaxed SIMD (relaxedSimdUnavailable).
 */
export const RELAXED_FILES = moduleFiles(
  'fx-threads-relaxed',
  () => new URL('../dist/fx-threads-relaxed.mjs', import.meta.url),
  () => new URL('../dist/fx-threads-relaxed.wasm', import.meta.url),
  () => new URL('../dist/fx-threads-relaxed.worker.js', import.meta.url),
);

/**
 * A module of one function whose body is f32x4.relaxed_madd over three v128.const zeros (type
 * () -> v128): what an engine without Relaxed SIMD rejects.
 */
const RELAXED_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // types: () -> v128
  0x03, 0x02, 0x01, 0x00, // functions: one of type 0
  0x0a, 0x3d, 0x01, 0x3b, 0x00, // code: one body of 59 bytes, no locals
  ...[0, 1, 2].flatMap(() => [0xfd, 0x0c, ...new Array(16).fill(0)]), // v128.const 0, three times
  0xfd, 0x85, 0x02, // f32x4.relaxed_madd
  0x0b, // end
]);

/**
 * Why the relaxed-SIMD module is not for this engine, or null when it is: WebAssembly.validate of
 * a relaxed_madd (Chromium >= 114 and Firefox >= 120 have it; Node 20 only under
 * --experimental-wasm-relaxed-simd).
 */
export function relaxedSimdUnavailable() {
  try {
    if (WebAssembly.validate(RELAXED_PROBE)) return null;
  } catch {
    // validate() throws only for a non-buffer argument; fall through.
  }
  return 'this WebAssembly engine has no Relaxed SIMD (f32x4.relaxed_madd does not validate)';
}

/**
 * Why this environment cannot run the threaded module, or null when it can: Node with
 * SharedArrayBuffer and shared WebAssembly memory; a page or worker only when crossOriginIsolated
 * (served with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy:
 * require-corp), which is what makes browsers expose SharedArrayBuffer.
 */
export function threadsUnavailable() {
  if (!isNode) {
    if (globalThis.crossOriginIsolated !== true)
      return 'the page is not cross-origin isolated (crossOriginIsolated is not true): serve it with the headers ' +
        'Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp to use threads';
    if (typeof Worker === 'undefined') return 'this context cannot start Web Workers (no Worker constructor)';
  }
  if (typeof SharedArrayBuffer === 'undefined') return 'SharedArrayBuffer is not available';
  try {
    new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
  } catch (e) {
    return `this WebAssembly engine has no shared memory (${e.message})`;
  }
  return null;
}

/** A path, file: URL or URL string from locateFile -> an absolute URL string for import(). */
async function nodeHref(p) {
  if (p instanceof URL) return p.href;
  if (/^[a-z][a-z0-9+.-]*:/i.test(p) && !/^[a-z]:[\\/]/i.test(p)) return p;
  const url = await importNode('url');
  return url.pathToFileURL(p).href;
}

/**
 * Imports the threaded glue and returns { create, moduleOptions, globals, started, failure,
 * loaded }: the factory, the options to call it with, the globals to lend for the call (Node:
 * `require`; a browser: a Worker that reports load errors), the Workers it made, a promise that
 * rejects when one of them fails while loading, and what to call once the module has loaded.
 */
export async function prepareThreaded(options, threads, files = THREAD_FILES) {
  const moduleOptions = { fxPoolSize: threads - 1 };
  const locate = (name) => {
    if (typeof options.locateFile === 'function') {
      if (isNode) {
        const dir = new URL(/* @vite-ignore */ '../dist/', import.meta.url);
        return options.locateFile(name, decodeURIComponent(dir.pathname));
      }
      return options.locateFile(name, new URL(/* @vite-ignore */ '../dist/', import.meta.url).href);
    }
    return files.url(name);
  };
  const glue = isNode ? await nodeHref(locate(files.glue)) : String(locate(files.glue));
  let create;
  try {
    ({ default: create } = await import(/* webpackIgnore: true */ /* @vite-ignore */ glue));
  } catch (e) {
    throw new Error(`cannot import ${glue} (${e.message})`);
  }
  // Each Worker imports the glue itself, from this URL (EXPORT_ES6 glue has no script URL of
  // its own to give them).
  moduleOptions.mainScriptUrlOrBlob = glue;
  const started = [];
  // A Worker that fails to load would leave the factory waiting for it forever: report it.
  let failed;
  const failure = new Promise((_, reject) => (failed = reject));
  failure.catch(() => {});
  let loading = true;
  const watch = (w) => {
    started.push(w);
    const onError = (e) => failed(new Error(`a Worker of the threaded module failed: ${e?.message ?? e}`));
    if (typeof w.on === 'function') w.on('error', onError);
    else w.addEventListener('error', onError);
    // The glue's own handler (worker.onerror) rethrows the error, which under Node ends the
    // process: while loading, the failure goes to init() instead, which falls back.
    let glueHandler = null;
    Object.defineProperty(w, 'onerror', {
      configurable: true,
      get: () => (e) => (loading ? undefined : glueHandler?.(e)),
      set: (f) => (glueHandler = f),
    });
  };
  /** Called by init() once the module has loaded: Worker errors go to the glue again. */
  const loaded = () => (loading = false);
  if (!isNode) {
    const wasm = String(locate(files.wasm));
    let worker = String(locate(files.worker));
    // Bundlers inline small assets as data: URLs (Vite: under 4 kB, as this script is); a Worker
    // from one would run in an opaque origin, so give it a same-origin blob: URL instead.
    if (worker.startsWith('data:'))
      worker = URL.createObjectURL(new Blob([await (await fetch(worker)).arrayBuffer()], { type: 'text/javascript' }));
    moduleOptions.locateFile = (name) => (name === files.wasm ? wasm : name === files.worker ? worker : name);
    const PageWorker = globalThis.Worker;
    class WatchedWorker extends PageWorker {
      constructor(url, options) {
        super(url, options);
        watch(this);
      }
    }
    return { create, moduleOptions, globals: { Worker: WatchedWorker }, started, failure, loaded };
  }
  const [fs, path, wt, mod] = await Promise.all([importNode('fs'), importNode('path'), importNode('worker_threads'), importNode('module')]);
  const fileOf = async (name) => {
    const p = locate(name);
    return p instanceof URL || /^file:/.test(p) ? (await importNode('url')).fileURLToPath(p) : String(p);
  };
  const wasmPath = await fileOf(files.wasm);
  const workerPath = await fileOf(files.worker);
  try {
    moduleOptions.wasmBinary = await fs.promises.readFile(wasmPath);
  } catch (e) {
    throw new Error(`cannot read ${wasmPath} (${e.message})`);
  }
  const workerSource = fs.readFileSync(workerPath, 'utf8');
  moduleOptions.locateFile = (name) => (name === files.worker ? workerPath : path.join(path.dirname(wasmPath), name));
  // worker_threads.Worker for the glue: fx-threads.worker.js's text, run as CommonJS. Workers
  // inherit the process's flags, and `node --input-type=module` (or a default type of module)
  // would make the text an ES module, where `require` is not defined: leave those out. V8's
  // WebAssembly flags (--experimental-wasm-relaxed-simd) are the process's, Workers included,
  // and a Worker's execArgv may not name them (ERR_WORKER_INVALID_EXEC_ARGV): leave them out too.
  const execArgv = [];
  for (let i = 0; i < process.execArgv.length; i++) {
    const a = process.execArgv[i];
    if (/^--(input-type|experimental-default-type)$/.test(a)) i++;
    else if (!/^--(input-type|experimental-default-type)=/.test(a) && !/^--(no-)?(experimental-)?wasm[-_]/.test(a)) execArgv.push(a);
  }
  class GlueWorker extends wt.Worker {
    constructor() {
      super(workerSource, { eval: true, execArgv });
      watch(this);
    }
  }
  const nodeRequire = mod.createRequire(import.meta.url);
  const lentRequire = (name) => (name === 'worker_threads' ? { ...wt, Worker: GlueWorker } : nodeRequire(name));
  return { create, moduleOptions, globals: { require: lentRequire }, started, failure, loaded };
}
