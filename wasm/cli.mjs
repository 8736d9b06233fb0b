#!/usr/bin/env node
// wasm/cli.mjs — the `fxwasm` command: import an ONNX model (or the bundled sample graph), print
// it the ways torch.fx does, transform it with passes, run it and export it again.
//
//   fxwasm model.onnx [--print graph|tabular|code|readable|none] [--passes a,b,...]
//          [--check-equivalence] [--run] [--inputs in_0.pb ...] [--save-outputs DIR]
//          [--coverage] [--out new.onnx]
//   fxwasm --sample --print graph|tabular|code|readable
//
// Exit codes: 0 success, 1 an error while working (FxError or other), 2 bad usage.
import fs from 'node:fs';
import path from 'node:path';
import { init } from './index.mjs';
import { randomInputs, outputNames } from './inputs.mjs';

// The pass list comes from the C++ pass registry, so the usage text is made after init().
const usage = (passes) => `Usage: fxwasm [options] (model.onnx | --sample)

Import an ONNX model as a torch.fx graph, print it the way torch.fx 1.13 prints it, transform it,
run it and export it.

Options:
  --print WHAT          graph (default unless another action is given), tabular, code,
                        readable, none
  --num-users           print graphs with torch 2.x's [num_users=N] instead of [#users=N]
  --passes a,b,...      run passes in order, printing nodes before/after for each:
${passes.map((p) => `                        ${p.name.padEnd(16)} ${p.description}`).join('\n')}
  --check-equivalence   run the model before and after every pass (seeded random inputs) and
                        print the max abs/rel difference; stop at a pass that changes outputs
  --coverage            list the nodes the executor cannot run
  --run                 run the model: each output's name, shape, dtype, checksum, and the time
  --profile             with --run: the time of each op (its median over 5 more runs), the
                        slowest nodes and the totals by op
  --inputs A.pb B.pb    inputs for --run as ONNX TensorProto files (default: seeded random)
  --save-outputs DIR    write the outputs of --run as DIR/output_0.pb ...
  --out FILE.onnx       export the (transformed) model
  --to-torch DIR        write the (transformed) model as a PyTorch package into DIR (created):
                        module.py, __init__.py, state_dict.pt; ONNX models are lowered first
  --torch-class NAME    the package's torch.nn.Module class (default FxModule)
  --sample              use the bundled sample graph (torch.fx's MyModule) instead of a model
  --version             print the fxwasm version
  -h, --help            show this help

Examples:
  npx fxwasm model.onnx --print code
  npx fxwasm model.onnx --passes dce,cse,fold,fuse-conv-bn --check-equivalence --out new.onnx
  npx fxwasm model.onnx --run --inputs input_0.pb --save-outputs out/
  npx fxwasm model.onnx --to-torch mymodel   # then in Python: from mymodel import FxModule
`;

const PRINTS = ['graph', 'tabular', 'code', 'readable', 'none'];

class UsageError extends Error {}

function parseArgs(argv, passNames) {
  const opts = {
    sample: false, print: null, numUsers: false, help: false, version: false, files: [],
    passes: [], check: false, coverage: false, run: false, inputs: [], saveOutputs: null, out: null,
    toTorch: null, torchClass: null,
  };
  const value = (i, a) => {
    const eq = a.indexOf('=');
    if (eq > 0) return [i, a.slice(eq + 1)];
    if (i + 1 >= argv.length) throw new UsageError(`${a} needs a value`);
    return [i + 1, argv[i + 1]];
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const name = a.split('=')[0];
    let v;
    if (a === '-h' || a === '--help') opts.help = true;
    else if (a === '--version') opts.version = true;
    else if (a === '--sample') opts.sample = true;
    else if (a === '--num-users') opts.numUsers = true;
    else if (a === '--check-equivalence') opts.check = true;
    else if (a === '--coverage') opts.coverage = true;
    else if (a === '--run') opts.run = true;
    else if (a === '--profile') opts.profile = true;
    else if (name === '--print') {
      [i, v] = value(i, a);
      if (!PRINTS.includes(v)) throw new UsageError(`--print ${v}: expected one of ${PRINTS.join(', ')}`);
      opts.print = v;
    } else if (name === '--passes') {
      [i, v] = value(i, a);
      opts.passes = v.split(',').filter((p) => p !== '');
      for (const p of opts.passes)
        if (!passNames.includes(p)) throw new UsageError(`--passes: unknown pass '${p}' (known: ${passNames.join(', ')})`);
    } else if (name === '--out') [i, opts.out] = value(i, a);
    else if (name === '--to-torch') [i, opts.toTorch] = value(i, a);
    else if (name === '--torch-class') [i, opts.torchClass] = value(i, a);
    else if (name === '--save-outputs') [i, opts.saveOutputs] = value(i, a);
    else if (a === '--inputs') {
      while (i + 1 < argv.length && !argv[i + 1].startsWith('--')) opts.inputs.push(argv[++i]);
      if (opts.inputs.length === 0) throw new UsageError('--inputs needs at least one TensorProto file');
    } else if (a.startsWith('-') && a !== '-') throw new UsageError(`unknown option ${a}`);
    else opts.files.push(a);
  }
  if (opts.files.length > 1) throw new UsageError(`one model at a time (got ${opts.files.join(', ')})`);
  if (opts.sample && opts.files.length) throw new UsageError('--sample and a model file exclude each other');
  if (opts.print === null) opts.print = opts.run || opts.out || opts.toTorch || opts.passes.length || opts.coverage ? 'none' : 'graph';
  return opts;
}

