// The SGEMM micro-kernels (see gemm_micro.h): register-blocked MR x NR tiles over packed panels.
// Natively MR x NR = 6 x 8 keeps 12 four-lane accumulators plus two B vectors and one broadcast
// in the 16 xmm registers; in wasm 4 x 8 (V8 spills the 6 x 8 tile, see MR). On x86-64 CPUs with
// AVX2 and FMA, a 6 x 16 kernel on eight-lane ymm registers with fused multiply-adds replaces it,
// and a 6 x 32 kernel on zmm registers where AVX-512F is there.
#include "kernels/gemm_micro.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cpu.h"
#include "kernels/simd.h"

#ifdef FXWASM_X86_DISPATCH
#include <immintrin.h>

#include "kernels/avx512.h"
#endif

namespace fx::kernels::gemm_micro {

namespace {

// C = acc (+ C when kAdd) (+ the row bias) (+ the column bias), clamped, for a whole MR x NR
// tile: what the general store in micro_kernel computes when alpha is 1, beta plays no part and
// there is no residual (the same bits: the same adds in the same order).
template <bool kAdd, bool kBias, bool kColBias, bool kClamp>
inline __attribute__((always_inline)) void store_plain(const v4f (&acc)[MR][2], float* C,
                                                       int64_t ldc, const float* bias,
                                                       const float* col_bias, v4f lo, v4f hi) {
  v4f vcol[2];
  for (int h = 0; h < 2; ++h) vcol[h] = kColBias ? load4(col_bias + 4 * h) : splat(0.0f);
  for (int64_t r = 0; r < MR; ++r) {
    const v4f vbias = splat(kBias ? bias[r] : 0.0f);
    for (int h = 0; h < 2; ++h) {
      float* dst = C + r * ldc + 4 * h;
      v4f out = acc[r][h];
      if (kAdd) out += load4(dst);
      if (kBias) out += vbias;
      if (kColBias) out += vcol[h];
      if (kClamp) out = clamp4(out, lo, hi);
      store4(dst, out);
    }
  }
}

// store_plain for a row bias (a convolution's) or a column bias (a MatMul's), clamped or not.
// False for both at once, which the general store takes.
template <bool kAdd>
inline __attribute__((always_inline)) bool store_plain(const v4f (&acc)[MR][2], float* C,
                                                       int64_t ldc, const float* bias,
                                                       const float* col_bias, bool clamp, v4f lo,
                                                       v4f hi) {
  constexpr bool T = true, F = false;
  if (bias && col_bias) return false;
  if (col_bias) {
    clamp ? store_plain<kAdd, F, T, T>(acc, C, ldc, nullptr, col_bias, lo, hi)
          : store_plain<kAdd, F, T, F>(acc, C, ldc, nullptr, col_bias, lo, hi);
  } else if (bias) {
    clamp ? store_plain<kAdd, T, F, T>(acc, C, ldc, bias, nullptr, lo, hi)
          : store_plain<kAdd, T, F, F>(acc, C, ldc, bias, nullptr, lo, hi);
  } else {
    clamp ? store_plain<kAdd, F, F, T>(acc, C, ldc, nullptr, nullptr, lo, hi)
          : store_plain<kAdd, F, F, F>(acc, C, ldc, nullptr, nullptr, lo, hi);
  }
  return true;
}

// acc = sum_k a[k] (x) b[k] over packed panels; then C = alpha * acc + (first ? beta * C : C)
// for the mr x nr corner that exists.
// The bias and the clamp apply on the last K block only (so that a product computed transposed,
// which adds the bias after all K blocks, gets the same bits).
inline __attribute__((always_inline)) void micro_kernel_impl(int64_t kc, const float* a,
                                                             const float* b, float* C, int64_t ldc,
                                                             float alpha, float beta,
                                                             const Store& st, int64_t mr,
                                                             int64_t nr) {
  const bool first = st.first;
  const int64_t b_step = st.b_step;
  v4f c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0};
  v4f c30 = {0}, c31 = {0};
#ifndef __wasm__
  v4f c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0};
#endif
  if (st.a_stride) {
    // A read in place: row r's k-th value at a[r * a_stride + k] (rows past mr repeat the last,
    // whose results are not stored), the same products in the same order as from a packed
    // panel. In wasm a small transformer's activations (16 x 64 times 64 x 192) were packed on
    // every MatMul: 7 % of its run at 2 threads. (The loops are written out as the packed ones
    // below: one set over an accessor of A, for both, ran SqueezeNet's and MobileNetV2's
    // products 3-4 % slower in wasm.)
    const int64_t rs = st.a_stride, last = mr - 1;
    const float* a0 = a;
    const float* a1 = a + std::min<int64_t>(1, last) * rs;
    const float* a2 = a + std::min<int64_t>(2, last) * rs;
    const float* a3 = a + std::min<int64_t>(3, last) * rs;
#ifndef __wasm__
    const float* a4 = a + std::min<int64_t>(4, last) * rs;
    const float* a5 = a + std::min<int64_t>(5, last) * rs;
#endif
    if (mr == 1) {  // (as below: row 0's chains only)
      for (int64_t k = 0; k < kc; ++k, b += b_step) {
        const v4f ar = splat(a0[k]);
        c00 = madd4(ar, load4(b), c00);
        c01 = madd4(ar, load4(b + 4), c01);
      }
    } else if (nr <= 4) {  // (one vector column)
      for (int64_t k = 0; k < kc; ++k, b += b_step) {
        const v4f b0 = load4(b);
        c00 = madd4(splat(a0[k]), b0, c00);
        c10 = madd4(splat(a1[k]), b0, c10);
        c20 = madd4(splat(a2[k]), b0, c20);
        c30 = madd4(splat(a3[k]), b0, c30);
#ifndef __wasm__
        c40 = madd4(splat(a4[k]), b0, c40);
        c50 = madd4(splat(a5[k]), b0, c50);
#endif
      }
    } else {
      // One k step of a whole tile: row r's chains += a_r[k] (x) b0, b1.
      auto step = [&](int64_t k, v4f b0, v4f b1) __attribute__((always_inline)) {
        v4f ar = splat(a0[k]);
        c00 = madd4(ar, b0, c00);
        c01 = madd4(ar, b1, c01);
        ar = splat(a1[k]);
        c10 = madd4(ar, b0, c10);
        c11 = madd4(ar, b1, c11);
        ar = splat(a2[k]);
        c20 = madd4(ar, b0, c20);
        c21 = madd4(ar, b1, c21);
        ar = splat(a3[k]);
        c30 = madd4(ar, b0, c30);
        c31 = madd4(ar, b1, c31);
#ifndef __wasm__
        ar = splat(a4[k]);
        c40 = madd4(ar, b0, c40);
        c41 = madd4(ar, b1, c41);
        ar = splat(a5[k]);
        c50 = madd4(ar, b0, c50);
        c51 = madd4(ar, b1, c51);
#endif
      };
      if (st.b_copy) {  // (as with a packed A below)
        float* out = st.b_copy;
        for (int64_t k = 0; k < kc; ++k, b += b_step, out += NR) {
          const v4f b0 = load4(b), b1 = load4(b + 4);
          store4(out, b0);
          store4(out + 4, b1);
          step(k, b0, b1);
        }
      } else {
        for (int64_t k = 0; k < kc; ++k, b += b_step) step(k, load4(b), load4(b + 4));
      }
    }
  } else if (mr == 1) {
    // One row (a classifier's batch-1 Gemm, 1 x 1000 x 1280): only row 0's two chains, half
    // the loads and a quarter of the multiply-adds of a whole tile; the same bits for that row.
    for (int64_t k = 0; k < kc; ++k) {
      const v4f ar = splat(a[0]);
      c00 = madd4(ar, load4(b), c00);
      c01 = madd4(ar, load4(b + 4), c01);
      a += MR;
      b += b_step;
    }
  } else if (nr <= 4) {
    // A last panel at most four columns wide (N = 49, 169, 196...) computes one vector column:
    // half the multiply-adds, the same bits.
    for (int64_t k = 0; k < kc; ++k) {
      const v4f b0 = load4(b);
      c00 = madd4(splat(a[0]), b0, c00);
      c10 = madd4(splat(a[1]), b0, c10);
      c20 = madd4(splat(a[2]), b0, c20);
      c30 = madd4(splat(a[3]), b0, c30);
#ifndef __wasm__
      c40 = madd4(splat(a[4]), b0, c40);
      c50 = madd4(splat(a[5]), b0, c50);
#endif
      a += MR;
      b += b_step;
    }
  } else {
    // One k step of a whole tile from a packed panel: row r's chains += a[r] (x) b0, b1.
    auto step = [&](v4f b0, v4f b1) __attribute__((always_inline)) {
      v4f ar = splat(a[0]);
      c00 = madd4(ar, b0, c00);
      c01 = madd4(ar, b1, c01);
      ar = splat(a[1]);
      c10 = madd4(ar, b0, c10);
      c11 = madd4(ar, b1, c11);
      ar = splat(a[2]);
      c20 = madd4(ar, b0, c20);
      c21 = madd4(ar, b1, c21);
      ar = splat(a[3]);
      c30 = madd4(ar, b0, c30);
      c31 = madd4(ar, b1, c31);
#ifndef __wasm__
      ar = splat(a[4]);
      c40 = madd4(ar, b0, c40);
      c41 = madd4(ar, b1, c41);
      ar = splat(a[5]);
      c50 = madd4(ar, b0, c50);
      c51 = madd4(ar, b1, c51);
#endif
      a += MR;
    };
    if (st.b_copy) {
      // The first tile of a panel read in place: its loads are also the panel's copy.
      float* out = st.b_copy;
      for (int64_t k = 0; k < kc; ++k, b += b_step, out += NR) {
        const v4f b0 = load4(b), b1 = load4(b + 4);
        store4(out, b0);
        store4(out + 4, b1);
        step(b0, b1);
      }
    } else {
      for (int64_t k = 0; k < kc; ++k, b += b_step) step(load4(b), load4(b + 4));
    }
  }
#ifdef __wasm__
  const v4f acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
#else
  const v4f acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
#endif
  const bool clamp = st.last && st.clamp;
  const v4f vlo = splat(st.lo), vhi = splat(st.hi);
  const float* res = st.last ? st.residual : nullptr;
  if (mr == MR && nr == NR && alpha == 1.0f && (!first || beta == 0.0f) && !res) {
    // A whole tile with no alpha, no beta and no residual stores without the epilogue's
    // per-vector tests: short-K products (Winograd's 16-36 products of 16-64 channels, 1x1
    // convolutions, a small transformer's MatMuls with their bias) spend as long storing a tile
    // as computing it. (A MatMul's column bias here too: 16 x 64 x 128-192 with it 6-9 % faster in
    // wasm; a residual was not measurably.)
    const float* bias = st.last ? st.bias : nullptr;
    const float* col_bias = st.last ? st.col_bias : nullptr;
    if (first ? store_plain<false>(acc, C, ldc, bias, col_bias, clamp, vlo, vhi)
              : store_plain<true>(acc, C, ldc, bias, col_bias, clamp, vlo, vhi))
      return;
  }
  const v4f va = splat(alpha), vb = splat(beta);
  // Four results of row r at `dst`: scaled, C added (or beta * C), bias, residual (row r's at
  // res_row), clamp.
  auto store_vec = [&](float* dst, v4f acc_rh, v4f vbias, const float* res_row, int64_t col) {
    v4f out = va * acc_rh;
    if (!first) {
      out += load4(dst);
    } else if (beta != 0.0f) {
      out += vb * load4(dst);
    }
    if (st.last && st.bias) out += vbias;
    if (st.last && st.col_bias) out += load4(st.col_bias + col);
    if (res_row) out += load4(res_row + col);
    if (clamp) out = clamp4(out, vlo, vhi);
    store4(dst, out);
  };
  if (mr == MR && nr == NR) {
    for (int64_t r = 0; r < MR; ++r) {
      const v4f vbias = splat(st.last && st.bias ? st.bias[r] : 0.0f);
      const float* res_row = res ? res + r * st.ldr : nullptr;
      for (int h = 0; h < 2; ++h) store_vec(C + r * ldc + 4 * h, acc[r][h], vbias, res_row, 4 * h);
    }
    return;
  }
  // A corner tile: the rows that exist, whole vectors where the columns allow, scalar for the
  // columns of a last partial vector.
  for (int64_t r = 0; r < mr; ++r) {
    float* row = C + r * ldc;
    const v4f vbias = splat(st.last && st.bias ? st.bias[r] : 0.0f);
    const float* res_row = res ? res + r * st.ldr : nullptr;
    for (int h = 0; h < 2; ++h) {
      const int64_t cols = std::min<int64_t>(nr - 4 * h, 4);
      if (cols <= 0) break;
      if (cols == 4) {
        store_vec(row + 4 * h, acc[r][h], vbias, res_row, 4 * h);
        continue;
      }
      float part[4];
      store4(part, acc[r][h]);
      for (int64_t c = 0; c < cols; ++c) {
        float& y = row[4 * h + c];
        float out = alpha * part[c];
        if (!first) {
          out += y;
        } else if (beta != 0.0f) {
          out += beta * y;
        }
        if (st.last && st.bias) out += st.bias[r];
        if (st.last && st.col_bias) out += st.col_bias[4 * h + c];
        if (res_row) out += res_row[4 * h + c];
        if (clamp) out = std::min(std::max(out, st.lo), st.hi);
        y = out;
      }
    }
  }
}

