// torch 1.13's SubgraphMatcher and replace_pattern, step for step (see the header for the
// semantics). Deviations: an anchor without candidates yields no match (1.13 raises KeyError),
// and the cycle check is an iterative search bounded by the match's position range instead of
// 1.13's recursive search of everything downstream (quadratic, RecursionError on long chains).
#include "fx/subgraph_rewriter.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace fx {

const Argument* InternalMatch::find(const Node* pattern_node) const {
  for (const auto& kv : nodes_map)
    if (kv.first == pattern_node) return &kv.second;
  return nullptr;
}

// The matcher's working state; copied to backtrack, as 1.13 copies InternalMatch.
struct SubgraphMatcher::State {
  NodesMap nodes_map;
  std::unordered_map<const Node*, size_t> index;  // pattern node -> position in nodes_map
  std::unordered_set<const Node*> matched;        // graph nodes already in nodes_map

  const Argument* get(const Node* pn) const {
    auto it = index.find(pn);
    return it == index.end() ? nullptr : &nodes_map[it->second].second;
  }
  void set(const Node* pn, Argument value) {
    if (value.is_node()) matched.insert(value.to_node());
    index[pn] = nodes_map.size();
    nodes_map.emplace_back(pn, std::move(value));
  }
};

namespace {

bool is_placeholder_or_output(const Node* n) {
  return n->op() == Opcode::Placeholder || n->op() == Opcode::Output;
}

// torch.utils._pytree.tree_flatten of an argument: lists, tuples and dict values are flattened,
// everything else is a leaf.
void flatten(const Argument& a, std::vector<const Argument*>& out) {
  switch (a.kind()) {
    case Argument::Kind::Tuple:
    case Argument::Kind::List:
      for (const Argument& e : a.elements()) flatten(e, out);
      return;
    case Argument::Kind::Dict:
      for (const auto& kv : a.dict_items()) flatten(kv.second, out);
      return;
    default:
      out.push_back(&a);
      return;
  }
}

// Python's == between two leaves (numbers compare by value across bool/int/float).
bool py_equal(const Argument& a, const Argument& b) {
  auto numeric = [](const Argument& x) {
    return x.kind() == Argument::Kind::Bool || x.kind() == Argument::Kind::Int ||
           x.kind() == Argument::Kind::Float;
  };
  if (numeric(a) && numeric(b)) return a.to_double() == b.to_double();
  return a == b;
}

}  // namespace

SubgraphMatcher::SubgraphMatcher(const Graph& pattern, bool match_output, bool match_placeholder,
                                 bool remove_overlapping_matches, bool ignore_literals)
    : match_placeholder_(match_placeholder),
      remove_overlapping_(remove_overlapping_matches),
      ignore_literals_(ignore_literals) {
  if (pattern.size() == 0)
    throw Error(ErrorKind::Value, "SubgraphMatcher cannot be initialized with an empty pattern");
  for (Node* n : pattern.nodes())
    if (n->op() != Opcode::Output && n->users().empty())
      throw Error(ErrorKind::Value,
                  "SubgraphMatcher cannot be initialized with an pattern with dead code (node '" +
                      n->name() + "' is unused: every pattern input and value must be used)",
                  n->name());
  for (Node* n : pattern.nodes())
    if (n->op() == Opcode::Placeholder) placeholders_.push_back(n);
  const Node* output = pattern.nodes().reversed().begin() != pattern.nodes().reversed().end()
                           ? *pattern.nodes().reversed().begin()
                           : nullptr;
  if (!output || output->op() != Opcode::Output)
    throw Error(ErrorKind::Value, "SubgraphMatcher: the pattern's last node must be its output");
  for (Node* n : output->all_input_nodes()) returning_.push_back(n);
  if (match_output) {
    anchors_.push_back(output);
  } else {
    for (const Node* n : returning_)
      if (n->users().size() == 1) anchors_.push_back(n);
  }
}

