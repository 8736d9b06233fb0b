#!/usr/bin/env node
// Serves the playground: web/ (the page), wasm/ + dist/ (the npm package as built), models/
// (the sample and the zoo), web/vendor/dagre.esm.js (the graph layout library) and
// web/vendor/fflate.mjs (zip, for the PyTorch package download), both from node_modules. Static files only, nothing leaves the folders named here.
//
//   node scripts/serve.mjs [--port N] [--host H]      (default 127.0.0.1:8080; 0 = any free port)
//
// Prints "playground: http://HOST:PORT/web/" once listening.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MOUNTS = [
  ['/web/vendor/dagre.esm.js', path.join(root, 'node_modules/@dagrejs/dagre/dist/dagre.esm.js')],
  ['/web/vendor/fflate.mjs', path.join(root, 'node_modules/fflate/esm/browser.js')],
  ['/web/', path.join(root, 'web')],
  ['/wasm/', path.join(root, 'wasm')],
  ['/dist/', path.join(root, 'dist')],
  ['/models/', path.join(root, 'models')],
];
const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.wasm': 'application/wasm',
  '.json': 'application/json',
  '.onnx': 'application/octet-stream',
};

/** The file a URL path maps to, or null (outside every mount, or escaping it). */
export function resolve(urlPath) {
  let p;
  try {
    p = decodeURIComponent(urlPath.split('?')[0]);
  } catch {
    return null;
  }
  for (const [prefix, target] of MOUNTS) {
    if (p === prefix || (prefix.endsWith('/') && p.startsWith(prefix))) {
      if (!prefix.endsWith('/')) return target;
      const file = path.resolve(target, '.' + path.posix.normalize('/' + p.slice(prefix.length)));
      if (file !== target && !file.startsWith(target + path.sep)) return null;
      return fs.existsSync(file) && fs.statSync(file).isDirectory() ? path.join(file, 'index.html') : file;
    }
  }
  return null;
}

export function createServer() {
  return http.createServer((req, res) => {
    if (req.url === '/' || req.url === '/web') {
      res.writeHead(302, { Location: '/web/' });
      return res.end();
    }
    const file = resolve(req.url);
    if (!file || !fs.existsSync(file)) {
      res.writeHead(404, { 'Content-Type': 'text/plain' });
      return res.end('not found\n');
    }
    res.writeHead(200, {
      'Content-Type': TYPES[path.extname(file)] ?? 'application/octet-stream',
      'Cache-Control': 'no-cache',
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
  const host = opt('--host', '127.0.0.1');
  const server = createServer();
  server.listen(Number(opt('--port', '8080')), host, () => {
    console.log(`playground: http://${host}:${server.address().port}/web/`);
  });
}
