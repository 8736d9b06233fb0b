// Integer kernels (src/kernels/qgemm.h) against their reference loops: every signedness, zero
// points per tensor, per row and per column, partial micro-tiles, odd K and K across several
// blocks; the im2col packing against a direct convolution; requantization's rounding.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "exec/plan.h"
#include "fx/exec.h"
#include "fx/fx.h"
#include "kernels/qgemm.h"

namespace {

using fx::kernels::QPacked;
using fx::kernels::QType;

std::vector<uint8_t> random_bytes(std::mt19937& rng, int64_t n) {
  std::uniform_int_distribution<int> d(0, 255);
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<uint8_t>(d(rng));
  return v;
}

struct QCase {
  int64_t M, N, K;
  QType a, b;
  bool per_row, per_col, trans_b;
};

class QGemm : public ::testing::TestWithParam<QCase> {};

TEST_P(QGemm, MatchesReferenceLoops) {
  const QCase c = GetParam();
  std::mt19937 rng(static_cast<unsigned>(c.M * 131 + c.N * 17 + c.K));
  const auto A = random_bytes(rng, c.M * c.K), B = random_bytes(rng, c.K * c.N);
  auto zps = [&](QType t, int64_t n) {
    std::uniform_int_distribution<int> d(t == QType::U8 ? 0 : -128, t == QType::U8 ? 255 : 127);
    std::vector<int32_t> z(static_cast<size_t>(n));
    for (auto& x : z) x = d(rng);
    return z;
  };
  const auto za = zps(c.a, c.per_row ? c.M : 1), zb = zps(c.b, c.per_col ? c.N : 1);
  const int64_t ldb = c.trans_b ? c.K : c.N;
  std::vector<int32_t> want(static_cast<size_t>(c.M * c.N)), got(want.size(), -7);
  fx::kernels::qgemm_reference(c.M, c.N, c.K, A.data(), c.a, c.K, za.data(), c.per_row, B.data(),
                               c.b, ldb, c.trans_b, zb.data(), c.per_col, want.data(), c.N);
  const QPacked pa = QPacked::left(c.M, c.K, A.data(), c.a, c.K, za.data(), c.per_row);
  const QPacked pb = QPacked::right(c.K, c.N, B.data(), c.b, ldb, c.trans_b, zb.data(), c.per_col);
  fx::kernels::qgemm(pa, pb, got.data(), c.N);
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, QGemm,
    ::testing::Values(QCase{1, 1, 1, QType::U8, QType::S8, false, false, false},
                      QCase{7, 13, 5, QType::U8, QType::S8, true, true, false},
                      QCase{6, 16, 256, QType::S8, QType::S8, false, true, true},
                      QCase{13, 37, 301, QType::U8, QType::U8, true, false, false},
                      QCase{50, 70, 600, QType::S8, QType::U8, false, false, true},
                      QCase{4, 33, 257, QType::U8, QType::S8, false, true, true},
                      QCase{3, 5, 0, QType::U8, QType::S8, false, false, false}));

TEST(QGemmIm2col, MatchesDirectConvolution) {
  std::mt19937 rng(5);
  const int64_t C = 3, H = 9, W = 7, M = 5, KH = 3, KW = 2, sh = 2, sw = 1, pt = 1, pl = 1, dh = 1,
                dw = 2;
  const int64_t OH = (H + 2 * pt - dh * (KH - 1) - 1) / sh + 1;
  const int64_t OW = (W + 2 * pl - dw * (KW - 1) - 1) / sw + 1;
  const int32_t xzp = 131;
  const auto x = random_bytes(rng, C * H * W), w = random_bytes(rng, M * C * KH * KW);
  std::vector<int32_t> wzp = {3, -5, 0, 127, -128};
  const int64_t K = C * KH * KW, P = OH * OW;
  std::vector<int32_t> got(static_cast<size_t>(M * P));
  fx::kernels::qgemm(QPacked::left(M, K, w.data(), QType::S8, K, wzp.data(), true),
                     QPacked::right_im2col(x.data(), QType::U8, C, H, W, KH, KW, sh, sw, pt, pl, dh,
                                           dw, OH, OW, xzp),
                     got.data(), P);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t s = 0;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t kh = 0; kh < KH; ++kh)
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t ih = oh * sh - pt + kh * dh, iw = ow * sw - pl + kw * dw;
              const int32_t xv = ih < 0 || ih >= H || iw < 0 || iw >= W
                                     ? xzp
                                     : static_cast<int32_t>(x[(c * H + ih) * W + iw]);
              const int32_t wv = static_cast<int8_t>(w[((m * C + c) * KH + kh) * KW + kw]) - wzp[m];
              s += int64_t{xv - xzp} * wv;
            }
        ASSERT_EQ(got[m * P + oh * OW + ow], s) << "m " << m << " oh " << oh << " ow " << ow;
      }
}

