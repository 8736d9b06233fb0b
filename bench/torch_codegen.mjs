// ONNX to PyTorch in wasm: the time of lowerToTorch + toFolder on a model (issue 15's target:
// ResNet-50 in <= 1 s), median of N rounds after one warm-up, and the package's size.
//
//   node bench/torch_codegen.mjs models/zoo/resnet50.onnx [--runs 5]
//
// (models/zoo/resnet50.onnx is benchmark-only: /usr/bin/python3 models/generate.py --bench
// --only resnet50.) The Python converters (onnx2torch) would be the peer; PyPI is not reachable
// from this machine, so there is no peer figure.
import fs from 'node:fs';
import { init } from '../wasm/index.mjs';
import { median } from './stats.mjs';

const args = process.argv.slice(2);
const model = args.find((a) => !a.startsWith('--'));
const runs = Number(args[args.indexOf('--runs') + 1] ?? 5) || 5;
if (!model) {
  console.error('usage: node bench/torch_codegen.mjs MODEL.onnx [--runs N]');
  process.exit(2);
}
const fx = await init();
const bytes = fs.readFileSync(model);
const gm = fx.loadONNX(bytes);
const times = { lower: [], toFolder: [] };
let size = 0;
for (let r = 0; r <= runs; r++) {
  const t0 = performance.now();
  const t = fx.lowerToTorch(gm);
  const t1 = performance.now();
  const files = fx.toFolder(t, 'Net');
  const t2 = performance.now();
  size = Object.values(files).reduce((s, b) => s + b.byteLength, 0);
  t.delete();
  if (r === 0) continue;  // warm-up
  times.lower.push(t1 - t0);
  times.toFolder.push(t2 - t1);
}
gm.delete();
const lower = median(times.lower), folder = median(times.toFolder);
console.log(`${model}: ${(bytes.byteLength / 1e6).toFixed(1)} MB ONNX -> ${(size / 1e6).toFixed(1)} MB package`);
console.log(`  lowerToTorch ${lower.toFixed(0)} ms + toFolder ${folder.toFixed(0)} ms = ${(lower + folder).toFixed(0)} ms (median of ${runs}, wasm)`);
