// fx::onnx: import of ModelProtos built with the protoc-generated classes, the FX text of the
// result, lossless export (import -> export -> import gives the same graph, names and outputs),
// subgraphs with captured values, lazy external data, and malformed input (typed errors, never a
// crash: every truncation and every single-byte corruption of a model is tried).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>

#include "fx/exec.h"
#include "fx/fx.h"
#include "fx/onnx.h"
#include "onnx.pb.h"

namespace {

using fx::Argument;
using fx::ErrorKind;
using fx::exec::Value;

void add_tensor_type(::onnx::ValueInfoProto* v, const std::string& name, int elem,
                     std::vector<int64_t> dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

void fill_f32(::onnx::TensorProto* t, const std::string& name, std::vector<int64_t> dims,
              const std::vector<float>& data) {
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(data.data(), data.size() * sizeof(float));
}

::onnx::NodeProto* add_node(::onnx::GraphProto* g, const std::string& op,
                            std::vector<std::string> in, std::vector<std::string> out,
                            const std::string& name = {}) {
  auto* n = g->add_node();
  n->set_op_type(op);
  if (!name.empty()) n->set_name(name);
  for (auto& i : in) n->add_input(i);
  for (auto& o : out) n->add_output(o);
  return n;
}

void attr_ints(::onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void attr_int(::onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}

std::vector<float> seq(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7) % 11) - 1.0f;
  return v;
}

// input.1[1,2,4,4] -> Conv(conv.weight, conv.bias, pads 1) -> Relu -> Split(axis 1, [1, 2])
//   -> out_a = Mul(split_0, onnx::Mul_7), out_b = split_1
::onnx::ModelProto conv_split_model() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("fxwasm-test");
  m.set_producer_version("1.0");
  m.set_doc_string("a test model");
  auto* kv = m.add_metadata_props();
  kv->set_key("author");
  kv->set_value("tests");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("conv_split");
  add_tensor_type(g->add_input(), "input.1", ::onnx::TensorProto::FLOAT, {1, 2, 4, 4});
  fill_f32(g->add_initializer(), "conv.weight", {3, 2, 3, 3}, seq(54, 0.25f));
  fill_f32(g->add_initializer(), "conv.bias", {3}, {0.5f, -0.25f, 0.0f});
  fill_f32(g->add_initializer(), "onnx::Mul_7", {}, {2.0f});
  auto* conv = add_node(g, "Conv", {"input.1", "conv.weight", "conv.bias"}, {"/conv/Conv_output_0"},
                        "/conv/Conv");
  attr_ints(conv, "kernel_shape", {3, 3});
  attr_ints(conv, "pads", {1, 1, 1, 1});
  add_node(g, "Relu", {"/conv/Conv_output_0"}, {"/relu/Relu_output_0"}, "/relu/Relu");
  auto* c = add_node(g, "Constant", {}, {"split_sizes"}, "/Constant");
  auto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(::onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(::onnx::TensorProto::INT64);
  a->mutable_t()->add_dims(2);
  a->mutable_t()->add_int64_data(1);
  a->mutable_t()->add_int64_data(2);
  auto* split =
      add_node(g, "Split", {"/relu/Relu_output_0", "split_sizes"}, {"s0", "s1"}, "/Split");
  attr_int(split, "axis", 1);
  add_node(g, "Mul", {"s0", "onnx::Mul_7"}, {"out_a"}, "/Mul");
  add_tensor_type(g->add_output(), "out_a", ::onnx::TensorProto::FLOAT, {1, 1, 4, 4});
  add_tensor_type(g->add_output(), "s1", ::onnx::TensorProto::FLOAT, {1, 2, 4, 4});
  return m;
}

std::vector<uint8_t> bytes_of(const ::onnx::ModelProto& m) {
  std::string s = m.SerializeAsString();
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::unique_ptr<fx::GraphModule> import(const ::onnx::ModelProto& m,
                                        const fx::onnx::ImportOptions& o = {}) {
  return fx::onnx::import_model(bytes_of(m), o);
}

Value input_1x2x4x4() { return Value::from_f32({1, 2, 4, 4}, seq(32, 0.125f)); }

void expect_same_values(const std::vector<Value>& a, const std::vector<Value>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].describe(), b[i].describe());
    EXPECT_EQ(a[i].to_f32(), b[i].to_f32()) << "output " << i;
  }
}

