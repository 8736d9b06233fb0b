// Four-lane float vectors over GCC/Clang vector extensions: SSE natively, simd128 in wasm.
// Loads and stores go through memcpy, so pointers need no alignment.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#elif defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace fx::kernels {

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));  // lane masks of v4f comparisons

inline v4f load4(const float* p) {
  v4f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(float* p, v4f v) { std::memcpy(p, &v, sizeof v); }
inline v4f splat(float x) { return v4f{x, x, x, x}; }
/// Lane-wise max for inputs without NaN (which lane a NaN comes from is unspecified).
inline v4f max4(v4f a, v4f b) {
#if defined(__wasm_simd128__)
  return reinterpret_cast<v4f>(
      wasm_f32x4_pmax(reinterpret_cast<v128_t>(a), reinterpret_cast<v128_t>(b)));
#elif defined(__SSE__)
  return _mm_max_ps(a, b);
#else
  return a > b ? a : b;
#endif
}

}  // namespace fx::kernels
