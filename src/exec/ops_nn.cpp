// Neural-network ONNX ops: Conv, pooling, normalisations, MatMul and Gemm (float32, NCHW).
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "exec/ops.h"
#include "kernels/conv.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/scratch.h"
#include "kernels/tensor_ops.h"

namespace fx::exec {

namespace {

// Spatial geometry shared by Conv and the pools: 1-D inputs run as 2-D with H = 1.
struct Window {
  int64_t H, W, KH, KW, sh, sw, dh, dw, pt, pl, pb, pr;
};

// The attributes of Conv and the pools, parsed once per plan (node_attrs); absent lists default
// by the input's rank.
struct WindowAttrs {
  std::optional<std::vector<int64_t>> kernel_shape, strides, dilations, pads;
  std::string auto_pad;
  int64_t group = 1;
  bool ceil_mode = false, count_include_pad = false;
  int64_t storage_order = 0;
};

WindowAttrs window_attrs(const OpCall& c, bool is_conv) {
  auto ints = [&](const char* name) -> std::optional<std::vector<int64_t>> {
    if (!c.has_attr(name)) return std::nullopt;
    return c.attr_ints(name);
  };
  WindowAttrs a;
  a.kernel_shape = ints("kernel_shape");
  a.strides = ints("strides");
  a.dilations = ints("dilations");
  a.pads = ints("pads");
  a.auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (is_conv) {
    a.group = c.attr_int("group", 1);
  } else {
    a.ceil_mode = c.attr_int("ceil_mode", 0) != 0;
    a.count_include_pad = c.attr_int("count_include_pad", 0) != 0;
    a.storage_order = c.attr_int("storage_order", 0);
  }
  return a;
}

Window window(const OpCall& c, const std::vector<int64_t>& x_shape,
              const std::vector<int64_t>& kernel, const WindowAttrs& a) {
  const size_t spatial = x_shape.size() - 2;
  if (spatial != 1 && spatial != 2)
    c.unsupported(std::to_string(spatial) + "-D " + "spatial inputs (only 1-D and 2-D)");
  if (kernel.size() != spatial)
    c.fail("kernel_shape has " + std::to_string(kernel.size()) + " dims for " +
           std::to_string(spatial) + " spatial dims");
  const std::vector<int64_t> strides = a.strides.value_or(std::vector<int64_t>(spatial, 1));
  const std::vector<int64_t> dil = a.dilations.value_or(std::vector<int64_t>(spatial, 1));
  std::vector<int64_t> pads = a.pads.value_or(std::vector<int64_t>(2 * spatial, 0));
  if (strides.size() != spatial || dil.size() != spatial || pads.size() != 2 * spatial)
    c.fail("strides/dilations/pads do not match the number of spatial dims");
  const std::string& auto_pad = a.auto_pad;
  for (size_t d = 0; d < spatial; ++d) {
    if (strides[d] < 1 || dil[d] < 1 || kernel[d] < 1)
      c.fail("kernel, strides and dilations must be >= 1");
    const int64_t in = x_shape[2 + d];
    if (auto_pad == "VALID") {
      pads[d] = pads[d + spatial] = 0;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (in + strides[d] - 1) / strides[d];
      const int64_t total =
          std::max<int64_t>(0, (out - 1) * strides[d] + (kernel[d] - 1) * dil[d] + 1 - in);
      const int64_t small = total / 2, big = total - small;
      pads[d] = auto_pad == "SAME_UPPER" ? small : big;
      pads[d + spatial] = auto_pad == "SAME_UPPER" ? big : small;
    } else if (auto_pad != "NOTSET") {
      c.fail("auto_pad '" + auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
    }
  }
  if (spatial == 1)
    return {1, x_shape[2], 1, kernel[0], 1, strides[0], 1, dil[0], 0, pads[0], 0, pads[1]};
  return {x_shape[2], x_shape[3], kernel[0], kernel[1], strides[0], strides[1],
          dil[0],     dil[1],     pads[0],   pads[1],   pads[2],    pads[3]};
}

std::vector<int64_t> spatial_out_shape(const std::vector<int64_t>& x_shape, int64_t channels,
                                       int64_t oh, int64_t ow) {
  std::vector<int64_t> s = {x_shape[0], channels};
  if (x_shape.size() == 4) s.push_back(oh);
  s.push_back(ow);
  return s;
}

// The parameters of a MaxPool the executor fused into Conv c (OpCallPrivate::max_pool) over its
// output of `conv_shape`, where the Conv computes it (kernels::stem_fuses_max_pool); else none (a
// MaxPool whose attributes are not valid then runs, and fails, as a node of its own).
std::optional<kernels::Pool2dParams> fused_max_pool(const OpCall& c, const kernels::Conv2dParams& p,
                                                    const std::vector<int64_t>& conv_shape) {
  if (!c.internal || !c.internal->max_pool || conv_shape.size() != 4 ||
      !kernels::conv2d_uses_stem(p))
    return std::nullopt;
  const Node& node = *c.internal->max_pool;
  const OpCall pool{node, {}, node.kwargs(), {}, c.module, nullptr};
  kernels::Pool2dParams q;
  try {
    const WindowAttrs a = window_attrs(pool, false);
    if (!a.kernel_shape || a.storage_order != 0) return std::nullopt;
    const Window win = window(pool, conv_shape, *a.kernel_shape, a);
    q.N = conv_shape[0], q.C = conv_shape[1], q.H = win.H, q.W = win.W;
    q.KH = win.KH, q.KW = win.KW, q.stride_h = win.sh, q.stride_w = win.sw;
    q.dilation_h = win.dh, q.dilation_w = win.dw;
    q.pad_top = win.pt, q.pad_left = win.pl, q.pad_bottom = win.pb, q.pad_right = win.pr;
    q.ceil_mode = a.ceil_mode;
  } catch (const Error&) {
    return std::nullopt;
  }
  if (q.out_h() < 1 || q.out_w() < 1 || !kernels::stem_fuses_max_pool(p, q)) return std::nullopt;
  return q;
}

void conv(OpCall& c) {
  const Value& x = c.input(0);
  const Value& w = c.input(1);
  need_f32(c, x, "Conv input");
  need_f32(c, w, "Conv weight");
  if (x.shape().size() < 3 || w.shape().size() != x.shape().size())
    c.fail("input and weight must have the same rank (>= 3)");
  std::optional<WindowAttrs> parsed;
  const WindowAttrs& a = node_attrs(c, parsed, [&] { return window_attrs(c, true); });
  const std::vector<int64_t> kernel =
      a.kernel_shape.value_or(std::vector<int64_t>(w.shape().begin() + 2, w.shape().end()));
  const Window win = window(c, x.shape(), kernel, a);
  kernels::Conv2dParams p;
  p.N = x.shape()[0], p.C = x.shape()[1], p.H = win.H, p.W = win.W;
  p.M = w.shape()[0], p.KH = win.KH, p.KW = win.KW;
  p.stride_h = win.sh, p.stride_w = win.sw, p.dilation_h = win.dh, p.dilation_w = win.dw;
  p.pad_top = win.pt, p.pad_left = win.pl, p.pad_bottom = win.pb, p.pad_right = win.pr;
  p.group = a.group;
  if (p.group < 1 || p.C % p.group || p.M % p.group)
    c.fail("group must divide the input and output channels");
  if (w.shape()[1] != p.C / p.group)
    c.fail("weight has " + std::to_string(w.shape()[1]) + " input channels per group, expected " +
           std::to_string(p.C / p.group));
  const float* bias = nullptr;
  if (c.has_input(2)) {
    need_f32(c, c.input(2), "Conv bias");
    if (c.input(2).numel() != p.M) c.fail("bias must have one value per output channel");
    bias = c.input(2).data<float>();
  }
  if (p.out_h() < 1 || p.out_w() < 1) c.fail("the output would be empty");
  const std::vector<int64_t> out_shape = spatial_out_shape(x.shape(), p.M, p.out_h(), p.out_w());
  // A residual Add and a following Relu/Clip the executor fused into this node are applied as
  // results are stored.
  p.residual = fused_residual(c, out_shape);
  fused_clamp(c, p.clamp_lo, p.clamp_hi);
  if (c.internal && c.internal->in_scale) {  // a per-channel Mul before it, planned into it
    p.in_scale = c.internal->in_scale;
    p.in_scale_stride = c.internal->in_scale_stride;
    c.internal->in_scale_applied = true;
  }
  // A MaxPool the executor fused into this node (a network's first layer and its pool): pooled
  // as the convolution's rows are computed (kernels::stem_conv2d_max_pool).
  if (const std::optional<kernels::Pool2dParams> q = fused_max_pool(c, p, out_shape)) {
    Value pooled =
        new_value(Dtype::Float32, spatial_out_shape(x.shape(), p.M, q->out_h(), q->out_w()));
    kernels::stem_conv2d_max_pool(p, *q, x.data<float>(), w.data<float>(), bias,
                                  pooled.mutable_data<float>());
    c.internal->max_pool_applied = true;
    c.outputs.push_back(std::move(pooled));
    return;
  }
  Value out = new_value(Dtype::Float32, out_shape);
  // The im2col buffer is reused across calls (grown, never value-initialised again).
  kernels::ScratchBuffer& scratch = kernels::scratch(kernels::Scratch::Exec);
  const size_t need = static_cast<size_t>(kernels::conv2d_scratch_size(p));
  if (scratch.size() < need) scratch.resize(need);
  // Constant weights are packed for the GEMM once, not on every run.
  std::shared_ptr<const void> packed;
  if (is_constant_input(c, 1) && p.out_h() * p.out_w() > 1)
    packed =
        derived_from_constant(w,
                              {1, p.M, p.C, p.KH, p.KW, p.group, kernels::winograd_output_tile(p),
                               kernels::conv2d_packs_transposed(p)},
                              [&] {
                                return std::make_shared<const std::vector<kernels::PackedOperand>>(
                                    kernels::conv2d_pack_weights(p, w.data<float>()));
                              });
  kernels::conv2d(p, x.data<float>(), w.data<float>(), bias, out.mutable_data<float>(),
                  scratch.data(),
                  static_cast<const std::vector<kernels::PackedOperand>*>(packed.get()));
  c.outputs.push_back(std::move(out));
}

void pool(OpCall& c, bool is_max) {
  const Value& x = c.input(0);
  std::optional<WindowAttrs> scratch;
  const WindowAttrs& a = node_attrs(c, scratch, [&] { return window_attrs(c, false); });
  // The float32 1-D/2-D kernels; the rest (3-D, integers, Indices, storage_order) runs N-D.
  if (x.dtype() != Dtype::Float32 || x.shape().size() < 3 || x.shape().size() > 4 ||
      (is_max && (a.storage_order != 0 || c.num_outputs() > 1)))
    return pool_nd(c, is_max);
  if (!a.kernel_shape) c.fail("kernel_shape is required");
  const Window win = window(c, x.shape(), *a.kernel_shape, a);
  kernels::Pool2dParams p;
  p.N = x.shape()[0], p.C = x.shape()[1], p.H = win.H, p.W = win.W;
  p.KH = win.KH, p.KW = win.KW, p.stride_h = win.sh, p.stride_w = win.sw;
  p.dilation_h = win.dh, p.dilation_w = win.dw;
  p.pad_top = win.pt, p.pad_left = win.pl, p.pad_bottom = win.pb, p.pad_right = win.pr;
  p.ceil_mode = a.ceil_mode;
  p.count_include_pad = a.count_include_pad;
  if (p.out_h() < 1 || p.out_w() < 1) c.fail("the output would be empty");
  Value out = new_value(Dtype::Float32, spatial_out_shape(x.shape(), p.C, p.out_h(), p.out_w()));
  if (is_max) {
    kernels::max_pool2d(p, x.data<float>(), out.mutable_data<float>());
  } else {
    kernels::avg_pool2d(p, x.data<float>(), out.mutable_data<float>());
  }
  c.outputs.push_back(std::move(out));
}

void global_pool(OpCall& c, bool is_max) {
  const Value& x = c.input(0);
  need_f32(c, x, "pooling input");
  if (x.shape().size() < 3) c.fail("the input must have rank >= 3");
  std::vector<int64_t> os = {x.shape()[0], x.shape()[1]};
  int64_t hw = 1;
  for (size_t d = 2; d < x.shape().size(); ++d) {
    hw *= x.shape()[d];
    os.push_back(1);
  }
  Value out = new_value(Dtype::Float32, os);
  if (!is_max) {
    kernels::global_avg_pool(x.shape()[0], x.shape()[1], hw, x.data<float>(),
                             out.mutable_data<float>());
  } else {
    for (int64_t nc = 0; nc < x.shape()[0] * x.shape()[1]; ++nc) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < hw; ++i) m = std::max(m, x.data<float>()[nc * hw + i]);
      out.mutable_data<float>()[nc] = m;
    }
  }
  c.outputs.push_back(std::move(out));
}

void batch_norm(OpCall& c) {
  const Value& x = c.input(0);
  for (size_t i = 0; i < 5; ++i) need_f32(c, c.input(i), "BatchNormalization input");
  if (x.shape().size() < 2) c.fail("the input must have rank >= 2");
  const int64_t N = x.shape()[0], C = x.shape()[1];
  const int64_t spatial = C ? x.numel() / std::max<int64_t>(N * C, 1) : 0;
  for (size_t i = 1; i < 5; ++i)
    if (c.input(i).numel() != C) c.fail("scale, bias, mean and var need one value per channel");
  struct Attrs {
    float eps, momentum;
    bool training;
  };
  std::optional<Attrs> scratch;
  const Attrs& a = node_attrs(c, scratch, [&] {
    return Attrs{c.attr_float("epsilon", 1e-5f), c.attr_float("momentum", 0.9f),
                 // Before opset 14 the outputs beyond Y are what asks for training.
                 c.attr_int("training_mode", 0) != 0 || (c.opset() < 14 && c.num_outputs() > 1)};
  });
  const float eps = a.eps;
  Value out = new_value(Dtype::Float32, x.shape());
  if (!a.training) {
    kernels::batch_norm_f32(x.data<float>(), c.input(1).data<float>(), c.input(2).data<float>(),
                            c.input(3).data<float>(), c.input(4).data<float>(),
                            out.mutable_data<float>(), N, C, spatial, eps);
    c.outputs.push_back(out);
    return;
  }
  // Training mode: normalise with the batch statistics; also return the updated running ones.
  const float momentum = a.momentum;
  Value mean = new_value(Dtype::Float32, {C}), var = new_value(Dtype::Float32, {C});
  Value run_mean = new_value(Dtype::Float32, {C}), run_var = new_value(Dtype::Float32, {C});
  const float* px = x.data<float>();
  for (int64_t ch = 0; ch < C; ++ch) {
    double s = 0, s2 = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < spatial; ++i) {
        const double v = px[(n * C + ch) * spatial + i];
        s += v;
        s2 += v * v;
      }
    const double cnt = static_cast<double>(N * spatial);
    const double m = s / cnt, v = std::max(0.0, s2 / cnt - m * m);
    mean.mutable_data<float>()[ch] = static_cast<float>(m);
    var.mutable_data<float>()[ch] = static_cast<float>(v);
    run_mean.mutable_data<float>()[ch] =
        static_cast<float>(c.input(3).data<float>()[ch] * momentum + m * (1 - momentum));
    run_var.mutable_data<float>()[ch] =
        static_cast<float>(c.input(4).data<float>()[ch] * momentum + v * (1 - momentum));
  }
  kernels::batch_norm_f32(px, c.input(1).data<float>(), c.input(2).data<float>(),
                          mean.data<float>(), var.data<float>(), out.mutable_data<float>(), N, C,
                          spatial, eps);
  c.outputs.push_back(std::move(out));
  c.outputs.push_back(std::move(run_mean));
  c.outputs.push_back(run_var);
  // Opsets 9-13 also declare saved_mean / saved_var: the batch statistics used above.
  if (c.num_outputs() > 3) {
    c.outputs.push_back(std::move(mean));
    c.outputs.push_back(var);
  }
}

