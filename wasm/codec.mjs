// wasm/codec.mjs — the JS half of the tagged-text value format of wasm/codec.h (one token per
// value; the grammar is there), and the classes that give JS values the Python distinctions the
// format keeps: FxTuple vs Array, FxFloat (1.0) vs 1, complex, slice, Ellipsis, dtype, device,
// memory format, layout. tests/js/codec.test.mjs round-trips values through both halves.
import { FxError, typeError } from './errors.mjs';
import { NODE_HANDLE, liveGraphs } from './runtime.mjs';

export const MAX_DEPTH = 256; // same limit as kMaxDepth in wasm/codec.h

/** A Python tuple: an Array subclass, so it indexes and iterates like an array. */
export class FxTuple extends Array {}

/** A Python float whose value is integral (`1.0`); non-integral JS numbers are floats anyway. */
export class FxFloat {
  constructor(value) {
    if (typeof value !== 'number') throw typeError('fx.float() needs a number');
    this.value = value;
  }
  valueOf() {
    return this.value;
  }
  toString() {
    return Number.isInteger(this.value) ? this.value.toFixed(1) : String(this.value);
  }
}

/** A Python complex number. */
export class FxComplex {
  constructor(re, im) {
    if (typeof re !== 'number' || typeof im !== 'number')
      throw typeError('fx.complex() needs two numbers');
    this.re = re;
    this.im = im;
  }
}

/** A Python slice(start, stop, step). */
export class FxSlice {
  constructor(start = null, stop = null, step = null) {
    this.start = start;
    this.stop = stop;
    this.step = step;
  }
}

/** Python's Ellipsis (`...`); use the singleton `fx.ellipsis`. */
export class FxEllipsis {
  toString() {
    return 'Ellipsis';
  }
}
export const ellipsis = Object.freeze(new FxEllipsis());

/** A torch dtype such as `torch.float32`. */
export class FxDtype {
  constructor(name) {
    if (typeof name !== 'string') throw typeError('fx.dtype() needs a name such as "float32"');
    this.name = name.startsWith('torch.') ? name.slice(6) : name;
  }
  toString() {
    return 'torch.' + this.name;
  }
}

/** A torch.device: `type` ("cpu", "cuda") and optional `index`. */
export class FxDevice {
  constructor(type, index = null) {
    if (typeof type !== 'string') throw typeError('fx.device() needs a type such as "cpu"');
    const colon = type.indexOf(':');
    if (colon >= 0 && index == null) {
      index = Number(type.slice(colon + 1));
      type = type.slice(0, colon);
    }
    if (index != null && !(Number.isInteger(index) && index >= 0))
      throw new FxError('ValueError', `device index must be a non-negative integer, got ${index}`);
    this.type = type;
    this.index = index ?? null;
  }
  toString() {
    return this.index == null ? this.type : `${this.type}:${this.index}`;
  }
}

/** A torch.memory_format such as `torch.channels_last`. */
export class FxMemoryFormat {
  constructor(name) {
    if (typeof name !== 'string') throw typeError('fx.memoryFormat() needs a name');
    this.name = name.startsWith('torch.') ? name.slice(6) : name;
  }
  toString() {
    return 'torch.' + this.name;
  }
}

/** A torch.layout such as `torch.strided`. */
export class FxLayout {
  constructor(name) {
    if (typeof name !== 'string') throw typeError('fx.layout() needs a name');
    this.name = name.startsWith('torch.') ? name.slice(6) : name;
  }
  toString() {
    return 'torch.' + this.name;
  }
}

export const tuple = (items = []) => {
  if (items == null || typeof items[Symbol.iterator] !== 'function')
    throw typeError('fx.tuple() needs an array (or any iterable) of values');
  return FxTuple.from(items);
};
export const float = (value) => new FxFloat(value);
export const complex = (re, im) => new FxComplex(re, im);
export const slice = (start = null, stop = null, step = null) => new FxSlice(start, stop, step);
export const dtype = (name) => new FxDtype(name);
export const device = (type, index = null) => new FxDevice(type, index);
export const memoryFormat = (name) => new FxMemoryFormat(name);
export const layout = (name) => new FxLayout(name);

