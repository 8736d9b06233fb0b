// Every graph pass alone, and all of them in one PassManager pipeline, on every traced model of
// the zoo (zoo.h) plus a test-only model with dead code, duplicates and constant subexpressions:
// lint() stays clean, the module recompiles, the Interpreter reproduces the unchanged trace's
// outputs on seeded inputs (exactly for passes that do not change arithmetic, within rtol 1e-4 /
// atol 1e-5 for fuse_conv_bn_modules), and each pass fires where it should, counted. The ONNX
// side of the same proof is tests/cpp/zoo_passes_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "fx/pass_manager.h"
#include "fx/passes.h"
#include "fx/subgraph_rewriter.h"
#include "zoo.h"

namespace {

using namespace zoo;

/// Test-only model: a dead node, duplicated subexpressions, a dropout and two constant
/// subexpressions of parameters (the folded values become a ParameterList).
struct Redundant : ft::Module {
  Redundant() : Module("Redundant") {
    fc = register_module("fc", nn::Linear(4, 4));
    w = register_parameter("w", torch::randn({4, 4}));
    b = register_buffer("b", torch::randn({4}));
  }
  // `self.w` as torch.fx sees it while tracing: a get_attr Proxy (the tensor when eager).
  static Value attr(const torch::Tensor& t) {
    ft::Tracer* tracer = ft::Tracer::current();
    if (!tracer) return Value(t);
    return Value::proxy(tracer->create_arg(Value(t)).to_node(), tracer);
  }
  Value forward(Value x) override {
    Value a = call(fc, x);
    Value r1 = a.relu();
    Value r2 = a.relu();          // the same as r1: cse
    Value dead = ft::sigmoid(x);  // never used: dce
    (void)dead;
    Value wt = attr(w).t();  // constant: const folding
    Value b2 = attr(b) * 2;  // constant
    Value s = r1 + r2;
    Value m = ft::matmul(s, wt);
    Value y = m + b2;
    return ft::F::dropout(y, 0.5, is_training());
  }
  nn::Linear fc{nullptr};
  torch::Tensor w, b;
};

std::vector<ZooCase> cases() {
  std::vector<ZooCase> out = zoo_cases();
  out.push_back({"redundant", [] { return std::make_shared<Redundant>(); }, {{3, 4}}});
  return out;
}

// Seeded inputs, one per forward parameter: concrete args take their value, the others the
// next shape (the concrete_args case has no ShapeProp shapes: its x is any float tensor).
std::vector<Value> seeded_inputs(const ZooCase& c, const ft::Module& m) {
  torch::manual_seed(1);
  std::vector<std::vector<int64_t>> shapes = c.shapes;
  if (shapes.empty()) shapes = {{3}};
  std::vector<Value> out;
  size_t next = 0;
  for (const ft::Param& p : m.signature()) {
    const Value* given = nullptr;
    for (const auto& kv : c.concrete)
      if (kv.first == p.name) given = &kv.second;
    if (given) {
      out.push_back(*given);
    } else if (next < shapes.size()) {
      out.emplace_back(make_input(shapes[next++], /*random=*/true));
    } else {
      break;  // the rest take their defaults
    }
  }
  return out;
}

// "" when `got` equals `want` (exactly when atol == rtol == 0; floats within tolerance
// otherwise, NaNs equal), else where and how they differ.
std::string compare(const Value& want, const Value& got, double rtol, double atol,
                    const std::string& where = "out") {
  if (want.kind() != got.kind()) return where + ": " + want.repr() + " vs " + got.repr();
  switch (want.kind()) {
    case Value::Kind::Tensor: {
      const at::Tensor &a = want.tensor(), &b = got.tensor();
      if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type())
        return where + ": " + want.repr() + " vs " + got.repr();
      const bool same = a.is_floating_point()
                            ? torch::allclose(a, b, rtol, atol, /*equal_nan=*/true)
                            : torch::equal(a, b);
      if (same) return "";
      return where + ": max abs diff " +
             std::to_string(
                 (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>());
    }
    case Value::Kind::Tuple:
    case Value::Kind::List: {
      if (want.elements().size() != got.elements().size()) return where + ": lengths differ";
      for (size_t i = 0; i < want.elements().size(); ++i) {
        std::string d = compare(want.elements()[i], got.elements()[i], rtol, atol,
                                where + "[" + std::to_string(i) + "]");
        if (!d.empty()) return d;
      }
      return "";
    }
    case Value::Kind::Dict: {
      if (want.dict_items().size() != got.dict_items().size()) return where + ": sizes differ";
      for (size_t i = 0; i < want.dict_items().size(); ++i) {
        const auto &a = want.dict_items()[i], &b = got.dict_items()[i];
        if (!(a.first == b.first)) return where + ": keys differ";
        std::string d = compare(a.second, b.second, rtol, atol, where + "[" + a.first.repr() + "]");
        if (!d.empty()) return d;
      }
      return "";
    }
    case Value::Kind::Constant:
      return want.constant() == got.constant() ? ""
                                               : where + ": " + want.repr() + " vs " + got.repr();
    case Value::Kind::Proxy:
      return where + ": unexpected Proxy";
  }
  return where + ": unknown kind";
}

// Counts the calls of GraphModule submodules (split_module's partitions) it executes.
struct CountingInterpreter : ft::Interpreter {
  using ft::Interpreter::Interpreter;
  int graph_module_calls = 0;
  Value call_module(const std::string& target, const std::vector<Value>& args,
                    const ft::ValueKwargs& kwargs) override {
    if (dynamic_cast<const fx::GraphModule*>(module().get_submodule(target).get()))
      ++graph_module_calls;
    return ft::Interpreter::call_module(target, args, kwargs);
  }
};

// Makes `gm` the module `from` (attribute tree and graph): runs the passes that return a new
// module in place, as PassManager needs.
void adopt(fx::GraphModule& gm, const fx::GraphModule& from) {
  std::vector<std::string> names;
  for (const auto& kv : gm.children()) names.push_back(kv.first);
  for (const auto& kv : gm.parameters()) names.push_back(kv.first);
  for (const auto& kv : gm.buffers()) names.push_back(kv.first);
  for (const std::string& n : names)
    if (!gm.remove_child(n)) gm.remove_attr(n);
  for (const auto& kv : from.children()) gm.add_module(kv.first, kv.second);
  for (const auto& kv : from.parameters()) gm.register_parameter(kv.first, kv.second);
  for (const auto& kv : from.buffers()) gm.register_buffer(kv.first, kv.second);
  gm.set_graph(from.graph().clone());
}

// call_module nodes whose module's type name starts with `prefix`.
size_t count_modules(const fx::GraphModule& gm, const std::string& prefix) {
  size_t n = 0;
  for (const fx::Node* node : gm.graph().nodes())
    if (node->op() == fx::Opcode::CallModule &&
        gm.get_submodule(node->target().str())->type_name().rfind(prefix, 0) == 0)
      ++n;
  return n;
}

// BatchNorm{d}d call_modules fed by a Conv{d}d call_module used only there: what
// fuse_conv_bn_modules must fold (computed here independently of the pass).
size_t fusable_pairs(const fx::GraphModule& gm) {
  size_t n = 0;
  for (const fx::Node* node : gm.graph().nodes()) {
    if (node->op() != fx::Opcode::CallModule || node->args().empty() || !node->args()[0].is_node())
      continue;
    const std::string bn = gm.get_submodule(node->target().str())->type_name();
    const fx::Node* in = node->args()[0].to_node();
    if (bn.rfind("BatchNorm", 0) != 0 || in->op() != fx::Opcode::CallModule ||
        in->users().size() != 1)
      continue;
    const std::string conv = gm.get_submodule(in->target().str())->type_name();
    if (conv == "Conv" + bn.substr(std::string("BatchNorm").size())) ++n;
  }
  return n;
}

// The rewriter's patterns: every spelling of relu in the zoo becomes clamp(min=0).
struct Rewrite {
  std::string name;
  std::unique_ptr<fx::Graph> pattern, replacement;
};
std::vector<Rewrite> relu_rewrites() {
  std::vector<Rewrite> out;
  auto make = [&](const std::string& name, auto build_pattern, auto build_replacement) {
    Rewrite r{name, std::make_unique<fx::Graph>(), std::make_unique<fx::Graph>()};
    fx::Node* x = r.pattern->placeholder("x");
    r.pattern->output(build_pattern(*r.pattern, x));
    fx::Node* y = r.replacement->placeholder("x");
    r.replacement->output(build_replacement(*r.replacement, y));
    out.push_back(std::move(r));
  };
  fx::Kwargs min0;
  min0.set("min", fx::Argument(0.0));
  fx::Kwargs no_inplace;
  no_inplace.set("inplace", fx::Argument(false));
  auto clamp = [&](fx::Graph& g, fx::Node* x) {
    return g.call_function(fx::fn("torch.clamp"), {x}, min0);
  };
  make(
      "F.relu",
      [&](fx::Graph& g, fx::Node* x) {
        return g.call_function(fx::fn("torch.nn.functional.relu"), {x}, no_inplace);
      },
      clamp);
  make(
      "torch.relu",
      [&](fx::Graph& g, fx::Node* x) { return g.call_function(fx::fn("torch.relu"), {x}); }, clamp);
  make(
      ".relu()", [&](fx::Graph& g, fx::Node* x) { return g.call_method("relu", {x}); },
      [&](fx::Graph& g, fx::Node* x) { return g.call_method("clamp", {x}, min0); });
  return out;
}

// One pass applied alone to a fresh trace: the module to run and what the pass did.
struct Applied {
  std::unique_ptr<fx::GraphModule> owned;  // when the pass returns a new module
  fx::GraphModule* gm = nullptr;
  bool fired = false;
  std::string what;  // "-3" (nodes removed), "2 fused", ...
};

struct Pass {
  std::string name;
  bool exact;  // the pass does not change arithmetic
  std::function<Applied(fx::GraphModule&)> apply;
};

std::string delta(size_t before, size_t after) {
  const long d = static_cast<long>(after) - static_cast<long>(before);
  return (d > 0 ? "+" : "") + std::to_string(d);
}

std::vector<Pass> passes() {
  auto in_place = [](std::function<bool(fx::GraphModule&)> fn) {
    return [fn](fx::GraphModule& gm) {
      Applied a;
      const size_t before = gm.graph().size();
      std::vector<std::string> names;
      for (const fx::Node* n : gm.graph().nodes()) names.push_back(n->name());
      a.gm = &gm;
      a.fired = fn(gm);
      a.what = delta(before, gm.graph().size());
      std::string gone;  // the nodes it removed, by name
      for (const std::string& n : names)
        if (!gm.graph().find_node(n)) gone += (gone.empty() ? ": " : " ") + n;
      a.what += gone;
      return a;
    };
  };
  std::vector<Pass> out;
  out.push_back(
      {"dce", true, in_place([](fx::GraphModule& gm) { return fx::eliminate_dead_code(gm); })});
  out.push_back({"cse", true, in_place([](fx::GraphModule& gm) { return fx::cse(gm); })});
  out.push_back({"remove_dropout", true,
                 in_place([](fx::GraphModule& gm) { return fx::remove_dropout(gm); })});
  out.push_back({"replace_pattern", true, [](fx::GraphModule& gm) {
                   Applied a;
                   a.gm = &gm;
                   size_t matches = 0;
                   for (const Rewrite& r : relu_rewrites())
                     matches += fx::replace_pattern(gm, *r.pattern, *r.replacement).size();
                   a.fired = matches > 0;
                   a.what = std::to_string(matches) + " matches";
                   return a;
                 }});
  out.push_back({"fuse", false, [](fx::GraphModule& gm) {
                   Applied a;
                   const size_t bn_before = count_modules(gm, "BatchNorm");
                   const size_t want = fusable_pairs(gm);
                   a.owned = fx::fuse_conv_bn_modules(gm);
                   a.gm = a.owned.get();
                   const size_t fused = bn_before - count_modules(*a.gm, "BatchNorm");
                   EXPECT_EQ(fused, want) << "every conv-bn pair fuses";
                   a.fired = fused > 0;
                   a.what = std::to_string(fused) + " fused";
                   return a;
                 }});
  out.push_back({"const_fold", true, [](fx::GraphModule& gm) {
                   Applied a;
                   fx::FoldedGraphModule folded = fx::split_const_subgraphs(gm);
                   size_t folded_nodes = 0;
                   if (folded.const_subgraph_module)
                     for (const fx::Node* n : folded.const_subgraph_module->graph().nodes())
                       folded_nodes += n->op() != fx::Opcode::GetAttr &&
                                       n->op() != fx::Opcode::Output &&
                                       n->op() != fx::Opcode::Placeholder;
                   a.fired = ft::run_folding(folded);
                   EXPECT_EQ(a.fired, folded_nodes > 0);
                   a.owned = std::move(folded.module);
                   a.gm = a.owned.get();
                   a.what = std::to_string(folded_nodes) + " folded";
                   return a;
                 }});
  out.push_back({"split_module", true, [](fx::GraphModule& gm) {
                   Applied a;
                   std::unordered_map<const fx::Node*, size_t> index;
                   for (const fx::Node* n : gm.graph().nodes()) index.emplace(n, index.size());
                   const size_t half = gm.graph().size() / 2;
                   a.owned = fx::split_module(gm, &gm, [&](const fx::Node* n) -> int64_t {
                     return index.at(n) < half ? 0 : 1;
                   });
                   a.gm = a.owned.get();
                   size_t parts = 0;
                   for (const auto& kv : a.gm->children())
                     parts += dynamic_cast<const fx::GraphModule*>(kv.second.get()) != nullptr;
                   a.fired = parts > 0;
                   a.what = std::to_string(parts) + " submods";
                   return a;
                 }});
  return out;
}

struct Traced {
  std::shared_ptr<ft::Module> module;
  std::vector<Value> inputs;
  Value want;  // the Interpreter on the unchanged trace
};

Traced reference(const ZooCase& c) {
  Traced t;
  torch::manual_seed(0);
  t.module = c.make();
  t.module->eval();  // fuse_conv_bn_modules is for inference; Dropout is the identity
  t.inputs = seeded_inputs(c, *t.module);
  auto gm = trace_case(c, t.module);
  gm->graph().lint();
  t.want = ft::Interpreter(*gm).run(t.inputs);
  const Value eager = (*t.module)(t.inputs);
  EXPECT_EQ(compare(eager, t.want, 1e-4, 1e-5), "") << c.name << ": Interpreter vs eager";
  return t;
}

TEST(TorchZooPasses, EveryPassAloneKeepsEveryModelsOutputs) {
  // model -> pass -> what it did (absent: did not fire)
  std::map<std::string, std::map<std::string, std::string>> fired;
  for (const ZooCase& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto t0 = std::chrono::steady_clock::now();
    Traced ref = reference(c);
    size_t nodes = 0;
    for (const Pass& pass : passes()) {
      SCOPED_TRACE(pass.name);
      std::unique_ptr<fx::GraphModule> gm = trace_case(c, ref.module);
      nodes = gm->graph().size();
      const std::string code = gm->code();
      Applied a;
      ASSERT_NO_THROW(a = pass.apply(*gm));
      ASSERT_NO_THROW(a.gm->graph().lint());
      ASSERT_NO_THROW(a.gm->recompile());
      if (a.gm == gm.get() && !a.fired) {
        EXPECT_EQ(gm->code(), code) << "the pass said it changed nothing";
        continue;
      }
      CountingInterpreter interp(*a.gm);
      Value got;
      ASSERT_NO_THROW(got = interp.run(ref.inputs));
      EXPECT_EQ(compare(ref.want, got, pass.exact ? 0 : 1e-4, pass.exact ? 0 : 1e-5), "");
      if (pass.name == "split_module") {
        size_t parts = 0;
        for (const auto& kv : a.gm->children())
          parts += dynamic_cast<const fx::GraphModule*>(kv.second.get()) != nullptr;
        EXPECT_EQ(static_cast<size_t>(interp.graph_module_calls), parts)
            << "the Interpreter ran every partition";
      }
      if (pass.name == "fuse") {
        EXPECT_EQ(fusable_pairs(*a.gm), 0u);
      }
      if (a.fired) fired[c.name][pass.name] = a.what;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ torch zoo] %-14s %4zu nodes %5.2f s, alone:", c.name.c_str(), nodes, s);
    for (const auto& [pass, what] : fired[c.name])
      std::printf(" %s(%s)", pass.c_str(), what.c_str());
    std::printf("\n");
  }

  // What must fire where.
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"redundant", "dce"},
      {"redundant", "cse"},
      {"redundant", "const_fold"},
      {"redundant", "remove_dropout"},
      {"mlp", "remove_dropout"},
      {"cnn", "remove_dropout"},
      {"encoder_block", "remove_dropout"},
      {"cnn", "fuse"},
      {"resnet18", "fuse"},
      {"layers", "fuse"},
      {"mlp", "replace_pattern"},
      {"cnn", "replace_pattern"},
      {"topk", "replace_pattern"},
      {"redundant", "replace_pattern"},
      // The concrete_args guard on None: torch.fx 1.13's DCE removes it too (only torch._assert
      // is side-effectful there, not _assert_is_none).
      {"concrete", "dce"},
  };
  for (const auto& [model, pass] : expected)
    EXPECT_TRUE(fired[model].count(pass)) << pass << " did not fire on " << model;
  // split_module fires on every model.
  for (const ZooCase& c : cases()) EXPECT_TRUE(fired[c.name].count("split_module")) << c.name;
  // Nothing but split_module fires on a model with nothing to do.
  for (const auto& [pass, what] : fired["my_module"])
    EXPECT_EQ(pass, "split_module") << pass << " fired on my_module: " << what;
}

