// Lowering handlers of the quantization ops, as the float formulas of ONNX's reference (what
// matters here is that the numbers are the executor's, not speed): QuantizeLinear is
// clamp(round(x / scale) + zero_point) (torch.round rounds half to even), DequantizeLinear
// (x - zero_point) * scale, and the integer products run in float64, which is exact for 8-bit
// operands (every partial sum stays far below 2^53), then requantize in float32 as the kernels do.
#include <string>
#include <vector>

#include "torch_codegen/lower_ops.h"

namespace fx::torch_codegen {

namespace {

using Kind = LVal::Kind;

Node* to(Lowerer& L, Node* t, Dtype d) { return L.method("to", {t, d}); }

// A per-axis parameter (1-D, C values) viewed to broadcast along `axis` of a rank-`rank` tensor;
// a one-element one as it is.
Node* along(Lowerer& L, const Node& n, const LVal& p, int64_t axis, int64_t rank) {
  Node* t = L.as_tensor(p);
  const auto s = L.shape(p);
  if (s.empty() || (s.size() == 1 && s[0] && *s[0] == 1)) return t;
  std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
  shape[static_cast<size_t>(L.axis(n, axis, rank))] = -1;
  return L.method("reshape", {t, int_list(shape)});
}

// The zero point input as float32 (0 when omitted), shaped like the scale.
Argument zero_point(Lowerer& L, const Node& n, size_t i, int64_t axis, int64_t rank) {
  LVal z = L.in(n, i);
  if (z.kind == Kind::None) return Argument(0.0);
  return to(L, along(L, n, z, axis, rank), Dtype::Float32);
}

Dtype quantized_dtype(Lowerer& L, const Node& n, size_t zp_input) {
  LVal z = L.in(n, zp_input);
  return z.kind == Kind::None ? Dtype::UInt8 : L.dtype(z);
}

// clamp(round(v) + zp) in the range of `d`, as `d`.
Node* saturate(Lowerer& L, Node* v, Argument zp, Dtype d) {
  Node* q = L.call("operator.add", {L.call("torch.round", {v}), zp});
  const double lo = d == Dtype::UInt8 ? 0.0 : -128.0, hi = d == Dtype::UInt8 ? 255.0 : 127.0;
  return to(L, L.call("torch.clamp", {q}, {{"min", lo}, {"max", hi}}), d);
}

void quantize_linear(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const int64_t rank = L.rank(x), axis = L.attr_int(n, "axis", 1);
  const Dtype d = quantized_dtype(L, n, 2);
  if (d != Dtype::UInt8 && d != Dtype::Int8)
    L.unsupported(n, std::string("quantizing to ") + dtype_name(d));
  Node* xf = L.dtype(x) == Dtype::Float32 ? L.as_tensor(x) : to(L, L.as_tensor(x), Dtype::Float32);
  Node* v = L.call("operator.truediv", {xf, along(L, n, L.in(n, 1), axis, rank)});
  L.set(n, L.tensor(saturate(L, v, zero_point(L, n, 2, axis, rank), d), n));
}

void dequantize_linear(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const int64_t rank = L.rank(x), axis = L.attr_int(n, "axis", 1);
  Node* xf = to(L, L.as_tensor(x), Dtype::Float32);
  Node* d = L.call("operator.sub", {xf, zero_point(L, n, 2, axis, rank)});
  L.set(n, L.tensor(L.call("operator.mul", {d, along(L, n, L.in(n, 1), axis, rank)}), n));
}

// onnxruntime's formula: the range [min(0, min x), max(0, max x)], scale 1 for an empty range.
void dynamic_quantize_linear(Lowerer& L, const Node& n) {
  Node* x = L.as_tensor(L.in(n, 0));
  Node* lo = L.call("torch.clamp", {L.method("min", {x})}, {{"max", 0.0}});
  Node* hi = L.call("torch.clamp", {L.method("max", {x})}, {{"min", 0.0}});
  Node* range = L.call("operator.sub", {hi, lo});
  Node* empty = to(L, L.call("operator.eq", {range, 0.0}), Dtype::Float32);
  Node* scale = L.call("operator.add", {L.call("operator.truediv", {range, 255.0}), empty});
  Node* zp = L.call(
      "torch.clamp",
      {L.call("torch.round", {L.call("operator.truediv", {L.call("operator.neg", {lo}), scale})})},
      {{"min", 0.0}, {"max", 255.0}});
  Node* y = saturate(L, L.call("operator.truediv", {x, scale}), zp, Dtype::UInt8);
  L.set(n, {L.tensor(y, n), L.tensor(scale, n), L.tensor(to(L, zp, Dtype::UInt8), n)});
}

// (v - zp) in float64; `axis` >= 0: zp per index along it (a per-row / per-channel zero point).
Node* centered(Lowerer& L, const Node& n, const LVal& v, size_t zp_input, int64_t axis) {
  Node* t = to(L, L.as_tensor(v), Dtype::Float64);
  LVal z = L.in(n, zp_input);
  if (z.kind == Kind::None) return t;
  const int64_t rank = L.rank(v);
  Node* zt = to(L, axis >= 0 ? along(L, n, z, axis, rank) : L.as_tensor(z), Dtype::Float64);
  return L.call("operator.sub", {t, zt});
}

// The product of a MatMulInteger / QLinearMatMul in float64 (exact).
Node* integer_matmul(Lowerer& L, const Node& n, size_t a, size_t azp, size_t b, size_t bzp) {
  LVal av = L.in(n, a);
  // A per-row a zero point (2-D A): along axis 0.
  const auto zs = L.in(n, azp).kind == Kind::None ? std::vector<std::optional<int64_t>>{}
                                                  : L.shape(L.in(n, azp));
  const bool per_row = zs.size() == 1 && zs[0] && *zs[0] > 1;
  return L.call("operator.matmul",
                {centered(L, n, av, azp, per_row ? 0 : -1), centered(L, n, L.in(n, b), bzp, -1)});
}

// The convolution of a ConvInteger / QLinearConv in float64 (exact); w's zero point per output
// channel.
Node* integer_conv(Lowerer& L, const Node& n, size_t x, size_t xzp, size_t w, size_t wzp) {
  LVal xv = L.in(n, x), wv = L.in(n, w);
  const auto ws = L.shape(wv);
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
  Pads p = spatial_pads(L, n, xv, kernel, strides, dil);
  Node* t = centered(L, n, xv, xzp, -1);  // padding is then 0: the zero point's value
  std::vector<int64_t> padding = p.begin;
  if (!p.symmetric()) {
    t = L.call("torch.nn.functional.pad", {t, int_list(p.torch_order())});
    padding.assign(d, 0);
  }
  const std::string f = "torch.conv" + std::to_string(d) + "d";
  return L.call(f.c_str(), {t, centered(L, n, wv, wzp, 0), Argument()},
                {{"stride", int_list(strides)},
                 {"padding", int_list(padding)},
                 {"dilation", int_list(dil)},
                 {"groups", static_cast<long long>(groups)}});
}

void matmul_integer(Lowerer& L, const Node& n) {
  L.set(n, L.tensor(to(L, integer_matmul(L, n, 0, 2, 1, 3), Dtype::Int32), n));
}

void conv_integer(Lowerer& L, const Node& n) {
  L.set(n, L.tensor(to(L, integer_conv(L, n, 0, 2, 1, 3), Dtype::Int32), n));
}

// round(float32(acc) * float32(a_scale * b_scale / y_scale)) + y_zero_point, saturated: the
// executor's requantization. `channel_axis`: the axis of per-channel b scales in acc.
void requantize(Lowerer& L, const Node& n, Node* acc, size_t as, size_t bs, int64_t channel_axis,
                int64_t rank) {
  Node* ab = L.call("operator.mul", {L.as_tensor(L.in(n, as)), L.as_tensor(L.in(n, bs))});
  Node* mult = L.call("operator.truediv", {ab, L.as_tensor(L.in(n, 6))});
  const auto bshape = L.shape(L.in(n, bs));
  if (channel_axis >= 0 && bshape.size() == 1 && (!bshape[0] || *bshape[0] > 1)) {
    std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
    shape[static_cast<size_t>(channel_axis)] = -1;
    mult = L.method("reshape", {mult, int_list(shape)});
  }
  Node* v = L.call("operator.mul", {to(L, acc, Dtype::Float32), mult});
  const Dtype d = quantized_dtype(L, n, 7);
  LVal z = L.in(n, 7);
  Argument zp =
      z.kind == Kind::None ? Argument(0.0) : Argument(to(L, L.as_tensor(z), Dtype::Float32));
  L.set(n, L.tensor(saturate(L, v, zp, d), n));
}

void qlinear_matmul(Lowerer& L, const Node& n) {
  Node* acc = integer_matmul(L, n, 0, 2, 3, 5);
  requantize(L, n, acc, 1, 4, L.rank(L.tensor(nullptr, n)) - 1, L.rank(L.tensor(nullptr, n)));
}

void qlinear_conv(Lowerer& L, const Node& n) {
  Node* acc = integer_conv(L, n, 0, 2, 3, 5);
  const int64_t rank = L.rank(L.in(n, 0));
  LVal b = L.in(n, 8);
  if (b.kind != Kind::None) {
    std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
    shape[1] = -1;
    acc = L.call(
        "operator.add",
        {acc, L.method("reshape", {to(L, L.as_tensor(b), Dtype::Float64), int_list(shape)})});
  }
  requantize(L, n, acc, 1, 4, 1, rank);
}

}  // namespace

void add_quant_handlers(std::vector<HandlerEntry>& table) {
  table.insert(table.end(), {
                                {"QuantizeLinear", 10, quantize_linear},
                                {"QuantizeLinear", 13, quantize_linear},
                                {"DequantizeLinear", 10, dequantize_linear},
                                {"DequantizeLinear", 13, dequantize_linear},
                                {"DynamicQuantizeLinear", 11, dynamic_quantize_linear},
                                {"MatMulInteger", 10, matmul_integer},
                                {"ConvInteger", 10, conv_integer},
                                {"QLinearMatMul", 10, qlinear_matmul},
                                {"QLinearConv", 10, qlinear_conv},
                            });
}

}  // namespace fx::torch_codegen
