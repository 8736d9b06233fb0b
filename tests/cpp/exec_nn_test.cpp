// The executor's random ops (values checked by their statistics, since ONNX does not fix the
// generator) and the recurrent layers' variants that ONNX's backend suite does not cover
// (bidirectional, sequence_lens on a reverse direction, layout 1, GRU's linear_before_reset),
// checked against the same layer run on a rearranged input.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "fx/exec.h"
#include "fx/exec/passes.h"
#include "fx/fx.h"
#include "fx/onnx.h"
#include "fx/passes.h"

namespace {

using fx::Argument;
using fx::fn;
using fx::Node;
using fx::exec::Value;

std::vector<Value> run_op(const std::string& op, const std::vector<Value>& inputs,
                          fx::Kwargs attrs = {}, int num_outputs = 1, int64_t opset = -1) {
  auto g = std::make_unique<fx::Graph>();
  std::vector<Argument> args;
  for (size_t i = 0; i < inputs.size(); ++i)
    args.emplace_back(inputs[i].defined() ? Argument(g->placeholder("in" + std::to_string(i)))
                                          : Argument());
  Node* n = g->call_function(fn("onnx." + op), args, std::move(attrs));
  if (num_outputs == 1) {
    g->output(n);
  } else {
    Argument::Items outs;
    for (int i = 0; i < num_outputs; ++i)
      outs.emplace_back(g->call_function(fn("operator.getitem"), {n, i}));
    g->output(Argument::tuple(std::move(outs)));
  }
  fx::GraphModule gm(nullptr, std::move(g));
  if (opset > 0)
    gm.meta().set(fx::onnx::meta::kOpsetImport,
                  Argument::dict({{Argument(""), Argument(static_cast<long long>(opset))}}));
  std::vector<Value> given;
  for (const Value& v : inputs)
    if (v.defined()) given.push_back(v);
  return fx::exec::run(gm, given);
}

Value ramp(std::vector<int64_t> shape, float scale, float offset = 0) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = offset + scale * static_cast<float>(std::sin(0.7 * static_cast<double>(i) + 0.3));
  return Value::from_f32(std::move(shape), v);
}

Value flag(bool on) {
  Value v = Value::zeros(fx::Dtype::Bool, {});
  v.mutable_data<uint8_t>()[0] = on;
  return v;
}

double mean_of(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s / static_cast<double>(v.size());
}

TEST(ExecRandom, TrainingDropoutKeepsAndScalesConsistentlyWithItsMask) {
  const Value x = ramp({100, 100}, 1.0f, 2.0f);  // all > 0
  // Ratio 0 in training mode is the identity with an all-true mask (swin_t's exported Dropout).
  const Value t = flag(true);
  {
    std::vector<Value> out = run_op("Dropout", {x, Value::scalar_f32(0), t}, {}, 2);
    EXPECT_EQ(out[0].to_f32(), x.to_f32());
    ASSERT_EQ(out[1].dtype(), fx::Dtype::Bool);
    for (int64_t i = 0; i < out[1].numel(); ++i) ASSERT_EQ(out[1].data<uint8_t>()[i], 1);
  }
  std::vector<Value> out = run_op("Dropout", {x, Value::scalar_f32(0.25f), t}, {}, 2);
  ASSERT_EQ(out[0].shape(), x.shape());
  ASSERT_EQ(out[0].dtype(), fx::Dtype::Float32);
  ASSERT_EQ(out[1].shape(), x.shape());
  ASSERT_EQ(out[1].dtype(), fx::Dtype::Bool);
  int64_t kept = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool m = out[1].data<uint8_t>()[i] != 0;
    kept += m;
    const float want = m ? x.data<float>()[i] / 0.75f : 0.0f;
    ASSERT_NEAR(out[0].data<float>()[i], want, 1e-5f) << i;
  }
  const double frac = static_cast<double>(kept) / static_cast<double>(x.numel());
  EXPECT_NEAR(frac, 0.75, 0.02);  // 10,000 draws: sd 0.0043
  // A seed fixes the draws; without one two runs differ.
  const fx::Kwargs seeded = {{"seed", 7}};
  EXPECT_EQ(run_op("Dropout", {x, Value::scalar_f32(0.5f), t}, seeded)[0].to_f32(),
            run_op("Dropout", {x, Value::scalar_f32(0.5f), t}, seeded)[0].to_f32());
  EXPECT_NE(run_op("Dropout", {x, Value::scalar_f32(0.5f), t})[0].to_f32(),
            run_op("Dropout", {x, Value::scalar_f32(0.5f), t})[0].to_f32());
  // Not training: the identity whatever the ratio.
  EXPECT_EQ(run_op("Dropout", {x, Value::scalar_f32(0.5f), flag(false)})[0].to_f32(), x.to_f32());
}

