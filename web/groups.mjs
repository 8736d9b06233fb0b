// Module groups: the module hierarchy read from node names, drawn as collapsible groups.
//   ONNX names from torch's exporter: "/encoder/layer.3/attention/MatMul" -> encoder > layer.3 >
//   attention; dotted names ("encoder.layers.20.attn.softmax", a call_module's target
//   "features.1.conv") -> encoder > encoder.layers > encoder.layers.20 > encoder.layers.20.attn.
//   A node without a name (an import's getitem of a multi-output op) joins its input's group.
// A group with fewer than two drawn nodes is dissolved into its parent; a group holding nothing but
// one subgroup is replaced by it. A collapsed group is drawn as one box (id "group:<id>") with the
// edges of its members to the outside; an expanded one as a frame around its members.
// Pure data (no DOM), so it also runs under Node.

export const GROUP_PREFIX = 'group:';
/** Graphs with more drawn nodes than this open with groups collapsed. */
export const AUTO_COLLAPSE_ABOVE = 1500;
/** ...as many as keep the drawn graph to about this many boxes. */
const AUTO_TARGET = 800;

/** The module path of a light node: [{id, label}] from the outermost group in. */
function pathOf(n) {
  const name = typeof n.onnxName === 'string' ? n.onnxName : n.op === 'call_module' ? String(n.target) : null;
  if (!name) return null;
  const slash = name.includes('/');
  const segs = slash ? name.split('/').filter(Boolean) : name.split('.');
  const out = [];
  let id = '';
  for (let i = 0; i < segs.length - 1; i++) {
    id = i ? `${id}${slash ? '/' : '.'}${segs[i]}` : segs[i];
    out.push({ id, label: slash ? segs[i] : id });
  }
  return out;
}

/**
 * The group tree of a drawn graph: {groups: Map id -> {id, label, parent, kids: [], direct: [],
 * size}, groupOf: Map drawn id -> innermost group id}. `nodes` is the worker's light node list.
 * Async: it awaits `pause()` every 1,000 nodes when given one.
 */
export async function buildGroups(nodes, info, pause = null) {
  const groups = new Map();
  const groupOf = new Map();
  const byName = new Map(nodes.map((n) => [n.name, n]));
  const paths = new Map();
  const path = (n) => {
    if (paths.has(n.name)) return paths.get(n.name);
    let p = pathOf(n);
    // Unnamed getitems (an op's second output...) sit with the op that makes their value.
    if (!p && /getitem$/.test(n.target) && n.inputs.length) {
      const src = byName.get(n.inputs[0]);
      p = src && src !== n ? path(src) : null;
    }
    paths.set(n.name, p);
    return p;
  };
  const drawnIds = new Set(info.drawn.map((d) => d.id));
  let count = 0;
  for (const n of nodes) {
    if (pause && ++count % 1000 === 0) await pause();
    if (!drawnIds.has(n.name)) continue;
    const p = path(n);
    if (!p?.length) continue;
    let parent = null;
    for (const { id, label } of p) {
      if (!groups.has(id)) groups.set(id, { id, label, parent, kids: new Set(), direct: [], size: 0 });
      if (parent) groups.get(parent).kids.add(id);
      parent = id;
    }
    groups.get(parent).direct.push(n.name);
    groupOf.set(n.name, parent);
  }
  // Sizes, innermost first (a kid's id is longer than its parent's).
  const inner = [...groups.values()].sort((a, b) => b.id.length - a.id.length);
  for (const g of inner) {
    g.size = g.direct.length;
    for (const k of g.kids) g.size += groups.get(k).size;
  }
  // Dissolve groups of one node; replace a group holding only one subgroup by that subgroup.
  for (const g of inner) {
    const dissolve = g.size < 2;
    const hollow = !dissolve && g.direct.length === 0 && g.kids.size === 1;
    if (!dissolve && !hollow) continue;
    const parent = g.parent ? groups.get(g.parent) : null;
    for (const k of g.kids) {
      groups.get(k).parent = g.parent;
      parent?.kids.add(k);
    }
    for (const d of g.direct) {
      if (parent) parent.direct.push(d);
      if (parent) groupOf.set(d, parent.id);
      else groupOf.delete(d);
    }
    parent?.kids.delete(g.id);
    groups.delete(g.id);
  }
  for (const g of groups.values()) g.kids = [...g.kids];
  return { groups, groupOf };
}

/** The group `id` of a drawn node is folded into (its outermost collapsed group), or null. */
export function collapsedOwner(tree, collapsed, id) {
  let owner = null;
  for (let g = tree.groups.get(tree.groupOf.get(id)); g; g = tree.groups.get(g.parent)) if (collapsed.has(g.id)) owner = g.id;
  return owner;
}

