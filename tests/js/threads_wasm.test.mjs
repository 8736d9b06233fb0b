// The threaded module (dist/fx-threads.*, scripts/build.sh: build/wasm-threads) under Node and in
// Chromium:
//  - every zoo model at 1, 2 and 3 threads in the threaded module gives the bytes the
//    single-thread module gives (the kernels split work into chunks fixed by the size and the
//    thread count, each chunk keeping the one-thread reduction order: bit-identical, no tolerance);
//  - 1,000 runs across 4 GraphModules with interleaved delete() and thread-count switches finish
//    (no deadlock) with the same results throughout, and leave the heap and the handle tables
//    where they started (no leak);
//  - errors are the single-thread module's: kind, message and node (typed C++ catches work there,
//    wasm/eh_threads_shim.cpp);
//  - a cross-origin isolated page gets threads, a page without COOP/COEP falls back to the
//    single-thread module and says why, and both compute the same result; when the Workers'
//    script cannot load, init() falls back too instead of waiting forever.
// Node runs happen in child processes (threads_wasm_run.mjs): worker threads do not belong in
// Jest's VM realm.
import fs from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const RUN = fileURLToPath(new URL('./threads_wasm_run.mjs', import.meta.url));

function child(args, timeout) {
  const r = spawnSync(process.execPath, [RUN, ...args], { encoding: 'utf8', timeout, maxBuffer: 256 << 20 });
  if (r.error) throw new Error(`threads_wasm_run.mjs ${args.join(' ')}: ${r.error.message} (a deadlock if it timed out)`);
  if (r.status !== 0) throw new Error(`threads_wasm_run.mjs ${args.join(' ')} exited ${r.status}:\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

test('init({threads}) takes an integer from 1 to 256', async () => {
  const { init } = await import('../../wasm/index.mjs');
  for (const bad of [0, 1.5, 257, '2'])
    await expect(init({ threads: bad })).rejects.toMatchObject({ kind: 'ValueError', message: expect.stringMatching(/integer from 1 to 256/) });
});

test('the threaded files are built next to dist/fx.mjs', () => {
  for (const f of ['fx-threads.mjs', 'fx-threads.wasm', 'fx-threads.worker.js'])
    expect(fs.existsSync(path.join(ROOT, 'dist', f))).toBe(true);
});

test('every zoo model at 1, 2 and 3 threads in the threaded module: bit-identical to the single-thread module', () => {
  const single = child(['zoo', '1'], 600000);
  const threaded = child(['zoo', '1,2,3'], 900000);
  expect(single.info).toEqual({ build: 'single', threads: 1, requested: 1, reason: null });
  expect(threaded.info).toEqual({ build: 'threads', threads: 3, requested: 3, reason: null });
  const models = Object.keys(single.results);
  expect(models.length).toBeGreaterThanOrEqual(14);
  expect(Object.keys(threaded.results)).toEqual(models);
  for (const m of models) {
    const want = single.results[m][1];
    expect(want.length).toBeGreaterThan(0);
    for (const t of [1, 2, 3]) {
      // Named on failure: which model at which thread count.
      expect({ model: m, threads: t, outputs: threaded.results[m][t] }).toEqual({ model: m, threads: t, outputs: want });
    }
  }
}, 1500000);

test('errors are typed in the threaded module as in the single-thread one (C++ catch clauses match)', () => {
  const single = child(['errors', '1'], 120000);
  const threaded = child(['errors', '2'], 120000);
  expect(threaded.info.build).toBe('threads');
  const kinds = single.got.map((g) => g.kind ?? 'ok');
  // Each bad call fails with its own kind, none as an "unknown C++ exception".
  expect(kinds).toEqual(expect.arrayContaining(['ParseError', 'ValueError', 'RuntimeError', 'GraphError', 'UnsupportedError', 'ResourceError']));
  expect(threaded.got).toEqual(single.got);
  for (const g of threaded.got) expect(g.message ?? '').not.toMatch(/unknown C\+\+ exception/);
}, 300000);

test('1,000 runs across 4 GraphModules with interleaved delete(): no deadlock, no leak, same results', () => {
  const r = child(['stress', '1000'], 300000);
  expect(r.info.build).toBe('threads');
  expect(r.runs).toBe(1000);
  expect(r.deletes).toBe(40);
  expect(r.mismatches).toBe(0);
  // Every switch got its threads (a Worker goes back to the pool when its thread is joined), and
  // releaseCachedMemory() (which restarts them, freeing their scratch) keeps the count.
  expect(r.shortfalls).toBe(0);
  expect(r.end.threads).toBe(2);
  expect(r.after.liveHandles).toBe(r.baseline.liveHandles);
  // The heap comes back to within 1 MB of where it was before the models were loaded.
  expect(Math.abs(r.after.heapUsed - r.baseline.heapUsed)).toBeLessThan(1 << 20);
  expect(r.peak).toBeGreaterThan(r.baseline.heapUsed);
}, 360000);

test('Node: a Worker script that fails as it loads makes init() fall back to one thread, naming the error', () => {
  const r = child(['badworker'], 120000);
  expect(r.info).toEqual({
    build: 'single',
    threads: 1,
    requested: 2,
    reason: 'the threaded module did not load (a Worker of the threaded module failed: this worker script fails)',
  });
  expect(r.shape).toEqual([2, 10]);
}, 150000);

test('Node: threads under `node --input-type=module -e` too (Workers inherit the flag; their script is CommonJS)', () => {
  const code = `const { init } = await import(${JSON.stringify(path.join(ROOT, 'wasm/index.mjs'))});
    console.log(JSON.stringify((await init({ threads: 2 })).threads()));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', timeout: 120000 });
  expect(r.stderr).toBe('');
  expect(JSON.parse(r.stdout)).toEqual({ build: 'threads', threads: 2, requested: 2, reason: null });
}, 150000);

