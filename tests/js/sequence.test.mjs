// Sequences and optionals through GraphModule.run: a sequence is an array of tensors, an empty
// optional is null; test data of each kind through valueFromONNX.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { init, FxError, Graph, GraphModule, loadONNX, valueFromONNX } from '../../wasm/index.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const suite = process.env.FXWASM_ONNX_BACKEND_DIR ?? path.join(root, 'build/onnx-backend');

beforeAll(async () => {
  await init();
});

function expectFxError(f, kind) {
  let err;
  try {
    f();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(FxError);
  expect(err.kind).toBe(kind);
  return err;
}

const f32 = (shape, values) => ({ data: new Float32Array(values), shape });

test('sequence outputs are arrays of tensors', () => {
  // x[3, 2] -> SplitToSequence (rows) -> insert y at the back -> the sequence and its length
  const g = new Graph();
  const x = g.placeholder('x');
  const y = g.placeholder('y');
  const seq = g.callFunction('onnx.SplitToSequence', [x], { axis: 0 });
  const seq2 = g.callFunction('onnx.SequenceInsert', [seq, y]);
  g.output([seq2, g.callFunction('onnx.SequenceLength', [seq2])]);
  const gm = new GraphModule(g);
  const [s, n] = gm.run([f32([3, 2], [0, 1, 2, 3, 4, 5]), f32([1, 2], [8, 9])]);
  expect(Array.isArray(s)).toBe(true);
  expect(s.map((t) => t.shape)).toEqual([[1, 2], [1, 2], [1, 2], [1, 2]]);
  expect(Array.from(s[3].data)).toEqual([8, 9]);
  expect(n.dtype).toBe('int64');
  expect(n.data[0]).toBe(4n);
  gm.delete();
});

test('sequence inputs are arrays, an empty optional is null', () => {
  const g = new Graph();
  const s = g.placeholder('s');
  const o = g.placeholder('o');
  g.output([g.callFunction('onnx.ConcatFromSequence', [s], { axis: 1 }), g.callFunction('onnx.OptionalHasElement', [o])]);
  const gm = new GraphModule(g);
  const [c, has] = gm.run([[f32([1, 2], [1, 2]), f32([1, 1], [3])], null]);
  expect(c.shape).toEqual([1, 3]);
  expect(Array.from(c.data)).toEqual([1, 2, 3]);
  expect(has.dtype).toBe('bool');
  expect(has.data[0]).toBe(0);
  // An empty sequence names its element type; concatenating it is an error naming the node.
  const err = expectFxError(() => gm.run([{ sequence: [], dtype: 'float32' }, null]), 'RuntimeError');
  expect(err.message).toMatch(/ConcatFromSequence/);
  // A tensor op given a sequence fails with a typed error; the module still works after.
  const g2 = new Graph();
  g2.output(g2.callFunction('onnx.Relu', [g2.placeholder('x')]));
  const gm2 = new GraphModule(g2);
  expect(expectFxError(() => gm2.run([[f32([1], [1])]]), 'RuntimeError').message).toMatch(/sequence<float32>/);
  expect(Array.from(gm2.run([f32([2], [-1, 1])])[0].data)).toEqual([0, 1]);
  expectFxError(() => gm2.run([[{ data: 'no', shape: [1] }]]), 'TypeError');
  gm.delete();
  gm2.delete();
});

const haveSuite = fs.existsSync(path.join(suite, 'node/test_identity_opt'));

(haveSuite ? test : test.skip)('valueKinds and valueFromONNX read sequence and optional test data', () => {
  const dir = path.join(suite, 'node/test_identity_opt');
  const gm = loadONNX(fs.readFileSync(path.join(dir, 'model.onnx')));
  expect(gm.valueKinds()).toEqual({ inputs: ['optional'], outputs: ['optional'] });
  const input = valueFromONNX(fs.readFileSync(path.join(dir, 'test_data_set_0/input_0.pb')), 'optional');
  expect(Array.isArray(input)).toBe(true); // an optional holding a sequence
  const [out] = gm.run([input]);
  expect(out.length).toBe(input.length);
  expect(Array.from(out[0].data)).toEqual(Array.from(input[0].data));
  expect(gm.run([null])).toEqual([null]);
  expectFxError(() => valueFromONNX(new Uint8Array([1, 2]), 'map'), 'ValueError');
  gm.delete();
});
