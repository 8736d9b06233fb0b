// The playground's Web Worker: owns the wasm module and the model, so long imports, passes and
// runs never block the page. Messages in: {id, type, ...}; out: {id, ok, result | error} plus
// {type: 'progress', text} while working.
import { init, FxError, Node } from '../wasm/index.mjs';
import { randomInputs, outputNames, mulberry32 } from '../wasm/inputs.mjs';
import { parsePattern, buildPatternPass } from './pattern_dsl.mjs';
// Vite emits fx.wasm and the threaded modules' files (plain and Relaxed SIMD) as assets and gives
// their URLs (relative to the built site).
import wasmUrl from '../dist/fx.wasm?url';
import threadsGlueUrl from '../dist/fx-threads.mjs?url';
import threadsWasmUrl from '../dist/fx-threads.wasm?url';
import threadsWorkerUrl from '../dist/fx-threads.worker.js?url';
import relaxedGlueUrl from '../dist/fx-threads-relaxed.mjs?url';
import relaxedWasmUrl from '../dist/fx-threads-relaxed.wasm?url';
import relaxedWorkerUrl from '../dist/fx-threads-relaxed.worker.js?url';

let fx = null;
let original = null;  // bytes of the model as opened (the "before" side of comparisons)
let external = null;  // its external-data files, by name
let gm = null;        // the current, possibly transformed, module
const undoStack = []; // modules before each edit (sharing their tensors with the current one)
let name = '';

const progress = (text, fraction) => postMessage({ type: 'progress', text, fraction });
// On a cross-origin-isolated page (the playground's server and static hosting send COOP/COEP)
// the threaded module runs the kernels on up to 4 cores (its Relaxed SIMD build where the browser
// has it); elsewhere init() falls back to fx.wasm and fx.threads() says why.
const FILES = {
  'fx.wasm': wasmUrl,
  'fx-threads.mjs': threadsGlueUrl,
  'fx-threads.wasm': threadsWasmUrl,
  'fx-threads.worker.js': threadsWorkerUrl,
  'fx-threads-relaxed.mjs': relaxedGlueUrl,
  'fx-threads-relaxed.wasm': relaxedWasmUrl,
  'fx-threads-relaxed.worker.js': relaxedWorkerUrl,
};
const wantedThreads = Math.max(1, Math.min(4, self.navigator?.hardwareConcurrency ?? 1));
const start = () =>
  fx
    ? Promise.resolve(fx)
    : init({ threads: wantedThreads, locateFile: (file) => FILES[file] ?? wasmUrl }).then((api) => (fx = api));

const ITEM_BYTES = { float32: 4, float64: 8, float16: 2, bfloat16: 2, int64: 8, int32: 4, int16: 2, int8: 1, uint8: 1, bool: 1, uint16: 2, uint32: 4, uint64: 8, complex64: 8, complex128: 16 };
const numel = (shape) => shape.reduce((a, b) => a * Number(b), 1);
/** JSON of FX values (BigInt as numbers, Node handles by name), for the inspector. */
const show = (v) => JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? Number(x) : x instanceof Node ? `%${x.name}` : x));
const dtypeName = (d) => (d == null ? undefined : String(d.name ?? d).replace(/^torch\./, ''));

/**
 * Shapes on every node: inferred without data (gm.inferShapes: dynamic dims keep their names,
 * 'batch', '4*batch'), or, when inference types nothing (no declared input types), from one run on
 * seeded inputs (ShapeProp). Models that neither types keep none.
 */
function propagateShapes(m) {
  try {
    if (m.inferShapes().typed > 0) return true;
  } catch {
    // fall back to a run
  }
  try {
    m.shapeProp(randomInputs(m, 0));
    return true;
  } catch {
    return false;
  }
}

/** Parameters referenced by get_attr nodes: count and bytes (what an export writes). */
function weightStats(m, params) {
  let count = 0, bytes = 0;
  for (const n of m.graph.nodes) {
    if (n.op !== 'get_attr') continue;
    const p = params.get(String(n.target));
    if (!p) continue;
    count += numel(p.shape);
    bytes += numel(p.shape) * (ITEM_BYTES[p.dtype] ?? 4);
  }
  return { count, bytes };
}

