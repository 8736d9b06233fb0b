// Issue 16 in wasm: the malformed-input table (tests/malformed/cases.tsv, written by
// tests/malformed/gen.py) replayed through the npm package in one node process, three rounds,
// each case failing with its kind and message; then a valid model gives bit-identical outputs.
// Also: limits from JS, sizes that would wrap in wasm32, the Node external-data sandbox, the
// opset check, and API misuse (deleted handles, sequences and strings where tensors go).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { init, FxError, Graph, GraphModule } from '../../wasm/index.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const dir = path.join(root, 'tests/malformed');
const cases = fs
  .readFileSync(path.join(dir, 'cases.tsv'), 'utf8')
  .split('\n')
  .filter((l) => l && !l.startsWith('#'))
  .map((l) => {
    const [name, stage, kind, message, options] = l.split('\t');
    return { name, stage, kind, message, options };
  });

let fx;
let scratch;
beforeAll(async () => {
  fx = await init();
  // The table's limits (the wasm defaults, set explicitly as the C++ test does).
  fx.setLimits({ maxTensorBytes: 2 ** 30, maxRunBytes: 2 ** 31, maxElements: 2 ** 30, maxLoopIterations: 2 ** 16 });
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'fx-malformed-'));
});
afterAll(() => {
  fx.setLimits({});
  fs.rmSync(scratch, { recursive: true, force: true });
});

function caught(f) {
  try {
    f();
  } catch (e) {
    return e;
  }
  return null;
}

// Lays out a 'lazy' case's folder (weights.bin a directory, a symlink out, or 16 bytes).
function arrange(c) {
  const d = path.join(scratch, c.name);
  fs.rmSync(d, { recursive: true, force: true });
  fs.mkdirSync(d);
  const weights = path.join(d, 'weights.bin');
  if (c.name === 'ext_directory') fs.mkdirSync(weights);
  else if (c.name === 'ext_symlink_escape') {
    fs.writeFileSync(path.join(scratch, 'outside.bin'), new Uint8Array(16));
    fs.symlinkSync(path.join(scratch, 'outside.bin'), weights);
  } else fs.writeFileSync(weights, new Uint8Array(16));
  return d;
}

// "" when the case failed as the table says, else what happened.
function replay(c) {
  const bytes = fs.readFileSync(path.join(dir, `${c.name}.onnx`));
  const options = { onWarning: () => {} };
  if (c.options === 'opset=error') options.opsetCheck = 'error';
  if (c.stage === 'lazy') options.externalData = arrange(c);
  let gm = null;
  let step = 'import';
  const e = caught(() => {
    gm = fx.loadONNX(bytes, options);
    if (c.stage === 'load') return;
    step = 'run';
    gm.run([]);
  });
  gm?.delete();
  if (!e) return `${c.stage === 'load' ? 'imported' : 'ran'} without an error`;
  if (!(e instanceof FxError)) return `not an FxError: ${e}`;
  if ((c.stage === 'load') !== (step === 'import')) return `failed at ${step}: ${e.kind}: ${e.message}`;
  // External data is read by JS at load; C++ reports a range it could not get as a ValueError
  // quoting the reader's reason when the tensor is first needed.
  const kind = c.stage === 'lazy' ? 'ValueError' : c.kind;
  if (e.kind !== kind) return `kind ${e.kind} (want ${kind}): ${e.message}`;
  // An offset past 2^53 cannot cross to JS exactly: C++ then finds no supplied range (still a
  // typed ValueError, naming the location).
  const message = c.name === 'ext_offset_overflow' ? "external data 'weights.bin' was not supplied" : c.message;
  if (!e.message.includes(message)) return `message '${e.message}' lacks '${message}'`;
  return '';
}