bool SubgraphMatcher::nodes_are_equal(const Node* pn, const Node* gn) const {
  if (!match_placeholder_ && pn->op() == Opcode::Placeholder) return true;
  if (pn->op() != gn->op()) return false;
  if (pn->op() == Opcode::Placeholder || pn->op() == Opcode::Output) return true;
  return pn->target() == gn->target();
}

bool SubgraphMatcher::match_args(const Argument& pn, const Argument& gn, State& s) const {
  if (pn.is_node() && !gn.is_node()) {
    const Node* p = pn.to_node();
    if (p->op() != Opcode::Placeholder) return false;
    if (const Argument* bound = s.get(p)) return !bound->is_node() && py_equal(*bound, gn);
    s.set(p, gn);  // a placeholder binds a literal
    return true;
  }
  if (!pn.is_node() && gn.is_node()) return false;
  if (ignore_literals_) return true;  // two literals
  return pn == gn;                    // same kind and value: 1 does not match 1.0
}

bool SubgraphMatcher::match_nodes(const Node* pn, Node* gn, State& s) const {
  if (const Argument* bound = s.get(pn)) return bound->is_node() && bound->to_node() == gn;
  if (s.matched.count(gn)) return false;  // injective on graph nodes
  if (!nodes_are_equal(pn, gn)) return false;
  s.set(pn, gn);
  if (pn->op() == Opcode::Placeholder) return true;
  std::vector<const Argument*> pargs, gargs;
  for (const Argument& a : pn->args()) flatten(a, pargs);
  for (const Argument& a : gn->args()) flatten(a, gargs);
  // kwargs: the same key set (in any order), values compared in the pattern's key order; with
  // ignore_literals, the pattern's keys only.
  if (!ignore_literals_ && pn->kwargs().size() != gn->kwargs().size()) return false;
  for (const auto& kv : pn->kwargs()) {
    const Argument* g = gn->kwargs().find(kv.first);
    if (!g) return false;
    pargs.push_back(&kv.second);
    gargs.push_back(g);
  }
  if (pargs.size() != gargs.size()) return false;
  for (size_t i = 0; i < pargs.size(); ++i) {
    const Argument& p = *pargs[i];
    const Argument& g = *gargs[i];
    const bool ok = (p.is_node() && g.is_node()) ? match_nodes(p.to_node(), g.to_node(), s)
                                                 : match_args(p, g, s);
    if (!ok) return false;
  }
  return true;
}

