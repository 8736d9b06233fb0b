// fx_torch_tests: the LibTorch layer against torch.fx 1.13. For every model of the zoo (zoo.h),
// tracing must print exactly what symbolic_trace printed for the Python twin
// (tests/golden/torch/, from scripts/gen_torch_goldens.py), ShapeProp must annotate the same
// TensorMetadata, and the Interpreter must reproduce the eager output.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "fx/torch/modules.h"
#include "zoo.h"

#ifndef FXWASM_TORCH_GOLDEN_DIR
#define FXWASM_TORCH_GOLDEN_DIR "tests/golden/torch"
#endif

namespace {

using namespace zoo;

std::string read_golden(const std::string& file) {
  std::ifstream f(std::string(FXWASM_TORCH_GOLDEN_DIR) + "/" + file, std::ios::binary);
  if (!f) {
    ADD_FAILURE() << "cannot read golden " << file
                  << " (regenerate with /usr/bin/python3 scripts/gen_torch_goldens.py)";
    return "";
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// First differing line, for readable failures.
void expect_golden(const std::string& file, const std::string& actual) {
  const std::string expected = read_golden(file);
  if (expected == actual) return;
  std::istringstream e(expected), a(actual);
  std::string le, la;
  int line = 1;
  while (true) {
    bool me = static_cast<bool>(std::getline(e, le));
    bool ma = static_cast<bool>(std::getline(a, la));
    if (!me && !ma) break;
    if (!me || !ma || le != la) {
      ADD_FAILURE() << file << " differs at line " << line
                    << "\n  expected: " << (me ? le : "<eof>")
                    << "\n  actual:   " << (ma ? la : "<eof>");
      return;
    }
    ++line;
  }
  ADD_FAILURE() << file << " differs (trailing newline)";
}

// The meta["tensor_meta"] text the Python script writes (fmt_meta).
std::string fmt_meta(const fx::Argument& a) {
  if (a.kind() == fx::Argument::Kind::Dict) {
    bool is_meta = false;
    for (const auto& kv : a.dict_items()) is_meta = is_meta || kv.first == fx::Argument("shape");
    if (is_meta) {
      fx::Graph g;  // tensor_meta() reads from a node; rebuild one
      fx::Node* n = g.placeholder("t");
      n->meta().set("tensor_meta", a);
      return ft::tensor_meta_repr(*ft::tensor_meta(*n));
    }
  }
  if (a.kind() == fx::Argument::Kind::Dict) {
    std::string s = "{";
    for (size_t i = 0; i < a.dict_items().size(); ++i)
      s += (i ? ", " : "") + a.dict_items()[i].first.repr() + ": " +
           fmt_meta(a.dict_items()[i].second);
    return s + "}";
  }
  if (a.is_sequence()) {
    const bool tup = a.kind() == fx::Argument::Kind::Tuple;
    std::string s = tup ? "(" : "[";
    for (size_t i = 0; i < a.elements().size(); ++i)
      s += (i ? ", " : "") + fmt_meta(a.elements()[i]);
    if (tup && a.elements().size() == 1) s += ",";
    return s + (tup ? ")" : "]");
  }
  return a.repr();
}

std::string shapes_text(const fx::GraphModule& gm) {
  std::string out;
  for (fx::Node* n : gm.graph().nodes())
    if (const fx::Argument* m = n->meta().find("tensor_meta"))
      out += n->name() + ": " + fmt_meta(*m) + "\n";
  return out;
}

// Recursive allclose over Values.
void expect_close(const Value& expected, const Value& actual, const std::string& where) {
  ASSERT_EQ(static_cast<int>(expected.kind()), static_cast<int>(actual.kind()))
      << where << ": " << expected.repr() << " vs " << actual.repr();
  switch (expected.kind()) {
    case Value::Kind::Tensor:
      ASSERT_EQ(expected.tensor().sizes(), actual.tensor().sizes()) << where;
      EXPECT_TRUE(torch::allclose(expected.tensor(), actual.tensor(), 1e-5, 1e-6))
          << where << ": max abs diff "
          << (expected.tensor() - actual.tensor()).abs().max().item<double>();
      break;
    case Value::Kind::Tuple:
    case Value::Kind::List:
      ASSERT_EQ(expected.elements().size(), actual.elements().size()) << where;
      for (size_t i = 0; i < expected.elements().size(); ++i)
        expect_close(expected.elements()[i], actual.elements()[i],
                     where + "[" + std::to_string(i) + "]");
      break;
    case Value::Kind::Dict:
      ASSERT_EQ(expected.dict_items().size(), actual.dict_items().size()) << where;
      for (size_t i = 0; i < expected.dict_items().size(); ++i) {
        EXPECT_EQ(expected.dict_items()[i].first, actual.dict_items()[i].first) << where;
        expect_close(expected.dict_items()[i].second, actual.dict_items()[i].second,
                     where + "[" + expected.dict_items()[i].first.repr() + "]");
      }
      break;
    case Value::Kind::Constant:
      EXPECT_EQ(expected.constant(), actual.constant()) << where;
      break;
    case Value::Kind::Proxy:
      FAIL() << where << ": unexpected Proxy";
  }
}

// The case's module (seeded, eval mode) and its trace.
struct Traced {
  std::shared_ptr<ft::Module> module;
  std::unique_ptr<fx::GraphModule> gm;
};
Traced traced(const ZooCase& c) {
  torch::manual_seed(0);
  Traced t{c.make(), nullptr};
  t.module->eval();
  t.gm = trace_case(c, t.module);
  return t;
}

class Zoo : public ::testing::TestWithParam<ZooCase> {};

TEST_P(Zoo, GraphAndCodeMatchTorchFx) {
  const ZooCase& c = GetParam();
  auto [m, gm] = traced(c);
  expect_golden(c.name + ".graph.txt", gm->graph().str());
  expect_golden(c.name + ".code.py", gm->code());
  expect_golden(c.name + ".readable.py", gm->print_readable());
  if (c.check_repr) expect_golden(c.name + ".repr.txt", gm->repr());
}

// The cases that take tensor inputs (the concrete_args case has none; ConcreteArgs tests run it).
std::vector<ZooCase> zoo_run_cases() {
  std::vector<ZooCase> out;
  for (ZooCase& c : zoo_cases())
    if (!c.shapes.empty()) out.push_back(std::move(c));
  return out;
}

class ZooRun : public ::testing::TestWithParam<ZooCase> {};

TEST_P(ZooRun, ShapePropMatchesTorchFx) {
  const ZooCase& c = GetParam();
  auto [m, gm] = traced(c);
  std::vector<Value> inputs;
  for (const auto& s : c.shapes) inputs.emplace_back(make_input(s, /*random=*/false));
  ft::ShapeProp(*gm).propagate(inputs);
  expect_golden(c.name + ".shapes.txt", shapes_text(*gm));
}

TEST_P(ZooRun, InterpreterMatchesEager) {
  const ZooCase& c = GetParam();
  auto [m, gm] = traced(c);
  std::vector<Value> inputs;
  for (const auto& s : c.shapes) inputs.emplace_back(make_input(s, /*random=*/true));
  Value eager = (*m)(inputs);
  Value interp = ft::Interpreter(*gm).run(inputs);
  expect_close(eager, interp, c.name);
  // Same shapes as eager (ShapeProp on the same inputs).
  ft::ShapeProp sp(*gm);
  sp.propagate(inputs);
  fx::Node* out = gm->graph().output_node();
  const fx::Node* last = out->all_input_nodes().empty() ? nullptr : out->all_input_nodes()[0];
  if (last && eager.is_tensor()) {
    auto meta = ft::tensor_meta(*last);
    ASSERT_TRUE(meta.has_value());
    EXPECT_EQ(meta->shape, eager.tensor().sizes().vec());
  }
}

std::string case_name(const ::testing::TestParamInfo<ZooCase>& info) { return info.param.name; }
INSTANTIATE_TEST_SUITE_P(Models, Zoo, ::testing::ValuesIn(zoo_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Models, ZooRun, ::testing::ValuesIn(zoo_run_cases()), case_name);

// ---- tracing semantics ----

TEST(Tracing, EagerForwardRunsOnTensors) {
  torch::manual_seed(0);
  auto m = std::make_shared<MyModule>();
  torch::Tensor x = torch::randn({3, 4});
  Value y = (*m)({x});
  ASSERT_TRUE(y.is_tensor());
  torch::Tensor ref = m->linear->forward(x + m->param).clamp(0.0, 1.0);
  EXPECT_TRUE(torch::allclose(y.tensor(), ref));
}

TEST(Tracing, OneGetAttrPerParameterPerTrace) {
  struct Twice : ft::Module {
    Twice() : Module("Twice") { w = register_parameter("w", torch::ones({2})); }
    Value forward(Value x) override {
      Value a = x + w;
      return a * w;
    }
    torch::Tensor w;
  };
  auto gm = ft::symbolic_trace(std::make_shared<Twice>());
  int get_attrs = 0;
  for (fx::Node* n : gm->graph().nodes()) get_attrs += n->op() == fx::Opcode::GetAttr;
  EXPECT_EQ(get_attrs, 1) << gm->graph().str();
}

TEST(Tracing, ControlFlowOnProxyThrowsTraceError) {
  struct Branchy : ft::Module {
    Branchy() : Module("Branchy") {}
    Value forward(Value x) override {
      Value s = x.sum();
      if (s > 0) return x;
      return -x;
    }
  };
  try {
    ft::symbolic_trace(std::make_shared<Branchy>());
    FAIL() << "expected TraceError";
  } catch (const ft::TraceError& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Trace);
    EXPECT_STREQ(e.what(),
                 "symbolically traced variables cannot be used as inputs to control flow");
  }
  // Eagerly the same module runs.
  Value y = (*std::make_shared<Branchy>())({torch::ones({2})});
  EXPECT_TRUE(y.is_tensor());
}

TEST(Tracing, IteratingOrLenOfProxyThrows) {
  struct Iter : ft::Module {
    Iter() : Module("Iter") {}
    Value forward(Value x) override {
      Value acc = 0;
      for (const Value& v : x) acc = acc + v;
      return acc;
    }
  };
  struct Len : ft::Module {
    Len() : Module("Len") {}
    Value forward(Value x) override { return x * static_cast<long>(x.len()); }
  };
  struct Int : ft::Module {
    Int() : Module("Int") {}
    Value forward(Value x) override { return x * x.size(0).to_int(); }
  };
  try {
    ft::symbolic_trace(std::make_shared<Iter>());
    FAIL();
  } catch (const ft::TraceError& e) {
    EXPECT_EQ(std::string(e.what()), ft::kIterMessage);
    EXPECT_NE(std::string(e.what()).find("Proxy object cannot be iterated."), std::string::npos);
  }
  try {
    ft::symbolic_trace(std::make_shared<Len>());
    FAIL();
  } catch (const ft::TraceError& e) {
    EXPECT_EQ(std::string(e.what()),
              "'len' is not supported in symbolic tracing by default. If you want this call to be "
              "recorded, please call torch.fx.wrap('len') at module scope");
  }
  try {
    ft::symbolic_trace(std::make_shared<Int>());
    FAIL();
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Type);
    EXPECT_EQ(std::string(e.what()),
              "int() argument must be a string, a bytes-like object or a real number, not 'Proxy'");
  }
  // The tracer is usable again after a failed trace.
  EXPECT_NO_THROW(ft::symbolic_trace(std::make_shared<MyModule>()));
}

TEST(Tracing, DefaultLeafRuleAndOverride) {
  auto m = std::make_shared<Leafy>();
  auto gm = ft::symbolic_trace(m);
  std::vector<std::string> targets;
  for (fx::Node* n : gm->graph().nodes())
    if (n->op() == fx::Opcode::CallModule) targets.push_back(n->target().str());
  EXPECT_EQ(targets, (std::vector<std::string>{"block.0", "block.1", "head"}));
  LeafTracer tracer;
  EXPECT_TRUE(tracer.is_leaf_module(*m->block, "block"));
  EXPECT_FALSE(ft::Tracer().is_leaf_module(*m->block, "block"));
  EXPECT_TRUE(ft::Tracer().is_leaf_module(*m->head, "head"));
  EXPECT_FALSE(ft::Tracer().is_leaf_module(*m, ""));
}

TEST(Tracing, TensorConstantsAreStoredOnTheGraphModule) {
  auto gm = ft::symbolic_trace(std::make_shared<Ops>());
  const fx::Tensor* c = gm->get_tensor("_tensor_constant0");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->describe(), "float32[4]");
  const fx::Tensor* w = gm->get_tensor("w");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->requires_grad);
}

