// What the JS side takes from C++ registries instead of keeping its own copy: the pass names
// (fx::registered_passes) and the ONNX meta keys (fx::onnx::meta), and the helpers the CLI and the
// playground share (wasm/inputs.mjs). Each test fails if a hand-kept copy drifts from the source.
import fs from 'node:fs';
import { init, FxError, GraphModule, passNames, passInfo, onnxMetaKeys, runPasses, loadONNX } from '../../wasm/index.mjs';
import { mulberry32, randomInputs, outputNames } from '../../wasm/inputs.mjs';

const read = (p) => fs.readFileSync(new URL(`../../${p}`, import.meta.url), 'utf8');

let fx;
beforeAll(async () => {
  fx = await init();
});

test('passNames and passInfo() come from the C++ pass registry', () => {
  const info = passInfo();
  expect(info.length).toBeGreaterThanOrEqual(8);
  expect(passNames).toEqual(info.map((p) => p.name));
  expect(Object.isFrozen(passNames)).toBe(true);
  expect(fx.passNames).toBe(passNames);
  expect(fx.passInfo).toBe(passInfo);
  // The core's passes first, then this layer's (fx::exec::register_onnx_passes), in their order.
  expect(passNames.slice(0, 3)).toEqual(['dce', 'cse', 'remove-dropout']);
  expect(passNames).toContain('fuse-conv-bn');
  for (const p of info) expect([p.name, typeof p.description, p.description.length > 10]).toEqual([p.name, 'string', true]);
  // A fresh array of fresh objects each call: callers cannot change the registry's copy.
  info[0].name = 'changed';
  expect(passInfo()[0].name).toBe('dce');
});

test("index.d.ts's PassName union lists exactly the registry's names", () => {
  const dts = read('wasm/index.d.ts');
  const union = dts.match(/export type PassName =([^;]*);/);
  expect(union).not.toBeNull();
  const names = [...union[1].matchAll(/'([^']+)'/g)].map((m) => m[1]);
  expect(names).toEqual([...passNames]);
});

test("runPasses rejects an unknown name with the registry's message", () => {
  const g = new fx.Graph();
  g.output(g.placeholder('x'));
  const gm = new GraphModule(g);
  try {
    let err;
    try {
      runPasses(gm, ['dce', 'no-such-pass']);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(FxError);
    expect(err.kind).toBe('ValueError');
    expect(err.message).toContain('no-such-pass');
    for (const name of passNames) expect(err.message).toContain(name);
  } finally {
    gm.delete();
  }
});

test('onnxMetaKeys are the constants of fx::onnx::meta (include/fx/onnx.h)', () => {
  const header = read('include/fx/onnx.h');
  const ns = header.slice(header.indexOf('namespace meta {'), header.indexOf('}  // namespace meta'));
  const fromHeader = Object.fromEntries(
    [...ns.matchAll(/inline constexpr const char\* k(\w+) = "([^"]+)";/g)].map(([, k, v]) => [k[0].toLowerCase() + k.slice(1), v]),
  );
  expect(Object.keys(fromHeader).length).toBeGreaterThanOrEqual(20);
  expect({ ...onnxMetaKeys }).toEqual(fromHeader);
  expect(Object.isFrozen(onnxMetaKeys)).toBe(true);
  expect(fx.onnxMetaKeys).toBe(onnxMetaKeys);
  // What an import really sets.
  const gm = loadONNX(fs.readFileSync(new URL('../../models/sample.onnx', import.meta.url)));
  try {
    expect(gm.graph.outputNode.meta[onnxMetaKeys.outputs]).toEqual(['logits']);
    expect(Object.keys(gm.meta)).toContain(onnxMetaKeys.opsetImport);
  } finally {
    gm.delete();
  }
});

test('the façade, the CLI and the playground spell no ONNX meta key and keep no pass list', () => {
  for (const f of fs.readdirSync(new URL('../../wasm/', import.meta.url)).filter((f) => f.endsWith('.mjs')).map((f) => `wasm/${f}`).concat(['web/worker.mjs', 'web/app.mjs'])) {
    const code = read(f).replace(/^\s*(\/\/|\*|\/\*\*).*$/gm, ''); // comments may name them
    expect([f, code.match(/['"`]onnx_\w+/g)]).toEqual([f, null]);
    // A default selection is fine (the playground's pipeline); a copy of the whole list is not.
    const quoted = passNames.filter((p) => code.includes(`'${p}'`) || code.includes(`"${p}"`));
    expect([f, quoted.length < passNames.length]).toEqual([f, true]);
  }
});

test('one PRNG and one input maker for the CLI, the playground, ort_run and the benchmarks', () => {
  const rand = mulberry32(0);
  // mulberry32(0)'s first values, as scripts/mulberry32.mjs gave them to the reference runs.
  expect([rand(), rand()].map((x) => x.toFixed(10))).toEqual(['0.2664292087', '0.0003297457']);
  for (const f of ['wasm/cli.mjs', 'web/worker.mjs', 'scripts/ort_run.mjs', 'bench/onnx_exec.mjs']) {
    const text = read(f);
    expect([f, /from '\.\.?\/(wasm\/)?inputs\.mjs'/.test(text)]).toEqual([f, true]);
    expect([f, text.includes('0x6d2b79f5')]).toEqual([f, false]);
  }
  const gm = loadONNX(fs.readFileSync(new URL('../../models/sample.onnx', import.meta.url)));
  try {
    const [a] = randomInputs(gm, 7);
    const [b] = randomInputs(gm, 7);
    expect(a.shape).toEqual([2, 3, 32, 32]);
    expect(a.dtype).toBe('float32');
    expect(Array.from(a.data)).toEqual(Array.from(b.data));
    expect(Array.from(randomInputs(gm, 8)[0].data)).not.toEqual(Array.from(a.data));
    expect(outputNames(gm)).toEqual(['logits']);
  } finally {
    gm.delete();
  }
});