function zooOutputs() {
  const gm = fx.loadONNX(fs.readFileSync(path.join(root, 'models/zoo/cnn_bn_eval.onnx')));
  const x = new Float32Array(2 * 3 * 32 * 32).map((_, i) => Math.sin(i));
  const out = gm.run([{ data: x, shape: [2, 3, 32, 32] }]).map((t) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  gm.delete();
  return out;
}

test('every case of the table fails typed, three times over, and the module keeps working', () => {
  expect(cases.length).toBeGreaterThanOrEqual(40);
  const before = zooOutputs();
  const heap = fx.heapUsed();
  const failures = [];
  for (let round = 0; round < 3; ++round)
    for (const c of cases) {
      const r = replay(c);
      if (r) failures.push(`${c.name} (round ${round}): ${r}`);
    }
  expect(failures).toEqual([]);
  const after = zooOutputs();
  expect(after.length).toBe(before.length);
  for (let i = 0; i < before.length; ++i) expect(after[i].equals(before[i])).toBe(true);
  expect(fx.liveHandles()).toBe(0);
  expect(fx.heapUsed()).toBeLessThan(heap + (64 << 20));
});

function reluModule() {
  const g = new Graph();
  g.output(g.callFunction('onnx.Relu', [g.placeholder('x')]));
  return new GraphModule(g);
}

test('sizes that wrap at 2^32 in wasm32 are refused, not truncated', () => {
  const gm = reluModule();
  // [2^30 + 1] float32 needs 4 GB + 4 bytes; 4 bytes must not pass for it.
  let e = caught(() => gm.run([{ data: new Float32Array(1), shape: [2 ** 30 + 1] }]));
  expect(e).toBeInstanceOf(FxError);
  expect(e.kind).toBe('ResourceError');
  expect(e.message).toMatch(/over the limit/);
  fx.setLimits({ maxTensorBytes: 2 ** 40, maxElements: 2 ** 40 });
  e = caught(() => gm.run([{ data: new Float32Array(1), shape: [2 ** 30 + 1] }]));
  expect(e.kind).toBe('ResourceError'); // 4 GB does not fit wasm32's size_t
  expect(e.message).toMatch(/address space|over the per-tensor limit/);
  fx.setLimits({ maxTensorBytes: 2 ** 30, maxRunBytes: 2 ** 31, maxElements: 2 ** 30, maxLoopIterations: 2 ** 16 });
  // [2^31, 2^31] and shapes that are not integers.
  expect(caught(() => gm.run([{ data: new Float32Array(1), shape: [2 ** 31, 2 ** 31] }])).kind).toBe('ResourceError');
  expect(caught(() => gm.run([{ data: new Float32Array(1), shape: [1.5] }])).kind).toBe('ValueError');
  expect(caught(() => gm.run([{ data: new Float32Array(1), shape: [-1] }])).kind).toBe('ValueError');
  // The module still computes.
  const [y] = gm.run([{ data: new Float32Array([-1, 2]), shape: [2] }]);
  expect(Array.from(y.data)).toEqual([0, 2]);
  gm.delete();
});

test('limits set from JS are enforced and read back', () => {
  const saved = fx.limits();
  fx.setLimits({ maxTensorBytes: 1 << 20 });
  expect(fx.limits().maxTensorBytes).toBe(1 << 20);
  const gm = reluModule();
  const e = caught(() => gm.run([{ data: new Float32Array(1 << 19), shape: [1 << 19] }]));
  expect(e.kind).toBe('ResourceError');
  expect(e.message).toMatch(/per-tensor limit of 1\.0 MB/);
  expect(caught(() => fx.setLimits({ maxTensorBytes: -1 })).kind).toBe('ValueError');
  expect(caught(() => fx.setLimits(null)).kind).toBe('TypeError');
  fx.setLimits(saved);
  expect(fx.limits()).toEqual(saved);
  gm.delete();
});

test('ConstantOfShape [2^20, 2^20] is a ResourceError, not an empty buffer', () => {
  const bytes = fs.readFileSync(path.join(dir, 'constant_of_shape_2p20_squared.onnx'));
  const gm = fx.loadONNX(bytes);
  const e = caught(() => gm.run([]));
  expect(e.kind).toBe('ResourceError');
  expect(e.message).toMatch(/onnx\.ConstantOfShape.*\[1048576, 1048576\]/);
  gm.delete();
});

test('opset newer than known: a warning by default, an error on request', () => {
  const bytes = fs.readFileSync(path.join(dir, 'opset_99_error.onnx'));
  const warnings = [];
  const gm = fx.loadONNX(bytes, { onWarning: (w) => warnings.push(w) });
  expect(warnings).toEqual([expect.stringMatching(/opset 99 of domain 'ai\.onnx' is newer than fxwasm knows/)]);
  gm.delete();
  expect(caught(() => fx.loadONNX(bytes, { opsetCheck: 'error' })).kind).toBe('UnsupportedError');
  expect(caught(() => fx.loadONNX(bytes, { opsetCheck: 'maybe' })).kind).toBe('TypeError');
});

test('the Node folder reader reads a file inside the folder, through an inner symlink too', () => {
  const d = path.join(scratch, 'ok');
  fs.mkdirSync(path.join(d, 'sub'), { recursive: true });
  fs.writeFileSync(path.join(d, 'sub/real.bin'), new Float32Array([1, -2, 3, -4]));
  fs.symlinkSync(path.join(d, 'sub/real.bin'), path.join(d, 'weights.bin'));
  const gm = fx.loadONNX(fs.readFileSync(path.join(dir, 'ext_directory.onnx')), { externalData: d });
  const [y] = gm.run([]);
  expect(Array.from(y.data)).toEqual([1, -2, 3, -4]);
  gm.delete();
});

test('API misuse after delete(), sequences and strings where tensors go', () => {
  const gm = reluModule();
  gm.delete();
  expect(caught(() => gm.run([{ data: new Float32Array(1), shape: [1] }])).kind).toBe('StaleHandleError');
  gm.delete(); // idempotent
  const g = new Graph();
  g.delete();
  expect(caught(() => g.placeholder('x')).kind).toBe('StaleHandleError');
  const live = reluModule();
  const seq = caught(() => live.run([[{ data: new Float32Array(1), shape: [1] }]]));
  // A sequence (a JS array) or null where a tensor goes: refused by the input check, or by
  // the op once sequences cross into the executor.
  expect(['TypeError', 'RuntimeError']).toContain(seq.kind);
  expect(seq.message).toMatch(/takes tensors|must be \{ data: TypedArray/);
  expect(caught(() => live.run([null])).message).toMatch(/takes tensors|must be \{ data: TypedArray/);
  // A string tensor (an array of strings) reaches the executor, which names the op that refuses it.
  const str = caught(() => live.run([{ data: ['a'], shape: [1] }]));
  expect(str.kind).toBe('RuntimeError');
  expect(str.message).toMatch(/does not take string tensors/);
  expect(caught(() => live.run([{ data: ['a', 1], shape: [2] }])).kind).toBe('TypeError');
  expect(caught(() => live.run([{ data: new Uint8Array(1), shape: [1], dtype: 'string' }]))).toBeInstanceOf(FxError);
  const [y] = live.run([{ data: new Float32Array([-3]), shape: [1] }]);
  expect(Array.from(y.data)).toEqual([0]);
  live.delete();
});