void micro_kernel(int64_t kc, const float* a, const float* b, float* C, int64_t ldc, float alpha,
                  float beta, const Store& st, int64_t mr, int64_t nr) {
  micro_kernel_impl(kc, a, b, C, ldc, alpha, beta, st, mr, nr);
}

// A run's next tile: its operands, its C and its Store's pointers one step on.
inline __attribute__((always_inline)) void next_tile(const TileSpan& sp, const float*& a,
                                                     const float*& b, float*& C, Store& s) {
  a += sp.a_step;
  b += sp.b_step;
  C += sp.c_step;
  if (s.bias) s.bias += sp.bias_step;
  if (s.col_bias) s.col_bias += sp.col_bias_step;
  if (s.residual) s.residual += sp.res_step;
}

// Whole tiles in one call: the tile's set-up in GemmCore::blocked (its Store, an indirect call
// with ten arguments) and the kernel's tests of the tile's size were a tenth of wasm's time in
// the short-K products (K = 16-64: a 4 x 8 tile is 16-64 multiply-add steps). The x86 kernels'
// runs are below (NAME_span).
void micro_kernel_span(int64_t kc, const float* a, const float* b, float* C, int64_t ldc,
                       float alpha, float beta, const Store& st, const TileSpan& sp) {
  Store s = st;
  for (int64_t t = 0; t < sp.count; ++t, next_tile(sp, a, b, C, s))
    micro_kernel_impl(kc, a, b, C, ldc, alpha, beta, s, MR, NR);
}

