// Issue 16's malformed-input table (tests/malformed/cases.tsv, written by gen.py) replayed in one
// process: every hostile model fails with its typed error and message, nothing aborts, and a
// valid model run before and after the whole sequence gives bit-identical outputs. Also the
// checked sizes of the C++ API (Value::zeros / wrap), Slice with step INT64_MAX, the per-run
// limit, the opset check's warn mode, and sequences given to ops that take tensors.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "../fuzz/small_inputs.h"
#include "fx/exec.h"
#include "fx/fx.h"
#include "fx/limits.h"
#include "fx/onnx.h"

namespace {

using fx::exec::Value;

const std::string kDir = std::string(FXWASM_SOURCE_DIR) + "/tests/malformed/";

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

struct Case {
  std::string name, stage, kind, message, options;
};

std::vector<Case> read_table() {
  std::vector<Case> cases;
  std::ifstream in(kDir + "cases.tsv");
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, '\t');) f.push_back(x);
    while (f.size() < 5) f.emplace_back();
    cases.push_back({f[0], f[1], f[2], f[3], f[4]});
  }
  return cases;
}

// The wasm defaults, so that both builds see the same errors on any machine.
class Malformed : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = fx::limits();
    fx::set_limits({int64_t{1} << 30, int64_t{2} << 30, int64_t{1} << 30, int64_t{1} << 16});
  }
  void TearDown() override { fx::set_limits(saved_); }
  fx::Limits saved_;
};

// A scratch folder for the external-data cases: <tmp>/fx_malformed_<pid>/{outside.bin, m/}.
std::string scratch() {
  static const std::string root = [] {
    const std::string r =
        (std::filesystem::temp_directory_path() / ("fx_malformed_" + std::to_string(::getpid())))
            .string();
    ::mkdir(r.c_str(), 0755);
    return r;
  }();
  return root;
}

// Lays out the folder a 'lazy' case expects; returns the model's path.
std::string arrange(const Case& c, const std::vector<uint8_t>& bytes) {
  const std::string dir = scratch() + "/" + c.name;
  ::mkdir(dir.c_str(), 0755);
  const std::string model = dir + "/model.onnx";
  write_bytes(model, bytes);
  const std::string weights = dir + "/weights.bin";
  std::remove(weights.c_str());
  ::rmdir(weights.c_str());
  const std::vector<uint8_t> sixteen(16, 0);
  if (c.name == "ext_directory") {
    ::mkdir(weights.c_str(), 0755);
  } else if (c.name == "ext_symlink_escape") {
    write_bytes(scratch() + "/outside.bin", sixteen);  // a file the symlink must not reach
    EXPECT_EQ(::symlink((scratch() + "/outside.bin").c_str(), weights.c_str()), 0);
  } else {
    write_bytes(weights, sixteen);
  }
  return model;
}

// Runs one case; returns "" when it failed as the table says, else what happened.
std::string replay(const Case& c) {
  const std::vector<uint8_t> bytes = read_bytes(kDir + c.name + ".onnx");
  fx::onnx::ImportOptions options;
  if (c.options == "opset=error") options.opset_check = fx::onnx::ImportOptions::OpsetCheck::Error;
  const char* step = "import";
  try {
    std::unique_ptr<fx::GraphModule> gm;
    if (c.stage == "lazy")
      gm = fx::onnx::load_model(arrange(c, bytes), options);
    else
      gm = fx::onnx::import_model(bytes, options);
    if (c.stage == "load") return "imported without an error";
    step = "run";
    fx::exec::run(*gm, {});
    return "ran without an error";
  } catch (const fx::Error& e) {
    const std::string what = e.what();
    if (c.stage == "load" && std::string(step) != "import")
      return std::string("failed at ") + step + ": " + what;
    if (c.stage != "load" && std::string(step) != "run")
      return std::string("failed at import: ") + e.kind_name() + ": " + what;
    if (!c.kind.empty() && c.kind != e.kind_name())
      return std::string("kind ") + e.kind_name() + " (want " + c.kind + "): " + what;
    if (what.find(c.message) == std::string::npos)
      return "message '" + what + "' lacks '" + c.message + "'";
    return "";
  } catch (const std::exception& e) {
    return std::string("untyped exception: ") + e.what();
  }
}

