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

/** The files of the threaded module, as locateFile() is asked for them. */
export const THREAD_FILES = Object.freeze({
  glue: 'fx-threads.mjs',
  wasm: 'fx-threads.wasm',
  worker: 'fx-threads.worker.js',
});

/**
 * Where a browser finds the threaded files by default: next to dist/fx.mjs, written as
 * `new URL(..., import.meta.url)` so that Vite and webpack 5 ship them as assets and rewrite the
 * URLs (the glue is then imported from its URL, not bundled: its Workers import the same file).
 */
function defaultUrl(name) {
  if (name === THREAD_FILES.glue) return new URL('../dist/fx-threads.mjs', import.meta.url).href;
  if (name === THREAD_FILES.wasm) return new URL('../dist/fx-threads.wasm', import.meta.url).href;
  return new URL('../dist/fx-threads.worker.js', import.meta.url).href;
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
export async function prepareThreaded(options, threads) {
  const moduleOptions = { fxPoolSize: threads - 1 };
  const locate = (name) => {
    if (typeof options.locateFile === 'function') {
      if (isNode) {
        const dir = new URL(/* @vite-ignore */ '../dist/', import.meta.url);
        return options.locateFile(name, decodeURIComponent(dir.pathname));
      }
      return options.locateFile(name, new URL(/* @vite-ignore */ '../dist/', import.meta.url).href);
    }
    return defaultUrl(name);
  };
  const glue = isNode ? await nodeHref(locate(THREAD_FILES.glue)) : String(locate(THREAD_FILES.glue));
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
    const wasm = String(locate(THREAD_FILES.wasm));
    let worker = String(locate(THREAD_FILES.worker));
    // Bundlers inline small assets as data: URLs (Vite: under 4 kB, as this script is); a Worker
    // from one would run in an opaque origin, so give it a same-origin blob: URL instead.
    if (worker.startsWith('data:'))
      worker = URL.createObjectURL(new Blob([await (await fetch(worker)).arrayBuffer()], { type: 'text/javascript' }));
    moduleOptions.locateFile = (name) => (name === THREAD_FILES.wasm ? wasm : name === THREAD_FILES.worker ? worker : name);
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
  const wasmPath = await fileOf(THREAD_FILES.wasm);
  const workerPath = await fileOf(THREAD_FILES.worker);
  try {
    moduleOptions.wasmBinary = await fs.promises.readFile(wasmPath);
  } catch (e) {
    throw new Error(`cannot read ${wasmPath} (${e.message})`);
  }
  const workerSource = fs.readFileSync(workerPath, 'utf8');
  moduleOptions.locateFile = (name) => (name === THREAD_FILES.worker ? workerPath : path.join(path.dirname(wasmPath), name));
  // worker_threads.Worker for the glue: fx-threads.worker.js's text, run as CommonJS. Workers
  // inherit the process's flags, and `node --input-type=module` (or a default type of module)
  // would make the text an ES module, where `require` is not defined: leave those out.
  const execArgv = [];
  for (let i = 0; i < process.execArgv.length; i++) {
    const a = process.execArgv[i];
    if (/^--(input-type|experimental-default-type)$/.test(a)) i++;
    else if (!/^--(input-type|experimental-default-type)=/.test(a)) execArgv.push(a);
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
