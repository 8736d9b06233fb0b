// onnxruntime's conventions, which users of onnxruntime-web/-node bring along: inputNames and
// outputNames, run(feeds) keyed by name returning outputs keyed by name, ort.Tensor inputs
// ({ data, dims, type }) and outputs that ort.Tensor takes back (dims/type), runAsync; and
// releaseCachedMemory() giving the executor's caches back once models are deleted.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';
import { init, FxError } from '../../wasm/index.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const sample = path.join(root, 'models/sample.onnx');
let fx;
beforeAll(async () => {
  fx = await init();
});

// An onnxruntime-style tensor ({ data, dims, type }).
const input = () => ({ type: 'float32', data: Float32Array.from({ length: 2 * 3 * 32 * 32 }, (_, i) => Math.sin(i)), dims: [2, 3, 32, 32] });

test('inputNames/outputNames match onnxruntime, and run(feeds) takes ort.Tensors and returns outputs by name', () => {
  // In a plain Node process (Jest's VM realm has other typed-array classes than onnxruntime's).
  const index = new URL('../../wasm/index.mjs', import.meta.url).href;
  const script = `
    import fs from 'node:fs';
    import { createRequire } from 'node:module';
    import { init } from ${JSON.stringify(index)};
    const ort = createRequire(${JSON.stringify(path.join(root, 'package.json'))})('onnxruntime-node');
    const fx = await init();
    const gm = fx.loadONNX(fs.readFileSync(${JSON.stringify(sample)}));
    const session = await ort.InferenceSession.create(${JSON.stringify(sample)});
    const x = new ort.Tensor('float32', Float32Array.from({ length: 2 * 3 * 32 * 32 }, (_, i) => Math.sin(i)), [2, 3, 32, 32]);
    const ours = gm.run({ [gm.inputNames[0]]: x });
    const theirs = await session.run({ [session.inputNames[0]]: x });
    const outs = session.outputNames.map((name) => {
      const a = theirs[name], b = ours[name];
      let worst = 0;
      for (let i = 0; i < a.data.length; i++) worst = Math.max(worst, Math.abs(a.data[i] - b.data[i]) / (1e-3 + Math.abs(a.data[i])));
      const back = new ort.Tensor(b.type, b.data, b.dims);  // our output goes back into onnxruntime
      return { name, dims: [b.dims, a.dims], type: [b.type, a.type], worst, back: back.dims };
    });
    const [y] = gm.run([x]);
    console.log(JSON.stringify({ names: [gm.inputNames, session.inputNames, gm.outputNames, session.outputNames],
      keys: [Object.keys(ours), Object.keys(theirs)], outs, positional: Object.keys(y) }));
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  expect(r.stderr).toBe('');
  const m = JSON.parse(r.stdout);
  expect(m.names[0]).toEqual(m.names[1]);
  expect(m.names[2]).toEqual(m.names[3]);
  expect(m.keys[0]).toEqual(m.keys[1]);
  expect(m.outs.length).toBeGreaterThan(0);
  for (const o of m.outs) {
    expect(o.dims[0]).toEqual(o.dims[1]);
    expect(o.type[0]).toBe(o.type[1]);
    expect(o.worst).toBeLessThan(1e-4);
    expect(o.back).toEqual(o.dims[1]);
  }
  // Still the torch.fx-style result too: a positional array of { dtype, shape, data }.
  expect(m.positional).toEqual(['dtype', 'shape', 'data']);
});

test('unknown and missing feed names are an FxError naming them and the model\'s inputs', () => {
  const gm = fx.loadONNX(fs.readFileSync(sample));
  let err;
  try {
    gm.run({ imput: input() });
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(FxError);
  expect(err.kind).toBe('ValueError');
  expect(err.message).toBe("run: unknown input(s) 'imput'; missing input(s) 'input' (the model's inputs are 'input')");
  gm.delete();
});

test('runAsync yields before running and resolves to what run gives', async () => {
  const gm = fx.loadONNX(fs.readFileSync(sample));
  let ticked = false;
  const p = gm.runAsync({ input: input() });
  setTimeout(() => (ticked = true), 0);
  await Promise.resolve();
  expect(ticked).toBe(false);
  const r = await p;
  expect(Array.from(r.logits.data)).toEqual(Array.from(gm.run({ input: input() }).logits.data));
  gm.delete();
});

test('graphs built by hand name their inputs by placeholder target and outputs by node', () => {
  const g = new fx.Graph();
  const a = g.placeholder('a');
  const b = g.placeholder('b');
  g.output([g.callFunction('onnx.Add', [a, b]), g.callFunction('onnx.Mul', [a, b])]);
  const gm = new fx.GraphModule(g);
  expect(gm.inputNames).toEqual(['a', 'b']);
  expect(gm.outputNames).toEqual(['add', 'mul']);
  const f = (v) => ({ data: new Float32Array(v), dims: [v.length], type: 'float32' });
  const r = gm.run({ a: f([1, 2]), b: f([3, 4]) });
  expect(Array.from(r.add.data)).toEqual([4, 6]);
  expect(Array.from(r.mul.data)).toEqual([3, 8]);
  gm.delete();
});

test('releaseCachedMemory gives back the executor\'s caches once the models are deleted', () => {
  // In this process other tests ran first: measured against the heap before this model.
  fx.releaseCachedMemory();
  const before = fx.heapUsed();
  const gm = fx.loadONNX(fs.readFileSync(path.join(root, 'models/zoo/resnet18.onnx')));
  gm.run([{ data: new Float32Array(3 * 224 * 224), shape: [1, 3, 224, 224] }]);
  gm.delete();
  fx.releaseCachedMemory();
  expect(fx.heapUsed() - before).toBeLessThanOrEqual(1 << 20);
});

test('loadONNX takes a path, a file: URL, a Blob or a Response (asynchronously); bytes stay synchronous', async () => {
  const bytes = fs.readFileSync(sample);
  const sync = fx.loadONNX(bytes);
  expect(sync).toBeInstanceOf(fx.GraphModule);
  for (const source of [sample, new URL(`file://${sample}`), new Blob([bytes]), new Response(bytes)]) {
    const p = fx.loadONNX(source);
    expect(p).toBeInstanceOf(Promise);
    const gm = await p;
    expect(gm.code).toBe(sync.code);
    gm.delete();
  }
  await expect(fx.loadONNX(path.join(root, 'models/no_such_model.onnx'))).rejects.toThrow(/loadONNX: cannot read .*no_such_model\.onnx: ENOENT/);
  await expect(fx.loadONNX(new Response('', { status: 404 }))).rejects.toThrow(/cannot read the Response: HTTP 404/);
  sync.delete();
});

