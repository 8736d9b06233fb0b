// fx::fuse_conv_bn_modules — torch.fx.experimental.optimization.fuse (1.13): folds eval-mode
// BatchNorm{1,2,3}d modules into the Conv{1,2,3}d feeding them, computing the fused fp32 weights
// like torch.nn.utils.fusion.fuse_conv_bn_weights (same operations in the same order).
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "fx/passes.h"

namespace fx {

namespace {

// A copy of the attribute tree (modules copied, tensor bytes shared: they are immutable).
std::shared_ptr<Module> clone_tree(const Module& m) {
  auto out = std::make_shared<Module>(m.type_name(), m.extra_repr());
  out->set_impure(m.is_impure());
  for (const auto& [name, t] : m.parameters()) out->register_parameter(name, t);
  for (const auto& [name, t] : m.buffers()) out->register_buffer(name, t);
  for (const auto& [name, child] : m.children())
    out->add_module(name,
                    dynamic_cast<const GraphModule*>(child.get()) ? child : clone_tree(*child));
  return out;
}

std::vector<float> floats(const Tensor* t, const std::string& what, const Node* node) {
  if (!t) throw Error(ErrorKind::Value, "fuse: " + what + " is missing", node->name());
  if (t->dtype != Dtype::Float32)
    throw Error(ErrorKind::Value, "fuse: " + what + " is " + t->describe() + ", not float32",
                node->name());
  Bytes b = t->bytes();
  if (!b) throw Error(ErrorKind::Value, "fuse: " + what + " has no data", node->name());
  std::vector<float> v(static_cast<size_t>(t->numel()));
  std::memcpy(v.data(), b->data(), v.size() * sizeof(float));
  return v;
}

Tensor make_tensor(std::vector<int64_t> shape, const std::vector<float>& v) {
  Tensor t;
  t.shape = std::move(shape);
  auto bytes = std::make_shared<std::vector<uint8_t>>(v.size() * sizeof(float));
  std::memcpy(bytes->data(), v.data(), bytes->size());
  t.data = std::move(bytes);
  t.requires_grad = true;
  return t;
}

// `key=value` from an extra_repr ("8, eps=1e-05, momentum=0.1, ..."), or "".
std::string repr_field(const std::string& repr, const std::string& key) {
  size_t p = 0;
  while ((p = repr.find(key + "=", p)) != std::string::npos) {
    if (p == 0 || repr[p - 1] == ' ' || repr[p - 1] == ',') {
      const size_t start = p + key.size() + 1;
      const size_t end = repr.find(',', start);
      return repr.substr(start, end == std::string::npos ? std::string::npos : end - start);
    }
    p += key.size();
  }
  return {};
}

// torch.nn.utils.fusion.fuse_conv_bn_eval on fx::Modules.
std::shared_ptr<Module> fuse_conv_bn_eval(const Module& conv, const Module& bn, const Node* node) {
  const Tensor* cw = conv.parameter("weight");
  std::vector<float> w = floats(cw, "weight of conv '" + conv.type_name() + "'", node);
  const int64_t out_ch = cw->shape.empty() ? 0 : cw->shape[0];
  std::vector<float> rm = floats(bn.get_tensor("running_mean"), "bn running_mean", node);
  std::vector<float> rv = floats(bn.get_tensor("running_var"), "bn running_var", node);
  const size_t c = rm.size();
  if (static_cast<int64_t>(c) != out_ch || rv.size() != c)
    throw Error(ErrorKind::Value,
                "fuse: batch norm has " + std::to_string(c) + " channels, the conv " +
                    std::to_string(out_ch),
                node->name());
  std::vector<float> cb = conv.get_tensor("bias")
                              ? floats(conv.get_tensor("bias"), "conv bias", node)
                              : std::vector<float>(c, 0.f);
  std::vector<float> gw = bn.get_tensor("weight")
                              ? floats(bn.get_tensor("weight"), "bn weight", node)
                              : std::vector<float>(c, 1.f);
  std::vector<float> gb = bn.get_tensor("bias") ? floats(bn.get_tensor("bias"), "bn bias", node)
                                                : std::vector<float>(c, 0.f);
  const std::string eps_s = repr_field(bn.extra_repr(), "eps");
  char* end = nullptr;
  const double eps = eps_s.empty() ? 1e-5 : std::strtod(eps_s.c_str(), &end);
  if (!eps_s.empty() && (end == eps_s.c_str() || *end))
    throw Error(ErrorKind::Value, "fuse: cannot read eps from '" + bn.extra_repr() + "'",
                node->name());
  const float epsf = static_cast<float>(eps);
  const size_t per = c ? w.size() / c : 0;
  std::vector<float> new_b(c);
  for (size_t i = 0; i < c; ++i) {
    const float rsq = 1.0f / std::sqrt(rv[i] + epsf);  // torch.rsqrt(bn_rv + bn_eps)
    const float scale = gw[i] * rsq;
    for (size_t j = 0; j < per; ++j) w[i * per + j] = w[i * per + j] * scale;
    new_b[i] = (cb[i] - rm[i]) * rsq * gw[i] + gb[i];
  }
  auto fused = std::make_shared<Module>(conv.type_name(), conv.extra_repr());
  std::string repr = conv.extra_repr();  // the fused conv has a bias now
  const size_t nb = repr.find(", bias=False");
  if (nb != std::string::npos) repr.erase(nb, std::string(", bias=False").size());
  fused->set_extra_repr(repr);
  for (const auto& [name, t] : conv.parameters())
    if (name != "weight" && name != "bias") fused->register_parameter(name, t);
  for (const auto& [name, t] : conv.buffers()) fused->register_buffer(name, t);
  fused->register_parameter("weight", make_tensor(cw->shape, w));
  fused->register_parameter("bias", make_tensor({static_cast<int64_t>(c)}, new_b));
  return fused;
}

}  // namespace

std::unique_ptr<GraphModule> fuse_conv_bn_modules(const GraphModule& gm) {
  std::shared_ptr<Module> root = clone_tree(gm);
  std::unique_ptr<Graph> graph = gm.graph().clone();
  std::unordered_map<std::string, const Module*> modules;
  for (const auto& [path, m] : root->named_modules()) modules.emplace(path, m);

  auto module_of = [&](const Argument& a, const char* type) -> const Module* {
    if (!a.is_node()) return nullptr;
    const Node* n = a.to_node();
    if (n->op() != Opcode::CallModule) return nullptr;
    auto it = modules.find(n->target().str());
    if (it == modules.end() || it->second->type_name() != type) return nullptr;
    return it->second;
  };
  const char* patterns[3][2] = {
      {"Conv1d", "BatchNorm1d"}, {"Conv2d", "BatchNorm2d"}, {"Conv3d", "BatchNorm3d"}};
  for (const auto& pat : patterns) {
    for (Node* node : graph->nodes()) {
      if (node->args().empty()) continue;
      const Module* conv = module_of(node->args()[0], pat[0]);
      const Module* bn = conv ? module_of(Argument(node), pat[1]) : nullptr;
      if (!bn) continue;
      Node* conv_node = node->args()[0].to_node();
      if (conv_node->users().size() > 1) continue;  // the conv's output is used elsewhere
      if (repr_field(bn->extra_repr(), "track_running_stats") == "False") continue;
      std::shared_ptr<Module> fused = fuse_conv_bn_eval(*conv, *bn, node);
      const std::string& target = conv_node->target().str();
      const size_t dot = target.rfind('.');
      Module& parent =
          dot == std::string::npos ? *root : *root->get_submodule(target.substr(0, dot));
      parent.add_module(dot == std::string::npos ? target : target.substr(dot + 1), fused);
      modules[target] = fused.get();
      node->replace_all_uses_with(conv_node);
      graph->erase_node(node);
    }
  }
  return std::make_unique<GraphModule>(root.get(), std::move(graph));
}

}  // namespace fx
