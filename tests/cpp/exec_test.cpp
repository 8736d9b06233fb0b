// fx::exec on graphs built with the graph API (onnx.* call_function nodes, weights in the
// GraphModule): results against the kernels' reference loops and closed forms, value freeing,
// probes, coverage and the errors that name node, op and shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "exec/ops.h"
#include "fx/exec.h"
#include "fx/exec/passes.h"
#include "fx/fx.h"
#include "kernels/conv.h"
#include "kernels/elementwise.h"
#include "tensor_util.h"

namespace {

using fx::Argument;
using fx::fn;
using fx::Node;
using fx::exec::Value;

Argument ints(std::vector<int64_t> v) {
  Argument::Items items;
  for (int64_t x : v) items.emplace_back(static_cast<long long>(x));
  return Argument::list(std::move(items));
}

using fxtest::random_floats;
using fxtest::tensor_f32;

fx::exec::RunResult run_with(fx::GraphModule& gm, const std::vector<Value>& in,
                             std::vector<std::string> probe = {}) {
  fx::exec::RunOptions opts;
  opts.probe = std::move(probe);
  return fx::exec::run(gm, in, opts);
}

TEST(Exec, ConvReluFlattenGemmMatchesReferenceLoops) {
  // x[1,3,8,8] -> Conv(4, 3x3, pad 1) -> Relu -> GlobalAveragePool -> Flatten -> Gemm(4 -> 2)
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("conv_weight");
  Node* b = g->get_attr("conv_bias");
  Node* conv = g->call_function(fn("onnx.Conv"), {x, w, b},
                                {{"kernel_shape", ints({3, 3})}, {"pads", ints({1, 1, 1, 1})}});
  Node* relu = g->call_function(fn("onnx.Relu"), {conv});
  Node* gap = g->call_function(fn("onnx.GlobalAveragePool"), {relu});
  Node* flat = g->call_function(fn("onnx.Flatten"), {gap});
  Node* fc = g->call_function(
      fn("onnx.Gemm"), {flat, g->get_attr("fc_weight"), g->get_attr("fc_bias")}, {{"transB", 1}});
  g->output(fc);
  fx::Module root;
  const std::vector<float> wv = random_floats(4 * 3 * 9, 1), bv = random_floats(4, 2);
  const std::vector<float> fw = random_floats(2 * 4, 3), fb = random_floats(2, 4);
  root.register_parameter("conv_weight", tensor_f32({4, 3, 3, 3}, wv));
  root.register_parameter("conv_bias", tensor_f32({4}, bv));
  root.register_parameter("fc_weight", tensor_f32({2, 4}, fw));
  root.register_parameter("fc_bias", tensor_f32({2}, fb));
  fx::GraphModule gm(&root, std::move(g));
  EXPECT_TRUE(fx::exec::coverage(gm).empty());

  const std::vector<float> xv = random_floats(3 * 64, 5);
  fx::exec::RunResult r = run_with(gm, {Value::from_f32({1, 3, 8, 8}, xv)}, {"relu", "flatten"});
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].shape(), (std::vector<int64_t>{1, 2}));
  ASSERT_EQ(r.probes.size(), 2u);
  EXPECT_EQ(r.probes[0].first, "relu");
  EXPECT_EQ(r.probes[1].second.shape(), (std::vector<int64_t>{1, 4}));

  // Reference: direct convolution, relu, mean, fc.
  fx::kernels::Conv2dParams p;
  p.C = 3, p.H = p.W = 8, p.M = 4, p.KH = p.KW = 3;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
  std::vector<float> ref(4 * 64);
  fx::kernels::conv2d_reference(p, xv.data(), wv.data(), bv.data(), ref.data());
  std::vector<double> pooled(4, 0.0);
  for (int c = 0; c < 4; ++c) {
    for (int i = 0; i < 64; ++i) pooled[c] += std::max(0.0f, ref[c * 64 + i]);
    pooled[c] /= 64;
  }
  for (int o = 0; o < 2; ++o) {
    double y = fb[o];
    for (int c = 0; c < 4; ++c) y += fw[o * 4 + c] * pooled[c];
    EXPECT_NEAR(r.outputs[0].data<float>()[o], y, 1e-5);
  }
}

// Constant weights are packed (Winograd-transformed for the conv) on the first run and reused;
// a parameter replaced between runs is packed anew, never served stale.
TEST(Exec, PackedConstantWeightsFollowReplacedParameters) {
  // x[1,32,14,14] -> Conv(40, 3x3, pad 1: the Winograd path) -> Reshape [40, 196] -> MatMul W.
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* conv = g->call_function(fn("onnx.Conv"), {x, g->get_attr("w")},
                                {{"kernel_shape", ints({3, 3})}, {"pads", ints({1, 1, 1, 1})}});
  Node* flat = g->call_function(fn("onnx.Reshape"), {conv, g->get_attr("shape")});
  g->output(g->call_function(fn("onnx.MatMul"), {flat, g->get_attr("fc")}));
  fx::Module root;
  fx::Tensor shape;
  shape.dtype = fx::Dtype::Int64;
  shape.shape = {2};
  const std::vector<int64_t> dims = {40, 196};
  auto sb = std::make_shared<std::vector<uint8_t>>(sizeof(int64_t) * 2);
  std::memcpy(sb->data(), dims.data(), sb->size());
  shape.data = sb;
  root.register_buffer("shape", shape);
  root.register_parameter("w", tensor_f32({40, 32, 3, 3}, random_floats(40 * 32 * 9, 11)));
  root.register_parameter("fc", tensor_f32({196, 24}, random_floats(196 * 24, 12)));
  fx::GraphModule gm(&root, std::move(g));
  fx::kernels::Conv2dParams p;
  p.C = 32, p.H = p.W = 14, p.M = 40, p.KH = p.KW = 3;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
  ASSERT_TRUE(fx::kernels::conv2d_uses_winograd(p));

  const std::vector<float> xv = random_floats(32 * 196, 13);
  const Value in = Value::from_f32({1, 32, 14, 14}, xv);
  auto reference = [&](unsigned wseed, unsigned fseed) {
    const std::vector<float> wv = random_floats(40 * 32 * 9, wseed);
    const std::vector<float> fv = random_floats(196 * 24, fseed);
    std::vector<float> y(40 * 196), out(40 * 24, 0.0f);
    fx::kernels::conv2d_reference(p, xv.data(), wv.data(), nullptr, y.data());
    for (int i = 0; i < 40; ++i)
      for (int k = 0; k < 196; ++k)
        for (int j = 0; j < 24; ++j) out[i * 24 + j] += y[i * 196 + k] * fv[k * 24 + j];
    return out;
  };
  auto expect_near = [](const Value& got, const std::vector<float>& want, const char* what) {
    ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got.data<float>()[i], want[i], 2e-3f * (1.0f + std::fabs(want[i])))
          << what << " at " << i;
  };
  const Value first = fx::exec::run(gm, {in})[0];
  expect_near(first, reference(11, 12), "first run");
  const Value second = fx::exec::run(gm, {in})[0];  // from the packed weights
  ASSERT_EQ(std::memcmp(first.data<float>(), second.data<float>(), first.nbytes()), 0);

  gm.register_parameter("w", tensor_f32({40, 32, 3, 3}, random_floats(40 * 32 * 9, 21)));
  gm.register_parameter("fc", tensor_f32({196, 24}, random_floats(196 * 24, 22)));
  expect_near(fx::exec::run(gm, {in})[0], reference(21, 22), "after replacing the weights");
  fx::exec::release_cached_memory();
  expect_near(fx::exec::run(gm, {in})[0], reference(21, 22), "after release_cached_memory");
}