TEST(Tracing, GraphModuleSharesTheLibTorchTensors) {
  // Like torch.fx, the GraphModule refers to the module's parameters instead of copying them:
  // bytes() reads the current values and the Interpreter runs on the live tensors.
  auto m = std::make_shared<MyModule>();
  auto gm = ft::symbolic_trace(m);
  const fx::Tensor* p = gm->get_tensor("param");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->data, nullptr);
  ASSERT_TRUE(p->has_data());
  {
    torch::NoGradGuard g;
    m->param.fill_(0.25);
  }
  fx::Bytes b = p->bytes();
  ASSERT_EQ(b->size(), 12 * sizeof(float));
  float first;
  std::memcpy(&first, b->data(), sizeof first);
  EXPECT_EQ(first, 0.25f);
  torch::Tensor x = torch::randn({3, 4});
  Value out = ft::Interpreter(*gm).run({x});
  EXPECT_TRUE(torch::allclose(out.tensor(), (*m)({x}).tensor()));
  EXPECT_TRUE(ft::from_fx_tensor(*p).is_same(m->param));
  // materialize_tensors() snapshots the bytes: later changes no longer show.
  ft::materialize_tensors(*gm);
  p = gm->get_tensor("param");
  ASSERT_NE(p->data, nullptr);
  EXPECT_EQ(p->external, nullptr);
  {
    torch::NoGradGuard g;
    m->param.fill_(2.0);
  }
  std::memcpy(&first, gm->get_tensor("param")->data->data(), sizeof first);
  EXPECT_EQ(first, 0.25f);
  EXPECT_NE(gm->get_tensor("linear.weight"), nullptr);
  EXPECT_NE(gm->get_submodule("linear")->parameter("weight")->data, nullptr);
}