// Expects `f` to throw fx::Error of `kind` whose message contains `part`.
template <class F>
void expect_error(F&& f, ErrorKind kind, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << part;
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(OnnxImport, MapsInputsInitializersNodesAndOutputsOntoFx) {
  auto gm = import(conv_split_model());
  EXPECT_EQ(gm->code(),
            "\n\n\ndef forward(self, input_1):\n"
            "    conv_weight = self.conv.weight\n"
            "    conv_bias = self.conv.bias\n"
            "    onnx__mul_7 = self.onnx__Mul_7\n"
            "    conv = onnx.Conv(input_1, conv_weight, conv_bias, kernel_shape = [3, 3], "
            "pads = [1, 1, 1, 1]);  input_1 = conv_weight = conv_bias = None\n"
            "    relu = onnx.Relu(conv);  conv = None\n"
            "    split_sizes = self.split_sizes\n"
            "    split = onnx.Split(relu, split_sizes, axis = 1);  relu = split_sizes = None\n"
            "    getitem = split[0]\n"
            "    getitem_1 = split[1];  split = None\n"
            "    mul = onnx.Mul(getitem, onnx__mul_7);  getitem = onnx__mul_7 = None\n"
            "    return (mul, getitem_1)\n"
            "    ");
  // Weights live in the attribute tree under their dotted names.
  ASSERT_NE(gm->get_tensor("conv.weight"), nullptr);
  EXPECT_EQ(gm->get_tensor("conv.weight")->describe(), "float32[3, 2, 3, 3]");
  EXPECT_EQ(gm->get_tensor("split_sizes")->describe(), "int64[2]");
  // Original names and types are kept for export.
  const fx::Node* x = gm->graph().find_node("input_1");
  EXPECT_EQ(x->meta().at("onnx_name").to_string(), "input.1");
  EXPECT_EQ(x->meta().at("onnx_type").repr(), "{'dtype': torch.float32, 'shape': (1, 2, 4, 4)}");
  EXPECT_EQ(gm->graph().find_node("conv")->meta().at("onnx_name").to_string(), "/conv/Conv");
  EXPECT_EQ(gm->meta().at("onnx_opset_import").repr(), "{'': 13}");
  EXPECT_EQ(gm->meta().at("onnx_producer_name").to_string(), "fxwasm-test");
  EXPECT_NO_THROW(gm->graph().lint());
  EXPECT_TRUE(fx::exec::coverage(*gm).empty());
}

TEST(OnnxImport, RunsAndSplitsAsTheOpsDefine) {
  auto gm = import(conv_split_model());
  const Value x = input_1x2x4x4();
  std::vector<Value> out = fx::exec::run(*gm, {x});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].describe(), "float32[1, 1, 4, 4]");
  EXPECT_EQ(out[1].describe(), "float32[1, 2, 4, 4]");
  // out_a is 2 * relu(conv) channel 0: recompute channel 0 by hand.
  const std::vector<float> xs = x.to_f32(), w = seq(54, 0.25f), a = out[0].to_f32();
  for (int oy = 0; oy < 4; ++oy)
    for (int ox = 0; ox < 4; ++ox) {
      float acc = 0.5f;
      for (int c = 0; c < 2; ++c)
        for (int ky = 0; ky < 3; ++ky)
          for (int kx = 0; kx < 3; ++kx) {
            const int iy = oy + ky - 1, ix = ox + kx - 1;
            if (iy < 0 || iy >= 4 || ix < 0 || ix >= 4) continue;
            acc += xs[(c * 4 + iy) * 4 + ix] * w[(c * 3 + ky) * 3 + kx];
          }
      EXPECT_NEAR(a[oy * 4 + ox], 2.0f * std::max(acc, 0.0f), 1e-5f);
    }
}

