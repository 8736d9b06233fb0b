// The traps a JS developer falls into with a torch.fx-like API: node.args/kwargs are frozen (an
// assignment into them throws instead of changing a copy), JSON.stringify of nodes and their args
// works, a Graph is iterable, and a second init() with other options is refused.
import { spawnSync } from 'node:child_process';
import { init, FxError, Graph } from '../../wasm/index.mjs';

let fx;
beforeAll(async () => {
  fx = await init();
});

function small() {
  const g = new Graph();
  const x = g.placeholder('x');
  const y = g.callFunction('torch.add', [x, 1], { alpha: 2 });
  const z = g.callFunction('torch.relu', [y]);
  g.output(z);
  return { g, x, y, z };
}

test('node.args and node.kwargs are frozen: writing into them throws, assigning new ones works', () => {
  const { g, x, y } = small();
  expect(Object.isFrozen(y.args)).toBe(true);
  expect(() => {
    y.args[1] = 5;
  }).toThrow(TypeError);
  expect(() => {
    y.kwargs.alpha = 3;
  }).toThrow(TypeError);
  expect(y.args[1]).toBe(1);
  y.args = [x, 5];
  y.kwargs = { alpha: 3 };
  expect(y.args[1]).toBe(5);
  expect(y.kwargs).toEqual({ alpha: 3 });
  // Nested lists are frozen too.
  y.args = [x, [1, [2, 3]]];
  expect(Object.isFrozen(y.args[1][1])).toBe(true);
  expect(g.lint()).toBeUndefined();
  g.delete();
});

test('JSON.stringify of nodes and of args holding nodes gives their names', () => {
  const { g, x, y, z } = small();
  expect(JSON.stringify(z.args)).toBe('["add"]');
  expect(JSON.stringify({ args: y.args, kwargs: y.kwargs })).toBe('{"args":["x",1],"kwargs":{"alpha":2}}');
  expect(JSON.stringify(x)).toBe('"x"');
  g.delete();
});

test('a Graph is iterable over its nodes, and erasing while iterating is safe', () => {
  const { g } = small();
  expect([...g].map((n) => n.name)).toEqual(['x', 'add', 'relu', 'output']);
  const ops = [];
  for (const n of g) ops.push(n.op);
  expect(ops).toEqual(['placeholder', 'call_function', 'call_function', 'output']);
  g.delete();
});

test('a second init() with other options is refused; without options (or the same) it gives the API', async () => {
  expect(await init()).toBe(fx);
  expect(await init({})).toBe(fx);
  let err;
  try {
    await init({ limits: { maxTensorBytes: 1024 } });
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(FxError);
  expect(err.kind).toBe('ValueError');
  expect(err.message).toMatch(/apply only on the first init\(\).*setLimits/);
  // In a fresh process: a fresh but identical closure (a common pattern) is the same option; a
  // different one is not.
  const index = new URL('../../wasm/index.mjs', import.meta.url).href;
  const wasm = new URL('../../dist/fx.wasm', import.meta.url).pathname;
  const script = `
    import { init } from ${JSON.stringify(index)};
    const a = await init({ locateFile: () => ${JSON.stringify(wasm)} });
    const b = await init({ locateFile: () => ${JSON.stringify(wasm)} });
    const c = await init({ locateFile: () => '/elsewhere/fx.wasm' }).then(() => 'accepted', (e) => e.kind);
    console.log(a === b, c);
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  expect(r.stderr).toBe('');
  expect(r.stdout).toBe('true ValueError\n');
});
