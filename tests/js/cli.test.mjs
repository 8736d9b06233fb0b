// The `fxwasm` command (wasm/cli.mjs), run as a child process the way npx runs it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
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

test('an ONNX model: print, coverage, run, passes with the equivalence check, export', () => {
  const model = fileURLToPath(new URL('../../models/sample.onnx', import.meta.url));
  const code = run(model, '--print', 'code');
  expect(code.status).toBe(0);
  expect(code.stdout).toMatch(/^\n\n\ndef forward\(self, input\):\n    input_1 = input\n/);
  expect(code.stdout).toContain('conv = onnx.Conv(input_1, features_0_weight, features_0_bias, ');
  expect(run(model).stdout).toContain('call_function[target=onnx.Conv]');  // graph by default

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fxwasm-cli-'));
  try {
    const r = run(model, '--coverage', '--run', '--save-outputs', dir, '--passes', 'dce,cse,fold', '--check-equivalence',
      '--out', path.join(dir, 'out.onnx'));
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^coverage: every node can run\nlogits: float32\[2, 10\]  sum=\S+  abs_sum=\S+\nrun: [\d.]+ ms\n$/);
    expect(r.stderr).toMatch(/\[pass\] dce\s+nodes \d+ -> \d+  (modified|unchanged)  max abs diff \S+  max rel diff \S+\n/);
    expect(r.stderr).toContain(`wrote ${path.join(dir, 'out.onnx')}`);
    // The saved output is a TensorProto; the exported model gives the same output.
    expect(fs.statSync(path.join(dir, 'output_0.pb')).size).toBeGreaterThan(80);
    const again = run(path.join(dir, 'out.onnx'), '--run');
    expect(again.stdout.split('\n')[0]).toBe(r.stdout.split('\n')[1]);
    // --profile: every op the run executes, the slowest first, then the totals by op (their
    // counts add up to the ops listed).
    const p = run(model, '--run', '--profile');
    expect(p.status).toBe(0);
    const [, ops] = p.stdout.match(/\nprofile: (\d+) ops, [\d.]+ ms\n/);
    expect(p.stdout).toMatch(/\n  conv\s+onnx\.Conv\s+[\d.]+ ms\s+[\d.]+ %\n/);
    const byOp = [...p.stdout.split('by op:\n')[1].matchAll(/^  (\S+)\s+(\d+) x\s+[\d.]+ ms/gm)];
    expect(byOp.map((m) => m[1])).toContain('onnx.Conv');
    expect(byOp.reduce((s, m) => s + Number(m[2]), 0)).toBe(Number(ops));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('bad models and files fail cleanly: exit code 1, no stack trace', () => {
  const missing = run('no-such-model.onnx');
  expect(missing.status).toBe(1);
  expect(missing.stderr).toBe('fxwasm: cannot read no-such-model.onnx: no such file\n');
  const notOnnx = run(fileURLToPath(new URL('../../package.json', import.meta.url)));
  expect(notOnnx.status).toBe(1);
  expect(notOnnx.stderr).toMatch(/^fxwasm: ParseError: not an ONNX model: protobuf cannot parse the \d+ bytes/);
  expect(notOnnx.stderr).not.toMatch(/\n\s+at /);
  const badPass = run('x.onnx', '--passes', 'dce,nope');
  expect(badPass.status).toBe(2);
  expect(badPass.stderr).toMatch(/^fxwasm: --passes: unknown pass 'nope'/);
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

test('--to-torch lowers an ONNX model and writes a package PyTorch imports and runs', () => {
  const dir = fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'fxwasm-cli-torch-'));
  try {
    const model = fileURLToPath(new URL('../../models/zoo/mlp.onnx', import.meta.url));
    const r = run(model, '--to-torch', path.join(dir, 'mlp_pkg'), '--torch-class', 'Net');
    expect(r.status).toBe(0);
    expect(r.stdout).toBe('');
    expect(fs.readdirSync(path.join(dir, 'mlp_pkg')).sort()).toEqual(['__init__.py', 'module.py', 'state_dict.pt']);
    const py = spawnSync('/usr/bin/python3', ['-c', 'import torch; from mlp_pkg import Net; print(tuple(Net().eval()(torch.zeros(8, 64)).shape))'], {
      cwd: dir,
      encoding: 'utf8',
    });
    expect(py.stderr).toBe('');
    expect(py.stdout.trim()).toBe('(8, 10)');
    // The JS sample's weights are shapes without data: refused with the tensor named, and
    // nothing is written.
    const bad = run('--sample', '--to-torch', path.join(dir, 'sample_pkg'));
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('`param` (float32[3, 4]) has no data');
    // If becomes Python control flow in a leaf module: the package runs both branches, and
    // its own tracer traces the rest.
    const ifModel = fileURLToPath(new URL('../onnx_ops/if_then.onnx', import.meta.url));
    const lowered = run(ifModel, '--to-torch', path.join(dir, 'if_pkg'), '--torch-class', 'Net');
    expect(lowered.stderr).toContain('wrote');
    expect(lowered.status).toBe(0);
    const ifPy = spawnSync(
      '/usr/bin/python3',
      [
        '-c',
        [
          'import torch, if_pkg',
          'net = if_pkg.Net().eval()',
          'x = torch.arange(6.0).reshape(2, 3)',
          'a, b = net(torch.tensor(True), x), net(torch.tensor(False), x)',
          'print(bool(torch.equal(a, b)), type(if_pkg.symbolic_trace(net).if_).__name__)',
        ].join('\n'),
      ],
      { cwd: dir, encoding: 'utf8' },
    );
    expect(ifPy.stderr).toBe('');
    expect(ifPy.stdout.trim()).toMatch(/^False If_/);
    // A node that cannot be lowered (Scan in its opset-8 form): named, and nothing is written.
    const scan8 = fileURLToPath(new URL('../../build/onnx-backend/node/test_scan_sum/model.onnx', import.meta.url));
    if (fs.existsSync(scan8)) {
      const notLowered = run(scan8, '--to-torch', path.join(dir, 'scan_pkg'));
      expect(notLowered.status).toBe(1);
      expect(notLowered.stderr).toContain("node 'scan' (Scan): no handler for Scan at opset 8");
      expect(fs.existsSync(path.join(dir, 'scan_pkg'))).toBe(false);
    }
    expect(fs.existsSync(path.join(dir, 'sample_pkg'))).toBe(false);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
