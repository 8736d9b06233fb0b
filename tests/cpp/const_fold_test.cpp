// fx::split_const_subgraphs against torch.fx 1.13's const_fold.split_const_subgraphs (goldens
// written by scripts/gen_const_fold_goldens.py): folded attribute name, main graph and constant
// subgraph, text and code byte for byte. Plus folding an ONNX-style graph and running it.
#include <gtest/gtest.h>

#include <algorithm>

#include "fx/exec.h"
#include "fx/fx.h"
#include "golden_graph_util.h"

namespace {

class ConstFoldGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(ConstFoldGolden, MatchesTorch113) {
  auto sec = fxtest::sections(
      fxtest::read_file(std::string(FXWASM_GOLDEN_DIR) + "/const_fold/" + GetParam() + ".txt"));
  auto root = fxtest::build_modules(sec.at("modules"), sec.at("tensors"));
  fx::GraphModule gm(root.get(), fxtest::build_graph(sec.at("graph")));
  const std::vector<std::string> skip = fxtest::lines(sec.at("skip"));
  const std::string before = gm.code();
  fx::FoldedGraphModule folded = fx::split_const_subgraphs(gm, [&](const fx::Node* n) {
    return std::find(skip.begin(), skip.end(), n->name()) != skip.end();
  });
  EXPECT_EQ(gm.code(), before);  // the input is not changed
  EXPECT_EQ(folded.fx_const_folded_attrs_name.empty() ? "None" : folded.fx_const_folded_attrs_name,
            sec.at("attr_name"));
  EXPECT_EQ(folded.module->graph().str(), sec.at("main.graph"));
  EXPECT_EQ(folded.module->code(), sec.at("main.code"));
  folded.module->graph().lint();
  if (sec.at("const.graph") == "None") {
    EXPECT_EQ(folded.const_subgraph_module, nullptr);
  } else {
    ASSERT_NE(folded.const_subgraph_module, nullptr);
    EXPECT_EQ(folded.const_subgraph_module->graph().str(), sec.at("const.graph"));
    EXPECT_EQ(folded.const_subgraph_module->code(), sec.at("const.code"));
    folded.const_subgraph_module->graph().lint();
    EXPECT_NE(folded.module->attr_kind(folded.fx_const_folded_attrs_name), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Goldens, ConstFoldGolden,
                         ::testing::ValuesIn(fxtest::golden_index("const_fold")),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(ConstFold, AtLeastFiveGoldenCases) {
  EXPECT_GE(fxtest::golden_index("const_fold").size(), 5u);
}

// ONNX-style graph: y = x * (w + b); running the constant subgraph (run_folding) and installing
// its value under the folded name gives the same result as the original graph.
TEST(ConstFold, FoldedOnnxGraphRunsLikeTheOriginal) {
  auto root = std::make_shared<fx::Module>();
  root->register_buffer("w", fxtest::float_tensor({3}, {1.f, 2.f, 3.f}));
  root->register_buffer("b", fxtest::float_tensor({3}, {0.5f, -1.f, 4.f}));
  auto g = std::make_unique<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* w = g->get_attr("w");
  fx::Node* b = g->get_attr("b");
  fx::Node* s = g->call_function(fx::fn("onnx.Add"), {w, b});
  g->output(g->call_function(fx::fn("onnx.Mul"), {x, s}));
  fx::GraphModule gm(root.get(), std::move(g));
  fx::FoldedGraphModule f = fx::split_const_subgraphs(gm);
  ASSERT_NE(f.const_subgraph_module, nullptr);
  std::vector<fx::exec::Value> folded = fx::exec::run(*f.const_subgraph_module, {});
  ASSERT_EQ(folded.size(), 1u);
  f.module->register_buffer(f.fx_const_folded_attrs_name, folded[0].to_tensor());
  const auto in = fx::exec::Value::from_f32({3}, {2.f, 3.f, -1.f});
  EXPECT_EQ(fx::exec::run(*f.module, {in})[0].to_f32(), fx::exec::run(gm, {in})[0].to_f32());
  EXPECT_EQ(fx::exec::run(*f.module, {in})[0].to_f32(), (std::vector<float>{3.f, 3.f, -7.f}));
  // the main graph no longer computes the Add
  for (fx::Node* n : f.module->graph().nodes())
    EXPECT_NE(n->target().pretty(), "onnx.Add") << n->name();
}

TEST(ConstFold, ImpureAndSkippedNodesStayInTheMainGraph) {
  auto root = std::make_shared<fx::Module>();
  root->register_buffer("w", fxtest::float_tensor({2}, {1.f, 2.f}));
  auto g = std::make_unique<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* w = g->get_attr("w");
  fx::Node* r = g->call_function(fx::fn("torch.relu"), {w});
  fx::Node* n = g->call_function(fx::fn("torch.neg"), {w});
  g->output(fx::Argument::tuple({g->call_function(fx::fn("operator.add"), {x, r}), n}));
  fx::GraphModule gm(root.get(), std::move(g));
  fx::FoldedGraphModule f =
      fx::split_const_subgraphs(gm, [](const fx::Node* m) { return m->name() == "neg"; });
  ASSERT_NE(f.const_subgraph_module, nullptr);
  EXPECT_NE(f.module->graph().find_node("neg"), nullptr);
  EXPECT_EQ(f.module->graph().find_node("relu"), nullptr);
  EXPECT_NE(f.const_subgraph_module->graph().find_node("relu"), nullptr);
}

}  // namespace
