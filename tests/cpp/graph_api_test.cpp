// Semantics of the graph API that the goldens do not show: use-def bookkeeping, insert points,
// errors (and that the graph stays usable after them), naming, copying and the attribute tree.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "fx/fx.h"

namespace {

using fx::Argument;
using fx::fn;
using fx::Node;

std::vector<std::string> names(const std::vector<Node*>& nodes) {
  std::vector<std::string> out;
  for (Node* n : nodes) out.push_back(n->name());
  return out;
}
std::vector<std::string> names(const fx::UserSet& users) { return names(users.list()); }
std::vector<std::string> names(const fx::Graph& g) { return names(g.nodes().to_vector()); }

fx::ErrorKind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fx::Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "expected an fx::Error";
  return fx::ErrorKind::Internal;
}

TEST(Graph, UsersAreInsertionOrderedAndRelinkedOnUpdate) {
  fx::Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(fn("torch.relu"), {x});
  Node* b = g.call_function(fn("torch.neg"), {x});
  Node* c = g.call_function(fn("operator.add"), {x, x});  // one entry even if used twice
  EXPECT_EQ(names(x->users()), (std::vector<std::string>{"relu", "neg", "add"}));
  // torch.fx drops the node from all inputs' users and re-adds it: `relu` moves to the end.
  a->update_arg(0, x);
  EXPECT_EQ(names(x->users()), (std::vector<std::string>{"neg", "add", "relu"}));
  EXPECT_EQ(names(c->all_input_nodes()), (std::vector<std::string>{"x"}));
  b->update_kwarg("alpha", a);
  EXPECT_EQ(names(b->all_input_nodes()), (std::vector<std::string>{"x", "relu"}));
  EXPECT_EQ(names(a->users()), (std::vector<std::string>{"neg"}));
}

TEST(Graph, ReplaceAllUsesWithHonoursCallbackAndReturnsChangedUsers) {
  fx::Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(fn("torch.add"), {x, 1}, {{"alpha", 2}});
  Node* relu = g.call_method("relu", {a});
  g.output(relu);
  fx::Node* s;
  {
    auto guard = g.inserting_after(a);
    s = g.call_function(fn("torch.sigmoid"), {a});
  }
  std::vector<Node*> changed = a->replace_all_uses_with(s, [&](Node* u) { return u != s; });
  EXPECT_EQ(names(changed), (std::vector<std::string>{"relu"}));
  EXPECT_EQ(relu->args()[0].to_node(), s);
  EXPECT_EQ(names(a->users()), (std::vector<std::string>{"sigmoid"}));
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "add", "sigmoid", "relu", "output"}));
}

TEST(Graph, InsertingAfterPutsSuccessiveNodesInReverseOrderAndGuardsRestore) {
  fx::Graph g;
  Node* x = g.placeholder("x");
  Node* out = g.output(x);
  {
    auto guard = g.inserting_after(x);
    g.call_function(fn("torch.relu"), {x});
    g.call_function(fn("torch.neg"), {x});
  }
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "neg", "relu", "output"}));
  {
    auto guard = g.inserting_before(out);
    g.call_function(fn("torch.sin"), {x});
    g.call_function(fn("torch.cos"), {x});
  }
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "neg", "relu", "sin", "cos", "output"}));
  // Back to appending at the end once the guard is gone.
  g.call_function(fn("torch.tan"), {x});
  EXPECT_EQ(g.nodes().to_vector().back()->name(), "tan");
  // inserting_before(nullptr) inserts at the very beginning; keep() makes it permanent.
  g.inserting_before(nullptr).keep();
  g.placeholder("first");
  EXPECT_EQ(g.nodes().to_vector().front()->name(), "first");
  g.placeholder("second");
  EXPECT_EQ(names(g).front(), "second");
}

