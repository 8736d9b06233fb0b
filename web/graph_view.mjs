// The graph view: draws a laid-out graph (positions from web/layout_worker.mjs) with a transform
// the view controls (screen = world * k + t), so pan follows the mouse exactly and zoom keeps the
// point under the cursor. Only what is on screen is in the DOM: nodes and edges entering the
// viewport are created, those leaving it removed. Zoomed out on a large graph (too many nodes on
// screen to be readable or cheap as DOM), the view switches to a canvas. A minimap shows the
// whole graph and the viewport; dragging in it moves the view.
//
// Every node drawn as SVG is a <g data-node="<fx node name>">. Module groups (web/groups.mjs): a
// collapsed one is a box <g data-group="<group id>">, an expanded one a frame <g class="frame"
// data-frame="<group id>"> behind its members; clicking either toggles it (onGroup).

const SVG = 'http://www.w3.org/2000/svg';
/** Above this many nodes on screen, or below this zoom, the canvas draws instead of the DOM. */
const MAX_DOM_NODES = 400;
const MIN_DOM_ZOOM = 0.3;
/** Below this zoom the canvas leaves out the edges (shorter than a pixel between layers). */
const MIN_EDGE_ZOOM = 0.02;

function el(name, attrs = {}, parent = null) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  parent?.append(e);
  return e;
}

/** Colours of node kinds, shared by the SVG (via CSS classes) and the canvas. */
export const KIND_COLOURS = {
  input: ['#e9f7ef', '#59a77a'],
  output: ['#fdf2e3', '#d09a3c'],
  conv: ['#e7eefc', '#4f74c8'],
  linear: ['#eee8fb', '#7a5cc8'],
  act: ['#fbeaea', '#c25555'],
  norm: ['#e8f6f7', '#3d9ca3'],
  pool: ['#eaf4e4', '#6c9c4a'],
  math: ['#f3f3f3', '#888'],
  shape: ['#fff8e1', '#b59a3a'],
  other: ['#eef2fb', '#7d93c4'],
  group: ['#f1ecfa', '#8064b4'],
};
const FRAME_HEADER = 16;

/** The kind (colour) of a node from its op and target. */
export function kindOf(op, target) {
  if (op === 'placeholder') return 'input';
  if (op === 'output') return 'output';
  const t = String(target).toLowerCase().replace(/^.*\./, '');
  if (/conv/.test(t)) return 'conv';
  if (/matmul|gemm|linear|einsum/.test(t)) return 'linear';
  if (/relu|gelu|sigmoid|tanh|softmax|silu|swish|elu|clip|hardswish|softplus|erf/.test(t)) return 'act';
  if (/norm/.test(t)) return 'norm';
  if (/pool/.test(t)) return 'pool';
  if (/^(add|sub|mul|div|pow|sqrt|neg|exp|log|reciprocal|abs|sum|mean|reduce.*)$/.test(t)) return 'math';
  if (/reshape|transpose|concat|cat|slice|gather|flatten|squeeze|unsqueeze|split|shape|expand|permute|view|getitem|tile|pad|resize/.test(t)) return 'shape';
  return 'other';
}