void layer_norm(OpCall& c) {
  const Value& x = c.input(0);
  need_f32(c, x, "LayerNormalization input");
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  const int64_t axis = normalize_axis(c, c.attr_int("axis", -1), rank, "axis");
  int64_t rows = 1, size = 1;
  for (int64_t d = 0; d < axis; ++d) rows *= x.shape()[d];
  for (int64_t d = axis; d < rank; ++d) size *= x.shape()[d];
  const Value& scale = c.input(1);
  need_f32(c, scale, "LayerNormalization scale");
  if (scale.numel() != size)
    c.unsupported("a scale that is broadcast (not one value per normalised element)");
  const float* bias = nullptr;
  if (c.has_input(2)) {
    need_f32(c, c.input(2), "LayerNormalization bias");
    if (c.input(2).numel() != size) c.unsupported("a bias that is broadcast");
    bias = c.input(2).data<float>();
  }
  Value out = new_value(Dtype::Float32, x.shape());
  kernels::layer_norm_f32(x.data<float>(), scale.data<float>(), bias, out.mutable_data<float>(),
                          rows, size, c.attr_float("epsilon", 1e-5f));
  c.outputs.push_back(std::move(out));
  layer_norm_stats(c, x, axis, c.attr_float("epsilon", 1e-5f));
}