TEST(Graph, EraseNodeWithUsersFailsWithTorchMessageAndGraphStaysUsable) {
  fx::Graph g;
  Node* x = g.placeholder("x");
  Node* add = g.call_function(fn("operator.add"), {x, 1});
  Node* sig = g.call_function(fn("torch.sigmoid"), {add});
  g.output(sig);
  try {
    g.erase_node(add);
    FAIL() << "erase_node should have thrown";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Graph);
    EXPECT_STREQ(e.what(),
                 "Tried to erase Node add but it still had 1 users in the graph: {sigmoid: None}!");
    EXPECT_EQ(e.node(), "add");
  }
  EXPECT_EQ(g.size(), 4u);
  g.lint();
  sig->replace_input_with(add, x);
  g.erase_node(add);
  EXPECT_TRUE(add->erased());
  EXPECT_EQ(g.size(), 3u);
  EXPECT_EQ(g.find_node("add"), nullptr);
  EXPECT_EQ(kind_of([&] { g.erase_node(add); }), fx::ErrorKind::Graph);  // double erase
  // Erased names are never reused.
  EXPECT_EQ(g.call_function(fn("operator.add"), {x, 2})->name(), "add_1");
}

TEST(Graph, TargetsAreCheckedAgainstTheOpcode) {
  fx::Graph g;
  EXPECT_EQ(kind_of([&] { g.create_node(fx::Opcode::CallFunction, "relu"); }),
            fx::ErrorKind::Value);
  EXPECT_EQ(kind_of([&] { g.create_node(fx::Opcode::CallModule, fn("torch.relu")); }),
            fx::ErrorKind::Value);
  EXPECT_EQ(kind_of([&] { fn("relu"); }), fx::ErrorKind::Value);
  EXPECT_EQ(kind_of([] { fx::opcode_from_name("call"); }), fx::ErrorKind::Value);
  EXPECT_EQ(fx::opcode_from_name("call_method"), fx::Opcode::CallMethod);
  EXPECT_EQ(g.size(), 0u);
}

TEST(Graph, LintReportsOrderAndForeignNodes) {
  fx::Graph g;
  Node* x = g.placeholder("x");
  Node* relu = g.call_function(fn("torch.relu"), {x});
  Node* neg = g.call_function(fn("torch.neg"), {relu});
  g.output(neg);
  g.lint();
  x->prepend(neg);  // neg now precedes relu and x
  try {
    g.lint();
    FAIL();
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Lint);
    const std::string expected =
        "Argument 'relu' of Node 'neg' was used before it has been defined! Please check that "
        "Nodes in the graph are topologically ordered\n" +
        g.str();
    EXPECT_EQ(e.what(), expected);
  }
  relu->append(neg);
  g.lint();

  fx::Graph other;
  Node* p = other.placeholder("p");
  g.inserting_before(g.output_node()).keep();
  Node* bad = g.call_function(fn("torch.relu"), {p});
  try {
    g.lint();
    FAIL();
  } catch (const fx::Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("Argument 'p' of Node 'relu_1' does not belong to this Graph"),
        std::string::npos);
  }
  bad->replace_input_with(p, x);
  g.lint();
}

TEST(Graph, DeadCodeEliminationKeepsImpureNodes) {
  fx::Graph g;
  Node* x = g.placeholder("x");
  g.call_function(fn("operator.mul"), {x, 2});
  Node* s = g.call_method("sum", {x});
  Node* gt = g.call_function(fn("operator.gt"), {s, -1e9});
  g.call_function(fn("torch._assert"), {gt, "msg"});
  Node* add = g.call_function(fn("operator.add"), {x, 1});
  g.output(add);
  EXPECT_TRUE(g.eliminate_dead_code());
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "sum_1", "gt", "_assert", "add", "output"}));
  EXPECT_FALSE(g.eliminate_dead_code());
}

TEST(Graph, DeadCodeEliminationRemovesLongChainsInOneSweep) {
  fx::Graph g;
  Node* x = g.placeholder("x");
  Node* cur = x;
  for (int i = 0; i < 20000; ++i) cur = g.call_function(fn("torch.relu"), {cur});
  g.output(x);
  EXPECT_TRUE(g.eliminate_dead_code());
  EXPECT_EQ(g.size(), 2u);
}

