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
//  - where the engine has Relaxed SIMD (Node under --experimental-wasm-relaxed-simd, Chromium),
//    init({threads}) loads dist/fx-threads-relaxed.* instead (which does not validate where the
//    engine lacks Relaxed SIMD: its opcodes are there): bit-identical across thread counts,
//    within 1e-5 of the largest output magnitude of the single-thread module (fused multiply-adds
//    round once where the others round twice), the same typed errors; relaxedSimd: false and an
//    engine without it keep the plain threaded module, saying why;
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

/** V8's flag for Relaxed SIMD, off by default in Node 20. */
const RELAXED = '--experimental-wasm-relaxed-simd';

function child(args, timeout, nodeFlags = []) {
  const r = spawnSync(process.execPath, [...nodeFlags, RUN, ...args], { encoding: 'utf8', timeout, maxBuffer: 256 << 20 });
  if (r.error) throw new Error(`threads_wasm_run.mjs ${args.join(' ')}: ${r.error.message} (a deadlock if it timed out)`);
  if (r.status !== 0) throw new Error(`threads_wasm_run.mjs ${args.join(' ')} exited ${r.status}:\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

test('init({threads}) takes an integer from 1 to 256, init({relaxedSimd}) a boolean', async () => {
  const { init } = await import('../../wasm/index.mjs');
  for (const bad of [0, 1.5, 257, '2'])
    await expect(init({ threads: bad })).rejects.toMatchObject({ kind: 'ValueError', message: expect.stringMatching(/integer from 1 to 256/) });
  await expect(init({ threads: 2, relaxedSimd: 'no' })).rejects.toMatchObject({ kind: 'ValueError', message: 'init({relaxedSimd}): expected a boolean, got no' });
});

test('the threaded modules\' files are built next to dist/fx.mjs', () => {
  for (const f of ['fx-threads.mjs', 'fx-threads.wasm', 'fx-threads.worker.js', 'fx-threads-relaxed.mjs', 'fx-threads-relaxed.wasm', 'fx-threads-relaxed.worker.js'])
    expect(fs.existsSync(path.join(ROOT, 'dist', f))).toBe(true);
});

test('fx-threads-relaxed.wasm carries Relaxed SIMD instructions, whatever the CPU: it validates only where the engine has them', () => {
  // Node without its flag rejects the module (relaxed opcodes are in it: the clang-16 micro-kernel
  // was linked, not the archive's simd128 one), accepts the plain threaded one, and with the flag
  // accepts both.
  const relaxed = fs.readFileSync(path.join(ROOT, 'dist/fx-threads-relaxed.wasm'));
  const plain = fs.readFileSync(path.join(ROOT, 'dist/fx-threads.wasm'));
  expect([WebAssembly.validate(relaxed), WebAssembly.validate(plain)]).toEqual([false, true]);
  const check = `const fs = require('fs');
    console.log(JSON.stringify(['fx-threads-relaxed', 'fx-threads'].map((f) => WebAssembly.validate(fs.readFileSync(${JSON.stringify(path.join(ROOT, 'dist'))} + '/' + f + '.wasm')))));`;
  const r = spawnSync(process.execPath, [RELAXED, '-e', check], { encoding: 'utf8' });
  expect(r.status).toBe(0);
  expect(JSON.parse(r.stdout)).toEqual([true, true]);
});

/** The single-thread module's zoo results (one child process, shared by two tests). */
let singleZoo = null;
const zooOnOneThread = () => (singleZoo ??= child(['zoo', '1'], 600000));

/** What threads() says about the plain threaded module under Node without the relaxed flag. */
const PLAIN_SIMD = { simd: 'simd128', simdReason: 'this WebAssembly engine has no Relaxed SIMD (f32x4.relaxed_madd does not validate)' };

test('every zoo model at 1, 2 and 3 threads in the threaded module: bit-identical to the single-thread module', () => {
  const single = zooOnOneThread();
  const threaded = child(['zoo', '1,2,3'], 900000);
  expect(single.info).toEqual({
    build: 'single',
    threads: 1,
    requested: 1,
    reason: null,
    simd: 'simd128',
    simdReason: 'Relaxed SIMD comes with the threaded module: init({ threads: N }) with N >= 2',
  });
  expect(threaded.info).toEqual({ build: 'threads', threads: 3, requested: 3, reason: null, ...PLAIN_SIMD });
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

/**
 * Whether this engine fuses f32x4.relaxed_madd (under Node's flag): one function
 * (a, b, c) -> lane 0 of relaxed_madd(splat a, splat b, splat c), called on a = 1 + 2^-23,
 * b = 1 - 2^-23, c = -1, where a * b + c is -2^-46 fused and 0 rounded twice. V8 fuses on CPUs
 * with FMA and computes it unfused elsewhere; both are allowed results of relaxed_madd.
 */
function relaxedMaddFuses() {
  const probe = `
    const bytes = new Uint8Array([
      0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
      0x01, 0x08, 0x01, 0x60, 0x03, 0x7d, 0x7d, 0x7d, 0x01, 0x7d,
      0x03, 0x02, 0x01, 0x00,
      0x07, 0x05, 0x01, 0x01, 0x66, 0x00, 0x00,
      0x0a, 0x16, 0x01, 0x14, 0x00,
      0x20, 0x00, 0xfd, 0x13, 0x20, 0x01, 0xfd, 0x13, 0x20, 0x02, 0xfd, 0x13,
      0xfd, 0x85, 0x02, 0xfd, 0x1f, 0x00, 0x0b,
    ]);
    const { instance } = await WebAssembly.instantiate(bytes);
    console.log(instance.exports.f(1 + 2 ** -23, 1 - 2 ** -23, -1));`;
  const r = spawnSync(process.execPath, [RELAXED, '--input-type=module', '-e', probe], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`relaxed_madd probe exited ${r.status}:\n${r.stderr}`);
  const got = Number(r.stdout.trim());
  expect([0, -(2 ** -46)]).toContain(got);
  return got !== 0;
}

/** float32 values of a digest entry (base64 of the bytes). */
function f32(d) {
  const b = Buffer.from(d.f32, 'base64');
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
}

test('Relaxed SIMD (Node with its flag): every zoo model bit-identical at 1, 2 and 3 threads, within 1e-5 of the single-thread module', () => {
  const single = zooOnOneThread();
  const relaxed = child(['zoo', '1,2,3'], 900000, [RELAXED]);
  expect(relaxed.info).toEqual({ build: 'threads', threads: 3, requested: 3, reason: null, simd: 'relaxed', simdReason: null });
  const models = Object.keys(single.results);
  expect(Object.keys(relaxed.results)).toEqual(models);
  let differing = 0;
  let worst = 0;
  for (const m of models) {
    const want = single.results[m][1];
    const one = relaxed.results[m][1];
    for (const t of [2, 3]) expect({ model: m, threads: t, outputs: relaxed.results[m][t] }).toEqual({ model: m, threads: t, outputs: one });
    expect(one.map((d) => [d.dtype, d.shape])).toEqual(want.map((d) => [d.dtype, d.shape]));
    one.forEach((d, k) => {
      if (!d.f32) return expect([m, k, d.sha256]).toEqual([m, k, want[k].sha256]);
      const a = f32(d);
      const b = f32(want[k]);
      let scale = 0;
      let err = 0;
      for (let i = 0; i < b.length; i++) {
        scale = Math.max(scale, Math.abs(b[i]));
        err = Math.max(err, Math.abs(a[i] - b[i]));
      }
      if (d.sha256 !== want[k].sha256) differing++;
      worst = Math.max(worst, err / (scale || 1));
      expect([m, k, err <= 1e-5 * (scale || 1)]).toEqual([m, k, true]);
    });
  }
  // Where the engine fuses relaxed_madd, the fused multiply-adds are there: the products of the
  // CNNs round differently. Unfused, the module may well give the single-thread bits.
  const fused = relaxedMaddFuses();
  if (fused) expect(differing).toBeGreaterThan(0);
  console.log(`relaxed SIMD (relaxed_madd ${fused ? 'fused' : 'not fused'} here): ${differing} outputs differ in bits from the single-thread module; worst |diff| / max |y| ${worst.toExponential(2)}`);
}, 1500000);

test('Relaxed SIMD: typed errors as in the single-thread module; relaxedSimd: false keeps the plain threaded module', () => {
  const single = child(['errors', '1'], 120000);
  const relaxed = child(['errors', '2'], 120000, [RELAXED]);
  expect(relaxed.info.simd).toBe('relaxed');
  expect(relaxed.got).toEqual(single.got);
  const plain = child(['errors', '2', 'plain'], 120000, [RELAXED]);
  expect([plain.info.build, plain.info.simd, plain.info.simdReason]).toEqual(['threads', 'simd128', 'init({ relaxedSimd: false })']);
}, 300000);

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
    simd: 'simd128',
    simdReason: 'no threaded module here',
  });
  expect(r.shape).toEqual([2, 10]);
}, 150000);

test('Node: threads under `node --input-type=module -e` too (Workers inherit the flag; their script is CommonJS)', () => {
  const code = `const { init } = await import(${JSON.stringify(path.join(ROOT, 'wasm/index.mjs'))});
    console.log(JSON.stringify((await init({ threads: 2 })).threads()));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', timeout: 120000 });
  expect(r.stderr).toBe('');
  expect(JSON.parse(r.stdout)).toEqual({ build: 'threads', threads: 2, requested: 2, reason: null, ...PLAIN_SIMD });
}, 150000);

