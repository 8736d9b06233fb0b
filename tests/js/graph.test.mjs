// Graph building, printing and mutation through the JS API, checked against torch.fx's texts.
import fs from 'node:fs';
import { init, FxError, FxTuple, FxFloat, FxDtype, FxDevice, FxSlice, Graph, GraphModule } from '../../wasm/index.mjs';

const GOLDEN_DIR = new URL('../golden/', import.meta.url);

// Goldens written by real torch.fx 1.13 (scripts/gen_goldens.py); tabular.txt is the stdout of
// print_tabular(), i.e. tabular() plus print()'s newline.
const golden = (name) => fs.readFileSync(new URL(name, GOLDEN_DIR), 'utf8');
const GRAPH = 'ref_my_module.graph.txt';
const TABULAR = 'ref_my_module.tabular.txt';
const CODE = 'ref_my_module.code.py';

const maskAddresses = (s) => s.replace(/0x[0-9a-f]+/g, '0x');

const MY_MODULE_ROOT = {
  parameters: { param: { shape: [3, 4] } },
  modules: {
    linear: {
      type: 'Linear',
      extraRepr: 'in_features=4, out_features=5, bias=True',
      parameters: { weight: { shape: [5, 4] }, bias: { shape: [5] } },
    },
  },
};

function buildMyModule(fx) {
  const g = new fx.Graph();
  const x = g.placeholder('x');
  const param = g.getAttr('param');
  const add = g.callFunction('operator.add', [x, param]);
  const linear = g.callModule('linear', [add]);
  const clamp = g.callMethod('clamp', [linear], { min: fx.float(0), max: fx.float(1) });
  g.output(clamp);
  return { g, x, param, add, linear, clamp };
}

let fx;
beforeAll(async () => {
  fx = await init();
});

describe('init', () => {
  test('is memoized and exposes the API', async () => {
    expect(await init()).toBe(fx);
    // The wasm module's version comes from CMake's project(VERSION); it must match the package's.
    const pkg = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    expect(fx.version).toBe(pkg.version);
    expect(fx.Graph).toBe(Graph);
    expect(fx.GraphModule).toBe(GraphModule);
    expect(fx.FxError).toBe(FxError);
  });
});

describe('MyModule (torch.fx docs example) matches the goldens byte for byte', () => {
  test('print(graph)', () => {
    const { g } = buildMyModule(fx);
    expect(g.print()).toBe(golden(GRAPH));
    expect(String(g)).toBe(golden(GRAPH));
    g.delete();
  });

  test('print_tabular()', () => {
    const { g } = buildMyModule(fx);
    expect(maskAddresses(g.tabular() + '\n')).toBe(maskAddresses(golden(TABULAR)));
    g.delete();
  });

  test('python_code().src', () => {
    const { g } = buildMyModule(fx);
    const pc = g.pythonCode();
    expect(pc.src).toBe(golden(CODE));
    expect(pc.src.startsWith('\n\n\ndef forward(self, x):\n')).toBe(true);
    expect(pc.src.endsWith('return clamp\n    ')).toBe(true);
    expect(Object.keys(pc.globals).sort()).toEqual(['NoneType', 'device', 'fx_pytree', 'inf', 'nan', 'pytree', 'torch']);
    g.delete();
  });

  test('GraphModule.code', () => {
    const { g } = buildMyModule(fx);
    const gm = new fx.GraphModule(g, { root: MY_MODULE_ROOT });
    expect(gm.code).toBe(golden(CODE));
    expect(gm.graph).toBe(g);
    expect(g.owningModule).toBe(gm);
    expect(gm.toString()).toBe(
      'GraphModule(\n  (linear): Linear(in_features=4, out_features=5, bias=True)\n)\n' +
        golden(CODE) +
        '\n# To see more debug info, please use `graph_module.print_readable()`',
    );
    gm.delete();
  });

  test('torch 2.x num_users token', () => {
    const { g, clamp } = buildMyModule(fx);
    expect(g.print({ numUsers: true })).toBe(golden('ref_my_module.graph_num_users.txt'));
    expect(clamp.formatNode({ numUsers: true })).toBe(
      '%clamp : [num_users=1] = call_method[target=clamp](args = (%linear,), kwargs = {min: 0.0, max: 1.0})',
    );
    g.delete();
  });
});

