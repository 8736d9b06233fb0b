#!/usr/bin/env node
// ONNX's backend node tests lowered to PyTorch: every case that fxwasm's executor passes
// (tests/onnx_backend/expected.txt) is lowered in wasm (lowerToTorch with the case's inputs as
// exampleInputs, then toFolder) and the package runs in Debian's torch 1.13
// (tests/torch_codegen/check_backend.py) against the suite's expected outputs. Cases listed in
// tests/torch_codegen/backend_expected.txt, with the reason, are known not to pass.
//
//   node tests/torch_codegen/backend_lowering.mjs [--only CASE] [--keep DIR] [--write]
//
// --only CASE  that case only (even one the executor fails), with its full reason
// --keep DIR   write the packages into DIR and keep them (default: a temporary folder)
// --write      rewrite backend_expected.txt from this run (review the diff before committing)
//
// Exits 1 when a case not on the list fails. tests/js/torch_codegen.test.mjs runs it in Jest.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import * as fx from '../../wasm/index.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const listFile = path.join(root, 'tests/torch_codegen/backend_expected.txt');

function readList(file, pick) {
  const out = new Map();
  if (!fs.existsSync(file)) return out;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim() || line.startsWith('#')) continue;
    const m = /^(\S+)\s+(\S+)?(.*)$/.exec(line);
    if (m) pick(out, m);
  }
  return out;
}

/** Lower one case into `dir/<case>/pkg`; '' on success, else why it cannot be lowered. */
function lowerCase(name, caseDir, outDir) {
  let gm;
  let torchGm;
  try {
    gm = fx.loadONNX(fs.readFileSync(path.join(caseDir, 'model.onnx')));
    const set0 = path.join(caseDir, 'test_data_set_0');
    const inputs = [];
    for (let i = 0; fs.existsSync(path.join(set0, `input_${i}.pb`)); ++i)
      inputs.push(fx.tensorFromONNX(fs.readFileSync(path.join(set0, `input_${i}.pb`))));
    torchGm = fx.lowerToTorch(gm, { className: 'Net', exampleInputs: inputs });
    const files = fx.toFolder(torchGm, 'Net');
    const pkg = path.join(outDir, name, 'pkg');
    fs.mkdirSync(pkg, { recursive: true });
    for (const [file, bytes] of Object.entries(files)) fs.writeFileSync(path.join(pkg, file), bytes);
    fs.writeFileSync(path.join(outDir, name, 'data.txt'), caseDir + '\n');
    return '';
  } catch (e) {
    if (!(e instanceof fx.FxError)) throw e;
    return `lowering: ${e.kind}: ${e.message.replace(/\s+/g, ' ').slice(0, 240)}`;
  } finally {
    torchGm?.delete();
    gm?.delete();
  }
}

/**
 * Runs the check. Returns { results: Map(case -> reason or ''), regressions, newPasses }:
 * regressions are failing cases not on the list, newPasses listed cases that now pass.
 */
export async function runBackendLowering({ only = '', keep = '', suite } = {}) {
  await fx.init();
  suite ??= process.env.FXWASM_ONNX_BACKEND_DIR ?? path.join(root, 'build/onnx-backend');
  const executorPasses = readList(path.join(root, 'tests/onnx_backend/expected.txt'), (m, r) =>
    m.set(r[1], r[2] === 'pass'),
  );
  const known = readList(listFile, (m, r) => m.set(r[1], (r[2] ?? '') + (r[3] ?? '')));
  const dirs = new Map();
  for (const kind of ['node', 'simple'])
    for (const name of fs.readdirSync(path.join(suite, kind)))
      if (fs.existsSync(path.join(suite, kind, name, 'model.onnx'))) dirs.set(name, path.join(suite, kind, name));
  const names = only ? [only] : [...dirs.keys()].filter((n) => executorPasses.get(n)).sort();

  const outDir = keep || fs.mkdtempSync(path.join(os.tmpdir(), 'fx-backend-torch-'));
  const results = new Map();
  try {
    for (const name of names) {
      if (!dirs.has(name)) throw new Error(`no case ${name} in ${suite}`);
      const why = lowerCase(name, dirs.get(name), outDir);
      if (why) results.set(name, why);
    }
    const r = spawnSync('/usr/bin/python3', [path.join(root, 'tests/torch_codegen/check_backend.py'), outDir], {
      encoding: 'utf8',
      maxBuffer: 256 << 20,
    });
    if (r.status !== 0) throw new Error(`check_backend.py failed:\n${r.stderr}`);
    for (const line of r.stdout.split('\n')) {
      const m = /^(\S+) (ok|FAIL (.*))$/.exec(line);
      if (m) results.set(m[1], m[2] === 'ok' ? '' : `torch: ${m[3]}`);
    }
  } finally {
    if (!keep) fs.rmSync(outDir, { recursive: true, force: true });
  }
  const regressions = [];
  const newPasses = [];
  for (const name of names) {
    const why = results.get(name) ?? 'no result from check_backend.py';
    results.set(name, why);
    if (why && !known.has(name)) regressions.push(`${name}: ${why}`);
    if (!why && known.has(name)) newPasses.push(name);
  }
  return { results, regressions, newPasses };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const args = process.argv.slice(2);
  const opt = (flag) => {
    const i = args.indexOf(flag);
    return i >= 0 ? args[i + 1] : '';
  };
  const only = opt('--only');
  const { results, regressions, newPasses } = await runBackendLowering({ only, keep: opt('--keep') });
  let passed = 0;
  for (const [name, why] of results) {
    if (!why) ++passed;
    if (only || (why && args.includes('--verbose'))) console.log(`${name}: ${why ? 'FAIL ' + why : 'ok'}`);
  }
  console.log(`backend cases lowered to PyTorch: ${passed} of ${results.size} pass in torch 1.13`);
  for (const n of newPasses) console.log(`  now passes (remove from ${path.relative(root, listFile)}): ${n}`);
  for (const r of regressions) console.log(`  FAILS, not on the list: ${r}`);
  if (args.includes('--write') && !only) {
    const lines = [
      "# ONNX backend cases that fxwasm's executor passes but that do not pass after lowering to",
      '# PyTorch and running in torch 1.13 (tests/torch_codegen/backend_lowering.mjs), with the reason.',
    ];
    for (const [name, why] of [...results].sort()) if (why) lines.push(`${name} ${why}`);
    fs.writeFileSync(listFile, lines.join('\n') + '\n');
  }
  process.exit(regressions.length && !only ? 1 : 0);
}
