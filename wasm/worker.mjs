// wasm/worker.mjs — the worker side of createWorker() (wasm/worker_client.mjs): a Web Worker or a
// Node worker thread that owns its own wasm instance and the models loaded into it, so imports,
// passes and runs never block the page. Requests {id, method, args}; replies {id, ok, result} or
// {id, ok: false, error: {kind, message, node}}. Output tensors' buffers are transferred.
import { init } from './init.mjs';
import { isNode, importNode } from './runtime.mjs';

let fx = null;
const models = new Map();
let nextModel = 1;

function model(id) {
  const gm = models.get(id);
  if (!gm) throw Object.assign(new Error(`no model ${id} in this worker (deleted?)`), { kind: 'StaleHandleError' });
  return gm;
}

function describe(id, gm) {
  return { id, inputNames: gm.inputNames, outputNames: gm.outputNames };
}

const methods = {
  async init(options) {
    fx = await init(options ?? {});
    return { version: fx.version };
  },
  async loadONNX(source, options) {
    const gm = await fx.loadONNX(source, options ?? {});
    const id = nextModel++;
    models.set(id, gm);
    return describe(id, gm);
  },
  run: (id, inputs, options) => model(id).run(inputs, options ?? {}),
  runPasses: (id, names, options) => fx.runPasses(model(id), names, options ?? {}),
  code: (id) => model(id).code,
  print: (id) => model(id).graph.print(),
  coverage: (id) => model(id).coverage(),
  checkSchemas: (id, options) => model(id).checkSchemas(options ?? {}),
  toONNX: (id, options) => model(id).toONNX(options ?? {}),
  toJSON: (id) => model(id).graph.toJSON(),
  torchPackage: (id, name) => fx.torchPackage(fx.lowerToTorch(model(id)), name),
  delete(id) {
    const gm = models.get(id);
    if (gm) gm.delete();
    return models.delete(id);
  },
};

/** ArrayBuffers of typed arrays in `v` (outputs), to transfer rather than copy. */
function buffers(v, out = new Set(), depth = 0) {
  if (depth > 8 || v === null || typeof v !== 'object') return out;
  if (ArrayBuffer.isView(v)) out.add(v.buffer);
  else if (v instanceof ArrayBuffer) out.add(v);
  else for (const x of Array.isArray(v) ? v : Object.values(v)) buffers(x, out, depth + 1);
  return out;
}

// (No top-level await: bundlers build workers as classic scripts by default, e.g. Vite's iife.)
let port = null;

async function onMessage({ id, method, args }) {
  try {
    if (!Object.hasOwn(methods, method)) throw Object.assign(new Error(`unknown worker method '${method}'`), { kind: 'ValueError' });
    if (method !== 'init' && !fx) throw Object.assign(new Error('the worker is not initialised'), { kind: 'RuntimeError' });
    const result = await methods[method](...(args ?? []));
    // Plain data only: an output tensor's class does not cross (the client revives it).
    const plain = result instanceof Uint8Array ? result : JSON.parse(JSON.stringify(result ?? null, (k, x) => (typeof x === 'bigint' ? x.toString() : x))) ?? null;
    const value = ['run', 'toONNX', 'torchPackage'].includes(method) ? result : plain;
    port.postMessage({ id, ok: true, result: value }, [...buffers(value)]);
  } catch (e) {
    port.postMessage({ id, ok: false, error: { kind: e?.kind ?? 'RuntimeError', message: String(e?.message ?? e), node: e?.node ?? '' } });
  }
}

if (isNode) {
  importNode('worker_threads').then(({ parentPort }) => {
    port = parentPort;
    port.on('message', onMessage);
  });
} else {
  port = self;
  port.onmessage = (event) => onMessage(event.data);
}
