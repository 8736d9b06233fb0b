// The executor's compute kernels against their reference loops, on shapes that exercise every
// edge of the blocking (partial micro-tiles, K across several KC slices, transposes, beta).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/conv.h"
#include "kernels/cpu.h"
#include "kernels/depthwise_flat.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/tensor_ops.h"
#include "kernels/thread_pool.h"

namespace {

struct GemmCase {
  int64_t M, N, K;
  bool trans_a, trans_b;
  float alpha, beta;
};

class Sgemm : public ::testing::TestWithParam<GemmCase> {};

TEST_P(Sgemm, MatchesReferenceLoops) {
  const GemmCase c = GetParam();
  std::mt19937 rng(static_cast<unsigned>(c.M * 131 + c.N * 17 + c.K));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // Row strides larger than the logical widths, so lda/ldb/ldc are honoured.
  const int64_t lda = (c.trans_a ? c.M : c.K) + 3;
  const int64_t ldb = (c.trans_b ? c.K : c.N) + 5;
  const int64_t ldc = c.N + 2;
  std::vector<float> A((c.trans_a ? c.K : c.M) * lda), B((c.trans_b ? c.N : c.K) * ldb);
  std::vector<float> C(c.M * ldc);
  for (float& x : A) x = dist(rng);
  for (float& x : B) x = dist(rng);
  for (float& x : C) x = dist(rng);
  std::vector<float> want = C;
  fx::kernels::sgemm(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, A.data(), lda, B.data(), ldb,
                     c.beta, C.data(), ldc);
  fx::kernels::sgemm_reference(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, A.data(), lda,
                               B.data(), ldb, c.beta, want.data(), ldc);
  const float tol = 1e-5f * static_cast<float>(c.K + 1);
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const float got = C[i * ldc + j], exp = want[i * ldc + j];
      if (j >= c.N) {  // padding columns are untouched
        ASSERT_EQ(got, exp) << "padding (" << i << ", " << j << ") was written";
      } else {
        ASSERT_NEAR(got, exp, tol) << "C(" << i << ", " << j << ")";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Sgemm,
    ::testing::Values(GemmCase{1, 1, 1, false, false, 1.0f, 0.0f},
                      GemmCase{6, 8, 4, false, false, 1.0f, 0.0f},     // one full micro-tile
                      GemmCase{7, 9, 13, false, false, 0.5f, 2.0f},    // partial tiles, beta
                      GemmCase{65, 33, 500, true, false, 1.0f, 1.0f},  // K spans two slices
                      GemmCase{50, 70, 20, false, true, -1.0f, 0.0f},
                      GemmCase{13, 17, 600, true, true, 1.0f, 0.5f},
                      GemmCase{200, 130, 520, false, false, 1.0f, 0.0f},  // several MC blocks
                      // A read in place (x86): a last tile of 5 rows, three K slices, beta.
                      GemmCase{101, 70, 900, false, false, 1.0f, 0.5f},
                      GemmCase{3, 2100, 7, false, false, 1.0f, 0.0f},  // N spans two NC blocks
                      // Few rows (B not packed as a block), full panels and a partial one:
                      // K slices of 384 and 116 copy each full panel before its row tiles; K = 90
                      // reads them in place, row tile by row tile.
                      GemmCase{40, 75, 500, false, false, 1.0f, 0.5f},
                      GemmCase{30, 100, 90, false, false, 1.0f, 0.0f},
                      GemmCase{5, 4, 0, false, false, 1.0f, 3.0f},      // K = 0: C = beta*C
                      GemmCase{1, 1000, 517, false, true, 1.0f, 1.0f},  // row vector (GEMV) x B^T
                      GemmCase{1, 37, 29, false, false, 0.5f, 0.0f},    // row vector x B
                      GemmCase{1, 9, 70, true, true, 1.0f, 0.0f},       // M = 1 with A^T
                      // A last panel at most half the x86 kernels' width (one vector column):
                      // N = 169 (9 of 32), 41 (9 of 32), 196 (4 of 16 and of 32); packed and
                      // in-place B, K across slices, beta, a partial last row tile.
                      GemmCase{70, 169, 450, false, false, 1.0f, 0.5f},
                      GemmCase{40, 41, 20, false, false, 0.5f, 0.0f},
                      GemmCase{101, 196, 70, false, false, 1.0f, 1.0f},
                      GemmCase{13, 196, 37, true, false, -1.0f, 0.0f},
                      // A column vector (a 1x1 convolution on a 1x1 image): strided and then
                      // gathered, or a row of B^T; beta; A^T takes the blocked loops.
                      GemmCase{1152, 1, 48, false, false, 1.0f, 0.0f},
                      GemmCase{48, 1, 1152, false, true, 0.5f, 2.0f},
                      GemmCase{9, 1, 5, true, false, 1.0f, 0.0f},
                      // Small products (attention's heads; wasm computes them directly): B and
                      // B^T, a last row group of 1-3 rows, a last column vector of 4.
                      GemmCase{16, 16, 16, false, false, 1.0f, 0.0f},
                      GemmCase{16, 16, 16, false, true, 1.0f, 0.0f},
                      GemmCase{7, 12, 33, false, true, 1.0f, 0.0f},
                      GemmCase{64, 64, 64, false, false, 1.0f, 0.0f}));

TEST(Sgemm, BetaZeroIgnoresNaNsInC) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> A = {1, 2, 3, 4}, B = {1, 0, 0, 1}, C(4, nan);
  fx::kernels::sgemm(false, false, 2, 2, 2, 1.0f, A.data(), 2, B.data(), 2, 0.0f, C.data(), 2);
  EXPECT_EQ(C, (std::vector<float>{1, 2, 3, 4}));
}

// The epilogue (row bias + clamp) on shapes with partial tiles and K spanning several KC blocks:
// equal to the reference GEMM followed by the same bias and clamp.
// Uniform(-1, 1) values into each vector.
void fill_uniform(std::mt19937& rng, std::initializer_list<std::vector<float>*> vs) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (std::vector<float>* v : vs)
    for (float& x : *v) x = d(rng);
}

fx::kernels::GemmEpilogue bias_and_clamp(const std::vector<float>& bias, float lo, float hi) {
  fx::kernels::GemmEpilogue ep;
  ep.row_bias = bias.data();
  ep.lo = lo;
  ep.hi = hi;
  return ep;
}

// An M x N x K product's random operands with C's old values, and an epilogue of all of them:
// a row bias, a residual (rows N apart) and a clamp to [-1.5, 1.5].
struct EpilogueCase {
  std::vector<float> A, B, bias, res, C0;
  fx::kernels::GemmEpilogue ep;
  EpilogueCase(std::mt19937& rng, int64_t M, int64_t N, int64_t K)
      : A(M * K), B(K * N), bias(M), res(M * N), C0(M * N) {
    fill_uniform(rng, {&A, &B, &bias, &res, &C0});
    ep = bias_and_clamp(bias, -1.5f, 1.5f);
    ep.residual = res.data();
    ep.ldr = N;
  }
};

// A matrix times a column vector with the whole epilogue (row and column bias, residual, clamp)
// matches the reference followed by it, and gives the same bits on 1 and 3 threads (rows split).
TEST(Sgemm, ColumnVectorEpilogueGivesTheSameBitsOnAnyThreadCount) {
  const int64_t M = 3000, K = 700;  // 4.2 Mflop: split across threads
  std::mt19937 rng(11);
  std::vector<float> A(M * K), B(K), bias(M), col_bias(1), res(M);
  fill_uniform(rng, {&A, &B, &bias, &col_bias, &res});
  fx::kernels::GemmEpilogue ep;
  ep.row_bias = bias.data();
  ep.col_bias = col_bias.data();
  ep.residual = res.data();
  ep.ldr = 1;
  ep.lo = -0.5f;
  ep.hi = 3.0f;
  std::vector<float> want(M);
  fx::kernels::sgemm_reference(false, false, M, 1, K, 1.0f, A.data(), K, B.data(), 1, 0.0f,
                               want.data(), 1);
  const int threads = fx::kernels::num_threads();
  std::vector<float> one(M), three(M);
  fx::kernels::set_num_threads(1);
  fx::kernels::sgemm(false, false, M, 1, K, 1.0f, A.data(), K, B.data(), 1, 0.0f, one.data(), 1,
                     &ep);
  fx::kernels::set_num_threads(3);
  fx::kernels::sgemm(false, false, M, 1, K, 1.0f, A.data(), K, B.data(), 1, 0.0f, three.data(), 1,
                     &ep);
  fx::kernels::set_num_threads(threads);
  for (int64_t i = 0; i < M; ++i) {
    const float w = std::min(std::max(want[i] + bias[i] + col_bias[0] + res[i], -0.5f), 3.0f);
    ASSERT_NEAR(one[i], w, 1e-4f) << i;
  }
  EXPECT_EQ(std::memcmp(one.data(), three.data(), one.size() * sizeof(float)), 0);
}

// A fused clamp keeps a NaN wherever it lands: whole tiles, partial row tiles and corner tiles
// give std::min(std::max(x, lo), hi) of the unclamped result, the element loops' clamp (x86's
// maxps returns its second operand for a NaN, so the operand order decides).
TEST(Sgemm, FusedClampKeepsNaNInEveryTile) {
  const int64_t M = 13, N = 70, K = 5;
  std::mt19937 rng(3);
  std::vector<float> A(M * K), B(K * N), bias(M);
  fill_uniform(rng, {&A, &B, &bias});
  A[3 * K + 2] = NAN;   // row 3 of C: NaN (a whole row tile)
  A[12 * K] = NAN;      // row 12: NaN (the last, one-row tile)
  B[1 * N + 69] = NAN;  // column 69: NaN (a corner)
  B[4 * N + 40] = NAN;  // column 40
  fx::kernels::GemmEpilogue plain;
  plain.row_bias = bias.data();
  std::vector<float> unclamped(M * N), got(M * N);
  fx::kernels::sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, unclamped.data(),
                     N, &plain);
  const fx::kernels::GemmEpilogue ep = bias_and_clamp(bias, 0.0f, 0.5f);
  const fx::kernels::PackedOperand pa = fx::kernels::PackedOperand::left(false, M, K, A.data(), K);
  for (bool packed : {false, true}) {
    fx::kernels::sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, got.data(), N,
                       &ep, packed ? &pa : nullptr);
    int nans = 0;
    for (int64_t i = 0; i < M * N; ++i) {
      const float want = std::min(std::max(unclamped[i], 0.0f), 0.5f);
      nans += std::isnan(want);
      ASSERT_EQ(std::isnan(got[i]), std::isnan(want)) << "at " << i / N << "," << i % N;
      if (!std::isnan(want)) {
        ASSERT_EQ(got[i], want) << "at " << i / N << "," << i % N;
      }
    }
    EXPECT_EQ(nans, 2 * N + 2 * (M - 2));
  }
}

// A one-row product of a weight kept only packed (a batch-1 classifier's Gemm after
// prepack_weights: B is null, so the blocked path runs, whose micro-kernels take a one-row tile
// on a loop of its own) gives the bits of that row of a product with more rows: with a column
// bias and a clamp, K over several slices, a partial last panel. (With B given, one row takes
// sgemm's row-vector path instead, which sums in another order.)
TEST(Sgemm, OneRowOfAPackedWeightGivesTheBitsOfThatRowOfAWholeTile) {
  std::mt19937 rng(21);
  for (auto [N, K] : {std::pair<int64_t, int64_t>{37, 29}, {1000, 1280}, {3, 400}}) {
    const int64_t M = 7;
    std::vector<float> A(M * K), B(K * N), bias(N), C(M * N), row(N);
    fill_uniform(rng, {&A, &B, &bias});
    const fx::kernels::PackedOperand pb =
        fx::kernels::PackedOperand::right(false, K, N, B.data(), N);
    fx::kernels::GemmEpilogue ep;
    ep.col_bias = bias.data();
    ep.lo = -0.5f;
    ep.hi = 2.0f;
    fx::kernels::sgemm(false, false, M, N, K, 1.0f, A.data(), K, nullptr, N, 0.0f, C.data(), N, &ep,
                       nullptr, &pb);
    for (int64_t i = 0; i < M; i += 3) {
      std::fill(row.begin(), row.end(), -7.0f);
      fx::kernels::sgemm(false, false, 1, N, K, 1.0f, A.data() + i * K, K, nullptr, N, 0.0f,
                         row.data(), N, &ep, nullptr, &pb);
      for (int64_t j = 0; j < N; ++j)
        ASSERT_EQ(row[j], C[i * N + j]) << N << " x " << K << ", row " << i << ", column " << j;
    }
  }
}