const INT64_MIN = -9223372036854775808;
const INT64_LIMIT = 9223372036854775808;

function numText(x) {
  return Object.is(x, -0) ? '-0' : String(x);
}

export function isPlainObject(v) {
  const p = Object.getPrototypeOf(v);
  return p === Object.prototype || p === null;
}

// Encodes `v` in the token format of wasm/codec.h.
export function enc(v, depth) {
  if (depth > MAX_DEPTH)
    throw new FxError('ValueError', `value nested deeper than ${MAX_DEPTH} levels`);
  if (v === null) return 'N';
  switch (typeof v) {
    case 'boolean':
      return v ? 'T' : 'F';
    case 'number':
      if (Number.isInteger(v) && v >= INT64_MIN && v < INT64_LIMIT)
        return 'i' + (Number.isSafeInteger(v) ? String(v === 0 ? 0 : v) : BigInt(v).toString()) + ';';
      return 'd' + numText(v) + ';';
    case 'bigint':
      return 'i' + v.toString() + ';';
    case 'string':
      return 's' + JSON.stringify(v);
    case 'object':
      break;
    case 'undefined':
      throw typeError('undefined is not an fx value (use null for None)');
    default:
      throw typeError(`a ${typeof v} is not an fx value`);
  }
  if (v[NODE_HANDLE] === true) return '#' + v.graph._gid + ':' + v.id + ';';
  if (v instanceof FxTuple) {
    let s = '(';
    for (const x of v) s += enc(x, depth + 1);
    return s + ')';
  }
  if (Array.isArray(v)) {
    let s = '[';
    for (const x of v) s += enc(x, depth + 1);
    return s + ']';
  }
  if (v instanceof FxFloat) return 'd' + numText(v.value) + ';';
  if (v instanceof FxSlice) return 'S' + enc(v.start, depth + 1) + enc(v.stop, depth + 1) + enc(v.step, depth + 1);
  if (v instanceof FxEllipsis) return 'E';
  if (v instanceof FxDtype) return 'D' + JSON.stringify(v.name);
  if (v instanceof FxDevice) return 'V' + JSON.stringify(v.type) + (v.index == null ? 'N' : 'i' + v.index + ';');
  if (v instanceof FxMemoryFormat) return 'M' + JSON.stringify(v.name);
  if (v instanceof FxLayout) return 'L' + JSON.stringify(v.name);
  if (v instanceof FxComplex) return 'C' + numText(v.re) + ';' + numText(v.im) + ';';
  if (v instanceof Map) {
    let s = '{';
    for (const [k, x] of v) s += enc(k, depth + 1) + enc(x, depth + 1);
    return s + '}';
  }
  if (isPlainObject(v)) {
    let s = '{';
    for (const k of Object.keys(v)) s += 's' + JSON.stringify(k) + enc(v[k], depth + 1);
    return s + '}';
  }
  throw typeError(`cannot pass a ${v.constructor?.name ?? 'object'} as an fx value`);
}

export function encArgs(args) {
  if (args == null) return '[]';
  if (!Array.isArray(args)) throw typeError('args must be an array of values');
  let s = '[';
  for (const x of args) s += enc(x, 1);
  return s + ']';
}

export function encKwargs(kwargs) {
  if (kwargs == null) return '';
  if (!(kwargs instanceof Map) && (typeof kwargs !== 'object' || !isPlainObject(kwargs)))
    throw typeError('kwargs must be a plain object (or a Map) with string keys');
  return enc(kwargs, 0);
}

// Array-index-like keys would be reordered by JS objects, so such dicts read back as Maps.
const INDEX_KEY = /^(0|[1-9][0-9]*)$/;

