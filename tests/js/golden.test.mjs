// Graphs of scripts/gen_goldens.py rebuilt through the JS API and compared byte for byte with
// the files real torch.fx 1.13 wrote (tests/golden/NAME.{graph.txt,graph_num_users.txt,
// tabular.txt,code.py,extra.txt}). Exercises the JS <-> C++ value encoding on every kind.
import fs from 'node:fs';
import { init } from '../../wasm/index.mjs';

const GOLDEN_DIR = new URL('../golden/', import.meta.url);
const read = (file) => fs.readFileSync(new URL(file, GOLDEN_DIR), 'utf8');
const mask = (s) => s.replace(/0x[0-9a-f]+/g, '0x');
const names = (nodes) => '[' + nodes.map((n) => n.name).join(', ') + ']';

/** NAME.extra.txt as a Map from key to value (`-- key\nvalue\n` records). */
function extras(name) {
  const text = read(`${name}.extra.txt`);
  const out = new Map();
  const re = /^-- (.*)\n/gm;
  const heads = [...text.matchAll(re)];
  heads.forEach((m, i) => {
    const start = m.index + m[0].length;
    const end = i + 1 < heads.length ? heads[i + 1].index : text.length;
    out.set(m[1], text.slice(start, end - 1)); // drop the record's trailing newline
  });
  return out;
}

let fx;
beforeAll(async () => {
  fx = await init();
});

function expectGoldens(name, g, extra = {}) {
  expect(g.print()).toBe(read(`${name}.graph.txt`));
  expect(g.print({ numUsers: true })).toBe(read(`${name}.graph_num_users.txt`));
  expect(mask(g.tabular() + '\n')).toBe(mask(read(`${name}.tabular.txt`))); // stdout of print_tabular()
  expect(g.pythonCode().src).toBe(read(`${name}.code.py`));
  const keys = Object.keys(extra);
  if (keys.length) {
    const want = extras(name);
    for (const k of keys) expect([k, mask(extra[k])]).toEqual([k, want.get(k)]);
  }
}

