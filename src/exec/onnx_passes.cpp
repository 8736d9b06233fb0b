#include "fx/onnx_passes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

namespace fx::exec {

namespace {

bool is_onnx(const Node* n) {
  return n->op() == Opcode::CallFunction &&
         n->target().function().qualname().rfind("onnx.", 0) == 0;
}

const Tensor* constant(const GraphModule& gm, const Argument& a) {
  if (!a.is_node() || a.to_node()->op() != Opcode::GetAttr) return nullptr;
  const Tensor* t = gm.get_tensor(a.to_node()->target().str());
  return t && t->data ? t : nullptr;
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
    if (!is_onnx(n) || !has_op(n->target().function().qualname())) continue;
    bool all_const = true;
    for (const Argument& a : n->args())
      if (!a.is_none() && !constant(gm, a)) all_const = false;
    if (!all_const || n->users().empty()) continue;
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

}  // namespace fx::exec
