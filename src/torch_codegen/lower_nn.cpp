// Lowering handlers of layers (Conv, BatchNormalization, LayerNormalization, Gemm, MatMul as
// torch.nn modules), reductions, pooling and softmax.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "fx/onnx.h"
#include "torch_codegen/lower_ops.h"

namespace fx::torch_codegen {

namespace {

using Kind = LVal::Kind;

// ---- reductions and pooling ----

void reduce(Lowerer& L, const Node& n, const char* method, int64_t axes_input_since) {
  LVal x = L.in(n, 0);
  const int64_t r = L.rank(x);
  std::vector<int64_t> axes = axes_of(L, n, 1, axes_input_since);
  if (axes.empty()) {
    if (L.attr_int(n, "noop_with_empty_axes", 0)) {
      L.set(n, x);
      return;
    }
    for (int64_t d = 0; d < r; ++d) axes.push_back(d);
  }
  for (int64_t& a : axes) a = L.axis(n, a, r);
  const bool keep = L.attr_int(n, "keepdims", 1) != 0;
  Node* t = L.as_tensor(x);
  Node* y;
  if (std::string(method) == "prod") {
    std::sort(axes.rbegin(), axes.rend());
    y = t;
    for (int64_t a : axes)
      y = L.method("prod", {y, static_cast<long long>(a)}, {{"keepdim", keep}});
  } else if (std::string(method) == "amax" || std::string(method) == "amin") {
    y = L.call(std::string(method) == "amax" ? "torch.amax" : "torch.amin", {t, int_list(axes)},
               {{"keepdim", keep}});
  } else {
    y = L.method(method, {t, int_list(axes)}, {{"keepdim", keep}});
  }
  L.set(n, L.tensor(y, n));
}
void reduce_mean(Lowerer& L, const Node& n) { reduce(L, n, "mean", 18); }
void reduce_sum(Lowerer& L, const Node& n) { reduce(L, n, "sum", 13); }
void reduce_max(Lowerer& L, const Node& n) { reduce(L, n, "amax", 18); }
void reduce_min(Lowerer& L, const Node& n) { reduce(L, n, "amin", 18); }
void reduce_prod(Lowerer& L, const Node& n) { reduce(L, n, "prod", 18); }

void global_pool(Lowerer& L, const Node& n, bool max) {
  LVal x = L.in(n, 0);
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < L.rank(x); ++d) dims.push_back(d);
  Node* t = L.as_tensor(x);
  Node* y = max ? L.call("torch.amax", {t, int_list(dims)}, {{"keepdim", true}})
                : L.method("mean", {t, int_list(dims)}, {{"keepdim", true}});
  L.set(n, L.tensor(y, n));
}
void global_average_pool(Lowerer& L, const Node& n) { global_pool(L, n, false); }
void global_max_pool(Lowerer& L, const Node& n) { global_pool(L, n, true); }

// MaxPool's (values, indices) from torch's max_poolNd(return_indices=True): torch counts within
// each (n, c) plane, ONNX over the whole tensor (plus the plane's offset); storage_order = 1
// counts the spatial position column-major.
std::vector<LVal> max_pool_indices(Lowerer& L, const Node& n, const LVal& x, Node* r, Dtype dt,
                                   bool cast) {
  Node* y = L.call("operator.getitem", {r, 0LL});
  if (cast) y = L.method("to", {y, dt});
  Node* i = L.call("operator.getitem", {r, 1LL});
  const int64_t rank = L.rank(x);
  std::vector<SymInt> sp;
  for (int64_t d = 2; d < rank; ++d) sp.push_back(L.size(x, d));
  if (L.attr_int(n, "storage_order", 0)) {
    if (rank != 4) L.unsupported(n, "storage_order = 1 outside 2-D");
    // i = h * W + w  ->  h + w * H
    Node* h = L.call("operator.floordiv", {i, sp[1].arg()});
    Node* w = L.call("operator.mod", {i, sp[1].arg()});
    i = L.call("operator.add", {h, L.call("operator.mul", {w, sp[0].arg()})});
  }
  SymInt plane{1, {}};
  for (const SymInt& s : sp) {
    if (!s.value) L.unsupported(n, "Indices of a spatial size that changes");
    plane.value = *plane.value * *s.value;
  }
  // offset[n, c, 1, ...] = (n * C + c) * plane
  const SymInt N = L.size(x, 0), C = L.size(x, 1);
  const Argument nc = N.value && C.value ? Argument(static_cast<long long>(*N.value * *C.value))
                                         : Argument(L.call("operator.mul", {N.arg(), C.arg()}));
  std::vector<SymInt> shape{N, C};
  for (int64_t d = 2; d < rank; ++d) shape.push_back(SymInt{1, {}});
  Node* offs = L.method("reshape", {L.call("torch.arange", {nc}), Lowerer::list_arg(shape)});
  i = L.call("operator.add", {i, L.call("operator.mul", {offs, plane.arg()})});
  LVal v = L.tensor(y, n), ind = L.tensor(i, n);
  v.shape_of = ind.shape_of = nullptr;
  return {v, ind};
}

void pool(Lowerer& L, const Node& n, bool max) {
  const bool indices = max && output_used(n, 1);
  LVal x = L.in(n, 0);
  const std::vector<int64_t> kernel = L.attr_ints(n, "kernel_shape");
  const size_t d = kernel.size();
  if (d < 1 || d > 3) L.unsupported(n, "pooling over " + std::to_string(d) + " dims");
  const std::vector<int64_t> strides = L.attr_ints(n, "strides", std::vector<int64_t>(d, 1));
  const std::vector<int64_t> dil = L.attr_ints(n, "dilations", std::vector<int64_t>(d, 1));
  Pads p = spatial_pads(L, n, x, kernel, strides, dil);
  const bool ceil = L.attr_int(n, "ceil_mode", 0) != 0;
  Node* t = L.as_tensor(x);
  // torch pools no integers: they run in float32 (exact for 8/16-bit) and are cast back.
  const Dtype dt = L.dtype(x);
  const bool cast = !is_float(dt);
  if (cast) t = L.method("to", {t, Dtype::Float32});
  std::vector<int64_t> padding = p.begin;
  Node* real = nullptr;  // 1 at the input's positions, 0 in the padding (see below)
  bool half_ok = true;
  for (size_t i = 0; i < d; ++i) half_ok = half_ok && p.begin[i] * 2 <= kernel[i];
  if (!p.symmetric() || !half_ok) {
    if (indices) L.unsupported(n, "Indices with padding torch's max_pool cannot take");
    // count_include_pad = 0 over explicit padding: the sum over the window divided by the
    // number of real positions in it, a ratio of two averages of padded tensors.
    if (!max && !L.attr_int(n, "count_include_pad", 0))
      real = L.call("torch.nn.functional.pad",
                    {L.call("torch.ones_like", {t}), int_list(p.torch_order())});
    Kwargs kw;
    if (max) kw.set("value", -std::numeric_limits<double>::infinity());
    t = L.call("torch.nn.functional.pad", {t, int_list(p.torch_order())}, std::move(kw));
    padding.assign(d, 0);
  }
  // F.avg_pool1d is torch.avg_pool1d, F.avg_pool2d/3d torch._C._nn's (what tracing records).
  const std::string f = max      ? "torch.nn.functional.max_pool" + std::to_string(d) + "d"
                        : d == 1 ? std::string("torch.avg_pool1d")
                                 : "torch._C._nn.avg_pool" + std::to_string(d) + "d";
  // The argument forms torch.fx records when it traces these calls, so that tracing the
  // generated module gives this graph back.
  if (max) {
    Kwargs kw{{"stride", int_list(strides)},
              {"padding", int_list(padding)},
              {"dilation", int_list(dil)},
              {"ceil_mode", ceil},
              {"return_indices", indices}};
    Node* y = L.call(f.c_str(), {t, int_list(kernel)}, std::move(kw));
    if (!indices) {
      L.set(n, L.tensor(cast ? L.method("to", {y, dt}) : y, n));
      return;
    }
    L.set(n, max_pool_indices(L, n, x, y, cast ? dt : Dtype::Float32, cast));
    return;
  }
  if (dil != std::vector<int64_t>(d, 1)) L.unsupported(n, "AveragePool with dilations");
  Kwargs kw{{"kernel_size", int_list(kernel)},
            {"stride", int_list(strides)},
            {"padding", int_list(padding)},
            {"ceil_mode", ceil},
            {"count_include_pad", real || L.attr_int(n, "count_include_pad", 0) != 0}};
  Node* y = L.call(f.c_str(), {t}, kw);
  if (real) y = L.call("operator.truediv", {y, L.call(f.c_str(), {real}, std::move(kw))});
  L.set(n, L.tensor(cast ? L.method("to", {y, dt}) : y, n));
}
void max_pool(Lowerer& L, const Node& n) { pool(L, n, true); }
void average_pool(Lowerer& L, const Node& n) { pool(L, n, false); }

void softmax_like(Lowerer& L, const Node& n, const char* f) {
  LVal x = L.in(n, 0);
  const int64_t r = L.rank(x);
  if (L.opset() >= 13) {
    const int64_t a = L.axis(n, L.attr_int(n, "axis", -1), r);
    L.set(n, L.tensor(L.call(f, {L.as_tensor(x), static_cast<long long>(a - r)}), n));
    return;
  }
  // Before opset 13 the input is coerced to 2-D at `axis`: the trailing dims together.
  const int64_t a = L.axis(n, L.attr_int(n, "axis", 1), r);
  Node* t = L.as_tensor(x);
  if (a == r - 1) {
    L.set(n, L.tensor(L.call(f, {t, -1LL}), n));
    return;
  }
  Node* y = L.call(f, {L.method("flatten", {t, static_cast<long long>(a)}), -1LL});
  std::vector<SymInt> dims;
  for (int64_t d = 0; d < r; ++d) dims.push_back(L.size(x, d));
  L.set(n, L.tensor(L.method("reshape", {y, Lowerer::list_arg(dims)}), n));
}
void softmax(Lowerer& L, const Node& n) { softmax_like(L, n, "torch.softmax"); }
void log_softmax(Lowerer& L, const Node& n) { softmax_like(L, n, "torch.log_softmax"); }

// ---- layers ----

void conv(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0), w = L.in(n, 1), b = L.in(n, 2);
  const auto ws = L.shape(w);
  const int64_t d = static_cast<int64_t>(ws.size()) - 2;
  if (d < 1 || d > 3) L.unsupported(n, "a " + std::to_string(d) + "-D convolution");
  std::vector<int64_t> kernel;
  for (int64_t i = 0; i < d; ++i) {
    if (!ws[2 + i]) L.unsupported(n, "a weight whose shape changes");
    kernel.push_back(*ws[2 + i]);
  }
  const std::vector<int64_t> strides = L.attr_ints(n, "strides", std::vector<int64_t>(d, 1));
  const std::vector<int64_t> dil = L.attr_ints(n, "dilations", std::vector<int64_t>(d, 1));
  const int64_t groups = L.attr_int(n, "group", 1);
  Pads p = spatial_pads(L, n, x, kernel, strides, dil);
  Node* t = L.as_tensor(x);
  std::vector<int64_t> padding = p.begin;
  if (!p.symmetric()) {
    t = L.call("torch.nn.functional.pad", {t, int_list(p.torch_order())});
    padding.assign(d, 0);
  }
  const bool constant_weight = w.constant && w.constant->has_data() &&
                               (b.kind == Kind::None || (b.constant && b.constant->has_data()));
  if (!constant_weight) {
    std::vector<Argument> args{t, L.as_tensor(w)};
    args.push_back(b.kind == Kind::None ? Argument() : Argument(L.as_tensor(b)));
    const std::string f = "torch.conv" + std::to_string(d) + "d";  // what F.convNd is
    L.set(n, L.tensor(L.call(f.c_str(), args,
                             {{"stride", int_list(strides)},
                              {"padding", int_list(padding)},
                              {"dilation", int_list(dil)},
                              {"groups", static_cast<long long>(groups)}}),
                      n));
    return;
  }
  const int64_t out_ch = w.constant->shape[0], in_ch = w.constant->shape[1] * groups;
  std::string repr = std::to_string(in_ch) + ", " + std::to_string(out_ch) +
                     ", kernel_size=" + py_tuple(kernel) + ", stride=" + py_tuple(strides);
  if (padding != std::vector<int64_t>(d, 0)) repr += ", padding=" + py_tuple(padding);
  if (dil != std::vector<int64_t>(d, 1)) repr += ", dilation=" + py_tuple(dil);
  if (groups != 1) repr += ", groups=" + std::to_string(groups);
  if (b.kind == Kind::None) repr += ", bias=False";
  auto m = std::make_shared<Module>("Conv" + std::to_string(d) + "d", repr);
  Lowerer::put_parameter(*m, "weight", reshaped(*w.constant, w.constant->shape));
  if (b.kind != Kind::None) Lowerer::put_parameter(*m, "bias", reshaped(*b.constant, {out_ch}));
  const std::string path = L.add_module(n, w, "conv", m);
  L.set(n, L.tensor(L.module(path, {t}), n));
}

