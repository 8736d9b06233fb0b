#!/usr/bin/env node
// The native executor beside onnxruntime-node, sample by sample (bench/run_threads.sh runs it
// after its process-per-side rounds). One long-lived process per setting, fxwasm
// (build/native/bench_onnx_exec --serve) and onnxruntime-node (bench/onnx_exec.mjs ortnode
// --serve) at each thread count, started and warmed up one after the other; then SAMPLES times
// each setting in turn (the order rotating), one sample = back-to-back runs for >= --min-ms, 10 ms
// of idle before each (so no side's spinning threads eat into the next). Every setting meets the
// same drift of this shared host within a round, so the paired ratios (each round's fxwasm time
// over the same round's onnxruntime time) hold up when the host's speed comes and goes, which
// the process rounds of run_threads.sh do not.
//
//   node bench/native_ab.mjs MODEL.onnx [--threads 1,2] [--samples 15] [--min-ms 100]
//                            [--warmup-ms 2000]
//
// Inputs: MODEL.json's shapes ("example" if given, symbolic dimensions 1), the same seeded values
// on both sides (the sums of their first outputs' magnitudes are printed). Prints one JSON line, then a markdown row
// per thread count: median (min) ms per run of each side, fx/ort by medians and paired, and each
// side's speed-up from the first thread count.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { inputFlags, server } from './serve.mjs';
import { median } from './stats.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
const model = argv[0];
if (!model || model.startsWith('--')) {
  console.error('usage: node bench/native_ab.mjs MODEL.onnx [--threads 1,2] [--samples 15] [--min-ms 100] [--warmup-ms 2000]');
  process.exit(2);
}
const opt = (name, d) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : d);
const THREADS = String(opt('--threads', '1,2')).split(',').map(Number);
const SAMPLES = Number(opt('--samples', 15));
const MIN_MS = Number(opt('--min-ms', 100));
const WARMUP_MS = Number(opt('--warmup-ms', 2000));

const flags = inputFlags(model);

const settings = [];
for (const t of THREADS) {
  settings.push({ side: 'fx', threads: t, server: await server(`fxwasm, ${t} threads`,
    path.join(ROOT, 'build/native/bench_onnx_exec'),
    [model, ...flags, '--threads', String(t), '--warmup-ms', String(WARMUP_MS), '--serve'], ROOT) });
  settings.push({ side: 'ort', threads: t, server: await server(`onnxruntime-node, ${t} threads`,
    process.execPath,
    ['bench/onnx_exec.mjs', 'ortnode', model, '--threads', String(t), '--warmup-ms', String(WARMUP_MS), '--serve'], ROOT) });
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
for (const s of settings) s.ms = [];
for (let round = 0; round < SAMPLES; ++round) {
  for (let i = 0; i < settings.length; ++i) {
    const s = settings[(i + round) % settings.length];
    await sleep(10);
    s.ms.push(await s.server.sample(MIN_MS));
  }
}
for (const s of settings) s.server.close();

const get = (side, t) => settings.find((s) => s.side === side && s.threads === t);
const name = path.basename(model, '.onnx');
const rows = THREADS.map((t) => {
  const fx = get('fx', t), ort = get('ort', t);
  return {
    threads: t,
    fx_median_ms: median(fx.ms), fx_min_ms: Math.min(...fx.ms),
    ort_median_ms: median(ort.ms), ort_min_ms: Math.min(...ort.ms),
    fx_over_ort: median(fx.ms) / median(ort.ms),
    fx_over_ort_paired: median(fx.ms.map((x, i) => x / ort.ms[i])),
    fx_speedup: median(get('fx', THREADS[0]).ms.map((x, i) => x / fx.ms[i])),
    ort_speedup: median(get('ort', THREADS[0]).ms.map((x, i) => x / ort.ms[i])),
  };
});
console.log(JSON.stringify({
  model: name, samples: SAMPLES, min_ms: MIN_MS,
  out_abs_sum: { fx: get('fx', THREADS[0]).server.ready.out_abs_sum, ort: get('ort', THREADS[0]).server.ready.out_abs_sum },
  rows,
  samples: Object.fromEntries(settings.map((s) => [`${s.side}${s.threads}`, s.ms.map((x) => +x.toFixed(3))])),
}));
const f = (x) => x.toFixed(x < 10 ? 2 : 1);
for (const r of rows)
  console.log(`| ${name} | ${r.threads} | ${f(r.fx_median_ms)} (${f(r.fx_min_ms)}) | ${f(r.ort_median_ms)} (${f(r.ort_min_ms)}) | ` +
    `${r.fx_over_ort.toFixed(2)}x | ${r.fx_over_ort_paired.toFixed(2)}x | ` +
    `${r.threads === THREADS[0] ? '' : `${r.fx_speedup.toFixed(2)}x / ${r.ort_speedup.toFixed(2)}x`} |`);