TEST(OnnxExport, RoundTripKeepsGraphNamesMetadataAndOutputs) {
  const ::onnx::ModelProto original = conv_split_model();
  auto gm = import(original);
  const std::vector<uint8_t> bytes = fx::onnx::export_model(*gm);
  ::onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
  // Same values under the same names, in the same order.
  ASSERT_EQ(m.graph().node_size(), original.graph().node_size());
  for (int i = 0; i < m.graph().node_size(); ++i) {
    const auto& a = m.graph().node(i);
    const auto& b = original.graph().node(i);
    EXPECT_EQ(a.op_type(), b.op_type());
    EXPECT_EQ(a.name(), b.name());
    EXPECT_EQ(std::vector<std::string>(a.input().begin(), a.input().end()),
              std::vector<std::string>(b.input().begin(), b.input().end()));
    EXPECT_EQ(std::vector<std::string>(a.output().begin(), a.output().end()),
              std::vector<std::string>(b.output().begin(), b.output().end()));
    EXPECT_EQ(a.attribute_size(), b.attribute_size());
  }
  EXPECT_EQ(m.graph().input(0).name(), "input.1");
  EXPECT_EQ(m.graph().output(0).name(), "out_a");
  EXPECT_EQ(m.graph().output(1).name(), "s1");
  EXPECT_EQ(m.graph().initializer_size(), 3);
  EXPECT_EQ(m.graph().name(), "conv_split");
  EXPECT_EQ(m.producer_name(), "fxwasm-test");
  EXPECT_EQ(m.doc_string(), "a test model");
  EXPECT_EQ(m.metadata_props(0).value(), "tests");
  EXPECT_EQ(m.opset_import(0).version(), 13);
  EXPECT_EQ(m.graph().output(0).type().tensor_type().shape().dim_size(), 4);

  auto again = fx::onnx::import_model(bytes);
  EXPECT_EQ(again->graph().str(), gm->graph().str());
  EXPECT_EQ(again->code(), gm->code());
  expect_same_values(fx::exec::run(*again, {input_1x2x4x4()}),
                     fx::exec::run(*gm, {input_1x2x4x4()}));
  // And a second trip is byte-identical to the first.
  EXPECT_EQ(fx::onnx::export_model(*again), bytes);
}

TEST(OnnxExport, GraphsChangedByPassesStillExport) {
  auto gm = import(conv_split_model());
  // Replace Relu by Sigmoid, return the Conv output directly as well.
  fx::Node* relu = gm->graph().find_node("relu");
  fx::Node* sig;
  {
    auto guard = gm->graph().inserting_after(relu);
    sig = gm->graph().call_function(fx::fn("onnx.Sigmoid"), {relu->args()[0]});
  }
  relu->replace_all_uses_with(sig);
  gm->graph().erase_node(relu);
  fx::Node* out = gm->graph().output_node();
  out->update_arg(0, Argument::tuple({out->args()[0].elements()[0], out->args()[0].elements()[1],
                                      gm->graph().find_node("conv")}));
  gm->recompile();
  auto again = fx::onnx::import_model(fx::onnx::export_model(*gm));
  EXPECT_EQ(again->graph().find_node("sigmoid")->target().pretty(), "onnx.Sigmoid");
  expect_same_values(fx::exec::run(*again, {input_1x2x4x4()}),
                     fx::exec::run(*gm, {input_1x2x4x4()}));
}

TEST(OnnxExport, NodesWithoutAnOnnxFormAreNamed) {
  auto gm = import(conv_split_model());
  fx::Node* relu = gm->graph().find_node("relu");
  fx::Node* torch_relu;
  {
    auto guard = gm->graph().inserting_after(relu);
    torch_relu = gm->graph().call_function(fx::fn("torch.relu"), {relu->args()[0]});
  }
  relu->replace_all_uses_with(torch_relu);
  gm->graph().erase_node(relu);
  expect_error([&] { fx::onnx::export_model(*gm); }, ErrorKind::Unsupported,
               "node '" + torch_relu->name() + "' (torch.relu) has no ONNX form");
}

