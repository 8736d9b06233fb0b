#!/usr/bin/env bash
# Thread scaling of the native executor beside onnxruntime-node, from the same run: each model at
# 1 and 2 threads (fxwasm: fx::exec::set_num_threads via bench_onnx_exec --threads; onnxruntime:
# intraOpNumThreads via bench/onnx_exec.mjs ortnode --threads), interleaved, ROUNDS rounds, medians
# of the rounds' medians (bench/README.md: this host's speed drifts 20-40 % over seconds). Both
# sides are timed alike: WARMUP_MS of warm-up runs, then RUNS repetitions of back-to-back runs
# lasting >= 20 ms each, the median of the per-run means.
#
#   bench/run_threads.sh            ROUNDS=3 RUNS=7 MODELS=resnet18,mobilenet_v2,squeezenet1_1,transformer_encoder
#
# Then, unless AB_SAMPLES=0, bench/native_ab.mjs per model: the four settings as long-lived
# processes, AB_SAMPLES samples of each in turn, paired ratios (robust to the host's drift).
#
# Prints one table: per model and thread count, fxwasm ms, onnxruntime ms, fxwasm/onnxruntime (by
# medians of the rounds' medians, and by each side's fastest round: this host has slow phases of
# ~1.5x that last seconds to minutes, and the fastest rounds are the two sides at full speed), and
# each side's speed-up from 1 to 2 threads. Results are bit-identical across thread counts
# (tests/cpp/threads_test.cpp). The same in wasm (dist/fx-threads.wasm beside onnxruntime-web):
# bench/run_threads_wasm.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROUNDS="${ROUNDS:-3}"
RUNS="${RUNS:-7}"
MODELS="${MODELS:-resnet18,mobilenet_v2,squeezenet1_1,transformer_encoder}"
WARMUP_MS="${WARMUP_MS:-2000}"
AB_SAMPLES="${AB_SAMPLES:-15}"
log() { echo "[threads] $*" >&2; }
[ -f build/native/build.ninja ] || bash scripts/build.sh native
cmake --build build/native --target bench_onnx_exec >/dev/null
IFS=, read -r -a models <<<"$MODELS"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
input_flags() {
  node -e 'const s = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
           console.log(s.inputs.map(i => `--input ${i.dtype}:${(i.example ?? i.shape).map(d => typeof d === "number" ? d : 1).join(",")}`).join(" "))' \
    "models/zoo/$1.json"
}
# One JSON line of bench_onnx_exec or onnx_exec.mjs -> {side, model, threads, ms} in $out.
record() {
  node -e 'const d = JSON.parse(require("fs").readFileSync(0, "utf8"));
           console.log(JSON.stringify({side: process.argv[1], model: process.argv[2], threads: +process.argv[3], ms: d.median_ms}))' \
    "$1" "$2" "$3" >>"$out"
}
log "$(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  for m in "${models[@]}"; do
    for t in 1 2; do
      log "round $round/$ROUNDS $m threads=$t"
      sides=(fxwasm ort)
      ((round % 2)) || sides=(ort fxwasm)  # the side going first alternates
      for side in "${sides[@]}"; do
        if [ "$side" = fxwasm ]; then
          # shellcheck disable=SC2046
          build/native/bench_onnx_exec "models/zoo/$m.onnx" $(input_flags "$m") --runs "$RUNS" \
            --threads "$t" --warmup-ms "$WARMUP_MS" | record fxwasm "$m" "$t"
        else
          node bench/onnx_exec.mjs ortnode "models/zoo/$m.onnx" --runs "$RUNS" --threads "$t" \
            --warmup-ms "$WARMUP_MS" | record ort "$m" "$t"
        fi
      done
    done
  done
done
node --input-type=module -e '
import fs from "node:fs";
import { median } from "./bench/stats.mjs";
const rows = fs.readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
const ms = (side, m, t) => median(rows.filter((r) => r.side === side && r.model === m && r.threads === t).map((r) => r.ms));
const best = (side, m, t) => Math.min(...rows.filter((r) => r.side === side && r.model === m && r.threads === t).map((r) => r.ms));
console.log("| model | threads | fxwasm native ms | onnxruntime-node ms | fxwasm / ort | fxwasm / ort, fastest rounds | fxwasm 1->2 | ort 1->2 |");
console.log("|---|---|---|---|---|---|---|---|");
for (const m of [...new Set(rows.map((r) => r.model))])
  for (const t of [1, 2]) {
    const f = ms("fxwasm", m, t), o = ms("ort", m, t);
    const sf = t === 2 ? (ms("fxwasm", m, 1) / f).toFixed(2) + "x" : "", so = t === 2 ? (ms("ort", m, 1) / o).toFixed(2) + "x" : "";
    const fb = best("fxwasm", m, t), ob = best("ort", m, t);
    console.log(`| ${m} | ${t} | ${f.toFixed(2)} | ${o.toFixed(2)} | ${(f / o).toFixed(2)}x | ${(fb / ob).toFixed(2)}x (${fb.toFixed(2)} / ${ob.toFixed(2)}) | ${sf} | ${so} |`);
  }
' "$out"
[ "$AB_SAMPLES" -gt 0 ] || exit 0
echo
echo "Sample by sample (bench/native_ab.mjs, $AB_SAMPLES samples of >= 100 ms per setting), median (min) ms per run:"
echo
echo "| model | threads | fxwasm native ms | onnxruntime-node ms | fxwasm / ort | paired | 1->2: fxwasm / ort |"
echo "|---|---|---|---|---|---|---|"
for m in "${models[@]}"; do
  log "sample by sample: $m"
  node bench/native_ab.mjs "models/zoo/$m.onnx" --samples "$AB_SAMPLES" --warmup-ms "$WARMUP_MS" | tail -n +2
done
