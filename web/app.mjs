// The playground page: talks to web/worker.mjs (which owns the wasm module and the model) and to
// web/layout_worker.mjs (dagre), draws the graph with web/graph_view.mjs, and shows code, graph
// text, table, pass pipeline with per-step diffs, runs, the node inspector and model properties.
// Nothing heavy runs on the main thread: imports, passes and runs in one worker, layout in another.
import { zipSync } from 'fflate';
import { GraphView } from './graph_view.mjs';
import { Scene, nextTask } from './scene.mjs';
import { buildDrawn } from './drawn.mjs';
import { initPipeline, pipelineSteps } from './pipeline.mjs';
import { renderCode, codeLineElements } from './code_view.mjs';
import { renderRunInputs, runSpecs } from './run_inputs.mjs';

const $ = (id) => document.getElementById(id);
const DEFAULT_PIPELINE = new Set(['dce', 'cse', 'fold', 'fuse-conv-bn']);

// ---- status and progress -----------------------------------------------------------------------
function setStatus(text, error = false) {
  if (document.body.dataset.failed) return;  // a dead worker stays reported
  $('status').textContent = text;
  $('status').classList.toggle('error', error);
}
function setProgress(fraction) {
  const p = $('progress');
  p.hidden = fraction == null;
  if (fraction === undefined || fraction === null) return;
  if (Number.isFinite(fraction)) p.value = fraction;
  else p.removeAttribute('value');  // indeterminate
}
/** Reports a failure the page cannot recover from by itself (the worker died, a module failed). */
function fatal(text) {
  setStatus(text, true);
  setProgress(null);
  document.body.dataset.failed = 'true';
}
window.addEventListener('unhandledrejection', (e) => setStatus(`${e.reason?.kind ?? 'Error'}: ${e.reason?.message ?? e.reason}`, true));

// ---- workers -----------------------------------------------------------------------------------
function rpc(worker, what, onMessage = () => {}) {
  let nextId = 1;
  const pending = new Map();
  worker.onmessage = (e) => {
    const m = e.data;
    if (m.id === undefined) return onMessage(m);
    const p = pending.get(m.id);
    // Node lists arrive ahead in parts (web/worker.mjs postResult), each message a short task.
    if (m.part !== undefined) return void ((p.parts ??= [])[m.part] ??= []).push(...m.nodes);
    pending.delete(m.id);
    if (m.ok && p.parts) {
      const join = (o) => o?.nodes?.chunked !== undefined && (o.nodes = p.parts[o.nodes.chunked]);
      join(m.result);
      join(m.result.snapshot);
      m.result.steps?.forEach(join);
    }
    if (m.ok) p.resolve(m.result ?? m);
    else p.reject(Object.assign(new Error(m.error?.message ?? m.message), { kind: m.error?.kind ?? 'Error' }));
  };
  // A worker that fails to load (a missing file, a syntax error) fires 'error' with no message id.
  // It is dead from then on: every call, pending or later, fails with that reason.
  let dead = null;
  worker.onerror = (e) => {
    e.preventDefault?.();
    dead = `the ${what} failed to start: ${e.message || 'its script could not be loaded'}`;
    fatal(dead);
    for (const p of pending.values()) p.reject(Object.assign(new Error(dead), { kind: 'RuntimeError' }));
    pending.clear();
  };
  return (type, args = {}, transfer = []) => {
    const id = nextId++;
    if (dead) return Promise.reject(Object.assign(new Error(dead), { kind: 'RuntimeError' }));
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      worker.postMessage({ id, type, ...args }, transfer);
    });
  };
}
const call = rpc(new Worker(new URL('./worker.mjs', import.meta.url), { type: 'module' }), 'model worker', (m) => {
  if (m.type === 'progress') {
    setStatus(m.text + '…');
    if (m.fraction !== undefined) setProgress(m.fraction);
  }
});
const layoutCall = rpc(new Worker(new URL('./layout_worker.mjs', import.meta.url), { type: 'module' }), 'layout worker');

// Event handlers: the failure is already shown in the status line by busy().
const quietly = (f) => (...args) => f(...args).catch(() => {});

