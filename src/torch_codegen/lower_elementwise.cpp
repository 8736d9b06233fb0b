// Lowering handlers of elementwise ops: arithmetic (and its Python-int form for shape
// arithmetic), comparisons, activations, casts.
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

constexpr char kRelu[] = "torch.relu", kSigmoid[] = "torch.sigmoid", kTanh[] = "torch.tanh",
               kErf[] = "torch.erf", kSqrt[] = "torch.sqrt", kExp[] = "torch.exp",
               kLog[] = "torch.log", kAbs[] = "torch.abs", kNeg[] = "operator.neg",
               kReciprocal[] = "torch.reciprocal", kFloor[] = "torch.floor", kCeil[] = "torch.ceil",
               kSin[] = "torch.sin", kCos[] = "torch.cos", kTan[] = "torch.tan",
               kAsin[] = "torch.asin", kAcos[] = "torch.acos", kAtan[] = "torch.atan",
               kSinh[] = "torch.sinh", kCosh[] = "torch.cosh", kAsinh[] = "torch.asinh",
               kAcosh[] = "torch.acosh", kAtanh[] = "torch.atanh", kSign[] = "torch.sign",
               kRound[] = "torch.round", kIsNaN[] = "torch.isnan", kNot[] = "torch.bitwise_not",
               kSoftsign[] = "torch.nn.functional.softsign", kSoftplus[] = "torch._C._nn.softplus",
               kMish[] = "torch.nn.functional.mish", kHardSwish[] = "torch.nn.functional.hardswish",
               kAnd[] = "torch.logical_and", kOr[] = "torch.logical_or",
               kXor[] = "torch.logical_xor", kMaximum[] = "torch.maximum",
               kMinimum[] = "torch.minimum";

// ---- elementwise ----

template <const char* F>
void unary(Lowerer& L, const Node& n) {
  L.set(n, L.tensor(L.call(F, {L.as_tensor(L.in(n, 0))}), n));
}

void identity(Lowerer& L, const Node& n) {
  LVal v = L.in(n, 0);
  L.set(n, v);
}

// Integer arithmetic on Python ints (shape arithmetic), elementwise with broadcasting.
bool int_binary(Lowerer& L, const Node& n, const char* py_op, int64_t (*fold)(int64_t, int64_t)) {
  LVal a = L.in(n, 0), b = L.in(n, 1);
  if (!(a.kind == Kind::Ints || a.kind == Kind::Scalar || b.kind == Kind::Ints ||
        b.kind == Kind::Scalar))
    return false;
  std::vector<SymInt> x, y;
  if (!L.as_ints(a, x) || !L.as_ints(b, y)) return false;
  const bool vector = a.kind == Kind::Ints || b.kind == Kind::Ints ||
                      (a.constant && a.constant->shape.size() == 1) ||
                      (b.constant && b.constant->shape.size() == 1);
  const size_t len = std::max(x.size(), y.size());
  if ((x.size() != len && x.size() != 1) || (y.size() != len && y.size() != 1)) return false;
  LVal out;
  out.kind = vector ? Kind::Ints : Kind::Scalar;
  for (size_t i = 0; i < len; ++i) {
    const SymInt& l = x[x.size() == 1 ? 0 : i];
    const SymInt& r = y[y.size() == 1 ? 0 : i];
    if (l.value && r.value) {
      out.ints.push_back({fold(*l.value, *r.value), {}});
    } else {
      out.ints.push_back({std::nullopt, L.call(py_op, {l.arg(), r.arg()})});
    }
  }
  L.set(n, out);
  return true;
}

int64_t fold_add(int64_t a, int64_t b) { return a + b; }
int64_t fold_sub(int64_t a, int64_t b) { return a - b; }
int64_t fold_mul(int64_t a, int64_t b) { return a * b; }
int64_t fold_div(int64_t a, int64_t b) { return b == 0 ? 0 : a / b; }  // ONNX: truncation

