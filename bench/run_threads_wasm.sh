#!/usr/bin/env bash
# Thread scaling in wasm under Node: fxwasm's npm package (init({threads: N}): N = 1 the
# single-thread module dist/fx.wasm, N = 2 the threaded dist/fx-threads.wasm) beside
# onnxruntime-web 1.30 (env.wasm.numThreads = N, its threaded SIMD wasm), from the same run.
# Per round, per model, per thread count: one process per side, sides interleaved; ROUNDS rounds,
# medians of the rounds' medians (bench/README.md: this host's speed drifts 20-40 % over seconds).
#
#   bench/run_threads_wasm.sh       ROUNDS=3 RUNS=7 MODELS=resnet18,mobilenet_v2,squeezenet1_1,transformer_encoder
#
# Then the same A/B in one process per model (bench/threads_wasm_ab.mjs; SAMPLES, default 15),
# under `node --experimental-wasm-relaxed-simd` (Chromium's default), where fxwasm's threaded
# module is the Relaxed SIMD one (dist/fx-threads-relaxed.wasm) when built; RELAXED=0 keeps the
# plain one.
# Prints one table: per model, each side's ms at 1 and 2 threads, its speed-up 1 -> 2 (as a ratio
# of medians, and paired: the median over rounds of each round's ratio), and fxwasm /
# onnxruntime-web at each count; then the load average seen (other users' processes take cores
# from the 2-thread runs first). Raw lines: build/bench/threads_wasm.jsonl.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROUNDS="${ROUNDS:-3}"
RUNS="${RUNS:-7}"
MODELS="${MODELS:-resnet18,mobilenet_v2,squeezenet1_1,transformer_encoder}"
TORCH_PY="${TORCH_PY:-/usr/bin/python3}"
OUT=build/bench
log() { echo "[threads-wasm] $*" >&2; }
# shellcheck source=bench/onnx_common.sh
source bench/onnx_common.sh
[ -f dist/fx.wasm ] && [ -f dist/fx-threads.wasm ] || bash scripts/build.sh wasm
mkdir -p "$OUT"
snapshot_package
ensure_models
JSONL="$OUT/threads_wasm.jsonl"
: >"$JSONL"
log "$(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  for m in "${models[@]}"; do
    for t in 1 2; do
      # Alternate which side goes first, so neither always meets the same phase of the drift.
      if [ $(((round + t) % 2)) -eq 0 ]; then sides="fxwasm ortweb"; else sides="ortweb fxwasm"; fi
      for side in $sides; do
        log "round $round/$ROUNDS $m threads=$t $side"
        node bench/onnx_exec.mjs "$side" "models/zoo/$m.onnx" --threads "$t" --runs "$RUNS" --warmup-ms 2000 |
          node -e 'const r = JSON.parse(require("fs").readFileSync(0, "utf8")); r.round = +process.argv[1];
                   r.load1 = +require("fs").readFileSync("/proc/loadavg", "utf8").split(" ")[0]; console.log(JSON.stringify(r))' "$round" >>"$JSONL"
      done
    done
  done
done
node bench/threads_wasm_table.mjs "$JSONL"
# The same scaling A/B in one process per model (threads_wasm_ab.mjs): all four settings take
# turns, so they meet the same drift.
AB="$OUT/threads_wasm_ab.jsonl"
: >"$AB"
for m in "${models[@]}"; do
  log "A/B in one process: $m"
  node --experimental-wasm-relaxed-simd bench/threads_wasm_ab.mjs "models/zoo/$m.onnx" --samples "${SAMPLES:-15}" \
    $([ "${RELAXED:-1}" = 0 ] && echo --no-relaxed) >>"$AB"
done
node -e '
const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
const f = (x) => x.toFixed(2);
console.log("\nIn one process, settings taking turns (medians of " + rows[0].samples + " samples; fxwasm module: " + rows[0].fx_simd + "):\n");
console.log("| model | fxwasm 1 thr ms | fxwasm 2 thr ms | fxwasm 1->2 | ort-web 1 thr ms | ort-web 2 thr ms | ort-web 1->2 | fx/ort 2 thr |");
console.log("|---|---|---|---|---|---|---|---|");
for (const r of rows)
  console.log(`| ${r.model} | ${f(r.fxwasm1.median_ms)} | ${f(r.fxwasm2.median_ms)} | ${f(r.fxwasm_1to2)}x | ${f(r.ortweb1.median_ms)} | ${f(r.ortweb2.median_ms)} | ${f(r.ortweb_1to2)}x | ${f(r.fxwasm2.median_ms / r.ortweb2.median_ms)}x |`);
' "$AB"
