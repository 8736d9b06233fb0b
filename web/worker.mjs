// The playground's Web Worker: owns the wasm module and the model, so long imports, passes and
// runs never block the page. Messages in: {id, type, ...}; out: {id, ok, result | error} plus
// {type: 'progress', text} while working.
import { init, FxError } from '../wasm/index.mjs';

let fx = null;
let original = null;  // bytes of the model as opened (the "before" side of comparisons)
let gm = null;        // the current, possibly transformed, module
let name = '';

const progress = (text) => postMessage({ type: 'progress', text });

/** What the page shows of a module: texts, and nodes with their inputs for the graph view. */
function snapshot(m) {
  const nodes = m.graph.nodes.map((n) => ({
    name: n.name,
    op: n.op,
    target: n.op === 'output' ? 'output' : String(n.target),
    inputs: n.allInputNodes.map((i) => i.name),
    users: n.users.length,
  }));
  return {
    name,
    code: m.code,
    graph: m.graph.print(),
    tabular: m.graph.tabular(),
    readable: m.printReadable(),
    nodes,
    coverage: m.coverage(),
  };
}

/** Seeded random inputs from the placeholders' ONNX types (symbolic dimensions become 1). */
function randomInputs(m, seed) {
  let s = seed >>> 0;
  const rand = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const arrays = { float32: Float32Array, float64: Float64Array, int64: BigInt64Array, int32: Int32Array, uint8: Uint8Array, bool: Uint8Array };
  return m.graph.nodes
    .filter((n) => n.op === 'placeholder')
    .map((n) => {
      const type = n.meta.onnx_type ?? {};
      const dtype = type.dtype ? String(type.dtype.name ?? type.dtype).replace(/^torch\./, '') : 'float32';
      const shape = Array.from(type.shape ?? [], (d) => (typeof d === 'number' ? d : typeof d === 'bigint' ? Number(d) : 1));
      const C = arrays[dtype];
      if (!C) throw new FxError('UnsupportedError', `input '${n.name}' has dtype ${dtype}, which the playground cannot fill`);
      const data = new C(shape.reduce((a, b) => a * b, 1));
      for (let i = 0; i < data.length; i++) {
        const u = rand();
        if (dtype.startsWith('float')) data[i] = 2 * u - 1;
        else if (dtype === 'int64') data[i] = BigInt(Math.floor(10 * u));
        else if (dtype === 'bool') data[i] = u < 0.5 ? 1 : 0;
        else data[i] = Math.floor(10 * u);
      }
      return { data, shape, dtype };
    });
}

function summary(t) {
  let sum = 0, abs = 0, min = Infinity, max = -Infinity;
  for (const v of t.data) {
    const x = Number(v);
    sum += x;
    abs += Math.abs(x);
    min = Math.min(min, x);
    max = Math.max(max, x);
  }
  return { dtype: t.dtype, shape: t.shape, sum, absSum: abs, min, max, head: Array.from(t.data.slice(0, 8), Number) };
}

function outputNames(m) {
  const names = m.graph.outputNode?.meta.onnx_outputs;
  return Array.isArray(names) ? names : [];
}

const handlers = {
  async load({ bytes, fileName }) {
    progress('loading the wasm module');
    fx ??= await init();
    progress(`importing ${fileName} (${(bytes.byteLength / 1e6).toFixed(1)} MB)`);
    const next = fx.loadONNX(new Uint8Array(bytes));
    gm?.delete();
    gm = next;
    original = new Uint8Array(bytes);
    name = fileName;
    return snapshot(gm);
  },

  /** Runs passes one by one; for each: nodes before/after, removed/added names, max difference. */
  passes({ names, check }) {
    const inputs = check ? randomInputs(gm, 1) : null;
    const reports = [];
    for (const pass of names) {
      progress(`pass ${pass}`);
      const before = new Set(gm.graph.nodes.map((n) => n.name));
      const outsBefore = inputs ? gm.run(inputs) : null;
      const [r] = fx.runPasses(gm, [pass], inputs ? { checkEquivalence: inputs } : {});
      const after = new Set(gm.graph.nodes.map((n) => n.name));
      const report = {
        pass,
        modified: r.modified,
        nodesBefore: r.nodesBefore,
        nodesAfter: r.nodesAfter,
        removed: [...before].filter((n) => !after.has(n)),
        added: [...after].filter((n) => !before.has(n)),
      };
      if (inputs) {
        const outsAfter = gm.run(inputs);
        let abs = 0;
        outsBefore.forEach((o, k) => {
          for (let i = 0; i < o.data.length; i++) abs = Math.max(abs, Math.abs(Number(o.data[i]) - Number(outsAfter[k].data[i])));
        });
        report.maxAbsDiff = abs;
      }
      reports.push(report);
    }
    return { reports, snapshot: snapshot(gm) };
  },

  /** Runs the current module and the module as opened on the same seeded inputs. */
  run() {
    const inputs = randomInputs(gm, 0);
    progress('running the current graph');
    let t0 = performance.now();
    const after = gm.run(inputs);
    const ms = performance.now() - t0;
    progress('running the graph as opened');
    const first = fx.loadONNX(original);
    let before;
    try {
      t0 = performance.now();
      before = first.run(inputs);
    } finally {
      first.delete();
    }
    const names = outputNames(gm);
    return {
      ms,
      inputs: inputs.map((t) => ({ dtype: t.dtype, shape: t.shape })),
      outputs: after.map((t, k) => {
        let diff = 0;
        for (let i = 0; i < t.data.length; i++) diff = Math.max(diff, Math.abs(Number(t.data[i]) - Number(before[k].data[i])));
        return { name: names[k] ?? `output_${k}`, ...summary(t), maxAbsDiffVsOpened: diff };
      }),
    };
  },

  exportOnnx() {
    const bytes = gm.toONNX();
    return { bytes };
  },

  reset() {
    gm?.delete();
    gm = fx.loadONNX(original);
    return snapshot(gm);
  },
};

onmessage = async (e) => {
  const { id, type, ...args } = e.data;
  try {
    if (type !== 'load' && !gm) throw new FxError('ValueError', 'open a model first');
    const result = await handlers[type](args);
    postMessage({ id, ok: true, result }, result?.bytes ? [result.bytes.buffer] : []);
  } catch (err) {
    postMessage({ id, ok: false, error: { kind: err.kind ?? 'Error', message: err.message ?? String(err) } });
  }
};
