// Child process of tests/js/threads_wasm.test.mjs (worker threads and a threaded wasm module do
// not belong in Jest's VM realm). Prints one JSON line.
//
//   node tests/js/threads_wasm_run.mjs zoo 1            every zoo model on the single-thread module
//   node tests/js/threads_wasm_run.mjs zoo 1,2,3        ... on the threaded one (init({threads: 3})),
//                                                       at each count via setThreads
//   node tests/js/threads_wasm_run.mjs stress RUNS      RUNS runs over 4 GraphModules, deleted and
//                                                       reloaded in turn, threads switching 1 <-> 2
//   node tests/js/threads_wasm_run.mjs badworker        init({threads: 2}) with a failing Worker script
//   node tests/js/threads_wasm_run.mjs errors N [plain] typed errors of a list of bad calls
//                                                       (plain: init({relaxedSimd: false}))
// Under node --experimental-wasm-relaxed-simd, init({threads}) loads the relaxed-SIMD module.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { init } from '../../wasm/index.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const ZOO = path.join(ROOT, 'models/zoo');
const [mode, arg] = process.argv.slice(2);

/** Seeded inputs for a zoo model (its .json); symbolic dimensions are 2. */
function inputsFor(name, seed = 1) {
  const spec = JSON.parse(fs.readFileSync(path.join(ZOO, `${name}.json`), 'utf8'));
  let s = seed >>> 0;
  const rand = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32) * 2 - 1;
  return spec.inputs.map((i) => {
    if (i.dtype !== 'float32') throw new Error(`${name}: input ${i.name} is ${i.dtype}, not float32`);
    const shape = i.shape.map((d) => (typeof d === 'number' ? d : 2));
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
    for (let k = 0; k < data.length; k++) data[k] = rand();
    return { data, shape };
  });
}

function zooModels() {
  return fs.readdirSync(ZOO).filter((f) => f.endsWith('.onnx')).map((f) => f.slice(0, -5)).sort();
}

/** A run's outputs: dtype, shape, the bytes' sha256, and (float32) the values in base64. */
function digest(outputs) {
  return outputs.map((y) => {
    const bytes = new Uint8Array(y.data.buffer, y.data.byteOffset, y.data.byteLength);
    return {
      shape: y.shape,
      dtype: y.dtype,
      sha256: createHash('sha256').update(bytes).digest('hex'),
      f32: y.data instanceof Float32Array ? Buffer.from(bytes).toString('base64') : null,
    };
  });
}

async function zoo(counts) {
  const max = Math.max(...counts);
  const fx = await init(max > 1 ? { threads: max } : {});
  const info = fx.threads();
  const results = {};
  for (const name of zooModels()) {
    const gm = fx.loadONNX(fs.readFileSync(path.join(ZOO, `${name}.onnx`)));
    const inputs = inputsFor(name);
    results[name] = {};
    for (const t of counts) {
      const got = fx.setThreads(t);
      if (got !== t) throw new Error(`setThreads(${t}) gave ${got} threads`);
      results[name][t] = digest(gm.run(inputs));
    }
    gm.delete();
  }
  return { info, results };
}

async function stress(runs) {
  const fx = await init({ threads: 2 });
  const info = fx.threads();
  const names = ['mlp', 'cnn_bn_eval', 'transformer_encoder', 'squeezenet1_1'];
  const bytes = names.map((n) => fs.readFileSync(path.join(ZOO, `${n}.onnx`)));
  const inputs = names.map((n) => inputsFor(n));
  fx.releaseCachedMemory();
  const baseline = { heapUsed: fx.heapUsed(), liveHandles: fx.liveHandles() };
  const models = bytes.map((b) => fx.loadONNX(b));
  // The first result of each model at one thread: every later run must give the same bytes.
  fx.setThreads(1);
  const expected = models.map((gm, k) => digest(gm.run(inputs[k])).map((d) => d.sha256).join());
  let deletes = 0;
  let shortfalls = 0; // setThreads calls that got fewer threads than asked
  let mismatches = 0;
  let peak = 0;
  const start = performance.now();
  for (let i = 0; i < runs; i++) {
    if (i % 100 === 0) {
      const want = 1 + ((i / 100) % 2);
      if (fx.setThreads(want) !== want) shortfalls++;
    }
    const k = i % 4;
    if (i % 25 === 24) {
      // Interleaved delete(): model (i / 25) mod 4 goes and comes back from its bytes.
      const d = Math.floor(i / 25) % 4;
      models[d].delete();
      models[d] = fx.loadONNX(bytes[d]);
      deletes++;
    }
    const got = digest(models[k].run(inputs[k])).map((d) => d.sha256).join();
    if (got !== expected[k]) mismatches++;
    peak = Math.max(peak, fx.heapUsed());
  }
  const ms = performance.now() - start;
  for (const gm of models) gm.delete();
  if (fx.setThreads(2) !== 2) shortfalls++; // as at the baseline (each thread's stack is on the heap)
  fx.releaseCachedMemory();
  const end = fx.threads();
  return { info, end, runs, deletes, mismatches, shortfalls, ms, baseline, peak, after: { heapUsed: fx.heapUsed(), liveHandles: fx.liveHandles() } };
}

