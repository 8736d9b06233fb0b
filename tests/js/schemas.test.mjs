// Graphs are checked against ONNX's op schemas (issue 17): lint(), coverage() and toONNX name the
// node and the rule where onnx.checker / onnxruntime would refuse the model; imported models and
// their exports after every pass are clean.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { init, FxError } from '../../wasm/index.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
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

test('a Clip written in its opset-6 form is refused by lint, listed by coverage and not exported', () => {
  const gm = fx.loadONNX(fs.readFileSync(path.join(root, 'models/zoo/resnet18.onnx')));
  const relu = gm.graph.findNodes({ op: 'call_function', target: 'onnx.Relu' })[0];
  const ip = gm.graph.insertingBefore(relu);
  const clip = gm.graph.callFunction('onnx.Clip', [relu.args[0]], { min: fx.float(0), max: fx.float(6) });
  ip.restore();
  relu.replaceAllUsesWith(clip);
  gm.graph.eraseNode(relu);
  gm.graph.lint(); // torch.fx's checks pass: the graph is well formed
  const opset = Number(gm.meta[fx.onnxMetaKeys.opsetImport][''] ?? gm.meta[fx.onnxMetaKeys.opsetImport]['ai.onnx']);
  const at = `Clip-${opset >= 13 ? 13 : opset} (opset ${opset})`;
  expect(gm.checkSchemas()).toEqual([
    { node: clip.name, target: 'onnx.Clip', rule: `attribute 'min' is not in the schema of ${at}, which has no attributes` },
    { node: clip.name, target: 'onnx.Clip', rule: `attribute 'max' is not in the schema of ${at}, which has no attributes` },
  ]);
  const lint = caught(() => gm.lint());
  expect(lint).toBeInstanceOf(FxError);
  expect(lint.kind).toBe('SchemaError');
  expect(lint.node).toBe(clip.name);
  expect(gm.coverage().map((g) => g.node)).toContain(clip.name);
  const exp = caught(() => gm.toONNX());
  expect(exp.kind).toBe('SchemaError');
  expect(exp.message).toMatch(new RegExp(`^node '${clip.name}' \\(onnx\\.Clip\\): attribute 'min' is not in the schema of Clip-\\d+`));
  // The opset-6 schema has those attributes.
  expect(gm.checkSchemas({ opset: 6 }).filter((p) => p.node === clip.name)).toEqual([]);

  // Written as the opset-13 form (min/max as inputs, or omitted): clean, exported, runs.
  clip.kwargs = {};
  expect(gm.checkSchemas()).toEqual([]);
  gm.lint();
  const again = fx.loadONNX(gm.toONNX());
  expect(again.checkSchemas()).toEqual([]);
  // A literal where a tensor goes is named too.
  clip.args = [clip.args[0], 0.5];
  expect(gm.checkSchemas()[0].rule).toMatch(/^input 1 of Clip-\d+ \(opset \d+\) must be a tensor \(a Node\) or None, got float 0\.5$/);
  expect(caught(() => gm.toONNX()).kind).toBe('SchemaError');
  gm.delete();
  again.delete();
});

test('every zoo model and the sample have no schema problems, as imported and after each pass', () => {
  const files = fs.readdirSync(path.join(root, 'models/zoo')).filter((f) => f.endsWith('.onnx') && f !== 'resnet50.onnx');
  files.push('../sample.onnx');
  for (const f of files) {
    const bytes = fs.readFileSync(path.join(root, 'models/zoo', f));
    const gm = fx.loadONNX(bytes);
    expect([f, gm.checkSchemas()]).toEqual([f, []]);
    gm.delete();
    for (const p of fx.passNames) {
      const m = fx.loadONNX(bytes);
      fx.runPasses(m, [p]);
      expect([f, p, m.checkSchemas()]).toEqual([f, p, []]);
      m.delete();
    }
  }
}, 120000);

