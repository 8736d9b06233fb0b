#!/usr/bin/env bash
# Can fxwasm ship a Relaxed SIMD build (issue 19)? Compiles one f32x4 relaxed FMA with this
# machine's emcc (-msimd128 -mrelaxed-simd) and asks Node and Debian's Chromium to compile the
# module. Prints what each says. (2026-11-25: emcc 3.1.6 / clang-14 emit LLVM 14's prototype
# opcode, which Node 20 and Chromium 156 reject as "invalid simd opcode".)
#
# Then, where Debian's clang-16 and lld-16 are installed (apt-get install clang-16 lld-16; this
# script does not install them), the same emcc driving LLVM 16 instead: an Embind function with
# C++ exceptions (-fwasm-exceptions) and clang-16's __builtin_wasm_relaxed_madd_f32x4, linked
# against Debian's prebuilt system libraries. Binaryen 108 cannot parse the final opcodes, so
# that path reads the metadata in Python (EMCC_READ_METADATA=python), avoids the
# wasm-emscripten-finalize pass (-sWASM_BIGINT) and links at -O1 (no wasm-opt). (2026-11-28: it
# runs in Chromium 156 as is and in Node 20 with --experimental-wasm-relaxed-simd.)
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# What Debian's Chromium says when asked to compile the module $1 (prints "chromium VERSION: ...").
chromium_compiles() {
  node --input-type=module -e "
    import fs from 'node:fs';
    import { chromium } from '$PWD/node_modules/playwright-core/index.mjs';
    const b = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu'] });
    const p = await b.newPage();
    const r = await p.evaluate(async (bytes) => { try { await WebAssembly.compile(new Uint8Array(bytes)); return 'compiles'; } catch (e) { return String(e); } }, Array.from(fs.readFileSync('$1')));
    console.log('chromium ' + b.version() + ': ' + r);
    await b.close();"
}
cat >"$tmp/fma.c" <<'C'
#include <wasm_simd128.h>
#include <emscripten.h>
// clang-14 has only the prototype's builtin (clang >= 16 spells it __builtin_wasm_relaxed_madd_f32x4).
EMSCRIPTEN_KEEPALIVE void fma4(const float* a, const float* b, float* c) {
  wasm_v128_store(c, __builtin_wasm_fma_f32x4(wasm_v128_load(c), wasm_v128_load(a), wasm_v128_load(b)));
}
int main(void) { return 0; }
C
NODE_PATH=/usr/share/nodejs emcc -O2 -msimd128 -mrelaxed-simd "$tmp/fma.c" -o "$tmp/fma.js"
echo "emcc: $(emcc --version | head -1)"
echo "instruction: $(wasm-dis --enable-simd --enable-relaxed-simd "$tmp/fma.wasm" 2>/dev/null | grep -o 'f32x4\.relaxed_fma' | head -1 || echo '?')"
probe='const fs = await import("node:fs"); try { await WebAssembly.compile(fs.readFileSync(process.argv[1])); console.log("compiles"); } catch (e) { console.log(String(e)); }'
echo "node $(node --version): $(node --input-type=module -e "$probe" "$tmp/fma.wasm")"
echo "node --experimental-wasm-relaxed-simd: $(node --experimental-wasm-relaxed-simd --input-type=module -e "$probe" "$tmp/fma.wasm")"
chromium_compiles "$tmp/fma.wasm"

llvm16=/usr/lib/llvm-16/bin
if [[ ! -x "$llvm16/clang" || ! -x "$llvm16/wasm-ld" ]]; then
  echo "clang-16 path: not tried (clang-16 and lld-16 are not installed)"
  exit 0
fi
cat >"$tmp/em_config" <<CFG
EMSCRIPTEN_ROOT = '/usr/share/emscripten'
LLVM_ROOT = '$llvm16'
BINARYEN_ROOT = '/usr'
NODE_JS = '$(command -v node)'
CACHE = '/usr/share/emscripten/cache'
FROZEN_CACHE = True
CFG
cat >"$tmp/k.cpp" <<'CPP'
#include <emscripten/bind.h>
#include <stdexcept>
#include <string>
typedef float f32x4 __attribute__((vector_size(16)));
float madd_sum(float a, float b, float c) {
  if (a < 0) throw std::invalid_argument("negative a");
  const f32x4 r = __builtin_wasm_relaxed_madd_f32x4(f32x4{a, a, a, a}, f32x4{b, b, b, b},
                                                    f32x4{c, c, c, c});
  return r[0] + r[1] + r[2] + r[3];
}
std::string checked(float a) {
  try {
    return std::to_string(madd_sum(a, 3, 1));
  } catch (const std::exception& e) {
    return e.what();
  }
}
EMSCRIPTEN_BINDINGS(probe) { emscripten::function("checked", &checked); }
CPP
(
  export EM_CONFIG="$tmp/em_config" EMCC_READ_METADATA=python NODE_PATH=/usr/share/nodejs
  echo "clang-16 path: $("$llvm16/clang" --version | head -1), with $(emcc --version | head -1)"
  emcc -O2 -msimd128 -mrelaxed-simd -fwasm-exceptions -c "$tmp/k.cpp" -o "$tmp/k.o"
  if ! emcc -O2 -msimd128 -fwasm-exceptions --bind -sWASM_BIGINT "$tmp/k.o" -o "$tmp/k2.js" \
    >"$tmp/o2.log" 2>&1; then
    echo "  link at -O2: $(grep -m1 -E 'parse exception|error' "$tmp/o2.log")"
  fi
  emcc -O1 -msimd128 -fwasm-exceptions --bind -sWASM_BIGINT -sMODULARIZE "$tmp/k.o" -o "$tmp/k.js"
)
run='const fs = require("fs"); require(process.argv[1] + "/k.js")({ wasmBinary: fs.readFileSync(process.argv[1] + "/k.wasm") }).then((m) => console.log("checked(2) = " + m.checked(2) + ", checked(-1) = " + m.checked(-1)), (e) => console.log(String(e)));'
echo "  node $(node --version): $(node -e "$run" "$tmp" 2>&1 | grep -m1 -E 'checked|Error')"
echo "  node --experimental-wasm-relaxed-simd: $(node --experimental-wasm-relaxed-simd -e "$run" "$tmp" 2>&1 | grep -m1 -E 'checked|Error')"
echo "  $(chromium_compiles "$tmp/k.wasm")"
