// Sequences, optionals and Loop in the executor, and ONNX's SequenceProto/OptionalProto test data:
// models built with the protoc-generated classes, imported, run, exported and imported again;
// malformed data and input-controlled sizes give typed errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fx/exec.h"
#include "fx/fx.h"
#include "fx/limits.h"
#include "fx/onnx.h"
#include "onnx.pb.h"

namespace {

using fx::ErrorKind;
using fx::exec::Value;
using fx::exec::ValueKind;

::onnx::NodeProto* add_node(::onnx::GraphProto* g, const std::string& op,
                            std::vector<std::string> in, std::vector<std::string> out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(out[0] + "_node");
  for (auto& i : in) n->add_input(i);
  for (auto& o : out) n->add_output(o);
  return n;
}

void tensor_type(::onnx::TypeProto* t, int elem, std::vector<int64_t> dims) {
  auto* tt = t->mutable_tensor_type();
  tt->set_elem_type(elem);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

void add_value(google::protobuf::RepeatedPtrField<::onnx::ValueInfoProto>* vs,
               const std::string& name, int elem, std::vector<int64_t> dims,
               bool sequence = false) {
  auto* v = vs->Add();
  v->set_name(name);
  if (sequence)
    tensor_type(v->mutable_type()->mutable_sequence_type()->mutable_elem_type(), elem, {});
  else
    tensor_type(v->mutable_type(), elem, std::move(dims));
}

void add_i64_constant(::onnx::GraphProto* g, const std::string& name, int64_t v) {
  auto* n = add_node(g, "Constant", {}, {name});
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(::onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(::onnx::TensorProto::INT64);
  a->mutable_t()->add_int64_data(v);
}

std::unique_ptr<fx::GraphModule> import(const ::onnx::ModelProto& m) {
  const std::string s = m.SerializeAsString();
  return fx::onnx::import_model(std::vector<uint8_t>(s.begin(), s.end()));
}

::onnx::ModelProto model_of(::onnx::GraphProto g) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  *m.mutable_graph() = std::move(g);
  return m;
}

std::vector<float> floats(const Value& v) {
  EXPECT_TRUE(v.is_tensor());
  EXPECT_EQ(v.dtype(), fx::Dtype::Float32);
  return v.to_f32();
}

// X[4, 2] -> SplitToSequence (rows) -> erase row 0 -> insert Y before the last -> length, concat,
// element 1, and the sequence itself.
::onnx::ModelProto sequence_model() {
  ::onnx::GraphProto g;
  g.set_name("seq");
  add_value(g.mutable_input(), "X", ::onnx::TensorProto::FLOAT, {4, 2});
  add_value(g.mutable_input(), "Y", ::onnx::TensorProto::FLOAT, {1, 2});
  add_node(&g, "SplitToSequence", {"X"}, {"S"});
  add_i64_constant(&g, "zero", 0);
  add_i64_constant(&g, "minus_one", -1);
  add_i64_constant(&g, "one", 1);
  add_node(&g, "SequenceErase", {"S", "zero"}, {"S2"});
  add_node(&g, "SequenceInsert", {"S2", "Y", "minus_one"}, {"S3"});
  add_node(&g, "SequenceLength", {"S3"}, {"L"});
  auto* concat = add_node(&g, "ConcatFromSequence", {"S3"}, {"C"});
  auto* axis = concat->add_attribute();
  axis->set_name("axis");
  axis->set_type(::onnx::AttributeProto::INT);
  axis->set_i(0);
  add_node(&g, "SequenceAt", {"S3", "one"}, {"A"});
  add_value(g.mutable_output(), "L", ::onnx::TensorProto::INT64, {});
  add_value(g.mutable_output(), "C", ::onnx::TensorProto::FLOAT, {4, 2});
  add_value(g.mutable_output(), "A", ::onnx::TensorProto::FLOAT, {1, 2});
  add_value(g.mutable_output(), "S3", ::onnx::TensorProto::FLOAT, {}, /*sequence=*/true);
  return model_of(std::move(g));
}

void expect_sequence_model_outputs(const std::vector<Value>& out) {
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].to_i64(), std::vector<int64_t>{4});
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(floats(out[1]), (std::vector<float>{2, 3, 4, 5, 10, 11, 6, 7}));
  EXPECT_EQ(floats(out[2]), (std::vector<float>{4, 5}));
  ASSERT_EQ(out[3].kind(), ValueKind::Sequence);
  ASSERT_EQ(out[3].elements().size(), 4u);
  EXPECT_EQ(floats(out[3].elements()[2]), (std::vector<float>{10, 11}));
}

