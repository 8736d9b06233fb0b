// Math ONNX ops beyond the activations of ops_elementwise.cpp: the inverse and hyperbolic trig
// functions, Softsign, Celu, ThresholdedRelu, Shrink, IsInf/IsNaN, BitShift, CastLike, Hardmax,
// EyeLike, Det and the window functions; also the typed reductions and float16 widening that
// other op files share. Each op is a template over its element type, dispatched over the dtype
// set ONNX declares for it (dtype_dispatch.h); float16/bfloat16 compute in float32.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "exec/dtype_dispatch.h"
#include "exec/ops.h"
#include "kernels/half.h"
#include "kernels/tensor_ops.h"

namespace fx::exec {

Value widen_half(const OpCall& c, const Value& v) {
  if (!is_half(v.dtype())) c.unsupported(std::string("widening ") + dtype_name(v.dtype()));
  Value out = new_value(Dtype::Float32, v.shape());
  const uint16_t* p = v.data<uint16_t>();
  float* q = out.mutable_data<float>();
  const bool bf = v.dtype() == Dtype::BFloat16;
  for (int64_t i = 0, n = v.numel(); i < n; ++i)
    q[i] = bf ? kernels::bf16_to_float(p[i]) : kernels::half_to_float(p[i]);
  return out;
}

Value narrow_half(const OpCall& c, const Value& v, Dtype half) {
  if (v.dtype() != Dtype::Float32 || !is_half(half))
    c.unsupported(std::string("narrowing ") + dtype_name(v.dtype()) + " to " + dtype_name(half));
  Value out = new_value(half, v.shape());
  const float* p = v.data<float>();
  uint16_t* q = out.mutable_data<uint16_t>();
  const bool bf = half == Dtype::BFloat16;
  for (int64_t i = 0, n = v.numel(); i < n; ++i)
    q[i] = bf ? kernels::float_to_bf16(p[i]) : kernels::float_to_half(p[i]);
  return out;
}

Value reduce_typed(const OpCall& c, kernels::ReduceOp op, const Value& x,
                   const std::vector<int64_t>& axes, bool keepdims) {
  const kernels::Shape os = kernels::reduce_shape(x.shape(), axes, keepdims);
  if (x.dtype() == Dtype::Float32) {
    Value out = new_value(Dtype::Float32, os);
    kernels::reduce_f32(op, x.shape(), x.data<float>(), axes, out.mutable_data<float>());
    return out;
  }
  if (is_half(x.dtype()))
    return narrow_half(c, reduce_typed(c, op, widen_half(c, x), axes, keepdims), x.dtype());
  // float64 directly; integers widened to double (exact up to 2^53) and converted back.
  if (!(dtype_bit(x.dtype()) & kNumeric))
    c.unsupported(std::string("element type ") + dtype_name(x.dtype()));
  const Value xd = cast_value(c, x, Dtype::Float64);
  Value out = new_value(Dtype::Float64, os);
  kernels::reduce_f64(op, x.shape(), xd.data<double>(), axes, out.mutable_data<double>());
  return cast_value(c, out, x.dtype());
}

namespace {

// ---- unary math over float32/float64 (float16/bfloat16 through float32) ----

struct UnaryParams {
  double alpha = 0, beta = 0;
};

template <class F>
void reg_float_unary(const char* name, F f, void (*params)(const OpCall&, UnaryParams&) = nullptr) {
  register_builtin(std::string("onnx.") + name, [f, params](OpCall& c) {
    UnaryParams p;
    if (params) params(c, p);
    auto run = [&](const Value& x) {
      return dispatch_numeric<kFloats>(c, x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        Value out = new_value(x.dtype(), x.shape());
        const T* in = x.data<T>();
        T* o = out.mutable_data<T>();
        for (int64_t i = 0, n = x.numel(); i < n; ++i) o[i] = static_cast<T>(f(in[i], p));
        return out;
      });
    };
    const Value& x = c.input(0);
    c.outputs.push_back(is_half(x.dtype()) ? narrow_half(c, run(widen_half(c, x)), x.dtype())
                                           : run(x));
  });
}

#define FX_MATH_FN(expr)             \
  [](auto x, const UnaryParams& p) { \
    (void)p;                         \
    return expr;                     \
  }

void register_unary_math() {
  reg_float_unary("Acos", FX_MATH_FN(std::acos(x)));
  reg_float_unary("Asin", FX_MATH_FN(std::asin(x)));
  reg_float_unary("Atan", FX_MATH_FN(std::atan(x)));
  reg_float_unary("Acosh", FX_MATH_FN(std::acosh(x)));
  reg_float_unary("Asinh", FX_MATH_FN(std::asinh(x)));
  reg_float_unary("Atanh", FX_MATH_FN(std::atanh(x)));
  reg_float_unary("Cosh", FX_MATH_FN(std::cosh(x)));
  reg_float_unary("Sinh", FX_MATH_FN(std::sinh(x)));
  reg_float_unary("Tan", FX_MATH_FN(std::tan(x)));
  reg_float_unary("Softsign", FX_MATH_FN(x / (1 + std::fabs(x))));
  // Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
  reg_float_unary(
      "Celu",
      [](auto x, const UnaryParams& p) {
        using T = decltype(x);
        const T a = static_cast<T>(p.alpha);
        return x > 0 ? x : a * std::expm1(x / a);
      },
      [](const OpCall& c, UnaryParams& p) {
        p.alpha = c.attr_float("alpha", 1.0f);
        if (p.alpha == 0) c.fail("alpha must not be 0");
      });
  reg_float_unary(
      "ThresholdedRelu",
      [](auto x, const UnaryParams& p) {
        using T = decltype(x);
        return x > static_cast<T>(p.alpha) ? x : T(0);
      },
      [](const OpCall& c, UnaryParams& p) { p.alpha = c.attr_float("alpha", 1.0f); });
  // Shrink: x < -lambd ? x + bias : x > lambd ? x - bias : 0.
  reg_float_unary(
      "Shrink",
      [](auto x, const UnaryParams& p) {
        using T = decltype(x);
        const T lambd = static_cast<T>(p.alpha), bias = static_cast<T>(p.beta);
        return x < -lambd ? x + bias : x > lambd ? x - bias : T(0);
      },
      [](const OpCall& c, UnaryParams& p) {
        p.alpha = c.attr_float("lambd", 0.5f);
        p.beta = c.attr_float("bias", 0.0f);
      });
}

#undef FX_MATH_FN

// ---- predicates ----

template <class Pred>
Value float_predicate(const OpCall& c, const Value& x0, Pred pred) {
  const Value x = is_half(x0.dtype()) ? widen_half(c, x0) : x0;
  Value out = new_value(Dtype::Bool, x.shape());
  uint8_t* o = out.mutable_data<uint8_t>();
  dispatch_numeric<kFloats>(c, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) o[i] = pred(in[i]);
  });
  return out;
}

