// ONNX ops that lay data out anew: Pad, Tile, DepthToSpace, SpaceToDepth, ConstantOfShape
// (Resize is in ops_spatial.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "exec/ops.h"
#include "fx/onnx.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"

namespace fx::exec {

namespace {

using kernels::Shape;

void pad(OpCall& c) {
  const Value& x = c.input(0);
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  std::vector<int64_t> pads = c.has_input(1) ? c.input(1).to_i64() : c.attr_ints("pads");
  std::vector<int64_t> axes(rank);
  std::iota(axes.begin(), axes.end(), 0);
  if (c.has_input(3)) {
    axes = c.input(3).to_i64();
    for (int64_t& a : axes) a = normalize_axis(c, a, rank, "axis");
  }
  if (pads.size() != 2 * axes.size()) c.fail("pads must have two entries per padded axis");
  std::vector<int64_t> begin(rank, 0), end(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    begin[axes[i]] = pads[i];
    end[axes[i]] = pads[i + axes.size()];
  }
  const std::string mode = c.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    c.fail("mode '" + mode + "' is not constant, reflect, edge or wrap");
  Shape os(rank);
  for (int64_t d = 0; d < rank; ++d) {
    os[d] = checked_add(c, checked_add(c, x.shape()[d], begin[d], "padding"), end[d], "padding");
    if (os[d] < 0) c.fail("pads make axis " + std::to_string(d) + " negative");
    if (mode == "reflect" && (begin[d] >= x.shape()[d] || end[d] >= x.shape()[d]) &&
        (begin[d] || end[d]))
      c.fail("reflect padding must be smaller than the axis");
    if (mode != "constant" && x.shape()[d] == 0 && os[d] > 0)
      c.fail("cannot pad an empty axis in mode " + mode);
  }
  const size_t es = dtype_size(x.dtype());
  Value out = zeroed_value(x.dtype(), os);
  // Constant value (input 2, default 0): fill first.
  if (mode == "constant" && c.has_input(2)) {
    const Value& v = c.input(2);
    if (v.dtype() != x.dtype() || v.numel() != 1)
      c.fail("constant_value must be a scalar of the input's type");
    for (int64_t i = 0; i < out.numel(); ++i)
      std::memcpy(out.mutable_data<uint8_t>() + i * es, v.data<uint8_t>(), es);
  }
  const std::vector<int64_t> ist = strides_of(x.shape());
  std::vector<int64_t> idx(rank, 0);
  for (int64_t o = 0; o < out.numel(); ++o) {
    int64_t src = 0;
    bool inside = true;
    for (int64_t d = 0; d < rank && inside; ++d) {
      int64_t i = idx[d] - begin[d];
      const int64_t n = x.shape()[d];
      if (i < 0 || i >= n) {
        if (mode == "constant") {
          inside = false;
          break;
        }
        if (mode == "edge") i = std::clamp<int64_t>(i, 0, n - 1);
        if (mode == "wrap") i = ((i % n) + n) % n;
        if (mode == "reflect") {
          const int64_t period = 2 * (n - 1);
          i = period ? ((i % period) + period) % period : 0;
          if (i >= n) i = period - i;
        }
      }
      src += i * ist[d];
    }
    if (inside) std::memcpy(out.mutable_data<uint8_t>() + o * es, x.data<uint8_t>() + src * es, es);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < os[d]) break;
      idx[d] = 0;
    }
  }
  c.outputs.push_back(std::move(out));
}

void tile(OpCall& c) {
  const Value& x = c.input(0);
  const std::vector<int64_t> reps = c.input(1).to_i64();
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  if (static_cast<int64_t>(reps.size()) != rank) c.fail("repeats must have one entry per axis");
  Shape os(rank);
  for (int64_t d = 0; d < rank; ++d) {
    if (reps[d] < 0) c.fail("repeats cannot be negative");
    os[d] = checked_mul(c, x.shape()[d], reps[d], "the tiled shape");
  }
  const size_t es = dtype_size(x.dtype());
  Value out = new_value(x.dtype(), os);
  const std::vector<int64_t> ist = strides_of(x.shape());
  std::vector<int64_t> idx(rank, 0);
  for (int64_t o = 0; o < out.numel(); ++o) {
    int64_t src = 0;
    for (int64_t d = 0; d < rank; ++d) src += (idx[d] % x.shape()[d]) * ist[d];
    std::memcpy(out.mutable_data<uint8_t>() + o * es, x.data<uint8_t>() + src * es, es);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < os[d]) break;
      idx[d] = 0;
    }
  }
  c.outputs.push_back(std::move(out));
}

