// Elementwise ONNX ops: arithmetic and logic with broadcasting, activations, Cast, Where,
// Softmax. float32 throughout, int64 for arithmetic on shapes, bool for logic.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "exec/dtype_dispatch.h"
#include "exec/ops.h"
#include "kernels/elementwise.h"

namespace fx::exec {

namespace {

using kernels::BinaryOp;
using kernels::Shape;
using kernels::UnaryOp;

bool is_comparison(BinaryOp op) {
  return op == BinaryOp::Equal || op == BinaryOp::Less || op == BinaryOp::Greater ||
         op == BinaryOp::LessOrEqual || op == BinaryOp::GreaterOrEqual;
}

// One element converted as Cast does: to bool x != 0; a float to an integer saturates and NaN
// gives 0 (C++ leaves that undefined, and wasm's conversion traps on it).
template <class To, class From>
To convert_element(From x) {
  if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (x != x) return 0;
    if (x <= static_cast<From>(std::numeric_limits<To>::lowest()))
      return std::numeric_limits<To>::lowest();
    if (x >= static_cast<From>(std::numeric_limits<To>::max()))
      return std::numeric_limits<To>::max();
  }
  return static_cast<To>(x);
}

// Converts a value to `dtype` (Cast): every numeric type, bool, and float16/bfloat16 through
// float32.
Value cast_to(const OpCall& c, const Value& v, Dtype dtype) {
  if (v.dtype() == dtype) return v;
  if (v.dtype() == Dtype::String || dtype == Dtype::String) return cast_strings(c, v, dtype);
  if (is_half(v.dtype())) return cast_to(c, widen_half(c, v), dtype);
  if (is_half(dtype)) return narrow_half(c, cast_to(c, v, Dtype::Float32), dtype);
  Value out = new_value(dtype, v.shape());
  const int64_t n = v.numel();
  const DtypeSet with_bool = kNumeric | dtype_bit(Dtype::Bool);
  if (!(dtype_bit(v.dtype()) & with_bool))
    c.unsupported(std::string("casting from ") + dtype_name(v.dtype()));
  if (!(dtype_bit(dtype) & with_bool))
    c.unsupported(std::string("casting to ") + dtype_name(dtype));
  // bool is stored as uint8 0/1.
  const Dtype from = v.dtype() == Dtype::Bool ? Dtype::UInt8 : v.dtype();
  if (dtype == Dtype::Bool) {
    dispatch_numeric<kNumeric>(c, from, [&](auto tag) {
      using S = decltype(tag);
      const S* src = v.data<S>();
      uint8_t* dst = out.mutable_data<uint8_t>();
      for (int64_t i = 0; i < n; ++i) dst[i] = src[i] != S(0);
    });
    return out;
  }
  dispatch_numeric<kNumeric>(c, dtype, [&](auto dtag) {
    using D = decltype(dtag);
    D* dst = out.mutable_data<D>();
    dispatch_numeric<kNumeric>(c, from, [&](auto stag) {
      using S = decltype(stag);
      const S* src = v.data<S>();
      for (int64_t i = 0; i < n; ++i) dst[i] = convert_element<D>(src[i]);
    });
  });
  return out;
}

Value binary(const OpCall& c, BinaryOp op, const Value& a, const Value& b0) {
  Shape out_shape;
  if (!kernels::broadcast_shapes(a.shape(), b0.shape(), out_shape))
    c.fail("shapes do not broadcast");
  // ONNX Pow allows an exponent of another numeric type; everything else needs equal types.
  Value b = b0;
  if (a.dtype() != b.dtype()) {
    if (op != BinaryOp::Pow) c.fail("operands have different element types");
    b = cast_to(c, b0, a.dtype());
  }
  const bool logic = op == BinaryOp::And || op == BinaryOp::Or || op == BinaryOp::Xor;
  const Dtype out_dtype = (is_comparison(op) || logic) ? Dtype::Bool : a.dtype();
  if (is_half(a.dtype())) {  // computed in float32, rounded back
    Value r = binary(c, op, widen_half(c, a), widen_half(c, b));
    return r.dtype() == Dtype::Bool ? r : narrow_half(c, r, a.dtype());
  }
  if (a.dtype() == Dtype::Bool) {
    if (!logic && op != BinaryOp::Equal) c.unsupported("arithmetic on bool");
    Value out = new_value(out_dtype, out_shape);
    kernels::binary_bool(op, a.shape(), a.data<uint8_t>(), b.shape(), b.data<uint8_t>(),
                         out.mutable_data<uint8_t>());
    return out;
  }
  if (logic) c.unsupported(std::string("logic ops on ") + dtype_name(a.dtype()));
  Value out = new_value(out_dtype, out_shape);
  if (a.dtype() == Dtype::Float32) {  // the fast path models use
    kernels::binary_f32(op, a.shape(), a.data<float>(), b.shape(), b.data<float>(),
                        out.mutable_data<void>());
    return out;
  }
  dispatch_numeric<kNumeric>(c, a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      if (op == BinaryOp::Div || op == BinaryOp::Mod || op == BinaryOp::FMod) {
        const T* d = b.data<T>();
        for (int64_t i = 0; i < b.numel(); ++i)
          if (d[i] == 0) c.fail("integer division by zero");
      }
    }
    if constexpr (!std::is_same_v<T, float>) {
      kernels::binary_typed<T>(op, a.shape(), a.data<T>(), b.shape(), b.data<T>(),
                               out.mutable_data<void>());
    }
  });
  return out;
}