TEST(TorchZooPasses, FuseRemovesEveryBatchNormOfTheConvModels) {
  for (const char* name : {"cnn", "resnet18", "layers"}) {
    SCOPED_TRACE(name);
    ZooCase c;
    for (ZooCase& z : zoo_cases())
      if (z.name == name) c = z;
    Traced ref = reference(c);
    std::unique_ptr<fx::GraphModule> gm = trace_case(c, ref.module);
    const size_t bn = count_modules(*gm, "BatchNorm");
    ASSERT_GT(bn, 0u);
    std::unique_ptr<fx::GraphModule> fused = fx::fuse_conv_bn_modules(*gm);
    EXPECT_EQ(count_modules(*fused, "BatchNorm"), 0u);
    EXPECT_EQ(fused->graph().size(), gm->graph().size() - bn);
    // The fused convs are new fx::Modules (no LibTorch module behind them) with a bias.
    for (const fx::Node* n : fused->graph().nodes()) {
      if (n->op() != fx::Opcode::CallModule) continue;
      std::shared_ptr<fx::Module> m = fused->get_submodule(n->target().str());
      if (m->type_name().rfind("Conv", 0) == 0) {
        EXPECT_EQ(dynamic_cast<const ft::TorchModule*>(m.get()), nullptr);
        EXPECT_NE(m->parameter("bias"), nullptr) << n->name();
      }
    }
    EXPECT_EQ(compare(ref.want, ft::Interpreter(*fused).run(ref.inputs), 1e-4, 1e-5), "");
  }
}

