// SGEMM in the GotoBLAS/BLIS layout: for each KC-deep slice of K, B's slice is packed into
// NR-wide column panels and, per MC-high block of rows, A's block into MR-high row panels; a
// register-blocked MR x NR micro-kernel (gemm_micro.cpp) then runs over contiguous panel memory.
// The packing itself is gemm_pack.cpp's.
#include "kernels/gemm.h"
#include "kernels/cpu.h"
#include "kernels/gemm_micro.h"
#include "kernels/gemm_pack.h"
#include "kernels/scratch.h"
#include "kernels/simd.h"
#include "kernels/thread_pool.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace fx::kernels {

namespace {

using gemm_micro::MicroKernel;
using gemm_micro::MR;
using gemm_micro::NR;
using gemm_micro::select_kernel;
using gemm_micro::Store;
using gemm_pack::at_a;
using gemm_pack::at_b;
using gemm_pack::pack_a;
using gemm_pack::pack_b;
using gemm_pack::pack_panel;
using gemm_pack::transpose_rows;

// A product is split across threads from this many flops (about 10 us on one core), each thread
// taking at least this many columns.
constexpr double kParallelMinFlops = 1e6;
constexpr int64_t kParallelMinColumns = 64;

// The depth of K slices: C is reloaded and stored once a slice, and a slice x 32 panel of B streams
// from L2 (or L1) across the row tiles. Where 512-bit operations run whole (an Intel core: two
// FMA ports take a 32-wide panel's k step in a cycle; its L1d holds 48 KB), slices of 256 (a 32 KB
// panel, read from L1 by the row tiles after the first) were faster where the weights stream from
// memory. One process per setting alternating, medians, 384 -> 256: BERT-sized 183.0 -> 175.6 ms
// (0.96x; 0.98x at two threads), ViT-B/16 0.987x, ConvNeXt-T 0.99x, ResNet-18, MobileNetV2,
// SqueezeNet and EfficientNet-B0 1.00x; a chain of 40 BERT-sized MatMuls (377 MB) 0.96x. Slices of
// 192 matched 256 on the chain and swung between 0.95x and 1.00x on BERT-sized from build to build.
// On a Zen 4 (32 KB L1d, 512-bit operations in two halves) 256 was 1-5 % slower than 384 (ViT-B/16
// 0.971x, ConvNeXt-T 0.949x, BERT-sized 0.983x, ResNet-18 0.981x): 384 elsewhere.
int64_t k_slice() {
#ifdef FXWASM_X86_DISPATCH
  static const int64_t kc = cpu_has_full_width_avx512() ? 256 : 384;
  return kc;
#else
  return 384;
#endif
}
// sgemm's direct path for small products (wasm): M, N and K at most this (one K block).
constexpr int64_t kSmallProduct = 64;
constexpr int64_t MC = 96;  // an MC x KC block of A (144 KB) stays in L2
// Rows a block when A is read in place (no packed block to keep in L2; its KC-long row pieces, 384
// KB for 256 rows, still fit): a transformer's 128-197 rows make one block, so each packed B block
// (up to KC x NC, 3 MB) is read once per K slice instead of twice, from the last-level cache.
// One process alternating 96 / 256: BERT-sized 0.95-0.97x (1 thread), 0.98-0.99x (2),
// ViT-B/16 0.96-0.98x, ConvNeXt-T (3136 rows) 0.98-0.99x, the zoo's CNNs 0.99-1.00x.
constexpr int64_t MC_DIRECT_A = 256;
constexpr int64_t NC = 2048;
// Columns a block of C in a product of a prepacked B (a transformer's weights) whose K takes
// several slices: C's block (197 x 256 floats, 200 KB) stays in L2 from one K slice to the next,
// and B's block (a slice of 256 columns, 256 KB) from one row block to the next, where blocks of
// NC columns sent 197 x 2048 floats of C (1.6 MB) to L3 and back between slices and read a 2 MB
// slice of B from L3 for each row block. Alone, B prepacked, the two alternating, medians of
// five to seven pairs: 197 x 3072 x 768 0.93x, 197 x 768 x 3072 0.94x, 197 x 2304 x 768 0.93x,
// 197 x 768 x 768 0.90x (128 columns: 0.92-0.98x); 512 x 3072 x 768 0.87-0.89x, 1024 x 3072 x 768
// 0.80x, 2048 x 3072 x 768 0.85-0.88x, 1024 x 768 x 768 0.93x.
constexpr int64_t kPackedBColumns = 256;
// The most floats of A, its rows padded to whole row tiles, that GemmCore::blocked packs whole for
// the column blocks (8 MB: about 2,000 rows of K = 1024, 670 of K = 3072); past it, the blocks of
// NC columns, A packed per slice.
constexpr int64_t kWholeAFloats = int64_t{1} << 21;
// The shortest K and narrowest N of a product whose A GemmCore::blocked packs for a pair kernel
// rather than reading it in place.
constexpr int64_t kPairsPackAMinK = 256;
constexpr int64_t kPairsPackAMinN = 256;
constexpr int64_t kDirectBMaxRows = 64;           // see direct_b in sgemm
constexpr int64_t kTransposedMinK = 160;          // see sgemm_prefers_transposed
constexpr int64_t kTransposedMinKPortable = 256;  // (wasm, and x86 without AVX2: not remeasured)
constexpr int64_t kShortKBlockFloats = 64 * NC;   // see the tile order in GemmCore::blocked
constexpr int64_t kCopiedPanelMinK = 96;          // see direct_b in GemmCore::blocked
// The fewest row tiles a block needs for the panel-by-panel loop to fetch the next prepacked B
// panel a share before each tile (see GemmCore::blocked); with fewer (up to 24 rows) a share is a
// burst of 128-512 lines. Alternating processes: MobileNetV2's 1 x 1280 x 1000 Gemm in the model
// 241 -> 204 us; BERT-sized at 4 tokens (every product one row tile, 340 MB of weights from
// memory) 35.7 -> 32.2 ms at one thread and 18.1 -> 16.4 at two; at 12 and 24 tokens (two and
// four tiles) within noise. From 5 tiles on (7x7 products: 9) the loop fetches as before.
constexpr int64_t kMinTilesToFetchNextPanel = 5;

// sum_k a[k] * b[k], eight at a time in two chains, then the tail.
inline float dot(const float* a, const float* b, int64_t K) {
  v4f s0 = splat(0.0f), s1 = splat(0.0f);
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    s0 += load4(a + k) * load4(b + k);
    s1 += load4(a + k + 4) * load4(b + k + 4);
  }
  const v4f s = s0 + s1;
  float t = s[0] + s[1] + s[2] + s[3];
  for (; k < K; ++k) t += a[k] * b[k];
  return t;
}

}  // namespace

