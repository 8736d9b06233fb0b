// ONNX conformance of the importer + executor: every single-op model in tests/onnx_ops
// (scripts/gen_onnx_op_tests.sh: inputs seeded in python, outputs computed by onnxruntime) is
// imported, run on its test_data_set_0 inputs and compared with onnxruntime's outputs; then it is
// exported, re-imported and run again with the same result. Native and wasm.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fx/exec.h"
#include "fx/fx.h"
#include "fx/onnx.h"

namespace {

namespace fs = std::filesystem;
using fx::exec::Value;

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

Value read_tensor(const fs::path& p) {
  const std::vector<uint8_t> b = read_bytes(p);
  return Value::from_tensor(fx::onnx::tensor_from_proto_bytes(b.data(), b.size()), p.string());
}

// "" when `got` matches `want` (floats: |a - b| <= 1e-4 + 1e-4 |b|; others exactly).
std::string compare(const Value& got, const Value& want) {
  if (got.shape() != want.shape() || got.dtype() != want.dtype())
    return "got " + got.describe() + ", onnxruntime " + want.describe();
  const bool floating = want.dtype() == fx::Dtype::Float32 || want.dtype() == fx::Dtype::Float64;
  if (!floating) {
    if (got.nbytes() != want.nbytes() ||
        !std::equal(got.data<uint8_t>(), got.data<uint8_t>() + got.nbytes(), want.data<uint8_t>()))
      return "values differ";
    return "";
  }
  const std::vector<float> a = got.to_f32(), b = want.to_f32();
  for (size_t i = 0; i < a.size(); ++i) {
    const bool both_nan = std::isnan(a[i]) && std::isnan(b[i]);
    if (!both_nan && !(std::fabs(a[i] - b[i]) <= 1e-4f + 1e-4f * std::fabs(b[i]))) {
      std::ostringstream os;
      os << "element " << i << ": " << a[i] << " vs onnxruntime " << b[i];
      return os.str();
    }
  }
  return "";
}

TEST(OnnxOps, EverySingleOpModelMatchesOnnxruntime) {
  const fs::path dir = fs::path(FXWASM_GOLDEN_DIR).parent_path() / "onnx_ops";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::vector<fs::path> models;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".onnx") models.push_back(e.path());
  std::sort(models.begin(), models.end());
  ASSERT_GE(models.size(), 150u);

  std::vector<std::string> failures;
  for (const fs::path& model : models) {
    const std::string name = model.stem().string();
    const fs::path data = dir / name / "test_data_set_0";
    try {
      std::vector<Value> inputs, expected;
      for (int i = 0; fs::exists(data / ("input_" + std::to_string(i) + ".pb")); ++i)
        inputs.push_back(read_tensor(data / ("input_" + std::to_string(i) + ".pb")));
      for (int i = 0; fs::exists(data / ("output_" + std::to_string(i) + ".pb")); ++i)
        expected.push_back(read_tensor(data / ("output_" + std::to_string(i) + ".pb")));
      auto gm = fx::onnx::load_model(model.string());
      gm->graph().lint();
      const auto gaps = fx::exec::coverage(*gm);
      if (!gaps.empty()) {
        failures.push_back(name + ": cannot run " + gaps[0].target + " (" + gaps[0].reason + ")");
        continue;
      }
      std::vector<Value> got = fx::exec::run(*gm, inputs);
      if (got.size() != expected.size()) {
        failures.push_back(name + ": " + std::to_string(got.size()) + " outputs, onnxruntime " +
                           std::to_string(expected.size()));
        continue;
      }
      std::string bad;
      for (size_t i = 0; i < got.size() && bad.empty(); ++i)
        if (std::string d = compare(got[i], expected[i]); !d.empty())
          bad = "output " + std::to_string(i) + ": " + d;
      if (bad.empty()) {
        // Export -> import -> run gives the same values.
        auto again = fx::onnx::import_model(fx::onnx::export_model(*gm));
        std::vector<Value> got2 = fx::exec::run(*again, inputs);
        for (size_t i = 0; i < got.size() && bad.empty(); ++i)
          if (std::string d = compare(got2[i], got[i]); !d.empty())
            bad = "after export/import, output " + std::to_string(i) + ": " + d;
      }
      if (!bad.empty()) failures.push_back(name + ": " + bad);
    } catch (const fx::Error& e) {
      failures.push_back(name + ": " + e.kind_name() + ": " + e.what());
    }
  }
  std::string report;
  for (const auto& f : failures) report += "  " + f + "\n";
  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << models.size()
                                << " single-op models differ from onnxruntime:\n"
                                << report;
}

}  // namespace
