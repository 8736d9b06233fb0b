#!/usr/bin/env node
// Where one model's time goes in each executor, node by node, in one run: the native executor's
// step timer (build/native/bench_onnx_exec --step-profile) and onnxruntime-node's own profiler
// (bench/onnx_exec.mjs ortnode --step-profile), ROUNDS times each in turn so that both meet the
// same phases of this shared host. Per node, its fastest round's median and the min over all
// rounds; then per op type the sums, the totals and each side's largest nodes. Node sums are not
// run times: onnxruntime's profiler costs it ~2 us a node, so compare whole runs with
// native_ab.mjs, and node tables for where the time goes.
//
//   node bench/node_table.mjs MODEL.onnx [--threads 1] [--runs 200] [--rounds 2] [--top 12]
//
// The op types differ: onnxruntime's are those after its graph transformations (Conv with its
// activation, NCHWc convolutions and their reorders, BiasGelu, FusedMatMul, ...), fxwasm's are
// the graph's (a fused Relu runs inside its Conv; a GELU or SiLU pattern is timed at its first
// node, a Div or a Sigmoid). Per-node JSON lines go to build/bench/node_table/.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { inputFlags } from './serve.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
const model = argv[0];
if (!model || model.startsWith('--')) {
  console.error('usage: node bench/node_table.mjs MODEL.onnx [--threads 1] [--runs 200] [--rounds 2] [--top 12]');
  process.exit(2);
}
const opt = (name, d) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : d);
const THREADS = String(opt('--threads', 1));
const RUNS = String(opt('--runs', 200));
const ROUNDS = Number(opt('--rounds', 2));
const TOP = Number(opt('--top', 12));
const name = path.basename(model, '.onnx');
const dir = path.join(ROOT, 'build/bench/node_table');
fs.mkdirSync(dir, { recursive: true });

const sides = {
  fx: (out) => [path.join(ROOT, 'build/native/bench_onnx_exec'),
    [model, ...inputFlags(model), '--threads', THREADS, '--step-profile', RUNS, '--profile-json', out]],
  ort: (out) => [process.execPath,
    [path.join(ROOT, 'bench/onnx_exec.mjs'), 'ortnode', model, '--threads', THREADS, '--warmup-ms', '2000',
     '--step-profile', RUNS, '--profile-json', out]],
};
const nodes = { fx: new Map(), ort: new Map() };  // node -> {op, shapes, medians[], mins[]}
for (let round = 0; round < ROUNDS; ++round) {
  for (const side of round % 2 ? ['fx', 'ort'] : ['ort', 'fx']) {
    const out = path.join(dir, `${name}_${side}_t${THREADS}_${round}.jsonl`);
    const [cmd, args] = sides[side](out);
    const r = spawnSync(cmd, args, { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
    if (r.status !== 0) throw new Error(`${side}: ${cmd} exited with status ${r.status}`);
    for (const line of fs.readFileSync(out, 'utf8').split('\n').filter(Boolean)) {
      const x = JSON.parse(line);
      if (!nodes[side].has(x.node)) nodes[side].set(x.node, { op: x.op.replace(/^onnx\./, ''), shapes: x.out_shapes, medians: [], mins: [] });
      nodes[side].get(x.node).medians.push(x.median_ms);
      nodes[side].get(x.node).mins.push(x.min_ms);
    }
  }
}
const rows = (side) => [...nodes[side]].map(([node, v]) => ({
  node, op: v.op, shapes: v.shapes, median_ms: Math.min(...v.medians), min_ms: Math.min(...v.mins) }));
const f = (x) => x.toFixed(3);
const byOp = {};
for (const side of ['fx', 'ort']) {
  byOp[side] = new Map();
  for (const r of rows(side)) {
    const o = byOp[side].get(r.op) ?? { nodes: 0, median_ms: 0, min_ms: 0 };
    o.nodes += 1;
    o.median_ms += r.median_ms;
    o.min_ms += r.min_ms;
    byOp[side].set(r.op, o);
  }
}
console.log(`${name}, ${THREADS} thread(s), ${ROUNDS} rounds of ${RUNS} runs a side: sums of node medians (mins), ms\n`);
console.log('| side | op | nodes | median | min |\n|---|---|---|---|---|');
for (const side of ['fx', 'ort']) {
  const ops = [...byOp[side]].sort((a, b) => b[1].median_ms - a[1].median_ms);
  const total = ops.reduce((t, [, o]) => ({ median_ms: t.median_ms + o.median_ms, min_ms: t.min_ms + o.min_ms }), { median_ms: 0, min_ms: 0 });
  for (const [op, o] of ops) console.log(`| ${side} | ${op} | ${o.nodes} | ${f(o.median_ms)} | ${f(o.min_ms)} |`);
  console.log(`| ${side} | **all** | ${rows(side).length} | **${f(total.median_ms)}** | ${f(total.min_ms)} |`);
}
for (const side of ['fx', 'ort']) {
  console.log(`\n${side}: the ${TOP} largest nodes (median, min ms${side === 'ort' ? ', output shapes' : ''})`);
  for (const r of rows(side).sort((a, b) => b.median_ms - a.median_ms).slice(0, TOP))
    console.log(`  ${r.op.padEnd(18)} ${f(r.median_ms)} ${f(r.min_ms)}  ${r.node}${r.shapes ? ` ${JSON.stringify(r.shapes)}` : ''}`);
}
console.log(`\n(per-round lines: ${path.relative(ROOT, dir)}/${name}_*.jsonl)`);
