// The playground page: talks to web/worker.mjs (which owns the wasm module), draws the graph
// with dagre's layered layout, and shows code, graph text, table, pass pipeline and runs.
import dagre from './vendor/dagre.esm.js';
import { zipSync } from './vendor/fflate.mjs';

const $ = (id) => document.getElementById(id);
const DEFAULT_PIPELINE = new Set(['dce', 'cse', 'fold', 'fuse-conv-bn']);

// ---- worker RPC ----------------------------------------------------------------------------
const worker = new Worker(new URL('./worker.mjs', import.meta.url), { type: 'module' });
let nextId = 1;
const pending = new Map();
worker.onmessage = (e) => {
  const m = e.data;
  if (m.type === 'progress') return setStatus(m.text + '…');
  const p = pending.get(m.id);
  pending.delete(m.id);
  if (m.ok) p.resolve(m.result);
  else p.reject(Object.assign(new Error(m.error.message), { kind: m.error.kind }));
};
function call(type, args = {}, transfer = []) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    worker.postMessage({ id, type, ...args }, transfer);
  });
}

// ---- status ----------------------------------------------------------------------------------
function setStatus(text, error = false) {
  $('status').textContent = text;
  $('status').classList.toggle('error', error);
}
// Event handlers: the failure is already shown in the status line by busy().
const quietly = (f) => (...args) => f(...args).catch(() => {});

async function busy(what, f) {
  setStatus(what + '…');
  document.body.setAttribute('aria-busy', 'true');
  try {
    return await f();
  } catch (e) {
    setStatus(`${e.kind ?? 'Error'}: ${e.message}`, true);
    throw e;
  } finally {
    document.body.removeAttribute('aria-busy');
  }
}

// ---- views -----------------------------------------------------------------------------------
let current = null;

function show(snap, added = new Set()) {
  current = snap;
  $('code').textContent = snap.code;
  $('graph-text').textContent = snap.graph;
  $('tabular').textContent = snap.tabular;
  drawGraph(snap.nodes, added);
  const gaps = snap.coverage.length ? ` · ${snap.coverage.length} node(s) cannot run` : '';
  setStatus(`${snap.name}: ${snap.nodes.length} nodes${gaps}`);
  document.body.dataset.loaded = snap.name;
}

const SVG = 'http://www.w3.org/2000/svg';
const view = { x: 0, y: 0, w: 1000, h: 1000 };

function drawGraph(nodes, added) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: 'TB', nodesep: 18, ranksep: 28, marginx: 10, marginy: 10 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of nodes) {
    const label = n.op === 'call_function' ? `${n.name} = ${n.target}` : `${n.name} (${n.op})`;
    g.setNode(n.name, { label, width: Math.max(60, 7 * label.length + 16), height: 26, op: n.op });
  }
  for (const n of nodes) for (const i of n.inputs) if (g.hasNode(i)) g.setEdge(i, n.name);
  dagre.layout(g);

  const svg = $('graph');
  svg.replaceChildren();
  const root = document.createElementNS(SVG, 'g');
  for (const e of g.edges()) {
    const pts = g.edge(e).points;
    const path = document.createElementNS(SVG, 'path');
    path.setAttribute('class', 'edge');
    path.setAttribute('d', 'M' + pts.map((p) => `${p.x},${p.y}`).join('L'));
    root.append(path);
  }
  for (const id of g.nodes()) {
    const n = g.node(id);
    const el = document.createElementNS(SVG, 'g');
    el.setAttribute('class', `node ${n.op}${added.has(id) ? ' added' : ''}`);
    el.dataset.name = id;
    el.setAttribute('transform', `translate(${n.x - n.width / 2},${n.y - n.height / 2})`);
    const rect = document.createElementNS(SVG, 'rect');
    rect.setAttribute('width', n.width);
    rect.setAttribute('height', n.height);
    const text = document.createElementNS(SVG, 'text');
    text.setAttribute('x', 8);
    text.setAttribute('y', 17);
    text.textContent = n.label;
    const title = document.createElementNS(SVG, 'title');
    title.textContent = n.label;
    el.append(rect, text, title);
    root.append(el);
  }
  svg.append(root);
  const { width, height } = g.graph();
  Object.assign(view, { x: 0, y: 0, w: Math.max(width, 200), h: Math.max(height, 200) });
  svg.setAttribute('viewBox', `${view.x} ${view.y} ${view.w} ${view.h}`);
}

