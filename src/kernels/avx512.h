// Helpers for the AVX-512 kernels (functions compiled with target("avx512f"), chosen at run time
// through cpu.h): included only where FXWASM_X86_DISPATCH is defined.
#pragma once

#include <immintrin.h>

namespace fx::kernels {

// GCC 12's _mm512_max_ps/_mm512_min_ps pass _mm512_undefined_ps() as the masked-off source, which
// -Wmaybe-uninitialized reports; the all-lanes masked forms compute the same without it.
inline __attribute__((target("avx512f"))) __m512 max512(__m512 a, __m512 b) {
  return _mm512_mask_max_ps(a, 0xFFFF, a, b);
}
inline __attribute__((target("avx512f"))) __m512 min512(__m512 a, __m512 b) {
  return _mm512_mask_min_ps(a, 0xFFFF, a, b);
}

}  // namespace fx::kernels
