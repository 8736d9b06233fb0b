// fx::extract_subgraph: the part of a graph between named inputs and outputs becomes a new
// GraphModule (onnx.utils.extract_model's semantics); on ONNX models the extracted part, fed the
// probed values of its inputs, computes exactly the probed values of its outputs.
#include <gtest/gtest.h>

#include <dirent.h>

#include "fx/exec.h"
#include "fx/fx.h"
#include "fx/onnx.h"
#include "golden_graph_util.h"
#include "zoo_util.h"

namespace {

// x, y -> a = x + y; w (get_attr); b = relu(a) * w; c = b + y; out (c, a)
std::unique_ptr<fx::GraphModule> sample_module() {
  auto root = std::make_shared<fx::Module>();
  auto sub = std::make_shared<fx::Module>();
  sub->register_buffer("w", fxtest::float_tensor({1}, {2.f}));
  root->add_module("sub", sub);
  root->register_buffer("unused", fxtest::float_tensor({1}, {0.f}));
  auto g = std::make_unique<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* y = g->placeholder("y");
  fx::Node* a = g->call_function(fx::fn("operator.add"), {x, y});
  a->meta().set("tag", "a");
  fx::Node* w = g->get_attr("sub.w");
  fx::Node* r = g->call_function(fx::fn("torch.relu"), {a});
  fx::Node* b = g->call_function(fx::fn("operator.mul"), {r, w});
  fx::Node* c = g->call_function(fx::fn("operator.add"), {b, y});
  g->output(fx::Argument::tuple({c, a}));
  return std::make_unique<fx::GraphModule>(root.get(), std::move(g));
}

TEST(ExtractSubgraph, CopiesTheNodesBetweenTheBoundary) {
  auto gm = sample_module();
  auto part = fx::extract_subgraph(*gm, {"add", "y"}, {"add_1"});
  EXPECT_EQ(part->code(),
            "\n\n\ndef forward(self, add, y):\n"
            "    sub_w = self.sub.w\n"
            "    relu = torch.relu(add);  add = None\n"
            "    mul = relu * sub_w;  relu = sub_w = None\n"
            "    add_1 = mul + y;  mul = y = None\n"
            "    return add_1\n    ");
  part->graph().lint();
  EXPECT_NE(part->get_tensor("sub.w"), nullptr);
  EXPECT_EQ(part->get_tensor("unused"), nullptr);  // only what the part references
  EXPECT_EQ(part->graph().find_node("add")->meta().at("tag").to_string(), "a");
  // several outputs: a tuple; an unused input stays a placeholder
  auto two = fx::extract_subgraph(*gm, {"x", "y", "relu"}, {"add", "mul"});
  EXPECT_EQ(two->graph().output_node()->args()[0].repr(), "(add, mul)");
  EXPECT_NE(two->graph().find_node("relu"), nullptr);
  EXPECT_EQ(two->graph().find_node("relu")->op(), fx::Opcode::Placeholder);
}

TEST(ExtractSubgraph, OpenBoundaryNamesTheNodeThatNeedsAnInput) {
  auto gm = sample_module();
  try {
    fx::extract_subgraph(*gm, {"add"}, {"add_1"});  // add_1 also needs y
    FAIL() << "expected an error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Graph);
    EXPECT_EQ(e.node(), "add_1");
    EXPECT_NE(std::string(e.what()).find("'y'"), std::string::npos) << e.what();
  }
  try {
    fx::extract_subgraph(*gm, {"nope"}, {"add_1"});
    FAIL() << "expected an error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Value);
    EXPECT_EQ(e.node(), "nope");
  }
  EXPECT_THROW(fx::extract_subgraph(*gm, {"x"}, {"output"}), fx::Error);
  EXPECT_THROW(fx::extract_subgraph(*gm, {"x", "x"}, {"add"}), fx::Error);
  EXPECT_THROW(fx::extract_subgraph(*gm, {"x"}, {}), fx::Error);
}

// Extracts the compute nodes between one third and two thirds of the model (adding graph inputs
// the part needs, as the error says) and checks it against probes of the whole model.
void check_extract(const std::string& path) {
  SCOPED_TRACE(path);
  std::unique_ptr<fx::GraphModule> gm = fx::onnx::load_model(path);
  std::vector<fx::Node*> compute;
  for (fx::Node* n : gm->graph().nodes())
    if (n->op() == fx::Opcode::CallFunction) compute.push_back(n);
  ASSERT_GE(compute.size(), 6u);
  std::vector<std::string> inputs = {compute[compute.size() / 3]->name()};
  const std::string output = compute[2 * compute.size() / 3]->name();
  std::unique_ptr<fx::GraphModule> part;
  for (int tries = 0; !part && tries < 8; ++tries) {
    try {
      part = fx::extract_subgraph(*gm, inputs, {output});
    } catch (const fx::Error& e) {
      ASSERT_EQ(e.kind(), fx::ErrorKind::Graph) << e.what();
      const std::string msg = e.what();  // "... needs the graph input 'x', ..."
      const size_t q = msg.find("graph input '") + 13;
      inputs.push_back(msg.substr(q, msg.find('\'', q) - q));
    }
  }
  ASSERT_NE(part, nullptr);
  part->graph().lint();
  EXPECT_LT(part->graph().size(), gm->graph().size());
  fx::exec::RunOptions opts;
  opts.probe = inputs;
  opts.probe.push_back(output);
  const std::vector<fx::exec::Value> model_inputs = fxtest::seeded_inputs(*gm);
  fx::exec::RunResult whole = fx::exec::run(*gm, model_inputs, opts);
  std::vector<fx::exec::Value> part_inputs;
  for (const std::string& in : inputs) {
    const fx::Node* n = gm->graph().find_node(in);
    if (n->op() == fx::Opcode::Placeholder) {
      size_t idx = 0;
      for (fx::Node* p : gm->graph().nodes())
        if (p->op() == fx::Opcode::Placeholder && p != n)
          ++idx;
        else if (p == n)
          break;
      part_inputs.push_back(model_inputs.at(idx));
    } else {
      for (const auto& [name, v] : whole.probes)
        if (name == in) part_inputs.push_back(v);
    }
  }
  ASSERT_EQ(part_inputs.size(), inputs.size());
  const std::vector<fx::exec::Value> got = fx::exec::run(*part, part_inputs);
  ASSERT_EQ(got.size(), 1u);
  const fx::exec::Value& want = whole.probes.back().second;
  EXPECT_EQ(whole.probes.back().first, output);
  EXPECT_EQ(fxtest::compare_values(got, {want}, 0.f, 0.f), "");  // the same kernels: exact
}

TEST(ExtractSubgraph, OnnxSampleModelPartRunsLikeTheWhole) {
  check_extract(std::string(FXWASM_MODELS_DIR) + "/sample.onnx");
}

TEST(ExtractSubgraph, OnnxZooTransformersPartRunLikeTheWhole) {
  const std::string dir = std::string(FXWASM_MODELS_DIR) + "/zoo";
  if (DIR* d = opendir(dir.c_str())) {
    closedir(d);
  } else {
    FAIL() << dir << " is absent: run scripts/setup.sh (it generates the zoo)";
  }
  for (const char* m : {"transformer_encoder", "gpt_block", "cnn_bn_eval", "lstm"})
    check_extract(dir + "/" + m + ".onnx");
}

}  // namespace