std::vector<std::vector<uint8_t>> run_reference(const fx::GraphModule& gm) {
  std::mt19937 rng(16);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(2 * 3 * 32 * 32);
  for (float& v : x) v = u(rng);
  std::vector<std::vector<uint8_t>> out;
  for (const Value& v : fx::exec::run(gm, {Value::from_f32({2, 3, 32, 32}, x)}))
    out.emplace_back(v.data<uint8_t>(), v.data<uint8_t>() + v.nbytes());
  return out;
}

TEST_F(Malformed, TableFailsTypedAndTheProcessKeepsWorking) {
  const std::vector<Case> cases = read_table();
  ASSERT_GE(cases.size(), 40u) << "the table has fewer than 40 classes";
  const auto good = fx::onnx::load_model(std::string(FXWASM_MODELS_DIR) + "/zoo/cnn_bn_eval.onnx");
  const auto before = run_reference(*good);
  // Three rounds: an error must not leave state behind that changes the next one.
  for (int round = 0; round < 3; ++round)
    for (const Case& c : cases) EXPECT_EQ(replay(c), "") << c.name << " (round " << round << ")";
  const auto fresh = fx::onnx::load_model(std::string(FXWASM_MODELS_DIR) + "/zoo/cnn_bn_eval.onnx");
  EXPECT_EQ(run_reference(*fresh), before);
  EXPECT_EQ(run_reference(*good), before);
}

TEST_F(Malformed, RegressionInputsFailTyped) {
  // Inputs the fuzzers found (tests/fuzz/regressions/): each fails with a typed error or runs.
  const std::string dir = std::string(FXWASM_SOURCE_DIR) + "/tests/fuzz/regressions/";
  std::ifstream list(dir + "LIST");
  for (std::string name; std::getline(list, name);) {
    if (name.empty() || name[0] == '#') continue;
    const std::vector<uint8_t> bytes = read_bytes(dir + name);
    try {
      auto gm = fx::onnx::import_model(bytes);
      std::vector<fx::exec::Value> inputs;  // as fuzz_run feeds the model
      if (fx::exec::coverage(*gm).empty() && small_inputs(*gm, inputs))
        (void)fx::exec::run(*gm, inputs);
    } catch (const fx::Error&) {
    }
  }
}

TEST_F(Malformed, ApiSizesAreChecked) {
  // [2^31, 2^31] (the CLI's random inputs): a ResourceError, not a bad_alloc.
  try {
    Value::zeros(fx::Dtype::Float32, {int64_t{1} << 31, int64_t{1} << 31});
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Resource);
    EXPECT_NE(std::string(e.what()).find("over the limit"), std::string::npos) << e.what();
  }
  // [2^30 + 1] float32 over 4 bytes: in wasm32 a size_t product would wrap to 4.
  fx::set_limits({int64_t{8} << 30, int64_t{8} << 30, int64_t{1} << 31});
  try {
    Value::wrap(fx::Dtype::Float32, {(int64_t{1} << 30) + 1},
                std::make_shared<const std::vector<uint8_t>>(4));
    FAIL() << "no error";
  } catch (const fx::Error& e) {
#ifdef __EMSCRIPTEN__
    EXPECT_EQ(e.kind(), fx::ErrorKind::Resource) << e.what();  // 4 GB: over size_t
#else
    EXPECT_EQ(e.kind(), fx::ErrorKind::Value) << e.what();
    EXPECT_NE(std::string(e.what()).find("needs 4294967300 bytes, got 4"), std::string::npos)
        << e.what();
#endif
  }
  // Overflowing int64 whatever the limits.
  fx::set_limits({INT64_MAX, INT64_MAX, INT64_MAX});
  try {
    fx::checked_nbytes(fx::Dtype::Float64, {int64_t{1} << 31, int64_t{1} << 31}, "t");
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Resource);
    EXPECT_NE(std::string(e.what()).find("more bytes than int64"), std::string::npos) << e.what();
  }
  try {
    Value::zeros(fx::Dtype::Float32, {3, -1});
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Value);
  }
  EXPECT_EQ(fx::checked_numel({0, INT64_MAX, INT64_MAX}, "t"), 0);  // empty is fine
  // ... and its element count is 0 however its dimensions are ordered (no overflowing product
  // before the 0; UBSan's check in the sanitizer run).
  EXPECT_EQ(Value::zeros(fx::Dtype::Float32, {int64_t{1} << 20, int64_t{1} << 52, 0}).numel(), 0);
}

