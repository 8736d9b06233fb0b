// Ownership: explicit delete()/[Symbol.dispose] leave the wasm heap flat; the
// FinalizationRegistry frees graphs that were never deleted.
import { spawnSync } from 'node:child_process';
import { init } from '../../wasm/index.mjs';

let fx;
beforeAll(async () => {
  fx = await init();
});

const ROOT = {
  parameters: { param: { shape: [3, 4], data: new Float32Array(12) } },
  modules: { linear: { type: 'Linear', parameters: { weight: { shape: [5, 4] } } } },
};

/** One build / print / transform / error / dispose cycle touching most of the API. */
function cycle() {
  const g = new fx.Graph();
  const x = g.placeholder('x', { type: 'torch.Tensor' });
  const p = g.getAttr('param');
  const add = g.callFunction('operator.add', [x, p], { alpha: fx.float(2) });
  const lin = g.callModule('linear', [add]);
  const clamp = g.callMethod('clamp', [lin], { min: 0.5, max: fx.tuple([1, 'a', [fx.slice(1, 2)]]) });
  const dead = g.callFunction('torch.relu', [x]);
  g.output(clamp);
  dead.setMeta('k', { v: [1, 2] });
  g.print();
  g.tabular();
  g.pythonCode();
  g.eliminateDeadCode();
  try {
    g.eraseNode(add); // error path
  } catch (e) {
    if (e.kind !== 'GraphError') throw e;
  }
  const ip = g.insertingAfter(add);
  g.callFunction('torch.neg', [add]);
  ip.restore();
  const c = g.clone();
  c[Symbol.dispose]();
  const gm = new fx.GraphModule(g, { root: ROOT });
  void gm.code;
  gm.namedParameters();
  gm.delete();
  const unused = new fx.Graph();
  unused.placeholder('y');
  unused.delete();
}

test('1000 create/delete cycles leave the wasm heap flat', () => {
  for (let i = 0; i < 50; i++) cycle(); // warm up caches and the id buffer
  const used = fx.heapUsed();
  const size = fx.heapSize();
  const live = fx.liveHandles();
  for (let i = 0; i < 1000; i++) cycle();
  expect(fx.liveHandles()).toBe(live);
  expect(fx.heapUsed()).toBe(used);
  expect(fx.heapSize()).toBe(size);
});

test('delete() and [Symbol.dispose]() free the C++ objects at once', () => {
  const live = fx.liveHandles();
  const g = new fx.Graph();
  const g2 = new fx.Graph();
  expect(fx.liveHandles()).toBe(live + 2);
  g.delete();
  g2[Symbol.dispose]();
  expect(fx.liveHandles()).toBe(live);
  const g3 = new fx.Graph();
  const gm = new fx.GraphModule(g3);
  expect(fx.liveHandles()).toBe(live + 2); // the graph entry plus the module
  gm[Symbol.dispose]();
  expect(fx.liveHandles()).toBe(live);
});

test('the FinalizationRegistry frees graphs that were never deleted', () => {
  const index = new URL('../../wasm/index.mjs', import.meta.url).href;
  const script = `
    import { init } from ${JSON.stringify(index)};
    const fx = await init();
    const base = fx.liveHandles();
    (() => {
      for (let i = 0; i < 200; i++) {
        const g = new fx.Graph();
        g.output(g.callFunction('torch.relu', [g.placeholder('x')]));
        if (i % 2) new fx.GraphModule(g);
      }
    })();
    const made = fx.liveHandles() - base;
    for (let i = 0; i < 100 && fx.liveHandles() > base; i++) {
      globalThis.gc();
      await new Promise((r) => setTimeout(r, 10));
    }
    console.log(made, fx.liveHandles() - base);
  `;
  const r = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { encoding: 'utf8' });
  expect(r.stderr).toBe('');
  expect(r.stdout).toBe('300 0\n');
});

test('toONNX streams the weights out: the wasm heap does not grow, and deleting frees the model', () => {
  // A fresh instance, so the heap's size is this model's doing: loading holds the weights once;
  // exporting writes them from the tensors into the JS array, never into a second wasm buffer.
  const index = new URL('../../wasm/index.mjs', import.meta.url).href;
  const model = new URL('../../models/zoo/resnet18.onnx', import.meta.url);
  const script = `
    import fs from 'node:fs';
    import { init } from ${JSON.stringify(index)};
    const fx = await init();
    const bytes = fs.readFileSync(new URL(${JSON.stringify(model.href)}));
    const gm = fx.loadONNX(bytes);
    const loaded = fx.heapSize();
    const out = gm.toONNX();
    const grown = fx.heapSize() - loaded;
    const again = fx.loadONNX(out);
    const same = again.code === gm.code && again.toONNX().length === out.length;
    again.delete();
    gm.delete();
    console.log(JSON.stringify({ file: bytes.length, loaded, grown, out: out.length, same, used: fx.heapUsed() }));
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  expect(r.stderr).toBe('');
  const m = JSON.parse(r.stdout);
  expect(m.same).toBe(true);
  expect(Math.abs(m.out - m.file)).toBeLessThan(m.file * 0.01);
  expect(m.grown).toBeLessThanOrEqual(1 << 20);
  expect(m.loaded).toBeLessThanOrEqual(2 * m.file);
  expect(m.used).toBeLessThanOrEqual(1 << 20);
});
