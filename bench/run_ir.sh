#!/usr/bin/env bash
# IR chain benchmark (issue "FX IR core"): builds bench/ir_chain.cpp natively and as wasm, runs
# it and the torch.fx reference (bench/ir_chain_torchfx.py, Debian torch 1.13 under
# /usr/bin/python3), and prints the comparison table (bench/ir_table.mjs).
#
#   bench/run_ir.sh                 # N = 1000,10000,50000
#   SIZES=1000,10000 bench/run_ir.sh
#   TORCH_BUILD_CAP=60 bench/run_ir.sh   # cap one torch.fx build at 60 s (lower bound)
#
# Outputs (build/bench/): ir_chain, ir_chain_wasm.{js,wasm}, {native,wasm,torchfx}.jsonl, and
# the 1k chain's text as {native,torchfx}_1k.{str,code}.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=build/bench
SIZES=${SIZES:-1000,10000,50000}
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
TORCH_BUILD_CAP=${TORCH_BUILD_CAP:-120}
mkdir -p "$OUT"
# The repo's package.json says "type": "module"; emscripten 3.1.6's output is CommonJS.
echo '{"type": "commonjs"}' >"$OUT/package.json"

log() { echo "[run_ir] $*" >&2; }

# ---- build (native and wasm in parallel) ----
log "building native ($OUT/ir_chain) and wasm ($OUT/ir_chain_wasm.js)"
g++ -O3 -std=c++17 -Iinclude -Isrc src/*.cpp bench/ir_chain.cpp -o "$OUT/ir_chain" \
  >"$OUT/build_native.log" 2>&1 &
native_pid=$!
# Debian's emscripten 3.1.6 needs its node modules on NODE_PATH. WASM_ASYNC_COMPILATION=0: under
# node >= 18 (global fetch) the default async loader tries fetch() on the .wasm path and fails.
NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH} \
  em++ -O3 -std=c++17 -fwasm-exceptions -Iinclude -Isrc src/*.cpp bench/ir_chain.cpp \
  -sALLOW_MEMORY_GROWTH=1 -sNODERAWFS=0 -sWASM_ASYNC_COMPILATION=0 \
  -o "$OUT/ir_chain_wasm.js" >"$OUT/build_wasm.log" 2>&1 &
wasm_pid=$!
build_ok=1
wait "$native_pid" || { log "native build failed:"; cat "$OUT/build_native.log" >&2; build_ok=0; }
wait "$wasm_pid" || { log "wasm build failed:"; cat "$OUT/build_wasm.log" >&2; build_ok=0; }
[ "$build_ok" = 1 ] || exit 1

# ---- run (one after the other, so they do not compete for the CPU) ----
# Page faults are very expensive on the VMs this runs on (a 50k-node graph's fresh pages cost
# more than building it), and glibc returns freed memory to the kernel between repetitions, so
# every repetition would pay them again. Keep freed memory in the process, for the native run
# and for torch.fx (CPython allocates through the same glibc malloc) alike; the wasm heap never
# shrinks anyway.
export MALLOC_TRIM_THRESHOLD_=4000000000 MALLOC_MMAP_THRESHOLD_=4000000000
rm -f "$OUT"/{native,wasm,torchfx}.jsonl "$OUT"/{native,torchfx}_1k.{str,code}
t0=$SECONDS
log "native run"
"$OUT/ir_chain" --sizes "$SIZES" --dump "$OUT/native_1k" >"$OUT/native.jsonl"
log "wasm run (node $(node --version))"
node "$OUT/ir_chain_wasm.js" --sizes "$SIZES" >"$OUT/wasm.jsonl"
log "torch.fx run ($TORCH_PY, torch $("$TORCH_PY" -c 'import torch; print(torch.__version__)'))" \
  "- building the 50k chain takes up to ${TORCH_BUILD_CAP} s"
"$TORCH_PY" bench/ir_chain_torchfx.py --sizes "$SIZES" --build-cap "$TORCH_BUILD_CAP" \
  --dump "$OUT/torchfx_1k" >"$OUT/torchfx.jsonl"
log "runs took $((SECONDS - t0)) s"

echo
node bench/ir_table.mjs "$OUT/torchfx.jsonl" "$OUT/native.jsonl" "$OUT/wasm.jsonl" \
  "$OUT/native_1k" "$OUT/torchfx_1k"
