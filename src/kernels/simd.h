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
/// c + a * b, lane-wise. In the relaxed-SIMD wasm module (clang >= 16, -mrelaxed-simd: only
/// gemm_micro.cpp is compiled so for it, wasm/CMakeLists.txt, so elsewhere this stays unfused) one
/// f32x4.relaxed_madd, which the engine fuses where the CPU has FMA (x86 with FMA3, ARM64) and
/// computes as a multiply and an add elsewhere: results may differ from the other builds in the
/// last bits, never between runs on one machine. Natively and in the simd128 build, a multiply and
/// an add (ISO C++ mode does not contract them).
inline __attribute__((always_inline)) v4f madd4(v4f a, v4f b, v4f c) {
#if defined(__wasm_relaxed_simd__)
  return __builtin_wasm_relaxed_madd_f32x4(a, b, c);
#else
  return c + a * b;
#endif
}
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

/// x < lo ? lo : x, then > hi ? hi : that, lane-wise, NaN and -0 included: one pseudo-max and
/// one pseudo-min in wasm (clang turns the second compare-and-select into a compare and a
/// bitselect, three or four instructions under V8), maxps and minps with the operands in the
/// order that keeps x where a comparison is false.
inline __attribute__((always_inline)) v4f clamp4(v4f x, v4f lo, v4f hi) {
#if defined(__wasm_simd128__)
  const v128_t y = wasm_f32x4_pmax(reinterpret_cast<v128_t>(x), reinterpret_cast<v128_t>(lo));
  return reinterpret_cast<v4f>(wasm_f32x4_pmin(y, reinterpret_cast<v128_t>(hi)));
#elif defined(__SSE__)
  return _mm_min_ps(hi, _mm_max_ps(lo, x));
#else
  x = x < lo ? lo : x;
  return x > hi ? hi : x;
#endif
}

/// clamp4 for any vector type (the AVX kernels' eight and sixteen lanes: compare and select).
/// (Always inlined into its AVX callers: GCC's note that returning a 32- or 64-byte vector
/// without AVX changes the ABI does not apply.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
template <class V>
inline __attribute__((always_inline)) V clamp_v(V x, V lo, V hi) {
  x = x < lo ? lo : x;
  return x > hi ? hi : x;
}
template <>
inline __attribute__((always_inline)) v4f clamp_v<v4f>(v4f x, v4f lo, v4f hi) {
  return clamp4(x, lo, hi);
}
#pragma GCC diagnostic pop

/// Transposes the 4 x 4 block whose rows are r0..r3, in place (eight lane shuffles, bits kept).
template <class V>
inline __attribute__((always_inline)) void transpose4x4(V& r0, V& r1, V& r2, V& r3) {
  const V t0 = __builtin_shufflevector(r0, r1, 0, 4, 1, 5);
  const V t1 = __builtin_shufflevector(r2, r3, 0, 4, 1, 5);
  const V t2 = __builtin_shufflevector(r0, r1, 2, 6, 3, 7);
  const V t3 = __builtin_shufflevector(r2, r3, 2, 6, 3, 7);
  r0 = __builtin_shufflevector(t0, t1, 0, 1, 4, 5);
  r1 = __builtin_shufflevector(t0, t1, 2, 3, 6, 7);
  r2 = __builtin_shufflevector(t2, t3, 0, 1, 4, 5);
  r3 = __builtin_shufflevector(t2, t3, 2, 3, 6, 7);
}

}  // namespace fx::kernels