void is_inf(OpCall& c) {
  const bool neg = c.attr_int("detect_negative", 1) != 0;
  const bool pos = c.attr_int("detect_positive", 1) != 0;
  c.outputs.push_back(float_predicate(c, c.input(0), [neg, pos](auto x) {
    return std::isinf(x) && ((x > 0 && pos) || (x < 0 && neg));
  }));
}

void is_nan(OpCall& c) {
  c.outputs.push_back(float_predicate(c, c.input(0), [](auto x) { return x != x; }));
}

// ---- BitShift (unsigned integers; shifting by the width or more gives 0) ----

void bit_shift(OpCall& c) {
  const std::string dir = c.attr_string("direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    c.fail("direction must be 'LEFT' or 'RIGHT', got '" + dir + "'");
  const bool left = dir == "LEFT";
  const Value& a = c.input(0);
  const Value& b = c.input(1);
  if (a.dtype() != b.dtype()) c.fail("X and Y have different element types");
  kernels::Shape os;
  if (!kernels::broadcast_shapes(a.shape(), b.shape(), os)) c.fail("shapes do not broadcast");
  Value out = new_value(a.dtype(), os);
  dispatch_numeric<kUnsignedInts>(c, a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using W = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, T>;
    constexpr T bits = sizeof(T) * 8;
    const T* x = a.data<T>();
    const T* y = b.data<T>();
    T* o = out.mutable_data<T>();
    for (int64_t i = 0, n = out.numel(); i < n; ++i) {
      const T v = x[kernels::broadcast_index(os, a.shape(), i)];
      const T s = y[kernels::broadcast_index(os, b.shape(), i)];
      o[i] = s >= bits ? T(0) : static_cast<T>(left ? W(v) << s : W(v) >> s);
    }
  });
  c.outputs.push_back(std::move(out));
}

// ---- Hardmax: 1 at the first maximum along the axis, 0 elsewhere ----

