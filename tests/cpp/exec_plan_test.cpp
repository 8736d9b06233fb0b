// Graph::version()/serial() and the executor's plans: every mutation path moves the version,
// reads do not, and a run after any mutation (of the graph, a node or the module's tensors)
// gives what a fresh import of the changed model gives, never a stale plan's result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "exec/ops.h"
#include "exec/plan.h"
#include "fx/exec.h"
#include "fx/fx.h"
#include "fx/onnx.h"
#include "kernels/conv.h"
#include "kernels/elementwise.h"
#include "kernels/thread_pool.h"
#include "tensor_util.h"
#include "zoo_util.h"

namespace {

using fx::Argument;
using fx::fn;
using fx::Node;
using fx::exec::Value;
using fxtest::random_floats;
using fxtest::tensor_f32;

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

// ---- plans: a changed model never runs an old plan ----

std::string transformer_path() {
  return std::string(FXWASM_MODELS_DIR) + "/zoo/transformer_encoder.onnx";
}

Node* first_node(fx::GraphModule& gm, const char* target) {
  for (Node* n : gm.graph().nodes())
    if (n->op() == fx::Opcode::CallFunction && n->target().pretty() == target) return n;
  return nullptr;
}

// The tensor at `target` replaced by `change(copy of it)` (same kind: parameter or buffer).
void replace_tensor(fx::GraphModule& gm, const std::string& target,
                    const std::function<void(std::vector<float>&)>& change) {
  const fx::Tensor* old = gm.get_tensor(target);
  ASSERT_TRUE(old && old->data && old->dtype == fx::Dtype::Float32) << target;
  std::vector<float> v(static_cast<size_t>(old->numel()));
  std::memcpy(v.data(), old->data->data(), old->nbytes());
  change(v);
  fx::Tensor t = *old;
  auto bytes = std::make_shared<std::vector<uint8_t>>(old->nbytes());
  std::memcpy(bytes->data(), v.data(), bytes->size());
  t.data = bytes;
  const size_t dot = target.rfind('.');
  const std::string name = dot == std::string::npos ? target : target.substr(dot + 1);
  std::shared_ptr<fx::Module> owner =
      dot == std::string::npos ? nullptr : gm.get_submodule(target.substr(0, dot));
  fx::Module& m = owner ? *owner : static_cast<fx::Module&>(gm);
  if (gm.attr_kind(target) == 'p')
    m.register_parameter(name, std::move(t));
  else
    m.register_buffer(name, std::move(t));
}

// The first LayerNormalization pattern of the transformer (as the executor fuses it).
fx::exec::LayerNormMatch layer_norm(fx::GraphModule& gm) {
  for (Node* n : gm.graph().nodes())
    if (n->op() == fx::Opcode::CallFunction && n->target().pretty() == "onnx.Div")
      if (auto m = fx::exec::match_layer_norm(gm, n, 3)) return *m;
  throw std::runtime_error("no LayerNorm pattern");
}

bool same_bits(const std::vector<Value>& a, const std::vector<Value>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].dtype() != b[i].dtype() || a[i].shape() != b[i].shape() ||
        std::memcmp(a[i].data<uint8_t>(), b[i].data<uint8_t>(), a[i].nbytes()) != 0)
      return false;
  return true;
}

struct Mutation {
  const char* what;
  std::function<void(fx::GraphModule&)> apply;
};

std::vector<Mutation> mutations() {
  return {
      {"insert_node + replace_all_uses_with (a Relu inside a LayerNorm pattern)",
       [](fx::GraphModule& gm) {
         Node* sub = first_node(gm, "onnx.Sub");
         auto guard = gm.graph().inserting_after(sub);
         Node* relu = gm.graph().call_function(fn("onnx.Relu"), {sub});
         sub->replace_all_uses_with(relu, [&](Node* u) { return u != relu; });
       }},
      {"erase_node (a Relu fused into its Gemm)",
       [](fx::GraphModule& gm) {
         Node* relu = first_node(gm, "onnx.Relu");
         relu->replace_all_uses_with(relu->args()[0].to_node());
         gm.graph().erase_node(relu);
       }},
      {"update_kwarg (Softmax axis)",
       [](fx::GraphModule& gm) { first_node(gm, "onnx.Softmax")->update_kwarg("axis", 1); }},
      {"update_arg (the LayerNorm's bias becomes its scale)",
       [](fx::GraphModule& gm) {
         const fx::exec::LayerNormMatch m = layer_norm(gm);
         Node* add = m.result;
         add->update_arg(add->args()[0] == m.bias ? 0 : 1, m.scale);
       }},
      {"set_args (x - mean becomes mean - x in a LayerNorm pattern)",
       [](fx::GraphModule& gm) {
         Node* sub = first_node(gm, "onnx.Sub");
         sub->set_args({sub->args()[1], sub->args()[0]});
       }},
      {"set_kwargs (a Gemm's transB cleared, on a square weight)",
       [](fx::GraphModule& gm) {
         for (Node* n : gm.graph().nodes())
           if (n->op() == fx::Opcode::CallFunction && n->target().pretty() == "onnx.Gemm") {
             const fx::Tensor* w = fx::exec::constant_tensor(gm, n->args()[1]);
             if (w && w->shape.size() == 2 && w->shape[0] == w->shape[1]) {
               n->set_kwargs({});
               return;
             }
           }
         throw std::runtime_error("no square Gemm");
       }},
      {"replace a parameter (the LayerNorm scale, doubled)",
       [](fx::GraphModule& gm) {
         const fx::Node* src = fx::exec::constant_source(layer_norm(gm).scale);
         replace_tensor(gm, src->target().str(), [](std::vector<float>& v) {
           for (float& x : v) x *= 2.0f;
         });
       }},
      {"replace a buffer (the LayerNorm epsilon, 1.0)",
       [](fx::GraphModule& gm) {
         Node* sqrt = first_node(gm, "onnx.Sqrt");
         Node* add_eps = sqrt->args()[0].to_node();
         for (const Argument& a : add_eps->args())
           if (const fx::Node* src = fx::exec::constant_source(a))
             replace_tensor(gm, src->target().str(),
                            [](std::vector<float>& v) { v.assign(v.size(), 1.0f); });
       }},
      {"replace a bias fused into its MatMul",
       [](fx::GraphModule& gm) {
         Node* mm = first_node(gm, "onnx.MatMul");
         Node* add = *mm->users().begin();
         for (const Argument& a : add->args())
           if (const fx::Node* src = fx::exec::constant_source(a))
             replace_tensor(gm, src->target().str(), [](std::vector<float>& v) {
               for (float& x : v) x += 0.25f;
             });
       }},
      {"add a buffer and a get_attr + Add before the output",
       [](fx::GraphModule& gm) {
         fx::Tensor t;
         t.shape = {64};
         auto bytes = std::make_shared<std::vector<uint8_t>>(64 * sizeof(float));
         for (size_t i = 0; i < 64; ++i) reinterpret_cast<float*>(bytes->data())[i] = 0.5f;
         t.data = bytes;
         gm.register_buffer("extra", t);
         Node* out = gm.graph().output_node();
         Node* y = out->args()[0].is_node() ? out->args()[0].to_node()
                                            : out->args()[0].elements()[0].to_node();
         auto guard = gm.graph().inserting_before(out);
         Node* add = gm.graph().call_function(fn("onnx.Add"), {y, gm.graph().get_attr("extra")});
         out->replace_input_with(y, add);
       }},
  };
}

