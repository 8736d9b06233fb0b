#!/usr/bin/env node
// Runs ONNX's backend node tests (scripts/gen_onnx_backend_suite.py) on onnxruntime-node (CPU,
// one thread) and writes which cases it passes: the reference for tests/onnx_backend/expected.txt.
// Test data is decoded with fxwasm's own tensorFromONNX (the npm package, build/wasm must exist).
//
//   node scripts/ort_backend.mjs SUITE_DIR[,SUITE_DIR...] [--write FILE] [--only NAME]
//
// Cases are compared as ONNX's backend runner compares them (see tests/onnx_backend/runner.cpp):
// same outputs, dtypes and shapes, floating point within rtol 1e-3 / atol 1e-7, others exactly.
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';

import * as fx from '../wasm/index.mjs';

const args = process.argv.slice(2);
let roots = [];
let writeFile = '';
let only = '';
for (let i = 0; i < args.length; ++i) {
  if (args[i] === '--write') writeFile = args[++i];
  else if (args[i] === '--only') only = args[++i];
  else roots.push(...args[i].split(','));
}
if (!roots.length) {
  console.error('usage: node scripts/ort_backend.mjs SUITE_DIR[,SUITE_DIR...] [--write FILE] [--only NAME]');
  process.exit(2);
}
await fx.init();

const FLOATS = new Set(['float32', 'float64', 'float16']);

function halfToFloat(h) {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

function compare(want, got) {
  if (want.dtype !== got.type) return `dtype ${got.type}, expected ${want.dtype}`;
  if (want.shape.join(',') !== got.dims.join(',')) return `shape [${got.dims}], expected [${want.shape}]`;
  const a = want.data;
  const b = got.data;
  if (a.length !== b.length) return `${b.length} elements, expected ${a.length}`;
  if (FLOATS.has(want.dtype)) {
    const f = want.dtype === 'float16' ? halfToFloat : (x) => x;
    for (let i = 0; i < a.length; ++i) {
      const x = f(a[i]);
      const y = f(b[i]);
      if (Number.isNaN(x) && Number.isNaN(y)) continue;
      if (x === y) continue;
      if (!(Math.abs(x - y) <= 1e-7 + 1e-3 * Math.abs(x))) return `element ${i}: ${y}, expected ${x}`;
    }
    return '';
  }
  for (let i = 0; i < a.length; ++i) if (a[i] !== b[i]) return `element ${i}: ${b[i]}, expected ${a[i]}`;
  return '';
}

async function runCase(dir) {
  const session = await ort.InferenceSession.create(fs.readFileSync(path.join(dir, 'model.onnx')), {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
  });
  const sets = fs.readdirSync(dir).filter((d) => d.startsWith('test_data_set_')).sort();
  if (!sets.length) throw new Error('no test data');
  for (const set of sets) {
    const read = (kind) => {
      const out = [];
      for (let i = 0; ; ++i) {
        const f = path.join(dir, set, `${kind}_${i}.pb`);
        if (!fs.existsSync(f)) return out;
        out.push(fx.tensorFromONNX(fs.readFileSync(f)));
      }
    };
    const inputs = read('input');
    const expected = read('output');
    const feeds = {};
    inputs.forEach((t, i) => {
      feeds[session.inputNames[i]] = new ort.Tensor(t.dtype, t.data, t.shape);
    });
    const results = await session.run(feeds);
    const got = session.outputNames.map((n) => results[n]);
    if (got.length !== expected.length) throw new Error(`${got.length} outputs, expected ${expected.length}`);
    for (let i = 0; i < got.length; ++i) {
      const why = compare(expected[i], got[i]);
      if (why) throw new Error(`output ${i}: ${why}`);
    }
  }
}

const cases = [];
for (const r of roots)
  for (const name of fs.readdirSync(r).sort())
    if (fs.existsSync(path.join(r, name, 'model.onnx'))) cases.push([name, path.join(r, name)]);
cases.sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));

const lines = ["# onnxruntime-node's outcomes on ONNX's backend node tests (scripts/ort_backend.mjs)."];
let passed = 0;
let total = 0;
for (const [name, dir] of cases) {
  if (only && name !== only) continue;
  ++total;
  let reason = '';
  try {
    await runCase(dir);
  } catch (e) {
    reason = String(e && e.message ? e.message : e).replace(/\s+/g, ' ').slice(0, 300);
  }
  if (!reason) ++passed;
  if (only) console.log(`${name}: ${reason ? 'FAIL ' + reason : 'pass'}`);
  lines.push(reason ? `${name} fail  # ${reason}` : `${name} pass`);
}
console.log(`onnxruntime-node ${ort.env.versions?.common ?? ''}: ${passed} of ${total} cases pass`);
if (writeFile) fs.writeFileSync(writeFile, lines.join('\n') + '\n');