void hardmax(OpCall& c) {
  const Value& x0 = c.input(0);
  const Value x = is_half(x0.dtype()) ? widen_half(c, x0) : x0;
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  int64_t outer = 1, n = 1, inner = 1;
  if (c.opset() < 13) {  // coerced to 2-D at axis (default 1), rows over the trailing dims
    const int64_t axis = normalize_axis(c, c.attr_int("axis", 1), rank, "axis");
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
    for (int64_t d = axis; d < rank; ++d) n *= x.shape()[d];
  } else {
    const int64_t axis = normalize_axis(c, c.attr_int("axis", -1), rank, "axis");
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape()[d];
    n = x.shape()[axis];
  }
  Value out = zeroed_value(x.dtype(), x.shape());
  dispatch_numeric<kFloats>(c, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* o = out.mutable_data<T>();
    for (int64_t a = 0; a < outer; ++a)
      for (int64_t j = 0; j < inner; ++j) {
        if (n == 0) continue;
        const int64_t base = a * n * inner + j;
        int64_t best = 0;
        for (int64_t k = 1; k < n; ++k)
          if (in[base + k * inner] > in[base + best * inner]) best = k;
        o[base + best * inner] = T(1);
      }
  });
  c.outputs.push_back(is_half(x0.dtype()) ? narrow_half(c, out, x0.dtype()) : out);
}

// TensorProto.DataType code -> Dtype for the ops with a dtype attribute here.
Dtype dtype_of_code(const OpCall& c, int64_t code, const char* attr) {
  switch (code) {
    case 1:
      return Dtype::Float32;
    case 2:
      return Dtype::UInt8;
    case 3:
      return Dtype::Int8;
    case 4:
      return Dtype::UInt16;
    case 5:
      return Dtype::Int16;
    case 6:
      return Dtype::Int32;
    case 7:
      return Dtype::Int64;
    case 9:
      return Dtype::Bool;
    case 10:
      return Dtype::Float16;
    case 11:
      return Dtype::Float64;
    case 12:
      return Dtype::UInt32;
    case 13:
      return Dtype::UInt64;
    case 16:
      return Dtype::BFloat16;
    default:
      c.unsupported(std::string(attr) + " = " + std::to_string(code) + " (TensorProto type)");
  }
}

// ---- EyeLike: ones on diagonal k of a 2-D tensor shaped like the input ----

void eye_like(OpCall& c) {
  const Value& x = c.input(0);
  if (x.shape().size() != 2) c.fail("the input must be 2-D, got " + x.describe());
  const Dtype dt =
      c.has_attr("dtype") ? dtype_of_code(c, c.attr_int("dtype", 1), "dtype") : x.dtype();
  const int64_t rows = x.shape()[0], cols = x.shape()[1], k = c.attr_int("k", 0);
  // Built in float32 (exact for 0 and 1) and converted, so every output type works.
  Value f = zeroed_value(Dtype::Float32, x.shape());
  float* o = f.mutable_data<float>();
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t j = i + k;
    if (j >= 0 && j < cols) o[i * cols + j] = 1.0f;
  }
  c.outputs.push_back(cast_value(c, f, dt));
}

// ---- Det: LU with partial pivoting in double, per matrix of the batch ----

void det(OpCall& c) {
  const Value& x0 = c.input(0);
  const Value x = is_half(x0.dtype()) ? widen_half(c, x0) : x0;
  const auto& s = x.shape();
  if (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2])
    c.fail("the input must be [..., M, M], got " + x.describe());
  const int64_t m = s.back();
  const std::vector<int64_t> os(s.begin(), s.end() - 2);
  int64_t batch = 1;
  for (int64_t d : os) batch *= d;
  Value out = new_value(x.dtype(), os);
  std::vector<double> a(static_cast<size_t>(checked_mul(c, m, m, "the matrix")));
  dispatch_numeric<kFloats>(c, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* o = out.mutable_data<T>();
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < m * m; ++i) a[i] = in[b * m * m + i];
      double d = 1.0;
      for (int64_t col = 0; col < m && d != 0.0; ++col) {
        int64_t piv = col;
        for (int64_t r = col + 1; r < m; ++r)
          if (std::fabs(a[r * m + col]) > std::fabs(a[piv * m + col])) piv = r;
        if (a[piv * m + col] == 0.0) {
          d = 0.0;
          break;
        }
        if (piv != col) {
          for (int64_t j = 0; j < m; ++j) std::swap(a[piv * m + j], a[col * m + j]);
          d = -d;
        }
        const double p = a[col * m + col];
        d *= p;
        for (int64_t r = col + 1; r < m; ++r) {
          const double f = a[r * m + col] / p;
          for (int64_t j = col; j < m; ++j) a[r * m + j] -= f * a[col * m + j];
        }
      }
      o[b] = static_cast<T>(d);
    }
  });
  c.outputs.push_back(is_half(x0.dtype()) ? narrow_half(c, out, x0.dtype()) : out);
}