// Products small enough for sgemm's direct path in wasm give the bits of the blocked loops (the
// same product with B packed ahead of time, which always takes them), with a column bias and a
// clamp, B and B^T.
TEST(Sgemm, SmallProductsGiveTheBitsOfTheBlockedLoops) {
  std::mt19937 rng(33);
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{16, 16, 16},
                         {7, 12, 33},
                         {64, 64, 64},
                         {3, 8, 5},
                         {1, 4, 64}})
    for (bool trans_b : {false, true}) {
      const int64_t ldb = (trans_b ? K : N) + 3;
      std::vector<float> A(M * K), B((trans_b ? N : K) * ldb), bias(N), C(M * N), P(M * N);
      fill_uniform(rng, {&A, &B, &bias});
      fx::kernels::GemmEpilogue ep;
      ep.col_bias = bias.data();
      ep.lo = -0.25f;
      ep.hi = 1.5f;
      fx::kernels::sgemm(false, trans_b, M, N, K, 1.0f, A.data(), K, B.data(), ldb, 0.0f, C.data(),
                         N, &ep);
      const fx::kernels::PackedOperand pb =
          fx::kernels::PackedOperand::right(trans_b, K, N, B.data(), ldb);
      fx::kernels::sgemm(false, trans_b, M, N, K, 1.0f, A.data(), K, B.data(), ldb, 0.0f, P.data(),
                         N, &ep, nullptr, &pb);
      if (M == 1) continue;  // (a row vector takes its own path, which sums in another order)
      for (int64_t i = 0; i < M * N; ++i)
        ASSERT_EQ(std::memcmp(&C[i], &P[i], sizeof(float)), 0)
            << M << " x " << N << " x " << K << (trans_b ? " B^T" : "") << " at " << i;
    }
}

// MatMul of operands read in place through strided layouts (a head's slice of a fused QKV
// projection, a transposed K) and into a transposed result: the bits of matmul_f32 on the
// operands copied out, transposed after.
TEST(MatmulStrided, GivesTheBitsOfTheCopiedOutOperands) {
  using fx::kernels::StridedLayout;
  std::mt19937 rng(5);
  const int64_t S = 9, H = 3, D = 8, E = H * D;
  std::vector<float> qkv(S * 3 * E);
  fill_uniform(rng, {&qkv});
  // Q[h][s][d] = qkv[s][h * D + d]; K^T[h][d][s] = qkv[s][E + h * D + d].
  const StridedLayout q{{H, S, D}, {D, 3 * E, 1}, 0};
  const StridedLayout kt{{H, D, S}, {D, 1, 3 * E}, E};
  std::vector<float> qd(H * S * D), ktd(H * D * S);
  fx::kernels::strided_copy(qkv.data(), sizeof(float), q, qd.data());
  fx::kernels::strided_copy(qkv.data(), sizeof(float), kt, ktd.data());
  std::vector<float> want(H * S * S), got(H * S * S, -1.0f);
  fx::kernels::matmul_f32({H, S, D}, qd.data(), {H, D, S}, ktd.data(), want.data());
  ASSERT_TRUE(fx::kernels::matmul_strided_f32(qkv.data(), q, qkv.data(), kt, got.data()));
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
  // Written as [S, H, S] (a Transpose (1, 0, 2) of the result): element (h, i, j) at (i, h, j).
  std::vector<float> merged(S * H * S, -1.0f);
  const StridedLayout where{{H, S, S}, {S, H * S, 1}, 0};
  ASSERT_TRUE(fx::kernels::matmul_strided_f32(qkv.data(), q, qkv.data(), kt, merged.data(), nullptr,
                                              -INFINITY, INFINITY, &where));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < S; ++j)
        ASSERT_EQ(merged[(i * H + h) * S + j], want[(h * S + i) * S + j]) << h << i << j;
  // Neither rows nor columns contiguous: refused, nothing written.
  const StridedLayout neither{{H, S, D}, {1, 3 * E, 3}, 0};
  std::vector<float> untouched(H * S * S, -1.0f);
  EXPECT_FALSE(
      fx::kernels::matmul_strided_f32(qkv.data(), neither, qkv.data(), kt, untouched.data()));
  EXPECT_EQ(untouched[0], -1.0f);
}

// A column bias in the epilogue (a linear layer's x @ W + b), and a residual matrix or a clamp
// after it, give the bits of adding them (and clamping) after the product, on every path: a row
// vector, partial tiles, several K slices, beta, a prepacked B, and the transposed product of a
// prepacked A.
TEST(Sgemm, EpilogueColumnBiasGivesTheBitsOfAddingItAfter) {
  std::mt19937 rng(12);
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 37, 29},
                         {7, 19, 5},
                         {13, 70, 600},
                         {200, 49, 300}}) {
    std::vector<float> A(M * K), B(K * N), bias(N), C0(M * N), C(M * N), R(M * N);
    const int64_t ldr = N + 3;  // (rows of the residual further apart than C's)
    std::vector<float> res(M * ldr);
    fill_uniform(rng, {&A, &B, &bias, &C0, &res});
    const fx::kernels::PackedOperand pb =
        fx::kernels::PackedOperand::right(false, K, N, B.data(), N);
    // (n_hint = N: where sgemm_prefers_transposed, the product is computed transposed.)
    const fx::kernels::PackedOperand pa =
        fx::kernels::PackedOperand::left(false, M, K, A.data(), K, N);
    for (const float beta : {0.0f, 0.5f}) {
      for (int path = 0; path < 3; ++path) {
        for (int extra = 0; extra < 3; ++extra) {  // nothing more, a residual, a clamp
          const bool residual = extra == 1, clamp = extra == 2;
          const fx::kernels::PackedOperand* packed_a = path == 2 ? &pa : nullptr;
          const fx::kernels::PackedOperand* packed_b = path == 1 ? &pb : nullptr;
          R = C0;
          fx::kernels::sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, beta, R.data(),
                             N, nullptr, packed_a, packed_b);
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
              float& r = R[i * N + j];
              r += bias[j];
              if (residual) r += res[i * ldr + j];
              if (clamp) r = std::min(std::max(r, -0.5f), 0.75f);
            }
          fx::kernels::GemmEpilogue ep;
          ep.col_bias = bias.data();
          if (residual) {
            ep.residual = res.data();
            ep.ldr = ldr;
          }
          if (clamp) {
            ep.lo = -0.5f;
            ep.hi = 0.75f;
          }
          C = C0;
          fx::kernels::sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, beta, C.data(),
                             N, &ep, packed_a, packed_b);
          ASSERT_EQ(std::memcmp(C.data(), R.data(), C.size() * sizeof(float)), 0)
              << M << "x" << N << "x" << K << " beta " << beta << " path " << path
              << (residual ? " with a residual" : "") << (clamp ? " clamped" : "");
        }
      }
    }
  }
}

// With few rows and K past the in-place depth, each full B panel is copied by the first row
// tile as it computes and read from the copy by the others: every row gives the bits it gives in
// a product of one row tile (the panel copied before it), with beta, a bias and a clamp; K in
// one and in two slices, a second tile of 3 rows and one of 4; A packed ahead (a 1x1
// convolution's weights) and read in place.
TEST(Sgemm, RowTilesAfterTheCopyingTileGiveTheBitsOfRowsAlone) {
  std::mt19937 rng(17);
  for (auto [M, N, K] :
       {std::tuple<int64_t, int64_t, int64_t>{40, 75, 150}, {9, 96, 500}, {28, 64, 200}}) {
    std::vector<float> A(M * K), B(K * N), bias(M), C0(M * N);
    fill_uniform(rng, {&A, &B, &bias, &C0});
    const fx::kernels::GemmEpilogue ep = bias_and_clamp(bias, -2.0f, 2.0f);
    const fx::kernels::PackedOperand pa =
        fx::kernels::PackedOperand::left(false, M, K, A.data(), K);
    for (bool packed : {false, true}) {
      std::vector<float> whole = C0, rows = C0;
      fx::kernels::sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.5f, whole.data(),
                         N, &ep, packed ? &pa : nullptr);
      for (int64_t i = 0; i < M; i += 6) {
        const int64_t m = std::min<int64_t>(6, M - i);
        const std::vector<float> tile_bias(bias.begin() + i, bias.begin() + i + m);
        const fx::kernels::GemmEpilogue tile_ep = bias_and_clamp(tile_bias, -2.0f, 2.0f);
        fx::kernels::sgemm(false, false, m, N, K, 1.0f, A.data() + i * K, K, B.data(), N, 0.5f,
                           rows.data() + i * N, N, &tile_ep);
      }
      for (int64_t i = 0; i < M * N; ++i)
        ASSERT_EQ(whole[i], rows[i]) << M << "x" << N << "x" << K << (packed ? " packed" : "")
                                     << " at " << i / N << "," << i % N;
    }
  }
}

// Where the CPU has a pair kernel (AVX-512: two row tiles of packed A stacked, 12 x 32), a product
// with a packed weight gives the bits of each six-row tile computed alone (a one-tile product,
// which never pairs): row bias, residual, beta and clamp in the short-K row-tile order (a
// partial last panel and an odd last row tile; a product of no whole panel), K over several slices
// in the panel order, and the
// transposed product (rows are the pixels, against the weight's prepacked panels, fetched a panel
// ahead), on one and two threads. Elsewhere both sides take the six-row kernel.
TEST(Sgemm, PairedRowTilesGiveTheBitsOfTilesAlone) {
  std::mt19937 rng(41);
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{96, 196, 64},
                         {90, 600, 300},
                         {30, 20, 50},
                         {1280, 49, 320},
                         {576, 196, 96}}) {
    EpilogueCase t(rng, M, N, K);
    const auto &A = t.A, &B = t.B, &bias = t.bias, &res = t.res, &C0 = t.C0;
    const fx::kernels::GemmEpilogue& ep = t.ep;
    const fx::kernels::PackedOperand pa =
        fx::kernels::PackedOperand::left(false, M, K, A.data(), K, N);
    for (int threads : {1, 2}) {
      fx::kernels::set_num_threads(threads);
      std::vector<float> whole = C0, tiles = C0;
      fx::kernels::sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.5f, whole.data(),
                         N, &ep, &pa);
      if (pa.transposed()) {  // six columns of C (six rows of its transpose) at a time
        for (int64_t j = 0; j < N; j += 6) {
          const int64_t n = std::min<int64_t>(6, N - j);
          fx::kernels::GemmEpilogue part = ep;
          part.residual = res.data() + j;
          fx::kernels::sgemm(false, false, M, n, K, 1.0f, A.data(), K, B.data() + j, N, 0.5f,
                             tiles.data() + j, N, &part, &pa);
        }
      } else {
        for (int64_t i = 0; i < M; i += 6) {
          const int64_t m = std::min<int64_t>(6, M - i);
          const fx::kernels::PackedOperand tile =
              fx::kernels::PackedOperand::left(false, m, K, A.data() + i * K, K, N);
          fx::kernels::GemmEpilogue part = ep;
          part.row_bias = bias.data() + i;
          part.residual = res.data() + i * N;
          fx::kernels::sgemm(false, false, m, N, K, 1.0f, A.data() + i * K, K, B.data(), N, 0.5f,
                             tiles.data() + i * N, N, &part, &tile);
        }
      }
      for (int64_t i = 0; i < M * N; ++i)
        ASSERT_EQ(whole[i], tiles[i])
            << M << "x" << N << "x" << K << (pa.transposed() ? " T" : "") << ", " << threads
            << " threads, at " << i / N << "," << i % N;
    }
  }
  fx::kernels::set_num_threads(1);
}