export class GraphView {
  /**
   * @param pane the positioned element holding the view
   * @param onSelect called with a node id (or null) when the user clicks
   * @param onGroup called with a group id when the user clicks a collapsed group or a frame's header
   */
  constructor(pane, onSelect, onGroup) {
    this.pane = pane;
    this.onSelect = onSelect;
    this.onGroup = onGroup;
    this.canvas = Object.assign(document.createElement('canvas'), { className: 'graph-canvas' });
    this.svg = el('svg', { id: 'graph', role: 'img', 'aria-label': 'graph view' });
    const defs = el('defs', {}, this.svg);
    const marker = el('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: '10', refY: '5', markerWidth: '7', markerHeight: '7', orient: 'auto-start-reverse' }, defs);
    el('path', { d: 'M0,0L10,5L0,10z', class: 'arrowhead' }, marker);
    this.root = el('g', { class: 'viewport' }, this.svg);
    this.frameLayer = el('g', { class: 'frames' }, this.root);
    this.edgeLayer = el('g', { class: 'edges' }, this.root);
    this.nodeLayer = el('g', { class: 'nodes' }, this.root);
    this.minimap = Object.assign(document.createElement('canvas'), { className: 'minimap', width: 200, height: 140 });
    this.minimap.setAttribute('aria-label', 'minimap');
    pane.prepend(this.canvas, this.svg);
    pane.append(this.minimap);
    this.k = 1;
    this.tx = 0;
    this.ty = 0;
    this.graph = null;
    this.drawnNodes = new Map();
    this.drawnEdges = new Map();
    this.drawnFrames = new Map();
    this.marks = new Map();
    this.selected = null;
    this.mode = 'svg';
    this.frame = 0;
    this.bindInput();
    new ResizeObserver(() => this.schedule()).observe(pane);
  }

  /**
   * Shows a laid-out graph: {nodes: [{id, title, lines, kind, width, height, x, y, group?}],
   * edges: [{from, to, points, label}], frames: [{id, label, x0, y0, x1, y1, depth}], width,
   * height}. It opens on the inputs, or with `focus` (a node id) where it was on screen, at the
   * same zoom.
   */
  setGraph(graph, { focus = null, at = null } = {}) {
    this.graph = graph;
    graph.frames ??= [];
    this.byId = new Map(graph.nodes.map((n) => [n.id, n]));
    this.clearDom();
    this.renderMinimapBase();
    const n = focus && this.byId.get(focus);
    if (n && at) this.setTransform(this.k, at[0] - n.x * this.k, at[1] - n.y * this.k);
    else if (n) this.centerOn(focus);
    else this.openOnInputs();
  }

  /** Where node `id` is on screen now (pane coordinates), or null. */
  screenOf(id) {
    const n = this.byId?.get(id);
    return n ? [n.x * this.k + this.tx, n.y * this.k + this.ty] : null;
  }

  /** Marks nodes (id -> 'added' | 'removed' | 'changed'), e.g. a pass step's diff. */
  setMarks(marks) {
    this.marks = marks;
    this.clearDom();
    this.schedule();
  }

  clearDom() {
    this.frameLayer.replaceChildren();
    this.edgeLayer.replaceChildren();
    this.nodeLayer.replaceChildren();
    this.drawnNodes.clear();
    this.drawnEdges.clear();
    this.drawnFrames.clear();
  }

  size() {
    const r = this.pane.getBoundingClientRect();
    return { w: Math.max(1, r.width), h: Math.max(1, r.height) };
  }

  /** The whole graph in view (never magnified beyond 1.5). */
  fit() {
    if (!this.graph) return;
    const { w, h } = this.size();
    const k = Math.min(1.5, (w - 20) / this.graph.width, (h - 20) / this.graph.height);
    this.setTransform(k, (w - this.graph.width * k) / 2, (h - this.graph.height * k) / 2);
  }

  /** A readable zoom (1) on the graph's inputs, or the whole graph if it fits at that zoom. */
  openOnInputs() {
    const { w, h } = this.size();
    const g = this.graph;
    if (g.width <= w && g.height <= h) return this.fit();
    const inputs = g.nodes.filter((n) => n.kind === 'input');
    const first = inputs.length ? inputs : g.nodes.slice(0, 1);
    const cx = first.reduce((s, n) => s + n.x, 0) / Math.max(1, first.length);
    const top = Math.min(...first.map((n) => n.y - n.height / 2));
    this.setTransform(1, w / 2 - cx, 30 - top);
  }

  /** Centres world point (x, y), keeping the zoom. */
  centerOnPoint(x, y) {
    const { w, h } = this.size();
    this.setTransform(this.k, w / 2 - x * this.k, h / 2 - y * this.k);
  }

  /** Centres node `id` at a readable zoom. */
  centerOn(id) {
    const n = this.byId?.get(id);
    if (!n) return;
    const { w, h } = this.size();
    const k = Math.max(this.k, 1);
    this.setTransform(k, w / 2 - n.x * k, h / 2 - n.y * k);
  }

  select(id) {
    this.selected = id;
    for (const [nid, e] of this.drawnNodes) e.classList.toggle('selected', nid === id);
    this.schedule();
  }

  zoomAt(factor, cx, cy) {
    const k = Math.min(4, Math.max(0.01, this.k * factor));
    const f = k / this.k;
    this.setTransform(k, cx - (cx - this.tx) * f, cy - (cy - this.ty) * f);
  }

  setTransform(k, tx, ty) {
    Object.assign(this, { k, tx, ty });
    this.root.setAttribute('transform', `translate(${tx},${ty}) scale(${k})`);
    this.schedule();
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  /** The visible world rectangle, with a margin so panning does not show pop-in. */
  viewRect(margin = 80) {
    const { w, h } = this.size();
    const m = margin / this.k;
    return { x0: -this.tx / this.k - m, y0: -this.ty / this.k - m, x1: (w - this.tx) / this.k + m, y1: (h - this.ty) / this.k + m };
  }

  render() {
    if (!this.graph) return;
    const v = this.viewRect();
    const inView = (x0, y0, x1, y1) => x1 >= v.x0 && x0 <= v.x1 && y1 >= v.y0 && y0 <= v.y1;
    const nodes = this.graph.nodes.filter((n) => inView(n.x - n.width / 2, n.y - n.height / 2, n.x + n.width / 2, n.y + n.height / 2));
    const mode = this.k < MIN_DOM_ZOOM || nodes.length > MAX_DOM_NODES ? 'canvas' : 'svg';
    if (mode !== this.mode) {
      this.mode = mode;
      this.pane.dataset.mode = mode;
      if (mode === 'canvas') this.clearDom();
    }
    if (mode === 'canvas') this.renderCanvas(v);
    else {
      this.canvas.width = this.canvas.width;  // clears it
      this.renderDom(nodes, v, inView);
    }
    this.renderMinimap();
  }

  renderDom(nodes, v, inView) {
    const frames = new Set();
    for (const f of this.graph.frames) {
      if (!inView(f.x0, f.y0, f.x1, f.y1)) continue;
      frames.add(f.id);
      if (!this.drawnFrames.has(f.id)) this.drawnFrames.set(f.id, this.makeFrame(f));
    }
    for (const [id, e] of this.drawnFrames) if (!frames.has(id)) (e.remove(), this.drawnFrames.delete(id));
    const keep = new Set(nodes.map((n) => n.id));
    for (const [id, e] of this.drawnNodes) if (!keep.has(id)) (e.remove(), this.drawnNodes.delete(id));
    for (const n of nodes) if (!this.drawnNodes.has(n.id)) this.drawnNodes.set(n.id, this.makeNode(n));
    const edges = new Set();
    for (const e of this.graph.edges) {
      if (!inView(e.bbox[0], e.bbox[1], e.bbox[2], e.bbox[3])) continue;
      const key = `${e.from}\u0000${e.to}`;
      edges.add(key);
      if (!this.drawnEdges.has(key)) this.drawnEdges.set(key, this.makeEdge(e));
    }
    for (const [key, e] of this.drawnEdges) if (!edges.has(key)) (e.remove(), this.drawnEdges.delete(key));
  }

  makeFrame(f) {
    const g = el('g', { class: 'frame', transform: `translate(${f.x0},${f.y0})` });
    g.dataset.frame = f.id;
    el('rect', { width: f.x1 - f.x0, height: f.y1 - f.y0, rx: 6 }, g);
    el('rect', { width: f.x1 - f.x0, height: FRAME_HEADER, rx: 6, class: 'frame-header' }, g);
    const t = el('text', { x: 6, y: 12, class: 'frame-label' }, g);
    t.textContent = `▾ ${f.label} · ${f.size}`;
    el('title', {}, g).textContent = `${f.id}: click the header to collapse`;
    // Frames sit behind edges and nodes, outermost first.
    const after = [...this.frameLayer.children].find((c) => Number(c.dataset.depth) > f.depth);
    g.dataset.depth = String(f.depth);
    this.frameLayer.insertBefore(g, after ?? null);
    return g;
  }

  makeNode(n) {
    const mark = this.marks.get(n.id);
    const g = el('g', { class: `node ${n.kind}${mark ? ' ' + mark : ''}${n.id === this.selected ? ' selected' : ''}`, transform: `translate(${n.x - n.width / 2},${n.y - n.height / 2})` });
    if (n.group) g.dataset.group = n.group;
    else g.dataset.node = n.id;
    el('rect', { width: n.width, height: n.height, rx: 5 }, g);
    const t = el('text', { x: 8, y: 16, class: 'title' }, g);
    t.textContent = n.title;
    n.lines.forEach((line, i) => {
      const s = el('text', { x: 8, y: 31 + 13 * i, class: i === 0 ? 'name' : 'weight' }, g);
      s.textContent = line;
    });
    el('title', {}, g).textContent = [n.title, ...n.lines].join('\n');
    this.nodeLayer.append(g);
    return g;
  }

  makeEdge(e) {
    const mark = this.marks.get(e.to) === 'removed' || this.marks.get(e.from) === 'removed' ? ' removed' : '';
    const g = el('g', { class: `edge${mark}` });
    Object.assign(g.dataset, { from: e.from, to: e.to });
    const p = e.points;
    let d = `M${p[0]},${p[1]}`;
    for (let i = 2; i < p.length; i += 2) d += `L${p[i]},${p[i + 1]}`;
    el('path', { d, 'marker-end': 'url(#arrow)' }, g);
    if (e.label) {
      // The label sits beside the edge's first bend below its source.
      const i = Math.min(2, p.length - 2);
      const t = el('text', { x: p[i] + 5, y: (p[1] + p[i + 1]) / 2 + 4, class: 'edge-label' }, g);
      t.textContent = e.label;
    }
    this.edgeLayer.append(g);
    return g;
  }

  /** The edges crossing the view `v` as one canvas path. */
  strokeEdges(ctx, v) {
    ctx.strokeStyle = '#aaa';
    ctx.lineWidth = 1 / this.k;
    ctx.beginPath();
    for (const e of this.graph.edges) {
      const b = e.bbox;
      if (b[2] < v.x0 || b[0] > v.x1 || b[3] < v.y0 || b[1] > v.y1) continue;
      ctx.moveTo(e.points[0], e.points[1]);
      for (let i = 2; i < e.points.length; i += 2) ctx.lineTo(e.points[i], e.points[i + 1]);
    }
    ctx.stroke();
  }

  renderCanvas(v) {
    const { w, h } = this.size();
    const dpr = window.devicePixelRatio || 1;
    const c = this.canvas;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) Object.assign(c, { width: Math.round(w * dpr), height: Math.round(h * dpr) });
    const ctx = c.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    ctx.setTransform(dpr * this.k, 0, 0, dpr * this.k, dpr * this.tx, dpr * this.ty);
    for (const f of this.graph.frames) {
      if (f.x1 < v.x0 || f.x0 > v.x1 || f.y1 < v.y0 || f.y0 > v.y1) continue;
      ctx.fillStyle = f.depth % 2 ? 'rgba(128,100,180,0.05)' : 'rgba(128,100,180,0.08)';
      ctx.fillRect(f.x0, f.y0, f.x1 - f.x0, f.y1 - f.y0);
      ctx.strokeStyle = '#b9a9d9';
      ctx.lineWidth = 1 / this.k;
      ctx.strokeRect(f.x0, f.y0, f.x1 - f.x0, f.y1 - f.y0);
      if (this.k >= 0.15) {
        ctx.fillStyle = '#6a5a8c';
        ctx.font = '11px sans-serif';
        ctx.fillText(f.label, f.x0 + 6, f.y0 + 12);
      }
    }
    // Below MIN_EDGE_ZOOM an edge between adjacent layers is under a pixel long: only the boxes draw.
    if (this.k >= MIN_EDGE_ZOOM) this.strokeEdges(ctx, v);
    const showText = this.k >= 0.15;
    if (!showText) {
      // Far out (thousands of boxes): one path per colour, outlines only where they show.
      const byFill = new Map();
      for (const n of this.graph.nodes) {
        const x = n.x - n.width / 2, y = n.y - n.height / 2;
        if (x + n.width < v.x0 || x > v.x1 || y + n.height < v.y0 || y > v.y1) continue;
        const mark = this.marks.get(n.id);
        const fill = mark === 'added' ? '#c8f0d4' : mark === 'removed' ? '#f8d0d0' : mark === 'changed' ? '#fbe3b0' : KIND_COLOURS[n.kind][this.k * n.width < 6 ? 1 : 0];
        let list = byFill.get(fill);
        if (!list) byFill.set(fill, (list = []));
        list.push(x, y, n.width, n.height);
      }
      for (const [fill, r] of byFill) {
        ctx.beginPath();
        for (let i = 0; i < r.length; i += 4) ctx.rect(r[i], r[i + 1], r[i + 2], r[i + 3]);
        ctx.fillStyle = fill;
        ctx.fill();
      }
      const sel = this.selected && this.byId.get(this.selected);
      if (sel) {
        ctx.strokeStyle = '#e0a000';
        ctx.lineWidth = 3 / this.k;
        ctx.strokeRect(sel.x - sel.width / 2, sel.y - sel.height / 2, sel.width, sel.height);
      }
      return;
    }
    for (const n of this.graph.nodes) {
      const x = n.x - n.width / 2, y = n.y - n.height / 2;
      if (x + n.width < v.x0 || x > v.x1 || y + n.height < v.y0 || y > v.y1) continue;
      const [fill, stroke] = KIND_COLOURS[n.kind];
      const mark = this.marks.get(n.id);
      ctx.fillStyle = mark === 'added' ? '#c8f0d4' : mark === 'removed' ? '#f8d0d0' : mark === 'changed' ? '#fbe3b0' : fill;
      ctx.strokeStyle = n.id === this.selected ? '#e0a000' : stroke;
      ctx.lineWidth = (n.id === this.selected ? 3 : 1) / this.k;
      ctx.fillRect(x, y, n.width, n.height);
      ctx.strokeRect(x, y, n.width, n.height);
      ctx.fillStyle = '#222';
      ctx.font = '12px sans-serif';
      ctx.fillText(n.title, x + 8, y + 16);
    }
  }

  /**
   * The whole graph as a standalone SVG document (every node and edge, not only the ones on
   * screen; colours inline, so it renders anywhere). Nodes carry data-node like the live view.
   */
  toSVG() {
    const g = this.graph;
    const esc = (t) => String(t).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
    const pad = 20;
    const out = [
      `<svg xmlns="${SVG}" width="${Math.ceil(g.width + 2 * pad)}" height="${Math.ceil(g.height + 2 * pad)}" viewBox="${-pad} ${-pad} ${Math.ceil(g.width + 2 * pad)} ${Math.ceil(g.height + 2 * pad)}" font-family="sans-serif">`,
      '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#999"/></marker></defs>',
      '<rect x="' + -pad + '" y="' + -pad + '" width="100%" height="100%" fill="#fff"/>',
    ];
    for (const f of g.frames ?? []) {
      out.push(`<g data-frame="${esc(f.id)}" transform="translate(${f.x0},${f.y0})"><rect width="${f.x1 - f.x0}" height="${f.y1 - f.y0}" rx="6" fill="#8064b4" fill-opacity="0.07" stroke="#b9a9d9"/>`);
      out.push(`<text x="6" y="12" font-size="11" fill="#6a5a8c">${esc(f.label)}</text></g>`);
    }
    for (const e of g.edges) {
      const p = e.points;
      let d = `M${p[0]},${p[1]}`;
      for (let i = 2; i < p.length; i += 2) d += `L${p[i]},${p[i + 1]}`;
      out.push(`<path d="${d}" fill="none" stroke="#999" stroke-width="1" marker-end="url(#arrow)"/>`);
      if (e.label) {
        const i = Math.min(2, p.length - 2);
        out.push(`<text x="${p[i] + 5}" y="${(p[1] + p[i + 1]) / 2 + 4}" font-size="10" fill="#777">${esc(e.label)}</text>`);
      }
    }
    for (const n of g.nodes) {
      const [fill, stroke] = KIND_COLOURS[n.kind] ?? KIND_COLOURS.other;
      const x = n.x - n.width / 2, y = n.y - n.height / 2;
      out.push(`<g ${n.group ? 'data-group' : 'data-node'}="${esc(n.group ?? n.id)}" transform="translate(${x},${y})"><title>${esc([n.title, ...n.lines].join('\n'))}</title>`);
      out.push(`<rect width="${n.width}" height="${n.height}" rx="5" fill="${fill}" stroke="${stroke}"/>`);
      out.push(`<text x="8" y="16" font-size="12" font-weight="600" fill="#222">${esc(n.title)}</text>`);
      n.lines.forEach((line, i) => out.push(`<text x="8" y="${31 + 13 * i}" font-size="10" fill="${i === 0 ? '#444' : '#777'}">${esc(line)}</text>`));
      out.push('</g>');
    }
    out.push('</svg>');
    return out.join('\n');
  }

  /**
   * The whole graph as a PNG (a Blob), drawn at up to 2x but within what a canvas holds (16k px a
   * side, 250 MP); resolves to {blob, scale}.
   */
  toPNG() {
    const g = this.graph;
    const pad = 20;
    const W = g.width + 2 * pad, H = g.height + 2 * pad;
    const scale = Math.min(2, 16000 / W, 16000 / H, Math.sqrt(2.5e8 / (W * H)));
    const c = document.createElement('canvas');
    c.width = Math.max(1, Math.round(W * scale));
    c.height = Math.max(1, Math.round(H * scale));
    const ctx = c.getContext('2d');
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, c.width, c.height);
    ctx.setTransform(scale, 0, 0, scale, pad * scale, pad * scale);
    ctx.strokeStyle = '#999';
    ctx.lineWidth = 1;
    for (const e of g.edges) {
      const p = e.points;
      ctx.beginPath();
      ctx.moveTo(p[0], p[1]);
      for (let i = 2; i < p.length; i += 2) ctx.lineTo(p[i], p[i + 1]);
      ctx.stroke();
      // Arrowhead at the end.
      const n = p.length;
      const a = Math.atan2(p[n - 1] - p[n - 3], p[n - 2] - p[n - 4]);
      ctx.beginPath();
      ctx.moveTo(p[n - 2], p[n - 1]);
      ctx.lineTo(p[n - 2] - 7 * Math.cos(a - 0.4), p[n - 1] - 7 * Math.sin(a - 0.4));
      ctx.lineTo(p[n - 2] - 7 * Math.cos(a + 0.4), p[n - 1] - 7 * Math.sin(a + 0.4));
      ctx.fillStyle = '#999';
      ctx.fill();
    }
    for (const n of g.nodes) {
      const [fill, stroke] = KIND_COLOURS[n.kind] ?? KIND_COLOURS.other;
      const x = n.x - n.width / 2, y = n.y - n.height / 2;
      ctx.fillStyle = fill;
      ctx.strokeStyle = stroke;
      ctx.fillRect(x, y, n.width, n.height);
      ctx.strokeRect(x, y, n.width, n.height);
      ctx.fillStyle = '#222';
      ctx.font = '600 12px sans-serif';
      ctx.fillText(n.title, x + 8, y + 16);
      ctx.font = '10px sans-serif';
      n.lines.forEach((line, i) => {
        ctx.fillStyle = i === 0 ? '#444' : '#777';
        ctx.fillText(line, x + 8, y + 31 + 13 * i);
      });
    }
    return new Promise((resolve, reject) => c.toBlob((blob) => (blob ? resolve({ blob, scale }) : reject(new Error('the canvas is too large to encode'))), 'image/png'));
  }