/**
 * The drawn graph with collapsed groups as single boxes: {drawn, edges, visibleOf(drawnId)}.
 * Edges inside a box disappear; edges to the outside connect to the box (once per pair).
 */
export function project(info, tree, collapsed) {
  if (!collapsed.size) return { ...info, visibleOf: (id) => id };
  const owner = new Map();
  for (const d of info.drawn) {
    const g = collapsedOwner(tree, collapsed, d.id);
    if (g) owner.set(d.id, GROUP_PREFIX + g);
  }
  const visibleOf = (id) => owner.get(id) ?? id;
  const drawn = [];
  const boxes = new Set();
  for (const d of info.drawn) {
    const v = visibleOf(d.id);
    if (v === d.id) drawn.push(d);
    else if (!boxes.has(v)) {
      boxes.add(v);
      const g = tree.groups.get(v.slice(GROUP_PREFIX.length));
      const title = g.label.length > 36 ? '…' + g.label.slice(-35) : g.label;
      const lines = [`${g.size} nodes · click to expand`];
      drawn.push({ id: v, group: g.id, title, lines, kind: 'group', width: Math.min(320, Math.max(140, 7 * Math.max(title.length, lines[0].length) + 24)), height: 40 });
    }
  }
  const seen = new Set();
  const edges = [];
  for (const e of info.edges) {
    const from = visibleOf(e.from), to = visibleOf(e.to);
    const key = `${from}\u0000${to}`;
    if (from === to || seen.has(key)) continue;
    seen.add(key);
    edges.push({ from, to, label: e.label });
  }
  return { drawn, edges, ownerOf: info.ownerOf, visibleOf };
}

/**
 * The groups to collapse when a graph opens: none if it is small; else every outermost group of
 * at most S nodes, with S the smallest power of two that brings the drawn boxes to AUTO_TARGET.
 */
export function defaultCollapsed(info, tree) {
  if (info.drawn.length <= AUTO_COLLAPSE_ABOVE || !tree.groups.size) return new Set();
  const roots = [...tree.groups.values()].filter((g) => !g.parent);
  const ungrouped = info.drawn.length - roots.reduce((s, g) => s + g.size, 0);
  let best = new Set();
  for (let S = 4; S <= info.drawn.length; S *= 2) {
    const set = new Set();
    let count = ungrouped;
    const visit = (g) => {
      if (g.size <= S) {
        set.add(g.id);
        count++;
        return;
      }
      count += g.direct.length;
      for (const k of g.kids) visit(tree.groups.get(k));
    };
    roots.forEach(visit);
    best = set;
    if (count <= AUTO_TARGET) break;
  }
  return best;
}

/**
 * Frames of the expanded groups whose ancestors are expanded too, around their visible members
 * (nested frames inside): [{id, label, x0, y0, x1, y1, depth}], outermost first.
 */
export function frames(graph, tree, collapsed) {
  const byGroup = new Map();
  for (const n of graph.nodes) {
    if (n.group) {
      const g = tree.groups.get(n.group);
      if (g?.parent) add(byGroup, g.parent, n);
      continue;
    }
    const g = tree.groupOf.get(n.id);
    if (g) add(byGroup, g, n);
  }
  const out = [];
  const PAD = 8, HEADER = 16;
  const visit = (g, depth) => {
    if (collapsed.has(g.id)) return null;
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const n of byGroup.get(g.id) ?? []) {
      x0 = Math.min(x0, n.x - n.width / 2);
      x1 = Math.max(x1, n.x + n.width / 2);
      y0 = Math.min(y0, n.y - n.height / 2);
      y1 = Math.max(y1, n.y + n.height / 2);
    }
    const frame = { id: g.id, label: g.label, size: g.size, depth };
    out.push(frame);
    for (const k of g.kids) {
      const f = visit(tree.groups.get(k), depth + 1);
      if (!f) continue;
      x0 = Math.min(x0, f.x0);
      x1 = Math.max(x1, f.x1);
      y0 = Math.min(y0, f.y0);
      y1 = Math.max(y1, f.y1);
    }
    if (!Number.isFinite(x0)) {
      out.splice(out.indexOf(frame), 1);
      return null;
    }
    Object.assign(frame, { x0: x0 - PAD, y0: y0 - PAD - HEADER, x1: x1 + PAD, y1: y1 + PAD });
    return frame;
  };
  for (const g of tree.groups.values()) if (!g.parent) visit(g, 0);
  return out;
}

function add(map, key, v) {
  const list = map.get(key);
  if (list) list.push(v);
  else map.set(key, [v]);
}
