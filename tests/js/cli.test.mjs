// The `fxwasm` command (wasm/cli.mjs), run as a child process the way npx runs it.
import fs from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../../wasm/cli.mjs', import.meta.url));
const GOLDEN_DIR = new URL('../golden/', import.meta.url);

function run(...args) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });
}

// Goldens from real torch.fx 1.13; the CLI prints like Python's print(): text plus a newline.
const golden = (name) => fs.readFileSync(new URL(name, GOLDEN_DIR), 'utf8');
const mask = (s) => s.replace(/0x[0-9a-f]+/g, '0x');

test('--sample --print graph prints the sample like print(graph)', () => {
  const r = run('--sample', '--print', 'graph');
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  expect(r.stdout).toBe(golden('ref_my_module.graph.txt') + '\n');
  expect(run('--sample').stdout).toBe(r.stdout); // graph is the default
});

test('--sample --print tabular / code / readable', () => {
  const tab = run('--sample', '--print', 'tabular');
  expect(tab.status).toBe(0);
  expect(mask(tab.stdout)).toBe(mask(golden('ref_my_module.tabular.txt'))); // print_tabular()'s stdout
  const code = run('--sample', '--print=code');
  expect(code.status).toBe(0);
  expect(code.stdout).toBe(golden('ref_my_module.code.py') + '\n');
  const readable = run('--sample', '--print', 'readable');
  const extra = golden('ref_my_module.extra.txt');
  const printReadable = extra.slice(extra.indexOf('-- print_readable\n') + '-- print_readable\n'.length);
  expect(readable.stdout).toBe(printReadable); // print_readable() + print()'s newline
  expect(run('--sample', '--num-users').stdout).toBe(golden('ref_my_module.graph_num_users.txt') + '\n');
});

test('an ONNX model fails cleanly: not implemented yet, exit code 2, no stack trace', () => {
  const r = run('model.onnx');
  expect(r.status).toBe(2);
  expect(r.stdout).toBe('');
  expect(r.stderr).toBe('fxwasm: cannot open model.onnx: ONNX import is not implemented yet; try --sample\n');
  expect(r.stderr).not.toMatch(/\n\s+at /);
});

test('--help, --version and usage errors', () => {
  const help = run('--help');
  expect(help.status).toBe(0);
  expect(help.stdout).toMatch(/^Usage: fxwasm /);
  expect(help.stdout).toContain('--sample');
  expect(run('-h').stdout).toBe(help.stdout);
  const v = run('--version');
  expect(v.status).toBe(0);
  expect(v.stdout).toMatch(/^\d+\.\d+\.\d+/);
  for (const args of [['--bogus'], ['--print', 'nope'], ['--print'], []]) {
    const r = run(...args);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^fxwasm: /);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  }
});