// ConvTranspose with padding torch cannot express (asymmetric pads, output_shape, auto_pad):
// torch.conv_transposeNd without padding, then the ONNX window cut out (negative F.pad), then
// the bias (positions past the full output are bias only).
void conv_transpose_functional(Lowerer& L, const Node& n, const LVal& x, const LVal& w,
                               const LVal& b, int64_t d) {
  const auto xs = L.shape(x), ws = L.shape(w);
  std::vector<int64_t> in, kernel;
  for (int64_t i = 0; i < d; ++i) {
    if (!xs[2 + i] || !ws[2 + i]) L.unsupported(n, "spatial sizes that change");
    in.push_back(*xs[2 + i]);
    kernel.push_back(*ws[2 + i]);
  }
  const std::vector<int64_t> strides = L.attr_ints(n, "strides", std::vector<int64_t>(d, 1));
  const std::vector<int64_t> dil = L.attr_ints(n, "dilations", std::vector<int64_t>(d, 1));
  const std::vector<int64_t> out_pad = L.attr_ints(n, "output_padding", std::vector<int64_t>(d, 0));
  std::vector<int64_t> pads = L.attr_ints(n, "pads", std::vector<int64_t>(2 * d, 0));
  std::vector<int64_t> out_shape = L.attr_ints(n, "output_shape");
  if (out_shape.size() == static_cast<size_t>(d + 2))
    out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  const std::string auto_pad = L.attr_string(n, "auto_pad", "NOTSET");
  if (pads.size() != static_cast<size_t>(2 * d) || strides.size() != static_cast<size_t>(d) ||
      dil.size() != static_cast<size_t>(d) || out_pad.size() != static_cast<size_t>(d) ||
      (!out_shape.empty() && out_shape.size() != static_cast<size_t>(d)))
    L.unsupported(n, "strides/dilations/pads/output_padding/output_shape of the wrong length");
  std::vector<int64_t> torch_pad;  // F.pad order: last dim first
  for (int64_t i = d - 1; i >= 0; --i) {
    const int64_t plain = strides[i] * (in[i] - 1) + (kernel[i] - 1) * dil[i] + 1;
    const int64_t full = plain + out_pad[i];
    int64_t begin = pads[i], end = pads[i + d];
    if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t want = !out_shape.empty() ? out_shape[i] : in[i] * strides[i];
      const int64_t total = full - want;
      const int64_t t = std::max<int64_t>(total, 0);         // negative: zeros at the end only
      begin = auto_pad == "SAME_UPPER" ? t / 2 : t - t / 2;  // as the executor
      end = total - begin;
    } else if (auto_pad == "VALID") {
      begin = end = 0;
    }
    torch_pad.push_back(-begin);
    torch_pad.push_back(full - end - plain);
  }
  const int64_t groups = L.attr_int(n, "group", 1);
  const std::string f = "torch.conv_transpose" + std::to_string(d) + "d";
  Node* y =
      L.call(f.c_str(), {L.as_tensor(x), L.as_tensor(w), Argument(), int_list(strides),
                         int_list(std::vector<int64_t>(d, 0)), int_list(std::vector<int64_t>(d, 0)),
                         static_cast<long long>(groups), int_list(dil)});
  y = L.call("torch.nn.functional.pad", {y, int_list(torch_pad)});
  if (b.kind != Kind::None) {
    std::vector<int64_t> view = {-1};
    for (int64_t i = 0; i < d; ++i) view.push_back(1);
    y = L.call("operator.add", {y, L.method("reshape", {L.as_tensor(b), int_list(view)})});
  }
  L.set(n, L.tensor(y, n));
}

