// fx::kernels — compute kernels of the fxwasm executor, one C++ source for native builds and
// WebAssembly. No LibTorch, no Embind: plain loops over GCC/Clang vector extensions, which
// lower to SSE/AVX natively and to simd128 in wasm (-msimd128).
#pragma once

#include <cstdint>

namespace fx::kernels {

/// What sgemm applies to each result as it stores it (fusing a convolution's bias and a following
/// Relu/Clip into the GEMM instead of extra passes over the output): C[i, j] += row_bias[i] (on
/// top of beta * C), then C[i, j] = min(max(C[i, j], lo), hi).
struct GemmEpilogue {
  const float* row_bias = nullptr;  ///< M values, or null
  float lo = -__builtin_inff();
  float hi = __builtin_inff();
};

/// Single-precision GEMM, row-major: C = alpha * op(A) * op(B) + beta * C, where op(A) is
/// M x K (A is K x M when trans_a) and op(B) is K x N (B is N x K when trans_b); lda/ldb/ldc are
/// row strides in elements. beta == 0 ignores C's previous contents (NaNs included), as BLAS.
/// Blocked for caches (panels of A and B are packed) with a 6x8 register-blocked micro-kernel.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           const GemmEpilogue* epilogue = nullptr);

/// The textbook triple loop (double accumulation); the reference sgemm is tested against.
void sgemm_reference(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                     const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                     int64_t ldc);

}  // namespace fx::kernels
