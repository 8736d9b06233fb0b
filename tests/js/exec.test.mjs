// Running graphs on fxwasm's kernels, passes and subgraph rewriting from JS.
import { init, FxError, Graph, GraphModule, runPasses, replacePattern } from '../../wasm/index.mjs';

let fx;
beforeAll(async () => {
  fx = await init();
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

// x[1,1,3,3] -> Conv(w[1,1,2,2], b) -> Relu
function convModel() {
  const g = new Graph();
  const x = g.placeholder('x');
  const conv = g.callFunction('onnx.Conv', [x, g.getAttr('w'), g.getAttr('b')], { kernel_shape: [2, 2] });
  g.output(g.callFunction('onnx.Relu', [conv]));
  return new GraphModule(g, {
    root: {
      parameters: {
        w: { shape: [1, 1, 2, 2], data: new Float32Array([1, 0, 0, -1]) },
        b: { shape: [1], data: new Float32Array([0.5]) },
      },
    },
  });
}

test('run executes onnx.* graphs and returns typed arrays', () => {
  const gm = convModel();
  expect(gm.coverage()).toEqual([]);
  const x = { data: new Float32Array([1, 2, 3, 4, 5, 6, 7, 8, 9]), shape: [1, 1, 3, 3] };
  const [y] = gm.run([x]);
  expect(y.dtype).toBe('float32');
  expect(y.shape).toEqual([1, 1, 2, 2]);
  // each output: x[i][j] - x[i+1][j+1] + 0.5 = -4 + 0.5, clamped at 0 by Relu
  expect(Array.from(y.data)).toEqual([0, 0, 0, 0]);
  const { outputs, probes } = gm.run([{ ...x, data: x.data.map((v) => -v) }], { probe: ['conv'] });
  expect(Array.from(probes.conv.data)).toEqual([4.5, 4.5, 4.5, 4.5]);
  expect(Array.from(outputs[0].data)).toEqual([4.5, 4.5, 4.5, 4.5]);
  gm.delete();
});

test('run({profile: true}) times each op it executes, in order; fused nodes are in their op', () => {
  const gm = convModel();
  const x = { data: new Float32Array(9).fill(-1), shape: [1, 1, 3, 3] };
  const plain = gm.run([x]);
  const r = gm.run([x], { profile: true });
  expect(Array.from(r.outputs[0].data)).toEqual(Array.from(plain[0].data));
  expect(r.probes).toEqual({});
  // The Relu runs inside the Conv's step (fused): one entry.
  expect(r.profile.map((t) => [t.node, t.op])).toEqual([['conv', 'onnx.Conv']]);
  expect(r.profile[0].ms).toBeGreaterThanOrEqual(0);
  // Probing the Conv makes the Relu a step of its own, timed too.
  const p = gm.run([x], { profile: true, probe: ['conv'] });
  expect(p.profile.map((t) => t.op)).toEqual(['onnx.Conv', 'onnx.Relu']);
  expect(Object.keys(p.probes)).toEqual(['conv']);
  expect(() => gm.run([x], { profile: 'yes' })).toThrow(expect.objectContaining({ kind: 'TypeError' }));
  gm.delete();
});

test('bad inputs and unknown ops are FxErrors naming the node; the module keeps working', () => {
  const gm = convModel();
  expectFxError(() => gm.run([{ data: new Float32Array(4), shape: [1, 1, 3, 3] }]), 'ValueError');
  expectFxError(() => gm.run([]), 'ValueError');
  const g = new Graph();
  const x = g.placeholder('x');
  g.output(g.callFunction('onnx.NoSuchOp', [x]));
  const bad = new GraphModule(g);
  expect(bad.coverage()).toEqual([{ node: 'no_such_op', target: 'onnx.NoSuchOp', reason: 'no implementation of onnx.NoSuchOp' }]);
  const e = expectFxError(() => bad.run([{ data: new Float32Array(1), shape: [1] }]), 'UnsupportedError');
  expect(e.node).toBe('no_such_op');
  const [y] = gm.run([{ data: new Float32Array(9), shape: [1, 1, 3, 3] }]);
  expect(Array.from(y.data)).toEqual([0.5, 0.5, 0.5, 0.5]);
  bad.delete();
  gm.delete();
});

test('runPasses folds constants with an equivalence check and rejects unknown passes', () => {
  const g = new Graph();
  const x = g.placeholder('x');
  const k = g.callFunction('onnx.Mul', [g.getAttr('two'), g.getAttr('three')]);
  g.output(g.callFunction('onnx.Add', [x, k]));
  const gm = new GraphModule(g, {
    root: {
      buffers: {
        two: { shape: [1], data: new Float32Array([2]) },
        three: { shape: [1], data: new Float32Array([3]) },
      },
    },
  });
  const input = { data: new Float32Array([1, 2]), shape: [2] };
  const reports = runPasses(gm, ['fold', 'dce'], { checkEquivalence: [input] });
  expect(reports.map((r) => [r.pass, r.modified])).toEqual([
    ['fold', true],
    ['dce', false],
  ]);
  expect(gm.code).not.toContain('onnx.Mul');
  expect(Array.from(gm.run([input])[0].data)).toEqual([7, 8]);
  expectFxError(() => runPasses(gm, ['no-such-pass']), 'ValueError');
  gm.delete();
});

test('replacePattern rewrites with Graph patterns', () => {
  const g = new Graph();
  const x = g.placeholder('x');
  const r = g.callFunction('torch.relu', [x]);
  g.output(g.callFunction('torch.neg', [r]));
  const gm = new GraphModule(g);
  const pattern = new Graph();
  pattern.output(pattern.callFunction('torch.relu', [pattern.placeholder('a')]));
  const replacement = new Graph();
  replacement.output(replacement.callFunction('torch.sigmoid', [replacement.placeholder('a')]));
  const matches = replacePattern(gm, pattern, replacement);
  expect(matches.map(({ replacements, ...m }) => m)).toEqual([{ anchor: 'relu', nodesMap: [['relu', 'relu'], ['a', 'x']] }]);
  expect(matches[0].replacements.map((n) => n.name)).toEqual(['sigmoid']);
  expect(gm.code).toContain('sigmoid = torch.sigmoid(x)');
  pattern.delete();
  replacement.delete();
  gm.delete();
});

test('replacePattern filters select matches; a throwing filter replaces nothing', () => {
  const build = () => {
    const g = new Graph();
    const x = g.placeholder('x');
    const r1 = g.callFunction('torch.relu', [x]);
    const n = g.callFunction('torch.neg', [r1]);
    g.output(g.callFunction('torch.relu', [n]));
    return new GraphModule(g);
  };
  const pattern = new Graph();
  pattern.output(pattern.callFunction('torch.relu', [pattern.placeholder('a')]));
  const replacement = new Graph();
  replacement.output(replacement.callFunction('torch.sigmoid', [replacement.placeholder('a')]));

  const gm = build();
  const seen = [];
  const matches = replacePattern(gm, pattern, replacement, {
    filters: [
      (m, original, pat) => {
        seen.push(m);
        expect(original).toBe(gm.graph);
        expect(pat).toBe(pattern);
        return m.placeholderNodes[0] === 'neg';
      },
    ],
  });
  expect(seen).toEqual([
    { anchors: ['relu'], nodesMap: [['relu', 'relu'], ['a', 'x']], placeholderNodes: ['x'], returningNodes: ['relu'] },
    { anchors: ['relu'], nodesMap: [['relu', 'relu_1'], ['a', 'neg']], placeholderNodes: ['neg'], returningNodes: ['relu_1'] },
  ]);
  expect(matches.map(({ replacements, ...m }) => m)).toEqual([{ anchor: 'relu', nodesMap: [['relu', 'relu_1'], ['a', 'neg']] }]);
  expect(matches[0].replacements.map((n) => n.target)).toEqual(['torch.sigmoid']);
  expect(gm.code).toContain('relu = torch.relu(x)');
  expect(gm.code).toContain('sigmoid = torch.sigmoid(neg)');
  gm.delete();

  const gm2 = build();
  const before = gm2.code;
  const boom = new RangeError('filter failed');
  expect(() => replacePattern(gm2, pattern, replacement, { filters: [() => true, () => { throw boom; }] })).toThrow(boom);
  expect(gm2.code).toBe(before);
  expectFxError(() => replacePattern(gm2, pattern, replacement, { filters: [1] }), 'TypeError');
  expect(replacePattern(gm2, pattern, replacement, { filters: [() => true] })).toHaveLength(2);
  gm2.delete();
  pattern.delete();
  replacement.delete();
});