// Pan and zoom by rewriting the viewBox.
{
  const svg = $('graph');
  svg.addEventListener('wheel', (e) => {
    e.preventDefault();
    const k = e.deltaY > 0 ? 1.15 : 1 / 1.15;
    const r = svg.getBoundingClientRect();
    const fx = view.x + ((e.clientX - r.left) / r.width) * view.w, fy = view.y + ((e.clientY - r.top) / r.height) * view.h;
    Object.assign(view, { x: fx - (fx - view.x) * k, y: fy - (fy - view.y) * k, w: view.w * k, h: view.h * k });
    svg.setAttribute('viewBox', `${view.x} ${view.y} ${view.w} ${view.h}`);
  }, { passive: false });
  let drag = null;
  svg.addEventListener('pointerdown', (e) => { drag = { x: e.clientX, y: e.clientY }; svg.setPointerCapture(e.pointerId); });
  svg.addEventListener('pointerup', () => { drag = null; });
  svg.addEventListener('pointermove', (e) => {
    if (!drag) return;
    const r = svg.getBoundingClientRect();
    view.x -= ((e.clientX - drag.x) / r.width) * view.w;
    view.y -= ((e.clientY - drag.y) / r.height) * view.h;
    drag = { x: e.clientX, y: e.clientY };
    svg.setAttribute('viewBox', `${view.x} ${view.y} ${view.w} ${view.h}`);
  });
}

// ---- tabs ------------------------------------------------------------------------------------
function selectTab(name) {
  for (const b of document.querySelectorAll('nav button')) b.setAttribute('aria-selected', String(b.dataset.tab === name));
  for (const t of document.querySelectorAll('.tab')) t.hidden = t.id !== `tab-${name}`;
}
for (const b of document.querySelectorAll('nav button')) b.addEventListener('click', () => selectTab(b.dataset.tab));

// ---- opening models --------------------------------------------------------------------------
async function open(bytes, fileName) {
  const snap = await busy(`opening ${fileName}`, () => call('load', { bytes, fileName }, [bytes]));
  show(snap);
  $('pass-report').tBodies[0].replaceChildren();
  $('run-result').textContent = '';
}

async function openUrl(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`cannot fetch ${url}: ${r.status}`);
  await open(await r.arrayBuffer(), url.split('/').pop());
}

$('file').addEventListener('change', quietly(async (e) => {
  const f = e.target.files[0];
  if (f) await open(await f.arrayBuffer(), f.name);
}));
const drop = $('drop');
drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('dragging'); });
drop.addEventListener('dragleave', () => drop.classList.remove('dragging'));
drop.addEventListener('drop', (e) => {
  e.preventDefault();
  drop.classList.remove('dragging');
  const f = e.dataTransfer.files[0];
  if (f) quietly(async () => open(await f.arrayBuffer(), f.name))();
});

