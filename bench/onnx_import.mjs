#!/usr/bin/env node
// One side of the ONNX import benchmark (bench/run_onnx_import.sh), one JSON line per model:
//
//   node bench/onnx_import.mjs fxwasm|ortnode|ortweb MODEL.onnx [--runs 5] [--min-ms 20]
//
//   fxwasm   loadONNX(bytes) of the wasm package: copy into the wasm heap, protobuf parse, build
//            the GraphModule (gm.delete() after each repetition, untimed). Also the wasm heap
//            (fx.heapSize(): the linear memory, which never shrinks, so after the first import
//            it is the peak) before and after the first import, and heapUsed() (live malloc
//            bytes) after it.
//   ortnode  onnxruntime-node InferenceSession.create(bytes), CPU, one intra-op thread.
//   ortweb   onnxruntime-web InferenceSession.create(bytes), wasm backend, one thread (the
//            backend is initialised on a tiny model first, untimed).
//
// The file is read before timing. `first_ms` is the first import in the process (cold: fresh
// pages, V8 tier-up); median/min are over --runs repetitions after it (several imports per
// repetition when one takes < --min-ms).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// The fxwasm package to load: FXWASM_PKG (a folder with wasm/index.mjs and dist/fx.{mjs,wasm};
// the run_*.sh scripts snapshot the package there, so a concurrent rebuild of dist/ cannot mix
// an old fx.mjs with a new fx.wasm mid-run), else the repository.
const PKG = process.env.FXWASM_PKG ? path.resolve(process.env.FXWASM_PKG) : ROOT;

async function timeIt(fn, after, { runs, minMs }) {
  const t0 = performance.now();
  after(await fn());
  const first = performance.now() - t0;
  const inner = Math.max(1, Math.ceil(minMs / first));
  const ts = [];
  for (let r = 0; r < runs; ++r) {
    let total = 0;
    for (let i = 0; i < inner; ++i) {
      const t = performance.now();
      const x = await fn();
      total += performance.now() - t;
      after(x);
    }
    ts.push(total / inner);
  }
  ts.sort((a, b) => a - b);
  return { first_ms: first, median_ms: ts[ts.length >> 1], min_ms: ts[0], runs, inner };
}

async function main() {
  const argv = process.argv.slice(2);
  const opts = { runs: 5, minMs: 20 };
  const pos = [];
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === '--runs') opts.runs = Number(argv[++i]);
    else if (argv[i] === '--min-ms') opts.minMs = Number(argv[++i]);
    else pos.push(argv[i]);
  }
  const [side, model] = pos;
  if (!side || !model) throw new Error('usage: onnx_import.mjs fxwasm|ortnode|ortweb MODEL.onnx');
  const bytes = new Uint8Array(fs.readFileSync(model));
  const base = { impl: side, model: path.basename(model, '.onnx'), file_bytes: bytes.byteLength };
  let r;
  if (side === 'fxwasm') {
    const { default: init } = await import(path.join(PKG, 'wasm/index.mjs'));
    const fx = await init();
    const heapBefore = fx.heapSize(), usedBefore = fx.heapUsed();
    const t0 = performance.now();
    const gm = fx.loadONNX(bytes);
    const first = performance.now() - t0;
    const heapAfter = fx.heapSize(), usedAfter = fx.heapUsed();
    const nodes = gm.graph.nodes.length;
    gm.delete();
    const t = await timeIt(() => fx.loadONNX(bytes), (g) => g.delete(), opts);
    r = { ...base, ...t, first_ms: first, nodes, heap_before: heapBefore, heap_after: heapAfter,
          heap_growth: heapAfter - heapBefore, heap_used_before: usedBefore,
          heap_used_after: usedAfter, heap_final: fx.heapSize() };
  } else if (side === 'ortnode') {
    const { createSession } = await import(path.join(ROOT, 'scripts/ort_run.mjs'));
    const ort = (await import('onnxruntime-node')).default;
    const t = await timeIt(() => createSession(bytes, { threads: 1 }), (s) => s.release?.(), opts);
    r = { ...base, ...t, onnxruntime_node: ort.env.versions.node };
  } else if (side === 'ortweb') {
    const ort = await import('onnxruntime-web');
    ort.env.wasm.numThreads = 1;
    ort.env.wasm.simd = true;
    ort.env.wasm.wasmPaths = path.join(ROOT, 'node_modules/onnxruntime-web/dist/');
    const so = { executionProviders: ['wasm'], graphOptimizationLevel: 'all' };
    await ort.InferenceSession.create(fs.readFileSync(path.join(ROOT, 'models/zoo/mymodule.onnx')), so);
    const t = await timeIt(() => ort.InferenceSession.create(bytes, so), (s) => s.release?.(), opts);
    r = { ...base, ...t, onnxruntime_web: ort.env.versions.web };
  } else {
    throw new Error(`unknown side ${side}`);
  }
  console.log(JSON.stringify(r));
}

main().then(() => process.exit(0), (e) => {
  console.error(`onnx_import.mjs: ${e.stack ?? e}`);
  process.exit(1);
});
