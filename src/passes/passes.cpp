#include "fx/passes.h"

#include <functional>
#include <unordered_map>
#include <vector>

namespace fx {

namespace {

// A structural hash of an argument consistent with Argument::operator== (nodes by identity).
size_t hash_arg(const Argument& a) {
  size_t h = std::hash<int>{}(static_cast<int>(a.kind()));
  auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  switch (a.kind()) {
    case Argument::Kind::Bool:
      mix(a.to_bool());
      break;
    case Argument::Kind::Int:
      mix(std::hash<int64_t>{}(a.to_int()));
      break;
    case Argument::Kind::Float:
      mix(std::hash<double>{}(a.to_double()));
      break;
    case Argument::Kind::String:
      mix(std::hash<std::string>{}(a.to_string()));
      break;
    case Argument::Kind::Node:
      mix(std::hash<const void*>{}(a.to_node()));
      break;
    case Argument::Kind::Tuple:
    case Argument::Kind::List:
    case Argument::Kind::Slice:
      for (const Argument& e : a.elements()) mix(hash_arg(e));
      break;
    case Argument::Kind::Dict:
      for (const auto& kv : a.dict_items()) {
        mix(hash_arg(kv.first));
        mix(hash_arg(kv.second));
      }
      break;
    default:
      mix(std::hash<std::string>{}(a.repr()));
      break;
  }
  return h;
}

size_t hash_node(const Node* n) {
  size_t h = std::hash<std::string>{}(n->target().pretty()) ^ static_cast<size_t>(n->op());
  for (const Argument& a : n->args()) h = h * 31 + hash_arg(a);
  for (const auto& kv : n->kwargs())
    h = h * 31 + std::hash<std::string>{}(kv.first) + hash_arg(kv.second);
  return h;
}

bool same_computation(const Node* a, const Node* b) {
  return a->op() == b->op() && a->target() == b->target() && a->args() == b->args() &&
         a->kwargs() == b->kwargs();
}

// The name a `banned` set uses for a node's target: qualified for functions, else the string.
const std::string& target_name(const Node* n) { return n->target().pretty(); }

bool finish(GraphModule& gm, bool modified) {
  if (modified) {
    gm.graph().lint();
    gm.recompile();
  }
  return modified;
}

}  // namespace

bool cse(GraphModule& gm, const std::unordered_set<std::string>& banned) {
  Graph& g = gm.graph();
  std::unordered_map<size_t, std::vector<Node*>> seen;
  bool modified = false;
  for (Node* n : g.nodes()) {  // a live view: erasing the current node is safe
    if (n->op() == Opcode::Placeholder || n->op() == Opcode::Output || n->op() == Opcode::GetAttr)
      continue;
    if (n->is_impure() || banned.count(target_name(n))) continue;
    // Earlier merges already rewired this node's inputs to the surviving nodes.
    std::vector<Node*>& bucket = seen[hash_node(n)];
    Node* same = nullptr;
    for (Node* c : bucket)
      if (same_computation(c, n)) {
        same = c;
        break;
      }
    if (!same) {
      bucket.push_back(n);
      continue;
    }
    n->replace_all_uses_with(same);
    g.erase_node(n);
    modified = true;
  }
  return finish(gm, modified);
}

bool remove_dropout(GraphModule& gm) {
  Graph& g = gm.graph();
  bool modified = false;
  for (Node* n : g.nodes()) {
    bool dropout = false;
    if (n->op() == Opcode::CallModule) {
      if (gm.attr_kind(n->target().str()) == 'm') {
        const std::string& type = gm.get_submodule(n->target().str())->type_name();
        dropout = type.find("Dropout") != std::string::npos;
      }
    } else if (n->op() == Opcode::CallFunction) {
      const FunctionInfo& f = n->target().function().info();
      dropout = (f.module == "torch.nn.functional" || f.module == "torch") &&
                (f.name.find("dropout") != std::string::npos) && f.name.back() != '_';
    }
    if (!dropout || n->args().empty() || !n->args()[0].is_node()) continue;
    n->replace_all_uses_with(n->args()[0].to_node());
    g.erase_node(n);
    modified = true;
  }
  return finish(gm, modified);
}

bool eliminate_dead_code(GraphModule& gm) { return finish(gm, gm.graph().eliminate_dead_code()); }

}  // namespace fx
