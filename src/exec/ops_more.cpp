// Less frequent ONNX ops: PRelu, Pad, Tile, TopK, CumSum, Trilu, GatherElements,
// InstanceNormalization, DepthToSpace, Resize (nearest / linear), ConvTranspose (2-D).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "exec/ops.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"

namespace fx::exec {

namespace {

using kernels::Shape;

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t d = static_cast<int64_t>(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

void need_f32(const OpCall& c, const Value& v, const char* what) {
  if (v.dtype() != Dtype::Float32)
    c.unsupported(std::string(what) + " of element type " + dtype_name(v.dtype()));
}

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
  c.outputs.push_back(out);
}

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
    os[d] = x.shape()[d] + begin[d] + end[d];
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
  c.outputs.push_back(out);
}

void tile(OpCall& c) {
  const Value& x = c.input(0);
  const std::vector<int64_t> reps = c.input(1).to_i64();
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  if (static_cast<int64_t>(reps.size()) != rank) c.fail("repeats must have one entry per axis");
  Shape os(rank);
  for (int64_t d = 0; d < rank; ++d) {
    if (reps[d] < 0) c.fail("repeats cannot be negative");
    os[d] = x.shape()[d] * reps[d];
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
  c.outputs.push_back(out);
}

void topk(OpCall& c) {
  const Value& x = c.input(0);
  need_f32(c, x, "TopK input");
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  const int64_t axis = normalize_axis(c, c.attr_int("axis", -1), rank, "axis");
  const int64_t k = c.has_input(1) ? c.input(1).to_i64().at(0) : c.attr_int("k", -1);
  const int64_t n = x.shape()[axis];
  if (k < 0 || k > n)
    c.fail("k = " + std::to_string(k) + " is not in [0, " + std::to_string(n) + "]");
  const bool largest = c.attr_int("largest", 1) != 0;
  Shape os = x.shape();
  os[axis] = k;
  Value values = new_value(Dtype::Float32, os), indices = new_value(Dtype::Int64, os);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape()[d];
  std::vector<int64_t> order(static_cast<size_t>(n));
  const float* px = x.data<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t i) { return px[(o * n + i) * inner + j]; };
      std::iota(order.begin(), order.end(), 0);
      // Ties keep the lower index first, as onnxruntime (sorted = 1).
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return largest ? at(a) > at(b) : at(a) < at(b);
      });
      for (int64_t i = 0; i < k; ++i) {
        values.mutable_data<float>()[(o * k + i) * inner + j] = at(order[i]);
        indices.mutable_data<int64_t>()[(o * k + i) * inner + j] = order[i];
      }
    }
  c.outputs.push_back(values);
  c.outputs.push_back(indices);
}

void cumsum(OpCall& c) {
  const Value& x = c.input(0);
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  const int64_t axis = normalize_axis(c, c.input(1).to_i64().at(0), rank, "axis");
  const bool exclusive = c.attr_int("exclusive", 0) != 0, reverse = c.attr_int("reverse", 0) != 0;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape()[d];
  const int64_t n = x.shape()[axis];
  auto run = [&](auto* dst, const auto* src) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) {
        std::remove_const_t<std::remove_pointer_t<decltype(src)>> acc = 0;
        for (int64_t t = 0; t < n; ++t) {
          const int64_t i = reverse ? n - 1 - t : t;
          const int64_t at = (o * n + i) * inner + j;
          if (exclusive) {
            dst[at] = acc;
            acc += src[at];
          } else {
            acc += src[at];
            dst[at] = acc;
          }
        }
      }
  };
  Value out = new_value(x.dtype(), x.shape());
  if (x.dtype() == Dtype::Float32) {
    run(out.mutable_data<float>(), x.data<float>());
  } else if (x.dtype() == Dtype::Int64) {
    run(out.mutable_data<int64_t>(), x.data<int64_t>());
  } else {
    c.unsupported(std::string("element type ") + dtype_name(x.dtype()));
  }
  c.outputs.push_back(out);
}

void trilu(OpCall& c) {
  const Value& x = c.input(0);
  if (x.shape().size() < 2) c.fail("the input must have rank >= 2");
  const int64_t k = c.has_input(1) ? c.input(1).to_i64().at(0) : 0;
  const bool upper = c.attr_int("upper", 1) != 0;
  const int64_t rows = x.shape()[x.shape().size() - 2], cols = x.shape().back();
  const size_t es = dtype_size(x.dtype());
  Value out = zeroed_value(x.dtype(), x.shape());
  const int64_t mats = (rows * cols != 0) ? x.numel() / (rows * cols) : 0;
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const bool keep = upper ? (j - i >= k) : (j - i <= k);
        if (!keep) continue;
        const int64_t at = (m * rows + i) * cols + j;
        std::memcpy(out.mutable_data<uint8_t>() + at * es, x.data<uint8_t>() + at * es, es);
      }
  c.outputs.push_back(out);
}