// A row-major A not packed ahead (activations) in a long, wide product (K and N from 256: a
// transformer's projections), which GemmCore::blocked packs for the pair kernel where the CPU has
// one: the bits of the same rows computed six at a time (A read in place by the six-row kernel),
// with beta, a row bias, a residual and a clamp; B packed ahead (weights: over several K slices,
// blocks of 256 columns and A packed whole) and not; the row-tile order (one K slice) and the
// panel order (K slices, a partial last panel), a block of 256 rows and a second one, odd last row
// tiles; one and two threads. The last shape packs more A than kWholeAFloats (2100 rows of 1040:
// 2.4M floats with the blocks' padding), so with B prepacked and one thread, A goes back to being
// packed per K slice of each block, and columns to blocks of 2048.
TEST(Sgemm, ActivationsPackedForPairsGiveTheBitsOfRowsReadInPlace) {
  std::mt19937 rng(43);
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{130, 320, 256},
                         {40, 600, 700},
                         {300, 270, 512},
                         {2100, 272, 1040}}) {
    EpilogueCase t(rng, M, N, K);
    const auto &A = t.A, &B = t.B, &bias = t.bias, &res = t.res, &C0 = t.C0;
    const fx::kernels::GemmEpilogue& ep = t.ep;
    const fx::kernels::PackedOperand pb =
        fx::kernels::PackedOperand::right(false, K, N, B.data(), N);
    for (bool packed_b : {false, true}) {
      for (int threads : {1, 2}) {
        fx::kernels::set_num_threads(threads);
        std::vector<float> whole = C0, rows = C0;
        fx::kernels::sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.5f,
                           whole.data(), N, &ep, nullptr, packed_b ? &pb : nullptr);
        for (int64_t i = 0; i < M; i += 6) {
          const int64_t m = std::min<int64_t>(6, M - i);
          fx::kernels::GemmEpilogue part = ep;
          part.row_bias = bias.data() + i;
          part.residual = res.data() + i * N;
          fx::kernels::sgemm(false, false, m, N, K, 1.0f, A.data() + i * K, K, B.data(), N, 0.5f,
                             rows.data() + i * N, N, &part, nullptr, packed_b ? &pb : nullptr);
        }
        for (int64_t i = 0; i < M * N; ++i)
          ASSERT_EQ(whole[i], rows[i])
              << M << "x" << N << "x" << K << (packed_b ? " packed B" : "") << ", " << threads
              << " threads, at " << i / N << "," << i % N;
      }
    }
  }
  fx::kernels::set_num_threads(1);
}

// op(B)'s rows scaled as they are packed (a per-channel Mul fused before a 1x1 convolution): the
// bits of the product of the scaled B, through in-place B (few rows), packed blocks, K slices and
// the transposed product of a packed weight, on one and two threads; a row vector and a column
// vector times it (whose own paths do not scale) through the blocked loops, to the reference.
TEST(Sgemm, RowScaleOfBGivesTheBitsOfTheScaledB) {
  std::mt19937 rng(23);
  const int threads = fx::kernels::num_threads();
  for (auto [M, N, K, packed] : {std::tuple<int64_t, int64_t, int64_t, bool>{16, 300, 32, false},
                                 {40, 75, 150, true},
                                 {64, 70, 40, false},
                                 {96, 100, 600, true},
                                 {96, 49, 300, true},
                                 {1, 50, 40, false},
                                 {50, 1, 40, false}}) {
    std::vector<float> A(M * K), B(K * N), scale(K), bias(M);
    fill_uniform(rng, {&A, &B, &scale, &bias});
    std::vector<float> scaled = B;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) scaled[k * N + j] = B[k * N + j] * scale[k];
    const fx::kernels::GemmEpilogue ep = bias_and_clamp(bias, -2.0f, 2.0f);
    const fx::kernels::PackedOperand pa =
        fx::kernels::PackedOperand::left(false, M, K, A.data(), K, N);
    std::vector<float> want(M * N);
    fx::kernels::sgemm_reference(false, false, M, N, K, 1.0f, A.data(), K, scaled.data(), N, 0.0f,
                                 want.data(), N);
    for (int t : {1, 2}) {
      fx::kernels::set_num_threads(t);
      std::vector<float> got(M * N, 7.0f), plain(M * N, 7.0f);
      fx::kernels::sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, got.data(), N,
                         &ep, packed ? &pa : nullptr, nullptr, scale.data());
      fx::kernels::sgemm(false, false, M, N, K, 1.0f, A.data(), K, scaled.data(), N, 0.0f,
                         plain.data(), N, &ep, packed ? &pa : nullptr);
      for (int64_t i = 0; i < M * N; ++i) {
        const float w = std::min(std::max(want[i] + bias[i / N], -2.0f), 2.0f);
        ASSERT_NEAR(got[i], w, 1e-4f) << M << "x" << N << "x" << K << " at " << i;
        if (M > 1 && N > 1) {
          ASSERT_EQ(got[i], plain[i])
              << M << "x" << N << "x" << K << ", " << t << " threads, at " << i / N << "," << i % N;
        }
      }
    }
    fx::kernels::set_num_threads(threads);
  }
}

TEST(Sgemm, EpilogueAddsRowBiasAndClampsOnTheLastBlock) {
  std::mt19937 rng(11);
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{7, 19, 5},
                         {13, 33, 300},
                         {6, 16, 600},
                         // (The portable kernel's runs of whole tiles: along a row of tiles over B
                         // read in place at short K, down copied panels, down a packed B block.)
                         {64, 70, 40},
                         {40, 75, 150},
                         {96, 100, 200}}) {
    std::vector<float> A(M * K), B(K * N), bias(M), C(M * N, 123.0f), R(M * N);
    fill_uniform(rng, {&A, &B, &bias});
    const fx::kernels::GemmEpilogue ep = bias_and_clamp(bias, -0.5f, 0.75f);
    fx::kernels::sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, C.data(), N,
                       &ep);
    fx::kernels::sgemm_reference(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f,
                                 R.data(), N);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        EXPECT_NEAR(C[i * N + j], std::min(std::max(R[i * N + j] + bias[i], -0.5f), 0.75f), 1e-4f)
            << M << "x" << N << "x" << K << " at " << i << "," << j;
  }
}

// A left operand packed with an N hint that makes sgemm compute the transposed product (N short
// of whole column panels): the reference's values, untouched padding columns, and (alpha 1 and
// beta 0, the executor's case) the same bits as the product packed on the fly.
TEST(Sgemm, PackedLeftOperandOfATransposedProduct) {
  std::mt19937 rng(5);
  // 96 x 9 goes transposed with every micro-kernel, and 98 x 9 too (C's last group of rows in
  // store_transposed has two); 96 x 49 with AVX-512's 32-wide panels (17 columns in the last
  // one), not with AVX2's (a last panel of one column is half a tile) or wasm's 8-wide ones (49 of
  // 56 columns filled).
  for (auto [M, N, K] :
       {std::tuple<int64_t, int64_t, int64_t>{96, 9, 256}, {98, 9, 256}, {96, 49, 300}}) {
    if (N == 9) {
      EXPECT_TRUE(fx::kernels::sgemm_prefers_transposed(M, N, K));
    }
    for (bool trans_a : {false, true}) {
      for (auto [alpha, beta, with_res] : {std::tuple<float, float, bool>{1.0f, 0.0f, false},
                                           {0.75f, 0.5f, false},
                                           {1.0f, 0.0f, true}}) {
        const int64_t lda = (trans_a ? M : K) + 3, ldb = N + 5, ldc = N + 2;
        std::vector<float> A((trans_a ? K : M) * lda), B(K * ldb), C(M * ldc), bias(M);
        std::vector<float> res(M * N);  // (a residual: a tensor of C's shape, row stride N)
        fill_uniform(rng, {&A, &B, &C, &bias, &res});
        fx::kernels::GemmEpilogue ep = bias_and_clamp(bias, -2.0f, 2.5f);
        if (with_res) {
          ep.residual = res.data();
          ep.ldr = N;
        }
        const fx::kernels::PackedOperand packed =
            fx::kernels::PackedOperand::left(trans_a, M, K, A.data(), lda, N);
        std::vector<float> got = C, plain = C, want = C;
        fx::kernels::sgemm(trans_a, false, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta,
                           got.data(), ldc, &ep, &packed);
        fx::kernels::sgemm(trans_a, false, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta,
                           plain.data(), ldc, &ep);
        fx::kernels::sgemm_reference(trans_a, false, M, N, K, alpha, A.data(), lda, B.data(), ldb,
                                     beta, want.data(), ldc);
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < ldc; ++j) {
            const float g = got[i * ldc + j];
            if (j >= N) {
              ASSERT_EQ(g, C[i * ldc + j]) << "padding (" << i << ", " << j << ") was written";
              continue;
            }
            const float w = std::min(
                std::max(want[i * ldc + j] + bias[i] + (with_res ? res[i * N + j] : 0.0f), -2.0f),
                2.5f);
            ASSERT_NEAR(g, w, 1e-5f * static_cast<float>(K + 1))
                << M << "x" << N << "x" << K << " trans_a " << trans_a << " alpha " << alpha
                << " at " << i << "," << j;
            if (alpha == 1.0f && beta == 0.0f) {
              ASSERT_EQ(g, plain[i * ldc + j]) << "same bits at " << i << "," << j;
            }
          }
      }
    }
  }
}

}  // namespace