void reg_binary(const char* name, BinaryOp op) {
  register_builtin(std::string("onnx.") + name, [op](OpCall& c) {
    BinaryOp o = op;
    if (o == BinaryOp::Mod && c.attr_int("fmod", 0)) o = BinaryOp::FMod;
    const Dtype t = c.input(0).dtype();
    if (o == BinaryOp::Mod && (is_half(t) || t == Dtype::Float32 || t == Dtype::Float64))
      c.fail("Mod of floats needs fmod = 1 (ONNX)");
    c.outputs.push_back(binary(c, o, c.input(0), c.input(1)));
  });
}

// Sum / Mean / Min / Max take any number of inputs.
void reg_variadic(const char* name, BinaryOp op, bool mean) {
  register_builtin(std::string("onnx.") + name, [op, mean](OpCall& c) {
    if (c.inputs.empty()) c.fail("needs at least one input");
    Value acc = c.input(0);
    for (size_t i = 1; i < c.inputs.size(); ++i) acc = binary(c, op, acc, c.input(i));
    if (mean && c.inputs.size() > 1) {
      const Dtype t = acc.dtype();
      if (t != Dtype::Float32 && t != Dtype::Float64 && !is_half(t))
        c.unsupported("Mean of non-float inputs");
      const Value count = Value::scalar_f32(static_cast<float>(c.inputs.size()));
      acc = binary(c, BinaryOp::Div, acc, cast_to(c, count, t));
    }
    c.outputs.push_back(std::move(acc));
  });
}

// The unary ops that integers support (ONNX declares Neg/Abs/Sign/Relu on signed integers, Abs
// and Sign on unsigned ones too).
bool integer_unary(UnaryOp op) {
  return op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Identity ||
         op == UnaryOp::Relu || op == UnaryOp::Sign;
}