// One vector of results at `dst` (part of FXWASM_X86_KERNEL: uses its va, vb, vlo, vhi, vbias,
// res_row, first, beta, clamp and st): scaled, C added (or beta * C), bias, residual, clamp.
#define FXWASM_X86_STORE(VEC, dst, col, acc_rh, MUL, ADD, FMADD, LOADU, MAXP, MINP, STOREU) \
  do {                                                                                      \
    VEC out = MUL(va, acc_rh);                                                              \
    if (!first) {                                                                           \
      out = ADD(out, LOADU(dst));                                                           \
    } else if (beta != 0.0f) {                                                              \
      out = FMADD(vb, LOADU(dst), out);                                                     \
    }                                                                                       \
    if (st.last && st.bias) out = ADD(out, vbias);                                          \
    if (st.last && st.col_bias) out = ADD(out, LOADU(st.col_bias + (col)));                 \
    if (res_row) out = ADD(out, LOADU(res_row + (col)));                                    \
    if (clamp) out = MINP(vhi, MAXP(vlo, out)); /* (a NaN stays: see X86_STORE_TILE) */     \
    STOREU(dst, out);                                                                       \
  } while (false)

#ifdef FXWASM_X86_DISPATCH
// Software prefetch, in floats ahead, of the packed panels in the x86 kernels' full-height loops.
// Packed weights stream from memory once a model's weights outgrow the last-level cache (ResNet-18
// packs ~80 MB of them; this Intel host's L3 holds ~50 MB and reads at 20 GB/s, its memory at 10),
// and the hardware prefetchers did not keep ahead of a micro-kernel that multiplies each weight by
// only 16 to 49 columns: ResNet-18's 512 -> 512 layers took 3.0-3.2 ms inside the model against
// 1.8-2.0 alone. A packed A panel (a convolution's weights) takes 6 floats a step, so 512 is ~85
// steps ahead; a packed B panel (the weights of a transposed product or a MatMul) takes 2 x LANES a
// step, so 2048 is 64 steps with AVX-512 (128 with AVX2, not measured). One process alternating
// with and without (bench/README), by min / median: ResNet-18 0.87-0.88 / 0.90x at 1 and 2 threads,
// MobileNetV2 0.95-0.97 / 0.94-0.97x, SqueezeNet 0.96-0.98 / 0.95-0.98x, ConvNeXt-T 0.95x, ViT-B/16
// 0.93-0.95x, BERT-sized 0.90-0.92x. With AVX-512 a B step is two cache lines and both are
// prefetched (the second too: ViT-B/16 0.94-0.98x, BERT-sized 0.96-0.98x, MobileNetV2 0.98x,
// ResNet-18 0.99x). Operands read in place prefetch their current element (distance 0). The one-
// and two-row loop prefetches B too: a row vector times a packed weight (a CNN's classifier, 2-5 MB
// read once a run) streams it from memory (MobileNetV2 0.96-0.99x, ResNet-18 0.97-0.995x).
constexpr int64_t kPrefetchA = 512;
constexpr int64_t kPrefetchB = 2048;