TEST(QGemmIm2col, U8S8QuadsMatchThePairs) {
  if (!QPacked::u8s8_available()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  std::mt19937 rng(9);
  for (const int64_t C : {1, 3, 7}) {
    const int64_t H = 6, W = 9, M = 13, KH = 3, KW = 3, OH = 6, OW = 9, K = C * KH * KW;
    const auto x = random_bytes(rng, C * H * W), w = random_bytes(rng, M * K);
    const int32_t xzp = 77, zero = 0;
    std::vector<int32_t> want(static_cast<size_t>(M * OH * OW)), got(want.size());
    fx::kernels::qgemm(
        QPacked::left(M, K, w.data(), QType::S8, K, &zero, false),
        QPacked::right_im2col(x.data(), QType::U8, C, H, W, KH, KW, 1, 1, 1, 1, 1, 1, OH, OW, xzp),
        want.data(), OH * OW);
    const QPacked a = QPacked::left_s8_quads(M, K, reinterpret_cast<const int8_t*>(w.data()), K);
    fx::kernels::qgemm(a,
                       QPacked::right_im2col_u8_quads(x.data(), C, H, W, KH, KW, 1, 1, 1, 1, 1, 1,
                                                      OH, OW, static_cast<uint8_t>(xzp)),
                       got.data(), OH * OW);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t p = 0; p < OH * OW; ++p) got[m * OH * OW + p] -= xzp * a.row_sums()[m];
    EXPECT_EQ(got, want) << "C = " << C;
  }
}

TEST(QRequantize, RoundsHalfToEvenAndSaturates) {
  const std::vector<int32_t> acc = {1, 3, 5, -1, -3, 1000, -1000, 0};
  const float scale = 0.5f;  // 0.5, 1.5, 2.5, -0.5, -1.5, 500, -500, 0
  std::vector<uint8_t> u(acc.size());
  fx::kernels::Requant r;
  r.scale = &scale;
  r.zp = 10;
  fx::kernels::requantize(r, 1, static_cast<int64_t>(acc.size()), acc.data(), 0, u.data(), 0);
  EXPECT_EQ(u, (std::vector<uint8_t>{10, 12, 12, 10, 8, 255, 0, 10}));
  std::vector<int8_t> s(acc.size());
  r.type = QType::S8;
  r.zp = 0;
  r.lo_q = 0;  // a fused Relu
  fx::kernels::requantize(r, 1, static_cast<int64_t>(acc.size()), acc.data(), 0, s.data(), 0);
  EXPECT_EQ(s, (std::vector<int8_t>{0, 2, 2, 0, 0, 127, 0, 0}));
}

// ---- the executor's QDQ fusion ----

template <class T>
fx::Tensor make_tensor(fx::Dtype dtype, std::vector<int64_t> shape, const std::vector<T>& v) {
  fx::Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  auto bytes = std::make_shared<std::vector<uint8_t>>(v.size() * sizeof(T));
  std::memcpy(bytes->data(), v.data(), bytes->size());
  t.data = bytes;
  return t;
}

fx::Argument int_list(std::vector<int64_t> v) {
  fx::Argument::Items items;
  for (int64_t x : v) items.emplace_back(static_cast<long long>(x));
  return fx::Argument::list(std::move(items));
}