TEST(Tracing, ConcreteArgsGuardsRunInTheInterpreter) {
  auto m = std::make_shared<Concrete>();
  auto gm = ft::symbolic_trace(m, {{"flag", Value(true)}, {"y", Value()}});
  torch::Tensor x = torch::randn({3});
  Value out = ft::Interpreter(*gm).run({x, Value(true), Value()});
  EXPECT_TRUE(torch::allclose(out.tensor(), x + 1));
  try {
    ft::Interpreter(*gm).run({x, Value(false), Value()});
    FAIL() << "expected the _assert guard to fail";
  } catch (const fx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("flag has been specialized to have value True but got "
                                         "another value"),
              std::string::npos)
        << e.what();
    EXPECT_EQ(e.node(), "_assert");
  }
}

TEST(Tracing, UnregisteredSubmoduleIsAnError) {
  struct Stray : ft::Module {
    Stray() : Module("Stray") {}
    Value forward(Value x) override { return call(lin, x); }
    torch::nn::Linear lin{4, 4};  // never registered
  };
  try {
    ft::symbolic_trace(std::make_shared<Stray>());
    FAIL();
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Attribute);
    EXPECT_EQ(std::string(e.what()), "module is not installed as a submodule (Linear)");
  }
}

TEST(Values, EagerPythonSemantics) {
  torch::Tensor t = torch::tensor({1.0f, 2.0f});
  Value r = 1 - Value(t);  // reflected: 1 - t
  EXPECT_TRUE(torch::allclose(r.tensor(), torch::tensor({0.0f, -1.0f})));
  EXPECT_EQ(r.tensor().scalar_type(), torch::kFloat);  // a Python number does not promote
  Value seven = ft::floordiv_op(-7, 2);
  EXPECT_EQ(seven.to_int(), -4);  // Python floors
  EXPECT_EQ((Value(7) / 2).to_double(), 3.5);
  Value tup = Value::tuple({1, 2, 3});
  EXPECT_EQ(tup[-1].to_int(), 3);
  EXPECT_EQ(tup[ft::slice(1)].repr(), "(2, 3)");
  EXPECT_EQ(Value(t).size().repr(), "(2,)");
  EXPECT_THROW(static_cast<bool>(Value(torch::ones({2}))), fx::Error);
  EXPECT_FALSE(static_cast<bool>(Value()));
  try {
    Value(t).call_method("no_such_method");
    FAIL();
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("no_such_method"), std::string::npos);
  }
}