// FXWASM_X86_KERNEL's whole-tile store when alpha is 1 and beta plays no part, without the
// general store's tests on every vector (as store_plain in the portable kernel; the same bits):
// acc (+ C when ADD_C) (+ the row bias) (clamped). GCC kept five tests and branches a vector in
// the general store, as many instructions as a short-K tile's multiply-adds. One process
// alternating, packed weights, bias and clamp: 144 x 3136 x 24 0.85x, 192 x 784 x 32 0.85x,
// 64 x 1544 x 27 0.89x, 384 x 196 x 64 0.92x, 3136 x 384 x 96 0.93x, 64 x 729 x 256 0.98x.
// The clamp is min(hi, max(lo, x)) with x second: maxps and minps return their second operand when
// either is a NaN or both are zeros, so a NaN stays a NaN and -0 stays -0, as in the element loops
// (std::max(x, lo) returns x unless x < lo), the AVX-512 corner store and clamp4. The other order
// turned a NaN into lo in whole tiles only.
#define FXWASM_X86_STORE_TILE(VEC, LANES, ADD_C, WITH_BIAS, WITH_CLAMP, SET1, ADD, LOADU, MAXP, \
                              MINP, STOREU)                                                     \
  do {                                                                                          \
    for (int64_t r = 0; r < MR; ++r) {                                                          \
      const VEC vbias = SET1(WITH_BIAS ? st.bias[r] : 0.0f);                                    \
      for (int h = 0; h < 2; ++h) {                                                             \
        float* dst = C + r * ldc + LANES * h;                                                   \
        VEC out = acc[r][h];                                                                    \
        if (ADD_C) out = ADD(out, LOADU(dst));                                                  \
        if (WITH_BIAS) out = ADD(out, vbias);                                                   \
        if (WITH_CLAMP) out = MINP(vhi, MAXP(vlo, out));                                        \
        STOREU(dst, out);                                                                       \
      }                                                                                         \
    }                                                                                           \
  } while (false)

// The four FXWASM_X86_STORE_TILE of one ADD_C, by the bias and the clamp.
#define FXWASM_X86_STORE_TILES(VEC, LANES, ADD_C, SET1, ADD, LOADU, MAXP, MINP, STOREU)            \
  do {                                                                                             \
    if (with_bias && clamp) {                                                                      \
      FXWASM_X86_STORE_TILE(VEC, LANES, ADD_C, true, true, SET1, ADD, LOADU, MAXP, MINP, STOREU);  \
    } else if (with_bias) {                                                                        \
      FXWASM_X86_STORE_TILE(VEC, LANES, ADD_C, true, false, SET1, ADD, LOADU, MAXP, MINP, STOREU); \
    } else if (clamp) {                                                                            \
      FXWASM_X86_STORE_TILE(VEC, LANES, ADD_C, false, true, SET1, ADD, LOADU, MAXP, MINP, STOREU); \
    } else {                                                                                       \
      FXWASM_X86_STORE_TILE(VEC, LANES, ADD_C, false, false, SET1, ADD, LOADU, MAXP, MINP,         \
                            STOREU);                                                               \
    }                                                                                              \
  } while (false)

// The first n (fewer than a vector's) results of one row of a corner tile at dst: alpha * acc,
// C added (or beta * C), the row's bias (*bias), the column bias and the residual at the same
// columns, the clamp. Element by element with eight lanes; with sixteen, in masked vector
// operations (the element loop's tests were most of a short-K corner tile's time): the
// arithmetic and the clamp of FXWASM_X86_STORE's whole vectors. (With alpha 1 and beta 0, every
// product the executor runs, the element loop's bits.)
__attribute__((target("avx2,fma"), always_inline)) inline void store_part(
    float* dst, __m256 acc, int64_t n, float alpha, float beta, bool first, const float* bias,
    const float* col_bias, const float* res, bool clamp, float lo, float hi) {
  float part[8];
  _mm256_storeu_ps(part, acc);
  for (int64_t j = 0; j < n; ++j) {
    float out = alpha * part[j];
    if (!first) {
      out += dst[j];
    } else if (beta != 0.0f) {
      out += beta * dst[j];
    }
    if (bias) out += *bias;
    if (col_bias) out += col_bias[j];
    if (res) out += res[j];
    if (clamp) out = std::min(std::max(out, lo), hi);
    dst[j] = out;
  }
}
__attribute__((target("avx512f"), always_inline)) inline void store_part(
    float* dst, __m512 acc, int64_t n, float alpha, float beta, bool first, const float* bias,
    const float* col_bias, const float* res, bool clamp, float lo, float hi) {
  const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
  __m512 out = _mm512_mul_ps(_mm512_set1_ps(alpha), acc);
  if (!first) {
    out = _mm512_add_ps(out, _mm512_maskz_loadu_ps(m, dst));
  } else if (beta != 0.0f) {
    out = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(m, dst), out);
  }
  if (bias) out = _mm512_add_ps(out, _mm512_set1_ps(*bias));
  if (col_bias) out = _mm512_add_ps(out, _mm512_maskz_loadu_ps(m, col_bias));
  if (res) out = _mm512_add_ps(out, _mm512_maskz_loadu_ps(m, res));
  // (the whole tiles' clamp, x second: a NaN stays a NaN, as in the element loop)
  if (clamp) out = min512(_mm512_set1_ps(hi), max512(_mm512_set1_ps(lo), out));
  _mm512_mask_storeu_ps(dst, m, out);
}

