// Graph::version()/serial() and the executor's plans: every mutation path moves the version,
// reads do not, and a run after any mutation (of the graph, a node or the module's tensors)
// gives what a fresh import of the changed model gives, never a stale plan's result.
#include <gtest/gtest.h>

#include <cstring>

#include "fx/exec.h"
#include "fx/fx.h"

namespace {

using fx::Argument;
using fx::fn;
using fx::Node;
using fx::exec::Value;

// Runs `change` and checks that it moved g's version (and only forwards).
template <class F>
void expect_bumps(const fx::Graph& g, const char* what, F&& change) {
  const uint64_t before = g.version();
  change();
  EXPECT_GT(g.version(), before) << what << " did not bump the graph version";
}

TEST(GraphVersion, EveryMutationBumpsIt) {
  auto owned = std::make_unique<fx::Graph>();
  fx::Graph& g = *owned;
  Node* x = nullptr;
  Node* y = nullptr;
  Node* add = nullptr;
  Node* mul = nullptr;
  expect_bumps(g, "placeholder", [&] { x = g.placeholder("x"); });
  expect_bumps(g, "second placeholder", [&] { y = g.placeholder("y"); });
  expect_bumps(g, "call_function", [&] { add = g.call_function(fn("onnx.Add"), {x, y}); });
  expect_bumps(g, "call_function", [&] { mul = g.call_function(fn("onnx.Mul"), {add, y}); });
  expect_bumps(g, "output", [&] { g.output(mul); });
  expect_bumps(g, "update_arg", [&] { mul->update_arg(1, x); });
  expect_bumps(g, "update_kwarg", [&] { mul->update_kwarg("k", 1); });
  expect_bumps(g, "set_args", [&] { mul->set_args({add, add}); });
  expect_bumps(g, "set_kwargs", [&] { mul->set_kwargs({}); });
  expect_bumps(g, "replace_input_with", [&] { mul->replace_input_with(add, y); });
  expect_bumps(g, "replace_all_uses_with", [&] { y->replace_all_uses_with(x); });
  expect_bumps(g, "set_type", [&] { add->set_type("Tensor"); });
  expect_bumps(g, "set_stack_trace", [&] { add->set_stack_trace("File x.py"); });
  expect_bumps(g, "meta()", [&] { add->meta().set("onnx_outputs", Argument::list({"a"})); });
  expect_bumps(g, "prepend", [&] { add->prepend(y); });
  expect_bumps(g, "append", [&] { mul->append(y); });
  expect_bumps(g, "erase_node", [&] { g.erase_node(add); });
  Node* dead = nullptr;
  {
    auto guard = g.inserting_before(mul);
    expect_bumps(g, "call_function", [&] { dead = g.call_function(fn("onnx.Relu"), {x}); });
  }
  expect_bumps(g, "eliminate_dead_code", [&] { EXPECT_TRUE(g.eliminate_dead_code()); });
  EXPECT_TRUE(dead->erased());
  fx::GraphModule gm(nullptr, std::move(owned));
  expect_bumps(gm.graph(), "GraphModule::meta()", [&] { gm.meta().set("producer", "test"); });
}

TEST(GraphVersion, ReadsAndRunsDoNotBumpIt) {
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* relu = g->call_function(fn("onnx.Relu"), {x});
  g->output(relu);
  fx::GraphModule gm(nullptr, std::move(g));
  const fx::GraphModule& cgm = gm;
  const uint64_t v = gm.graph().version();
  (void)cgm.graph().str();
  (void)cgm.graph().tabular();
  cgm.graph().lint();
  EXPECT_EQ(gm.graph().version(), v) << "printing or linting";
  (void)cgm.meta().find("x");
  for (const Node* n : cgm.graph().nodes()) (void)n->meta().find("x");
  EXPECT_EQ(gm.graph().version(), v) << "code or meta reads";
  (void)fx::exec::run(gm, {Value::from_f32({2}, {-1.0f, 2.0f})});
  (void)fx::exec::coverage(gm);
  EXPECT_EQ(gm.graph().version(), v) << "run or coverage";
}

TEST(GraphVersion, SerialsAreNeverReused) {
  std::vector<uint64_t> serials;
  std::weak_ptr<const void> first_alive;
  for (int i = 0; i < 8; ++i) {
    fx::Graph g;  // likely the same address every time
    if (i == 0) first_alive = g.lifetime();
    EXPECT_FALSE(g.lifetime().expired());
    serials.push_back(g.serial());
  }
  EXPECT_TRUE(first_alive.expired());
  for (size_t i = 1; i < serials.size(); ++i) EXPECT_GT(serials[i], serials[i - 1]);
  fx::Graph a;
  std::unique_ptr<fx::Graph> b = a.clone();
  EXPECT_NE(a.serial(), b->serial());
}

}  // namespace
