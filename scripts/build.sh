#!/usr/bin/env bash
# Configures and builds fxwasm three times:
#   build/native  host compiler, Ninja, Release (fxcore, fxwasm-cli, fx_tests; with LibTorch
#                 installed (Debian libtorch-dev) also fxtorch + fx_torch_tests, FXWASM_WITH_TORCH=ON)
#   build/wasm    Emscripten (emcmake), Ninja, Release (fxcore, fx_tests.js, dist/fx.mjs + fx.wasm)
#   build/wasm-threads  the same with -pthread (FXWASM_WASM_THREADS=ON), only the npm modules:
#                 dist/fx-threads.mjs + fx-threads.wasm + fx-threads.worker.js, and its Relaxed
#                 SIMD twin dist/fx-threads-relaxed.* (FXWASM_WASM_RELAXED_SIMD=ON: the GEMM
#                 micro-kernel compiled and the module linked by Debian's clang 16 / lld 16 under
#                 the same emcc; needs clang-16, lld-16 and llvm-16)
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
  local llvm=/usr/lib/llvm-16/bin dir="$root/build/wasm-threads"
  if [[ ! -x "$llvm/clang" || ! -x "$llvm/wasm-ld" || ! -x "$llvm/llvm-nm" ]]; then
    echo "wasm-threads needs Debian's clang-16, lld-16 and llvm-16 for its Relaxed SIMD twin (scripts/setup.sh installs them)" >&2
    exit 1
  fi
  log "wasm-threads: configure + build (build/wasm-threads, $build_type, -pthread; and -mrelaxed-simd with clang 16)"
  # Every object of the shared-memory link needs -pthread: protobuf-lite too, in its own prefix.
  bash "$root/scripts/build_protobuf_wasm.sh" --pthread >/dev/null
  mkdir -p "$dir"
  # The Relaxed SIMD twin's one compile and link: emcc 3.1.6 with LLVM 16 instead of its clang
  # 14, and Debian's prebuilt system libraries as a frozen cache (a clang-16 build of 3.1.6's libc
  # fails; the prebuilt ones link as they are).
  cat >"$dir/em_config.tmp" <<CFG
EMSCRIPTEN_ROOT = '/usr/share/emscripten'
LLVM_ROOT = '$llvm'
BINARYEN_ROOT = '/usr'
NODE_JS = '$(command -v node)'
CACHE = '/usr/share/emscripten/cache'
FROZEN_CACHE = True
CFG
  # Rewritten only when it changes, so that a rebuild compiles nothing new.
  cmp -s "$dir/em_config.tmp" "$dir/em_config" || mv "$dir/em_config.tmp" "$dir/em_config"
  rm -f "$dir/em_config.tmp"
  # Only the npm modules: the C++ tests run in build/wasm (the kernels are the same sources) and
  # natively with real threads; the threaded modules are tested by tests/js/threads_wasm.test.mjs.
  emcmake cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" \
    -DFXWASM_WASM_THREADS=ON -DFXWASM_WASM_RELAXED_SIMD=ON -DFXWASM_EM_CONFIG="$dir/em_config" \
    -DFXWASM_BUILD_TESTS=OFF -DCMAKE_CROSSCOMPILING_EMULATOR="$(command -v node)" "${extra[@]}"
  cmake --build "$dir" --parallel "$jobs" --target fxwasm fxwasm_relaxed
}

case "$what" in
  native) build_native ;;
  wasm) build_wasm; build_wasm_threads ;;
  wasm-single) build_wasm ;;
  wasm-threads) build_wasm_threads ;;
  all) build_native; build_wasm; build_wasm_threads ;;
  *) echo "usage: $0 [native|wasm|wasm-single|wasm-threads|all]" >&2; exit 2 ;;
esac
