// String tensors through GraphModule.run: data is an array of strings (dtype 'string', as in
// onnxruntime-web), in and out; Cast to and from strings, StringNormalizer; ops that do not take
// strings refuse them with an FxError naming the node, and the instance keeps working.
import { init, FxError, Graph, GraphModule, tensorToONNX, tensorFromONNX } from '../../wasm/index.mjs';

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

test('Cast float32 -> string -> int64, and StringNormalizer, with string tensors in and out', () => {
  const g = new Graph();
  const x = g.placeholder('x');
  const words = g.placeholder('words');
  const s = g.callFunction('onnx.Cast', [x], { to: 8 });
  const back = g.callFunction('onnx.Cast', [s], { to: 1 });
  const norm = g.callFunction('onnx.StringNormalizer', [words], { case_change_action: 'LOWER', stopwords: ['the'] });
  g.output([s, back, norm]);
  const gm = new GraphModule(g);
  const [str, num, out] = gm.run([
    { data: new Float32Array([0.5, 100, 1e-5, -0.039187793]), shape: [2, 2] },
    { data: ['The', 'Quick', 'ÉTÉ', 'the'], shape: [4], dtype: 'string' },
  ]);
  expect(str).toEqual({ dtype: 'string', shape: [2, 2], data: ['0.5', '100.0', '1e-05', '-0.039187793'] });
  expect(Array.from(num.data)).toEqual(Array.from(new Float32Array([0.5, 100, 1e-5, -0.039187793])));
  // ASCII case mapping; other UTF-8 bytes are kept.
  expect(out).toEqual({ dtype: 'string', shape: [2], data: ['quick', 'ÉtÉ'] });
  gm.delete();
});

test('bad string data is an FxError; string tensors into other ops name the node', () => {
  const g = new Graph();
  const w = g.placeholder('w');
  g.output(g.callFunction('onnx.Add', [w, w]));
  const gm = new GraphModule(g);
  expectFxError(() => gm.run([{ data: ['a', 2], shape: [2], dtype: 'string' }]), 'TypeError');
  expectFxError(() => gm.run([{ data: ['a'], shape: [2], dtype: 'string' }]), 'ValueError');
  const e = expectFxError(() => gm.run([{ data: ['a', 'b'], shape: [2], dtype: 'string' }]), 'RuntimeError');
  expect(e.message).toMatch(/add.*does not take string tensors/);
  // The instance keeps working.
  expect(Array.from(gm.run([{ data: new Float32Array([1, 2]), shape: [2] }])[0].data)).toEqual([2, 4]);
  gm.delete();
});

test('string tensors round-trip through tensorToONNX / tensorFromONNX', () => {
  const t = { data: ['a', '', 'été'], shape: [3], dtype: 'string' };
  const back = tensorFromONNX(tensorToONNX(t, 'w'));
  expect(back.dtype).toBe('string');
  expect(back.shape).toEqual([3]);
  expect(back.data).toEqual(['a', '', 'été']);
});