/** The light per-node view the page draws and diffs. */
function lightNodes(m, params, withShapes) {
  return m.graph.nodes.map((n) => {
    const out = {
      name: n.name,
      op: n.op,
      target: n.op === 'output' ? 'output' : String(n.target),
      inputs: n.allInputNodes.map((i) => i.name),
      text: n.formatNode(),
    };
    // The ONNX node's own name (e.g. "/encoder/layers.20/attn/Softmax"): search finds it too.
    const onnxName = n.getMeta(fx.onnxMetaKeys.name);
    if (typeof onnxName === 'string' && onnxName !== n.name) out.onnxName = onnxName;
    if (withShapes) {
      const tm = n.getMeta('tensor_meta');
      // Named sizes ('batch', '4*batch') stay text; an unknown size shows as '?'.
      if (tm && Array.isArray(tm.shape)) Object.assign(out, { shape: tm.shape.map((d) => (d === null ? '?' : typeof d === 'string' ? d : Number(d))), dtype: dtypeName(tm.dtype) });
    }
    if (n.op === 'get_attr') {
      const p = params.get(String(n.target));
      if (p) Object.assign(out, { shape: p.shape.map(Number), dtype: p.dtype, weight: true });
    }
    if (n.op === 'placeholder') {
      const t = n.getMeta(fx.onnxMetaKeys.type);
      const declared = t?.shape ? t.shape.map((d) => (typeof d === 'bigint' ? Number(d) : d)) : null;
      if (declared) out.declared = declared; // with symbolic dims ("batch", "seq") as strings
      if (declared && !out.shape) Object.assign(out, { shape: declared, dtype: dtypeName(t.dtype) });
      else if (t?.dtype && !out.dtype) out.dtype = dtypeName(t.dtype);
    }
    return out;
  });
}

/** What the page shows of a module: texts, nodes with inputs and shapes, model properties. */
function snapshot(m) {
  const params = new Map(m.namedParameters().concat(m.namedBuffers()));
  const withShapes = propagateShapes(m);
  const nodes = lightNodes(m, params, withShapes);
  const meta = m.meta;
  const k = fx.onnxMetaKeys;
  const weights = weightStats(m, params);
  return {
    name,
    code: m.code,
    graph: m.graph.print(),
    tabular: m.graph.tabular(),
    readable: m.printReadable(),
    nodes,
    coverage: m.coverage(),
    properties: {
      opset: show(meta[k.opsetImport] ?? {}),
      producer: [meta[k.producerName], meta[k.producerVersion]].filter(Boolean).join(' '),
      irVersion: meta[k.irVersion] == null ? '' : String(meta[k.irVersion]),
      graphName: meta[k.graphName] ?? '',
      inputs: nodes.filter((n) => n.op === 'placeholder').map((n) => ({ name: n.target, dtype: n.dtype, shape: n.shape, declared: n.declared ?? n.shape })),
      outputs: outputNames(m),
      outputNodes: (() => {
        const a = m.graph.outputNode?.args[0];
        return (Array.isArray(a) ? a : [a]).filter((x) => x instanceof Node).map((x) => x.name);
      })(),
      parameters: weights.count,
      parameterBytes: weights.bytes,
      nodes: nodes.length,
      threads: fx.threads(),
    },
  };
}

// ---- user inputs of the Run tab -------------------------------------------------------------------
const ELEMENT = { float32: Float32Array, float64: Float64Array, int64: BigInt64Array, int32: Int32Array, int16: Int16Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array, uint16: Uint16Array, uint32: Uint32Array, uint64: BigUint64Array };
const NPY = { '<f4': 'float32', '<f8': 'float64', '<i8': 'int64', '<i4': 'int32', '<i2': 'int16', '|i1': 'int8', '|u1': 'uint8', '|b1': 'bool', '<u2': 'uint16', '<u4': 'uint32', '<u8': 'uint64' };

