#!/usr/bin/env node
// One side of the ONNX execution benchmark (bench/run_onnx_exec.sh): latency of a models/zoo/
// model under fxwasm's wasm package, onnxruntime-web (wasm backend, SIMD, one thread) or
// onnxruntime-node (CPU, one intra-op thread), or the start-up cost of a wasm module. One
// JSON line per invocation; run each side in its own process.
//
//   node bench/onnx_exec.mjs fxwasm|ortweb|ortnode MODEL.onnx [--runs 10] [--min-ms 20]
//                            [--warmup 2] [--warmup-ms 4000] [--threads 1] [--serve]
//                            [--step-profile N [--profile-json FILE]]
//   node bench/onnx_exec.mjs init fxwasm|ortweb
//
// Inputs: NAME.json next to the model gives names and shapes; values come from the mulberry32
// stream of scripts/ort_run.mjs (seed 0, floats uniform in [-1, 1)), so every side sees the
// same inputs and the output checksums (sum, abs_sum of the first output) can be compared.
// Timing: warm-up (at least --warmup runs and --warmup-ms, so V8 has tiered up the wasm code),
// then --runs repetitions of k back-to-back runs each (k chosen so a repetition takes >=
// --min-ms); median and min of the per-run means. The model bytes are read before timing.
//
// --serve (bench/native_ab.mjs): after the warm-up, print one JSON line ({"ready": ...}), then
// answer each line "sample MS" on stdin with one line: the mean ms per run of back-to-back runs
// lasting >= MS; exit at the end of stdin.
//
// --step-profile N (ortnode; bench/node_table.mjs): after the warm-up, N runs under onnxruntime's
// own profiler; each node's median and min over them (the last N of its kernel times) as JSON
// lines to --profile-json (else stdout), largest min first, in the format of bench_onnx_exec
// --step-profile, with the node's output shapes. Nodes are onnxruntime's after its graph
// transformations: fused nodes (Conv with its activation, NCHWc convolutions and reorders,
// BiasGelu, FusedMatMul ...) under their own names and op types.
//
// --threads N (bench/run_threads_wasm.sh, bench/run_threads.sh): fxwasm loads the threaded module
// with init({ threads: N }) when N >= 2 (the line records fx.threads(), so a fallback to one
// thread shows); onnxruntime-web gets env.wasm.numThreads = N (its threaded wasm: worker_threads
// over a SharedArrayBuffer in Node) and intraOpNumThreads = N; onnxruntime-node gets
// intraOpNumThreads = N.
//
// `init fxwasm`: time of `await init()` of the fxwasm package in a fresh process (reads,
// compiles and instantiates dist/fx.wasm). `init ortweb`: time of the first
// InferenceSession.create of onnxruntime-web in a fresh process on the tiny models/zoo/
// mymodule.onnx (fetches, compiles and instantiates ort-wasm-simd-threaded.wasm, then builds a
// 5-node session), and of a second create of the same model (the session alone), so
// init ~= first - second.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { mulberry32 } from '../wasm/inputs.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// The fxwasm package to load: FXWASM_PKG (a folder with wasm/index.mjs and dist/fx.{mjs,wasm};
// the run_*.sh scripts snapshot the package there, so a concurrent rebuild of dist/ cannot mix
// an old fx.mjs with a new fx.wasm mid-run), else the repository.
const PKG = process.env.FXWASM_PKG ? path.resolve(process.env.FXWASM_PKG) : ROOT;

/** [{name, dtype, shape, data}] for the model's inputs (NAME.json), seeded like ort_run.mjs. */
function makeInputs(model) {
  const spec = JSON.parse(fs.readFileSync(model.replace(/\.onnx$/, '.json'), 'utf8'));
  const rand = mulberry32(0);
  // A dynamic input runs at the shape it was exported at (models/generate.py's "example").
  return spec.inputs.map(({ name, dtype, shape: declared, example }) => {
    const shape = example ?? declared;
    if (shape.some((d) => typeof d !== 'number')) throw new Error(`input ${name}: dynamic shape ${JSON.stringify(shape)} without an example shape`);
    const n = shape.reduce((a, b) => a * b, 1);
    let data;
    if (dtype === 'float32') {
      data = new Float32Array(n);
      for (let i = 0; i < n; ++i) data[i] = 2 * rand() - 1;
    } else if (dtype === 'int64') {
      data = new BigInt64Array(n);
      for (let i = 0; i < n; ++i) data[i] = BigInt(Math.floor(10 * rand()));
    } else {
      throw new Error(`unsupported input dtype ${dtype}`);
    }
    return { name, dtype, shape, data };
  });
}

function checksum(data) {
  let sum = 0, absSum = 0;
  for (const v of data) {
    sum += Number(v);
    absSum += Math.abs(Number(v));
  }
  return { out_sum: sum, out_abs_sum: absSum };
}