async function busy(what, f) {
  setStatus(what + '…');
  setProgress(Infinity);
  document.body.setAttribute('aria-busy', 'true');
  try {
    return await f();
  } catch (e) {
    setStatus(`${e.kind ?? 'Error'}: ${e.message}`, true);
    throw e;
  } finally {
    setProgress(null);
    document.body.removeAttribute('aria-busy');
  }
}

// ---- the drawn graph (web/scene.mjs: folded weights, module groups, layout) ----------------------
const view = new GraphView($('graph-pane'), (id) => selectNode(id, { from: 'graph' }), (group, at) => quietly(() => scene.toggle(group, at))());
const scene = new Scene(view, layoutCall, $('layout-status'));
let opened = 0; // models opened so far: a new one resets the groups' state
$('groups-expand').addEventListener('click', quietly(() => scene.setAll(true)));
$('groups-collapse').addEventListener('click', quietly(() => scene.setAll(false)));
$('fit').addEventListener('click', () => view.fit());
$('zoom-in').addEventListener('click', () => {
  const { w, h } = view.size();
  view.zoomAt(1.25, w / 2, h / 2);
});
$('zoom-out').addEventListener('click', () => {
  const { w, h } = view.size();
  view.zoomAt(0.8, w / 2, h / 2);
});

// ---- views -------------------------------------------------------------------------------------
let current = null;   // the worker's snapshot of the current module
let steps = null;     // the last pass run's steps

$('copy-code').addEventListener('click', async () => {
  if ($('code').dataset.highlighted !== 'true') return setStatus('the code is still being drawn; copy again in a moment');
  const lines = codeLineElements($('code'));
  const text = Array.from(lines, (d) => d.textContent).join('\n');
  try {
    await navigator.clipboard.writeText(text);
    setStatus(`copied ${lines.length} lines of code`);
  } catch (e) {
    setStatus(`copy failed: ${e.message} (the page needs clipboard permission)`);
  }
});
let codeLines = new Map();
$('code').addEventListener('click', (e) => {
  const line = e.target.closest('.line');
  if (line?.dataset.for) selectNode(line.dataset.for, { from: 'code' });
});

function renderProperties(p) {
  const rows = [
    ['opset', p.opset],
    ['producer', p.producer || '—'],
    ['IR version', p.irVersion || '—'],
    ['graph', p.graphName || '—'],
    ['inputs', p.inputs.map((i) => `${i.name}: ${i.dtype ?? '?'}[${(i.declared ?? i.shape ?? []).join(', ')}]`).join('\n')],
    ['outputs', p.outputs.join(', ') || '—'],
    ['nodes', String(p.nodes)],
    ['parameters', `${p.parameters.toLocaleString('en')} (${(p.parameterBytes / 1e6).toFixed(2)} MB)`],
    [
      'runs on',
      p.threads.threads > 1
        ? `${p.threads.threads} threads (${p.threads.simd === 'relaxed' ? 'fx-threads-relaxed.wasm, Relaxed SIMD' : 'fx-threads.wasm'})`
        : `1 thread (fx.wasm${p.threads.reason ? `: ${p.threads.reason}` : ''})`,
    ],
  ];
  document.body.dataset.threads = String(p.threads.threads);
  const t = document.createElement('table');
  t.className = 'props';
  for (const [k, v] of rows) {
    const tr = t.insertRow();
    tr.dataset.prop = k;
    tr.insertCell().textContent = k;
    const td = tr.insertCell();
    td.textContent = v;
    td.className = 'mono';
  }
  $('properties').replaceChildren(t);
}

