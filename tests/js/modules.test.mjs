// The shape of the façade's ES modules (wasm/*.mjs): index.mjs only re-exports, the imports
// between modules form no cycle (a cycle would let a module see another's bindings before they are
// initialised), and the loaded Embind module lives in runtime.mjs alone.
import fs from 'node:fs';

const dir = new URL('../../wasm/', import.meta.url);
const files = fs.readdirSync(dir).filter((f) => f.endsWith('.mjs') && f !== 'cli.mjs');
const source = (f) => fs.readFileSync(new URL(f, dir), 'utf8');
const localImports = (f) => [...source(f).matchAll(/^(?:import|export)\b[^;]*?from '\.\/([\w.]+\.mjs)';/gms)].map((m) => m[1]);

test('index.mjs only re-exports', () => {
  const code = source('index.mjs')
    .replace(/^\/\/.*$/gm, '')
    .replace(/export \{[^}]*\} from '\.\/[\w.]+\.mjs';/g, '')
    .trim();
  expect(code).toBe('');
});

test('the imports between the modules form no cycle', () => {
  const graph = Object.fromEntries(files.map((f) => [f, localImports(f)]));
  expect(graph['init.mjs']).toContain('runtime.mjs');
  // Depth-first with an explicit stack; a back edge is a cycle.
  const state = {};
  const cycles = [];
  for (const start of files) {
    if (state[start]) continue;
    const stack = [[start, 0]];
    const path = [start];
    state[start] = 'open';
    while (stack.length) {
      const top = stack[stack.length - 1];
      const [f, i] = top;
      if (i < graph[f].length) {
        top[1]++;
        const g = graph[f][i];
        if (state[g] === 'open') cycles.push([...path.slice(path.indexOf(g)), g].join(' -> '));
        else if (!state[g]) {
          state[g] = 'open';
          stack.push([g, 0]);
          path.push(g);
        }
      } else {
        state[f] = 'done';
        stack.pop();
        path.pop();
      }
    }
  }
  expect(cycles).toEqual([]);
});

test('module-level state of the loaded module lives in runtime.mjs only', () => {
  for (const f of files) {
    const declares = /^(export )?let (M|nodeFs)\b/m.test(source(f));
    expect([f, declares]).toEqual([f, f === 'runtime.mjs']);
  }
});
