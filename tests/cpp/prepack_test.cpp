// fx::exec::prepack_weights: a module's GEMM weights kept only in their packed form. The runs
// give the bits they gave before, and the tensors still read back (export, probes, new uses)
// bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "exec/plan.h"
#include "fx/exec.h"
#include "fx/exec/passes.h"
#include "fx/fx.h"
#include "fx/onnx.h"
#include "kernels/gemm.h"
#include "tensor_util.h"
#include "zoo_util.h"

namespace {

using fx::Argument;
using fx::fn;
using fx::Node;
using fx::exec::Value;

using fxtest::random_floats;
using fxtest::tensor_f32;

// |a - b| <= 2e-5 relative (at least 2e-5 absolute), elementwise: a single row reads the panels
// after prepacking where it took sgemm's unpacked path before (other rounding; wasm's four-lane
// paths differ by 1.1e-5 on 41.4).
void expect_close(const Value& a, const Value& b) {
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i)
    EXPECT_NEAR(a.data<float>()[i], b.data<float>()[i],
                2e-5f * std::max(1.0f, std::fabs(b.data<float>()[i])))
        << i;
}

bool same_bits(const Value& a, const Value& b) {
  return a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

bool same_bits(const fx::Bytes& a, const std::vector<float>& b) {
  return a && a->size() == b.size() * sizeof(float) &&
         std::memcmp(a->data(), b.data(), a->size()) == 0;
}

TEST(Prepack, UnpackRightGivesBackTheBitsPacked) {
  // Partial panels, several KC-deep slices, and values a float copy must keep (NaN, -0, inf).
  for (auto [K, N] : {std::pair<int64_t, int64_t>{1, 1}, {5, 7}, {700, 70}, {300, 130}})
    for (bool trans : {false, true}) {
      std::vector<float> B = random_floats(static_cast<size_t>(K * N), 7);
      B[0] = -0.0f;
      if (B.size() > 2) {
        B[1] = std::numeric_limits<float>::quiet_NaN();
        B[2] = -std::numeric_limits<float>::infinity();
      }
      const int64_t ldb = trans ? K : N;
      const auto p = fx::kernels::PackedOperand::right(trans, K, N, B.data(), ldb);
      std::vector<float> back(B.size(), 1.0f);
      p.unpack_right(trans, back.data(), ldb);
      EXPECT_EQ(std::memcmp(back.data(), B.data(), B.size() * sizeof(float)), 0)
          << K << "x" << N << (trans ? " transposed" : "");
    }
  const auto left = fx::kernels::PackedOperand::left(false, 2, 2, std::vector<float>(4).data(), 2);
  float out[4];
  EXPECT_THROW(left.unpack_right(false, out, 2), std::logic_error);
}

TEST(Prepack, SgemmReadsAWeightKeptOnlyPacked) {
  const int64_t K = 300, N = 70;
  const std::vector<float> B = random_floats(K * N, 8);
  const auto packed = fx::kernels::PackedOperand::right(false, K, N, B.data(), N);
  for (int64_t M : {1, 2, 37}) {
    const std::vector<float> A = random_floats(static_cast<size_t>(M * K), 9);
    std::vector<float> with_b(M * N), only_packed(M * N), ref(M * N);
    fx::kernels::sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, with_b.data(),
                       N, nullptr, nullptr, &packed);
    fx::kernels::sgemm(false, false, M, N, K, 1.0f, A.data(), K, nullptr, N, 0.0f,
                       only_packed.data(), N, nullptr, nullptr, &packed);
    fx::kernels::sgemm_reference(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f,
                                 ref.data(), N);
    for (int64_t i = 0; i < M * N; ++i) {
      ASSERT_NEAR(only_packed[i], ref[i], 1e-4f) << "M " << M << " at " << i;
      // A row vector with B takes the unpacked path (other rounding); more rows read the panels
      // either way.
      if (M > 1) {
        ASSERT_EQ(only_packed[i], with_b[i]) << "M " << M << " at " << i;
      }
    }
  }
  // Neither B nor its packing: an API misuse, not a crash.
  std::vector<float> A(2 * K), C(2 * N);
  EXPECT_THROW(
      fx::kernels::sgemm(false, false, 2, N, K, 1.0f, A.data(), K, nullptr, N, 0.0f, C.data(), N),
      std::logic_error);
}

