#!/usr/bin/env node
// Thread scaling in wasm, measured A/B in one process (bench/run_threads_wasm.sh runs it after its
// process-per-side rounds): fxwasm's threaded module at 1 and 2 threads (fx.setThreads) and two
// onnxruntime-web instances, numThreads 1 and 2 (the self-contained bundle imported under two
// URLs: two module instances, two wasm instances), each warmed up, then SAMPLES times each of the
// four in turn (the order rotating), one sample = back-to-back runs for >= --min-ms, 10 ms of
// idle between samples (so no side's spinning threads eat into the next). Every setting meets the
// same drift of this shared host, so the ratios of the medians are what the scaling is, even when
// other users' processes come and go.
//
//   node bench/threads_wasm_ab.mjs MODEL.onnx [--samples 15] [--min-ms 100] [--no-relaxed]
//
// Under `node --experimental-wasm-relaxed-simd` (what Chromium has by default) fxwasm's threaded
// module is the Relaxed SIMD one unless --no-relaxed; the line records which (`fx_simd`).
//
// Prints one JSON line: per setting the median and min ms per run, and the 1 -> 2 speed-ups.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { mulberry32 } from '../wasm/inputs.mjs';
import { median } from './stats.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PKG = process.env.FXWASM_PKG ? path.resolve(process.env.FXWASM_PKG) : ROOT;
const argv = process.argv.slice(2);
const model = argv[0];
const opt = (name, d) => (argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : d);
const SAMPLES = opt('--samples', 15);
const MIN_MS = opt('--min-ms', 100);

const spec = JSON.parse(fs.readFileSync(model.replace(/\.onnx$/, '.json'), 'utf8'));
const rand = mulberry32(0);
const inputs = spec.inputs.map(({ name, dtype, shape }) => {
  if (dtype !== 'float32') throw new Error(`unsupported input dtype ${dtype}`);
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
  for (let i = 0; i < data.length; ++i) data[i] = 2 * rand() - 1;
  return { name, dtype, shape, data };
});
const bytes = new Uint8Array(fs.readFileSync(model));

const { default: init } = await import(path.join(PKG, 'wasm/index.mjs'));
const fx = await init({ threads: 2, relaxedSimd: !argv.includes('--no-relaxed') });
if (fx.threads().build !== 'threads') throw new Error(`no threaded module: ${fx.threads().reason}`);
const gm = fx.loadONNX(bytes);
const feeds = inputs.map(({ dtype, shape, data }) => ({ dtype, shape, data }));

const ortBundle = pathToFileURL(path.join(ROOT, 'node_modules/onnxruntime-web/dist/ort.bundle.min.mjs')).href;
async function ortSession(threads) {
  const ort = await import(/* @vite-ignore */ `${ortBundle}?numThreads=${threads}`);
  ort.env.wasm.numThreads = threads;
  ort.env.wasm.simd = true;
  ort.env.wasm.proxy = false;
  ort.env.wasm.wasmPaths = path.join(ROOT, 'node_modules/onnxruntime-web/dist/');
  const session = await ort.InferenceSession.create(bytes, {
    executionProviders: ['wasm'], graphOptimizationLevel: 'all', executionMode: 'sequential',
    intraOpNumThreads: threads, interOpNumThreads: 1,
  });
  const f = {};
  for (const { name, dtype, shape, data } of inputs) f[name] = new ort.Tensor(dtype, data, shape);
  return () => session.run(f);
}

const settings = {
  fxwasm1: async () => (fx.setThreads(1), gm.run(feeds)),
  fxwasm2: async () => (fx.setThreads(2), gm.run(feeds)),
  ortweb1: await ortSession(1),
  ortweb2: await ortSession(2),
};
const idle = () => new Promise((r) => setTimeout(r, 10));

// Warm-up (V8 tiers the wasm up) and the run count per sample.
const inner = {};
for (const [k, run] of Object.entries(settings)) {
  const w0 = performance.now();
  while (performance.now() - w0 < 1500) await run();
  const t0 = performance.now();
  await run();
  inner[k] = Math.max(1, Math.ceil(MIN_MS / Math.max(performance.now() - t0, 1e-3)));
}
const times = Object.fromEntries(Object.keys(settings).map((k) => [k, []]));
const keys = Object.keys(settings);
for (let s = 0; s < SAMPLES; ++s) {
  for (let j = 0; j < keys.length; ++j) {
    const k = keys[(s + j) % keys.length];
    if (k === 'fxwasm1') fx.setThreads(1);
    if (k === 'fxwasm2') fx.setThreads(2);
    await idle();
    const t = performance.now();
    for (let i = 0; i < inner[k]; ++i) await settings[k]();
    times[k].push((performance.now() - t) / inner[k]);
  }
}
const out = { model: path.basename(model, '.onnx'), samples: SAMPLES, fx_simd: fx.threads().simd };
for (const k of keys) out[k] = { median_ms: median(times[k]), min_ms: Math.min(...times[k]) };
out.fxwasm_1to2 = out.fxwasm1.median_ms / out.fxwasm2.median_ms;
out.ortweb_1to2 = out.ortweb1.median_ms / out.ortweb2.median_ms;
console.log(JSON.stringify(out));
process.exit(0);
