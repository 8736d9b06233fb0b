// The SGEMM micro-kernels (gemm_micro.cpp) behind gemm.cpp's blocked loops: one MR x NR tile of C
// from a KC-deep slice of packed (or in-place) panels of A and B, with the epilogue (alpha, beta,
// row and column biases, residual, clamp) in the store. A portable kernel on four-lane vectors
// (SSE natively, simd128 in wasm), and on x86-64, chosen at run time, AVX2 + FMA and AVX-512F
// ones.
#pragma once

#include <cstdint>

#include "kernels/cpu.h"  // FXWASM_X86_DISPATCH

namespace fx::kernels::gemm_micro {

// Rows of a micro-tile. V8 allocates wasm SIMD values to x64's 16 xmm registers: a 6x8 tile (12
// accumulators + 2 B vectors + 1 splat) spills there and runs at half speed (26 vs 49 GFLOP/s
// at 512^3), a 4x8 tile does not. Native compilers keep 6x8 (and the AVX kernels' 6 rows).
#ifdef __wasm__
constexpr int64_t MR = 4;
#else
constexpr int64_t MR = 6;
#endif
constexpr int64_t NR = 8;  // panel width of the portable kernel
#ifdef FXWASM_X86_DISPATCH
constexpr int64_t NR_AVX2 = 16;    // panel width of the AVX2 kernel
constexpr int64_t NR_AVX512 = 32;  // panel width of the AVX-512 kernel
#endif

// How a micro-kernel stores its tile.
struct Store {
  bool first, last;
  const float* bias;      // bias of this tile's first row, or null
  const float* col_bias;  // column bias of this tile's first column, or null
  const float* residual;  // the residual of this tile's first element (rows ldr apart), or null
  int64_t ldr;
  float lo, hi;
  bool clamp;
  int64_t b_step;  // floats from one k row of the B panel to the next (the width when packed)
  // 0: `a` is a packed MR-high panel. Otherwise `a` is op(A)'s row i0 + ir at column k0 in place,
  // rows a_stride apart (see direct_a in GemmCore::blocked).
  int64_t a_stride = 0;
  // Non-null for a whole MR x (two vectors) tile reading a row-major B in place (b_step its row
  // stride) that also stores each k row of the panel it loads, packed (b_copy[k * width + c]),
  // for the row tiles after it (see direct_b in GemmCore::blocked).
  float* b_copy = nullptr;
};

using MicroKernel = void (*)(int64_t, const float*, const float*, float*, int64_t, float, float,
                             const Store&, int64_t, int64_t);

// A run of whole MR x NR tiles computed by one call: tile t reads a + t * a_step and b + t *
// b_step, writes C + t * c_step, and its Store's bias, column bias and residual (those that are
// not null) advance by bias_step, col_bias_step and res_step a tile.
struct TileSpan {
  int64_t count;
  int64_t a_step, b_step, c_step;
  int64_t bias_step, col_bias_step, res_step;
  // A pair kernel's (select_kernel's `pairs`): floats from a tile's first packed A panel to the
  // second, whose six rows it computes below the first's (C and the Store's rows MR further on).
  int64_t a_half = 0;
};
using SpanKernel = void (*)(int64_t, const float*, const float*, float*, int64_t, float, float,
                            const Store&, const TileSpan&);

/// C = A B (+ col_bias, then clamped to [lo, hi] when `clamp`) for a product small enough that the
/// blocked loops' set-up outweighs its multiply-adds (attention's per-head 16 x 16 x 16): row-major
/// A (M x K, rows lda apart) and B (K x N, rows ldb apart) read in place, N a multiple of 4, K at
/// most one K block. Each element is the portable micro-kernel's sum, the same madd4s in the same
/// order from zero, and its store: the bits of the blocked path with that kernel (wasm).
void small_product(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                   int64_t ldb, float* C, int64_t ldc, const float* col_bias, bool clamp, float lo,
                   float hi);

// The micro-kernel for this CPU and the width of its B panels; `a_in_place`: whether it can read
// a row-major A in place (Store::a_stride), which every kernel can; `span`: its entry point
// for runs of whole tiles; `pairs`: where the CPU has one (AVX-512), its entry point for runs of
// two whole tiles stacked (2 MR x NR, packed A panels only, no Store::b_copy), else null.
MicroKernel select_kernel(int64_t& nr_width, bool* a_in_place = nullptr, SpanKernel* span = nullptr,
                          SpanKernel* pairs = nullptr);

}  // namespace fx::kernels::gemm_micro
