#!/usr/bin/env node
// The table of bench/run_quant.sh: per model, side and form (float32, QDQ, QOperator) the median
// over rounds of the per-process medians; each int8 form over float32 on the same side, and
// fxwasm over onnxruntime on the same form (native: onnxruntime-node; wasm: onnxruntime-web).
// A ratio below 1 means the first is faster. The output checksum (sum |y|) is printed per form so
// the sides can be seen to compute the same thing.
//
//   node bench/quant_table.mjs build/bench/quant.jsonl
import fs from 'node:fs';
import { median } from './stats.mjs';

const lines = fs
  .readFileSync(process.argv[2] || 'build/bench/quant.jsonl', 'utf8')
  .split('\n')
  .filter((l) => l.startsWith('{'))
  .map((l) => JSON.parse(l));
const sideName = { 'fxwasm-native': 'fxwasm native', ortnode: 'onnxruntime-node', fxwasm: 'fxwasm wasm', ortweb: 'onnxruntime-web' };
const peer = { 'fxwasm-native': 'ortnode', fxwasm: 'ortweb' };
const times = new Map(); // `${base}|${form}|${impl}` -> [ms]
const sums = new Map();
const bases = [];
for (const l of lines) {
  if (!l.model || l.median_ms === undefined) continue;
  const m = /^(.*?)(_qdq|_qop)?$/.exec(l.model);
  const base = m[1], form = m[2] ? m[2].slice(1) : 'float32';
  if (!bases.includes(base)) bases.push(base);
  const key = `${base}|${form}|${l.impl}`;
  if (!times.has(key)) times.set(key, []);
  times.get(key).push(l.median_ms);
  if (l.out_abs_sum !== undefined) sums.set(key, l.out_abs_sum);
}
const get = (base, form, impl) => median(times.get(`${base}|${form}|${impl}`) || []);
const f = (x, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : '-');
const meta = lines.find((l) => l.meta === 'machine');
if (meta) console.log(`# ${meta.cpu}, ${meta.nproc} cores, commit ${meta.commit}, ${meta.date}`);
for (const base of bases) {
  console.log(`\n## ${base} (median of ${(times.get(`${base}|float32|fxwasm-native`) || []).length} rounds, ms)`);
  console.log('| side | float32 | QDQ int8 | QOperator int8 | QDQ / float32 | QOp / float32 | vs onnxruntime (f32 / QDQ / QOp) |');
  console.log('|---|---|---|---|---|---|---|');
  for (const impl of ['fxwasm-native', 'ortnode', 'fxwasm', 'ortweb']) {
    const t = ['float32', 'qdq', 'qop'].map((form) => get(base, form, impl));
    if (!t.some(Number.isFinite)) continue;
    const vs = peer[impl]
      ? ['float32', 'qdq', 'qop'].map((form) => f(get(base, form, impl) / get(base, form, peer[impl]))).join(' / ')
      : '';
    console.log(`| ${sideName[impl]} | ${f(t[0], 3)} | ${f(t[1], 3)} | ${f(t[2], 3)} | ${f(t[1] / t[0])} | ${f(t[2] / t[0])} | ${vs} |`);
  }
  const cs = ['float32', 'qdq', 'qop'].map((form) =>
    ['fxwasm-native', 'ortnode', 'fxwasm', 'ortweb'].map((i) => f(sums.get(`${base}|${form}|${i}`), 1)).join('/'),
  );
  console.log(`\nsum |y| (fxwasm native / ort-node / fxwasm wasm / ort-web): float32 ${cs[0]}; QDQ ${cs[1]}; QOp ${cs[2]}`);
}