async function show(snap) {
  current = snap;
  $('diff-result').replaceChildren();
  delete document.body.dataset.diff;
  steps = null;
  // In slices between tasks: a 10k-node module's texts, groups and layout never block the page
  // (the snapshot's deserialisation was a task of its own).
  await nextTask();
  if (current !== snap) return;
  codeLines = renderCode($('code'), snap.code);
  await nextTask();
  if (current !== snap) return;
  $('graph-text').textContent = snap.graph;
  $('tabular').textContent = snap.tabular;
  renderProperties(snap.properties);
  renderRunInputs(snap.properties.inputs);
  $('inspector').replaceChildren(Object.assign(document.createElement('p'), { className: 'note', textContent: 'Click a node in the graph or a line of the code.' }));
  await nextTask();
  if (current !== snap) return;
  if (!(await scene.show(snap.nodes, { model: opened })) || current !== snap) return;
  view.select(null);
  const gaps = snap.coverage.length ? ` · ${snap.coverage.length} node(s) cannot run` : '';
  setStatus(`${snap.name}: ${snap.nodes.length} nodes${gaps}`);
  document.body.dataset.loaded = snap.name;
}

// ---- selection and the inspector ---------------------------------------------------------------
let inspectSeq = 0;
async function selectNode(name, { from } = {}) {
  if (!name || !scene.info) {
    view.select(null);
    return;
  }
  await scene.reveal(name); // expands the groups it is folded into
  const drawnId = scene.visible(name);
  view.select(drawnId);
  if (from !== 'graph') view.centerOn(drawnId);
  for (const l of $('code').querySelectorAll('.line.selected')) l.classList.remove('selected');
  const line = codeLines.get(name);
  if (line) {
    line.classList.add('selected');
    if (from !== 'code') line.scrollIntoView({ block: 'center' });
  }
  document.body.dataset.selected = name;
  const seq = ++inspectSeq;
  let info;
  try {
    info = await call('inspect', { node: name });
  } catch (e) {
    if (seq === inspectSeq) $('inspector').textContent = `${e.kind}: ${e.message}`;
    return;
  }
  if (seq !== inspectSeq) return;
  const snapNode = current.nodes.find((n) => n.name === name);
  const shapeOf = (n) => {
    const s = current.nodes.find((x) => x.name === n);
    return s?.shape ? `${s.dtype ?? ''}[${s.shape.join(', ')}]` : '?';
  };
  const rows = [
    ['name', info.name],
    ['op', info.op],
    ['target', info.target],
    ['args', info.args],
    ['kwargs', info.kwargs],
    ['output', snapNode?.shape ? `${snapNode.dtype ?? ''}[${snapNode.shape.join(', ')}]` : 'unknown (shapes need a run)'],
    ['inputs', info.inputs.map((i) => `${i}: ${shapeOf(i)}`).join('\n') || '—'],
    ['users', info.users.join(', ') || '—'],
    ['code', line ? `line ${line.dataset.line}: ${line.textContent.trim()}` : '—'],
    ...info.weights.map((w) => [`weight ${w.node}`, `${w.target}: ${w.dtype}[${w.shape.join(', ')}]\nfirst values: ${w.head.map((v) => +v.toPrecision(5)).join(', ')}`]),
    ...info.meta.map(([k, v]) => [`meta.${k}`, v]),
  ];
  const t = document.createElement('table');
  t.className = 'props';
  for (const [k, v] of rows) {
    const tr = t.insertRow();
    tr.dataset.field = k;
    tr.insertCell().textContent = k;
    const td = tr.insertCell();
    td.className = 'mono';
    td.textContent = v;
  }
  $('inspector').replaceChildren(t, editBar(info));
  if (from) selectTab('node', false);
}