Value unary_value(const OpCall& c, UnaryOp op, const Value& x, float a, float b) {
  if (x.dtype() == Dtype::Float32) {
    Value out = new_value(Dtype::Float32, x.shape());
    kernels::unary_f32(op, x.data<float>(), out.mutable_data<float>(), x.numel(), a, b);
    return out;
  }
  if (is_half(x.dtype()))
    return narrow_half(c, unary_value(c, op, widen_half(c, x), a, b), x.dtype());
  if (x.dtype() == Dtype::Float64) {
    // float32 kernels on float64 would lose precision: the few common ops are computed here.
    Value out = new_value(Dtype::Float64, x.shape());
    const double* p = x.data<double>();
    double* q = out.mutable_data<double>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) {
      const double v = p[i];
      switch (op) {
        case UnaryOp::Neg:
          q[i] = -v;
          break;
        case UnaryOp::Abs:
          q[i] = std::fabs(v);
          break;
        case UnaryOp::Identity:
          q[i] = v;
          break;
        case UnaryOp::Relu:
          q[i] = v > 0 || v != v ? v : 0.0;
          break;
        case UnaryOp::Sign:
          q[i] = v > 0 ? 1.0 : v < 0 ? -1.0 : v;
          break;
        case UnaryOp::Exp:
          q[i] = std::exp(v);
          break;
        case UnaryOp::Log:
          q[i] = std::log(v);
          break;
        case UnaryOp::Sqrt:
          q[i] = std::sqrt(v);
          break;
        case UnaryOp::Floor:
          q[i] = std::floor(v);
          break;
        case UnaryOp::Ceil:
          q[i] = std::ceil(v);
          break;
        case UnaryOp::Round:
          q[i] = std::nearbyint(v);
          break;
        case UnaryOp::Reciprocal:
          q[i] = 1.0 / v;
          break;
        case UnaryOp::Sin:
          q[i] = std::sin(v);
          break;
        case UnaryOp::Cos:
          q[i] = std::cos(v);
          break;
        case UnaryOp::Tanh:
          q[i] = std::tanh(v);
          break;
        case UnaryOp::Erf:
          q[i] = std::erf(v);
          break;
        case UnaryOp::Sigmoid:
          q[i] = 1.0 / (1.0 + std::exp(-v));
          break;
        default:
          c.unsupported("this op on float64");
      }
    }
    return out;
  }
  if (!integer_unary(op)) c.unsupported(std::string("element type ") + dtype_name(x.dtype()));
  return dispatch_numeric<kInts>(c, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Value out = new_value(x.dtype(), x.shape());
    const T* p = x.data<T>();
    T* q = out.mutable_data<T>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) {
      const T v = p[i];
      if constexpr (std::is_signed_v<T>) {
        // Negation in unsigned arithmetic: -MIN wraps to MIN instead of being undefined.
        using U = std::make_unsigned_t<T>;
        const T neg = static_cast<T>(U(0) - static_cast<U>(v));
        q[i] = op == UnaryOp::Neg    ? neg
               : op == UnaryOp::Abs  ? (v < 0 ? neg : v)
               : op == UnaryOp::Relu ? std::max<T>(v, 0)
               : op == UnaryOp::Sign ? static_cast<T>((v > 0) - (v < 0))
                                     : v;
      } else {
        q[i] = op == UnaryOp::Neg    ? static_cast<T>(T(0) - v)
               : op == UnaryOp::Sign ? static_cast<T>(v > 0)
                                     : v;
      }
    }
    return out;
  });
}

void reg_unary(const char* name, UnaryOp op, float alpha = 0.0f, float beta = 0.0f,
               const char* alpha_attr = nullptr, const char* beta_attr = nullptr) {
  register_builtin(std::string("onnx.") + name,
                   [op, alpha, beta, alpha_attr, beta_attr](OpCall& c) {
                     const float a = alpha_attr ? c.attr_float(alpha_attr, alpha) : alpha;
                     const float b = beta_attr ? c.attr_float(beta_attr, beta) : beta;
                     c.outputs.push_back(unary_value(c, op, c.input(0), a, b));
                   });
}

void softmax(OpCall& c, bool log) {
  const Value& x = c.input(0);
  if (x.dtype() != Dtype::Float32)
    c.unsupported(std::string("element type ") + dtype_name(x.dtype()));
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  // The axis attribute, parsed once per plan (its default depends on the opset).
  std::optional<std::optional<int64_t>> scratch;
  const std::optional<int64_t>& given = node_attrs(c, scratch, [&]() -> std::optional<int64_t> {
    if (!c.has_attr("axis")) return std::nullopt;
    return c.attr_int("axis", 0);
  });
  if (c.opset() < 13) {
    // Opsets 1-12: the input is coerced to 2-D at `axis` (default 1) and each row of the
    // flattened trailing dimensions is normalised.
    const int64_t axis = normalize_axis(c, given.value_or(1), rank, "axis");
    int64_t outer = 1, n = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
    for (int64_t d = axis; d < rank; ++d) n *= x.shape()[d];
    Value out = new_value(Dtype::Float32, x.shape());
    kernels::softmax_f32(x.data<float>(), out.mutable_data<float>(), outer, n, log);
    c.outputs.push_back(out);
    return;
  }
  // Opset >= 13 semantics (softmax along one axis, default -1).
  const int64_t axis = normalize_axis(c, given.value_or(-1), rank, "axis");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape()[d];
  const int64_t n = rank ? x.shape()[axis] : 1;
  Value out = new_value(Dtype::Float32, x.shape());
  if (inner == 1) {
    kernels::softmax_f32(x.data<float>(), out.mutable_data<float>(), outer, n, log);
  } else {  // gather each strided row, softmax it, scatter back
    std::vector<float> row(static_cast<size_t>(n)), res(static_cast<size_t>(n));
    const float* src = x.data<float>();
    float* dst = out.mutable_data<float>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) {
        for (int64_t k = 0; k < n; ++k) row[k] = src[(o * n + k) * inner + j];
        kernels::softmax_f32(row.data(), res.data(), 1, n, log);
        for (int64_t k = 0; k < n; ++k) dst[(o * n + k) * inner + j] = res[k];
      }
  }
  c.outputs.push_back(std::move(out));
}

}  // namespace

