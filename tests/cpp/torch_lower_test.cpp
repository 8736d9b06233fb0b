// fx::torch_codegen::lower: imported ONNX graphs -> graphs with PyTorch targets. What the code
// looks like, where weights go, shape arithmetic, opset-keyed handlers and refusals. (Whether the
// result computes what onnxruntime computes is checked by running it in PyTorch:
// tests/torch_codegen/, natively.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "fx/fx.h"
#include "fx/onnx.h"
#include "fx/torch_codegen/lower.h"

namespace {

namespace tc = fx::torch_codegen;

std::string model(const std::string& name) {
  return std::string(FXWASM_MODELS_DIR) + "/zoo/" + name + ".onnx";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A graph of onnx.* nodes as the importer makes them: placeholders typed by meta "onnx_type".
struct OnnxGraph {
  std::unique_ptr<fx::Graph> g = std::make_unique<fx::Graph>();
  fx::Node* input(const std::string& name, fx::Argument::Items shape) {
    fx::Node* p = g->placeholder(name);
    p->meta().set(fx::onnx::meta::kType,
                  fx::Argument::dict({{"dtype", fx::Dtype::Float32},
                                      {"shape", fx::Argument::tuple(std::move(shape))}}));
    return p;
  }
  fx::Node* op(const char* type, std::vector<fx::Argument> args, fx::Kwargs kwargs = {}) {
    return g->call_function(fx::fn(std::string("onnx.") + type), std::move(args),
                            std::move(kwargs));
  }
  std::unique_ptr<fx::GraphModule> module(fx::Module* root, int64_t opset) {
    auto gm = std::make_unique<fx::GraphModule>(root, std::move(g), "OnnxModule");
    gm->meta().set(fx::onnx::meta::kOpsetImport, fx::Argument::dict({{"", opset}}));
    return gm;
  }
};

fx::Tensor i64_tensor(std::vector<int64_t> values) {
  fx::Tensor t;
  t.dtype = fx::Dtype::Int64;
  t.shape = {static_cast<int64_t>(values.size())};
  auto bytes = std::make_shared<std::vector<uint8_t>>(values.size() * 8);
  std::memcpy(bytes->data(), values.data(), bytes->size());
  t.data = std::move(bytes);
  return t;
}

TEST(TorchLower, EveryZooModelIsCovered) {
  // Every model models/generate.py made (the benchmark-only resnet50 too, when present).
  std::vector<std::string> zoo;
  for (const auto& e : std::filesystem::directory_iterator(std::string(FXWASM_MODELS_DIR) + "/zoo"))
    if (e.path().extension() == ".onnx") zoo.push_back(e.path().stem().string());
  std::sort(zoo.begin(), zoo.end());
  ASSERT_GE(zoo.size(), 14u);
  for (const std::string& name : zoo) {
    SCOPED_TRACE(name);
    auto gm = fx::onnx::load_model(model(name));
    EXPECT_TRUE(tc::lowering_coverage(*gm).empty());
    std::unique_ptr<fx::GraphModule> t;
    ASSERT_NO_THROW(t = tc::lower(*gm));
    EXPECT_FALSE(contains(t->code(), "onnx.")) << t->code();
    EXPECT_FALSE(contains(t->code(), "_tensor_constant")) << t->code();
    EXPECT_NO_THROW(t->graph().lint());
  }
}

TEST(TorchLower, ResNetBecomesLayersNamedAfterItsScopes) {
  auto gm = fx::onnx::load_model(model("resnet18"));
  auto t = tc::lower(*gm);
  const std::string& code = t->code();
  EXPECT_TRUE(contains(code, "conv1 = self.conv1(input_1)")) << code;
  EXPECT_TRUE(contains(code, "relu = torch.relu(conv1)")) << code;
  EXPECT_TRUE(contains(code, "add = layer1_0_conv2 + max_pool2d")) << code;
  EXPECT_TRUE(contains(code, "fc = self.fc(flatten)")) << code;
  // torch.onnx's scope names ("/layer2/layer2.0/downsample/downsample.0/Conv") give the path.
  ASSERT_NE(t->get_submodule("layer2.0.downsample.0"), nullptr);
  EXPECT_EQ(t->get_submodule("layer2.0.downsample.0")->type_name(), "Conv2d");
  EXPECT_EQ(t->get_submodule("conv1")->extra_repr(),
            "3, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3)");
  EXPECT_EQ(t->get_submodule("fc")->type_name(), "Linear");
  EXPECT_EQ(t->get_submodule("fc")->extra_repr(), "in_features=512, out_features=1000, bias=True");
  // Weights are trainable parameters of the layers, not buffers read through get_attr.
  const fx::Tensor* w = t->get_tensor("conv1.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->requires_grad);
  EXPECT_EQ(t->attr_kind("conv1.weight"), 'p');
  EXPECT_EQ(t->named_buffers().size(), 0u);
  // Every layer owns its weight and bias (the export folded BatchNorm into the convs, and may
  // share identical initializers between layers, which get a copy each here).
  size_t layers = 0;
  for (const auto& [name, m] : t->named_modules())
    layers += m->type_name() == "Conv2d" || m->type_name() == "Linear";
  EXPECT_EQ(layers, 21u);
  EXPECT_EQ(t->named_parameters().size(), 2 * layers);
}

TEST(TorchLower, BatchNormAndLinearLayers) {
  auto gm = fx::onnx::load_model(model("cnn_bn_eval"));
  auto t = tc::lower(*gm);
  std::shared_ptr<fx::Module> bn = t->get_submodule("features.1");
  EXPECT_EQ(bn->type_name(), "BatchNorm2d");
  EXPECT_EQ(bn->extra_repr(), "8, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True");
  EXPECT_EQ(t->attr_kind("features.1.running_mean"), 'b');
  EXPECT_EQ(t->attr_kind("features.1.num_batches_tracked"), 'b');
  EXPECT_EQ(t->attr_kind("features.1.weight"), 'p');
}

TEST(TorchLower, ShapeArithmeticStaysSymbolicOnDynamicDims) {
  // x: (N, 4, 6) -> Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])) -> (N, 24)
  OnnxGraph b;
  fx::Node* x = b.input("x", {"N", 4, 6});
  fx::Module root;
  root.register_buffer("zero", i64_tensor({0}));
  root.register_buffer("minus_one", i64_tensor({-1}));
  fx::Node* shape = b.op("Shape", {x});
  fx::Node* zero = b.g->get_attr("zero");
  fx::Node* n = b.op("Gather", {shape, zero}, {{"axis", 0}});
  fx::Node* cat = b.op("Concat", {n, b.g->get_attr("minus_one")}, {{"axis", 0}});
  b.g->output(b.op("Reshape", {x, cat}));
  auto gm = b.module(&root, 13);
  auto t = tc::lower(*gm);
  EXPECT_TRUE(contains(t->code(), "size = x.size(0)")) << t->code();
  EXPECT_TRUE(contains(t->code(), "reshape = x.reshape([size, -1])")) << t->code();

  // The same graph with a static first dim folds the arithmetic to literals.
  OnnxGraph s;
  x = s.input("x", {2, 4, 6});
  shape = s.op("Shape", {x});
  n = s.op("Gather", {shape, s.g->get_attr("zero")}, {{"axis", 0}});
  cat = s.op("Concat", {n, s.g->get_attr("minus_one")}, {{"axis", 0}});
  s.g->output(s.op("Reshape", {x, cat}));
  auto sm = s.module(&root, 13);
  auto st = tc::lower(*sm);
  EXPECT_TRUE(contains(st->code(), "reshape = x.reshape([2, -1])")) << st->code();
  EXPECT_FALSE(contains(st->code(), "size")) << st->code();
}

TEST(TorchLower, ProbeSizesTheModelRefusesAreNamed) {
  // x: (N, 6) -> Reshape(x, [4, -1]) runs only when 6N is a multiple of 4.
  OnnxGraph b;
  fx::Node* x = b.input("x", {"N", 6});
  fx::Module root;
  root.register_buffer("shape", i64_tensor({4, -1}));
  b.g->output(b.op("Reshape", {x, b.g->get_attr("shape")}));
  auto gm = b.module(&root, 13);
  try {
    tc::lower(*gm);  // probes N = 2 and 3
    FAIL() << "lower() ran the model at N = 3";
  } catch (const fx::Error& e) {
    EXPECT_TRUE(contains(e.what(), "dynamic dims at 3")) << e.what();
    EXPECT_TRUE(contains(e.what(), "probe_sizes")) << e.what();
  }
  tc::LowerOptions options;
  options.probe_sizes[1] = 4;
  auto t = tc::lower(*gm, options);
  EXPECT_TRUE(contains(t->code(), "reshape = x.reshape([4, -1])")) << t->code();
}

TEST(TorchLower, HandlersAreKeyedBySinceVersion) {
  const auto handlers = tc::lowering_handlers();
  auto has = [&](const char* op, int64_t since) {
    return std::find(handlers.begin(), handlers.end(), std::make_pair(std::string(op), since)) !=
           handlers.end();
  };
  EXPECT_TRUE(has("Softmax", 1));
  EXPECT_TRUE(has("Softmax", 13));
  // Softmax before opset 13 works on the input coerced to 2-D at `axis`; from 13 on one axis.
  for (int64_t opset : {11, 13}) {
    SCOPED_TRACE(opset);
    OnnxGraph b;
    fx::Node* x = b.input("x", {2, 3, 5});
    b.g->output(b.op("Softmax", {x}, {{"axis", 1}}));
    fx::Module root;
    auto t = tc::lower(*b.module(&root, opset));
    if (opset == 13)
      EXPECT_TRUE(contains(t->code(), "softmax = torch.softmax(x, -2)")) << t->code();
    else
      EXPECT_TRUE(contains(t->code(), "flatten = x.flatten(1)")) << t->code();
  }
  // Gelu exists from opset 20: a model of opset 13 calling it has no handler.
  OnnxGraph g;
  fx::Node* x = g.input("x", {2});
  g.g->output(g.op("Gelu", {x}));
  fx::Module root;
  auto gm = g.module(&root, 13);
  const auto gaps = tc::lowering_coverage(*gm);
  ASSERT_EQ(gaps.size(), 1u);
  EXPECT_EQ(gaps[0].node, "gelu");
  EXPECT_EQ(gaps[0].reason, "no handler for Gelu at opset 13");
}

TEST(TorchLower, WhatCannotBeLoweredIsNamedUpFront) {
  OnnxGraph b;
  fx::Node* x = b.input("x", {2, 3});
  fx::Node* y = b.op("NoSuchOp", {x});
  b.g->output(b.op("Relu", {y}));
  fx::Module root;
  auto gm = b.module(&root, 17);
  const auto gaps = tc::lowering_coverage(*gm);
  ASSERT_EQ(gaps.size(), 1u);
  EXPECT_EQ(gaps[0].node, "no_such_op");
  EXPECT_EQ(gaps[0].op, "NoSuchOp");
  try {
    tc::lower(*gm);
    FAIL() << "lower() accepted an op it has no handler for";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Unsupported);
    EXPECT_TRUE(contains(e.what(), "no_such_op")) << e.what();
    EXPECT_TRUE(contains(e.what(), "NoSuchOp")) << e.what();
  }
  // An attribute value a handler does not take is refused naming the node, not mistranslated.
  // (torch's avg_pool has no dilation.)
  OnnxGraph s;
  x = s.input("x", {1, 1, 5, 5});
  const fx::Argument two = fx::Argument::list({2LL, 2LL});
  s.g->output(s.op("AveragePool", {x}, {{"kernel_shape", two}, {"dilations", two}}));
  auto sm = s.module(&root, 19);
  try {
    tc::lower(*sm);
    FAIL() << "lower() accepted AveragePool with dilations";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Unsupported);
    EXPECT_TRUE(contains(e.what(), "average_pool")) << e.what();
    EXPECT_TRUE(contains(e.what(), "dilations")) << e.what();
  }
}

}  // namespace