// ---- editing ---------------------------------------------------------------------------------------
/** The inspector's edit controls for node `info` (each edit is undoable: Undo / Ctrl+Z). */
function editBar(info) {
  const bar = document.createElement('div');
  bar.id = 'edit-bar';
  const isOutput = (current.properties.outputNodes ?? []).includes(info.name);
  const button = (label, kind, extra = {}) => {
    const b = document.createElement('button');
    b.textContent = label;
    b.dataset.edit = kind + (extra.output ? '-output' : '');
    b.addEventListener('click', quietly(() => applyEdit({ kind, node: info.name, ...extra, key: $('edit-attr')?.value, value: $('edit-value')?.value })));
    bar.append(b);
    return b;
  };
  const value = document.createElement('input');
  value.id = 'edit-value';
  value.className = 'mono';
  value.placeholder = 'value or new name';
  value.size = 16;
  if (info.op === 'call_function') {
    const attr = document.createElement('input');
    attr.id = 'edit-attr';
    attr.className = 'mono';
    attr.placeholder = 'attribute';
    attr.size = 10;
    attr.setAttribute('list', 'edit-attr-names');
    const names = document.createElement('datalist');
    names.id = 'edit-attr-names';
    for (const k of info.kwargKeys ?? []) names.append(Object.assign(document.createElement('option'), { value: k }));
    bar.append(attr, names, value);
    button('Set attribute', 'attribute');
  } else bar.append(value);
  if (info.op !== 'output') {
    button('Rename', 'rename');
    if (isOutput) button('Rename output', 'rename', { output: true });
    else button('Add as output', 'add-output');
    button('Delete', 'delete');
  }
  if (info.op === 'placeholder') button('Make batch dynamic', 'dynamic-batch');
  return bar;
}

async function applyEdit(edit) {
  const snap = await busy(`editing ${edit.node}`, () => call('edit', edit));
  await show(snap);
  undoDepth++;
  $('undo').disabled = false;
  if (current.nodes.some((n) => n.name === edit.node)) await selectNode(edit.node, { from: 'edit' });
  setStatus(`${edit.kind} ${edit.node}: done (Undo or Ctrl+Z to take it back)`);
  // Set last: the page (and its tests) read data-edits as "the edit and its re-selection are done".
  document.body.dataset.edits = String(undoDepth);
}
let undoDepth = 0;
function clearUndo() {
  undoDepth = 0;
  $('undo').disabled = true;
  delete document.body.dataset.edits;
}
$('undo').addEventListener('click', quietly(async () => {
  const snap = await busy('undoing', () => call('undo'));
  await show(snap);
  undoDepth = Math.max(0, undoDepth - 1);
  $('undo').disabled = undoDepth === 0;
  document.body.dataset.edits = String(undoDepth);
  setStatus('undone');
}));

// ---- search ------------------------------------------------------------------------------------
let matches = [];
let matchIndex = -1;
function search(step) {
  const q = $('search').value.trim().toLowerCase();
  if (!current || !q) {
    matches = [];
    $('search-count').textContent = '';
    return;
  }
  if (step === 0 || matches.query !== q) {
    // By FX name, ONNX node name, target or opcode; '.', '_' and '/' match each other (module
    // paths). One case-blind pattern tests the names as they are: no string per node and query.
    const sep = /[._/]/;
    const pattern = new RegExp([...q].map((c) => (sep.test(c) ? '[._/]' : c.replace(/[\\^$*+?()[\]{}|-]/g, '\\$&'))).join(''), 'i');
    matches = current.nodes
      .filter((n) => pattern.test(n.name) || (n.onnxName && pattern.test(n.onnxName)) || n.target.toLowerCase().includes(q) || n.op.toLowerCase() === q)
      .map((n) => n.name);
    matches.query = q;
    matchIndex = -1;
  }
  if (!matches.length) {
    $('search-count').textContent = 'no match';
    return;
  }
  matchIndex = (matchIndex + (step < 0 ? -1 : 1) + matches.length) % matches.length;
  $('search-count').textContent = `${matchIndex + 1} of ${matches.length}`;
  selectNode(matches[matchIndex], { from: 'search' });
}
$('search').addEventListener('keydown', (e) => {
  if (e.key === 'Enter') {
    e.preventDefault();
    search(e.shiftKey ? -1 : 1);
  } else if (e.key === 'Escape') $('search').blur();
});
$('search').addEventListener('input', () => {
  matches = [];
  $('search-count').textContent = '';
});
$('search-next').addEventListener('click', () => search(1));
$('search-prev').addEventListener('click', () => search(-1));

// ---- tabs ----------------------------------------------------------------------------------------
function selectTab(name) {
  for (const b of document.querySelectorAll('nav button')) b.setAttribute('aria-selected', String(b.dataset.tab === name));
  for (const t of document.querySelectorAll('.tab')) t.hidden = t.id !== `tab-${name}`;
  dropStraySelection();
}
for (const b of document.querySelectorAll('nav button')) b.addEventListener('click', () => selectTab(b.dataset.tab));

