// String tensors: imported from string_data (inputs, initializers), run through Cast, CastLike,
// StringNormalizer and the view ops, exported back; numbers print as numpy's str() does (ONNX's
// reference); every other op refuses a string tensor with a typed error naming the node.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fx/exec.h"
#include "fx/fx.h"
#include "fx/onnx.h"
#include "onnx.pb.h"

namespace {

using fx::ErrorKind;
using fx::exec::Value;

::onnx::NodeProto* add_node(::onnx::GraphProto* g, const std::string& op,
                            std::vector<std::string> in, std::vector<std::string> out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(out[0] + "_node");
  for (auto& i : in) n->add_input(i);
  for (auto& o : out) n->add_output(o);
  return n;
}

void add_value(google::protobuf::RepeatedPtrField<::onnx::ValueInfoProto>* vs,
               const std::string& name, int elem) {
  auto* v = vs->Add();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
}

std::unique_ptr<fx::GraphModule> import(const ::onnx::GraphProto& g) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  *m.mutable_graph() = g;
  const std::string s = m.SerializeAsString();
  return fx::onnx::import_model(std::vector<uint8_t>(s.begin(), s.end()));
}

Value strings(std::vector<int64_t> shape, std::vector<std::string> s) {
  return Value::from_strings(std::move(shape),
                             std::make_shared<const std::vector<std::string>>(std::move(s)));
}

// One Cast node from `from` to `to`.
std::unique_ptr<fx::GraphModule> cast_model(int from, int to) {
  ::onnx::GraphProto g;
  auto* n = add_node(&g, "Cast", {"x"}, {"y"});
  auto* a = n->add_attribute();
  a->set_name("to");
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(to);
  add_value(g.mutable_input(), "x", from);
  add_value(g.mutable_output(), "y", to);
  return import(g);
}

TEST(Strings, FloatsPrintAsNumpyStr) {
  auto gm = cast_model(::onnx::TensorProto::FLOAT, ::onnx::TensorProto::STRING);
  const std::vector<float> x = {0.039187793f, 1.0f,  100.0f, 1e-5f,    1.5e16f,   -0.0f,
                                0.0001f,      -2.5f, NAN,    INFINITY, -INFINITY, 123456.78f};
  const Value out = fx::exec::run(*gm, {Value::from_f32({3, 4}, x)}).at(0);
  ASSERT_EQ(out.dtype(), fx::Dtype::String);
  EXPECT_EQ(out.shape(), (std::vector<int64_t>{3, 4}));
  // What numpy 1.24 prints for str(np.float32(v)) (0.0001f is just below 1e-4).
  EXPECT_EQ(out.strings(),
            (std::vector<std::string>{"0.039187793", "1.0", "100.0", "1e-05", "1.5e+16", "-0.0",
                                      "1e-04", "-2.5", "nan", "inf", "-inf", "123456.78"}));
}

TEST(Strings, StringsReadAsNumbersOrFailNamingTheElement) {
  auto gm = cast_model(::onnx::TensorProto::STRING, ::onnx::TensorProto::INT32);
  const Value ok = fx::exec::run(*gm, {strings({3}, {"7", "-12", " 40"})}).at(0);
  EXPECT_EQ(ok.to_i64(), (std::vector<int64_t>{7, -12, 40}));
  try {
    fx::exec::run(*gm, {strings({2}, {"7", "seven"})});
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("element 1 ('seven') is not an integer"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(fx::exec::run(*gm, {strings({1}, {"99999999999"})}), fx::Error);  // > int32
  auto to_f = cast_model(::onnx::TensorProto::STRING, ::onnx::TensorProto::FLOAT);
  const Value f = fx::exec::run(*to_f, {strings({3}, {"NaN", "+INF", "-0.5"})}).at(0);
  const std::vector<float> v = f.to_f32();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], INFINITY);
  EXPECT_EQ(v[2], -0.5f);
}

TEST(Strings, StringNormalizerFiltersAndChangesCase) {
  ::onnx::GraphProto g;
  auto* n = add_node(&g, "StringNormalizer", {"x"}, {"y"});
  auto* a = n->add_attribute();
  a->set_name("case_change_action");
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s("UPPER");
  a = n->add_attribute();
  a->set_name("stopwords");
  a->set_type(::onnx::AttributeProto::STRINGS);
  a->add_strings("monday");
  n->set_domain("");
  add_value(g.mutable_input(), "x", ::onnx::TensorProto::STRING);
  add_value(g.mutable_output(), "y", ::onnx::TensorProto::STRING);
  auto gm = import(g);
  // Case-insensitive by default: "MONDAY" is a stopword too.
  const Value out =
      fx::exec::run(*gm, {strings({1, 4}, {"Monday", "tuesday", "MONDAY", "wed"})}).at(0);
  EXPECT_EQ(out.shape(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(out.strings(), (std::vector<std::string>{"TUESDAY", "WED"}));
  // All filtered out: one empty string.
  const Value none = fx::exec::run(*gm, {strings({2}, {"monday", "Monday"})}).at(0);
  EXPECT_EQ(none.shape(), (std::vector<int64_t>{1}));
  EXPECT_EQ(none.strings(), (std::vector<std::string>{""}));
  EXPECT_THROW(fx::exec::run(*gm, {strings({2, 2}, {"a", "b", "c", "d"})}), fx::Error);
}

TEST(Strings, OtherOpsRefuseStringTensorsNamingTheNode) {
  ::onnx::GraphProto g;
  add_node(&g, "Reshape", {"x", "shape"}, {"r"});
  add_node(&g, "Add", {"r", "r"}, {"y"});
  auto* shape = g.add_initializer();
  shape->set_name("shape");
  shape->set_data_type(::onnx::TensorProto::INT64);
  shape->add_dims(1);
  shape->add_int64_data(-1);
  add_value(g.mutable_input(), "x", ::onnx::TensorProto::STRING);
  add_value(g.mutable_output(), "y", ::onnx::TensorProto::STRING);
  auto gm = import(g);
  try {
    fx::exec::run(*gm, {strings({2, 1}, {"a", "b"})});
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("add"), std::string::npos) << what;
    EXPECT_NE(what.find("does not take string tensors"), std::string::npos) << what;
  }
}

TEST(Strings, StringInitializersRoundTripThroughExport) {
  ::onnx::GraphProto g;
  add_node(&g, "Identity", {"words"}, {"y"});
  auto* w = g.add_initializer();
  w->set_name("words");
  w->set_data_type(::onnx::TensorProto::STRING);
  w->add_dims(3);
  for (const char* s : {"a", "", "\xc3\xa9t\xc3\xa9"}) w->add_string_data(s);
  add_value(g.mutable_output(), "y", ::onnx::TensorProto::STRING);
  auto gm = import(g);
  const std::vector<std::string> want = {"a", "", "\xc3\xa9t\xc3\xa9"};
  EXPECT_EQ(fx::exec::run(*gm, {}).at(0).strings(), want);
  const std::vector<uint8_t> bytes = fx::onnx::export_model(*gm);
  auto again = fx::onnx::import_model(bytes);
  EXPECT_EQ(fx::exec::run(*again, {}).at(0).strings(), want);
  // A count that does not match the shape is a parse error, not a short tensor.
  w->add_dims(2);
  EXPECT_THROW(import(g), fx::Error);
}

}  // namespace
