#!/usr/bin/env node
// Run an ONNX model with onnxruntime-node (CPU, one intra-op and one inter-op thread) and report
// its outputs: the reference side of fxwasm's numerics comparisons.
//
//   node scripts/ort_run.mjs MODEL.onnx [options]
//
//   --inputs DIR   take the inputs from DIR/io.json + the raw files it names (the layout of
//                  tests/onnx_ops/<case>/test_data_set_0/); otherwise inputs are seeded random
//   --spec FILE    input spec JSON ({"inputs": [{name, shape, dtype}]}, e.g. models/zoo/NAME.json;
//                  an input's "example" shape if it has one, else symbolic dimensions become 1);
//                  default: MODEL with .onnx replaced by .json if that file exists, else the
//                  model's own input metadata (symbolic dimensions become 1)
//   --seed N       seed of the random inputs (default 0)
//   --json         print one JSON document instead of a table
//   --values       include every output value in the JSON (int64 as numbers)
//   --save DIR     write the inputs and outputs used as raw files + DIR/io.json (same layout)
//   --runs N       time N runs after the first one and report the median (default 0)
//   --threads N    intra-op threads (default 1)
//   --opt LEVEL    graph optimisation level: disabled|basic|extended|all (default all)
//
// Seeded random inputs: one mulberry32 stream per run, inputs filled in order, element by element:
// floating point uniform in [-1, 1); integers uniform in [0, 10); bool with p = 0.5.
//
// Raw files: the tensor's elements, little-endian, row-major, no header; bool is one byte per
// element. io.json: {"inputs": [T...], "outputs": [T...]} with T = {name, dtype, shape, file}, file
// relative to io.json's folder; dtype one of float32 float64 int64 int32 int8 uint8 bool.
//
// Checksums per output: sum, abs_sum, min, max (as float64) and fnv1a, the 32-bit FNV-1a hash of the
// raw bytes in hex (equal only for bit-identical results).
//
// The functions are exported for scripts/gen_onnx_op_outputs.mjs.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import ort from 'onnxruntime-node';

import { ARRAYS, mulberry32 } from '../wasm/inputs.mjs';

/** Number of elements of a shape. */
export const numel = (shape) => shape.reduce((a, b) => a * b, 1);

export { mulberry32 };

/** Seeded random ort.Tensor of `dtype` and `shape` (see the header for the distributions). */
export function randomTensor(rand, dtype, shape) {
  const Ctor = ARRAYS[dtype];
  if (!Ctor) throw new Error(`unsupported input dtype ${dtype}`);
  const data = new Ctor(numel(shape));
  for (let i = 0; i < data.length; ++i) {
    const u = rand();
    if (dtype === 'float32' || dtype === 'float64') data[i] = 2 * u - 1;
    else if (dtype === 'bool') data[i] = u < 0.5 ? 1 : 0;
    else if (dtype === 'int64') data[i] = BigInt(Math.floor(10 * u));
    else data[i] = Math.floor(10 * u);
  }
  return new ort.Tensor(dtype, data, shape);
}

/** Read a raw little-endian tensor file into an ort.Tensor. */
export function readTensor(file, dtype, shape) {
  const Ctor = ARRAYS[dtype];
  if (!Ctor) throw new Error(`${file}: unsupported dtype ${dtype}`);
  const bytes = fs.readFileSync(file);
  const n = numel(shape);
  if (bytes.length !== n * Ctor.BYTES_PER_ELEMENT) {
    throw new Error(`${file}: ${bytes.length} bytes, expected ${n} x ${Ctor.BYTES_PER_ELEMENT}`);
  }
  const data = new Ctor(n);
  new Uint8Array(data.buffer).set(bytes);
  return new ort.Tensor(dtype, data, shape);
}

/** The raw bytes of an ort.Tensor's data. */
export function tensorBytes(tensor) {
  const d = tensor.data;
  return Buffer.from(d.buffer, d.byteOffset, d.byteLength);
}

/** Read DIR/io.json and its input files: {name: ort.Tensor}. */
export function readInputs(dir) {
  const io = JSON.parse(fs.readFileSync(path.join(dir, 'io.json'), 'utf8'));
  const feeds = {};
  for (const t of io.inputs) feeds[t.name] = readTensor(path.join(dir, t.file), t.dtype, t.shape);
  return feeds;
}

/** Indented JSON with arrays of scalars (shapes, values) kept on one line. */
export function toJson(value) {
  return JSON.stringify(value, null, 1).replace(
    /\[\s+([^[\]{}]*?)\s+\]/g, (_, items) => `[${items.split(/,\s+/).join(', ')}]`);
}

/** Write tensors as raw files plus DIR/io.json. `inputs`/`outputs`: [name, ort.Tensor] pairs. */
export function saveTensors(dir, inputs, outputs) {
  fs.mkdirSync(dir, { recursive: true });
  const write = (kind, pairs) =>
    pairs.map(([name, t], i) => {
      const file = `${kind}_${i}.bin`;
      fs.writeFileSync(path.join(dir, file), tensorBytes(t));
      return { name, dtype: t.type, shape: t.dims.map(Number), file };
    });
  const io = { inputs: write('input', inputs), outputs: write('output', outputs) };
  fs.writeFileSync(path.join(dir, 'io.json'), toJson(io) + '\n');
}