TEST(Graph, GraphCopyWithPreseededMapAndCloneKeepNames) {
  fx::Graph src;
  Node* x = src.placeholder("x");
  Node* relu = src.call_function(fn("torch.relu"), {x});
  Node* add = src.call_function(fn("operator.add"), {relu, x});
  add->meta().set("tag", "kept");
  src.output(add, "torch.Tensor");

  fx::Graph dst;
  Node* inp = dst.placeholder("inp");
  fx::ValueMap vm{{x, inp}};
  std::optional<Argument> out = dst.graph_copy(src, vm);
  ASSERT_TRUE(out.has_value());
  dst.output(*out);
  EXPECT_EQ(names(dst), (std::vector<std::string>{"inp", "relu", "add", "output"}));
  EXPECT_EQ(dst.find_node("add")->meta().at("tag"), Argument("kept"));

  auto copy = src.clone();
  EXPECT_EQ(names(*copy), (std::vector<std::string>{"x", "relu", "add", "output"}));
  EXPECT_EQ(copy->str(), src.str());
  EXPECT_EQ(copy->python_code().src, src.python_code().src);
  EXPECT_EQ(copy->output_node()->type(), std::optional<std::string>("torch.Tensor"));
}

TEST(Namespace, MatchesTorch113Sequences) {
  fx::Namespace ns;
  std::vector<std::string> got;
  for (const char* c : {"add",   "add",     "add_1",         "add",    "x_1",     "x",   "x",
                        "1abc",  "foo.bar", "linear.weight", "input",  "list",    "sum", "class",
                        "torch", "inf",     "a-b c",         "add_01", "getattr", "Foo"})
    got.push_back(ns.create_name(c));
  EXPECT_EQ(got,
            (std::vector<std::string>{"add",     "add_1",  "add_2", "add_3",     "x_1",
                                      "x",       "x_2",    "_1abc", "foo_bar",   "linear_weight",
                                      "input_1", "list_1", "sum_1", "class_1",   "torch_1",
                                      "inf_1",   "a_b_c",  "add_4", "getattr_1", "Foo"}));
  fx::Namespace legacy;
  EXPECT_EQ(legacy.create_name("x_5"), "x_5");
  EXPECT_EQ(legacy.create_name("x"), "x");
  EXPECT_EQ(legacy.create_name("x"), "x_1");
  fx::Namespace legacy2;
  EXPECT_EQ(legacy2.create_name("add_2"), "add_2");
  EXPECT_EQ(legacy2.create_name("add"), "add");
  EXPECT_EQ(legacy2.create_name("add"), "add_1");
  EXPECT_EQ(legacy2.create_name("add"), "add_3");
  EXPECT_EQ(kind_of([&] { legacy2.create_name(""); }), fx::ErrorKind::Value);
}

TEST(Namespace, SkippingOverTakenSuffixesGivesTheSameNamesAsLinearProbing) {
  // Reference: 1.13's linear probe, written out naively.
  std::set<std::string> used;
  auto reference = [&](std::string base, long num, bool has_num) {
    std::string cand = has_num ? base + "_" + std::to_string(num) : base;
    long n = has_num ? num : 0;
    while (used.count(cand)) cand = base + "_" + std::to_string(++n);
    used.insert(cand);
    return cand;
  };
  fx::Namespace ns;
  unsigned seed = 12345;
  for (int i = 0; i < 5000; ++i) {
    seed = seed * 1103515245u + 12345u;
    int pick = (seed >> 16) % 4;
    long num = (seed >> 8) % 50;
    std::string base = pick == 0 ? "v" : "w";
    bool has_num = pick >= 2;
    std::string cand = has_num ? base + "_" + std::to_string(num) : base;
    ASSERT_EQ(ns.create_name(cand), reference(base, num, has_num)) << "step " << i;
  }
}