void gather_elements(OpCall& c) {
  const Value& x = c.input(0);
  const Value& idx = c.input(1);
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  if (static_cast<int64_t>(idx.shape().size()) != rank)
    c.fail("indices must have the input's rank");
  const int64_t axis = normalize_axis(c, c.attr_int("axis", 0), rank, "axis");
  const std::vector<int64_t> ind = idx.to_i64();
  const std::vector<int64_t> xst = strides_of(x.shape());
  const size_t es = dtype_size(x.dtype());
  Value out = new_value(x.dtype(), idx.shape());
  std::vector<int64_t> pos(rank, 0);
  for (int64_t o = 0; o < out.numel(); ++o) {
    int64_t i = ind[o];
    const int64_t n = x.shape()[axis];
    if (i < -n || i >= n)
      c.fail("index " + std::to_string(i) + " is out of range for axis size " + std::to_string(n));
    if (i < 0) i += n;
    int64_t src = 0;
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t coord = d == axis ? i : pos[d];
      if (d != axis && coord >= x.shape()[d])
        c.fail("indices are larger than the input outside the axis");
      src += coord * xst[d];
    }
    std::memcpy(out.mutable_data<uint8_t>() + o * es, x.data<uint8_t>() + src * es, es);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++pos[d] < idx.shape()[d]) break;
      pos[d] = 0;
    }
  }
  c.outputs.push_back(out);
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
  c.outputs.push_back(out);
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
  c.outputs.push_back(out);
}

// Resize with nearest or (bi)linear interpolation over the trailing spatial dims of NCHW/NCW.
void resize(OpCall& c) {
  const Value& x = c.input(0);
  need_f32(c, x, "Resize input");
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  if (rank < 3 || rank > 4) c.unsupported("Resize of rank " + std::to_string(rank));
  std::vector<float> scales;
  Shape os = x.shape();
  if (c.has_input(3) && c.input(3).numel() > 0) {
    os = c.input(3).to_i64();
    if (static_cast<int64_t>(os.size()) != rank) c.fail("sizes must have one entry per axis");
    for (int64_t d = 0; d < rank; ++d)
      scales.push_back(static_cast<float>(os[d]) / static_cast<float>(x.shape()[d]));
  } else if (c.has_input(2) && c.input(2).numel() > 0) {
    scales = c.input(2).to_f32();
    if (static_cast<int64_t>(scales.size()) != rank) c.fail("scales must have one entry per axis");
    for (int64_t d = 0; d < rank; ++d)
      os[d] = static_cast<int64_t>(std::floor(x.shape()[d] * scales[d]));
  } else {
    c.fail("needs scales or sizes");
  }
  if (os[0] != x.shape()[0] || os[1] != x.shape()[1])
    c.unsupported("resizing the batch or channel axis");
  const std::string mode = c.attr_string("mode", "nearest");
  const std::string ctm = c.attr_string("coordinate_transformation_mode", "half_pixel");
  const std::string nearest_mode = c.attr_string("nearest_mode", "round_prefer_floor");
  if (mode != "nearest" && mode != "linear") c.unsupported("Resize mode '" + mode + "'");
  auto source = [&](int64_t out_i, int64_t d) -> float {
    const float s = scales[d];
    const float in_len = static_cast<float>(x.shape()[d]), out_len = static_cast<float>(os[d]);
    const float o = static_cast<float>(out_i);
    if (ctm == "asymmetric") return o / s;
    if (ctm == "align_corners") return out_len > 1 ? o * (in_len - 1) / (out_len - 1) : 0.0f;
    if (ctm == "pytorch_half_pixel") return out_len > 1 ? (o + 0.5f) / s - 0.5f : 0.0f;
    if (ctm == "half_pixel") return (o + 0.5f) / s - 0.5f;
    c.unsupported("coordinate_transformation_mode '" + ctm + "'");
  };
  auto nearest = [&](float v, int64_t n) -> int64_t {
    float r;
    if (nearest_mode == "floor") {
      r = std::floor(v);
    } else if (nearest_mode == "ceil") {
      r = std::ceil(v);
    } else if (nearest_mode == "round_prefer_ceil") {
      r = std::floor(v + 0.5f);
    } else {  // round_prefer_floor
      r = (v - std::floor(v) == 0.5f) ? std::floor(v) : std::round(v);
    }
    return std::clamp<int64_t>(static_cast<int64_t>(r), 0, n - 1);
  };
  const int64_t H = rank == 4 ? x.shape()[2] : 1, W = x.shape().back();
  const int64_t OH = rank == 4 ? os[2] : 1, OW = os.back();
  Value out = new_value(Dtype::Float32, os);
  const int64_t planes = x.shape()[0] * x.shape()[1];
  for (int64_t p = 0; p < planes; ++p) {
    const float* src = x.data<float>() + p * H * W;
    float* dst = out.mutable_data<float>() + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      const float fh = rank == 4 ? source(oh, 2) : 0.0f;
      for (int64_t ow = 0; ow < OW; ++ow) {
        const float fw = source(ow, rank - 1);
        if (mode == "nearest") {
          dst[oh * OW + ow] = src[nearest(fh, H) * W + nearest(fw, W)];
          continue;
        }
        const float ch = std::clamp(fh, 0.0f, static_cast<float>(H - 1));
        const float cw = std::clamp(fw, 0.0f, static_cast<float>(W - 1));
        const int64_t h0 = static_cast<int64_t>(std::floor(ch)),
                      w0 = static_cast<int64_t>(std::floor(cw));
        const int64_t h1 = std::min(h0 + 1, H - 1), w1 = std::min(w0 + 1, W - 1);
        const float ah = ch - static_cast<float>(h0), aw = cw - static_cast<float>(w0);
        dst[oh * OW + ow] = (1 - ah) * ((1 - aw) * src[h0 * W + w0] + aw * src[h0 * W + w1]) +
                            ah * ((1 - aw) * src[h1 * W + w0] + aw * src[h1 * W + w1]);
      }
    }
  }
  c.outputs.push_back(out);
}