namespace {

using fx::kernels::Conv2dParams;
using fx::kernels::Pool2dParams;

struct ConvCase {
  const char* what;
  Conv2dParams p;
  bool bias;
};

class Conv2d : public ::testing::TestWithParam<ConvCase> {};

Conv2dParams conv(int64_t N, int64_t C, int64_t H, int64_t W, int64_t M, int64_t K, int64_t stride,
                  int64_t pad, int64_t group = 1, int64_t dilation = 1) {
  Conv2dParams p;
  p.N = N, p.C = C, p.H = H, p.W = W, p.M = M, p.KH = p.KW = K;
  p.stride_h = p.stride_w = stride;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = pad;
  p.group = group;
  p.dilation_h = p.dilation_w = dilation;
  return p;
}

TEST_P(Conv2d, MatchesDirectLoops) {
  const ConvCase& c = GetParam();
  const Conv2dParams& p = c.p;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(p.N * p.C * p.H * p.W), w(p.M * (p.C / p.group) * p.KH * p.KW), b(p.M);
  for (float& v : x) v = dist(rng);
  for (float& v : w) v = dist(rng);
  for (float& v : b) v = dist(rng);
  const int64_t out_size = p.N * p.M * p.out_h() * p.out_w();
  ASSERT_GT(out_size, 0) << c.what;
  std::vector<float> got(out_size, -7.0f), want(out_size);
  std::vector<float> scratch(fx::kernels::conv2d_scratch_size(p));
  fx::kernels::conv2d(p, x.data(), w.data(), c.bias ? b.data() : nullptr, got.data(),
                      scratch.data());
  fx::kernels::conv2d_reference(p, x.data(), w.data(), c.bias ? b.data() : nullptr, want.data());
  const float tol = 1e-5f * static_cast<float>((p.C / p.group) * p.KH * p.KW + 1);
  for (int64_t i = 0; i < out_size; ++i) ASSERT_NEAR(got[i], want[i], tol) << c.what << " at " << i;
  // With a fused activation (Relu6-like clamp to [0, 0.5]): the clamped reference.
  Conv2dParams pc = p;
  pc.clamp_lo = 0.0f;
  pc.clamp_hi = 0.5f;
  std::fill(got.begin(), got.end(), -7.0f);
  fx::kernels::conv2d(pc, x.data(), w.data(), c.bias ? b.data() : nullptr, got.data(),
                      scratch.data());
  for (int64_t i = 0; i < out_size; ++i)
    ASSERT_NEAR(got[i], std::min(std::max(want[i], 0.0f), 0.5f), tol)
        << c.what << " (clamped) at " << i;
  // Weights packed ahead of time (what the executor does for constant weights): same bits.
  const std::vector<fx::kernels::PackedOperand> packed =
      fx::kernels::conv2d_pack_weights(pc, w.data());
  std::vector<float> got_packed(out_size, -7.0f);
  fx::kernels::conv2d(pc, x.data(), w.data(), c.bias ? b.data() : nullptr, got_packed.data(),
                      scratch.data(), &packed);
  for (int64_t i = 0; i < out_size; ++i)
    ASSERT_EQ(got_packed[i], got[i]) << c.what << " (packed weights) at " << i;
  // A Clip whose min is above its max (bounds from tensors can be anything) gives its max
  // everywhere, as onnx.Clip and torch.clamp do: max first, then min, on every path.
  Conv2dParams pd = p;
  pd.clamp_lo = 0.5f;
  pd.clamp_hi = 0.25f;
  fx::kernels::conv2d(pd, x.data(), w.data(), c.bias ? b.data() : nullptr, got.data(),
                      scratch.data());
  for (int64_t i = 0; i < out_size; ++i)
    ASSERT_EQ(got[i], 0.25f) << c.what << " (min above max) at " << i;
  // A fused residual Add and clamp (conv(x) + r, then a Clip): the bits of adding r to the plain
  // convolution's output and clamping, with weights packed on the fly and ahead of time.
  std::vector<float> r(out_size), plain(out_size);
  for (float& v : r) v = dist(rng);
  auto check_residual = [&](Conv2dParams q, const std::vector<fx::kernels::PackedOperand>* pk,
                            const std::string& how) {
    q.residual = nullptr;
    q.clamp_lo = -INFINITY;
    q.clamp_hi = INFINITY;
    fx::kernels::conv2d(q, x.data(), w.data(), c.bias ? b.data() : nullptr, plain.data(),
                        scratch.data(), pk);
    q.residual = r.data();
    q.clamp_lo = -0.25f;
    q.clamp_hi = 0.5f;
    std::fill(got.begin(), got.end(), -7.0f);
    fx::kernels::conv2d(q, x.data(), w.data(), c.bias ? b.data() : nullptr, got.data(),
                        scratch.data(), pk);
    for (int64_t i = 0; i < out_size; ++i)
      ASSERT_EQ(got[i], std::min(std::max(plain[i] + r[i], -0.25f), 0.5f))
          << c.what << " (residual" << how << ") at " << i;
  };
  check_residual(p, nullptr, "");
  check_residual(p, &packed, ", packed weights");
  EXPECT_EQ(fx::kernels::conv2d_uses_winograd(p), std::string(c.what).rfind("winograd", 0) == 0)
      << c.what;
#ifdef FXWASM_X86_DISPATCH
  const bool stem_kernels = fx::kernels::cpu_has_avx2_fma();  // (AVX-512 or AVX2)
#else
  const bool stem_kernels = false;
#endif
  EXPECT_EQ(fx::kernels::conv2d_uses_stem(p),
            stem_kernels && std::string(c.what).rfind("stem ", 0) == 0)
      << c.what;
  if (!fx::kernels::conv2d_uses_winograd(p)) return;
  // Both Winograd tilings, whichever conv2d picks on this machine: F(2x2, 3x3) and F(4x4, 3x3)
  // (tile rows of a partial vector, odd sizes with partial tiles), with weights packed on the
  // fly and ahead of time (the same bits), and a fused clamp.
  for (const int64_t tile : {2, 4}) {
    Conv2dParams pt = pc;
    pt.winograd_tile = tile;
    ASSERT_EQ(fx::kernels::winograd_output_tile(pt), tile) << c.what;
    std::fill(got.begin(), got.end(), -7.0f);
    fx::kernels::conv2d(pt, x.data(), w.data(), c.bias ? b.data() : nullptr, got.data(),
                        scratch.data());
    for (int64_t i = 0; i < out_size; ++i)
      ASSERT_NEAR(got[i], std::min(std::max(want[i], 0.0f), 0.5f), tol)
          << c.what << " (F(" << tile << "x" << tile << ", 3x3)) at " << i;
    const std::vector<fx::kernels::PackedOperand> packed_t =
        fx::kernels::conv2d_pack_weights(pt, w.data());
    ASSERT_EQ(static_cast<int64_t>(packed_t.size()), (tile + 2) * (tile + 2));
    fx::kernels::conv2d(pt, x.data(), w.data(), c.bias ? b.data() : nullptr, got_packed.data(),
                        scratch.data(), &packed_t);
    for (int64_t i = 0; i < out_size; ++i)
      ASSERT_EQ(got_packed[i], got[i])
          << c.what << " (F(" << tile << "x" << tile << ", 3x3), packed weights) at " << i;
    // Weights packed for the other tiling are not read as if they were these.
    Conv2dParams po = pt;
    po.winograd_tile = 6 - tile;
    const std::vector<fx::kernels::PackedOperand> packed_other =
        fx::kernels::conv2d_pack_weights(po, w.data());
    fx::kernels::conv2d(pt, x.data(), w.data(), c.bias ? b.data() : nullptr, got_packed.data(),
                        scratch.data(), &packed_other);
    for (int64_t i = 0; i < out_size; ++i)
      ASSERT_EQ(got_packed[i], got[i]) << c.what << " (F(" << tile << "x" << tile
                                       << ", 3x3), weights packed for the other tiling) at " << i;
    const std::string how = ", F(" + std::to_string(tile) + "x" + std::to_string(tile) + ", 3x3)";
    check_residual(pt, nullptr, how);
    check_residual(pt, &packed_t, how + ", packed weights");
  }
}

Conv2dParams asymmetric() {
  Conv2dParams p = conv(1, 3, 9, 8, 4, 3, 2, 0);
  p.pad_top = 1, p.pad_left = 0, p.pad_bottom = 2, p.pad_right = 1;
  p.KW = 2;
  return p;
}

Conv2dParams depthwise_7x1() {
  Conv2dParams p = conv(1, 17, 12, 10, 17, 7, 1, 0, 17);
  p.KW = 1;
  p.pad_top = 3, p.pad_bottom = 2, p.pad_left = 0, p.pad_right = 1;
  return p;
}

Conv2dParams depthwise_5x5_rows_s2() {
  Conv2dParams p = conv(2, 13, 11, 9, 13, 5, 1, 2, 13);
  p.stride_h = 2;
  p.pad_bottom = 1;
  return p;
}

Conv2dParams winograd_asymmetric() {
  Conv2dParams p = conv(1, 32, 12, 12, 32, 3, 1, 0);
  p.pad_top = 2, p.pad_left = 1, p.pad_bottom = 0, p.pad_right = 2;
  return p;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Conv2d,
    ::testing::Values(
        ConvCase{"3x3 pad 1", conv(2, 3, 10, 11, 5, 3, 1, 1), true},
        ConvCase{"3x3 stride 2", conv(1, 4, 13, 13, 6, 3, 2, 1), true},
        ConvCase{"stem 7x7/2 (ResNet's)", conv(1, 3, 32, 32, 8, 7, 2, 3), false},
        ConvCase{"7x7/2, 6 output channels", conv(1, 3, 32, 32, 6, 7, 2, 3), true},
        ConvCase{"pointwise", conv(2, 16, 7, 7, 24, 1, 1, 0), true},
        ConvCase{"pointwise stride 2", conv(1, 8, 9, 9, 4, 1, 2, 0), true},
        // A 7x7 output (49 columns) and 64 rows: the product runs transposed where panels are
        // 16 or 32 wide (sgemm_prefers_transposed).
        ConvCase{"pointwise 7x7, transposed product", conv(1, 192, 7, 7, 64, 1, 1, 0), true},
        ConvCase{"depthwise 3x3", conv(2, 8, 12, 12, 8, 3, 1, 1, 8), true},
        ConvCase{"depthwise 5x5/2", conv(1, 6, 15, 14, 6, 5, 2, 2, 6), false},
        // (Whole blocks of interleaved channels and a partial one, the 5x5 taps unrolled.)
        ConvCase{"depthwise 5x5, 20 channels", conv(1, 20, 14, 13, 20, 5, 1, 2, 20), true},
        ConvCase{"depthwise 5x5/2, 33 channels", conv(2, 33, 15, 16, 33, 5, 2, 2, 33), false},
        ConvCase{"depthwise 3x3/2", conv(1, 8, 17, 23, 8, 3, 2, 1, 8), true},
        ConvCase{"depthwise 3x3/2 even", conv(2, 3, 16, 32, 3, 3, 2, 1, 3), true},
        ConvCase{"depthwise 3x3 wide", conv(1, 4, 5, 37, 4, 3, 1, 1, 4), true},
        ConvCase{"depthwise 3x3 unpadded", conv(1, 4, 9, 30, 4, 3, 1, 0, 4), false},
        ConvCase{"depthwise 3x3/2 unpadded", conv(1, 4, 9, 30, 4, 3, 2, 0, 4), true},
        ConvCase{"depthwise 3x3 narrow", conv(1, 5, 4, 3, 5, 3, 1, 1, 5), true},
        // Rows long enough for 8-lane vectors, a 4-lane tail and scalar edges.
        ConvCase{"depthwise 3x3 long rows", conv(1, 3, 5, 53, 3, 3, 1, 0, 3), true},
        ConvCase{"depthwise 3x3/2 long rows", conv(1, 3, 7, 75, 3, 3, 2, 1, 3), true},
        ConvCase{"depthwise 3x3/2 narrow, odd", conv(1, 5, 9, 13, 5, 3, 2, 1, 5), false},
        // 7x7-like planes, channels in blocks of 8 with a partial last block (natively).
        ConvCase{"depthwise 3x3 7x7, 11 channels", conv(2, 11, 7, 7, 11, 3, 1, 1, 11), true},
        ConvCase{"depthwise 3x3/2 unpadded small", conv(1, 9, 9, 9, 9, 3, 2, 0, 9), true},
        ConvCase{"depthwise 3x3 14x14, two blocks", conv(1, 16, 14, 14, 16, 3, 1, 1, 16), true},
        // 16-lane blocks (AVX-512) of the channel-interleaved path: two full, one partial.
        ConvCase{"depthwise 3x3/2 28x28, 40 channels", conv(1, 40, 28, 28, 40, 3, 2, 1, 40), true},
        ConvCase{"depthwise 3x3 56-wide, 40 channels", conv(1, 40, 7, 56, 40, 3, 1, 1, 40), false},
        // Stride 2 on rows under eight wide, padding 2 at stride 2, two images, and channel
        // counts that leave partial blocks of the channel-interleaved paths.
        ConvCase{"depthwise 3x3/2 7-wide rows", conv(1, 20, 6, 7, 20, 3, 2, 1, 20), true},
        ConvCase{"depthwise 3x3/2 pad 2", conv(2, 17, 5, 12, 17, 3, 2, 2, 17), false},
        ConvCase{"depthwise 3x3 fewer pixels than lanes", conv(1, 8, 2, 3, 8, 3, 1, 1, 8), true},
        ConvCase{"depthwise 3x3 pad 2", conv(1, 2, 6, 11, 2, 3, 1, 2, 2), true},
        // The flat stride-1 path (each plane one array, the edge columns masked): one-pixel
        // and two-pixel-wide planes, rows of 9 and 17 (vectors straddling rows), one row.
        ConvCase{"depthwise 3x3 1-wide", conv(1, 6, 5, 1, 6, 3, 1, 1, 6), true},
        ConvCase{"depthwise 3x3 2-wide, two images", conv(2, 5, 4, 2, 5, 3, 1, 1, 5), true},
        ConvCase{"depthwise 3x3 9-wide", conv(1, 7, 3, 9, 7, 3, 1, 1, 7), false},
        ConvCase{"depthwise 3x3 17-wide, 19 channels", conv(2, 19, 6, 17, 19, 3, 1, 1, 19), true},
        ConvCase{"depthwise 3x3 one row", conv(1, 3, 1, 13, 3, 3, 1, 1, 3), true},
        // Rows of whole vectors (no masks but at the row ends): one 16-lane vector a row, two,
        // and seven (the sixteen-lane flat kernel natively where AVX-512 runs whole).
        ConvCase{"depthwise 3x3 16-wide", conv(1, 3, 5, 16, 3, 3, 1, 1, 3), true},
        ConvCase{"depthwise 3x3 32-wide, two images", conv(2, 5, 6, 32, 5, 3, 1, 1, 5), false},
        ConvCase{"depthwise 3x3 112-wide", conv(1, 3, 4, 112, 3, 3, 1, 1, 3), true},
        // (read in place past its head and tail rows: the eight-lane kernel without AVX-512)
        ConvCase{"depthwise 3x3 120-wide, 9 rows", conv(1, 3, 9, 120, 3, 3, 1, 1, 3), false},
        // Stride 2 on rows of 48 and more (phase planes; even widths split flat where 512-bit
        // operations do not run whole): even and odd widths and heights.
        ConvCase{"depthwise 3x3/2 48-wide, odd height", conv(2, 9, 7, 48, 9, 3, 2, 1, 9), true},
        ConvCase{"depthwise 3x3/2 51-wide", conv(1, 5, 6, 51, 5, 3, 2, 1, 5), false},
        ConvCase{"depthwise 3x3/2 64-wide, 2 rows", conv(1, 4, 2, 64, 4, 3, 2, 1, 4), true},
        ConvCase{"depthwise 3x3/2 49-wide, 1 row", conv(1, 3, 1, 49, 3, 3, 2, 1, 3), true},
        ConvCase{"depthwise 3x3/2 112-wide, 17 channels", conv(1, 17, 9, 112, 17, 3, 2, 1, 17),
                 true},
        ConvCase{"depthwise 3x3/2 97-wide, two images", conv(2, 3, 8, 97, 3, 3, 2, 1, 3), false},
        ConvCase{"depthwise 3x3/2 130-wide, odd height", conv(1, 5, 7, 130, 5, 3, 2, 1, 5), true},
        // Even widths split flat into even and odd columns, a row at a time: rows of fewer
        // outputs than lanes (running on into the next rows, and past the plane's end), odd
        // heights (a zero row below), one row, and two images.
        // Stride 1 on widths of whole vectors (row by row, masks on a row's ends only).
        ConvCase{"depthwise 3x3 8-wide, two images", conv(2, 5, 5, 8, 5, 3, 1, 1, 5), true},
        ConvCase{"depthwise 3x3 3-pixel planes", conv(1, 6, 1, 3, 6, 3, 1, 1, 6), true},
        ConvCase{"depthwise 3x3 16x16, 9 channels", conv(1, 9, 16, 16, 9, 3, 1, 1, 9), false},
        ConvCase{"depthwise 3x3/2 14x14, 24 channels", conv(1, 24, 14, 14, 24, 3, 2, 1, 24), true},
        ConvCase{"depthwise 3x3/2 10-wide, odd height", conv(2, 7, 9, 10, 7, 3, 2, 1, 7), true},
        ConvCase{"depthwise 3x3/2 12-wide, 1 row", conv(1, 5, 1, 12, 5, 3, 2, 1, 5), false},
        ConvCase{"depthwise 3x3/2 20x20, 33 channels", conv(1, 33, 20, 20, 33, 3, 2, 1, 33), true},
        ConvCase{"depthwise 3x3/2 94-wide, odd height", conv(1, 4, 5, 94, 4, 3, 2, 1, 4), true},
        // (Four lanes, wasm: every even width) rows of one and two outputs.
        ConvCase{"depthwise 3x3/2 2-wide, odd height", conv(1, 3, 3, 2, 3, 3, 2, 1, 3), true},
        ConvCase{"depthwise 3x3/2 4x4, two images", conv(2, 5, 4, 4, 5, 3, 2, 1, 5), false},
        // Larger kernels take the channel-interleaved path natively at any plane size
        // (ConvNeXt's 7x7 pad 3): partial 16- and 8-lane blocks, two images, stride 2, a plane
        // smaller than the kernel, 7x1 taps, and a dilated one that keeps the row loop.
        ConvCase{"depthwise 7x7 pad 3, 40 channels", conv(1, 40, 14, 14, 40, 7, 1, 3, 40), true},
        ConvCase{"depthwise 7x7 pad 3, 58-wide", conv(2, 19, 9, 58, 19, 7, 1, 3, 19), false},
        ConvCase{"depthwise 7x7/2 pad 3, 7x7 plane", conv(1, 24, 7, 7, 24, 7, 2, 3, 24), true},
        ConvCase{"depthwise 7x7 pad 3, 3x5 plane", conv(1, 9, 3, 5, 9, 7, 1, 3, 9), true},
        ConvCase{"depthwise 5x5 dilated 2", conv(1, 12, 13, 13, 12, 5, 1, 4, 12, 2), true},
        ConvCase{"depthwise 7x1", depthwise_7x1(), true},
        // Four-lane builds (wasm) run stride-1 rows of larger kernels on a zero-padded plane,
        // and so do kernels of more than 49 taps natively (8x8 pad 4): stride 2 down the columns
        // only, and outputs under four wide (the scalar loop).
        ConvCase{"depthwise 8x8 pad 4", conv(1, 6, 10, 13, 6, 8, 1, 4, 6), true},
        ConvCase{"depthwise 5x5 pad 2, stride 2 down columns", depthwise_5x5_rows_s2(), false},
        ConvCase{"depthwise 7x7 pad 3, 3-wide plane", conv(1, 5, 6, 3, 5, 7, 1, 3, 5), true},
        // Stride 2 along rows there too (the padded rows' even and odd halves): even and odd
        // left pads, rows of an odd width, kernels of more than 49 taps (natively) and 5x5.
        ConvCase{"depthwise 8x8/2 pad 4", conv(1, 6, 13, 17, 6, 8, 2, 4, 6), true},
        ConvCase{"depthwise 8x8/2 pad 3, two images", conv(2, 5, 12, 21, 5, 8, 2, 3, 5), false},
        ConvCase{"depthwise 5x5/2 pad 1", conv(1, 7, 11, 16, 7, 5, 2, 1, 7), true},
        ConvCase{"depthwise 5x5/2 pad 2, 29 wide", conv(1, 4, 9, 29, 4, 5, 2, 2, 4), false},
        // Few input channels (a network's first layer): the direct path on AVX2 and AVX-512 hosts,
        // im2col elsewhere. Stride 2 padded and not, odd and even widths, one and two images, rows
        // of one, two and three vectors with partial last ones, 1x1, 2x2 and 5x5 taps, stride 1.
        ConvCase{"stem 3x3/2 pad 1", conv(1, 3, 40, 40, 16, 3, 2, 1), true},
        ConvCase{"stem 3x3/2 unpadded, odd", conv(2, 3, 37, 71, 24, 3, 2, 0), true},
        ConvCase{"stem 3x3/2 pad 1, 49 wide", conv(1, 3, 5, 98, 8, 3, 2, 1), false},
        ConvCase{"stem 3x3/2 unpadded, 111 wide", conv(1, 3, 5, 224, 8, 3, 2, 0), true},
        ConvCase{"stem 3x3/2 pad 1, 16 wide", conv(1, 3, 4, 32, 8, 3, 2, 1), true},
        ConvCase{"stem 3x3 pad 1, stride 1", conv(1, 3, 6, 33, 16, 3, 1, 1), true},
        ConvCase{"stem 2x2, 4 channels", conv(1, 4, 6, 40, 8, 2, 1, 0), true},
        ConvCase{"stem 5x5/2 pad 2, one channel", conv(1, 1, 9, 64, 8, 5, 2, 2), true},
        ConvCase{"stem 1x1/2, 3 channels", conv(1, 3, 4, 40, 8, 1, 2, 0), true},
        ConvCase{"grouped", conv(1, 8, 9, 9, 12, 3, 1, 1, 4), true},
        ConvCase{"K and N over one GEMM block", conv(1, 32, 48, 50, 8, 3, 1, 1), true},
        // Two im2col bands (256 + 124 output pixels), the first ending inside an output row.
        ConvCase{"3x3/2 in two im2col bands", conv(1, 64, 40, 37, 4, 3, 2, 1), true},
        // Bands unfolded into the GEMM's panels: K past one panel block (432 > 384), a last
        // partial panel, one output channel, a first layer's 3 channels, and weights kept for
        // the transposed product (which unfolds plain rows).
        ConvCase{"3x3/2, K over a panel block", conv(1, 48, 21, 19, 7, 3, 2, 1), true},
        ConvCase{"3x3/2, one output channel", conv(2, 5, 9, 9, 1, 3, 2, 1), true},
        ConvCase{"stem 3x3/2 unpadded, 3 channels", conv(1, 3, 40, 37, 16, 3, 2, 0), true},
        ConvCase{"3x3/2, transposed product", conv(1, 64, 14, 14, 128, 3, 2, 1), false},
        ConvCase{"5x5/3 dilated 2", conv(1, 3, 20, 23, 4, 5, 3, 2, 1, 2), true},
        ConvCase{"dilated", conv(1, 4, 16, 16, 4, 3, 1, 2, 1, 2), true},
        ConvCase{"asymmetric pads, 3x2 kernel", asymmetric(), true},
        // Winograd F(2x2, 3x3): tile rows not a multiple of 4 tiles, odd output
        // sizes (half tiles), channels not a multiple of the panel height.
        ConvCase{"winograd 3x3 pad 1", conv(2, 32, 14, 14, 40, 3, 1, 1), true},
        ConvCase{"winograd odd output", conv(1, 33, 13, 17, 35, 3, 1, 1), true},
        ConvCase{"winograd 16 input channels", conv(1, 16, 15, 15, 64, 3, 1, 1), false},
        ConvCase{"winograd unpadded", conv(1, 32, 16, 15, 32, 3, 1, 0), false},
        ConvCase{"winograd asymmetric pads", winograd_asymmetric(), true},
        // Enough 4x4 tiles for F(4x4, 3x3) where conv2d picks it (four-lane builds): partial
        // tiles and vectors on a 27x27 output, and rows of several whole vectors of tiles.
        ConvCase{"winograd 27x27", conv(1, 16, 27, 27, 32, 3, 1, 1), true},
        ConvCase{"winograd wide rows", conv(2, 16, 10, 70, 32, 3, 1, 1), false},
        ConvCase{"winograd 7x7 output", conv(1, 32, 7, 7, 48, 3, 1, 1), true},
        ConvCase{"too few tiles for winograd", conv(1, 32, 6, 6, 32, 3, 1, 1), true}));

// A depthwise 3x3 at stride 1 (2) reads each plane (phase plane) as one flat array, where a
// row's last pixel is the flat neighbour of the next row's first output: an infinity or NaN
// there must reach only the outputs whose windows hold it (a mask by multiplication would make
// 0 * inf = NaN). From 56 wide at stride 1 the middle of a plane is read in place, its first and
// last rows from a padded copy: no output reads the plane before or after its own.
TEST(Conv2dDepthwise, NonFiniteInputsStayInTheirWindows) {
  for (const auto& [W, stride] : {std::pair<int64_t, int64_t>{1, 1},
                                  {3, 1},
                                  {7, 1},
                                  {8, 1},
                                  {14, 1},
                                  {16, 1},
                                  {56, 1},
                                  {64, 1},
                                  {112, 1},
                                  {17, 1},
                                  {10, 2},
                                  {14, 2},
                                  {28, 2},
                                  {50, 2},
                                  {51, 2},
                                  {112, 2}}) {
    const Conv2dParams p = conv(1, 18, 5, W, 18, 3, stride, 1, 18);
    const int64_t HW = p.H * W;
    std::vector<float> x(static_cast<size_t>(p.C * HW)), w(static_cast<size_t>(p.C * 9));
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.125f * static_cast<float>(i % 5) - 0.25f;
    for (int64_t c = 0; c < p.C; ++c) {  // every row's last pixel, and every row's first
      for (int64_t h = 0; h < p.H; ++h) {
        x[static_cast<size_t>(c * HW + h * W + W - 1)] = c % 2 ? INFINITY : NAN;
        if (c % 3 == 0) x[static_cast<size_t>(c * HW + h * W)] = -INFINITY;
      }
    }
    std::vector<float> got(static_cast<size_t>(p.C * p.out_h() * p.out_w())), want(got.size());
    std::vector<float> scratch(fx::kernels::conv2d_scratch_size(p) + 1);
    fx::kernels::conv2d(p, x.data(), w.data(), nullptr, got.data(), scratch.data());
    fx::kernels::conv2d_reference(p, x.data(), w.data(), nullptr, want.data());
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::isfinite(want[i])) {
        ASSERT_NEAR(got[i], want[i], 1e-5f) << "W " << W << "/" << stride << " at " << i;
      } else {
        ASSERT_EQ(std::isnan(got[i]), std::isnan(want[i]))
            << "W " << W << "/" << stride << " at " << i;
        if (!std::isnan(want[i])) {
          ASSERT_EQ(got[i], want[i]) << "W " << W << "/" << stride << " at " << i;
        }
      }
    }
  }
}