describe('Chromium', () => {
  let browser;
  const PAGE = `<!doctype html><html><body><script type="module">
import { init } from '/wasm/index.mjs';
try {
  // ?worker=missing: the Workers' script is not there; init() must fall back, not hang.
  const missing = new URLSearchParams(location.search).get('worker') === 'missing';
  const fx = await init(missing ? { threads: 2, locateFile: (name, dir) => (name === 'fx-threads.worker.js' ? '/dist/missing.worker.js' : dir + name) } : { threads: 2 });
  const bytes = new Uint8Array(await (await fetch('/models/sample.onnx')).arrayBuffer());
  const gm = fx.loadONNX(bytes);
  const x = new Float32Array(2 * 3 * 32 * 32);
  for (let i = 0; i < x.length; i++) x[i] = Math.sin(i);
  const [y] = gm.run([{ data: x, shape: [2, 3, 32, 32] }]);
  window.result = { info: fx.threads(), isolated: self.crossOriginIsolated, shape: y.shape, data: Array.from(y.data) };
} catch (e) {
  window.result = { error: (e.kind ?? e.name) + ': ' + e.message };
}
</script></body></html>`;

  const servers = [];
  const bases = {};

  /** A static server of the repository's wasm/, dist/ and models/ and the page at /; `isolated`: with COOP + COEP. */
  async function serve(isolated) {
    const types = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm' };
    const headers = isolated ? { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' } : {};
    const server = http.createServer((req, res) => {
      const url = decodeURIComponent(req.url.split('?')[0]);
      if (url === '/') return res.writeHead(200, { ...headers, 'Content-Type': 'text/html' }).end(PAGE);
      const file = path.join(ROOT, url);
      if (!/^\/(wasm|dist|models)\//.test(url) || !file.startsWith(ROOT) || !fs.existsSync(file) || fs.statSync(file).isDirectory())
        return res.writeHead(404).end();
      res.writeHead(200, { ...headers, 'Content-Type': types[path.extname(file)] ?? 'application/octet-stream' });
      fs.createReadStream(file).pipe(res);
    });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    servers.push(server);
    return `http://127.0.0.1:${server.address().port}/`;
  }

  beforeAll(async () => {
    bases.iso = await serve(true);
    bases.plain = await serve(false);
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu'] });
  }, 60000);

  afterAll(async () => {
    await browser?.close();
    for (const s of servers) await new Promise((r) => s.close(r));
  });

  async function open(mode, query = '', allowErrors = false) {
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(bases[mode] + query);
    await page.waitForFunction(() => window.result !== undefined, null, { timeout: 60000 });
    const result = await page.evaluate(() => window.result);
    await page.close();
    if (!allowErrors) expect(errors).toEqual([]);
    return result;
  }

  test('a cross-origin isolated page gets 2 threads; a plain page falls back to one and says why; same result', async () => {
    const iso = await open('iso');
    const plain = await open('plain');
    expect(iso.error).toBeUndefined();
    expect(plain.error).toBeUndefined();
    expect(iso.isolated).toBe(true);
    expect(iso.info).toEqual({ build: 'threads', threads: 2, requested: 2, reason: null });
    expect(plain.isolated).toBe(false);
    expect(plain.info.build).toBe('single');
    expect(plain.info.threads).toBe(1);
    expect(plain.info.reason).toMatch(/not cross-origin isolated.*Cross-Origin-Opener-Policy: same-origin.*Cross-Origin-Embedder-Policy: require-corp/);
    expect(iso.shape).toEqual(plain.shape);
    expect(iso.data).toEqual(plain.data);
  }, 120000);

  test('a Worker that cannot load: init() falls back to one thread and names the failure (no hang)', async () => {
    const r = await open('iso', '?worker=missing', true);
    expect(r.error).toBeUndefined();
    expect(r.info.build).toBe('single');
    expect(r.info.reason).toMatch(/^the threaded module did not load \(a Worker of the threaded module failed/);
  }, 120000);
});