// ConvTranspose as torch.nn.ConvTranspose{1,2,3}d (constant weights, symmetric pads, no
// output_shape or auto_pad), else conv_transpose_functional.
void conv_transpose(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0), w = L.in(n, 1), b = L.in(n, 2);
  const int64_t d = L.rank(w) - 2;
  if (d < 1 || d > 3) L.unsupported(n, "a " + std::to_string(d) + "-D transposed convolution");
  const std::vector<int64_t> pads = L.attr_ints(n, "pads", std::vector<int64_t>(2 * d, 0));
  const bool constant = w.constant && w.constant->has_data() &&
                        (b.kind == Kind::None || (b.constant && b.constant->has_data()));
  if (!constant || L.has_attr(n, "output_shape") ||
      L.attr_string(n, "auto_pad", "NOTSET") != "NOTSET" ||
      pads.size() != static_cast<size_t>(2 * d) ||
      !std::equal(pads.begin(), pads.begin() + d, pads.begin() + d))
    return conv_transpose_functional(L, n, x, w, b, d);
  const std::vector<int64_t>& ws = w.constant->shape;
  const std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
  const std::vector<int64_t> strides = L.attr_ints(n, "strides", std::vector<int64_t>(d, 1));
  const std::vector<int64_t> dil = L.attr_ints(n, "dilations", std::vector<int64_t>(d, 1));
  const std::vector<int64_t> out_pad = L.attr_ints(n, "output_padding", std::vector<int64_t>(d, 0));
  const std::vector<int64_t> padding(pads.begin(), pads.begin() + d);
  const int64_t groups = L.attr_int(n, "group", 1);
  const int64_t in_ch = ws[0], out_ch = ws[1] * groups;
  std::string repr = std::to_string(in_ch) + ", " + std::to_string(out_ch) +
                     ", kernel_size=" + py_tuple(kernel) + ", stride=" + py_tuple(strides);
  if (padding != std::vector<int64_t>(d, 0)) repr += ", padding=" + py_tuple(padding);
  if (dil != std::vector<int64_t>(d, 1)) repr += ", dilation=" + py_tuple(dil);
  if (out_pad != std::vector<int64_t>(d, 0)) repr += ", output_padding=" + py_tuple(out_pad);
  if (groups != 1) repr += ", groups=" + std::to_string(groups);
  if (b.kind == Kind::None) repr += ", bias=False";
  auto m = std::make_shared<Module>("ConvTranspose" + std::to_string(d) + "d", repr);
  Lowerer::put_parameter(*m, "weight", reshaped(*w.constant, ws));
  if (b.kind != Kind::None) Lowerer::put_parameter(*m, "bias", reshaped(*b.constant, {out_ch}));
  const std::string path = L.add_module(n, w, "conv_transpose", m);
  L.set(n, L.tensor(L.module(path, {L.as_tensor(x)}), n));
}

