// The flat depthwise 3x3 kernels (each plane, or each phase of it, taken as one array): their
// vector load and lane mask, shared by the stride-1 kernel (depthwise.cpp) and the stride-2 ones
// (x86, depthwise_s2.cpp), and the stride-2 kernels' entry points, which depthwise.cpp calls.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/conv.h"
#include "kernels/cpu.h"  // FXWASM_X86_DISPATCH

#if defined(__GNUC__)  // (GCC and Clang)
// GCC notes that 32- and 64-byte vectors returned by value change the ABI without AVX; these
// helpers are inlined into the kernels compiled for AVX2 and AVX-512.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace fx::kernels {

// The flat depthwise kernels' vector load and lane mask (v where m, +0 elsewhere).
template <class V>
__attribute__((always_inline)) inline V flat_load(const float* q) {
  V v;
  std::memcpy(&v, q, sizeof v);
  return v;
}
template <class V>
__attribute__((always_inline)) inline V flat_keep(V v, decltype(V{} < V{}) m) {
  return reinterpret_cast<V>(reinterpret_cast<decltype(m)>(v) & m);
}

#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

/// Depthwise 3x3 at stride 2 with one pixel of padding on every side.
bool flat_3x3_s2(const Conv2dParams& p);
/// flat_3x3_s2 with an even input width.
bool s2_even_3x3(const Conv2dParams& p);
/// s2_even_3x3 on four lanes (wasm's simd128, SSE).
void depthwise3x3_s2_even4(const Conv2dParams& p, const float* in, const float* weight,
                           const float* bias, float* out);

#ifdef FXWASM_X86_DISPATCH
/// flat_3x3_s2 on four phase planes (even or odd rows times even or odd columns), a plane's
/// vectors grouped by output row: eight lanes (AVX2 + FMA) or sixteen (AVX-512F), the same bits.
void depthwise3x3_flat_s2_avx2(const Conv2dParams& p, const float* in, const float* weight,
                               const float* bias, float* out);
void depthwise3x3_flat_s2_avx512(const Conv2dParams& p, const float* in, const float* weight,
                                 const float* bias, float* out);
/// s2_even_3x3 on each plane split flat into its even and odd elements, eight lanes (sixteen:
/// _avx512_16); the split with AVX-512F's two-source permutes (the _avx512 ones) or AVX2
/// shuffles, the same bits.
void depthwise3x3_s2_even_avx512(const Conv2dParams& p, const float* in, const float* weight,
                                 const float* bias, float* out);
void depthwise3x3_s2_even_avx512_16(const Conv2dParams& p, const float* in, const float* weight,
                                    const float* bias, float* out);
void depthwise3x3_s2_even_avx2(const Conv2dParams& p, const float* in, const float* weight,
                               const float* bias, float* out);
#endif

}  // namespace fx::kernels