describe('Chromium', () => {
  let browser;
  const PAGE = `<!doctype html><html><body><script type="module">
import { init } from '/wasm/index.mjs';
try {
  // ?worker=missing: the Workers' script (of either threaded module) is not there; init() must
  // fall back, not hang. ?relaxed=0: init({relaxedSimd: false}).
  const q = new URLSearchParams(location.search);
  const options = { threads: 2 };
  if (q.get('worker') === 'missing') options.locateFile = (name, dir) => (name.endsWith('.worker.js') ? '/dist/missing.worker.js' : dir + name);
  if (q.get('relaxed') === '0') options.relaxedSimd = false;
  const fx = await init(options);
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
    const iso = await open('iso', '?relaxed=0');
    const plain = await open('plain');
    expect(iso.error).toBeUndefined();
    expect(plain.error).toBeUndefined();
    expect(iso.isolated).toBe(true);
    expect(iso.info).toEqual({ build: 'threads', threads: 2, requested: 2, reason: null, simd: 'simd128', simdReason: 'init({ relaxedSimd: false })' });
    expect(plain.isolated).toBe(false);
    expect(plain.info.build).toBe('single');
    expect(plain.info.threads).toBe(1);
    expect(plain.info.reason).toMatch(/not cross-origin isolated.*Cross-Origin-Opener-Policy: same-origin.*Cross-Origin-Embedder-Policy: require-corp/);
    expect(iso.shape).toEqual(plain.shape);
    expect(iso.data).toEqual(plain.data);
    // By default Chromium (which has Relaxed SIMD) gets the fused multiply-add module: within
    // 1e-5 of the largest output magnitude.
    const relaxed = await open('iso');
    expect(relaxed.info).toEqual({ build: 'threads', threads: 2, requested: 2, reason: null, simd: 'relaxed', simdReason: null });
    expect(relaxed.shape).toEqual(plain.shape);
    const scale = Math.max(...plain.data.map(Math.abs));
    expect(Math.max(...relaxed.data.map((v, i) => Math.abs(v - plain.data[i])))).toBeLessThanOrEqual(1e-5 * scale);
  }, 120000);

  test('a Worker that cannot load: init() falls back to one thread and names the failure (no hang)', async () => {
    const r = await open('iso', '?worker=missing', true);
    expect(r.error).toBeUndefined();
    expect(r.info.build).toBe('single');
    expect(r.info.reason).toMatch(/^the threaded module did not load \(a Worker of the threaded module failed/);
    expect(r.info.simdReason).toBe('no threaded module here');
  }, 120000);
});