// cond ? x + c : x - c, where x and c come from the enclosing graph.
::onnx::ModelProto if_model() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("if_graph");
  add_tensor_type(g->add_input(), "cond", ::onnx::TensorProto::BOOL, {});
  add_tensor_type(g->add_input(), "x", ::onnx::TensorProto::FLOAT, {3});
  fill_f32(g->add_initializer(), "c", {3}, {1.0f, 2.0f, 3.0f});
  auto* n = add_node(g, "If", {"cond"}, {"y"}, "the_if");
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* a = n->add_attribute();
    a->set_name(branch);
    a->set_type(::onnx::AttributeProto::GRAPH);
    auto* b = a->mutable_g();
    b->set_name(branch);
    const bool then = std::string(branch) == "then_branch";
    add_node(b, then ? "Add" : "Sub", {"x", "c"}, {then ? "t_out" : "e_out"});
    add_tensor_type(b->add_output(), then ? "t_out" : "e_out", ::onnx::TensorProto::FLOAT, {3});
  }
  add_tensor_type(g->add_output(), "y", ::onnx::TensorProto::FLOAT, {3});
  return m;
}

TEST(OnnxImport, SubgraphsBecomeGraphModulesWithCapturedValuesAsArgs) {
  auto gm = import(if_model());
  EXPECT_EQ(gm->code(),
            "\n\n\ndef forward(self, cond, x):\n"
            "    c = self.c\n"
            "    the_if_then_branch = self.the_if_then_branch\n"
            "    the_if_else_branch = self.the_if_else_branch\n"
            "    if_1 = onnx.If(cond, x, c, then_branch = the_if_then_branch, else_branch = "
            "the_if_else_branch);  cond = x = c = the_if_then_branch = the_if_else_branch = None\n"
            "    return if_1\n"
            "    ");
  auto then = std::dynamic_pointer_cast<fx::GraphModule>(gm->get_submodule("the_if_then_branch"));
  ASSERT_NE(then, nullptr);
  EXPECT_EQ(then->code(),
            "\n\n\ndef forward(self, x, c):\n"
            "    add = onnx.Add(x, c);  x = c = None\n"
            "    return add\n"
            "    ");
  EXPECT_EQ(gm->graph().find_node("if_1")->meta().at("onnx_num_inputs").to_int(), 1);

  const std::vector<uint8_t> bytes = fx::onnx::export_model(*gm);
  ::onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
  const auto& node = m.graph().node(0);
  EXPECT_EQ(node.op_type(), "If");
  ASSERT_EQ(node.input_size(), 1);  // the captures are not ONNX inputs
  const auto& body = node.attribute(0).g();
  EXPECT_EQ(body.input_size(), 0);
  EXPECT_EQ(body.node(0).input(0), "x");
  EXPECT_EQ(body.node(0).input(1), "c");
  auto again = fx::onnx::import_model(bytes);
  EXPECT_EQ(again->code(), gm->code());
  EXPECT_EQ(
      std::dynamic_pointer_cast<fx::GraphModule>(again->get_submodule("the_if_else_branch"))
          ->code(),
      std::dynamic_pointer_cast<fx::GraphModule>(gm->get_submodule("the_if_else_branch"))->code());
}

TEST(OnnxImport, IfRunsTheChosenBodyOnItsOwnCaptures) {
  auto m = if_model();  // else_branch: Neg(c), capturing only c
  auto* body = m.mutable_graph()->mutable_node(0)->mutable_attribute(1)->mutable_g();
  body->mutable_node(0)->set_op_type("Neg");
  body->mutable_node(0)->mutable_input()->erase(body->mutable_node(0)->mutable_input()->begin());
  auto gm = import(m);
  auto again = fx::onnx::import_model(fx::onnx::export_model(*gm));
  const Value x = Value::from_f32({3}, {10.0f, 20.0f, 30.0f});
  auto cond = [](bool b) {
    Value v = Value::zeros(fx::Dtype::Bool, {});
    v.mutable_data<uint8_t>()[0] = b ? 1 : 0;
    return v;
  };
  for (fx::GraphModule* g : {gm.get(), again.get()}) {
    EXPECT_TRUE(fx::exec::coverage(*g).empty());
    EXPECT_EQ(fx::exec::run(*g, {cond(true), x})[0].to_f32(),
              (std::vector<float>{11.0f, 22.0f, 33.0f}));
    EXPECT_EQ(fx::exec::run(*g, {cond(false), x})[0].to_f32(),
              (std::vector<float>{-1.0f, -2.0f, -3.0f}));
  }
}

