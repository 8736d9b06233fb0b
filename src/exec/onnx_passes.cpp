// The ONNX passes (fold, the fusions), the equivalence check and their place in the registry.
#include "fx/exec/passes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <sstream>

#include "exec/ops.h"
#include "fx/passes.h"

namespace fx::exec {

namespace {

bool is_onnx(const Node* n) {
  return n->op() == Opcode::CallFunction &&
         n->target().function().qualname().rfind("onnx.", 0) == 0;
}

const Tensor* constant(const GraphModule& gm, const Argument& a) { return constant_tensor(gm, a); }

// The tensor behind `a` whether or not its bytes are loaded (a prepacked weight's are not), for
// a pass that reads only its dtype and shape.
const Tensor* constant_meta(const GraphModule& gm, const Argument& a) {
  const Node* src = constant_source(a);
  return src ? gm.get_tensor(src->target().str()) : nullptr;
}

// A fresh attribute name on the root module.
std::string fresh_attr(const GraphModule& gm, const std::string& base) {
  std::string name = base;
  for (int i = 1; gm.attr_kind(name) != 0; ++i) name = base + "_" + std::to_string(i);
  return name;
}

Node* add_constant(GraphModule& gm, const std::string& base, const Value& v) {
  const std::string name = fresh_attr(gm, base);
  gm.register_buffer(name, v.to_tensor());
  return gm.graph().get_attr(name);
}

// Folding must not grow the model: a node whose result is a weight-sized tensor is folded only
// when the weight-sized constants it reads die with it (a Transpose of a weight that nothing else
// reads), never when they stay alive for other users (the folded copy would be a second weight).
// Small results (shape arithmetic, scalars) always fold.
bool folding_frees_its_inputs(const GraphModule& gm, const Node& n) {
  constexpr size_t kSmall = 1024;  // bytes
  for (const Argument& a : n.args()) {
    if (!a.is_node()) continue;
    const Tensor* t = constant_tensor(gm, a);
    if (!t || t->nbytes() <= kSmall) continue;
    // The value and, through Identity nodes, the constant behind it are read by n alone.
    for (const Node* v = a.to_node(); v;) {
      if (v->users().size() != 1) return false;
      v = v->op() == Opcode::CallFunction && v->args().size() == 1 && v->args()[0].is_node()
              ? v->args()[0].to_node()
              : nullptr;
    }
  }
  return true;
}

// Bytes of the constants `n` reads.
size_t input_bytes(const GraphModule& gm, const Node& n) {
  size_t total = 0;
  for (const Argument& a : n.args())
    if (const Tensor* t = a.is_node() ? constant_tensor(gm, a) : nullptr) total += t->nbytes();
  return total;
}

bool finish(GraphModule& gm, bool modified) {
  if (modified) {
    gm.graph().eliminate_dead_code();
    gm.graph().lint();
    gm.recompile();
  }
  return modified;
}

}  // namespace

bool fold_constants(GraphModule& gm) {
  Graph& g = gm.graph();
  bool modified = false;
  for (Node* n : g.nodes()) {
    if (!is_onnx(n) || !has_op(n->target().function().qualname()) || n->is_impure()) continue;
    bool all_const = true;
    for (const Argument& a : n->args())
      if (!a.is_none() && !constant(gm, a)) all_const = false;
    if (!all_const || n->users().empty()) continue;
    if (n->target().function().qualname() == "onnx.Identity" && n->args().size() == 1) {
      // An Identity of a constant (exporters put one in front of each shared initializer) is
      // that constant: its users read the same weight instead of a folded copy of it.
      n->replace_all_uses_with(const_cast<Node*>(constant_source(n->args()[0])));
      modified = true;
      continue;
    }
    if (!folding_frees_its_inputs(gm, *n)) continue;
    // A DequantizeLinear of a constant stays: it marks the integer weights of a quantized model,
    // which runtimes (and the executor's QDQ fusion) run as integers.
    if (n->target().function().qualname() == "onnx.DequantizeLinear") continue;
    // Evaluate the node alone: a one-node module over the constants.
    auto sub = std::make_unique<Graph>();
    std::vector<Argument> args;
    for (const Argument& a : n->args())
      args.push_back(a.is_none() ? Argument()
                                 : Argument(sub->get_attr(a.to_node()->target().str())));
    Node* copy = sub->call_function(n->target().function(), args, n->kwargs());
    sub->output(copy);
    GraphModule one(&gm, std::move(sub));
    RunResult r;
    try {
      r = run(one, {}, RunOptions{});
    } catch (const Error&) {
      continue;  // leave it to run time, where the error will name the node
    }
    if (r.outputs.size() != 1) continue;
    // Multi-output nodes are reached through getitem; fold those users instead.
    bool single = true;
    for (Node* u : n->users())
      if (u->op() == Opcode::CallFunction &&
          u->target().function().qualname() == "operator.getitem")
        single = false;
    if (!single) continue;
    // Nor may the result be larger than the weights it replaces (a Cast of a weight to
    // float64 doubles it).
    if (r.outputs[0].nbytes() > 1024 && r.outputs[0].nbytes() > input_bytes(gm, *n)) continue;
    auto guard = g.inserting_before(n);
    Node* c = add_constant(gm, "_folded_" + n->name(), r.outputs[0]);
    n->replace_all_uses_with(c);
    modified = true;
  }
  return finish(gm, modified);
}

bool fuse_conv_bn(GraphModule& gm) {
  Graph& g = gm.graph();
  bool modified = false;
  for (Node* bn : g.nodes()) {
    if (!is_onnx(bn) || bn->target().function().qualname() != "onnx.BatchNormalization") continue;
    const Argument* tm = bn->kwargs().find("training_mode");
    if ((tm && tm->kind() == Argument::Kind::Int && tm->to_int() != 0) || bn->args().size() < 5)
      continue;
    if (!bn->args()[0].is_node()) continue;
    Node* conv = bn->args()[0].to_node();
    if (!is_onnx(conv) || conv->target().function().qualname() != "onnx.Conv" ||
        conv->users().size() != 1)
      continue;
    const auto& ca = conv->args();
    const Tensor* w = ca.size() > 1 ? constant(gm, ca[1]) : nullptr;
    const Tensor* b = ca.size() > 2 && !ca[2].is_none() ? constant(gm, ca[2]) : nullptr;
    if (!w || (ca.size() > 2 && !ca[2].is_none() && !b) || w->dtype != Dtype::Float32 ||
        w->shape.empty())
      continue;
    const Tensor* p[4];
    bool ok = true;
    for (int i = 0; i < 4; ++i) {
      p[i] = constant(gm, bn->args()[1 + i]);
      ok = ok && p[i] && p[i]->dtype == Dtype::Float32 && p[i]->numel() == w->shape[0];
    }
    if (!ok) continue;
    const Argument* eps_arg = bn->kwargs().find("epsilon");
    const double eps = eps_arg ? eps_arg->to_double() : 1e-5;
    const int64_t M = w->shape[0];
    const int64_t per = M ? w->numel() / M : 0;
    auto f = [](const Tensor* t) { return reinterpret_cast<const float*>(t->data->data()); };
    Value nw = Value::zeros(Dtype::Float32, w->shape), nb = Value::zeros(Dtype::Float32, {M});
    for (int64_t m = 0; m < M; ++m) {
      const double k = f(p[0])[m] / std::sqrt(static_cast<double>(f(p[3])[m]) + eps);
      for (int64_t i = 0; i < per; ++i)
        nw.mutable_data<float>()[m * per + i] = static_cast<float>(f(w)[m * per + i] * k);
      const double bias = b ? f(b)[m] : 0.0;
      nb.mutable_data<float>()[m] = static_cast<float>((bias - f(p[2])[m]) * k + f(p[1])[m]);
    }
    auto guard = g.inserting_before(conv);
    Node* wn = add_constant(gm, conv->name() + "_fused_weight", nw);
    Node* bnode = add_constant(gm, conv->name() + "_fused_bias", nb);
    conv->update_arg(1, wn);
    if (ca.size() > 2) {
      conv->update_arg(2, bnode);
    } else {
      std::vector<Argument> args = conv->args();
      args.push_back(bnode);
      conv->set_args(args);
    }
    bn->replace_all_uses_with(conv);
    modified = true;
  }
  return finish(gm, modified);
}

void shape_prop(GraphModule& gm, const std::vector<Value>& inputs) {
  RunOptions opts;
  for (Node* n : gm.graph().nodes())
    if (n->op() != Opcode::Output) opts.probe.push_back(n->name());
  const RunResult r = run(gm, inputs, opts);
  for (const auto& probe : r.probes) {
    Node* n = gm.graph().find_node(probe.first);
    Argument::Items dims;
    for (int64_t d : probe.second.shape()) dims.emplace_back(static_cast<long long>(d));
    n->meta().set("tensor_meta", Argument::dict({{"shape", Argument::tuple(std::move(dims))},
                                                 {"dtype", probe.second.dtype()}}));
  }
}

namespace {

// The shape recorded by shape_prop, or nullptr.
const Argument* meta_shape(const Node* n) {
  const Argument* tm = n->meta().find("tensor_meta");
  if (!tm || tm->kind() != Argument::Kind::Dict) return nullptr;
  for (const auto& kv : tm->dict_items())
    if (kv.first.kind() == Argument::Kind::String && kv.first.to_string() == "shape")
      return &kv.second;
  return nullptr;
}

bool is_op(const Argument& a, const char* qualname) {
  return a.is_node() && a.to_node()->op() == Opcode::CallFunction &&
         a.to_node()->target().function().qualname() == qualname;
}

// A float scalar constant (an initializer of one element), or NaN.
double scalar(const GraphModule& gm, const Argument& a) {
  const Tensor* t = constant(gm, a);
  if (!t || t->numel() != 1) return std::nan("");
  if (t->dtype == Dtype::Float32) return *reinterpret_cast<const float*>(t->data->data());
  if (t->dtype == Dtype::Float64) return *reinterpret_cast<const double*>(t->data->data());
  return std::nan("");
}

bool near(double v, double want) { return std::fabs(v - want) <= 1e-4 * std::fabs(want); }

// For a binary node with a scalar constant operand equal to `c`: the other operand (either order
// when `commutative`), else nullptr. `exact`: a float32 constant equal to float(c) (what the
// executor's fused kernels compute with, so they agree with the nodes to rounding); else any
// float constant within 1e-4 relative (the passes). Raises *rank to the constant's rank.
const Argument* other_operand(const GraphModule& gm, const Node* n, double c, bool commutative,
                              bool exact, int64_t* rank) {
  if (n->args().size() != 2) return nullptr;
  for (int k : {1, 0}) {
    if (k == 0 && !commutative) break;
    const Tensor* t = constant(gm, n->args()[k]);
    if (!t || t->numel() != 1) continue;
    const bool equal =
        exact ? t->dtype == Dtype::Float32 &&
                    *reinterpret_cast<const float*>(t->data->data()) == static_cast<float>(c)
              : near(scalar(gm, n->args()[k]), c);
    if (!equal) continue;
    *rank = std::max(*rank, static_cast<int64_t>(t->shape.size()));
    return &n->args()[1 - k];
  }
  return nullptr;
}

Node* single_user(const Node* n) { return n->users().size() == 1 ? n->users().list()[0] : nullptr; }

}  // namespace

bool fuse_matmul_add(GraphModule& gm) {
  Graph& g = gm.graph();
  bool modified = false;
  for (Node* add : g.nodes()) {
    if (!is_op(Argument(add), "onnx.Add") || add->args().size() != 2) continue;
    const int mm_at = is_op(add->args()[0], "onnx.MatMul")   ? 0
                      : is_op(add->args()[1], "onnx.MatMul") ? 1
                                                             : -1;
    if (mm_at < 0) continue;
    Node* mm = add->args()[mm_at].to_node();
    const Argument& bias = add->args()[1 - mm_at];
    if (mm->users().size() != 1 || mm->args().size() != 2 || !mm->args()[0].is_node()) continue;
    const Argument* a_shape = meta_shape(mm->args()[0].to_node());
    const Tensor* w = constant_meta(gm, mm->args()[1]);
    const Tensor* b = constant(gm, bias);
    if (!a_shape || a_shape->elements().size() != 2 || !w || w->shape.size() != 2 || !b) continue;
    // M may be a named size or unknown (infer_shapes): then only biases that need no M fit.
    const Argument& m_dim = a_shape->elements()[0];
    const int64_t M = m_dim.kind() == Argument::Kind::Int ? m_dim.to_int() : -1, N = w->shape[1];
    // Gemm's C must broadcast to (M, N) one way: [N], [1, N], [M, N], [M, 1] or a scalar.
    const std::vector<int64_t>& bs = b->shape;
    const bool ok = bs.empty() || (bs.size() == 1 && (bs[0] == N || bs[0] == 1)) ||
                    (bs.size() == 2 && (bs[0] == M || bs[0] == 1) && (bs[1] == N || bs[1] == 1));
    if (!ok) continue;
    auto guard = g.inserting_before(add);
    Node* gemm = g.call_function(fn("onnx.Gemm"), {mm->args()[0], mm->args()[1], bias});
    add->replace_all_uses_with(gemm);
    modified = true;
  }
  return finish(gm, modified);
}

std::optional<GeluMatch> match_gelu(const GraphModule& gm, Node* erf, bool exact) {
  if (!is_op(Argument(erf), "onnx.Erf") || erf->args().size() != 1 || !erf->args()[0].is_node())
    return std::nullopt;
  GeluMatch m;
  auto operand = [&](const Node* n, double c, bool commutative) {
    return other_operand(gm, n, c, commutative, exact, &m.constant_rank);
  };
  const double kSqrt2 = std::sqrt(2.0);
  Node* scaled = erf->args()[0].to_node();  // x / sqrt(2) or x * (1 / sqrt(2))
  const Argument* x = nullptr;
  if (is_op(Argument(scaled), "onnx.Div")) x = operand(scaled, kSqrt2, false);
  if (is_op(Argument(scaled), "onnx.Mul")) x = operand(scaled, 1.0 / kSqrt2, true);
  Node* plus1 = single_user(erf);
  if (!x || !x->is_node() || !plus1 || !is_op(Argument(plus1), "onnx.Add") ||
      operand(plus1, 1.0, true) == nullptr)
    return std::nullopt;
  Node* prod = single_user(plus1);  // x * (1 + erf) or (0.5 * x) * (1 + erf)
  if (!prod || !is_op(Argument(prod), "onnx.Mul") || prod->args().size() != 2) return std::nullopt;
  const Argument& other = prod->args()[0] == Argument(plus1) ? prod->args()[1] : prod->args()[0];
  m.x = x->to_node();
  m.interior = {scaled, erf, plus1};
  if (other == *x) {  // the 0.5 comes last
    Node* half = single_user(prod);
    if (!half || !is_op(Argument(half), "onnx.Mul") || !operand(half, 0.5, true))
      return std::nullopt;
    m.interior.push_back(prod);
    m.result = half;
  } else if (is_op(other, "onnx.Mul")) {  // the 0.5 scaled x first
    const Argument* inner = operand(other.to_node(), 0.5, true);
    if (!inner || *inner != *x || other.to_node()->users().size() != 1) return std::nullopt;
    m.interior.push_back(other.to_node());
    m.result = prod;
  } else {
    return std::nullopt;
  }
  return m;
}

bool fuse_gelu(GraphModule& gm) {
  Graph& g = gm.graph();
  bool modified = false;
  for (Node* erf : g.nodes()) {
    const std::optional<GeluMatch> m = match_gelu(gm, erf, false);
    if (!m) continue;
    auto guard = g.inserting_before(m->result);
    Node* gelu = g.call_function(fn("onnx.Gelu"), {Argument(m->x)});
    m->result->replace_all_uses_with(gelu);
    modified = true;
  }
  return finish(gm, modified);
}

namespace {

// The reduced axes of a ReduceMean (attribute or constant input), or empty if unknown.
std::vector<int64_t> reduce_axes(const GraphModule& gm, const Node* n) {
  if (const Argument* a = n->kwargs().find("axes"); a && a->is_sequence()) {
    std::vector<int64_t> out;
    for (const Argument& e : a->elements())
      if (e.kind() == Argument::Kind::Int) out.push_back(e.to_int());
    return out;
  }
  if (n->args().size() > 1)
    if (const Tensor* t = constant(gm, n->args()[1]); t && t->dtype == Dtype::Int64) {
      const int64_t* p = reinterpret_cast<const int64_t*>(t->data->data());
      return std::vector<int64_t>(p, p + t->numel());
    }
  return {};
}

// Whether `axes` is exactly the last axis (-1, or rank - 1 when the input's rank is known).
bool last_axis_only(const std::vector<int64_t>& axes, const Node* input) {
  if (axes.size() != 1) return false;
  if (axes[0] == -1) return true;
  const Argument* shape = meta_shape(input);
  return shape && axes[0] == static_cast<int64_t>(shape->elements().size()) - 1;
}

}  // namespace

std::optional<LayerNormMatch> match_layer_norm(const GraphModule& gm, Node* div, int64_t rank) {
  if (!is_op(Argument(div), "onnx.Div") || div->args().size() != 2) return std::nullopt;
  const Argument& sub_a = div->args()[0];
  const Argument& sqrt_a = div->args()[1];
  if (!is_op(sub_a, "onnx.Sub") || !is_op(sqrt_a, "onnx.Sqrt")) return std::nullopt;
  Node* sub = sub_a.to_node();
  const Argument& x = sub->args()[0];
  const Argument& mean_a = sub->args()[1];
  if (!x.is_node() || !is_op(mean_a, "onnx.ReduceMean") || mean_a.to_node()->args()[0] != x)
    return std::nullopt;
  const std::vector<int64_t> axes = reduce_axes(gm, mean_a.to_node());
  const bool last_axis = rank >= 0 ? axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1)
                                   : last_axis_only(axes, x.to_node());
  if (!last_axis) return std::nullopt;
  Node* sq = sqrt_a.to_node();
  if (!is_op(sq->args()[0], "onnx.Add")) return std::nullopt;
  Node* add_eps = sq->args()[0].to_node();
  if (add_eps->args().size() != 2) return std::nullopt;
  const int var_at = is_op(add_eps->args()[0], "onnx.ReduceMean") ? 0 : 1;
  const Argument& var_a = add_eps->args()[var_at];
  const double eps = scalar(gm, add_eps->args()[1 - var_at]);
  if (!is_op(var_a, "onnx.ReduceMean") || std::isnan(eps) ||
      reduce_axes(gm, var_a.to_node()) != axes)
    return std::nullopt;
  const Argument& pow_a = var_a.to_node()->args()[0];
  if (!is_op(pow_a, "onnx.Pow") || pow_a.to_node()->args()[0] != sub_a ||
      !near(scalar(gm, pow_a.to_node()->args()[1]), 2.0))
    return std::nullopt;
  Node* mul = single_user(div);
  if (!mul || !is_op(Argument(mul), "onnx.Mul") || mul->args().size() != 2) return std::nullopt;
  const Argument& scale = mul->args()[0] == Argument(div) ? mul->args()[1] : mul->args()[0];
  Node* add_b = single_user(mul);
  if (!add_b || !is_op(Argument(add_b), "onnx.Add") || add_b->args().size() != 2)
    return std::nullopt;
  const Argument& bias = add_b->args()[0] == Argument(mul) ? add_b->args()[1] : add_b->args()[0];
  const Tensor* st = constant(gm, scale);
  const Tensor* bt = constant(gm, bias);
  if (!st || !bt || st->shape.size() != 1 || bt->numel() != st->numel()) return std::nullopt;
  LayerNormMatch m;
  m.x = x.to_node();
  m.scale = scale;
  m.bias = bias;
  m.epsilon = eps;
  m.interior = {mean_a.to_node(), sub, pow_a.to_node(), var_a.to_node(), add_eps, sq, div, mul};
  m.result = add_b;
  return m;
}