TEST(TorchZooPasses, PipelineKeepsEveryModelsOutputs) {
  std::map<std::string, std::set<std::string>> modified;  // model -> passes that changed it
  for (const ZooCase& c : cases()) {
    SCOPED_TRACE(c.name);
    Traced ref = reference(c);
    std::unique_ptr<fx::GraphModule> gm = trace_case(c, ref.module);
    const size_t nodes = gm->graph().size();
    fx::PassManager pm;
    for (const Pass& pass : passes()) {
      pm.add(pass.name, [apply = pass.apply](fx::GraphModule& g) {
        Applied a = apply(g);
        if (a.owned) adopt(g, *a.owned);
        return a.fired;
      });
    }
    // Partitions hide the nodes from the passes after split_module.
    for (const char* p : {"dce", "cse", "remove_dropout", "replace_pattern", "fuse", "const_fold"})
      pm.constrain(p, "split_module");
    // Every pass that changed the graph must keep what it computes (after fuse: within
    // tolerance), checked on the seeded inputs as it runs.
    pm.check_equivalence([&](const fx::GraphModule& before, const fx::GraphModule& after) {
      return compare(ft::Interpreter(before).run(ref.inputs),
                     ft::Interpreter(after).run(ref.inputs), 1e-4, 1e-5);
    });
    std::vector<fx::PassReport> reports;
    ASSERT_NO_THROW(reports = pm.run(*gm));  // lints after every pass
    ASSERT_EQ(reports.size(), passes().size());
    Value got;
    ASSERT_NO_THROW(got = ft::Interpreter(*gm).run(ref.inputs));
    EXPECT_EQ(compare(ref.want, got, 1e-4, 1e-5), "");
    std::printf("[ torch zoo] %-14s %4zu nodes, pipeline:", c.name.c_str(), nodes);
    for (const fx::PassReport& r : reports) {
      if (!r.modified) continue;
      modified[c.name].insert(r.pass);
      std::printf(" %s(%s)", r.pass.c_str(), delta(r.nodes_before, r.nodes_after).c_str());
    }
    std::printf("\n");
  }
  const std::map<std::string, std::set<std::string>> expected = {
      {"cnn", {"remove_dropout", "replace_pattern", "fuse", "split_module"}},
      {"resnet18", {"fuse", "split_module"}},
      {"layers", {"fuse", "split_module"}},
      {"redundant",
       {"dce", "cse", "remove_dropout", "replace_pattern", "const_fold", "split_module"}},
  };
  for (const auto& [model, want] : expected) EXPECT_EQ(modified[model], want) << model;
}

