// Graph layout off the main thread, in its own Web Worker, so a large model never freezes the
// page. Up to DAGRE_MAX_NODES nodes: dagre's layered layout (its crossing reduction reads best on
// small graphs, but it takes seconds at 1,000 nodes and does not finish in minutes at 10,000);
// above: web/layered_layout.mjs, linear in the graph (a 10k-node transformer stack in ~0.2 s).
// In: {id, nodes: [{id, width, height}], edges: [[from, to]]}.
// Out, in transferred typed arrays (the page deserialises them at no cost): {id, ok, xy (x, y of
// each node's centre, in the request's order), from, to (edge ends as node indices), offsets,
// points (edge e's polyline is points[offsets[e] .. offsets[e + 1]]: x0, y0, x1, y1, ...),
// width, height, engine, ms} or {id, ok: false, message}.
import dagre from '@dagrejs/dagre';
import { layeredLayout } from './layered_layout.mjs';

const DAGRE_MAX_NODES = 1500;

function dagreLayout(nodes, edges) {
  const g = new dagre.graphlib.Graph({ multigraph: false });
  g.setGraph({ rankdir: 'TB', nodesep: 24, ranksep: 36, edgesep: 8, marginx: 20, marginy: 20 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of nodes) g.setNode(n.id, { width: n.width, height: n.height });
  for (const [a, b] of edges) if (g.hasNode(a) && g.hasNode(b) && a !== b) g.setEdge(a, b);
  dagre.layout(g);
  const pos = {};
  for (const v of g.nodes()) {
    const n = g.node(v);
    pos[v] = [n.x, n.y];
  }
  const out = g.edges().map((ed) => ({ from: ed.v, to: ed.w, points: g.edge(ed).points.flatMap((p) => [p.x, p.y]) }));
  const { width, height } = g.graph();
  return { nodes: pos, edges: out, width, height };
}

onmessage = (e) => {
  const { id, nodes, edges } = e.data;
  try {
    const t0 = performance.now();
    const engine = nodes.length > DAGRE_MAX_NODES ? 'layered' : 'dagre';
    const r = engine === 'dagre' ? dagreLayout(nodes, edges) : layeredLayout(nodes, edges);
    const index = new Map(nodes.map((n, i) => [n.id, i]));
    const xy = new Float64Array(2 * nodes.length);
    nodes.forEach((n, i) => xy.set(r.nodes[n.id], 2 * i));
    const from = new Int32Array(r.edges.length), to = new Int32Array(r.edges.length), offsets = new Int32Array(r.edges.length + 1);
    r.edges.forEach((e, k) => {
      from[k] = index.get(e.from);
      to[k] = index.get(e.to);
      offsets[k + 1] = offsets[k] + e.points.length;
    });
    const points = new Float64Array(offsets[r.edges.length]);
    r.edges.forEach((e, k) => points.set(e.points, offsets[k]));
    const out = { id, ok: true, xy, from, to, offsets, points, width: r.width, height: r.height, engine, ms: performance.now() - t0 };
    postMessage(out, [xy.buffer, from.buffer, to.buffer, offsets.buffer, points.buffer]);
  } catch (err) {
    postMessage({ id, ok: false, message: err.message ?? String(err) });
  }
};