// Fold null: no shape-arithmetic form (Pow).
template <const char* F, int64_t (*Fold)(int64_t, int64_t), const char* IntOp>
void binary(Lowerer& L, const Node& n) {
  if constexpr (Fold != nullptr)
    if (int_binary(L, n, IntOp, Fold)) return;
  LVal a = L.in(n, 0), b = L.in(n, 1);
  const int64_t ra = a.constant ? -1 : L.rank(a), rb = b.constant ? -1 : L.rank(b);
  Argument x = L.as_operand(a, rb), y = L.as_operand(b, ra);
  if (!x.is_node() && !y.is_node()) x = L.as_tensor(a);
  L.set(n, L.tensor(L.call(F, {x, y}), n));
}

constexpr char kAdd[] = "operator.add", kSub[] = "operator.sub", kMul[] = "operator.mul",
               kTrueDiv[] = "operator.truediv", kFloorDiv[] = "operator.floordiv",
               kPow[] = "operator.pow", kEq[] = "operator.eq", kLt[] = "operator.lt",
               kGt[] = "operator.gt", kLe[] = "operator.le", kGe[] = "operator.ge";

void div(Lowerer& L, const Node& n) {
  if (int_binary(L, n, kFloorDiv, fold_div)) return;
  LVal a = L.in(n, 0), b = L.in(n, 1);
  if (is_float(L.dtype(a))) {
    binary<kTrueDiv, fold_div, kFloorDiv>(L, n);
    return;
  }
  // Integer tensors: ONNX truncates toward zero.
  L.set(n, L.tensor(
               L.call("torch.div", {L.as_tensor(a), L.as_tensor(b)}, {{"rounding_mode", "trunc"}}),
               n));
}

void compare_like(Lowerer& L, const Node& n, const char* f) {
  LVal a = L.in(n, 0), b = L.in(n, 1);
  const int64_t ra = a.constant ? -1 : L.rank(a), rb = b.constant ? -1 : L.rank(b);
  Argument x = L.as_operand(a, rb), y = L.as_operand(b, ra);
  if (!x.is_node()) x = L.as_tensor(a);
  L.set(n, L.tensor(L.call(f, {x, y}), n));
}
template <const char* F>
void compare(Lowerer& L, const Node& n) {
  compare_like(L, n, F);
}

template <const char* F>
void tensor_binary(Lowerer& L, const Node& n) {
  L.set(n, L.tensor(L.call(F, {L.as_tensor(L.in(n, 0)), L.as_tensor(L.in(n, 1))}), n));
}

template <const char* F>
void variadic(Lowerer& L, const Node& n) {
  Node* acc = L.as_tensor(L.in(n, 0));
  for (size_t i = 1; i < L.num_inputs(n); ++i) acc = L.call(F, {acc, L.as_tensor(L.in(n, i))});
  L.set(n, L.tensor(acc, n));
}

void mean_variadic(Lowerer& L, const Node& n) {
  Node* acc = L.as_tensor(L.in(n, 0));
  for (size_t i = 1; i < L.num_inputs(n); ++i)
    acc = L.call("operator.add", {acc, L.as_tensor(L.in(n, i))});
  L.set(n, L.tensor(L.call("operator.truediv", {acc, static_cast<double>(L.num_inputs(n))}), n));
}

void clip(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  Kwargs kw;
  if (L.opset() < 11) {
    if (L.has_attr(n, "min")) kw.set("min", float32_value(L.attr_float(n, "min", 0)));
    if (L.has_attr(n, "max")) kw.set("max", float32_value(L.attr_float(n, "max", 0)));
  } else {
    const char* names[] = {"min", "max"};
    for (size_t i = 1; i <= 2; ++i) {
      LVal b = L.in(n, i);
      if (b.kind == Kind::None) continue;
      kw.set(names[i - 1], L.as_operand(b, 0));
    }
  }
  if (kw.empty()) {
    L.set(n, x);
    return;
  }
  L.set(n, L.tensor(L.call("torch.clamp", {L.as_tensor(x)}, std::move(kw)), n));
}