/** A NumPy .npy file (format 1.x-3.x, little-endian, C order) as {data, shape, dtype}. */
function parseNpy(bytes, name) {
  const u8 = new Uint8Array(bytes);
  if (u8[0] !== 0x93 || String.fromCharCode(...u8.subarray(1, 6)) !== 'NUMPY') return null;
  const major = u8[6];
  const dv = new DataView(u8.buffer, u8.byteOffset);
  const headerLen = major === 1 ? dv.getUint16(8, true) : dv.getUint32(8, true);
  const start = major === 1 ? 10 : 12;
  const header = new TextDecoder().decode(u8.subarray(start, start + headerLen));
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const fortran = /'fortran_order':\s*True/.test(header);
  const shape = (/'shape':\s*\(([^)]*)\)/.exec(header)?.[1] ?? '').split(',').map((x) => x.trim()).filter(Boolean).map(Number);
  const dtype = NPY[descr];
  if (!dtype) throw new FxError('UnsupportedError', `${name}: .npy dtype '${descr}' is not supported (little-endian numbers and bool are)`);
  if (fortran) throw new FxError('UnsupportedError', `${name}: a Fortran-order .npy (save it with np.ascontiguousarray)`);
  const C = ELEMENT[dtype];
  const n = shape.reduce((a, b) => a * b, 1);
  const off = start + headerLen;
  if (u8.byteLength - off < n * C.BYTES_PER_ELEMENT) throw new FxError('ValueError', `${name}: the .npy file is truncated (${n} elements of ${dtype} declared)`);
  return { data: new C(u8.slice(off, off + n * C.BYTES_PER_ELEMENT).buffer), shape, dtype };
}

/** One input of the Run tab: {name, dtype, shape, source, seed, values, bytes, image, imagenet}. */
async function userInput(spec) {
  const { name, dtype, shape } = spec;
  const C = ELEMENT[dtype];
  const where = `input '${name}'`;
  const count = (dims) => {
    if (!Array.isArray(dims) || dims.some((d) => !Number.isInteger(d) || d < 0)) throw new FxError('ValueError', `${where}: give every dimension a whole number (got [${dims}])`);
    return dims.reduce((a, b) => a * b, 1);
  };
  if (spec.source === 'file') {
    const t = parseNpy(spec.bytes, where) ?? fx.tensorFromONNX(new Uint8Array(spec.bytes));
    if (t.dtype !== dtype) throw new FxError('ValueError', `${where} is ${dtype}; the file holds ${t.dtype}`);
    return { data: t.data, shape: Array.from(t.shape, Number), dtype: t.dtype };
  }
  if (spec.source === 'image') {
    if (shape.length !== 4 || (shape[1] !== 3 && shape[1] !== 1) || dtype !== 'float32')
      throw new FxError('ValueError', `${where}: an image goes into a float32 [N, 3 or 1, H, W] input, not ${dtype}[${shape}]`);
    const [, ch, h, w] = shape;
    const canvas = new OffscreenCanvas(w, h);
    const ctx = canvas.getContext('2d');
    ctx.drawImage(spec.image, 0, 0, w, h);
    const px = ctx.getImageData(0, 0, w, h).data;
    const mean = spec.imagenet ? [0.485, 0.456, 0.406] : [0, 0, 0];
    const std = spec.imagenet ? [0.229, 0.224, 0.225] : [1, 1, 1];
    const data = new Float32Array(count(shape));
    for (let n = 0; n < shape[0]; n++)
      for (let c = 0; c < ch; c++)
        for (let i = 0; i < h * w; i++) {
          const v = ch === 1 ? (px[4 * i] + px[4 * i + 1] + px[4 * i + 2]) / (3 * 255) : px[4 * i + c] / 255;
          data[(n * ch + c) * h * w + i] = (v - mean[c]) / std[c];
        }
    return { data, shape, dtype };
  }
  if (spec.source === 'values') {
    const nums = String(spec.values ?? '').split(/[\s,]+/).filter(Boolean);
    const dims = shape.slice();
    // Token ids and the like: the one unknown dimension takes the count.
    const unknown = dims.map((d, i) => (Number.isInteger(d) ? -1 : i)).filter((i) => i >= 0);
    if (unknown.length === 1) {
      const rest = dims.reduce((a, d) => (Number.isInteger(d) ? a * d : a), 1);
      dims[unknown[0]] = rest > 0 ? nums.length / rest : 0;
    }
    const n = count(dims);
    if (nums.length !== n) throw new FxError('ValueError', `${where}: ${nums.length} values for ${n} elements ([${dims}])`);
    const data = new C(n);
    for (let i = 0; i < n; i++) {
      const x = Number(nums[i]);
      if (!Number.isFinite(x) && !/^[-+]?(inf|nan)/i.test(nums[i])) throw new FxError('ValueError', `${where}: '${nums[i]}' is not a number`);
      data[i] = C === BigInt64Array || C === BigUint64Array ? BigInt(Math.trunc(x)) : x;
    }
    return { data, shape: dims, dtype };
  }
  const n = count(shape);
  if (!C) throw new FxError('UnsupportedError', `${where} has dtype ${dtype}, which the Run tab cannot fill`);
  const data = new C(n);
  if (spec.source === 'random') {
    const rand = mulberry32(spec.seed ?? 0);
    for (let i = 0; i < n; i++) {
      const u = rand();
      if (dtype === 'float32' || dtype === 'float64') data[i] = 2 * u - 1;
      else if (dtype === 'bool') data[i] = u < 0.5 ? 1 : 0;
      else if (C === BigInt64Array || C === BigUint64Array) data[i] = BigInt(Math.floor(10 * u));
      else data[i] = Math.floor(10 * u);
    }
  }
  return { data, shape, dtype };
}

