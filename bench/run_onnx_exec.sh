#!/usr/bin/env bash
# ONNX execution benchmark (issue "executor", SPEC §3): fxwasm on models/zoo/ models, one thread,
# against its peers in the same run, plus SGEMM, module start-up and wasm sizes:
#
#   wasm:    fxwasm's npm package in node (dist/fx.wasm, simd128)  vs onnxruntime-web 1.30.0
#            (wasm backend, SIMD, numThreads = 1), both through bench/onnx_exec.mjs
#   native:  fxwasm natively (bench/onnx_exec.cpp)  vs onnxruntime-node 1.30.0 (one intra-op
#            thread)  vs torch 1.13 eager (LibTorch via Python, bench/onnx_exec_torch.py)
#   SGEMM 512^3 (bench/run_sgemm.sh), init() of fx.wasm vs onnxruntime-web's first session,
#   fx.wasm vs ort-wasm-simd-threaded.wasm sizes (raw, gzip -9)
#   profile: per-op-type time of fxwasm natively and in wasm (bench/onnx_exec.cpp --profile, the
#            wasm build of the same driver)
#
#   bench/run_onnx_exec.sh
#   MODELS=resnet18,transformer_encoder RUNS=7 ROUNDS=1 bench/run_onnx_exec.sh
#   PROFILE_MODELS= SKIP_SGEMM=1 INIT_RUNS=3 bench/run_onnx_exec.sh
#
# Every latency: warm-up (>= 2 runs and >= 0.5 s), then RUNS repetitions of >= 20 ms each
# (several runs back to back for small models); median and min per run; all of it ROUNDS times
# (default 5), the sides interleaved, and the table shows the median of the rounds' medians.
# The sides of one model run one after the other (never concurrently), in separate processes.
# The output checksums (sum |y| of the first output, same seeded inputs everywhere) are
# compared in the table.
#
# Outputs (build/bench/): onnx_exec.jsonl (all figures), onnx_profile_*.jsonl (per node),
# onnx_exec_wasm.{js,wasm} (the wasm driver); the table goes to stdout (bench/onnx_table.mjs).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=build/bench
MODELS=${MODELS:-resnet18,mobilenet_v2,squeezenet1_1,transformer_encoder}
PROFILE_MODELS=${PROFILE_MODELS-resnet18,transformer_encoder}
RUNS=${RUNS:-10}
ROUNDS=${ROUNDS:-5}
INIT_RUNS=${INIT_RUNS:-7}
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
mkdir -p "$OUT"
echo '{"type": "commonjs"}' >"$OUT/package.json"
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}
log() { echo "[run_onnx_exec] $*" >&2; }

# ---- builds (incremental) ----
[ -f build/native/build.ninja ] || bash scripts/build.sh native
[ -f build/wasm/build.ninja ] && [ -f dist/fx.wasm ] || bash scripts/build.sh wasm
log "native driver (build/native/bench_onnx_exec) and dist/fx.wasm (incremental)"
cmake --build build/native --target bench_onnx_exec >"$OUT/build_onnx_exec_native.log" 2>&1 ||
  { cat "$OUT/build_onnx_exec_native.log" >&2; exit 1; }
cmake --build build/wasm --target fxwasm >"$OUT/build_onnx_exec_wasm.log" 2>&1 ||
  { cat "$OUT/build_onnx_exec_wasm.log" >&2; exit 1; }
if [ -n "$PROFILE_MODELS" ]; then
  pb=$(sed -n 's/^FXWASM_PROTOBUF_WASM_PREFIX:PATH=//p' build/wasm/CMakeCache.txt)
  libs=(build/wasm/libfxonnx.a build/wasm/libfxonnx_proto.a "$pb/lib/libprotobuf-lite.a"
        build/wasm/libfxexec.a build/wasm/libfxkernels.a build/wasm/libfxpasses.a build/wasm/libfxir.a)
  stale=0
  for f in bench/onnx_exec.cpp "${libs[@]}"; do
    [ "$OUT/onnx_exec_wasm.js" -nt "$f" ] || stale=1
  done
  if [ "$stale" = 1 ]; then
    log "wasm build of bench/onnx_exec.cpp ($OUT/onnx_exec_wasm.js)"
    em++ -O3 -msimd128 -fwasm-exceptions -std=c++17 -Iinclude bench/onnx_exec.cpp "${libs[@]}" \
      -sALLOW_MEMORY_GROWTH=1 -sNODERAWFS=1 -sENVIRONMENT=node -sWASM_ASYNC_COMPILATION=0 \
      -o "$OUT/onnx_exec_wasm.js"
  fi