TEST(ExecPlan, MutatedModelsNeverRunAStalePlan) {
  const std::unique_ptr<fx::GraphModule> pristine = fx::onnx::load_model(transformer_path());
  const std::vector<Value> in = fxtest::seeded_inputs(*pristine);
  const std::vector<Value> original = fx::exec::run(*pristine, in);
  for (const Mutation& m : mutations()) {
    SCOPED_TRACE(m.what);
    std::unique_ptr<fx::GraphModule> warm = fx::onnx::load_model(transformer_path());
    ASSERT_TRUE(same_bits(fx::exec::run(*warm, in), original));
    ASSERT_TRUE(same_bits(fx::exec::run(*warm, in), original));  // from its cached plan
    m.apply(*warm);
    const std::vector<Value> after = fx::exec::run(*warm, in);
    std::unique_ptr<fx::GraphModule> fresh = fx::onnx::load_model(transformer_path());
    m.apply(*fresh);
    const std::vector<Value> expected = fx::exec::run(*fresh, in);
    // The mutation matters (otherwise a stale plan would pass unnoticed) ...
    EXPECT_FALSE(same_bits(expected, original));
    // ... and the warm model, run before, gives what the fresh one does, twice.
    EXPECT_TRUE(same_bits(after, expected));
    EXPECT_TRUE(same_bits(fx::exec::run(*warm, in), expected));
  }
}

TEST(ExecPlan, ModuleMetaOpsetReachesOps) {
  // Softmax before opset 13 flattens from its axis: over axis 0 of a [2, 3] input that is one
  // softmax of all six values, from 13 on six softmaxes of one value each.
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  g->output(g->call_function(fn("onnx.Softmax"), {x}, {{"axis", 0}}));
  fx::GraphModule gm(nullptr, std::move(g));
  auto set_opset = [&](int64_t v) {
    gm.meta().set(fx::onnx::meta::kOpsetImport, Argument::dict({{Argument(""), Argument(v)}}));
  };
  const Value in = Value::from_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  set_opset(13);
  EXPECT_FLOAT_EQ(fx::exec::run(gm, {in})[0].to_f32()[0], 1.0f / (1.0f + std::exp(3.0f)));
  set_opset(11);
  const std::vector<float> flat = fx::exec::run(gm, {in})[0].to_f32();
  float sum = 0;
  for (float v : flat) sum += v;
  EXPECT_NEAR(sum, 1.0f, 1e-6f);
}

TEST(ExecPlan, PlansPerInputShapeAreBoundedAndReleased) {
  fx::exec::release_cached_memory();
  EXPECT_EQ(fx::exec::cached_plan_count(), 0u);
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  g->output(g->call_function(fn("onnx.Relu"), {x}));
  auto gm = std::make_unique<fx::GraphModule>(nullptr, std::move(g));
  for (int round = 0; round < 2; ++round)
    for (int64_t n = 1; n <= 6; ++n) {  // six shapes: each result is still right
      std::vector<float> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 2 ? i : -i);
      const std::vector<float> y = fx::exec::run(*gm, {Value::from_f32({n}, v)})[0].to_f32();
      ASSERT_EQ(y.size(), v.size());
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[i], std::max(v[i], 0.0f));
    }
  EXPECT_LE(fx::exec::cached_plan_count(), 4u);  // least recently used out
  EXPECT_GE(fx::exec::cached_plan_count(), 1u);
  // A destroyed graph's plans go with the next plan built on this thread.
  gm.reset();
  auto g2 = std::make_unique<fx::Graph>();
  Node* x2 = g2->placeholder("x");
  g2->output(g2->call_function(fn("onnx.Neg"), {x2}));
  fx::GraphModule other(nullptr, std::move(g2));
  EXPECT_EQ(fx::exec::run(other, {Value::from_f32({1}, {2.0f})})[0].to_f32()[0], -2.0f);
  EXPECT_EQ(fx::exec::cached_plan_count(), 1u);
  fx::exec::release_cached_memory();
  EXPECT_EQ(fx::exec::cached_plan_count(), 0u);
}