describe('nodes', () => {
  test('properties and handles', () => {
    const { g, x, param, add, linear, clamp } = buildMyModule(fx);
    const out = g.outputNode;
    expect(g.nodes).toEqual([x, param, add, linear, clamp, out]);
    expect(g.size).toBe(6);
    expect(add.name).toBe('add');
    expect(add.op).toBe('call_function');
    expect(add.target).toBe('operator.add');
    expect(linear.target).toBe('linear');
    expect(out.op).toBe('output');
    expect(add.args).toEqual([x, param]);
    expect(add.args[0]).toBe(x); // handles are cached: identity works
    expect(clamp.kwargs).toStrictEqual({ min: fx.float(0), max: fx.float(1) });
    expect(add.users).toEqual([linear]);
    expect(clamp.allInputNodes).toEqual([linear]);
    expect(x.prev).toBeNull();
    expect(x.next).toBe(param);
    expect(out.next).toBeNull();
    expect(clamp.prev).toBe(linear);
    expect(g.findNode('linear')).toBe(linear);
    expect(g.findNode('nope')).toBeNull();
    expect(add.erased).toBe(false);
    expect(String(add)).toBe('add');
    expect(x.isImpure()).toBe(true);
    expect(add.isImpure()).toBe(false);
    expect(add.formatNode()).toBe('%add : [#users=1] = call_function[target=operator.add](args = (%x, %param), kwargs = {})');
    g.delete();
  });

  test('types, defaults, meta and stack traces', () => {
    const g = new fx.Graph();
    const x = g.placeholder('x', { type: 'torch.Tensor' });
    const k = g.placeholder('k', { type: 'int', defaultValue: 3 });
    const n = g.placeholder('n', { defaultValue: null });
    const add = g.callFunction('operator.add', [x, k]);
    g.output(add);
    expect(x.type).toBe('torch.Tensor');
    expect(add.type).toBeNull();
    add.type = 'torch.Tensor';
    expect(add.type).toBe('torch.Tensor');
    add.type = null;
    expect(add.type).toBeNull();
    expect(k.args).toEqual([3]);
    expect(n.args).toEqual([null]);
    expect(g.print()).toContain('%k : int [#users=1] = placeholder[target=k](default=3)');
    expect(g.print()).toContain('%n : [#users=0] = placeholder[target=n](default=None)');
    expect(g.pythonCode().src).toContain('def forward(self, x : torch.Tensor, k : int = 3, n = None):');

    expect(add.getMeta('tag')).toBeUndefined();
    add.setMeta('tag', { a: [1, fx.float(2)], b: 'x' });
    expect(add.getMeta('tag')).toStrictEqual({ a: [1, fx.float(2)], b: 'x' });
    expect(add.meta).toStrictEqual({ tag: { a: [1, fx.float(2)], b: 'x' } });
    expect(add.deleteMeta('tag')).toBe(true);
    expect(add.deleteMeta('tag')).toBe(false);
    expect(add.stackTrace).toBeNull();
    add.stackTrace = 'File "m.py", line 3, in forward';
    expect(add.stackTrace).toBe('File "m.py", line 3, in forward');
    expect(add.getMeta('stack_trace')).toBe('File "m.py", line 3, in forward');
    g.delete();
  });

  test('values round-trip through args exactly', () => {
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const values = [
      null,
      true,
      false,
      0,
      -5,
      2 ** 40,
      2n ** 62n,
      1.5,
      fx.float(2),
      fx.float(-0),
      NaN,
      Infinity,
      -Infinity,
      'plain',
      'quote\' "double" back\\slash\nnewline \u00e9 \u{1F600}',
      fx.tuple([]),
      fx.tuple([1]),
      [],
      [1, [2, fx.tuple([x])]],
      { a: 1, b: [x] },
      new Map([
        [1, 'one'],
        [fx.tuple([1, 2]), 3],
      ]),
      new Map([['0', 'index-like key']]),
      fx.slice(1, null, x),
      fx.slice(),
      fx.ellipsis,
      fx.dtype('float16'),
      fx.device('cuda', 1),
      fx.device('cpu'),
      fx.memoryFormat('channels_last'),
      fx.layout('strided'),
      fx.complex(1, -2),
    ];
    const node = g.callFunction('builtins.print', values);
    expect(node.args).toStrictEqual(values);
    expect(node.args[15]).toBeInstanceOf(FxTuple);
    expect(Array.isArray(node.args[17])).toBe(true);
    expect(node.args[17]).not.toBeInstanceOf(FxTuple);
    // Normalised forms: aliases, "cuda:0" strings, integers beyond 2^53.
    node.setArgs([fx.dtype('torch.float'), fx.device('cuda:0'), 2 ** 53, 9007199254740993n]);
    expect(node.args).toStrictEqual([fx.dtype('float32'), fx.device('cuda', 0), 9007199254740992n, 9007199254740993n]);
    expect(node.args[0]).toBeInstanceOf(FxDtype);
    expect(node.args[1]).toBeInstanceOf(FxDevice);
    node.setKwargs(new Map([['k', fx.float(1.25)]]));
    expect(node.kwargs).toStrictEqual({ k: 1.25 });
    g.delete();
  });

  test('constants print like torch.fx (§2.6)', () => {
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const to = g.callMethod('to', [x], {
      device: fx.device('cpu'),
      dtype: fx.dtype('float16'),
      memory_format: fx.memoryFormat('contiguous_format'),
    });
    const gi = g.callFunction('operator.getitem', [to, fx.tuple([null, fx.ellipsis, fx.slice(1, -1, 2)])]);
    const mul = g.callFunction('operator.mul', [gi, fx.complex(1, 2)]);
    const add = g.callFunction('operator.add', [mul, NaN]);
    g.output(add);
    const text = g.print();
    expect(text).toContain('kwargs = {device: cpu, dtype: torch.float16, memory_format: torch.contiguous_format})');
    expect(text).toContain('args = (%to, (None, Ellipsis, slice(1, -1, 2)))');
    const src = g.pythonCode().src;
    expect(src).toContain(
      "to = x.to(device = device(type='cpu'), dtype = torch.float16, memory_format = torch.contiguous_format);  x = None",
    );
    expect(src).toContain('getitem = to[(None, Ellipsis, slice(1, -1, 2))];  to = None');
    expect(src).toContain('mul = getitem * (1+2j);  getitem = None');
    expect(src).toContain('add = mul + nan;  mul = None');
    g.delete();
  });

  test('createNode, including explicit names', () => {
    const g = new fx.Graph();
    const x = g.createNode('placeholder', 'x');
    const a = g.createNode('call_function', 'torch.relu', [x], {}, { name: 'act' });
    const b = g.createNode('call_function', 'torch.relu', [a], null, { name: 'act' });
    g.createNode('output', 'output', [b]);
    expect([a.name, b.name]).toEqual(['act', 'act_1']);
    expect(g.print()).toBe(
      'graph():\n' +
        '    %x : [#users=1] = placeholder[target=x]\n' +
        '    %act : [#users=1] = call_function[target=torch.relu](args = (%x,), kwargs = {})\n' +
        '    %act_1 : [#users=1] = call_function[target=torch.relu](args = (%act,), kwargs = {})\n' +
        '    return act_1',
    );
    g.delete();
  });
});

