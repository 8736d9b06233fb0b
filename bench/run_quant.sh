#!/usr/bin/env bash
# Quantized models (issue 14): int8 against float32, and against onnxruntime, one thread.
#
#   bench/run_quant.sh
#   MODELS=resnet18 ROUNDS=3 RUNS=7 WASM=0 SKIP_BUILD=1 bench/run_quant.sh
#
# Per model of $MODELS (default resnet18,transformer_encoder) three forms: the float32 zoo model
# (models/zoo/NAME.onnx) and its 8-bit QDQ and QOperator forms (models/zoo/quantized/NAME_qdq.onnx,
# NAME_qop.onnx, made by models/quantize.py). Sides: fxwasm natively (bench/onnx_exec.cpp) and
# onnxruntime-node 1.30 (one intra-op thread); with WASM=1 (default) also fxwasm's npm package in
# node (dist/fx.wasm, simd128) and onnxruntime-web 1.30 (wasm, SIMD, one thread), all through the
# drivers of bench/run_onnx_exec.sh. Method as there: warm-up, RUNS repetitions of >= 20 ms,
# median per process; ROUNDS rounds (default 5) with the sides and forms interleaved; the table
# (bench/quant_table.mjs) takes the median of the rounds' medians and prints each int8 form over
# float32 per side and fxwasm over onnxruntime per form. Raw lines: build/bench/quant.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=build/bench
MODELS=${MODELS:-resnet18,transformer_encoder}
RUNS=${RUNS:-7}
ROUNDS=${ROUNDS:-5}
WASM=${WASM:-1}
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
mkdir -p "$OUT"
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}
log() { echo "[run_quant] $*" >&2; }

# SKIP_BUILD=1: use build/native/bench_onnx_exec and dist/ as they are.
if [ -z "${SKIP_BUILD:-}" ]; then
  [ -f build/native/build.ninja ] || bash scripts/build.sh native
  log "native driver (build/native/bench_onnx_exec, incremental)"
  cmake --build build/native --target bench_onnx_exec >"$OUT/build_quant_native.log" 2>&1 ||
    { cat "$OUT/build_quant_native.log" >&2; exit 1; }
fi
source bench/onnx_common.sh
if [ "$WASM" = 1 ]; then
  [ -f dist/fx.wasm ] || bash scripts/build.sh wasm
  snapshot_package
fi
ensure_models
for m in "${models[@]}"; do
  if [ ! -f "models/zoo/quantized/${m}_qdq.onnx" ] || [ ! -f "models/zoo/quantized/${m}_qop.onnx" ]; then
    log "quantizing $m (models/quantize.py)"
    /usr/bin/python3 models/quantize.py --only "$m" >&2
  fi
done

input_flags() {
  node -e 'const s = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
           console.log(s.inputs.map(i => `--input ${i.dtype}:${i.shape.join(",")}`).join(" "))' \
    "models/zoo/$1.json"
}

JSONL="$OUT/quant.jsonl"
: >"$JSONL"
cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
printf '{"meta": "machine", "cpu": "%s", "nproc": %s, "commit": "%s", "date": "%s"}\n' \
  "$cpu" "$(nproc)" "$(git rev-parse --short HEAD)" "$(date -u +%Y-%m-%dT%H:%MZ)" >>"$JSONL"
for round in $(seq "$ROUNDS"); do
  for m in "${models[@]}"; do
    for f in "models/zoo/$m.onnx" "models/zoo/quantized/${m}_qdq.onnx" "models/zoo/quantized/${m}_qop.onnx"; do
      log "round $round/$ROUNDS, $(basename "$f")"
      # shellcheck disable=SC2046
      build/native/bench_onnx_exec "$f" $(input_flags "$m") --runs "$RUNS" >>"$JSONL"
      node bench/onnx_exec.mjs ortnode "$f" --runs "$RUNS" >>"$JSONL"
      if [ "$WASM" = 1 ]; then
        node bench/onnx_exec.mjs fxwasm "$f" --runs "$RUNS" >>"$JSONL"
        node bench/onnx_exec.mjs ortweb "$f" --runs "$RUNS" >>"$JSONL"
      fi
    done
  done
done
node bench/quant_table.mjs "$JSONL"