/**
 * Drops a selection nobody sees: a collapsed one (the caret a click leaves on static text) or one
 * in a hidden tab. The browser looks for its canonical position at every frame and press, walking
 * back through the hidden tabs' nodes (a 10k-node module's code, text and table: 40 ms each). A
 * visible selected range (text to copy) and a focused field's caret stay.
 */
function dropStraySelection() {
  const sel = getSelection();
  if (!sel.rangeCount || document.activeElement?.matches('input, textarea, [contenteditable]')) return;
  const inHiddenTab = (n) => Boolean(n && (n.nodeType === Node.ELEMENT_NODE ? n : n.parentElement)?.closest('.tab')?.hidden);
  if (sel.isCollapsed || inHiddenTab(sel.anchorNode) || inHiddenTab(sel.focusNode)) sel.removeAllRanges();
}
// Once a press ends (the selection it made is final by the next task).
document.addEventListener('pointerup', () => setTimeout(dropStraySelection), true);

// ---- opening models ------------------------------------------------------------------------------
/** Opens a model: bytes of the .onnx plus its external-data files ({name: Blob}). */
async function open(bytes, fileName, externalFiles = {}) {
  delete document.body.dataset.loaded;
  const snap = await busy(`opening ${fileName}`, async () => {
    try {
      return await call('load', { bytes, fileName, externalFiles }, [bytes]);
    } catch (e) {
      e.message = `${fileName}: ${e.message}`;
      throw e;
    }
  });
  $('pass-report').tBodies[0].replaceChildren();
  $('pass-verdict').textContent = '';
  $('run-result').textContent = '';
  opened++;
  await show(snap);
  clearUndo();
}

/** Fetches a URL with a progress bar (the download is most of the wait for large models). */
async function fetchWithProgress(url) {
  const r = await fetch(url);
  if (!r.ok) throw Object.assign(new Error(`cannot fetch ${url}: HTTP ${r.status}`), { kind: 'IOError' });
  const total = Number(r.headers.get('Content-Length')) || 0;
  if (!r.body || !total) return r.arrayBuffer();
  const out = new Uint8Array(total);
  let got = 0;
  const reader = r.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (got + value.length > out.length) return new Blob([out.subarray(0, got), value, await new Response(reader.readable ?? null).arrayBuffer()]).arrayBuffer();
    out.set(value, got);
    got += value.length;
    setProgress(got / total);
    setStatus(`reading ${url.split('/').pop()}: ${(got / 1e6).toFixed(1)} of ${(total / 1e6).toFixed(1)} MB…`);
  }
  return out.buffer.slice(0, got);
}

async function openUrl(path) {
  const name = path.split('/').pop();
  let bytes;
  try {
    bytes = await busy(`reading ${name}`, () => fetchWithProgress(new URL(`models/${path}`, location.href).href));
  } catch (e) {
    return;
  }
  await open(bytes, name).catch(() => {});
}

/** Files chosen or dropped together: the .onnx model and its external-data files. */
async function openFiles(files) {
  const list = [...files];
  const model = list.find((f) => /\.onnx$/i.test(f.name)) ?? list[0];
  if (!model) return;
  const externalFiles = Object.fromEntries(list.filter((f) => f !== model).map((f) => [f.name, f]));
  setProgress(Infinity);
  const bytes = await model.arrayBuffer();
  await open(bytes, model.name, externalFiles);
}

$('file').addEventListener('change', quietly(async (e) => openFiles(e.target.files)));
const drop = $('drop');
drop.addEventListener('dragover', (e) => {
  e.preventDefault();
  drop.classList.add('dragging');
});
drop.addEventListener('dragleave', () => drop.classList.remove('dragging'));
drop.addEventListener('drop', (e) => {
  e.preventDefault();
  drop.classList.remove('dragging');
  quietly(openFiles)(e.dataTransfer.files);
});