// B's packing, kept by prepack_weights; the plan only hands it to the users it was packed for.
std::shared_ptr<const kernels::PackedOperand> packed_operand(OpCall& c, const PackedWeight& w,
                                                             bool trans) {
  if (w.trans != trans) c.fail("a weight packed for another transB");
  return w.operand;
}

// MatMul of operands read in place (OpCallPrivate::operand_layout): each is its layout over an
// input's elements (an operand without one: the input itself, row-major).
void matmul_of_views(OpCall& c) {
  kernels::StridedLayout layout[2];
  const float* data[2];
  for (size_t k = 0; k < 2; ++k) {
    const Value& v = c.input(k);
    need_f32(c, v, "MatMul input");
    if (!v.data<float>()) c.fail("an operand read in place has no elements");
    data[k] = v.data<float>();
    if (const kernels::StridedLayout* l = c.internal->operand_layout[k]) {
      layout[k] = *l;
      continue;
    }
    layout[k].shape = v.shape();
    layout[k].strides.assign(v.shape().size(), 1);
    for (size_t d = v.shape().size(); d-- > 1;)
      layout[k].strides[d - 1] = layout[k].strides[d] * v.shape()[d];
  }
  std::vector<int64_t> os;
  if (layout[0].shape.size() < 2 || layout[1].shape.size() < 2 ||
      !kernels::matmul_shape(layout[0].shape, layout[1].shape, os))
    c.fail("shapes do not multiply");
  const float* bias = fused_col_bias(c);
  float lo, hi;
  fused_clamp(c, lo, hi);
  // The result in its Transpose's order: element C[i] at the Transpose's position of it.
  const std::vector<int64_t>* perm = c.internal->out_perm;
  if (perm && perm->size() == os.size()) {
    std::vector<int64_t> ys(os.size());
    for (size_t d = 0; d < os.size(); ++d) ys[d] = os[static_cast<size_t>((*perm)[d])];
    kernels::StridedLayout where;
    where.shape = os;
    where.strides.assign(os.size(), 1);
    for (size_t d = os.size(), step = 1; d-- > 0;) {
      where.strides[static_cast<size_t>((*perm)[d])] = static_cast<int64_t>(step);
      step *= static_cast<size_t>(ys[d]);
    }
    Value out = new_value(Dtype::Float32, ys);
    if (kernels::matmul_strided_f32(data[0], layout[0], data[1], layout[1],
                                    out.mutable_data<float>(), bias, lo, hi, &where)) {
      c.internal->out_permuted = true;
      c.outputs.push_back(std::move(out));
      return;
    }
  }
  Value out = new_value(Dtype::Float32, os);
  // A Softmax over the result's rows, computed as each batch item's product is stored.
  const bool softmax = fused_softmax(c, os.size());
  bool applied = softmax;
  if (kernels::matmul_strided_f32(data[0], layout[0], data[1], layout[1], out.mutable_data<float>(),
                                  bias, lo, hi, nullptr, &applied)) {
    c.internal->softmax_applied = applied;
    c.outputs.push_back(std::move(out));
    return;
  }
  // Neither rows nor columns contiguous: the operands copied out, row-major.
  Value dense[2];
  for (size_t k = 0; k < 2; ++k) {
    dense[k] = new_value(Dtype::Float32, layout[k].shape);
    kernels::strided_copy(data[k], sizeof(float), layout[k], dense[k].mutable_data<float>());
  }
  applied = softmax;
  kernels::matmul_f32(dense[0].shape(), dense[0].data<float>(), dense[1].shape(),
                      dense[1].data<float>(), out.mutable_data<float>(), nullptr, bias, lo, hi,
                      nullptr, &applied);
  c.internal->softmax_applied = applied;
  c.outputs.push_back(std::move(out));
}