TEST(ExecPlan, ProbesAndRegistrationsGetTheirOwnPlans) {
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* mm = g->call_function(fn("onnx.MatMul"), {x, g->get_attr("w")});
  Node* add = g->call_function(fn("onnx.Add"), {mm, g->get_attr("b")});
  Node* relu = g->call_function(fn("onnx.Relu"), {add});
  g->output(relu);
  fx::Module root;
  fx::Tensor w, b;
  w.shape = {2, 2};
  w.data = std::make_shared<std::vector<uint8_t>>(16);
  reinterpret_cast<float*>(const_cast<uint8_t*>(w.data->data()))[0] = 1.0f;
  reinterpret_cast<float*>(const_cast<uint8_t*>(w.data->data()))[3] = 1.0f;
  b.shape = {2};
  b.data = std::make_shared<std::vector<uint8_t>>(8);
  reinterpret_cast<float*>(const_cast<uint8_t*>(b.data->data()))[0] = -5.0f;
  root.register_buffer("w", w);
  root.register_buffer("b", b);
  fx::GraphModule gm(&root, std::move(g));
  const Value in = Value::from_f32({1, 2}, {1.0f, 2.0f});
  EXPECT_EQ(fx::exec::run(gm, {in})[0].to_f32(), (std::vector<float>{0.0f, 2.0f}));
  // Probing the MatMul makes it run unfused; its value is the product without bias.
  fx::exec::RunOptions probe;
  probe.probe = {"mat_mul"};
  const fx::exec::RunResult r = fx::exec::run(gm, {in}, probe);
  ASSERT_EQ(r.probes.size(), 1u);
  EXPECT_EQ(r.probes[0].second.to_f32(), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(r.outputs[0].to_f32(), (std::vector<float>{0.0f, 2.0f}));
  EXPECT_TRUE(r.profile.empty());  // not asked for
  // A profiled run times the ops it executes, in order: the MatMul, whose step also applies the
  // fused bias Add and Relu (no entries of their own); probed, the MatMul runs alone and the Add
  // (with the Relu fused into it) is timed too. The same outputs either way.
  fx::exec::RunOptions timed;
  timed.profile = true;
  const fx::exec::RunResult p = fx::exec::run(gm, {in}, timed);
  EXPECT_EQ(p.outputs[0].to_f32(), (std::vector<float>{0.0f, 2.0f}));
  ASSERT_EQ(p.profile.size(), 1u);
  EXPECT_EQ(p.profile[0].node, "mat_mul");
  EXPECT_EQ(p.profile[0].op, "onnx.MatMul");
  EXPECT_GE(p.profile[0].microseconds, 0.0);
  timed.probe = {"mat_mul"};
  const fx::exec::RunResult pp = fx::exec::run(gm, {in}, timed);
  EXPECT_EQ(pp.outputs[0].to_f32(), (std::vector<float>{0.0f, 2.0f}));
  ASSERT_EQ(pp.profile.size(), 2u);
  EXPECT_EQ(pp.profile[0].node, "mat_mul");
  EXPECT_EQ(pp.profile[1].node, "add");
  EXPECT_EQ(pp.profile[1].op, "onnx.Add");
  // A registration changes what the next run calls: a missing op, then two versions of it.
  auto g2 = std::make_unique<fx::Graph>();
  g2->output(g2->call_function(fn("fxtest.PlanOp"), {g2->placeholder("x")}));
  fx::GraphModule gm2(nullptr, std::move(g2));
  EXPECT_THROW(fx::exec::run(gm2, {in}), fx::Error);
  fx::exec::register_op("fxtest.PlanOp", [](fx::exec::OpCall& c) {
    c.outputs.push_back(Value::from_f32(c.input(0).shape(), {7.0f, 7.0f}));
  });
  EXPECT_EQ(fx::exec::run(gm2, {in})[0].to_f32(), (std::vector<float>{7.0f, 7.0f}));
  fx::exec::register_op("fxtest.PlanOp", [](fx::exec::OpCall& c) {
    c.outputs.push_back(Value::from_f32(c.input(0).shape(), {8.0f, 8.0f}));
  });
  EXPECT_EQ(fx::exec::run(gm2, {in})[0].to_f32(), (std::vector<float>{8.0f, 8.0f}));
}

TEST(ExecPlan, KwargChangesReachCachedAttributes) {
  // Transpose and Gemm keep their parsed attributes in the plan: changing a kwarg after a run
  // must reach the next run.
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* t = g->call_function(fn("onnx.Transpose"), {x}, {{"perm", Argument::list({1, 0})}});
  Node* gemm = g->call_function(fn("onnx.Gemm"), {t, t}, {{"transB", 1}});
  g->output(gemm);
  fx::GraphModule gm(nullptr, std::move(g));
  const Value in = Value::from_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  // t = x^T [3, 2]; gemm = t t^T [3, 3].
  EXPECT_EQ(fx::exec::run(gm, {in})[0].shape(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(fx::exec::run(gm, {in})[0].shape(), (std::vector<int64_t>{3, 3}));
  gemm->update_kwarg("transA", 1);
  gemm->update_kwarg("transB", 0);  // t^T t = x x^T [2, 2]
  std::vector<Value> out = fx::exec::run(gm, {in});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(out[0].to_f32(), (std::vector<float>{14, 32, 32, 77}));  // x x^T
  t->update_kwarg("perm", Argument::list({0, 1}));                   // t = x [2, 3]; x^T x [3, 3]
  out = fx::exec::run(gm, {in});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(out[0].to_f32()[0], 17.0f);  // 1*1 + 4*4
}

// ---- a GELU written out (Div, Erf, Add, Mul, Mul) runs as one kernel ----

fx::Tensor scalar_f32(float v, std::vector<int64_t> shape = {}) {
  fx::Tensor t;
  t.shape = std::move(shape);
  t.data = std::make_shared<std::vector<uint8_t>>(sizeof v);
  std::memcpy(const_cast<uint8_t*>(t.data->data()), &v, sizeof v);
  return t;
}

// x -> GELU as torch exports it: 0.5 last (`half_first`: 0.5 * x first), with `root2` as the
// divisor; `erf_output` also returns the Erf (an intermediate read outside the pattern).
std::unique_ptr<fx::GraphModule> written_out_gelu(bool half_first, float root2,
                                                  std::vector<int64_t> const_shape = {},
                                                  bool erf_output = false) {
  auto g = std::make_unique<fx::Graph>();
  auto root = std::make_shared<fx::Module>();
  root->register_buffer("root2", scalar_f32(root2, const_shape));
  root->register_buffer("one", scalar_f32(1.0f));
  root->register_buffer("half", scalar_f32(0.5f));
  Node* x = g->placeholder("x");
  Node* div = g->call_function(fn("onnx.Div"), {x, g->get_attr("root2")});
  Node* erf = g->call_function(fn("onnx.Erf"), {div});
  Node* plus1 = g->call_function(fn("onnx.Add"), {erf, g->get_attr("one")});
  Node* out;
  if (half_first) {
    Node* h = g->call_function(fn("onnx.Mul"), {g->get_attr("half"), x});
    out = g->call_function(fn("onnx.Mul"), {h, plus1});
  } else {
    Node* prod = g->call_function(fn("onnx.Mul"), {x, plus1});
    out = g->call_function(fn("onnx.Mul"), {prod, g->get_attr("half")});
  }
  if (erf_output)
    g->output(Argument::tuple({out, erf}));
  else
    g->output(out);
  return std::make_unique<fx::GraphModule>(root.get(), std::move(g));
}

// x -> Sigmoid -> Mul with x (`sigmoid_first`: Mul(s, x)); `sigmoid_output` also returns the
// Sigmoid; `other` multiplies the Sigmoid by a second input instead of x.
std::unique_ptr<fx::GraphModule> written_out_silu(bool sigmoid_first, bool sigmoid_output = false,
                                                  bool other = false) {
  auto g = std::make_unique<fx::Graph>();
  auto root = std::make_shared<fx::Module>();
  Node* x = g->placeholder("x");
  Node* y = other ? g->placeholder("y") : x;
  Node* sig = g->call_function(fn("onnx.Sigmoid"), {x});
  Node* out = sigmoid_first ? g->call_function(fn("onnx.Mul"), {sig, y})
                            : g->call_function(fn("onnx.Mul"), {y, sig});
  if (sigmoid_output)
    g->output(Argument::tuple({out, sig}));
  else
    g->output(out);
  return std::make_unique<fx::GraphModule>(root.get(), std::move(g));
}

TEST(ExecPlan, AWrittenOutSiluRunsAsOneKernelWithTheBitsOfItsNodes) {
  std::vector<float> xs;
  for (int i = -300; i <= 300; ++i) xs.push_back(static_cast<float>(i) * 0.0517f);
  xs.push_back(NAN);
  xs.push_back(INFINITY);
  xs.push_back(-INFINITY);
  const int64_t n = static_cast<int64_t>(xs.size());
  const Value in = Value::from_f32({n}, xs);
  std::vector<float> kernel(xs.size());
  fx::kernels::unary_f32(fx::kernels::UnaryOp::Silu, xs.data(), kernel.data(), n, 0.0f, 0.0f);
  // The same bits, except that of two NaNs (x and its Sigmoid) a product keeps the first one's:
  // Mul(s, x) may carry another NaN than the kernel's x * s.
  bool nan_either_way = false;
  auto same_bits = [&](const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 &&
          !(nan_either_way && std::isnan(a[i]) && std::isnan(b[i])))
        return false;
    return true;
  };
  for (bool sigmoid_first : {false, true}) {
    SCOPED_TRACE(sigmoid_first ? "Mul(s, x)" : "Mul(x, s)");
    nan_either_way = sigmoid_first;
    auto gm = written_out_silu(sigmoid_first);
    // Fused, and node by node (probing the Sigmoid): the same bits, the kernel's.
    const std::vector<float> fused = fx::exec::run(*gm, {in})[0].to_f32();
    EXPECT_TRUE(same_bits(fused, kernel));
    fx::exec::RunOptions probe;
    probe.probe = {"sigmoid"};
    const fx::exec::RunResult r = fx::exec::run(*gm, {in}, probe);
    ASSERT_EQ(r.probes.size(), 1u);
    EXPECT_TRUE(same_bits(r.outputs[0].to_f32(), fused));
    // The Sigmoid is also an output: the nodes run, and both values are there.
    const std::vector<Value> both = fx::exec::run(*written_out_silu(sigmoid_first, true), {in});
    ASSERT_EQ(both.size(), 2u);
    EXPECT_TRUE(same_bits(both[0].to_f32(), fused));
    EXPECT_TRUE(same_bits(both[1].to_f32(), r.probes[0].second.to_f32()));
  }
  // The Sigmoid times another tensor is not a SiLU: y * Sigmoid(x).
  {
    std::vector<float> ys(xs.size(), 2.0f);
    const std::vector<float> out =
        fx::exec::run(*written_out_silu(false, false, true), {in, Value::from_f32({n}, ys)})[0]
            .to_f32();
    std::vector<float> sig(xs.size());
    fx::kernels::unary_f32(fx::kernels::UnaryOp::Sigmoid, xs.data(), sig.data(), n, 0.0f, 0.0f);
    for (size_t i = 0; i + 3 < xs.size(); ++i) EXPECT_EQ(out[i], 2.0f * sig[i]) << xs[i];
  }
  // Into a Concat whose producers write its result in place (a YOLO-style neck): the fused
  // SiLU's value lands there like any other, run after run.
  {
    auto g = std::make_unique<fx::Graph>();
    Node* x = g->placeholder("x");
    Node* sig = g->call_function(fn("onnx.Sigmoid"), {x});
    Node* silu = g->call_function(fn("onnx.Mul"), {x, sig});
    Node* relu = g->call_function(fn("onnx.Relu"), {x});
    g->output(g->call_function(fn("onnx.Concat"), {silu, relu}, {{"axis", 1LL}}));
    auto root = std::make_shared<fx::Module>();
    fx::GraphModule gm(root.get(), std::move(g));
    const Value img = Value::from_f32({1, 4, 5, 6}, random_floats(120, 41));
    fx::exec::RunOptions probe;
    probe.probe = {"sigmoid"};
    const std::vector<float> want = fx::exec::run(gm, {img}, probe).outputs[0].to_f32();
    for (int run = 0; run < 3; ++run)
      EXPECT_TRUE(same_bits(fx::exec::run(gm, {img})[0].to_f32(), want)) << "run " << run;
  }
  // float64: no kernel for it, so the nodes run (x * 1 / (1 + e^-x) in double).
  {
    Value d = Value::zeros(fx::Dtype::Float64, {3});
    const double dv[3] = {-1.0, 0.0, 2.0};
    std::memcpy(d.mutable_data<double>(), dv, sizeof dv);
    const Value out = fx::exec::run(*written_out_silu(false), {d})[0];
    ASSERT_EQ(out.dtype(), fx::Dtype::Float64);
    EXPECT_DOUBLE_EQ(out.data<double>()[2], 2.0 / (1.0 + std::exp(-2.0)));
  }
}

// x -> SiLU (Sigmoid, Mul) -> GlobalAveragePool, the SiLU's value also an output (a squeeze-and-
// excitation block's two readers): the pool is computed with the SiLU, plane by plane, and gives
// the bits of the nodes run one by one (the pool probed); not when it is probed, replaced by a
// user's op, or its input has rank 2 (an error either way).
TEST(ExecPlan, AGlobalAveragePoolOfASiluIsComputedWithItWithTheSameBits) {
  auto silu_pool = [] {
    auto g = std::make_unique<fx::Graph>();
    Node* x = g->placeholder("x");
    Node* sig = g->call_function(fn("onnx.Sigmoid"), {x});
    Node* silu = g->call_function(fn("onnx.Mul"), {x, sig});
    Node* pool = g->call_function(fn("onnx.GlobalAveragePool"), {silu});
    g->output(Argument::tuple({silu, pool}));
    return std::make_unique<fx::GraphModule>(std::make_shared<fx::Module>().get(), std::move(g));
  };
  auto bits = [](const Value& v) {
    const std::vector<float> f = v.to_f32();
    std::vector<uint32_t> b(f.size());
    std::memcpy(b.data(), f.data(), f.size() * sizeof(float));
    return b;
  };
  auto gm = silu_pool();
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{
           {1, 3, 7, 7}, {2, 5, 13, 9}, {1, 4, 70}, {1, 2, 3, 4, 5}}) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> xs = random_floats(static_cast<size_t>(n), 43);
    for (float& v : xs) v *= 8.0f;
    xs[3] = NAN;
    const Value in = Value::from_f32(shape, xs);
    fx::exec::RunOptions probe;
    probe.probe = {"global_average_pool"};
    const fx::exec::RunResult plain = fx::exec::run(*gm, {in}, probe);
    ASSERT_EQ(plain.probes.size(), 1u);
    for (int run = 0; run < 2; ++run) {  // the plan's first run and a later one
      const std::vector<Value> fused = fx::exec::run(*gm, {in});
      ASSERT_EQ(fused.size(), 2u);
      EXPECT_EQ(fused[1].shape(), plain.outputs[1].shape());
      EXPECT_EQ(bits(fused[0]), bits(plain.outputs[0]));
      EXPECT_EQ(bits(fused[1]), bits(plain.outputs[1]));
      EXPECT_TRUE(std::isnan(fused[1].to_f32()[0]));
    }
    // The pool ran inside the SiLU's step: a profiled run lists the Sigmoid alone.
    fx::exec::RunOptions profile;
    profile.profile = true;
    const fx::exec::RunResult timed = fx::exec::run(*gm, {in}, profile);
    ASSERT_EQ(timed.profile.size(), 1u);
    EXPECT_EQ(timed.profile[0].op, "onnx.Sigmoid");
    EXPECT_EQ(bits(timed.outputs[1]), bits(plain.outputs[1]));
  }
  // Rank 2: GlobalAveragePool's own error, fused or not.
  EXPECT_THROW(fx::exec::run(*gm, {Value::from_f32({2, 3}, random_floats(6, 44))}), fx::Error);
  // A user's GlobalAveragePool in the builtin's place is called, and its value is the output.
  {
    struct Restore {
      ~Restore() { fx::exec::register_nn_ops(); }
    } restore;
    int calls = 0;
    fx::exec::register_op("onnx.GlobalAveragePool", [&calls](fx::exec::OpCall& c) {
      ++calls;
      c.outputs.push_back(Value::from_f32({1}, {42.0f}));
    });
    const std::vector<Value> out =
        fx::exec::run(*gm, {Value::from_f32({1, 2, 3, 3}, random_floats(18, 45))});
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(out[1].to_f32(), std::vector<float>{42.0f});
  }
}

