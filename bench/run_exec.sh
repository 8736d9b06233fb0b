#!/usr/bin/env bash
# Executor benchmark: fx::exec on ResNet-18 (BN folded, seeded random weights, 1x3x224x224), one
# thread, natively and as wasm under node (after warm-up runs). The onnxruntime comparison of
# the executor issue runs on the exported models of models/ once they exist.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=build/bench
mkdir -p "$OUT"
echo '{"type": "commonjs"}' >"$OUT/package.json"
srcs=(src/*.cpp src/kernels/*.cpp src/exec/*.cpp bench/exec_resnet18.cpp)
g++ -O3 -std=c++17 -Iinclude -Isrc "${srcs[@]}" -o "$OUT/exec_resnet18"
NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH} \
  em++ -O3 -msimd128 -fwasm-exceptions -std=c++17 -Iinclude -Isrc "${srcs[@]}" \
  -sALLOW_MEMORY_GROWTH=1 -sWASM_ASYNC_COMPILATION=0 -o "$OUT/exec_resnet18_wasm.js"
"$OUT/exec_resnet18" "$@"
node "$OUT/exec_resnet18_wasm.js" "$@"
