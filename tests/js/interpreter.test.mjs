// torch.fx parity in JS (issue 17): Interpreter and Transformer with overridable per-node methods
// running on fxwasm's kernels; splitModule, extractSubgraph, splitConstSubgraphs, findNodes,
// mapArg and graph.toJSON().
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { init, FxError } from '../../wasm/index.mjs';
import { randomInputs } from '../../wasm/inputs.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const zoo = (name) => fs.readFileSync(path.join(root, 'models/zoo', `${name}.onnx`));
let fx;
beforeAll(async () => {
  fx = await init();
});

function maxRelDiff(a, b) {
  expect(a.shape).toEqual(b.shape);
  expect(a.dtype).toBe(b.dtype);
  let worst = 0;
  for (let i = 0; i < a.data.length; i++) worst = Math.max(worst, Math.abs(Number(a.data[i]) - Number(b.data[i])) / Math.max(1, Math.abs(Number(b.data[i]))));
  return worst;
}

test.each(['squeezenet1_1', 'transformer_encoder', 'lstm', 'gpt_block'])('Interpreter.run(%s) gives what gm.run gives', (name) => {
  const gm = fx.loadONNX(zoo(name));
  const inputs = randomInputs(gm, 11);
  const want = gm.run(inputs);
  let got = new fx.Interpreter(gm).run(...inputs);
  got = Array.isArray(got) ? got : [got];
  expect(got.length).toBe(want.length);
  // gm.run fuses some patterns (Relu into Conv, LayerNorm), within float rounding.
  for (let i = 0; i < want.length; i++) expect(maxRelDiff(got[i], want[i])).toBeLessThan(1e-5);
  gm.delete();
});

test('Interpreter runs If bodies (sub-GraphModules) through the node meta', () => {
  for (const which of ['if_then', 'if_else']) {
    const dir = path.join(root, 'tests/onnx_ops', which);
    const gm = fx.loadONNX(fs.readFileSync(path.join(root, 'tests/onnx_ops', `${which}.onnx`)));
    const kinds = gm.valueKinds();
    const inputs = fs
      .readdirSync(path.join(dir, 'test_data_set_0'))
      .filter((f) => /^input_\d+\.pb$/.test(f))
      .sort()
      .map((f, i) => fx.valueFromONNX(fs.readFileSync(path.join(dir, 'test_data_set_0', f)), kinds.inputs[i]));
    const want = gm.run(inputs);
    const got = new fx.Interpreter(gm).run(...inputs);
    expect(maxRelDiff(Array.isArray(got) ? got[0] : got, want[0])).toBe(0);
    gm.delete();
  }
});

test('an Interpreter subclass overrides runNode and callFunction (shape recording, op swap)', () => {
  const gm = fx.loadONNX(zoo('squeezenet1_1'));
  const inputs = randomInputs(gm, 5);
  class ShapeRecorder extends fx.Interpreter {
    constructor(m) {
      super(m);
      this.shapes = new Map();
    }
    runNode(n) {
      const v = super.runNode(n);
      if (v && v.shape) this.shapes.set(n.name, v.shape);
      return v;
    }
  }
  const rec = new ShapeRecorder(gm);
  rec.run(...inputs);
  gm.shapeProp(inputs);
  let checked = 0;
  for (const n of gm.graph.nodes) {
    const meta = n.meta.tensor_meta;
    if (n.op !== 'call_function' || !meta) continue;
    expect(rec.shapes.get(n.name)).toEqual(Array.from(meta.shape));
    checked++;
  }
  expect(checked).toBeGreaterThan(40);

  // Relu -> Sigmoid at run time: the output changes, and matches a graph edited the same way.
  class Swap extends fx.Interpreter {
    callFunction(target, args, kwargs) {
      return super.callFunction(target === 'onnx.Relu' ? 'onnx.Sigmoid' : target, args, kwargs);
    }
  }
  const swapped = new Swap(gm).run(...inputs);
  const plain = new fx.Interpreter(gm).run(...inputs);
  expect(maxRelDiff(swapped, plain)).toBeGreaterThan(1e-3);
  const edited = fx.loadONNX(zoo('squeezenet1_1'));
  for (const n of edited.graph.findNodes({ op: 'call_function', target: 'onnx.Relu' })) {
    const s = edited.graph.insertingAfter(n);
    const sig = edited.graph.callFunction('onnx.Sigmoid', n.args);
    s.restore();
    n.replaceAllUsesWith(sig);
    edited.graph.eraseNode(n);
  }
  edited.recompile();
  expect(maxRelDiff(swapped, edited.run(inputs)[0])).toBeLessThan(1e-5);

  // getAttr gives a reference whose tensor() reads the weight.
  const w = gm.graph.findNodes({ op: 'get_attr' })[0];
  const ref = new fx.Interpreter(gm).fetchAttr(w.target);
  expect(ref).toBeInstanceOf(fx.AttributeRef);
  const t = ref.tensor();
  const info = gm.namedParameters().concat(gm.namedBuffers()).find(([k]) => k === w.target)[1];
  expect(t.shape).toEqual(info.shape);
  expect(t.data.length).toBe(info.shape.reduce((a, b) => a * b, 1));
  gm.delete();
  edited.delete();
});