bool sgemm_row_scale_keeps_bits(int64_t M, int64_t N, int64_t K) {
  return M > 1 && N > 1 && (M > kSmallProduct || N > kSmallProduct || K > kSmallProduct);
}

bool sgemm_prefers_transposed(int64_t M, int64_t N, int64_t K) {
  // Transposing the result costs about as much as the better fill gains when K is short, and
  // with at most kDirectBMaxRows rows the plain product reads B in place, which the transposed
  // one cannot. Medians of per-node timings, once row tails ran short: MobileNetV2's 960 x 49 x
  // 160 13 % faster transposed, but K = 64, 96 and 128 8-18 % slower (K = 64 was 25 % slower
  // and 160 even when every row tile cost six rows; 320 8 % and 4608 21 % faster).
  int64_t width = NR;
  select_kernel(width);
  const bool x86 = width > NR;
  if (M <= kDirectBMaxRows || N <= 0 || K < (x86 ? kTransposedMinK : kTransposedMinKPortable))
    return false;
  // The share of computed tile cells that are results. The x86 kernels compute a last column
  // panel at most half their width as half a tile, and a last row tile of 1-2 (3-4) rows as a
  // third (two thirds) of one.
  auto fill = [](int64_t n, int64_t step, int64_t tail_cost) {
    const int64_t tail = n % step;
    return static_cast<double>(n) / static_cast<double>(n - tail + (tail ? tail_cost : 0));
  };
  auto cols = [&](int64_t n) {
    const int64_t tail = n % width;
    return fill(n, width, x86 && 2 * tail <= width ? width / 2 : width);
  };
  auto rows = [&](int64_t n) {
    const int64_t tail = n % MR;
    return fill(n, MR, !x86 ? MR : tail <= 2 ? 2 : tail <= 4 ? 4 : MR);
  };
  // (A margin for transposing the result: SqueezeNet's 1000 x 169 classifier, 1.08x better filled
  // before half panels, ran 6 % faster transposed.)
  return cols(M) * rows(N) > 1.05 * rows(M) * cols(N);
}

PackedOperand PackedOperand::left(bool trans_a, int64_t M, int64_t K, const float* A, int64_t lda,
                                  int64_t n_hint) {
  if (n_hint > 0 && sgemm_prefers_transposed(M, n_hint, K)) {
    // op(A)^T (K x M) as a right operand: A is its transpose as stored unless trans_a.
    PackedOperand p = right(!trans_a, K, M, A, lda);
    p.left_ = true;
    p.transposed_ = true;
    p.rows_ = M;
    p.cols_ = K;
    return p;
  }
  PackedOperand p;
  p.left_ = true;
  p.rows_ = M;
  p.cols_ = K;
  p.padded_ = (M + MR - 1) / MR * MR;
  p.data_ = aligned_floats(p.buf_, p.padded_ * K);
  // The slice at k0 holds the whole height: the MC blocks sgemm walks are consecutive in it.
  const int64_t KC = k_slice();
  for (int64_t k0 = 0; k0 < K; k0 += KC) {
    const int64_t kc = std::min(KC, K - k0);
    pack_a(A, lda, trans_a, 0, M, k0, kc, p.data_ + k0 * p.padded_);
  }
  return p;
}

