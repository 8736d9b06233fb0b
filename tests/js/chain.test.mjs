// A 10k-node chain built from JS, printed and generated exactly as expected (its build time is
// bench/ir_table.mjs's business: tests assert results, not speed).
import { init } from '../../wasm/index.mjs';

const N = 10000; // call_function nodes: N/2 times relu(x + 1)

let fx;
beforeAll(async () => {
  fx = await init();
});

function names(i) {
  const suffix = i === 0 ? '' : `_${i}`;
  return { add: `add${suffix}`, relu: `relu${suffix}` };
}

test('build, print and codegen a 10k-node chain', () => {
  const g = new fx.Graph();
  let cur = g.placeholder('x');
  for (let i = 0; i < N / 2; i++) {
    const a = g.callFunction('operator.add', [cur, 1]);
    cur = g.callFunction('torch.relu', [a]);
  }
  g.output(cur);
  expect(g.size).toBe(N + 2);

  const lines = ['graph():', '    %x : [#users=1] = placeholder[target=x]'];
  const code = ['', '', '', 'def forward(self, x):'];
  let prev = 'x';
  for (let i = 0; i < N / 2; i++) {
    const { add, relu } = names(i);
    lines.push(`    %${add} : [#users=1] = call_function[target=operator.add](args = (%${prev}, 1), kwargs = {})`);
    lines.push(`    %${relu} : [#users=1] = call_function[target=torch.relu](args = (%${add},), kwargs = {})`);
    code.push(`    ${add} = ${prev} + 1;  ${prev} = None`);
    code.push(`    ${relu} = torch.relu(${add});  ${add} = None`);
    prev = relu;
  }
  lines.push(`    return ${prev}`);
  code.push(`    return ${prev}`, '    ');
  expect(g.print()).toBe(lines.join('\n'));
  expect(g.pythonCode().src).toBe(code.join('\n'));
  expect(g.nodes.length).toBe(N + 2);
  g.lint();
  g.delete();
});