std::vector<InternalMatch> SubgraphMatcher::match(const Graph& graph) const {
  // Candidates per anchor, in graph order; anchors without candidates cannot match.
  std::vector<std::pair<const Node*, std::vector<Node*>>> candidates;
  for (const Node* anchor : anchors_) {
    std::vector<Node*> c;
    for (Node* n : graph.nodes())
      if (nodes_are_equal(anchor, n)) c.push_back(n);
    if (c.empty()) return {};
    candidates.emplace_back(anchor, std::move(c));
  }

  std::vector<InternalMatch> matches;
  // Backtracking over anchors (depth = number of anchors, i.e. pattern outputs).
  std::function<void(size_t, const State&)> backtrack = [&](size_t i, const State& state) {
    if (i == candidates.size()) {
      InternalMatch m;
      m.anchors = anchors_;
      m.nodes_map = state.nodes_map;
      for (const Node* p : placeholders_) {
        const Argument* a = state.get(p);
        if (!a) return;  // a placeholder no anchor reaches: not a complete match
        m.placeholder_nodes.push_back(*a);
      }
      for (const Node* r : returning_) {
        const Argument* a = state.get(r);
        if (!a || !a->is_node()) return;
        m.returning_nodes.push_back(a->to_node());
      }
      matches.push_back(std::move(m));
      return;
    }
    for (Node* node : candidates[i].second) {
      State s = state;
      if (match_nodes(candidates[i].first, node, s)) backtrack(i + 1, s);
    }
  };
  backtrack(0, State{});

  // Positions in graph order, for the bounded cycle check.
  std::vector<int64_t> pos(graph.id_bound(), -1);
  {
    int64_t p = 0;
    for (Node* n : graph.nodes()) pos[n->id()] = p++;
  }
  auto position = [&](const Node* n) {
    return (&n->graph() == &graph && n->id() < pos.size()) ? pos[n->id()] : -1;
  };

  std::vector<InternalMatch> kept;
  for (InternalMatch& m : matches) {
    // (a) Contained: a matched intermediate may only be used inside the match.
    std::unordered_set<const Node*> inside;
    for (const auto& kv : m.nodes_map)
      if (kv.second.is_node()) inside.insert(kv.second.to_node());
    bool contained = true;
    for (const auto& kv : m.nodes_map) {
      const Node* pn = kv.first;
      if (!kv.second.is_node() || pn->op() == Opcode::Placeholder) continue;
      if (std::find(returning_.begin(), returning_.end(), pn) != returning_.end()) continue;
      for (Node* user : kv.second.to_node()->users())
        if (!inside.count(user)) contained = false;
    }
    if (!contained) continue;
    // (b) No cycle if fused: no path from an external user of the matched compute nodes back
    // into them. Every such path stays before the last matched node in graph order.
    std::unordered_set<const Node*> partition;
    int64_t last = -1;
    for (const auto& kv : m.nodes_map)
      if (!is_placeholder_or_output(kv.first) && kv.second.is_node()) {
        partition.insert(kv.second.to_node());
        last = std::max(last, position(kv.second.to_node()));
      }
    std::vector<const Node*> stack;
    std::unordered_set<const Node*> visited;
    for (const Node* n : partition)
      for (Node* u : n->users())
        if (!partition.count(u) && visited.insert(u).second) stack.push_back(u);
    bool cycle = false;
    while (!stack.empty() && !cycle) {
      const Node* n = stack.back();
      stack.pop_back();
      if (position(n) > last) continue;
      for (Node* u : n->users()) {
        if (partition.count(u)) {
          cycle = true;
          break;
        }
        if (visited.insert(u).second) stack.push_back(u);
      }
    }
    if (!cycle) kept.push_back(std::move(m));
  }

  if (!remove_overlapping_) return kept;
  std::vector<InternalMatch> result;
  std::unordered_set<const Node*> taken;
  for (InternalMatch& m : kept) {
    bool overlap = false;
    for (const auto& kv : m.nodes_map)
      if (!is_placeholder_or_output(kv.first) && kv.second.is_node() &&
          taken.count(kv.second.to_node()))
        overlap = true;
    if (overlap) continue;
    for (const auto& kv : m.nodes_map)
      if (!is_placeholder_or_output(kv.first) && kv.second.is_node())
        taken.insert(kv.second.to_node());
    result.push_back(std::move(m));
  }
  return result;
}