#ifdef FXWASM_X86_DISPATCH
// The stride-2 even-width kernel on sixteen lanes (Intel AVX-512 hosts, from 28 wide) sums each
// output's taps as the eight-lane one does: the same bits, on rows of one vector running on into
// the next rows and the next plane, rows of several, odd heights, two images, a clamp, no bias.
TEST(Conv2dDepthwise, StrideTwoEvenWidthsOnSixteenLanesGiveTheEightLaneBits) {
  if (!fx::kernels::cpu_has_avx512()) GTEST_SKIP() << "no AVX-512F on this host";
  struct Case {
    int64_t N, C, H, W;
    bool clamp, bias;
  };
  for (const Case& k : {Case{1, 5, 28, 28, true, true}, Case{2, 3, 9, 32, false, true},
                        Case{1, 4, 56, 56, true, false}, Case{1, 3, 7, 94, false, true},
                        Case{1, 2, 1, 40, true, true}, Case{2, 3, 6, 60, false, false}}) {
    Conv2dParams p = conv(k.N, k.C, k.H, k.W, k.C, 3, 2, 1, k.C);
    if (k.clamp) p.clamp_lo = -0.25f, p.clamp_hi = 0.5f;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(k.N * k.C * k.H * k.W)), w(k.C * 9), b(k.C);
    for (std::vector<float>* v : {&x, &w, &b})
      for (float& f : *v) f = dist(rng);
    const size_t out_size = static_cast<size_t>(k.N * k.C * p.out_h() * p.out_w());
    std::vector<float> eight(out_size, -7.0f), sixteen(out_size, 7.0f);
    const float* bias = k.bias ? b.data() : nullptr;
    fx::kernels::depthwise3x3_s2_even_avx512(p, x.data(), w.data(), bias, eight.data());
    fx::kernels::depthwise3x3_s2_even_avx512_16(p, x.data(), w.data(), bias, sixteen.data());
    for (size_t i = 0; i < out_size; ++i)
      ASSERT_EQ(sixteen[i], eight[i])
          << k.N << "x" << k.C << "x" << k.H << "x" << k.W << " at " << i;
  }
}
#endif

