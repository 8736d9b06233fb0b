// Subgraph matching and rewriting with torch.fx 1.13's semantics (torch.fx.subgraph_rewriter and
// torch.fx.passes.utils.matcher_utils.SubgraphMatcher), on patterns given as Graphs.
//
//   fx::Graph pattern;      // x, y -> torch.cat([x, y]).sum()
//   fx::Graph replacement;  // x, y -> torch.stack([x, y])
//   std::vector<fx::Match> m = fx::replace_pattern(gm, pattern, replacement);
//
// Pattern placeholders are wildcards (they may also bind literals), other nodes must have the
// same opcode and target, literals must be equal with the same type (1 != 1.0), kwargs must have
// the same keys. Matches whose intermediate values escape the match, or whose fusion would create
// a cycle, are rejected; overlapping matches keep the first in graph order. Unlike 1.13, the cycle
// check is iterative and bounded by the match's span, so long graphs (50k-node chains) work.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "fx/graph_module.h"

namespace fx {

/// Pattern node -> what it matched: a graph Node, or (for a placeholder) a literal argument.
using NodesMap = std::vector<std::pair<const Node*, Argument>>;

/// One match of a pattern in a graph (torch.fx InternalMatch).
struct InternalMatch {
  std::vector<const Node*> anchors;  ///< the pattern's anchors
  NodesMap nodes_map;                ///< in the order the matcher recorded them
  /// What each pattern placeholder matched, in pattern order (a node or a literal).
  std::vector<Argument> placeholder_nodes;
  /// The graph nodes matched by the nodes the pattern returns, in output order.
  std::vector<Node*> returning_nodes;

  /// What `pattern_node` matched, or nullptr.
  const Argument* find(const Node* pattern_node) const;
};

/// torch.fx SubgraphMatcher.
class SubgraphMatcher {
 public:
  /// Throws fx::Error(Value) for an empty pattern or one with dead code (every pattern node but
  /// the output must be used), as torch.fx does.
  ///
  /// `ignore_literals` (torch 2.x): a literal in the pattern matches any literal; kwargs the
  /// pattern does not name are not compared either, so `onnx.Conv(x, w, b)` matches every Conv
  /// whatever its attributes (an ONNX graph's attributes are kwargs).
  explicit SubgraphMatcher(const Graph& pattern, bool match_output = false,
                           bool match_placeholder = false, bool remove_overlapping_matches = true,
                           bool ignore_literals = false);
  /// Every match in `graph`, in discovery (graph) order, filtered as documented above.
  std::vector<InternalMatch> match(const Graph& graph) const;

 private:
  struct State;
  bool nodes_are_equal(const Node* pn, const Node* gn) const;
  bool match_nodes(const Node* pn, Node* gn, State& s) const;
  bool match_args(const Argument& pn, const Argument& gn, State& s) const;

  bool match_placeholder_, remove_overlapping_, ignore_literals_ = false;
  std::vector<const Node*> placeholders_, returning_, anchors_;
};

/// What replace_pattern returns per replaced match (torch.fx Match).
struct Match {
  const Node* anchor;  ///< the pattern's first anchor (the same node for every match)
  NodesMap nodes_map;  ///< as it was when matched (its graph nodes are erased by now)
  /// The nodes the replacement put in the graph for this match (torch 2.x
  /// ReplacedPatterns.replacements), in the replacement's order.
  std::vector<Node*> replacements;
};

/// A filter of replace_pattern_with_filters: keep the match if it returns true.
using MatchFilter =
    std::function<bool(const InternalMatch& match, const Graph& original, const Graph& pattern)>;

/// Replaces every non-overlapping match of `pattern` in `gm`'s graph with a copy of
/// `replacement` (same number of placeholders), inserted before the first user of the matched
/// outputs, then recompiles `gm`. Throws fx::Error(Value) when the placeholder counts differ.
std::vector<Match> replace_pattern(GraphModule& gm, const Graph& pattern, const Graph& replacement);
/// replace_pattern keeping only the matches every filter accepts.
std::vector<Match> replace_pattern_with_filters(GraphModule& gm, const Graph& pattern,
                                                const Graph& replacement,
                                                const std::vector<MatchFilter>& filters,
                                                bool ignore_literals = false);

}  // namespace fx
