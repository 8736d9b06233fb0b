#!/usr/bin/env node
// The table of bench/run_threads_wasm.sh from its JSON lines (build/bench/threads_wasm.jsonl):
// per model, fxwasm (init({threads})) and onnxruntime-web (numThreads) at 1 and 2 threads,
// medians of the rounds' medians; each side's speed-up 1 -> 2 as a ratio of those medians and
// paired (each round's 1-thread time over the same round's 2-thread time, median over rounds:
// the two processes run minutes apart at most, so the host's drift touches both alike); and
// fxwasm / onnxruntime-web at each count. Then the load average seen after each process.
//
//   node bench/threads_wasm_table.mjs build/bench/threads_wasm.jsonl
import fs from 'node:fs';
import { median } from './stats.mjs';
import os from 'node:os';

const rows = fs.readFileSync(process.argv[2], 'utf8').trim().split('\n').map((l) => JSON.parse(l));
for (const r of rows)
  if (r.impl === 'fxwasm' && r.threads !== (r.build === 'threads' ? 2 : 1))
    throw new Error(`fxwasm ran ${r.threads} threads (${r.build}): the threaded module did not load`);
const pick = (side, m, t) => rows.filter((r) => r.impl === side && r.model === m && r.threads === t);
const ms = (side, m, t) => median(pick(side, m, t).map((r) => r.median_ms));
const paired = (side, m) => {
  const one = new Map(pick(side, m, 1).map((r) => [r.round, r.median_ms]));
  return median(pick(side, m, 2).filter((r) => one.has(r.round)).map((r) => one.get(r.round) / r.median_ms));
};
const f = (x) => x.toFixed(2);
console.log('| model | fxwasm 1 thr ms | fxwasm 2 thr ms | fxwasm 1->2 | paired | ort-web 1 thr ms | ort-web 2 thr ms | ort-web 1->2 | paired | fx/ort 1 thr | fx/ort 2 thr |');
console.log('|---|---|---|---|---|---|---|---|---|---|---|');
for (const m of [...new Set(rows.map((r) => r.model))]) {
  const f1 = ms('fxwasm', m, 1), f2 = ms('fxwasm', m, 2), o1 = ms('ortweb', m, 1), o2 = ms('ortweb', m, 2);
  console.log(`| ${m} | ${f(f1)} | ${f(f2)} | ${f(f1 / f2)}x | ${f(paired('fxwasm', m))}x | ${f(o1)} | ${f(o2)} | ${f(o1 / o2)}x | ${f(paired('ortweb', m))}x | ${f(f1 / o1)}x | ${f(f2 / o2)}x |`);
}
const loads = rows.map((r) => r.load1).filter((x) => x !== undefined);
if (loads.length)
  console.log(`\nload average (1 min) after each process: median ${f(median(loads))}, ${f(Math.min(...loads))}-${f(Math.max(...loads))}, on ${os.cpus().length} cores`);
