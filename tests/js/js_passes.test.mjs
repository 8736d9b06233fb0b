// JS passes in runPasses (checked like the registered ones) and SubgraphMatcher's options in
// matchPattern (issue 17).
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

// Relu(x) -> Max(x, 0)? No constants needed: Relu(Relu(x)) -> Relu(x), and Relu -> Sigmoid (wrong).
function dropDoubleRelu(gm) {
  let changed = false;
  for (const n of gm.graph.findNodes({ op: 'call_function', target: 'onnx.Relu' })) {
    const [x] = n.args;
    if (x instanceof fx.Node && x.target === 'onnx.Relu') {
      n.replaceAllUsesWith(x);
      gm.graph.eraseNode(n);
      changed = true;
    }
  }
  return changed;
}

test('JS passes run between registered ones, are linted, reported and equivalence-checked', () => {
  const gm = fx.loadONNX(zoo('squeezenet1_1'));
  const inputs = randomInputs(gm, 2);
  const want = gm.run(inputs)[0];
  // Make a Relu(Relu(x)) for the JS pass to remove.
  const relu = gm.graph.findNodes({ op: 'call_function', target: 'onnx.Relu' })[0];
  const ip = gm.graph.insertingAfter(relu);
  const again = gm.graph.callFunction('onnx.Relu', [relu]);
  ip.restore();
  relu.replaceAllUsesWith(again, (u) => u !== again);
  gm.recompile();
  const size = gm.graph.size;
  const reports = fx.runPasses(gm, ['dce', dropDoubleRelu, { name: 'noop', fn: () => false }, 'cse'], {
    checkEquivalence: inputs,
    maxIterations: 3,
  });
  expect(reports.slice(0, 4).map((r) => [r.pass, r.iteration, r.modified])).toEqual([
    ['dce', 0, false],
    ['dropDoubleRelu', 0, true],
    ['noop', 0, false],
    ['cse', 0, true],
  ]);
  expect(reports[1].nodesBefore - reports[1].nodesAfter).toBe(1);
  expect(gm.graph.size).toBeLessThan(size);
  const last = reports.filter((r) => r.iteration === reports.at(-1).iteration);
  expect(last.every((r) => !r.modified)).toBe(true); // stopped when nothing changed
  const got = gm.run(inputs)[0];
  for (let i = 0; i < want.data.length; i++) expect(Math.abs(got.data[i] - want.data[i])).toBeLessThan(1e-4);

  // A JS pass that changes the results is caught and named, like a registered one.
  const wrong = (m) => {
    const r = m.graph.findNodes({ op: 'call_function', target: 'onnx.Relu' })[0];
    r.replaceAllUsesWith(r.args[0]);
    m.graph.eraseNode(r);
    return true;
  };
  expect(() => fx.runPasses(gm, [wrong], { checkEquivalence: inputs })).toThrow(/pass 'wrong' changed what the graph computes: output 0 differs/);
  expect(() => fx.runPasses(gm, [() => 1])).toThrow(/must return whether it modified the graph/);
  expect(() => fx.runPasses(gm, [42])).toThrow(/pass names, functions/);
  gm.delete();
});

test('matchPattern takes SubgraphMatcher options: matchOutput, matchPlaceholder, removeOverlappingMatches', () => {
  const g = new fx.Graph();
  const x = g.placeholder('x');
  const a = g.callFunction('onnx.Relu', [x]);
  const b = g.callFunction('onnx.Relu', [a]);
  const c = g.callFunction('onnx.Relu', [b]);
  g.output(c);
  const gm = new fx.GraphModule(g);
  // Pattern Relu(Relu(p)).
  const p = new fx.Graph();
  p.output(p.callFunction('onnx.Relu', [p.callFunction('onnx.Relu', [p.placeholder('p')])]));
  expect(fx.matchPattern(gm, p).length).toBe(1); // (a, b) and (b, c) overlap: one is kept
  expect(fx.matchPattern(gm, p, { removeOverlappingMatches: false }).length).toBe(2);
  const ends = fx.matchPattern(gm, p, { matchOutput: true, removeOverlappingMatches: false });
  expect(ends.map((m) => m.returningNodes[0])).toEqual([c]);
  const starts = fx.matchPattern(gm, p, { matchPlaceholder: true, removeOverlappingMatches: false });
  expect(starts.map((m) => m.placeholderNodes[0])).toEqual([x]);
  expect(() => fx.matchPattern(gm, p, { matchOutput: 1 })).toThrow(/matchOutput must be a boolean/);
  gm.delete();
  p.delete();
});