// The functional activations below are called in the form torch.fx records when it traces them
// (the input positional, every other parameter by keyword), so that a re-trace of the generated
// module prints this graph.
void leaky_relu(Lowerer& L, const Node& n) {
  L.set(n, L.tensor(L.call("torch.nn.functional.leaky_relu", {L.as_tensor(L.in(n, 0))},
                           {{"negative_slope", float32_value(L.attr_float(n, "alpha", 0.01))},
                            {"inplace", false}}),
                    n));
}

void elu(Lowerer& L, const Node& n) {
  L.set(n, L.tensor(L.call("torch.nn.functional.elu", {L.as_tensor(L.in(n, 0))},
                           {{"alpha", float32_value(L.attr_float(n, "alpha", 1.0))},
                            {"inplace", false}}),
                    n));
}

template <const char* F>
void inplace_false(Lowerer& L, const Node& n) {
  L.set(n, L.tensor(L.call(F, {L.as_tensor(L.in(n, 0))}, {{"inplace", false}}), n));
}

void gelu(Lowerer& L, const Node& n) {
  const std::string approx = L.attr_string(n, "approximate", "none");
  Kwargs kw;
  if (approx != "none") kw.set("approximate", approx);
  L.set(n, L.tensor(L.call("torch._C._nn.gelu", {L.as_tensor(L.in(n, 0))}, std::move(kw)), n));
}

void selu(Lowerer& L, const Node& n) {
  const double alpha = L.attr_float(n, "alpha", 1.67326319217681884765625);
  const double gamma = L.attr_float(n, "gamma", 1.05070102214813232421875);
  Node* x = L.as_tensor(L.in(n, 0));
  // torch's SELU constants are these in float64; other values need the formula.
  if (std::abs(alpha - 1.6732632423543772) < 1e-6 && std::abs(gamma - 1.0507009873554805) < 1e-6) {
    L.set(n, L.tensor(L.call("torch.nn.functional.selu", {x}, {{"inplace", false}}), n));
    return;
  }
  Node* neg = L.call("operator.mul", {L.call("operator.sub", {L.call("torch.exp", {x}), 1.0}),
                                      float32_value(alpha)});
  Node* y = L.call("torch.where", {L.call("operator.gt", {x, 0.0}), x, neg});
  L.set(n, L.tensor(L.call("operator.mul", {y, float32_value(gamma)}), n));
}

void hard_sigmoid(Lowerer& L, const Node& n) {
  const double alpha = float32_value(L.attr_float(n, "alpha", 0.2));
  const double beta = float32_value(L.attr_float(n, "beta", 0.5));
  Node* y =
      L.call("operator.add", {L.call("operator.mul", {L.as_tensor(L.in(n, 0)), alpha}), beta});
  L.set(n, L.tensor(L.call("torch.clamp", {y}, {{"min", 0.0}, {"max", 1.0}}), n));
}

void prelu(Lowerer& L, const Node& n) {
  Node* x = L.as_tensor(L.in(n, 0));
  Node* slope = L.as_tensor(L.in(n, 1));
  L.set(n, L.tensor(L.call("torch.where", {L.call("operator.ge", {x, 0.0}), x,
                                           L.call("operator.mul", {x, slope})}),
                    n));
}

void where(Lowerer& L, const Node& n) {
  L.set(n, L.tensor(L.call("torch.where", {L.as_tensor(L.in(n, 0)), L.as_tensor(L.in(n, 1)),
                                           L.as_tensor(L.in(n, 2))}),
                    n));
}