// MatMul -> Add(constant bias, either side) -> Relu runs as one node; probing the MatMul or the
// Add (which must see the unfused values) turns the fusion off; results are the same.
TEST(Exec, MatMulBiasAddAndReluFusedOrNot) {
  for (int bias_first = 0; bias_first < 2; ++bias_first) {
    auto g = std::make_unique<fx::Graph>();
    Node* x = g->placeholder("x");
    Node* mm = g->call_function(fn("onnx.MatMul"), {x, g->get_attr("w")});
    Node* b = g->get_attr("b");
    Node* add = g->call_function(
        fn("onnx.Add"), bias_first ? std::vector<Argument>{b, mm} : std::vector<Argument>{mm, b});
    g->output(g->call_function(fn("onnx.Relu"), {add}));
    fx::Module root;
    const std::vector<float> wv = random_floats(4 * 5, 31), bv = random_floats(5, 32);
    root.register_parameter("w", tensor_f32({4, 5}, wv));
    root.register_parameter("b", tensor_f32({5}, bv));
    fx::GraphModule gm(&root, std::move(g));
    const std::vector<float> xv = random_floats(2 * 3 * 4, 33);
    std::vector<float> mm_ref(30), add_ref(30), want(30);
    for (int r = 0; r < 6; ++r)
      for (int j = 0; j < 5; ++j) {
        float acc = 0.0f;
        for (int k = 0; k < 4; ++k) acc += xv[r * 4 + k] * wv[k * 5 + j];
        mm_ref[r * 5 + j] = acc;
        add_ref[r * 5 + j] = acc + bv[j];
        want[r * 5 + j] = std::max(0.0f, acc + bv[j]);
      }
    const Value in = Value::from_f32({2, 3, 4}, xv);
    // Fused (the bias added in the GEMM's store) and unfused (the Add probed) give the same bits.
    const Value fused = run_with(gm, {in}, {}).outputs[0];
    const Value unfused = run_with(gm, {in}, {"add"}).outputs[0];
    ASSERT_EQ(std::memcmp(fused.data<float>(), unfused.data<float>(), 30 * sizeof(float)), 0);
    for (const std::vector<std::string>& probe :
         {std::vector<std::string>{}, {"mat_mul"}, {"add"}}) {
      fx::exec::RunResult r = run_with(gm, {in}, probe);
      ASSERT_EQ(r.outputs[0].shape(), (std::vector<int64_t>{2, 3, 5}));
      for (int i = 0; i < 30; ++i) ASSERT_NEAR(r.outputs[0].data<float>()[i], want[i], 1e-5f);
      if (!probe.empty()) {
        ASSERT_EQ(r.probes.size(), 1u);
        for (int i = 0; i < 30; ++i)
          ASSERT_NEAR(r.probes[0].second.data<float>()[i],
                      (probe[0] == "mat_mul" ? mm_ref : add_ref)[i], 1e-5f)
              << probe[0] << " " << i;
      }
    }
  }
}

// Values of 32 KB and more live in the executor's arena: an output kept from one run is not
// touched by the next runs or by release_cached_memory(), its memory is reused once dropped, and
// to_tensor() copies it out.
TEST(Exec, LargeValuesFromTheArenaOutliveRunsAndCachedMemoryRelease) {
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* relu = g->call_function(fn("onnx.Relu"), {x});
  g->output(g->call_function(fn("onnx.Add"), {relu, x}));
  fx::Module root;
  fx::GraphModule gm(&root, std::move(g));
  const int64_t n = 512 * 256;  // 512 KB of float32
  auto expected = [&](const std::vector<float>& in) {
    std::vector<float> out(in.size());
    for (size_t i = 0; i < in.size(); ++i) out[i] = std::max(in[i], 0.0f) + in[i];
    return out;
  };
  const std::vector<float> a = random_floats(n, 41), b = random_floats(n, 42);
  const Value kept = fx::exec::run(gm, {Value::from_f32({512, 256}, a)})[0];
  EXPECT_EQ(kept.buffer(), nullptr);  // an arena range, not a byte vector
  const std::vector<float> want_a = expected(a), want_b = expected(b);
  for (int round = 0; round < 3; ++round) {
    const Value other = fx::exec::run(gm, {Value::from_f32({512, 256}, b)})[0];
    ASSERT_NE(other.data<float>(), kept.data<float>());
    for (int64_t i = 0; i < n; i += 997) ASSERT_EQ(other.data<float>()[i], want_b[i]) << i;
    if (round == 1) fx::exec::release_cached_memory();
  }
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(kept.data<float>()[i], want_a[i]) << i;
  const fx::Tensor t = kept.to_tensor();
  ASSERT_EQ(t.data->size(), static_cast<size_t>(n) * sizeof(float));
  EXPECT_EQ(std::memcmp(t.data->data(), kept.data<float>(), t.data->size()), 0);
}

TEST(Exec, ShapeArithmeticReshapeAndMultipleOutputs) {
  // y = Reshape(x, Concat(Shape(x)[0:1], [-1])); a, b = Split(y, axis=1) -> output (b, a)
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* shape = g->call_function(fn("onnx.Shape"), {x}, {{"end", 1}});
  Node* minus1 = g->get_attr("minus_one");
  Node* cat = g->call_function(fn("onnx.Concat"), {shape, minus1}, {{"axis", 0}});
  Node* y = g->call_function(fn("onnx.Reshape"), {x, cat});
  Node* split = g->call_function(fn("onnx.Split"), {y}, {{"axis", 1}, {"split", ints({2, 4})}});
  Node* a = g->call_function(fn("operator.getitem"), {split, 0});
  Node* b2 = g->call_function(fn("operator.getitem"), {split, 1});
  g->output(Argument::tuple({b2, a}));
  fx::Module root;
  fx::Tensor m1;
  m1.dtype = fx::Dtype::Int64;
  m1.shape = {1};
  auto bytes = std::make_shared<std::vector<uint8_t>>(8);
  const int64_t neg = -1;
  std::memcpy(bytes->data(), &neg, 8);
  m1.data = bytes;
  root.register_buffer("minus_one", m1);
  fx::GraphModule gm(&root, std::move(g));
  std::vector<float> xv(12);
  for (int i = 0; i < 12; ++i) xv[i] = static_cast<float>(i);
  std::vector<Value> out = fx::exec::run(gm, {Value::from_f32({2, 3, 2}, xv)});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(out[0].to_f32(), (std::vector<float>{2, 3, 4, 5, 8, 9, 10, 11}));
  EXPECT_EQ(out[1].to_f32(), (std::vector<float>{0, 1, 6, 7}));
}

TEST(Exec, SliceGatherTransposeAndReduceFollowOnnx) {
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");  // [3, 4]
  Node* starts = g->get_attr("starts");
  Node* ends = g->get_attr("ends");
  Node* axes = g->get_attr("axes");
  Node* steps = g->get_attr("steps");
  Node* s = g->call_function(fn("onnx.Slice"), {x, starts, ends, axes, steps});  // x[:, ::-2]
  Node* t = g->call_function(fn("onnx.Transpose"), {s});                         // [2, 3]
  Node* idx = g->get_attr("idx");
  Node* gat = g->call_function(fn("onnx.Gather"), {t, idx}, {{"axis", 1}});  // columns 2, 0
  Node* red = g->call_function(fn("onnx.ReduceSum"), {gat}, {{"keepdims", 0}});
  g->output(Argument::tuple({gat, red}));
  fx::Module root;
  auto i64 = [](std::vector<int64_t> v) {
    fx::Tensor t;
    t.dtype = fx::Dtype::Int64;
    t.shape = {static_cast<int64_t>(v.size())};
    auto bytes = std::make_shared<std::vector<uint8_t>>(v.size() * 8);
    std::memcpy(bytes->data(), v.data(), bytes->size());
    t.data = bytes;
    return t;
  };
  root.register_buffer("starts", i64({-1}));
  root.register_buffer("ends", i64({-100}));
  root.register_buffer("axes", i64({1}));
  root.register_buffer("steps", i64({-2}));
  root.register_buffer("idx", i64({2, 0}));
  fx::GraphModule gm(&root, std::move(g));
  std::vector<float> xv(12);
  for (int i = 0; i < 12; ++i) xv[i] = static_cast<float>(i);
  std::vector<Value> out = fx::exec::run(gm, {Value::from_f32({3, 4}, xv)});
  // x[:, ::-2] = [[3, 1], [7, 5], [11, 9]]; transposed [[3, 7, 11], [1, 5, 9]]; cols 2, 0.
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(out[0].to_f32(), (std::vector<float>{11, 3, 9, 1}));
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{}));
  EXPECT_EQ(out[1].to_f32(), (std::vector<float>{24}));
}

TEST(Exec, ErrorsNameTheNodeOpAndShapesAndCoverageListsGaps) {
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* add = g->call_function(fn("onnx.Add"), {x, y});
  Node* odd = g->call_function(fn("onnx.NoSuchOp"), {add});
  g->output(odd);
  fx::GraphModule gm(nullptr, std::move(g));
  std::vector<fx::exec::CoverageGap> gaps = fx::exec::coverage(gm);
  ASSERT_EQ(gaps.size(), 1u);
  EXPECT_EQ(gaps[0].node, "no_such_op");
  EXPECT_EQ(gaps[0].target, "onnx.NoSuchOp");

  try {
    fx::exec::run(gm, {Value::from_f32({2, 3}, std::vector<float>(6)),
                       Value::from_f32({4}, std::vector<float>(4))});
    FAIL() << "expected a broadcast error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Runtime);
    EXPECT_EQ(e.node(), "add");
    EXPECT_STREQ(
        e.what(),
        "node 'add' (onnx.Add) with inputs (float32[2, 3], float32[4]): shapes do not broadcast");
  }
  try {
    fx::exec::run(gm, {Value::from_f32({2}, {1, 2}), Value::from_f32({2}, {3, 4})});
    FAIL() << "expected an unsupported-op error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Unsupported);
    EXPECT_EQ(e.node(), "no_such_op");
  }
  EXPECT_EQ(
      [&] {
        try {
          fx::exec::run(gm, {Value::from_f32({2}, {1, 2})});
        } catch (const fx::Error& e) {
          return e.kind();
        }
        return fx::ErrorKind::Internal;
      }(),
      fx::ErrorKind::Value);  // too few inputs
}