TEST(Argument, PythonReprAndStr) {
  EXPECT_EQ(Argument().repr(), "None");
  EXPECT_EQ(Argument(true).repr(), "True");
  EXPECT_EQ(Argument(-3).repr(), "-3");
  EXPECT_EQ(Argument(1.0).repr(), "1.0");
  EXPECT_EQ(Argument(1e-5).repr(), "1e-05");
  EXPECT_EQ(Argument(1e16).repr(), "1e+16");
  EXPECT_EQ(Argument(0.1).repr(), "0.1");
  EXPECT_EQ(Argument(-0.0).repr(), "-0.0");
  EXPECT_EQ(Argument(std::numeric_limits<double>::infinity()).repr(), "inf");
  EXPECT_EQ(Argument(-std::numeric_limits<double>::infinity()).repr(), "-inf");
  EXPECT_EQ(Argument(std::nan("")).repr(), "nan");
  EXPECT_EQ(Argument(std::complex<double>(1, 2)).repr(), "(1+2j)");
  EXPECT_EQ(Argument(std::complex<double>(0, -2)).repr(), "-2j");
  EXPECT_EQ(Argument(std::complex<double>(1.5, -0.5)).repr(), "(1.5-0.5j)");
  EXPECT_EQ(Argument("it's").repr(), "\"it's\"");
  EXPECT_EQ(Argument("a'b\"c\\\n").repr(), "'a\\'b\"c\\\\\\n'");
  EXPECT_EQ(Argument("msg").str(), "msg");
  EXPECT_EQ(Argument::tuple({}).repr(), "()");
  EXPECT_EQ(Argument::tuple({1}).repr(), "(1,)");
  EXPECT_EQ(Argument::list({1, "a"}).repr(), "[1, 'a']");
  EXPECT_EQ(Argument::dict({{"k", 1}, {2, "v"}}).repr(), "{'k': 1, 2: 'v'}");
  EXPECT_EQ(Argument::dict({{"k", "v"}}).format_arg(), "{k: v}");
  EXPECT_EQ(Argument::slice(Argument(), 2).repr(), "slice(None, 2, None)");
  EXPECT_EQ(Argument::ellipsis().repr(), "Ellipsis");
  EXPECT_EQ(Argument(fx::Dtype::Float16).repr(), "torch.float16");
  EXPECT_EQ(Argument(fx::Device{"cpu", -1}).repr(), "device(type='cpu')");
  EXPECT_EQ(Argument(fx::Device{"cpu", -1}).str(), "cpu");
  EXPECT_EQ(Argument(fx::Device{"cuda", 0}).repr(), "device(type='cuda', index=0)");
  EXPECT_EQ(Argument(fx::Device{"cuda", 0}).str(), "cuda:0");
  EXPECT_EQ(Argument(fx::MemoryFormat::Contiguous).repr(), "torch.contiguous_format");
  EXPECT_EQ(Argument(fx::Layout::Strided).repr(), "torch.strided");
  EXPECT_EQ(fx::dtype_from_name("torch.float"), fx::Dtype::Float32);
  EXPECT_EQ(kind_of([] { fx::dtype_from_name("floaty"); }), fx::ErrorKind::Value);
}

TEST(Argument, EqualityIsStrictAboutKinds) {
  EXPECT_NE(Argument(1), Argument(1.0));
  EXPECT_NE(Argument(1), Argument(true));
  EXPECT_EQ(Argument(std::nan("")), Argument(std::nan("")));
  EXPECT_NE(Argument::tuple({1}), Argument::list({1}));
  EXPECT_EQ(Argument::dict({{"a", Argument::list({1, 2})}}),
            Argument::dict({{"a", Argument::list({1, 2})}}));
  EXPECT_EQ(kind_of([] { Argument(1).to_string(); }), fx::ErrorKind::Type);
  fx::Graph g;
  Node* x = g.placeholder("x");
  EXPECT_EQ(kind_of([&] { Argument::dict({{x, 1}}); }), fx::ErrorKind::Value);
}