// ---- window functions: sum_k a_k cos(2 pi k n / N), N = size (periodic) or size - 1 ----

void window(OpCall& c, const std::vector<double>& coeffs) {
  const Value& sz = c.input(0);
  if (sz.numel() != 1) c.fail("size must be a scalar, got " + sz.describe());
  if (sz.dtype() != Dtype::Int32 && sz.dtype() != Dtype::Int64)
    c.fail("size must be int32 or int64, got " + sz.describe());
  const int64_t n = first_i64(c, sz);
  if (n < 0) c.fail("size must not be negative, got " + std::to_string(n));
  const Dtype dt = dtype_of_code(c, c.attr_int("output_datatype", 1), "output_datatype");
  const bool periodic = c.attr_int("periodic", 1) != 0;
  const double denom = static_cast<double>(periodic ? n : n - 1);
  Value f = new_value(Dtype::Float64, {n});
  double* o = f.mutable_data<double>();
  for (int64_t i = 0; i < n; ++i) {
    double v = 0;
    for (size_t k = 0; k < coeffs.size(); ++k)
      v +=
          coeffs[k] * (denom > 0 ? std::cos(2.0 * M_PI * static_cast<double>(k * i) / denom) : 1.0);
    o[i] = v;
  }
  c.outputs.push_back(cast_value(c, f, dt));
}

// ---- Einsum: any equation ('...' broadcast, repeated labels as diagonals, implicit output),
// by one loop over every combination of label values; each operand's offset is a dot product of
// those values with its per-label strides (0 for a broadcast dim, summed for a diagonal) ----

