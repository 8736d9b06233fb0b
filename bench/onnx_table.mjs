#!/usr/bin/env node
// Formats the ONNX benchmarks' JSON lines as tables with ratios and PASS/MISS against SPEC §3.
//
//   node bench/onnx_table.mjs exec build/bench/onnx_exec.jsonl      (bench/run_onnx_exec.sh)
//   node bench/onnx_table.mjs import build/bench/onnx_import.jsonl  (bench/run_onnx_import.sh)
//
// Exit status 0 even on MISS (it is a report).
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { median } from './stats.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const [mode, file] = process.argv.slice(2);
if (!['exec', 'import'].includes(mode) || !file) {
  console.error('usage: onnx_table.mjs exec|import FILE.jsonl');
  process.exit(2);
}
const recs = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));

const fmt = (ms) => (ms == null ? '-' : ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms >= 1 ? ms.toFixed(2) : ms.toFixed(3));
const mb = (b) => (b / 1e6).toFixed(2);
const ratio = (a, b) => (a == null || b == null ? '-' : (a / b).toFixed(2) + 'x');
const judge = (ok) => (ok == null ? '-' : ok ? 'PASS' : 'MISS');
const tally = { PASS: 0, MISS: 0 };
const verdict = (ok) => { const v = judge(ok); if (v in tally) tally[v]++; return v; };

function table(header, rows, align = []) {
  const w = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => cells.map((c, i) => (align[i] === 'l' || (i === 0 && align[i] == null)
    ? String(c).padEnd(w[i]) : String(c).padStart(w[i]))).join(' | ').trimEnd();
  console.log(line(header));
  console.log(w.map((x) => '-'.repeat(x)).join('-|-'));
  for (const r of rows) console.log(line(r));
  console.log('');
}

const meta = recs.find((r) => r.meta === 'machine');
if (meta) console.log(`${meta.date}  ${meta.cpu}, ${meta.nproc} cores, node ${meta.node}, fxwasm ${meta.commit}${meta.dirty ? ' + uncommitted src/include/wasm changes' : ''}\n`);

// One side's figure for a model: with several rounds (ROUNDS in bench/run_onnx_exec.sh, the
// sides interleaved), the median of the rounds' medians and the smallest min.
const find = (impl, model) => {
  const rs = recs.filter((r) => r.impl === impl && r.model === model && r.median_ms != null && !r.profile);
  if (rs.length <= 1) return rs[0];
  return { ...rs[0], median_ms: median(rs.map((r) => r.median_ms)), min_ms: Math.min(...rs.map((r) => r.min_ms)), rounds: rs.length };
};

const cell = (r) => (r ? `${fmt(r.median_ms)} (${fmt(r.min_ms)})` : '-');

function gz(p) {
  if (!fs.existsSync(p)) return null;
  const raw = fs.readFileSync(p);
  return { raw: raw.length, gz: zlib.gzipSync(raw, { level: 9 }).length };
}

