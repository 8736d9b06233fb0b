// fx::replace_pattern against torch.fx 1.13's subgraph_rewriter (goldens written by
// scripts/gen_rewriter_goldens.py): each golden holds the original, pattern and replacement
// graphs in the line format golden_graph_util.h parses, the matches, and the resulting code and
// graph text. Plus the matcher's semantics the goldens cannot show (cycles, filters, long chains,
// errors).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fx/fx.h"
#include "golden_graph_util.h"

namespace {

using fx::Argument;
using fx::fn;
using fx::Node;
using fxtest::build_graph;
using fxtest::read_file;
using fxtest::sections;

std::string describe(const std::vector<fx::Match>& matches) {
  std::string s;
  for (const fx::Match& m : matches) {
    s += "anchor " + m.anchor->name() + ": {";
    for (size_t i = 0; i < m.nodes_map.size(); ++i) {
      if (i) s += ", ";
      const Argument& v = m.nodes_map[i].second;
      s += m.nodes_map[i].first->name() + ": " + (v.is_node() ? v.to_node()->name() : v.repr());
    }
    s += "}\n";
  }
  return s;
}

class RewriterGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(RewriterGolden, MatchesTorch113) {
  const std::string text =
      read_file(std::string(FXWASM_GOLDEN_DIR) + "/rewriter/" + GetParam() + ".txt");
  auto sec = sections(text);
  auto original = build_graph(sec.at("original"));
  auto pattern = build_graph(sec.at("pattern"));
  auto replacement = build_graph(sec.at("replacement"));
  fx::GraphModule gm(nullptr, std::move(original));
  const std::vector<fx::Match> matches = fx::replace_pattern(gm, *pattern, *replacement);
  std::string want_matches = sec.at("matches");
  if (want_matches.rfind("torch 1.13 raised", 0) == 0) want_matches.clear();  // fxwasm: no match
  if (!want_matches.empty()) want_matches += "\n";
  EXPECT_EQ(describe(matches), want_matches);
  EXPECT_EQ(gm.code(), sec.at("code"));
  EXPECT_EQ(gm.graph().str(), sec.at("graph"));
  gm.graph().lint();
}

std::vector<std::string> golden_cases() { return fxtest::golden_index("rewriter"); }

INSTANTIATE_TEST_SUITE_P(Goldens, RewriterGolden, ::testing::ValuesIn(golden_cases()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(Rewriter, AtLeastTwelveGoldenCases) { EXPECT_GE(golden_cases().size(), 12u); }

// pattern: y = relu(x); return y + 1    graph: a = relu(x); c = neg(a); b = a + 1 ...
TEST(Rewriter, MatchesThatWouldFormACycleAreRejected) {
  // Pattern returns two values: r = relu(x) and s = sigmoid(y). In the graph, the input of the
  // sigmoid depends on the relu through an outside node: fusing {relu, sigmoid} would make the
  // fused node feed itself.
  fx::Graph p;
  Node* px = p.placeholder("x");
  Node* py = p.placeholder("y");
  p.output(Argument::tuple(
      {p.call_function(fn("torch.relu"), {px}), p.call_function(fn("torch.sigmoid"), {py})}));
  fx::Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(fn("torch.relu"), {x});
  Node* n = g.call_function(fn("torch.neg"), {r});
  Node* s = g.call_function(fn("torch.sigmoid"), {n});
  g.output(Argument::tuple({r, s}));
  EXPECT_TRUE(fx::SubgraphMatcher(p).match(g).empty());
  // Without the dependency the same pattern matches.
  fx::Graph g2;
  Node* x2 = g2.placeholder("x");
  g2.output(Argument::tuple(
      {g2.call_function(fn("torch.relu"), {x2}), g2.call_function(fn("torch.sigmoid"), {x2})}));
  EXPECT_EQ(fx::SubgraphMatcher(p).match(g2).size(), 0u);  // x would bind both x and y: injective
}

// ignore_literals (torch 2.x): literals are wildcards, and kwargs the pattern does not name are
// not compared; replace_pattern reports the nodes each replacement added.
TEST(Rewriter, IgnoreLiteralsAndReplacementNodes) {
  auto make = [] {
    auto g = std::make_unique<fx::Graph>();
    Node* x = g->placeholder("x");
    Node* a = g->call_function(fn("torch.add"), {x, 2}, {{"alpha", Argument(3)}});
    Node* b = g->call_function(fn("torch.add"), {a, 5});
    g->output(b);
    return g;
  };
  fx::Graph pattern;
  pattern.output(pattern.call_function(fn("torch.add"), {pattern.placeholder("x"), 1}));
  EXPECT_EQ(fx::SubgraphMatcher(pattern).match(*make()).size(), 0u);  // 1 != 2, 1 != 5
  // Both adds match: the literal is a wildcard, and the first one's alpha is not compared.
  EXPECT_EQ(fx::SubgraphMatcher(pattern, false, false, true, true).match(*make()).size(), 2u);
  fx::Graph replacement;
  replacement.output(replacement.call_function(fn("torch.sub"), {replacement.placeholder("x"), 1}));
  fx::GraphModule gm(nullptr, make());
  const auto r = fx::replace_pattern_with_filters(gm, pattern, replacement, {}, true);
  ASSERT_EQ(r.size(), 2u);
  for (const fx::Match& m : r) {
    ASSERT_EQ(m.replacements.size(), 1u);
    EXPECT_EQ(m.replacements[0]->target().function().qualname(), "torch.sub");
  }
  EXPECT_NE(gm.code().find("sub_1 = torch.sub(sub, 1)"), std::string::npos) << gm.code();
}

TEST(Rewriter, FiltersAndErrors) {
  auto make = [] {
    auto g = std::make_unique<fx::Graph>();
    Node* x = g->placeholder("x");
    Node* a = g->call_function(fn("torch.relu"), {x});
    Node* b = g->call_function(fn("torch.relu"), {a});
    g->output(b);
    return g;
  };
  fx::Graph pattern;
  pattern.output(pattern.call_function(fn("torch.relu"), {pattern.placeholder("x")}));
  fx::Graph replacement;
  replacement.output(
      replacement.call_function(fn("torch.sigmoid"), {replacement.placeholder("x")}));
  {
    fx::GraphModule gm(nullptr, make());
    // Keep only matches whose input is a placeholder.
    auto only_first = [](const fx::InternalMatch& m, const fx::Graph&, const fx::Graph&) {
      return m.placeholder_nodes.at(0).to_node()->op() == fx::Opcode::Placeholder;
    };
    EXPECT_EQ(fx::replace_pattern_with_filters(gm, pattern, replacement, {only_first}).size(), 1u);
    EXPECT_NE(gm.code().find("sigmoid = torch.sigmoid(x)"), std::string::npos) << gm.code();
    EXPECT_NE(gm.code().find("relu_1 = torch.relu(sigmoid)"), std::string::npos) << gm.code();
  }
  {
    fx::GraphModule gm(nullptr, make());
    fx::Graph two_inputs;
    Node* i0 = two_inputs.placeholder("a");
    Node* i1 = two_inputs.placeholder("b");
    two_inputs.output(two_inputs.call_function(fn("operator.add"), {i0, i1}));
    try {
      fx::replace_pattern(gm, pattern, two_inputs);
      FAIL();
    } catch (const fx::Error& e) {
      EXPECT_EQ(e.kind(), fx::ErrorKind::Value);
    }
  }
  fx::Graph dead;
  dead.placeholder("unused");
  dead.output(dead.call_function(fn("torch.relu"), {dead.placeholder("x")}));
  EXPECT_THROW(fx::SubgraphMatcher{dead}, fx::Error);
  EXPECT_THROW(fx::SubgraphMatcher{fx::Graph()}, fx::Error);
}

TEST(Rewriter, FiftyThousandNodeChain) {
  // relu(x + 1) repeated: every (add, relu) pair is replaced, without recursion limits.
  auto g = std::make_unique<fx::Graph>();
  Node* prev = g->placeholder("x");
  for (int i = 0; i < 25000; ++i)
    prev = g->call_function(fn("torch.relu"), {g->call_function(fn("operator.add"), {prev, 1})});
  g->output(prev);
  fx::GraphModule gm(nullptr, std::move(g));
  fx::Graph pattern;
  pattern.output(pattern.call_function(
      fn("torch.relu"),
      {pattern.call_function(fn("operator.add"), {pattern.placeholder("x"), 1})}));
  fx::Graph replacement;
  replacement.output(
      replacement.call_function(fn("torch.nn.functional.gelu"), {replacement.placeholder("x")}));
  EXPECT_EQ(fx::replace_pattern(gm, pattern, replacement).size(), 25000u);
  EXPECT_EQ(gm.graph().size(), 25002u);
  gm.graph().lint();
}

}  // namespace