TEST(Exec, IntegerDivisionByZeroIsAnErrorNotACrash) {
  auto g = std::make_unique<fx::Graph>();
  Node* a = g->placeholder("a");
  Node* b = g->placeholder("b");
  g->output(g->call_function(fn("onnx.Div"), {a, b}));
  fx::GraphModule gm(nullptr, std::move(g));
  try {
    fx::exec::run(gm, {Value::from_i64({2}, {4, 5}), Value::from_i64({2}, {2, 0})});
    FAIL();
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find("division by zero"), std::string::npos);
  }
  std::vector<Value> ok =
      fx::exec::run(gm, {Value::from_i64({2}, {-7, 7}), Value::from_i64({2}, {2, 2})});
  EXPECT_EQ(ok[0].to_i64(), (std::vector<int64_t>{-3, 3}));  // truncation, as onnxruntime
}

}  // namespace

namespace {

// Runs one onnx.<op> node on `inputs` (placeholders, in order) and returns its outputs.
std::vector<Value> run_op(const std::string& op, const std::vector<Value>& inputs,
                          fx::Kwargs attrs = {}, int num_outputs = 1) {
  auto g = std::make_unique<fx::Graph>();
  std::vector<Argument> args;
  for (size_t i = 0; i < inputs.size(); ++i)
    args.emplace_back(g->placeholder("in" + std::to_string(i)));
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
  return fx::exec::run(gm, inputs);
}

// A Transpose that moves only dims of size 1 (a batch of one, [1, S, E] -> [S, 1, E]) returns a
// view of its input's bytes; one that reorders dims of more than one element copies.
TEST(ExecOps, TransposeOfSizeOneDimsIsAView) {
  std::vector<float> xv(12);
  for (int i = 0; i < 12; ++i) xv[i] = static_cast<float>(i);
  const Value x = Value::from_f32({1, 3, 4}, xv);
  const Value v = run_op("Transpose", {x}, {{"perm", Argument::list({1, 0, 2})}})[0];
  EXPECT_EQ(v.shape(), (std::vector<int64_t>{3, 1, 4}));
  EXPECT_EQ(v.to_f32(), xv);
  EXPECT_EQ(v.data<float>(), x.data<float>());
  const Value t = run_op("Transpose", {x}, {{"perm", Argument::list({0, 2, 1})}})[0];
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{1, 4, 3}));
  EXPECT_NE(t.data<float>(), x.data<float>());
  EXPECT_EQ(t.to_f32(), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
}

TEST(ExecOps, PadModes) {
  const Value x = Value::from_f32({1, 3}, {1, 2, 3});
  const Value pads = Value::from_i64({4}, {0, 2, 0, 1});
  EXPECT_EQ(run_op("Pad", {x, pads})[0].to_f32(), (std::vector<float>{0, 0, 1, 2, 3, 0}));
  EXPECT_EQ(run_op("Pad", {x, pads}, {{"mode", "edge"}})[0].to_f32(),
            (std::vector<float>{1, 1, 1, 2, 3, 3}));
  EXPECT_EQ(run_op("Pad", {x, pads}, {{"mode", "reflect"}})[0].to_f32(),
            (std::vector<float>{3, 2, 1, 2, 3, 2}));
  EXPECT_EQ(run_op("Pad", {x, pads, Value::scalar_f32(9)})[0].to_f32(),
            (std::vector<float>{9, 9, 1, 2, 3, 9}));
}