// ---- modules rebuilt from their fx::Module (what fused and copied modules run on) ----

// A plain fx::Module copy of a mirror: type names, extra_reprs and tensor bytes only.
std::shared_ptr<fx::Module> plain_copy(const fx::Module& mirror) {
  auto out = std::make_shared<fx::Module>(mirror.type_name(), mirror.extra_repr());
  for (const auto& [name, t] : mirror.parameters())
    out->register_parameter(name, ft::to_fx_tensor(ft::from_fx_tensor(t)));
  for (const auto& [name, t] : mirror.buffers())
    out->register_buffer(name, ft::to_fx_tensor(ft::from_fx_tensor(t)));
  for (const auto& [name, child] : mirror.children()) out->add_module(name, plain_copy(*child));
  return out;
}

TEST(RunFxModule, EveryLayerRebuiltFromItsFxModuleMatchesLibTorch) {
  torch::manual_seed(0);
  struct Layer {
    std::shared_ptr<torch::nn::Module> module;
    std::vector<int64_t> input;  // leading -N: int64 indices
  };
  auto bn2 = nn::BatchNorm2d(3);
  {
    torch::NoGradGuard g;
    bn2->running_mean.uniform_(-1, 1);
    bn2->running_var.uniform_(0.5, 2);
  }
  const std::vector<Layer> layers = {
      {nn::Linear(4, 3).ptr(), {2, 4}},
      {nn::Linear(nn::LinearOptions(4, 3).bias(false)).ptr(), {2, 4}},
      {nn::Conv1d(nn::Conv1dOptions(2, 4, 3).stride(2).padding(1)).ptr(), {1, 2, 9}},
      {nn::Conv2d(nn::Conv2dOptions(4, 4, 3).groups(2).dilation(2).bias(false)).ptr(),
       {1, 4, 9, 9}},
      {nn::Conv2d(nn::Conv2dOptions(2, 3, 3).padding(torch::kSame)).ptr(), {1, 2, 7, 7}},
      {nn::Conv2d(nn::Conv2dOptions(2, 3, 3).padding(1).padding_mode(torch::kReflect)).ptr(),
       {1, 2, 7, 7}},
      {nn::Conv2d(nn::Conv2dOptions(2, 3, 3).padding(1).padding_mode(torch::kCircular)).ptr(),
       {1, 2, 7, 7}},
      {nn::Conv1d(nn::Conv1dOptions(2, 3, 4)
                      .padding(torch::kSame)
                      .dilation(2)
                      .padding_mode(torch::kReplicate))
           .ptr(),
       {1, 2, 9}},
      {nn::Conv3d(nn::Conv3dOptions(1, 2, 3).padding(1)).ptr(), {1, 1, 4, 4, 4}},
      {bn2.ptr(), {2, 3, 4, 4}},
      {nn::BatchNorm1d(nn::BatchNormOptions(3).affine(false)).ptr(), {4, 3}},
      {nn::BatchNorm1d(nn::BatchNormOptions(3).track_running_stats(false)).ptr(), {4, 3, 5}},
      {nn::LayerNorm(nn::LayerNormOptions({4, 5}).eps(1e-3)).ptr(), {2, 4, 5}},
      {nn::Embedding(nn::EmbeddingOptions(10, 3).padding_idx(0)).ptr(), {-2, 5}},
      {nn::ReLU().ptr(), {2, 3}},
      {nn::GELU(nn::GELUOptions().approximate("tanh")).ptr(), {2, 3}},
      {nn::Sigmoid().ptr(), {2, 3}},
      {nn::Tanh().ptr(), {2, 3}},
      {nn::Softmax(0).ptr(), {2, 3}},
      {nn::Dropout(0.5).ptr(), {2, 3}},
      {nn::MaxPool2d(nn::MaxPool2dOptions({3, 2}).stride(2).padding(1).ceil_mode(true)).ptr(),
       {1, 2, 7, 7}},
      {nn::AvgPool2d(nn::AvgPool2dOptions(2).stride(1).padding(1)).ptr(), {1, 2, 5, 5}},
      {nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions({c10::nullopt, 2})).ptr(), {1, 2, 5, 6}},
      {nn::Flatten(nn::FlattenOptions().start_dim(0).end_dim(1)).ptr(), {2, 3, 4}},
      {nn::Identity().ptr(), {2, 3}},
      {nn::Sequential(nn::Linear(3, 3), nn::ReLU()).ptr(), {2, 3}},
  };
  // python_extra_repr as PyTorch 1.13 prints these (str-formatted, no quotes).
  EXPECT_EQ(ft::python_extra_repr(*layers[4].module),
            "2, 3, kernel_size=(3, 3), stride=(1, 1), padding=same");
  EXPECT_EQ(ft::python_extra_repr(*layers[5].module),
            "2, 3, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), padding_mode=reflect");
  for (const Layer& l : layers) {
    l.module->eval();
    SCOPED_TRACE(ft::python_type_name(*l.module) + "(" + ft::python_extra_repr(*l.module) + ")");
    torch::Tensor x = make_input(l.input, /*random=*/true);
    torch::Tensor want = ft::run_module(*l.module, {x}).tensor();
    std::shared_ptr<fx::Module> plain = plain_copy(*ft::mirror_module(l.module));
    Value got;
    ASSERT_NO_THROW(got = ft::run_fx_module(*plain, {x}));
    EXPECT_EQ(compare(Value(want), got, 1e-5, 1e-6), "");
  }
}