TEST(Tracing, UmbrellaHeaderTutorial) {
  struct Net : fx::torch::Module {
    Net() : Module("Net") { fc = register_module("fc", torch::nn::Linear(4, 2)); }
    Value forward(Value x) override { return fx::torch::F::relu(call(fc, x + 1)); }
    torch::nn::Linear fc{nullptr};
  };
  auto net = std::make_shared<Net>();
  torch::Tensor x = torch::randn({3, 4});
  Value eager = (*net)({x});
  auto gm = fx::torch::symbolic_trace(net);
  EXPECT_EQ(
      gm->code(),
      "\n\n\ndef forward(self, x):\n    add = x + 1;  x = None\n    fc = self.fc(add);  add = "
      "None\n    relu = torch.nn.functional.relu(fc, inplace = False);  fc = None\n    return "
      "relu\n    ");
  Value same = fx::torch::Interpreter(*gm).run({x});
  EXPECT_TRUE(torch::allclose(eager.tensor(), same.tensor()));
}

// ---- Interpreter ----

TEST(Interpreter, CallModuleNeedsALibTorchModule) {
  // A GraphModule built by hand (no LibTorch module behind `lin`) cannot run call_module.
  fx::Module root;
  root.add_module("lin", std::make_shared<fx::Module>("Linear", "in_features=4"));
  auto graph = std::make_unique<fx::Graph>();
  fx::Node* x = graph->placeholder("x");
  graph->output(graph->call_module("lin", {x}));
  fx::GraphModule gm(&root, std::move(graph));
  try {
    ft::Interpreter(gm).run({torch::ones({4})});
    FAIL();
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Unsupported);
    EXPECT_EQ(e.node(), "lin");
    EXPECT_NE(std::string(e.what()).find("module of type Linear"), std::string::npos) << e.what();
  }
}