// One row r of a two-vector tile at step k of FXWASM_X86_KERNEL's loops: c_r0 and c_r1 (named
// locals) += a_r[k] * b0 and b1.
#define FXWASM_X86_ROW(r, BCAST, FMADD) \
  do {                                  \
    const auto ar = BCAST(a##r + ka);   \
    c##r##0 = FMADD(ar, b0, c##r##0);   \
    c##r##1 = FMADD(ar, b1, c##r##1);   \
  } while (false)
// All MR = 6 rows.
#define FXWASM_X86_ROWS6(BCAST, FMADD) \
  do {                                 \
    FXWASM_X86_ROW(0, BCAST, FMADD);   \
    FXWASM_X86_ROW(1, BCAST, FMADD);   \
    FXWASM_X86_ROW(2, BCAST, FMADD);   \
    FXWASM_X86_ROW(3, BCAST, FMADD);   \
    FXWASM_X86_ROW(4, BCAST, FMADD);   \
    FXWASM_X86_ROW(5, BCAST, FMADD);   \
  } while (false)

// The x86 kernels: MR x (2 vectors) accumulators kept in named locals (an accumulator array would
// be spilled to the stack on every k step, because the edge path takes its address), FMA, then
// the shared store with the epilogue.
#define FXWASM_X86_KERNEL(NAME, TARGET, VEC, LANES, SETZERO, LOADU, STOREU, BCAST, FMADD, MUL,     \
                          ADD, SET1, MAXP, MINP)                                                   \
  /* A tile's results (acc: MR rows x two vectors) into C, with the epilogue. */                   \
  inline __attribute__((always_inline, target(TARGET))) void NAME##_store(                         \
      const VEC(&acc)[MR][2], float* C, int64_t ldc, float alpha, float beta, const Store& st,     \
      int64_t mr, int64_t nr) {                                                                    \
    const bool first = st.first;                                                                   \
    const bool clamp = st.last && st.clamp;                                                        \
    const float* res = st.last ? st.residual : nullptr;                                            \
    if (mr == MR && nr == 2 * LANES) {                                                             \
      const VEC va = SET1(alpha), vb = SET1(beta), vlo = SET1(st.lo), vhi = SET1(st.hi);           \
      if (alpha == 1.0f && (!first || beta == 0.0f) && !res && !(st.last && st.col_bias)) {        \
        const bool with_bias = st.last && st.bias;                                                 \
        if (first) {                                                                               \
          FXWASM_X86_STORE_TILES(VEC, LANES, false, SET1, ADD, LOADU, MAXP, MINP, STOREU);         \
        } else {                                                                                   \
          FXWASM_X86_STORE_TILES(VEC, LANES, true, SET1, ADD, LOADU, MAXP, MINP, STOREU);          \
        }                                                                                          \
        return;                                                                                    \
      }                                                                                            \
      for (int64_t r = 0; r < MR; ++r) {                                                           \
        float* row = C + r * ldc;                                                                  \
        const VEC vbias = SET1(st.last && st.bias ? st.bias[r] : 0.0f);                            \
        const float* res_row = res ? res + r * st.ldr : nullptr;                                   \
        for (int h = 0; h < 2; ++h) {                                                              \
          FXWASM_X86_STORE(VEC, row + LANES * h, LANES * h, acc[r][h], MUL, ADD, FMADD, LOADU,     \
                           MAXP, MINP, STOREU);                                                    \
        }                                                                                          \
      }                                                                                            \
      return;                                                                                      \
    }                                                                                              \
    /* A corner tile: the rows that exist, whole vectors where the columns allow, scalar for  */   \
    /* the columns of a last partial vector.                                                   */  \
    const VEC va = SET1(alpha), vb = SET1(beta), vlo = SET1(st.lo), vhi = SET1(st.hi);             \
    for (int64_t r = 0; r < mr; ++r) {                                                             \
      float* row = C + r * ldc;                                                                    \
      const VEC vbias = SET1(st.last && st.bias ? st.bias[r] : 0.0f);                              \
      const float* res_row = res ? res + r * st.ldr : nullptr;                                     \
      for (int h = 0; h < 2; ++h) {                                                                \
        const int64_t cols = std::min<int64_t>(nr - LANES * h, LANES);                             \
        if (cols <= 0) break;                                                                      \
        if (cols == LANES) {                                                                       \
          FXWASM_X86_STORE(VEC, row + LANES * h, LANES * h, acc[r][h], MUL, ADD, FMADD, LOADU,     \
                           MAXP, MINP, STOREU);                                                    \
          continue;                                                                                \
        }                                                                                          \
        store_part(row + LANES * h, acc[r][h], cols, alpha, beta, first,                           \
                   st.last && st.bias ? st.bias + r : nullptr,                                     \
                   st.last && st.col_bias ? st.col_bias + LANES * h : nullptr,                     \
                   res_row ? res_row + LANES * h : nullptr, clamp, st.lo, st.hi);                  \
      }                                                                                            \
    }                                                                                              \
  }                                                                                                \
  inline __attribute__((always_inline, target(TARGET))) void NAME##_impl(                          \
      int64_t kc, const float* a, const float* b, float* C, int64_t ldc, float alpha, float beta,  \
      const Store& st, int64_t mr, int64_t nr) {                                                   \
    VEC c00 = SETZERO(), c01 = SETZERO(), c10 = SETZERO(), c11 = SETZERO();                        \
    VEC c20 = SETZERO(), c21 = SETZERO(), c30 = SETZERO(), c31 = SETZERO();                        \
    VEC c40 = SETZERO(), c41 = SETZERO(), c50 = SETZERO(), c51 = SETZERO();                        \
    const int64_t b_step = st.b_step;                                                              \
    /* Row r's k-th value at a_r[k * ks]: a packed panel (rows 1 apart, k MR apart), or A in */    \
    /* place (rows a_stride apart, k contiguous; rows past mr repeat the last one, whose     */    \
    /* results are not stored). */                                                                 \
    const int64_t rs = st.a_stride ? st.a_stride : 1, ks = st.a_stride ? 1 : MR;                   \
    const int64_t last = st.a_stride ? mr - 1 : MR - 1;                                            \
    const float* a0 = a;                                                                           \
    const float* a1 = a + std::min<int64_t>(1, last) * rs;                                         \
    const float* a2 = a + std::min<int64_t>(2, last) * rs;                                         \
    const float* a3 = a + std::min<int64_t>(3, last) * rs;                                         \
    const float* a4 = a + std::min<int64_t>(4, last) * rs;                                         \
    const float* a5 = a + std::min<int64_t>(5, last) * rs;                                         \
    /* Prefetch distances for packed panels (0 for operands read in place). */                     \
    const int64_t pf_a = st.a_stride ? 0 : kPrefetchA;                                             \
    const int64_t pf_b = b_step == 2 * LANES ? kPrefetchB : 0;                                     \
    /* A last panel at most LANES wide (N = 169: 9 columns) computes one vector column: half */    \
    /* the work, the same bits. */                                                                 \
    if (st.b_copy) {                                                                               \
      /* The first tile of a panel read in place: its loads are also the panel's copy. */          \
      float* out = st.b_copy;                                                                      \
      for (int64_t k = 0, ka = 0; k < kc; ++k, ka += ks) {                                         \
        const VEC b0 = LOADU(b), b1 = LOADU(b + LANES);                                            \
        __builtin_prefetch(b + 8 * b_step);                                                        \
        __builtin_prefetch(b + 8 * b_step + 2 * LANES - 1);                                        \
        STOREU(out, b0);                                                                           \
        STOREU(out + LANES, b1);                                                                   \
        out += 2 * LANES;                                                                          \
        FXWASM_X86_ROWS6(BCAST, FMADD);                                                            \
        b += b_step;                                                                               \
      }                                                                                            \
    } else if (nr <= LANES) {                                                                      \
      for (int64_t k = 0, ka = 0; k < kc; ++k, ka += ks) {                                         \
        const VEC b0 = LOADU(b);                                                                   \
        __builtin_prefetch(a0 + ka + pf_a);                                                        \
        __builtin_prefetch(b + pf_b);                                                              \
        c00 = FMADD(BCAST(a0 + ka), b0, c00);                                                      \
        c10 = FMADD(BCAST(a1 + ka), b0, c10);                                                      \
        c20 = FMADD(BCAST(a2 + ka), b0, c20);                                                      \
        c30 = FMADD(BCAST(a3 + ka), b0, c30);                                                      \
        c40 = FMADD(BCAST(a4 + ka), b0, c40);                                                      \
        c50 = FMADD(BCAST(a5 + ka), b0, c50);                                                      \
        b += b_step;                                                                               \
      }                                                                                            \
    } else if (mr <= 2) {                                                                          \
      /* A last tile of 1-2 rows (M = 32, 320; 49 pixels transposed) or 3-4 (M = 16, 64, */        \
      /* 160; 196 pixels) computes only those rows: the same bits. */                              \
      for (int64_t k = 0, ka = 0; k < kc; ++k, ka += ks) {                                         \
        const VEC b0 = LOADU(b), b1 = LOADU(b + LANES);                                            \
        /* (a row vector times a packed weight, the classifier: B streams from memory) */          \
        __builtin_prefetch(b + pf_b);                                                              \
        if (LANES == 16) __builtin_prefetch(b + pf_b + LANES);                                     \
        FXWASM_X86_ROW(0, BCAST, FMADD);                                                           \
        FXWASM_X86_ROW(1, BCAST, FMADD);                                                           \
        b += b_step;                                                                               \
      }                                                                                            \
    } else if (mr <= 4) {                                                                          \
      /* (Prefetching B as the other paths do: a transformer's few tokens (four: one 4-row */      \
      /* tile a panel) stream every weight from memory through this loop. BERT-sized at 4 */       \
      /* tokens 34 -> 27 ms at one thread, 17.7-21.3 -> 13.6-13.9 at two, alternating.) */         \
      for (int64_t k = 0, ka = 0; k < kc; ++k, ka += ks) {                                         \
        const VEC b0 = LOADU(b), b1 = LOADU(b + LANES);                                            \
        __builtin_prefetch(b + pf_b);                                                              \
        if (LANES == 16) __builtin_prefetch(b + pf_b + LANES);                                     \
        FXWASM_X86_ROW(0, BCAST, FMADD);                                                           \
        FXWASM_X86_ROW(1, BCAST, FMADD);                                                           \
        FXWASM_X86_ROW(2, BCAST, FMADD);                                                           \
        FXWASM_X86_ROW(3, BCAST, FMADD);                                                           \
        b += b_step;                                                                               \
      }                                                                                            \
    } else {                                                                                       \
      for (int64_t k = 0, ka = 0; k < kc; ++k, ka += ks) {                                         \
        const VEC b0 = LOADU(b), b1 = LOADU(b + LANES);                                            \
        __builtin_prefetch(a0 + ka + pf_a);                                                        \
        __builtin_prefetch(b + pf_b);                                                              \
        if (LANES == 16) __builtin_prefetch(b + pf_b + LANES); /* a step is two lines */           \
        FXWASM_X86_ROWS6(BCAST, FMADD);                                                            \
        b += b_step;                                                                               \
      }                                                                                            \
    }                                                                                              \
    const VEC acc[MR][2] = {                                                                       \
        {c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};                   \
    NAME##_store(acc, C, ldc, alpha, beta, st, mr, nr);                                            \
  }                                                                                                \
  __attribute__((target(TARGET))) void NAME(int64_t kc, const float* a, const float* b, float* C,  \
                                            int64_t ldc, float alpha, float beta, const Store& st, \
                                            int64_t mr, int64_t nr) {                              \
    NAME##_impl(kc, a, b, C, ldc, alpha, beta, st, mr, nr);                                        \
  }                                                                                                \
  __attribute__((target(TARGET))) void NAME##_span(int64_t kc, const float* a, const float* b,     \
                                                   float* C, int64_t ldc, float alpha, float beta, \
                                                   const Store& st, const TileSpan& sp) {          \
    Store s = st;                                                                                  \
    for (int64_t t = 0; t < sp.count; ++t, next_tile(sp, a, b, C, s))                              \
      NAME##_impl(kc, a, b, C, ldc, alpha, beta, s, MR, 2 * LANES);                                \
  }