TEST(RunFxModule, ReplacedTensorsAreSeenByTheInterpreter) {
  torch::manual_seed(0);
  auto m = std::make_shared<Leafy>();
  m->eval();
  LeafTracer tracer;
  auto gm = ft::symbolic_trace(tracer, m);
  torch::Tensor x = torch::randn({3, 4});
  const Value before = ft::Interpreter(*gm).run({x});
  auto* head = dynamic_cast<ft::TorchModule*>(gm->get_submodule("head").get());
  ASSERT_NE(head, nullptr);
  EXPECT_TRUE(head->mirrors_impl());
  EXPECT_TRUE(dynamic_cast<ft::TorchModule*>(gm->get_submodule("block").get())->mirrors_impl());
  // Snapshots compute the same (from the copies), and no longer follow LibTorch.
  ft::materialize_tensors(*gm);
  EXPECT_FALSE(head->mirrors_impl());
  EXPECT_EQ(compare(before, ft::Interpreter(*gm).run({x}), 0, 0), "");
  // A replaced tensor (in a leaf and inside the leaf Sequential `block`) is what runs.
  torch::Tensor w = torch::randn({2, 4});
  head->register_parameter("weight", ft::to_fx_tensor(w));
  torch::Tensor w0 = torch::randn({4, 4});
  gm->get_submodule("block.0")->register_parameter("weight", ft::to_fx_tensor(w0));
  const Value got = ft::Interpreter(*gm).run({x});
  torch::Tensor h = torch::relu(torch::linear(x, w0, m->block[0]->as<nn::Linear>()->bias));
  torch::Tensor want = torch::linear(h, w, m->head->bias);
  EXPECT_EQ(compare(Value(want), got, 1e-5, 1e-6), "");
  // The LibTorch module itself is untouched.
  EXPECT_EQ(compare(before, (*m)({x}), 0, 0), "");
}