// GroupNormalization (opset 18: scale and bias per group) as torch.nn.GroupNorm, whose affine
// parameters are per channel: each group's value repeated over its channels.
void group_norm(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0), scale = L.in(n, 1), bias = L.in(n, 2);
  const auto s = L.shape(x);
  if (s.size() < 2 || !s[1]) L.unsupported(n, "a channel count that changes");
  const int64_t c = *s[1], groups = L.attr_int(n, "num_groups", 1);
  if (groups <= 0 || c % groups != 0) L.unsupported(n, "channels not divisible into the groups");
  for (const LVal* v : {&scale, &bias})
    if (!v->constant || !v->constant->has_data() || v->constant->dtype != Dtype::Float32 ||
        (v->constant->numel() != groups && v->constant->numel() != c))
      L.unsupported(n, "scale and bias must be float32 constants of num_groups (or C) values");
  auto per_channel = [&](const Tensor& t) {
    if (t.numel() == c) return reshaped(t, {c});
    Bytes src = t.bytes();
    auto out = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(c) * 4);
    for (int64_t ch = 0; ch < c; ++ch)
      std::memcpy(out->data() + ch * 4, src->data() + (ch / (c / groups)) * 4, 4);
    Tensor r;
    r.shape = {c};
    r.data = std::move(out);
    return r;
  };
  const double eps = float32_value(L.attr_float(n, "epsilon", 1e-5));
  auto m =
      std::make_shared<Module>("GroupNorm", std::to_string(groups) + ", " + std::to_string(c) +
                                                ", eps=" + py_float_repr(eps) + ", affine=True");
  Lowerer::put_parameter(*m, "weight", per_channel(*scale.constant));
  Lowerer::put_parameter(*m, "bias", per_channel(*bias.constant));
  const std::string path = L.add_module(n, scale, "group_norm", m);
  L.set(n, L.tensor(L.module(path, {L.as_tensor(x)}), n));
}

