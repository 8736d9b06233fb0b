// ONNX in, runnable PyTorch out: every zoo model is lowered to torch targets in wasm
// (lowerToTorch), written as a Python package (toFolder), and run by real PyTorch (Debian's
// /usr/bin/python3 with torch 1.13, tests/torch_codegen/check_lowered.py) against
// onnxruntime-node's outputs on the same inputs; at a second input size where the model declares
// dynamic axes. The script also re-traces each package with torch.fx.symbolic_trace (it must print
// the graph fxwasm printed) and exports it with torch.onnx.export.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { init, FxError, Graph, GraphModule, dtype, tuple, loadONNX, lowerToTorch, loweringCoverage, toFolder } from '../../wasm/index.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));
const zooDir = path.join(root, 'models', 'zoo');
const python = '/usr/bin/python3';

beforeAll(async () => {
  await init();
});

const zoo = fs.existsSync(zooDir)
  ? fs.readdirSync(zooDir).filter((f) => f.endsWith('.onnx') && f !== 'resnet50.onnx').sort()
  : [];

// The input shapes of each case: the zoo's declared ones, with the dynamic dims at `sizes`.
function specFor(model, sizes) {
  const info = JSON.parse(fs.readFileSync(path.join(zooDir, `${model}.json`), 'utf8'));
  const names = new Map();
  const inputs = info.inputs.map((t) => ({
    name: t.name,
    dtype: t.dtype,
    shape: t.shape.map((d) => {
      if (typeof d === 'number') return d;
      if (!names.has(d)) names.set(d, sizes[names.size % sizes.length]);
      return names.get(d);
    }),
  }));
  return { inputs, dynamic: names.size > 0 };
}

test('lowerToTorch: every zoo model runs in PyTorch with onnxruntime-node outputs', () => {
  expect(zoo.length).toBeGreaterThanOrEqual(13);
  const dir = fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'fxwasm-torch-'));
  try {
    for (const file of zoo) {
      const model = file.replace(/\.onnx$/, '');
      const folder = path.join(dir, model);
      const gm = loadONNX(fs.readFileSync(path.join(zooDir, file)));
      expect(loweringCoverage(gm)).toEqual([]);
      const torchGm = lowerToTorch(gm);
      expect(torchGm.code).not.toContain('onnx.');
      const files = toFolder(torchGm, 'Net');
      expect(Object.keys(files).sort()).toEqual(['__init__.py', 'module.py', 'state_dict.pt']);
      fs.mkdirSync(path.join(folder, `pkg_${model}`), { recursive: true });
      for (const [name, bytes] of Object.entries(files)) fs.writeFileSync(path.join(folder, `pkg_${model}`, name), bytes);
      fs.writeFileSync(path.join(folder, 'graph.txt'), torchGm.graph.print());
      torchGm.delete();
      gm.delete();
      // onnxruntime's outputs at the declared sizes and, for dynamic axes, at two others.
      const first = specFor(model, [2, 5]);
      const cases = first.dynamic ? [first, specFor(model, [1, 3]), specFor(model, [4, 9])] : [first];
      cases.forEach((spec, k) => {
        const caseDir = path.join(folder, `case${k}`);
        const specFile = path.join(folder, `spec${k}.json`);
        fs.writeFileSync(specFile, JSON.stringify({ inputs: spec.inputs }));
        const r = spawnSync(process.execPath, [path.join(root, 'scripts/ort_run.mjs'), path.join(zooDir, file), '--spec', specFile, '--seed', String(k), '--save', caseDir, '--json'], { encoding: 'utf8' });
        expect(r.stderr).toBe('');
        expect(r.status).toBe(0);
      });
    }
    const r = spawnSync(python, [path.join(root, 'tests/torch_codegen/check_lowered.py'), dir], { encoding: 'utf8' });
    // One line per model; a failure names the model and the check.
    expect(r.stdout + r.stderr).not.toContain('FAIL');
    expect(r.status).toBe(0);
    expect(r.stdout.trim().split('\n').filter((l) => l.startsWith('ok '))).toHaveLength(zoo.length);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 240_000);

test('lowerToTorch names what it cannot convert, up front and when asked to convert', () => {
  const g = new Graph();
  const x = g.placeholder('x');
  x.setMeta('onnx_type', { dtype: dtype('float32'), shape: tuple([2, 3]) });
  g.output(g.callFunction('onnx.Relu', [g.callFunction('onnx.NoSuchOp', [x])]));
  const gm = new GraphModule(g);
  expect(loweringCoverage(gm)).toEqual([{ node: 'no_such_op', op: 'NoSuchOp', opset: 17, reason: 'no handler for NoSuchOp at opset 17' }]);
  let err;
  try {
    lowerToTorch(gm);
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(FxError);
  expect(err.kind).toBe('UnsupportedError');
  expect(err.message).toContain("node 'no_such_op'");
  // A module with onnx.* targets cannot be written as a package before lowering.
  expect(() => toFolder(gm)).toThrow(FxError);
  gm.delete();
});