// ConvTranspose 2-D: GEMM of the weight with the input into columns, then col2im.
void conv_transpose(OpCall& c) {
  const Value& x = c.input(0);
  const Value& w = c.input(1);
  need_f32(c, x, "ConvTranspose input");
  need_f32(c, w, "ConvTranspose weight");
  if (x.shape().size() != 4 || w.shape().size() != 4)
    c.unsupported("ConvTranspose that is not 2-D");
  if (c.has_attr("output_shape")) c.unsupported("ConvTranspose with output_shape");
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET") c.unsupported("ConvTranspose auto_pad " + auto_pad);
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const int64_t group = c.attr_int("group", 1);
  if (group < 1 || C % group || w.shape()[0] != C) c.fail("weight must be (C, M/group, kH, kW)");
  const int64_t mg = w.shape()[1], M = mg * group, KH = w.shape()[2], KW = w.shape()[3];
  const std::vector<int64_t> st = c.attr_ints("strides", {1, 1}),
                             dil = c.attr_ints("dilations", {1, 1});
  const std::vector<int64_t> pads = c.attr_ints("pads", {0, 0, 0, 0});
  const std::vector<int64_t> opad = c.attr_ints("output_padding", {0, 0});
  const int64_t OH = st[0] * (H - 1) + opad[0] + (KH - 1) * dil[0] + 1 - pads[0] - pads[2];
  const int64_t OW = st[1] * (W - 1) + opad[1] + (KW - 1) * dil[1] + 1 - pads[1] - pads[3];
  if (OH < 1 || OW < 1) c.fail("the output would be empty");
  Value out = zeroed_value(Dtype::Float32, {N, M, OH, OW});
  const int64_t cg = C / group, kdim = mg * KH * KW;
  std::vector<float> cols(static_cast<size_t>(kdim * H * W));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < group; ++g) {
      // cols[kdim, H*W] = W_g^T[kdim, cg] x X_g[cg, H*W]
      kernels::sgemm(true, false, kdim, H * W, cg, 1.0f, w.data<float>() + g * cg * kdim, kdim,
                     x.data<float>() + (n * C + g * cg) * H * W, H * W, 0.0f, cols.data(), H * W);
      float* y = out.mutable_data<float>() + (n * M + g * mg) * OH * OW;
      for (int64_t m = 0; m < mg; ++m)
        for (int64_t kh = 0; kh < KH; ++kh)
          for (int64_t kw = 0; kw < KW; ++kw) {
            const float* col = cols.data() + ((m * KH + kh) * KW + kw) * H * W;
            for (int64_t ih = 0; ih < H; ++ih) {
              const int64_t oh = ih * st[0] - pads[0] + kh * dil[0];
              if (oh < 0 || oh >= OH) continue;
              for (int64_t iw = 0; iw < W; ++iw) {
                const int64_t ow = iw * st[1] - pads[1] + kw * dil[1];
                if (ow >= 0 && ow < OW) y[(m * OH + oh) * OW + ow] += col[ih * W + iw];
              }
            }
          }
    }
  if (c.has_input(2)) {
    const Value& b = c.input(2);
    if (b.numel() != M) c.fail("bias must have one value per output channel");
    for (int64_t n = 0; n < N; ++n)
      for (int64_t m = 0; m < M; ++m) {
        float* y = out.mutable_data<float>() + (n * M + m) * OH * OW;
        for (int64_t i = 0; i < OH * OW; ++i) y[i] += b.data<float>()[m];
      }
  }
  c.outputs.push_back(out);
}

}  // namespace

void register_more_ops() {
  register_builtin("onnx.PRelu", prelu);
  register_builtin("onnx.Pad", pad);
  register_builtin("onnx.Tile", tile);
  register_builtin("onnx.TopK", topk);
  register_builtin("onnx.CumSum", cumsum);
  register_builtin("onnx.Trilu", trilu);
  register_builtin("onnx.GatherElements", gather_elements);
  register_builtin("onnx.InstanceNormalization", instance_norm);
  register_builtin("onnx.DepthToSpace", depth_to_space);
  register_builtin("onnx.Resize", resize);
  register_builtin("onnx.ConvTranspose", conv_transpose);
}

}  // namespace fx::exec
