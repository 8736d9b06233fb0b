// Lowering handlers of the remaining ops: TopK, ArgMax, CumSum, Trilu, Einsum, Pad,
// normalisations as functions, NonZero, Mod (LSTM: lower_layers.cpp).
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

// ---- the rest ----

void topk(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  std::vector<SymInt> k;
  if (!L.as_ints(L.in(n, 1), k) || k.size() != 1) L.unsupported(n, "K must be one int");
  const int64_t a = L.axis(n, L.attr_int(n, "axis", -1), L.rank(x));
  Node* r = L.call("torch.topk", {L.as_tensor(x), k[0].arg()},
                   {{"dim", static_cast<long long>(a)},
                    {"largest", L.attr_int(n, "largest", 1) != 0},
                    {"sorted", L.attr_int(n, "sorted", 1) != 0}});
  LVal v = L.tensor(L.call("operator.getitem", {r, 0LL}), n);
  LVal i = L.tensor(L.call("operator.getitem", {r, 1LL}), n);
  v.shape_of = i.shape_of = nullptr;
  L.set(n, std::vector<LVal>{v, i});
}

void arg_reduce(Lowerer& L, const Node& n, const char* f) {
  LVal x = L.in(n, 0);
  const int64_t a = L.axis(n, L.attr_int(n, "axis", 0), L.rank(x));
  const Kwargs keep{{"keepdim", L.attr_int(n, "keepdims", 1) != 0}};
  Node* t = L.as_tensor(x);
  if (!L.attr_int(n, "select_last_index", 0)) {
    L.set(n, L.tensor(L.call(f, {t, static_cast<long long>(a)}, keep), n));
    return;
  }
  // The last extreme: the first one of the flipped dim, counted from the end.
  Node* first = L.call(f, {L.method("flip", {t, int_list({a})}), static_cast<long long>(a)}, keep);
  const SymInt last = sym_add(L, L.size(x, a), -1);
  L.set(n, L.tensor(L.call("operator.sub", {last.arg(), first}), n));
}
void arg_max(Lowerer& L, const Node& n) { arg_reduce(L, n, "torch.argmax"); }
void arg_min(Lowerer& L, const Node& n) { arg_reduce(L, n, "torch.argmin"); }

void cum_sum(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  std::vector<SymInt> axis;
  Argument a;
  if (L.as_ints(L.in(n, 1), axis) && axis.size() == 1 && axis[0].value) {
    a = static_cast<long long>(L.axis(n, *axis[0].value, L.rank(x)));
  } else {  // a runtime axis (a graph input): torch takes it as a negative dim too
    a = L.method("item", {L.as_tensor(L.in(n, 1))});
  }
  Node* t = L.as_tensor(x);
  const bool reverse = L.attr_int(n, "reverse", 0) != 0;
  if (reverse) t = L.method("flip", {t, Argument::list({a})});
  Node* y = L.call("torch.cumsum", {t, a});
  if (L.attr_int(n, "exclusive", 0)) y = L.call("operator.sub", {y, t});  // each sum without itself
  if (reverse) y = L.method("flip", {y, Argument::list({a})});
  L.set(n, L.tensor(y, n));
}

void trilu(Lowerer& L, const Node& n) {
  Argument k = 0LL;
  if (L.in(n, 1).kind != Kind::None) {
    const std::vector<int64_t> v = L.static_ints(n, L.in(n, 1), "k");
    k = static_cast<long long>(v.at(0));
  }
  L.set(n, L.tensor(L.call(L.attr_int(n, "upper", 1) ? "torch.triu" : "torch.tril",
                           {L.as_tensor(L.in(n, 0)), k}),
                    n));
}

void einsum(Lowerer& L, const Node& n) {
  std::vector<Argument> args{L.attr_string(n, "equation", "")};
  for (size_t i = 0; i < L.num_inputs(n); ++i) args.push_back(L.as_tensor(L.in(n, i)));
  L.set(n, L.tensor(L.call("torch.einsum", args), n));
}

