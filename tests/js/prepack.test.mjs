// gm.run keeps a model's GEMM weights only in their packed form (fx::exec::prepack_weights):
// the tensors still read back, export and run as before, and the wasm heap holds them once.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { init } from '../../wasm/index.mjs';
import { randomInputs } from '../../wasm/inputs.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const zoo = (name) => fs.readFileSync(path.join(root, 'models/zoo', `${name}.onnx`));
let fx;
beforeAll(async () => {
  fx = await init();
});

test.each(['transformer_encoder', 'gpt_block', 'mlp'])('after gm.run, %s reads back, exports and runs the same', (name) => {
  const gm = fx.loadONNX(zoo(name));
  const infos = [...gm.namedParameters(), ...gm.namedBuffers()];
  const data = new Map(infos.map(([t]) => [t, gm.getTensorData(t)]));
  const onnx = gm.toONNX();
  const code = gm.code;
  const inputs = randomInputs(gm, 7);
  const first = gm.run(inputs);

  expect([...gm.namedParameters(), ...gm.namedBuffers()]).toEqual(infos);
  for (const [t, bytes] of data) expect(gm.getTensorData(t)).toEqual(bytes);
  expect(gm.toONNX()).toEqual(onnx);
  expect(gm.code).toBe(code);
  const again = gm.run(inputs);
  expect(again.length).toBe(first.length);
  for (let i = 0; i < first.length; i++) expect(again[i].data).toEqual(first[i].data);

  // The exported model, imported afresh, gives the same outputs.
  const back = fx.loadONNX(gm.toONNX());
  const fresh = back.run(inputs);
  for (let i = 0; i < first.length; i++) expect(fresh[i].data).toEqual(first[i].data);
  back.delete();
  gm.delete();
});