TEST(RunFxModule, UnknownLayerIsAnErrorNamingTheNode) {
  // A custom fx::torch::Module leaf whose tensors were replaced cannot be rebuilt.
  struct Scale : ft::Module {
    Scale() : Module("Scale") { s = register_parameter("s", torch::ones({4})); }
    Value forward(Value x) override { return x * s; }
    torch::Tensor s;
  };
  struct Outer : ft::Module {
    Outer() : Module("Outer") { inner = register_module("inner", std::make_shared<Scale>()); }
    Value forward(Value x) override { return call(inner, x); }
    std::shared_ptr<Scale> inner;
  };
  struct ScaleLeaf : ft::Tracer {
    bool is_leaf_module(const torch::nn::Module& m, const std::string& q) const override {
      return q == "inner" || ft::Tracer::is_leaf_module(m, q);
    }
  };
  auto m = std::make_shared<Outer>();
  ScaleLeaf tracer;
  auto gm = ft::symbolic_trace(tracer, m);
  torch::Tensor x = torch::randn({4});
  EXPECT_EQ(compare(Value(x), ft::Interpreter(*gm).run({x}), 0, 0), "");  // live: runs
  gm->get_submodule("inner")->register_parameter("s", ft::to_fx_tensor(torch::zeros({4})));
  try {
    ft::Interpreter(*gm).run({x});
    FAIL() << "expected an error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Unsupported);
    EXPECT_EQ(e.node(), "inner");
    EXPECT_NE(std::string(e.what()).find("call_module inner: module of type Scale"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace

namespace {

using namespace zoo;

// Two relu(x + 1) sites, the second on a traced sub-expression.
struct TwoSites : ft::Module {
  TwoSites() : Module("TwoSites") {}
  Value forward(Value x) override {
    Value a = ft::relu(x + 1);
    Value b = ft::relu(x * 3 + 1);
    return a * 2 + b;
  }
};

// replace_pattern with pattern and replacement traced from C++ functions (torch.fx traces
// Python functions for them): the same rewrite, and the same code, as with hand-built Graphs;
// the rewritten module computes sigmoid where relu(. + 1) was.
TEST(Rewriting, TracedFunctionsArePatternsAndReplacements) {
  auto pattern = ft::symbolic_trace_function(
      "pattern", {"x"}, [](std::vector<Value> a) { return ft::relu(a[0] + 1); });
  auto replacement = ft::symbolic_trace_function(
      "replacement", {"x"}, [](std::vector<Value> a) { return ft::sigmoid(a[0]); });
  EXPECT_EQ(pattern->type_name(), "pattern");
  EXPECT_EQ(pattern->code(),
            "\n\n\ndef forward(self, x):\n    add = x + 1;  x = None\n"
            "    relu = torch.relu(add);  add = None\n    return relu\n    ")
      << pattern->code();

  fx::Graph hand_pattern, hand_replacement;
  {
    fx::Node* x = hand_pattern.placeholder("x");
    hand_pattern.output(hand_pattern.call_function(
        fx::fn("torch.relu"), {hand_pattern.call_function(fx::fn("operator.add"), {x, 1})}));
    fx::Node* y = hand_replacement.placeholder("x");
    hand_replacement.output(hand_replacement.call_function(fx::fn("torch.sigmoid"), {y}));
  }

  auto m = std::make_shared<TwoSites>();
  auto traced = ft::symbolic_trace(m);
  auto by_hand = ft::symbolic_trace(m);
  EXPECT_EQ(fx::replace_pattern(*traced, pattern->graph(), replacement->graph()).size(), 2u);
  EXPECT_EQ(fx::replace_pattern(*by_hand, hand_pattern, hand_replacement).size(), 2u);
  traced->graph().lint();
  EXPECT_EQ(traced->code(), by_hand->code());
  EXPECT_EQ(traced->code().find("relu"), std::string::npos) << traced->code();

  torch::manual_seed(0);
  const torch::Tensor x = torch::randn({3, 4});
  const torch::Tensor want = torch::sigmoid(x) * 2 + torch::sigmoid(x * 3);
  const torch::Tensor got = ft::Interpreter(*traced).run({Value(x)}).tensor();
  EXPECT_TRUE(torch::allclose(got, want)) << got << want;

  EXPECT_THROW(ft::symbolic_trace_function("nothing", {"x"}, nullptr), fx::Error);
}

}  // namespace