TEST(Interpreter, ErrorsNameTheNodeLikeTorchFx) {
  auto gm = ft::symbolic_trace(std::make_shared<MyModule>());
  try {
    ft::Interpreter(*gm).run({torch::randn({3, 7})});  // 7 != 4: add fails
    FAIL();
  } catch (const fx::Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.kind(), fx::ErrorKind::Runtime);
    EXPECT_EQ(e.node(), "add");
    EXPECT_NE(msg.find("\n\nWhile executing %add : [#users=1] = call_function[target=operator.add]"
                       "(args = (%x, %param), kwargs = {})\nOriginal traceback:\nNone"),
              std::string::npos)
        << msg;
  }
  try {
    ft::Interpreter(*gm).run({});
    FAIL();
  } catch (const fx::Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(
                  "Expected positional argument for parameter x, but one was not passed in!", 0),
              0u)
        << e.what();
  }
}

TEST(Interpreter, UnknownTargetIsAClearError) {
  auto graph = std::make_unique<fx::Graph>();
  fx::Node* x = graph->placeholder("x");
  fx::Node* f = graph->call_function(fx::fn("torch.nonexistent_op_xyz"), {x});
  fx::Node* m = graph->call_method("frobnicate", {f});
  graph->output(m);
  fx::GraphModule gm(nullptr, std::move(graph));
  try {
    ft::Interpreter(gm).run({torch::ones({2})});
    FAIL();
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Unsupported);
    EXPECT_EQ(e.node(), "nonexistent_op_xyz");
    EXPECT_NE(std::string(e.what()).find("torch.nonexistent_op_xyz"), std::string::npos);
  }
}

