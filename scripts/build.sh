#!/usr/bin/env bash
# Configures and builds fxwasm three times:
#   build/native  host compiler, Ninja, Release (fxcore, fxwasm-cli, fx_tests; with LibTorch
#                 installed (Debian libtorch-dev) also fxtorch + fx_torch_tests, FXWASM_WITH_TORCH=ON)
#   build/wasm    Emscripten (emcmake), Ninja, Release (fxcore, fx_tests.js, dist/fx.mjs + fx.wasm)
#   build/wasm-threads  the same with -pthread (FXWASM_WASM_THREADS=ON), only the npm module:
#                 dist/fx-threads.mjs + fx-threads.wasm + fx-threads.worker.js
# Usage: scripts/build.sh [native|wasm|wasm-single|wasm-threads|all]   (default: all;
#        wasm = wasm-single + wasm-threads)
# Env:   BUILD_TYPE (default Release), JOBS (default: number of cores),
#        FXWASM_CMAKE_ARGS (extra -D options for both builds)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"

what="${1:-all}"
build_type="${BUILD_TYPE:-Release}"
jobs="${JOBS:-$(nproc)}"
read -r -a extra <<< "${FXWASM_CMAKE_ARGS:-}"

log() { printf '[build] %s\n' "$*"; }

build_native() {
  # The LibTorch layer (src/torch/) is built whenever LibTorch's CMake package is installed
  # (scripts/setup.sh installs libtorch-dev); FXWASM_WITH_TORCH=OFF in FXWASM_CMAKE_ARGS wins.
  local torch=OFF
  if compgen -G "/usr/lib/*/cmake/Torch/TorchConfig.cmake" >/dev/null ||
     compgen -G "/usr/share/cmake/Torch/TorchConfig.cmake" >/dev/null; then torch=ON; fi
  log "native: configure + build (build/native, $build_type, LibTorch layer $torch)"
  cmake -S "$root" -B "$root/build/native" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" \
    -DFXWASM_WITH_TORCH="$torch" "${extra[@]}"
  cmake --build "$root/build/native" --parallel "$jobs"
}

build_wasm() {
  # Debian's emscripten runs its JS optimizer with node and needs node-acorn from here.
  export NODE_PATH="/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}"
  log "wasm: configure + build (build/wasm, $build_type)"
  # Pass the test emulator ourselves: emcmake's default adds --experimental-wasm-threads, which
  # Node >= 18 rejects.
  emcmake cmake -S "$root" -B "$root/build/wasm" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" \
    -DCMAKE_CROSSCOMPILING_EMULATOR="$(command -v node)" "${extra[@]}"
  cmake --build "$root/build/wasm" --parallel "$jobs"
}

build_wasm_threads() {
  export NODE_PATH="/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}"
  log "wasm-threads: configure + build (build/wasm-threads, $build_type, -pthread)"
  # Every object of the shared-memory link needs -pthread: protobuf-lite too, in its own prefix.
  bash "$root/scripts/build_protobuf_wasm.sh" --pthread >/dev/null
  # Only the npm module: the C++ tests run in build/wasm (the kernels are the same sources) and
  # natively with real threads; the threaded module is tested by tests/js/threads_wasm.test.mjs.
  emcmake cmake -S "$root" -B "$root/build/wasm-threads" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" \
    -DFXWASM_WASM_THREADS=ON -DFXWASM_BUILD_TESTS=OFF \
    -DCMAKE_CROSSCOMPILING_EMULATOR="$(command -v node)" "${extra[@]}"
  cmake --build "$root/build/wasm-threads" --parallel "$jobs" --target fxwasm
}

case "$what" in
  native) build_native ;;
  wasm) build_wasm; build_wasm_threads ;;
  wasm-single) build_wasm ;;
  wasm-threads) build_wasm_threads ;;
  all) build_native; build_wasm; build_wasm_threads ;;
  *) echo "usage: $0 [native|wasm|wasm-single|wasm-threads|all]" >&2; exit 2 ;;
esac