if (mode === 'exec') {
  const models = [...new Set(recs.filter((r) => r.impl && r.model && !r.profile).map((r) => r.model))];
  const specModels = new Set(['resnet18', 'mobilenet_v2', 'transformer_encoder']);

  const rounds = Math.max(1, ...models.map((m) => find('fxwasm-native', m)?.rounds ?? 1));
  const per = rounds > 1 ? `, median of ${rounds} interleaved rounds' medians (min of all)` : ', median (min)';
  console.log(`Latency in wasm, one thread: ms per run${per}`);
  table(['model', 'fxwasm wasm', 'onnxruntime-web', 'fx/ort-web', 'target <= 1.0x'],
    models.map((m) => {
      const a = find('fxwasm', m), b = find('ortweb', m);
      const ok = a && b ? a.median_ms <= b.median_ms : null;
      return [m, cell(a), cell(b), ratio(a?.median_ms, b?.median_ms),
              verdict(ok) + (specModels.has(m) ? '' : ' (issue 5 only)')];
    }));

  console.log(`Latency natively, one thread: ms per run${per}`);
  table(['model', 'fxwasm native', 'onnxruntime-node', 'fx/ort-node', 'target <= 1.5x',
         'torch 1.13 eager (LibTorch via Python)', 'fx/torch'],
    models.map((m) => {
      const a = find('fxwasm-native', m), b = find('ortnode', m), t = find('torch-eager', m);
      const ok = a && b ? a.median_ms <= 1.5 * b.median_ms : null;
      return [m, cell(a), cell(b), ratio(a?.median_ms, b?.median_ms),
              verdict(ok) + (specModels.has(m) ? '' : ' (issue 5 only)'), cell(t), ratio(a?.median_ms, t?.median_ms)];
    }));

  // Import (session creation) + first run, and the process's peak RSS (issue 19's big-model rows).
  const over = (impl, m, key) => {
    const v = recs.filter((r) => r.impl === impl && r.model === m && r[key] != null && !r.profile).map((r) => r[key]);
    return v.length ? median(v) : null;
  };
  if (models.some((m) => over('fxwasm-native', m, 'load_first_ms') != null)) {
    console.log('Import + first run, ms (median over rounds), and peak RSS of the process, MB (file size beside)');
    table(['model', 'file MB', 'fxwasm wasm', 'ort-web', 'fx/ort-web', 'fxwasm native', 'ort-node', 'fx/ort-node',
           'peak RSS: fx wasm', 'ort-web', 'fx native', 'ort-node', 'fx native / file'],
      models.map((m) => {
        const f = (impl) => over(impl, m, 'load_first_ms'), rss = (impl) => over(impl, m, 'peak_rss_mb');
        let fileMb = null;
        try {
          fileMb = fs.statSync(path.join(ROOT, 'models/zoo', `${m}.onnx`)).size / 2 ** 20;
        } catch {
          // not in models/zoo
        }
        const n = (v) => (v == null ? '-' : v.toFixed(0));
        return [m, n(fileMb), n(f('fxwasm')), n(f('ortweb')), ratio(f('fxwasm'), f('ortweb')),
                n(f('fxwasm-native')), n(f('ortnode')), ratio(f('fxwasm-native'), f('ortnode')),
                n(rss('fxwasm')), n(rss('ortweb')), n(rss('fxwasm-native')), n(rss('ortnode')),
                fileMb && rss('fxwasm-native') ? (rss('fxwasm-native') / fileMb).toFixed(2) + 'x' : '-'];
      }));
  }

  console.log('Output check: sum |y| of the first output (same seeded inputs), relative to onnxruntime-node');
  table(['model', 'onnxruntime-node', 'fxwasm wasm', 'ort-web', 'fxwasm native', 'torch eager'],
    models.map((m) => {
      const ref = find('ortnode', m)?.out_abs_sum;
      const rel = (impl) => { const v = find(impl, m)?.out_abs_sum; return v == null || ref == null ? '-' : Math.abs(v - ref) / Math.abs(ref) < 1e-6 ? 'same (<1e-6)' : ((v - ref) / ref).toExponential(1); };
      return [m, ref == null ? '-' : ref.toPrecision(8), rel('fxwasm'), rel('ortweb'), rel('fxwasm-native'), rel('torch-eager')];
    }));

  const sg = recs.filter((r) => r.sgemm);
  if (sg.length) {
    console.log('SGEMM (fx::kernels::sgemm, one thread), GFLOP/s, median');
    const shapes = [...new Set(sg.map((r) => r.shape))];
    table(['shape', 'native', 'wasm', 'target (wasm)'], shapes.map((s) => {
      const n = sg.find((r) => r.shape === s && r.impl === 'native'), w = sg.find((r) => r.shape === s && r.impl === 'wasm');
      return [s, n ? n.gflops.toFixed(1) : '-', w ? w.gflops.toFixed(1) : '-',
              s === 'square 512' ? '>= 15: ' + verdict(w ? w.gflops >= 15 : null) : ''];
    }), ['l']);
  }

  const fi = recs.filter((r) => r.init === 'fxwasm'), oi = recs.filter((r) => r.init === 'ortweb');
  if (fi.length || oi.length) {
    console.log(`Module instantiation, fresh node processes (${fi.length} + ${oi.length}), ms: median (min)`);
    const mm = (xs) => (xs.length ? `${fmt(median(xs))} (${fmt(Math.min(...xs))})` : '-');
    const fm = fi.length ? median(fi.map((r) => r.init_ms)) : null;
    const om = oi.length ? median(oi.map((r) => r.init_ms)) : null;
    table(['what', 'fxwasm', 'onnxruntime-web', 'fx/ort-web', 'target <= 150 ms'], [
      ['import of the JS module', mm(fi.map((r) => r.import_js_ms)), mm(oi.map((r) => r.import_js_ms)), '', ''],
      ['init: fx init() | ort first session - second', mm(fi.map((r) => r.init_ms)), mm(oi.map((r) => r.init_ms)),
       ratio(fm, om), verdict(fm == null ? null : fm <= 150)],
      ['ort: first session (tiny model, incl. init)', '', mm(oi.map((r) => r.first_session_ms)), '', ''],
      ['ort: second session (same model)', '', mm(oi.map((r) => r.second_session_ms)), '', ''],
    ], ['l']);
  }

  const pkg = process.env.FXWASM_PKG ? path.resolve(process.env.FXWASM_PKG) : ROOT;
  const fxw = gz(path.join(pkg, 'dist/fx.wasm')), fxj = gz(path.join(pkg, 'dist/fx.mjs'));
  const odir = path.join(ROOT, 'node_modules/onnxruntime-web/dist');
  const ow = gz(path.join(odir, 'ort-wasm-simd-threaded.wasm')), oj = gz(path.join(odir, 'ort-wasm-simd-threaded.mjs'));
  console.log('Size, MB (gzip -9); onnxruntime-web in node loads ort-wasm-simd-threaded.wasm (its other builds: jsep/jspi/asyncify, 16.8-28.3 MB)');
  table(['file', 'raw', 'gzip', 'target (fx.wasm gzip <= 1.5 MB)'], [
    ['dist/fx.wasm', fxw ? mb(fxw.raw) : '-', fxw ? mb(fxw.gz) : '-', verdict(fxw ? fxw.gz <= 1.5e6 : null)],
    ['dist/fx.mjs (glue)', fxj ? mb(fxj.raw) : '-', fxj ? mb(fxj.gz) : '-', ''],
    ['ort-wasm-simd-threaded.wasm', ow ? mb(ow.raw) : '-', ow ? mb(ow.gz) : '-', ''],
    ['ort-wasm-simd-threaded.mjs (glue)', oj ? mb(oj.raw) : '-', oj ? mb(oj.gz) : '-', ''],
    ['fx.wasm / ort wasm', ow && fxw ? ratio(fxw.raw, ow.raw) : '-', ow && fxw ? ratio(fxw.gz, ow.gz) : '-', ''],
  ], ['l']);

  const prof = recs.filter((r) => r.profile === 'op');
  for (const [impl, label] of [['fxwasm-native', 'native'], ['fxwasm-wasm-driver', 'wasm']]) {
    for (const m of [...new Set(prof.filter((r) => r.impl === impl).map((r) => r.model))]) {
      const rows = prof.filter((r) => r.impl === impl && r.model === m).sort((a, b) => b.ms - a.ms);
      const tot = recs.find((r) => r.profile === 'total' && r.impl === impl && r.model === m);
      console.log(`Profile, ${m}, ${label}: each node run alone (median), summed by op type` +
                  (tot ? `; node sum ${fmt(tot.node_sum_ms)} ms vs whole model ${fmt(tot.model_median_ms)} ms` : ''));
      table(['op', 'nodes', 'ms', 'share'], rows.slice(0, 10).map((r) => [r.op, r.nodes, fmt(r.ms), (100 * r.share).toFixed(1) + '%']));
    }
  }
} else {
  const models = [...new Set(recs.filter((r) => r.model).map((r) => r.model))];
  console.log('Import (parse + build), ms: first in process | median (min) of the repetitions after it; file bytes in memory');
  const c2 = (r) => (r ? `${fmt(r.first_ms)} | ${fmt(r.median_ms)} (${fmt(r.min_ms)})` : '-');
  table(['model', 'MB', 'fxwasm wasm', 'fxwasm native', 'onnxruntime-node session', 'onnxruntime-web session',
         'onnx.load_from_string', 'onnx.load(path)'],
    models.map((m) => [m, mb(recs.find((r) => r.model === m && r.file_bytes)?.file_bytes ?? 0),
      c2(find('fxwasm', m)), c2(find('fxwasm-native', m)), c2(find('ortnode', m)), c2(find('ortweb', m)),
      c2(find('onnx.load_from_string', m)), c2(find('onnx.load', m))]));
  console.log('Ratios of medians (first-in-process in brackets): fxwasm / peer');
  table(['model', 'wasm / ort-node', 'native / ort-node', 'wasm / onnx.load_from_string', 'native / onnx.load_from_string', 'target: ResNet-50 wasm <= 0.5 s'],
    models.map((m) => {
      const w = find('fxwasm', m), n = find('fxwasm-native', m), o = find('ortnode', m), p = find('onnx.load_from_string', m);
      const r2 = (a, b) => (a && b ? `${ratio(a.median_ms, b.median_ms)} (${ratio(a.first_ms, b.first_ms)})` : '-');
      const t = m === 'resnet50' && w ? `first ${verdict(w.first_ms <= 500)}, warm ${verdict(w.median_ms <= 500)}` : '';
      return [m, r2(w, o), r2(n, o), r2(w, p), r2(n, p), t];
    }));
  console.log('Memory of the first import: wasm linear memory (fx.heapSize(), never shrinks = peak) and malloc\'d bytes (heapUsed); native peak RSS growth');
  table(['model', 'file MB', 'heap before', 'heap after (peak)', 'growth', 'growth / file', 'target <= 1.5x',
         'peak / file', 'live after', 'native peak RSS growth / file'],
    models.map((m) => {
      const w = find('fxwasm', m), n = find('fxwasm-native', m);
      if (!w) return [m, '-', '-', '-', '-', '-', '-', '-', '-', '-'];
      const g = w.heap_growth / w.file_bytes;
      return [m, mb(w.file_bytes), mb(w.heap_before), mb(w.heap_after), mb(w.heap_growth), g.toFixed(2) + 'x',
              verdict(g <= 1.5), (w.heap_after / w.file_bytes).toFixed(2) + 'x', mb(w.heap_used_after),
              n ? (n.peak_rss_growth_bytes / n.file_bytes).toFixed(2) + 'x' : '-'];
    }));
}
console.log(`judged: ${tally.PASS} PASS, ${tally.MISS} MISS`);