// Whether c's inputs can be read through layouts (float32 tensors with elements, 2-D at least).
bool layouts_fit(const OpCall& c) {
  for (size_t k = 0; k < 2; ++k) {
    const Value* v = k < c.inputs.size() ? c.inputs[k] : nullptr;
    if (!v || !v->is_tensor() || v->dtype() != Dtype::Float32 || !v->data<float>() ||
        v->shape().size() < 2)
      return false;
  }
  return true;
}

void matmul(OpCall& c) {
  if (c.internal && (c.internal->operand_layout[0] || c.internal->operand_layout[1] ||
                     (c.internal->out_perm && layouts_fit(c))))
    return matmul_of_views(c);
  const Value& a = c.input(0);
  const Value& b = c.input(1);
  need_f32(c, a, "MatMul input");
  need_f32(c, b, "MatMul input");
  std::vector<int64_t> os;
  if (!kernels::matmul_shape(a.shape(), b.shape(), os)) c.fail("shapes do not multiply");
  Value out = new_value(Dtype::Float32, os);
  // A constant right operand shared by every row (x @ W) is packed once, not on every run
  // (a single row takes sgemm's unpacked path).
  // A weight kept only packed (prepack_weights) is read from its panels whatever the rows.
  const int64_t rows = a.shape().size() < 2 ? 1 : a.numel() / a.shape().back();
  const auto packed =
      b.packed() ? packed_operand(c, *b.packed(), false)
      : b.shape().size() == 2 && rows > 1
          ? packed_right_operand(c, 1, false, b.shape()[0], b.shape()[1], b.shape()[1])
          : nullptr;
  // A fused bias Add, residual Add and Relu/Clip go into the GEMM's store (one pass over the
  // output, not three: the tiny transformer's feed-forward Relu was a pass of its own).
  const float* bias = fused_col_bias(c);
  const float* residual = fused_residual(c, os);
  float lo, hi;
  fused_clamp(c, lo, hi);
  bool softmax = fused_softmax(c, os.size());
  kernels::matmul_f32(a.shape(), a.data<float>(), b.shape(), b.data<float>(),
                      out.mutable_data<float>(), packed.get(), bias, lo, hi, residual, &softmax);
  if (softmax) c.internal->softmax_applied = true;
  c.outputs.push_back(std::move(out));
}

