// The playground's Web Worker: owns the wasm module and the model, so long imports, passes and
// runs never block the page. Messages in: {id, type, ...}; out: {id, ok, result | error} plus
// {type: 'progress', text} while working.
import { init, FxError } from '../wasm/index.mjs';
import { randomInputs, outputNames } from '../wasm/inputs.mjs';

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

const handlers = {
  /** The pass registry's passes ({name, description}), for the page's pipeline. */
  async passInfo() {
    fx ??= await init();
    return fx.passInfo();
  },

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

  // The current graph as a PyTorch package ({ files: { 'module.py': Uint8Array, ... } }),
  // lowered to torch targets first if it has onnx.* ones.
  torchPackage({ className }) {
    return { files: fx.torchPackage(gm, className) };
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
    if (type !== 'load' && type !== 'passInfo' && !gm) throw new FxError('ValueError', 'open a model first');
    const result = await handlers[type](args);
    const transfer = result?.bytes ? [result.bytes.buffer] : result?.files ? Object.values(result.files).map((b) => b.buffer) : [];
    postMessage({ id, ok: true, result }, transfer);
  } catch (err) {
    postMessage({ id, ok: false, error: { kind: err.kind ?? 'Error', message: err.message ?? String(err) } });
  }
};
