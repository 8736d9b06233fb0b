#!/usr/bin/env node
// Serves the playground's production build, dist/playground/ (`npx vite build --config
// web/vite.config.mjs`; scripts/main.sh builds it), as static files with the cross-origin
// isolation headers (COOP same-origin + COEP require-corp) that SharedArrayBuffer, and so
// threaded wasm, needs. The site itself needs no special mapping: any static server can host it.
//
//   node scripts/serve.mjs [--port N] [--host H] [--dir D]   (default 127.0.0.1:8080, dist/playground)
//
// Prints "playground: http://HOST:PORT/" once listening.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** The folder served by default: the production build. */
export const SITE = path.join(root, 'dist/playground');
const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.wasm': 'application/wasm',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.onnx': 'application/octet-stream',
};
/** Cross-origin isolation: lets the page use SharedArrayBuffer (threaded wasm). */
export const ISOLATION_HEADERS = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

/** The file a URL path maps to inside `dir`, or null (escaping it). Folders map to index.html. */
export function resolve(urlPath, dir = SITE) {
  let p;
  try {
    p = decodeURIComponent(urlPath.split(/[?#]/)[0]);
  } catch {
    return null;
  }
  const file = path.resolve(dir, '.' + path.posix.normalize('/' + p));
  if (file !== dir && !file.startsWith(dir + path.sep)) return null;
  return fs.existsSync(file) && fs.statSync(file).isDirectory() ? path.join(file, 'index.html') : file;
}

/** A static server of `dir` with the isolation headers (`headers: false` leaves them out). */
export function createServer({ dir = SITE, headers = true } = {}) {
  return http.createServer((req, res) => {
    const file = resolve(req.url, dir);
    const extra = headers ? ISOLATION_HEADERS : {};
    if (!file || !fs.existsSync(file)) {
      res.writeHead(404, { 'Content-Type': 'text/plain', ...extra });
      return res.end('not found\n');
    }
    res.writeHead(200, {
      'Content-Type': TYPES[path.extname(file)] ?? 'application/octet-stream',
      'Content-Length': fs.statSync(file).size,
      'Cache-Control': 'no-cache',
      ...extra,
    });
    fs.createReadStream(file).pipe(res);
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const args = process.argv.slice(2);
  const opt = (name, dflt) => {
    const i = args.indexOf(name);
    return i >= 0 && i + 1 < args.length ? args[i + 1] : dflt;
  };
  const dir = path.resolve(opt('--dir', SITE));
  if (!fs.existsSync(path.join(dir, 'index.html'))) {
    console.error(`serve: ${dir}/index.html is missing; build the playground first: npx vite build --config web/vite.config.mjs`);
    process.exit(1);
  }
  const host = opt('--host', '127.0.0.1');
  const server = createServer({ dir });
  server.listen(Number(opt('--port', '8080')), host, () => {
    console.log(`playground: http://${host}:${server.address().port}/`);
  });
}