void cast(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const Dtype to =
      onnx::dtype_from_onnx(static_cast<int32_t>(L.attr_int(n, "to", 1)), "Cast attribute 'to'");
  if (to == Dtype::String || (x.kind == Kind::Tensor && L.dtype(x) == Dtype::String))
    L.unsupported(n, "PyTorch has no string tensors");
  if ((x.kind == Kind::Ints || x.kind == Kind::Scalar) &&
      (to == Dtype::Int64 || to == Dtype::Int32)) {
    L.set(n, x);
    return;
  }
  L.set(n, L.tensor(L.method("to", {L.as_tensor(x), to}), n));
}

}  // namespace

void add_elementwise_handlers(std::vector<HandlerEntry>& table) {
  table.insert(table.end(), {
                                {"Abs", 6, unary<kAbs>},
                                {"Acos", 7, unary<kAcos>},
                                {"Acosh", 9, unary<kAcosh>},
                                {"Add", 7, binary<kAdd, fold_add, kAdd>},
                                {"And", 7, tensor_binary<kAnd>},
                                {"Asin", 7, unary<kAsin>},
                                {"Asinh", 9, unary<kAsinh>},
                                {"Atan", 7, unary<kAtan>},
                                {"Atanh", 9, unary<kAtanh>},
                                {"Ceil", 6, unary<kCeil>},
                                {"Clip", 6, clip},
                                {"Clip", 11, clip},
                                {"Cos", 7, unary<kCos>},
                                {"Cosh", 9, unary<kCosh>},
                                {"Div", 7, div},
                                {"Elu", 6, elu},
                                {"Equal", 7, compare<kEq>},
                                {"Erf", 9, unary<kErf>},
                                {"Exp", 6, unary<kExp>},
                                {"Floor", 6, unary<kFloor>},
                                {"Gelu", 20, gelu},
                                {"Greater", 7, compare<kGt>},
                                {"GreaterOrEqual", 12, compare<kGe>},
                                {"HardSigmoid", 6, hard_sigmoid},
                                {"HardSwish", 14, inplace_false<kHardSwish>},
                                {"Identity", 1, identity},
                                {"IsNaN", 9, unary<kIsNaN>},
                                {"LeakyRelu", 6, leaky_relu},
                                {"Less", 7, compare<kLt>},
                                {"LessOrEqual", 12, compare<kLe>},
                                {"Log", 6, unary<kLog>},
                                {"Max", 8, variadic<kMaximum>},
                                {"Mean", 8, mean_variadic},
                                {"Min", 8, variadic<kMinimum>},
                                {"Mish", 18, inplace_false<kMish>},
                                {"Mul", 7, binary<kMul, fold_mul, kMul>},
                                {"Neg", 6, unary<kNeg>},
                                {"Not", 1, unary<kNot>},
                                {"Or", 7, tensor_binary<kOr>},
                                {"Pow", 7, binary<kPow, nullptr, kPow>},
                                {"PRelu", 7, prelu},
                                {"Reciprocal", 6, unary<kReciprocal>},
                                {"Relu", 6, unary<kRelu>},
                                {"Round", 11, unary<kRound>},
                                {"Selu", 6, selu},
                                {"Sigmoid", 6, unary<kSigmoid>},
                                {"Sign", 9, unary<kSign>},
                                {"Sin", 7, unary<kSin>},
                                {"Sinh", 9, unary<kSinh>},
                                {"Softplus", 1, unary<kSoftplus>},
                                {"Softsign", 1, unary<kSoftsign>},
                                {"Sqrt", 6, unary<kSqrt>},
                                {"Sub", 7, binary<kSub, fold_sub, kSub>},
                                {"Sum", 8, variadic<kAdd>},
                                {"Tan", 7, unary<kTan>},
                                {"Tanh", 6, unary<kTanh>},
                                {"Where", 9, where},
                                {"Xor", 7, tensor_binary<kXor>},
                                {"Cast", 6, cast},
                            });
}

}  // namespace fx::torch_codegen