void einsum(OpCall& c) {
  std::string eq = c.attr_string("equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t s = 0;;) {
    const size_t comma = lhs.find(',', s);
    terms.push_back(lhs.substr(s, comma == std::string::npos ? std::string::npos : comma - s));
    if (comma == std::string::npos) break;
    s = comma + 1;
  }
  if (terms.size() != c.inputs.size())
    c.fail("the equation '" + eq + "' names " + std::to_string(terms.size()) +
           " operands, the node has " + std::to_string(c.inputs.size()));
  const Dtype dt = c.input(0).dtype();
  std::vector<Value> ins;
  for (size_t t = 0; t < terms.size(); ++t) {
    if (c.input(t).dtype() != dt) c.fail("operands have different element types");
    ins.push_back(is_half(dt) ? widen_half(c, c.input(t)) : c.input(t));
  }
  // '...' becomes labels 1..E (not letters), right-aligned across operands like broadcasting.
  int64_t ell = 0;
  for (size_t t = 0; t < terms.size(); ++t) {
    const size_t at = terms[t].find("...");
    if (at == std::string::npos) continue;
    const int64_t r =
        static_cast<int64_t>(ins[t].shape().size()) - static_cast<int64_t>(terms[t].size() - 3);
    if (r < 0) c.fail("term '" + terms[t] + "' has more labels than its operand's rank");
    ell = std::max(ell, r);
  }
  auto ell_labels = [&](int64_t r) {
    std::string l;
    for (int64_t k = ell - r; k < ell; ++k) l += static_cast<char>(1 + k);
    return l;
  };
  for (size_t t = 0; t < terms.size(); ++t) {
    const size_t at = terms[t].find("...");
    if (at == std::string::npos) continue;
    const int64_t r =
        static_cast<int64_t>(ins[t].shape().size()) - static_cast<int64_t>(terms[t].size() - 3);
    terms[t].replace(at, 3, ell_labels(r));
  }
  std::map<char, int64_t> dims;
  for (size_t t = 0; t < terms.size(); ++t) {
    if (terms[t].size() != ins[t].shape().size())
      c.fail("term '" + terms[t] + "' does not match its operand's rank (" + ins[t].describe() +
             ")");
    for (size_t i = 0; i < terms[t].size(); ++i) {
      const char ch = terms[t][i];
      if (ch != '.' && !std::isalpha(static_cast<unsigned char>(ch)) && ch > ell)
        c.fail(std::string("label '") + ch + "' is not a letter");
      const int64_t d = ins[t].shape()[i];
      auto it = dims.find(ch);
      if (it != dims.end() && it->second != d && d != 1 && it->second != 1)
        c.fail(std::string("label '") + ch + "' has inconsistent sizes");
      dims[ch] = it == dims.end() ? d : std::max(it->second, d);
    }
  }
  std::string out_labels;
  if (arrow != std::string::npos) {
    out_labels = eq.substr(arrow + 2);
    const size_t at = out_labels.find("...");
    if (at != std::string::npos) out_labels.replace(at, 3, ell_labels(ell));
  } else {  // implicit: the ellipsis dims, then the letters appearing once, sorted
    out_labels = ell_labels(ell);
    std::map<char, int> count;
    for (const std::string& t : terms)
      for (char ch : t) ++count[ch];
    for (const auto& [ch, n] : count)
      if (n == 1 && ch > ell) out_labels += ch;
  }
  std::vector<char> labels;
  std::map<char, size_t> pos;
  for (const auto& kv : dims) {
    pos[kv.first] = labels.size();
    labels.push_back(kv.first);
  }
  kernels::Shape os;
  for (char ch : out_labels) {
    if (!dims.count(ch)) c.fail(std::string("output label '") + ch + "' is not an input label");
    os.push_back(dims[ch]);
  }
  int64_t total = 1;
  for (char l : labels) total = checked_mul(c, total, dims[l], "the number of label combinations");
  // Per operand (and the output, last): the stride of each label.
  const size_t nl = labels.size();
  std::vector<std::vector<int64_t>> stride(terms.size() + 1, std::vector<int64_t>(nl, 0));
  for (size_t t = 0; t <= terms.size(); ++t) {
    const std::string& term = t < terms.size() ? terms[t] : out_labels;
    const kernels::Shape& shape = t < terms.size() ? ins[t].shape() : os;
    const std::vector<int64_t> st = strides_of(shape);
    for (size_t i = 0; i < term.size(); ++i)
      if (shape[i] != 1) stride[t][pos[term[i]]] += st[i];
  }
  Value out = new_value(is_half(dt) ? Dtype::Float32 : dt, os);
  dispatch_numeric<kNumeric>(c, out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // Integers accumulate modulo 2^64 (wrapping, never undefined), floats in double.
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
    std::vector<Acc> acc(static_cast<size_t>(out.numel()), Acc(0));
    std::vector<int64_t> idx(nl, 0), off(terms.size() + 1, 0);
    for (int64_t it = 0; it < total; ++it) {
      Acc prod = 1;
      for (size_t t = 0; t < terms.size(); ++t) prod *= static_cast<Acc>(ins[t].data<T>()[off[t]]);
      acc[off[terms.size()]] += prod;
      for (int64_t d = static_cast<int64_t>(nl) - 1; d >= 0; --d) {  // odometer
        for (size_t t = 0; t <= terms.size(); ++t) off[t] += stride[t][d];
        if (++idx[d] < dims[labels[d]]) break;
        for (size_t t = 0; t <= terms.size(); ++t) off[t] -= stride[t][d] * idx[d];
        idx[d] = 0;
      }
    }
    T* o = out.mutable_data<T>();
    for (size_t i = 0; i < acc.size(); ++i) o[i] = static_cast<T>(acc[i]);
  });
  c.outputs.push_back(is_half(dt) ? narrow_half(c, out, dt) : out);
}

}  // namespace

void register_math_ops() {
  register_unary_math();
  register_builtin("onnx.IsInf", is_inf);
  register_builtin("onnx.IsNaN", is_nan);
  register_builtin("onnx.BitShift", bit_shift);
  register_builtin("onnx.CastLike", [](OpCall& c) {
    c.outputs.push_back(cast_value(c, c.input(0), c.input(1).dtype()));
  });
  register_builtin("onnx.Einsum", einsum);
  register_builtin("onnx.Hardmax", hardmax);
  register_builtin("onnx.EyeLike", eye_like);
  register_builtin("onnx.Det", det);
  register_builtin("onnx.HannWindow", [](OpCall& c) { window(c, {0.5, -0.5}); });
  register_builtin("onnx.HammingWindow", [](OpCall& c) {
    window(c, {25.0 / 46.0, -(1.0 - 25.0 / 46.0)});
  });
  register_builtin("onnx.BlackmanWindow", [](OpCall& c) { window(c, {0.42, -0.5, 0.08}); });
}

}  // namespace fx::exec