TEST(Interpreter, FreesValuesAfterLastUse) {
  struct Probe : ft::Interpreter {
    using ft::Interpreter::Interpreter;
    std::vector<size_t> sizes;
    Value run_node(const fx::Node& n) override {
      sizes.push_back(env_size());
      return ft::Interpreter::run_node(n);
    }
  };
  auto gm = ft::symbolic_trace(std::make_shared<MyModule>());
  Probe gc(*gm);
  gc.run({torch::randn({3, 4})});
  // x, param, add, linear, clamp, output: x and param die at add, add at linear, ...
  EXPECT_EQ(gc.sizes, (std::vector<size_t>{0, 1, 2, 1, 1, 1}));
  Probe keep(*gm, /*garbage_collect_values=*/false);
  keep.run({torch::randn({3, 4})});
  EXPECT_EQ(keep.sizes, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
}

TEST(Interpreter, InitialEnvSkipsNodes) {
  auto gm = ft::symbolic_trace(std::make_shared<MyModule>());
  fx::Node* add = gm->graph().find_node("add");
  ASSERT_NE(add, nullptr);
  torch::Tensor given = torch::full({3, 4}, 0.5);
  ft::Interpreter::Env env{{add, Value(given)}};
  // x is never needed: the value of add is given.
  auto m = std::make_shared<MyModule>();
  Value out = ft::Interpreter(*gm).run({torch::zeros({1})}, env);
  auto* lin = dynamic_cast<ft::TorchModule*>(gm->get_submodule("linear").get());
  ASSERT_NE(lin, nullptr);
  torch::Tensor ref =
      std::dynamic_pointer_cast<torch::nn::LinearImpl>(lin->impl())->forward(given).clamp(0.0, 1.0);
  EXPECT_TRUE(torch::allclose(out.tensor(), ref));
}

TEST(Interpreter, TransformerRewritesMethodCalls) {
  // The torch.fx docs' example: every clamp becomes sigmoid.
  struct NegSigmoid : ft::Transformer {
    using ft::Transformer::Transformer;
    Value call_method(const std::string& target, const std::vector<Value>& args,
                      const ft::ValueKwargs& kwargs) override {
      if (target == "clamp") return ft::sigmoid(args[0]);
      return ft::Transformer::call_method(target, args, kwargs);
    }
  };
  auto gm = ft::symbolic_trace(std::make_shared<MyModule>());
  auto out = NegSigmoid(*gm).transform();
  EXPECT_EQ(out->graph().str(),
            "graph():\n"
            "    %x : [#users=1] = placeholder[target=x]\n"
            "    %param : [#users=1] = get_attr[target=param]\n"
            "    %add : [#users=1] = call_function[target=operator.add](args = (%x, %param), "
            "kwargs = {})\n"
            "    %linear : [#users=1] = call_module[target=linear](args = (%add,), kwargs = {})\n"
            "    %sigmoid : [#users=1] = call_function[target=torch.sigmoid](args = (%linear,), "
            "kwargs = {})\n"
            "    return sigmoid");
  torch::Tensor x = torch::randn({3, 4});
  Value a = ft::Interpreter(*out).run({x});
  Value linear = ft::Interpreter(*gm).run({x});  // clamp(linear)
  EXPECT_TRUE(a.tensor().ge(0).all().item<bool>());
  EXPECT_FALSE(torch::allclose(a.tensor(), linear.tensor()));
  // The identity Transformer reproduces the graph.
  auto same = ft::Transformer(*gm).transform();
  EXPECT_EQ(same->graph().str(), gm->graph().str());
  EXPECT_EQ(same->code(), gm->code());
}

TEST(Interpreter, MirrorKeepsPythonTypeNamesAndReprs) {
  auto m = std::make_shared<CNN>();
  auto mirror = ft::mirror_module(m);
  EXPECT_EQ(mirror->type_name(), "CNN");
  EXPECT_EQ(mirror->get_submodule("features.0")->repr(),
            "Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))");
  EXPECT_EQ(mirror->get_submodule("features.2")->repr(), "ReLU(inplace=True)");
  EXPECT_EQ(mirror->get_tensor("features.1.num_batches_tracked")->describe(), "int64[]");
}

}  // namespace
