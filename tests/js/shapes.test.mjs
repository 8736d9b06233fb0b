// Shape propagation without data in JS (issue 17): gm.shapeProp() / gm.inferShapes() type every
// node from the declared input types, keep dynamic dims symbolic, agree with a run, report what
// they cannot type, and refuse misuse with a typed error. Meta dtypes are the strings tensors use.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { init, FxError } from '../../wasm/index.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const zoo = (name) => fs.readFileSync(path.join(root, 'models/zoo', name));
let fx;
beforeAll(async () => {
  fx = await init();
});

function caught(f) {
  try {
    f();
  } catch (e) {
    return e;
  }
  throw new Error('did not throw');
}

const shapeOf = (n) => (n.meta.tensor_meta ? Array.from(n.meta.tensor_meta.shape) : undefined);
const outputValue = (gm) => gm.graph.findNodes({ op: 'output' })[0].args[0];

test('a dynamic transformer is typed without data, its named sizes kept through the shape arithmetic', () => {
  const gm = fx.loadONNX(zoo('transformer_dynamic.onnx'));
  const report = gm.shapeProp();
  expect(report.gaps).toEqual([]);
  expect(report.typed).toBe(report.total);
  const out = outputValue(gm);
  expect(shapeOf(out)).toEqual(['batch', 'seq', 32]);
  // The attention's Reshape computes its target from Shape/Gather/Concat: still symbolic.
  const reshapes = gm.graph.findNodes({ op: 'call_function', target: 'onnx.Reshape' }).map(shapeOf);
  expect(reshapes).toContainEqual(['seq', '4*batch', 8]);
  expect(reshapes).toContainEqual(['batch*seq', 32]);

  // One dtype spelling: meta and tensors agree.
  const [y] = gm.run([{ data: new Float32Array(2 * 5 * 32), shape: [2, 5, 32], dtype: 'float32' }]);
  expect(out.meta.tensor_meta.dtype).toBe('float32');
  expect(out.meta.tensor_meta.dtype).toBe(y.dtype);

  // Given sizes instead of the declared names.
  gm.inferShapes({ inputShapes: { src: [2, 'tokens', 32] } });
  expect(shapeOf(out)).toEqual([2, 'tokens', 32]);
  gm.inferShapes({ inputShapes: { src: [2, 5, 32] } });
  expect(shapeOf(out)).toEqual([2, 5, 32]);
  gm.delete();
});

test('every node of the CNNs agrees with a data-driven shapeProp', () => {
  for (const name of ['squeezenet1_1.onnx', 'cnn_dynamic.onnx', 'lstm.onnx', 'gpt_block.onnx']) {
    const gm = fx.loadONNX(zoo(name));
    const report = gm.inferShapes({ inputShapes: name === 'cnn_dynamic.onnx' ? { [gm.inputNames[0]]: [3, 3, 32, 32] } : {} });
    expect({ name, gaps: report.gaps }).toEqual({ name, gaps: [] });
    const inferred = new Map(gm.graph.nodes.filter((n) => n.meta.tensor_meta).map((n) => [n.name, [shapeOf(n), n.meta.tensor_meta.dtype]]));
    expect(inferred.size).toBeGreaterThan(10);
    const inputs = gm.graph.findNodes({ op: 'placeholder' }).map((p) => {
      const t = p.meta.onnx_type;
      const shape = Array.from(t.shape, (d) => (typeof d === 'number' ? d : 3));
      const n = shape.reduce((a, b) => a * b, 1);
      const data = t.dtype === 'int64' ? new BigInt64Array(n) : new Float32Array(n);
      return { data, shape, dtype: t.dtype };
    });
    gm.shapeProp(inputs);
    let compared = 0;
    for (const n of gm.graph.nodes) {
      if (!inferred.has(n.name)) continue;
      expect({ name, node: n.name, meta: inferred.get(n.name) }).toEqual({ name, node: n.name, meta: [shapeOf(n), n.meta.tensor_meta.dtype] });
      compared++;
    }
    expect(compared).toBe(inferred.size);
    gm.delete();
  }
});

test('what cannot be typed is reported, not guessed, and misuse is a ValueError', () => {
  const g = new fx.Graph();
  const x = g.placeholder('x');
  x.setMeta(fx.onnxMetaKeys.type, { dtype: 'float32', shape: fx.tuple(['n', 4]) });
  const odd = g.callFunction('onnx.NotAnOnnxOp', [x]);
  const relu = g.callFunction('onnx.Relu', [x]);
  g.output(fx.tuple([odd, relu]));
  const gm = new fx.GraphModule(g);
  odd.setMeta('tensor_meta', { shape: fx.tuple([1]), dtype: 'float32' });
  const r = gm.inferShapes();
  expect(r.gaps).toEqual([{ node: odd.name, target: 'onnx.NotAnOnnxOp', reason: 'no shape rule for onnx.NotAnOnnxOp' }]);
  expect(odd.meta.tensor_meta).toBeUndefined(); // the stale one is gone
  expect(relu.meta.tensor_meta).toEqual({ shape: fx.tuple(['n', 4]), dtype: 'float32' });

  let e = caught(() => gm.inferShapes({ inputShapes: { y: [1, 4] } }));
  expect(e).toBeInstanceOf(FxError);
  expect(e.kind).toBe('ValueError');
  expect(e.message).toContain("'y', which is not an input of the graph (inputs: x)");
  e = caught(() => gm.inferShapes({ inputShapes: { x: [1, 2.5] } }));
  expect(e.kind).toBe('ValueError');
  expect(e.message).toContain("inputShapes['x'][1] must be a size");
  e = caught(() => gm.inferShapes({ inputShapes: { x: 3 } }));
  expect(e.kind).toBe('ValueError');
  // The module still works.
  expect(gm.inferShapes({ inputShapes: { x: [2, 4] } }).typed).toBe(2);
  expect(relu.meta.tensor_meta.shape).toEqual(fx.tuple([2, 4]));
  gm.delete();
});

test('a meta dtype written as a string is read by export, as one written as fx.dtype()', () => {
  const g = new fx.Graph();
  const x = g.placeholder('x');
  x.setMeta(fx.onnxMetaKeys.type, { dtype: 'int64', shape: fx.tuple(['n']) });
  g.output(g.callFunction('onnx.Neg', [x]));
  const gm = new fx.GraphModule(g);
  const back = fx.loadONNX(gm.toONNX());
  const p = back.graph.findNodes({ op: 'placeholder' })[0];
  expect(p.meta.onnx_type).toEqual({ dtype: 'int64', shape: fx.tuple(['n']) });
  expect(back.inferShapes().gaps).toEqual([]);
  expect(outputValue(back).meta.tensor_meta).toEqual({ shape: fx.tuple(['n']), dtype: 'int64' });
  // Node arguments keep torch dtypes as FxDtype (they are Python values there).
  const c = g.callFunction('torch.zeros', [fx.tuple([2])], { dtype: fx.dtype('float16') });
  expect(c.kwargs.dtype).toBeInstanceOf(fx.FxDtype);
  gm.delete();
  back.delete();
});
