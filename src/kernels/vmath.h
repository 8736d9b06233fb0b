// Vector exp, erf, GELU and sigmoid for the elementwise kernels (Exp, Sigmoid, SiLU, Softmax, Erf,
// Gelu): the scalar libm calls cost 5-6 ns an element, which made GELU alone 18 % of ConvNeXt-T's
// time.
//
// Written once over GCC/Clang vector extensions, for any lane count V (v4f: SSE natively and
// simd128 in wasm; 8- and 16-lane types under AVX2 / AVX-512F target attributes, see
// elementwise.cpp). Only +, -, *, / and lane selects are used (and, for sixteen lanes under GCC,
// vscalefps in exp_in_range, with the same bits). Without contraction into FMA
// (the build is ISO C++) every width gives the same bits; the dispatch functions that enable
// FMA (fp-contract=fast) change the last bits, within the same tested bounds. Callers run a tail
// through the vector path too: an element's result does not depend on its position or the
// thread count.
//
// Accuracy against double-precision libm over a dense sweep of [-110, 110]
// (tests/cpp/vmath_test.cpp): exp within 1 ulp (denormal results included), erf within 3 ulp,
// GELU within 1e-6 relative for |x| < 3 and 2e-5 in its negative tail, sigmoid within 2.5 ulp
// down to its results under 6.1e-39 (0).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/simd.h"

// GCC expands x86 builtins (vscalefps, maxps / minps at 4, 8 and 16 lanes) in whichever function
// of the matching target the template is inlined into; Clang checks the target where the call is
// written, so it keeps the generic forms (the same bits).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__EMSCRIPTEN__)
#define FX_VMATH_GCC_X86 1
#include <immintrin.h>  // (declares the builtin)
#else
#define FX_VMATH_GCC_X86 0
#endif

#if defined(__GNUC__)  // (GCC and Clang)
// GCC notes that 8-lane values passed by value change the ABI without -mavx; these functions
// are inlined into their AVX2-compiled callers (elementwise.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// Every function here is forced inline: an 8-lane instance that the compiler kept out of line
// would be compiled for the baseline target and take its vectors in memory, while its AVX2
// caller passes them in ymm registers (GCC 12 at -O2 did this to exp_in_range, which two
// functions call, and erf of the tail element came out NaN).
#define FX_VMATH_INLINE inline __attribute__((always_inline))

