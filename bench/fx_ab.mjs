#!/usr/bin/env node
// Two builds of the native executor on one model, sample by sample: a change's A/B. BASE and NEW
// are bench_onnx_exec binaries (copy build/native/bench_onnx_exec aside before rebuilding; pass
// the same binary twice to read the host's noise floor). Each runs as one long-lived --serve
// process (bench/serve.mjs), both warmed up; then SAMPLES rounds time each in turn, the order
// alternating, one sample = back-to-back runs for >= --min-ms after 10 ms of idle. The paired
// ratio (each round's NEW time over the same round's BASE time) holds up when this shared host's
// speed comes and goes within a run; figures from different runs do not.
//
//   node bench/fx_ab.mjs MODEL.onnx BASE NEW [--threads 1] [--samples 15] [--min-ms 200]
//                        [--warmup-ms 2000]
//
// Prints one JSON line (the samples too), then a markdown row: each side's median (min) ms per
// run, NEW / BASE by medians, paired, and by the fastest samples.
import path from 'node:path';

import { inputFlags, server } from './serve.mjs';
import { median } from './stats.mjs';

const argv = process.argv.slice(2);
const [model, base, next] = argv;
if (!model || !base || !next || [model, base, next].some((a) => a.startsWith('--'))) {
  console.error('usage: node bench/fx_ab.mjs MODEL.onnx BASE NEW [--threads 1] [--samples 15] [--min-ms 200] [--warmup-ms 2000]');
  process.exit(2);
}
const opt = (name, d) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : d);
const THREADS = Number(opt('--threads', 1));
const SAMPLES = Number(opt('--samples', 15));
const MIN_MS = Number(opt('--min-ms', 200));
const WARMUP_MS = Number(opt('--warmup-ms', 2000));

const args = [model, ...inputFlags(model), '--threads', String(THREADS), '--warmup-ms', String(WARMUP_MS), '--serve'];
const sides = [];
for (const [label, bin] of [['base', base], ['new', next]])
  sides.push({ label, bin, ms: [], server: await server(`${label} (${bin})`, path.resolve(bin), args) });
if (sides[0].server.ready.out_abs_sum !== sides[1].server.ready.out_abs_sum)
  console.error(`note: the outputs differ (sums of magnitudes ${sides[0].server.ready.out_abs_sum} and ${sides[1].server.ready.out_abs_sum})`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
for (let round = 0; round < SAMPLES; ++round) {
  for (let i = 0; i < 2; ++i) {
    const s = sides[(i + round) % 2];
    await sleep(10);
    s.ms.push(await s.server.sample(MIN_MS));
  }
}
for (const s of sides) s.server.close();

const [a, b] = sides;
const row = {
  model: path.basename(model, '.onnx'), threads: THREADS, samples: SAMPLES, min_ms: MIN_MS,
  base_median_ms: median(a.ms), base_min_ms: Math.min(...a.ms),
  new_median_ms: median(b.ms), new_min_ms: Math.min(...b.ms),
  new_over_base: median(b.ms) / median(a.ms),
  new_over_base_paired: median(b.ms.map((x, i) => x / a.ms[i])),
  new_over_base_by_min: Math.min(...b.ms) / Math.min(...a.ms),
  out_abs_sum: { base: a.server.ready.out_abs_sum, new: b.server.ready.out_abs_sum },
  ms: { base: a.ms.map((x) => +x.toFixed(3)), new: b.ms.map((x) => +x.toFixed(3)) },
};
console.log(JSON.stringify(row));
const f = (x) => x.toFixed(x < 10 ? 2 : 1);
console.log(`| ${row.model} | ${THREADS} | ${f(row.base_median_ms)} (${f(row.base_min_ms)}) | ` +
  `${f(row.new_median_ms)} (${f(row.new_min_ms)}) | ${row.new_over_base.toFixed(3)}x | ` +
  `${row.new_over_base_paired.toFixed(3)}x | ${row.new_over_base_by_min.toFixed(3)}x |`);