// ReduceL1 / ReduceL2 / ReduceSumSquare / ReduceLogSumExp over `axes` (an input from opset 18).
void reduce_norm(Lowerer& L, const Node& n, const char* kind) {
  LVal x = L.in(n, 0);
  const int64_t r = L.rank(x);
  std::vector<int64_t> axes = axes_of(L, n, 1, 18);
  if (axes.empty()) {
    if (L.attr_int(n, "noop_with_empty_axes", 0)) L.unsupported(n, "noop_with_empty_axes = 1");
    for (int64_t d = 0; d < r; ++d) axes.push_back(d);
  }
  for (int64_t& a : axes) a = L.axis(n, a, r);
  const bool keep = L.attr_int(n, "keepdims", 1) != 0;
  Node* t = L.as_tensor(x);
  const std::string k = kind;
  Node* y;
  if (k == "logsumexp") {
    y = L.call("torch.logsumexp", {t, int_list(axes)}, {{"keepdim", keep}});
  } else {
    Node* base = k == "l1" ? L.method("abs", {t}) : L.call("operator.mul", {t, t});
    y = L.method("sum", {base, int_list(axes)}, {{"keepdim", keep}});
    if (k == "l2") y = L.method("sqrt", {y});
  }
  L.set(n, L.tensor(y, n));
}
void reduce_l1(Lowerer& L, const Node& n) { reduce_norm(L, n, "l1"); }
void reduce_l2(Lowerer& L, const Node& n) { reduce_norm(L, n, "l2"); }
void reduce_sum_square(Lowerer& L, const Node& n) { reduce_norm(L, n, "sum_square"); }
void reduce_log_sum_exp(Lowerer& L, const Node& n) { reduce_norm(L, n, "logsumexp"); }

