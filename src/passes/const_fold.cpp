// fx::split_const_subgraphs — the graph surgery of torch.fx.experimental.const_fold (1.13):
// split_module into a constant and a non-constant partition, turn the constant one into a
// module reading the attributes directly, and inline the non-constant one into the main graph,
// which reads the folded values from `_FX_CONST_FOLDED_ATTRS`.
#include <cctype>
#include <unordered_map>
#include <unordered_set>

#include "fx/passes.h"
#include "passes/internal.h"

namespace fx {

namespace {

// const_fold.get_unique_attr_name_in_module.
std::string unique_attr_name(const Module& m, const std::string& raw) {
  std::string name;  // re.sub("[^0-9a-zA-Z_]+", "_", raw)
  for (char c : raw) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    if (ok) {
      name += c;
    } else if (name.empty() || name.back() != '\x01') {
      name += '\x01';
    }
  }
  for (char& c : name)
    if (c == '\x01') c = '_';
  if (!name.empty() && std::isdigit(static_cast<unsigned char>(name[0]))) name = "_" + name;
  while (m.attr_kind(name) != 0) {
    size_t us = name.rfind('_');
    bool numbered = us != std::string::npos && us + 1 < name.size();
    for (size_t i = us + 1; numbered && i < name.size(); ++i)
      numbered = std::isdigit(static_cast<unsigned char>(name[i])) != 0;
    if (!numbered) {
      name += "_1";
    } else {
      name = name.substr(0, us + 1) + std::to_string(std::stoll(name.substr(us + 1)) + 1);
    }
  }
  return name;
}

Node* find_call(Graph& g, const std::string& target) {
  for (Node* n : g.nodes())
    if (n->op() == Opcode::CallModule && n->target().str() == target) return n;
  return nullptr;
}

// Rewrites every use of `old` to `value` (a node or, for several outputs, a tuple of them).
void replace_uses(Node* old, const Argument& value) {
  if (value.is_node()) {
    old->replace_all_uses_with(value.to_node());
    return;
  }
  std::vector<Node*> users = old->users().list();
  for (Node* u : users) {
    auto swap = [&](Node* n) -> Argument { return n == old ? value : Argument(n); };
    std::vector<Argument> args;
    for (const Argument& a : u->args()) args.push_back(a.map_nodes(swap));
    Kwargs kwargs;
    for (const auto& kv : u->kwargs()) kwargs.set(kv.first, kv.second.map_nodes(swap));
    u->set_args(std::move(args));
    u->set_kwargs(std::move(kwargs));
  }
}

// const_fold._inline_module: copies the nodes of submodule `name` in place of its call.
void inline_module(GraphModule& gm, const std::string& name) {
  auto* inline_mod = dynamic_cast<GraphModule*>(gm.get_submodule(name).get());
  FX_CHECK(inline_mod, "const_fold: " + name + " is not a GraphModule");
  Node* call = find_call(gm.graph(), name);
  FX_CHECK(call, "const_fold: no call of " + name);
  const std::vector<Argument> call_args = call->args();
  std::unordered_map<const Node*, Argument> mapping;
  size_t ph = 0;
  auto replacement = [&](Node* n) -> Argument {
    const Argument& a = mapping.at(n);
    if (a.is_node()) a.to_node()->meta() = n->meta();
    return a;
  };
  for (Node* n : inline_mod->graph().nodes()) {
    if (n->op() == Opcode::Placeholder) {
      mapping[n] = call_args.at(ph++);
      continue;
    }
    if (n->op() == Opcode::Output) {
      replace_uses(call, n->args().at(0).map_nodes(replacement));
      continue;
    }
    auto guard = gm.graph().inserting_before(call);
    mapping[n] = gm.graph().node_copy(n, replacement);
  }
  gm.graph().eliminate_dead_code();
}

}  // namespace