// 6 x 16 on ymm registers (AVX2 + FMA).
FXWASM_X86_KERNEL(micro_kernel_avx2, "avx2,fma", __m256, 8, _mm256_setzero_ps, _mm256_loadu_ps,
                  _mm256_storeu_ps, _mm256_broadcast_ss, _mm256_fmadd_ps, _mm256_mul_ps,
                  _mm256_add_ps, _mm256_set1_ps, _mm256_max_ps, _mm256_min_ps)
// 6 x 32 on zmm registers (AVX-512F).
inline __attribute__((target("avx512f"))) __m512 bcast512(const float* p) {
  return _mm512_set1_ps(*p);
}
FXWASM_X86_KERNEL(micro_kernel_avx512, "avx512f", __m512, 16, _mm512_setzero_ps, _mm512_loadu_ps,
                  _mm512_storeu_ps, bcast512, _mm512_fmadd_ps, _mm512_mul_ps, _mm512_add_ps,
                  _mm512_set1_ps, max512, min512)

// Two whole tiles of packed A panels stacked (12 x 32: rows 0-5 from `a`, rows 6-11 from
// a + sp.a_half) against one B panel, in 24 accumulators: each B vector loaded serves twelve
// multiply-adds instead of six, so a B that streams from L2 (a short-K product's block, 96 x 196
// at 14x14, is 80 KB) feeds the FMA ports. Each result is the 6 x 32 kernel's sum (the same
// multiply-adds in the same order from zero) and store: the same bits. Over a whole 576 x 192 x 96
// product from L2, 6 x 32 tiles ran at 151-163 GFLOP/s and 12 x 32 at 178-191 (peak ~245).
// Chains of 16 1x1 convolutions, both binaries alternating, paired: 96 <-> 576 at 14x14 0.92x,
// 320 <-> 1280 at 7x7 0.89x; MobileNetV2 0.976x / 0.985x (one / two threads), EfficientNet-B0
// 0.954x / 0.959x, ResNet-18 0.968x / 0.973x, SqueezeNet 1.00x / 0.99x.