void batch_norm(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  LVal ins[4] = {L.in(n, 1), L.in(n, 2), L.in(n, 3), L.in(n, 4)};
  if (L.attr_int(n, "training_mode", 0)) {
    // Normalised with the batch's own statistics; the updated running statistics (outputs 1
    // and 2) are not computed.
    Node* t = L.as_tensor(x);
    // The argument form torch.fx records for F.batch_norm (so a re-trace gives this graph).
    Node* y = L.call("torch.nn.functional.batch_norm", {t, Argument(), Argument()},
                     {{"weight", L.as_tensor(ins[0])},
                      {"bias", L.as_tensor(ins[1])},
                      {"training", true},
                      {"momentum", 0.1},
                      {"eps", float32_value(L.attr_float(n, "epsilon", 1e-5))}});
    if (!output_used(n, 1) && !output_used(n, 2)) {
      L.set(n, std::vector<LVal>{L.tensor(y, n), LVal{}, LVal{}});
      return;
    }
    // The updated running statistics: input * momentum + batch statistic * (1 - momentum),
    // with the population variance (what onnxruntime computes).
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < L.rank(x); ++d) dims.push_back(d);
    const double momentum = float32_value(L.attr_float(n, "momentum", 0.9));
    auto running = [&](const LVal& in, Node* stat) {
      Node* old = L.call("operator.mul", {L.as_tensor(in), momentum});
      Node* now = L.call("operator.mul", {stat, 1.0 - momentum});
      LVal v = L.tensor(L.call("operator.add", {old, now}), n);
      v.shape_of = nullptr;
      return v;
    };
    Node* mean = L.method("mean", {t, int_list(dims)});
    Node* var = L.method("var", {t, int_list(dims)}, {{"unbiased", false}});
    L.set(n, std::vector<LVal>{L.tensor(y, n), running(ins[2], mean), running(ins[3], var)});
    return;
  }
  const int64_t r = L.rank(x);
  const double eps = float32_value(L.attr_float(n, "epsilon", 1e-5));
  bool constants = true;
  for (const LVal& v : ins) constants = constants && v.constant && v.constant->has_data();
  if (!constants || r < 2 || r > 5) {
    Node* y = L.call("torch.nn.functional.batch_norm",
                     {L.as_tensor(x), L.as_tensor(ins[2]), L.as_tensor(ins[3])},
                     {{"weight", L.as_tensor(ins[0])},
                      {"bias", L.as_tensor(ins[1])},
                      {"training", false},
                      {"momentum", 0.1},
                      {"eps", eps}});
    L.set(n, L.tensor(y, n));
    return;
  }
  const int64_t c = ins[0].constant->numel();
  const int dims = r <= 3 ? 1 : static_cast<int>(r - 2);
  const double momentum = std::round((1.0 - L.attr_float(n, "momentum", 0.9)) * 1e6) / 1e6;
  const std::string repr = std::to_string(c) + ", eps=" + py_float_repr(eps) +
                           ", momentum=" + py_float_repr(momentum) +
                           ", affine=True, track_running_stats=True";
  auto m = std::make_shared<Module>("BatchNorm" + std::to_string(dims) + "d", repr);
  Lowerer::put_parameter(*m, "weight", reshaped(*ins[0].constant, {c}));
  Lowerer::put_parameter(*m, "bias", reshaped(*ins[1].constant, {c}));
  Lowerer::put_buffer(*m, "running_mean", reshaped(*ins[2].constant, {c}));
  Lowerer::put_buffer(*m, "running_var", reshaped(*ins[3].constant, {c}));
  Lowerer::put_buffer(*m, "num_batches_tracked", scalar_tensor_i64(0));
  const std::string path = L.add_module(n, ins[0], "bn", m);
  L.set(n, std::vector<LVal>{L.tensor(L.module(path, {L.as_tensor(x)}), n)});
}