// A graph of one op over named inputs (float32 unless given), built by hand.
std::unique_ptr<fx::GraphModule> one_op(const std::string& op, int inputs) {
  auto g = std::make_unique<fx::Graph>();
  std::vector<fx::Argument> args;
  for (int i = 0; i < inputs; ++i) args.emplace_back(g->placeholder("x" + std::to_string(i)));
  fx::Node* n = g->call_function(fx::fn("onnx." + op), std::move(args));
  g->output(n);
  return std::make_unique<fx::GraphModule>(nullptr, std::move(g), "M");
}

TEST_F(Malformed, SliceWithStepInt64MaxGivesOneElement) {
  auto gm = one_op("Slice", 5);
  const std::vector<Value> out = fx::exec::run(
      *gm, {Value::from_f32({3}, {1, 2, 3}), Value::from_i64({1}, {0}), Value::from_i64({1}, {3}),
            Value::from_i64({1}, {0}), Value::from_i64({1}, {INT64_MAX})});
  ASSERT_EQ(out[0].shape(), std::vector<int64_t>{1});  // numpy: x[0:3:2**63-1] == [1]
  EXPECT_EQ(out[0].data<float>()[0], 1.0f);
  const std::vector<Value> back = fx::exec::run(
      *gm, {Value::from_f32({3}, {1, 2, 3}), Value::from_i64({1}, {2}), Value::from_i64({1}, {-4}),
            Value::from_i64({1}, {0}), Value::from_i64({1}, {INT64_MIN})});
  ASSERT_EQ(back[0].shape(), std::vector<int64_t>{1});
  EXPECT_EQ(back[0].data<float>()[0], 3.0f);
}

TEST_F(Malformed, PerRunLimitNamesTheNode) {
  // Two live 1 MB values under a 1.5 MB per-run limit: the second fails, naming its node.
  fx::set_limits({int64_t{4} << 20, int64_t{3} << 19, int64_t{1} << 30});
  auto gm = one_op("Add", 2);
  const Value a = Value::zeros(fx::Dtype::Float32, {1 << 18});
  const std::vector<Value> first = fx::exec::run(*gm, {a, a});  // held: 1 MB of the arena
  try {
    fx::exec::run(*gm, {a, a});
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Resource) << e.what();
    EXPECT_NE(std::string(e.what()).find("per-run limit"), std::string::npos) << e.what();
    EXPECT_FALSE(e.node().empty());
  }
}

TEST_F(Malformed, OpsetNewerThanKnownWarnsByDefault) {
  const std::vector<uint8_t> bytes = read_bytes(kDir + "opset_99_error.onnx");
  auto gm = fx::onnx::import_model(bytes);  // warn: loads
  const fx::Argument* w = gm->meta().find(fx::onnx::kImportWarnings);
  ASSERT_TRUE(w && w->is_sequence() && w->elements().size() == 1);
  EXPECT_NE(w->elements()[0].to_string().find("opset 99 of domain 'ai.onnx' is newer"),
            std::string::npos);
}

TEST_F(Malformed, SequenceGivenToATensorOpIsTyped) {
  auto gm = one_op("Relu", 1);
  try {
    fx::exec::run(*gm, {Value::sequence(fx::Dtype::Float32, {Value::scalar_f32(1)})});
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("takes tensors"), std::string::npos) << e.what();
  }
  try {
    fx::exec::run(*gm, {Value::none(fx::Dtype::Float32)});
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("takes tensors"), std::string::npos) << e.what();
  }
}

}  // namespace
