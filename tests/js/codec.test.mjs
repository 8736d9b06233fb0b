// The value format's two halves together (wasm/codec.mjs and wasm/codec.h): every value of the
// corpus goes JS encode -> C++ decode -> C++ encode -> JS decode, through a node's args (where
// Nodes are allowed) and its meta (any dict key kind), and must come back exactly: same classes,
// Object.is numbers (-0, NaN), BigInt vs number, tuple vs list, Map vs object, key order. Then
// malformed or too deep text handed straight to the C++ half, and what each half rejects.
import { init, FxError, FxTuple, FxFloat, FxComplex, FxSlice, FxDtype, FxDevice, FxMemoryFormat, FxLayout, Node } from '../../wasm/index.mjs';
import { M, ck } from '../../wasm/runtime.mjs';
import { decode } from '../../wasm/codec.mjs';
import * as values from '../../wasm/index.mjs';

let fx;
beforeAll(async () => {
  fx = await init();
});

// Strict structural equality: returns null, or the path of the first difference.
function diff(a, b, path = '$') {
  if (typeof a !== typeof b) return `${path}: ${typeof a} vs ${typeof b}`;
  if (typeof a === 'number') return Object.is(a, b) ? null : `${path}: ${a} vs ${b}${Object.is(a, -0) || Object.is(b, -0) ? ' (signed zero)' : ''}`;
  if (typeof a !== 'object' || a === null || b === null) return a === b ? null : `${path}: ${String(a)} vs ${String(b)}`;
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b))
    return `${path}: ${a.constructor?.name ?? 'null-prototype'} vs ${b.constructor?.name ?? 'null-prototype'}`;
  if (a instanceof Node) return a === b ? null : `${path}: Node ${a.name} vs ${b.name}`;
  if (a instanceof Map) {
    const ea = [...a], eb = [...b];
    if (ea.length !== eb.length) return `${path}: Map of ${ea.length} vs ${eb.length}`;
    for (let i = 0; i < ea.length; i++) {
      const d = diff(ea[i][0], eb[i][0], `${path}.key${i}`) ?? diff(ea[i][1], eb[i][1], `${path}.value${i}`);
      if (d) return d;
    }
    return null;
  }
  const ka = Reflect.ownKeys(a), kb = Reflect.ownKeys(b);
  if (ka.length !== kb.length || ka.some((k, i) => k !== kb[i])) return `${path}: keys ${String(ka)} vs ${String(kb)}`;
  for (const k of ka) {
    const d = diff(a[k], b[k], `${path}.${String(k)}`);
    if (d) return d;
  }
  return null;
}

function nested(levels, leaf) {
  let v = leaf;
  for (let i = 0; i < levels; i++) v = [v];
  return v;
}

