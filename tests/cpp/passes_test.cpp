// Passes (fx/passes.h): what each removes, what it must keep, and that the module recompiles.
#include <gtest/gtest.h>

#include "fx/fx.h"

namespace {

using fx::Argument;
using fx::fn;
using fx::Node;

std::vector<std::string> names(const fx::Graph& g) {
  std::vector<std::string> out;
  for (Node* n : g.nodes()) out.push_back(n->name());
  return out;
}

TEST(Passes, DeadCodeEliminationKeepsInPlaceOpsThatTorch113Drops) {
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  g->call_method("mul_", {x, 2});                       // x.mul_(2): mutates x
  g->call_function(fn("torch.relu_"), {x});             // in-place function
  g->call_function(fn("operator.iadd"), {x, 1});        // x += 1
  g->call_function(fn("operator.setitem"), {x, 0, 1});  // x[0] = 1
  g->call_method("add", {x, 1});                        // out of place and unused: dead
  g->output(x);
  fx::GraphModule gm(nullptr, std::move(g));
  EXPECT_TRUE(fx::eliminate_dead_code(gm));
  EXPECT_EQ(names(gm.graph()),
            (std::vector<std::string>{"x", "mul_", "relu_", "iadd", "setitem", "output"}));
  EXPECT_EQ(gm.code().find("add("), std::string::npos) << gm.code();
}

TEST(Passes, CseMergesEqualComputationsOnly) {
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* a = g->call_function(fn("operator.add"), {x, 1});
  Node* b = g->call_function(fn("operator.add"), {x, 1});    // same as a
  Node* c = g->call_function(fn("operator.add"), {x, 1.0});  // 1.0 is not 1
  Node* ra = g->call_function(fn("torch.relu"), {a});
  Node* rb = g->call_function(fn("torch.relu"), {b});  // same as ra once b -> a
  Node* s1 = g->call_method("sum", {x}, {{"dim", 1}});
  Node* s2 = g->call_method("sum", {x}, {{"dim", 1}});
  Node* r1 = g->call_function(fn("torch.rand"), {2});
  Node* r2 = g->call_function(fn("torch.rand"), {2});  // banned below: random
  g->output(Argument::tuple({ra, rb, c, s1, s2, r1, r2}));
  fx::GraphModule gm(nullptr, std::move(g));
  EXPECT_TRUE(fx::cse(gm, {"torch.rand"}));
  EXPECT_EQ(names(gm.graph()), (std::vector<std::string>{"x", "add", "add_2", "relu", "sum_1",
                                                         "rand", "rand_1", "output"}));
  EXPECT_NE(gm.code().find("return (relu, relu, add_2, sum_1, sum_1, rand, rand_1)"),
            std::string::npos)
      << gm.code();
  EXPECT_FALSE(fx::cse(gm, {"torch.rand"}));  // a fixed point
}

TEST(Passes, RemoveDropoutModulesAndFunctions) {
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* d1 = g->call_module("drop", {x});
  Node* d2 =
      g->call_function(fn("torch.nn.functional.dropout"), {d1}, {{"p", 0.5}, {"training", false}});
  Node* r = g->call_function(fn("torch.relu"), {d2});
  g->output(r);
  fx::Module root;
  root.add_module("drop", std::make_shared<fx::Module>("Dropout", "p=0.1, inplace=False"));
  fx::GraphModule gm(&root, std::move(g));
  EXPECT_TRUE(fx::remove_dropout(gm));
  EXPECT_EQ(names(gm.graph()), (std::vector<std::string>{"x", "relu", "output"}));
  EXPECT_NE(gm.code().find("relu = torch.relu(x)"), std::string::npos) << gm.code();
  EXPECT_FALSE(fx::remove_dropout(gm));
}

}  // namespace