/** Warm-up, then median/min (ms per run) of `runs` repetitions of >= minMs each. */
async function timeIt(fn, { runs, minMs, warmup, warmupMs }) {
  const w0 = performance.now();
  for (let w = 0; w < warmup || performance.now() - w0 < warmupMs; ++w) await fn();
  const t0 = performance.now();
  await fn();
  const once = Math.max(performance.now() - t0, 1e-4);
  const inner = Math.max(1, Math.ceil(minMs / once));
  const ts = [];
  for (let r = 0; r < runs; ++r) {
    const t = performance.now();
    for (let i = 0; i < inner; ++i) await fn();
    ts.push((performance.now() - t) / inner);
  }
  ts.sort((a, b) => a - b);
  return { median_ms: ts[ts.length >> 1], min_ms: ts[0], runs, inner };
}

/** --serve: warm-up, a ready line, then one line per "sample MS" line of stdin (ms per run). */
async function serve(fn, ready, { warmup, warmupMs }) {
  const w0 = performance.now();
  for (let w = 0; w < warmup || performance.now() - w0 < warmupMs; ++w) await fn();
  const { impl, ...rest } = ready;
  console.log(JSON.stringify({ ready: impl, ...rest }));
  const readline = await import('node:readline');
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const m = /^sample ([0-9.]+)$/.exec(line.trim());
    if (!m) throw new Error(`--serve: expected 'sample MS', got '${line}'`);
    const t0 = performance.now();
    let k = 0;
    do {
      await fn();
      ++k;
    } while (performance.now() - t0 < Number(m[1]));
    process.stdout.write(`${((performance.now() - t0) / k).toFixed(6)}\n`);
  }
  return null;
}

/** --step-profile: warm-up, opts.stepProfile profiled runs, then per-node JSON lines. */
async function stepProfile(run, opts, model, { dir, end }) {
  const w0 = performance.now();
  for (let w = 0; w < opts.warmup || performance.now() - w0 < opts.warmupMs; ++w) await run();
  for (let r = 0; r < opts.stepProfile; ++r) await run();
  await end();
  const file = fs.readdirSync(dir).find((f) => f.endsWith('.json'));
  if (!file) throw new Error(`--step-profile: onnxruntime wrote no profile into ${dir}`);
  const events = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
  fs.rmSync(dir, { recursive: true, force: true });
  const nodes = new Map();  // name -> {op, shapes, us: [kernel time of each run]}
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const node = e.name.slice(0, -'_kernel_time'.length);
    if (!nodes.has(node)) {
      const shapes = (e.args.output_type_shape ?? []).map((o) => Object.values(o)[0]);
      nodes.set(node, { op: e.args.op_name, shapes, us: [] });
    }
    nodes.get(node).us.push(e.dur);
  }
  const rows = [...nodes].map(([node, { op, shapes, us }]) => {
    const ms = us.slice(-opts.stepProfile).map((x) => x / 1e3).sort((a, b) => a - b);
    return { impl: 'onnxruntime-node', model, node, op, median_ms: ms[ms.length >> 1], min_ms: ms[0],
             runs: ms.length, out_shapes: shapes };
  }).sort((a, b) => b.min_ms - a.min_ms);
  const text = rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
  if (opts.profileJson) fs.writeFileSync(opts.profileJson, text);
  else process.stdout.write(text);
  return null;
}

async function loadOrtWeb(threads = 1) {
  const ort = await import('onnxruntime-web');
  ort.env.wasm.numThreads = threads;
  ort.env.wasm.simd = true;
  ort.env.wasm.proxy = false;
  ort.env.wasm.wasmPaths = path.join(ROOT, 'node_modules/onnxruntime-web/dist/');
  return ort;
}

const ORT_WEB_OPTIONS = { executionProviders: ['wasm'], graphOptimizationLevel: 'all',
                          executionMode: 'sequential', intraOpNumThreads: 1, interOpNumThreads: 1 };