/** The k largest values along the last axis of the first row of `t`: [{index, value}]. */
function topK(t, k) {
  if (!t?.data || !t.shape.length) return null;
  const last = t.shape[t.shape.length - 1];
  const row = Array.from(t.data.slice(0, last), Number);
  return row.map((value, index) => ({ index, value })).sort((a, b) => b.value - a.value).slice(0, k);
}

function decodeHead(bytes, dtype, count) {
  const C = { float32: Float32Array, float64: Float64Array, int64: BigInt64Array, int32: Int32Array, int16: Int16Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array }[dtype];
  if (!C || !bytes) return [];
  const n = Math.min(count, Math.floor(bytes.byteLength / C.BYTES_PER_ELEMENT));
  return Array.from(new C(bytes.buffer, bytes.byteOffset, n), Number);
}

function maxDiffs(a, b) {
  let abs = 0, rel = 0;
  a.forEach((o, k) => {
    const p = b[k];
    if (!p?.data || !o?.data) return;
    for (let i = 0; i < o.data.length; i++) {
      const x = Number(o.data[i]), y = Number(p.data[i]);
      const d = Math.abs(x - y);
      if (!(d <= abs)) abs = d;  // NaN counts as a difference
      const r = d / Math.max(Math.abs(x), 1e-6);
      if (!(r <= rel)) rel = r;
    }
  });
  return { abs, rel };
}