// ---- passes ----------------------------------------------------------------------------------
// The list comes from the worker, which reads the C++ pass registry (fx.passInfo()).
call('passInfo').then((passes) => {
  for (const { name, description } of passes) {
    const label = document.createElement('label');
    label.title = description;
    const box = document.createElement('input');
    Object.assign(box, { type: 'checkbox', name: 'pass', value: name, checked: DEFAULT_PIPELINE.has(name) });
    label.append(box, ` ${name}`);
    $('pass-list').append(label);
  }
}, (e) => setStatus(`${e.kind ?? 'Error'}: ${e.message}`, true));
$('pass-form').addEventListener('submit', (e) => e.preventDefault());
$('pass-form').addEventListener('submit', quietly(async () => {
  const names = [...document.querySelectorAll('input[name=pass]:checked')].map((i) => i.value);
  const { reports, snapshot } = await busy('running passes', () => call('passes', { names, check: $('check').checked }));
  const body = $('pass-report').tBodies[0];
  body.replaceChildren();
  const added = new Set();
  for (const r of reports) {
    const tr = body.insertRow();
    tr.dataset.pass = r.pass;
    const cells = [
      r.pass,
      `${r.nodesBefore} → ${r.nodesAfter}${r.modified ? '' : ' (unchanged)'}`,
      r.removed.join(', '),
      r.added.join(', '),
      r.maxAbsDiff === undefined ? '—' : r.maxAbsDiff.toExponential(2),
    ];
    cells.forEach((c, k) => {
      const td = tr.insertCell();
      td.textContent = c;
      if (k === 2 || k === 3) td.className = 'names';
    });
    for (const a of r.added) added.add(a);
  }
  show(snapshot, added);
}));

// ---- run -------------------------------------------------------------------------------------
$('run').addEventListener('click', quietly(async () => {
  const r = await busy('running', () => call('run'));
  const lines = [`time: ${r.ms.toFixed(1)} ms   inputs: ${r.inputs.map((i) => `${i.dtype}[${i.shape}]`).join(', ')}`];
  for (const o of r.outputs)
    lines.push(
      `${o.name}: ${o.dtype}[${o.shape.join(', ')}]  sum=${o.sum.toPrecision(7)}  min=${o.min.toPrecision(5)}  max=${o.max.toPrecision(5)}`,
      `  first values: ${o.head.map((v) => v.toPrecision(5)).join(', ')}`,
      `  max |current − as opened| = ${o.maxAbsDiffVsOpened.toExponential(2)}`,
    );
  $('run-result').textContent = lines.join('\n');
  setStatus(`ran ${current.name} in ${r.ms.toFixed(1)} ms`);
}));

// ---- downloads, reset, keyboard ---------------------------------------------------------------
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
// The runnable PyTorch package, zipped as a folder named after the model:
//   unzip resnet18_torch.zip; python -c "from resnet18_torch import Net; print(Net().eval())"
$('download-torch').addEventListener('click', quietly(async () => {
  const pkg = (current.name.replace(/\.onnx$/, '').replace(/[^A-Za-z0-9_]/g, '_').replace(/^(?=[0-9])/, '_') || 'model') + '_torch';
  const { files } = await busy('lowering to PyTorch', () => call('torchPackage', { className: 'Net' }));
  const zip = zipSync(Object.fromEntries(Object.entries(files).map(([name, bytes]) => [`${pkg}/${name}`, bytes])), { level: 0 });
  download(zip, `${pkg}.zip`, 'application/zip');
  setStatus(`PyTorch package ${pkg}.zip: ${(zip.byteLength / 1e6).toFixed(1)} MB (from ${pkg} import Net; net = Net().eval())`);
}));
$('reset').addEventListener('click', quietly(async () => show(await busy('resetting', () => call('reset')))));
document.addEventListener('keydown', (e) => {
  if (e.target.closest('input, textarea') || e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key >= '1' && e.key <= '5') selectTab(document.querySelectorAll('nav button')[Number(e.key) - 1].dataset.tab);
  else if (e.key === 'o') $('file').click();
  else if (e.key === 'r') $('reset').click();
  else if (e.key === 'd') $('download-onnx').click();
});

// ---- start: the model named in the URL hash (#model=zoo/resnet18.onnx) or the sample ------------
const model = new URLSearchParams(location.hash.slice(1)).get('model') ?? 'sample.onnx';
busy(`opening ${model}`, () => openUrl(new URL(`../models/${model}`, location.href).href)).catch(() => {});