async function runSide(side, model, opts) {
  const name = path.basename(model, '.onnx');
  const bytes = new Uint8Array(fs.readFileSync(model));
  const inputs = makeInputs(model);
  let run, first, extra = {};
  let profile = null;  // --step-profile: onnxruntime's profile folder and endProfiling()
  // Import (session creation) + first run, as issue 19 compares; from after the runtime's own
  // module is loaded (init() is timed apart; onnxruntime-web instantiates its wasm in its first
  // session, so that is in its figure).
  let l0;
  if (side === 'fxwasm') {
    const { default: init } = await import(path.join(PKG, 'wasm/index.mjs'));
    const fx = await init(opts.threads > 1 ? { threads: opts.threads } : {});
    l0 = performance.now();
    const gm = fx.loadONNX(bytes);
    const feeds = inputs.map(({ dtype, shape, data }) => ({ dtype, shape, data }));
    run = () => gm.run(feeds);
    first = (out) => out[0].data;
    extra = { heap_bytes: fx.heapSize(), threads: fx.threads().threads, build: fx.threads().build };
  } else if (side === 'ortweb' || side === 'ortnode') {
    let ort, session;
    if (side === 'ortweb') {
      ort = await loadOrtWeb(opts.threads);
      l0 = performance.now();
      session = await ort.InferenceSession.create(bytes, { ...ORT_WEB_OPTIONS, intraOpNumThreads: opts.threads });
      extra = { onnxruntime_web: ort.env.versions.web, threads: opts.threads };
    } else {
      const ortRun = await import(path.join(ROOT, 'scripts/ort_run.mjs'));
      ort = (await import('onnxruntime-node')).default;
      l0 = performance.now();
      if (opts.stepProfile > 0) profile = { dir: fs.mkdtempSync(path.join(os.tmpdir(), 'ort-profile-')) };
      session = await ortRun.createSession(bytes, {
        threads: opts.threads, profilePrefix: profile && path.join(profile.dir, 'profile') });
      if (profile) profile.end = () => session.endProfiling();
      extra = { onnxruntime_node: ort.env.versions.node, threads: opts.threads };
    }
    const feeds = {};
    for (const { name: n, dtype, shape, data } of inputs) feeds[n] = new ort.Tensor(dtype, data, shape);
    run = () => session.run(feeds);
    first = (out) => out[session.outputNames[0]].data;
  } else {
    throw new Error(`unknown side ${side}`);
  }
  const out = await run();
  const load_first_ms = performance.now() - l0;
  const sums = checksum(first(out));
  if (opts.serve) return serve(run, { impl: side, model: name, ...sums, ...extra }, opts);
  if (profile) return stepProfile(run, opts, name, profile);
  const t = await timeIt(run, opts);
  const peak_rss_mb = process.resourceUsage().maxRSS / 1024;
  return { impl: side, model: name, ...t, ...sums, ...extra, load_first_ms, peak_rss_mb };
}

async function initSide(side) {
  if (side === 'fxwasm') {
    const t0 = performance.now();
    const { default: init } = await import(path.join(PKG, 'wasm/index.mjs'));
    const t1 = performance.now();
    await init();
    const t2 = performance.now();
    return { init: 'fxwasm', import_js_ms: t1 - t0, init_ms: t2 - t1 };
  }
  if (side === 'ortweb') {
    const t0 = performance.now();
    const ort = await loadOrtWeb();
    const t1 = performance.now();
    const tiny = fs.readFileSync(path.join(ROOT, 'models/zoo/mymodule.onnx'));
    await ort.InferenceSession.create(tiny, ORT_WEB_OPTIONS);
    const t2 = performance.now();
    await ort.InferenceSession.create(tiny, ORT_WEB_OPTIONS);
    const t3 = performance.now();
    return { init: 'ortweb', import_js_ms: t1 - t0, first_session_ms: t2 - t1,
             second_session_ms: t3 - t2, init_ms: (t2 - t1) - (t3 - t2) };
  }
  throw new Error(`unknown init side ${side}`);
}

async function main() {
  const argv = process.argv.slice(2);
  const opts = { runs: 10, minMs: 20, warmup: 2, warmupMs: 4000, threads: 1, serve: false, stepProfile: 0, profileJson: null };
  const pos = [];
  const valued = { '--runs': 'runs', '--min-ms': 'minMs', '--warmup': 'warmup', '--warmup-ms': 'warmupMs', '--threads': 'threads',
                   '--step-profile': 'stepProfile' };
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] in valued) opts[valued[argv[i]]] = Number(argv[++i]);
    else if (argv[i] === '--profile-json') opts.profileJson = argv[++i];
    else if (argv[i] === '--serve') opts.serve = true;
    else if (argv[i].startsWith('--')) throw new Error(`unknown option ${argv[i]}`);
    else pos.push(argv[i]);
  }
  const [side, what] = pos;
  if (opts.stepProfile > 0 && (side !== 'ortnode' || opts.serve))
    throw new Error('--step-profile: onnxruntime-node (ortnode) only, without --serve');
  if (!side || !what) throw new Error('usage: onnx_exec.mjs fxwasm|ortweb|ortnode MODEL.onnx | init fxwasm|ortweb');
  const r = side === 'init' ? await initSide(what) : await runSide(side, what, opts);
  if (r) console.log(JSON.stringify(r));
}

main().then(() => process.exit(0), (e) => {
  console.error(`onnx_exec.mjs: ${e.stack ?? e}`);
  process.exit(1);
});