const handlers = {
  /** The pass registry's passes ({name, description}), for the page's pipeline. */
  async passInfo() {
    return (await start()).passInfo();
  },

  async load({ bytes, fileName, externalFiles }) {
    progress('loading the wasm module', 0.1);
    await start();
    progress(`importing ${fileName} (${(bytes.byteLength / 1e6).toFixed(1)} MB)`, 0.3);
    const ext = externalFiles && Object.keys(externalFiles).length ? new Map(Object.entries(externalFiles)) : null;
    const next = fx.loadONNX(new Uint8Array(bytes), ext ? { externalData: ext } : {});
    gm?.delete();
    gm = next;
    for (const m of undoStack.splice(0)) m.delete();
    original = new Uint8Array(bytes);
    external = ext;
    name = fileName;
    progress('propagating shapes', 0.7);
    return snapshot(gm);
  },

  /** Everything the inspector shows of one node. */
  inspect({ node }) {
    const n = gm.graph.nodes.find((x) => x.name === node);
    if (!n) throw new FxError('KeyError', `no node named '${node}' in the current graph`);
    const out = {
      name: n.name,
      op: n.op,
      target: n.op === 'output' ? 'output' : String(n.target),
      text: n.formatNode(),
      args: show(n.args),
      kwargs: show(n.kwargs),
      kwargKeys: Object.keys(n.kwargs),
      meta: Object.entries(n.meta).map(([key, v]) => [key, show(v).slice(0, 400)]),
      users: n.users.map((u) => u.name),
      inputs: n.allInputNodes.map((i) => i.name),
      weights: [],
    };
    for (const i of [n, ...n.allInputNodes]) {
      if (i.op !== 'get_attr') continue;
      const target = String(i.target);
      const info = new Map(gm.namedParameters().concat(gm.namedBuffers())).get(target);
      if (!info) continue;
      out.weights.push({ node: i.name, target, dtype: info.dtype, shape: info.shape.map(Number), head: decodeHead(gm.getTensorData(target), info.dtype, 8) });
    }
    return out;
  },

  /**
   * Runs passes one at a time. Per step: nodes before/after, removed/added/changed names, weight
   * bytes, time, and max abs/rel difference of the outputs against the model as opened; plus the
   * light node list after the step, so the page can draw any step's diff. `names` holds
   * registered pass names and typed patterns ({name, pattern: text}); a pattern step that fails
   * is rolled back and reported ({pass, error}) and the pipeline goes on.
   */
  passes({ names, check }) {
    const inputs = check ? randomInputs(gm, 1) : null;
    const reference = inputs ? gm.run(inputs) : null;
    const params = () => new Map(gm.namedParameters().concat(gm.namedBuffers()));
    let before = lightNodes(gm, params(), false);
    const steps = [{ pass: '(as opened)', nodes: before, weightBytes: weightStats(gm, params()).bytes }];
    names.forEach((item, k) => {
      const pass = typeof item === 'string' ? item : item.name;
      progress(`pass ${pass}`, (k + 0.5) / names.length);
      const t0 = performance.now();
      let r, matches = null;
      if (typeof item === 'string') [r] = fx.runPasses(gm, [item], {});
      else {
        // A typed replace_pattern (web/pattern_dsl.mjs) as a JS pass under the same rules, plus
        // the schema checks; one that fails is rolled back and reported on its row.
        const saved = new fx.GraphModule(gm.graph.clone(), { root: gm, className: gm.className });
        try {
          const p = buildPatternPass(fx, parsePattern(item.pattern), pass);
          [r] = fx.runPasses(gm, [p.pass], {});
          gm.lint();
          matches = p.matches();
          saved.delete();
        } catch (e) {
          gm.delete();
          gm = saved;
          steps.push({ pass, error: `${e.kind ?? 'Error'}: ${e.message}`, nodes: before, weightBytes: weightStats(gm, params()).bytes, removed: [], added: [], changed: [] });
          return;
        }
      }
      const ms = performance.now() - t0;
      const p = params();
      const after = lightNodes(gm, p, false);
      const was = new Map(before.map((n) => [n.name, n.text]));
      const now = new Set(after.map((n) => n.name));
      const step = {
        pass,
        ms,
        modified: r.modified,
        matches,
        nodesBefore: r.nodesBefore,
        nodesAfter: r.nodesAfter,
        removed: before.filter((n) => !now.has(n.name)).map((n) => n.name),
        added: after.filter((n) => !was.has(n.name)).map((n) => n.name),
        changed: after.filter((n) => was.has(n.name) && was.get(n.name) !== n.text).map((n) => n.name),
        weightBytes: weightStats(gm, p).bytes,
        nodes: after,
      };
      if (inputs) {
        try {
          Object.assign(step, { maxAbsDiff: 0, maxRelDiff: 0 }, (({ abs, rel }) => ({ maxAbsDiff: abs, maxRelDiff: rel }))(maxDiffs(reference, gm.run(inputs))));
        } catch (e) {
          step.runError = `${e.kind ?? 'Error'}: ${e.message}`;
        }
      }
      steps.push(step);
      before = after;
    });
    return { steps, snapshot: snapshot(gm) };
  },

  /**
   * Runs the current module (`repeats` times: the median time) and the module as opened once,
   * on the same inputs: the user's (`specs`, one per input: random with a seed, zeros, typed
   * values, a .npy/.pb file, an image) or seeded random ones. `topk`: the k largest values of the
   * first output's last axis.
   */
  async run({ specs = null, repeats = 1, topk = 0 } = {}) {
    const inputs = specs ? await Promise.all(specs.map(userInput)) : randomInputs(gm, 0);
    progress('running the current graph');
    const times = [];
    let after;
    for (let i = 0; i < Math.max(1, Math.min(1000, repeats | 0)); i++) {
      const t0 = performance.now();
      after = gm.run(inputs);
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    const ms = times[Math.floor(times.length / 2)];
    progress('running the graph as opened');
    const first = fx.loadONNX(original, external ? { externalData: external } : {});
    let before;
    try {
      before = first.run(inputs);
    } finally {
      first.delete();
    }
    const names = outputNames(gm);
    return {
      ms,
      runs: times.length,
      minMs: times[0],
      topk: topk > 0 ? topK(after[0], topk) : null,
      inputs: inputs.map((t) => ({ dtype: t.dtype, shape: t.shape })),
      outputs: after.map((t, k) => {
        const { abs } = maxDiffs([t], [before[k]]);
        let sum = 0, min = Infinity, max = -Infinity;
        for (const v of t.data) {
          const x = Number(v);
          sum += x;
          min = Math.min(min, x);
          max = Math.max(max, x);
        }
        return { name: names[k] ?? `output_${k}`, dtype: t.dtype, shape: t.shape, sum, min, max, head: Array.from(t.data.slice(0, 8), Number), maxAbsDiffVsOpened: abs };
      }),
    };
  },

  /**
   * Node-by-node differences between the current module and another model (`bytes`): nodes are
   * matched by their ONNX name (else FX name); a matched node changed when its op, target,
   * arguments (by the matched names of their nodes) or attributes differ, or, for a weight, its
   * dtype, shape or bytes. Names are the current module's FX names (added ones: the other's).
   */
  diff({ bytes, name }) {
    progress(`reading ${name}`);
    const other = fx.loadONNX(new Uint8Array(bytes));
    try {
      const index = (m) => {
        const j = m.graph.toJSON();
        const keyOf = new Map(j.nodes.map((n) => [n.name, typeof n.meta.onnx_name === 'string' ? n.meta.onnx_name : n.name]));
        const text = (v) => JSON.stringify(v, (k, x) => (x && typeof x === 'object' && !Array.isArray(x) && Object.keys(x).length === 1 && 'node' in x ? `%${keyOf.get(x.node)}` : x));
        const tensors = new Map([...m.namedParameters(), ...m.namedBuffers()]);
        const out = new Map();
        for (const n of j.nodes) {
          const t = n.op === 'get_attr' ? tensors.get(n.target) : null;
          out.set(keyOf.get(n.name), { name: n.name, op: n.op, target: n.op === 'get_attr' ? '' : n.target, args: text(n.args), kwargs: text(n.kwargs), tensor: t ? `${t.dtype}[${t.shape}]` : null, attr: n.target });
        }
        return out;
      };
      progress('comparing');
      const a = index(gm), b = index(other);
      const removed = [], added = [], changed = [];
      for (const [k, x] of a) if (!b.has(k)) removed.push(x.name);
      for (const [k, y] of b) if (!a.has(k)) added.push(y.name);
      for (const [k, x] of a) {
        const y = b.get(k);
        if (!y) continue;
        const why = [];
        if (x.op !== y.op || x.target !== y.target) why.push(`${x.op} ${x.target} -> ${y.op} ${y.target}`);
        if (x.args !== y.args) why.push(`args ${x.args} -> ${y.args}`);
        if (x.kwargs !== y.kwargs) why.push(`attributes ${x.kwargs} -> ${y.kwargs}`);
        if (x.tensor !== y.tensor) why.push(`weight ${x.tensor} -> ${y.tensor}`);
        else if (x.tensor) {
          const p = gm.getTensorData(x.attr), q = other.getTensorData(y.attr);
          if (!p || !q || p.length !== q.length || p.some((v, i) => v !== q[i])) why.push('weight values differ');
        }
        if (why.length) changed.push({ name: x.name, why: why.join('; ') });
      }
      return { name, removed, added, changed, same: a.size - removed.length - changed.length };
    } finally {
      other.delete();
    }
  },

  /**
   * One edit of the current module, undoable: 'attribute' (node, key, value: JSON or a number;
   * an integral number written with a '.' stays a float), 'rename' (node: its ONNX name, or an
   * output's name with output set), 'delete' (a node nothing uses but the output, which drops it
   * from the outputs), 'add-output' (node becomes a model output), 'dynamic-batch' (an input's
   * first dimension becomes the symbol 'batch'). Each edit is linted and schema-checked; one that
   * fails is rolled back and named.
   */
  edit({ kind, node, key, value, output }) {
    const n = gm.graph.nodes.find((x) => x.name === node);
    if (!n) throw new FxError('KeyError', `no node named '${node}' in the current graph`);
    const keys = fx.onnxMetaKeys;
    const saved = new fx.GraphModule(gm.graph.clone(), { root: gm, className: gm.className });
    try {
      const out = gm.graph.outputNode;
      const returned = () => (Array.isArray(out.args[0]) ? [...out.args[0]] : [out.args[0]]);
      const setOutputs = (nodes, names, types) => {
        out.args = [nodes.length === 1 ? nodes[0] : fx.tuple(nodes)];
        out.setMeta(keys.outputs, names);
        out.setMeta(keys.outputTypes, types);
        out.setMeta(keys.outputSources, nodes.map((x) => x.name));
      };
      const outNames = () => Array.from(out.meta[keys.outputs] ?? returned().map((x, i) => `output_${i}`));
      const outTypes = () => Array.from(out.meta[keys.outputTypes] ?? returned().map(() => null));
      if (kind === 'attribute') {
        if (n.op !== 'call_function') throw new FxError('ValueError', `'${node}' is a ${n.op}: only ops have attributes`);
        if (typeof key !== 'string' || !key) throw new FxError('ValueError', 'name the attribute');
        const text = String(value).trim();
        let v;
        if (/^-?\d+\.\d*(e-?\d+)?$|^-?\d+e-?\d+$/i.test(text)) v = fx.float(Number(text));
        else {
          try {
            v = JSON.parse(text);
          } catch {
            v = text; // a bare word is a string attribute
          }
        }
        const kwargs = { ...n.kwargs };
        if (text === '') delete kwargs[key];
        else kwargs[key] = v;
        n.kwargs = kwargs;
      } else if (kind === 'rename') {
        const name = String(value ?? '').trim();
        if (!name) throw new FxError('ValueError', 'the new name is empty');
        if (output) {
          const i = returned().indexOf(n);
          if (i < 0) throw new FxError('ValueError', `'${node}' is not a model output`);
          const names = outNames();
          if (names.includes(name)) throw new FxError('ValueError', `an output is already named '${name}'`);
          names[i] = name;
          out.setMeta(keys.outputs, names);
        } else n.setMeta(keys.name, name);
      } else if (kind === 'delete') {
        if (n.op === 'output') throw new FxError('ValueError', 'the output node cannot be deleted');
        const users = n.users.filter((u) => u !== out);
        if (users.length) throw new FxError('GraphError', `'${node}' is used by ${users.map((u) => `'${u.name}'`).join(', ')}; delete them first`);
        if (n.users.includes(out)) {
          const r = returned(), names = outNames(), types = outTypes();
          const keep = r.map((x, i) => i).filter((i) => r[i] !== n);
          if (!keep.length) throw new FxError('ValueError', `'${node}' is the model's only output`);
          setOutputs(keep.map((i) => r[i]), keep.map((i) => names[i]), keep.map((i) => types[i] ?? null));
        }
        gm.graph.eraseNode(n);
        gm.graph.eliminateDeadCode();
      } else if (kind === 'add-output') {
        if (n.op === 'output') throw new FxError('ValueError', 'pick a node that computes a value');
        const r = returned();
        if (r.includes(n)) throw new FxError('ValueError', `'${node}' is already an output`);
        const names = outNames();
        let name = String(n.getMeta(keys.name) ?? n.name);
        while (names.includes(name)) name += '_out';
        // Its type: the element type and rank from the last shape propagation, every dimension
        // unknown (a run's shapes would pin dynamic ones).
        const tm = n.getMeta('tensor_meta');
        const type = tm?.dtype && tm.shape ? { dtype: tm.dtype, shape: fx.tuple(Array.from(tm.shape, () => null)) } : null;
        setOutputs([...r, n], [...names, name], [...outTypes(), type]);
      } else if (kind === 'dynamic-batch') {
        if (n.op !== 'placeholder') throw new FxError('ValueError', `'${node}' is not an input`);
        const t = n.getMeta(keys.type);
        if (!t?.shape?.length) throw new FxError('ValueError', `input '${node}' has no declared shape`);
        const old = t.shape[0];
        n.setMeta(keys.type, { ...t, shape: fx.tuple(['batch', ...Array.from(t.shape).slice(1)]) });
        // Types recorded for other values assumed the old batch: intermediate ones are dropped
        // (value_info is optional), the outputs' leading dimension becomes 'batch' too.
        for (const m of gm.graph.nodes) if (m.op === 'call_function' && m.getMeta(keys.type) !== undefined) m.deleteMeta(keys.type);
        const types = outTypes().map((ty) =>
          ty && ty.shape && ty.shape.length && Number(ty.shape[0]) === Number(old) ? { ...ty, shape: fx.tuple(['batch', ...Array.from(ty.shape).slice(1)]) } : ty,
        );
        out.setMeta(keys.outputTypes, types);
      } else {
        throw new FxError('ValueError', `unknown edit '${kind}'`);
      }
      gm.recompile();
      gm.lint(); // torch.fx's checks, then ONNX's schemas
      undoStack.push(saved);
      if (undoStack.length > 50) undoStack.shift().delete();
    } catch (e) {
      // Rolled back: the module as it was before the edit.
      gm.delete();
      gm = saved;
      throw e;
    }
    return snapshot(gm);
  },

  undo() {
    const prev = undoStack.pop();
    if (!prev) throw new FxError('ValueError', 'nothing to undo');
    gm.delete();
    gm = prev;
    return snapshot(gm);
  },

  exportOnnx() {
    return { bytes: gm.toONNX() };
  },

  // The current graph as a PyTorch package ({ files: { 'module.py': Uint8Array, ... } }),
  // lowered to torch targets first if it has onnx.* ones.
  torchPackage({ className }) {
    return { files: fx.torchPackage(gm, className) };
  },

  reset() {
    gm?.delete();
    for (const m of undoStack.splice(0)) m.delete();
    gm = fx.loadONNX(original, external ? { externalData: external } : {});
    return snapshot(gm);
  },
};

/**
 * Posts a result whose node lists (a snapshot's, each pass step's) travel ahead in messages of
 * NODE_CHUNK nodes ({id, part, nodes}) and are replaced by {chunked: part} in the final message:
 * the page deserialises a 15k-node list in small tasks instead of one long one. The nodes' `text`
 * (used here to diff steps) is left out.
 */
const NODE_CHUNK = 1500;
function postResult(id, result, transfer) {
  let parts = 0;
  const strip = (owner) => {
    const nodes = owner?.nodes;
    if (!Array.isArray(nodes)) return;
    if (nodes.length <= NODE_CHUNK) return void (owner.nodes = nodes.map(({ text, ...n }) => n));
    const part = parts++;
    for (let i = 0; i < nodes.length; i += NODE_CHUNK) postMessage({ id, part, nodes: nodes.slice(i, i + NODE_CHUNK).map(({ text, ...n }) => n) });
    owner.nodes = { chunked: part };
  };
  if (result && typeof result === 'object') {
    strip(result);
    strip(result.snapshot);
    result.steps?.forEach(strip);
  }
  postMessage({ id, ok: true, result }, transfer);
}

onmessage = async (e) => {
  const { id, type, ...args } = e.data;
  try {
    if (type !== 'load' && type !== 'passInfo' && !gm) throw new FxError('ValueError', 'open a model first');
    const result = await handlers[type](args);
    const transfer = result?.bytes instanceof Uint8Array ? [result.bytes.buffer] : result?.files ? Object.values(result.files).map((b) => b.buffer) : [];
    postResult(id, result, transfer);
  } catch (err) {
    postMessage({ id, ok: false, error: { kind: err.kind ?? 'Error', message: err.message ?? String(err) } });
  }
};