describe('graph-building APIs (inventory §2.7)', () => {
  function build() {
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const y = g.placeholder('y', { defaultValue: 3 });
    const w = g.getAttr('lin.weight');
    const a = g.callFunction('torch.add', [x, y], { alpha: 2 });
    const b = g.callMethod('relu', [a]);
    const c = g.callModule('lin', [b]);
    const d = g.callFunction('operator.getitem', [c, fx.slice(null, 2)]);
    const e = g.callFunction('torch.cat', [[d, d]], { dim: -1 });
    g.output(fx.tuple([e, { w }]));
    return { g, x, y, w, a, b, c, d, e };
  }

  test('manual construction prints and generates code like torch.fx', () => {
    const { g, a, b, e, d } = build();
    expect(g.print()).toBe(
      [
        'graph():',
        '    %x : [#users=1] = placeholder[target=x]',
        '    %y : [#users=1] = placeholder[target=y](default=3)',
        '    %lin_weight : [#users=1] = get_attr[target=lin.weight]',
        '    %add : [#users=1] = call_function[target=torch.add](args = (%x, %y), kwargs = {alpha: 2})',
        '    %relu : [#users=1] = call_method[target=relu](args = (%add,), kwargs = {})',
        '    %lin : [#users=1] = call_module[target=lin](args = (%relu,), kwargs = {})',
        '    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%lin, slice(None, 2, None)), kwargs = {})',
        '    %cat : [#users=1] = call_function[target=torch.cat](args = ([%getitem, %getitem],), kwargs = {dim: -1})',
        "    return (cat, {'w': lin_weight})",
      ].join('\n'),
    );
    expect(g.pythonCode().src).toBe(
      '\n\n\n' +
        [
          'def forward(self, x, y = 3):',
          '    lin_weight = self.lin.weight',
          '    add = torch.add(x, y, alpha = 2);  x = y = None',
          '    relu = add.relu();  add = None',
          '    lin = self.lin(relu);  relu = None',
          '    getitem = lin[slice(None, 2, None)];  lin = None',
          '    cat = torch.cat([getitem, getitem], dim = -1);  getitem = None',
          "    return (cat, {'w': lin_weight})",
          '    ',
        ].join('\n'),
    );
    expect(a.users).toEqual([b]);
    expect(e.allInputNodes).toEqual([d]);
    const out = g.outputNode.args[0];
    expect(out).toBeInstanceOf(FxTuple);
    expect(out[1]).toEqual({ w: g.findNode('lin_weight') });
    g.lint();
    g.delete();
  });

  test('insert points, replaceAllUsesWith with a callback, replaceInputWith, updateArg/Kwarg', () => {
    const { g, a, d, e } = build();
    const ip = g.insertingAfter(a);
    const s = g.callFunction('torch.sigmoid', [a]);
    ip.restore();
    const seen = [];
    const changed = a.replaceAllUsesWith(s, (u) => {
      seen.push(u.name);
      return u !== s;
    });
    expect(seen).toEqual(['relu', 'sigmoid']);
    expect(changed.map(String)).toEqual(['relu']);
    {
      const ip2 = g.insertingBefore(e);
      const n1 = g.callFunction('torch.neg', [d]);
      ip2[Symbol.dispose]();
      e.replaceInputWith(d, n1);
    }
    const src = g.pythonCode().src;
    for (const line of [
      '    sigmoid = torch.sigmoid(add);  add = None',
      '    relu = sigmoid.relu();  sigmoid = None',
      '    neg = torch.neg(getitem);  getitem = None',
      '    cat = torch.cat([neg, neg], dim = -1);  neg = None',
    ])
      expect(src).toContain(line + '\n');
    expect(g.nodes.map(String)).toEqual(['x', 'y', 'lin_weight', 'add', 'sigmoid', 'relu', 'lin', 'getitem', 'neg', 'cat', 'output']);
    a.updateArg(1, 5);
    a.updateKwarg('alpha', 1);
    expect(a.formatNode()).toBe('%add : [#users=1] = call_function[target=torch.add](args = (%x, 5), kwargs = {alpha: 1})');
    g.lint();
    g.delete();
  });

  test('insertingBefore() / insertingAfter() without a node, nesting, keep()', () => {
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const r = g.callFunction('torch.relu', [x]);
    g.output(r);
    const outer = g.insertingAfter(x);
    const t = g.callFunction('torch.tanh', [x]);
    const inner = g.insertingBefore(); // beginning of the graph
    const p0 = g.placeholder('first');
    inner.restore();
    const t2 = g.callFunction('torch.abs', [x]); // back to "after x": directly after x
    outer.restore();
    expect(g.nodes.map(String)).toEqual(['first', 'x', 'abs_1', 'tanh', 'relu', 'output']);
    expect(p0.name).toBe('first');
    expect(t.name).toBe('tanh');
    expect(t2.name).toBe('abs_1');
    g.insertingAfter(r).keep(); // permanent
    const k = g.callFunction('torch.neg', [r]);
    expect(k.prev).toBe(r);
    g.delete();
  });

  test('node prepend/append move nodes', () => {
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const a = g.callFunction('torch.relu', [x]);
    const b = g.callFunction('torch.tanh', [x]);
    g.output(fx.tuple([a, b]));
    a.prepend(b);
    expect(g.nodes.map(String)).toEqual(['x', 'tanh', 'relu', 'output']);
    b.append(x); // x goes after tanh: now out of order
    expect(g.nodes.map(String)).toEqual(['tanh', 'x', 'relu', 'output']);
    b.prepend(x);
    g.lint();
    g.delete();
  });

  test('nodeCopy, graphCopy with a valMap, clone', () => {
    const src = new fx.Graph();
    const x = src.placeholder('x');
    const relu = src.callFunction('torch.relu', [x]);
    const add = src.callFunction('operator.add', [relu, 1]);
    add.setMeta('tag', 'copied');
    src.output(add);

    const dst = new fx.Graph();
    const inp = dst.placeholder('inp');
    const valMap = new Map([[x, inp]]);
    const out = dst.graphCopy(src, valMap);
    dst.output(out);
    expect(dst.nodes.map(String)).toEqual(['inp', 'relu', 'add', 'output']);
    expect(valMap.get(relu)).toBe(dst.findNode('relu'));
    expect(valMap.get(add)).toBe(out);
    expect(out.getMeta('tag')).toBe('copied');

    const other = new fx.Graph();
    const y = other.placeholder('y');
    const copied = other.nodeCopy(relu, (n) => (n === x ? y : n));
    expect(copied.args).toEqual([y]);
    const same = other.nodeCopy(copied);
    expect(same.name).toBe('relu_1');
    expect(same.args).toEqual([y]);

    const c = src.clone();
    expect(c.nodes.map(String)).toEqual(['x', 'relu', 'add', 'output']);
    expect(c.print()).toBe(src.print());
    src.delete();
    expect(c.print()).toContain('%relu');
    for (const g of [c, dst, other]) g.delete();
  });

  test('eliminateDeadCode keeps impure nodes', () => {
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const unused = g.placeholder('unused');
    const dead1 = g.callFunction('torch.relu', [x]);
    const dead2 = g.callFunction('torch.neg', [dead1]);
    const gt = g.callFunction('operator.gt', [x, 0]);
    g.callFunction('torch._assert', [gt, 'msg']);
    const live = g.callFunction('torch.tanh', [x]);
    g.output(live);
    expect(g.eliminateDeadCode()).toBe(true);
    expect(g.nodes.map(String)).toEqual(['x', 'unused', 'gt', '_assert', 'tanh', 'output']);
    expect(dead1.erased).toBe(true);
    expect(dead2.erased).toBe(true);
    expect(unused.erased).toBe(false);
    expect(g.eliminateDeadCode()).toBe(false);
    g.delete();
  });
});