// x -> Q -> DQ -> op(DQ(int8 weights, per channel), bias) [-> Relu] -> Q -> DQ: run with the
// plan's fusion and without it (probing the op turns the fusion off); the fused path must be
// planned and agree within one step of y.
void check_qdq_fusion(bool conv, bool relu, bool int32_bias) {
  using fx::Dtype;
  using fx::fn;
  std::mt19937 rng(conv * 2 + relu);
  std::uniform_real_distribution<float> uf(-1.0f, 1.0f);
  std::uniform_int_distribution<int> ui(-127, 127);
  const int64_t M = 6, C = 3, K = conv ? C * 9 : 7;
  const std::vector<int64_t> x_shape =
      conv ? std::vector<int64_t>{1, C, 8, 8} : std::vector<int64_t>{5, K};
  const std::vector<int64_t> w_shape =
      conv ? std::vector<int64_t>{M, C, 3, 3} : std::vector<int64_t>{M, K};
  std::vector<int8_t> w(static_cast<size_t>(M * K));
  for (auto& v : w) v = static_cast<int8_t>(ui(rng));
  std::vector<float> ws(M), bias(M);
  const float xs = 2.0f / 255;
  for (int64_t m = 0; m < M; ++m) {
    ws[m] = 0.002f + 0.001f * static_cast<float>(m);
    bias[m] = uf(rng);
  }
  auto g = std::make_unique<fx::Graph>();
  auto* gp = g.get();
  fx::Node* x = gp->placeholder("x");
  auto attr = [&](const char* name) { return gp->get_attr(name); };
  fx::Node* xq = gp->call_function(fn("onnx.QuantizeLinear"), {x, attr("xs"), attr("xz")});
  fx::Node* xd = gp->call_function(fn("onnx.DequantizeLinear"), {xq, attr("xs"), attr("xz")});
  fx::Node* wd = gp->call_function(fn("onnx.DequantizeLinear"), {attr("w"), attr("ws"), attr("wz")},
                                   {{"axis", 0}});
  fx::Node* b = attr("b");
  if (int32_bias)
    b = gp->call_function(fn("onnx.DequantizeLinear"), {attr("bq"), attr("bs"), attr("bz")},
                          {{"axis", 0}});
  fx::Node* op =
      conv ? gp->call_function(fn("onnx.Conv"), {xd, wd, b}, {{"pads", int_list({1, 1, 1, 1})}})
           : gp->call_function(fn("onnx.Gemm"), {xd, wd, b}, {{"transB", 1}});
  fx::Node* y = relu ? gp->call_function(fn("onnx.Relu"), {op}) : op;
  fx::Node* yq = gp->call_function(fn("onnx.QuantizeLinear"), {y, attr("ys"), attr("yz")});
  gp->output(gp->call_function(fn("onnx.DequantizeLinear"), {yq, attr("ys"), attr("yz")}));
  fx::Module root;
  const float ys = 0.05f;
  root.register_buffer("xs", make_tensor<float>(Dtype::Float32, {}, {xs}));
  root.register_buffer("xz", make_tensor<uint8_t>(Dtype::UInt8, {}, {128}));
  root.register_buffer("w", make_tensor(Dtype::Int8, w_shape, w));
  root.register_buffer("ws", make_tensor(Dtype::Float32, {M}, ws));
  root.register_buffer("wz", make_tensor(Dtype::Int8, {M}, std::vector<int8_t>(M, 0)));
  root.register_buffer("b", make_tensor(Dtype::Float32, {M}, bias));
  std::vector<float> bs(M);
  std::vector<int32_t> bq(M);
  for (int64_t m = 0; m < M; ++m) {
    bs[m] = xs * ws[m];
    bq[m] = static_cast<int32_t>(std::nearbyint(bias[m] / bs[m]));
  }
  root.register_buffer("bq", make_tensor(Dtype::Int32, {M}, bq));
  root.register_buffer("bs", make_tensor(Dtype::Float32, {M}, bs));
  root.register_buffer("bz", make_tensor(Dtype::Int32, {M}, std::vector<int32_t>(M, 0)));
  root.register_buffer("ys", make_tensor<float>(Dtype::Float32, {}, {ys}));
  root.register_buffer(
      "yz", make_tensor<uint8_t>(Dtype::UInt8, {}, {static_cast<uint8_t>(relu ? 0 : 100)}));
  fx::GraphModule gm(&root, std::move(g));
  int64_t n = 1;
  for (int64_t d : x_shape) n *= d;
  std::vector<float> xv(static_cast<size_t>(n));
  for (auto& v : xv) v = uf(rng);
  const fx::exec::Value in = fx::exec::Value::from_f32(x_shape, xv);
  // The plan fuses the pattern at the op.
  auto plan = fx::exec::plan_for(gm, {in}, {});
  bool planned = false;
  for (const auto& s : plan->steps) planned |= s.node == op && s.qdq.fn != nullptr;
  EXPECT_TRUE(planned);
  const std::vector<float> fused = fx::exec::run(gm, {in})[0].to_f32();
  fx::exec::RunOptions probe;
  probe.probe = {op->name()};
  const std::vector<float> plain = fx::exec::run(gm, {in}, probe).outputs[0].to_f32();
  ASSERT_EQ(fused.size(), plain.size());
  int differ = 0;
  for (size_t i = 0; i < fused.size(); ++i) {
    EXPECT_LE(std::fabs(fused[i] - plain[i]), ys * 1.01f) << "element " << i;
    differ += fused[i] != plain[i];
    if (relu) {
      EXPECT_GE(fused[i], 0.0f);
    }
  }
  EXPECT_LT(differ, static_cast<int>(fused.size() / 10)) << "most results must be identical";
}

TEST(QdqFusion, ConvReluPerChannelInt32BiasWithinOneStep) { check_qdq_fusion(true, true, true); }
TEST(QdqFusion, ConvFloatBiasWithinOneStep) { check_qdq_fusion(true, false, false); }
TEST(QdqFusion, GemmTransBWithinOneStep) { check_qdq_fusion(false, false, true); }
TEST(QdqFusion, GemmReluFloatBiasWithinOneStep) { check_qdq_fusion(false, true, false); }

}  // namespace
