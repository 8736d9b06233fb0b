// Spatial ONNX ops beyond the float32 1-D/2-D fast paths of ops_nn.cpp: pooling in any number
// of spatial dims and element type (with MaxPool's Indices), ConvTranspose in N-D (auto_pad,
// output_shape), Resize in every mode (cubic, tf_crop_and_resize) and Upsample, GridSample,
// RoiAlign, MaxUnpool.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "exec/ops.h"
#include "kernels/gemm.h"

namespace fx::exec {

namespace {

using Shape = std::vector<int64_t>;

int64_t product(const Shape& s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = from; i < std::min(to, s.size()); ++i) n *= s[i];
  return n;
}

// Advances an N-D counter over `extent` (row-major); false after the last position.
bool next_position(std::vector<int64_t>& pos, const Shape& extent) {
  for (size_t d = pos.size(); d-- > 0;) {
    if (++pos[d] < extent[d]) return true;
    pos[d] = 0;
  }
  return false;
}

// Checks a float64 scratch buffer of `shape` against fx::limits() before it is allocated (a
// typed Resource error, which the executor prefixes with the node); its element count.
size_t scratch_size(const Shape& shape, const char* what) {
  return static_cast<size_t>(checked_nbytes(Dtype::Float64, shape, std::string("the ") + what) / 8);
}

// Elements of `v` as doubles (any numeric type; exact for the 8/16/32-bit integers).
std::vector<double> to_f64(const OpCall& c, const Value& v) {
  scratch_size(v.shape(), "input in float64");
  const Value d = v.dtype() == Dtype::Float64 ? v : cast_value(c, v, Dtype::Float64);
  return std::vector<double>(d.data<double>(), d.data<double>() + d.numel());
}

Value from_f64(const OpCall& c, Dtype dtype, const Shape& shape, const std::vector<double>& data) {
  Value v = new_value(Dtype::Float64, shape);
  std::copy(data.begin(), data.end(), v.mutable_data<double>());
  return dtype == Dtype::Float64 ? v : cast_value(c, v, dtype);
}

void need_float(const OpCall& c, const Value& v, const char* what) {
  if (v.dtype() != Dtype::Float32 && v.dtype() != Dtype::Float64)
    c.unsupported(std::string(what) + " of element type " + dtype_name(v.dtype()));
}

// ---------------------------------------------------------------------------------------------
// Pooling in N-D.

void pool_nd_impl(OpCall& c, bool is_max) {
  const Value& x = c.input(0);
  if (x.dtype() == Dtype::Bool || x.dtype() == Dtype::String)
    c.unsupported(std::string("pooling input of element type ") + dtype_name(x.dtype()));
  if (x.shape().size() < 3) c.fail("the input must have rank >= 3");
  const size_t sp = x.shape().size() - 2;
  const Shape k = c.attr_ints("kernel_shape");
  if (k.size() != sp)
    c.fail("kernel_shape has " + std::to_string(k.size()) + " dims for " + std::to_string(sp) +
           " spatial dims");
  const Shape s = c.attr_ints("strides", Shape(sp, 1)),
              dil = c.attr_ints("dilations", Shape(sp, 1));
  Shape pads = c.attr_ints("pads", Shape(2 * sp, 0));
  if (s.size() != sp || dil.size() != sp || pads.size() != 2 * sp)
    c.fail("strides/dilations/pads do not match the number of spatial dims");
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  const bool ceil_mode = c.attr_int("ceil_mode", 0) != 0;
  const bool include_pad = c.attr_int("count_include_pad", 0) != 0;
  const int64_t storage_order = c.attr_int("storage_order", 0);
  Shape out_sp(sp), in_sp(x.shape().begin() + 2, x.shape().end());
  for (size_t d = 0; d < sp; ++d) {
    if (s[d] < 1 || dil[d] < 1 || k[d] < 1) c.fail("kernel, strides and dilations must be >= 1");
    const int64_t in = in_sp[d], span = (k[d] - 1) * dil[d] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (in + s[d] - 1) / s[d];
      const int64_t total = std::max<int64_t>(0, (out - 1) * s[d] + span - in);
      pads[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[d + sp] = total - pads[d];
    } else if (auto_pad == "VALID") {
      pads[d] = pads[d + sp] = 0;
    } else if (auto_pad != "NOTSET") {
      c.fail("auto_pad '" + auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
    }
    const int64_t full = in + pads[d] + pads[d + sp] - span;
    int64_t out = (ceil_mode ? (full + s[d] - 1) / s[d] : full / s[d]) + 1;
    // As PyTorch and onnxruntime: the last window starts inside the input or its leading pad.
    if (ceil_mode && (out - 1) * s[d] >= in + pads[d]) --out;
    if (out < 1) c.fail("the output would be empty");
    out_sp[d] = out;
  }
  const int64_t N = x.shape()[0], C = x.shape()[1], plane = product(in_sp);
  Shape os = {N, C};
  os.insert(os.end(), out_sp.begin(), out_sp.end());
  const std::vector<double> xin = to_f64(c, x);
  std::vector<double> y(scratch_size(os, "output"));
  const bool want_indices = is_max && c.num_outputs() > 1;
  std::vector<int64_t> ind(want_indices ? y.size() : 0);
  const Shape st = strides_of(in_sp);
  Shape st_col(sp, 1);  // storage_order 1: column-major strides
  for (size_t d = 1; d < sp; ++d) st_col[d] = st_col[d - 1] * in_sp[d - 1];
  size_t o = 0;
  for (int64_t nc = 0; nc < N * C; ++nc) {
    const double* src = xin.data() + nc * plane;
    Shape op(sp, 0);
    do {
      double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
      int64_t arg = -1, count = 0, padded_count = 1;
      Shape kp(sp, 0);
      for (size_t d = 0; d < sp; ++d) {
        // Window positions inside input + padding (count_include_pad's divisor).
        const int64_t start = op[d] * s[d] - pads[d];
        int64_t n = 0;
        for (int64_t j = 0; j < k[d]; ++j) {
          const int64_t p = start + j * dil[d];
          if (p < in_sp[d] + pads[d + sp]) ++n;
        }
        padded_count *= n;
      }
      do {
        int64_t off = 0, off_col = 0;
        bool inside = true;
        for (size_t d = 0; d < sp && inside; ++d) {
          const int64_t p = op[d] * s[d] - pads[d] + kp[d] * dil[d];
          inside = p >= 0 && p < in_sp[d];
          off += p * st[d];
          off_col += p * st_col[d];
        }
        if (!inside) continue;
        const double v = src[off];
        ++count;
        if (!is_max) {
          acc += v;
        } else if (v > acc || arg < 0) {
          acc = v;
          arg = nc * plane + (storage_order ? off_col : off);
        }
      } while (next_position(kp, k));
      if (!is_max) acc = count ? acc / static_cast<double>(include_pad ? padded_count : count) : 0;
      y[o] = acc;
      if (want_indices) ind[o] = arg;
      ++o;
    } while (next_position(op, out_sp));
  }
  c.outputs.push_back(from_f64(c, x.dtype(), os, y));
  if (want_indices) c.outputs.push_back(Value::from_i64(os, ind));
}

// ---------------------------------------------------------------------------------------------
// ConvTranspose in N-D: per group a GEMM of the weight with the input into columns, then the
// columns are added into the output (col2im).

void conv_transpose(OpCall& c) {
  const Value& x = c.input(0);
  const Value& w = c.input(1);
  need_f32(c, x, "ConvTranspose input");
  need_f32(c, w, "ConvTranspose weight");
  const size_t rank = x.shape().size();
  if (rank < 3 || w.shape().size() != rank)
    c.fail("input and weight must have the same rank (>= 3)");
  const size_t sp = rank - 2;
  const int64_t N = x.shape()[0], C = x.shape()[1];
  const int64_t group = c.attr_int("group", 1);
  if (group < 1 || C % group || w.shape()[0] != C) c.fail("weight must be (C, M/group, k...)");
  const int64_t mg = w.shape()[1], M = mg * group;
  const Shape in_sp(x.shape().begin() + 2, x.shape().end());
  const Shape k(w.shape().begin() + 2, w.shape().end());
  if (c.has_attr("kernel_shape") && c.attr_ints("kernel_shape") != k)
    c.fail("kernel_shape does not match the weight");
  const Shape s = c.attr_ints("strides", Shape(sp, 1)),
              dil = c.attr_ints("dilations", Shape(sp, 1));
  Shape pads = c.attr_ints("pads", Shape(2 * sp, 0));
  const Shape opad = c.attr_ints("output_padding", Shape(sp, 0));
  if (s.size() != sp || dil.size() != sp || pads.size() != 2 * sp || opad.size() != sp)
    c.fail("strides/dilations/pads/output_padding do not match the number of spatial dims");
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  Shape out_shape;
  if (c.has_attr("output_shape")) {
    out_shape = c.attr_ints("output_shape");
    if (out_shape.size() == rank) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
    if (out_shape.size() != sp) c.fail("output_shape must have one entry per spatial dim");
  }
  Shape out_sp(sp);
  for (size_t d = 0; d < sp; ++d) {
    if (s[d] < 1 || dil[d] < 1) c.fail("strides and dilations must be >= 1");
    const int64_t full = s[d] * (in_sp[d] - 1) + opad[d] + (k[d] - 1) * dil[d] + 1;
    if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      // The padding that gives the requested size (output_shape, or input * stride for SAME).
      const int64_t want = !out_shape.empty() ? out_shape[d] : in_sp[d] * s[d];
      const int64_t total = full - want;
      // An odd total puts the extra pad at the end only for SAME_UPPER (ONNX's spec; an
      // output_shape without auto_pad pads more at the start, as onnxruntime).
      // A negative total (output_shape past the full output) adds zeros at the end only.
      const int64_t t = std::max<int64_t>(total, 0);
      pads[d] = auto_pad == "SAME_UPPER" ? t / 2 : t - t / 2;
      pads[d + sp] = total - pads[d];
    } else if (auto_pad == "VALID") {
      pads[d] = pads[d + sp] = 0;
    } else if (auto_pad != "NOTSET") {
      c.fail("auto_pad '" + auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
    }
    out_sp[d] = full - pads[d] - pads[d + sp];
    if (out_sp[d] < 1) c.fail("the output would be empty");
  }
  Shape os = {N, M};
  os.insert(os.end(), out_sp.begin(), out_sp.end());
  Value out = zeroed_value(Dtype::Float32, os);
  const int64_t cg = C / group, kn = product(k), kdim = mg * kn, in_n = product(in_sp),
                out_n = product(out_sp);
  // Per spatial dim, kernel tap and input index: the output index, or -1 outside.
  std::vector<std::vector<int64_t>> target(sp);
  for (size_t d = 0; d < sp; ++d) {
    target[d].resize(static_cast<size_t>(k[d] * in_sp[d]));
    for (int64_t kk = 0; kk < k[d]; ++kk)
      for (int64_t i = 0; i < in_sp[d]; ++i) {
        const int64_t o = i * s[d] - pads[d] + kk * dil[d];
        target[d][kk * in_sp[d] + i] = o >= 0 && o < out_sp[d] ? o : -1;
      }
  }
  const Shape ost = strides_of(out_sp);
  std::vector<float> cols(scratch_size({kdim, in_n}, "columns"));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < group; ++g) {
      // cols[kdim, in_n] = W_g^T[kdim, cg] x X_g[cg, in_n]
      kernels::sgemm(true, false, kdim, in_n, cg, 1.0f, w.data<float>() + g * cg * kdim, kdim,
                     x.data<float>() + (n * C + g * cg) * in_n, in_n, 0.0f, cols.data(), in_n);
      float* y = out.mutable_data<float>() + (n * M + g * mg) * out_n;
      for (int64_t m = 0; m < mg; ++m) {
        Shape kp(sp, 0);
        int64_t kflat = 0;
        do {
          const float* col = cols.data() + (m * kn + kflat) * in_n;
          Shape ip(sp, 0);
          int64_t iflat = 0;
          do {
            int64_t off = 0;
            bool inside = true;
            for (size_t d = 0; d < sp && inside; ++d) {
              const int64_t o = target[d][kp[d] * in_sp[d] + ip[d]];
              inside = o >= 0;
              off += o * ost[d];
            }
            if (inside) y[m * out_n + off] += col[iflat];
            ++iflat;
          } while (next_position(ip, in_sp));
          ++kflat;
        } while (next_position(kp, k));
      }
    }
  if (c.has_input(2)) {
    const Value& b = c.input(2);
    need_f32(c, b, "ConvTranspose bias");
    if (b.numel() != M) c.fail("bias must have one value per output channel");
    for (int64_t n = 0; n < N; ++n)
      for (int64_t m = 0; m < M; ++m) {
        float* y = out.mutable_data<float>() + (n * M + m) * out_n;
        for (int64_t i = 0; i < out_n; ++i) y[i] += b.data<float>()[m];
      }
  }
  c.outputs.push_back(std::move(out));
}

// ---------------------------------------------------------------------------------------------
// Resize / Upsample: one 1-D interpolation pass per resized axis, last axis first (the order of
// ONNX's reference, which also makes tf_crop_and_resize's extrapolation come out the same).

struct ResizeSpec {
  std::string mode = "nearest", ctm = "half_pixel", nearest_mode = "round_prefer_floor";
  double cubic_a = -0.75, extrapolation = 0.0;
  bool exclude_outside = false;
};

// The taps of one output index along one axis: (input index, weight) pairs, or none when the
// point lies outside the crop (tf_crop_and_resize: the extrapolation value).
struct Taps {
  std::vector<std::pair<int64_t, double>> taps;
  bool extrapolate = false;
};

std::vector<Taps> axis_taps(const OpCall& c, const ResizeSpec& r, int64_t in, int64_t out,
                            double scale, double roi_lo, double roi_hi) {
  std::vector<Taps> all(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const double xo = static_cast<double>(o);
    double x = 0;
    const std::string& m = r.ctm;
    if (m == "asymmetric") {
      x = xo / scale;
    } else if (m == "align_corners") {
      x = out > 1 ? xo * static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
    } else if (m == "pytorch_half_pixel") {
      x = out > 1 ? (xo + 0.5) / scale - 0.5 : 0.0;  // 0 for one output: the spec, onnxruntime
    } else if (m == "half_pixel") {
      x = (xo + 0.5) / scale - 0.5;
    } else if (m == "tf_crop_and_resize") {
      x = out > 1
              ? xo * (roi_hi - roi_lo) * static_cast<double>(in - 1) / static_cast<double>(out - 1)
              : (roi_hi - roi_lo) * static_cast<double>(in - 1) / 2;
      x += roi_lo * static_cast<double>(in - 1);
      if (x < 0 || x > static_cast<double>(in - 1)) {
        all[o].extrapolate = true;
        continue;
      }
    } else {
      c.unsupported("coordinate_transformation_mode '" + m + "'");
    }
    auto clampi = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
    Taps& t = all[o];
    if (r.mode == "nearest") {
      double v;
      const std::string& nm = r.nearest_mode;
      if (nm == "floor") {
        v = std::floor(x);
      } else if (nm == "ceil") {
        v = std::ceil(x);
      } else if (nm == "round_prefer_ceil") {
        v = std::floor(x + 0.5);
      } else if (nm == "round_prefer_floor") {
        v = (x - std::floor(x) == 0.5) ? std::floor(x) : std::round(x);
      } else {
        c.fail("nearest_mode '" + nm + "' is not one of round_prefer_floor, round_prefer_ceil, " +
               "floor, ceil");
      }
      t.taps.push_back({clampi(static_cast<int64_t>(v)), 1.0});
      continue;
    }
    // As ONNX's reference: the fraction is in (0, 1], an integer x taking the left neighbours.
    int64_t base = static_cast<int64_t>(std::floor(x));
    double ratio = x - static_cast<double>(base);
    if (ratio == 0) {
      base -= 1;
      ratio = 1;
    }
    std::vector<std::pair<int64_t, double>> raw;
    if (r.mode == "linear") {
      raw = {{base, 1 - ratio}, {base + 1, ratio}};
    } else if (r.mode == "cubic") {
      const double A = r.cubic_a;
      auto near = [&](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };       // |d| <= 1
      auto far = [&](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };  // 1..2
      raw = {{base - 1, far(ratio + 1)},
             {base, near(ratio)},
             {base + 1, near(1 - ratio)},
             {base + 2, far(2 - ratio)}};
    } else {
      c.fail("mode '" + r.mode + "' is not one of nearest, linear, cubic");
    }
    double sum = 0;
    for (auto& [i, wgt] : raw) {
      if (r.exclude_outside && (i < 0 || i >= in)) wgt = 0;
      sum += wgt;
    }
    for (auto& [i, wgt] : raw) t.taps.push_back({clampi(i), r.exclude_outside ? wgt / sum : wgt});
  }
  return all;
}

// Resizes `x` (float64 elements, shape `shape`) to `os`. `scales`: per axis; `roi`: 2 * rank
// (starts then ends) or empty.
std::vector<double> resize_nd(const OpCall& c, const ResizeSpec& r, std::vector<double> x,
                              Shape shape, const Shape& os, const std::vector<double>& scales,
                              const std::vector<double>& roi) {
  const size_t rank = shape.size();
  for (size_t d = rank; d-- > 0;) {
    const bool crop = r.ctm == "tf_crop_and_resize";
    if (!crop && os[d] == shape[d] && scales[d] == 1.0) continue;
    const double lo = roi.empty() ? 0.0 : roi[d], hi = roi.empty() ? 1.0 : roi[d + rank];
    const std::vector<Taps> taps = axis_taps(c, r, shape[d], os[d], scales[d], lo, hi);
    const int64_t outer = product(shape, 0, d), inner = product(shape, d + 1);
    Shape ns = shape;
    ns[d] = os[d];
    std::vector<double> y(static_cast<size_t>(product(ns)));
    for (int64_t a = 0; a < outer; ++a)
      for (int64_t o = 0; o < os[d]; ++o) {
        double* dst = y.data() + (a * os[d] + o) * inner;
        const Taps& t = taps[o];
        if (t.extrapolate) {
          std::fill(dst, dst + inner, r.extrapolation);
          continue;
        }
        std::fill(dst, dst + inner, 0.0);
        for (const auto& [i, wgt] : t.taps) {
          const double* src = x.data() + (a * shape[d] + i) * inner;
          for (int64_t j = 0; j < inner; ++j) dst[j] += wgt * src[j];
        }
      }
    x = std::move(y);
    shape = ns;
  }
  return x;
}

void run_resize(OpCall& c, const ResizeSpec& r, const std::vector<double>& given_scales,
                const Shape* sizes, const std::vector<double>& roi) {
  const Value& x = c.input(0);
  need_float(c, x, "Resize input");
  const size_t rank = x.shape().size();
  std::vector<double> scales(rank, 1.0);
  Shape os = x.shape();
  if (sizes) {
    if (sizes->size() != rank) c.fail("sizes must have one entry per axis");
    os = *sizes;
    for (size_t d = 0; d < rank; ++d) {
      if (os[d] < 0) c.fail("sizes must not be negative");
      scales[d] = static_cast<double>(os[d]) / static_cast<double>(x.shape()[d]);
    }
  } else {
    if (given_scales.size() != rank) c.fail("scales must have one entry per axis");
    scales = given_scales;
    for (size_t d = 0; d < rank; ++d) {
      if (!(scales[d] > 0)) c.fail("scales must be positive");
      const double n = std::floor(static_cast<double>(x.shape()[d]) * scales[d]);
      if (!(n < 9.2e18)) size_overflow(c, "the scaled size");  // (converting it would be UB)
      os[d] = static_cast<int64_t>(n);
    }
  }
  if (!roi.empty() && roi.size() != 2 * rank) c.fail("roi must have 2 * rank entries");
  // The passes run in float64 over at most max(in, out) per axis: checked before allocating.
  Shape widest = os;
  for (size_t d = 0; d < rank; ++d) widest[d] = std::max(widest[d], x.shape()[d]);
  checked_nbytes(Dtype::Float64, widest, "output (resized in float64)");
  const std::vector<double> y = resize_nd(c, r, to_f64(c, x), x.shape(), os, scales, roi);
  c.outputs.push_back(from_f64(c, x.dtype(), os, y));
}

std::vector<double> f64_list(const OpCall& c, const Value& v) { return to_f64(c, v); }

void resize(OpCall& c) {
  ResizeSpec r;
  r.mode = c.attr_string("mode", "nearest");
  const int64_t opset = c.opset();
  if (opset < 11) {
    // Resize-10: (X, scales), asymmetric coordinates, nearest rounds down.
    r.ctm = "asymmetric";
    r.nearest_mode = "floor";
    run_resize(c, r, f64_list(c, c.input(1)), nullptr, {});
    return;
  }
  r.ctm = c.attr_string("coordinate_transformation_mode", "half_pixel");
  r.nearest_mode = c.attr_string("nearest_mode", "round_prefer_floor");
  r.cubic_a = c.attr_float("cubic_coeff_a", -0.75f);
  r.exclude_outside = c.attr_int("exclude_outside", 0) != 0;
  r.extrapolation = c.attr_float("extrapolation_value", 0.0f);
  std::vector<double> roi;
  if (r.ctm == "tf_crop_and_resize" && c.has_input(1) && c.input(1).numel() > 0)
    roi = f64_list(c, c.input(1));
  if (c.has_input(3) && c.input(3).numel() > 0) {
    const Shape sizes = c.input(3).to_i64();
    run_resize(c, r, {}, &sizes, roi);
  } else if (c.has_input(2) && c.input(2).numel() > 0) {
    run_resize(c, r, f64_list(c, c.input(2)), nullptr, roi);
  } else {
    c.fail("needs scales or sizes");
  }
}

void upsample(OpCall& c) {
  ResizeSpec r;
  r.mode = c.attr_string("mode", "nearest");
  if (r.mode == "bilinear" || r.mode == "trilinear") r.mode = "linear";
  r.ctm = "asymmetric";
  r.nearest_mode = "floor";
  std::vector<double> scales;
  if (c.has_input(1)) {
    scales = f64_list(c, c.input(1));
  } else {
    const Argument* a = c.attrs.find("scales");
    if (!a || !a->is_sequence()) c.fail("scales (attribute or input) is required");
    for (const Argument& e : a->elements()) scales.push_back(e.to_double());
  }
  run_resize(c, r, scales, nullptr, {});
}

// ---------------------------------------------------------------------------------------------
// GridSample (2-D, PyTorch's grid_sample).

double reflect(double v, double twice_lo, double twice_hi) {
  if (twice_lo == twice_hi) return 0;
  const double lo = twice_lo / 2, span = (twice_hi - twice_lo) / 2;
  v = std::fabs(v - lo);
  const double extra = std::fmod(v, span);
  const int64_t flips = static_cast<int64_t>(std::floor(v / span));
  return flips % 2 == 0 ? extra + lo : span - extra + lo;
}

void grid_sample(OpCall& c) {
  const Value& x = c.input(0);
  const Value& grid = c.input(1);
  need_float(c, x, "GridSample input");
  need_float(c, grid, "GridSample grid");
  if (x.shape().size() != 4)
    c.unsupported("GridSample of rank " + std::to_string(x.shape().size()));
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  if (grid.shape().size() != 4 || grid.shape()[0] != N || grid.shape()[3] != 2)
    c.fail("grid must be (N, H_out, W_out, 2)");
  const int64_t OH = grid.shape()[1], OW = grid.shape()[2];
  const std::string mode = c.attr_string("mode", "bilinear");
  const std::string padding = c.attr_string("padding_mode", "zeros");
  const bool align = c.attr_int("align_corners", 0) != 0;
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
    c.fail("mode '" + mode + "' is not one of bilinear, nearest, bicubic");
  if (padding != "zeros" && padding != "border" && padding != "reflection")
    c.fail("padding_mode '" + padding + "' is not one of zeros, border, reflection");
  const std::vector<double> xin = to_f64(c, x), g = to_f64(c, grid);
  std::vector<double> y(scratch_size({N, C, OH, OW}, "output"));
  auto unnormalize = [&](double v, int64_t size) {
    return align ? (v + 1) / 2 * static_cast<double>(size - 1)
                 : ((v + 1) * static_cast<double>(size) - 1) / 2;
  };
  auto pad_coord = [&](double v, int64_t size) {
    if (padding == "border") return std::clamp(v, 0.0, static_cast<double>(size - 1));
    if (padding == "reflection") {
      v = align ? reflect(v, 0, 2 * static_cast<double>(size - 1))
                : reflect(v, -1, 2 * static_cast<double>(size) - 1);
      return std::clamp(v, 0.0, static_cast<double>(size - 1));
    }
    return v;
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const double* gp = g.data() + ((n * OH + oh) * OW + ow) * 2;
        double ix = unnormalize(gp[0], W), iy = unnormalize(gp[1], H);
        for (int64_t ch = 0; ch < C; ++ch) {
          const double* src = xin.data() + (n * C + ch) * H * W;
          auto at = [&](int64_t yy, int64_t xx) -> double {
            return yy >= 0 && yy < H && xx >= 0 && xx < W ? src[yy * W + xx] : 0.0;
          };
          double v = 0;
          if (mode == "bicubic") {
            // Taps around the unpadded point, each tap's coordinate padded on its own.
            const double fx = std::floor(ix), fy = std::floor(iy);
            const double tx = ix - fx, ty = iy - fy;
            const double A = -0.75;
            auto cubic = [&](double t, double* w) {
              auto near = [&](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };
              auto far = [&](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };
              w[0] = far(t + 1), w[1] = near(t), w[2] = near(1 - t), w[3] = far(2 - t);
            };
            double wx[4], wy[4];
            cubic(tx, wx);
            cubic(ty, wy);
            auto bounded = [&](double yy, double xx) {
              const double px = pad_coord(xx, W), py = pad_coord(yy, H);
              return at(static_cast<int64_t>(py), static_cast<int64_t>(px));
            };
            for (int i = 0; i < 4; ++i) {
              double row = 0;
              for (int j = 0; j < 4; ++j) row += wx[j] * bounded(fy - 1 + i, fx - 1 + j);
              v += wy[i] * row;
            }
          } else {
            const double px = pad_coord(ix, W), py = pad_coord(iy, H);
            if (mode == "nearest") {
              v = at(static_cast<int64_t>(std::nearbyint(py)),
                     static_cast<int64_t>(std::nearbyint(px)));
            } else {
              const int64_t x0 = static_cast<int64_t>(std::floor(px)),
                            y0 = static_cast<int64_t>(std::floor(py));
              const double ax = px - static_cast<double>(x0), ay = py - static_cast<double>(y0);
              v = (1 - ay) * ((1 - ax) * at(y0, x0) + ax * at(y0, x0 + 1)) +
                  ay * ((1 - ax) * at(y0 + 1, x0) + ax * at(y0 + 1, x0 + 1));
            }
          }
          y[((n * C + ch) * OH + oh) * OW + ow] = v;
        }
      }
  c.outputs.push_back(from_f64(c, x.dtype(), {N, C, OH, OW}, y));
}

// ---------------------------------------------------------------------------------------------
// RoiAlign (onnxruntime's algorithm, which ONNX's expected outputs come from; max mode takes the
// largest weighted corner, as onnxruntime does).

void roi_align(OpCall& c) {
  const Value& x = c.input(0);
  need_float(c, x, "RoiAlign input");
  if (x.shape().size() != 4) c.fail("X must be (N, C, H, W)");
  const Value& rois_v = c.input(1);
  if (rois_v.shape().size() != 2 || rois_v.shape()[1] != 4) c.fail("rois must be (num_rois, 4)");
  const std::vector<int64_t> batch = c.input(2).to_i64();
  const int64_t R = rois_v.shape()[0];
  if (static_cast<int64_t>(batch.size()) != R) c.fail("batch_indices must have one entry per roi");
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const std::string mode = c.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") c.fail("mode '" + mode + "' is not avg or max");
  const int64_t PH = c.attr_int("output_height", 1), PW = c.attr_int("output_width", 1);
  const int64_t ratio = c.attr_int("sampling_ratio", 0);
  const double scale = c.attr_float("spatial_scale", 1.0f);
  const std::string ctm = c.attr_string("coordinate_transformation_mode",
                                        c.opset() >= 16 ? "half_pixel" : "output_half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    c.fail("coordinate_transformation_mode '" + ctm + "' is not half_pixel or output_half_pixel");
  if (PH < 1 || PW < 1) c.fail("output_height and output_width must be >= 1");
  const bool half = ctm == "half_pixel";
  const std::vector<double> xin = to_f64(c, x), rois = to_f64(c, rois_v);
  std::vector<double> y(scratch_size({R, C, PH, PW}, "output"));
  for (int64_t r = 0; r < R; ++r) {
    const int64_t b = batch[r];
    if (b < 0 || b >= N) c.fail("batch index " + std::to_string(b) + " is out of range");
    const double off = half ? 0.5 : 0.0;
    const double x0 = rois[r * 4] * scale - off, y0 = rois[r * 4 + 1] * scale - off;
    double rw = rois[r * 4 + 2] * scale - off - x0, rh = rois[r * 4 + 3] * scale - off - y0;
    if (!half) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    const double bh = rh / static_cast<double>(PH), bw = rw / static_cast<double>(PW);
    const int64_t gh = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rh / PH));
    const int64_t gw = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rw / PW));
    const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    for (int64_t ch = 0; ch < C; ++ch) {
      const double* src = xin.data() + (b * C + ch) * H * W;
      for (int64_t ph = 0; ph < PH; ++ph)
        for (int64_t pw = 0; pw < PW; ++pw) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < gh; ++iy) {
            double yy = y0 + ph * bh + (iy + 0.5) * bh / static_cast<double>(gh);
            for (int64_t ix = 0; ix < gw; ++ix) {
              double xx = x0 + pw * bw + (ix + 0.5) * bw / static_cast<double>(gw);
              double val = 0;
              if (!(yy < -1.0 || yy > H || xx < -1.0 || xx > W)) {
                double sy = std::max(yy, 0.0), sx = std::max(xx, 0.0);
                int64_t yl = static_cast<int64_t>(sy), xl = static_cast<int64_t>(sx), yh, xh;
                if (yl >= H - 1) {
                  yh = yl = H - 1;
                  sy = static_cast<double>(yl);
                } else {
                  yh = yl + 1;
                }
                if (xl >= W - 1) {
                  xh = xl = W - 1;
                  sx = static_cast<double>(xl);
                } else {
                  xh = xl + 1;
                }
                const double ly = sy - yl, lx = sx - xl, hy = 1 - ly, hx = 1 - lx;
                const double v1 = hy * hx * src[yl * W + xl], v2 = hy * lx * src[yl * W + xh],
                             v3 = ly * hx * src[yh * W + xl], v4 = ly * lx * src[yh * W + xh];
                val = mode == "avg" ? v1 + v2 + v3 + v4 : std::max({v1, v2, v3, v4});
              }
              if (mode == "avg") {
                acc += val;
              } else {
                acc = first ? val : std::max(acc, val);
                first = false;
              }
            }
          }
          y[((r * C + ch) * PH + ph) * PW + pw] = mode == "avg" ? acc / count : acc;
        }
    }
  }
  c.outputs.push_back(from_f64(c, x.dtype(), {R, C, PH, PW}, y));
}

