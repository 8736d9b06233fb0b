// A layered (Sugiyama-style) layout for large graphs, linear in the graph's size, used by
// web/layout_worker.mjs where dagre takes too long (dagre needs minutes on a 10k-node graph):
//   1. ranks by longest path from the inputs, sources then pulled down next to their first user;
//   2. edges spanning several ranks split by dummy points (so they route around nodes);
//   3. order within a rank by barycentre sweeps (down and up, alternating);
//   4. x by alternating sweeps that pull each node to the mean of its neighbours (the rank above
//      first, then both), overlaps removed by isotonic regression (pool adjacent violators: the
//      closest positions, in order, keeping a minimum gap); a rank holding a single vertex stays
//      on the centre line, so a stack of hundreds of blocks does not drift sideways;
//   5. y by rank; an edge runs from its source's bottom through its dummies to its target's top.
// In and out as the worker's dagre path: nodes [{id, width, height}], edges [[from, to]] ->
// {nodes: {id: [x, y]} (centres), edges: [{from, to, points}], width, height}.

const NODE_SEP = 24;
const RANK_SEP = 36;
const DUMMY_WIDTH = 8;
const DUMMY_WEIGHT = 0.1;
const MARGIN = 20;
/** Sweeps of the ordering and of the x placement. */
const ORDER_SWEEPS = 6;
const X_SWEEPS = 8;

export function layeredLayout(nodesIn, edgesIn) {
  const n0 = nodesIn.length;
  const index = new Map(nodesIn.map((n, i) => [n.id, i]));
  const width = nodesIn.map((n) => n.width);
  const height = nodesIn.map((n) => n.height);
  // Unique edges between distinct known nodes.
  const seen = new Set();
  const edges = [];
  for (const [a, b] of edgesIn) {
    const u = index.get(a), v = index.get(b);
    if (u === undefined || v === undefined || u === v) continue;
    const key = u * n0 + v;
    if (seen.has(key)) continue;
    seen.add(key);
    edges.push([u, v]);
  }
  const succ = Array.from({ length: n0 }, () => []);
  const pred = Array.from({ length: n0 }, () => []);
  for (const [u, v] of edges) (succ[u].push(v), pred[v].push(u));

  // 1. Topological order (Kahn; an edge closing a cycle is reversed for the layering only).
  const indeg = pred.map((p) => p.length);
  const order = [];
  const queue = [];
  for (let i = 0; i < n0; i++) if (!indeg[i]) queue.push(i);
  const placed = new Uint8Array(n0);
  for (let next = 0, head = 0; order.length < n0;) {
    if (head === queue.length) {
      while (placed[next]) next++;
      queue.push(next); // a cycle: break it at the first node not placed
      indeg[next] = 0;
    }
    const u = queue[head++];
    if (placed[u]) continue;
    placed[u] = 1;
    order.push(u);
    for (const v of succ[u]) if (--indeg[v] === 0 && !placed[v]) queue.push(v);
  }
  const topo = new Int32Array(n0);
  order.forEach((u, k) => (topo[u] = k));
  const forward = (u, v) => topo[u] < topo[v];
  const rank = new Int32Array(n0);
  for (const u of order) for (const v of succ[u]) if (forward(u, v)) rank[v] = Math.max(rank[v], rank[u] + 1);
  // Sources (weights drawn alone, inputs used late) sit right above their first user.
  for (let k = order.length - 1; k >= 0; k--) {
    const u = order[k];
    if (pred[u].length || !succ[u].length) continue;
    let r = Infinity;
    for (const v of succ[u]) if (forward(u, v)) r = Math.min(r, rank[v] - 1);
    if (Number.isFinite(r) && r > rank[u]) rank[u] = r;
  }

  // 2. Dummy points on long edges. Vertices 0..n0-1 are nodes, then dummies.
  const vRank = Array.from(rank);
  const vWidth = width.slice();
  const up = Array.from({ length: n0 }, () => []);   // neighbours one rank up
  const down = Array.from({ length: n0 }, () => []); // neighbours one rank down
  const chains = []; // per edge: [u, ...dummies, v] (top to bottom)
  for (const [u, v] of edges) {
    let [a, b] = forward(u, v) ? [u, v] : [v, u];
    if (vRank[a] === vRank[b]) {
      chains.push({ from: u, to: v, path: [a, b] });
      continue;
    }
    if (vRank[a] > vRank[b]) [a, b] = [b, a];
    const path = [a];
    let prev = a;
    for (let r = vRank[a] + 1; r < vRank[b]; r++) {
      const d = vRank.length;
      vRank.push(r);
      vWidth.push(DUMMY_WIDTH);
      up.push([prev]);
      down.push([]);
      down[prev].push(d);
      path.push(d);
      prev = d;
    }
    down[prev].push(b);
    up[b].push(prev);
    path.push(b);
    chains.push({ from: u, to: v, path });
  }
  const nv = vRank.length;
  let ranks = 0;
  for (let i = 0; i < nv; i++) ranks = Math.max(ranks, vRank[i] + 1);
  const layers = Array.from({ length: ranks }, () => []);
  // Initial order: nodes in topological order, dummies after their chain's upper end.
  for (const u of order) layers[vRank[u]].push(u);
  for (let d = n0; d < nv; d++) layers[vRank[d]].push(d);
  const pos = new Float64Array(nv);
  const renumber = (layer) => layer.forEach((v, i) => (pos[v] = i));
  layers.forEach(renumber);

  // 3. Barycentre ordering.
  const bary = new Float64Array(nv);
  const sortLayer = (layer, nbrs) => {
    for (const v of layer) {
      const ns = nbrs[v];
      if (!ns.length) {
        bary[v] = pos[v];
        continue;
      }
      let s = 0;
      for (const w of ns) s += pos[w];
      bary[v] = s / ns.length;
    }
    layer.sort((a, b) => bary[a] - bary[b] || pos[a] - pos[b]);
    renumber(layer);
  };
  for (let it = 0; it < ORDER_SWEEPS; it++) {
    if (it % 2 === 0) for (let r = 1; r < ranks; r++) sortLayer(layers[r], up);
    else for (let r = ranks - 2; r >= 0; r--) sortLayer(layers[r], down);
  }

  // 4. x: each rank packed, then pulled towards its neighbours under the minimum gaps.
  const x = new Float64Array(nv);
  for (const layer of layers) {
    let at = 0;
    for (const v of layer) {
      x[v] = at + vWidth[v] / 2;
      at += vWidth[v] + NODE_SEP;
    }
    const shift = at / 2;
    for (const v of layer) x[v] -= shift;
  }
  const want = new Float64Array(nv);
  // A rank with a single vertex (a bottleneck, e.g. a residual Add) stays on the centre line: a
  // stack of hundreds of blocks then cannot drift sideways block by block.
  const place = (layer, nbrs, both) => {
    if (layer.length === 1) return;
    for (const v of layer) {
      let s = 0, c = 0;
      for (const w of nbrs[v]) (s += x[w], c++);
      if (both) for (const w of both[v]) (s += x[w], c++);
      want[v] = c ? s / c : x[v];
    }
    isotonic(layer, want, vWidth, x, n0);
  };
  // The first sweep follows the ranks above; the others balance both sides (least squares on the
  // edges' horizontal lengths).
  for (let r = 1; r < ranks; r++) place(layers[r], up, null);
  for (let it = 1; it < X_SWEEPS; it++) {
    if (it % 2 === 0) for (let r = 0; r < ranks; r++) place(layers[r], up, down);
    else for (let r = ranks - 1; r >= 0; r--) place(layers[r], down, up);
  }

  // 5. y by rank, and the output.
  const rankHeight = new Float64Array(ranks);
  for (let i = 0; i < n0; i++) rankHeight[vRank[i]] = Math.max(rankHeight[vRank[i]], height[i]);
  const rankY = new Float64Array(ranks);
  let y = MARGIN;
  for (let r = 0; r < ranks; r++) {
    const h = rankHeight[r] || 10;
    rankY[r] = y + h / 2;
    y += h + RANK_SEP;
  }
  let minX = Infinity, maxX = -Infinity;
  for (let v = 0; v < nv; v++) {
    minX = Math.min(minX, x[v] - vWidth[v] / 2);
    maxX = Math.max(maxX, x[v] + vWidth[v] / 2);
  }
  if (!Number.isFinite(minX)) (minX = 0, maxX = 0);
  const dx = MARGIN - minX;
  const out = {};
  for (let i = 0; i < n0; i++) out[nodesIn[i].id] = [x[i] + dx, rankY[vRank[i]]];
  const outEdges = chains.map(({ from, to, path }) => {
    const points = [];
    const top = path[0], bottom = path[path.length - 1];
    if (path.length === 2 && vRank[top] === vRank[bottom]) {
      points.push(x[top] + dx, rankY[vRank[top]], x[bottom] + dx, rankY[vRank[bottom]]);
    } else {
      points.push(x[top] + dx, rankY[vRank[top]] + height[top] / 2);
      for (let k = 1; k < path.length - 1; k++) points.push(x[path[k]] + dx, rankY[vRank[path[k]]]);
      points.push(x[bottom] + dx, rankY[vRank[bottom]] - height[bottom] / 2);
    }
    // An edge drawn against the order (a cycle) runs from its real source to its target.
    if (top !== from) {
      const rev = [];
      for (let k = points.length - 2; k >= 0; k -= 2) rev.push(points[k], points[k + 1]);
      return { from: nodesIn[from].id, to: nodesIn[to].id, points: rev };
    }
    return { from: nodesIn[from].id, to: nodesIn[to].id, points };
  });
  return { nodes: out, edges: outEdges, width: maxX - minX + 2 * MARGIN, height: y - RANK_SEP + MARGIN };
}