// ((Relu(x[rows, 16] @ w1 + b1) Gemm(w2, transB)) @ w3 @ w4) @ (w4 @ w4): w1, w2 and w3 are read
// only as B; w4 is also read as A, and b1 is 1-D.
struct Model {
  std::vector<float> w1 = random_floats(16 * 24, 1), b1 = random_floats(24, 2),
                     w2 = random_floats(8 * 24, 3), w3 = random_floats(8 * 8, 4),
                     w4 = random_floats(8 * 8, 5);
  std::unique_ptr<fx::GraphModule> gm;

  Model() {
    auto g = std::make_unique<fx::Graph>();
    Node* x = g->placeholder("x");
    Node* mm = g->call_function(fn("onnx.MatMul"), {x, g->get_attr("w1")});
    Node* add = g->call_function(fn("onnx.Add"), {mm, g->get_attr("b1")});
    Node* relu = g->call_function(fn("onnx.Relu"), {add});
    Node* gemm = g->call_function(fn("onnx.Gemm"), {relu, g->get_attr("w2")},
                                  {{"transB", static_cast<long long>(1)}});
    Node* h = g->call_function(fn("onnx.MatMul"), {gemm, g->get_attr("w3")});
    Node* w4 = g->get_attr("w4");
    Node* h4 = g->call_function(fn("onnx.MatMul"), {h, w4});
    Node* square = g->call_function(fn("onnx.MatMul"), {w4, w4});
    g->output(g->call_function(fn("onnx.MatMul"), {h4, square}));
    fx::Module root;
    root.register_parameter("w1", tensor_f32({16, 24}, w1));
    root.register_buffer("b1", tensor_f32({24}, b1));
    root.register_parameter("w2", tensor_f32({8, 24}, w2));
    root.register_parameter("w3", tensor_f32({8, 8}, w3));
    root.register_parameter("w4", tensor_f32({8, 8}, this->w4));
    gm = std::make_unique<fx::GraphModule>(&root, std::move(g));
  }
};

TEST(Prepack, RunsGiveTheSameBitsAndTheTensorsReadBack) {
  Model m;
  fx::GraphModule& gm = *m.gm;
  const Value x8 = Value::from_f32({8, 16}, random_floats(8 * 16, 6));
  const Value x1 = Value::from_f32({1, 16}, random_floats(16, 7));
  const Value before8 = fx::exec::run(gm, {x8})[0];
  const Value before1 = fx::exec::run(gm, {x1})[0];  // (its plan is replaced after prepacking)

  ASSERT_EQ(fx::exec::prepack_weights(gm), 3u);
  EXPECT_EQ(fx::exec::prepack_weights(gm), 0u);  // nothing left to pack
  for (const char* name : {"w1", "w2", "w3"}) {
    const fx::Tensor* t = gm.get_tensor(name);
    ASSERT_NE(t, nullptr);
    EXPECT_FALSE(t->data) << name << " kept its plain bytes";
    ASSERT_TRUE(t->external && t->external->in_memory) << name;
    EXPECT_TRUE(t->has_data());
    EXPECT_EQ(t->describe(), std::string(name) == "w1"   ? "float32[16, 24]"
                             : std::string(name) == "w2" ? "float32[8, 24]"
                                                         : "float32[8, 8]");
  }
  EXPECT_TRUE(same_bits(gm.get_tensor("w1")->bytes(), m.w1));
  EXPECT_TRUE(same_bits(gm.get_tensor("w2")->bytes(), m.w2));
  EXPECT_TRUE(same_bits(gm.get_tensor("w3")->bytes(), m.w3));
  EXPECT_TRUE(gm.get_tensor("w4")->data && gm.get_tensor("b1")->data);  // not packed
  EXPECT_EQ(gm.attr_kind("w1"), 'p');                                   // still a parameter

  // The plan hands w1, w2 and w3 to their MatMul/Gemm packed, without unpacking them.
  const auto plan = fx::exec::plan_for(gm, {x8}, {});
  size_t handed_packed = 0;
  for (const auto& c : plan->constants) {
    const std::string target = plan->steps[c.step].node->target().str();
    EXPECT_EQ(c.packed != nullptr, target == "w1" || target == "w2" || target == "w3") << target;
    handed_packed += c.packed != nullptr;
  }
  EXPECT_EQ(handed_packed, 3u);

  // Many rows read the same panels as before: the same bits. One row took sgemm's unpacked path
  // before and reads the panels now.
  EXPECT_TRUE(same_bits(fx::exec::run(gm, {x8})[0], before8));
  expect_close(fx::exec::run(gm, {x1})[0], before1);

  // A probe of the weight sees its values.
  fx::exec::RunOptions probe;
  probe.probe = {"w1"};
  const fx::exec::RunResult r = fx::exec::run(gm, {x8}, probe);
  ASSERT_EQ(r.probes.size(), 1u);
  EXPECT_TRUE(same_bits(r.probes[0].second.to_tensor().data, m.w1));
  EXPECT_TRUE(same_bits(r.outputs[0], before8));
}