namespace {

// Rows [r0, r1) and columns [c0, c1) of store_transposed (r0 a multiple of 4).
void store_transposed_rows(const float* T, int64_t M, float* C, int64_t ldc, float beta,
                           const GemmEpilogue& ep, bool clamp, int64_t r0, int64_t r1, int64_t c0,
                           int64_t c1) {
  const float *bias = ep.row_bias, *col_bias = ep.col_bias, *res = ep.residual;
  const float lo = ep.lo, hi = ep.hi;
  const int64_t ldr = ep.ldr;
  auto finish = [&](float v, int64_t i, int64_t j, float c) {
    if (beta != 0.0f) v += beta * c;
    if (bias) v += bias[i];
    if (col_bias) v += col_bias[j];
    if (res) v += res[i * ldr + j];
    return clamp ? std::min(std::max(v, lo), hi) : v;
  };
  const v4f vlo = splat(lo), vhi = splat(hi), vbeta = splat(beta);
  // The 4 x 4 blocks of whole groups of four rows, with the epilogue's terms fixed for the whole
  // loop (tested once, not on every vector: the tests were as many instructions as the
  // transposes).
  auto blocks = [&](auto kBeta, auto kBias, auto kColBias, auto kRes, auto kClamp)
      __attribute__((always_inline)) {
    for (int64_t i = r0; i + 4 <= r1; i += 4) {
      int64_t j = c0;
      v4f vbias[4];
      for (int k = 0; k < 4; ++k) vbias[k] = splat(kBias ? bias[i + k] : 0.0f);
      for (; j + 4 <= c1; j += 4) {
        v4f col[4] = {load4(T + j * M + i), load4(T + (j + 1) * M + i), load4(T + (j + 2) * M + i),
                      load4(T + (j + 3) * M + i)};
        transpose4x4(col[0], col[1], col[2], col[3]);
        for (int k = 0; k < 4; ++k) {
          float* c = C + (i + k) * ldc + j;
          v4f v = col[k];
          if (kBeta) v += vbeta * load4(c);
          if (kBias) v += vbias[k];
          if (kColBias) v += load4(col_bias + j);
          if (kRes) v += load4(res + (i + k) * ldr + j);
          if (kClamp) {
            v = v < vlo ? vlo : v;
            v = v > vhi ? vhi : v;
          }
          store4(c, v);
        }
      }
      for (; j < c1; ++j)
        for (int64_t k = i; k < i + 4; ++k)
          C[k * ldc + j] = finish(T[j * M + k], k, j, C[k * ldc + j]);
    }
  };
  using Yes = std::true_type;
  using No = std::false_type;
  if (beta != 0.0f || col_bias) {  // (no layer of the zoo's models: tested per vector)
    blocks(beta != 0.0f, bias != nullptr, col_bias != nullptr, res != nullptr, clamp);
  } else if (bias && res) {
    clamp ? blocks(No{}, Yes{}, No{}, Yes{}, Yes{}) : blocks(No{}, Yes{}, No{}, Yes{}, No{});
  } else if (bias) {
    clamp ? blocks(No{}, Yes{}, No{}, No{}, Yes{}) : blocks(No{}, Yes{}, No{}, No{}, No{});
  } else if (res) {
    clamp ? blocks(No{}, No{}, No{}, Yes{}, Yes{}) : blocks(No{}, No{}, No{}, Yes{}, No{});
  } else {
    clamp ? blocks(No{}, No{}, No{}, No{}, Yes{}) : blocks(No{}, No{}, No{}, No{}, No{});
  }
  for (int64_t i = std::max(r0, r1 - (r1 - r0) % 4); i < r1; ++i)
    for (int64_t j = c0; j < c1; ++j) C[i * ldc + j] = finish(T[j * M + i], i, j, C[i * ldc + j]);
}

// C[i, j] = T[j, i] (+ beta * C[i, j]) + bias[i] + col_bias[j] + residual[i, j], clamped: T is
// N x M (row stride M). Four by four blocks transposed in registers, in the order of the
// micro-kernels' stores (the same bits), groups of four rows split across the threads (>= 16K
// floats a chunk). On the caller alone it was the serial tail of every transposed product (the
// 7x7 and 14x14 layers of MobileNetV2, ResNet-18's last ones): at two threads, alone, MobileNetV2's
// 960 x 49 x 160 95.1 -> 90.0 us, 160 x 49 x 960 and 96 x 196 x 576 0.98-0.99x.
void store_transposed(const float* T, int64_t M, int64_t N, float* C, int64_t ldc, float beta,
                      const GemmEpilogue& ep, bool clamp) {
  const int64_t groups = (M + 3) / 4;
  parallel_for_inline(
      groups, std::max<int64_t>(1, 4096 / std::max<int64_t>(N, 1)), [&](int64_t g0, int64_t g1) {
        store_transposed_rows(T, M, C, ldc, beta, ep, clamp, 4 * g0, std::min(M, 4 * g1), 0, N);
      });
}

}  // namespace

// Called by GemmCore::blocked on the thread that computed C's columns [jb, je) and rows [ib, ie)
// (all of C when the product was not split), once that block is final.
struct BlockDone {
  void (*fn)(const void* ctx, int64_t jb, int64_t je, int64_t ib, int64_t ie);
  const void* ctx;
};

struct GemmCore {
  static void blocked(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                      const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                      int64_t ldc, float beta, const GemmEpilogue& ep, bool clamp,
                      const PackedOperand* packed_a, const PackedOperand* packed_b,
                      const BlockDone* done = nullptr, const float* a_col_scale = nullptr,
                      const float* b_row_scale = nullptr);
};

PackedOperand PackedOperand::right(bool trans_b, int64_t K, int64_t N, const float* B,
                                   int64_t ldb) {
  PackedOperand p = right_over(K, N, nullptr);
  p.data_ = aligned_floats(p.buf_, p.padded_ * K);
  const int64_t KC = k_slice();
  for (int64_t k0 = 0; k0 < K; k0 += KC) {
    const int64_t kc = std::min(KC, K - k0);
    pack_b(B, ldb, trans_b, k0, kc, 0, N, p.width_, p.data_ + k0 * p.padded_);
  }
  return p;
}

int64_t PackedOperand::right_floats(int64_t K, int64_t N) {
  return right_over(K, N, nullptr).padded_ * K;
}