// The model picker: the sample and the zoo, from models/index.json (written by the build).
$('model-picker').addEventListener('change', (e) => {
  if (!e.target.value) return;
  history.replaceState(null, '', `#model=${e.target.value}`);
  openUrl(e.target.value);
});
async function fillPicker() {
  const picker = $('model-picker');
  try {
    const r = await fetch(new URL('models/index.json', location.href));
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
    const models = await r.json();
    picker.replaceChildren(...models.map((m) => {
      const o = document.createElement('option');
      o.value = m.path;
      o.textContent = m.bytes ? `${m.label} (${(m.bytes / 1e6).toFixed(1)} MB)` : m.label;
      return o;
    }));
  } catch (e) {
    picker.replaceChildren(Object.assign(document.createElement('option'), { value: 'sample.onnx', textContent: 'sample' }));
  }
}

// ---- passes: a pipeline run step by step, each step's diff drawable ------------------------------
call('passInfo').then((passes) => initPipeline(passes, DEFAULT_PIPELINE), (e) => fatal(`${e.kind ?? 'Error'}: ${e.message}`));

const fmtBytes = (b) => (b >= 1e6 ? `${(b / 1e6).toFixed(2)} MB` : `${(b / 1e3).toFixed(1)} KB`);
const fmtDiff = (d) => (d === undefined ? '—' : d.toExponential(2));
/** A difference that means a pass changed the numbers (float32 noise is far below). */
const BROKE = 1e-3;

$('pass-form').addEventListener('submit', (e) => e.preventDefault());
$('pass-form').addEventListener('submit', quietly(async () => {
  const names = pipelineSteps();
  document.body.dataset.passes = 'running';
  const r = await busy('running passes', () => call('passes', { names, check: $('check').checked })).catch((e) => {
    document.body.dataset.passes = 'failed';
    throw e;
  });
  const body = $('pass-report').tBodies[0];
  body.replaceChildren();
  let broke = null;
  let failed = null;
  r.steps.forEach((s, k) => {
    const tr = body.insertRow();
    tr.dataset.pass = s.pass;
    tr.dataset.step = String(k);
    tr.tabIndex = 0;
    if (s.error) {
      // A typed pattern that failed: rolled back, named on its row; the pipeline went on.
      tr.classList.add('failed');
      tr.insertCell().textContent = s.pass;
      const td = tr.insertCell();
      td.colSpan = 6;
      td.className = 'error';
      td.textContent = `${s.error} (rolled back)`;
      failed ??= s.pass;
      return;
    }
    const cells = k === 0
      ? [s.pass, String(s.nodes.length), fmtBytes(s.weightBytes), '', '', '', '']
      : [
        s.pass,
        `${s.nodesBefore} → ${s.nodesAfter}${s.modified ? '' : ' (unchanged)'}${s.matches != null ? ` · ${s.matches} match${s.matches === 1 ? '' : 'es'}` : ''}`,
        fmtBytes(s.weightBytes),
        `${s.ms.toFixed(1)} ms`,
        s.runError ?? fmtDiff(s.maxAbsDiff),
        fmtDiff(s.maxRelDiff),
        `−${s.removed.length} +${s.added.length} ~${s.changed.length}`,
      ];
    cells.forEach((c) => (tr.insertCell().textContent = c));
    if (!broke && k > 0 && (s.runError || s.maxAbsDiff > BROKE)) broke = s.pass;
  });
  const verdict = !$('check').checked ? '' : broke ? `The numbers changed first at pass ${broke}.` : 'Every step keeps the outputs (max |Δ| ≤ 1e-3).';
  $('pass-verdict').textContent = failed ? `Step ${failed} failed and was skipped. ${verdict}` : verdict;
  $('pass-verdict').classList.toggle('error', Boolean(broke || failed));
  await show(r.snapshot);
  steps = r.steps;
  document.body.dataset.passes = 'done'; // the steps' rows can be clicked
}));

