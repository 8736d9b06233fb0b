// Exports after passes are valid ONNX and no larger than needed: every zoo model, after every pass
// alone, is exported (toONNX), passes onnx.checker's full check (Debian's onnx 1.12, through
// /usr/bin/python3), runs in onnxruntime-node with the original model's outputs, and is at most a
// little larger than the untransformed export (folding must not duplicate weights). Fused ops
// newer than the model's opset raise its opset import, or are written in older ops when the
// opset is pinned; a fused Gelu is written in the form toONNX's `gelu` option names.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { init, loadONNX, passNames, runPasses } from '../../wasm/index.mjs';
import { randomInputs } from '../../wasm/inputs.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const zooDir = path.join(root, 'models/zoo');
const zoo = fs.existsSync(zooDir)
  ? fs.readdirSync(zooDir).filter((f) => f.endsWith('.onnx') && f !== 'resnet50.onnx').sort()
  : [];

let tmp;
beforeAll(async () => {
  await init();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fx-export-passes-'));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** onnx.checker.check_model(full_check=True) of each file: '' or the checker's message. */
function checkAll(files) {
  const script = `
import sys, onnx
for f in sys.argv[1:]:
    try:
        onnx.checker.check_model(onnx.load(f), full_check=True)
        print("ok")
    except Exception as e:
        print(" ".join(str(e).split())[:300])
`;
  const r = spawnSync('/usr/bin/python3', ['-c', script, ...files], { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(r.stderr);
  return r.stdout.trim().split('\n').map((l) => (l === 'ok' ? '' : l));
}

// onnxruntime-node runs in a child process: under Jest's VM modules its typed arrays come from
// another realm, which onnxruntime's tensor checks reject.
const ORT_SCRIPT = `
import fs from 'node:fs';
import ort from 'onnxruntime-node';
const ARR = { float32: Float32Array, float64: Float64Array, int64: BigInt64Array, int32: Int32Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array };
const out = [];
for (const job of JSON.parse(fs.readFileSync(0, 'utf8'))) {
  try {
    const s = await ort.InferenceSession.create(job.model, { intraOpNumThreads: 1, interOpNumThreads: 1 });
    const feeds = {};
    s.inputNames.forEach((n, i) => {
      const t = job.inputs[i];
      const b = fs.readFileSync(t.file);
      feeds[n] = new ort.Tensor(t.dtype, new ARR[t.dtype](b.buffer, b.byteOffset, b.byteLength / ARR[t.dtype].BYTES_PER_ELEMENT), t.shape);
    });
    const r = await s.run(feeds);
    out.push(s.outputNames.map((n) => ({ dims: r[n].dims, data: Array.from(r[n].data, Number) })));
  } catch (e) {
    out.push({ error: String(e.message ?? e).split('\\n')[0] });
  }
}
process.stdout.write(JSON.stringify(out));
`;

/** Runs each {model: file, inputs: [{dtype, shape, file}]} in onnxruntime-node: outputs or {error}. */
function ortRunAll(jobs) {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', ORT_SCRIPT], {
    cwd: root,
    input: JSON.stringify(jobs),
    encoding: 'utf8',
    maxBuffer: 512 << 20,
  });
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout);
}

let fileCount = 0;
/** The inputs as raw files for ortRunAll. */
function saveInputs(inputs) {
  return inputs.map((t) => {
    const file = path.join(tmp, `input_${fileCount++}.bin`);
    fs.writeFileSync(file, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    return { dtype: t.dtype, shape: t.shape, file };
  });
}

function maxDiff(a, b) {
  let worst = 0;
  for (let i = 0; i < a.data.length; ++i) {
    const x = a.data[i];
    const y = b.data[i];
    worst = Math.max(worst, Math.abs(x - y) / (1e-4 + 1e-3 * Math.abs(y)));
  }
  return worst;  // <= 1: within |x - y| <= 1e-4 + 1e-3 |y|
}

(zoo.length ? test : test.skip)(
  'every zoo model after every pass exports to a checked, runnable ONNX model no larger than needed',
  async () => {
    const problems = [];
    const files = [];
    const cases = [];
    const jobs = [];
    for (const model of zoo) {
      const bytes = fs.readFileSync(path.join(zooDir, model));
      const base = loadONNX(bytes);
      const baseSize = base.toONNX().length;
      const inputs = saveInputs(randomInputs(base, 7));
      base.delete();
      jobs.push({ model: path.join(zooDir, model), inputs, reference: true });
      for (const pass of passNames) {
        const gm = loadONNX(bytes);
        try {
          runPasses(gm, [pass]);
          const out = gm.toONNX();
          // A few hundred bytes of slack: a pass may add a small constant or a longer name.
          if (out.length > baseSize * 1.002 + 512)
            problems.push(`${model} after ${pass}: ${out.length} bytes, ${baseSize} before`);
          const file = path.join(tmp, `${model}.${pass}.onnx`);
          fs.writeFileSync(file, out);
          files.push(file);
          cases.push(`${model} after ${pass}`);
          jobs.push({ model: file, inputs, name: `${model} after ${pass}` });
        } catch (e) {
          problems.push(`${model} after ${pass}: ${e.message.split('\n')[0]}`);
        } finally {
          gm.delete();
        }
      }
    }
    let want;
    ortRunAll(jobs).forEach((got, i) => {
      if (jobs[i].reference) {
        want = got;
        return;
      }
      const name = jobs[i].name;
      if (got.error) problems.push(`${name}: onnxruntime: ${got.error}`);
      else if (got.length !== want.length) problems.push(`${name}: ${got.length} outputs`);
      else
        for (let k = 0; k < got.length; ++k)
          if (got[k].dims.join() !== want[k].dims.join() || maxDiff(got[k], want[k]) > 1)
            problems.push(`${name}: output ${k} differs from the original model's`);
    });
    checkAll(files).forEach((why, i) => {
      if (why) problems.push(`${cases[i]}: onnx.checker: ${why}`);
    });
    expect(cases.length).toBe(zoo.length * passNames.length);
    expect(problems).toEqual([]);
  },
  600000,
);

test.each([
  ['decomposed', [['', 17]], 'Erf', true],
  ['com.microsoft', [['', 17], ['com.microsoft', 1]], 'Gelu', true],
  // ONNX's Gelu is newer than onnx 1.12's checker; onnxruntime runs it.
  ['opset20', [['', 20]], 'Gelu', false],
])("a fused Gelu exports in the '%s' form", async (gelu, opsets, op, checked) => {
  const bytes = fs.readFileSync(path.join(zooDir, 'gpt_block.onnx'));
  const gm = loadONNX(bytes);
  const inputs = saveInputs(randomInputs(gm, 3));
  runPasses(gm, ['fuse-gelu', 'fuse-layernorm']);
  const out = gm.toONNX({ gelu });
  gm.delete();
  const file = path.join(tmp, `gelu_${gelu}.onnx`);
  fs.writeFileSync(file, out);
  const script = `
import sys, onnx
m = onnx.load(sys.argv[1])
print(sorted((o.domain, o.version) for o in m.opset_import))
print(sorted(set(n.op_type for n in m.graph.node)))
`;
  const r = spawnSync('/usr/bin/python3', ['-c', script, file], { encoding: 'utf8' });
  const [opsetLine, opsLine] = r.stdout.trim().split('\n');
  expect(opsetLine).toBe(`[${opsets.map(([d, v]) => `('${d}', ${v})`).join(', ')}]`);
  expect(opsLine).toContain(`'${op}'`);
  expect(opsLine).toContain("'LayerNormalization'");  // opset 13 raised to 17 for it
  if (checked) expect(checkAll([file])).toEqual(['']);
  const [want, got] = ortRunAll([
    { model: path.join(zooDir, 'gpt_block.onnx'), inputs },
    { model: file, inputs },
  ]);
  expect(maxDiff(got[0], want[0])).toBeLessThanOrEqual(1);
});

test('a pinned opset writes LayerNormalization in older ops, and refuses what it cannot write', async () => {
  const bytes = fs.readFileSync(path.join(zooDir, 'gpt_block.onnx'));
  const gm = loadONNX(bytes);
  const inputs = saveInputs(randomInputs(gm, 5));
  runPasses(gm, ['fuse-gelu', 'fuse-layernorm']);
  const out = gm.toONNX({ opset: 14 });
  const file = path.join(tmp, 'pinned.onnx');
  fs.writeFileSync(file, out);
  expect(checkAll([file])).toEqual(['']);
  const [want, got] = ortRunAll([
    { model: path.join(zooDir, 'gpt_block.onnx'), inputs },
    { model: file, inputs },
  ]);
  expect(maxDiff(got[0], want[0])).toBeLessThanOrEqual(1);
  expect(() => gm.toONNX({ opset: 14, gelu: 'opset20' })).toThrow(/Gelu needs opset 20 and the export is pinned to opset 14/);
  expect(() => gm.toONNX({ opset: 11 })).toThrow(/the model is opset 13, and ops are not converted to older opsets/);
  expect(() => gm.toONNX({ gelu: 'fast' })).toThrow(/gelu export form must be/);
  gm.delete();
});