// Sets LayerNormalization's outputs: y, and when used Mean and InvStdDev as x.mean /
// rsqrt(x.var + eps) over the normalised dims, kept (ONNX's shapes).
void set_layer_norm(Lowerer& L, const Node& n, const LVal& x, int64_t axis, double eps, Node* y) {
  std::vector<LVal> outs{L.tensor(y, n)};
  if (output_used(n, 1) || output_used(n, 2)) {
    std::vector<int64_t> dims;
    for (int64_t d = axis; d < L.rank(x); ++d) dims.push_back(d);
    Node* t = L.as_tensor(x);
    Node* mean = L.method("mean", {t, int_list(dims)}, {{"keepdim", true}});
    Node* var = L.method("var", {t, int_list(dims)}, {{"unbiased", false}, {"keepdim", true}});
    outs.push_back(L.tensor(mean, n));
    outs.push_back(L.tensor(L.call("torch.rsqrt", {L.call("operator.add", {var, eps})}), n));
  }
  L.set(n, outs);
}

void layer_norm(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0), scale = L.in(n, 1), bias = L.in(n, 2);
  const auto s = L.shape(x);
  const int64_t r = static_cast<int64_t>(s.size());
  const int64_t a = L.axis(n, L.attr_int(n, "axis", -1), r);
  std::vector<int64_t> norm;
  for (int64_t d = a; d < r; ++d) {
    if (!s[d]) L.unsupported(n, "normalising over a dim whose size changes");
    norm.push_back(*s[d]);
  }
  const double eps = float32_value(L.attr_float(n, "epsilon", 1e-5));
  int64_t count = 1;
  for (int64_t v : norm) count *= v;
  const bool constants =
      scale.constant && scale.constant->has_data() && scale.constant->numel() == count &&
      (bias.kind == Kind::None ||
       (bias.constant && bias.constant->has_data() && bias.constant->numel() == count));
  if (!constants) {
    Kwargs kw{{"weight", L.as_tensor(scale)},
              {"bias", bias.kind == Kind::None ? Argument() : Argument(L.as_tensor(bias))},
              {"eps", eps}};
    set_layer_norm(
        L, n, x, a, eps,
        L.call("torch.nn.functional.layer_norm", {L.as_tensor(x), int_list(norm)}, std::move(kw)));
    return;
  }
  auto m = std::make_shared<Module>(
      "LayerNorm", py_tuple(norm) + ", eps=" + py_float_repr(eps) + ", elementwise_affine=True");
  Lowerer::put_parameter(*m, "weight", reshaped(*scale.constant, norm));
  Tensor b = bias.kind == Kind::None ? zeros_f32(count) : *bias.constant;
  Lowerer::put_parameter(*m, "bias", reshaped(b, norm));
  const std::string path = L.add_module(n, scale, "layer_norm", m);
  set_layer_norm(L, n, x, a, eps, L.module(path, {L.as_tensor(x)}));
}

// nn.Linear(in, out) from a [out, in] weight and an optional [out] bias.
Node* linear(Lowerer& L, const Node& n, const LVal& weight_src, Node* x, const Tensor& weight,
             const Tensor* bias) {
  const int64_t out = weight.shape[0], in = weight.shape[1];
  auto m = std::make_shared<Module>("Linear", "in_features=" + std::to_string(in) +
                                                  ", out_features=" + std::to_string(out) +
                                                  ", bias=" + (bias ? "True" : "False"));
  Lowerer::put_parameter(*m, "weight", weight);
  if (bias) Lowerer::put_parameter(*m, "bias", reshaped(*bias, {out}));
  return L.module(L.add_module(n, weight_src, "linear", m), {x});
}

