// The executor's spatial, selection and detection ops on what ONNX's backend suite leaves out:
// the N-D pooling path agrees with the float32 2-D kernels, ConvTranspose in 3-D with groups,
// strides, dilations, pads and output_padding agrees with a direct loop, Unique's outputs
// rebuild the input, NonMaxSuppression per class with boxes that have no area, and properties
// of Resize (cubic at scale 1 is the identity, linear align_corners keeps a ramp a ramp).
#include <gtest/gtest.h>

#include <cmath>

#include "fx/exec.h"
#include "fx/fx.h"

namespace {

using fx::Argument;
using fx::fn;
using fx::Node;
using fx::exec::Value;

std::vector<Value> run_op(const std::string& op, const std::vector<Value>& inputs,
                          fx::Kwargs attrs = {}, int num_outputs = 1) {
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
  std::vector<Value> given;
  for (const Value& v : inputs)
    if (v.defined()) given.push_back(v);
  return fx::exec::run(gm, given);
}

Value ramp(std::vector<int64_t> shape, float scale = 1, float offset = 0) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = offset + scale * static_cast<float>(std::sin(0.7 * static_cast<double>(i) + 0.3));
  return Value::from_f32(std::move(shape), v);
}

Argument ints(std::vector<int64_t> v) {
  Argument::Items items;
  for (int64_t x : v) items.emplace_back(static_cast<long long>(x));
  return Argument::list(std::move(items));
}

Value to_f64(const Value& v) {
  Value out = Value::zeros(fx::Dtype::Float64, v.shape());
  for (int64_t i = 0; i < v.numel(); ++i) out.mutable_data<double>()[i] = v.data<float>()[i];
  return out;
}

void expect_near(const Value& a, const std::vector<float>& b, float tol) {
  const std::vector<float> av = a.to_f32();
  ASSERT_EQ(av.size(), b.size());
  for (size_t i = 0; i < b.size(); ++i) ASSERT_NEAR(av[i], b[i], tol) << "element " << i;
}

TEST(ExecSpatial, NdPoolingAgreesWithThe2dKernels) {
  const Value x = ramp({2, 3, 9, 8});
  for (int ceil = 0; ceil < 2; ++ceil)
    for (int include = 0; include < 2; ++include) {
      fx::Kwargs a{{"kernel_shape", ints({3, 2})},
                   {"strides", ints({2, 3})},
                   {"pads", ints({1, 0, 2, 1})},
                   {"ceil_mode", ceil},
                   {"count_include_pad", include}};
      // float32: the 2-D kernel; float64: the N-D path.
      const Value fast = run_op("AveragePool", {x}, a)[0];
      const Value nd = run_op("AveragePool", {to_f64(x)}, a)[0];
      ASSERT_EQ(fast.shape(), nd.shape());
      expect_near(nd, fast.to_f32(), 1e-6f);
    }
  fx::Kwargs m{{"kernel_shape", ints({3, 3})},
               {"strides", ints({2, 1})},
               {"pads", ints({1, 2, 1, 0})},
               {"dilations", ints({1, 2})},
               {"ceil_mode", 1}};
  const Value fast = run_op("MaxPool", {x}, m)[0];
  // Asking for Indices takes the N-D path; each index points at its value.
  std::vector<Value> nd = run_op("MaxPool", {x}, m, 2);
  ASSERT_EQ(fast.shape(), nd[0].shape());
  EXPECT_EQ(fast.to_f32(), nd[0].to_f32());
  const std::vector<int64_t> idx = nd[1].to_i64();
  for (size_t i = 0; i < idx.size(); ++i)
    ASSERT_EQ(x.data<float>()[idx[i]], nd[0].data<float>()[i]) << "output " << i;
}