/** torch.fx's MyModule (the docs example), built through the JS API. */
function buildSample(fx) {
  const graph = new fx.Graph();
  const x = graph.placeholder('x');
  const param = graph.getAttr('param');
  const add = graph.callFunction('operator.add', [x, param]);
  const linear = graph.callModule('linear', [add]);
  const clamp = graph.callMethod('clamp', [linear], { min: fx.float(0), max: fx.float(1) });
  graph.output(clamp);
  return new fx.GraphModule(graph, {
    className: 'MyModule',
    root: {
      parameters: { param: { shape: [3, 4] } },
      modules: {
        linear: {
          type: 'Linear',
          extraRepr: 'in_features=4, out_features=5, bias=True',
          parameters: { weight: { shape: [5, 4] }, bias: { shape: [5] } },
        },
      },
    },
  });
}

function maxDiff(before, after) {
  let abs = 0, rel = 0;
  before.forEach((b, k) => {
    const a = after[k];
    for (let i = 0; i < b.data.length; i++) {
      const x = Number(b.data[i]), y = Number(a.data[i]);
      const d = Math.abs(x - y);
      abs = Math.max(abs, d);
      rel = Math.max(rel, d / Math.max(Math.abs(x), 1e-12));
    }
  });
  return { abs, rel };
}

/**
 * --profile: from several profiled runs, each op's median time; the slowest nodes, then the totals
 * by op, each with its share of the op time.
 */
function printProfile(runs) {
  const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  const profile = runs[0].map((t, i) => ({ node: t.node, op: t.op, ms: median(runs.map((r) => r[i]?.ms ?? t.ms)) }));
  const total = profile.reduce((s, t) => s + t.ms, 0);
  const pct = (ms) => `${((100 * ms) / (total || 1)).toFixed(1).padStart(5)} %`;
  process.stdout.write(`profile: ${profile.length} ops, ${total.toFixed(2)} ms\n`);
  for (const t of [...profile].sort((a, b) => b.ms - a.ms).slice(0, 15))
    process.stdout.write(`  ${t.node.padEnd(32)} ${t.op.padEnd(28)} ${t.ms.toFixed(3).padStart(9)} ms ${pct(t.ms)}\n`);
  const byOp = new Map();
  for (const t of profile) {
    const o = byOp.get(t.op) ?? { ms: 0, n: 0 };
    o.ms += t.ms;
    o.n += 1;
    byOp.set(t.op, o);
  }
  process.stdout.write('by op:\n');
  for (const [op, o] of [...byOp].sort((a, b) => b[1].ms - a[1].ms))
    process.stdout.write(`  ${op.padEnd(28)} ${String(o.n).padStart(5)} x ${o.ms.toFixed(3).padStart(9)} ms ${pct(o.ms)}\n`);
}

// Random inputs for --run/--check-equivalence, with the way out when they cannot be made.
function seededInputs(gm, seed) {
  try {
    return randomInputs(gm, seed);
  } catch (e) {
    if (e?.kind === 'UnsupportedError') e.message += '; pass --inputs';
    throw e;
  }
}

