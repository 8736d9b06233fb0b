#!/usr/bin/env node
// Step 2 of scripts/gen_onnx_op_tests.sh: run every case of DIR/manifest.json (default
// tests/onnx_ops) with onnxruntime-node on its inputs (CASE/test_data_set_0/io.json + input_N.bin)
// and write the outputs as raw output_N.bin files, listed in that io.json with dtype and shape.
// A case onnxruntime refuses gets {"error": message} in its io.json instead; step 3
// (gen_onnx_op_tests.py outputs) turns the outputs into TensorProto files and drops refused cases.
//
//   node scripts/gen_onnx_op_outputs.mjs [DIR]
import fs from 'node:fs';
import path from 'node:path';
import { createSession, readInputs, saveTensors, toJson } from './ort_run.mjs';

const dir = process.argv[2] ?? 'tests/onnx_ops';
const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
let refused = 0;
for (const c of manifest.cases) {
  const dataDir = path.join(dir, c.data);
  const ioFile = path.join(dataDir, 'io.json');
  try {
    const session = await createSession(path.join(dir, c.model));
    const feeds = readInputs(dataDir);
    const results = await session.run(feeds);
    saveTensors(dataDir, Object.entries(feeds), session.outputNames.map((n) => [n, results[n]]));
    await session.release();
  } catch (e) {
    const io = JSON.parse(fs.readFileSync(ioFile, 'utf8'));
    io.error = String(e.message).split('\n')[0];
    fs.writeFileSync(ioFile, toJson(io) + '\n');
    console.error(`${c.name}: onnxruntime refused: ${io.error}`);
    ++refused;
  }
}
console.log(`step 2: onnxruntime-node ran ${manifest.cases.length - refused} of ` +
            `${manifest.cases.length} cases (${refused} refused)`);