TEST(ExecPlan, AWrittenOutGeluRunsAsTheGeluKernelUnlessItsPartsAreNeeded) {
  std::vector<float> xs;
  for (int i = -60; i <= 60; ++i) xs.push_back(static_cast<float>(i) * 0.1037f);
  const Value in = Value::from_f32({11, 11}, xs);
  std::vector<float> kernel(xs.size());
  fx::kernels::unary_f32(fx::kernels::UnaryOp::Gelu, xs.data(), kernel.data(),
                         static_cast<int64_t>(xs.size()), 0.0f, 0.0f);
  const float root2 = static_cast<float>(std::sqrt(2.0));
  for (bool half_first : {false, true}) {
    SCOPED_TRACE(half_first ? "0.5 * x first" : "0.5 last");
    auto gm = written_out_gelu(half_first, root2);
    // Fused: the GELU kernel's bits. Probing the Erf runs the nodes one by one: the same
    // values to rounding, and the probe is the Erf's own value.
    EXPECT_EQ(fx::exec::run(*gm, {in})[0].to_f32(), kernel);
    fx::exec::RunOptions probe;
    probe.probe = {"erf"};
    const fx::exec::RunResult r = fx::exec::run(*gm, {in}, probe);
    ASSERT_EQ(r.probes.size(), 1u);
    const std::vector<float> unfused = r.outputs[0].to_f32(), erf = r.probes[0].second.to_f32();
    for (size_t i = 0; i < xs.size(); ++i) {
      EXPECT_NEAR(unfused[i], kernel[i], 1e-6f * (1.0f + std::fabs(kernel[i]))) << xs[i];
      EXPECT_NEAR(erf[i], std::erf(xs[i] / root2), 1e-6f) << xs[i];
    }
  }
  // Not GELU to float rounding (a divisor 1e-4 off sqrt 2): the nodes run, so the output is
  // what the probed (node-by-node) run gives, bit for bit.
  {
    auto gm = written_out_gelu(false, 1.4142f);
    fx::exec::RunOptions probe;
    probe.probe = {"erf"};
    EXPECT_EQ(fx::exec::run(*gm, {in})[0].to_f32(),
              fx::exec::run(*gm, {in}, probe).outputs[0].to_f32());
    EXPECT_NE(fx::exec::run(*gm, {in})[0].to_f32(), kernel);
  }
  // The Erf is also an output: it must exist, so the pattern runs node by node.
  {
    auto gm = written_out_gelu(false, root2, {}, true);
    const std::vector<Value> out = fx::exec::run(*gm, {in});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{11, 11}));
    for (size_t i = 0; i < xs.size(); ++i)
      EXPECT_NEAR(out[0].to_f32()[i], kernel[i], 1e-6f * (1.0f + std::fabs(kernel[i])));
  }
  // A constant of higher rank than x broadcasts the result up: [5] in, [1, 5] out.
  {
    auto gm = written_out_gelu(false, root2, {1, 1});
    const Value small = Value::from_f32({5}, {-2.0f, -1.0f, 0.0f, 1.0f, 2.0f});
    EXPECT_EQ(fx::exec::run(*gm, {small})[0].shape(), (std::vector<int64_t>{1, 5}));
    EXPECT_EQ(fx::exec::run(*gm, {in})[0].to_f32(), kernel);  // rank 2: fused again
  }
}

