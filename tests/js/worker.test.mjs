// createWorker() under Node (a worker thread with its own wasm instance): load, run by name and
// positionally, passes, export, errors as FxErrors, stale models, and the main thread stays free
// while the worker computes. Runs in a child process: typed arrays from a worker thread belong to
// Node's realm, not Jest's.
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const SCRIPT = `
import fs from 'node:fs';
import { init, createWorker, FxError } from '${root}/wasm/index.mjs';
const out = {};
const w = await createWorker();
out.version = w.version;
const m = await w.loadONNX('${root}/models/zoo/resnet18.onnx');
out.names = [m.inputNames, m.outputNames];
const x = new Float32Array(3 * 224 * 224).map((_, i) => Math.sin(i));
// While the worker runs resnet18, the main thread keeps ticking.
let ticks = 0;
const timer = setInterval(() => ticks++, 1);
const byName = await m.run({ [m.inputNames[0]]: { data: x, dims: [1, 3, 224, 224], type: 'float32' } });
clearInterval(timer);
out.ticks = ticks;
const y = byName[m.outputNames[0]];
out.y = [y.dims, y.type, y.data.constructor.name, x.length];
const fx = await init();
const local = fx.loadONNX(fs.readFileSync('${root}/models/zoo/resnet18.onnx'));
const [z] = local.run([{ data: x, shape: [1, 3, 224, 224] }]);
out.same = z.data.every((v, i) => v === y.data[i]);
out.passes = (await m.runPasses(['dce', 'cse'])).map((r) => r.pass);
const bytes = await m.toONNX();
out.exported = bytes instanceof Uint8Array && fx.loadONNX(bytes).graph.size > 50;
out.code = (await m.code()).includes('onnx.Conv');
try { await m.run([]); } catch (e) { out.error = [e instanceof FxError, e.kind]; }
try { await w.loadONNX(new Uint8Array([1, 2, 3])); } catch (e) { out.parse = [e instanceof FxError, e.kind]; }
try { m.runPasses([() => true]); } catch (e) { out.jsPass = e.kind; }
out.deleted = await m.delete();
try { await m.code(); } catch (e) { out.stale = e.kind; }
const second = await w.loadONNX('${root}/models/sample.onnx');
out.second = second.inputNames;
await w.terminate();
try { await second.code(); } catch (e) { out.terminated = e.kind + ': ' + e.message; }
console.log(JSON.stringify(out));
`;

test('createWorker runs models in a worker thread and answers with FxErrors', () => {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', SCRIPT], { encoding: 'utf8', timeout: 120000 });
  expect(r.stderr).toBe('');
  const out = JSON.parse(r.stdout);
  expect(out.version).toMatch(/^\d+\.\d+\.\d+/);
  expect(out.names.map((n) => n.length)).toEqual([1, 1]);
  expect(out.y).toEqual([[1, 1000], 'float32', 'Float32Array', 3 * 224 * 224]); // the input was copied, not moved
  expect(out.same).toBe(true);
  expect(out.ticks).toBeGreaterThan(3);
  expect(out.passes).toEqual(['dce', 'cse']);
  expect(out.exported).toBe(true);
  expect(out.code).toBe(true);
  expect(out.error).toEqual([true, 'ValueError']);
  expect(out.parse).toEqual([true, 'ParseError']);
  expect(out.jsPass).toBe('TypeError');
  expect(out.deleted).toBe(true);
  expect(out.stale).toBe('StaleHandleError');
  expect(out.second).toEqual(['input']);
  expect(out.terminated).toMatch(/^RuntimeError: the fxwasm worker failed: terminated/);
}, 120000);
