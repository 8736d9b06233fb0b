// The playground in Debian's Chromium (headless, driven by playwright-core): it opens the sample,
// shows code/graph/table, runs a pass pipeline with the equivalence check, runs the model, opens a
// dropped file, reports a bad file, and exports ONNX that loads again.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { createServer, resolve } from '../../scripts/serve.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
let server, browser, page, base;
const errors = [];

beforeAll(async () => {
  server = createServer();
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${server.address().port}`;
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  page = await browser.newPage();
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${base}/web/`);
  await page.waitForSelector('body[data-loaded="sample.onnx"]', { timeout: 30000 });
}, 60000);

afterAll(async () => {
  await browser?.close();
  await new Promise((r) => server?.close(r));
});

test('the server maps only its folders', () => {
  expect(resolve('/web/index.html')).toBe(path.join(root, 'web/index.html'));
  expect(resolve('/models/sample.onnx')).toBe(path.join(root, 'models/sample.onnx'));
  expect(resolve('/models/../package.json')).toBe(path.join(root, 'models/package.json'));  // normalised inside
  expect(resolve('/models/%2e%2e/package.json')).toBe(path.join(root, 'models/package.json'));
  expect(resolve('/src/graph.cpp')).toBeNull();
});

test('opens the sample: status, code, graph text, table and the drawn graph', async () => {
  expect(await page.textContent('#status')).toMatch(/^sample\.onnx: \d+ nodes$/);
  expect(await page.textContent('#code')).toContain('conv = onnx.Conv(input_1, features_0_weight, features_0_bias');
  expect(await page.textContent('#graph-text')).toContain('call_function[target=onnx.BatchNormalization]');
  expect(await page.textContent('#tabular')).toMatch(/^opcode\s+name\s+target/);
  const drawn = await page.$$eval('#graph .node', (ns) => ns.map((n) => n.dataset.name));
  expect(drawn).toContain('conv');
  expect(drawn).toContain('output');
  expect(await page.$$eval('#graph .edge', (es) => es.length)).toBeGreaterThan(drawn.length - 2);
  await page.keyboard.press('3');
  expect(await page.isVisible('#tabular')).toBe(true);
  expect(errors).toEqual([]);
});

test('the pipeline lists the pass registry\'s passes (from the worker), with descriptions', async () => {
  await page.waitForSelector('input[name=pass]', { state: 'attached' });
  const listed = await page.$$eval('#pass-list label', (ls) => ls.map((l) => [l.querySelector('input').value, l.title]));
  const { init } = await import('../../wasm/index.mjs');
  const fx = await init();
  expect(listed).toEqual(fx.passInfo().map((p) => [p.name, p.description]));
  expect(listed.length).toBeGreaterThanOrEqual(8);
});

test('runs a pass pipeline with the equivalence check and shows what changed', async () => {
  await page.keyboard.press('4');
  for (const p of ['dce', 'cse', 'fold', 'fuse-conv-bn']) expect(await page.isChecked(`input[value="${p}"]`)).toBe(true);
  await page.click('#pass-form button[type=submit]');
  await page.waitForSelector('#pass-report tbody tr[data-pass="fuse-conv-bn"]');
  const rows = await page.$$eval('#pass-report tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
  expect(rows.map((r) => r[0])).toEqual(['dce', 'cse', 'fold', 'fuse-conv-bn']);
  for (const r of rows) {
    expect(r[1]).toMatch(/^\d+ → \d+/);
    expect(Number(r[4])).toBeLessThanOrEqual(1e-4);
  }
  expect(errors).toEqual([]);
});

test('runs the model and compares with the model as opened', async () => {
  await page.keyboard.press('5');
  await page.click('#run');
  await page.waitForFunction(() => document.getElementById('run-result').textContent.includes('logits'));
  const text = await page.textContent('#run-result');
  expect(text).toMatch(/logits: float32\[2, 10\]/);
  expect(text).toMatch(/max \|current − as opened\| = \d/);
});

test('exports ONNX that the package loads again', async () => {
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download-onnx')]);
  const file = await download.path();
  const bytes = fs.readFileSync(file);
  expect(bytes.length).toBeGreaterThan(1000);
  const { init } = await import('../../wasm/index.mjs');
  const fx = await init();
  const gm = fx.loadONNX(bytes);
  expect(gm.code).toContain('onnx.Conv');
  gm.delete();
});

test('downloads a PyTorch package (zip) that torch 1.13 imports and runs', async () => {
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download-torch')]);
  expect(download.suggestedFilename()).toBe('sample_torch.zip');
  const dir = fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'fxwasm-playground-torch-'));
  try {
    fs.copyFileSync(await download.path(), path.join(dir, 'sample_torch.zip'));
    const { spawnSync } = await import('node:child_process');
    const py = spawnSync('/usr/bin/python3', ['-c', [
      'import zipfile, torch',
      "zipfile.ZipFile('sample_torch.zip').extractall('.')",
      'from sample_torch import Net',
      'net = Net().eval()',
      'print(sum(p.numel() for p in net.parameters()) > 0, tuple(net(torch.zeros(2, 3, 32, 32)).shape))',
    ].join('\n')], { cwd: dir, encoding: 'utf8' });
    expect(py.stderr).toBe('');
    expect(py.stdout.trim()).toBe('True (2, 10)');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  expect(await page.textContent('#status')).toMatch(/^PyTorch package sample_torch\.zip: /);
});

test('a dropped file opens; a bad one is reported and the page keeps working', async () => {
  const dropFile = async (name, bytes) => {
    const dt = await page.evaluateHandle(({ name, data }) => {
      const dt = new DataTransfer();
      dt.items.add(new File([new Uint8Array(data)], name));
      return dt;
    }, { name, data: Array.from(bytes) });
    await page.dispatchEvent('#drop', 'drop', { dataTransfer: dt });
  };
  await dropFile('junk.onnx', [0xff, 0xff, 0xff, 0x07]);
  await page.waitForSelector('#status.error');
  expect(await page.textContent('#status')).toMatch(/^ParseError: not an ONNX model/);
  const mlp = path.join(root, 'models/zoo/mymodule.onnx');
  await dropFile('mymodule.onnx', fs.readFileSync(mlp));
  await page.waitForSelector('body[data-loaded="mymodule.onnx"]');
  expect(await page.textContent('#code')).toContain('onnx.Gemm');
  expect(errors).toEqual([]);
});
