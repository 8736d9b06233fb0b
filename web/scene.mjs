// What the graph pane shows: a drawn graph (web/drawn.mjs) with its module groups
// (web/groups.mjs), laid out in the layout worker and handed to the view (web/graph_view.mjs),
// plus the groups' collapsed/expanded state, which survives pass steps and edits of the same model
// (group ids are module paths). Large graphs open with groups collapsed.
import { buildDrawn, layoutRequest, placed } from './drawn.mjs';
import { buildGroups, project, frames, defaultCollapsed, collapsedOwner, GROUP_PREFIX } from './groups.mjs';

/** A macrotask boundary: long work split by it never makes one long main-thread task. */
export const nextTask = () => new Promise((r) => setTimeout(r, 0));

export class Scene {
  /**
   * @param view the GraphView
   * @param layoutCall (type, args) => Promise: the layout worker's RPC
   * @param status element for the layout's progress and figures
   */
  constructor(view, layoutCall, status) {
    Object.assign(this, { view, layoutCall, status });
    this.seq = 0;
    this.collapsed = new Set();
    this.state = null; // {info, tree, marks, projection}
    this.model = null;
  }

  /** The drawn info of the graph on screen (ownerOf: any node name -> its drawn node). */
  get info() {
    return this.state?.info ?? null;
  }

  /**
   * Draws light `nodes` (the worker's list) with `marks` (drawn id -> 'added' | 'removed' |
   * 'changed'); `model` names the module: a new one resets the groups' state (large graphs
   * collapse). Resolves false if a newer draw superseded this one.
   */
  async show(nodes, { model, marks = new Map(), info = null } = {}) {
    const seq = ++this.seq;
    info ??= await buildDrawn(nodes, nextTask);
    await nextTask();
    if (seq !== this.seq) return false;
    const tree = await buildGroups(nodes, info, nextTask);
    await nextTask();
    if (seq !== this.seq) return false;
    if (model !== this.model) {
      this.model = model;
      this.collapsed = defaultCollapsed(info, tree);
    }
    await nextTask();
    if (seq !== this.seq) return false;
    return this.draw({ info, tree, marks }, {}, seq);
  }

  /** Lays out and shows `state` with the current collapsed set; `place` as GraphView.setGraph's. */
  async draw(state, place = {}, seq = ++this.seq) {
    const projection = project(state.info, state.tree, this.collapsed);
    this.status.textContent = `laying out ${projection.drawn.length} nodes…`;
    if (projection.drawn.length > 2000) await nextTask();
    if (seq !== this.seq) return false;
    const r = await this.layoutCall('layout', layoutRequest(projection));
    await nextTask(); // the answer's deserialisation was one task
    if (seq !== this.seq) return false;
    const graph = placed(projection, r);
    graph.frames = frames(graph, state.tree, this.collapsed);
    await nextTask();
    if (seq !== this.seq) return false;
    this.state = { ...state, projection };
    this.view.setMarks(this.visibleMarks(state.marks));
    this.view.setGraph(graph, place);
    const groups = state.tree.groups.size;
    this.status.textContent = `${graph.nodes.length} boxes${groups ? ` · ${groups} groups, ${this.collapsed.size} collapsed` : ''} · ${r.engine} ${Math.round(r.ms)} ms`;
    Object.assign(document.body.dataset, { drawn: String(graph.nodes.length), collapsed: String(this.collapsed.size), layoutMs: String(Math.round(r.ms)), layoutEngine: r.engine });
    return true;
  }

  /** Marks drawn nodes (drawn id -> kind) on the graph as it is; a collapsed group shows 'changed'. */
  setMarks(marks) {
    if (!this.state) return;
    this.state.marks = marks;
    this.view.setMarks(this.visibleMarks(marks));
  }

  visibleMarks(marks) {
    const out = new Map();
    for (const [id, kind] of marks) {
      const v = this.state?.projection.visibleOf(id) ?? id;
      if (v === id || !out.has(v)) out.set(v, v === id ? kind : 'changed');
    }
    return out;
  }

  /** The drawn node (or group box) that shows node `name` now. */
  visible(name) {
    const id = this.info?.ownerOf.get(name) ?? name;
    return this.state?.projection.visibleOf(id) ?? id;
  }

  /** Expands the collapsed groups hiding node `name`; resolves once it is drawn. */
  async reveal(name) {
    const s = this.state;
    if (!s) return;
    const id = s.info.ownerOf.get(name) ?? name;
    if (!collapsedOwner(s.tree, this.collapsed, id)) return;
    for (let g = s.tree.groups.get(s.tree.groupOf.get(id)); g; g = s.tree.groups.get(g.parent)) this.collapsed.delete(g.id);
    await this.draw(s, { focus: id });
  }

  /**
   * Collapses or expands group `id` (a click at screen point `at`): the box or frame stays under
   * the pointer.
   */
  async toggle(id, at = null) {
    const s = this.state;
    if (!s?.tree.groups.has(id)) return;
    // Expanding shows its subgroups as they were (collapsed or not).
    const expanding = this.collapsed.has(id);
    if (expanding) this.collapsed.delete(id);
    else this.collapsed.add(id);
    const ok = await this.draw(s, {});
    if (!ok) return;
    const g = this.view.graph;
    let focus = null;
    if (expanding) {
      const f = g.frames.find((x) => x.id === id);
      if (f) focus = { x: (f.x0 + f.x1) / 2, y: f.y0 + 20 };
    } else {
      const box = g.nodes.find((n) => n.id === GROUP_PREFIX + id);
      if (box) focus = { x: box.x, y: box.y };
    }
    if (focus && at) this.view.setTransform(this.view.k, at[0] - focus.x * this.view.k, at[1] - focus.y * this.view.k);
    else if (focus) this.view.centerOnPoint(focus.x, focus.y);
  }

  /** Expands every group (`expanded`) or collapses every group (the outermost ones show). */
  async setAll(expanded) {
    const s = this.state;
    if (!s) return;
    this.collapsed = expanded ? new Set() : new Set(s.tree.groups.keys());
    await this.draw(s, {});
  }
}