// x -> Conv 1x1 -> Relu (run inside the Conv), x -> Conv 3x3, x -> Sigmoid, concatenated along
// `axis`; `shared` also returns the 3x3 Conv's value (read outside the Concat).
std::unique_ptr<fx::GraphModule> three_way_concat(int64_t axis, bool shared) {
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  auto ints = [](std::vector<int64_t> v) {
    Argument::Items items;
    for (int64_t i : v) items.emplace_back(static_cast<long long>(i));
    return Argument::list(std::move(items));
  };
  Node* a =
      g->call_function(fn("onnx.Conv"), {x, g->get_attr("wa")}, {{"kernel_shape", ints({1, 1})}});
  Node* relu = g->call_function(fn("onnx.Relu"), {a});
  Node* b = g->call_function(fn("onnx.Conv"), {x, g->get_attr("wb")},
                             {{"kernel_shape", ints({3, 3})}, {"pads", ints({1, 1, 1, 1})}});
  Node* sig = g->call_function(fn("onnx.Sigmoid"), {x});
  Node* cat =
      g->call_function(fn("onnx.Concat"), {relu, b, sig}, {{"axis", static_cast<long long>(axis)}});
  if (shared) {
    g->output(Argument::tuple({cat, b}));
  } else {
    g->output(cat);
  }
  auto root = std::make_shared<fx::Module>();
  root->register_parameter("wa", tensor_f32({8, 8, 1, 1}, random_floats(8 * 8, 31)));
  root->register_parameter("wb", tensor_f32({8, 8, 3, 3}, random_floats(8 * 8 * 9, 32)));
  return std::make_unique<fx::GraphModule>(root.get(), std::move(g));
}

// A Concat's producers write its result in place when only the Concat reads them and the
// result is one block an input (from the second run on: the first learns the shapes). The
// result is the bits of the node-by-node run (a probe on the Concat turns the plan off), and
// one run's result stays intact through the next runs. Two images, a concat along another axis
// or an input read elsewhere are concatenated by copying, with the same bits.
TEST(ExecPlan, ConcatInputsAreWrittenInPlaceWhenOnlyTheConcatReadsThem) {
  struct Case {
    const char* what;
    int64_t images, axis;
    bool shared, joined;
  };
  for (const Case& c :
       {Case{"one image, channels", 1, 1, false, true}, Case{"negative axis", 1, -3, false, true},
        Case{"two images", 2, 1, false, false}, Case{"along the rows", 1, 2, false, false},
        Case{"an input read elsewhere", 1, 1, true, false}}) {
    SCOPED_TRACE(c.what);
    auto gm = three_way_concat(c.axis, c.shared);
    const Value in = Value::from_f32({c.images, 8, 9, 7},
                                     random_floats(static_cast<size_t>(c.images) * 8 * 63, 33));
    fx::exec::RunOptions probe;
    probe.probe = {"concat"};
    const std::vector<float> want = fx::exec::run(*gm, {in}, probe).outputs[0].to_f32();
    const size_t before = fx::exec::joined_concat_count();
    std::vector<Value> kept;
    for (int run = 0; run < 3; ++run) {
      kept.push_back(fx::exec::run(*gm, {in})[0]);
      EXPECT_EQ(kept.back().to_f32(), want) << "run " << run;
    }
    for (const Value& v : kept) EXPECT_EQ(v.to_f32(), want) << "a result kept across runs";
    EXPECT_EQ(fx::exec::joined_concat_count() - before, c.joined ? 2u : 0u);
  }
}

}  // namespace

// ---- values the plan's key fixes: Shape arithmetic, Identity of a weight ----

fx::Tensor tensor_i64(std::vector<int64_t> shape, const std::vector<int64_t>& data) {
  fx::Tensor t;
  t.dtype = fx::Dtype::Int64;
  t.shape = std::move(shape);
  auto bytes = std::make_shared<std::vector<uint8_t>>(data.size() * sizeof(int64_t));
  std::memcpy(bytes->data(), data.data(), bytes->size());
  t.data = bytes;
  return t;
}

