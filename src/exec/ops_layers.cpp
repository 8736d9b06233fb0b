// ONNX ops that are layers of their own: PRelu, and the
// normalisations InstanceNormalization, GroupNormalization, LRN, MeanVarianceNormalization
// (RNN/GRU/LSTM: ops_rnn.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>

#include "exec/ops.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"

namespace fx::exec {

namespace {

using kernels::Shape;

void prelu(OpCall& c) {
  const Value& x = c.input(0);
  const Value& slope = c.input(1);
  need_f32(c, x, "PRelu input");
  need_f32(c, slope, "PRelu slope");
  Shape os;
  if (!kernels::broadcast_shapes(x.shape(), slope.shape(), os) || os != x.shape())
    c.fail("the slope does not broadcast to the input");
  Value out = new_value(Dtype::Float32, os);
  const float* px = x.data<float>();
  const float* ps = slope.data<float>();
  float* po = out.mutable_data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    const float v = px[i];
    po[i] = v >= 0 ? v : v * ps[kernels::broadcast_index(os, slope.shape(), i)];
  }
  c.outputs.push_back(std::move(out));
}

void instance_norm(OpCall& c) {
  const Value& x = c.input(0);
  need_f32(c, x, "InstanceNormalization input");
  if (x.shape().size() < 3) c.fail("the input must have rank >= 3");
  const int64_t N = x.shape()[0], C = x.shape()[1];
  const int64_t spatial = (N * C != 0) ? x.numel() / (N * C) : 0;
  const Value& scale = c.input(1);
  const Value& bias = c.input(2);
  if (scale.numel() != C || bias.numel() != C) c.fail("scale and B need one value per channel");
  const float eps = c.attr_float("epsilon", 1e-5f);
  Value out = new_value(Dtype::Float32, x.shape());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch) {
      const float* px = x.data<float>() + (n * C + ch) * spatial;
      float* po = out.mutable_data<float>() + (n * C + ch) * spatial;
      double m = 0, v = 0;
      for (int64_t i = 0; i < spatial; ++i) m += px[i];
      m /= static_cast<double>(spatial);
      for (int64_t i = 0; i < spatial; ++i) v += (px[i] - m) * (px[i] - m);
      v /= static_cast<double>(spatial);
      const float k = scale.data<float>()[ch] / static_cast<float>(std::sqrt(v + eps));
      for (int64_t i = 0; i < spatial; ++i)
        po[i] = (px[i] - static_cast<float>(m)) * k + bias.data<float>()[ch];
    }
  c.outputs.push_back(std::move(out));
}

void group_norm(OpCall& c) {
  const Value& x = c.input(0);
  if (x.dtype() != Dtype::Float32) c.unsupported("GroupNormalization on non-float32");
  if (x.shape().size() < 2) c.fail("the input must have rank >= 2");
  const int64_t N = x.shape()[0], C = x.shape()[1];
  const int64_t groups = c.attr_int("num_groups", 0);
  if (groups < 1 || C % groups) c.fail("num_groups must divide the channels");
  const int64_t spatial = (N * C != 0) ? x.numel() / (N * C) : 0;
  const Value& scale = c.input(1);
  const Value& bias = c.input(2);
  // Opset 18 gives scale/bias per group, opset 21 per channel.
  const bool per_group = scale.numel() == groups && groups != C;
  if (!per_group && scale.numel() != C) c.fail("scale must have one value per group or channel");
  const float eps = c.attr_float("epsilon", 1e-5f);
  const int64_t cpg = C / groups;
  Value out = new_value(Dtype::Float32, x.shape());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      const float* px = x.data<float>() + (n * C + g * cpg) * spatial;
      float* po = out.mutable_data<float>() + (n * C + g * cpg) * spatial;
      const int64_t cnt = cpg * spatial;
      double m = 0, v = 0;
      for (int64_t i = 0; i < cnt; ++i) m += px[i];
      m /= static_cast<double>(cnt);
      for (int64_t i = 0; i < cnt; ++i) v += (px[i] - m) * (px[i] - m);
      v /= static_cast<double>(cnt);
      const float inv = static_cast<float>(1.0 / std::sqrt(v + eps));
      for (int64_t i = 0; i < cnt; ++i) {
        const int64_t ch = per_group ? g : g * cpg + i / spatial;
        po[i] = (px[i] - static_cast<float>(m)) * inv * scale.data<float>()[ch] +
                bias.data<float>()[ch];
      }
    }
  c.outputs.push_back(std::move(out));
}