// [name, value, expected after the round trip (default: the value itself)].
// Built before init() (test.each collects it), so it uses the module's value factories.
function corpus() {
  const fx = values;
  const t = (...xs) => fx.tuple(xs);
  return [
    ['None', null],
    ['True', true],
    ['False', false],
    ['int 0', 0],
    ['int -1', -1],
    ['int 2^53-1', Number.MAX_SAFE_INTEGER],
    ['int -(2^53-1)', Number.MIN_SAFE_INTEGER],
    ['int64 max', 2n ** 63n - 1n],
    ['int64 min', -(2n ** 63n)],
    ['small BigInt reads back as a number', 5n, 5],
    ['integral number 2^53 reads back as a BigInt', 2 ** 53, 2n ** 53n],
    ['-0 as a plain number is the int 0', -0, 0],
    ['float 1.5', 1.5],
    ['float 0.1 + 0.2 (17 digits)', 0.1 + 0.2],
    ['float smallest subnormal', 5e-324],
    ['float max (integral, so it reads back as a float)', Number.MAX_VALUE, fx.float(Number.MAX_VALUE)],
    ['float 1.0 vs int 1', fx.float(1)],
    ['float -0.0', fx.float(-0)],
    ['float 1e21 (integral, beyond int64) stays a float', 1e21, fx.float(1e21)],
    ['NaN', NaN],
    ['Infinity', Infinity],
    ['-Infinity', -Infinity],
    ['complex', fx.complex(1.5, -2)],
    ['complex with -0, NaN, Infinity parts', fx.complex(-0, NaN), fx.complex(-0, NaN)],
    ['complex Infinity', fx.complex(Infinity, -Infinity)],
    ['empty string', ''],
    ['unicode', 'héllo wörld ✓ 日本 😀 \u2028\u2029 \ufeff'],
    ['quotes and backslashes', 'a"b\'c\\d\\"e/f'],
    ['control characters', '\u0000\u0001\b\t\n\u000b\f\r\u001f\u007f'],
    ['JSON-looking text', '{"a": [1, 2]}\\u0041'],
    ['codec-looking text', 'i1;d2;#1:1;(N)'],
    ['empty list', []],
    ['empty tuple', t()],
    ['tuple vs list', [t(1, 2), [1, 2], t([t()])]],
    ['nested list', [1, [2, [3, [4, [null]]]]]],
    ['mixed list', [1, fx.float(1), 1.5, 'x', true, null, fx.ellipsis]],
    ['plain dict', { a: 1, b: [1, 2], c: { d: 'e' } }],
    ['empty dict', {}],
    ['dict key order kept', { z: 1, a: 2, m: 3 }],
    ['index-like keys read back as a Map (JS objects would reorder them)', { b: 1, 10: 2, 2: 3 }, new Map([['2', 3], ['10', 2], ['b', 1]])],
    ['__proto__ key reads back as a Map', JSON.parse('{"__proto__": 1}'), new Map([['__proto__', 1]])],
    ['dict with every hashable key kind', new Map([
      [1, 'int'], ['s', 'str'], [null, 'None'], [fx.float(2), 'float'], [2.5, 'float 2.5'], [t(1, 'a'), 'tuple'],
      [fx.dtype('float16'), 'dtype'], [fx.device('cpu'), 'device'], [fx.ellipsis, 'Ellipsis'], [fx.complex(0, 1), 'complex'],
    ])],
    ['nested dicts', new Map([[t(), { x: new Map([[1, { y: [] }]]) }]])],
    ['Ellipsis', fx.ellipsis],
    ['slice(None, None, None)', fx.slice()],
    ['slice(1, -1, 2)', fx.slice(1, -1, 2)],
    ['slice of floats and None', fx.slice(fx.float(0), null, 1.5)],
    ...['float32', 'float64', 'float16', 'bfloat16', 'int64', 'int32', 'int8', 'uint8', 'bool', 'complex64'].map((d) => [`dtype ${d}`, fx.dtype(d)]),
    ['dtype given as torch.int64', fx.dtype('torch.int64'), new FxDtype('int64')],
    ['device cpu', fx.device('cpu')],
    ['device cuda:1', fx.device('cuda', 1)],
    ['device from "cuda:0"', fx.device('cuda:0'), new FxDevice('cuda', 0)],
    ...['contiguous_format', 'channels_last', 'channels_last_3d', 'preserve_format'].map((m) => [`memory format ${m}`, fx.memoryFormat(m)]),
    ...['strided', 'sparse_coo', 'sparse_csr'].map((l) => [`layout ${l}`, fx.layout(l)]),
    ['255 levels deep (256 counting the args list: the limit)', nested(254, [1])],
  ];
}

// Through a node's args: JS enc -> C++ decode_args -> Node::args -> C++ encode -> JS decode.
function viaArgs(g, n, v) {
  n.args = [v];
  const args = n.args;
  expect(args).toHaveLength(1);
  return args[0];
}

// Through node meta (no Nodes allowed): the same text path with a different target graph.
function viaMeta(n, v) {
  n.setMeta('v', v);
  return n.getMeta('v');
}

// What meta gives back for `v`: the same, but dtypes in the spelling tensors use ('float32'),
// the one dtype representation of tensors and meta (in args a dtype stays an FxDtype).
function metaForm(v) {
  if (v instanceof FxDtype) return v.name;
  if (v instanceof FxTuple) return FxTuple.from(v, metaForm);
  if (Array.isArray(v)) return v.map(metaForm);
  if (v instanceof Map) return new Map([...v].map(([k, x]) => [metaForm(k), metaForm(x)]));
  if (v && Object.getPrototypeOf(v) === Object.prototype) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, metaForm(x)]));
  return v;
}