/** Draws step k's change: the graph after it plus the nodes it removed, coloured. */
async function showStep(k) {
  if (!steps || k < 1 || steps[k].error) return;
  const s = steps[k];
  const before = steps[k - 1].nodes;
  const removed = before.filter((n) => s.removed.includes(n.name));
  const union = [...s.nodes, ...removed];
  const info = await buildDrawn(union, nextTask);
  const marks = new Map();
  const mark = (names, kind) => {
    for (const n of names) {
      const id = info.ownerOf.get(n);
      if (id && !(marks.get(id) === 'removed' || marks.get(id) === 'added')) marks.set(id, kind);
    }
  };
  mark(s.removed, 'removed');
  mark(s.added, 'added');
  mark(s.changed, 'changed');
  if (!(await scene.show(union, { model: opened, marks, info }))) return;
  for (const tr of $('pass-report').tBodies[0].rows) tr.classList.toggle('selected', tr.dataset.step === String(k));
  document.body.dataset.step = s.pass;
  setStatus(`step ${s.pass}: ${s.removed.length} removed, ${s.added.length} added, ${s.changed.length} changed`);
}
$('pass-report').addEventListener('click', (e) => {
  const tr = e.target.closest('tr[data-step]');
  if (tr) quietly(showStep)(Number(tr.dataset.step));
});

// ---- model diff ------------------------------------------------------------------------------------
/** Compares the current module with another model, node by node, and marks the differences. */
$('diff-file').addEventListener('change', quietly(async () => {
  const f = $('diff-file').files[0];
  if (!f) return;
  const bytes = await f.arrayBuffer();
  const d = await busy(`comparing with ${f.name}`, () => call('diff', { bytes, name: f.name }, [bytes]));
  const marks = new Map();
  const mark = (names, kind) => {
    for (const n of names) {
      const id = scene.info?.ownerOf.get(n) ?? n;
      if (!marks.has(id)) marks.set(id, kind);
    }
  };
  mark(d.removed, 'removed');
  mark(d.changed.map((c) => c.name), 'changed');
  scene.setMarks(marks);
  const box = $('diff-result');
  box.replaceChildren();
  const head = document.createElement('p');
  head.textContent = `${current.name} vs ${d.name}: ${d.same} nodes the same, ${d.changed.length} changed, ${d.removed.length} only here, ${d.added.length} only in ${d.name}`;
  box.append(head);
  const table = document.createElement('table');
  table.id = 'diff-table';
  const row = (kind, name, why) => {
    const tr = table.insertRow();
    tr.dataset.kind = kind;
    tr.dataset.node = name;
    tr.insertCell().textContent = kind;
    tr.insertCell().textContent = name;
    const td = tr.insertCell();
    td.textContent = why;
    td.className = 'mono';
  };
  for (const c of d.changed) row('changed', c.name, c.why);
  for (const n of d.removed) row('only here', n, '');
  for (const n of d.added) row(`only in ${d.name}`, n, '');
  box.append(table);
  document.body.dataset.diff = d.name;
  setStatus(head.textContent);
}));
$('diff-result').addEventListener('click', (e) => {
  const tr = e.target.closest('tr[data-node]');
  if (tr && tr.dataset.kind !== 'only in') quietly(selectNode)(tr.dataset.node, { from: 'diff' });
});

// ---- run -------------------------------------------------------------------------------------------
$('run').addEventListener('click', quietly(async () => {
  let specs;
  try {
    specs = await runSpecs();
  } catch (e) {
    setStatus(e.message, true);
    throw e;
  }
  const repeats = Math.max(1, Number($('run-repeats').value) || 1);
  const r = await busy('running', () => call('run', { specs, repeats, topk: Number($('run-topk').value) || 0 }));
  const timing = r.runs > 1 ? `median of ${r.runs} runs: ${r.ms.toFixed(2)} ms (min ${r.minMs.toFixed(2)})` : `time: ${r.ms.toFixed(1)} ms`;
  const lines = [`${timing}   inputs: ${r.inputs.map((i) => `${i.dtype}[${i.shape}]`).join(', ')}`];
  if (r.topk) lines.push(`top-${r.topk.length} of ${r.outputs[0].name}: ${r.topk.map((t) => `#${t.index} ${t.value.toPrecision(4)}`).join(', ')}`);
  for (const o of r.outputs)
    lines.push(
      `${o.name}: ${o.dtype}[${o.shape.join(', ')}]  sum=${o.sum.toPrecision(7)}  min=${o.min.toPrecision(5)}  max=${o.max.toPrecision(5)}`,
      `  first values: ${o.head.map((v) => v.toPrecision(5)).join(', ')}`,
      `  max |current − as opened| = ${o.maxAbsDiffVsOpened.toExponential(2)}`,
    );
  $('run-result').textContent = lines.join('\n');
  setStatus(`ran ${current.name} in ${r.ms.toFixed(1)} ms`);
}));

// ---- downloads, reset, keyboard ---------------------------------------------------------------------
function download(data, fileName, type) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([data], { type }));
  a.download = fileName;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}