TEST(ExecSpatial, ConvTranspose3dAgreesWithADirectLoop) {
  const int64_t N = 2, C = 4, G = 2, Mg = 3, D = 3, H = 4, W = 2, K0 = 2, K1 = 3, K2 = 2;
  const Value x = ramp({N, C, D, H, W});
  const Value w = ramp({C, Mg, K0, K1, K2}, 0.5f, 0.1f);
  const Value b = ramp({G * Mg}, 1.0f, -0.2f);
  const std::vector<int64_t> s = {2, 1, 3}, dil = {1, 2, 1}, pads = {1, 0, 1, 0, 2, 0},
                             op = {1, 0, 2};
  fx::Kwargs a{{"group", G},
               {"strides", ints(s)},
               {"dilations", ints(dil)},
               {"pads", ints(pads)},
               {"output_padding", ints(op)}};
  const Value y = run_op("ConvTranspose", {x, w, b}, a)[0];
  const int64_t in[3] = {D, H, W}, k[3] = {K0, K1, K2};
  int64_t out[3];
  for (int d = 0; d < 3; ++d)
    out[d] = s[d] * (in[d] - 1) + op[d] + (k[d] - 1) * dil[d] + 1 - pads[d] - pads[d + 3];
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{N, G * Mg, out[0], out[1], out[2]}));
  std::vector<double> ref(static_cast<size_t>(y.numel()));
  const int64_t M = G * Mg, plane = out[0] * out[1] * out[2];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t i = 0; i < plane; ++i) ref[(n * M + m) * plane + i] = b.data<float>()[m];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t mg = 0; mg < Mg; ++mg)
        for (int64_t i0 = 0; i0 < D; ++i0)
          for (int64_t i1 = 0; i1 < H; ++i1)
            for (int64_t i2 = 0; i2 < W; ++i2)
              for (int64_t k0 = 0; k0 < K0; ++k0)
                for (int64_t k1 = 0; k1 < K1; ++k1)
                  for (int64_t k2 = 0; k2 < K2; ++k2) {
                    const int64_t o0 = i0 * s[0] - pads[0] + k0 * dil[0];
                    const int64_t o1 = i1 * s[1] - pads[1] + k1 * dil[1];
                    const int64_t o2 = i2 * s[2] - pads[2] + k2 * dil[2];
                    if (o0 < 0 || o0 >= out[0] || o1 < 0 || o1 >= out[1] || o2 < 0 || o2 >= out[2])
                      continue;
                    const int64_t m = (c / (C / G)) * Mg + mg;
                    ref[(n * M + m) * plane + (o0 * out[1] + o1) * out[2] + o2] +=
                        static_cast<double>(
                            x.data<float>()[(((n * C + c) * D + i0) * H + i1) * W + i2]) *
                        w.data<float>()[(((c * Mg + mg) * K0 + k0) * K1 + k1) * K2 + k2];
                  }
  std::vector<float> reff(ref.begin(), ref.end());
  expect_near(y, reff, 1e-4f);
}

TEST(ExecSpatial, UniqueOutputsRebuildTheInput) {
  // Columns 0 and 2 are equal; sorted = 0 keeps first-occurrence order.
  const Value x = Value::from_f32({2, 4}, {3, 1, 3, 0, 5, 2, 5, 0});
  for (int sorted = 0; sorted < 2; ++sorted) {
    std::vector<Value> r = run_op("Unique", {x}, {{"axis", 1}, {"sorted", sorted}}, 4);
    ASSERT_EQ(r[0].shape(), (std::vector<int64_t>{2, 3}));
    const std::vector<int64_t> first = r[1].to_i64(), inv = r[2].to_i64(), cnt = r[3].to_i64();
    EXPECT_EQ(cnt, sorted ? (std::vector<int64_t>{1, 1, 2}) : (std::vector<int64_t>{2, 1, 1}));
    EXPECT_EQ(first, sorted ? (std::vector<int64_t>{3, 1, 0}) : (std::vector<int64_t>{0, 1, 3}));
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t i = 0; i < 2; ++i)
        ASSERT_EQ(r[0].data<float>()[i * 3 + inv[j]], x.data<float>()[i * 4 + j]);
  }
}

TEST(ExecSpatial, NonMaxSuppressionPerClassAndBoxesWithoutArea) {
  // Box 1 overlaps box 0 heavily; box 2 has no area (never suppresses nor is suppressed).
  const Value boxes =
      Value::from_f32({1, 3, 4}, {0, 0, 1, 1, 0, 0.05f, 1, 1.05f, 0.5f, 0.5f, 0.5f, 0.9f});
  const Value scores = Value::from_f32({1, 2, 3}, {0.9f, 0.8f, 0.7f, 0.1f, 0.95f, 0.3f});
  Value max_out = Value::from_i64({1}, {2});
  const Value iou = Value::from_f32({1}, {0.5f});
  const Value score = Value::from_f32({1}, {0.2f});
  const Value sel = run_op("NonMaxSuppression", {boxes, scores, max_out, iou, score})[0];
  EXPECT_EQ(sel.shape(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(sel.to_i64(), (std::vector<int64_t>{0, 0, 0, 0, 0, 2, 0, 1, 1, 0, 1, 2}));
}

TEST(ExecSpatial, ResizeCubicAtScaleOneAndLinearRamps) {
  const Value x = ramp({1, 2, 5, 6});
  const Value scales = Value::from_f32({4}, {1, 1, 1, 1});
  const Value same = run_op("Resize", {x, Value(), scales}, {{"mode", std::string("cubic")}})[0];
  EXPECT_EQ(same.to_f32(), x.to_f32());
  // A ramp along W resized with align_corners stays a ramp through the same end points.
  std::vector<float> r(4);
  for (int i = 0; i < 4; ++i) r[i] = 2.0f * static_cast<float>(i) - 1.0f;
  const Value sizes = Value::from_i64({3}, {1, 3, 10});
  const Value y = run_op("Resize", {Value::from_f32({1, 1, 4}, r), Value(), Value(), sizes},
                         {{"mode", std::string("linear")},
                          {"coordinate_transformation_mode", std::string("align_corners")}})[0];
  std::vector<float> want;
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 10; ++i) want.push_back(-1.0f + 6.0f * static_cast<float>(i) / 9.0f);
  expect_near(y, want, 1e-5f);
}

}  // namespace