TEST(Codegen, FixesTorch113PrecedenceAndKeywordBugsUnlessAsked) {
  fx::Graph g;
  Node* x = g.placeholder("x");
  Node* p = g.call_function(fn("operator.pow"), {-2, x});
  Node* m = g.call_module("lambda", {p});
  Node* q = g.call_function(fn("operator.pow"), {x, -2});
  g.output(Argument::tuple({m, q}));
  const std::string fixed = g.python_code().src;
  EXPECT_NE(fixed.find("pow_1 = (-2) ** x"), std::string::npos) << fixed;
  EXPECT_NE(fixed.find("lambda_1 = getattr(self, \"lambda\")(pow_1)"), std::string::npos) << fixed;
  EXPECT_NE(fixed.find("pow_2 = x ** -2"), std::string::npos) << fixed;
  fx::CodegenOptions bugs;
  bugs.torch113_bugs = true;
  const std::string legacy = g.python_code("self", bugs).src;
  EXPECT_NE(legacy.find("pow_1 = -2 ** x"), std::string::npos) << legacy;
  EXPECT_NE(legacy.find("lambda_1 = self.lambda(pow_1)"), std::string::npos) << legacy;
}

TEST(Codegen, GlobalsAvoidNodeNamesAndNodeNamesAvoidGlobals) {
  fx::Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(fn("math.sqrt"), {x}, {}, std::nullopt);
  Node* b =
      g.create_node(fx::Opcode::CallFunction, fn("torch.relu"), {a}, {}, std::string("math_sqrt"));
  g.output(b);
  fx::PythonCode code = g.python_code();
  EXPECT_NE(code.src.find("sqrt = math_sqrt(x)"), std::string::npos) << code.src;
  EXPECT_NE(code.src.find("math_sqrt_1 = torch.relu(sqrt)"), std::string::npos) << code.src;
  bool has_global = false;
  for (const auto& kv : code.globals)
    has_global |= kv.first == "math_sqrt" && kv.second == "math.sqrt";
  EXPECT_TRUE(has_global);
}

TEST(GraphModule, SubmoduleManagementFollowsTorchFx) {
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* a = g->call_module("a", {x});
  Node* b0 = g->call_module("b", {a});
  g->output(b0);
  fx::Module root("M");
  root.add_module(
      "a", std::make_shared<fx::Module>("Linear", "in_features=2, out_features=2, bias=True"));
  auto b = std::make_shared<fx::Module>("Sequential");
  b->add_module("0", std::make_shared<fx::Module>("ReLU"));
  b->add_module("1", std::make_shared<fx::Module>("Tanh"));
  root.add_module("b", b);
  root.add_module("unused", std::make_shared<fx::Module>("ReLU"));
  root.child("a")->register_parameter(
      "weight", fx::Tensor{fx::Dtype::Float32, {2, 2}, nullptr, true, nullptr, nullptr});
  fx::GraphModule gm(&root, std::move(g), "M");

  auto module_names = [&] {
    std::vector<std::string> out;
    for (const auto& kv : gm.named_modules()) out.push_back(kv.first);
    return out;
  };
  EXPECT_EQ(module_names(), (std::vector<std::string>{"", "a", "b", "b.0", "b.1"}));
  EXPECT_TRUE(gm.add_submodule("foo.bar", std::make_shared<fx::Module>("ReLU")));
  EXPECT_FALSE(gm.add_submodule("a.weight.x", std::make_shared<fx::Module>("ReLU")));
  EXPECT_FALSE(gm.delete_submodule("nope"));
  EXPECT_FALSE(gm.delete_submodule("a.weight"));
  gm.delete_all_unused_submodules();
  EXPECT_EQ(module_names(), (std::vector<std::string>{"", "a", "b", "b.0", "b.1"}));
  EXPECT_EQ(gm.repr(),
            "M(\n  (a): Linear(in_features=2, out_features=2, bias=True)\n  (b): Sequential(\n"
            "    (0): ReLU()\n    (1): Tanh()\n  )\n)");
  gm.graph().lint();
  // A call_module whose target is missing is a lint error naming the atom.
  gm.graph().inserting_before(gm.graph().output_node()).keep();
  gm.graph().call_module("missing.sub", {x});
  try {
    gm.graph().lint();
    FAIL();
  } catch (const fx::Error& e) {
    EXPECT_STREQ(
        e.what(),
        "Node missing_sub target missing.sub references nonexistent attribute missing of ");
  }
}

