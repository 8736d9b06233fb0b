// Lowering handlers of the math ops of the executor's ops_math.cpp that have no elementwise
// twin: Celu, ThresholdedRelu, Shrink, IsInf, BitShift, CastLike, Hardmax, EyeLike, Det, the
// window functions and ReduceLogSum.
#include <string>
#include <vector>

#include "fx/onnx.h"
#include "torch_codegen/lower_ops.h"

namespace fx::torch_codegen {

namespace {

void celu(Lowerer& L, const Node& n) {
  Node* t = L.as_tensor(L.in(n, 0));
  L.set(n, L.tensor(L.call("torch.nn.functional.celu", {t},
                           {{"alpha", float32_value(L.attr_float(n, "alpha", 1.0))}}),
                    n));
}

// ThresholdedRelu is F.threshold: x where x > alpha, else 0.
void thresholded_relu(Lowerer& L, const Node& n) {
  Node* t = L.as_tensor(L.in(n, 0));
  L.set(n, L.tensor(L.call("torch.nn.functional.threshold",
                           {t, float32_value(L.attr_float(n, "alpha", 1.0)), Argument(0.0)}),
                    n));
}

// Shrink: x + bias below -lambd, x - bias above lambd, 0 between (softshrink when bias = lambd,
// hardshrink when bias = 0; torch.where covers every bias and integer inputs).
void shrink(Lowerer& L, const Node& n) {
  Node* t = L.as_tensor(L.in(n, 0));
  const double lambd = float32_value(L.attr_float(n, "lambd", 0.5));
  const double bias = float32_value(L.attr_float(n, "bias", 0.0));
  Node* above = L.call("torch.where", {L.call("operator.gt", {t, Argument(lambd)}),
                                       L.call("operator.sub", {t, Argument(bias)}),
                                       L.call("torch.zeros_like", {t})});
  Node* y = L.call("torch.where", {L.call("operator.lt", {t, Argument(-lambd)}),
                                   L.call("operator.add", {t, Argument(bias)}), above});
  L.set(n, L.tensor(y, n));
}

void is_inf(Lowerer& L, const Node& n) {
  Node* t = L.as_tensor(L.in(n, 0));
  const bool neg = L.attr_int(n, "detect_negative", 1) != 0;
  const bool pos = L.attr_int(n, "detect_positive", 1) != 0;
  Node* y = neg && pos ? L.call("torch.isinf", {t})
            : pos      ? L.call("torch.isposinf", {t})
            : neg      ? L.call("torch.isneginf", {t})
                       : L.call("torch.zeros_like", {t}, {{"dtype", Dtype::Bool}});
  L.set(n, L.tensor(y, n));
}

void bit_shift(Lowerer& L, const Node& n) {
  const std::string dir = L.attr_string(n, "direction", "");
  if (dir != "LEFT" && dir != "RIGHT") L.unsupported(n, "direction '" + dir + "'");
  Node* a = L.as_tensor(L.in(n, 0));
  Node* b = L.as_tensor(L.in(n, 1));
  L.set(n, L.tensor(L.call(dir == "LEFT" ? "torch.bitwise_left_shift" : "torch.bitwise_right_shift",
                           {a, b}),
                    n));
}

void cast_like(Lowerer& L, const Node& n) {
  const Dtype to = L.dtype(L.in(n, 1));
  if (to == Dtype::String || L.dtype(L.in(n, 0)) == Dtype::String)
    L.unsupported(n, "PyTorch has no string tensors");
  L.set(n, L.tensor(L.method("to", {L.as_tensor(L.in(n, 0)), to}), n));
}

// Hardmax: one_hot of the first maximum's index, the class dim moved back to `axis`. Before
// opset 13 the input is coerced to 2-D at `axis` (the trailing dims flattened together).
void hardmax(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const int64_t r = L.rank(x);
  const Dtype dt = L.dtype(x);
  Node* t = L.as_tensor(x);
  if (L.opset() >= 13) {
    const int64_t a = L.axis(n, L.attr_int(n, "axis", -1), r);
    Node* idx = L.call("torch.argmax", {t, static_cast<long long>(a)});
    Node* y = L.call("torch.nn.functional.one_hot", {idx, L.size(x, a).arg()});
    if (a != r - 1) y = L.method("movedim", {y, -1LL, static_cast<long long>(a)});
    L.set(n, L.tensor(L.method("to", {y, dt}), n));
    return;
  }
  const int64_t a = L.axis(n, L.attr_int(n, "axis", 1), r);
  Node* flat = L.method("flatten", {t, static_cast<long long>(a)});
  Node* idx = L.call("torch.argmax", {flat, -1LL});
  Node* y = L.call("torch.nn.functional.one_hot", {idx, L.method("size", {flat, -1LL})});
  std::vector<SymInt> dims;
  for (int64_t d = 0; d < r; ++d) dims.push_back(L.size(x, d));
  y = L.method("reshape", {y, Lowerer::list_arg(dims)});
  L.set(n, L.tensor(L.method("to", {y, dt}), n));
}

// EyeLike: ones kept on diagonal k only (triu(k) then tril(k)).
void eye_like(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  if (L.rank(x) != 2) L.unsupported(n, "an input that is not 2-D");
  const Dtype dt = L.has_attr(n, "dtype")
                       ? onnx::dtype_from_onnx(static_cast<int32_t>(L.attr_int(n, "dtype", 1)),
                                               "EyeLike attribute 'dtype'")
                       : L.dtype(x);
  const long long k = L.attr_int(n, "k", 0);
  Node* ones =
      L.call("torch.ones", {Lowerer::list_arg({L.size(x, 0), L.size(x, 1)})}, {{"dtype", dt}});
  L.set(n, L.tensor(L.method("tril", {L.method("triu", {ones, k}), k}), n));
}

void det(Lowerer& L, const Node& n) {
  L.set(n, L.tensor(L.call("torch.linalg.det", {L.as_tensor(L.in(n, 0))}), n));
}

constexpr char kHann[] = "torch.hann_window", kHamming[] = "torch.hamming_window",
               kBlackman[] = "torch.blackman_window";

// torch's windows have ONNX's formulas (Hamming with alpha 25/46, beta 21/46); an integer
// output_datatype converts the float64 window.
template <const char* F>
void window(Lowerer& L, const Node& n) {
  std::vector<SymInt> size;
  Argument len;
  if (L.as_ints(L.in(n, 0), size) && size.size() == 1)
    len = size[0].arg();
  else
    len = L.method("item", {L.as_tensor(L.in(n, 0))});
  const Dtype dt = onnx::dtype_from_onnx(static_cast<int32_t>(L.attr_int(n, "output_datatype", 1)),
                                         "output_datatype");
  const Dtype fdt = is_float(dt) ? dt : Dtype::Float64;
  Kwargs kw{{"periodic", L.attr_int(n, "periodic", 1) != 0}, {"dtype", fdt}};
  if (std::string(F) == "torch.hamming_window") {
    kw.set("alpha", 25.0 / 46.0);
    kw.set("beta", 21.0 / 46.0);
  }
  Node* y = L.call(F, {len}, std::move(kw));
  if (fdt != dt) y = L.method("to", {y, dt});
  L.set(n, L.tensor(y, n));
}

// ReduceLogSum: log of the sum over `axes` (an input from opset 18).
void reduce_log_sum(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const int64_t r = L.rank(x);
  std::vector<int64_t> axes = axes_of(L, n, 1, 18);
  if (axes.empty()) {
    if (L.attr_int(n, "noop_with_empty_axes", 0)) {
      L.set(n, x);
      return;
    }
    for (int64_t d = 0; d < r; ++d) axes.push_back(d);
  }
  for (int64_t& a : axes) a = L.axis(n, a, r);
  Node* s = L.method("sum", {L.as_tensor(x), int_list(axes)},
                     {{"keepdim", L.attr_int(n, "keepdims", 1) != 0}});
  L.set(n, L.tensor(L.method("log", {s}), n));
}

}  // namespace

void add_math_handlers(std::vector<HandlerEntry>& table) {
  table.insert(table.end(), {
                                {"Celu", 12, celu},
                                {"ThresholdedRelu", 10, thresholded_relu},
                                {"Shrink", 9, shrink},
                                {"IsInf", 10, is_inf},
                                {"BitShift", 11, bit_shift},
                                {"CastLike", 15, cast_like},
                                {"Hardmax", 1, hardmax},
                                {"EyeLike", 9, eye_like},
                                {"Det", 11, det},
                                {"HannWindow", 17, window<kHann>},
                                {"HammingWindow", 17, window<kHamming>},
                                {"BlackmanWindow", 17, window<kBlackman>},
                                {"ReduceLogSum", 1, reduce_log_sum},
                            });
}

}  // namespace fx::torch_codegen
