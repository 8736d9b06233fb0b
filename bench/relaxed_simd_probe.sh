#!/usr/bin/env bash
# Can fxwasm ship a Relaxed SIMD build (issue 19)? Compiles one f32x4 relaxed FMA with this
# machine's emcc (-msimd128 -mrelaxed-simd) and asks Node and Debian's Chromium to compile the
# module. Prints what each says. (2026-11-25: emcc 3.1.6 / clang-14 emit LLVM 14's prototype
# opcode, which Node 20 and Chromium 156 reject as "invalid simd opcode".)
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
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
node --input-type=module -e "
  import fs from 'node:fs';
  import { chromium } from '$PWD/node_modules/playwright-core/index.mjs';
  const b = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu'] });
  const p = await b.newPage();
  const r = await p.evaluate(async (bytes) => { try { await WebAssembly.compile(new Uint8Array(bytes)); return 'compiles'; } catch (e) { return String(e); } }, Array.from(fs.readFileSync('$tmp/fma.wasm')));
  console.log('chromium ' + b.version() + ': ' + r);
  await b.close();"
