// The --serve protocol of build/native/bench_onnx_exec and bench/onnx_exec.mjs, shared by the
// scripts that time several settings sample by sample in one run (native_ab.mjs, fx_ab.mjs).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import readline from 'node:readline';

/// The --input flags for MODEL.onnx from MODEL.json: each input's "example" shape if given, else
/// its shape with symbolic dimensions 1.
export function inputFlags(model) {
  const spec = JSON.parse(fs.readFileSync(model.replace(/\.onnx$/, '.json'), 'utf8'));
  return spec.inputs.flatMap((i) => [
    '--input', `${i.dtype}:${(i.example ?? i.shape).map((d) => (typeof d === 'number' ? d : 1)).join(',')}`]);
}

/// A --serve process: resolves once warmed up (`ready`: its first JSON line), with sample(ms) ->
/// the mean ms per run of back-to-back runs lasting >= ms, and close().
export async function server(label, cmd, args, cwd) {
  const child = spawn(cmd, args, { cwd, stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`${label}: exited (status ${child.exitCode})`);
    return value;
  };
  const ready = JSON.parse(await next());
  return {
    label, ready,
    async sample(ms) {
      child.stdin.write(`sample ${ms}\n`);
      return Number(await next());
    },
    close() { child.stdin.end(); },
  };
}