async function main(argv) {
  const fx = await init();
  const USAGE = usage(fx.passInfo());
  let opts;
  try {
    opts = parseArgs(argv, fx.passNames);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`fxwasm: ${e.message}\n\n${USAGE}`);
    return 2;
  }
  if (opts.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (opts.version) {
    process.stdout.write(fx.version + '\n');
    return 0;
  }
  if (!opts.sample && opts.files.length === 0) {
    process.stderr.write(`fxwasm: nothing to do: pass a model.onnx or --sample (see --help)\n`);
    return 2;
  }
  let gm;
  if (opts.sample) {
    gm = buildSample(fx);
  } else {
    const file = opts.files[0];
    let bytes;
    try {
      bytes = fs.readFileSync(file);
    } catch (e) {
      process.stderr.write(`fxwasm: cannot read ${file}: ${e.code === 'ENOENT' ? 'no such file' : e.message}\n`);
      return 1;
    }
    gm = fx.loadONNX(bytes, { externalData: path.dirname(path.resolve(file)) });
  }
  try {
    if (opts.passes.length) {
      const inputs = opts.check ? seededInputs(gm, 1) : null;
      for (const name of opts.passes) {
        const before = inputs ? gm.run(inputs) : null;
        const [report] = fx.runPasses(gm, [name], inputs ? { checkEquivalence: inputs } : {});
        let line = `${name.padEnd(16)} nodes ${report.nodesBefore} -> ${report.nodesAfter}  ${report.modified ? 'modified' : 'unchanged'}`;
        if (inputs) {
          const d = maxDiff(before, gm.run(inputs));
          line += `  max abs diff ${d.abs.toExponential(2)}  max rel diff ${d.rel.toExponential(2)}`;
        }
        process.stderr.write(`[pass] ${line}\n`);
      }
    }
    let text = null;
    switch (opts.print) {
      case 'graph':
        text = gm.graph.print({ numUsers: opts.numUsers });
        break;
      case 'tabular':
        text = gm.graph.tabular();
        break;
      case 'code':
        text = gm.code;
        break;
      case 'readable':
        text = gm.printReadable();
        break;
    }
    // Like Python's print(): the text plus one newline.
    if (text !== null) process.stdout.write(text + '\n');
    if (opts.coverage) {
      const gaps = gm.coverage();
      process.stdout.write(`coverage: ${gaps.length ? `${gaps.length} node(s) cannot run` : 'every node can run'}\n`);
      for (const g of gaps) process.stdout.write(`  ${g.node} (${g.target}): ${g.reason}\n`);
    }
    if (opts.run) {
      const inputs = opts.inputs.length ? opts.inputs.map((f) => fx.tensorFromONNX(fs.readFileSync(f))) : seededInputs(gm, 0);
      const t0 = performance.now();
      const outs = gm.run(inputs);
      const ms = performance.now() - t0;
      const names = outputNames(gm);
      if (opts.saveOutputs) fs.mkdirSync(opts.saveOutputs, { recursive: true });
      outs.forEach((o, k) => {
        let sum = 0, abs = 0;
        for (const v of o.data) {
          sum += Number(v);
          abs += Math.abs(Number(v));
        }
        const name = names[k] ?? `output_${k}`;
        process.stdout.write(`${name}: ${o.dtype}[${o.shape.join(', ')}]  sum=${sum.toPrecision(9)}  abs_sum=${abs.toPrecision(9)}\n`);
        if (opts.saveOutputs) fs.writeFileSync(path.join(opts.saveOutputs, `output_${k}.pb`), fx.tensorToONNX(o, name));
      });
      process.stdout.write(`run: ${ms.toFixed(2)} ms\n`);
      if (opts.profile) printProfile(Array.from({ length: 5 }, () => gm.run(inputs, { profile: true }).profile));
    }
    if (opts.out) {
      fs.writeFileSync(opts.out, gm.toONNX());
      process.stderr.write(`wrote ${opts.out}\n`);
    }
    if (opts.toTorch) {
      // ONNX graphs are lowered first; what cannot be is named, and nothing is written then.
      const files = fx.torchPackage(gm, opts.torchClass ?? 'FxModule');
      fs.mkdirSync(opts.toTorch, { recursive: true });
      for (const [name, bytes] of Object.entries(files)) fs.writeFileSync(path.join(opts.toTorch, name), bytes);
      process.stderr.write(`wrote ${opts.toTorch}/{${Object.keys(files).join(',')}} (class ${opts.torchClass ?? 'FxModule'})\n`);
    }
  } finally {
    gm.delete();
  }
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e) => {
    const kind = e && e.name === 'FxError' ? `${e.kind}: ` : '';
    process.stderr.write(`fxwasm: ${kind}${e && e.message ? e.message : String(e)}\n`);
    process.exitCode = 1;
  },
);
