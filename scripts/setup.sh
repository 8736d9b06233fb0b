#!/usr/bin/env bash
# Installs everything fxwasm needs to build and test, idempotently: Debian packages (apt) and the
# npm dev dependencies (jest, typescript). Safe to run repeatedly; does nothing when all is there.
# Needs root (or sudo) only when a Debian package is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '[setup] %s\n' "$*"; }

# --- Debian packages ------------------------------------------------------------------------------
# build-essential/cmake/ninja-build: native build.  emscripten: wasm build (clang-14, binaryen, a
# prebuilt frozen system-library cache).  googletest: gtest sources for the wasm test build;
# libgtest-dev: gtest for the native build.  python3-torch/python3-tabulate: the torch.fx oracle for
# scripts/gen_goldens.py.  clang-format: scripts/format.sh.  libtorch-dev: the native LibTorch build
# (src/torch/).  protobuf-compiler/libprotobuf-dev/libonnx-dev: protoc, the native protobuf-lite
# runtime and ONNX's own onnx.proto.  python3-onnx/python3-torchvision: models/generate.py and the
# ONNX oracle scripts.  chromium: the playground's browser tests (driven by npm playwright-core).
# clang-14/libclang-rt-14-dev: the ASan + UBSan build and libFuzzer targets (scripts/fuzz.sh).
# clang-16/lld-16/llvm-16: the Relaxed SIMD module (scripts/build.sh wasm-threads: emcc driving
# LLVM 16, whose wasm backend emits the final relaxed-SIMD opcodes; clang 14's are the
# prototype's; emcc's link runs LLVM_ROOT's llvm-nm, and llvm-objcopy strips the names).
packages=(build-essential cmake ninja-build emscripten googletest libgtest-dev
          python3-torch python3-tabulate python3-torchvision python3-onnx clang-format
          libtorch-dev protobuf-compiler libprotobuf-dev libonnx-dev chromium
          clang-14 libclang-rt-14-dev clang-16 lld-16 llvm-16)

# Node >= 18 runs the wasm tests and Jest. Use the machine's Node if there is one (it may not come
# from Debian: e.g. NodeSource's nodejs, which also provides npm and conflicts with Debian's npm);
# otherwise install Debian's nodejs (18.x in bookworm) and npm.
node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
if ! command -v node >/dev/null 2>&1 || [ "$(node_major)" -lt 18 ]; then
  packages+=(nodejs)
fi
if ! command -v npm >/dev/null 2>&1; then
  packages+=(npm)
fi

is_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
missing=()
for p in "${packages[@]}"; do
  is_installed "$p" || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q </dev/null
  # No recommends: they add ~100 MB (fonts, numpy extras) that nothing here uses.
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    "${missing[@]}" </dev/null
else
  log "Debian packages: all present"
fi

# --- npm dev dependencies -------------------------------------------------------------------------
# Reinstall only when package-lock.json changed since the last install (hash stamp in node_modules).
stamp=node_modules/.fxwasm-lock.sha256
want="$(sha256sum package.json package-lock.json 2>/dev/null | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x node_modules/.bin/jest ]; then
  log "node_modules: up to date"
else
  log "installing npm dev dependencies"
  # `npm install`, not `npm ci`: the registry reachable here lacks some other platforms' optional
  # binaries (e.g. @unrs/resolver-binding-android-arm64), so the lock file cannot list them and
  # `npm ci` rejects it as out of sync. `npm install` follows the lock file all the same.
  # --ignore-scripts: onnxruntime-node's install script downloads GPU binaries (no network for
  # that here); its CPU binaries ship inside the package. Nothing else needs install scripts.
  npm install --no-audit --no-fund --ignore-scripts </dev/null
  want="$(sha256sum package.json package-lock.json | sha256sum | cut -d' ' -f1)"
  printf '%s\n' "$want" > "$stamp"
fi

# --- protobuf-lite for wasm ------------------------------------------------------------------------
# Built once from Debian's source package into ~/.cache/fxwasm (FXWASM_DEPS_DIR).
bash scripts/build_protobuf_wasm.sh >/dev/null
# The -pthread variant, for the threaded module (build/wasm-threads, dist/fx-threads.*).
bash scripts/build_protobuf_wasm.sh --pthread >/dev/null

# --- the model zoo ------------------------------------------------------------------------------------
# ONNX exports of torchvision/transformer models with seeded random weights (~90 MB, not committed):
# generated once by Debian's Python + torch; models/zoo/.complete marks a finished run.
zoo_stamp=models/zoo/.complete
if [ ! -f "$zoo_stamp" ] || [ models/generate.py -nt "$zoo_stamp" ]; then
  log "generating the model zoo (models/generate.py)"
  /usr/bin/python3 models/generate.py >/dev/null
  touch "$zoo_stamp"
else
  log "model zoo: up to date"
fi
# Its 8-bit forms (QDQ and QOperator ResNet-18 and transformer_encoder) by models/quantize.py.
quant_stamp=models/zoo/quantized/.complete
if [ ! -f "$quant_stamp" ] || [ models/quantize.py -nt "$quant_stamp" ] || [ "$zoo_stamp" -nt "$quant_stamp" ]; then
  log "quantizing zoo models (models/quantize.py)"
  /usr/bin/python3 models/quantize.py >/dev/null
  touch "$quant_stamp"
fi

# --- ONNX's backend node tests -----------------------------------------------------------------------
# Generated by Debian's python3-onnx into build/onnx-backend (~30 MB, 3 s; stamped with onnx's
# version) for tests/onnx_backend (native) and tests/js/onnx_backend.test.mjs (wasm).
/usr/bin/python3 scripts/gen_onnx_backend_suite.py 2>&1 | grep -v -i warning | sed 's/^/[setup] /'

log "node $(node --version), npm $(npm --version 2>/dev/null), $(cmake --version | head -1), emcc $(emcc --version 2>/dev/null | head -1 | grep -o '[0-9][0-9.]*' | head -1)"