namespace {

std::vector<Match> rewrite(GraphModule& gm, const Graph& pattern, const Graph& replacement,
                           const std::vector<MatchFilter>& filters, bool ignore_literals) {
  Graph& graph = gm.graph();
  SubgraphMatcher matcher(pattern, false, false, true, ignore_literals);
  std::vector<InternalMatch> all = matcher.match(graph);
  std::vector<InternalMatch> matches;
  for (InternalMatch& m : all) {
    bool keep = true;
    for (const MatchFilter& f : filters) keep = keep && f(m, graph, pattern);
    if (keep) matches.push_back(std::move(m));
  }
  std::vector<const Node*> replacement_placeholders;
  for (Node* n : replacement.nodes())
    if (n->op() == Opcode::Placeholder) replacement_placeholders.push_back(n);
  std::vector<const Node*> pattern_nodes;
  for (Node* n : pattern.nodes()) pattern_nodes.push_back(n);

  std::unordered_map<const Node*, Argument> changed;  // replaced returning node -> its copy
  std::vector<std::vector<Node*>> inserted;           // per match, the replacement's copies
  for (const InternalMatch& m : matches) {
    if (m.placeholder_nodes.size() != replacement_placeholders.size())
      throw Error(ErrorKind::Value, "replace_pattern: the pattern takes " +
                                        std::to_string(m.placeholder_nodes.size()) +
                                        " inputs but the replacement takes " +
                                        std::to_string(replacement_placeholders.size()) +
                                        "; they must take the same inputs");
    ValueMap val_map;
    for (size_t i = 0; i < replacement_placeholders.size(); ++i) {
      Argument v = m.placeholder_nodes[i];
      if (v.is_node()) {
        auto it = changed.find(v.to_node());
        if (it != changed.end()) v = it->second;
      }
      val_map[replacement_placeholders[i]] = v;
    }
    // Insert before the first user (in graph order) of any returning node.
    std::unordered_set<const Node*> users;
    for (const Node* r : m.returning_nodes)
      for (Node* u : r->users()) users.insert(u);
    if (users.empty())
      throw Error(ErrorKind::Graph, "replace_pattern: the matched outputs have no users");
    // One user: that one (no scan, so long chains stay linear); several: the first in graph
    // order, as 1.13.
    Node* first_user = users.size() == 1 ? const_cast<Node*>(*users.begin()) : nullptr;
    if (!first_user) {
      for (Node* n : graph.nodes())
        if (users.count(n)) {
          first_user = n;
          break;
        }
    }
    std::optional<Argument> out;
    {
      auto guard = graph.inserting_before(first_user);
      out = graph.graph_copy(replacement, val_map);
    }
    std::vector<Argument> copies;
    if (out && out->is_sequence()) {
      copies = out->elements();
    } else if (out) {
      copies.push_back(*out);
    }
    if (copies.size() != m.returning_nodes.size())
      throw Error(ErrorKind::Value, "replace_pattern: the pattern returns " +
                                        std::to_string(m.returning_nodes.size()) +
                                        " values but the replacement returns " +
                                        std::to_string(copies.size()));
    for (size_t i = 0; i < copies.size(); ++i) {
      if (!copies[i].is_node())
        throw Error(ErrorKind::Value,
                    "replace_pattern: the replacement must return nodes, not " + copies[i].repr());
      m.returning_nodes[i]->replace_all_uses_with(copies[i].to_node());
      changed[m.returning_nodes[i]] = copies[i];
    }
    std::vector<Node*>& made = inserted.emplace_back();
    for (Node* rn : replacement.nodes()) {
      if (is_placeholder_or_output(rn)) continue;
      auto it = val_map.find(rn);
      if (it != val_map.end() && it->second.is_node()) made.push_back(it->second.to_node());
    }
    for (auto it = pattern_nodes.rbegin(); it != pattern_nodes.rend(); ++it) {
      if (is_placeholder_or_output(*it)) continue;
      const Argument* gn = m.find(*it);
      if (gn && gn->is_node()) graph.erase_node(gn->to_node());
    }
  }
  gm.recompile();
  std::vector<Match> result;
  for (size_t i = 0; i < matches.size(); ++i)
    result.push_back(Match{matches[i].anchors.empty() ? nullptr : matches[i].anchors[0],
                           matches[i].nodes_map, std::move(inserted[i])});
  return result;
}

}  // namespace

std::vector<Match> replace_pattern(GraphModule& gm, const Graph& pattern,
                                   const Graph& replacement) {
  return rewrite(gm, pattern, replacement, {}, false);
}

std::vector<Match> replace_pattern_with_filters(GraphModule& gm, const Graph& pattern,
                                                const Graph& replacement,
                                                const std::vector<MatchFilter>& filters,
                                                bool ignore_literals) {
  return rewrite(gm, pattern, replacement, filters, ignore_literals);
}

}  // namespace fx
