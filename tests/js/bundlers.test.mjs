// The package in a browser app built by bundlers, as a web developer uses it: `npm pack`, install
// the tarball into an empty app, bundle `import { init } from 'fxwasm'` with esbuild, Vite and
// webpack for the browser with nothing marked external, and run the bundles in Debian's Chromium. Vite ships
// fx.wasm by itself (the package finds it with new URL(..., import.meta.url)); esbuild does not
// copy assets, and then init() fails with an FxError naming the URL and locateFile, and works once
// locateFile points at the file. Vite also bundles createWorker()'s worker as a chunk. Vite and
// webpack also ship the threaded module's files (dist/fx-threads.*): served cross-origin isolated,
// init({threads: 2}) gets them.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const tmp = fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'fxwasm-bundlers-'));
const app = path.join(tmp, 'app');
let server, isoServer, browser, base, isoBase;

function run(cmd, args, cwd) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' } });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}:\n${r.stdout}\n${r.stderr}`);
  return r.stdout + r.stderr;
}

const MAIN = `
import { init, createWorker } from 'fxwasm';
const params = new URLSearchParams(location.search);
const wasm = params.get('wasm');
try {
  if (params.get('worker')) {
    // createWorker(): the same run in a Web Worker the bundler made a chunk of.
    const w = await createWorker();
    const m = await w.loadONNX(new Blob([await (await fetch('./sample.onnx')).arrayBuffer()]));
    const [y] = await m.run([{ data: new Float32Array(2 * 3 * 32 * 32).fill(0.25), shape: [2, 3, 32, 32] }]);
    window.result = { shape: y.shape, data: Array.from(y.data), inputNames: m.inputNames };
    await w.terminate();
    throw 'done';
  }
  // ?threads=2: a threaded module, whose files the bundle must ship too (served isolated): the
  // Relaxed SIMD one in Chromium, the plain one with ?relaxed=0.
  const threads = Number(params.get('threads') ?? 1);
  const relaxed = params.get('relaxed') === '0' ? { relaxedSimd: false } : {};
  const fx = await init({ ...(wasm ? { locateFile: () => wasm } : {}), ...(threads > 1 ? { threads } : {}), ...relaxed });
  const bytes = new Uint8Array(await (await fetch('./sample.onnx')).arrayBuffer());
  const gm = fx.loadONNX(bytes);
  const [y] = gm.run([{ data: new Float32Array(2 * 3 * 32 * 32).fill(0.25), shape: [2, 3, 32, 32] }]);
  window.result = { shape: y.shape, data: Array.from(y.data), ...(threads > 1 ? { threads: fx.threads() } : {}) };
} catch (e) {
  if (e !== 'done') window.result = { error: (e.kind ?? e.name) + ': ' + e.message };
}
`;

async function webpackBuild() {
  const { default: webpack } = await import('webpack');
  const stats = await new Promise((resolve, reject) =>
    webpack(
      {
        mode: 'production',
        context: app,
        entry: './main.mjs',
        target: 'web',
        output: { path: path.join(app, 'out-webpack'), filename: 'main.js', module: true, publicPath: 'auto' },
        experiments: { outputModule: true, topLevelAwait: true },
        resolve: { modules: [path.join(app, 'node_modules')] },
        performance: { hints: false },
      },
      (err, st) => (err ? reject(err) : resolve(st)),
    ),
  );
  if (stats.hasErrors()) throw new Error(stats.toString({ all: false, errors: true }));
}

