// The executor's compute kernels against their reference loops, on shapes that exercise every
// edge of the blocking (partial micro-tiles, K across several KC slices, transposes, beta).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/conv.h"
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
}

Conv2dParams asymmetric() {
  Conv2dParams p = conv(1, 3, 9, 8, 4, 3, 2, 0);
  p.pad_top = 1, p.pad_left = 0, p.pad_bottom = 2, p.pad_right = 1;
  p.KW = 2;
  return p;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Conv2d,
    ::testing::Values(ConvCase{"3x3 pad 1", conv(2, 3, 10, 11, 5, 3, 1, 1), true},
                      ConvCase{"3x3 stride 2", conv(1, 4, 13, 13, 6, 3, 2, 1), true},
                      ConvCase{"resnet stem 7x7/2", conv(1, 3, 32, 32, 8, 7, 2, 3), false},
                      ConvCase{"pointwise", conv(2, 16, 7, 7, 24, 1, 1, 0), true},
                      ConvCase{"pointwise stride 2", conv(1, 8, 9, 9, 4, 1, 2, 0), true},
                      ConvCase{"depthwise 3x3", conv(2, 8, 12, 12, 8, 3, 1, 1, 8), true},
                      ConvCase{"depthwise 5x5/2", conv(1, 6, 15, 14, 6, 5, 2, 2, 6), false},
                      ConvCase{"grouped", conv(1, 8, 9, 9, 12, 3, 1, 1, 4), true},
                      ConvCase{"dilated", conv(1, 4, 16, 16, 4, 3, 1, 2, 1, 2), true},
                      ConvCase{"asymmetric pads, 3x2 kernel", asymmetric(), true}));

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
}

}  // namespace