test('float16/bfloat16 (as Uint16Array bits, like onnxruntime), uint16, uint32 and uint64 in and out of run()', () => {
  const g = new fx.Graph();
  const x = g.placeholder('x');
  const h = g.placeholder('h');
  const u32 = g.placeholder('u32');
  const u64 = g.placeholder('u64');
  const u16 = g.placeholder('u16');
  g.output([
    g.callFunction('onnx.Cast', [x], { to: 10 }), // float16
    g.callFunction('onnx.Cast', [h], { to: 1 }),
    g.callFunction('onnx.Add', [u32, u32]),
    g.callFunction('onnx.Add', [u64, u64]),
    g.callFunction('onnx.Cast', [u16], { to: 16 }), // bfloat16
  ]);
  const gm = new fx.GraphModule(g);
  const [f16, f32, a32, a64, bf16] = gm.run([
    { data: new Float32Array([1, -2, 0.5, 65504]), shape: [4] },
    { data: new Uint16Array([0x3c00, 0xc000, 0x7c00]), shape: [3], dtype: 'float16' },
    { data: new Uint32Array([4000000000, 1]), shape: [2] },
    { data: new BigUint64Array([2n ** 63n, 5n]), shape: [2] },
    { data: new Uint16Array([1, 256]), shape: [2] },
  ]);
  expect(f16.dtype).toBe('float16');
  expect(f16.data).toBeInstanceOf(Uint16Array);
  expect(Array.from(f16.data)).toEqual([0x3c00, 0xc000, 0x3800, 0x7bff]); // IEEE half bits
  expect(Array.from(f32.data)).toEqual([1, -2, Infinity]);
  expect(a32.dtype).toBe('uint32');
  expect(Array.from(a32.data)).toEqual([(4000000000 * 2) % 2 ** 32, 2]); // wraps as unsigned
  expect(a64.data).toBeInstanceOf(BigUint64Array);
  expect(Array.from(a64.data)).toEqual([0n, 10n]);
  expect(bf16.dtype).toBe('bfloat16');
  expect(Array.from(bf16.data)).toEqual([0x3f80, 0x4380]); // 1.0 and 256.0 as bfloat16 bits
  gm.delete();
});