// x [B, S, 4] -> (Reshape(x @ Identity(w), Concat(Shape(x)[0], -1)), x + Expand(half, Shape(x))).
std::unique_ptr<fx::GraphModule> shape_arithmetic_module() {
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("w");
  Node* idw = g->call_function(fn("onnx.Identity"), {w});
  Node* shape = g->call_function(fn("onnx.Shape"), {x});
  Node* batch = g->call_function(fn("onnx.Gather"), {shape, g->get_attr("i0")}, {{"axis", 0LL}});
  Node* target = g->call_function(fn("onnx.Concat"), {batch, g->get_attr("m1")}, {{"axis", 0LL}});
  Node* mm = g->call_function(fn("onnx.MatMul"), {x, idw});
  Node* r = g->call_function(fn("onnx.Reshape"), {mm, target});
  Node* halves = g->call_function(fn("onnx.Expand"), {g->get_attr("half"), shape});
  Node* y = g->call_function(fn("onnx.Add"), {x, halves});
  g->output(Argument::tuple({r, y}));
  auto root = std::make_shared<fx::Module>();
  root->register_parameter("w", tensor_f32({4, 5}, random_floats(20, 7)));
  root->register_buffer("i0", tensor_i64({1}, {0}));
  root->register_buffer("m1", tensor_i64({1}, {-1}));
  root->register_buffer("half", tensor_f32({1}, {0.5f}));
  return std::make_unique<fx::GraphModule>(root.get(), std::move(g));
}

// What the module computes, written out.
std::vector<std::vector<float>> shape_arithmetic_expected(const fx::GraphModule& gm,
                                                          const Value& x) {
  const fx::Tensor* wt = gm.get_tensor("w");
  const float* w = reinterpret_cast<const float*>(wt->data->data());
  const float* xv = x.data<float>();
  const int64_t rows = x.numel() / 4;
  std::vector<float> r(static_cast<size_t>(rows * 5)), y(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      float acc = 0.0f;
      for (int64_t k = 0; k < 4; ++k) acc += xv[i * 4 + k] * w[k * 5 + j];
      r[static_cast<size_t>(i * 5 + j)] = acc;
    }
  for (int64_t i = 0; i < x.numel(); ++i) y[static_cast<size_t>(i)] = xv[i] + 0.5f;
  return {r, y};
}

std::vector<std::string> profiled_nodes(const fx::exec::RunResult& r) {
  std::vector<std::string> names;
  for (const fx::exec::OpTime& t : r.profile) names.push_back(t.node);
  return names;
}

TEST(ExecPlan, ValuesTheInputShapesFixRunOnceAndAreHeld) {
  std::unique_ptr<fx::GraphModule> gm = shape_arithmetic_module();
  fx::exec::RunOptions profile;
  profile.profile = true;
  auto check = [&](const Value& x, const fx::exec::RunResult& r, const char* what) {
    SCOPED_TRACE(what);
    const auto want = shape_arithmetic_expected(*gm, x);
    ASSERT_EQ(r.outputs.size(), 2u);
    EXPECT_EQ(r.outputs[0].shape(),
              (std::vector<int64_t>{x.shape()[0], x.numel() / x.shape()[0] / 4 * 5}));
    const std::vector<float> got = r.outputs[0].to_f32();
    ASSERT_EQ(got.size(), want[0].size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[0][i], 1e-5f) << i;
    EXPECT_EQ(r.outputs[1].shape(), x.shape());
    EXPECT_EQ(r.outputs[1].to_f32(), want[1]);
  };
  const Value small = Value::from_f32({2, 3, 4}, random_floats(24, 3));
  const fx::exec::RunResult first = fx::exec::run(*gm, {small}, profile);
  check(small, first, "first run");
  const std::vector<std::string> all = {"identity", "shape",   "gather", "concat",
                                        "mat_mul",  "reshape", "expand", "add"};
  EXPECT_EQ(profiled_nodes(first), all);
  // Later runs on the same shapes run only what depends on x's elements.
  for (int run = 0; run < 2; ++run) {
    const fx::exec::RunResult later = fx::exec::run(*gm, {small}, profile);
    check(small, later, "later run");
    EXPECT_TRUE(same_bits(later.outputs, first.outputs));
    EXPECT_EQ(profiled_nodes(later), (std::vector<std::string>{"mat_mul", "reshape", "add"}));
  }
  // A probe of a held value gets it.
  fx::exec::RunOptions probe;
  probe.probe = {"gather"};
  for (int run = 0; run < 2; ++run) {
    const fx::exec::RunResult r = fx::exec::run(*gm, {small}, probe);
    ASSERT_EQ(r.probes.size(), 1u);
    EXPECT_EQ(r.probes[0].second.to_i64(), std::vector<int64_t>{2});
  }
  // Another shape: another plan, its own values.
  const Value other = Value::from_f32({3, 5, 4}, random_floats(60, 4));
  check(other, fx::exec::run(*gm, {other}, fx::exec::RunOptions{}), "another shape");
  check(small, fx::exec::run(*gm, {small}, fx::exec::RunOptions{}), "back to the first");
  // A replaced weight, read through the held Identity: the new product.
  replace_tensor(*gm, "w", [](std::vector<float>& v) {
    for (float& x : v) x = -x;
  });
  check(small, fx::exec::run(*gm, {small}, fx::exec::RunOptions{}), "replaced weight");
  check(small, fx::exec::run(*gm, {small}, fx::exec::RunOptions{}), "replaced weight, again");
  // A fixed value too large to hold (the Expand: 40 x 40 x 4 floats) is computed on every run,
  // from the held Shape.
  const Value large = Value::from_f32({40, 40, 4}, random_floats(6400, 5));
  check(large, fx::exec::run(*gm, {large}, profile), "large, first run");
  const fx::exec::RunResult later = fx::exec::run(*gm, {large}, profile);
  check(large, later, "large, later run");
  EXPECT_EQ(profiled_nodes(later),
            (std::vector<std::string>{"mat_mul", "reshape", "expand", "add"}));
}

TEST(GraphVersion, ModuleAttributeChangesMoveTheAttributeGeneration) {
  auto root = std::make_shared<fx::Module>();
  auto child = std::make_shared<fx::Module>();
  auto moves = [](const char* what, const std::function<void()>& change) {
    const uint64_t before = fx::Module::attribute_generation();
    change();
    EXPECT_GT(fx::Module::attribute_generation(), before) << what;
  };
  moves("add_module", [&] { root->add_module("c", child); });
  moves("register_parameter", [&] { child->register_parameter("w", tensor_f32({1}, {1.0f})); });
  moves("register_buffer", [&] { child->register_buffer("b", tensor_f32({1}, {1.0f})); });
  moves("remove_attr", [&] { child->remove_attr("w"); });
  moves("remove_child", [&] { root->remove_child("c"); });
  moves("a module destroyed", [&] { child.reset(); });
  const uint64_t before = fx::Module::attribute_generation();
  (void)root->get_tensor("c.b");
  (void)root->named_parameters();
  EXPECT_EQ(fx::Module::attribute_generation(), before) << "reads";
}

// ---- layout ops read as views ----