void gemm(OpCall& c) {
  const Value& a = c.input(0);
  const Value& b = c.input(1);
  need_f32(c, a, "Gemm input");
  need_f32(c, b, "Gemm input");
  if (a.shape().size() != 2 || b.shape().size() != 2) c.fail("A and B must be 2-D");
  struct Attrs {
    bool ta, tb;
    float alpha, beta;
  };
  std::optional<Attrs> scratch;
  const Attrs& at = node_attrs(c, scratch, [&] {
    return Attrs{c.attr_int("transA", 0) != 0, c.attr_int("transB", 0) != 0,
                 c.attr_float("alpha", 1.0f), c.attr_float("beta", 1.0f)};
  });
  const bool ta = at.ta, tb = at.tb;
  const int64_t M = ta ? a.shape()[1] : a.shape()[0], K = ta ? a.shape()[0] : a.shape()[1];
  const int64_t Kb = tb ? b.shape()[1] : b.shape()[0], N = tb ? b.shape()[0] : b.shape()[1];
  if (K != Kb)
    c.fail("inner dimensions differ (" + std::to_string(K) + " vs " + std::to_string(Kb) + ")");
  const float alpha = at.alpha, beta = at.beta;
  Value out = new_value(Dtype::Float32, {M, N});
  float* y = out.mutable_data<float>();
  // A constant B (a layer's weights) is packed once, not on every run.
  const auto packed = b.packed() ? packed_operand(c, *b.packed(), tb)
                      : M > 1    ? packed_right_operand(c, 1, tb, K, N, b.shape()[1])
                                 : nullptr;
  // A linear layer's bias (alpha = beta = 1, C one row of N) is added as the product is stored,
  // then a fused Relu/Clip: one pass over Y instead of three (C broadcast into Y, the product
  // added to it, the clamp). The same values (acc + C; a -0 bias now stays -0 where 0 + C made it
  // +0 before the product was added).
  if (c.has_input(2) && alpha == 1.0f && beta == 1.0f) {
    const Value& cc = c.input(2);
    const auto& cs = cc.shape();
    if (cc.is_tensor() && cc.dtype() == Dtype::Float32 && cc.data<float>() && cc.numel() == N &&
        (cs.size() == 1 || (cs.size() == 2 && cs[0] == 1))) {
      kernels::GemmEpilogue ep;
      ep.col_bias = cc.data<float>();
      fused_clamp(c, ep.lo, ep.hi);
      kernels::sgemm(ta, tb, M, N, K, 1.0f, a.data<float>(), a.shape()[1], b.data<float>(),
                     b.shape()[1], 0.0f, y, N, &ep, nullptr, packed.get());
      c.outputs.push_back(std::move(out));
      return;
    }
  }
  float b_eff = 0.0f;
  if (c.has_input(2) && beta != 0.0f) {
    const Value& cc = c.input(2);
    need_f32(c, cc, "Gemm C");
    std::vector<int64_t> bs;
    if (!kernels::broadcast_shapes(cc.shape(), {M, N}, bs) || bs != std::vector<int64_t>{M, N})
      c.fail("C does not broadcast to (M, N)");
    // Broadcast C into Y, then Y = alpha * A B + beta * Y.
    const Value zero = zeroed_value(Dtype::Float32, {M, N});
    kernels::binary_f32(kernels::BinaryOp::Add, {M, N}, zero.data<float>(), cc.shape(),
                        cc.data<float>(), y);
    b_eff = beta;
  }
  kernels::sgemm(ta, tb, M, N, K, alpha, a.data<float>(), a.shape()[1], b.data<float>(),
                 b.shape()[1], b_eff, y, N, nullptr, nullptr, packed.get());
  c.outputs.push_back(std::move(out));
}

}  // namespace

void register_nn_ops() {
  register_builtin("onnx.Conv", conv);
  register_builtin("onnx.MaxPool", [](OpCall& c) { pool(c, true); });
  register_builtin("onnx.AveragePool", [](OpCall& c) { pool(c, false); });
  register_builtin("onnx.GlobalAveragePool", [](OpCall& c) { global_pool(c, false); });
  register_builtin("onnx.GlobalMaxPool", [](OpCall& c) { global_pool(c, true); });
  register_builtin("onnx.BatchNormalization", batch_norm);
  register_builtin("onnx.LayerNormalization", layer_norm);
  register_builtin("onnx.MatMul", matmul);
  register_builtin("onnx.Gemm", gemm);
}

}  // namespace fx::exec