TEST(Prepack, ExportWritesTheWeightsIntoTheModel) {
  Model m;
  fx::GraphModule& gm = *m.gm;
  const Value x = Value::from_f32({3, 16}, random_floats(3 * 16, 8));
  const Value before = fx::exec::run(gm, {x})[0];
  ASSERT_EQ(fx::exec::prepack_weights(gm), 3u);
  const std::vector<uint8_t> bytes = fx::onnx::export_model(gm);
  // Imported without any external-data reader: the weights are in the bytes.
  fx::onnx::ImportOptions no_files;
  no_files.external_data = [](const std::string& location, int64_t, int64_t) -> fx::Bytes {
    throw fx::Error(fx::ErrorKind::Value, "no external file expected, asked for " + location);
  };
  const auto back = fx::onnx::import_model(bytes.data(), bytes.size(), no_files);
  size_t found = 0;
  auto tensors = back->named_parameters();
  for (const auto& b : back->named_buffers()) tensors.push_back(b);
  for (const auto& [name, t] : tensors) {
    if (t->shape != std::vector<int64_t>{16, 24}) continue;
    ++found;
    EXPECT_FALSE(t->external);
    EXPECT_TRUE(same_bits(t->data, m.w1)) << name;
  }
  EXPECT_EQ(found, 1u);
  EXPECT_TRUE(same_bits(fx::exec::run(*back, {x})[0], before));
}

TEST(Prepack, AWeightGivenAnotherUseAfterwardsStillRuns) {
  Model m;
  fx::GraphModule& gm = *m.gm;
  const Value x = Value::from_f32({4, 16}, random_floats(4 * 16, 9));
  const Value before = fx::exec::run(gm, {x})[0];
  ASSERT_EQ(fx::exec::prepack_weights(gm), 3u);
  // w1 becomes a second output as well: that reader gets the unpacked bytes.
  fx::Graph& g = gm.graph();
  Node* w1 = nullptr;
  for (Node* n : g.nodes())
    if (n->op() == fx::Opcode::GetAttr && n->target().str() == "w1") w1 = n;
  ASSERT_NE(w1, nullptr);
  Node* out = g.output_node();
  Node* result = out->args()[0].to_node();
  Node* copy;
  {
    auto guard = g.inserting_before(out);
    copy = g.call_function(fn("onnx.Identity"), {w1});
  }
  out->set_args({Argument::tuple({result, copy})});
  const std::vector<Value> outs = fx::exec::run(gm, {x});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_TRUE(same_bits(outs[0], before));
  EXPECT_TRUE(same_bits(outs[1].to_tensor().data, m.w1));
}

// fuse-matmul-add reads only the weight's shape: it fires on a prepacked weight, and the Gemm it
// makes (transB 0, as packed) is handed the packed weight.
TEST(Prepack, FuseMatMulAddStillFiresOnAPackedWeight) {
  Model m;
  fx::GraphModule& gm = *m.gm;
  const Value x = Value::from_f32({5, 16}, random_floats(5 * 16, 10));
  const Value before = fx::exec::run(gm, {x})[0];
  ASSERT_EQ(fx::exec::prepack_weights(gm), 3u);
  fx::exec::shape_prop(gm, {x});
  ASSERT_TRUE(fx::exec::pass_by_name("fuse-matmul-add")(gm));
  const auto plan = fx::exec::plan_for(gm, {x}, {});
  bool w1_packed = false;
  for (const auto& c : plan->constants)
    if (plan->steps[c.step].node->target().str() == "w1") w1_packed = c.packed != nullptr;
  EXPECT_TRUE(w1_packed);
  const Value after = fx::exec::run(gm, {x})[0];
  expect_close(after, before);
}