TEST(ExecRandom, BernoulliRandomUniformRandomNormalStatistics) {
  std::vector<float> p(20000);
  for (size_t i = 0; i < p.size(); ++i) p[i] = i % 2 ? 0.3f : (i % 4 ? 1.0f : 0.0f);
  const std::vector<float> b = run_op("Bernoulli", {Value::from_f32({20000}, p)})[0].to_f32();
  int64_t ones_at_03 = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0.3f)
      ones_at_03 += b[i] == 1.0f;
    else
      ASSERT_EQ(b[i], p[i]) << i;  // p = 0 and p = 1 are certain
    ASSERT_TRUE(b[i] == 0.0f || b[i] == 1.0f);
  }
  EXPECT_NEAR(static_cast<double>(ones_at_03) / 10000.0, 0.3, 0.02);
  const Value bi = run_op("Bernoulli", {Value::from_f32({4}, {1, 0, 1, 1})}, {{"dtype", 7}})[0];
  EXPECT_EQ(bi.dtype(), fx::Dtype::Int64);
  EXPECT_EQ(bi.to_i64(), (std::vector<int64_t>{1, 0, 1, 1}));

  const Value u = run_op(
      "RandomUniform", {},
      {{"shape", Argument::list({Argument(100), Argument(200)})}, {"low", -2.0}, {"high", 4.0}})[0];
  ASSERT_EQ(u.shape(), (std::vector<int64_t>{100, 200}));
  ASSERT_EQ(u.dtype(), fx::Dtype::Float32);
  const std::vector<float> uv = u.to_f32();
  for (float v : uv) ASSERT_TRUE(v >= -2.0f && v < 4.0f) << v;
  EXPECT_NEAR(mean_of(uv), 1.0, 0.05);  // sd of the mean: 6 / sqrt(12 * 20000) = 0.012
  // [low, high) after rounding to the output type: with `high` one float step above `low`,
  // half the draws would round up to `high`; in float64 they stay between the two.
  const double one_up = std::nextafter(1.0f, 2.0f);
  const fx::Kwargs narrow = {
      {"shape", Argument::list({Argument(1000)})}, {"low", 1.0}, {"high", one_up}, {"seed", 3.0}};
  for (float v : run_op("RandomUniform", {}, narrow)[0].to_f32()) ASSERT_EQ(v, 1.0f);
  fx::Kwargs narrow64 = narrow;
  narrow64.set("dtype", 11);
  const Value u64 = run_op("RandomUniform", {}, narrow64)[0];
  int64_t inside = 0;
  for (int64_t i = 0; i < u64.numel(); ++i) {
    const double v = u64.data<double>()[i];
    ASSERT_TRUE(v >= 1.0 && v < one_up) << v;
    inside += v > 1.0;
  }
  EXPECT_GT(inside, 900);

  const Value like = Value::zeros(fx::Dtype::Float64, {50, 400});
  const Value n = run_op("RandomNormalLike", {like}, {{"mean", 3.0}, {"scale", 2.0}})[0];
  ASSERT_EQ(n.shape(), like.shape());
  ASSERT_EQ(n.dtype(), fx::Dtype::Float64);
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n.numel(); ++i) {
    s += n.data<double>()[i];
    s2 += n.data<double>()[i] * n.data<double>()[i];
  }
  const double m = s / 20000.0, sd = std::sqrt(s2 / 20000.0 - m * m);
  EXPECT_NEAR(m, 3.0, 0.06);
  EXPECT_NEAR(sd, 2.0, 0.05);
  const Value n2 =
      run_op("RandomNormal", {},
             {{"shape", Argument::list({Argument(3)})}, {"dtype", 11}, {"seed", 1.5}})[0];
  EXPECT_EQ(n2.dtype(), fx::Dtype::Float64);
  const Value ul =
      run_op("RandomUniformLike", {Value::zeros(fx::Dtype::Float32, {2, 3})}, {{"dtype", 11}})[0];
  EXPECT_EQ(ul.dtype(), fx::Dtype::Float64);
  EXPECT_EQ(ul.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_THROW(
      run_op("RandomUniform", {}, {{"shape", Argument::list({Argument(2)})}, {"dtype", 7}}),
      fx::Error);
}

