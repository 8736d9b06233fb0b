// The package as shipped: `npm pack` the repo, install the tarball into an empty folder, import it
// by name, build the sample graph and print it; run its `fxwasm` bin; type-check a consumer.
// FXWASM_PACK_ROOT may point at another package root (for checking a candidate package.json).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const ROOT = process.env.FXWASM_PACK_ROOT ? path.resolve(process.env.FXWASM_PACK_ROOT) : REPO;
const golden = (name) => fs.readFileSync(new URL(`../golden/${name}`, import.meta.url), 'utf8');

function run(cmd, args, cwd) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' } });
  if (r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} (in ${cwd}) exited ${r.status}:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

const SMOKE = `
import { init } from '%NAME%';
const fx = await init();
const g = new fx.Graph();
const x = g.placeholder('x');
const param = g.getAttr('param');
const add = g.callFunction('operator.add', [x, param]);
const linear = g.callModule('linear', [add]);
g.output(g.callMethod('clamp', [linear], { min: fx.float(0), max: fx.float(1) }));
console.log(g.print());
g.delete();
`;

// Load a model, print it, export it and load the export again, as a consumer of the package.
const ONNX_SMOKE = `
import fs from 'node:fs';
import { init } from '%NAME%';
const fx = await init();
const gm = fx.loadONNX(fs.readFileSync(process.argv[2]));
const bytes = gm.toONNX();
const again = fx.loadONNX(bytes);
if (again.code !== gm.code) throw new Error('round trip changed the code');
const [y] = again.run([{ data: new Float32Array(2 * 3 * 32 * 32).fill(0.25), shape: [2, 3, 32, 32] }]);
console.log(gm.code.split('\\n')[3]);
console.log(y.dtype, y.shape.join('x'), bytes.length > 1000);
gm.delete();
again.delete();
`;

const CONSUMER_TS = `
import { init, FxError, type Graph } from '%NAME%';
export async function main(): Promise<string> {
  const fx = await init();
  const g: Graph = new fx.Graph();
  try {
    g.output(g.callFunction('torch.relu', [g.placeholder('x')]));
    return g.print();
  } catch (e) {
    return e instanceof FxError ? e.kind : 'unknown';
  } finally {
    g.delete();
  }
}
`;

test('npm pack -> install -> import by package name', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  for (const f of ['dist/fx.mjs', 'dist/fx.wasm'])
    expect([f, fs.existsSync(path.join(ROOT, f))]).toEqual([f, true]); // build the wasm first

  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fxwasm-pack-'));
  try {
    const packDir = path.join(tmp, 'pack');
    fs.mkdirSync(packDir);
    const [info] = JSON.parse(run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', packDir], ROOT));
    const files = info.files.map((f) => f.path).sort();
    for (const f of ['package.json', 'LICENSE', 'wasm/index.mjs', 'wasm/index.d.ts', 'wasm/cli.mjs', 'dist/fx.mjs', 'dist/fx.wasm',
                     'wasm/threads.mjs', 'dist/fx-threads.mjs', 'dist/fx-threads.wasm', 'dist/fx-threads.worker.js',
                     'dist/fx-threads-relaxed.mjs', 'dist/fx-threads-relaxed.wasm', 'dist/fx-threads-relaxed.worker.js'])
      expect(files).toContain(f);
    expect(pkg.license).toBe('MIT');
    expect(files.filter((f) => /^(src|include|tests)\/|\.cpp$/.test(f))).toEqual([]);

    const app = path.join(tmp, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    run('npm', ['install', '--offline', '--no-audit', '--no-fund', path.join(packDir, info.filename)], app);

    fs.writeFileSync(path.join(app, 'smoke.mjs'), SMOKE.replace('%NAME%', pkg.name));
    expect(run(process.execPath, ['smoke.mjs'], app)).toBe(golden('ref_my_module.graph.txt') + '\n');

    fs.writeFileSync(path.join(app, 'onnx.mjs'), ONNX_SMOKE.replace('%NAME%', pkg.name));
    expect(run(process.execPath, ['onnx.mjs', path.join(REPO, 'models', 'sample.onnx')], app)).toBe(
      'def forward(self, input):\nfloat32 2x10 true\n',
    );

    // The README the tarball carries: its relative links lead to files in the package, and its
    // Quick start plus the examples after it run as written against the installed package.
    expect(files).toContain('README.md');
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const links = [...readme.matchAll(/\]\(([^)#][^)]*)\)/g)].map((m) => m[1]).filter((l) => !/^[a-z]+:/.test(l));
    expect(links.length).toBeGreaterThan(0);
    for (const l of links) expect([l, files.includes(l)]).toEqual([l, true]);
    const section = (title) => readme.split(/^## /m).find((s) => s.startsWith(title)) ?? '';
    const blocks = (text) => [...text.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
    const [quick] = blocks(section('Quick start'));
    const examples = blocks(section('The things people do'));
    expect(examples.length).toBeGreaterThanOrEqual(2);
    fs.copyFileSync(path.join(REPO, 'models', 'sample.onnx'), path.join(app, 'model.onnx'));
    fs.writeFileSync(path.join(app, 'readme.mjs'), [quick.replace(/^gm\.delete\(\);.*$/m, ''), ...examples, 'console.log("readme ok", changed.graph.size > 0);'].join('\n'));
    expect(run(process.execPath, ['readme.mjs'], app)).toMatch(/readme ok true\n$/);
    expect(fs.existsSync(path.join(app, 'model.opt.onnx'))).toBe(true);

    const bin = path.join(app, 'node_modules', '.bin', 'fxwasm');
    expect(run(bin, ['--sample', '--print', 'code'], app)).toBe(golden('ref_my_module.code.py') + '\n');

    // The exports map's "types" condition must serve wasm/index.d.ts to a TypeScript consumer.
    fs.writeFileSync(path.join(app, 'consumer.ts'), CONSUMER_TS.replaceAll('%NAME%', pkg.name));
    fs.writeFileSync(
      path.join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'es2022',
          module: 'nodenext',
          moduleResolution: 'nodenext',
          lib: ['es2022'], // no esnext.disposable: index.d.ts declares Symbol.dispose itself
          types: [],
          strict: true,
          noEmit: true,
        },
        files: ['consumer.ts'],
      }),
    );
    run(process.execPath, [path.join(REPO, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], app);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}, 180000);