TEST(ExecSequence, OpsRunAndSurviveExport) {
  auto gm = import(sequence_model());
  const std::vector<Value> in = {Value::from_f32({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7}),
                                 Value::from_f32({1, 2}, {10, 11})};
  expect_sequence_model_outputs(fx::exec::run(*gm, in));
  // The sequence type of output S3 is written back, and the model runs the same after.
  const std::vector<uint8_t> bytes = fx::onnx::export_model(*gm);
  ::onnx::ModelProto again;
  ASSERT_TRUE(again.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
  ASSERT_EQ(again.graph().output_size(), 4);
  EXPECT_TRUE(again.graph().output(3).type().has_sequence_type());
  expect_sequence_model_outputs(fx::exec::run(*fx::onnx::import_model(bytes), in));
}

TEST(ExecSequence, TensorOpsRejectSequencesByName) {
  ::onnx::GraphProto g;
  add_value(g.mutable_input(), "X", ::onnx::TensorProto::FLOAT, {2});
  add_node(&g, "SequenceConstruct", {"X", "X"}, {"S"});
  add_node(&g, "Add", {"S", "X"}, {"Z"});
  add_value(g.mutable_output(), "Z", ::onnx::TensorProto::FLOAT, {2});
  auto gm = import(model_of(std::move(g)));
  try {
    fx::exec::run(*gm, {Value::from_f32({2}, {1, 2})});
    FAIL() << "Add of a sequence ran";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find("'add' (onnx.Add)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sequence<float32>"), std::string::npos) << e.what();
  }
}

TEST(ExecSequence, OutOfRangePositionIsAnError) {
  ::onnx::GraphProto g;
  add_value(g.mutable_input(), "X", ::onnx::TensorProto::FLOAT, {2});
  add_node(&g, "SequenceConstruct", {"X"}, {"S"});
  add_i64_constant(&g, "five", 5);
  add_node(&g, "SequenceAt", {"S", "five"}, {"A"});
  add_value(g.mutable_output(), "A", ::onnx::TensorProto::FLOAT, {2});
  auto gm = import(model_of(std::move(g)));
  EXPECT_THROW(fx::exec::run(*gm, {Value::from_f32({2}, {1, 2})}), fx::Error);
}

// Loop(M, cond = true, sum = 0): sum += X each step, each step's sum a scan output.
// Without `with_cond`, the Loop's cond input is omitted (a for loop of M steps).
::onnx::ModelProto loop_model(bool with_cond = true) {
  ::onnx::GraphProto body;
  body.set_name("body");
  add_value(body.mutable_input(), "i", ::onnx::TensorProto::INT64, {});
  add_value(body.mutable_input(), "cond_in", ::onnx::TensorProto::BOOL, {});
  add_value(body.mutable_input(), "sum_in", ::onnx::TensorProto::FLOAT, {2});
  add_node(&body, "Identity", {"cond_in"}, {"cond_out"});
  add_node(&body, "Add", {"sum_in", "X"}, {"sum_out"});  // X: captured from the outer graph
  add_node(&body, "Identity", {"sum_out"}, {"scan_out"});
  add_value(body.mutable_output(), "cond_out", ::onnx::TensorProto::BOOL, {});
  add_value(body.mutable_output(), "sum_out", ::onnx::TensorProto::FLOAT, {2});
  add_value(body.mutable_output(), "scan_out", ::onnx::TensorProto::FLOAT, {2});

  ::onnx::GraphProto g;
  add_value(g.mutable_input(), "M", ::onnx::TensorProto::INT64, {});
  if (with_cond) add_value(g.mutable_input(), "cond", ::onnx::TensorProto::BOOL, {});
  add_value(g.mutable_input(), "X", ::onnx::TensorProto::FLOAT, {2});
  add_value(g.mutable_input(), "zero", ::onnx::TensorProto::FLOAT, {2});
  auto* loop = add_node(&g, "Loop", {"M", with_cond ? "cond" : "", "zero"}, {"sum", "scans"});
  auto* a = loop->add_attribute();
  a->set_name("body");
  a->set_type(::onnx::AttributeProto::GRAPH);
  *a->mutable_g() = std::move(body);
  add_value(g.mutable_output(), "sum", ::onnx::TensorProto::FLOAT, {2});
  add_value(g.mutable_output(), "scans", ::onnx::TensorProto::FLOAT, {3, 2});
  return model_of(std::move(g));
}

Value bool_value(bool b) {
  Value v = Value::zeros(fx::Dtype::Bool, {});
  v.mutable_data<uint8_t>()[0] = b;
  return v;
}