// [a, b, c] -> [b, a, c]
Value swap01(const Value& v) {
  const int64_t a = v.shape()[0], b = v.shape()[1], c = v.shape()[2];
  std::vector<float> out(static_cast<size_t>(v.numel()));
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < c; ++k)
        out[(j * a + i) * c + k] = v.data<float>()[(i * b + j) * c + k];
  return Value::from_f32({b, a, c}, out);
}

// Rows [d] of a [D, ...] tensor as [1, ...].
Value direction(const Value& v, int64_t d) {
  const int64_t per = v.numel() / v.shape()[0];
  std::vector<float> out(v.data<float>() + d * per, v.data<float>() + (d + 1) * per);
  std::vector<int64_t> s = v.shape();
  s[0] = 1;
  return Value::from_f32(s, out);
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5f) << what << " at " << i;
}

// For each of RNN, GRU (both resets) and LSTM: a bidirectional layer over batch entries of
// different lengths equals, entry by entry, a forward and a reverse layer over just that entry's
// steps; layout 1 equals layout 0 on the transposed input.
TEST(ExecRnn, BidirectionalSequenceLensAndLayoutAgreeWithSeparateRuns) {
  const int64_t S = 4, B = 3, I = 2, H = 3;
  struct Case {
    const char* op;
    int64_t gates;
    int outputs;
    fx::Kwargs extra;
  };
  const std::vector<Case> cases = {{"RNN", 1, 2, {}},
                                   {"GRU", 3, 2, {}},
                                   {"GRU", 3, 2, {{"linear_before_reset", 1}}},
                                   {"LSTM", 4, 3, {}}};
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.op) + (k.extra.contains("linear_before_reset") ? " lbr" : ""));
    const int64_t G = k.gates;
    const Value X = ramp({S, B, I}, 0.8f);
    const Value W = ramp({2, G * H, I}, 0.5f, 0.1f), R = ramp({2, G * H, H}, 0.4f, -0.05f);
    const Value Bv = ramp({2, 2 * G * H}, 0.3f);
    const Value h0 = ramp({2, B, H}, 0.2f), c0 = ramp({2, B, H}, 0.3f, 0.1f);
    const std::vector<int64_t> lens = {4, 2, 3};
    const Value L = Value::from_i64({B}, lens);
    auto attrs = [&](const char* dir, int64_t layout) {
      fx::Kwargs a = k.extra;
      a.set("hidden_size", H);
      a.set("direction", dir);
      a.set("layout", layout);
      return a;
    };
    std::vector<Value> in = {X, W, R, Bv, L, h0};
    if (G == 4) in.push_back(c0);
    const std::vector<Value> bi = run_op(k.op, in, attrs("bidirectional", 0), k.outputs);
    ASSERT_EQ(bi[0].shape(), (std::vector<int64_t>{S, 2, B, H}));
    for (int64_t n = 0; n < B; ++n) {
      const int64_t len = lens[static_cast<size_t>(n)];
      // Entry n alone, its first `len` steps: [len, 1, I].
      std::vector<float> xs;
      for (int64_t t = 0; t < len; ++t)
        for (int64_t i = 0; i < I; ++i) xs.push_back(X.data<float>()[(t * B + n) * I + i]);
      const Value Xn = Value::from_f32({len, 1, I}, xs);
      auto state = [&](const Value& v, int64_t d) {
        std::vector<float> s(v.data<float>() + (d * B + n) * H,
                             v.data<float>() + (d * B + n + 1) * H);
        return Value::from_f32({1, 1, H}, s);
      };
      for (int64_t d = 0; d < 2; ++d) {
        std::vector<Value> one = {Xn,      direction(W, d), direction(R, d), direction(Bv, d),
                                  Value(), state(h0, d)};
        if (G == 4) one.push_back(state(c0, d));
        const std::vector<Value> r =
            run_op(k.op, one, attrs(d ? "reverse" : "forward", 0), k.outputs);
        for (int64_t t = 0; t < S; ++t)
          for (int64_t j = 0; j < H; ++j) {
            const float got = bi[0].data<float>()[((t * 2 + d) * B + n) * H + j];
            const float want = t < len ? r[0].data<float>()[t * H + j] : 0.0f;
            ASSERT_NEAR(got, want, 1e-5f) << "Y t=" << t << " d=" << d << " n=" << n;
          }
        for (int o = 1; o < k.outputs; ++o)
          for (int64_t j = 0; j < H; ++j)
            ASSERT_NEAR(bi[o].data<float>()[(d * B + n) * H + j], r[o].data<float>()[j], 1e-5f)
                << "output " << o << " d=" << d << " n=" << n;
      }
    }
    // Layout 1: X [B, S, I], states [B, D, H]; Y [B, S, D, H], Y_h [B, D, H].
    std::vector<Value> in1 = {swap01(X), W, R, Bv, L, swap01(h0)};
    if (G == 4) in1.push_back(swap01(c0));
    const std::vector<Value> b1 = run_op(k.op, in1, attrs("bidirectional", 1), k.outputs);
    ASSERT_EQ(b1[0].shape(), (std::vector<int64_t>{B, S, 2, H}));
    const Value y0 = bi[0].with_shape({S, 2 * B, H});
    // [S, D, B, H] -> [B, S, D, H] checked element by element.
    for (int64_t t = 0; t < S; ++t)
      for (int64_t d = 0; d < 2; ++d)
        for (int64_t n = 0; n < B; ++n)
          for (int64_t j = 0; j < H; ++j)
            ASSERT_EQ(b1[0].data<float>()[((n * S + t) * 2 + d) * H + j],
                      y0.data<float>()[((t * 2 + d) * B + n) * H + j]);
    for (int o = 1; o < k.outputs; ++o)
      expect_near(b1[o].to_f32(), swap01(bi[o]).to_f32(), "Y_h/c");
  }
}

