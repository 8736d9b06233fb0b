#!/usr/bin/env bash
# ONNX import benchmark (issue "ONNX import and export", SPEC §3): import (protobuf parse + build
# the GraphModule) of ResNet-18 (47 MB) and ResNet-50 (102 MB, the "~100 MB model"), same run:
#
#   fxwasm wasm     loadONNX(bytes) of the npm package in node (bench/onnx_import.mjs), and the
#                   wasm heap before/after it (peak memory vs file size)
#   fxwasm native   fx::onnx::import_model(bytes) (bench/onnx_import.cpp), peak RSS growth
#   onnxruntime-node 1.30.0 InferenceSession.create(bytes), one intra-op thread
#   onnxruntime-web 1.30.0 InferenceSession.create(bytes), wasm, one thread
#   onnx.load_from_string(bytes) and onnx.load(path), Debian python3-onnx 1.12 (bench/onnx_import_py.py)
#
#   bench/run_onnx_import.sh
#   MODELS=resnet18 RUNS=7 bench/run_onnx_import.sh
#
# Each side runs in its own process per model, one after the other. The file is read before
# timing everywhere (except onnx.load(path)). first = the first import in the process (cold
# pages, V8 tier-up); then RUNS repetitions (>= 20 ms each), median and min.
# ResNet-50 is not part of the default zoo: models/generate.py --only resnet50 exports it here.
#
# Outputs: build/bench/onnx_import.jsonl; the table (bench/onnx_table.mjs) goes to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=build/bench
MODELS=${MODELS:-resnet18,resnet50}
RUNS=${RUNS:-5}
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
mkdir -p "$OUT"
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}
log() { echo "[run_onnx_import] $*" >&2; }

# ---- builds (incremental) ----
[ -f build/native/build.ninja ] || bash scripts/build.sh native
[ -f build/wasm/build.ninja ] && [ -f dist/fx.wasm ] || bash scripts/build.sh wasm
log "native driver (build/native/bench_onnx_import) and dist/fx.wasm (incremental)"
cmake --build build/native --target bench_onnx_import >"$OUT/build_onnx_import_native.log" 2>&1 ||
  { cat "$OUT/build_onnx_import_native.log" >&2; exit 1; }
cmake --build build/wasm --target fxwasm >"$OUT/build_onnx_import_wasm.log" 2>&1 ||
  { cat "$OUT/build_onnx_import_wasm.log" >&2; exit 1; }

source bench/onnx_common.sh
snapshot_package

# ---- models ----
ensure_models

JSONL="$OUT/onnx_import.jsonl"
: >"$JSONL"
cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
printf '{"meta": "machine", "cpu": "%s", "nproc": %s, "node": "%s", "commit": "%s", "dirty": %s, "date": "%s"}\n' \
  "$cpu" "$(nproc)" "$(node --version)" "$(git rev-parse --short HEAD)" \
  "$([ -z "$(git status --porcelain -- src include wasm)" ] && echo false || echo true)" \
  "$(date -u +%Y-%m-%dT%H:%MZ)" >>"$JSONL"
t0=$SECONDS
for m in "${models[@]}"; do
  f="models/zoo/$m.onnx"
  log "$m ($(stat -c %s "$f") bytes): fxwasm wasm, fxwasm native, onnxruntime-node, onnxruntime-web, onnx.load"
  node bench/onnx_import.mjs fxwasm "$f" --runs "$RUNS" >>"$JSONL"
  build/native/bench_onnx_import "$f" --runs "$RUNS" >>"$JSONL"
  node bench/onnx_import.mjs ortnode "$f" --runs "$RUNS" >>"$JSONL"
  node bench/onnx_import.mjs ortweb "$f" --runs "$RUNS" >>"$JSONL"
  "$TORCH_PY" bench/onnx_import_py.py "$f" --runs "$RUNS" >>"$JSONL"
done
log "runs took $((SECONDS - t0)) s"

echo
node bench/onnx_table.mjs import "$JSONL"
