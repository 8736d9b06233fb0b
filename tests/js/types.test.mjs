// The hand-written wasm/index.d.ts type-checks against tests/js/types_check.ts.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

test('tsc --noEmit accepts tests/js/types_check.ts', () => {
  const r = spawnSync('npx', ['--no-install', 'tsc', '-p', 'tests/js/tsconfig.json', '--noEmit'], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  expect(r.stdout).toBe('');
  expect(r.status).toBe(0);
}, 120000);