const Dtype* onnx_dtype(int64_t code) {
  // TensorProto.DataType codes (complex: not tensors the executor holds).
  static const Dtype kTypes[] = {Dtype::Float32, Dtype::UInt8,   Dtype::Int8,    Dtype::UInt16,
                                 Dtype::Int16,   Dtype::Int32,   Dtype::Int64,   Dtype::String,
                                 Dtype::Bool,    Dtype::Float16, Dtype::Float64, Dtype::UInt32,
                                 Dtype::UInt64,  Dtype::String,  Dtype::String,  Dtype::BFloat16};
  if (code < 1 || code > 16 || code == 14 || code == 15) return nullptr;  // not complex
  return &kTypes[code - 1];
}

Value cast_value(const OpCall& c, const Value& v, Dtype dtype) { return cast_to(c, v, dtype); }

void register_elementwise_ops() {
  reg_binary("Add", BinaryOp::Add);
  reg_binary("Sub", BinaryOp::Sub);
  reg_binary("Mul", BinaryOp::Mul);
  reg_binary("Div", BinaryOp::Div);
  reg_binary("Pow", BinaryOp::Pow);
  reg_binary("Mod", BinaryOp::Mod);
  reg_binary("Equal", BinaryOp::Equal);
  reg_binary("Less", BinaryOp::Less);
  reg_binary("Greater", BinaryOp::Greater);
  reg_binary("LessOrEqual", BinaryOp::LessOrEqual);
  reg_binary("GreaterOrEqual", BinaryOp::GreaterOrEqual);
  reg_binary("And", BinaryOp::And);
  reg_binary("Or", BinaryOp::Or);
  reg_binary("Xor", BinaryOp::Xor);
  reg_variadic("Sum", BinaryOp::Add, false);
  reg_variadic("Mean", BinaryOp::Add, true);
  reg_variadic("Min", BinaryOp::Min, false);
  reg_variadic("Max", BinaryOp::Max, false);

  reg_unary("Relu", UnaryOp::Relu);
  reg_unary("Sigmoid", UnaryOp::Sigmoid);
  reg_unary("Tanh", UnaryOp::Tanh);
  reg_unary("Exp", UnaryOp::Exp);
  reg_unary("Log", UnaryOp::Log);
  reg_unary("Sqrt", UnaryOp::Sqrt);
  reg_unary("Neg", UnaryOp::Neg);
  reg_unary("Abs", UnaryOp::Abs);
  reg_unary("Erf", UnaryOp::Erf);
  reg_unary("Floor", UnaryOp::Floor);
  reg_unary("Ceil", UnaryOp::Ceil);
  reg_unary("Round", UnaryOp::Round);
  reg_unary("Reciprocal", UnaryOp::Reciprocal);
  reg_unary("Sin", UnaryOp::Sin);
  reg_unary("Cos", UnaryOp::Cos);
  reg_unary("Sign", UnaryOp::Sign);
  reg_unary("Softplus", UnaryOp::Softplus);
  reg_unary("LeakyRelu", UnaryOp::LeakyRelu, 0.01f, 0.0f, "alpha");
  reg_unary("Elu", UnaryOp::Elu, 1.0f, 0.0f, "alpha");
  reg_unary("Selu", UnaryOp::Selu, 1.67326319217681884765625f, 1.05070102214813232421875f, "alpha",
            "gamma");
  reg_unary("HardSigmoid", UnaryOp::HardSigmoid, 0.2f, 0.5f, "alpha", "beta");
  reg_unary("HardSwish", UnaryOp::HardSwish);
  register_builtin("onnx.Gelu", [](OpCall& c) {
    const std::string approx = c.attr_string("approximate", "none");
    if (approx != "none" && approx != "tanh")
      c.fail("approximate must be 'none' or 'tanh', got '" + approx + "'");
    const Value& x = c.input(0);
    if (x.dtype() != Dtype::Float32)
      c.unsupported(std::string("element type ") + dtype_name(x.dtype()));
    Value out = new_value(Dtype::Float32, x.shape());
    kernels::unary_f32(approx == "tanh" ? UnaryOp::GeluTanh : UnaryOp::Gelu, x.data<float>(),
                       out.mutable_data<float>(), x.numel());
    c.outputs.push_back(out);
  });
  register_builtin("onnx.Clip", [](OpCall& c) {
    const Value& x = c.input(0);
    // Opset >= 11: min/max are optional inputs; before: attributes.
    float lo = c.attr_float("min", -INFINITY), hi = c.attr_float("max", INFINITY);
    const bool f32 = x.dtype() == Dtype::Float32 || is_half(x.dtype());
    if (f32 && c.has_input(1)) lo = first_f32(c, c.input(1));
    if (f32 && c.has_input(2)) hi = first_f32(c, c.input(2));
    if (x.dtype() == Dtype::Float32) {
      Value out = new_value(Dtype::Float32, x.shape());
      kernels::unary_f32(UnaryOp::Clip, x.data<float>(), out.mutable_data<float>(), x.numel(), lo,
                         hi);
      c.outputs.push_back(out);
      return;
    }
    if (is_half(x.dtype())) {
      Value out = new_value(Dtype::Float32, x.shape());
      const Value xf = widen_half(c, x);
      kernels::unary_f32(UnaryOp::Clip, xf.data<float>(), out.mutable_data<float>(), x.numel(), lo,
                         hi);
      c.outputs.push_back(narrow_half(c, out, x.dtype()));
      return;
    }
    // Other types: the bounds are read in the input's own type (int64 bounds beyond float's
    // precision stay exact); a missing bound clamps nothing.
    dispatch_numeric<kNumeric>(c, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T lo_t = std::numeric_limits<T>::lowest(), hi_t = std::numeric_limits<T>::max();
      auto bound = [&](size_t i, float attr, T& v) {
        if (c.has_input(i)) {
          const Value bv = cast_to(c, c.input(i), x.dtype());
          if (bv.numel() != 1) c.fail("min and max must be scalars");
          v = bv.data<T>()[0];
        } else if (std::isfinite(attr)) {
          v = convert_element<T>(attr);
        }
      };
      bound(1, c.attr_float("min", -INFINITY), lo_t);
      bound(2, c.attr_float("max", INFINITY), hi_t);
      Value out = new_value(x.dtype(), x.shape());
      const T* p = x.data<T>();
      T* q = out.mutable_data<T>();
      for (int64_t i = 0, n = x.numel(); i < n; ++i)
        q[i] = p[i] != p[i] ? p[i] : std::min(hi_t, std::max(lo_t, p[i]));
      c.outputs.push_back(out);
    });
  });
  register_builtin("onnx.Identity", [](OpCall& c) { c.outputs.push_back(c.input(0)); });
  register_builtin("onnx.Not", [](OpCall& c) {
    const Value& x = c.input(0);
    if (x.dtype() != Dtype::Bool) c.fail("Not needs a bool input");
    Value out = new_value(Dtype::Bool, x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) out.mutable_data<uint8_t>()[i] = !x.data<uint8_t>()[i];
    c.outputs.push_back(out);
  });
  register_builtin("onnx.Cast", [](OpCall& c) {
    const int64_t to = c.attr_int("to", -1);
    const Dtype* d = onnx_dtype(to);
    if (!d) c.unsupported("Cast to TensorProto type " + std::to_string(to));
    c.outputs.push_back(cast_to(c, c.input(0), *d));
  });
  register_builtin("onnx.Where", [](OpCall& c) {
    const Value& cond = c.input(0);
    const Value& x = c.input(1);
    const Value& y = c.input(2);
    if (cond.dtype() != Dtype::Bool) c.fail("the condition must be bool");
    if (x.dtype() != y.dtype()) c.fail("X and Y have different element types");
    Shape s1, s;
    if (!kernels::broadcast_shapes(cond.shape(), x.shape(), s1) ||
        !kernels::broadcast_shapes(s1, y.shape(), s))
      c.fail("shapes do not broadcast");
    // Broadcast each operand to the output by index arithmetic (Where is rare on hot paths).
    const size_t es = dtype_size(x.dtype());
    Value out = new_value(x.dtype(), s);
    for (int64_t i = 0; i < out.numel(); ++i) {
      const bool pick_x = cond.data<uint8_t>()[kernels::broadcast_index(s, cond.shape(), i)] != 0;
      const Value& src = pick_x ? x : y;
      std::memcpy(out.mutable_data<uint8_t>() + i * es,
                  src.data<uint8_t>() + kernels::broadcast_index(s, src.shape(), i) * es, es);
    }
    c.outputs.push_back(std::move(out));
  });
  register_builtin("onnx.Softmax", [](OpCall& c) { softmax(c, false); });
  register_builtin("onnx.LogSoftmax", [](OpCall& c) { softmax(c, true); });
}

}  // namespace fx::exec