// Attention over a fused QKV projection x [S, 3E] (H heads of D): slices, head splits and the
// merge back as the exporters write them. `reversed_k`: K's rows reversed by a Slice of step -1
// first (not a plain view). A second output reads a head split through Relu (a chain that is
// copied out once).
std::unique_ptr<fx::GraphModule> attention_module(int64_t S, int64_t H, int64_t D, bool reversed_k,
                                                  int64_t divisors = 1) {
  const int64_t E = H * D;
  auto g = std::make_unique<fx::Graph>();
  auto root = std::make_shared<fx::Module>();
  int constants = 0;
  auto constant = [&](const std::vector<int64_t>& v) {
    const std::string name = "c" + std::to_string(constants++);
    root->register_buffer(name, tensor_i64({static_cast<int64_t>(v.size())}, v));
    return g->get_attr(name);
  };
  Node* x = g->placeholder("x");
  auto slice = [&](int64_t b, int64_t e) {
    return g->call_function(fn("onnx.Slice"), {x, constant({b}), constant({e}), constant({1})});
  };
  auto heads = [&](Node* part, std::vector<int64_t> perm) {
    Node* r = g->call_function(fn("onnx.Reshape"), {part, constant({S, H, D})});
    Argument::Items p;
    for (int64_t d : perm) p.push_back(Argument(static_cast<long long>(d)));
    return g->call_function(fn("onnx.Transpose"), {r}, {{"perm", Argument::list(p)}});
  };
  // The query over sqrt(D): a scalar (or, not read as a scaled view, D divisors).
  root->register_buffer(
      "sqrt_d", tensor_f32({divisors},
                           std::vector<float>(static_cast<size_t>(divisors), std::sqrt(float(D)))));
  Node* q =
      g->call_function(fn("onnx.Div"), {heads(slice(0, E), {1, 0, 2}), g->get_attr("sqrt_d")});
  Node* k_part = reversed_k ? g->call_function(fn("onnx.Slice"), {slice(E, 2 * E), constant({-1}),
                                                                  constant({INT64_MIN}),
                                                                  constant({0}), constant({-1})})
                            : slice(E, 2 * E);
  Node* k = heads(k_part, {1, 2, 0});
  Node* v = heads(slice(2 * E, 3 * E), {1, 0, 2});
  Node* scores = g->call_function(fn("onnx.MatMul"), {q, k});
  Node* p = g->call_function(fn("onnx.Softmax"), {scores}, {{"axis", -1LL}});
  Node* o = g->call_function(fn("onnx.MatMul"), {p, v});
  Node* merged =
      g->call_function(fn("onnx.Transpose"), {o},
                       {{"perm", Argument::list({Argument(1LL), Argument(0LL), Argument(2LL)})}});
  Node* out = g->call_function(fn("onnx.Reshape"), {merged, constant({S, E})});
  Node* side = g->call_function(fn("onnx.Relu"), {heads(slice(0, E), {1, 0, 2})});
  g->output(Argument::tuple({out, side}));
  return std::make_unique<fx::GraphModule>(root.get(), std::move(g));
}

TEST(ExecPlan, LayoutChainsAreReadAsViewsWithTheBitsOfTheirOps) {
  for (auto [reversed_k, divisors] : {std::pair<bool, int64_t>{false, 1}, {true, 1}, {false, 8}}) {
    SCOPED_TRACE(reversed_k ? "K reversed (not a view)" : "plain");
    SCOPED_TRACE(divisors == 1 ? "Q over a scalar" : "Q over a vector (not a scaled view)");
    const int64_t S = 7, H = 2, D = 8;
    std::unique_ptr<fx::GraphModule> gm = attention_module(S, H, D, reversed_k, divisors);
    const Value x = Value::from_f32({S, 3 * H * D}, random_floats(S * 3 * H * D, 9));
    // Op by op: probing every layout op keeps them out of any view.
    fx::exec::RunOptions ops;
    for (Node* n : gm->graph().nodes())
      if (fx::exec::is_layout_op(*n)) ops.probe.push_back(n->name());
    const std::vector<Value> want = fx::exec::run(*gm, {x}, ops).outputs;
    fx::exec::RunOptions profile;
    profile.profile = true;
    for (int run = 0; run < 3; ++run) {
      const fx::exec::RunResult r = fx::exec::run(*gm, {x}, profile);
      EXPECT_TRUE(same_bits(r.outputs, want)) << "run " << run;
      if (run == 0) continue;  // (the first run learns the fixed shape constants)
      // The Q, K and V chains are read in place by the MatMuls (Q copied out over sqrt(D)), the
      // Softmax is computed by the first MatMul as it stores each head's scores, the merge is
      // written by the second MatMul, the side chain is one copy (at its Transpose) and the final
      // Reshape an alias. A reversed K, or Q over a vector, is no view: their ops run at the
      // first MatMul, in its time.
      EXPECT_EQ(profiled_nodes(r), (std::vector<std::string>{"mat_mul", "mat_mul_1", "reshape_3",
                                                             "transpose_4", "relu"}));
    }
  }
}

// ---- a Softmax computed by the MatMul before it ----

// a @ b (b through a Transpose `perm` when given: read in place) -> Softmax(axis), or without an
// axis attribute when `axis` is none; the module records `opset`.
std::unique_ptr<fx::GraphModule> matmul_softmax_module(std::optional<int64_t> axis,
                                                       std::vector<int64_t> perm, int64_t opset) {
  auto g = std::make_unique<fx::Graph>();
  Node* a = g->placeholder("a");
  Node* b = g->placeholder("b");
  if (!perm.empty()) {
    Argument::Items p;
    for (int64_t d : perm) p.push_back(Argument(static_cast<long long>(d)));
    b = g->call_function(fn("onnx.Transpose"), {b}, {{"perm", Argument::list(p)}});
  }
  Node* scores = g->call_function(fn("onnx.MatMul"), {a, b});
  fx::Kwargs attrs;
  if (axis) attrs.set("axis", Argument(static_cast<long long>(*axis)));
  g->output(g->call_function(fn("onnx.Softmax"), {scores}, std::move(attrs)));
  auto gm = std::make_unique<fx::GraphModule>(nullptr, std::move(g));
  gm->meta().set(fx::onnx::meta::kOpsetImport,
                 Argument::dict({{Argument(""), Argument(static_cast<long long>(opset))}}));
  return gm;
}

// gm run on one and two threads gives want's bits, with a step named `step` unless `fused`.
void expect_fused_at_any_threads(const fx::GraphModule& gm, const std::vector<Value>& in,
                                 const std::vector<Value>& want, const char* step, bool fused) {
  for (int threads : {1, 2}) {
    fx::kernels::set_num_threads(threads);
    fx::exec::RunOptions profile;
    profile.profile = true;
    const fx::exec::RunResult r = fx::exec::run(gm, in, profile);
    EXPECT_TRUE(same_bits(r.outputs, want)) << threads << " threads";
    const std::vector<std::string> steps = profiled_nodes(r);
    EXPECT_EQ(std::count(steps.begin(), steps.end(), step), fused ? 0 : 1) << threads << " threads";
  }
  fx::kernels::set_num_threads(1);
}

// x (1 x C x 40 x 44) -> Conv 3x3/2 (8 channels, bias) -> [Relu] -> MaxPool 3x3/2 (ceil_mode),
// a network's first layer and its pool. `indices`: the MaxPool also returns its Indices;
// `relu_out`: the Relu's value is an output too; `pool_attrs`: the MaxPool's attributes.
std::unique_ptr<fx::GraphModule> conv_pool_module(bool relu, bool indices, bool relu_out,
                                                  fx::Kwargs pool_attrs) {
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->placeholder("w");
  Node* b = g->placeholder("b");
  Node* y = g->call_function(
      fn("onnx.Conv"), {x, w, b},
      {{"kernel_shape", Argument::list({3, 3})}, {"strides", Argument::list({2, 2})}});
  Node* r = relu ? g->call_function(fn("onnx.Relu"), {y}) : y;
  Node* pool = g->call_function(fn("onnx.MaxPool"), {r}, std::move(pool_attrs));
  Argument::Items outs;
  if (indices) {
    pool->meta().set("onnx_outputs", Argument::list({"y", "i"}));
    outs.emplace_back(g->call_function(fn("operator.getitem"), {pool, 0}));
    outs.emplace_back(g->call_function(fn("operator.getitem"), {pool, 1}));
  } else {
    outs.emplace_back(pool);
  }
  if (relu_out) outs.emplace_back(r);
  g->output(Argument::tuple(std::move(outs)));
  return std::make_unique<fx::GraphModule>(nullptr, std::move(g));
}

