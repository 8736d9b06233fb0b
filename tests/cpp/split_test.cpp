// fx::split_module against torch.fx 1.13's torch.fx.passes.split_module (goldens written by
// scripts/gen_split_goldens.py): the traced input, the partition the callback gave each node and
// what torch produced (module repr, outer and submodule graph text and code, qualname_map, or
// the error). Plus semantics the goldens cannot show (errors naming nodes, meta, ONNX graphs).
#include <gtest/gtest.h>

#include "fx/fx.h"
#include "golden_graph_util.h"

namespace {

using fxtest::sections;

class SplitGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(SplitGolden, MatchesTorch113) {
  auto sec =
      sections(fxtest::read_file(std::string(FXWASM_GOLDEN_DIR) + "/split/" + GetParam() + ".txt"));
  auto root = fxtest::build_modules(sec.at("modules"), sec.at("tensors"));
  fx::GraphModule gm(root.get(), fxtest::build_graph(sec.at("graph")));
  std::unordered_map<std::string, int64_t> partition;
  for (const std::string& l : fxtest::lines(sec.at("partitions"))) {
    auto f = fxtest::split(l, '\t');
    partition[f.at(0)] = std::stoll(f.at(1));
  }
  std::vector<std::string> calls;
  auto cb = [&](const fx::Node* n) {
    calls.push_back(n->name());
    return partition.at(n->name());
  };
  fx::QualnameMap qmap;
  const bool keep = sec.at("options") == "keep_original_order";
  if (sec.count("error")) {
    try {
      fx::split_module(gm, root.get(), cb, &qmap, keep);
      FAIL() << "expected an error";
    } catch (const fx::Error& e) {
      EXPECT_EQ(std::string("RuntimeError: ") + e.what(), sec.at("error"));
    }
    return;
  }
  auto out = fx::split_module(gm, root.get(), cb, &qmap, keep);
  EXPECT_EQ(calls.size(), partition.size());  // called once per call_* node
  EXPECT_EQ(out->repr(), sec.at("repr"));
  EXPECT_EQ(out->graph().str(), sec.at("out.graph"));
  EXPECT_EQ(out->code(), sec.at("out.code"));
  out->graph().lint();
  size_t submods = 0;
  for (const auto& [name, child] : out->children()) {
    auto* sub = dynamic_cast<fx::GraphModule*>(child.get());
    if (!sub) continue;
    ++submods;
    ASSERT_TRUE(sec.count(name + ".graph")) << name;
    EXPECT_EQ(sub->graph().str(), sec.at(name + ".graph")) << name;
    EXPECT_EQ(sub->code(), sec.at(name + ".code")) << name;
    sub->graph().lint();
  }
  size_t want_submods = 0;
  for (const auto& kv : sec)
    want_submods += kv.first.size() > 5 && kv.first.rfind(".code") == kv.first.size() - 5 &&
                    kv.first != "out.code";
  EXPECT_EQ(submods, want_submods);
  std::string q;
  for (const auto& kv : qmap) q += (q.empty() ? "" : "\n") + kv.first + "\t" + kv.second;
  EXPECT_EQ(q, sec.at("qualname_map"));
}

INSTANTIATE_TEST_SUITE_P(Goldens, SplitGolden, ::testing::ValuesIn(fxtest::golden_index("split")),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(SplitModule, AtLeastEightGoldenCases) { EXPECT_GE(fxtest::golden_index("split").size(), 8u); }

// x -> a = x + 1 -> b = relu(a) -> output b
std::unique_ptr<fx::GraphModule> small_chain() {
  auto g = std::make_unique<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  x->meta().set("note", "input");
  fx::Node* a = g->call_function(fx::fn("operator.add"), {x, 1});
  a->meta().set("note", "add");
  fx::Node* b = g->call_function(fx::fn("torch.relu"), {a});
  g->output(b);
  return std::make_unique<fx::GraphModule>(nullptr, std::move(g));
}

TEST(SplitModule, CopiesMetaToSubmodulePlaceholdersAndNodes) {
  auto gm = small_chain();
  auto out =
      fx::split_module(*gm, gm.get(), [](const fx::Node* n) { return n->name() == "add" ? 0 : 1; });
  auto* s0 = dynamic_cast<fx::GraphModule*>(out->child("submod_0").get());
  auto* s1 = dynamic_cast<fx::GraphModule*>(out->child("submod_1").get());
  ASSERT_TRUE(s0 && s1);
  EXPECT_EQ(s0->graph().find_node("x")->meta().at("note").to_string(), "input");
  EXPECT_EQ(s0->graph().find_node("add")->meta().at("note").to_string(), "add");
  // the consumer's placeholder carries the producer's meta
  EXPECT_EQ(s1->graph().find_node("add")->meta().at("note").to_string(), "add");
  EXPECT_EQ(out->graph().find_node("x")->meta().at("note").to_string(), "input");
}

TEST(SplitModule, MissingModuleTargetNamesTheNode) {
  auto g = std::make_unique<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  g->output(g->call_module("lin", {x}));
  fx::Module root;
  root.add_module("lin", std::make_shared<fx::Module>("Linear"));
  fx::GraphModule gm(&root, std::move(g));
  gm.remove_child("lin");
  try {
    fx::split_module(gm, &root, [](const fx::Node*) { return 0; });
    FAIL() << "expected an error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Attribute);
    EXPECT_EQ(e.node(), "lin");
    EXPECT_NE(std::string(e.what()).find("Operator target lin not found!"), std::string::npos);
  }
}

TEST(SplitModule, KeepOriginalOrderOutOfDependencyOrderIsAnError) {
  // a (p0), b = neg(x) (p1), c = a + b (p0): p0 depends on p1 although p0 was seen first.
  auto g = std::make_unique<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* a = g->call_function(fx::fn("torch.relu"), {x});
  fx::Node* b = g->call_function(fx::fn("torch.neg"), {x});
  fx::Node* c = g->call_function(fx::fn("operator.add"), {a, b});
  g->output(c);
  fx::GraphModule gm(nullptr, std::move(g));
  auto cb = [](const fx::Node* n) { return n->name() == "neg" ? 1 : 0; };
  EXPECT_NO_THROW(fx::split_module(gm, nullptr, cb));  // topological: p1 first
  try {
    fx::split_module(gm, nullptr, cb, nullptr, true);
    FAIL() << "expected an error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Graph);
    EXPECT_EQ(e.node(), "neg");
  }
}

TEST(SplitModule, NullCallbackIsAValueError) {
  auto gm = small_chain();
  EXPECT_THROW(fx::split_module(*gm, nullptr, nullptr), fx::Error);
}

}  // namespace

namespace {

// A partition whose value nobody uses (1.13: IndexError) returns () and is still called.
TEST(SplitModule, PartitionWithoutUsedValuesReturnsAnEmptyTuple) {
  auto g = std::make_unique<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  g->call_function(fx::fn("torch.neg"), {x});  // dead
  g->output(g->call_function(fx::fn("torch.relu"), {x}));
  fx::GraphModule gm(nullptr, std::move(g));
  auto out =
      fx::split_module(gm, nullptr, [](const fx::Node* n) { return n->name() == "neg" ? 1 : 0; });
  auto* s1 = dynamic_cast<fx::GraphModule*>(out->child("submod_1").get());
  ASSERT_NE(s1, nullptr);
  EXPECT_EQ(s1->graph().output_node()->args()[0].repr(), "()");
  EXPECT_NE(out->code().find("submod_1 = self.submod_1(x)"), std::string::npos) << out->code();
  out->graph().lint();
}

}  // namespace
