// The playground (Vite production build, headless Debian Chromium via playwright-core) on what
// tests/js/playground.test.mjs does not cover: module groups (collapse/expand, a collapsed group's
// box with its edges, search into a collapsed group), a generated 10k-node transformer stack that
// lays out in seconds and stays interactive with no main-thread task over 200 ms (and a click
// leaves no stray caret, which made every frame walk the hidden 10k-line tabs), and the pass
// pipeline composed by drag (and keyboard) with a typed replace_pattern as a step. The site is
// built into a temporary folder (FXWASM_PLAYGROUND_OUT), so this file never races the other over
// dist/playground/. Screenshots go to build/playground-screens/ (not committed).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { createServer } from '../../scripts/serve.mjs';
import { layeredLayout } from '../../web/layered_layout.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const shots = path.join(root, 'build/playground-screens');
const tmp = fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'fxwasm-playground-more-'));
const site = path.join(tmp, 'site');
let server, browser, page;
const errors = [];
const screenshot = (name) => page.screenshot({ path: path.join(shots, `${name}.png`) });

// The stack generator needs onnx and numpy in /usr/bin/python3 (torch is not needed).
const python = spawnSync('/usr/bin/python3', ['-c', 'import onnx, numpy'], { encoding: 'utf8' });
const havePython = python.status === 0;
if (!havePython) console.warn(`skipping the 10k-node stack test: /usr/bin/python3 cannot import onnx and numpy (${python.stderr.trim().split('\n').pop()})`);

beforeAll(async () => {
  fs.mkdirSync(shots, { recursive: true });
  const build = spawnSync(process.execPath, ['node_modules/vite/bin/vite.js', 'build', '--config', 'web/vite.config.mjs'], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, FXWASM_PLAYGROUND_OUT: site },
  });
  if (build.status !== 0) throw new Error(`vite build failed:\n${build.stdout}\n${build.stderr}`);
  server = createServer({ dir: site });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  await page.waitForSelector('body[data-loaded="sample.onnx"]', { timeout: 60000 });
}, 120000);

