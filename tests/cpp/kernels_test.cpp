// The executor's compute kernels against their reference loops, on shapes that exercise every
// edge of the blocking (partial micro-tiles, K across several KC slices, transposes, beta).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/gemm.h"

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
                      GemmCase{65, 33, 300, true, false, 1.0f, 1.0f},  // K spans two slices
                      GemmCase{50, 70, 20, false, true, -1.0f, 0.0f},
                      GemmCase{13, 17, 600, true, true, 1.0f, 0.5f},
                      GemmCase{200, 130, 520, false, false, 1.0f, 0.0f},  // several MC blocks
                      GemmCase{3, 2100, 7, false, false, 1.0f, 0.0f},     // N spans two NC blocks
                      GemmCase{5, 4, 0, false, false, 1.0f, 3.0f}));      // K = 0: C = beta*C

TEST(Sgemm, BetaZeroIgnoresNaNsInC) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> A = {1, 2, 3, 4}, B = {1, 0, 0, 1}, C(4, nan);
  fx::kernels::sgemm(false, false, 2, 2, 2, 1.0f, A.data(), 2, B.data(), 2, 0.0f, C.data(), 2);
  EXPECT_EQ(C, (std::vector<float>{1, 2, 3, 4}));
}

}  // namespace
