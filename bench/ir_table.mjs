#!/usr/bin/env node
// Formats the IR chain benchmark (run_ir.sh): reads the JSON lines of the three runners and
// prints op | N | seconds per impl | speed-ups | linearity, with PASS/MISS against the spec
// targets, then checks that the 1k chain's str(graph) and code match torch.fx byte for byte.
//
//   node bench/ir_table.mjs TORCHFX.jsonl NATIVE.jsonl WASM.jsonl [NATIVE_DUMP TORCHFX_DUMP]
//
// Exit status 0 even on MISS (it is a report); 3 if an output mismatch was found.
import fs from 'node:fs';

const NATIVE_TARGET = 100, WASM_TARGET = 30, TARGET_N = 10000, LIN_TARGET = 6;
const [torchFile, nativeFile, wasmFile, nativeDump, torchDump] = process.argv.slice(2);

function load(file) {
  const times = new Map(), checks = new Map();
  if (!file || !fs.existsSync(file)) return { times, checks, missing: true };
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line.startsWith('{')) continue;
    const r = JSON.parse(line);
    if (r.op) times.set(`${r.op}/${r.N}`, r);
    else if (r.check) checks.set(`${r.check}/${r.N}`, r);
  }
  return { times, checks, missing: false };
}
const impls = { torch: load(torchFile), native: load(nativeFile), wasm: load(wasmFile) };

const ops = ['build', 'print', 'codegen', 'lint', 'dce', 'graph_copy'];
const sizes = [...new Set([...impls.native.times.values(), ...impls.torch.times.values(),
                           ...impls.wasm.times.values()].map(r => r.N))].sort((a, b) => a - b);

const fmtS = s => (s >= 1 ? s.toFixed(2) : s >= 0.01 ? s.toFixed(4) : s.toExponential(2));
const rec = (impl, op, n) => impls[impl].times.get(`${op}/${n}`);
const secs = (impl, op, n) => {
  const r = rec(impl, op, n);
  if (!r) return '-';
  return (r.lower_bound ? '>=' : '') + fmtS(r.seconds) + (r.runs === 1 && impl === 'torch' ? '¹' : '');
};
function speedup(impl, op, n, target) {
  const t = rec('torch', op, n), x = rec(impl, op, n);
  if (!t || !x) return '-';
  const v = t.seconds / x.seconds;
  let s = (t.lower_bound ? '>=' : '') + (v >= 100 ? v.toFixed(0) : v.toFixed(1)) + 'x';
  if (n === TARGET_N) s += v >= target ? ' PASS' : ' MISS';
  return s;
}
function linearity(impl, op, n, judge) {
  if (n !== 50000) return '';
  const a = rec(impl, op, 50000), b = rec(impl, op, 10000);
  if (!a || !b) return '-';
  const v = a.seconds / b.seconds;
  let s = (a.lower_bound ? '>=' : '') + v.toFixed(1);
  if (judge) s += v <= LIN_TARGET ? ' PASS' : ' MISS';
  return s;
}

const header = ['op', 'N', 'torch.fx s', 'native s', 'wasm s', 'native x (>=100)', 'wasm x (>=30)',
                'lin native', 'lin wasm', 'lin torch.fx'];
const rows = [];
for (const op of ops)
  for (const n of sizes)
    rows.push([op, String(n), secs('torch', op, n), secs('native', op, n), secs('wasm', op, n),
               speedup('native', op, n, NATIVE_TARGET), speedup('wasm', op, n, WASM_TARGET),
               linearity('native', op, n, true), linearity('wasm', op, n, true),
               linearity('torch', op, n, false)]);
const widths = header.map((h, i) => Math.max(h.length, ...rows.map(r => [...r[i]].length)));
const line = cells => cells.map((c, i) => i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))
                           .join(' | ').trimEnd();
console.log(line(header));
console.log(widths.map(w => '-'.repeat(w)).join('-|-'));
let lastOp = null;
for (const r of rows) {
  if (lastOp && r[0] !== lastOp) console.log('');
  lastOp = r[0];
  console.log(line(r));
}

// Tally of the judged cells.
const tally = { PASS: 0, MISS: 0 };
for (const r of rows) for (const c of r.slice(5)) for (const k of ['PASS', 'MISS']) if (c.endsWith(k)) tally[k]++;
console.log(`\nseconds: median (native/wasm: 5 runs; torch.fx: 3 runs, ¹ = 1 run; >= = capped lower bound)`);
console.log(`speed-up targets judged at N=${TARGET_N}; linearity = t(50k)/t(10k), target <= ${LIN_TARGET}`);
console.log(`judged cells: ${tally.PASS} PASS, ${tally.MISS} MISS`);

// Output equality on the 1k chain.
let mismatch = false;
console.log('\noutput check (1k chain; length + FNV-1a 64):');
for (const what of ['str', 'code']) {
  const t = impls.torch.checks.get(`${what}/1000`);
  for (const impl of ['native', 'wasm']) {
    const c = impls[impl].checks.get(`${what}/1000`);
    if (!t || !c) { console.log(`  ${what.padEnd(4)} ${impl.padEnd(6)} vs torch.fx: not available`); continue; }
    const same = t.len === c.len && t.fnv1a64 === c.fnv1a64;
    console.log(`  ${what.padEnd(4)} ${impl.padEnd(6)} vs torch.fx: ${same ? 'MATCH' : 'DIFFER'}` +
                ` (${c.len} B ${c.fnv1a64} vs ${t.len} B ${t.fnv1a64})`);
    if (same) continue;
    mismatch = true;
    const a = `${nativeDump}.${what}`, b = `${torchDump}.${what}`;
    if (impl === 'native' && nativeDump && torchDump && fs.existsSync(a) && fs.existsSync(b)) {
      const la = fs.readFileSync(a, 'utf8').split('\n'), lb = fs.readFileSync(b, 'utf8').split('\n');
      for (let i = 0; i < Math.max(la.length, lb.length); i++) {
        if (la[i] !== lb[i]) {
          console.log(`    first differing line ${i + 1}:`);
          console.log(`      fxwasm:   ${JSON.stringify(la[i])}`);
          console.log(`      torch.fx: ${JSON.stringify(lb[i])}`);
          break;
        }
      }
    }
  }
}
process.exit(mismatch ? 3 : 0);