TEST(OnnxImport, ExternalDataStaysLazyUntilNeeded) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  add_tensor_type(g->add_input(), "x", ::onnx::TensorProto::FLOAT, {2});
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(::onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->set_data_location(::onnx::TensorProto::EXTERNAL);
  for (auto [k, v] : {std::pair<const char*, const char*>{"location", "weights.bin"},
                      {"offset", "4"},
                      {"length", "8"}}) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  add_node(g, "Add", {"x", "w"}, {"y"});
  add_tensor_type(g->add_output(), "y", ::onnx::TensorProto::FLOAT, {2});

  int reads = 0;
  fx::onnx::ImportOptions opts;
  opts.external_data = [&](const std::string& location, int64_t offset, int64_t length) {
    ++reads;
    EXPECT_EQ(location, "weights.bin");
    EXPECT_EQ(offset, 4);
    EXPECT_EQ(length, 8);
    const float v[2] = {10.0f, 20.0f};
    auto b = std::make_shared<std::vector<uint8_t>>(8);
    std::memcpy(b->data(), v, 8);
    return fx::Bytes(b);
  };
  auto gm = import(m, opts);
  EXPECT_EQ(reads, 0);
  // Exporting keeps the reference (the data stays where it is) without reading it.
  const std::vector<uint8_t> bytes = fx::onnx::export_model(*gm);
  EXPECT_EQ(reads, 0);
  ::onnx::ModelProto back;
  ASSERT_TRUE(back.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
  EXPECT_EQ(back.graph().initializer(0).data_location(), ::onnx::TensorProto::EXTERNAL);
  EXPECT_EQ(back.graph().initializer(0).external_data(0).value(), "weights.bin");
  // Running reads it, once: later runs share the bytes.
  std::vector<Value> out = fx::exec::run(*gm, {Value::from_f32({2}, {1.0f, 2.0f})});
  EXPECT_EQ(reads, 1);
  EXPECT_EQ(out[0].to_f32(), (std::vector<float>{11.0f, 22.0f}));
  out = fx::exec::run(*gm, {Value::from_f32({2}, {3.0f, 4.0f})});
  EXPECT_EQ(reads, 1);
  EXPECT_EQ(out[0].to_f32(), (std::vector<float>{13.0f, 24.0f}));
  // Embedding reads it into the model.
  fx::onnx::ExportOptions embed;
  embed.embed_external_data = true;
  ASSERT_TRUE(back.ParseFromString([&] {
    auto b = fx::onnx::export_model(*gm, embed);
    return std::string(b.begin(), b.end());
  }()));
  EXPECT_EQ(back.graph().initializer(0).raw_data().size(), 8u);
  EXPECT_EQ(reads, 1);

  // Without a reader the import still works; running says what is missing.
  auto blind = import(m);
  expect_error(
      [&] {
        fx::exec::run(*blind, {Value::from_f32({2}, {1.0f, 2.0f})});
      },
      ErrorKind::Value, "external file 'weights.bin' and no reader was supplied");
}

TEST(OnnxImport, OmittedOptionalInputsAndUnusedOutputs) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  add_tensor_type(g->add_input(), "x", ::onnx::TensorProto::FLOAT, {4});
  // Clip(x, "", max) and a Split whose first output is unnamed.
  fill_f32(g->add_initializer(), "hi", {}, {0.5f});
  add_node(g, "Clip", {"x", "", "hi"}, {"c"});
  auto* s = add_node(g, "Split", {"c"}, {"", "b"});
  attr_int(s, "axis", 0);
  add_tensor_type(g->add_output(), "b", ::onnx::TensorProto::FLOAT, {2});
  auto gm = import(m);
  EXPECT_NE(gm->code().find("clip = onnx.Clip(x, None, hi)"), std::string::npos) << gm->code();
  EXPECT_NE(gm->code().find("getitem = split[1]"), std::string::npos) << gm->code();
  std::vector<Value> out = fx::exec::run(*gm, {Value::from_f32({4}, {-1.0f, 0.25f, 0.75f, 2.0f})});
  EXPECT_EQ(out[0].to_f32(), (std::vector<float>{0.5f, 0.5f}));
  ::onnx::ModelProto back;
  const auto bytes = fx::onnx::export_model(*gm);
  ASSERT_TRUE(back.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
  EXPECT_EQ(back.graph().node(0).input(1), "");
  EXPECT_EQ(back.graph().node(1).output(0), "");
  EXPECT_EQ(back.graph().node(1).output(1), "b");
}

TEST(OnnxImport, UnsortedNodesAreOrderedTopologically) {
  ::onnx::ModelProto m = conv_split_model();
  auto* nodes = m.mutable_graph()->mutable_node();
  std::reverse(nodes->begin(), nodes->end());
  auto gm = import(m);
  expect_same_values(fx::exec::run(*gm, {input_1x2x4x4()}),
                     fx::exec::run(*import(conv_split_model()), {input_1x2x4x4()}));
}

TEST(OnnxImport, MalformedModelsGiveTypedErrorsNamingWhatIsWrong) {
  using fx::onnx::import_model;
  expect_error([] { import_model(std::vector<uint8_t>{}); }, ErrorKind::Parse, "empty");
  expect_error(
      [] {
        import_model(std::vector<uint8_t>{0xff, 0xff, 0xff, 0x07});
      },
      ErrorKind::Parse, "protobuf cannot parse");
  const std::vector<uint8_t> good = bytes_of(conv_split_model());
  expect_error(
      [&] { import_model(std::vector<uint8_t>(good.begin(), good.begin() + good.size() / 2)); },
      ErrorKind::Parse, "");
  {
    ::onnx::ModelProto m;
    m.set_ir_version(8);
    expect_error([&] { import(m); }, ErrorKind::Parse, "has no graph");
  }
  {
    auto m = conv_split_model();
    m.mutable_graph()->mutable_node(1)->set_input(0, "nowhere");
    expect_error([&] { import(m); }, ErrorKind::Parse,
                 "node '/relu/Relu' (Relu): input 'nowhere' is not produced by any node");
  }
  {
    auto m = conv_split_model();  // Relu reads the Mul's output: a cycle
    m.mutable_graph()->mutable_node(1)->set_input(0, "out_a");
    expect_error([&] { import(m); }, ErrorKind::Parse, "cycle");
  }
  {
    auto m = conv_split_model();
    m.mutable_graph()->mutable_node(1)->set_output(0, "/conv/Conv_output_0");
    expect_error([&] { import(m); }, ErrorKind::Parse,
                 "'/conv/Conv_output_0' is produced by two nodes");
  }
  {
    auto m = conv_split_model();
    m.mutable_graph()->mutable_initializer(0)->mutable_raw_data()->resize(10);
    expect_error([&] { import(m); }, ErrorKind::Parse,
                 "initializer 'conv.weight': raw_data has 10 bytes, the float32 shape needs 216");
  }
  {
    auto m = conv_split_model();
    m.mutable_graph()->mutable_initializer(1)->set_dims(0, -3);
    expect_error([&] { import(m); }, ErrorKind::Parse,
                 "initializer 'conv.bias': dimension 0 is negative");
  }
  {
    auto m = conv_split_model();
    m.mutable_graph()->mutable_initializer(1)->set_dims(0, int64_t{1} << 40);
    m.mutable_graph()->mutable_initializer(1)->add_dims(int64_t{1} << 40);
    expect_error([&] { import(m); }, ErrorKind::Resource, "more elements than int64 can count");
  }
  {
    auto m = conv_split_model();
    m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->set_type(
        static_cast<::onnx::AttributeProto_AttributeType>(11));  // SPARSE_TENSOR
    expect_error([&] { import(m); }, ErrorKind::Unsupported,
                 "node '/conv/Conv' (Conv): attribute 'kernel_shape' has type 11");
  }
  {
    auto m = conv_split_model();
    m.mutable_graph()->mutable_initializer(0)->set_data_type(0);
    expect_error([&] { import(m); }, ErrorKind::Unsupported,
                 "initializer 'conv.weight': ONNX element type 0");
  }
  {
    auto m = conv_split_model();
    m.mutable_graph()->mutable_output(0)->set_name("missing");
    expect_error([&] { import(m); }, ErrorKind::Parse, "graph output 'missing' is not produced");
  }
  {
    auto m = if_model();
    m.mutable_graph()
        ->mutable_node(0)
        ->mutable_attribute(0)
        ->mutable_g()
        ->mutable_node(0)
        ->set_input(1, "zz");
    expect_error([&] { import(m); }, ErrorKind::Parse,
                 "uses 'zz', which no enclosing graph defines");
  }
}

// Every prefix and every single-byte corruption of a model: an fx::Error or a module, never a
// crash or another exception type.
TEST(OnnxImport, EveryTruncationAndByteFlipIsHandled) {
  const std::vector<uint8_t> good = bytes_of(conv_split_model());
  size_t errors = 0, imported = 0;
  auto attempt = [&](const std::vector<uint8_t>& b) {
    try {
      auto gm = fx::onnx::import_model(b);
      gm->graph().lint();
      (void)fx::onnx::export_model(*gm);
      ++imported;
    } catch (const fx::Error&) {
      ++errors;
    }
  };
  for (size_t n = 0; n < good.size(); ++n)
    attempt(std::vector<uint8_t>(good.begin(), good.begin() + n));
  std::mt19937 rng(7);
  for (size_t i = 0; i < good.size(); ++i) {
    std::vector<uint8_t> b = good;
    b[i] ^= static_cast<uint8_t>(1u << (rng() % 8));
    attempt(b);
  }
  EXPECT_EQ(errors + imported, 2 * good.size());
  EXPECT_GT(errors, good.size() / 2);
}

TEST(OnnxTensor, TensorProtoFilesRoundTrip) {
  Value v = Value::from_i64({2, 2}, {1, -2, 3, 1LL << 40});
  const std::vector<uint8_t> b = fx::onnx::tensor_to_proto_bytes(v.to_tensor(), "idx");
  std::string name;
  fx::Tensor t = fx::onnx::tensor_from_proto_bytes(b.data(), b.size(), &name);
  EXPECT_EQ(name, "idx");
  EXPECT_EQ(t.describe(), "int64[2, 2]");
  EXPECT_EQ(Value::from_tensor(t, "t").to_i64(), (std::vector<int64_t>{1, -2, 3, 1LL << 40}));
  const uint8_t junk[] = {0x0a, 0xff};
  expect_error([&] { fx::onnx::tensor_from_proto_bytes(junk, sizeof junk); }, ErrorKind::Parse,
               "not a serialized onnx.TensorProto");
}

#ifdef FXWASM_MODELS_DIR
TEST(OnnxImport, BundledSampleModelRoundTrips) {
  const std::string path = std::string(FXWASM_MODELS_DIR) + "/sample.onnx";
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "no " << path << " (it is committed)";
  auto gm = fx::onnx::load_model(path);
  EXPECT_NO_THROW(gm->graph().lint());
  EXPECT_TRUE(fx::exec::coverage(*gm).empty());
  auto again = fx::onnx::import_model(fx::onnx::export_model(*gm));
  EXPECT_EQ(again->code(), gm->code());
}
#endif

}  // namespace