// A per-channel scale fused before a convolution (Conv2dParams::in_scale): the bits of the
// convolution of the input scaled first, per image or one scale for every image, for 1x1
// convolutions large enough to scale the GEMM's panels and small ones, a 3x3 and a depthwise one
// (which scale a copy of the input).
TEST(Conv2d, InputScaleGivesTheBitsOfTheScaledInput) {
  std::mt19937 rng(29);
  struct Case {
    int64_t N, C, M, H, K, group;
  };
  for (const Case& k :
       {Case{2, 24, 16, 20, 1, 1}, Case{1, 96, 80, 14, 1, 1}, Case{1, 8, 4, 5, 1, 1},
        Case{2, 12, 20, 9, 3, 1}, Case{1, 32, 32, 12, 3, 32}}) {
    for (int64_t stride : {k.C, int64_t{0}}) {
      Conv2dParams p;
      p.N = k.N, p.C = k.C, p.M = k.M, p.H = p.W = k.H, p.KH = p.KW = k.K, p.group = k.group;
      p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = k.K / 2;
      p.clamp_lo = 0.0f;
      std::vector<float> x(p.N * p.C * p.H * p.W), w(p.M * (p.C / p.group) * k.K * k.K), b(p.M),
          s(p.N * p.C);
      fill_uniform(rng, {&x, &w, &b, &s});
      std::vector<float> scaled = x;
      for (int64_t n = 0; n < p.N; ++n)
        for (int64_t c = 0; c < p.C; ++c)
          for (int64_t i = 0; i < p.H * p.W; ++i)
            scaled[(n * p.C + c) * p.H * p.W + i] *= s[n * stride + c];
      const auto packed = fx::kernels::conv2d_pack_weights(p, w.data());
      std::vector<float> scratch(fx::kernels::conv2d_scratch_size(p) + 16);
      const size_t out_size = static_cast<size_t>(p.N * p.M * p.out_h() * p.out_w());
      std::vector<float> want(out_size), got(out_size);
      fx::kernels::conv2d(p, scaled.data(), w.data(), b.data(), want.data(), scratch.data(),
                          &packed);
      p.in_scale = s.data();
      p.in_scale_stride = stride;
      fx::kernels::conv2d(p, x.data(), w.data(), b.data(), got.data(), scratch.data(), &packed);
      for (size_t i = 0; i < out_size; ++i)
        ASSERT_EQ(got[i], want[i]) << p.C << "->" << p.M << " " << k.K << "x" << k.K << " at "
                                   << p.H << "x" << p.W << ", stride " << stride << ", at " << i;
    }
  }
}

TEST(Pool2d, MaxAndAverageOnAHandComputedPlane) {
  // 1x1x3x3 plane 1..9, 2x2 windows, stride 1, padding 1 at the bottom/right.
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  Pool2dParams p;
  p.H = p.W = 3;
  p.KH = p.KW = 2;
  p.pad_bottom = p.pad_right = 1;
  ASSERT_EQ(p.out_h(), 3);
  std::vector<float> out(9);
  fx::kernels::max_pool2d(p, x.data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{5, 6, 6, 8, 9, 9, 8, 9, 9}));
  fx::kernels::avg_pool2d(p, x.data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{3, 4, 4.5f, 6, 7, 7.5f, 7.5f, 8.5f, 9}));
  p.count_include_pad = true;
  fx::kernels::avg_pool2d(p, x.data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{3, 4, 2.25f, 6, 7, 3.75f, 3.75f, 4.25f, 2.25f}));
}

TEST(Pool2d, CeilModeDropsAWindowThatStartsInTheTrailingPadding) {
  Pool2dParams p;
  p.H = p.W = 5;
  p.KH = p.KW = 2;
  p.stride_h = p.stride_w = 2;
  EXPECT_EQ(p.out_h(), 2);
  p.ceil_mode = true;
  EXPECT_EQ(p.out_h(), 3);  // the third window starts at 4, inside the input
  p.H = 4;
  EXPECT_EQ(p.out_h(), 2);  // a third window would start at 4 == H
}

TEST(Pool2d, GlobalAverage) {
  const std::vector<float> x = {1, 2, 3, 4, 10, 20, 30, 40};
  std::vector<float> out(2);
  fx::kernels::global_avg_pool(1, 2, 4, x.data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{2.5f, 25.0f}));
  // Planes long enough for the vector chains plus a scalar tail, against a double reference.
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const int64_t hw : {16, 53, 169, 3136}) {
    std::vector<float> y(2 * 3 * hw), avg(6);
    for (float& v : y) v = dist(rng);
    fx::kernels::global_avg_pool(2, 3, hw, y.data(), avg.data());
    for (int64_t nc = 0; nc < 6; ++nc) {
      double sum = 0;
      for (int64_t i = 0; i < hw; ++i) sum += y[nc * hw + i];
      EXPECT_NEAR(avg[nc], sum / static_cast<double>(hw), 1e-6) << hw << " " << nc;
    }
  }
}

TEST(Pool2d, UnaryWithPlaneMeansGivesTheBitsOfTheOpThenGlobalAverage) {
  // SiLU and GELU over planes of every size class (under a vector, a scalar tail, several planes
  // to a run, one plane past a run, past a thread's chunk), at 1 and 2 threads: the values of
  // unary_f32 and the means of global_avg_pool over them, bit for bit; a NaN or an infinity
  // in a plane.
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> dist(-6.0f, 6.0f);
  for (const int threads : {1, 2}) {
    fx::kernels::set_num_threads(threads);
    for (const fx::kernels::UnaryOp op : {fx::kernels::UnaryOp::Silu, fx::kernels::UnaryOp::Gelu})
      for (const int64_t hw : {1, 7, 49, 53, 196, 3136, 5000, 20000}) {
        const int64_t planes = hw >= 5000 ? 5 : 37;
        std::vector<float> x(static_cast<size_t>(planes * hw));
        for (float& v : x) v = dist(rng);
        x[static_cast<size_t>(hw / 2)] = NAN;
        x[x.size() - 1] = INFINITY;
        std::vector<float> want(x.size()), got(x.size(), -1.0f);
        std::vector<float> want_means(static_cast<size_t>(planes)), means(want_means.size(), -1.0f);
        fx::kernels::unary_f32(op, x.data(), want.data(), static_cast<int64_t>(x.size()));
        fx::kernels::global_avg_pool(1, planes, hw, want.data(), want_means.data());
        fx::kernels::unary_f32_plane_means(op, x.data(), got.data(), means.data(), planes, hw);
        SCOPED_TRACE(::testing::Message() << "threads " << threads << " hw " << hw);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), x.size() * sizeof(float)), 0);
        EXPECT_EQ(std::memcmp(means.data(), want_means.data(), means.size() * sizeof(float)), 0);
        EXPECT_TRUE(std::isnan(means[0]));
      }
  }
  fx::kernels::set_num_threads(1);
}

}  // namespace

namespace {

using fx::kernels::BinaryOp;
using fx::kernels::Shape;
using fx::kernels::UnaryOp;

int64_t operand_index(const Shape& out, const Shape& s, int64_t flat) {
  return fx::kernels::broadcast_index(out, s, flat);
}

TEST(Elementwise, BroadcastShapesFollowNumpy) {
  Shape out;
  ASSERT_TRUE(fx::kernels::broadcast_shapes({2, 1, 4}, {3, 1}, out));
  EXPECT_EQ(out, (Shape{2, 3, 4}));
  ASSERT_TRUE(fx::kernels::broadcast_shapes({}, {5}, out));
  EXPECT_EQ(out, (Shape{5}));
  ASSERT_TRUE(fx::kernels::broadcast_shapes({0, 1}, {1, 3}, out));
  EXPECT_EQ(out, (Shape{0, 3}));
  EXPECT_FALSE(fx::kernels::broadcast_shapes({2, 3}, {4, 3}, out));
  // Element (1, 1) of a [2, 3] output is flat 4: element 1 of a [3] row, 1 of a [2, 1] column.
  EXPECT_EQ(fx::kernels::broadcast_index({2, 3}, {3}, 4), 1);
  EXPECT_EQ(fx::kernels::broadcast_index({2, 3}, {2, 1}, 4), 1);
  EXPECT_EQ(fx::kernels::broadcast_index({2, 3}, {1}, 4), 0);
  EXPECT_EQ(fx::kernels::broadcast_index({2, 3}, {2, 3}, 4), 4);
}

TEST(Elementwise, BinaryBroadcastingMatchesIndexArithmetic) {
  const std::vector<std::pair<Shape, Shape>> cases = {{{2, 3, 4}, {2, 3, 4}},
                                                      {{2, 3, 4}, {}},
                                                      {{}, {2, 3}},
                                                      {{2, 3, 4}, {4}},
                                                      {{2, 3, 4}, {3, 1}},
                                                      {{2, 1, 4}, {1, 3, 1}},
                                                      {{1, 5, 1, 2}, {3, 1, 4, 1}},
                                                      {{4, 1}, {4, 7}}};
  // And shapes whose dimensions merge (for_each_run): per-channel operands of NCHW tensors,
  // all-ones shapes, ranks past the inline odometer (9), empty outputs, and random pairs.
  std::vector<std::pair<Shape, Shape>> more = {
      {{2, 3, 4, 5}, {1, 3, 1, 1}},
      {{2, 3, 4, 5}, {2, 3, 1, 1}},
      {{1, 3, 1, 1}, {2, 3, 4, 5}},
      {{3, 1, 4, 5}, {1, 2, 4, 5}},
      {{2, 1, 3, 1, 4}, {2, 5, 3, 1, 4}},
      {{1, 1, 1}, {1}},
      {{2, 1, 2, 1, 2, 1, 2, 1, 3}, {1, 2, 1, 2, 1, 2, 1, 2, 1}},
      {{2, 0, 3}, {1, 1, 3}}};
  std::mt19937 rng(3);
  for (int k = 0; k < 200; ++k) {
    const int rank = static_cast<int>(rng() % 6);
    Shape x, y;
    for (int d = 0; d < rank; ++d) {
      const int64_t n = 1 + static_cast<int64_t>(rng() % 4);
      const unsigned pick = rng() % 4;  // both n, x broadcast, y broadcast, both 1
      x.push_back(pick == 1 || pick == 3 ? 1 : n);
      y.push_back(pick == 2 || pick == 3 ? 1 : n);
    }
    if (rng() % 3 == 0 && !y.empty()) y.erase(y.begin());  // lower rank on one side
    more.emplace_back(x, y);
  }
  std::vector<std::pair<Shape, Shape>> all = cases;
  all.insert(all.end(), more.begin(), more.end());
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (const auto& [as, bs] : all) {
    Shape os;
    ASSERT_TRUE(fx::kernels::broadcast_shapes(as, bs, os));
    std::vector<float> a(fx::kernels::numel(as)), b(fx::kernels::numel(bs));
    for (float& v : a) v = dist(rng);
    for (float& v : b) v = dist(rng);
    std::vector<float> sub(fx::kernels::numel(os));
    std::vector<uint8_t> less(fx::kernels::numel(os));
    fx::kernels::binary_f32(BinaryOp::Sub, as, a.data(), bs, b.data(), sub.data());
    fx::kernels::binary_f32(BinaryOp::Less, as, a.data(), bs, b.data(), less.data());
    for (int64_t i = 0; i < fx::kernels::numel(os); ++i) {
      const float x = a[operand_index(os, as, i)], y = b[operand_index(os, bs, i)];
      ASSERT_EQ(sub[i], x - y) << "element " << i << " of " << testing::PrintToString(as) << " - "
                               << testing::PrintToString(bs);
      ASSERT_EQ(less[i], x < y ? 1 : 0) << "element " << i;
    }
  }
}

TEST(Elementwise, IntegerModFollowsTheDivisorsSignAndFModTheDividends) {
  const std::vector<int64_t> a = {7, -7, 7, -7}, b = {3, 3, -3, -3};
  std::vector<int64_t> mod(4), fmod(4), div(4);
  fx::kernels::binary_i64(BinaryOp::Mod, {4}, a.data(), {4}, b.data(), mod.data());
  fx::kernels::binary_i64(BinaryOp::FMod, {4}, a.data(), {4}, b.data(), fmod.data());
  fx::kernels::binary_i64(BinaryOp::Div, {4}, a.data(), {4}, b.data(), div.data());
  EXPECT_EQ(mod, (std::vector<int64_t>{1, 2, -2, -1}));
  EXPECT_EQ(fmod, (std::vector<int64_t>{1, -1, 1, -1}));
  EXPECT_EQ(div, (std::vector<int64_t>{2, -2, -2, 2}));
}

TEST(Elementwise, UnaryActivations) {
  const std::vector<float> x = {-3.0f, -0.5f, 0.0f, 0.5f, 3.0f};
  std::vector<float> y(x.size());
  auto run = [&](UnaryOp op, float alpha = 0.0f, float beta = 0.0f) {
    fx::kernels::unary_f32(op, x.data(), y.data(), static_cast<int64_t>(x.size()), alpha, beta);
    return y;
  };
  EXPECT_EQ(run(UnaryOp::Relu), (std::vector<float>{0, 0, 0, 0.5f, 3}));
  EXPECT_EQ(run(UnaryOp::LeakyRelu, 0.1f), (std::vector<float>{-0.3f, -0.05f, 0, 0.5f, 3}));
  EXPECT_EQ(run(UnaryOp::Clip, -1.0f, 1.0f), (std::vector<float>{-1, -0.5f, 0, 0.5f, 1}));
  EXPECT_EQ(run(UnaryOp::HardSwish),
            (std::vector<float>{0, -0.5f * (2.5f / 6.0f), 0, 0.5f * (3.5f / 6.0f), 3}));
  run(UnaryOp::Sigmoid);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], 1.0 / (1.0 + std::exp(-x[i])), 1e-7);
  run(UnaryOp::Gelu);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(y[i], 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0))), 1e-6);
  // SiLU: the bits of Sigmoid, then a float multiply by x.
  const std::vector<float> sig = run(UnaryOp::Sigmoid);
  run(UnaryOp::Silu);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i] * sig[i]) << x[i];
  EXPECT_EQ(run(UnaryOp::Round), (std::vector<float>{-3, -0.0f, 0, 0, 3}));  // half to even
}