beforeAll(async () => {
  const tgz = run('npm', ['pack', '--silent', '--pack-destination', tmp], REPO).trim().split('\n').pop();
  fs.mkdirSync(app);
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
  run('npm', ['install', '--offline', '--no-audit', '--no-fund', path.join(tmp, tgz)], app);
  fs.writeFileSync(path.join(app, 'main.mjs'), MAIN);
  fs.writeFileSync(path.join(app, 'index.html'), '<!doctype html><html><body><script type="module" src="./main.mjs"></script></body></html>\n');
  // esbuild for the browser, nothing external.
  run(path.join(REPO, 'node_modules/.bin/esbuild'), ['main.mjs', '--bundle', '--platform=browser', '--format=esm', '--outdir=out-esbuild'], app);
  fs.writeFileSync(path.join(app, 'out-esbuild/index.html'), '<!doctype html><html><body><script type="module" src="./main.js"></script></body></html>\n');
  // Vite's production build.
  run(path.join(REPO, 'node_modules/.bin/vite'), ['build', '--base', './', '--outDir', 'out-vite', '--emptyOutDir', '--logLevel', 'error'], app);
  // webpack 5 (its Node API, production mode, browser target): asset modules for the wasm, a
  // chunk for createWorker's worker.
  await webpackBuild();
  fs.writeFileSync(path.join(app, 'out-webpack/index.html'), '<!doctype html><html><body><script type="module" src="./main.js"></script></body></html>\n');
  for (const out of ['out-esbuild', 'out-vite', 'out-webpack']) fs.copyFileSync(path.join(REPO, 'models/sample.onnx'), path.join(app, out, 'sample.onnx'));
  const types = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm' };
  // The second server sends COOP + COEP: its pages are cross-origin isolated (threads allowed).
  const serve = (headers) => http.createServer((req, res) => {
    const file = path.join(app, decodeURIComponent(req.url.split('?')[0]).replace(/\/$/, '/index.html'));
    if (!file.startsWith(app) || !fs.existsSync(file) || fs.statSync(file).isDirectory()) return res.writeHead(404).end();
    res.writeHead(200, { ...headers, 'Content-Type': types[path.extname(file)] ?? 'application/octet-stream' });
    fs.createReadStream(file).pipe(res);
  });
  server = serve({});
  isoServer = serve({ 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  await new Promise((r) => isoServer.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${server.address().port}/`;
  isoBase = `http://127.0.0.1:${isoServer.address().port}/`;
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu'] });
}, 180000);

afterAll(async () => {
  await browser?.close();
  await new Promise((r) => server?.close(r));
  await new Promise((r) => isoServer?.close(r));
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** Opens a page of the app and returns what main.mjs left in window.result. */
async function open(url, from = base) {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(from + url);
  await page.waitForFunction(() => window.result !== undefined, null, { timeout: 60000 });
  const result = await page.evaluate(() => window.result);
  await page.close();
  expect(errors).toEqual([]);
  return result;
}

/** The same run in Node, straight from the repository. */
async function expected() {
  const { init } = await import('../../wasm/index.mjs');
  const fx = await init();
  const gm = fx.loadONNX(fs.readFileSync(path.join(REPO, 'models/sample.onnx')));
  const [y] = gm.run([{ data: new Float32Array(2 * 3 * 32 * 32).fill(0.25), shape: [2, 3, 32, 32] }]);
  gm.delete();
  return { shape: y.shape, data: Array.from(y.data) };
}

test('the browser bundles carry no node: import and no require of Node modules', () => {
  const js = (dir) => fs.readdirSync(path.join(app, dir)).filter((f) => f.endsWith('.js')).map((f) => path.join(app, dir, f));
  for (const file of [...js('out-esbuild'), ...js('out-vite/assets'), ...js('out-webpack')]) {
    const js = fs.readFileSync(file, 'utf8');
    expect(js).not.toMatch(/from\s*["']node:|import\(\s*["']node:/);
  }
});

test('Vite: the bundle ships fx.wasm and runs the sample as Node does', async () => {
  expect(fs.readdirSync(path.join(app, 'out-vite/assets')).some((f) => /^fx-.*\.wasm$/.test(f))).toBe(true);
  expect(await open('out-vite/')).toEqual(await expected());
}, 90000);

test('Vite: createWorker() runs the sample in a Web Worker the bundle carries', async () => {
  const r = await open('out-vite/?worker=1');
  expect(r.inputNames).toEqual(['input']);
  delete r.inputNames;
  expect(r).toEqual(await expected());
}, 90000);

test('webpack: the bundle ships fx.wasm, runs the sample as Node does, and runs it in createWorker\'s worker', async () => {
  expect(fs.readdirSync(path.join(app, 'out-webpack')).some((f) => f.endsWith('.wasm'))).toBe(true);
  expect(await open('out-webpack/')).toEqual(await expected());
  const r = await open('out-webpack/?worker=1');
  delete r.inputNames;
  expect(r).toEqual(await expected());
}, 90000);

test('esbuild: without the wasm next to it, init() names the URL and locateFile; with locateFile it runs', async () => {
  const missing = await open('out-esbuild/');
  expect(missing.error).toMatch(/^RuntimeError: cannot load fx\.wasm from http:\/\/127\.0\.0\.1:\d+\/dist\/fx\.wasm .*locateFile.*wasmBinary/);
  expect(await open('out-esbuild/?wasm=/node_modules/fxwasm/dist/fx.wasm')).toEqual(await expected());
}, 90000);

test('Vite and webpack ship both threaded modules: a cross-origin isolated page gets 2 threads, a plain one falls back', async () => {
  const want = await expected();
  for (const out of ['out-vite/', 'out-webpack/']) {
    const iso = await open(`${out}?threads=2&relaxed=0`, isoBase);
    expect([out, iso.threads]).toEqual([out, { build: 'threads', threads: 2, requested: 2, reason: null, simd: 'simd128', simdReason: 'init({ relaxedSimd: false })' }]);
    delete iso.threads;
    expect(iso).toEqual(want);
    // Chromium has Relaxed SIMD: by default the fused multiply-add module, within 1e-5.
    const relaxed = await open(`${out}?threads=2`, isoBase);
    expect([out, relaxed.threads]).toEqual([out, { build: 'threads', threads: 2, requested: 2, reason: null, simd: 'relaxed', simdReason: null }]);
    expect(relaxed.shape).toEqual(want.shape);
    const scale = Math.max(...want.data.map(Math.abs));
    expect(Math.max(...relaxed.data.map((v, i) => Math.abs(v - want.data[i])))).toBeLessThanOrEqual(1e-5 * scale);
    const plain = await open(`${out}?threads=2`);
    expect([out, plain.threads.build, plain.threads.reason]).toEqual([out, 'single', expect.stringMatching(/not cross-origin isolated/)]);
  }
}, 120000);