// Row r of accumulators acc (c: the first panel's, d: the second's) += a[k + r] * b0 and b1.
#define FXWASM_PAIR_ROW(acc, r, a, k)               \
  do {                                              \
    const __m512 ar = bcast512((a) + (k) + (r));    \
    acc##r##0 = _mm512_fmadd_ps(ar, b0, acc##r##0); \
    acc##r##1 = _mm512_fmadd_ps(ar, b1, acc##r##1); \
  } while (false)
#define FXWASM_PAIR_ROWS6(acc, a, k) \
  do {                               \
    FXWASM_PAIR_ROW(acc, 0, a, k);   \
    FXWASM_PAIR_ROW(acc, 1, a, k);   \
    FXWASM_PAIR_ROW(acc, 2, a, k);   \
    FXWASM_PAIR_ROW(acc, 3, a, k);   \
    FXWASM_PAIR_ROW(acc, 4, a, k);   \
    FXWASM_PAIR_ROW(acc, 5, a, k);   \
  } while (false)
__attribute__((target("avx512f"))) void micro_kernel_avx512_pairs(int64_t kc, const float* a,
                                                                  const float* b, float* C,
                                                                  int64_t ldc, float alpha,
                                                                  float beta, const Store& st,
                                                                  const TileSpan& sp) {
  constexpr int64_t kLanes = NR_AVX512 / 2;
  Store s = st;
  for (int64_t t = 0; t < sp.count; ++t, next_tile(sp, a, b, C, s)) {
    const __m512 z = _mm512_setzero_ps();
    __m512 c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z;
    __m512 c30 = z, c31 = z, c40 = z, c41 = z, c50 = z, c51 = z;
    __m512 d00 = z, d01 = z, d10 = z, d11 = z, d20 = z, d21 = z;
    __m512 d30 = z, d31 = z, d40 = z, d41 = z, d50 = z, d51 = z;
    const float* a0 = a;
    const float* a1 = a + sp.a_half;
    const float* bk = b;
    const int64_t b_step = s.b_step;
    const int64_t pf_b = b_step == NR_AVX512 ? kPrefetchB : 0;
    for (int64_t k = 0, ka = 0; k < kc; ++k, ka += MR) {
      const __m512 b0 = _mm512_loadu_ps(bk), b1 = _mm512_loadu_ps(bk + kLanes);
      __builtin_prefetch(a0 + ka + kPrefetchA);
      __builtin_prefetch(a1 + ka + kPrefetchA);
      __builtin_prefetch(bk + pf_b);
      __builtin_prefetch(bk + pf_b + kLanes);
      FXWASM_PAIR_ROWS6(c, a0, ka);
      FXWASM_PAIR_ROWS6(d, a1, ka);
      bk += b_step;
    }
    const __m512 top[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                               {c30, c31}, {c40, c41}, {c50, c51}};
    micro_kernel_avx512_store(top, C, ldc, alpha, beta, s, MR, NR_AVX512);
    const __m512 bottom[MR][2] = {{d00, d01}, {d10, d11}, {d20, d21},
                                  {d30, d31}, {d40, d41}, {d50, d51}};
    Store lower = s;
    if (lower.bias) lower.bias += MR;
    if (lower.residual) lower.residual += MR * lower.ldr;
    micro_kernel_avx512_store(bottom, C + MR * ldc, ldc, alpha, beta, lower, MR, NR_AVX512);
  }
}
#undef FXWASM_PAIR_ROWS6
#undef FXWASM_PAIR_ROW
#undef FXWASM_X86_KERNEL
#undef FXWASM_X86_ROWS6
#undef FXWASM_X86_ROW