void lrn(OpCall& c) {
  const Value& x = c.input(0);
  if (x.dtype() != Dtype::Float32 || x.shape().size() < 3)
    c.fail("LRN needs a float32 input of rank >= 3");
  const int64_t size = c.attr_int("size", 0);
  if (size < 1) c.fail("size must be positive");
  const float alpha = c.attr_float("alpha", 1e-4f), beta = c.attr_float("beta", 0.75f),
              bias = c.attr_float("bias", 1.0f);
  const int64_t N = x.shape()[0], C = x.shape()[1];
  const int64_t spatial = (N * C != 0) ? x.numel() / (N * C) : 0;
  Value out = new_value(Dtype::Float32, x.shape());
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t i = 0; i < spatial; ++i) {
        double sq = 0;
        for (int64_t k = std::max<int64_t>(0, ch - lo); k <= std::min(C - 1, ch + hi); ++k) {
          const double v = x.data<float>()[(n * C + k) * spatial + i];
          sq += v * v;
        }
        const int64_t at = (n * C + ch) * spatial + i;
        out.mutable_data<float>()[at] =
            static_cast<float>(x.data<float>()[at] / std::pow(bias + alpha / size * sq, beta));
      }
  c.outputs.push_back(std::move(out));
}

// MeanVarianceNormalization: (x - mean) / (std + 1e-9) with mean and std over `axes`
// (default [0, 2, 3]), std from E[x^2] - E[x]^2 as ONNX's function body computes it.
void mean_variance_norm(OpCall& c) {
  const Value& x = c.input(0);
  need_f32(c, x, "MeanVarianceNormalization input");
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : c.attr_ints("axes", {0, 2, 3}))
    reduced[static_cast<size_t>(normalize_axis(c, a, rank, "axis"))] = true;
  // Each element's group: its index over the kept axes.
  std::vector<int64_t> group_stride(static_cast<size_t>(rank), 0);
  int64_t groups = 1;
  for (int64_t d = rank - 1; d >= 0; --d)
    if (!reduced[static_cast<size_t>(d)]) {
      group_stride[static_cast<size_t>(d)] = groups;
      groups *= x.shape()[static_cast<size_t>(d)];
    }
  std::vector<int64_t> group(static_cast<size_t>(x.numel()));
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t gi = 0;
    for (int64_t d = 0; d < rank; ++d)
      gi += idx[static_cast<size_t>(d)] * group_stride[static_cast<size_t>(d)];
    group[static_cast<size_t>(i)] = gi;
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < x.shape()[static_cast<size_t>(d)]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  std::vector<double> s(static_cast<size_t>(groups), 0.0), s2(s.size(), 0.0);
  const float* px = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    s[static_cast<size_t>(group[static_cast<size_t>(i)])] += px[i];
    s2[static_cast<size_t>(group[static_cast<size_t>(i)])] += static_cast<double>(px[i]) * px[i];
  }
  const double cnt = groups ? static_cast<double>(x.numel()) / static_cast<double>(groups) : 1.0;
  for (size_t g = 0; g < s.size(); ++g) {
    const double m = s[g] / cnt;
    s[g] = m;
    s2[g] = 1.0 / (std::sqrt(std::max(0.0, s2[g] / cnt - m * m)) + 1e-9);
  }
  Value out = new_value(Dtype::Float32, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const size_t g = static_cast<size_t>(group[static_cast<size_t>(i)]);
    out.mutable_data<float>()[i] = static_cast<float>((px[i] - s[g]) * s2[g]);
  }
  c.outputs.push_back(std::move(out));
}

}  // namespace

void layer_norm_stats(OpCall& c, const Value& x, int64_t axis, float epsilon) {
  if (c.num_outputs() < 2) return;
  if (c.attr_int("stash_type", 1) != 1)
    c.unsupported("LayerNormalization stash_type other than float32");
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  std::vector<int64_t> shape(x.shape().begin(), x.shape().begin() + axis);
  shape.resize(static_cast<size_t>(rank), 1);
  int64_t rows = 1;
  for (int64_t d = 0; d < axis; ++d) rows *= x.shape()[static_cast<size_t>(d)];
  const int64_t size = rows ? x.numel() / rows : 0;
  Value mean = new_value(Dtype::Float32, shape), inv = new_value(Dtype::Float32, shape);
  for (int64_t r = 0; r < rows; ++r) {
    const float* px = x.data<float>() + r * size;
    double m = 0, v = 0;
    for (int64_t i = 0; i < size; ++i) m += px[i];
    m /= static_cast<double>(size);
    for (int64_t i = 0; i < size; ++i) v += (px[i] - m) * (px[i] - m);
    v /= static_cast<double>(size);
    mean.mutable_data<float>()[r] = static_cast<float>(m);
    inv.mutable_data<float>()[r] = static_cast<float>(1.0 / std::sqrt(v + epsilon));
  }
  c.outputs.push_back(std::move(mean));
  if (c.num_outputs() > 2) c.outputs.push_back(inv);
}

void register_layer_ops() {
  register_builtin("onnx.PRelu", prelu);
  register_builtin("onnx.InstanceNormalization", instance_norm);
  register_builtin("onnx.GroupNormalization", group_norm);
  register_builtin("onnx.LRN", lrn);
  register_builtin("onnx.MeanVarianceNormalization", mean_variance_norm);
}

}  // namespace fx::exec