// ---------------------------------------------------------------------------------------------
// MaxUnpool: the values scattered to their (N*C*spatial-flattened) indices in a zero tensor.

void max_unpool(OpCall& c) {
  const Value& x = c.input(0);
  const std::vector<int64_t> ind = c.input(1).to_i64();
  if (c.input(1).shape() != x.shape()) c.fail("I must have X's shape");
  if (x.shape().size() < 3) c.fail("X must have rank >= 3");
  const size_t sp = x.shape().size() - 2;
  const Shape k = c.attr_ints("kernel_shape");
  const Shape s = c.attr_ints("strides", Shape(sp, 1));
  const Shape pads = c.attr_ints("pads", Shape(2 * sp, 0));
  if (k.size() != sp || s.size() != sp || pads.size() != 2 * sp)
    c.fail("kernel_shape/strides/pads do not match the number of spatial dims");
  Shape os = {x.shape()[0], x.shape()[1]};
  if (c.has_input(2)) {
    os = c.input(2).to_i64();
    if (os.size() != x.shape().size()) c.fail("output_shape must have X's rank");
  } else {
    for (size_t d = 0; d < sp; ++d)
      os.push_back((x.shape()[2 + d] - 1) * s[d] + k[d] - pads[d] - pads[d + sp]);
  }
  Value out = zeroed_value(x.dtype(), os);
  const int64_t total = out.numel();
  const size_t es = dtype_size(x.dtype());
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (ind[i] < 0 || ind[i] >= total)
      c.fail("index " + std::to_string(ind[i]) + " is outside the output");
    std::memcpy(out.mutable_data<uint8_t>() + ind[i] * es, x.data<uint8_t>() + i * es, es);
  }
  c.outputs.push_back(std::move(out));
}

}  // namespace

void pool_nd(OpCall& c, bool is_max) { pool_nd_impl(c, is_max); }

void register_spatial_ops() {
  register_builtin("onnx.ConvTranspose", conv_transpose);
  register_builtin("onnx.Resize", resize);
  register_builtin("onnx.Upsample", upsample);
  register_builtin("onnx.GridSample", grid_sample);
  register_builtin("onnx.RoiAlign", roi_align);
  register_builtin("onnx.MaxUnpool", max_unpool);
}

}  // namespace fx::exec