PackedOperand PackedOperand::right_over(int64_t K, int64_t N, float* data) {
  PackedOperand p;
  p.left_ = false;
  p.rows_ = K;
  p.cols_ = N;
  int64_t width = NR;
  select_kernel(width);
  p.padded_ = (N + width - 1) / width * width;
  p.width_ = width;
  p.data_ = data;
  return p;
}

float* PackedOperand::right_at(int64_t k, int64_t j) const {
  // (block(k0, kc, j - j % width_), then row k - k0 of that panel)
  const int64_t KC = k_slice();
  const int64_t k0 = k / KC * KC, kc = std::min(KC, rows_ - k0);
  return data_ + k0 * padded_ + (j - j % width_) * kc + (k - k0) * width_ + j % width_;
}

void PackedOperand::unpack_right(bool trans_b, float* B, int64_t ldb) const {
  if (left_) throw std::logic_error("PackedOperand::unpack_right: a left operand");
  // The inverse of pack_b's loops: panels of width_ columns per KC-deep slice.
  const int64_t KC = k_slice();
  for (int64_t k0 = 0; k0 < rows_; k0 += KC) {
    const int64_t kc = std::min(KC, rows_ - k0);
    const float* panel = data_ + k0 * padded_;
    for (int64_t p = 0; p < cols_; p += width_, panel += kc * width_) {
      const int64_t cols = std::min(width_, cols_ - p);
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t row = k0 + k, col = p + c;
          B[trans_b ? col * ldb + row : row * ldb + col] = panel[k * width_ + c];
        }
    }
  }
}

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           const GemmEpilogue* ep, const PackedOperand* packed_a, const PackedOperand* packed_b,
           const float* b_row_scale) {
  if (M <= 0 || N <= 0) return;
  const GemmEpilogue none;
  const GemmEpilogue& e = ep ? *ep : none;
  const float lo = e.lo, hi = e.hi;
  const bool clamp = lo > -__builtin_inff() || hi < __builtin_inff();
  const float* bias = e.row_bias;
  const float* col_bias = e.col_bias;
  const float* res = e.residual;
  if (K <= 0 || alpha == 0.0f) {  // C = beta * C (+ biases and residual, clamped)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        float out = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
        if (bias) out += bias[i];
        if (col_bias) out += col_bias[j];
        if (res) out += res[i * e.ldr + j];
        if (clamp) out = std::min(std::max(out, lo), hi);
        C[i * ldc + j] = out;
      }
    return;
  }
  // (A scaled B takes the blocked path, which scales its panels as it packs them.)
  if (M == 1 && !trans_a && B && !b_row_scale) {
    // A row vector times B: no packing (which would cost as much as the product itself).
    // C[j] = alpha * sum_k A[k] * op(B)[k, j] (+ beta * C[j] + bias[0], clamped).
    ScratchBuffer& acc = scratch(Scratch::GemmAcc);
    acc.assign(static_cast<size_t>(N), 0.0f);
    if (trans_b) {  // B is N x K: one dot product per output, along contiguous rows
      for (int64_t j = 0; j < N; ++j) acc[j] = dot(A, B + j * ldb, K);
    } else {  // B is K x N: accumulate scaled rows
      for (int64_t k = 0; k < K; ++k) {
        const float a = A[k];
        const float* b = B + k * ldb;
        for (int64_t j = 0; j < N; ++j) acc[j] += a * b[j];
      }
    }
    for (int64_t j = 0; j < N; ++j) {
      float out = alpha * acc[j];
      if (beta != 0.0f) out += beta * C[j];
      if (bias) out += bias[0];
      if (col_bias) out += col_bias[j];
      if (res) out += res[j];
      if (clamp) out = std::min(std::max(out, lo), hi);
      C[j] = out;
    }
    return;
  }
  if (N == 1 && !trans_a && A && B && !packed_a && !b_row_scale) {
    // A matrix times a column vector (a 1x1 convolution on a 1x1 image: EfficientNet's
    // squeeze-and-excitation layers, a classifier convolution after global pooling): one dot
    // product per output along A's contiguous rows, rows split across threads, no packing.
    // Through the blocked loops each call packed all of A for one column of a 16- or 32-wide
    // tile. Alone, median of 3000, one thread: 1152 -> 48 35 -> 5.7 us, 48 -> 1152 21 -> 8.0,
    // 1280 -> 1000 461 -> 194; EfficientNet-B0's 32 such layers 0.53 -> 0.35 ms in the model (its
    // weights come from memory there), the model 0.99x at one thread and 0.98x at two (paired).
    const float* b = B;
    if (!trans_b && ldb != 1) {  // a strided column: gathered first
      ScratchBuffer& col = scratch(Scratch::GemmAcc);
      col.resize(static_cast<size_t>(K));
      for (int64_t k = 0; k < K; ++k) col[static_cast<size_t>(k)] = B[k * ldb];
      b = col.data();
    }
    const auto grain = static_cast<int64_t>(kParallelMinFlops / (2.0 * static_cast<double>(K)));
    parallel_for_inline(M, std::max<int64_t>(1, grain), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        float out = alpha * dot(A + i * lda, b, K);
        float& c = C[i * ldc];
        if (beta != 0.0f) out += beta * c;
        if (bias) out += bias[i];
        if (col_bias) out += col_bias[0];
        if (res) out += res[i * e.ldr];
        if (clamp) out = std::min(std::max(out, lo), hi);
        c = out;
      }
    });
    return;
  }