bool fuse_layer_norm(GraphModule& gm) {
  Graph& g = gm.graph();
  bool modified = false;
  for (Node* div : g.nodes()) {
    const std::optional<LayerNormMatch> m = match_layer_norm(gm, div);
    if (!m) continue;
    auto guard = g.inserting_before(m->result);
    Node* ln = g.call_function(fn("onnx.LayerNormalization"), {Argument(m->x), m->scale, m->bias},
                               {{"axis", -1}, {"epsilon", m->epsilon}});
    m->result->replace_all_uses_with(ln);
    modified = true;
  }
  return finish(gm, modified);
}

EquivalenceCheck equivalence_check(std::vector<Value> inputs, float rtol, float atol) {
  return [inputs = std::move(inputs), rtol, atol](const GraphModule& before,
                                                  const GraphModule& after) -> std::string {
    auto differs = [&](const Value& a, const Value& b, double* worst) {
      if (a.shape() != b.shape()) return true;
      const std::vector<float> x = a.to_f32(), y = b.to_f32();
      bool bad = false;
      for (size_t i = 0; i < x.size(); ++i) {
        const double d = std::fabs(static_cast<double>(x[i]) - y[i]);
        if (worst) *worst = std::max(*worst, d);
        if (!(d <= atol + rtol * std::fabs(y[i]))) bad = true;
      }
      return bad;
    };
    const std::vector<Value> out_a = run(before, inputs), out_b = run(after, inputs);
    if (out_a.size() != out_b.size())
      return std::to_string(out_a.size()) + " outputs before, " + std::to_string(out_b.size()) +
             " after";
    for (size_t i = 0; i < out_a.size(); ++i) {
      double worst = 0;
      if (!differs(out_a[i], out_b[i], &worst)) continue;
      std::ostringstream msg;
      msg << "output " << i << " differs (" << out_a[i].describe() << " vs " << out_b[i].describe()
          << ", max abs error " << worst << ")";
      // The first node, in the original order, whose value differs in the rewritten graph.
      RunOptions probe;
      for (Node* n : before.graph().nodes())
        if (n->op() == Opcode::CallFunction && after.graph().find_node(n->name()))
          probe.probe.push_back(n->name());
      const RunResult pa = run(before, inputs, probe), pb = run(after, inputs, probe);
      for (const auto& probe_value : pa.probes) {
        const std::string& name = probe_value.first;
        const Value& value = probe_value.second;
        auto it = std::find_if(pb.probes.begin(), pb.probes.end(),
                               [&](const auto& kv) { return kv.first == name; });
        if (it != pb.probes.end() && differs(value, it->second, nullptr)) {
          msg << "; first diverging node '" << name << "'";
          break;
        }
      }
      return msg.str();
    }
    return std::string();
  };
}

void register_onnx_passes() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_pass(
        {"fold", "fold nodes whose inputs are all constants into new weights", fold_constants});
    register_pass({"fuse-conv-bn", "fold inference BatchNormalization into the Conv before it",
                   fuse_conv_bn});
    register_pass({"fuse-matmul-add",
                   "MatMul of a 2-D input by a constant matrix, then Add of a constant: Gemm",
                   fuse_matmul_add});
    register_pass({"fuse-gelu", "decomposed GELU (Erf form): onnx.Gelu", fuse_gelu});
    register_pass({"fuse-layernorm", "decomposed LayerNorm over the last axis: LayerNormalization",
                   fuse_layer_norm});
  });
}

std::vector<std::string> pass_names() {
  register_onnx_passes();
  return registered_pass_names();
}

PassFn pass_by_name(const std::string& name) {
  register_onnx_passes();
  return fx::pass_by_name(name);
}

}  // namespace fx::exec