#endif
#undef FXWASM_X86_STORE
#undef FXWASM_X86_STORE_TILE
#undef FXWASM_X86_STORE_TILES

}  // namespace

namespace {

// Rows [0, R) x vectors [0, NV) of a small_product tile.
template <int R, int NV>
inline __attribute__((always_inline)) void small_tile(int64_t K, const float* A, int64_t lda,
                                                      const float* B, int64_t ldb, float* C,
                                                      int64_t ldc, const float* col_bias,
                                                      bool clamp, v4f lo, v4f hi) {
  v4f acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < NV; ++h) acc[r][h] = splat(0.0f);
  for (int64_t k = 0; k < K; ++k) {
    v4f b[NV];
    for (int h = 0; h < NV; ++h) b[h] = load4(B + k * ldb + 4 * h);
    for (int r = 0; r < R; ++r) {
      const v4f a = splat(A[r * lda + k]);
      for (int h = 0; h < NV; ++h) acc[r][h] = madd4(a, b[h], acc[r][h]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < NV; ++h) {
      v4f out = acc[r][h];
      if (col_bias) out += load4(col_bias + 4 * h);
      if (clamp) out = clamp4(out, lo, hi);
      store4(C + r * ldc + 4 * h, out);
    }
}

template <int R>
inline __attribute__((always_inline)) void small_rows(int64_t N, int64_t K, const float* A,
                                                      int64_t lda, const float* B, int64_t ldb,
                                                      float* C, int64_t ldc, const float* col_bias,
                                                      bool clamp, v4f lo, v4f hi) {
  int64_t j = 0;
  for (; j + 8 <= N; j += 8)
    small_tile<R, 2>(K, A, lda, B + j, ldb, C + j, ldc, col_bias ? col_bias + j : nullptr, clamp,
                     lo, hi);
  for (; j < N; j += 4)
    small_tile<R, 1>(K, A, lda, B + j, ldb, C + j, ldc, col_bias ? col_bias + j : nullptr, clamp,
                     lo, hi);
}

}  // namespace

void small_product(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                   int64_t ldb, float* C, int64_t ldc, const float* col_bias, bool clamp, float lo,
                   float hi) {
  const v4f vlo = splat(lo), vhi = splat(hi);
  int64_t i = 0;
  for (; i + 4 <= M; i += 4)
    small_rows<4>(N, K, A + i * lda, lda, B, ldb, C + i * ldc, ldc, col_bias, clamp, vlo, vhi);
  for (; i < M; ++i)
    small_rows<1>(N, K, A + i * lda, lda, B, ldb, C + i * ldc, ldc, col_bias, clamp, vlo, vhi);
}

MicroKernel select_kernel(int64_t& nr_width, bool* a_in_place, SpanKernel* span,
                          SpanKernel* pairs) {
  if (a_in_place) *a_in_place = false;
  if (pairs) *pairs = nullptr;
#ifdef FXWASM_X86_DISPATCH
  if (cpu_has_avx512()) {
    nr_width = NR_AVX512;
    if (a_in_place) *a_in_place = true;
    if (span) *span = micro_kernel_avx512_span;
    if (pairs) *pairs = micro_kernel_avx512_pairs;
    return micro_kernel_avx512;
  }
  if (cpu_has_avx2_fma()) {
    nr_width = NR_AVX2;
    if (a_in_place) *a_in_place = true;
    if (span) *span = micro_kernel_avx2_span;
    return micro_kernel_avx2;
  }
#endif
  nr_width = NR;
  if (a_in_place) *a_in_place = true;
  if (span) *span = micro_kernel_span;
  return micro_kernel;
}

}  // namespace fx::kernels::gemm_micro