TEST(ExecLoop, CarriesAndStacks) {
  auto gm = import(loop_model());
  const std::vector<Value> out =
      fx::exec::run(*gm, {Value::from_i64({}, {3}), bool_value(true), Value::from_f32({2}, {1, 10}),
                          Value::from_f32({2}, {0, 0})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(floats(out[0]), (std::vector<float>{3, 30}));
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(floats(out[1]), (std::vector<float>{1, 10, 2, 20, 3, 30}));
  // cond false: no step; the carried value comes out as it went in.
  const std::vector<Value> none =
      fx::exec::run(*gm, {Value::from_i64({}, {3}), bool_value(false),
                          Value::from_f32({2}, {1, 10}), Value::from_f32({2}, {5, 6})});
  EXPECT_EQ(floats(none[0]), (std::vector<float>{5, 6}));
}

TEST(ExecLoop, TripCountBeyondMemoryIsATypedError) {
  // No condition: M steps will all run, and the first step's scan outputs say they cannot fit.
  auto gm = import(loop_model(/*with_cond=*/false));
  try {
    fx::exec::run(*gm, {Value::from_i64({}, {int64_t(1) << 62}), Value::from_f32({2}, {1, 1}),
                        Value::from_f32({2}, {0, 0})});
    FAIL() << "a loop of 2^62 steps ran";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find("cannot fit"), std::string::npos) << e.what();
  }
}

// A cap on iterations: a trip count from data (M = 2^62, cond always true) is a ResourceError
// naming the node and the limit, not a hang; M is only a bound when a condition stops the loop.
TEST(ExecLoop, IterationLimitStopsARunawayLoop) {
  auto gm = import(loop_model());
  const fx::Limits saved = fx::limits();
  fx::Limits l = saved;
  l.max_loop_iterations = 10;
  fx::set_limits(l);
  auto run = [&](int64_t m) {
    return fx::exec::run(*gm, {Value::from_i64({}, {m}), bool_value(true),
                               Value::from_f32({2}, {1, 1}), Value::from_f32({2}, {0, 0})});
  };
  EXPECT_EQ(floats(run(10)[0]), (std::vector<float>{10, 10}));  // at the limit: runs
  try {
    run(int64_t(1) << 62);
    FAIL() << "a loop of 2^62 steps ran";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Resource);
    EXPECT_NE(std::string(e.what()).find("'loop' (onnx.Loop)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("past 10 iterations"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_loop_iterations"), std::string::npos) << e.what();
  }
  fx::set_limits(saved);
  EXPECT_EQ(fx::limits().max_loop_iterations, int64_t(1) << 20);
}

// ---- test data ----

void put_varint(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  s += static_cast<char>(v);
}
void put_bytes(std::string& s, uint32_t field, const std::string& b) {
  put_varint(s, (field << 3) | 2);
  put_varint(s, b.size());
  s += b;
}
std::string tensor_bytes(const std::vector<float>& v) {
  fx::Tensor t;
  t.dtype = fx::Dtype::Float32;
  t.shape = {static_cast<int64_t>(v.size())};
  t.data = std::make_shared<const std::vector<uint8_t>>(
      reinterpret_cast<const uint8_t*>(v.data()),
      reinterpret_cast<const uint8_t*>(v.data() + v.size()));
  const std::vector<uint8_t> b = fx::onnx::tensor_to_proto_bytes(t);
  return std::string(b.begin(), b.end());
}
fx::Argument type_of(const ::onnx::TypeProto& t) {
  return fx::Argument::dict({{"proto", t.SerializeAsString()}});
}

TEST(OnnxDataValue, SequencesAndOptionals) {
  std::string seq;
  put_bytes(seq, 1, "s");
  put_varint(seq, (2 << 3) | 0);
  put_varint(seq, 1);  // elem_type TENSOR
  put_bytes(seq, 3, tensor_bytes({1, 2}));
  put_bytes(seq, 3, tensor_bytes({3}));
  ::onnx::TypeProto seq_type;
  tensor_type(seq_type.mutable_sequence_type()->mutable_elem_type(), ::onnx::TensorProto::FLOAT,
              {});
  const fx::Argument st = type_of(seq_type);
  const auto* p = reinterpret_cast<const uint8_t*>(seq.data());
  const Value v = Value::from_onnx(fx::onnx::value_from_proto_bytes(p, seq.size(), &st), "seq");
  ASSERT_EQ(v.kind(), ValueKind::Sequence);
  ASSERT_EQ(v.elements().size(), 2u);
  EXPECT_EQ(floats(v.elements()[1]), std::vector<float>{3});
  EXPECT_EQ(fx::onnx::value_kind(&st), fx::onnx::DataValue::Kind::Sequence);

  // An empty optional of int64 tensors: the type names the element type.
  ::onnx::TypeProto opt_type;
  tensor_type(opt_type.mutable_optional_type()->mutable_elem_type(), ::onnx::TensorProto::INT64,
              {});
  const fx::Argument ot = type_of(opt_type);
  std::string empty;
  put_varint(empty, (2 << 3) | 0);
  put_varint(empty, 1);
  const Value none =
      Value::from_onnx(fx::onnx::value_from_proto_bytes(
                           reinterpret_cast<const uint8_t*>(empty.data()), empty.size(), &ot),
                       "opt");
  EXPECT_EQ(none.kind(), ValueKind::Optional);
  EXPECT_FALSE(none.has_element());
  EXPECT_EQ(none.dtype(), fx::Dtype::Int64);

  // Every truncation is a typed error or a shorter valid message, never a crash.
  for (size_t n = 0; n < seq.size(); ++n) {
    try {
      fx::onnx::value_from_proto_bytes(p, n, &st);
    } catch (const fx::Error&) {
    }
  }
  EXPECT_THROW(fx::onnx::value_from_proto_bytes(p, seq.size() - 1, &st), fx::Error);
  std::string map;
  put_bytes(map, 6, "");
  try {
    fx::onnx::value_from_proto_bytes(reinterpret_cast<const uint8_t*>(map.data()), map.size(), &st);
    FAIL() << "a map was read";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  }
}

}  // namespace
