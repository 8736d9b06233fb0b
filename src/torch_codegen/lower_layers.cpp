// Lowering handlers of the losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss as
// F.nll_loss after F.log_softmax), MeanVarianceNormalization, Dropout (training too), the random
// ops, and the recurrent layers RNN/GRU/LSTM: torch.nn.RNN/GRU/LSTM when torch's cell is ONNX's
// (for GRU: linear_before_reset = 1), else the recurrence unrolled over the (static) sequence
// length in torch ops.
#include <cstring>

#include "fx/onnx.h"
#include "torch_codegen/lower_ops.h"

namespace fx::torch_codegen {

namespace {

using Kind = LVal::Kind;

Node* op2(Lowerer& L, const char* op, Argument a, Argument b) { return L.call(op, {a, b}); }
Node* add(Lowerer& L, Argument a, Argument b) { return op2(L, "operator.add", a, b); }
Node* sub(Lowerer& L, Argument a, Argument b) { return op2(L, "operator.sub", a, b); }
Node* mul(Lowerer& L, Argument a, Argument b) { return op2(L, "operator.mul", a, b); }
Node* item(Lowerer& L, Node* v, int64_t k) {
  return L.call("operator.getitem", {v, static_cast<long long>(k)});
}
// Piece k of v.chunk(n, dim).
Node* piece(Lowerer& L, Node* v, int64_t n, int64_t dim, int64_t k) {
  return item(L, L.method("chunk", {v, static_cast<long long>(n), static_cast<long long>(dim)}), k);
}

// ---- losses ----

// F.nll_loss(logp, target, weight, ignore_index, reduction): ONNX's loss exactly (a mean over
// weights divides by the weights of the targets that count).
Node* nll(Lowerer& L, const Node& n, Node* logp) {
  LVal target = L.in(n, 1), weight = L.in(n, 2);
  Node* t = L.as_tensor(target);
  if (L.dtype(target) != Dtype::Int64) t = L.method("long", {t});
  Kwargs kw;
  if (weight.kind != Kind::None) kw.set("weight", L.as_tensor(weight));
  // torch's default ignore_index (-100) never matches: ONNX targets without one are in [0, C).
  if (L.has_attr(n, "ignore_index"))
    kw.set("ignore_index", static_cast<long long>(L.attr_int(n, "ignore_index", -100)));
  const std::string reduction = L.attr_string(n, "reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    L.unsupported(n, "reduction '" + reduction + "'");
  kw.set("reduction", reduction);
  return L.call("torch.nn.functional.nll_loss", {logp, t}, std::move(kw));
}

void nll_loss(Lowerer& L, const Node& n) {
  L.set(n, L.tensor(nll(L, n, L.as_tensor(L.in(n, 0))), n));
}

void softmax_cross_entropy(Lowerer& L, const Node& n) {
  Node* logp = L.call("torch.nn.functional.log_softmax", {L.as_tensor(L.in(n, 0))}, {{"dim", 1LL}});
  L.set(n, std::vector<LVal>{L.tensor(nll(L, n, logp), n), L.tensor(logp, n)});
}

// ---- normalisation, dropout, random ----

// (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9) over `axes`, as ONNX's function body.
void mean_variance_normalization(Lowerer& L, const Node& n) {
  LVal xv = L.in(n, 0);
  const int64_t r = L.rank(xv);
  std::vector<int64_t> axes;
  for (int64_t a : L.attr_ints(n, "axes", {0, 2, 3})) axes.push_back(L.axis(n, a, r));
  Node* x = L.as_tensor(xv);
  Node* mean = L.method("mean", {x, int_list(axes)}, {{"keepdim", true}});
  Node* sq = L.method("mean", {mul(L, x, x), int_list(axes)}, {{"keepdim", true}});
  Node* sd = L.call("torch.sqrt", {sub(L, sq, mul(L, mean, mean))});
  L.set(n, L.tensor(L.call("operator.truediv", {sub(L, x, mean), add(L, sd, 1e-9)}), n));
}

// The value of a one-element constant input, or nullopt when it is not constant.
std::optional<double> constant_scalar(Lowerer& L, const Node& n, size_t i) {
  const Tensor* t = old_constant(L.source(), n.args().size() > i ? n.args()[i] : Argument());
  if (!t || !t->has_data() || t->numel() != 1) return std::nullopt;
  const Bytes b = t->bytes();
  switch (t->dtype) {
    case Dtype::Float32: {
      float v;
      std::memcpy(&v, b->data(), sizeof v);
      return v;
    }
    case Dtype::Float64: {
      double v;
      std::memcpy(&v, b->data(), sizeof v);
      return v;
    }
    case Dtype::Bool:
    case Dtype::UInt8:
      return (*b)[0] != 0;
    default:
      return std::nullopt;
  }
}

// Inference (and training with ratio 0): the identity, mask all true. Training with a ratio p:
// mask = rand_like(x) >= p, y = where(mask, x / (1 - p), 0) (F.dropout's rule, with the mask
// kept for output 1). A training_mode or ratio that is not a constant is read at run time:
// p = training * ratio, which is the identity when training is false.
void dropout(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0), ratio_in = L.in(n, 1), training_in = L.in(n, 2);
  std::optional<double> training = L.attr_int(n, "training_mode", 0) != 0;
  if (training_in.kind != Kind::None) training = constant_scalar(L, n, 2);
  std::optional<double> ratio = L.attr_float(n, "ratio", 0.5);
  if (ratio_in.kind != Kind::None) ratio = constant_scalar(L, n, 1);
  const bool mask_used = output_used(n, 1);
  if ((training && *training == 0) || (ratio && *ratio == 0)) {
    LVal mask;
    if (mask_used)
      mask = L.tensor(L.call("torch.ones_like", {L.as_tensor(x)}, {{"dtype", Dtype::Bool}}), n);
    L.set(n, std::vector<LVal>{x, mask});
    return;
  }
  Node* xt = L.as_tensor(x);
  Argument p = ratio ? Argument(*ratio) : Argument(L.as_tensor(ratio_in));
  if (!training) p = mul(L, L.as_tensor(training_in), p);
  Node* mask = L.call("operator.ge", {L.call("torch.rand_like", {xt}), p});
  Node* y = L.call("torch.where", {mask, L.call("operator.truediv", {xt, sub(L, 1.0, p)}),
                                   L.call("torch.zeros_like", {xt})});
  L.set(n, std::vector<LVal>{L.tensor(y, n), L.tensor(mask, n)});
}

// The dtype attribute of a random op (a TensorProto code), or `fallback`.
Dtype random_dtype(Lowerer& L, const Node& n, Dtype fallback) {
  if (!L.has_attr(n, "dtype")) return fallback;
  return onnx::dtype_from_onnx(static_cast<int32_t>(L.attr_int(n, "dtype", 1)), "dtype");
}

// low + (high - low) * U[0, 1) and mean + scale * N(0, 1); the seed is not carried over (torch
// has one generator per process: torch.manual_seed).
void random_op(Lowerer& L, const Node& n, bool normal, bool like) {
  Node* base;
  if (like) {
    LVal x = L.in(n, 0);
    base = L.call(normal ? "torch.randn_like" : "torch.rand_like", {L.as_tensor(x)},
                  {{"dtype", random_dtype(L, n, L.dtype(x))}});
  } else {
    base = L.call(normal ? "torch.randn" : "torch.rand", {int_list(L.attr_ints(n, "shape"))},
                  {{"dtype", random_dtype(L, n, Dtype::Float32)}});
  }
  const double a = float32_value(L.attr_float(n, normal ? "mean" : "low", 0.0));
  const double b = float32_value(L.attr_float(n, normal ? "scale" : "high", 1.0));
  const double scale = normal ? b : b - a;
  Node* y = scale == 1.0 ? base : mul(L, base, scale);
  if (a != 0.0) y = add(L, y, a);
  L.set(n, L.tensor(y, n));
}

void bernoulli(Lowerer& L, const Node& n) {
  LVal p = L.in(n, 0);
  Node* y = L.call("torch.bernoulli", {L.as_tensor(p)});
  const Dtype d = random_dtype(L, n, L.dtype(p));
  if (d != L.dtype(p)) y = L.method("to", {y, d});
  L.set(n, L.tensor(y, n));
}

// ---- recurrent layers ----

enum class Cell { Rnn, Gru, Lstm };

struct Act {
  std::string name;
  double alpha = 0, beta = 0;
};

// The activations of each direction (defaults when the attribute is absent; one list for both
// directions when given once), with alpha/beta consumed in order as onnxruntime does.
std::vector<Act> activations(Lowerer& L, const Node& n, Cell cell, int64_t dirs) {
  const std::vector<std::string> defaults =
      cell == Cell::Rnn   ? std::vector<std::string>{"Tanh"}
      : cell == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                          : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  std::vector<std::string> names;
  if (const Argument* a = n.kwargs().find("activations"))
    for (const Argument& e : a->elements()) names.push_back(e.to_string());
  if (names.empty())
    for (int64_t d = 0; d < dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  if (names.size() == defaults.size() && dirs == 2)
    names.insert(names.end(), names.begin(), names.end());
  if (names.size() != defaults.size() * static_cast<size_t>(dirs))
    L.unsupported(n, "an activations list of " + std::to_string(names.size()) + " functions");
  auto floats = [&](const char* k) {
    std::vector<double> v;
    if (const Argument* a = n.kwargs().find(k))
      for (const Argument& e : a->elements()) v.push_back(float32_value(e.to_double()));
    return v;
  };
  const std::vector<double> alphas = floats("activation_alpha"), betas = floats("activation_beta");
  size_t ai = 0, bi = 0;
  std::vector<Act> out;
  for (const std::string& s : names) {
    Act a{s};
    double da = 0, db = 0;
    bool ua = true, ub = false;
    if (s == "Relu" || s == "Tanh" || s == "Sigmoid" || s == "Softsign" || s == "Softplus") {
      ua = false;
    } else if (s == "Affine") {
      da = 1, ub = true;
    } else if (s == "LeakyRelu") {
      da = 0.01;
    } else if (s == "ThresholdedRelu" || s == "Elu") {
      da = 1;
    } else if (s == "ScaledTanh") {
      da = 1, db = 1, ub = true;
    } else if (s == "HardSigmoid") {
      da = 0.2, db = 0.5, ub = true;
    } else {
      L.unsupported(n, "activation function '" + s + "'");
    }
    if (ua) a.alpha = ai < alphas.size() ? alphas[ai++] : da;
    if (ub) a.beta = bi < betas.size() ? betas[bi++] : db;
    out.push_back(a);
  }
  return out;
}

Node* apply(Lowerer& L, const Act& a, Node* x) {
  const std::string& s = a.name;
  if (s == "Sigmoid") return L.call("torch.sigmoid", {x});
  if (s == "Tanh") return L.call("torch.tanh", {x});
  if (s == "Relu") return L.call("torch.relu", {x});
  if (s == "Softsign") return L.call("torch.nn.functional.softsign", {x});
  if (s == "Softplus") return L.call("torch._C._nn.softplus", {x});
  if (s == "Affine") return add(L, mul(L, x, a.alpha), a.beta);
  // The functional calls in the form torch.fx records (other parameters by keyword).
  if (s == "LeakyRelu")
    return L.call("torch.nn.functional.leaky_relu", {x},
                  {{"negative_slope", a.alpha}, {"inplace", false}});
  if (s == "Elu")
    return L.call("torch.nn.functional.elu", {x}, {{"alpha", a.alpha}, {"inplace", false}});
  if (s == "ScaledTanh") return mul(L, L.call("torch.tanh", {mul(L, x, a.beta)}), a.alpha);
  if (s == "HardSigmoid")
    return L.call("torch.clamp", {add(L, mul(L, x, a.alpha), a.beta), 0.0, 1.0});
  // ThresholdedRelu
  return mul(L, x, L.call("operator.gt", {x, a.alpha}));
}

// The gate blocks of direction `dir` of a [dirs, gates * hidden, k] weight (or [dirs, 2 * gates
// * hidden] bias, as k = 1 rows) reordered from ONNX's gate order to torch's.
Tensor gate_rows(const Tensor& t, int64_t dir, int64_t hidden, const std::vector<int>& order) {
  Bytes src = t.bytes();
  const int64_t gates = static_cast<int64_t>(order.size());
  const int64_t k = t.shape.size() == 3 ? t.shape[2] : 1;
  const size_t es = dtype_size(t.dtype);
  const size_t block = static_cast<size_t>(hidden * k) * es;
  const uint8_t* base = src->data() + static_cast<size_t>(dir * gates) * block;
  auto out = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(gates) * block);
  for (int64_t g = 0; g < gates; ++g)
    std::memcpy(out->data() + g * block, base + order[g] * block, block);
  Tensor r;
  r.dtype = t.dtype;
  r.shape = t.shape.size() == 3 ? std::vector<int64_t>{gates * hidden, k}
                                : std::vector<int64_t>{gates * hidden};
  r.data = std::move(out);
  return r;
}

struct Recurrent {
  Cell cell;
  int64_t gates, dirs, hidden;
  bool reverse_only, batch_first;
  std::vector<Act> acts;
};

// Whether torch.nn.RNN/GRU/LSTM computes exactly this node.
bool fits_module(Lowerer& L, const Node& n, const Recurrent& r) {
  for (size_t i : {size_t{1}, size_t{2}, size_t{3}}) {
    LVal v = L.in(n, i);
    if (i == 3 && v.kind == Kind::None) continue;
    if (!v.constant || !v.constant->has_data()) return false;
  }
  if (r.reverse_only || L.in(n, 4).kind != Kind::None || L.has_attr(n, "clip")) return false;
  if (r.cell == Cell::Lstm && (L.in(n, 7).kind != Kind::None || L.attr_int(n, "input_forget", 0)))
    return false;
  if (r.cell == Cell::Gru && !L.attr_int(n, "linear_before_reset", 0)) return false;
  for (int64_t d = 0; d < r.dirs; ++d) {
    const size_t per = r.acts.size() / static_cast<size_t>(r.dirs);
    for (size_t k = 0; k < per; ++k) {
      const std::string& s = r.acts[static_cast<size_t>(d) * per + k].name;
      if (r.cell == Cell::Rnn) {
        if ((s != "Tanh" && s != "Relu") || s != r.acts[0].name) return false;
      } else if (s != (k == 0 ? "Sigmoid" : "Tanh")) {
        return false;
      }
    }
  }
  return true;
}

// Y [seq, batch, dirs * hidden] of a torch module -> ONNX's Y, and the states -> ONNX's.
void module_form(Lowerer& L, const Node& n, const Recurrent& r) {
  LVal x = L.in(n, 0), w = L.in(n, 1), rr = L.in(n, 2), b = L.in(n, 3);
  const int64_t H = r.hidden, input = w.constant->shape[2];
  std::string repr = std::to_string(input) + ", " + std::to_string(H);
  if (r.cell == Cell::Rnn && r.acts[0].name == "Relu") repr += ", nonlinearity='relu'";
  if (b.kind == Kind::None) repr += ", bias=False";
  if (r.batch_first) repr += ", batch_first=True";
  if (r.dirs == 2) repr += ", bidirectional=True";
  const char* type = r.cell == Cell::Rnn ? "RNN" : r.cell == Cell::Gru ? "GRU" : "LSTM";
  auto m = std::make_shared<Module>(type, repr);
  // ONNX LSTM i, o, f, c -> torch i, f, g, o; GRU z, r, h -> r, z, n.
  const std::vector<int> order = r.cell == Cell::Lstm  ? std::vector<int>{0, 2, 3, 1}
                                 : r.cell == Cell::Gru ? std::vector<int>{1, 0, 2}
                                                       : std::vector<int>{0};
  const int64_t G = r.gates;
  for (int64_t d = 0; d < r.dirs; ++d) {
    const std::string suffix = d ? "_l0_reverse" : "_l0";
    Lowerer::put_parameter(*m, "weight_ih" + suffix, gate_rows(*w.constant, d, H, order));
    Lowerer::put_parameter(*m, "weight_hh" + suffix, gate_rows(*rr.constant, d, H, order));
    if (b.kind != Kind::None) {
      // B is [dirs, 2 * G * hidden]: the input biases, then the recurrent ones.
      Tensor halves = reshaped(*b.constant, {r.dirs * 2, G * H});
      Lowerer::put_parameter(*m, "bias_ih" + suffix, gate_rows(halves, 2 * d, H, order));
      Lowerer::put_parameter(*m, "bias_hh" + suffix, gate_rows(halves, 2 * d + 1, H, order));
    }
  }
  const std::string path = L.add_module(n, LVal{},
                                        std::string(type) == "LSTM" ? "lstm"
                                        : r.cell == Cell::Gru       ? "gru"
                                                                    : "rnn",
                                        m);
  std::vector<Argument> args{L.as_tensor(x)};
  LVal h0 = L.in(n, 5), c0 = L.in(n, 6);
  auto state = [&](Node* s) { return r.batch_first ? L.method("transpose", {s, 0LL, 1LL}) : s; };
  if (r.cell == Cell::Lstm) {
    if (h0.kind != Kind::None || c0.kind != Kind::None) {
      Node* h = h0.kind != Kind::None ? L.as_tensor(h0) : nullptr;
      Node* c = c0.kind != Kind::None ? L.as_tensor(c0) : nullptr;
      if (!h) h = L.call("torch.zeros_like", {c});
      if (!c) c = L.call("torch.zeros_like", {h});
      args.push_back(Argument::tuple({state(h), state(c)}));
    }
  } else if (h0.kind != Kind::None) {
    args.push_back(state(L.as_tensor(h0)));
  }
  Node* call = L.module(path, args);
  Node* out = item(L, call, 0);
  Node* states = item(L, call, 1);
  // A reshape with the sizes of x (not unflatten, which torch.onnx.export cannot export).
  Node* y =
      L.method("reshape",
               {out, Argument::list({L.size(x, 0).arg(), L.size(x, 1).arg(),
                                     static_cast<long long>(r.dirs), static_cast<long long>(H)})});
  if (!r.batch_first) y = L.method("transpose", {y, 1LL, 2LL});
  std::vector<Node*> outs{y};
  if (r.cell == Cell::Lstm) {
    outs.push_back(state(item(L, states, 0)));
    outs.push_back(state(item(L, states, 1)));
  } else {
    outs.push_back(state(states));
  }
  std::vector<LVal> vals;
  for (Node* v : outs) vals.push_back(L.tensor(v, n));
  L.set(n, vals);
}

// The recurrence written out step by step (the sequence length must be static): ONNX's
// equations with its gate order, sequence_lens as a mask (state kept, Y zero past an entry's
// length), peepholes, input_forget, clip and any activation.
void unrolled_form(Lowerer& L, const Node& n, const Recurrent& r) {
  LVal xv = L.in(n, 0);
  const auto xs = L.shape(xv);
  const size_t seq_axis = r.batch_first ? 1 : 0;
  if (xs.size() != 3 || !xs[seq_axis])
    L.unsupported(n, "a sequence length that changes with the input (the recurrence is unrolled)");
  const int64_t S = *xs[seq_axis], G = r.gates, H = r.hidden, D = r.dirs;
  if (S > 1024) L.unsupported(n, "unrolling more than 1024 steps");
  Node* x = L.as_tensor(xv);
  if (r.batch_first) x = L.method("transpose", {x, 0LL, 1LL});
  const double clip = L.has_attr(n, "clip") ? float32_value(L.attr_float(n, "clip", 0)) : 0.0;
  auto clipped = [&](Node* v) { return clip > 0 ? L.call("torch.clamp", {v, -clip, clip}) : v; };
  auto state_in = [&](size_t i) -> Node* {
    LVal v = L.in(n, i);
    if (v.kind == Kind::None) return nullptr;
    Node* s = L.as_tensor(v);
    return r.batch_first ? L.method("transpose", {s, 0LL, 1LL}) : s;
  };
  Node* h0 = state_in(5);
  Node* c0 = r.cell == Cell::Lstm ? state_in(6) : nullptr;
  Node* W = L.as_tensor(L.in(n, 1));
  Node* R = L.as_tensor(L.in(n, 2));
  LVal bv = L.in(n, 3), lv = L.in(n, 4), pv = L.in(n, 7);
  Node* Bn = bv.kind != Kind::None ? L.as_tensor(bv) : nullptr;
  Node* P = r.cell == Cell::Lstm && pv.kind != Kind::None ? L.as_tensor(pv) : nullptr;
  Node* lens = lv.kind != Kind::None ? L.as_tensor(lv) : nullptr;
  // x.new_zeros (not torch.zeros) so that torch.fx traces it rather than baking a constant.
  Node* zeros = L.method(
      "new_zeros",
      {x, Argument::list({L.size(xv, r.batch_first ? 0 : 1).arg(), static_cast<long long>(H)})});
  const size_t per = r.acts.size() / static_cast<size_t>(D);
  std::vector<Node*> ys_dirs, hs, cs;
  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = r.reverse_only || d == 1;
    const Act& f = r.acts[static_cast<size_t>(d) * per];
    const Act& g = r.acts[static_cast<size_t>(d) * per + (per > 1 ? 1 : 0)];
    const Act& ha = r.acts[static_cast<size_t>(d) * per + (per > 2 ? 2 : 0)];
    Node* Wd = item(L, W, d);
    Node* Rd = item(L, R, d);
    Node* xw = L.call("torch.matmul", {x, L.method("t", {Wd})});  // [S, batch, G * H]
    Node* rb = nullptr;
    if (Bn) {
      Node* Bd = item(L, Bn, d);
      xw = add(L, xw, piece(L, Bd, 2, 0, 0));
      rb = piece(L, Bd, 2, 0, 1);
    }
    Node* Rh = r.cell == Cell::Gru ? piece(L, Rd, 3, 0, 2) : nullptr;
    Node* rbh = r.cell == Cell::Gru && rb ? piece(L, rb, 3, 0, 2) : nullptr;
    Node* h = h0 ? item(L, h0, d) : zeros;
    Node* c = c0 ? item(L, c0, d) : zeros;
    std::vector<Node*> Pd;
    if (P)
      for (int64_t k = 0; k < 3; ++k) Pd.push_back(piece(L, item(L, P, d), 3, 0, k));  // i, o, f
    std::vector<Node*> ys(static_cast<size_t>(S));
    for (int64_t step = 0; step < S; ++step) {
      const int64_t t = reverse ? S - 1 - step : step;
      Node* xt = item(L, xw, t);
      Node* hr = L.call("torch.matmul", {h, L.method("t", {Rd})});
      if (rb) hr = add(L, hr, rb);
      auto xg = [&](int64_t k) { return piece(L, xt, G, -1, k); };
      auto hg = [&](int64_t k) { return piece(L, hr, G, -1, k); };
      Node* hn = nullptr;
      Node* cn = nullptr;
      switch (r.cell) {
        case Cell::Rnn:
          hn = apply(L, f, clipped(add(L, xg(0), hg(0))));
          break;
        case Cell::Gru: {
          Node* z = apply(L, f, clipped(add(L, xg(0), hg(0))));
          Node* rg = apply(L, f, clipped(add(L, xg(1), hg(1))));
          Node* pre;
          if (L.attr_int(n, "linear_before_reset", 0)) {
            pre = add(L, xg(2), mul(L, rg, hg(2)));  // hg(2) holds Rb_h already
          } else {
            pre = add(L, xg(2), L.call("torch.matmul", {mul(L, rg, h), L.method("t", {Rh})}));
            if (rbh) pre = add(L, pre, rbh);
          }
          Node* ht = apply(L, g, clipped(pre));
          hn = add(L, mul(L, sub(L, 1.0, z), ht), mul(L, z, h));
          break;
        }
        case Cell::Lstm: {
          auto peep = [&](Node* v, size_t k, Node* cell) {
            return P ? add(L, v, mul(L, Pd[k], cell)) : v;
          };
          Node* ig = apply(L, f, clipped(peep(add(L, xg(0), hg(0)), 0, c)));
          Node* fg = L.attr_int(n, "input_forget", 0)
                         ? sub(L, 1.0, ig)
                         : apply(L, f, clipped(peep(add(L, xg(2), hg(2)), 2, c)));
          Node* cg = apply(L, g, clipped(add(L, xg(3), hg(3))));
          cn = add(L, mul(L, fg, c), mul(L, ig, cg));
          Node* og = apply(L, f, clipped(peep(add(L, xg(1), hg(1)), 1, cn)));
          hn = mul(L, og, apply(L, ha, cn));
          break;
        }
      }
      if (lens) {  // entries whose sequence has ended keep their state and output zeros
        Node* live =
            L.method("unsqueeze", {L.call("operator.gt", {lens, static_cast<long long>(t)}), 1LL});
        hn = L.call("torch.where", {live, hn, h});
        if (cn) cn = L.call("torch.where", {live, cn, c});
        ys[static_cast<size_t>(t)] = mul(L, hn, live);
      } else {
        ys[static_cast<size_t>(t)] = hn;
      }
      h = hn;
      if (cn) c = cn;
    }
    Argument::Items items(ys.begin(), ys.end());
    ys_dirs.push_back(L.call("torch.stack", {Argument::list(std::move(items))}, {{"dim", 0LL}}));
    hs.push_back(h);
    cs.push_back(c);
  }
  auto stack = [&](const std::vector<Node*>& v, int64_t dim) {
    Argument::Items items(v.begin(), v.end());
    return L.call("torch.stack", {Argument::list(std::move(items))},
                  {{"dim", static_cast<long long>(dim)}});
  };
  Node* y = stack(ys_dirs, 1);  // [S, D, batch, H]
  Node* yh = stack(hs, 0);
  Node* yc = stack(cs, 0);
  if (r.batch_first) {
    y = L.method("permute", {y, 2LL, 0LL, 1LL, 3LL});
    yh = L.method("transpose", {yh, 0LL, 1LL});
    yc = L.method("transpose", {yc, 0LL, 1LL});
  }
  std::vector<LVal> vals{L.tensor(y, n), L.tensor(yh, n)};
  if (r.cell == Cell::Lstm) vals.push_back(L.tensor(yc, n));
  L.set(n, vals);
}

template <Cell K>
void recurrent(Lowerer& L, const Node& n) {
  Recurrent r;
  r.cell = K;
  r.gates = K == Cell::Rnn ? 1 : K == Cell::Gru ? 3 : 4;
  const std::string direction = L.attr_string(n, "direction", "forward");
  r.dirs = direction == "bidirectional" ? 2 : 1;
  r.reverse_only = direction == "reverse";
  r.batch_first = L.attr_int(n, "layout", 0) != 0;
  const auto rs = L.shape(L.in(n, 2));
  if (rs.size() != 3 || !rs[2]) L.unsupported(n, "R without a static [dirs, G * H, H] shape");
  r.hidden = L.attr_int(n, "hidden_size", *rs[2]);
  r.acts = activations(L, n, K, r.dirs);
  if (fits_module(L, n, r))
    module_form(L, n, r);
  else
    unrolled_form(L, n, r);
}

}  // namespace

void add_layers_handlers(std::vector<HandlerEntry>& table) {
  table.insert(
      table.end(),
      {
          {"NegativeLogLikelihoodLoss", 12, nll_loss},
          {"SoftmaxCrossEntropyLoss", 12, softmax_cross_entropy},
          {"MeanVarianceNormalization", 9, mean_variance_normalization},
          {"Dropout", 7, dropout},
          {"Bernoulli", 15, bernoulli},
          {"RandomUniform", 1, [](Lowerer& L, const Node& n) { random_op(L, n, false, false); }},
          {"RandomUniformLike", 1, [](Lowerer& L, const Node& n) { random_op(L, n, false, true); }},
          {"RandomNormal", 1, [](Lowerer& L, const Node& n) { random_op(L, n, true, false); }},
          {"RandomNormalLike", 1, [](Lowerer& L, const Node& n) { random_op(L, n, true, true); }},
          {"RNN", 7, recurrent<Cell::Rnn>},
          {"GRU", 7, recurrent<Cell::Gru>},
          {"LSTM", 7, recurrent<Cell::Lstm>},
      });
}

}  // namespace fx::torch_codegen