describe('every value survives JS -> C++ -> JS exactly', () => {
  test.each(corpus().map((c) => [c[0], c]))('%s', (_name, [, value, expected = value]) => {
    const g = new fx.Graph();
    try {
      const n = g.callFunction('test.f', []);
      expect(diff(viaArgs(g, n, value), expected)).toBeNull();
      expect(diff(viaMeta(n, value), metaForm(expected))).toBeNull();
      // A second trip changes nothing (the decoded form is a fixed point).
      expect(diff(viaArgs(g, n, viaArgs(g, n, value)), expected)).toBeNull();
    } finally {
      g.delete();
    }
  });
});

test('Nodes round-trip as the same handles, anywhere in a value', () => {
  const g = new fx.Graph();
  try {
    const x = g.placeholder('x');
    const y = g.placeholder('y');
    const n = g.callFunction('test.f', []);
    for (const v of [x, [x, y], fx.tuple([y, { k: x }]), new Map([[1, [fx.slice(x, y, null)]]]), { deep: nested(100, x) }]) {
      const back = viaArgs(g, n, v);
      expect(diff(back, v)).toBeNull();
    }
    // The last value uses x only: the graph's use lists follow the decoded args.
    expect(n.allInputNodes).toEqual([x]);
    expect(y.users).toEqual([]);
  } finally {
    g.delete();
  }
});