TEST(Elementwise, SoftmaxLayerNormAndBatchNorm) {
  const std::vector<float> x = {1000.0f, 1001.0f, 1002.0f, -1.0f, 0.0f, 1.0f};
  std::vector<float> y(6), ly(6);
  fx::kernels::softmax_f32(x.data(), y.data(), 2, 3);
  fx::kernels::softmax_f32(x.data(), ly.data(), 2, 3, /*log=*/true);
  const double e = std::exp(1.0), z = 1 + e + e * e;
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(y[r * 3 + i], std::pow(e, i) / z, 1e-6);
      EXPECT_NEAR(ly[r * 3 + i], i - std::log(z), 1e-5);
    }
  const std::vector<float> scale = {1.0f, 2.0f, 3.0f}, bias = {0.5f, 0.5f, 0.5f};
  fx::kernels::layer_norm_f32(x.data(), scale.data(), bias.data(), y.data(), 2, 3, 0.0f);
  const float s = static_cast<float>(std::sqrt(1.5));  // (x - mean) / std of {-1, 0, 1}
  for (int r = 0; r < 2; ++r) {
    EXPECT_NEAR(y[r * 3 + 0], -s * 1.0f + 0.5f, 1e-4);
    EXPECT_NEAR(y[r * 3 + 1], 0.5f, 1e-4);
    EXPECT_NEAR(y[r * 3 + 2], s * 3.0f + 0.5f, 1e-4);
  }
  // BatchNorm on N=1, C=2, spatial=3.
  const std::vector<float> mean = {1001.0f, 0.0f}, var = {4.0f, 1.0f}, g = {2.0f, 1.0f},
                           bb = {1.0f, -1.0f};
  fx::kernels::batch_norm_f32(x.data(), g.data(), bb.data(), mean.data(), var.data(), y.data(), 1,
                              2, 3, 0.0f);
  EXPECT_EQ(y, (std::vector<float>{0.0f, 1.0f, 2.0f, -2.0f, -1.0f, 0.0f}));
}

}  // namespace

namespace {

using fx::kernels::ReduceOp;

TEST(TensorOps, MatmulShapesFollowNumpy) {
  Shape out;
  ASSERT_TRUE(fx::kernels::matmul_shape({2, 3}, {3, 4}, out));
  EXPECT_EQ(out, (Shape{2, 4}));
  ASSERT_TRUE(fx::kernels::matmul_shape({3}, {3, 4}, out));
  EXPECT_EQ(out, (Shape{4}));
  ASSERT_TRUE(fx::kernels::matmul_shape({5, 2, 3}, {3}, out));
  EXPECT_EQ(out, (Shape{5, 2}));
  ASSERT_TRUE(fx::kernels::matmul_shape({2, 1, 4, 3}, {5, 3, 6}, out));
  EXPECT_EQ(out, (Shape{2, 5, 4, 6}));
  EXPECT_FALSE(fx::kernels::matmul_shape({2, 3}, {4, 5}, out));
  EXPECT_FALSE(fx::kernels::matmul_shape({2, 2, 3}, {3, 3, 1}, out));
}

TEST(TensorOps, BatchedMatmulMatchesPerBatchLoops) {
  const std::vector<std::pair<Shape, Shape>> cases = {{{7, 5}, {5, 3}},
                                                      {{2, 4, 5}, {5, 3}},
                                                      {{2, 1, 4, 5}, {3, 5, 2}},
                                                      {{3, 4, 5}, {3, 5, 6}},
                                                      {{5}, {2, 5, 3}}};
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const auto& [as, bs] : cases) {
    Shape os;
    ASSERT_TRUE(fx::kernels::matmul_shape(as, bs, os));
    std::vector<float> a(fx::kernels::numel(as)), b(fx::kernels::numel(bs)),
        c(fx::kernels::numel(os));
    for (float& v : a) v = dist(rng);
    for (float& v : b) v = dist(rng);
    fx::kernels::matmul_f32(as, a.data(), bs, b.data(), c.data());
    // Reference: promote, broadcast batch dims by index arithmetic, triple loop.
    Shape pa = as, pb = bs;
    if (pa.size() == 1) pa.insert(pa.begin(), 1);
    if (pb.size() == 1) pb.push_back(1);
    const int64_t M = pa[pa.size() - 2], K = pa.back(), N = pb.back();
    const Shape ab(pa.begin(), pa.end() - 2), bb(pb.begin(), pb.end() - 2);
    Shape batch;
    ASSERT_TRUE(fx::kernels::broadcast_shapes(ab, bb, batch));
    for (int64_t i = 0; i < fx::kernels::numel(batch); ++i) {
      const int64_t ia = operand_index(batch, ab, i), ib = operand_index(batch, bb, i);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k) acc += a[(ia * M + m) * K + k] * b[(ib * K + k) * N + n];
          ASSERT_NEAR(c[(i * M + m) * N + n], acc, 1e-5);
        }
    }
  }
}

TEST(TensorOps, ReductionsOverAxes) {
  // x[2, 3, 2] = 0..11
  std::vector<float> x(12);
  for (int i = 0; i < 12; ++i) x[i] = static_cast<float>(i);
  const Shape s = {2, 3, 2};
  EXPECT_EQ(fx::kernels::reduce_shape(s, {1}, true), (Shape{2, 1, 2}));
  EXPECT_EQ(fx::kernels::reduce_shape(s, {0, 2}, false), (Shape{3}));
  EXPECT_EQ(fx::kernels::reduce_shape(s, {}, false), (Shape{}));
  std::vector<float> out(4);
  fx::kernels::reduce_f32(ReduceOp::Sum, s, x.data(), {1}, out.data());
  EXPECT_EQ(out, (std::vector<float>{6, 9, 24, 27}));
  fx::kernels::reduce_f32(ReduceOp::Mean, s, x.data(), {1}, out.data());
  EXPECT_EQ(out, (std::vector<float>{2, 3, 8, 9}));
  std::vector<float> out3(3);
  fx::kernels::reduce_f32(ReduceOp::Max, s, x.data(), {2, 0}, out3.data());
  EXPECT_EQ(out3, (std::vector<float>{7, 9, 11}));
  std::vector<float> all(1);
  fx::kernels::reduce_f32(ReduceOp::L2, s, x.data(), {}, all.data());
  EXPECT_NEAR(all[0], std::sqrt(506.0), 1e-4);
  fx::kernels::reduce_f32(ReduceOp::LogSumExp, {3}, std::vector<float>{1000, 1000, 1000}.data(), {},
                          all.data());
  EXPECT_NEAR(all[0], 1000 + std::log(3.0), 1e-3);
  std::vector<int64_t> arg(4);
  const std::vector<float> y = {1, 3, 3, 0, -1, -1};
  fx::kernels::arg_reduce_f32(true, {2, 3}, y.data(), 1, false, arg.data());
  EXPECT_EQ(arg[0], 1);
  fx::kernels::arg_reduce_f32(true, {2, 3}, y.data(), 1, true, arg.data());
  EXPECT_EQ(arg[0], 2);
  fx::kernels::arg_reduce_f32(false, {2, 3}, y.data(), 1, false, arg.data());
  EXPECT_EQ((std::vector<int64_t>{arg[0], arg[1]}), (std::vector<int64_t>{0, 1}));
}

TEST(TensorOps, TransposeAnyPermutation) {
  const Shape s = {2, 3, 4};
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = static_cast<float>(i);
  std::vector<float> y(24);
  fx::kernels::transpose(s, x.data(), {2, 0, 1}, sizeof(float),
                         y.data());  // y[k][i][j] = x[i][j][k]
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) ASSERT_EQ(y[(k * 2 + i) * 3 + j], x[(i * 3 + j) * 4 + k]);
  std::vector<int64_t> xi = {1, 2, 3, 4, 5, 6}, yi(6);
  fx::kernels::transpose({2, 3}, xi.data(), {1, 0}, sizeof(int64_t), yi.data());
  EXPECT_EQ(yi, (std::vector<int64_t>{1, 4, 2, 5, 3, 6}));
}

