// Which x86 vector extensions the CPU running the native build has. The build targets baseline
// x86-64; the AVX2 / AVX-512 kernels are compiled per function with target attributes and
// chosen at run time through these (each asks the CPU once). FXWASM_X86_DISPATCH is defined
// where such kernels exist (native x86-64 with GCC or Clang, not wasm).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__EMSCRIPTEN__)
#define FXWASM_X86_DISPATCH 1

namespace fx::kernels {

inline bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
inline bool cpu_has_avx2_fma() {
  static const bool has = cpu_has_avx2() && __builtin_cpu_supports("fma");
  return has;
}
/// AVX-512F, with AVX2 and FMA (every AVX-512 CPU has them; kernels may assume all three).
inline bool cpu_has_avx512() {
  static const bool has = cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f");
  return has;
}
/// AVX-512 on a core that runs 512-bit operations whole, for kernels whose sixteen-lane form only
/// wins there: AMD's Zen 4 runs them in two halves (on a Zen 4 EPYC the eight-lane flat depthwise
/// kernel was 3-15 % faster than sixteen lanes; on an Intel Xeon with two 512-bit FMA ports,
/// sixteen lanes took 0.84-0.92x its time).
inline bool cpu_has_full_width_avx512() {
  static const bool has = cpu_has_avx512() && !__builtin_cpu_is("amd");
  return has;
}
/// AVX-512 with BW and VNNI (vpdpwssd), for the integer GEMM.
inline bool cpu_has_avx512_vnni() {
  static const bool has = cpu_has_avx512() && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vnni");
  return has;
}

}  // namespace fx::kernels

#endif
