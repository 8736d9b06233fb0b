// Pattern matching on ONNX graphs from JS: matchPattern (torch.fx's SubgraphMatcher, match only)
// returns Node handles; ignoreLiterals lets onnx.Conv(x, w, b) match every Conv whatever its
// attributes (kwargs); replacePattern reports the nodes each replacement added.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { init, FxError } from '../../wasm/index.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
let fx;
beforeAll(async () => {
  fx = await init();
});

function convRelu() {
  const p = new fx.Graph();
  const x = p.placeholder('x');
  const w = p.placeholder('w');
  const b = p.placeholder('b');
  p.output(p.callFunction('onnx.Relu', [p.callFunction('onnx.Conv', [x, w, b])]));
  return p;
}

test('matchPattern finds Conv -> Relu in an ONNX graph only with ignoreLiterals, as Node handles', () => {
  const gm = fx.loadONNX(fs.readFileSync(path.join(root, 'models/zoo/resnet18.onnx')));
  const pattern = convRelu();
  expect(fx.matchPattern(gm, pattern)).toEqual([]); // the attributes differ from the pattern's none
  const matches = fx.matchPattern(gm, pattern, { ignoreLiterals: true });
  // Every Relu whose input is a Conv (and whose Conv has no other user).
  const expected = gm.graph.nodes.filter(
    (n) => n.target === 'onnx.Relu' && n.args[0] instanceof fx.Node && n.args[0].target === 'onnx.Conv' && n.args[0].users.length === 1,
  );
  expect(expected.length).toBeGreaterThan(5);
  expect(matches.map((m) => m.returningNodes[0])).toEqual(expected);
  for (const m of matches) {
    expect(m.returningNodes[0]).toBeInstanceOf(fx.Node);
    const [x, w, b] = m.placeholderNodes;
    const conv = m.returningNodes[0].args[0];
    expect(conv.args).toEqual([x, w, b]);
    expect([...m.nodesMap.keys()].every((k) => k.graph === pattern)).toBe(true);
  }
  expect(() => fx.matchPattern(gm, pattern, { ignoreLiterals: 'yes' })).toThrow(FxError);
  gm.delete();
  pattern.delete();
});

test('replacePattern with ignoreLiterals, and the replacement nodes it reports', () => {
  const gm = fx.loadONNX(fs.readFileSync(path.join(root, 'models/zoo/resnet18.onnx')));
  const relus = gm.graph.nodes.filter((n) => n.target === 'onnx.Relu').length;
  const pattern = new fx.Graph();
  const x = pattern.placeholder('x');
  pattern.output(pattern.callFunction('onnx.Relu', [x]));
  const replacement = new fx.Graph();
  const y = replacement.placeholder('x');
  replacement.output(replacement.callFunction('onnx.LeakyRelu', [y], { alpha: fx.float(0.125) }));
  const r = fx.replacePattern(gm, pattern, replacement, { ignoreLiterals: true });
  expect(r.length).toBe(relus);
  for (const m of r) {
    expect(m.replacements).toHaveLength(1);
    expect(m.replacements[0]).toBeInstanceOf(fx.Node);
    expect(m.replacements[0].target).toBe('onnx.LeakyRelu');
    expect(m.replacements[0].erased).toBe(false);
  }
  expect(gm.graph.nodes.filter((n) => n.target === 'onnx.Relu')).toEqual([]);
  gm.graph.lint();
  const [out] = gm.run([{ data: new Float32Array(3 * 224 * 224).fill(0.5), shape: [1, 3, 224, 224] }]);
  expect(out.shape).toEqual([1, 1000]);
  gm.delete();
});