TEST(GraphModule, ConstructionFailsWhenRootLacksATarget) {
  auto g = std::make_unique<fx::Graph>();
  g->output(g->get_attr("sub.w"));
  fx::Module root;
  EXPECT_EQ(kind_of([&] { fx::GraphModule gm(&root, std::move(g)); }), fx::ErrorKind::Attribute);
  // The graph was not taken: fix the root and try again with the same graph.
  ASSERT_NE(g, nullptr);
  auto sub = std::make_shared<fx::Module>();
  sub->register_parameter("w",
                          fx::Tensor{fx::Dtype::Float32, {1}, nullptr, true, nullptr, nullptr});
  root.add_module("sub", sub);
  fx::GraphModule gm(&root, std::move(g));
  EXPECT_EQ(g, nullptr);
  EXPECT_EQ(gm.code(), "\n\n\ndef forward(self):\n    sub_w = self.sub.w\n    return sub_w\n    ");

  // set_graph keeps the old graph and code when the new graph cannot be generated.
  auto bad = std::make_unique<fx::Graph>();
  bad->output(bad->call_method("relu"));  // call_method without the object to call it on
  EXPECT_EQ(kind_of([&] { gm.set_graph(std::move(bad)); }), fx::ErrorKind::Value);
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->owning_module(), nullptr);
  EXPECT_EQ(gm.graph().owning_module(), &gm);
  EXPECT_NE(gm.code().find("sub_w = self.sub.w"), std::string::npos);
}

TEST(Graph, ErasedNodesCannotBeInputsOrInsertPoints) {
  fx::Graph g;
  Node* x = g.placeholder("x");
  Node* dead = g.call_function(fn("torch.relu"), {x});
  g.erase_node(dead);
  EXPECT_EQ(kind_of([&] {
              g.call_function(fn("torch.relu"), {x}, {{"out", dead}});
            }),
            fx::ErrorKind::Graph);
  EXPECT_EQ(kind_of([&] { auto guard = g.inserting_after(dead); }), fx::ErrorKind::Graph);
  Node* y = g.call_function(fn("torch.relu"), {x});
  {
    auto guard = g.inserting_before(y);
    g.erase_node(y);  // the insert point goes away while it is in use
    EXPECT_EQ(kind_of([&] { g.call_function(fn("torch.neg"), {x}); }), fx::ErrorKind::Graph);
  }
  g.output(x);
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "output"}));
  g.lint();
}

TEST(Function, SpellingsOfOneCallableAndTheirReprs) {
  // torch.nn.functional.gelu is torch._C._nn.gelu; torch.fx prints the latter.
  EXPECT_EQ(fn("torch.nn.functional.gelu"), fn("torch._C._nn.gelu"));
  EXPECT_EQ(fn("torch.nn.functional.gelu").qualname(), "torch._C._nn.gelu");
  EXPECT_EQ(fn("_operator.add"), fn("operator.add"));
  EXPECT_EQ(fn("builtins.int").py_repr(), "<class 'int'>");
  EXPECT_EQ(fn("torch.ops.aten.add").py_repr(), "<OpOverloadPacket(op='aten.add')>");
  EXPECT_EQ(fn("torch.ops.aten.add").qualname(), "torch.ops.aten.add");
  const std::string r = fn("torch.nn.functional.max_pool2d").py_repr();
  EXPECT_EQ(r.rfind("<function boolean_dispatch.<locals>.fn at 0x", 0), 0u) << r;
  EXPECT_TRUE(fn("torch.ops.profiler._record_function_enter").info().impure);
}

}  // namespace