describe('GraphModule', () => {
  test('attribute tree, submodules, tensors, printReadable', () => {
    const { g } = buildMyModule(fx);
    const data = new Float32Array([1, 2, 3, 4, 5]);
    const gm = new fx.GraphModule(g, {
      className: 'MyModule',
      root: {
        ...MY_MODULE_ROOT,
        modules: {
          linear: { ...MY_MODULE_ROOT.modules.linear, parameters: { weight: { shape: [5, 4] }, bias: { shape: [5], data } } },
          unused: { type: 'ReLU' },
        },
        buffers: { running: { dtype: 'int64', shape: [2], data: new BigInt64Array([7n, 8n]) } },
      },
    });
    expect(gm.className).toBe('MyModule');
    // Like torch.fx, only attributes the graph references are copied.
    expect(gm.namedModules()).toEqual([
      ['', { type: 'MyModule', extraRepr: '', impure: false }],
      ['linear', { type: 'Linear', extraRepr: 'in_features=4, out_features=5, bias=True', impure: false }],
    ]);
    expect(gm.namedParameters()).toEqual([
      ['param', { dtype: 'float32', shape: [3, 4], requiresGrad: false, hasData: false }],
      ['linear.weight', { dtype: 'float32', shape: [5, 4], requiresGrad: false, hasData: false }],
      ['linear.bias', { dtype: 'float32', shape: [5], requiresGrad: false, hasData: true }],
    ]);
    expect(gm.namedBuffers()).toEqual([]);
    expect(new Float32Array(gm.getTensorData('linear.bias').buffer)).toEqual(data);
    expect(gm.getTensorData('param')).toBeNull();
    expect(gm.printReadable()).toBe(
      'class MyModule(torch.nn.Module):\n' +
        '    def forward(self, x):\n' +
        '        \n' +
        '        # No stacktrace found for following nodes \n' +
        '        param = self.param\n' +
        '        add = x + param;  x = param = None\n' +
        '        linear = self.linear(add);  add = None\n' +
        '        clamp = linear.clamp(min = 0.0, max = 1.0);  linear = None\n' +
        '        return clamp\n' +
        '        ',
    );

    expect(gm.addSubmodule('foo.bar', { type: 'ReLU' })).toBe(true);
    expect(gm.addSubmodule('param.x', { type: 'ReLU' })).toBe(false);
    expect(gm.namedModules().map((m) => m[0])).toEqual(['', 'linear', 'foo', 'foo.bar']);
    expect(gm.deleteSubmodule('nope')).toBe(false);
    expect(gm.deleteSubmodule('foo.bar')).toBe(true);
    gm.addSubmodule('foo.bar', { type: 'ReLU' });
    gm.deleteAllUnusedSubmodules();
    expect(gm.namedModules().map((m) => m[0])).toEqual(['', 'linear']);

    // Mutate the owned graph, then recompile.
    const clamp = g.findNode('clamp');
    const ip = g.insertingAfter(clamp);
    const relu = g.callFunction('torch.relu', [clamp]);
    ip.restore();
    clamp.replaceAllUsesWith(relu, (u) => u !== relu);
    expect(gm.code).toBe(golden(CODE));
    const pc = gm.recompile();
    expect(pc.src).toContain('relu = torch.relu(clamp);  clamp = None\n    return relu\n    ');
    expect(gm.code).toBe(pc.src);
    expect(gm.pythonCode().src).toBe(pc.src);
    gm.delete();
  });

  test('buffers, dtype checks and GraphModules from a graph without attributes', () => {
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const b = g.getAttr('stats.mean');
    g.output(g.callFunction('operator.sub', [x, b]));
    const gm = new fx.GraphModule(g, {
      root: { modules: { stats: { buffers: { mean: { dtype: 'float64', shape: [], data: new Float64Array([0.5]) } } } } },
    });
    expect(gm.namedBuffers()).toEqual([['stats.mean', { dtype: 'float64', shape: [], requiresGrad: false, hasData: true }]]);
    expect(gm.code).toContain('stats_mean = self.stats.mean');
    gm.delete();

    const plain = new fx.Graph();
    plain.output(plain.callFunction('torch.relu', [plain.placeholder('x')]));
    const gm2 = new fx.GraphModule(plain);
    expect(gm2.code).toBe('\n\n\ndef forward(self, x):\n    relu = torch.relu(x);  x = None\n    return relu\n    ');
    gm2[Symbol.dispose]();
  });
});