afterAll(async () => {
  await browser?.close();
  await new Promise((r) => server?.close(r));
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('the layered layout (graphs too large for dagre): 300 transformer blocks, edges point down, no overlaps, no sideways drift', () => {
  // Per block: LayerNorm, q/k/v chains of 4, scores, scale, softmax, context, 3 reshapes, residual
  // Add, LayerNorm, a 6-node MLP, residual Add (the shape of gen_transformer_stack.py's blocks).
  const nodes = [], edges = [];
  const add = (id, ...from) => {
    nodes.push({ id, width: 90 + (id.length % 5) * 30, height: 37 + (id.length % 3) * 13 });
    for (const f of from) edges.push([f, id]);
    return id;
  };
  let x = add('x');
  for (let b = 0; b < 300; b++) {
    const ln = add(`b${b}.ln1`, x);
    const [q, k, v] = ['q', 'k', 'v'].map((n) => [1, 2, 3, 4].reduce((prev, i) => add(`b${b}.${n}${i}`, prev), ln));
    let h = add(`b${b}.scores`, q, k);
    for (const n of ['div', 'softmax']) h = add(`b${b}.${n}`, h);
    h = add(`b${b}.context`, h, v);
    for (const n of ['merge_t', 'merge', 'out_mm', 'out_add']) h = add(`b${b}.${n}`, h);
    const x1 = add(`b${b}.res1`, x, h);
    h = add(`b${b}.ln2`, x1);
    for (const n of ['mm0', 'add0', 'gelu', 'mm3', 'add3']) h = add(`b${b}.${n}`, h);
    x = add(`b${b}.res2`, x1, h);
  }
  add('output', x);
  const t0 = performance.now();
  const r = layeredLayout(nodes, edges);
  const ms = performance.now() - t0;
  expect(nodes.length).toBe(8702);
  expect(ms).toBeLessThan(5000);
  const at = (id) => r.nodes[id];
  const size = new Map(nodes.map((n) => [n.id, n]));
  const problems = [];
  for (const n of nodes) if (!Number.isFinite(at(n.id)?.[0]) || !Number.isFinite(at(n.id)?.[1])) problems.push(`${n.id} has no position`);
  // Every edge runs down, from its source's bottom to its target's top.
  expect(r.edges).toHaveLength(edges.length);
  for (const e of r.edges) {
    const [sx, sy] = at(e.from), [tx, ty] = at(e.to);
    const p = e.points;
    if (!(ty > sy)) problems.push(`${e.from} -> ${e.to} runs up`);
    if (p[0] !== sx || p[1] !== sy + size.get(e.from).height / 2) problems.push(`${e.from} -> ${e.to} does not leave its source's bottom`);
    if (p[p.length - 2] !== tx || p[p.length - 1] !== ty - size.get(e.to).height / 2) problems.push(`${e.from} -> ${e.to} does not reach its target's top`);
  }
  // Boxes on a rank keep apart.
  const ranks = new Map();
  for (const n of nodes) (ranks.get(at(n.id)[1]) ?? ranks.set(at(n.id)[1], []).get(at(n.id)[1])).push(n);
  for (const row of ranks.values()) {
    row.sort((a, b) => at(a.id)[0] - at(b.id)[0]);
    for (let i = 1; i < row.length; i++) if (at(row[i].id)[0] - row[i].width / 2 - (at(row[i - 1].id)[0] + row[i - 1].width / 2) < 20) problems.push(`${row[i - 1].id} and ${row[i].id} overlap`);
  }
  expect(problems.slice(0, 5)).toEqual([]);
  // 300 blocks stacked, not a staircase: as wide as a few blocks side by side, not hundreds.
  expect(r.width).toBeLessThan(1500);
  expect(Math.abs(at('b0.ln1')[0] - at('b299.ln1')[0])).toBeLessThan(50);
  console.log(`layered layout of ${nodes.length} nodes, ${edges.length} edges: ${ms.toFixed(0)} ms in Node, ${Math.round(r.width)} x ${Math.round(r.height)} px`);
});

// These helpers query the DOM natively: Playwright's selector engine walks every element, in
// tasks of 50-190 ms once the code pane holds a 10k-node module's lines, which the 10k-node test's
// long-task observer would count as the page's.
const waitNative = (css, timeout = 30000) => page.waitForFunction((s) => document.querySelector(s) !== null, css, { polling: 50, timeout });
const rectNative = (css) => page.evaluate((s) => document.querySelector(s).getBoundingClientRect().toJSON(), css);
const bodyData = (key) => page.evaluate((k) => document.body.dataset[k], key);
const drawnNodes = () => page.evaluate(() => [...document.querySelectorAll('#graph [data-node]')].map((n) => n.dataset.node));

/** Clicks the middle of an element's box with the mouse (the view hit-tests the pointer itself). */
async function clickBox(selector, { dy = 0.5 } = {}) {
  const b = await rectNative(selector);
  await page.mouse.click(b.x + b.width / 2, b.y + b.height * dy);
}
const waitDrawn = (before) => page.waitForFunction((b) => document.body.dataset.drawn !== b || document.getElementById('status').classList.contains('error'), before);

test('module groups from the ONNX names: frames, a collapsed group is one box with its edges, expand again', async () => {
  await page.waitForSelector('#graph [data-frame="features"]');
  // The sample's '/features/features.1/BatchNormalization' and its getitems form a group inside 'features'.
  expect(await page.$$eval('#graph [data-frame]', (fs) => fs.map((f) => f.dataset.frame).sort())).toEqual(['features', 'features/features.1', 'features/features.5']);
  expect(await page.textContent('#graph [data-frame="features/features.1"] .frame-label')).toBe('▾ features.1 · 4');
  expect(await page.getAttribute('body', 'data-collapsed')).toBe('0'); // a small graph opens expanded
  let before = await page.getAttribute('body', 'data-drawn');
  await clickBox('#graph [data-frame="features/features.1"] rect.frame-header');
  await waitDrawn(before);
  expect(await page.getAttribute('body', 'data-collapsed')).toBe('1');
  const box = '#graph [data-group="features/features.1"]';
  await page.waitForSelector(box);
  expect(await page.textContent(box)).toContain('4 nodes');
  let drawn = await drawnNodes();
  expect(drawn).not.toContain('batch_normalization');
  expect(drawn).not.toContain('getitem');
  expect(drawn).toContain('conv');
  // The box keeps its members' edges to the outside: conv -> box -> relu.
  const edges = await page.$$eval('#graph .edge', (es) => es.map((e) => `${e.dataset.from}>${e.dataset.to}`));
  expect(edges).toContain('conv>group:features/features.1');
  expect(edges).toContain('group:features/features.1>relu');
  expect(edges.filter((e) => e.split('>').includes('batch_normalization'))).toEqual([]);
  await screenshot('10-group-collapsed');
  before = await page.getAttribute('body', 'data-drawn');
  await clickBox(box);
  await waitDrawn(before);
  expect(await page.getAttribute('body', 'data-collapsed')).toBe('0');
  await page.waitForSelector('#graph [data-node="batch_normalization"]');
  expect(await page.$(box)).toBeNull();

  // Collapse every group: the outermost ('features') is one box; searching a node inside opens it.
  before = await page.getAttribute('body', 'data-drawn');
  await page.click('#groups-collapse');
  await waitDrawn(before);
  await page.waitForSelector('#graph [data-group="features"]');
  drawn = await drawnNodes();
  expect(drawn).not.toContain('relu');
  expect(drawn).toContain('input_1');
  await page.keyboard.press('Control+f');
  await page.keyboard.type('relu_1');
  await page.keyboard.press('Enter');
  await page.waitForSelector('body[data-selected="relu_1"]');
  await page.waitForSelector('#graph [data-node="relu_1"].selected');
  expect(await page.$('#graph [data-group="features"]')).toBeNull();
  await page.click('#groups-expand');
  await page.waitForSelector('body[data-collapsed="0"]');
  expect(errors).toEqual([]);
});

const stepOrder = () => page.$$eval('#pass-list .step', (rs) => rs.map((r) => r.dataset.step));
const reportRows = () => page.$$eval('#pass-report tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
async function runPipeline() {
  await page.evaluate(() => delete document.body.dataset.passes);
  await page.click('#pass-form button[type=submit]');
  await page.waitForSelector('body[data-passes="done"]');
}

test('the pipeline is ordered by drag (and Alt+arrows, and its buttons); the run follows the order', async () => {
  await page.keyboard.press('4');
  const registry = await stepOrder();
  expect(registry.slice(0, 4)).toEqual(['dce', 'cse', 'remove-dropout', 'fold']);
  // Drag fold onto the top half of dce: it goes first.
  await page.dragAndDrop('#pass-list .step[data-step="fold"]', '#pass-list .step[data-step="dce"]', { targetPosition: { x: 20, y: 3 } });
  expect((await stepOrder()).slice(0, 4)).toEqual(['fold', 'dce', 'cse', 'remove-dropout']);
  // Keyboard: cse up one; the ▼ button moves fuse-conv-bn below fuse-matmul-add.
  await page.focus('#pass-list .step[data-step="cse"]');
  await page.keyboard.press('Alt+ArrowUp');
  expect((await stepOrder()).slice(0, 3)).toEqual(['fold', 'cse', 'dce']);
  const order = await stepOrder();
  const i = order.indexOf('fuse-conv-bn');
  await page.click('#pass-list .step[data-step="fuse-conv-bn"] button.down');
  expect((await stepOrder())[i + 1]).toBe('fuse-conv-bn');
  expect(await page.textContent('#pipeline-order')).toBe('Runs: fold → cse → dce → fuse-conv-bn');
  await runPipeline();
  expect((await reportRows()).map((r) => r[0])).toEqual(['(as opened)', 'fold', 'cse', 'dce', 'fuse-conv-bn']);
  await screenshot('14-pipeline-reordered');
  expect(errors).toEqual([]);
});

test('a typed replace_pattern is a pipeline step: Relu -> Clip(0, 6) with its diff drawn; mistakes are named, the page keeps working', async () => {
  await page.click('#reset');
  await page.waitForFunction(() => !document.body.hasAttribute('aria-busy') && document.body.dataset.loaded);
  await page.keyboard.press('4');
  await page.click('#pattern-editor summary');
  // A syntax error is named at once and adds nothing.
  await page.fill('#pattern-text', 'Relu(x) -> Clip(x, 0.0, 6.0');
  await page.click('#pattern-add');
  expect(await page.textContent('#pattern-error')).toBe("PatternError: line 1: expected ')' at the end of the line");
  await page.fill('#pattern-text', 'pattern:\n  y = Relu(x)\nreplacement:\n  Clip(z, 0.0, 6.0)');
  await page.click('#pattern-add');
  expect(await page.textContent('#pattern-error')).toMatch(/^PatternError: line 4: the replacement uses 'z', which is neither an input of the pattern \(x\)/);
  expect(await page.$('#pass-list .step[data-step^="pattern:"]')).toBeNull();
  // The pattern, and one that parses but builds a Clip with four inputs (its schema takes three).
  await page.fill('#pattern-text', 'Relu(x) -> Clip(x, 0.0, 6.0)');
  await page.click('#pattern-add');
  expect(await page.textContent('#pattern-error')).toBe('');
  await page.fill('#pattern-text', 'MaxPool(x) -> Clip(x, 0.0, 6.0, 7.0)');
  await page.click('#pattern-add');
  expect(await page.textContent('#pass-list .step[data-step="pattern:1"] label')).toBe(' pattern 1: Relu → Clip');
  // Only the patterns run; the broken one first, so the good one runs after a failure.
  for (const box of await page.$$('#pass-list .step:not([data-step^="pattern:"]) input:checked')) await box.uncheck();
  await page.dragAndDrop('#pass-list .step[data-step="pattern:2"]', '#pass-list .step[data-step="pattern:1"]', { targetPosition: { x: 20, y: 3 } });
  expect(await page.textContent('#pipeline-order')).toBe('Runs: pattern 2: MaxPool → Clip → pattern 1: Relu → Clip');
  await runPipeline();
  const rows = await reportRows();
  expect(rows.map((r) => r[0])).toEqual(['(as opened)', 'pattern 2: MaxPool → Clip', 'pattern 1: Relu → Clip']);
  expect(rows[1][1]).toMatch(/^SchemaError: .*Clip.* \(rolled back\)$/);
  expect(rows[2][1]).toMatch(/^\d+ → \d+ · 2 matches$/);
  expect(rows[2][4]).toMatch(/^\d\.\d\de[+-]\d+$/); // the equivalence check's max |Δ|, like a built-in pass
  expect(rows[2][6]).toMatch(/^−2 \+\d+ ~\d+$/);
  expect(await page.textContent('#pass-verdict')).toMatch(/^Step pattern 2: MaxPool → Clip failed and was skipped\./);
  const code = await page.textContent('#code');
  expect(code).toContain('onnx.Clip(');
  expect(code).not.toContain('onnx.Relu(');
  expect(code).toContain('onnx.MaxPool('); // the failed step was rolled back
  // The step's diff on the graph: the Relus removed, the Clips added (their constants folded in).
  await page.click('#pass-report tbody tr[data-pass="pattern 1: Relu → Clip"]');
  await page.waitForSelector('body[data-step="pattern 1: Relu → Clip"]');
  await page.waitForSelector('#graph .node.removed');
  expect(await page.$$eval('#graph .node.removed', (ns) => ns.map((n) => n.dataset.node).sort())).toEqual(['relu', 'relu_1']);
  expect(await page.$$eval('#graph .node.added', (ns) => ns.map((n) => n.dataset.node).sort())).toEqual(['clip', 'clip_1']);
  expect(await page.textContent('#graph [data-node="clip"]')).toMatch(/pattern_const/);
  await screenshot('15-pattern-step-diff');
  // The page works on: the module runs, and the export loads in the package.
  await page.keyboard.press('5');
  await page.click('#run');
  await page.waitForFunction(() => document.getElementById('run-result').textContent.includes('logits'));
  expect(errors).toEqual([]);
});

(havePython ? test : test.skip)('a 10k-node transformer stack lays out in seconds and stays interactive with no main-thread task over 200 ms', async () => {
  const t0 = Date.now();
  const file = path.join(tmp, 'stack.onnx');
  const gen = spawnSync('/usr/bin/python3', [path.join(root, 'tests/js/gen_transformer_stack.py'), file, '303'], { encoding: 'utf8' });
  expect(gen.stderr).toBe('');
  const [onnxNodes] = gen.stdout.trim().split(' ').map(Number);
  expect(onnxNodes).toBe(9999);
  // Inside the measured window the page is driven through the native DOM only (see rectNative).
  const fileInput = await page.evaluateHandle(() => document.getElementById('file'));
  await page.evaluate(() => {
    window.longTasks = [];
    new PerformanceObserver((l) => window.longTasks.push(...l.getEntries().map((e) => e.duration))).observe({ type: 'longtask' });
  });
  const opening = Date.now();
  await fileInput.setInputFiles(file);
  await waitNative('body[data-loaded="stack.onnx"]', 120000);
  const openMs = Date.now() - opening;
  // Readable at once: the 303 blocks are collapsed into one box each.
  expect(Number(await bodyData('collapsed'))).toBe(303);
  expect(Number(await bodyData('drawn'))).toBeLessThan(400);
  expect(await page.evaluate(() => document.querySelector('#graph [data-group="encoder.layers.0"]') !== null)).toBe(true);
  expect(await drawnNodes()).toContain('x');
  await screenshot('11-stack-opened');

  // Every node: the 10k-node layout (the layered engine; dagre did not finish in 80 s).
  const expanding = Date.now();
  await clickBox('#groups-expand');
  await waitNative('body[data-collapsed="0"]', 60000);
  const expandMs = Date.now() - expanding;
  const layoutMs = Number(await bodyData('layoutMs'));
  expect(await bodyData('layoutEngine')).toBe('layered');
  expect(Number(await bodyData('drawn'))).toBeGreaterThanOrEqual(10000);
  expect(layoutMs).toBeLessThan(5000);
  expect(expandMs).toBeLessThan(15000);
  const drawn = await drawnNodes();
  expect(drawn).toContain('layer_normalization');
  expect(drawn.length).toBeGreaterThan(5);
  await screenshot('12-stack-expanded');

  // Interactive: fit (canvas), zoom at a point, pan, search, click a node.
  await clickBox('#fit');
  await page.waitForFunction(() => document.getElementById('graph-pane').dataset.mode === 'canvas');
  const pane = await rectNative('#graph-pane');
  await page.mouse.move(pane.x + pane.width / 2, pane.y + 300);
  for (let i = 0; i < 10; i++) await page.mouse.wheel(0, -300);
  await page.mouse.down();
  await page.mouse.move(pane.x + pane.width / 2 + 120, pane.y + 400, { steps: 10 });
  await page.mouse.up();
  await page.keyboard.press('Control+f');
  await page.keyboard.press('Control+a');
  await page.keyboard.type('encoder.layers.250.attn.softmax');
  await page.keyboard.press('Enter');
  await waitNative('body[data-selected="softmax_250"]');
  await waitNative('#inspector tr[data-field="meta.onnx_name"]');
  expect(await page.evaluate(() => document.querySelector('#inspector tr[data-field="meta.onnx_name"] td.mono').textContent)).toBe('"encoder.layers.250.attn.softmax"');
  await waitNative('#graph [data-node="mat_mul_2004"]');
  await clickBox('#graph [data-node="mat_mul_2004"]');
  await waitNative('body[data-selected="mat_mul_2004"]');
  await waitNative('#graph [data-node="mat_mul_2004"].selected');
  await screenshot('13-stack-search-click');
  await page.waitForTimeout(300);
  const long = await page.evaluate(() => window.longTasks);
  console.log(`10k-node stack: ${onnxNodes} ONNX nodes; opened (groups collapsed) in ${openMs} ms; all 10k nodes laid out in ${layoutMs} ms (${expandMs} ms click to drawn); main-thread long tasks (ms): ${JSON.stringify(long.map(Math.round))}; test ${Date.now() - t0} ms`);
  expect(Math.max(0, ...long)).toBeLessThan(200);
  expect(errors).toEqual([]);
}, 180000);

test('a click on static text leaves no caret behind (one beside a 10k-line code view cost 40 ms a frame); a dragged selection stays, until its tab is hidden', async () => {
  await page.click('nav button[data-tab="run"]');
  const p = await rectNative('#tab-run p');
  await page.mouse.click(p.x + 40, p.y + p.height / 2);
  await page.waitForFunction(() => getSelection().rangeCount === 0, null, { timeout: 3000 });
  // Dragging across the text selects it, and the selection stays for copying.
  await page.mouse.move(p.x + 2, p.y + 6);
  await page.mouse.down();
  await page.mouse.move(p.x + 160, p.y + 6, { steps: 5 });
  await page.mouse.up();
  await page.waitForTimeout(50);
  expect((await page.evaluate(() => getSelection().toString())).length).toBeGreaterThan(5);
  // A selection in a tab that gets hidden (here by its shortcut, no press) goes with it.
  await page.keyboard.press('1');
  await page.waitForFunction(() => getSelection().rangeCount === 0, null, { timeout: 3000 });
  expect(await page.getAttribute('#tab-run', 'hidden')).not.toBeNull();
  expect(errors).toEqual([]);
});