// Decodes C++'s token text. Nodes resolve through `graph` (or the graph registry).
class Reader {
  constructor(s, graph) {
    this.s = s;
    this.i = 0;
    this.graph = graph;
    this.metaDtypes = false;
  }
  until() {
    const end = this.s.indexOf(';', this.i);
    const t = this.s.slice(this.i, end);
    this.i = end + 1;
    return t;
  }
  str() {
    const s = this.s;
    const start = this.i;
    let j = start + 1;
    while (s[j] !== '"') j += s[j] === '\\' ? 2 : 1;
    this.i = j + 1;
    return JSON.parse(s.slice(start, j + 1));
  }
  value() {
    const s = this.s;
    const c = s[this.i++];
    switch (c) {
      case 'N':
        return null;
      case 'T':
        return true;
      case 'F':
        return false;
      case 'E':
        return ellipsis;
      case 'i': {
        const t = this.until();
        const n = Number(t);
        return Number.isSafeInteger(n) ? n : BigInt(t);
      }
      case 'd': {
        const x = Number(this.until());
        return Number.isInteger(x) ? new FxFloat(x) : x;
      }
      case 'C': {
        const re = Number(this.until());
        return new FxComplex(re, Number(this.until()));
      }
      case 's':
        return this.str();
      case '(': {
        const a = new FxTuple();
        while (s[this.i] !== ')') a.push(this.value());
        this.i++;
        return a;
      }
      case '[': {
        const a = [];
        while (s[this.i] !== ']') a.push(this.value());
        this.i++;
        return a;
      }
      case '{': {
        const keys = [];
        const vals = [];
        let plain = true;
        while (s[this.i] !== '}') {
          const k = this.value();
          if (typeof k !== 'string' || INDEX_KEY.test(k) || k === '__proto__') plain = false;
          keys.push(k);
          vals.push(this.value());
        }
        this.i++;
        if (!plain) return new Map(keys.map((k, i) => [k, vals[i]]));
        const o = {};
        for (let i = 0; i < keys.length; i++) o[keys[i]] = vals[i];
        return o;
      }
      case 'S': {
        const a = this.value();
        const b = this.value();
        return new FxSlice(a, b, this.value());
      }
      case 'D':
        // In meta, a dtype reads as the spelling tensors use ('float32'); elsewhere (a node's
        // arguments, where it is a torch.dtype value) as an FxDtype.
        return this.metaDtypes ? this.str() : new FxDtype(this.str());
      case 'M':
        return new FxMemoryFormat(this.str());
      case 'L':
        return new FxLayout(this.str());
      case 'V': {
        const type = this.str();
        if (s[this.i] === 'N') {
          this.i++;
          return new FxDevice(type, null);
        }
        this.i++;
        return new FxDevice(type, Number(this.until()));
      }
      case '#': {
        const colon = s.indexOf(':', this.i);
        const gid = Number(s.slice(this.i, colon));
        this.i = colon + 1;
        const nid = Number(this.until());
        const g = this.graph && this.graph._gid === gid ? this.graph : liveGraphs.get(gid)?.deref();
        if (!g) throw new FxError('InternalError', `internal error: a value refers to unknown graph #${gid}`);
        return g._node(nid);
      }
      default:
        throw new FxError('InternalError', `internal error: cannot decode value at ${this.i - 1}: ${s.slice(this.i - 1, this.i + 20)}`);
    }
  }
}

export function decode(s, graph) {
  return new Reader(s, graph).value();
}

/** decode() of node or module meta: dtypes come back as tensor dtype strings ('float32'). */
export function decodeMeta(s, graph) {
  const r = new Reader(s, graph);
  r.metaDtypes = true;
  return r.value();
}

// Kwargs and meta keys are always strings: keep them a plain object even for index-like keys.
export function plainObject(d) {
  return d instanceof Map ? Object.fromEntries(d) : d;
}
