// What the graph view draws of a module, from the model worker's light node list (pure data, no
// DOM, so it also runs under Node): get_attr nodes (weights, constants) folded into each node
// that uses them, an edge per input carrying its source's shape, node boxes sized to their text;
// and the layout worker's answer turned into the view's graph (edges with bounding boxes).
import { kindOf } from './graph_view.mjs';

export const fmtShape = (s) => (Array.isArray(s) ? (s.length ? s.join('×') : 'scalar') : '');
const shortTarget = (t) => String(t).replace(/^onnx\./, '').replace(/^torch\.(nn\.functional\.)?/, '');
export const clip = (s, n = 38) => (s.length > n ? s.slice(0, n - 1) + '…' : s);

/**
 * {drawn: [{id, title, lines, kind, width, height}], edges: [{from, to, label}], ownerOf}, where
 * `ownerOf` maps every name (folded ones too) to the drawn node that shows it. Async: it awaits
 * `pause()` (e.g. the next task) every 1,000 nodes when given one.
 */
export async function buildDrawn(nodes, pause = null) {
  const byName = new Map();
  const folded = new Set();
  for (const n of nodes) {
    byName.set(n.name, n);
    if (n.op === 'get_attr') folded.add(n.name);
  }
  const drawn = [];
  const edges = [];
  const ownerOf = new Map();
  let k = 0;
  for (const n of nodes) {
    if (pause && ++k % 1000 === 0) await pause();
    if (folded.has(n.name)) continue;
    ownerOf.set(n.name, n.name);
    const weights = [];
    for (const i of n.inputs) if (folded.has(i)) weights.push(byName.get(i));
    for (const w of weights) if (!ownerOf.has(w.name)) ownerOf.set(w.name, n.name);
    const title = n.op === 'call_function' || n.op === 'call_method' ? shortTarget(n.target) : n.op === 'call_module' ? `${n.target} (module)` : n.op === 'placeholder' ? `input ${fmtShape(n.shape)}` : n.op;
    const lines = [clip(n.name)];
    for (const w of weights.slice(0, 3)) lines.push(clip(`▪ ${w.name} ${fmtShape(w.shape)}`));
    if (weights.length > 3) lines.push(`▪ +${weights.length - 3} more`);
    let longest = title.length;
    for (const l of lines) longest = Math.max(longest, l.length);
    const width = Math.min(320, Math.max(90, 7 * longest + 18));
    drawn.push({ id: n.name, title: clip(title), lines, kind: kindOf(n.op, n.target), width, height: 24 + 13 * lines.length });
    for (const i of n.inputs) if (!folded.has(i) && byName.has(i)) edges.push({ from: i, to: n.name, label: fmtShape(byName.get(i).shape) });
  }
  // A weight nobody draws (e.g. only the output uses it) stays visible as its own node.
  for (const n of nodes) {
    if (!folded.has(n.name) || ownerOf.has(n.name)) continue;
    ownerOf.set(n.name, n.name);
    drawn.push({ id: n.name, title: 'weight', lines: [clip(`${n.name} ${fmtShape(n.shape)}`)], kind: 'other', width: 220, height: 37 });
  }
  return { drawn, edges, ownerOf };
}

/** The layout request for the layout worker: ids, sizes and edges only. */
export const layoutRequest = ({ drawn, edges }) => ({ nodes: drawn.map(({ id, width, height }) => ({ id, width, height })), edges: edges.map((e) => [e.from, e.to]) });

/** The view's graph from the drawn nodes and the layout worker's answer `r` (typed arrays). */
export function placed({ drawn, edges }, r) {
  const labels = new Map(edges.map((e) => [`${e.from}\u0000${e.to}`, e.label]));
  const nodes = drawn.map((n, i) => ({ ...n, x: r.xy[2 * i], y: r.xy[2 * i + 1] }));
  const out = [];
  for (let k = 0; k < r.from.length; k++) {
    const points = r.points.subarray(r.offsets[k], r.offsets[k + 1]);
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (let i = 0; i < points.length; i += 2) {
      x0 = Math.min(x0, points[i]);
      x1 = Math.max(x1, points[i]);
      y0 = Math.min(y0, points[i + 1]);
      y1 = Math.max(y1, points[i + 1]);
    }
    const from = drawn[r.from[k]].id, to = drawn[r.to[k]].id;
    out.push({ from, to, points, label: labels.get(`${from}\u0000${to}`), bbox: [x0 - 40, y0, x1 + 60, y1] });
  }
  return { nodes, edges: out, width: r.width, height: r.height, engine: r.engine, ms: r.ms };
}