fi

source bench/onnx_common.sh
snapshot_package

# ---- models ----
ensure_models

# --input DTYPE:SHAPE flags of the native driver, from NAME.json.
input_flags() {
  node -e 'const s = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
           console.log(s.inputs.map(i => `--input ${i.dtype}:${(i.example ?? i.shape).join(",")}`).join(" "))' \
    "models/zoo/$1.json"
}

JSONL="$OUT/onnx_exec.jsonl"
: >"$JSONL"
t0=$SECONDS
cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
printf '{"meta": "machine", "cpu": "%s", "nproc": %s, "node": "%s", "commit": "%s", "dirty": %s, "date": "%s"}\n' \
  "$cpu" "$(nproc)" "$(node --version)" "$(git rev-parse --short HEAD)" \
  "$([ -z "$(git status --porcelain -- src include wasm)" ] && echo false || echo true)" \
  "$(date -u +%Y-%m-%dT%H:%MZ)" >>"$JSONL"

# ---- latency: ROUNDS rounds, each side of each model once per round ----
# (This host's speed drifts by 20-40 % over seconds; interleaved rounds give both sides of a
# ratio the same drift, and the table takes the median of the rounds' medians. torch eager,
# far off either way, runs in the first round only.)
for round in $(seq "$ROUNDS"); do
  for m in "${models[@]}"; do
    f="models/zoo/$m.onnx"
    log "round $round/$ROUNDS, $m: fxwasm wasm, onnxruntime-web, fxwasm native, onnxruntime-node"
    node bench/onnx_exec.mjs fxwasm "$f" --runs "$RUNS" >>"$JSONL"
    node bench/onnx_exec.mjs ortweb "$f" --runs "$RUNS" >>"$JSONL"
    # shellcheck disable=SC2046
    build/native/bench_onnx_exec "$f" $(input_flags "$m") --runs "$RUNS" >>"$JSONL"
    node bench/onnx_exec.mjs ortnode "$f" --runs "$RUNS" >>"$JSONL"
    if [ "$round" = 1 ]; then
      "$TORCH_PY" bench/onnx_exec_torch.py "$m" --runs "$RUNS" >>"$JSONL"
    fi
  done
done

# ---- start-up: fresh processes, alternating ----
log "module instantiation, $INIT_RUNS fresh processes each"
for _ in $(seq "$INIT_RUNS"); do
  node bench/onnx_exec.mjs init fxwasm >>"$JSONL"
  node bench/onnx_exec.mjs init ortweb >>"$JSONL"
done

# ---- SGEMM ----
if [ -z "${SKIP_SGEMM:-}" ]; then
  log "SGEMM (bench/run_sgemm.sh)"
  bash bench/run_sgemm.sh | grep '^{' | sed 's/^{/{"sgemm": true, /' >>"$JSONL"
fi

# ---- per-op profile ----
if [ -n "$PROFILE_MODELS" ]; then
  IFS=, read -r -a pmodels <<<"$PROFILE_MODELS"
  for m in "${pmodels[@]}"; do
    log "$m: per-node profile, native and wasm"
    # shellcheck disable=SC2046
    build/native/bench_onnx_exec "models/zoo/$m.onnx" $(input_flags "$m") --runs 5 --profile \
      --profile-json "$OUT/onnx_profile_native_$m.jsonl" | grep '"profile"' >>"$JSONL"
    # shellcheck disable=SC2046
    node "$OUT/onnx_exec_wasm.js" "models/zoo/$m.onnx" $(input_flags "$m") --runs 5 --profile \
      --profile-json "$OUT/onnx_profile_wasm_$m.jsonl" | grep '"profile"' >>"$JSONL"
  done
fi
log "runs took $((SECONDS - t0)) s"

echo
node bench/onnx_table.mjs exec "$JSONL"