/**
 * Positions for `layer` (in order) as close as possible (least squares) to `want`, keeping
 * neighbours at least their half widths plus NODE_SEP apart: with offsets o_i (the packed
 * positions), z_i = x_i - o_i must be non-decreasing, which pool-adjacent-violators solves.
 * Real nodes (index < n0) weigh more than dummy points: edges make way for nodes.
 */
function isotonic(layer, want, w, x, n0) {
  const k = layer.length;
  if (!k) return;
  const off = new Float64Array(k);
  for (let i = 1; i < k; i++) off[i] = off[i - 1] + w[layer[i - 1]] / 2 + NODE_SEP + w[layer[i]] / 2;
  // Blocks of pooled values: mean and size.
  const mean = new Float64Array(k), weight = new Float64Array(k), size = new Int32Array(k);
  let b = -1;
  for (let i = 0; i < k; i++) {
    b++;
    mean[b] = want[layer[i]] - off[i];
    weight[b] = layer[i] < n0 ? 1 : DUMMY_WEIGHT;
    size[b] = 1;
    while (b > 0 && mean[b - 1] > mean[b]) {
      const wt = weight[b - 1] + weight[b];
      mean[b - 1] = (mean[b - 1] * weight[b - 1] + mean[b] * weight[b]) / wt;
      weight[b - 1] = wt;
      size[b - 1] += size[b];
      b--;
    }
  }
  for (let j = 0, i = 0; j <= b; j++) for (let t = 0; t < size[j]; t++, i++) x[layer[i]] = mean[j] + off[i];
}
