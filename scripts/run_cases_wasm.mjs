#!/usr/bin/env node
// Runs saved model cases on the npm package's wasm module and prints one JSON line per case with
// the largest difference from the saved outputs (scripts/check_torchvision.py's wasm side).
//
//   node scripts/run_cases_wasm.mjs [--threads N] CASE_DIR...
//
// A case folder holds model.onnx and the io.json + raw files of `scripts/ort_run.mjs --save`
// (inputs and onnxruntime's outputs). --threads N >= 2 loads the threaded module
// (init({ threads: N })) and refuses to run if it fell back to one thread. The difference of an
// output is max |ours - theirs| / max |theirs| (0 when both are all zeros); a case that throws
// reports its FxError kind and message.
import fs from 'node:fs';
import path from 'node:path';

import { init } from '../wasm/index.mjs';
import { readTensor } from './ort_run.mjs';

const argv = process.argv.slice(2);
let threads = 1;
const cases = [];
for (let i = 0; i < argv.length; ++i) {
  if (argv[i] === '--threads') threads = Number(argv[++i]);
  else cases.push(argv[i]);
}
const fx = await init(threads > 1 ? { threads } : {});
if (fx.threads().threads !== threads) {
  console.error(`asked for ${threads} threads, got ${JSON.stringify(fx.threads())}`);
  process.exit(2);
}

// A saved tensor (its size checked against its shape) as { type, dims, data }.
const readRaw = (dir, t) => readTensor(path.join(dir, t.file), t.dtype, t.shape);

for (const dir of cases) {
  const io = JSON.parse(fs.readFileSync(path.join(dir, 'io.json'), 'utf8'));
  const line = { case: path.basename(dir), threads };
  let gm;
  try {
    gm = fx.loadONNX(fs.readFileSync(path.join(dir, 'model.onnx')));
    const feeds = {};
    for (const t of io.inputs) feeds[t.name] = readRaw(dir, t);
    const out = gm.run(feeds);
    let worst = 0;
    for (const t of io.outputs) {
      const ref = readRaw(dir, t).data;
      const got = out[t.name];
      if (!got || got.data.length !== ref.length || got.dims.join() !== t.shape.join())
        throw new Error(`output ${t.name}: shape ${got ? got.dims : 'missing'}, expected ${t.shape}`);
      let scale = 0, diff = 0;
      for (let i = 0; i < ref.length; ++i) scale = Math.max(scale, Math.abs(Number(ref[i])));
      for (let i = 0; i < ref.length; ++i) {
        const d = Math.abs(Number(got.data[i]) - Number(ref[i]));
        diff = Math.max(diff, Number.isNaN(d) ? Infinity : d);
      }
      worst = Math.max(worst, diff === 0 ? 0 : diff / scale);
    }
    line.diff = worst;
  } catch (e) {
    line.error = `${e.kind ?? e.name}: ${e.message}`;
  } finally {
    gm?.delete();
  }
  console.log(JSON.stringify(line));
}
