// export_model writes the main graph's weights straight from the tensors (src/onnx/serialize.cpp)
// in protobuf's own field order: the bytes equal protobuf's serialization of the same model,
// for every zoo model and for initializers with doc strings, external data and typed fields.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fx/fx.h"
#include "fx/onnx.h"
#include "onnx.pb.h"

namespace {

std::vector<uint8_t> read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// The export, and protobuf's serialization of the model it parses to: equal when the weights
// were written in field order.
void expect_canonical(const fx::GraphModule& gm, const std::string& what) {
  const std::vector<uint8_t> bytes = fx::onnx::export_model(gm);
  ::onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) << what;
  const std::string s = m.SerializeAsString();
  const std::vector<uint8_t> again(s.begin(), s.end());
  ASSERT_EQ(again.size(), bytes.size()) << what;
  const auto diff = std::mismatch(bytes.begin(), bytes.end(), again.begin());
  EXPECT_TRUE(diff.first == bytes.end())
      << what << ": the bytes differ from offset " << (diff.first - bytes.begin()) << " of "
      << bytes.size() << " (" << int(*diff.first) << " vs " << int(*diff.second) << ")";
  // The sink form: sizes announced first, then pieces that add up to the same bytes.
  std::vector<uint8_t> pieces;
  size_t announced = 0, calls = 0;
  fx::onnx::export_model_to(gm, fx::onnx::ByteSink{[&](size_t n) { announced = n; },
                                                   [&](const uint8_t* p, size_t n) {
                                                     pieces.insert(pieces.end(), p, p + n);
                                                     ++calls;
                                                   }});
  EXPECT_EQ(announced, bytes.size()) << what;
  EXPECT_EQ(pieces, bytes) << what;
}

TEST(OnnxSerialize, ZooExportsAreProtobufsOwnBytes) {
  const std::string dir = std::string(FXWASM_MODELS_DIR) + "/zoo";
  DIR* d = opendir(dir.c_str());
  if (!d) FAIL() << dir << " is absent: run scripts/setup.sh (it generates the zoo)";
  std::vector<std::string> files;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".onnx") == 0 && n != "resnet50.onnx")
      files.push_back(n);
#ifdef __EMSCRIPTEN__
    // (The big models `models/generate.py --only ...` adds for bench/, 114-346 MB, exceed the
    // wasm test's heap with their protobuf, their import and the export at once.)
    struct stat st;
    if (!files.empty() && files.back() == n && stat((dir + "/" + n).c_str(), &st) == 0 &&
        st.st_size > (int64_t{64} << 20))
      files.pop_back();
#endif
  }
  closedir(d);
  ASSERT_GE(files.size(), 10u);
  for (const std::string& f : files) {
    auto gm = fx::onnx::import_model(read(dir + "/" + f));
    expect_canonical(*gm, f);
  }
}

TEST(OnnxSerialize, DocStringsTypedFieldsAndBodiesKeepTheirPlace) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("test");
  m.set_doc_string("a model");
  auto* o = m.add_opset_import();
  o->set_version(13);
  auto* p = m.add_metadata_props();
  p->set_key("k");
  p->set_value("v");
  auto* g = m.mutable_graph();
  g->set_name("g");
  g->set_doc_string("the graph");
  auto* w = g->add_initializer();  // raw_data, a doc string after it
  w->set_name("w");
  w->set_data_type(::onnx::TensorProto::FLOAT);
  w->add_dims(3);
  const float wv[3] = {1, 2, 3};
  w->set_raw_data(std::string(reinterpret_cast<const char*>(wv), sizeof wv));
  w->set_doc_string("weights");
  auto* b = g->add_initializer();  // typed field, written as raw by the exporter
  b->set_name("b");
  b->set_data_type(::onnx::TensorProto::INT64);
  b->add_dims(1);
  b->add_int64_data(7);
  auto* e = g->add_initializer();  // empty tensor
  e->set_name("e");
  e->set_data_type(::onnx::TensorProto::FLOAT);
  e->add_dims(0);
  auto* n = g->add_node();
  n->set_op_type("Add");
  n->add_input("x");
  n->add_input("w");
  n->add_output("y");
  auto* n2 = g->add_node();
  n2->set_op_type("Concat");
  n2->add_input("x");
  n2->add_input("e");
  n2->add_output("z");
  auto* at = n2->add_attribute();
  at->set_name("axis");
  at->set_type(::onnx::AttributeProto::INT);
  at->set_i(0);
  auto* n3 = g->add_node();
  n3->set_op_type("Cast");
  n3->add_input("b");
  n3->add_output("c");
  auto* to = n3->add_attribute();
  to->set_name("to");
  to->set_type(::onnx::AttributeProto::INT);
  to->set_i(::onnx::TensorProto::FLOAT);
  for (const char* name : {"x"}) {
    auto* vi = g->add_input();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::FLOAT);
    vi->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(3);
  }
  for (const char* name : {"y", "z", "c"}) {
    auto* vi = g->add_output();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::FLOAT);
  }
  const std::string s = m.SerializeAsString();
  auto gm = fx::onnx::import_model(std::vector<uint8_t>(s.begin(), s.end()));
  expect_canonical(*gm, "hand-built model");
  // The weights and their doc string survive the round trip.
  const std::vector<uint8_t> bytes = fx::onnx::export_model(*gm);
  ::onnx::ModelProto back;
  ASSERT_TRUE(back.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
  bool saw_w = false;
  for (const auto& t : back.graph().initializer())
    if (t.name() == "w") {
      saw_w = true;
      EXPECT_EQ(t.raw_data(), w->raw_data());
      EXPECT_EQ(t.doc_string(), "weights");
    }
  EXPECT_TRUE(saw_w);
  EXPECT_EQ(back.metadata_props_size(), 1);
  EXPECT_EQ(back.graph().doc_string(), "the graph");
}

}  // namespace