// Every permutation of a rank-4 shape with size-1 and ragged dims (the tiled path takes those
// that merge into a batched swap of two dims of >= 8, such as NCHW <-> NHWC, and moves whole
// 16 x 16 tiles in 4 x 4 blocks of shuffles: {2, 33, 3, 40} has whole and partial tiles in a
// batch of two), against index arithmetic.
TEST(TensorOps, TransposeTiledPathsMatchIndexArithmetic) {
  for (const Shape& s :
       {Shape{1, 19, 9, 11}, Shape{3, 17, 1, 10}, Shape{2, 9, 8, 20}, Shape{2, 33, 3, 40}}) {
    const int64_t n = s[0] * s[1] * s[2] * s[3];
    std::vector<float> x(static_cast<size_t>(n)), y(x.size());
    for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
    std::vector<int64_t> perm = {0, 1, 2, 3};
    do {
      fx::kernels::transpose(s, x.data(), perm, sizeof(float), y.data());
      const int64_t st[4] = {s[1] * s[2] * s[3], s[2] * s[3], s[3], 1};
      int64_t o = 0;
      for (int64_t a = 0; a < s[perm[0]]; ++a)
        for (int64_t b = 0; b < s[perm[1]]; ++b)
          for (int64_t c = 0; c < s[perm[2]]; ++c)
            for (int64_t d = 0; d < s[perm[3]]; ++d, ++o)
              ASSERT_EQ(y[static_cast<size_t>(o)],
                        x[static_cast<size_t>(a * st[perm[0]] + b * st[perm[1]] + c * st[perm[2]] +
                                              d * st[perm[3]])])
                  << "perm " << perm[0] << perm[1] << perm[2] << perm[3];
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

}  // namespace

namespace {

// max_pool2d by definition, window by window: a NaN in a window wins.
std::vector<float> max_pool_reference(const Pool2dParams& p, const std::vector<float>& x) {
  const int64_t OH = p.out_h(), OW = p.out_w();
  std::vector<float> out(p.N * p.C * OH * OW);
  for (int64_t nc = 0; nc < p.N * p.C; ++nc)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        float want = -INFINITY;
        for (int64_t kh = 0; kh < p.KH; ++kh)
          for (int64_t kw = 0; kw < p.KW; ++kw) {
            const int64_t ih = oh * p.stride_h - p.pad_top + kh * p.dilation_h;
            const int64_t iw = ow * p.stride_w - p.pad_left + kw * p.dilation_w;
            if (ih < 0 || ih >= p.H || iw < 0 || iw >= p.W) continue;
            const float v = x[(nc * p.H + ih) * p.W + iw];
            if (v > want || v != v) want = v;
            if (want != want) break;
          }
        out[(nc * OH + oh) * OW + ow] = want;
      }
  return out;
}

// Whether got matches want, NaN for NaN; the first mismatch if not.
::testing::AssertionResult same_pool(const std::vector<float>& got,
                                     const std::vector<float>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    const bool ok = want[i] != want[i] ? got[i] != got[i] : got[i] == want[i];
    if (!ok)
      return ::testing::AssertionFailure()
             << "at " << i << ": got " << got[i] << ", want " << want[i];
  }
  return ::testing::AssertionSuccess();
}

// max_pool2d's row paths (stride 1, the 4-wide stride-2 path, other strides) against a window-
// by-window reference, with NaNs that must win, padding, dilation and ceil_mode; rows up to 80 wide
// (the sixteen-output AVX-512 path for 3-wide windows at stride 2 does groups of sixteen).
TEST(Pool2d, MaxPoolMatchesWindowByWindowReference) {
  std::mt19937 rng(3);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int trial = 0; trial < 400; ++trial) {
    Pool2dParams p;
    p.N = pick(1, 2), p.C = pick(1, 3), p.H = pick(3, 12), p.W = pick(3, 80);
    p.KH = pick(1, 3), p.KW = pick(1, 3);
    p.stride_h = pick(1, 3), p.stride_w = pick(1, 3);
    p.pad_top = pick(0, p.KH - 1), p.pad_bottom = pick(0, p.KH - 1);
    p.pad_left = pick(0, p.KW - 1), p.pad_right = pick(0, p.KW - 1);
    p.dilation_w = pick(0, 3) == 0 ? 2 : 1;
    p.ceil_mode = pick(0, 1) == 1;
    if (p.out_h() <= 0 || p.out_w() <= 0) continue;
    std::vector<float> x(p.N * p.C * p.H * p.W);
    for (float& v : x) v = dist(rng);
    if (pick(0, 3) == 0) x[pick(0, static_cast<int64_t>(x.size()) - 1)] = NAN;
    // +inf beside -inf: their sum is NaN (the four-lane column pass checks sums for NaN), the
    // max is +inf.
    if (pick(0, 3) == 0) {
      const int64_t i = pick(0, static_cast<int64_t>(x.size()) - 2);
      x[i] = INFINITY;
      x[i + 1] = -INFINITY;
    }
    std::vector<float> got(p.N * p.C * p.out_h() * p.out_w(), 7.0f);
    fx::kernels::max_pool2d(p, x.data(), got.data());
    EXPECT_TRUE(same_pool(got, max_pool_reference(p, x))) << "trial " << trial;
  }
}

// 3-wide windows at stride 2 along rows (the AVX-512 kernel checks the values its windows read for
// NaN as it loads them: a window's last two rows there, rows above them on their own): a NaN at
// every position of the plane in turn, under windows of 1-3 rows at row strides 1-3, row dilations
// 1-2, top padding and ceil_mode, rows one to three groups of sixteen outputs wide.
TEST(Pool2d, MaxPoolThreeWideStrideTwoFindsANaNAnywhereInAWindow) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t kh = 1; kh <= 3; ++kh)
    for (int64_t sh = 1; sh <= 3; ++sh)
      for (int64_t dh = 1; dh <= 2; ++dh)
        for (int64_t pad = 0; pad < kh; ++pad)
          for (int64_t w : {9, 40, 67})
            for (bool ceil : {false, true}) {
              Pool2dParams p;
              p.C = 2, p.H = 8, p.W = w;
              p.KH = kh, p.KW = 3, p.stride_h = sh, p.stride_w = 2, p.dilation_h = dh;
              p.pad_top = pad, p.pad_left = 1, p.ceil_mode = ceil;
              if (p.out_h() <= 0) continue;
              std::vector<float> x(p.C * p.H * p.W);
              for (float& v : x) v = dist(rng);
              std::vector<float> got(p.C * p.out_h() * p.out_w());
              for (size_t at = 0; at < x.size(); at += at < 2 * static_cast<size_t>(w) ? 1 : 3) {
                const float keep = x[at];
                x[at] = NAN;
                fx::kernels::max_pool2d(p, x.data(), got.data());
                ASSERT_TRUE(same_pool(got, max_pool_reference(p, x)))
                    << "KH " << kh << " stride " << sh << " dilation " << dh << " pad " << pad
                    << " W " << w << " ceil " << ceil << ", NaN at " << at;
                x[at] = keep;
              }
            }
}

// max_pool2d_rows (one output row of many channels from the window's rows, the row API a fused
// pool uses) against the window-by-window reference, on the paths of max_pool2d's test above
// (3-wide stride-2 windows, the separable path, windows over 16 rows), NaNs included.
TEST(Pool2d, MaxPoolRowsMatchTheReferenceRowByRow) {
  std::mt19937 rng(9);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int trial = 0; trial < 300; ++trial) {
    Pool2dParams p;
    p.N = pick(1, 2), p.C = pick(1, 3), p.H = pick(3, 20), p.W = pick(3, 70);
    p.KH = trial % 50 == 0 ? 17 : pick(1, 3), p.KW = pick(1, 3);
    if (trial % 3 == 0)
      p.KW = 3, p.stride_w = 2;
    else
      p.stride_w = pick(1, 3);
    p.stride_h = pick(1, 3);
    p.pad_top = pick(0, p.KH - 1), p.pad_bottom = pick(0, p.KH - 1);
    p.pad_left = pick(0, p.KW - 1), p.pad_right = pick(0, p.KW - 1);
    p.dilation_h = pick(0, 3) == 0 ? 2 : 1;
    p.ceil_mode = pick(0, 1) == 1;
    if (p.out_h() <= 0 || p.out_w() <= 0) continue;
    std::vector<float> x(p.N * p.C * p.H * p.W);
    for (float& v : x) v = dist(rng);
    if (pick(0, 2) == 0) x[pick(0, static_cast<int64_t>(x.size()) - 1)] = NAN;
    const int64_t OH = p.out_h(), OW = p.out_w();
    std::vector<float> got(p.N * p.C * OH * OW, 7.0f);
    for (int64_t oh = 0; oh < OH; ++oh) {
      std::vector<const float*> rows;
      for (int64_t kh = 0; kh < p.KH; ++kh) {
        const int64_t ih = oh * p.stride_h - p.pad_top + kh * p.dilation_h;
        if (ih >= 0 && ih < p.H) rows.push_back(x.data() + ih * p.W);
      }
      fx::kernels::max_pool2d_rows(p, rows.data(), static_cast<int64_t>(rows.size()), p.N * p.C,
                                   p.H * p.W, got.data() + oh * OW, OH * OW);
    }
    EXPECT_TRUE(same_pool(got, max_pool_reference(p, x))) << "trial " << trial;
  }
}

// A first layer and the max-pool of its output in one pass (stem_conv2d_max_pool) gives the
// values of conv2d and then max_pool2d, bit for bit: SqueezeNet's 3x3/2 layer and ceil-mode pool,
// ResNet-18's 7x7/2 layer and padded pool, two images, 2x2 windows (the separable row path),
// dilated and overlapping windows down columns, a clamp, a NaN in the input; one and two threads.
// Not where the pool is not over the convolution's output or a residual is fused.
TEST(Conv2d, StemAndItsMaxPoolInOnePass) {
  struct Case {
    const char* what;
    Conv2dParams p;
    int64_t KH, KW, stride_h, stride_w, pad, dilation_h;
    bool ceil;
  };
  const Case cases[] = {
      {"SqueezeNet's", conv(1, 3, 45, 50, 16, 3, 2, 0), 3, 3, 2, 2, 0, 1, true},
      {"ResNet-18's", conv(2, 3, 40, 36, 8, 7, 2, 3), 3, 3, 2, 2, 1, 1, false},
      {"2x2 windows", conv(1, 3, 30, 64, 24, 3, 2, 1), 2, 2, 2, 2, 0, 1, false},
      {"dilated rows, stride 1", conv(1, 4, 20, 40, 8, 3, 1, 1), 3, 3, 1, 2, 1, 2, true},
      {"5 rows at stride 3", conv(1, 2, 33, 40, 16, 5, 2, 2), 5, 3, 3, 2, 2, 1, true},
  };
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Conv2dParams p = c.p;
    p.clamp_lo = 0.0f;
    if (!fx::kernels::conv2d_uses_stem(p)) GTEST_SKIP() << "no stem kernels on this machine";
    Pool2dParams q;
    q.N = p.N, q.C = p.M, q.H = p.out_h(), q.W = p.out_w();
    q.KH = c.KH, q.KW = c.KW, q.stride_h = c.stride_h, q.stride_w = c.stride_w;
    q.pad_top = q.pad_left = q.pad_bottom = q.pad_right = c.pad;
    q.dilation_h = c.dilation_h, q.ceil_mode = c.ceil;
    ASSERT_TRUE(fx::kernels::stem_fuses_max_pool(p, q));
    std::vector<float> x(p.N * p.C * p.H * p.W), w(p.M * p.C * p.KH * p.KW), b(p.M);
    for (float& v : x) v = dist(rng);
    for (float& v : w) v = dist(rng);
    for (float& v : b) v = dist(rng);
    for (bool nan : {false, true}) {
      if (nan) x[x.size() / 3] = NAN;
      std::vector<float> conv_out(p.N * p.M * q.H * q.W), want(p.N * p.M * q.out_h() * q.out_w());
      std::vector<float> scratch(fx::kernels::conv2d_scratch_size(p) + 16);
      fx::kernels::conv2d(p, x.data(), w.data(), b.data(), conv_out.data(), scratch.data());
      fx::kernels::max_pool2d(q, conv_out.data(), want.data());
      for (int threads : {1, 2}) {
        fx::kernels::set_num_threads(threads);
        std::vector<float> got(want.size(), 7.0f);
        fx::kernels::stem_conv2d_max_pool(p, q, x.data(), w.data(), b.data(), got.data());
        ASSERT_TRUE(same_pool(got, want)) << threads << " threads, NaN " << nan;
        size_t nans = 0;
        for (float v : got) nans += v != v;
        EXPECT_EQ(nans > 0, nan);
        for (size_t i = 0; i < got.size(); ++i) {  // (the same bits: a zero's sign too)
          if (got[i] == got[i]) {
            ASSERT_EQ(std::signbit(got[i]), std::signbit(want[i])) << i;
          }
        }
      }
      fx::kernels::set_num_threads(1);
    }
    Pool2dParams other = q;
    other.H += 1;
    EXPECT_FALSE(fx::kernels::stem_fuses_max_pool(p, other));
    std::vector<float> r(p.N * p.M * q.H * q.W);
    Conv2dParams with_residual = p;
    with_residual.residual = r.data();
    EXPECT_FALSE(fx::kernels::stem_fuses_max_pool(with_residual, q));
  }
}

}  // namespace