function expectFxError(f, kind, part = '') {
  let err;
  try {
    f();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(FxError);
  expect([err.kind, err.message]).toEqual([kind, expect.stringContaining(part)]);
  return err;
}

describe('rejections', () => {
  let g, n;
  beforeEach(() => {
    g = new fx.Graph();
    n = g.callFunction('test.f', []);
  });
  afterEach(() => g.delete());

  // The C++ half fed raw text (as a broken JS half would send it), through node meta.
  const setMetaText = (text) => {
    M.nodeSetMeta(g._gid, n.id, 'v', text);
    ck();
  };

  test.each([
    ['empty text', ''],
    ['unknown tag', 'X'],
    ['int without ;', 'i12'],
    ['int with junk', 'i1x;'],
    ['empty int', 'i;'],
    ['float junk', 'd1.5.5;'],
    ['unterminated string', 's"abc'],
    ['string without quotes', 'sabc'],
    ['bad escape', 's"\\q"'],
    ['short \\u escape', 's"\\u12"'],
    ['unclosed list', '[i1;'],
    ['unclosed tuple', '(N'],
    ['unclosed dict', '{s"a"i1;'],
    ['dict key without value', '{s"a"}'],
    ['trailing text', 'i1;i2;'],
    ['slice missing a field', 'SNN'],
    ['device index neither int nor None', 'V"cuda"X'],
  ])('malformed: %s', (_name, text) => {
    expectFxError(() => setMetaText(text), 'ValueError', 'meta: malformed encoded value at offset');
  });

  test('values the C++ half refuses, with the kind and what', () => {
    expectFxError(() => setMetaText('i9223372036854775808;'), 'ValueError', 'meta: integer 9223372036854775808 does not fit in 64 bits');
    expectFxError(() => setMetaText('i-9223372036854775809;'), 'ValueError', 'does not fit in 64 bits');
    expectFxError(() => setMetaText('[' .repeat(257) + 'N' + ']'.repeat(257)), 'ValueError', 'meta: value nested deeper than 256 levels');
    expectFxError(() => setMetaText('{[i1;]N}'), 'TypeError', 'meta: unhashable dict key (list)');
    expectFxError(() => setMetaText('{{}N}'), 'TypeError', 'unhashable dict key (dict)');
    expectFxError(() => setMetaText('V""N'), 'ValueError', 'meta: device type must not be empty');
    expectFxError(() => setMetaText('V"cuda"i-1;'), 'ValueError', 'device index -1 is out of range');
    expectFxError(() => setMetaText('L"dense"'), 'ValueError', "meta: unknown layout 'dense'");
    expectFxError(() => setMetaText('M"nhwc"'), 'ValueError', "meta: unknown memory format 'nhwc'");
    expectFxError(() => setMetaText('D"float33"'), 'ValueError', 'float33');
    expectFxError(() => setMetaText(`#${g._gid}:${n.id};`), 'ValueError', 'meta: Node handles are not allowed here');
    // The slot is clear and the node unchanged after every refusal.
    expect(M.errPending()).toBe(false);
    expect(n.getMeta('v')).toBeUndefined();
  });

  test('the depth limit is the same in both halves', () => {
    // A meta value may nest 256 levels (its innermost value at depth 256), args one less (the
    // args list is a level); one more is refused by the JS half, and by the C++ half as text.
    expect(diff(viaMeta(n, nested(256, 1)), nested(256, 1))).toBeNull();
    expect(diff(viaArgs(g, n, nested(255, 1)), nested(255, 1))).toBeNull();
    expectFxError(() => setMetaText('['.repeat(257) + 'i1;' + ']'.repeat(257)), 'ValueError', 'nested deeper than 256 levels');
    expectFxError(() => n.setMeta('v', nested(257, 1)), 'ValueError', 'nested deeper than 256 levels');
  });

  test('what the JS half refuses before calling C++', () => {
    expectFxError(() => n.setMeta('v', nested(257, 1)), 'ValueError', 'value nested deeper than 256 levels');
    expectFxError(() => (n.args = [nested(256, 1)]), 'ValueError', 'value nested deeper than 256 levels');
    expectFxError(() => n.setMeta('v', undefined), 'TypeError', 'undefined is not an fx value');
    expectFxError(() => n.setMeta('v', Symbol('s')), 'TypeError', 'a symbol is not an fx value');
    expectFxError(() => n.setMeta('v', new Date(0)), 'TypeError', 'cannot pass a Date as an fx value');
    expectFxError(() => n.setMeta('v', () => 1), 'TypeError', 'a function is not an fx value');
    expectFxError(() => n.setMeta('v', new Map([[[1], 2]])), 'TypeError', 'unhashable dict key (list)');
    expectFxError(() => n.setMeta('v', n), 'ValueError', 'Node handles are not allowed here');
    expectFxError(() => n.setMeta('v', fx.dtype('float33')), 'ValueError', 'float33');
    expectFxError(() => n.setMeta('v', 2n ** 63n), 'ValueError', 'does not fit in 64 bits');
    expect(n.getMeta('v')).toBeUndefined();
  });

  test('a Node of another Graph, or of a deleted one', () => {
    const other = new fx.Graph();
    const z = other.placeholder('z');
    expectFxError(() => (n.args = [z]), 'GraphError', "Node 'z' belongs to another Graph");
    other.delete();
    expectFxError(() => (n.args = [[z]]), 'StaleHandleError', 'a Node argument belongs to a Graph that was deleted');
    expect(n.args).toEqual([]);
  });

  test('the JS half refuses text it cannot read', () => {
    expectFxError(() => decode('X', null), 'InternalError', 'cannot decode value at 0');
    expectFxError(() => decode('#999999:1;', null), 'InternalError', 'unknown graph #999999');
  });
});

test('the corpus classes are the exported ones', () => {
  // Guards the corpus itself: the factories make the classes the decoder produces.
  expect(fx.tuple([])).toBeInstanceOf(FxTuple);
  expect(fx.float(1)).toBeInstanceOf(FxFloat);
  expect(fx.complex(0, 0)).toBeInstanceOf(FxComplex);
  expect(fx.slice()).toBeInstanceOf(FxSlice);
  expect(fx.memoryFormat('channels_last')).toBeInstanceOf(FxMemoryFormat);
  expect(fx.layout('strided')).toBeInstanceOf(FxLayout);
  expect(diff(fx.float(1), 1)).not.toBeNull();
  expect(diff(fx.float(-0), fx.float(0))).not.toBeNull();
  expect(diff(fx.tuple([1]), [1])).not.toBeNull();
  expect(diff(new Map([['a', 1]]), { a: 1 })).not.toBeNull();
  expect(diff(1n, 1)).not.toBeNull();
});