TEST(Prepack, OnlyWeightsEveryReaderTakesAsB) {
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  // Read as A (w_as_a @ x), as B of Gemms with different transB, and by two get_attr nodes that
  // agree (packed).
  Node* a = g->call_function(fn("onnx.MatMul"), {g->get_attr("w_as_a"), x});
  Node* g0 = g->call_function(fn("onnx.Gemm"), {a, g->get_attr("w_mixed")});
  Node* g1 = g->call_function(fn("onnx.Gemm"), {g0, g->get_attr("w_mixed")},
                              {{"transB", static_cast<long long>(1)}});
  Node* m1 = g->call_function(fn("onnx.MatMul"), {g1, g->get_attr("w_twice")});
  Node* m2 = g->call_function(fn("onnx.MatMul"), {m1, g->get_attr("w_twice")});
  g->output(m2);
  fx::Module root;
  root.register_parameter("w_as_a", tensor_f32({4, 4}, random_floats(16, 1)));
  root.register_parameter("w_mixed", tensor_f32({4, 4}, random_floats(16, 2)));
  root.register_parameter("w_twice", tensor_f32({4, 4}, random_floats(16, 3)));
  fx::GraphModule gm(&root, std::move(g));
  const Value in = Value::from_f32({4, 4}, random_floats(16, 4));
  const Value before = fx::exec::run(gm, {in})[0];
  EXPECT_EQ(fx::exec::prepack_weights(gm), 1u);
  EXPECT_TRUE(gm.get_tensor("w_as_a")->data);
  EXPECT_TRUE(gm.get_tensor("w_mixed")->data);
  EXPECT_FALSE(gm.get_tensor("w_twice")->data);
  EXPECT_TRUE(same_bits(fx::exec::run(gm, {in})[0], before));
}

// Every model of the zoo: prepacked, it gives the outputs it gave (a single-row product reads the
// panels instead of B: rounding only), its weights read back bit for bit, and its export imports
// to the same model.
TEST(Prepack, EveryZooModelRunsAndExportsTheSame) {
  std::vector<std::string> models = fxtest::onnx_files(std::string(FXWASM_MODELS_DIR) + "/zoo");
  ASSERT_FALSE(models.empty()) << "models/zoo is absent: run scripts/setup.sh";
#ifdef __EMSCRIPTEN__
  // As zoo_passes_test: under node, the models under 10 MB (the transformers among them).
  models.erase(std::remove_if(models.begin(), models.end(),
                              [](const std::string& p) {
                                std::ifstream f(p, std::ios::binary | std::ios::ate);
                                return f.tellg() > (10L << 20);
                              }),
               models.end());
#endif
  size_t packed_total = 0;
  for (const std::string& path : models) {
    SCOPED_TRACE(path);
    std::unique_ptr<fx::GraphModule> plain = fx::onnx::load_model(path);
    std::unique_ptr<fx::GraphModule> gm = fx::onnx::load_model(path);
    const std::vector<Value> inputs = fxtest::seeded_inputs(*gm);
    const std::vector<Value> want = fx::exec::run(*gm, inputs);
    const size_t packed = fx::exec::prepack_weights(*gm);
    packed_total += packed;
    EXPECT_EQ(fx::exec::prepack_weights(*gm), 0u);
    EXPECT_EQ(fxtest::compare_values(fx::exec::run(*gm, inputs), want, 1e-5f, 1e-5f), "");
    size_t given_way = 0;
    for (const auto& [name, t] : gm->named_parameters()) {
      if (t->data) continue;
      ++given_way;
      const fx::Tensor* orig = plain->get_tensor(name);
      ASSERT_TRUE(orig && orig->data) << name;
      const fx::Bytes b = t->bytes();
      ASSERT_TRUE(b && *b == *orig->data) << name;
    }
    for (const auto& [name, t] : gm->named_buffers()) given_way += t->data ? 0 : 1;
    EXPECT_EQ(given_way, packed);
    const std::vector<uint8_t> bytes = fx::onnx::export_model(*gm);
    EXPECT_EQ(bytes, fx::onnx::export_model(*plain));
  }
  EXPECT_GT(packed_total, 10u);  // the transformers' weights, at least
}

}  // namespace