// BatchNormalization before opset 14 has no training_mode: declaring more outputs than Y asks for
// training, and opsets 9-13 add saved_mean / saved_var (the batch statistics).
TEST(ExecNorm, BatchNormalizationOpset9TrainsWhenItDeclaresFiveOutputs) {
  const Value x = ramp({2, 3, 2, 2}, 1.0f, 0.5f);
  const Value scale = Value::from_f32({3}, {1, 2, 3}), bias = Value::from_f32({3}, {0, 1, 2});
  const Value mean = Value::from_f32({3}, {0.1f, 0.2f, 0.3f}),
              var = Value::from_f32({3}, {1, 2, 3});
  const fx::Kwargs attrs = {{"momentum", 0.75}, {"epsilon", 1e-5}};
  const std::vector<Value> out =
      run_op("BatchNormalization", {x, scale, bias, mean, var}, attrs, 5, 9);
  ASSERT_EQ(out.size(), 5u);
  for (int64_t ch = 0; ch < 3; ++ch) {
    double s = 0, s2 = 0;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t i = 0; i < 4; ++i) {
        const double v = x.data<float>()[(n * 3 + ch) * 4 + i];
        s += v;
        s2 += v * v;
      }
    const double m = s / 8, v = s2 / 8 - m * m;
    EXPECT_NEAR(out[3].to_f32()[ch], m, 1e-5);  // saved_mean
    EXPECT_NEAR(out[4].to_f32()[ch], v, 1e-5);  // saved_var
    EXPECT_NEAR(out[1].to_f32()[ch], mean.to_f32()[ch] * 0.75 + m * 0.25, 1e-5);
    EXPECT_NEAR(out[2].to_f32()[ch], var.to_f32()[ch] * 0.75 + v * 0.25, 1e-5);
    const float x0 = x.data<float>()[ch * 4];
    EXPECT_NEAR(out[0].to_f32()[ch * 4],
                (x0 - m) / std::sqrt(v + 1e-5) * scale.to_f32()[ch] + bias.to_f32()[ch], 1e-4);
  }
  // One output: inference with the given statistics.
  const Value y = run_op("BatchNormalization", {x, scale, bias, mean, var}, attrs, 1, 9)[0];
  EXPECT_NEAR(y.to_f32()[0], (x.data<float>()[0] - 0.1f) / std::sqrt(1 + 1e-5f), 1e-5);
}

// Random ops draw new values on every run: constant folding must not freeze them and CSE must not
// merge two of them (they are impure, as torch.fx's side-effectful functions are).
TEST(ExecRandom, PassesNeitherFoldNorMergeRandomOps) {
  auto g = std::make_unique<fx::Graph>();
  const fx::Kwargs attrs = {{"shape", Argument::list({Argument(1000)})}};
  Node* a = g->call_function(fn("onnx.RandomNormal"), {}, attrs);
  Node* b = g->call_function(fn("onnx.RandomNormal"), {}, attrs);
  g->output(Argument::tuple({a, b}));
  fx::GraphModule gm(nullptr, std::move(g));
  EXPECT_TRUE(a->is_impure());
  EXPECT_FALSE(fx::cse(gm));
  EXPECT_FALSE(fx::exec::fold_constants(gm));
  const std::vector<Value> out = fx::exec::run(gm, {});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NE(out[0].to_f32(), out[1].to_f32());
  EXPECT_NE(out[0].to_f32(), fx::exec::run(gm, {})[0].to_f32());  // and new values each run
}

}  // namespace