void depth_to_space(OpCall& c) {
  const Value& x = c.input(0);
  if (x.shape().size() != 4) c.fail("the input must be 4-D");
  const int64_t b = c.attr_int("blocksize", 0);
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  if (b < 1 || C % (b * b)) c.fail("blocksize^2 must divide the channels");
  const bool crd = c.attr_string("mode", "DCR") == "CRD";
  const int64_t oc = C / (b * b);
  const size_t es = dtype_size(x.dtype());
  Value out = new_value(x.dtype(), {N, oc, H * b, W * b});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < oc; ++ch)
      for (int64_t h = 0; h < H * b; ++h)
        for (int64_t w = 0; w < W * b; ++w) {
          const int64_t bh = h % b, bw = w % b;
          const int64_t ic = crd ? ch * b * b + bh * b + bw : (bh * b + bw) * oc + ch;
          const int64_t src = ((n * C + ic) * H + h / b) * W + w / b;
          const int64_t dst = ((n * oc + ch) * H * b + h) * W * b + w;
          std::memcpy(out.mutable_data<uint8_t>() + dst * es, x.data<uint8_t>() + src * es, es);
        }
  c.outputs.push_back(std::move(out));
}

void space_to_depth(OpCall& c) {
  const Value& x = c.input(0);
  if (x.shape().size() != 4) c.fail("the input must be 4-D");
  const int64_t b = c.attr_int("blocksize", 0);
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  if (b < 1 || H % b || W % b) c.fail("blocksize must divide height and width");
  const size_t es = dtype_size(x.dtype());
  Value out = new_value(x.dtype(), {N, C * b * b, H / b, W / b});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          const int64_t oc = ((h % b) * b + (w % b)) * C + ch;
          const int64_t dst = ((n * C * b * b + oc) * (H / b) + h / b) * (W / b) + w / b;
          const int64_t src = ((n * C + ch) * H + h) * W + w;
          std::memcpy(out.mutable_data<uint8_t>() + dst * es, x.data<uint8_t>() + src * es, es);
        }
  c.outputs.push_back(std::move(out));
}

void constant_of_shape(OpCall& c) {
  const std::vector<int64_t> shape = c.input(0).to_i64();
  for (int64_t d : shape)
    if (d < 0) c.fail("shape has a negative dimension");
  const Argument* v = c.attrs.find("value");
  if (!v || v->kind() == Argument::Kind::Float) {  // default: float32 zeros
    Value out = new_value(Dtype::Float32, shape);
    const float f = v ? static_cast<float>(v->to_double()) : 0.0f;
    std::fill(out.mutable_data<float>(), out.mutable_data<float>() + out.numel(), f);
    c.outputs.push_back(out);
  } else if (v->kind() == Argument::Kind::Int || v->kind() == Argument::Kind::Bool) {
    const bool is_bool = v->kind() == Argument::Kind::Bool;
    Value out = new_value(is_bool ? Dtype::Bool : Dtype::Int64, shape);
    if (is_bool) {
      std::fill(out.mutable_data<uint8_t>(), out.mutable_data<uint8_t>() + out.numel(),
                v->to_bool() ? 1 : 0);
    } else {
      std::fill(out.mutable_data<int64_t>(), out.mutable_data<int64_t>() + out.numel(),
                v->to_int());
    }
    c.outputs.push_back(std::move(out));
  } else {
    c.unsupported(std::string("a 'value' attribute of kind ") + Argument::kind_name(v->kind()));
  }
  // The output has the value tensor's element type, which the importer keeps beside the scalar
  // (kTensorAttrs: {"value": {"dtype": ...}}).
  if (const Argument* spec = c.node.meta().find(fx::onnx::kTensorAttrs);
      spec && spec->kind() == Argument::Kind::Dict)
    for (const auto& [k, attr] : spec->dict_items())
      if (k.kind() == Argument::Kind::String && k.to_string() == "value" &&
          attr.kind() == Argument::Kind::Dict)
        for (const auto& [f, dt] : attr.dict_items())
          if (f.kind() == Argument::Kind::String && f.to_string() == "dtype" && meta_dtype(dt) &&
              *meta_dtype(dt) != c.outputs.back().dtype())
            c.outputs.back() = cast_value(c, c.outputs.back(), *meta_dtype(dt));
}

}  // namespace

void register_layout_ops() {
  register_builtin("onnx.Pad", pad);
  register_builtin("onnx.Tile", tile);
  register_builtin("onnx.DepthToSpace", depth_to_space);
  register_builtin("onnx.SpaceToDepth", space_to_depth);
  register_builtin("onnx.ConstantOfShape", constant_of_shape);
}

}  // namespace fx::exec