$('download-onnx').addEventListener('click', quietly(async () => {
  const { bytes } = await busy('exporting', () => call('exportOnnx'));
  download(bytes, current.name.replace(/\.onnx$/, '') + '.fx.onnx', 'application/octet-stream');
  setStatus(`exported ${bytes.byteLength} bytes`);
}));
$('download-code').addEventListener('click', () => download(current.readable, current.name.replace(/\.onnx$/, '') + '.py', 'text/x-python'));
$('download-svg').addEventListener('click', () => {
  download(view.toSVG(), current.name.replace(/\.onnx$/, '') + '.svg', 'image/svg+xml');
  setStatus(`graph of ${current.name} as SVG`);
});
$('download-png').addEventListener('click', quietly(async () => {
  const { blob, scale } = await view.toPNG();
  download(blob, current.name.replace(/\.onnx$/, '') + '.png', 'image/png');
  setStatus(`graph of ${current.name} as PNG (${scale.toFixed(2)}x)`);
}));
// The runnable PyTorch package, zipped as a folder named after the model:
//   unzip resnet18_torch.zip; python -c "from resnet18_torch import Net; print(Net().eval())"
$('download-torch').addEventListener('click', quietly(async () => {
  const pkg = (current.name.replace(/\.onnx$/, '').replace(/[^A-Za-z0-9_]/g, '_').replace(/^(?=[0-9])/, '_') || 'model') + '_torch';
  const { files } = await busy('lowering to PyTorch', () => call('torchPackage', { className: 'Net' }));
  const zip = zipSync(Object.fromEntries(Object.entries(files).map(([name, bytes]) => [`${pkg}/${name}`, bytes])), { level: 0 });
  download(zip, `${pkg}.zip`, 'application/zip');
  setStatus(`PyTorch package ${pkg}.zip: ${(zip.byteLength / 1e6).toFixed(1)} MB (from ${pkg} import Net; net = Net().eval())`);
}));
$('reset').addEventListener('click', quietly(async () => {
  await show(await busy('resetting', () => call('reset')));
  clearUndo();
}));
document.addEventListener('keydown', (e) => {
  if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === 'z' && !(e.target instanceof HTMLInputElement || e.target instanceof HTMLTextAreaElement)) {
    e.preventDefault();
    if (!$('undo').disabled) $('undo').click();
    return;
  }
  if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === 'f') {
    e.preventDefault();
    $('search').focus();
    $('search').select();
    return;
  }
  if (e.target.closest('input, textarea, select') || e.ctrlKey || e.metaKey || e.altKey) return;
  const tabs = document.querySelectorAll('nav button');
  if (e.key >= '1' && e.key <= String(tabs.length)) selectTab(tabs[Number(e.key) - 1].dataset.tab);
  else if (e.key === 'o') $('file').click();
  else if (e.key === 'r') $('reset').click();
  else if (e.key === 'd') $('download-onnx').click();
  else if (e.key === 'f') view.fit();
  else if (e.key === '+' || e.key === '=') $('zoom-in').click();
  else if (e.key === '-') $('zoom-out').click();
});

// ---- start: the model named in the URL hash (#model=zoo/resnet18.onnx) or the sample ---------------
document.body.dataset.ready = 'true';
const model = new URLSearchParams(location.hash.slice(1)).get('model') ?? 'sample.onnx';
fillPicker().then(() => {
  $('model-picker').value = model;
});
openUrl(model);