// A first layer whose only reader (after its Relu) is a MaxPool computes the pool as it computes
// its rows (where the direct first-layer kernels run: AVX2 or AVX-512 hosts): the bits of the ops
// run apart (the Relu probed), with no step for the Relu or the MaxPool; with and without the
// Relu, one and two threads. Not where the MaxPool returns its Indices, where the Relu's value is
// read elsewhere, nor for a convolution of 16 input channels; a MaxPool without kernel_shape
// still fails as a node of its own.
TEST(ExecPlan, AFirstLayerComputesTheMaxPoolOfItsOutput) {
  auto pool3 = [] {
    return fx::Kwargs{{"kernel_shape", Argument::list({3, 3})},
                      {"strides", Argument::list({2, 2})},
                      {"ceil_mode", Argument(1)}};
  };
  struct Case {
    const char* what;
    bool relu, indices, relu_out;
    int64_t C;
    bool fused;
  };
  fx::kernels::Conv2dParams stem;
  stem.C = 3, stem.H = 40, stem.W = 44, stem.M = 8, stem.KH = stem.KW = 3;
  stem.stride_h = stem.stride_w = 2;
  const bool stem_kernels = fx::kernels::conv2d_uses_stem(stem);
  const Case cases[] = {{"Conv, Relu, MaxPool", true, false, false, 3, stem_kernels},
                        {"Conv, MaxPool", false, false, false, 3, stem_kernels},
                        {"the MaxPool's Indices too", true, true, false, 3, false},
                        {"the Relu's value read too", true, false, true, 3, false},
                        {"16 input channels", true, false, false, 16, false}};
  for (const Case& t : cases) {
    SCOPED_TRACE(t.what);
    auto gm = conv_pool_module(t.relu, t.indices, t.relu_out, pool3());
    const std::vector<Value> in = {
        Value::from_f32({1, t.C, 40, 44}, random_floats(static_cast<size_t>(t.C * 40 * 44), 71)),
        Value::from_f32({8, t.C, 3, 3}, random_floats(static_cast<size_t>(8 * t.C * 9), 72)),
        Value::from_f32({8}, random_floats(8, 73))};
    fx::exec::RunOptions apart;
    apart.probe = {t.relu ? "relu" : "conv"};
    const std::vector<Value> want = fx::exec::run(*gm, in, apart).outputs;
    ASSERT_EQ(want[0].shape(), (std::vector<int64_t>{1, 8, 9, 10}));
    expect_fused_at_any_threads(*gm, in, want, "max_pool", t.fused);
  }
  auto bad = conv_pool_module(true, false, false, {{"strides", Argument::list({2, 2})}});
  try {
    fx::exec::run(*bad, {Value::from_f32({1, 3, 40, 44}, random_floats(3 * 40 * 44, 74)),
                         Value::from_f32({8, 3, 3, 3}, random_floats(8 * 27, 75)),
                         Value::from_f32({8}, random_floats(8, 76))});
    ADD_FAILURE() << "a MaxPool without kernel_shape ran";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.node(), "max_pool");
    EXPECT_NE(std::string(e.what()).find("kernel_shape"), std::string::npos) << e.what();
  }
}

// A MatMul whose only reader is the Softmax over its result's last axis (attention's scores)
// computes it as it stores each batch item's product: the bits of the two ops run apart (the
// Softmax probed), with no step of its own. Batched operands read in place (K through a
// Transpose) and dense ones, broadcast batch dims, one 2-D product, rows of whole and partial
// vectors, one and two threads. Not where the Softmax runs over another axis, where its default
// axis (1 before opset 13) is not the last, where an operand is 1-D, where a batch item's product
// is over 1M floats (the per-thread buffer's bound), nor where a user's Softmax replaces the
// built-in one.
TEST(ExecPlan, AMatMulComputesTheSoftmaxOverItsRows) {
  struct Case {
    const char* what;
    std::vector<int64_t> a, b, perm;
    std::optional<int64_t> axis;
    int64_t opset;
    bool fused;
  };
  const std::vector<Case> cases = {
      {"heads, K read transposed", {3, 19, 8}, {3, 19, 8}, {0, 2, 1}, -1, 17, true},
      {"heads, dense", {2, 5, 33, 8}, {2, 5, 8, 33}, {}, -1, 17, true},
      {"broadcast batch", {4, 6, 16}, {1, 16, 21}, {}, 2, 17, true},
      {"one product", {40, 24}, {24, 40}, {}, std::nullopt, 17, true},
      {"rank 2, default axis 1 before opset 13", {9, 7}, {7, 12}, {}, std::nullopt, 11, true},
      {"another axis", {3, 9, 8}, {3, 8, 9}, {}, 1, 17, false},
      {"default axis 1 of rank 3 before opset 13",
       {3, 9, 8},
       {3, 8, 9},
       {},
       std::nullopt,
       11,
       false},
      {"a 1-D operand", {2, 9, 8}, {8}, {}, -1, 17, false},
      {"a product of over 1M floats, K read transposed",
       {1, 1100, 4},
       {1, 1000, 4},
       {0, 2, 1},
       -1,
       17,
       false},
      {"a product of over 1M floats, dense", {2, 1100, 4}, {2, 4, 1000}, {}, -1, 17, false}};
  for (const Case& t : cases) {
    SCOPED_TRACE(t.what);
    auto gm = matmul_softmax_module(t.axis, t.perm, t.opset);
    int64_t na = 1, nb = 1;
    for (int64_t d : t.a) na *= d;
    for (int64_t d : t.b) nb *= d;
    const std::vector<Value> in = {
        Value::from_f32(t.a, random_floats(static_cast<size_t>(na), 61)),
        Value::from_f32(t.b, random_floats(static_cast<size_t>(nb), 62))};
    fx::exec::RunOptions apart;
    apart.probe = {"mat_mul"};
    const std::vector<Value> want = fx::exec::run(*gm, in, apart).outputs;
    expect_fused_at_any_threads(*gm, in, want, "softmax", t.fused);
  }
  // A user's Softmax in the builtin's place is called, and its value is the output.
  struct Restore {
    ~Restore() { fx::exec::register_elementwise_ops(); }
  } restore;
  int calls = 0;
  fx::exec::register_op("onnx.Softmax", [&calls](fx::exec::OpCall& c) {
    ++calls;
    c.outputs.push_back(Value::from_f32({1}, {42.0f}));
  });
  auto gm = matmul_softmax_module(-1, {}, 17);
  const std::vector<Value> out =
      fx::exec::run(*gm, {Value::from_f32({2, 3, 4}, random_floats(24, 63)),
                          Value::from_f32({2, 4, 3}, random_floats(24, 64))});
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(out[0].to_f32(), std::vector<float>{42.0f});
}