test('Interpreter errors name the node and leave the module usable', () => {
  const gm = fx.loadONNX(zoo('mlp'));
  const inputs = randomInputs(gm, 1);
  expect(() => new fx.Interpreter(gm).run()).toThrow(/Expected positional argument/);
  class Bad extends fx.Interpreter {
    callFunction(target, args, kwargs) {
      return super.callFunction(target === 'onnx.Gemm' ? 'onnx.NoSuchOp' : target, args, kwargs);
    }
  }
  let err;
  try {
    new Bad(gm).run(...inputs);
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(FxError);
  expect(err.message).toMatch(/NoSuchOp/);
  expect(err.message).toMatch(/gemm/);
  expect(() => new fx.Interpreter({})).toThrow(/expected a GraphModule/);
  expect(maxRelDiff(new fx.Interpreter(gm).run(...inputs), gm.run(inputs)[0])).toBeLessThan(1e-5);
  // Each op call makes and frees a scratch graph and module: nothing stays behind.
  fx.releaseCachedMemory();
  const heap = fx.heapUsed();
  const handles = fx.liveHandles();
  for (let i = 0; i < 30; i++) new fx.Interpreter(gm).run(...inputs);
  fx.releaseCachedMemory();
  expect(fx.liveHandles()).toBe(handles);
  expect(fx.heapUsed() - heap).toBeLessThanOrEqual(1 << 20);
  gm.delete();
});

test('Transformer rewrites targets into a new GraphModule that runs and exports', () => {
  const gm = fx.loadONNX(zoo('squeezenet1_1'));
  const inputs = randomInputs(gm, 3);
  class ReluToSigmoid extends fx.Transformer {
    callFunction(target, args, kwargs) {
      return super.callFunction(target === 'onnx.Relu' ? 'onnx.Sigmoid' : target, args, kwargs);
    }
  }
  const out = new ReluToSigmoid(gm).transform();
  expect(out).toBeInstanceOf(fx.GraphModule);
  expect(out.graph.findNodes({ op: 'call_function', target: 'onnx.Relu' })).toEqual([]);
  const sigmoids = out.graph.findNodes({ op: 'call_function', target: 'onnx.Sigmoid' }).length;
  expect(sigmoids).toBe(gm.graph.findNodes({ op: 'call_function', target: 'onnx.Relu' }).length);
  expect(out.inputNames).toEqual(gm.inputNames);
  out.graph.lint();
  class Swap extends fx.Interpreter {
    callFunction(target, args, kwargs) {
      return super.callFunction(target === 'onnx.Relu' ? 'onnx.Sigmoid' : target, args, kwargs);
    }
  }
  const want = new Swap(gm).run(...inputs);
  expect(maxRelDiff(out.run(inputs)[0], want)).toBeLessThan(1e-5);
  // The module meta (opsets) and node meta came along: the result exports and reloads.
  const again = fx.loadONNX(out.toONNX());
  expect(maxRelDiff(again.run(inputs)[0], want)).toBeLessThan(1e-5);
  // An identity Transformer gives the same graph text.
  const same = new fx.Transformer(gm).transform();
  expect(same.code).toBe(gm.code);
  for (const m of [gm, out, again, same]) m.delete();
});

test('extractSubgraph, splitModule and splitConstSubgraphs make modules that compute the same', () => {
  const gm = fx.loadONNX(zoo('squeezenet1_1'));
  const inputs = randomInputs(gm, 9);
  const want = gm.run(inputs)[0];
  const calls = gm.graph.findNodes({ op: 'call_function' });

  // The first half as its own module, from the input to a middle node.
  const mid = calls[Math.floor(calls.length / 2)];
  const head = gm.extractSubgraph([gm.graph.findNodes({ op: 'placeholder' })[0]], [mid.name]);
  const probe = gm.run(inputs, { probe: [mid.name] }).probes[mid.name];
  expect(maxRelDiff(head.run(inputs)[0], probe)).toBe(0);
  expect(() => gm.extractSubgraph([mid.name], [calls[calls.length - 1].name])).toThrow(FxError); // boundary not closed
  expect(() => gm.extractSubgraph(['nope'], [mid.name])).toThrow(/nope/);

  // Two partitions by position; the split module runs submod_0 then submod_1.
  const half = new Set(calls.slice(0, calls.length / 2).map((n) => n.name));
  const qualnames = new Map();
  const split = gm.splitModule((n) => (half.has(n.name) ? 0 : 1), { qualnameMap: qualnames });
  expect(split.code).toMatch(/submod_0 = self\.submod_0\(/);
  expect(split.code).toMatch(/submod_1 = self\.submod_1\(/);
  expect(split.namedModules().map(([n]) => n)).toEqual(expect.arrayContaining(['submod_0', 'submod_1']));
  expect(() => gm.splitModule((n) => 'a')).toThrow(/not an integer/);

  // Constant subgraphs: a graph with a computed constant.
  const g = new fx.Graph();
  const x = g.placeholder('x');
  const w = g.getAttr('w');
  const w2 = g.callFunction('onnx.Mul', [w, w]);
  g.output(g.callFunction('onnx.Add', [x, w2]));
  const m = new fx.GraphModule(g, { root: { parameters: { w: { dtype: 'float32', shape: [2], data: new Float32Array([2, 3]) } } } });
  const folded = m.splitConstSubgraphs();
  expect(folded.constSubgraphModule).toBeInstanceOf(fx.GraphModule);
  expect(folded.constSubgraphModule.graph.findNodes({ op: 'call_function', target: 'onnx.Mul' }).length).toBe(1);
  expect(folded.module.graph.findNodes({ op: 'call_function', target: 'onnx.Mul' })).toEqual([]);
  expect(folded.attrsName).toBe('_FX_CONST_FOLDED_ATTRS');
  const skipped = m.splitConstSubgraphs({ skipFoldingNode: (n) => n.target === 'onnx.Mul' });
  expect(skipped.constSubgraphModule).toBeNull();
  for (const k of [gm, head, split, m, folded.module, folded.constSubgraphModule, skipped.module]) k.delete();
  expect(want.shape).toEqual([1, 1000]);
});

test('findNodes, mapArg and graph.toJSON()', () => {
  const g = new fx.Graph();
  const x = g.placeholder('x');
  const a = g.callFunction('operator.add', [x, 1], { alpha: fx.float(2) });
  const t = g.callFunction('builtins.tuple', [fx.tuple([a, x, [a, fx.slice(1, null, 2)]])]);
  g.output(t);
  expect(g.findNodes({ op: 'call_function', target: 'operator.add' })).toEqual([a]);
  expect(g.findNodes({ op: 'placeholder' })).toEqual([x]);
  expect(() => g.findNodes({ op: 'call' })).toThrow(expect.objectContaining({ kind: 'TypeError' }));

  const names = fx.mapArg(t.args, (n) => n.name);
  expect(names[0]).toBeInstanceOf(fx.FxTuple);
  expect(names).toEqual([fx.tuple(['add', 'x', ['add', fx.slice(1, null, 2)]])]);
  expect(fx.mapAggregate([1, [2, 3]], (v) => v * 10)).toEqual([10, [20, 30]]);

  const j = JSON.parse(JSON.stringify(g));
  expect(j.nodes.map((n) => [n.name, n.op, n.target])).toEqual([
    ['x', 'placeholder', 'x'],
    ['add', 'call_function', 'operator.add'],
    ['tuple_1', 'call_function', 'builtins.tuple'],
    ['output', 'output', 'output'],
  ]);
  expect(j.nodes[1].args).toEqual([{ node: 'x' }, 1]);
  expect(j.nodes[1].kwargs).toEqual({ alpha: 2 });
  expect(j.nodes[1].users).toEqual(['tuple_1']);
  expect(j.nodes[2].args).toEqual([[{ node: 'add' }, { node: 'x' }, [{ node: 'add' }, { slice: [1, null, 2] }]]]);

  // An imported model: meta (tensor types, ONNX names) comes as plain JSON.
  const gm = fx.loadONNX(zoo('mlp'));
  const s = JSON.stringify(gm.graph);
  const jm = JSON.parse(s);
  expect(jm.nodes.length).toBe(gm.graph.size);
  expect(jm.nodes[0].meta.onnx_type.dtype).toBe('float32'); // meta dtypes: the tensor spelling
  gm.delete();
  g.delete();
});