#ifdef __wasm__
  // A product this small (attention's per-head 16 x 16 x 16 and 64 x 64 x 64 and less) spent
  // more in the blocked loops' set-up than in its multiply-adds: 3-4 us for 4 heads of 16 x 16 x
  // 16 in the tiny transformer. Computed directly, the same bits (the portable kernel's sums and
  // store; wasm has no other kernel). A transposed B is transposed first (4 x 4 blocks).
  if (!trans_a && !packed_a && !packed_b && !b_row_scale && alpha == 1.0f && beta == 0.0f &&
      !bias && !res && N % 4 == 0 && M <= kSmallProduct && N <= kSmallProduct &&
      K <= kSmallProduct && B) {
    const float* b = B;
    int64_t ldb_small = ldb;
    if (trans_b) {  // B is N x K: into K x N
      ScratchBuffer& t = scratch(Scratch::GemmPackedB);
      t.resize(static_cast<size_t>(K * N));
      float* bt = t.data();
      transpose_rows(B, ldb, K, N, bt, N);
      b = bt;
      ldb_small = N;
    }
    gemm_micro::small_product(M, N, K, A, lda, b, ldb_small, C, ldc, col_bias, clamp, lo, hi);
    return;
  }
#endif
  if (packed_a && (!packed_a->is_left() || packed_a->rows() != M || packed_a->cols() != K))
    packed_a = nullptr;  // not this product's A: pack as usual
  if (packed_b &&
      (packed_b->is_left() || packed_b->rows() != K || packed_b->cols() != N || b_row_scale))
    packed_b = nullptr;
  if (!B && (!packed_b || (packed_a && packed_a->transposed_)))
    throw std::logic_error("sgemm: B is null and packed_b is not this product's B");
  if (packed_a && packed_a->transposed_) {
    // C^T = op(B)^T op(A)^T (N x M) into a buffer, with op(A)^T the packed right operand; then
    // C from its transpose, with beta, the bias and the clamp.
    // Each thread stores the part of C it computed as soon as it has (rows of C are T's columns):
    // after the product, the store alone ran on one thread where its 4 x 4 groups were fewer than
    // two chunks (576 -> 96 at 14x14, 960 -> 320 at 7x7), and the other waited.
    ScratchBuffer& t_buf = scratch(Scratch::GemmTranspose);
    t_buf.resize(static_cast<size_t>(N * M));
    float* T = t_buf.data();
    struct Ctx {
      const float* T;
      int64_t M, N;
      float* C;
      int64_t ldc;
      float beta;
      const GemmEpilogue* e;
      bool clamp;
    } ctx{T, M, N, C, ldc, beta, &e, clamp};
    const BlockDone done{[](const void* p, int64_t jb, int64_t je, int64_t ib, int64_t ie) {
                           const Ctx& c = *static_cast<const Ctx*>(p);
                           if (jb == 0 && je == c.M && ib == 0 && ie == c.N)
                             store_transposed(c.T, c.M, c.N, c.C, c.ldc, c.beta, *c.e, c.clamp);
                           else
                             store_transposed_rows(c.T, c.M, c.C, c.ldc, c.beta, *c.e, c.clamp, jb,
                                                   je, ib, ie);
                         },
                         &ctx};
    GemmCore::blocked(!trans_b, !trans_a, N, M, K, alpha, B, ldb, A, lda, T, M, 0.0f, none, false,
                      nullptr, packed_a, &done, b_row_scale);
    return;
  }
  GemmCore::blocked(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, C, ldc, beta, e, clamp,
                    packed_a, packed_b, nullptr, nullptr, b_row_scale);
}

