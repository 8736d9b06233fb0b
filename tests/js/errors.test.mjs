// Errors cross the boundary as FxError with a kind; after every error the module keeps working.
import { spawnSync } from 'node:child_process';
import { init, FxError } from '../../wasm/index.mjs';

let fx;
beforeAll(async () => {
  fx = await init();
});

/** Builds, prints and frees a small graph: proves the module still works after an error. */
function stillWorks() {
  const g = new fx.Graph();
  const x = g.placeholder('x');
  g.output(g.callFunction('torch.relu', [x]));
  expect(g.print()).toBe(
    'graph():\n    %x : [#users=1] = placeholder[target=x]\n' +
      '    %relu : [#users=1] = call_function[target=torch.relu](args = (%x,), kwargs = {})\n    return relu',
  );
  g.lint();
  g.delete();
}

/** Runs `f`, expects an FxError of `kind`, returns it. */
function expectFxError(f, kind) {
  let err;
  try {
    f();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(FxError);
  expect(err).toBeInstanceOf(Error);
  expect(err.name).toBe('FxError');
  expect(err.kind).toBe(kind);
  stillWorks();
  return err;
}

function myModule() {
  const g = new fx.Graph();
  const x = g.placeholder('x');
  const param = g.getAttr('param');
  const add = g.callFunction('operator.add', [x, param]);
  const linear = g.callModule('linear', [add]);
  const clamp = g.callMethod('clamp', [linear], { min: fx.float(0), max: fx.float(1) });
  g.output(clamp);
  return { g, x, param, add, linear, clamp };
}

test('erasing a used node: GraphError with torch.fx message', () => {
  const { g, add } = myModule();
  const e = expectFxError(() => g.eraseNode(add), 'GraphError');
  expect(e.message).toBe('Tried to erase Node add but it still had 1 users in the graph: {linear: None}!');
  expect(e.node).toBe('add');
  expect(add.erased).toBe(false);
  expect(g.size).toBe(6);
  g.delete();
});

test('a handle to an erased node is stale', () => {
  const { g, x, clamp } = myModule();
  const dead = g.callFunction('torch.relu', [x]);
  const ip = g.insertingAfter(dead);
  g.eraseNode(dead);
  expect(dead.erased).toBe(true);
  for (const f of [
    () => dead.name,
    () => dead.args,
    () => dead.users,
    () => dead.formatNode(),
    () => dead.setMeta('k', 1),
    () => g.callFunction('torch.neg', [dead]),
    () => clamp.replaceInputWith(g.findNode('linear'), dead),
    () => g.eraseNode(dead),
  ]) {
    const e = expectFxError(f, 'StaleHandleError');
    expect(e.message).toMatch(/relu/);
  }
  // The insert point next to the erased node is stale too, until restored.
  const e = expectFxError(() => g.callFunction('torch.neg', [x]), 'StaleHandleError');
  expect(e.message).toMatch(/insert point/);
  ip.restore();
  g.callFunction('torch.neg', [x]);
  expect(g.print()).toContain('%neg : [#users=0]');
  g.delete();
});

test('handles of a deleted graph are stale; delete() is idempotent', () => {
  const { g, add } = myModule();
  const ip = g.insertingBefore(add);
  g.delete();
  g.delete();
  expectFxError(() => add.name, 'StaleHandleError');
  expectFxError(() => add.erased, 'StaleHandleError');
  expectFxError(() => g.print(), 'StaleHandleError');
  expectFxError(() => g.placeholder('y'), 'StaleHandleError');
  expectFxError(() => g.nodes, 'StaleHandleError');
  ip.restore(); // nothing left to restore: no error
  const other = new fx.Graph();
  expectFxError(() => other.output(add), 'StaleHandleError');
  other.delete();
});

test('lint of an out-of-order graph: LintError', () => {
  const g = new fx.Graph();
  const x = g.placeholder('x');
  const relu = g.callFunction('torch.relu', [x]);
  const neg = g.callFunction('torch.neg', [relu]);
  g.output(neg);
  relu.prepend(neg);
  const e = expectFxError(() => g.lint(), 'LintError');
  expect(e.message).toBe(
    "Argument 'relu' of Node 'neg' was used before it has been defined! Please check that Nodes in the graph " +
      'are topologically ordered\n' +
      g.print(),
  );
  expect(e.node).toBe('neg');
  expectFxError(() => g.eliminateDeadCode(), 'LintError');
  neg.prepend(relu);
  g.lint();
  g.delete();
});

test('bad call_function targets and opcodes: ValueError', () => {
  const g = new fx.Graph();
  const x = g.placeholder('x');
  let e = expectFxError(() => g.callFunction('relu', [x]), 'ValueError');
  expect(e.message).toMatch(/call_function target 'relu' is not a qualified name/);
  expectFxError(() => g.callFunction('', [x]), 'ValueError');
  expectFxError(() => g.callFunction('torch.', [x]), 'ValueError');
  e = expectFxError(() => g.createNode('call', 'x'), 'ValueError');
  expect(e.message).toMatch(/unknown opcode 'call'/);
  expectFxError(() => g.createNode('call_function', 'relu', [x]), 'ValueError');
  expectFxError(() => g.callFunction('torch.relu', [fx.dtype('float33')]), 'ValueError');
  expectFxError(() => g.callFunction('torch.relu', [fx.memoryFormat('nhwc')]), 'ValueError');
  expectFxError(() => g.callFunction('torch.relu', [2n ** 64n]), 'ValueError');
  expect(g.size).toBe(1);
  g.delete();
});

test('JS values that are not fx values: TypeError; nesting is bounded', () => {
  const g = new fx.Graph();
  const x = g.placeholder('x');
  expectFxError(() => g.callFunction('torch.relu', [undefined]), 'TypeError');
  expectFxError(() => g.callFunction('torch.relu', [() => 1]), 'TypeError');
  expectFxError(() => g.callFunction('torch.relu', [new Date()]), 'TypeError');
  expectFxError(() => g.callFunction('torch.relu', x), 'TypeError');
  expectFxError(() => g.callFunction('torch.relu', [x], 'kw'), 'TypeError');
  expectFxError(() => x.setMeta('n', x), 'ValueError'); // meta is JSON-like: no nodes
  expectFxError(() => x.updateArg(0, 1), 'IndexError');
  let deep = 1;
  for (let i = 0; i < 1000; i++) deep = [deep];
  expectFxError(() => g.callFunction('torch.relu', [deep]), 'ValueError');
  expectFxError(() => g.callFunction('builtins.dict', [new Map([[[1], 2]])]), 'TypeError');
  expectFxError(() => g.callFunction('builtins.dict', [new Map([[x, 2]])]), 'ValueError');
  g.delete();
});

test('nodes of another graph: GraphError', () => {
  const a = new fx.Graph();
  const xa = a.placeholder('x');
  const ra = a.callFunction('torch.relu', [xa]);
  const b = new fx.Graph();
  const xb = b.placeholder('x');
  let e = expectFxError(() => b.callFunction('torch.relu', [xa]), 'GraphError');
  expect(e.message).toMatch(/belongs to another Graph/);
  expectFxError(() => b.eraseNode(xa), 'GraphError');
  expectFxError(() => xb.prepend(xa), 'GraphError');
  expectFxError(() => xb.replaceAllUsesWith(xa), 'GraphError');
  expectFxError(() => b.insertingAfter(xa), 'GraphError');
  e = expectFxError(() => b.nodeCopy(ra), 'GraphError');
  expect(e.message).toMatch(/argTransform/);
  expectFxError(() => b.graphCopy(b), 'ValueError');
  expectFxError(() => b.graphCopy(a, new Map([[xb, xb]])), 'GraphError');
  a.delete();
  b.delete();
});

test('GraphModule errors leave the graph with its owner', () => {
  const { g } = myModule();
  const e = expectFxError(() => new fx.GraphModule(g, { root: { parameters: { param: { shape: [3, 4] } } } }), 'AttributeError');
  expect(e.message).toBe('Node linear referenced target linear but that target was not provided in root');
  expect(e.node).toBe('linear');
  expect(g.owningModule).toBeNull();
  expect(g.size).toBe(6); // still ours and intact
  expectFxError(() => new fx.GraphModule(g, { root: { parameters: { param: { shape: [-1] } } } }), 'ValueError');
  expectFxError(() => new fx.GraphModule(g, { root: { parameters: { param: { shape: [2], data: new Float32Array(3) } } } }), 'ValueError');
  expectFxError(() => new fx.GraphModule(g, { root: { bogus: 1 } }), 'ValueError');
  const gm = new fx.GraphModule(g, {
    root: { parameters: { param: { shape: [3, 4] } }, modules: { linear: { type: 'Linear' } } },
  });
  expectFxError(() => new fx.GraphModule(g), 'GraphError');
  expectFxError(() => gm.getTensorData('nope'), 'AttributeError');
  g.delete(); // owned by the GraphModule: no effect
  expect(g.size).toBe(6);
  gm.delete();
  expectFxError(() => g.print(), 'StaleHandleError');
  expectFxError(() => gm.code, 'StaleHandleError');
  gm.delete();
});

test('using the API before init() resolves throws FxError (fresh process)', () => {
  const script =
    `import { Graph, FxError } from ${JSON.stringify(new URL('../../wasm/index.mjs', import.meta.url).href)};\n` +
    `try { new Graph(); console.log('no error'); } catch (e) { console.log(e instanceof FxError, e.kind, e.message); }`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  expect(r.status).toBe(0);
  expect(r.stdout).toBe('true RuntimeError fxwasm is not initialised yet: call `await init()` first\n');
});
