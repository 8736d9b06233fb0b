// fx::extract_subgraph — onnx.utils.extract_model's boundary semantics on an FX graph: the
// nodes between `inputs` and `outputs` become a new GraphModule.
#include <unordered_map>
#include <unordered_set>

#include "fx/passes.h"

namespace fx {

std::unique_ptr<GraphModule> extract_subgraph(const GraphModule& gm,
                                              const std::vector<std::string>& inputs,
                                              const std::vector<std::string>& outputs) {
  const Graph& g = gm.graph();
  auto lookup = [&](const std::string& name, const char* role) {
    Node* n = g.find_node(name);
    if (!n)
      throw Error(ErrorKind::Value,
                  std::string("extract_subgraph: no node named '") + name + "' (" + role + ")",
                  name);
    if (n->op() == Opcode::Output)
      throw Error(ErrorKind::Value,
                  std::string("extract_subgraph: '") + name + "' is the output node, not a value",
                  name);
    return n;
  };
  std::vector<Node*> in_nodes, out_nodes;
  std::unordered_set<const Node*> is_input;
  for (const std::string& s : inputs) {
    Node* n = lookup(s, "input");
    if (!is_input.insert(n).second)
      throw Error(ErrorKind::Value, "extract_subgraph: input '" + s + "' is listed twice", s);
    in_nodes.push_back(n);
  }
  if (outputs.empty()) throw Error(ErrorKind::Value, "extract_subgraph: no outputs given");
  for (const std::string& s : outputs) out_nodes.push_back(lookup(s, "output"));

  // Walk back from the outputs, stopping at the inputs. `needed_by` remembers a user of each
  // node, to name the path when a placeholder outside the inputs is reached.
  std::unordered_map<const Node*, const Node*> needed_by;
  std::vector<const Node*> stack;
  for (Node* n : out_nodes)
    if (needed_by.emplace(n, nullptr).second) stack.push_back(n);
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (is_input.count(n)) continue;
    if (n->op() == Opcode::Placeholder) {
      const Node* user = needed_by.at(n);
      throw Error(ErrorKind::Graph,
                  "extract_subgraph: the boundary is not closed: node '" +
                      (user ? user->name() : n->name()) + "' needs the graph input '" + n->name() +
                      "', which is not among the inputs",
                  user ? user->name() : n->name());
    }
    for (Node* in : n->all_input_nodes())
      if (needed_by.emplace(in, n).second) stack.push_back(in);
  }

  auto out = std::make_unique<Graph>();
  ValueMap env;
  for (Node* n : in_nodes) {
    Node* ph = out->placeholder(n->name(), n->type());
    ph->meta() = n->meta();
    env[n] = ph;
  }
  for (Node* n : g.nodes()) {
    if (is_input.count(n) || !needed_by.count(n)) continue;
    env[n] = out->node_copy(n, [&](Node* a) -> Argument { return env.at(a); });
  }
  std::vector<Argument> results;
  for (Node* n : out_nodes) results.push_back(env.at(n));
  out->output(results.size() == 1 ? results[0] : Argument::tuple(results));
  auto result = std::make_unique<GraphModule>(&gm, std::move(out), gm.type_name());
  result->meta() = gm.meta();
  return result;
}

}  // namespace fx
