#!/usr/bin/env node
// One side of the big-graph benchmark (bench/run_big_graph.sh), one JSON line per model:
//
//   node bench/big_graph.mjs fxwasm|ortnode MODEL.onnx
//
//   fxwasm   the npm package: loadONNX, the generated Python code, one run, toONNX; each step's
//            time, and the wasm heap (fx.heapSize(): linear memory, which never grows back, so
//            the peak) and live malloc bytes (heapUsed()) after all of them.
//   ortnode  onnxruntime-node (one intra-op thread): InferenceSession.create, one run.
//   Both: the process's peak RSS (process.resourceUsage().maxRSS).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const [side, file] = process.argv.slice(2);
const bytes = fs.readFileSync(file);
const x = new Float32Array(16).fill(0.5);
const ms = (t) => Math.round((performance.now() - t) * 10) / 10;
const row = { side, model: path.basename(file), file_mb: +(bytes.length / 2 ** 20).toFixed(1) };

if (side === 'fxwasm') {
  const fx = await (await import(path.join(ROOT, 'wasm/index.mjs'))).init();
  let t = performance.now();
  const gm = fx.loadONNX(bytes);
  row.load_ms = ms(t);
  row.nodes = gm.graph.nodes.length;
  t = performance.now();
  const code = gm.code;
  row.code_ms = ms(t);
  row.code_mb = +(code.length / 2 ** 20).toFixed(1);
  t = performance.now();
  const [y] = gm.run([{ data: x, shape: [1, 16] }]);
  row.run_ms = ms(t);
  row.y0 = y.data[0];
  t = performance.now();
  const out = gm.toONNX();
  row.export_ms = ms(t);
  row.export_mb = +(out.length / 2 ** 20).toFixed(1);
  row.wasm_heap_mb = Math.round(fx.heapSize() / 2 ** 20);
  row.live_mb = Math.round(fx.heapUsed() / 2 ** 20);
  gm.delete();
} else if (side === 'ortnode') {
  const ort = await import('onnxruntime-node');
  let t = performance.now();
  const s = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1, interOpNumThreads: 1 });
  row.load_ms = ms(t);
  t = performance.now();
  const r = await s.run({ x: new ort.Tensor('float32', x, [1, 16]) });
  row.run_ms = ms(t);
  row.y0 = r.y.data[0];
} else {
  throw new Error(`unknown side ${side}`);
}
row.rss_mb = Math.round(process.resourceUsage().maxRSS / 1024);
console.log(JSON.stringify(row));
