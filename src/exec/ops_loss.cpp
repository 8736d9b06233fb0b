// ONNX's loss ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (with its optional
// log_prob output), float32 and float64 scores, int32/int64 targets, shapes [N, C, d1, ...].
#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>

#include "exec/ops.h"

namespace fx::exec {

namespace {

using Shape = std::vector<int64_t>;

template <class T>
constexpr Dtype dtype_of() {
  return std::is_same_v<T, double> ? Dtype::Float64 : Dtype::Float32;
}

struct LossAttrs {
  enum Reduction { None, Sum, Mean } reduction = Mean;
  std::optional<int64_t> ignore_index;
};

LossAttrs loss_attrs(const OpCall& c) {
  LossAttrs a;
  const std::string r = c.attr_string("reduction", "mean");
  if (r == "none")
    a.reduction = LossAttrs::None;
  else if (r == "sum")
    a.reduction = LossAttrs::Sum;
  else if (r == "mean")
    a.reduction = LossAttrs::Mean;
  else
    c.fail("reduction must be 'none', 'sum' or 'mean', got '" + r + "'");
  if (c.has_attr("ignore_index")) a.ignore_index = c.attr_int("ignore_index", 0);
  return a;
}

// loss[n, d] = -weight[t] * logp[n, t, d] with t = target[n, d], reduced as the attribute says.
// `logp` is [N, C, D] (the trailing dims flattened), the target [N, D]. A target equal to
// ignore_index contributes nothing, to the sum and to the mean's denominator alike; any other
// target outside [0, C) is an error (ONNX leaves it undefined; onnxruntime rejects it too).
template <class T>
Value nll(const OpCall& c, const T* logp, const Shape& in_shape, const Value& target,
          const LossAttrs& a) {
  const int64_t N = in_shape[0], C = in_shape[1];
  int64_t D = 1;
  for (size_t i = 2; i < in_shape.size(); ++i) D *= in_shape[i];
  Shape tshape = {N};
  tshape.insert(tshape.end(), in_shape.begin() + 2, in_shape.end());
  if (target.shape() != tshape)
    c.fail("the target's shape must be the input's without its class axis (dim 1)");
  if (target.dtype() != Dtype::Int64 && target.dtype() != Dtype::Int32)
    c.fail("the target must be int32 or int64");
  const std::vector<int64_t> t = target.to_i64();
  const T* w = nullptr;
  if (c.has_input(2)) {
    const Value& wv = c.input(2);
    if (wv.dtype() != dtype_of<T>() || wv.shape() != Shape{C})
      c.fail("the weight must be a 1-D tensor of C values of the input's element type");
    w = wv.data<T>();
  }
  Value out = new_value(dtype_of<T>(), a.reduction == LossAttrs::None ? tshape : Shape{});
  T* po = a.reduction == LossAttrs::None ? out.mutable_data<T>() : nullptr;
  double sum = 0, wsum = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      const int64_t k = t[static_cast<size_t>(n * D + d)];
      double l = 0, wk = 0;
      if (!a.ignore_index || k != *a.ignore_index) {
        if (k < 0 || k >= C)
          c.fail("target value " + std::to_string(k) + " is outside [0, " + std::to_string(C) +
                 ") and is not ignore_index");
        wk = w ? static_cast<double>(w[k]) : 1.0;
        l = -wk * static_cast<double>(logp[(n * C + k) * D + d]);
      }
      if (po) po[n * D + d] = static_cast<T>(l);
      sum += l;
      wsum += wk;
    }
  if (!po)  // mean over zero weight is 0/0, as in the reference (NaN)
    out.mutable_data<T>()[0] = static_cast<T>(a.reduction == LossAttrs::Sum ? sum : sum / wsum);
  return out;
}

template <class T>
void nll_typed(OpCall& c, const LossAttrs& a) {
  const Value& x = c.input(0);
  c.outputs.push_back(nll<T>(c, x.data<T>(), x.shape(), c.input(1), a));
}

template <class T>
void sce_typed(OpCall& c, const LossAttrs& a) {
  const Value& x = c.input(0);
  const int64_t N = x.shape()[0], C = x.shape()[1];
  const int64_t D = N * C != 0 ? x.numel() / (N * C) : 0;
  // log_softmax over the class axis, which has stride D.
  Value logp = new_value(x.dtype(), x.shape());
  const T* px = x.data<T>();
  T* pl = logp.mutable_data<T>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      const T* xi = px + n * C * D + d;
      T* li = pl + n * C * D + d;
      double m = -INFINITY, s = 0;
      for (int64_t k = 0; k < C; ++k) m = std::max(m, static_cast<double>(xi[k * D]));
      for (int64_t k = 0; k < C; ++k) s += std::exp(static_cast<double>(xi[k * D]) - m);
      const double lse = m + std::log(s);
      for (int64_t k = 0; k < C; ++k) li[k * D] = static_cast<T>(xi[k * D] - lse);
    }
  c.outputs.push_back(nll<T>(c, logp.data<T>(), x.shape(), c.input(1), a));
  if (c.num_outputs() > 1) c.outputs.push_back(std::move(logp));
}

template <void (*F32)(OpCall&, const LossAttrs&), void (*F64)(OpCall&, const LossAttrs&)>
void loss_op(OpCall& c) {
  const Value& x = c.input(0);
  if (x.shape().size() < 2) c.fail("the input must be [N, C, ...] (rank >= 2)");
  std::optional<LossAttrs> scratch;
  const LossAttrs& a = node_attrs(c, scratch, [&] { return loss_attrs(c); });
  if (x.dtype() == Dtype::Float32)
    F32(c, a);
  else if (x.dtype() == Dtype::Float64)
    F64(c, a);
  else
    c.unsupported(std::string("a loss over element type ") + dtype_name(x.dtype()));
}

}  // namespace

void register_loss_ops() {
  register_builtin("onnx.NegativeLogLikelihoodLoss", loss_op<nll_typed<float>, nll_typed<double>>);
  register_builtin("onnx.SoftmaxCrossEntropyLoss", loss_op<sce_typed<float>, sce_typed<double>>);
}

}  // namespace fx::exec