TEST(ExecOps, TopKCumSumTriluTile) {
  const Value x = Value::from_f32({2, 3}, {1, 3, 2, 5, 5, 4});
  std::vector<Value> tk = run_op("TopK", {x, Value::from_i64({1}, {2})}, {}, 2);
  EXPECT_EQ(tk[0].to_f32(), (std::vector<float>{3, 2, 5, 5}));
  EXPECT_EQ(tk[1].to_i64(), (std::vector<int64_t>{1, 2, 0, 1}));  // ties: lower index first
  EXPECT_EQ(run_op("CumSum", {x, Value::from_i64({}, {1})})[0].to_f32(),
            (std::vector<float>{1, 4, 6, 5, 10, 14}));
  EXPECT_EQ(run_op("CumSum", {x, Value::from_i64({}, {1})}, {{"exclusive", 1}, {"reverse", 1}})[0]
                .to_f32(),
            (std::vector<float>{5, 2, 0, 9, 4, 0}));
  EXPECT_EQ(run_op("Trilu", {x})[0].to_f32(), (std::vector<float>{1, 3, 2, 0, 5, 4}));
  EXPECT_EQ(run_op("Trilu", {x}, {{"upper", 0}})[0].to_f32(),
            (std::vector<float>{1, 0, 0, 5, 5, 0}));
  std::vector<Value> t =
      run_op("Tile", {Value::from_f32({1, 2}, {1, 2}), Value::from_i64({2}, {2, 2})});
  EXPECT_EQ(t[0].shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(t[0].to_f32(), (std::vector<float>{1, 2, 1, 2, 1, 2, 1, 2}));
}

TEST(ExecOps, ResizeNearestAndLinear) {
  const Value x = Value::from_f32({1, 1, 2, 2}, {1, 2, 3, 4});
  const Value scales = Value::from_f32({4}, {1, 1, 2, 2});
  // roi (input 1) is an omitted optional input; scales is input 2.
  auto g = std::make_unique<fx::Graph>();
  Node* in = g->placeholder("x");
  Node* sc = g->placeholder("scales");
  Node* r = g->call_function(fn("onnx.Resize"), {in, Argument(), sc}, {{"mode", "nearest"}});
  Node* l =
      g->call_function(fn("onnx.Resize"), {in, Argument(), sc},
                       {{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}});
  g->output(Argument::tuple({r, l}));
  fx::GraphModule gm(nullptr, std::move(g));
  std::vector<Value> out = fx::exec::run(gm, {x, scales});
  EXPECT_EQ(out[0].to_f32(), (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  const std::vector<float> lin = out[1].to_f32();
  EXPECT_FLOAT_EQ(lin[0], 1.0f);
  EXPECT_FLOAT_EQ(lin[3], 2.0f);
  EXPECT_FLOAT_EQ(lin[1], 1.0f + 1.0f / 3.0f);
  EXPECT_FLOAT_EQ(lin[15], 4.0f);
}

TEST(ExecOps, ConvTransposeIsTheAdjointOfConv) {
  // <conv(x, w), y> == <x, conv_transpose(y, w)> for stride 2, pad 1.
  const std::vector<float> xv = random_floats(2 * 5 * 5, 11), wv = random_floats(3 * 2 * 3 * 3, 12);
  const Value x = Value::from_f32({1, 2, 5, 5}, xv), w = Value::from_f32({3, 2, 3, 3}, wv);
  fx::Kwargs attrs{{"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}};
  const Value y = run_op("Conv", {x, w}, attrs)[0];
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{1, 3, 3, 3}));
  const std::vector<float> yv = random_floats(27, 13);
  fx::Kwargs tattrs{{"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}};
  const Value xt = run_op("ConvTranspose", {Value::from_f32({1, 3, 3, 3}, yv), w}, tattrs)[0];
  ASSERT_EQ(xt.shape(), (std::vector<int64_t>{1, 2, 5, 5}));
  double lhs = 0, rhs = 0;
  for (int i = 0; i < 27; ++i) lhs += y.data<float>()[i] * yv[i];
  for (int i = 0; i < 50; ++i) rhs += xv[i] * xt.data<float>()[i];
  EXPECT_NEAR(lhs, rhs, 1e-4);
}

TEST(ExecOps, PReluInstanceNormDepthToSpaceGatherElements) {
  const Value x = Value::from_f32({1, 2, 2}, {-1, 2, -3, 4});
  EXPECT_EQ(run_op("PRelu", {x, Value::from_f32({2, 1}, {0.5f, 0.25f})})[0].to_f32(),
            (std::vector<float>{-0.5f, 2, -0.75f, 4}));
  const std::vector<float> in = run_op("InstanceNormalization",
                                       {Value::from_f32({1, 1, 4}, {1, 2, 3, 4}),
                                        Value::from_f32({1}, {2}), Value::from_f32({1}, {1})},
                                       {{"epsilon", 0.0}})[0]
                                    .to_f32();
  EXPECT_NEAR(in[0], 1 - 2 * 1.5 / std::sqrt(1.25), 1e-5);
  std::vector<float> d(8);
  for (int i = 0; i < 8; ++i) d[i] = static_cast<float>(i);
  // DCR: 4 channels of 1x2 -> 1 channel of 2x4.
  EXPECT_EQ(
      run_op("DepthToSpace", {Value::from_f32({1, 4, 1, 2}, d)}, {{"blocksize", 2}})[0].to_f32(),
      (std::vector<float>{0, 2, 1, 3, 4, 6, 5, 7}));
  EXPECT_EQ(run_op("GatherElements",
                   {Value::from_f32({2, 2}, {1, 2, 3, 4}), Value::from_i64({2, 2}, {0, 0, 1, 0})},
                   {{"axis", 1}})[0]
                .to_f32(),
            (std::vector<float>{1, 1, 4, 3}));
}

}  // namespace

namespace {

TEST(ExecOps, ScatterAndGatherFamilies) {
  const Value data = Value::from_f32({4}, {1, 2, 3, 4});
  EXPECT_EQ(
      run_op("ScatterND", {data, Value::from_i64({2, 1}, {3, 1}), Value::from_f32({2}, {9, 8})})[0]
          .to_f32(),
      (std::vector<float>{1, 8, 3, 9}));
  EXPECT_EQ(
      run_op("ScatterND", {data, Value::from_i64({2, 1}, {1, 1}), Value::from_f32({2}, {5, 6})},
             {{"reduction", "add"}})[0]
          .to_f32(),
      (std::vector<float>{1, 13, 3, 4}));
  const Value m = Value::from_f32({2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(run_op("ScatterElements",
                   {m, Value::from_i64({1, 2}, {1, 0}), Value::from_f32({1, 2}, {7, 8})})[0]
                .to_f32(),
            (std::vector<float>{1, 8, 7, 4}));
  EXPECT_EQ(run_op("GatherND", {m, Value::from_i64({2, 2}, {0, 1, 1, 0})})[0].to_f32(),
            (std::vector<float>{2, 3}));
  EXPECT_EQ(run_op("GatherND", {m, Value::from_i64({1, 1}, {1})})[0].to_f32(),
            (std::vector<float>{3, 4}));
  const std::vector<Value> nz = run_op("NonZero", {Value::from_f32({2, 2}, {0, 1, 1, 0})});
  EXPECT_EQ(nz[0].shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(nz[0].to_i64(), (std::vector<int64_t>{0, 1, 1, 0}));
  const Value oh = run_op("OneHot", {Value::from_i64({2}, {2, -1}), Value::from_i64({}, {3}),
                                     Value::from_f32({2}, {0, 1})})[0];
  EXPECT_EQ(oh.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(oh.to_f32(), (std::vector<float>{0, 0, 1, 0, 0, 1}));
  const Value cs = run_op("ConstantOfShape", {Value::from_i64({2}, {2, 3})}, {{"value", 7LL}})[0];
  EXPECT_EQ(cs.dtype(), fx::Dtype::Int64);
  EXPECT_EQ(cs.to_i64(), std::vector<int64_t>(6, 7));
}

TEST(ExecOps, SpaceToDepthInvertsDepthToSpace) {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>(i);
  const Value x = Value::from_f32({1, 1, 4, 4}, v);
  const Value s = run_op("SpaceToDepth", {x}, {{"blocksize", 2}})[0];
  EXPECT_EQ(s.shape(), (std::vector<int64_t>{1, 4, 2, 2}));
  EXPECT_EQ(run_op("DepthToSpace", {s}, {{"blocksize", 2}})[0].to_f32(), v);
}

TEST(ExecOps, EinsumAgreesWithMatMulTransposeAndTrace) {
  const std::vector<float> av = random_floats(6, 21), bv = random_floats(12, 22);
  const Value a = Value::from_f32({2, 3}, av), b = Value::from_f32({3, 4}, bv);
  const std::vector<float> e = run_op("Einsum", {a, b}, {{"equation", "ij,jk->ik"}})[0].to_f32();
  const std::vector<float> mm = run_op("MatMul", {a, b})[0].to_f32();
  ASSERT_EQ(e.size(), mm.size());
  for (size_t i = 0; i < e.size(); ++i) EXPECT_NEAR(e[i], mm[i], 1e-5);
  EXPECT_EQ(run_op("Einsum", {a}, {{"equation", "ij->ji"}})[0].to_f32(),
            run_op("Transpose", {a})[0].to_f32());
  EXPECT_FLOAT_EQ(run_op("Einsum", {Value::from_f32({2, 2}, {1, 2, 3, 4})}, {{"equation", "ii"}})[0]
                      .to_f32()[0],
                  5.0f);
}

TEST(ExecOps, GroupNormalizationAndLstmByHand) {
  // Two groups of two channels of one element each: each group normalises to [-1, 1].
  const std::vector<float> gn =
      run_op("GroupNormalization",
             {Value::from_f32({1, 4, 1}, {1, 3, 10, 20}), Value::from_f32({4}, {1, 1, 1, 1}),
              Value::from_f32({4}, {0, 0, 0, 0})},
             {{"num_groups", 2}, {"epsilon", 0.0}})[0]
          .to_f32();
  EXPECT_NEAR(gn[0], -1, 1e-6);
  EXPECT_NEAR(gn[1], 1, 1e-6);
  EXPECT_NEAR(gn[3], 1, 1e-6);
  // LSTM, hidden 1, input 1, one step, weights (i, o, f, c) = (1, 2, 3, 4), no recurrence.
  const Value X = Value::from_f32({1, 1, 1}, {0.5f});
  const Value W = Value::from_f32({1, 4, 1}, {1, 2, 3, 4});
  const Value R = Value::from_f32({1, 4, 1}, {0, 0, 0, 0});
  std::vector<Value> out = run_op("LSTM", {X, W, R}, {{"hidden_size", 1}}, 3);
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  const double cell = sig(0.5) * std::tanh(2.0);  // f * c0 (= 0) + i * tanh(c)
  const double h = sig(1.0) * std::tanh(cell);
  EXPECT_NEAR(out[0].to_f32()[0], h, 1e-6);
  EXPECT_NEAR(out[1].to_f32()[0], h, 1e-6);
  EXPECT_NEAR(out[2].to_f32()[0], cell, 1e-6);
}

}  // namespace

namespace {

// x -> Conv(W, b) -> BatchNormalization -> Relu -> Add(Mul(c1, c2)) with constants.
std::unique_ptr<fx::GraphModule> conv_bn_model() {
  auto g = std::make_unique<fx::Graph>();
  fx::Module root;
  int seed = 100;
  auto param = [&](const std::string& name, std::vector<int64_t> shape, float lo) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v = random_floats(static_cast<size_t>(n), seed++);
    for (float& x : v) x = lo + std::fabs(x);  // variances must be positive
    root.register_parameter(name, tensor_f32(std::move(shape), v));
    return g->get_attr(name);
  };
  Node* x = g->placeholder("x");
  Node* conv = g->call_function(fn("onnx.Conv"),
                                {x, param("w", {4, 2, 3, 3}, -0.5f), param("b", {4}, -0.5f)},
                                {{"kernel_shape", ints({3, 3})}, {"pads", ints({1, 1, 1, 1})}});
  Node* bn = g->call_function(fn("onnx.BatchNormalization"),
                              {conv, param("gamma", {4}, 0.5f), param("beta", {4}, -0.5f),
                               param("mean", {4}, -0.5f), param("var", {4}, 0.5f)},
                              {{"epsilon", 1e-5}});
  Node* relu = g->call_function(fn("onnx.Relu"), {bn});
  Node* k = g->call_function(fn("onnx.Mul"), {param("c1", {1}, 1.0f), param("c2", {1}, 1.0f)});
  g->output(g->call_function(fn("onnx.Add"), {relu, k}));
  return std::make_unique<fx::GraphModule>(&root, std::move(g));
}

TEST(OnnxPasses, PipelineWithEquivalenceCheckFoldsAndFuses) {
  auto gm = conv_bn_model();
  const Value x = Value::from_f32({1, 2, 6, 6}, random_floats(72, 7));
  const std::vector<float> before = fx::exec::run(*gm, {x})[0].to_f32();
  fx::PassManager pm;
  pm.add("fold", fx::exec::fold_constants).add("fuse-conv-bn", fx::exec::fuse_conv_bn);
  pm.add("dce", [](fx::GraphModule& m) { return fx::eliminate_dead_code(m); });
  pm.constrain("fold", "dce").max_iterations(3).check_equivalence(fx::exec::equivalence_check({x}));
  const std::vector<fx::PassReport> reports = pm.run(*gm);
  ASSERT_GE(reports.size(), 3u);
  EXPECT_TRUE(reports[0].modified);  // Mul of two constants folded
  EXPECT_TRUE(reports[1].modified);  // BN folded into the conv
  for (Node* n : gm->graph().nodes()) {
    if (n->op() == fx::Opcode::CallFunction) {
      EXPECT_NE(n->target().pretty(), "onnx.BatchNormalization");
    }
  }
  const std::vector<float> after = fx::exec::run(*gm, {x})[0].to_f32();
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_NEAR(before[i], after[i], 1e-4);
  // The second iteration changes nothing, so the pipeline stops.
  EXPECT_FALSE(reports.back().modified);
}

TEST(OnnxPasses, EquivalenceCheckNamesTheBadPassAndNode) {
  auto gm = conv_bn_model();
  const Value x = Value::from_f32({1, 2, 6, 6}, random_floats(72, 7));
  fx::PassManager pm;
  pm.add("relu-to-sigmoid", [](fx::GraphModule& m) {  // a wrong "optimisation"
    Node* relu = m.graph().find_node("relu");
    auto guard = m.graph().inserting_after(relu);
    Node* s = m.graph().call_function(fn("onnx.Sigmoid"), {relu->args()[0]});
    relu->replace_all_uses_with(s);
    m.graph().erase_node(relu);
    return true;
  });
  pm.check_equivalence(fx::exec::equivalence_check({x}));
  try {
    pm.run(*gm);
    FAIL() << "the check should fail";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Runtime);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("pass 'relu-to-sigmoid'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("first diverging node 'add'"), std::string::npos) << msg;
  }
  fx::PassManager bad_order;
  bad_order.add("b", [](fx::GraphModule&) { return false; }).add("a", [](fx::GraphModule&) {
    return false;
  });
  bad_order.constrain("a", "b");
  EXPECT_THROW(bad_order.run(*gm), fx::Error);
}

}  // namespace

namespace {

TEST(OnnxPasses, GeluAndGemmRefusionOfDecomposedExports) {
  auto g = std::make_unique<fx::Graph>();
  fx::Module root;
  auto scalar = [&](const std::string& name, float v) {
    root.register_buffer(name, tensor_f32({}, {v}));
    return g->get_attr(name);
  };
  Node* x = g->placeholder("x");  // [3, 4]
  Node* w = g->get_attr("w");
  root.register_parameter("w", tensor_f32({4, 5}, random_floats(20, 31)));
  root.register_parameter("b", tensor_f32({5}, random_floats(5, 32)));
  Node* mm = g->call_function(fn("onnx.MatMul"), {x, w});
  Node* h = g->call_function(fn("onnx.Add"), {mm, g->get_attr("b")});
  // GELU as torch exports it: x * (1 + erf(x / sqrt(2))) * 0.5
  Node* d = g->call_function(fn("onnx.Div"), {h, scalar("sqrt2", 1.4142135f)});
  Node* e = g->call_function(fn("onnx.Erf"), {d});
  Node* p1 = g->call_function(fn("onnx.Add"), {e, scalar("one", 1.0f)});
  Node* m = g->call_function(fn("onnx.Mul"), {h, p1});
  Node* y = g->call_function(fn("onnx.Mul"), {m, scalar("half", 0.5f)});
  // And the variant with 0.5 * x first and Mul by 1/sqrt(2).
  Node* d2 = g->call_function(fn("onnx.Mul"), {scalar("inv_sqrt2", 0.70710678f), y});
  Node* e2 = g->call_function(fn("onnx.Erf"), {d2});
  Node* p2 = g->call_function(fn("onnx.Add"), {scalar("one_b", 1.0f), e2});
  Node* hx = g->call_function(fn("onnx.Mul"), {y, scalar("half_b", 0.5f)});
  g->output(g->call_function(fn("onnx.Mul"), {hx, p2}));
  fx::GraphModule gm(&root, std::move(g));
  const Value in = Value::from_f32({3, 4}, random_floats(12, 33));
  fx::exec::shape_prop(gm, {in});
  const fx::Argument* tm = gm.graph().find_node("mat_mul")->meta().find("tensor_meta");
  ASSERT_NE(tm, nullptr);
  EXPECT_EQ(tm->repr(), "{'shape': (3, 5), 'dtype': torch.float32}");

  fx::PassManager pm;
  pm.add("fuse-matmul-add", fx::exec::fuse_matmul_add).add("fuse-gelu", fx::exec::fuse_gelu);
  pm.check_equivalence(fx::exec::equivalence_check({in}, 1e-5f, 1e-6f));
  std::vector<fx::PassReport> r = pm.run(gm);
  EXPECT_TRUE(r[0].modified);
  EXPECT_TRUE(r[1].modified);
  std::vector<std::string> ops;
  for (Node* n : gm.graph().nodes())
    if (n->op() == fx::Opcode::CallFunction) ops.push_back(n->target().pretty());
  EXPECT_EQ(ops, (std::vector<std::string>{"onnx.Gemm", "onnx.Gelu", "onnx.Gelu"}));
}

}  // namespace

namespace {

TEST(OnnxPasses, LayerNormRefusion) {
  auto g = std::make_unique<fx::Graph>();
  fx::Module root;
  auto scalar = [&](const std::string& name, float v) {
    root.register_buffer(name, tensor_f32({}, {v}));
    return g->get_attr(name);
  };
  root.register_parameter("weight", tensor_f32({6}, random_floats(6, 41)));
  root.register_parameter("bias", tensor_f32({6}, random_floats(6, 42)));
  Node* x = g->placeholder("x");  // [2, 3, 6]
  Node* mean = g->call_function(fn("onnx.ReduceMean"), {x}, {{"axes", ints({-1})}});
  Node* sub = g->call_function(fn("onnx.Sub"), {x, mean});
  Node* pw = g->call_function(fn("onnx.Pow"), {sub, scalar("two", 2.0f)});
  Node* var = g->call_function(fn("onnx.ReduceMean"), {pw}, {{"axes", ints({-1})}});
  Node* add = g->call_function(fn("onnx.Add"), {var, scalar("eps", 1e-5f)});
  Node* sq = g->call_function(fn("onnx.Sqrt"), {add});
  Node* div = g->call_function(fn("onnx.Div"), {sub, sq});
  Node* mul = g->call_function(fn("onnx.Mul"), {div, g->get_attr("weight")});
  // Exporters share equal initializers through Identity nodes: the bias is behind one.
  Node* bias = g->call_function(fn("onnx.Identity"), {g->get_attr("bias")});
  g->output(g->call_function(fn("onnx.Add"), {mul, bias}));
  fx::GraphModule gm(&root, std::move(g));
  const Value in = Value::from_f32({2, 3, 6}, random_floats(36, 43));

  // The executor runs the decomposed pattern as one LayerNormalization kernel (its exact bits),
  // unless an intermediate is probed; both agree to rounding.
  const Value fused = fx::exec::run(gm, {in})[0];
  const Value unfused = run_with(gm, {in}, {"sub"}).outputs[0];
  std::vector<float> kernel(36);
  const std::vector<float> xv = random_floats(36, 43), wv = random_floats(6, 41),
                           bv = random_floats(6, 42);
  fx::kernels::layer_norm_f32(xv.data(), wv.data(), bv.data(), kernel.data(), 6, 6, 1e-5f);
  bool differs = false;
  for (int i = 0; i < 36; ++i) {
    EXPECT_EQ(fused.data<float>()[i], kernel[i]) << i;
    EXPECT_NEAR(unfused.data<float>()[i], kernel[i], 1e-5f) << i;
    differs = differs || unfused.data<float>()[i] != kernel[i];
  }
  EXPECT_TRUE(differs) << "the unfused run should round differently somewhere";
  fx::PassManager pm;
  pm.add("fuse-layernorm", fx::exec::fuse_layer_norm)
      .check_equivalence(fx::exec::equivalence_check({in}, 1e-4f, 1e-5f));
  EXPECT_TRUE(pm.run(gm)[0].modified);
  std::vector<std::string> ops;
  for (Node* n : gm.graph().nodes())
    if (n->op() == fx::Opcode::CallFunction) ops.push_back(n->target().pretty());
  // (the Identity in front of the bias stays: the fused node reads the bias through it)
  EXPECT_EQ(ops, (std::vector<std::string>{"onnx.Identity", "onnx.LayerNormalization"}));
}

}  // namespace

namespace {

// Conv -> Relu, Conv -> Clip(lo, hi) (bounds as get_attr inputs), Add -> Relu, Gemm -> Clip(attrs):
// the executor fuses each activation into its producer. Probing the producer turns the fusion
// off, so the fused and the unfused results can be compared on the same graph.
TEST(Exec, FusedActivationsEqualTheUnfusedOps) {
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("w");
  Node* b = g->get_attr("b");
  Node* lo = g->get_attr("lo");
  Node* hi = g->get_attr("hi");
  Node* conv1 = g->call_function(fn("onnx.Conv"), {x, w, b},
                                 {{"kernel_shape", ints({3, 3})}, {"pads", ints({1, 1, 1, 1})}});
  Node* relu = g->call_function(fn("onnx.Relu"), {conv1});
  Node* conv2 = g->call_function(fn("onnx.Conv"), {relu, w, b},
                                 {{"kernel_shape", ints({3, 3})}, {"pads", ints({1, 1, 1, 1})}});
  Node* clip = g->call_function(fn("onnx.Clip"), {conv2, lo, hi});
  Node* add = g->call_function(fn("onnx.Add"), {clip, x});
  Node* relu2 = g->call_function(fn("onnx.Relu"), {add});
  g->output(relu2);
  fx::Module root;
  root.register_parameter("w", tensor_f32({4, 4, 3, 3}, random_floats(144, 5)));
  root.register_parameter("b", tensor_f32({4}, {0.1f, -0.2f, 0.3f, -0.4f}));
  root.register_buffer("lo", tensor_f32({}, {-0.25f}));
  root.register_buffer("hi", tensor_f32({}, {0.5f}));
  fx::GraphModule gm(&root, std::move(g));
  const Value in = Value::from_f32({2, 4, 5, 5}, random_floats(200, 6));
  const fx::exec::RunResult fused = run_with(gm, {in}, {"relu", "clip"});
  const fx::exec::RunResult plain = run_with(gm, {in}, {"conv", "conv_1", "add", "relu", "clip"});
  ASSERT_EQ(fused.outputs.size(), 1u);
  EXPECT_EQ(fused.outputs[0].to_f32(), plain.outputs[0].to_f32());
  // The probed activations equal clamp(producer) computed by hand from the unfused run.
  auto probe = [](const fx::exec::RunResult& r, const std::string& name) {
    for (const auto& [n, v] : r.probes)
      if (n == name) return v.to_f32();
    return std::vector<float>{};
  };
  const std::vector<float> conv_1 = probe(plain, "conv_1"), clip_fused = probe(fused, "clip");
  ASSERT_EQ(conv_1.size(), clip_fused.size());
  for (size_t i = 0; i < conv_1.size(); ++i)
    EXPECT_EQ(clip_fused[i], std::min(std::max(conv_1[i], -0.25f), 0.5f));
  EXPECT_EQ(probe(fused, "relu"), probe(plain, "relu"));
  for (float v : probe(fused, "relu")) EXPECT_GE(v, 0.0f);
}

// Conv -> Add(conv, r) -> Relu/Clip, r computed before the Conv: the executor adds r and clamps
// as the convolution stores its output. The fused run gives the unfused run's bits (the Conv or
// the Add probed), with the Add's operands in either order, a residual that is a graph input, a
// downsampling block's two convolutions (the later one takes the Add), every Conv path (im2col,
// Winograd, 1x1, depthwise), and a residual that broadcasts (the Add then runs as a node).
TEST(Exec, ConvResidualAddFusedGivesTheUnfusedBits) {
  struct Case {
    const char* what;
    int64_t k, pad, group;
    bool residual_first, downsample, broadcast, clip;
  };
  for (const Case& c :
       {Case{"3x3 im2col", 3, 1, 1, false, false, false, false},
        Case{"3x3, Add(r, conv), Clip", 3, 1, 1, true, false, false, true},
        Case{"1x1, downsampling block", 1, 0, 1, false, true, false, false},
        Case{"1x1, downsampling block, Add(r, conv)", 1, 0, 1, true, true, false, true},
        Case{"depthwise 3x3", 3, 1, 16, false, false, false, false},
        Case{"3x3, residual broadcast", 3, 1, 1, false, false, true, false}}) {
    for (const int64_t side : {6, 20}) {  // (20: enough tiles for Winograd)
      const int64_t C = 16;
      auto g = std::make_unique<fx::Graph>();
      Node* x = g->placeholder("x");
      Node* r = g->placeholder("r");
      auto conv = [&](Node* in, const char* w, int64_t k, int64_t pad, int64_t group) {
        return g->call_function(fn("onnx.Conv"), {in, g->get_attr(w), g->get_attr("b")},
                                {{"kernel_shape", ints({k, k})},
                                 {"pads", ints({pad, pad, pad, pad})},
                                 {"group", Argument(static_cast<long long>(group))}});
      };
      // The residual: the input r, or (downsampling) a 1x1 convolution of x computed first.
      Node* res = c.downsample ? conv(x, "wd", 1, 0, 1) : r;
      Node* main = conv(x, "w", c.k, c.pad, c.group);
      Node* add =
          g->call_function(fn("onnx.Add"), c.residual_first ? std::vector<Argument>{res, main}
                                                            : std::vector<Argument>{main, res});
      Node* act =
          c.clip ? g->call_function(fn("onnx.Clip"), {add, g->get_attr("lo"), g->get_attr("hi")})
                 : g->call_function(fn("onnx.Relu"), {add});
      g->output(act);
      fx::Module root;
      root.register_parameter("w", tensor_f32({C, C / c.group, c.k, c.k},
                                              random_floats(C * C / c.group * c.k * c.k, 7)));
      root.register_parameter("wd", tensor_f32({C, C, 1, 1}, random_floats(C * C, 8)));
      root.register_parameter("b", tensor_f32({C}, random_floats(C, 9)));
      root.register_buffer("lo", tensor_f32({}, {-0.25f}));
      root.register_buffer("hi", tensor_f32({}, {0.5f}));
      fx::GraphModule gm(&root, std::move(g));
      const Value in = Value::from_f32({2, C, side, side}, random_floats(2 * C * side * side, 10));
      const std::vector<int64_t> r_shape =
          c.broadcast ? std::vector<int64_t>{C, 1, side} : std::vector<int64_t>{2, C, side, side};
      int64_t r_numel = 1;
      for (int64_t d : r_shape) r_numel *= d;
      const Value rv = Value::from_f32(r_shape, random_floats(static_cast<size_t>(r_numel), 11));
      const std::string what =
          std::string(c.what) + ", " + std::to_string(side) + "x" + std::to_string(side);
      const std::vector<float> fused = run_with(gm, {in, rv}).outputs[0].to_f32();
      for (const std::string& probe : {main->name(), add->name()}) {
        const fx::exec::RunResult plain = run_with(gm, {in, rv}, {probe});
        ASSERT_EQ(fused, plain.outputs[0].to_f32()) << what << ", probed " << probe;
      }
      // The Add's probe holds its own value: conv + r, before the activation.
      const fx::exec::RunResult probed = run_with(gm, {in, rv}, {main->name(), add->name()});
      ASSERT_EQ(probed.probes.size(), 2u);
      const std::vector<float> conv_v = probed.probes[0].second.to_f32();
      const std::vector<float> add_v = probed.probes[1].second.to_f32();
      ASSERT_EQ(conv_v.size(), fused.size());
      for (size_t i = 0; i < fused.size(); ++i) {
        const float lo = c.clip ? -0.25f : 0.0f, hi = c.clip ? 0.5f : INFINITY;
        ASSERT_EQ(fused[i], std::min(std::max(add_v[i], lo), hi)) << what << " at " << i;
      }
      // Repeated runs (the plan kept, the residual offered again) give the same bits.
      ASSERT_EQ(run_with(gm, {in, rv}).outputs[0].to_f32(), fused) << what << ", second run";
    }
  }
}

// Registers, in the builtin's place until it goes out of scope, an Add of float32 tensors that
// counts its calls in `adds` (a fused Add is never called).
class CountingAdd {
 public:
  explicit CountingAdd(int& adds) {
    fx::exec::register_op("onnx.Add", [&adds](fx::exec::OpCall& c) {
      ++adds;
      const Value& a = c.input(0);
      const Value& b = c.input(1);
      std::vector<int64_t> shape;
      if (!fx::kernels::broadcast_shapes(a.shape(), b.shape(), shape)) c.fail("shapes");
      std::vector<float> sum(static_cast<size_t>(fx::kernels::numel(shape)));
      fx::kernels::binary_f32(fx::kernels::BinaryOp::Add, a.shape(), a.data<float>(), b.shape(),
                              b.data<float>(), sum.data());
      c.outputs.push_back(Value::from_f32(shape, sum));
    });
  }
  ~CountingAdd() { fx::exec::register_elementwise_ops(); }
  CountingAdd(const CountingAdd&) = delete;
  CountingAdd& operator=(const CountingAdd&) = delete;
};

// The fusion takes place: with a counting Add registered in the builtin's place, a fused run of
// Conv -> Add -> Relu calls no Add op, and a run with the Conv probed calls it once, with the same
// bits.
TEST(Exec, ConvResidualAddFusedRunsNoAddOp) {
  int adds = 0;
  const CountingAdd counting(adds);
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* conv = g->call_function(fn("onnx.Conv"), {x, g->get_attr("w"), g->get_attr("b")},
                                {{"kernel_shape", ints({3, 3})}, {"pads", ints({1, 1, 1, 1})}});
  Node* add = g->call_function(fn("onnx.Add"), {conv, x});
  g->output(g->call_function(fn("onnx.Relu"), {add}));
  fx::Module root;
  root.register_parameter("w", tensor_f32({8, 8, 3, 3}, random_floats(8 * 8 * 9, 12)));
  root.register_parameter("b", tensor_f32({8}, random_floats(8, 13)));
  fx::GraphModule gm(&root, std::move(g));
  const Value in = Value::from_f32({1, 8, 9, 9}, random_floats(8 * 81, 14));
  const std::vector<float> fused = run_with(gm, {in}).outputs[0].to_f32();
  EXPECT_EQ(adds, 0) << "the Add ran as a node";
  const std::vector<float> plain = run_with(gm, {in}, {conv->name()}).outputs[0].to_f32();
  EXPECT_EQ(adds, 1);
  EXPECT_EQ(fused, plain);
}

// A squeeze-and-excitation block's Mul(x, scale) -> Conv, scale [N, C, 1, 1] computed from x (or
// an input [1, C, 1, 1] for every image): the Conv reads x and the scale, the Mul never runs (no
// profile entry), and the result has the bits of the Mul run as a node (probed). Every Conv path:
// 1x1 products on B in place, packed and transposed (the scale applied as the GEMM packs), a 1x1
// too small for that, 3x3 and depthwise (the input scaled first); the Mul's operands in either
// order. Operands that are not x and a per-channel scale (two full tensors, a scale of rank 3)
// run the Mul as a node.
TEST(Exec, ConvInputScaleFusedGivesTheBitsOfTheMul) {
  struct Case {
    const char* what;
    int64_t C, M, side, k, group;
  };
  for (const Case& c :
       {Case{"1x1, B in place", 24, 16, 20, 1, 1}, Case{"1x1, B packed", 96, 80, 14, 1, 1},
        Case{"1x1, transposed", 192, 96, 7, 1, 1}, Case{"1x1, small", 8, 4, 5, 1, 1},
        Case{"3x3", 16, 16, 12, 3, 1}, Case{"depthwise 3x3", 16, 16, 12, 3, 16}}) {
    for (int form = 0; form < 5; ++form) {
      // 0: Mul(x, s), s from x; 1: Mul(s, x); 2: s an input [1, C, 1, 1]; 3: Mul(x, y), y a full
      // tensor; 4: s an input [C, 1, 1].
      auto g = std::make_unique<fx::Graph>();
      Node* x = g->placeholder("x");
      Node* y = form >= 2 ? g->placeholder("y") : nullptr;
      Node* scale = y ? y
                      : g->call_function(fn("onnx.Sigmoid"),
                                         {g->call_function(fn("onnx.GlobalAveragePool"), {x})});
      Node* mul = g->call_function(fn("onnx.Mul"), form == 1 ? std::vector<Argument>{scale, x}
                                                             : std::vector<Argument>{x, scale});
      const int64_t pad = c.k / 2;
      Node* conv = g->call_function(fn("onnx.Conv"), {mul, g->get_attr("w"), g->get_attr("b")},
                                    {{"kernel_shape", ints({c.k, c.k})},
                                     {"pads", ints({pad, pad, pad, pad})},
                                     {"group", Argument(static_cast<long long>(c.group))}});
      g->output(g->call_function(fn("onnx.Relu"), {conv}));
      fx::Module root;
      root.register_parameter(
          "w", tensor_f32({c.M, c.C / c.group, c.k, c.k},
                          random_floats(static_cast<size_t>(c.M * c.C / c.group * c.k * c.k), 31)));
      root.register_parameter("b", tensor_f32({c.M}, random_floats(static_cast<size_t>(c.M), 32)));
      fx::GraphModule gm(&root, std::move(g));
      const int64_t n = 2, plane = c.side * c.side;
      std::vector<Value> in = {Value::from_f32(
          {n, c.C, c.side, c.side}, random_floats(static_cast<size_t>(n * c.C * plane), 33))};
      if (form == 2) in.push_back(Value::from_f32({1, c.C, 1, 1}, random_floats(c.C, 34)));
      if (form == 3)
        in.push_back(Value::from_f32({n, c.C, c.side, c.side},
                                     random_floats(static_cast<size_t>(n * c.C * plane), 35)));
      if (form == 4) in.push_back(Value::from_f32({c.C, 1, 1}, random_floats(c.C, 36)));
      const std::string what = std::string(c.what) + ", form " + std::to_string(form);
      fx::exec::RunOptions profiled;
      profiled.profile = true;
      const fx::exec::RunResult fused = fx::exec::run(gm, in, profiled);
      bool mul_ran = false;
      for (const fx::exec::OpTime& t : fused.profile) mul_ran = mul_ran || t.node == mul->name();
      EXPECT_EQ(mul_ran, form >= 3) << what;
      const fx::exec::RunResult plain = run_with(gm, in, {mul->name()});
      ASSERT_EQ(fused.outputs[0].to_f32(), plain.outputs[0].to_f32()) << what;
      // The plan kept: the same bits again.
      ASSERT_EQ(run_with(gm, in).outputs[0].to_f32(), plain.outputs[0].to_f32()) << what;
    }
  }
}

// An op registered in the builtin Conv's place does not know the input scale: the executor then
// runs the Mul and the op again on its value (here a Conv that returns its input), so the result
// is the Mul's, not x.
TEST(Exec, ConvInputScaleFallsBackForAConvThatDoesNotTakeIt) {
  struct Restore {
    ~Restore() { fx::exec::register_nn_ops(); }
  } restore;
  fx::exec::register_op("onnx.Conv", [](fx::exec::OpCall& c) {
    const Value& x = c.input(0);
    c.outputs.push_back(Value::from_f32(x.shape(), x.to_f32()));
  });
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* s = g->placeholder("s");
  Node* mul = g->call_function(fn("onnx.Mul"), {x, s});
  g->output(g->call_function(fn("onnx.Conv"), {mul, g->get_attr("w")}));
  fx::Module root;
  root.register_parameter("w", tensor_f32({2, 2, 1, 1}, {1, 0, 0, 1}));
  fx::GraphModule gm(&root, std::move(g));
  const std::vector<float> xs = random_floats(2 * 9, 37), ss = {0.5f, -2.0f};
  const std::vector<float> out =
      fx::exec::run(gm, {Value::from_f32({1, 2, 3, 3}, xs), Value::from_f32({1, 2, 1, 1}, ss)})[0]
          .to_f32();
  ASSERT_EQ(out.size(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(out[i], xs[i] * ss[i / 9]) << i;
}

// MatMul -> [Add(bias)] -> Add(r, .) -> [Relu], r computed before the MatMul (a transformer's
// feed-forward output and its skip connection): the executor adds the bias and r, and clamps, as
// the GEMM stores. The fused run gives the bits of the unfused one (each node probed in turn) and
// calls no Add op; with a weight shared by every row or per-batch products (the general case's
// own residual offsets), the Add's operands in either order, a residual that is an input or
// computed, and a residual that broadcasts (the Add then runs as a node).
TEST(Exec, MatMulResidualAddFusedGivesTheUnfusedBits) {
  int adds = 0;
  const CountingAdd counting(adds);
  struct Case {
    const char* what;
    bool bias, residual_first, computed, batched_b, broadcast, relu;
  };
  for (const Case& c : {Case{"bias, residual input", true, false, false, false, false, false},
                        Case{"bias, Add(r, .), Relu", true, true, false, false, false, true},
                        Case{"bias, computed residual", true, false, true, false, false, false},
                        Case{"no bias, Relu", false, false, false, false, false, true},
                        Case{"per-batch products", false, true, false, true, false, false},
                        Case{"bias, residual broadcast", true, false, false, false, true, false}}) {
    const int64_t B = 2, M = 37, K = 48, N = 40;
    auto g = std::make_unique<fx::Graph>();
    Node* x = g->placeholder("x");
    Node* r = g->placeholder("r");
    Node* res = c.computed ? g->call_function(fn("onnx.Tanh"), {r}) : r;
    Node* y = c.batched_b ? g->placeholder("y") : g->get_attr("w");
    Node* mm = g->call_function(fn("onnx.MatMul"), {x, y});
    Node* last = c.bias ? g->call_function(fn("onnx.Add"), {mm, g->get_attr("b")}) : mm;
    Node* add =
        g->call_function(fn("onnx.Add"), c.residual_first ? std::vector<Argument>{res, last}
                                                          : std::vector<Argument>{last, res});
    g->output(c.relu ? g->call_function(fn("onnx.Relu"), {add}) : add);
    fx::Module root;
    root.register_parameter("w", tensor_f32({K, N}, random_floats(K * N, 51)));
    const std::vector<float> b_vals = random_floats(N, 52);
    root.register_parameter("b", tensor_f32({N}, b_vals));
    fx::GraphModule gm(&root, std::move(g));
    const Value xv = Value::from_f32({B, M, K}, random_floats(B * M * K, 53));
    const std::vector<int64_t> r_shape =
        c.broadcast ? std::vector<int64_t>{N} : std::vector<int64_t>{B, M, N};
    const Value rv = Value::from_f32(
        r_shape, random_floats(static_cast<size_t>(c.broadcast ? N : B * M * N), 54));
    const Value yv = Value::from_f32({B, K, N}, random_floats(B * K * N, 55));
    const std::vector<Value> inputs =
        c.batched_b ? std::vector<Value>{xv, rv, yv} : std::vector<Value>{xv, rv};
    adds = 0;
    const std::vector<float> fused = run_with(gm, inputs).outputs[0].to_f32();
    ASSERT_EQ(fused.size(), static_cast<size_t>(B * M * N)) << c.what;
    if (c.broadcast)
      EXPECT_EQ(adds, 1) << c.what << ": the residual Add runs as a node";
    else
      EXPECT_EQ(adds, 0) << c.what << ": an Add ran as a node";
    for (Node* probe : {mm, last, add}) {
      const fx::exec::RunResult plain = run_with(gm, inputs, {probe->name()});
      ASSERT_EQ(fused, plain.outputs[0].to_f32()) << c.what << ", probed " << probe->name();
    }
    // Probing the residual keeps the fusion.
    adds = 0;
    ASSERT_EQ(run_with(gm, inputs, {res->name()}).outputs[0].to_f32(), fused) << c.what;
    EXPECT_EQ(adds, c.broadcast ? 1 : 0) << c.what << ", the residual probed";
    // The sum by hand, from the probed MatMul and residual: (mm + b) + r, then the Relu.
    const fx::exec::RunResult probed = run_with(gm, inputs, {mm->name(), res->name()});
    std::vector<float> mm_v, rvals;
    for (const auto& [name, value] : probed.probes)
      (name == mm->name() ? mm_v : rvals) = value.to_f32();
    ASSERT_EQ(mm_v.size(), fused.size()) << c.what;
    for (int64_t i = 0; i < B * M * N; ++i) {
      float v = mm_v[i];
      if (c.bias) v += b_vals[i % N];
      const float rr = c.broadcast ? rvals[i % N] : rvals[i];
      v = c.residual_first ? rr + v : v + rr;
      if (c.relu) v = std::max(v, 0.0f);
      ASSERT_EQ(fused[i], v) << c.what << " at " << i;
    }
    // Repeated runs (the plan kept, the residual offered again) give the same bits.
    ASSERT_EQ(run_with(gm, inputs).outputs[0].to_f32(), fused) << c.what << ", second run";
  }
}

}  // namespace

namespace {

// Slice and the reductions have contiguous fast paths (whole trailing dims, step-1 runs,
// consecutive reduced axes); random cases against index-by-index references.
TEST(ExecOps, SliceAndReduceFastPathsMatchNaiveIndexing) {
  std::mt19937 rng(7);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t rank = pick(1, 4);
    std::vector<int64_t> shape(rank);
    int64_t n = 1;
    for (int64_t& d : shape) n *= (d = pick(1, 5));
    std::vector<float> xv(n);
    for (int64_t i = 0; i < n; ++i) xv[i] = static_cast<float>(i) * 0.5f - 3.0f;
    const Value x = Value::from_f32(shape, xv);
    std::vector<int64_t> stride(rank, 1);
    for (int64_t d = rank - 2; d >= 0; --d) stride[d] = stride[d + 1] * shape[d + 1];

    // Slice on a random subset of axes (full, offset, negative and strided ranges).
    std::vector<int64_t> starts, ends, axes, steps, lo(rank, 0), step(rank, 1), len = shape;
    for (int64_t d = 0; d < rank; ++d) {
      if (pick(0, 2) == 0) continue;  // axis left whole
      const int64_t dim = shape[d];
      const int64_t s = pick(0, 3) == 0 ? -pick(1, 2) : pick(1, 2) == 1 ? 1 : 2;
      int64_t b = pick(0, dim - 1), e = s > 0 ? pick(b, dim) : pick(-1, b);
      len[d] = s > 0 ? (e - b + s - 1) / s : (b - e + (-s) - 1) / (-s);
      lo[d] = b;
      step[d] = s;
      starts.push_back(b);
      ends.push_back(s < 0 && e == -1 ? -dim - 1 : e);
      axes.push_back(pick(0, 1) ? d : d - rank);
      steps.push_back(s);
    }
    if (axes.empty()) continue;
    const int64_t k = static_cast<int64_t>(axes.size());
    std::vector<Value> got =
        run_op("Slice", {x, Value::from_i64({k}, starts), Value::from_i64({k}, ends),
                         Value::from_i64({k}, axes), Value::from_i64({k}, steps)});
    ASSERT_EQ(got[0].shape(), len) << "trial " << trial;
    std::vector<float> want;
    std::vector<int64_t> idx(rank, 0);
    int64_t total = 1;
    for (int64_t d : len) total *= d;
    for (int64_t o = 0; o < total; ++o) {
      int64_t off = 0;
      for (int64_t d = 0; d < rank; ++d) off += (lo[d] + idx[d] * step[d]) * stride[d];
      want.push_back(xv[off]);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++idx[d] < len[d]) break;
        idx[d] = 0;
      }
    }
    EXPECT_EQ(got[0].to_f32(), want) << "slice trial " << trial;

    // ReduceSum/ReduceMax over a random axis set (consecutive or not), keepdims=1.
    std::vector<int64_t> raxes;
    for (int64_t d = 0; d < rank; ++d)
      if (pick(0, 1)) raxes.push_back(d);
    if (raxes.empty()) raxes.push_back(pick(0, rank - 1));
    std::vector<bool> red(rank, false);
    for (int64_t a : raxes) red[a] = true;
    std::vector<int64_t> os = shape, ost(rank, 0);
    int64_t on = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (red[d]) {
        os[d] = 1;
      } else {
        ost[d] = on;
        on *= shape[d];
      }
    }
    std::vector<double> sum(on, 0.0), mx(on, -INFINITY);
    std::fill(idx.begin(), idx.end(), 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t oi = 0;
      for (int64_t d = 0; d < rank; ++d) oi += idx[d] * ost[d];
      sum[oi] += xv[i];
      mx[oi] = std::max<double>(mx[oi], xv[i]);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++idx[d] < shape[d]) break;
        idx[d] = 0;
      }
    }
    const Value ra = Value::from_i64({static_cast<int64_t>(raxes.size())}, raxes);
    std::vector<Value> rs = run_op("ReduceSum", {x, ra});
    std::vector<Value> rm = run_op("ReduceMax", {x}, {{"axes", ints(raxes)}});
    ASSERT_EQ(rs[0].shape(), os);
    ASSERT_EQ(rm[0].shape(), os);
    for (int64_t o = 0; o < on; ++o) {
      EXPECT_FLOAT_EQ(rs[0].to_f32()[o], static_cast<float>(sum[o])) << "trial " << trial;
      EXPECT_FLOAT_EQ(rm[0].to_f32()[o], static_cast<float>(mx[o])) << "trial " << trial;
    }
  }
}

}  // namespace
