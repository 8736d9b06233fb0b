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
import { init, FxError, Graph, GraphModule, dtype, tuple, loadONNX, lowerToTorch, loweringCoverage, toFolder, torchPackage } from '../../wasm/index.mjs';

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

// The 8-bit zoo models (models/quantize.py): lowered and packaged. Their weights must each land
// where torch.nn allows (nn.MultiheadAttention's in_proj_bias once collided with the Linear its
// MatMul became). Their numbers are not compared: emulated int8 in float can round one
// quantization step apart from onnxruntime's integer kernels.
const quantDir = path.join(zooDir, 'quantized');
const quantized = fs.existsSync(quantDir) ? fs.readdirSync(quantDir).filter((f) => f.endsWith('.onnx')).sort() : [];

(quantized.length ? test : test.skip)('lowerToTorch + toFolder: every quantized zoo model', () => {
  for (const file of quantized) {
    const gm = loadONNX(fs.readFileSync(path.join(quantDir, file)));
    const torchGm = lowerToTorch(gm);
    expect(torchGm.code).not.toContain('onnx.');
    expect(Object.keys(toFolder(torchGm, 'Net')).sort()).toEqual(['__init__.py', 'module.py', 'state_dict.pt']);
    torchGm.delete();
    gm.delete();
  }
}, 120_000);

// Every single-op model of tests/onnx_ops (onnxruntime's outputs in test_data_set_0): lowered,
// packaged and run in PyTorch. The cases that do not pass are listed, each with its reason, in
// tests/torch_codegen/onnx_ops_expected.txt: a case that newly fails fails the test, and one that
// newly passes is reported so that the list can shrink.
const opsDir = path.join(root, 'tests', 'onnx_ops');
const ops = fs.existsSync(opsDir) ? fs.readdirSync(opsDir).filter((f) => fs.existsSync(path.join(opsDir, f, 'test_data_set_0', 'io.json'))).sort() : [];

function expectedFailures() {
  const text = fs.readFileSync(path.join(root, 'tests/torch_codegen/onnx_ops_expected.txt'), 'utf8');
  const out = new Map();
  for (const line of text.split('\n')) {
    const m = /^([\w.-]+)\s+(.+)$/.exec(line.trim());
    if (m && !line.startsWith('#')) out.set(m[1], m[2]);
  }
  return out;
}

test('lowerToTorch: the single-op models of tests/onnx_ops run in PyTorch with onnxruntime outputs', () => {
  expect(ops.length).toBeGreaterThan(150);
  const dir = fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'fxwasm-torch-ops-'));
  const outcome = new Map();  // case -> 'ok' | reason
  try {
    for (const name of ops) {
      const gm = loadONNX(fs.readFileSync(path.join(opsDir, `${name}.onnx`)));
      try {
        const gaps = loweringCoverage(gm);
        if (gaps.length) {
          outcome.set(name, `not lowered: ${gaps[0].reason}`);
          continue;
        }
        const torchGm = lowerToTorch(gm);
        try {
          const files = toFolder(torchGm, 'Net');
          const folder = path.join(dir, name);
          fs.mkdirSync(path.join(folder, `pkg_${name}`), { recursive: true });
          for (const [file, bytes] of Object.entries(files)) fs.writeFileSync(path.join(folder, `pkg_${name}`, file), bytes);
          fs.writeFileSync(path.join(folder, 'graph.txt'), torchGm.graph.print());
          fs.cpSync(path.join(opsDir, name, 'test_data_set_0'), path.join(folder, 'case0'), { recursive: true });
        } finally {
          torchGm.delete();
        }
      } catch (e) {
        if (!(e instanceof FxError)) throw e;
        outcome.set(name, `not lowered: ${e.message}`);
      } finally {
        gm.delete();
      }
    }
    const r = spawnSync(python, [path.join(root, 'tests/torch_codegen/check_lowered.py'), dir], { encoding: 'utf8', maxBuffer: 64 << 20 });
    expect(r.stderr).toBe('');
    for (const line of r.stdout.split('\n')) {
      const m = /^(ok|FAIL) +([\w.-]+):?(.*)$/.exec(line);
      if (m) outcome.set(m[2].replace(/:$/, ''), m[1] === 'ok' ? 'ok' : 'fails in PyTorch');
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const expected = expectedFailures();
  const newlyFailing = [];
  const newlyPassing = [];
  for (const name of ops) {
    const got = outcome.get(name) ?? 'no result';
    if (got !== 'ok' && !expected.has(name)) newlyFailing.push(`${name}: ${got}`);
    if (got === 'ok' && expected.has(name)) newlyPassing.push(name);
  }
  if (newlyPassing.length) console.log(`now passing, remove from onnx_ops_expected.txt: ${newlyPassing.join(', ')}`);
  expect(newlyFailing).toEqual([]);
  const passed = ops.filter((o) => outcome.get(o) === 'ok').length;
  console.log(`tests/onnx_ops lowered to PyTorch: ${passed} of ${ops.length} pass`);
}, 300_000);

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
  // A module with onnx.* targets cannot be written as a package before lowering; torchPackage
  // lowers first, and names every node it cannot lower.
  expect(() => toFolder(gm)).toThrow(FxError);
  expect(() => torchPackage(gm)).toThrow("1 node(s) cannot be lowered to PyTorch:\n  node 'no_such_op' (NoSuchOp): no handler for NoSuchOp at opset 17");
  gm.delete();
});

// ONNX's backend node tests: every case the executor passes (tests/onnx_backend/expected.txt) is
// lowered with its own inputs as exampleInputs, packaged, and run in torch 1.13 against the suite's
// expected outputs (tests/torch_codegen/backend_lowering.mjs); the cases that do not pass are
// listed with the reason in tests/torch_codegen/backend_expected.txt.
const backendSuite = path.join(process.env.FXWASM_ONNX_BACKEND_DIR ?? path.join(root, 'build/onnx-backend'), 'node');
(fs.existsSync(backendSuite) ? test : test.skip)(
  "lowerToTorch: ONNX's backend cases that the executor passes run in PyTorch with the expected outputs",
  async () => {
    const { runBackendLowering, listFile } = await import('../torch_codegen/backend_lowering.mjs');
    const { results, regressions, newPasses } = await runBackendLowering();
    const passed = [...results.values()].filter((why) => !why).length;
    console.log(
      `backend cases lowered to PyTorch: ${passed} of ${results.size} pass in torch 1.13` +
        (newPasses.length ? `\nnow passing, remove from ${listFile}: ${newPasses.join(' ')}` : ''),
    );
    expect(results.size).toBeGreaterThan(400);
    expect(regressions).toEqual([]);
  },
  300000,
);
