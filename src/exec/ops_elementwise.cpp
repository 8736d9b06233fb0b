// Elementwise ONNX ops: arithmetic and logic with broadcasting, activations, Cast, Where,
// Softmax. float32 throughout, int64 for arithmetic on shapes, bool for logic.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

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

// Converts a value to `dtype` (numeric conversions as C++ static_cast; to bool: x != 0).
Value cast_to(const OpCall& c, const Value& v, Dtype dtype) {
  if (v.dtype() == dtype) return v;
  Value out = new_value(dtype, v.shape());
  const int64_t n = v.numel();
  auto write = [&](auto* dst) {
    using T = std::remove_pointer_t<decltype(dst)>;
    auto read = [&](auto* src) {
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<T, uint8_t>) {
          if (dtype == Dtype::Bool) {
            dst[i] = src[i] != 0;
            continue;
          }
        }
        dst[i] = static_cast<T>(src[i]);
      }
    };
    switch (v.dtype()) {
      case Dtype::Float32:
        read(v.data<float>());
        break;
      case Dtype::Float64:
        read(v.data<double>());
        break;
      case Dtype::Int64:
        read(v.data<int64_t>());
        break;
      case Dtype::Int32:
        read(v.data<int32_t>());
        break;
      case Dtype::Int16:
        read(v.data<int16_t>());
        break;
      case Dtype::Int8:
        read(v.data<int8_t>());
        break;
      case Dtype::UInt8:
      case Dtype::Bool:
        read(v.data<uint8_t>());
        break;
      default:
        c.unsupported(std::string("casting from ") + dtype_name(v.dtype()));
    }
  };
  switch (dtype) {
    case Dtype::Float32:
      write(out.mutable_data<float>());
      break;
    case Dtype::Float64:
      write(out.mutable_data<double>());
      break;
    case Dtype::Int64:
      write(out.mutable_data<int64_t>());
      break;
    case Dtype::Int32:
      write(out.mutable_data<int32_t>());
      break;
    case Dtype::Int16:
      write(out.mutable_data<int16_t>());
      break;
    case Dtype::Int8:
      write(out.mutable_data<int8_t>());
      break;
    case Dtype::UInt8:
    case Dtype::Bool:
      write(out.mutable_data<uint8_t>());
      break;
    default:
      c.unsupported(std::string("casting to ") + dtype_name(dtype));
  }
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
  Value out = new_value(out_dtype, out_shape);
  switch (a.dtype()) {
    case Dtype::Float32:
      if (logic) c.unsupported("logic ops on float32");
      kernels::binary_f32(op, a.shape(), a.data<float>(), b.shape(), b.data<float>(),
                          out.mutable_data<void>());
      break;
    case Dtype::Int64:
      if (logic) c.unsupported("logic ops on int64");
      if (op == BinaryOp::Div || op == BinaryOp::Mod || op == BinaryOp::FMod) {
        const int64_t* d = b.data<int64_t>();
        for (int64_t i = 0; i < b.numel(); ++i)
          if (d[i] == 0) c.fail("integer division by zero");
      }
      kernels::binary_i64(op, a.shape(), a.data<int64_t>(), b.shape(), b.data<int64_t>(),
                          out.mutable_data<void>());
      break;
    case Dtype::Int32: {  // computed in int64
      Value r = binary(c, op, cast_to(c, a, Dtype::Int64), cast_to(c, b, Dtype::Int64));
      return r.dtype() == Dtype::Bool ? r : cast_to(c, r, Dtype::Int32);
    }
    case Dtype::Bool:
      if (!logic && op != BinaryOp::Equal) c.unsupported("arithmetic on bool");
      kernels::binary_bool(op, a.shape(), a.data<uint8_t>(), b.shape(), b.data<uint8_t>(),
                           out.mutable_data<uint8_t>());
      break;
    default:
      c.unsupported(std::string("element type ") + dtype_name(a.dtype()));
  }
  return out;
}

void reg_binary(const char* name, BinaryOp op) {
  register_builtin(std::string("onnx.") + name, [op](OpCall& c) {
    BinaryOp o = op;
    if (o == BinaryOp::Mod && c.attr_int("fmod", 0)) o = BinaryOp::FMod;
    if (o == BinaryOp::Mod && c.input(0).dtype() == Dtype::Float32) {
      if (!c.attr_int("fmod", 0)) c.fail("Mod of floats needs fmod = 1 (ONNX)");
    }
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
      if (acc.dtype() != Dtype::Float32) c.unsupported("Mean of non-float inputs");
      acc = binary(c, BinaryOp::Div, acc, Value::scalar_f32(static_cast<float>(c.inputs.size())));
    }
    c.outputs.push_back(acc);
  });
}

