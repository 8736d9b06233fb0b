#!/usr/bin/env bash
# SGEMM benchmark of the executor's kernel library: builds bench/sgemm.cpp natively and as wasm
# (simd128), runs both (one thread) and prints GFLOP/s per shape. Target (SPEC §3): >= 15
# GFLOP/s for 512^3 in wasm.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=build/bench
mkdir -p "$OUT"
echo '{"type": "commonjs"}' >"$OUT/package.json"
g++ -O3 -std=c++17 -Isrc src/kernels/*.cpp bench/sgemm.cpp -o "$OUT/sgemm"
NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH} \
  em++ -O3 -msimd128 -std=c++17 -Isrc src/kernels/*.cpp bench/sgemm.cpp \
  -sALLOW_MEMORY_GROWTH=1 -sWASM_ASYNC_COMPILATION=0 -o "$OUT/sgemm_wasm.js"
"$OUT/sgemm" "$@"
node "$OUT/sgemm_wasm.js" "$@"