/** 32-bit FNV-1a of a byte buffer, as 8 hex digits. */
export function fnv1a(bytes) {
  let h = 0x811c9dc5;
  for (const b of bytes) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h.toString(16).padStart(8, '0');
}

/** {name, dtype, shape, sum, abs_sum, min, max, fnv1a} of a tensor. */
export function summarize(name, t) {
  let sum = 0, absSum = 0, min = Infinity, max = -Infinity;
  for (const v of t.data) {
    const x = Number(v);
    sum += x;
    absSum += Math.abs(x);
    if (x < min) min = x;
    if (x > max) max = x;
  }
  return { name, dtype: t.type, shape: t.dims.map(Number), sum, abs_sum: absSum, min, max,
           fnv1a: fnv1a(tensorBytes(t)) };
}

/** Create an onnxruntime CPU session with `threads` intra-op threads, sequential execution. */
export function createSession(model, { threads = 1, opt = 'all', profilePrefix = null } = {}) {
  return ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: opt,
    // onnxruntime's own per-node profile (bench/onnx_exec.mjs --step-profile), written at
    // endProfiling() to PREFIX_<date>.json.
    ...(profilePrefix ? { enableProfiling: true, profileFilePrefix: profilePrefix } : {}),
  });
}

/**
 * The input spec [{name, shape, dtype}] from a JSON file or from the session's metadata; a
 * symbolic dimension (a name such as "batch", as the zoo's JSON lists dynamic axes) becomes 1,
 * unless the JSON gives the input an "example" shape (models/generate.py: the shape it was
 * exported at), which is then used.
 */
function inputSpec(session, specFile) {
  if (specFile)
    return JSON.parse(fs.readFileSync(specFile, 'utf8')).inputs.map((s) => ({
      ...s,
      shape: (s.example ?? s.shape).map((d) => (typeof d === 'number' && d >= 0 ? d : 1)),
    }));
  return session.inputMetadata.map((m) => ({
    name: m.name,
    dtype: m.type,
    shape: m.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : 1)),
  }));
}

function parseArgs(argv) {
  const opts = { seed: 0, runs: 0, threads: 1, opt: 'all', json: false, values: false };
  const valued = { '--inputs': 'inputs', '--spec': 'spec', '--seed': 'seed', '--save': 'save',
                   '--runs': 'runs', '--threads': 'threads', '--opt': 'opt' };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--json') opts.json = true;
    else if (a === '--values') opts.values = true;
    else if (a in valued) {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      const v = argv[++i];
      opts[valued[a]] = ['seed', 'runs', 'threads'].includes(valued[a]) ? Number(v) : v;
    } else if (a.startsWith('--')) throw new Error(`unknown option ${a}`);
    else if (opts.model) throw new Error(`unexpected argument ${a}`);
    else opts.model = a;
  }
  if (!opts.model) throw new Error('usage: node scripts/ort_run.mjs MODEL.onnx [options] (see header)');
  return opts;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const t0 = performance.now();
  const session = await createSession(opts.model, opts);
  const sessionMs = performance.now() - t0;

  let feeds;
  if (opts.inputs) {
    feeds = readInputs(opts.inputs);
  } else {
    const sibling = opts.model.replace(/\.onnx$/, '.json');
    const specFile = opts.spec ?? (sibling !== opts.model && fs.existsSync(sibling) ? sibling : null);
    const rand = mulberry32(opts.seed);
    feeds = {};
    for (const s of inputSpec(session, specFile)) feeds[s.name] = randomTensor(rand, s.dtype, s.shape);
  }

  const t1 = performance.now();
  const results = await session.run(feeds);
  const firstMs = performance.now() - t1;
  const times = [];
  for (let i = 0; i < opts.runs; ++i) {
    const t = performance.now();
    await session.run(feeds);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);

  const outputs = session.outputNames.map((n) => [n, results[n]]);
  if (opts.save) saveTensors(opts.save, Object.entries(feeds), outputs);
  const report = {
    model: opts.model,
    onnxruntime: ort.env.versions.node,
    threads: opts.threads,
    session_ms: sessionMs,
    first_run_ms: firstMs,
    ...(times.length ? { median_run_ms: times[times.length >> 1], runs: times.length } : {}),
    inputs: Object.entries(feeds).map(([n, t]) => summarize(n, t)),
    outputs: outputs.map(([n, t]) => ({
      ...summarize(n, t),
      ...(opts.values ? { values: Array.from(t.data, Number) } : {}),
    })),
  };
  if (opts.json) {
    console.log(toJson(report));
    return;
  }
  console.log(`${opts.model}: onnxruntime-node ${report.onnxruntime}, ${opts.threads} thread(s), ` +
              `session ${sessionMs.toFixed(1)} ms, first run ${firstMs.toFixed(1)} ms` +
              (times.length ? `, median of ${times.length} runs ${report.median_run_ms.toFixed(2)} ms` : ''));
  for (const [kind, list] of [['input', report.inputs], ['output', report.outputs]]) {
    for (const s of list) {
      console.log(`  ${kind} ${s.name} ${s.dtype}[${s.shape.join(',')}] sum=${s.sum.toPrecision(8)} ` +
                  `abs_sum=${s.abs_sum.toPrecision(8)} min=${s.min} max=${s.max} fnv1a=${s.fnv1a}`);
    }
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((e) => {
    console.error(`ort_run: ${e.message}`);
    process.exit(1);
  });
}