namespace fx::kernels::vmath {

template <class V>
using mask_t = decltype(V{} < V{});  // the signed-integer vector of V's comparisons

template <class V>
FX_VMATH_INLINE V splat(float x) {
  return V{} + x;
}
template <class V>
FX_VMATH_INLINE V select(mask_t<V> m, V a, V b) {
  using I = mask_t<V>;
  return reinterpret_cast<V>((m & reinterpret_cast<I>(a)) | (~m & reinterpret_cast<I>(b)));
}
template <class V>
FX_VMATH_INLINE V abs(V x) {
  using I = mask_t<V>;
  return reinterpret_cast<V>(reinterpret_cast<I>(x) & (I{} + 0x7fffffff));
}
/// x < lo ? lo : x, and x > hi ? hi : x (a NaN x stays NaN). GCC on x86 compiles those to a
/// compare and a blend; maxps / minps with the bound first compute the same in one instruction
/// (they return their second operand where either is NaN). Eight lanes with FMA on a Zen 3 core,
/// 64K floats: SiLU 0.551 -> 0.519 ns an element, GELU 1.549 -> 1.480.
template <class V>
FX_VMATH_INLINE V at_least(V x, V lo) {
#if FX_VMATH_GCC_X86
  if constexpr (sizeof(V) == 16) return __builtin_ia32_maxps(lo, x);
  if constexpr (sizeof(V) == 32) return __builtin_ia32_maxps256(lo, x);
  if constexpr (sizeof(V) == 64)
    return __builtin_ia32_maxps512_mask(lo, x, lo, static_cast<__mmask16>(0xffff),
                                        _MM_FROUND_CUR_DIRECTION);
#endif
  return x < lo ? lo : x;
}
template <class V>
FX_VMATH_INLINE V at_most(V x, V hi) {
#if FX_VMATH_GCC_X86
  if constexpr (sizeof(V) == 16) return __builtin_ia32_minps(hi, x);
  if constexpr (sizeof(V) == 32) return __builtin_ia32_minps256(hi, x);
  if constexpr (sizeof(V) == 64)
    return __builtin_ia32_minps512_mask(hi, x, hi, static_cast<__mmask16>(0xffff),
                                        _MM_FROUND_CUR_DIRECTION);
#endif
  return x > hi ? hi : x;
}

/// 2^n for integer lanes n in [-126, 127].
template <class V>
FX_VMATH_INLINE V pow2i(mask_t<V> n) {
  return reinterpret_cast<V>((n + 127) << 23);
}

/// 2^n y = e^x for x in [-104, 88.7] (or NaN), n = round(x / ln2) (returned in `n`) and y = e^r,
/// r = x - n ln2 (|r| <= ln2/2): Cephes' expf reduction and degree-6 polynomial.
template <class V>
FX_VMATH_INLINE V exp_reduced(V xc, mask_t<V>& n) {
  // n = round(x / ln2): adding 1.5 * 2^23 rounds to nearest in the mantissa.
  const V magic = splat<V>(12582912.0f);
  const V t = xc * splat<V>(1.44269504088896341f) + magic;
  const V nf = t - magic;
  V r = xc - nf * splat<V>(0.693359375f);
  r = r - nf * splat<V>(-2.12194440e-4f);
  V p = splat<V>(1.9875691500e-4f);
  p = p * r + splat<V>(1.3981999507e-3f);
  p = p * r + splat<V>(8.3334519073e-3f);
  p = p * r + splat<V>(4.1665795894e-2f);
  p = p * r + splat<V>(1.6666665459e-1f);
  p = p * r + splat<V>(5.0000001201e-1f);
  // n = nf as an integer, read from t's bits: t lies in [2^23, 2^24), where consecutive integers
  // have consecutive bit patterns, so bits(t) - bits(magic) is nf exactly (a NaN x gives a NaN y,
  // whatever n is). The conversion this replaces is one instruction natively, but wasm's
  // i32x4.trunc_sat_f32x4_s is a sequence of seven on x64 (for NaN and overflowing lanes).
  n = reinterpret_cast<mask_t<V>>(t) - reinterpret_cast<mask_t<V>>(magic);
  return p * (r * r) + r + splat<V>(1.0f);
}

/// e^x for x in [-104, 88.7] (or NaN): exp_reduced, with 2^n applied in two halves so results
/// down to the smallest denormal are right. Larger x give garbage: `exp` below handles them,
/// erfc's exponent never has them.
template <class V>
FX_VMATH_INLINE V exp_in_range(V xc) {
  mask_t<V> n;
  const V y = exp_reduced(xc, n);
#if FX_VMATH_GCC_X86
  if constexpr (sizeof(V) == 64) {
    // Sixteen lanes are AVX-512F's (callers carry its target attribute): vscalefps computes
    // y * 2^n exactly and rounds once, as the two steps below do (the first is exact: y * 2^h
    // stays normal), so the same bits (every float checked), one instruction for seven. ViT-B/16
    // node by node: Softmax 4.39 -> 4.03 ms, GELU 6.49 -> 5.41.
    const V nf = __builtin_convertvector(n, V);
    return __builtin_ia32_scalefps512_mask(y, nf, y, static_cast<__mmask16>(0xffff),
                                           _MM_FROUND_CUR_DIRECTION);
  }
#endif
  const mask_t<V> h = n >> 1;  // n in [-150, 128]: both halves within pow2i's range
  return y * pow2i<V>(h) * pow2i<V>(n - h);
}

/// e^x: exp_in_range on x clamped to [-104, 88.8], then infinity above 88.72 and NaN kept.
template <class V>
FX_VMATH_INLINE V exp(V x) {
  const V lo = splat<V>(-104.0f), hi = splat<V>(88.8f);
  const V out = exp_in_range(at_least(at_most(x, hi), lo));
  return select<V>(x != x, x,
                   select<V>(x > splat<V>(88.72283935546875f), splat<V>(__builtin_inff()), out));
}

/// e^x for x <= 0 or NaN (Softmax's x - max): exp without the upper clamp and the selects for
/// infinity and NaN (a NaN stays NaN through the lower clamp and the polynomial). The same bits
/// as exp there, in about four fifths of the instructions.
template <class V>
FX_VMATH_INLINE V exp_nonpositive(V x) {
  const V lo = splat<V>(-104.0f);
  return exp_in_range(at_least(x, lo));
}

/// erf(x) for |x| <= 0.5: its Taylor series to x^13 (relative error below 1e-9 there).
template <class V>
FX_VMATH_INLINE V erf_small(V x) {
  const V s = x * x;
  V p = splat<V>(1.0f / 9360.0f);
  p = p * s - splat<V>(1.0f / 1320.0f);
  p = p * s + splat<V>(1.0f / 216.0f);
  p = p * s - splat<V>(1.0f / 42.0f);
  p = p * s + splat<V>(1.0f / 10.0f);
  p = p * s - splat<V>(1.0f / 3.0f);
  p = p * s + splat<V>(1.0f);
  return x * p * splat<V>(1.12837916709551257f);  // 2 / sqrt(pi)
}

/// erfc(|x| sqrt(s2)) for s2 = 1 or 1/2 (s = sqrt(s2)): Numerical Recipes' erfcc,
/// t exp(P(t) - a^2) with t = 1 / (1 + a/2), a Chebyshev fit with relative error below 1.2e-7
/// for every a. It keeps erfc's tail, which 1 - erf cannot (GELU of a negative x is
/// x/2 erfc(|x| / sqrt 2)); a^2 is s2 x^2, so no rounding of x / sqrt 2 enters the exponent.
template <class V>
FX_VMATH_INLINE V erfc_scaled(V x, float s, float s2) {
  const V ax = abs(x);
  const V xc = at_most(ax, splat<V>(20.0f));  // erfc is 0 in float well before
  const V t = splat<V>(1.0f) / (splat<V>(1.0f) + splat<V>(0.5f * s) * xc);
  V p = splat<V>(0.17087277f);
  p = p * t - splat<V>(0.82215223f);
  p = p * t + splat<V>(1.48851587f);
  p = p * t - splat<V>(1.13520398f);
  p = p * t + splat<V>(0.27886807f);
  p = p * t - splat<V>(0.18628806f);
  p = p * t + splat<V>(0.09678418f);
  p = p * t + splat<V>(0.37409196f);
  p = p * t + splat<V>(1.00002368f);
  p = p * t - splat<V>(1.26551223f);
  // The exponent is at most ~3e-8 (P(1)) and NaN only for a NaN x: only its low end needs a clamp.
  const V e = p - splat<V>(s2) * (xc * xc);
  return t * exp_in_range(at_least(e, splat<V>(-104.0f)));
}

/// erf(x): the Taylor series for |x| < 0.5, 1 - erfc(|x|) (sign restored) beyond; NaN stays NaN.
template <class V>
FX_VMATH_INLINE V erf(V x) {
  const V big = splat<V>(1.0f) - erfc_scaled(x, 1.0f, 1.0f);
  const V out =
      select<V>(abs(x) < splat<V>(0.5f), erf_small(x), select<V>(x < splat<V>(0.0f), -big, big));
  return select<V>(x != x, x, out);
}

/// GELU, x Phi(x) with Phi(x) = (1 + erf(x / sqrt 2)) / 2 taken from c = erfc(|x| / sqrt 2):
/// c / 2 for negative x, so the negative tail keeps its relative precision, and 1 - c / 2 for
/// positive x. erfc_scaled is relatively accurate everywhere, so no second branch is needed
/// near 0 (where Phi is about 1/2 either way).
template <class V>
FX_VMATH_INLINE V gelu(V x) {
  const V half_c = splat<V>(0.5f) * erfc_scaled(x, 0.70710678118654752f, 0.5f);
  return x * select<V>(x < splat<V>(0.0f), half_c, splat<V>(1.0f) - half_c);
}

/// 1 / (1 + e^-x), with e^-x from exp_reduced on x clamped to [-88, 20], where 2^n takes one
/// step (n <= 127) and no infinity or NaN needs a select: about three quarters of exp's
/// instructions (SiLU 0.55 -> 0.43 ns an element with sixteen lanes, 1.01 -> 0.70 with eight, a
/// Xeon core on 64K floats; EfficientNet-B0's SiLU nodes 4.07 -> 3.34 ms, sums of per-node
/// minimums). Beyond 20, 1 + e^-x rounds to 1 and so does the result; below -88
/// the result (under 6.1e-39, a denormal) is 0; a NaN stays NaN (the clamp keeps it).
template <class V>
FX_VMATH_INLINE V sigmoid(V x) {
  const V lo = splat<V>(-88.0f), hi = splat<V>(20.0f);
  mask_t<V> n;
  const V y = exp_reduced(-at_least(at_most(x, hi), lo), n);
  const V s = splat<V>(1.0f) / (splat<V>(1.0f) + y * pow2i<V>(n));
  return select<V>(x < lo, splat<V>(0.0f), s);
}

/// Applies a V-wide function to n floats; the last partial vector goes through a padded copy,
/// so an element's result does not depend on where it sits.
template <class V, class F>
FX_VMATH_INLINE void map(const float* in, float* out, int64_t n, F f) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    V v;
    std::memcpy(&v, in + i, sizeof v);
    v = f(v);
    std::memcpy(out + i, &v, sizeof v);
  }
  if (i < n) {
    float buf[L] = {};
    std::memcpy(buf, in + i, static_cast<size_t>(n - i) * sizeof(float));
    V v;
    std::memcpy(&v, buf, sizeof v);
    v = f(v);
    std::memcpy(buf, &v, sizeof v);
    std::memcpy(out + i, buf, static_cast<size_t>(n - i) * sizeof(float));
  }
}

}  // namespace fx::kernels::vmath

#undef FX_VMATH_INLINE
#undef FX_VMATH_GCC_X86

#if defined(__GNUC__)  // (GCC and Clang)
#pragma GCC diagnostic pop
#endif