void gemm(Lowerer& L, const Node& n) {
  LVal a = L.in(n, 0), b = L.in(n, 1), c = L.in(n, 2);
  const double alpha = L.attr_float(n, "alpha", 1.0), beta = L.attr_float(n, "beta", 1.0);
  const bool ta = L.attr_int(n, "transA", 0) != 0, tb = L.attr_int(n, "transB", 0) != 0;
  const bool const_b = b.constant && b.constant->has_data() && b.constant->shape.size() == 2;
  if (const_b && !ta && alpha == 1.0) {
    const int64_t out = b.constant->shape[tb ? 0 : 1];
    const bool bias_ok =
        c.kind == Kind::None ||
        (beta == 1.0 && c.constant && c.constant->has_data() && c.constant->numel() == out &&
         (c.constant->shape.size() == 1 || c.constant->shape[0] == 1));
    if (bias_ok) {
      Tensor w = tb ? reshaped(*b.constant, b.constant->shape) : transposed_2d(*b.constant);
      L.set(n, L.tensor(
                   linear(L, n, b, L.as_tensor(a), w, c.kind == Kind::None ? nullptr : c.constant),
                   n));
      return;
    }
  }
  Node* x = L.as_tensor(a);
  if (ta) x = L.method("t", {x});
  Node* y = L.as_tensor(b);
  if (tb) y = L.method("t", {y});
  Node* r = L.call("operator.matmul", {x, y});
  if (alpha != 1.0) r = L.call("operator.mul", {r, float32_value(alpha)});
  if (c.kind != Kind::None) {
    Argument cc = L.as_operand(c, 2);
    if (beta != 1.0) cc = L.call("operator.mul", {cc, float32_value(beta)});
    r = L.call("operator.add", {r, cc});
  }
  L.set(n, L.tensor(r, n));
}

void matmul(Lowerer& L, const Node& n, const GraphModule& src) {
  LVal a = L.in(n, 0), b = L.in(n, 1);
  if (b.constant && b.constant->has_data() && b.constant->shape.size() == 2 &&
      is_float(b.constant->dtype) && L.rank(a) >= 1) {
    // x @ W (+ b): an exported nn.Linear. Take the Add of a constant [out] bias along.
    const int64_t out = b.constant->shape[1];
    const Node* add = nullptr;
    const Tensor* bias = nullptr;
    if (n.users().size() == 1) {
      const Node* u = *n.users().begin();
      if (u->op() == Opcode::CallFunction && u->target().function().qualname() == "onnx.Add" &&
          u->args().size() == 2) {
        const Argument& other =
            u->args()[0].is_node() && u->args()[0].to_node() == &n ? u->args()[1] : u->args()[0];
        const Tensor* t = old_constant(src, other);
        if (t && t->has_data() && t->numel() == out && t->shape.size() == 1 &&
            t->dtype == b.constant->dtype) {
          add = u;
          bias = t;
        }
      }
    }
    Node* y = linear(L, n, b, L.as_tensor(a), transposed_2d(*b.constant), bias);
    L.set(n, L.tensor(y, n));
    if (add) L.set(*add, L.tensor(y, *add));
    return;
  }
  L.set(n, L.tensor(L.call("operator.matmul", {L.as_tensor(a), L.as_tensor(b)}), n));
}

void matmul_handler(Lowerer& L, const Node& n) { matmul(L, n, L.source()); }

}  // namespace

void add_nn_handlers(std::vector<HandlerEntry>& table) {
  table.insert(table.end(), {
                                {"AveragePool", 7, average_pool},
                                {"BatchNormalization", 9, batch_norm},
                                {"GlobalAveragePool", 1, global_average_pool},
                                {"GlobalMaxPool", 1, global_max_pool},
                                {"LayerNormalization", 17, layer_norm},
                                {"LogSoftmax", 1, log_softmax},
                                {"LogSoftmax", 13, log_softmax},
                                {"MaxPool", 8, max_pool},
                                {"ReduceMax", 1, reduce_max},
                                {"ReduceMean", 1, reduce_mean},
                                {"ReduceMin", 1, reduce_min},
                                {"ReduceProd", 1, reduce_prod},
                                {"ReduceSum", 1, reduce_sum},
                                {"Softmax", 1, softmax},
                                {"Softmax", 13, softmax},
                                {"Conv", 1, conv},
                                {"ConvTranspose", 1, conv_transpose},
                                {"GroupNormalization", 18, group_norm},
                                {"ReduceL1", 1, reduce_l1},
                                {"ReduceL2", 1, reduce_l2},
                                {"ReduceLogSumExp", 1, reduce_log_sum_exp},
                                {"ReduceSumSquare", 1, reduce_sum_square},
                                {"Gemm", 7, gemm},
                                {"MatMul", 1, matmul_handler},
                            });
}

}  // namespace fx::torch_codegen
