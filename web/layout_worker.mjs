// Graph layout off the main thread: dagre's layered layout in its own Web Worker, so a
// 1,000-node model never freezes the page (dagre takes seconds on such graphs).
// In: {id, nodes: [{id, width, height}], edges: [[from, to]]}.
// Out: {id, ok, nodes: {id: [x, y]} (centres), edges: [{from, to, points: [x0, y0, x1, y1, ...]}],
//       width, height} or {id, ok: false, message}.
import dagre from '@dagrejs/dagre';

onmessage = (e) => {
  const { id, nodes, edges } = e.data;
  try {
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
    postMessage({ id, ok: true, nodes: pos, edges: out, width, height });
  } catch (err) {
    postMessage({ id, ok: false, message: err.message ?? String(err) });
  }
};