test('an output pointed at another node is exported with that node\'s type, not the stale one', () => {
  const gm = fx.loadONNX(fs.readFileSync(path.join(root, 'models/zoo/resnet18.onnx')));
  const keys = fx.onnxMetaKeys;
  const typeOf = (m) => m.graph.outputNode.meta[keys.outputTypes][0];
  expect(Array.from(typeOf(gm).shape).map(Number)).toEqual([1, 1000]);
  const flatten = gm.graph.findNodes({ op: 'call_function', target: 'onnx.Flatten' })[0];
  gm.shapeProp([{ data: new Float32Array(3 * 224 * 224), shape: [1, 3, 224, 224] }]);
  gm.graph.outputNode.args = [flatten];
  gm.graph.eliminateDeadCode();
  gm.recompile();
  const again = fx.loadONNX(gm.toONNX());
  expect(Array.from(typeOf(again).shape).map(Number)).toEqual([1, 512]);
  expect(again.run([{ data: new Float32Array(3 * 224 * 224), shape: [1, 3, 224, 224] }])[0].shape).toEqual([1, 512]);
  // Moved without a known type (no shapeProp): the element type stays, the stale shape goes.
  const ln = fx.loadONNX(fs.readFileSync(path.join(root, 'models/zoo/transformer_encoder.onnx')));
  const before = typeOf(ln);
  fx.runPasses(ln, ['fuse-layernorm']);
  const fused = fx.loadONNX(ln.toONNX());
  expect(String(typeOf(fused).dtype)).toBe(String(before.dtype));
  expect(fused.run([{ data: new Float32Array(16 * 64), shape: [1, 16, 64] }])[0].shape).toEqual([1, 16, 64]);
  for (const m of [gm, again, ln, fused]) m.delete();
});

test('gm.constant() builds the opset-13 Clip that onnxruntime runs', () => {
  const gm = fx.loadONNX(fs.readFileSync(path.join(root, 'models/zoo/resnet18.onnx')));
  const x = { data: new Float32Array(3 * 224 * 224).map((_, i) => Math.sin(i) * 4), shape: [1, 3, 224, 224] };
  for (const relu of gm.graph.findNodes({ op: 'call_function', target: 'onnx.Relu' })) {
    const ip = gm.graph.insertingBefore(relu);
    const lo = gm.constant({ data: new Float32Array([0]), shape: [] });
    const hi = gm.constant({ data: new Float32Array([6]), shape: [], dtype: 'float32' }, { name: 'six' });
    const clip = gm.graph.callFunction('onnx.Clip', [relu.args[0], lo, hi]);
    ip.restore();
    relu.replaceAllUsesWith(clip);
    gm.graph.eraseNode(relu);
  }
  gm.recompile();
  gm.lint();
  const names = gm.namedBuffers().map(([n]) => n);
  expect(names).toContain('_tensor_constant0');
  expect(names).toContain('six0');
  expect(names).toContain('six1');
  const [want] = gm.run([x]);
  const file = path.join(fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'fx-clip-')), 'clip6.onnx');
  fs.writeFileSync(file, gm.toONNX());
  // onnxruntime-node in a child process (its typed arrays belong to Node's realm, not Jest's).
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', `
    import ort from 'onnxruntime-node';
    const s = await ort.InferenceSession.create(${JSON.stringify(file)}, { intraOpNumThreads: 1 });
    const x = new Float32Array(3 * 224 * 224).map((_, i) => Math.sin(i) * 4);
    const out = await s.run({ [s.inputNames[0]]: new ort.Tensor('float32', x, [1, 3, 224, 224]) });
    console.log(JSON.stringify(Array.from(out[s.outputNames[0]].data)));`], { cwd: root, encoding: 'utf8' });
  expect(r.stderr).toBe('');
  const got = JSON.parse(r.stdout);
  let worst = 0;
  for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i] - want.data[i]));
  expect(worst).toBeLessThan(1e-3);
  expect(() => gm.constant({ data: [1], shape: [1] })).toThrow(expect.objectContaining({ kind: 'TypeError' }));
  gm.delete();
}, 60000);
