#!/usr/bin/env node
// wasm/cli.mjs — the `fxwasm` command: print fx graphs from the command line.
//
//   fxwasm --sample --print graph|tabular|code|readable
//   fxwasm model.onnx            (ONNX import is not implemented yet: exits with code 2)
//
// Exit codes: 0 success, 1 an error while working (FxError or other), 2 bad usage or an
// unsupported input.
import { init } from './index.mjs';

const USAGE = `Usage: fxwasm [options] [model.onnx]

Print an fx graph the way torch.fx 1.13 prints it.

Options:
  --sample            use the bundled sample (torch.fx's MyModule: x + param -> linear -> clamp)
  --print WHAT        what to print: graph (default), tabular, code, readable
  --num-users         print graphs with torch 2.x's [num_users=N] instead of [#users=N]
  --version           print the fxwasm version
  -h, --help          show this help

Examples:
  npx fxwasm --sample --print graph
  npx fxwasm --sample --print code
`;

const PRINTS = ['graph', 'tabular', 'code', 'readable'];

class UsageError extends Error {}

function parseArgs(argv) {
  const opts = { sample: false, print: 'graph', numUsers: false, help: false, version: false, files: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-h' || a === '--help') opts.help = true;
    else if (a === '--version') opts.version = true;
    else if (a === '--sample') opts.sample = true;
    else if (a === '--num-users') opts.numUsers = true;
    else if (a === '--print' || a.startsWith('--print=')) {
      const v = a === '--print' ? argv[++i] : a.slice('--print='.length);
      if (v === undefined) throw new UsageError('--print needs a value: ' + PRINTS.join(', '));
      if (!PRINTS.includes(v)) throw new UsageError(`--print ${v}: expected one of ${PRINTS.join(', ')}`);
      opts.print = v;
    } else if (a.startsWith('-') && a !== '-') throw new UsageError(`unknown option ${a}`);
    else opts.files.push(a);
  }
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

async function main(argv) {
  let opts;
  try {
    opts = parseArgs(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`fxwasm: ${e.message}\n\n${USAGE}`);
    return 2;
  }
  if (opts.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const fx = await init();
  if (opts.version) {
    process.stdout.write(fx.version + '\n');
    return 0;
  }
  if (opts.files.length > 0) {
    const f = opts.files[0];
    if (/\.onnx$/i.test(f)) {
      process.stderr.write(`fxwasm: cannot open ${f}: ONNX import is not implemented yet; try --sample\n`);
    } else {
      process.stderr.write(`fxwasm: cannot open ${f}: only ONNX models (.onnx) will be supported, and ONNX import is not implemented yet; try --sample\n`);
    }
    return 2;
  }
  if (!opts.sample) {
    process.stderr.write(`fxwasm: nothing to print: pass --sample (or see --help)\n`);
    return 2;
  }
  const gm = buildSample(fx);
  try {
    let text;
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
    process.stdout.write(text + '\n');
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