// The blocked loops of sgemm (the operands' packings checked by the caller).
void GemmCore::blocked(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                       const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                       int64_t ldc, float beta, const GemmEpilogue& ep, bool clamp,
                       const PackedOperand* packed_a, const PackedOperand* packed_b,
                       const BlockDone* done, const float* a_col_scale, const float* b_row_scale) {
  const float *bias = ep.row_bias, *col_bias = ep.col_bias, *res = ep.residual;
  const int64_t KC = k_slice();
  int64_t nr_width = NR;
  bool a_in_place = false;
  gemm_micro::SpanKernel span_kernel = nullptr, pair_kernel = nullptr;
  const MicroKernel kernel = select_kernel(nr_width, &a_in_place, &span_kernel, &pair_kernel);
  // A row-major A that was not packed ahead of time (activations) is read in place: packing it
  // on every call cost 4 % of ConvNeXt-T's time (M = 3136 rows, K = 96), and six row streams
  // prefetch as well as one panel does.
  // (A scaled operand is scaled as it is packed: never read in place, nor packed ahead.)
  if (a_col_scale) packed_a = nullptr;
  if (b_row_scale) packed_b = nullptr;
  // Except where the CPU has a pair kernel (12 x 32 tiles, which read A from packed panels) and
  // the product is long and wide enough that packing A per call is a small share: a transformer's
  // projections (K and N of 256 and more). Each B vector loaded then serves twelve multiply-adds
  // instead of six, and A comes from one contiguous panel instead of six rows. On a model-207
  // Xeon, B prepacked, the two builds alternating, medians of 8-14 pairs: 128 x 768 x 3072 and
  // 128 x 3072 x 768 0.85x, 197 x 2304 x 768 0.90x, 128 and 197 x 768 x 768 0.94-0.95x, 196 x
  // 1536 x 384 0.94x, 196 x 384 x 1536 0.96x. The gain is in that host's slow phases, in which the
  // six-row kernel ran at half its speed (the FMA peak unchanged); in its fast ones both ran at
  // ~150 GFLOP/s. Packed or read in place, each element is the same sum in the same order.
  const bool pack_a_for_pairs = pair_kernel && a_in_place && !packed_a && !trans_a &&
                                !a_col_scale && M >= 2 * MR && K >= kPairsPackAMinK &&
                                N >= kPairsPackAMinN;
  const bool direct_a = a_in_place && !packed_a && !trans_a && !a_col_scale && !pack_a_for_pairs;
  // Rows a block: MC of weights packed ahead, or of an A packed (or read) here, as many as
  // MC_DIRECT_A, so that each block of a packed B is read once per K slice.
  const int64_t mc_step = direct_a || pack_a_for_pairs ? MC_DIRECT_A : MC;
  // Columns [jb, je) of C, on this thread: threads split C by whole panels of nr_width columns,
  // and every element keeps its K order, so any split gives the bits one thread gives.
  // Columns [jb, je) and rows [ib, ie) of C (ib a multiple of MR: the tiles one thread computes).
  auto block_of_c = [&](int64_t jb, int64_t je, int64_t ib, int64_t ie) {
    // Panels start on a 64-byte boundary: malloc only promises 8 or 16 bytes (wasm), and loads
    // that straddle cache lines made whole runs 30-60% slower depending on where the heap put them.
    ScratchBuffer& packed_a_buf = scratch(Scratch::GemmPackedA);
    ScratchBuffer& packed_b_buf = scratch(Scratch::GemmPackedB);
    // With a prepacked B and K over several slices, columns go in blocks of kPackedBColumns (see
    // there), all K slices and row blocks of a column block before the next; A, packed for the
    // pair kernel, is packed whole once (each column block reads all of it) rather than per slice
    // of every block, where it takes at most kWholeAFloats.
    const int64_t mc_padded = (std::min(mc_step, ie - ib) + MR - 1) / MR * MR;  // a block's rows
    const int64_t a_rows = (ie - ib + mc_step - 1) / mc_step * mc_padded;       // a slice's
    const bool a_whole = pack_a_for_pairs && packed_b && K > KC && je - jb > kPackedBColumns &&
                         a_rows * K <= kWholeAFloats;
    const int64_t nc_step = a_whole ? kPackedBColumns : NC;
    float* a_buf = packed_a || direct_a ? nullptr
                   : a_whole            ? aligned_floats(packed_a_buf, a_rows * K)
                                        : aligned_floats(packed_a_buf, mc_padded * KC);
    // Row block i0 of K slice k0 (kc deep) in the whole packed A.
    auto whole_a_block = [&](int64_t k0, int64_t kc, int64_t i0) {
      return a_buf + k0 * a_rows + (i0 - ib) / mc_step * mc_padded * kc;
    };
    if (a_whole)
      for (int64_t k0 = 0; k0 < K; k0 += KC)
        for (int64_t i0 = ib; i0 < ie; i0 += mc_step)
          pack_a(A, lda, trans_a, i0, std::min(mc_step, ie - i0), k0, std::min(KC, K - k0),
                 whole_a_block(k0, std::min(KC, K - k0), i0), nullptr);
    float* b_buf =
        packed_b ? nullptr
                 : aligned_floats(packed_b_buf, ((NC + nr_width - 1) / nr_width) * nr_width * KC);
    for (int64_t j0 = jb; j0 < je; j0 += nc_step) {
      const int64_t nc = std::min(nc_step, je - j0);
      for (int64_t k0 = 0; k0 < K; k0 += KC) {
        const int64_t kc = std::min(KC, K - k0);
        const bool first = k0 == 0;
        const bool last = k0 + kc >= K;
        // With few rows of A, a packed B block would serve only a few micro-tiles, and packing
        // all of it (up to 3 MB) before the first tile costs a quarter of the multiply-adds: a
        // row-major B is then not packed as a block. Each full panel is copied just before its
        // row tiles (pack_panel, into L1) where K is long enough for the panel-by-panel order,
        // and read in place (rows ldb apart) in the row-tile order of short K; a last, partial
        // panel is packed (zero-padded to the width). Read in place, the micro-kernel took two
        // cache lines from each of kc rows at every tile, and ran the squeeze convolutions of
        // SqueezeNet (M = 16-64) at 75-105 GFLOP/s against 110-150 with B prepacked; copied
        // panels, alternating in one process: 32 x 729 x 256 0.76x, 64 x 729 x 256 0.77x, 64 x
        // 169 x 512 0.84x, 64 x 1544 x 147 0.85x, 64 x 784 x 192 0.89x, 16 x 3025 x 128 0.92x.
        const bool direct_b = !packed_b && !trans_b && M <= kDirectBMaxRows;
        const int64_t full = direct_b ? nc / nr_width * nr_width : 0;
        const float* b_scale = b_row_scale ? b_row_scale + k0 : nullptr;  // (this slice's rows)
        // (A scaled direct B is always copied, panel by panel, as it is scaled.)
        const bool row_tile_order =
            kc * nc <= kShortKBlockFloats && !(direct_b && (kc > kCopiedPanelMinK || b_scale));
        float* copied_panel = direct_b ? b_buf + nr_width * KC : nullptr;
        const float* b_block = packed_b ? packed_b->block(k0, kc, j0) : b_buf;
        if (!packed_b && !direct_b)
          pack_b(B, ldb, trans_b, k0, kc, j0, nc, nr_width, b_buf, b_scale);
        if (direct_b && full < nc)
          pack_b(B, ldb, false, k0, kc, j0 + full, nc - full, nr_width, b_buf, b_scale);
        for (int64_t i0 = ib; i0 < ie; i0 += mc_step) {
          const int64_t mc = std::min(mc_step, ie - i0);
          const float* a_block = packed_a  ? packed_a->block(k0, kc, i0)
                                 : a_whole ? whole_a_block(k0, kc, i0)
                                           : a_buf;
          if (!packed_a && !direct_a && !a_whole)
            pack_a(A, lda, trans_a, i0, mc, k0, kc, a_buf,
                   a_col_scale ? a_col_scale + k0 : nullptr);
          // A full panel of a direct B copied by the panel-by-panel loop below (else null).
          const float* panel_copy = nullptr;
          // (Inlined into both tile orders: with the residual's two Store fields clang stopped
          // inlining it into the wasm build, and a call per tile cost MobileNetV2 ~4 % there.
          // ir and jr are multiples of MR and of the panel width: a panel of the packed blocks
          // starts kc * ir or kc * jr floats in, with no division, which for the run-time width
          // was an idiv on every tile.)
          // Tile (ir, jr)'s B panel, A panel and Store.
          auto b_panel = [&](int64_t jr) __attribute__((always_inline)) {
            return panel_copy  ? panel_copy
                   : jr < full ? B + k0 * ldb + j0 + jr
                   : direct_b  ? b_buf
                               : b_block + jr * kc;
          };
          auto store_of = [&](int64_t ir, int64_t jr) __attribute__((always_inline)) {
            const bool in_place = jr < full && !panel_copy;
            return Store{first,
                         last,
                         bias ? bias + i0 + ir : nullptr,
                         col_bias ? col_bias + j0 + jr : nullptr,
                         res ? res + (i0 + ir) * ep.ldr + j0 + jr : nullptr,
                         ep.ldr,
                         ep.lo,
                         ep.hi,
                         clamp,
                         in_place ? ldb : nr_width,
                         direct_a ? lda : 0};
          };
          // Row tile ir's A: in place, or its panel of the packed block.
          auto a_panel = [&](int64_t ir) __attribute__((always_inline)) {
            return direct_a ? A + (i0 + ir) * lda + k0 : a_block + ir * kc;
          };
          // Tile (ir, jr); `b_copy`: where it also stores the B panel it reads in place.
          auto tile = [&](int64_t ir, int64_t jr, float* b_copy = nullptr)
              __attribute__((always_inline)) {
            Store s = store_of(ir, jr);
            s.b_copy = b_copy;
            kernel(kc, a_panel(ir), b_panel(jr), C + (i0 + ir) * ldc + j0 + jr, ldc, alpha, beta, s,
                   std::min(MR, mc - ir), std::min(nr_width, nc - jr));
          };
          // Runs of whole tiles go to the kernel in one call (span_kernel): along a row of tiles,
          // panels [0, whole) whose B is read the same way (in place, or packed in the block), or
          // down a panel, its whole row tiles.
          const int64_t whole_panels = (direct_b ? full : nc / nr_width * nr_width);
          // Tiles are computed panel by panel (a B panel stays in L1 across the row tiles), but
          // with a short K a tile is mostly its stores, and that order writes C a few columns at
          // a time across all its rows: then C is written row tile by row tile (six long row
          // streams), with the packed B block (at most 512 KB) read back from L2. MobileNetV2
          // (K 16-64 in its expand convs) 4 % faster natively, six interleaved pairs.
          // Two row tiles at a time where the CPU has a pair kernel and A is packed (see
          // micro_kernel_avx512_pairs): 12 x 32 tiles, each B vector serving twice the rows.
          const bool pairs = pair_kernel && !direct_a;
          if (row_tile_order) {
            for (int64_t ir = 0; ir < mc; ir += MR) {
              // Rows ir and ir + MR as one 12-row tile where a pair kernel takes them.
              const bool pair = pairs && mc - ir >= 2 * MR;
              gemm_micro::TileSpan sp{whole_panels / nr_width,
                                      0,
                                      direct_b ? nr_width : nr_width * kc,
                                      nr_width,
                                      0,
                                      nr_width,
                                      nr_width};
              sp.a_half = MR * kc;
              int64_t jr = 0;
              if (pair ? sp.count > 0 : mc - ir >= MR && sp.count >= 2) {
                (pair ? pair_kernel : span_kernel)(kc, a_panel(ir), b_panel(0),
                                                   C + (i0 + ir) * ldc + j0, ldc, alpha, beta,
                                                   store_of(ir, 0), sp);
                jr = whole_panels;
              }
              for (; jr < nc; jr += nr_width) {
                tile(ir, jr);
                if (pair) tile(ir + MR, jr);
              }
              if (pair) ir += MR;
            }
          } else {
            // A prepacked B (a layer's weights: a transformer's 9 MB feed-forward matrices stream
            // from memory) is fetched a panel ahead into L2, a share of the next panel's lines
            // before each row tile of this one: the micro-kernels' own prefetch, 64 k steps
            // ahead, leaves the first tile of each panel waiting for 48 KB. One process
            // alternating (min / median): BERT-sized 0.971-0.979 / 0.984-0.991 (0.964 / 0.979 at
            // 2 threads), ViT-B/16 0.975 / 0.966, ConvNeXt-T and the CNNs 0.98-1.00.
            // Not with few row tiles, where a tile's share is a burst the fill buffers stall on
            // (a batch-1 classifier: one tile, the whole next panel, 512 lines, before it); the
            // panels are read in address order, which the hardware prefetcher streams.
            const int64_t panel = kc * nr_width, lines = (panel + 15) / 16;
            const int64_t tiles = (mc + MR - 1) / MR, per_tile = (lines + tiles - 1) / tiles;
            const bool fetch_next = packed_b && tiles >= kMinTilesToFetchNextPanel;
            for (int64_t jr = 0; jr < nc; jr += nr_width) {
              const float* next =
                  fetch_next && jr + nr_width < nc ? b_block + (jr + nr_width) * kc : nullptr;
              panel_copy = nullptr;
              int64_t ir = 0, t = 0;
              if (direct_b && jr < full) {
                // The first row tile reads the panel in place and stores what it loads as the
                // copy (Store::b_copy): a copy made before it loaded the same two cache lines
                // from each of kc rows again. Alone, one thread: 144 x 3136 x 24 208 -> 183 us,
                // 192 x 784 x 32 80.5 -> 72.9, 384 x 196 x 64 74.5 -> 70.9; in wasm, in
                // MobileNetV2, 0.817 -> 0.722 ms, 0.308 -> 0.271, 0.280 -> 0.262. (A block of one
                // row tile still copies first, with pack_panel, as before: not remeasured.)
                if (mc > MR && !b_scale) {
                  tile(0, jr, copied_panel);
                  ir = MR;
                } else {
                  pack_panel(B + k0 * ldb + j0 + jr, ldb, kc, nr_width, copied_panel, b_scale);
                }
                panel_copy = copied_panel;
              }
              if (pairs && nc - jr >= nr_width && mc - ir >= 2 * MR) {
                // (With `next`, a pair at a time, after the shares of its two tiles.)
                gemm_micro::TileSpan sp{next ? 1 : (mc - ir) / (2 * MR),
                                        2 * MR * kc,
                                        0,
                                        2 * MR * ldc,
                                        2 * MR,
                                        0,
                                        2 * MR * ep.ldr};
                sp.a_half = MR * kc;
                for (; mc - ir >= 2 * MR; ir += sp.count * 2 * MR, t += sp.count * 2) {
                  if (next)
                    for (int64_t l = t * per_tile, e = std::min(lines, l + 2 * per_tile); l < e;
                         ++l)
                      __builtin_prefetch(next + l * 16, 0, 2);
                  pair_kernel(kc, a_panel(ir), b_panel(jr), C + (i0 + ir) * ldc + j0 + jr, ldc,
                              alpha, beta, store_of(ir, jr), sp);
                }
              }
              if (!next && nc - jr >= nr_width && mc - ir >= 2 * MR) {
                const gemm_micro::TileSpan sp{
                    (mc - ir) / MR, direct_a ? MR * lda : MR * kc, 0, MR * ldc, MR, 0, MR * ep.ldr};
                span_kernel(kc, a_panel(ir), b_panel(jr), C + (i0 + ir) * ldc + j0 + jr, ldc, alpha,
                            beta, store_of(ir, jr), sp);
                ir = mc / MR * MR;
              }
              for (; ir < mc; ir += MR, ++t) {
                if (next)
                  for (int64_t l = t * per_tile, e = std::min(lines, l + per_tile); l < e; ++l)
                    __builtin_prefetch(next + l * 16, 0, 2);
                tile(ir, jr);
              }
            }
          }
        }
      }
    }
  };
  const int64_t panels = (N + nr_width - 1) / nr_width, row_tiles = (M + MR - 1) / MR;
  const double flops =
      2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  const int64_t threads = num_threads();
  if (threads > 1 && flops >= kParallelMinFlops) {
    // At least kParallelMinColumns columns a thread (waking a thread costs a few microseconds).
    const int64_t grain = std::max<int64_t>(1, kParallelMinColumns / nr_width);
    // With few column panels (the 7x7 and 14x14 layers of MobileNet: N = 49 is two panels, one
    // chunk of work, so one thread did it all), threads take whole row tiles instead, each packing
    // the same B block for itself. Either split computes the same tiles, so the same bits.
    if (panels < 4 * threads && row_tiles >= 4 * threads) {
      parallel_for(row_tiles, 2, [&](int64_t t0, int64_t t1) {
        block_of_c(0, N, t0 * MR, std::min(M, t1 * MR));
        if (done) done->fn(done->ctx, 0, N, t0 * MR, std::min(M, t1 * MR));
      });
      return;
    }
    if (panels > 1) {
      parallel_for(panels, grain, [&](int64_t p0, int64_t p1) {
        block_of_c(p0 * nr_width, std::min(N, p1 * nr_width), 0, M);
        if (done) done->fn(done->ctx, p0 * nr_width, std::min(N, p1 * nr_width), 0, M);
      });
      return;
    }
  }
  block_of_c(0, N, 0, M);
  if (done) done->fn(done->ctx, 0, N, 0, M);
}

void sgemm_reference(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                     const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                     int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += static_cast<double>(at_a(A, lda, trans_a, i, k)) * at_b(B, ldb, trans_b, k, j);
      float& c = C[i * ldc + j];
      c = static_cast<float>(alpha * acc + (beta == 0.0f ? 0.0 : static_cast<double>(beta) * c));
    }
  }
}

}  // namespace fx::kernels