function manualGraph() {
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

const cases = {
  ref_my_module() {
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const param = g.getAttr('param');
    const add = g.callFunction('operator.add', [x, param]);
    const linear = g.callModule('linear', [add]);
    g.output(g.callMethod('clamp', [linear], { min: fx.float(0), max: fx.float(1) }));
    const gm = new fx.GraphModule(g, {
      className: 'MyModule',
      root: {
        parameters: { param: { shape: [3, 4], requiresGrad: true } },
        modules: {
          linear: {
            type: 'Linear',
            extraRepr: 'in_features=4, out_features=5, bias=True',
            parameters: { weight: { shape: [5, 4] }, bias: { shape: [5] } },
          },
        },
      },
    });
    expect(gm.code).toBe(read('ref_my_module.code.py'));
    const out = [g, { str: gm.toString(), print_readable: gm.printReadable() }];
    out.cleanup = () => gm.delete();
    return out;
  },

  manual_construction() {
    return [manualGraph().g];
  },

  manual_edits() {
    const { g, a, d, e } = manualGraph();
    const ip = g.insertingAfter(a);
    const s = g.callFunction('torch.sigmoid', [a]);
    ip.restore();
    const changed = a.replaceAllUsesWith(s, (u) => u !== s);
    const ip2 = g.insertingBefore(e);
    const n1 = g.callFunction('torch.neg', [d]);
    ip2.restore();
    e.replaceInputWith(d, n1);
    return [
      g,
      {
        replace_all_uses_with: names(changed),
        'users(add)': names(a.users),
        'users(sigmoid)': names(s.users),
        'users(getitem)': names(d.users),
        'all_input_nodes(cat)': names(e.allInputNodes),
        'len(nodes)': String(g.nodes.length),
      },
    ];
  },

  manual_update_arg() {
    const { g, y, a } = manualGraph();
    a.updateArg(1, 5);
    a.updateKwarg('alpha', 1);
    a.updateKwarg('out', null);
    return [g, { 'format_node(add)': a.formatNode(), 'users(y)': names(y.users), 'all_input_nodes(add)': names(a.allInputNodes) }];
  },

  all_opcodes() {
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const w = g.getAttr('w');
    const r = g.callFunction('torch.relu', [x]);
    const s = g.callModule('sub', [r], { scale: w });
    const v = g.callMethod('view', [s, -1]);
    const o = g.output(v);
    return [g, { format_node: [x, w, r, s, v, o].map((n) => n.formatNode()).join('\n') }];
  },

  args_none_bool_int() {
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const a = g.callMethod('scalars', [x, null, true, false, 0, 1, -1, 2 ** 62, -(2 ** 63), 9223372036854775807n], {
      a: null,
      b: true,
      c: -7,
    });
    g.output(a);
    expect(a.args.slice(7)).toEqual([4611686018427387904n, -9223372036854775808n, 9223372036854775807n]);
    return [g];
  },

  args_floats() {
    const f = fx.float;
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const vals = [1e-5, f(1e20), f(-0), Infinity, -Infinity, NaN, 0.1, f(1), f(123456789), f(1e16), f(1e15), 1.5,
      -2.5e-300, 5e-324, f(1.7976931348623157e308), 1 / 3, f(100), f(-1000000000), 2.5e-5, 0.0001, f(1e22),
      f(12345678901234567)];
    const a = g.callMethod('floats', [x, ...vals], { eps: 1e-5, neg: -0.5 });
    const c = g.callFunction('torch.clamp', [a], { min: -Infinity, max: Infinity });
    g.output(g.callFunction('operator.add', [c, NaN]));
    expect(a.args.slice(1)).toStrictEqual(vals);
    return [g];
  },

  args_complex() {
    const c = fx.complex;
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const vals = [c(1, 2), c(0, 2), c(1.5, -2.5), c(0, -1), c(-0, 1), c(0, 1e20), c(Infinity, NaN)];
    const a = g.callMethod('cplx', [x, ...vals], { z: c(1, 2) });
    g.output(g.callFunction('operator.mul', [a, c(1, 2)]));
    expect(a.args.slice(1)).toStrictEqual(vals);
    return [g];
  },

  args_strings() {
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const vals = ['hello', "it's", 'say "hi"', 'a\'b"c', 'back\\slash', 'line1\nline2', 'tab\there', '', '\x01\x7f', 'caf\u00e9', ' padded '];
    const a = g.callMethod('strs', [x, ...vals], { msg: 'it\'s "quoted"\n' });
    g.output(a);
    expect(a.args.slice(1)).toEqual(vals);
    return [g];
  },

  args_tuples() {
    const t = fx.tuple;
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const y = g.placeholder('y');
    const a = g.callMethod(
      'tuples',
      [x, t(), t([1]), t([1, 2, 3]), t([t([1, 2]), t([3, t([4])])]), t([y]), t([x, t([y, 1])]), t(['a', 'b'])],
      { t: t([x]), e: t() },
    );
    g.output(a);
    return [g];
  },

  args_lists() {
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const y = g.placeholder('y');
    const a = g.callFunction('torch.cat', [[x, y]]);
    g.output(g.callMethod('lists', [a, [], [1], [x, [y, 2]], [[], [fx.tuple()]], ['s', null]], { l: [a] }));
    return [g];
  },

  args_dicts() {
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const y = g.placeholder('y');
    const vals = [
      {},
      { a: 1, b: x },
      new Map([
        [1, 'one'],
        [2, x],
      ]),
      { k: [x, { j: fx.tuple([y]) }] },
      new Map([
        ['a', 1],
        [2, 'b'],
      ]),
    ];
    const a = g.callMethod('dicts', [x, ...vals], { d: { key: y, s: 'v' } });
    g.output(a);
    expect(a.args.slice(1)).toStrictEqual(vals);
    return [g];
  },

  args_slices() {
    const s = fx.slice;
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const n = g.placeholder('n');
    const gi = (v, idx) => g.callFunction('operator.getitem', [v, idx]);
    const a = gi(x, s(null, 2, null));
    const b = gi(a, s(1, -1, 2));
    const c = gi(b, s(null, null, null));
    const d = gi(c, s(n, null));
    const e = gi(d, fx.tuple([null, fx.ellipsis, s(1, -1, 2)]));
    const f = gi(e, fx.ellipsis);
    const h = gi(f, fx.tuple([s(null, null, null), s(1, 3, null)]));
    g.output(g.callMethod('sl', [h, s('a', 'b'), fx.ellipsis], { s: s(n, n, n) }));
    return [g, { 'users(n)': names(n.users) }];
  },

  args_dtypes() {
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const dts = ['float32', 'float64', 'float16', 'bfloat16', 'int8', 'int16', 'int32', 'int64', 'uint8', 'bool',
      'complex32', 'complex64', 'complex128', 'qint8', 'quint8', 'qint32'].map(fx.dtype);
    const a = g.callMethod('to', [x, fx.dtype('float16')]);
    const b = g.callMethod('dtypes', [a, ...dts], { dtype: fx.dtype('int64') });
    g.output(b);
    expect(b.args.slice(1)).toStrictEqual(dts);
    return [g];
  },

  args_devices() {
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const a = g.callMethod('to', [x, fx.device('cpu')]);
    const b = g.callMethod('to', [a], { device: fx.device('cuda', 0) });
    g.output(g.callMethod('devices', [b, fx.device('cuda'), fx.device('cpu', 1)]));
    return [g];
  },

  args_memory_format_layout() {
    const g = new fx.Graph();
    const x = g.placeholder('x');
    const a = g.callMethod('to', [x], {
      device: fx.device('cpu'),
      dtype: fx.dtype('float16'),
      memory_format: fx.memoryFormat('contiguous_format'),
    });
    const mf = ['contiguous_format', 'channels_last', 'channels_last_3d', 'preserve_format'].map(fx.memoryFormat);
    const b = g.callMethod('formats', [a, ...mf]);
    const ly = ['strided', 'sparse_coo', 'sparse_csr'].map(fx.layout);
    const c = g.callMethod('layouts', [b, ...ly], { layout: fx.layout('strided') });
    g.output(c);
    expect(c.args.slice(1)).toStrictEqual(ly);
    return [g];
  },
};

test.each(Object.keys(cases))('%s matches the torch.fx goldens', (name) => {
  const r = cases[name]();
  const [g, extra] = r;
  expectGoldens(name, g, extra);
  if (r.cleanup) r.cleanup();
  else g.delete();
});