void pad(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const int64_t r = L.rank(x);
  std::vector<int64_t> pads;
  Argument value = 0.0;
  if (L.opset() < 11) {
    pads = L.attr_ints(n, "pads");
    value = float32_value(L.attr_float(n, "value", 0.0));
  } else {
    pads = L.static_ints(n, L.in(n, 1), "pads");
    if (L.in(n, 2).kind != Kind::None) value = L.as_operand(L.in(n, 2), 0);
    if (L.in(n, 3).kind != Kind::None) L.unsupported(n, "the axes input");
  }
  if (pads.size() != static_cast<size_t>(2 * r)) L.unsupported(n, "pads has the wrong length");
  Pads p{std::vector<int64_t>(pads.begin(), pads.begin() + r),
         std::vector<int64_t>(pads.begin() + r, pads.end())};
  std::vector<int64_t> order = p.torch_order();
  while (order.size() > 2 && order[order.size() - 1] == 0 && order[order.size() - 2] == 0)
    order.resize(order.size() - 2);  // untouched leading dims
  const std::string mode = L.attr_string(n, "mode", "constant");
  Kwargs kw;
  if (mode == "constant") {
    if (!(value.kind() == Argument::Kind::Float && value.to_double() == 0.0))
      kw.set("value", value);
  } else if (mode == "reflect" || mode == "edge") {
    kw.set("mode", mode == "edge" ? "replicate" : "reflect");
  } else {
    L.unsupported(n, "mode " + mode);
  }
  L.set(n, L.tensor(
               L.call("torch.nn.functional.pad", {L.as_tensor(x), int_list(order)}, std::move(kw)),
               n));
}

void instance_norm(Lowerer& L, const Node& n) {
  L.set(n, L.tensor(L.call("torch.nn.functional.instance_norm", {L.as_tensor(L.in(n, 0))},
                           {{"running_mean", Argument()},
                            {"running_var", Argument()},
                            {"weight", L.as_tensor(L.in(n, 1))},
                            {"bias", L.as_tensor(L.in(n, 2))},
                            {"use_input_stats", true},
                            {"momentum", 0.1},
                            {"eps", float32_value(L.attr_float(n, "epsilon", 1e-5))}}),
                    n));
}

void lrn(Lowerer& L, const Node& n) {
  L.set(n,
        L.tensor(L.call("torch.nn.functional.local_response_norm",
                        {L.as_tensor(L.in(n, 0)), static_cast<long long>(L.attr_int(n, "size", 1))},
                        {{"alpha", float32_value(L.attr_float(n, "alpha", 1e-4))},
                         {"beta", float32_value(L.attr_float(n, "beta", 0.75))},
                         {"k", float32_value(L.attr_float(n, "bias", 1.0))}}),
                 n));
}

void non_zero(Lowerer& L, const Node& n) {
  L.set(n, L.tensor(L.method("t", {L.call("torch.nonzero", {L.as_tensor(L.in(n, 0))})}), n));
}

void mod(Lowerer& L, const Node& n) {
  const bool fmod = L.attr_int(n, "fmod", 0) != 0;
  L.set(n, L.tensor(L.call(fmod ? "torch.fmod" : "torch.remainder",
                           {L.as_tensor(L.in(n, 0)), L.as_tensor(L.in(n, 1))}),
                    n));
}

}  // namespace

void add_other_handlers(std::vector<HandlerEntry>& table) {
  table.insert(table.end(), {
                                {"Mod", 10, mod},
                                {"NonZero", 9, non_zero},
                                {"ArgMax", 1, arg_max},
                                {"ArgMin", 1, arg_min},
                                {"CumSum", 11, cum_sum},
                                {"InstanceNormalization", 6, instance_norm},
                                {"LRN", 1, lrn},
                                {"TopK", 10, topk},
                                {"Einsum", 12, einsum},
                                {"Pad", 2, pad},
                                {"Pad", 11, pad},
                                {"Trilu", 14, trilu},
                            });
}

}  // namespace fx::torch_codegen