/** init({threads: 2}) whose Workers' script throws as it loads: the single-thread module, and why. */
async function badWorker() {
  const bad = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'fxwasm-threads-')), 'bad.worker.js');
  fs.writeFileSync(bad, "throw new Error('this worker script fails');\n");
  const fx = await init({ threads: 2, locateFile: (name, dir) => (name === 'fx-threads.worker.js' ? bad : path.join(dir, name)) });
  const gm = fx.loadONNX(fs.readFileSync(path.join(ROOT, 'models/sample.onnx')));
  const [y] = gm.run([{ data: new Float32Array(2 * 3 * 32 * 32).fill(0.25), shape: [2, 3, 32, 32] }]);
  fs.rmSync(path.dirname(bad), { recursive: true });
  return { info: fx.threads(), shape: y.shape };
}

/**
 * Errors on the module init({threads}) loads: each call's {kind, message, node}, and what C++
 * code that catches errors itself returns (shape inference records a gap and goes on). The
 * threaded module must give what the single-thread one gives (typed C++ catch clauses work).
 */
async function errors(threads, relaxedSimd) {
  const fx = await init({ threads, relaxedSimd });
  const got = [];
  const attempt = (what, f) => {
    try {
      got.push({ what, ok: f() });
    } catch (e) {
      got.push({ what, kind: e.kind, message: e.message, node: e.node ?? null });
    }
  };
  const sample = fs.readFileSync(path.join(ROOT, 'models/sample.onnx'));
  attempt('junk bytes', () => fx.loadONNX(new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8])) && 'loaded');
  const gm = fx.loadONNX(sample);
  attempt('no inputs', () => gm.run([]));
  attempt('wrong rank', () => gm.run([{ data: new Float32Array(6), shape: [2, 3] }]));
  attempt('erase a used node', () => gm.graph.eraseNode(gm.graph.findNode('conv')));
  attempt('unknown op', () => {
    const g = new fx.Graph();
    g.output(g.callFunction('onnx.NoSuchOp', [g.placeholder('x')]));
    return new fx.GraphModule(g).run([{ data: new Float32Array(1), shape: [1] }]);
  });
  attempt('shapes with a gap', () => {
    const r = gm.inferShapes();
    return { typed: r.typed, total: r.total, gaps: r.gaps.map((g) => g.node) };
  });
  const dir = path.join(ROOT, 'tests/fuzz/regressions');
  for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.onnx')).sort())
    attempt(f, () => {
      const m = fx.loadONNX(fs.readFileSync(path.join(dir, f)));
      return m.run(m.graph.nodes.filter((n) => n.op === 'placeholder').map(() => ({ data: new Float32Array(1), shape: [1] }))).length;
    });
  return { info: fx.threads(), got };
}

let out;
if (mode === 'badworker') out = await badWorker();
else if (mode === 'errors') out = await errors(Number(arg), process.argv[4] === 'plain' ? false : undefined);
else if (mode === 'zoo') out = await zoo(arg.split(',').map(Number));
else if (mode === 'stress') out = await stress(Number(arg));
else throw new Error(`usage: threads_wasm_run.mjs zoo 1[,2,3] | stress RUNS | badworker | errors N`);
process.stdout.write(JSON.stringify(out) + '\n');
// Nothing must be left holding the process open (the module's Workers are unref()'d): no exit().