namespace {

// Streamed import (the wasm loadONNX path): chunks of any size give the same module; a stream
// that ends early is a ParseError.
TEST(OnnxImport, StreamedImportEqualsImportFromBytes) {
  const std::string bytes = conv_split_model().SerializeAsString();
  auto whole = fx::onnx::import_model(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{4096}}) {
    size_t at = 0;
    auto gm = fx::onnx::import_model_stream([&](uint8_t* buf, size_t size) {
      const size_t n = std::min({size, chunk, bytes.size() - at});
      std::memcpy(buf, bytes.data() + at, n);
      at += n;
      return n;
    });
    EXPECT_EQ(gm->code(), whole->code());
    EXPECT_EQ(gm->graph().str(), whole->graph().str());
  }
  size_t at = 0;
  const size_t cut = bytes.size() / 2;
  try {
    fx::onnx::import_model_stream([&](uint8_t* buf, size_t size) {
      const size_t n = std::min(size, cut - at);
      std::memcpy(buf, bytes.data() + at, n);
      at += n;
      return n;
    });
    ADD_FAILURE() << "a truncated stream imported";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Parse) << e.what();
  }
  EXPECT_THROW(fx::onnx::import_model_stream([](uint8_t*, size_t) { return size_t{0}; }),
               fx::Error);
}

}  // namespace