FoldedGraphModule split_const_subgraphs(const GraphModule& gm,
                                        const std::function<bool(const Node*)>& skip) {
  std::unordered_set<const Node*> const_nodes;
  bool found = false;
  for (Node* n : gm.graph().nodes()) {
    if (n->op() == Opcode::Placeholder || n->op() == Opcode::Output) continue;
    if (n->op() != Opcode::GetAttr) {
      bool all_const = true;
      for (const Node* in : n->all_input_nodes()) all_const = all_const && const_nodes.count(in);
      if (!all_const) continue;
    }
    if (skip && skip(n)) continue;
    if (n->is_impure()) continue;
    const_nodes.insert(n);
    if (n->op() != Opcode::GetAttr) found = true;
  }
  FoldedGraphModule result;
  if (!found) {
    result.module = std::make_unique<GraphModule>(&gm, gm.graph().clone(), gm.type_name());
    return result;
  }

  std::unique_ptr<GraphModule> split =
      split_module(gm, &gm, [&](const Node* n) -> int64_t { return const_nodes.count(n) ? 0 : 1; });
  auto const_gm = std::dynamic_pointer_cast<GraphModule>(split->child("submod_0"));
  auto non_const_gm = std::dynamic_pointer_cast<GraphModule>(split->child("submod_1"));
  if (!const_gm || !non_const_gm)
    throw Error(ErrorKind::Unsupported,
                "split_const_subgraphs: the output depends on constants only (nothing is left "
                "to run after folding)");
  for (const auto& sub : {non_const_gm, const_gm})
    for (Node* n : sub->graph().nodes())
      if (n->op() == Opcode::CallModule)
        split->add_module(n->target().str(), sub->get_submodule(n->target().str()));

  Node* const_call = find_call(split->graph(), "submod_0");
  FX_CHECK(const_call, "const_fold: no call of submod_0");
  const std::vector<Argument> const_args = const_call->args();

  // Like torch, the constant graph gets its attributes when FoldedGraphModule wraps it (below).
  std::unique_ptr<Graph> const_graph = const_gm->graph().clone();
  bool multiple_outputs = false;
  Graph& cg = *const_graph;
  for (Node* n : cg.nodes()) {
    if (n->op() == Opcode::Output) {
      multiple_outputs = n->args().at(0).kind() == Argument::Kind::Tuple;
      continue;
    }
    if (n->op() != Opcode::Placeholder) continue;
    const Node* in = nullptr;
    for (const Argument& a : const_args)
      if (a.is_node() && a.to_node()->name() == n->target().str()) in = a.to_node();
    FX_CHECK(in && in->op() == Opcode::GetAttr,
             "const_fold: constant input " + n->name() + " is not a get_attr");
    Node* ga;
    {
      auto guard = cg.inserting_before(n);
      ga = cg.get_attr(in->target().str());
    }
    ga->meta() = n->meta();
    n->replace_all_uses_with(ga);
    cg.erase_node(n);
  }

  const std::string name = unique_attr_name(*split, "_FX_CONST_FOLDED_ATTRS");
  if (multiple_outputs) {
    split->add_module(name, std::make_shared<Module>("ParameterList"));
  } else {
    Tensor empty;
    empty.shape = {0};
    empty.data = std::make_shared<const std::vector<uint8_t>>();
    empty.requires_grad = true;
    split->register_parameter(name, empty);
  }
  Graph& sg = split->graph();
  Node* folded;
  {
    auto guard = sg.inserting_before(const_call);
    folded = sg.get_attr(name);
  }
  folded->meta() = const_call->meta();
  const_call->replace_all_uses_with(folded);
  sg.eliminate_dead_code();
  inline_module(*split, "submod_1");

  result.module = std::make_unique<GraphModule>(split.get(), sg.clone());
  result.const_subgraph_module = std::make_unique<GraphModule>(split.get(), std::move(const_graph));
  result.fx_const_folded_attrs_name = name;
  return result;
}

}  // namespace fx