  renderMinimapBase() {
    const g = this.graph;
    const mm = this.minimap;
    const s = (this.mmScale = Math.min(mm.width / g.width, mm.height / g.height));
    // Centred; a very tall or wide graph stays a visible strip (every box at least 2 px).
    this.mmOffset = [(mm.width - g.width * s) / 2, (mm.height - g.height * s) / 2];
    const [ox, oy] = this.mmOffset;
    this.mmBase = document.createElement('canvas');
    Object.assign(this.mmBase, { width: mm.width, height: mm.height });
    const ctx = this.mmBase.getContext('2d');
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, mm.width, mm.height);
    ctx.fillStyle = 'rgba(128,100,180,0.15)';
    for (const f of g.frames ?? []) if (f.depth === 0) ctx.fillRect(ox + f.x0 * s, oy + f.y0 * s, Math.max(2, (f.x1 - f.x0) * s), Math.max(2, (f.y1 - f.y0) * s));
    for (const n of g.nodes) {
      ctx.fillStyle = KIND_COLOURS[n.kind][1];
      ctx.fillRect(ox + (n.x - n.width / 2) * s, oy + (n.y - n.height / 2) * s, Math.max(2, n.width * s), Math.max(1, n.height * s));
    }
  }

  renderMinimap() {
    const ctx = this.minimap.getContext('2d');
    ctx.drawImage(this.mmBase, 0, 0);
    const v = this.viewRect(0);
    const s = this.mmScale;
    const [ox, oy] = this.mmOffset;
    ctx.strokeStyle = '#d33';
    ctx.lineWidth = 1.5;
    const w = Math.max(4, (v.x1 - v.x0) * s), h = Math.max(4, (v.y1 - v.y0) * s);
    ctx.strokeRect(ox + ((v.x0 + v.x1) / 2) * s - w / 2, oy + ((v.y0 + v.y1) / 2) * s - h / 2, w, h);
  }

  /**
   * What is under a screen point (relative to the pane): {node: id}, {group: id} (a collapsed
   * group's box or an expanded group's frame header, the innermost), or null.
   */
  hit(sx, sy) {
    const x = (sx - this.tx) / this.k, y = (sy - this.ty) / this.k;
    for (const n of this.graph?.nodes ?? []) if (Math.abs(x - n.x) <= n.width / 2 && Math.abs(y - n.y) <= n.height / 2) return n.group ? { group: n.group } : { node: n.id };
    let best = null;
    for (const f of this.graph?.frames ?? []) if (x >= f.x0 && x <= f.x1 && y >= f.y0 && y <= f.y0 + FRAME_HEADER / Math.min(1, this.k) && (!best || f.depth > best.depth)) best = f;
    return best ? { group: best.id } : null;
  }

  bindInput() {
    const pane = this.pane;
    const local = (e) => {
      const r = pane.getBoundingClientRect();
      return [e.clientX - r.left, e.clientY - r.top];
    };
    pane.addEventListener('wheel', (e) => {
      if (e.target === this.minimap) return;
      e.preventDefault();
      const [x, y] = local(e);
      this.zoomAt(Math.exp(-e.deltaY * 0.0015), x, y);
    }, { passive: false });
    let drag = null;
    const surface = [this.svg, this.canvas];
    for (const s of surface) {
      s.addEventListener('pointerdown', (e) => {
        drag = { x: e.clientX, y: e.clientY, moved: 0 };
        s.setPointerCapture(e.pointerId);
        pane.classList.add('panning');
      });
      s.addEventListener('pointermove', (e) => {
        if (!drag) return;
        const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
        drag = { x: e.clientX, y: e.clientY, moved: drag.moved + Math.abs(dx) + Math.abs(dy) };
        this.setTransform(this.k, this.tx + dx, this.ty + dy);
      });
      s.addEventListener('pointerup', (e) => {
        pane.classList.remove('panning');
        if (drag && drag.moved < 4) {
          const [x, y] = local(e);
          const h = this.hit(x, y);
          if (h?.group) this.onGroup?.(h.group, [x, y]);
          else this.onSelect?.(h?.node ?? null);
        }
        drag = null;
      });
    }
    // The minimap: press or drag to centre the view there.
    let mmDrag = false;
    const moveTo = (e) => {
      const r = this.minimap.getBoundingClientRect();
      const wx = (e.clientX - r.left - this.mmOffset[0]) / this.mmScale, wy = (e.clientY - r.top - this.mmOffset[1]) / this.mmScale;
      const { w, h } = this.size();
      this.setTransform(this.k, w / 2 - wx * this.k, h / 2 - wy * this.k);
    };
    this.minimap.addEventListener('pointerdown', (e) => {
      mmDrag = true;
      this.minimap.setPointerCapture(e.pointerId);
      moveTo(e);
    });
    this.minimap.addEventListener('pointermove', (e) => mmDrag && moveTo(e));
    this.minimap.addEventListener('pointerup', () => (mmDrag = false));
  }
}