void reg_unary(const char* name, UnaryOp op, float alpha = 0.0f, float beta = 0.0f,
               const char* alpha_attr = nullptr, const char* beta_attr = nullptr) {
  register_builtin(
      std::string("onnx.") + name, [op, alpha, beta, alpha_attr, beta_attr](OpCall& c) {
        const Value& x = c.input(0);
        if (x.dtype() != Dtype::Float32) {
          // A few unary ops are common on integer shape values.
          if (x.dtype() == Dtype::Int64 &&
              (op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Identity ||
               op == UnaryOp::Relu || op == UnaryOp::Sign)) {
            Value out = new_value(Dtype::Int64, x.shape());
            const int64_t* p = x.data<int64_t>();
            int64_t* q = out.mutable_data<int64_t>();
            for (int64_t i = 0; i < x.numel(); ++i) {
              const int64_t v = p[i];
              q[i] = op == UnaryOp::Neg    ? -v
                     : op == UnaryOp::Abs  ? (v < 0 ? -v : v)
                     : op == UnaryOp::Relu ? std::max<int64_t>(v, 0)
                     : op == UnaryOp::Sign ? (v > 0) - (v < 0)
                                           : v;
            }
            c.outputs.push_back(out);
            return;
          }
          c.unsupported(std::string("element type ") + dtype_name(x.dtype()));
        }
        const float a = alpha_attr ? c.attr_float(alpha_attr, alpha) : alpha;
        const float b = beta_attr ? c.attr_float(beta_attr, beta) : beta;
        Value out = new_value(Dtype::Float32, x.shape());
        kernels::unary_f32(op, x.data<float>(), out.mutable_data<float>(), x.numel(), a, b);
        c.outputs.push_back(out);
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
  c.outputs.push_back(out);
}

const Dtype* onnx_dtype(int64_t code) {
  // TensorProto.DataType codes.
  static const Dtype kFloat = Dtype::Float32, kU8 = Dtype::UInt8, kI8 = Dtype::Int8,
                     kI16 = Dtype::Int16, kI32 = Dtype::Int32, kI64 = Dtype::Int64,
                     kBool = Dtype::Bool, kF64 = Dtype::Float64;
  switch (code) {
    case 1:
      return &kFloat;
    case 2:
      return &kU8;
    case 3:
      return &kI8;
    case 5:
      return &kI16;
    case 6:
      return &kI32;
    case 7:
      return &kI64;
    case 9:
      return &kBool;
    case 11:
      return &kF64;
    default:
      return nullptr;
  }
}

}  // namespace

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
    if (c.has_input(1)) lo = c.input(1).to_f32().at(0);
    if (c.has_input(2)) hi = c.input(2).to_f32().at(0);
    if (x.dtype() == Dtype::Int64) {
      // Bounds beyond int64's range clamp nothing.
      const int64_t lo_i = lo <= -9.2e18f ? INT64_MIN : static_cast<int64_t>(lo);
      const int64_t hi_i = hi >= 9.2e18f ? INT64_MAX : static_cast<int64_t>(hi);
      Value out = new_value(Dtype::Int64, x.shape());
      for (int64_t i = 0; i < x.numel(); ++i)
        out.mutable_data<int64_t>()[i] = std::min(hi_i, std::max(lo_i, x.data<int64_t>()[i]));
      c.outputs.push_back(out);
      return;
    }
    if (x.dtype() != Dtype::Float32)
      c.unsupported(std::string("element type ") + dtype_name(x.dtype()));
    Value out = new_value(Dtype::Float32, x.shape());
    kernels::unary_f32(UnaryOp::Clip, x.data<float>(), out.mutable_data<float>(), x.numel(), lo,
                       hi);
    c.outputs.push_back(out);
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
    c.outputs.push_back(out);
  });
  register_builtin("onnx.Softmax", [](OpCall& c) { softmax(c, false); });
  register_builtin("onnx.LogSoftmax", [](OpCall& c) { softmax(c, true); });
}

}  // namespace fx::exec
