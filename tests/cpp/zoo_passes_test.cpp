// Every pass of fx::exec::pass_names() alone on every model of the zoo (models/zoo/*.onnx, made
// by models/generate.py) and models/sample.onnx: the graph lints, the outputs on seeded inputs
// equal the unchanged model's (or the code is unchanged when the pass says it did nothing), and
// the passes expected to fire on a model do.
#include <gtest/gtest.h>

#include <dirent.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>

#include "fx/exec.h"
#include "fx/exec/passes.h"
#include "fx/onnx.h"
#include "fx/pass_manager.h"
#include "zoo_util.h"

namespace {

std::vector<std::string> zoo_models(bool* present) {
  const std::string dir = std::string(FXWASM_MODELS_DIR) + "/zoo";
  DIR* d = opendir(dir.c_str());
  *present = d != nullptr;
  if (d) closedir(d);
  std::vector<std::string> out = fxtest::onnx_files(dir);
  out.push_back(std::string(FXWASM_MODELS_DIR) + "/sample.onnx");
  return out;
}

std::string stem(const std::string& path) {
  const size_t slash = path.rfind('/');
  std::string s = path.substr(slash + 1);
  return s.substr(0, s.rfind('.'));
}

[[maybe_unused]] long file_size(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return -1;
  std::fseek(f, 0, SEEK_END);
  const long n = std::ftell(f);
  std::fclose(f);
  return n;
}

TEST(ZooPasses, EveryPassAloneKeepsEveryModelsOutputs) {
  bool present = false;
  std::vector<std::string> models = zoo_models(&present);
  ASSERT_TRUE(present) << "models/zoo is absent: run scripts/setup.sh (it generates the zoo)";
#ifdef __EMSCRIPTEN__
  // resnet18/50, efficientnet_b0 and mobilenet_v2 (14-100 MB) take minutes to import and run in
  // wasm under node; the wasm run keeps the models under 10 MB (squeezenet1_1 and
  // shufflenet_v2_x1_0 among the CNNs), which still exercise every pass that fires on them.
  models.erase(std::remove_if(models.begin(), models.end(),
                              [](const std::string& p) { return file_size(p) > (10L << 20); }),
               models.end());
#endif
  // model -> pass -> nodes removed (fired) ; -1 = did not fire
  std::map<std::string, std::map<std::string, long>> fired;
  std::map<std::string, std::set<std::string>> pipeline;  // model -> passes that modified it
  for (const std::string& path : models) {
    SCOPED_TRACE(path);
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<fx::GraphModule> base = fx::onnx::load_model(path);
    const std::vector<fx::exec::Value> inputs = fxtest::seeded_inputs(*base);
    // shape_prop is an analysis (meta "tensor_meta" only); fuse-matmul-add reads it.
    fx::exec::shape_prop(*base, inputs);
    const std::vector<fx::exec::Value> want = fx::exec::run(*base, inputs);
    for (const std::string& pass : fx::exec::pass_names()) {
      SCOPED_TRACE(pass);
      std::unique_ptr<fx::GraphModule> gm = fx::copy_graph_module(*base);
      const std::string code = gm->code();
      const size_t nodes = gm->graph().size();
      bool modified = false;
      ASSERT_NO_THROW(modified = fx::exec::pass_by_name(pass)(*gm));
      ASSERT_NO_THROW(gm->graph().lint());
      if (!modified) {
        EXPECT_EQ(gm->code(), code) << "the pass said it changed nothing";
        fired[stem(path)][pass] = -1;
        continue;
      }
      EXPECT_NE(gm->code(), code) << "the pass said it changed the graph";
      fired[stem(path)][pass] = static_cast<long>(nodes) - static_cast<long>(gm->graph().size());
      std::vector<fx::exec::Value> got;
      ASSERT_NO_THROW(got = fx::exec::run(*gm, inputs));
      EXPECT_EQ(fxtest::compare_values(got, want), "");
    }
    // The whole pipeline (fold first: it turns Identity-of-initializer values into constants,
    // which the fusions need), to a fixed point.
    {
      SCOPED_TRACE("pipeline");
      std::unique_ptr<fx::GraphModule> gm = fx::copy_graph_module(*base);
      fx::PassManager pm;
      for (const char* p : {"fold", "cse", "dce", "fuse-conv-bn", "fuse-matmul-add", "fuse-gelu",
                            "fuse-layernorm", "dce"})
        pm.add(p, fx::exec::pass_by_name(p));
      pm.max_iterations(3);
      std::vector<fx::PassReport> reports;
      ASSERT_NO_THROW(reports = pm.run(*gm));
      for (const fx::PassReport& r : reports)
        if (r.modified) pipeline[stem(path)].insert(r.pass);
      std::vector<fx::exec::Value> got;
      ASSERT_NO_THROW(got = fx::exec::run(*gm, inputs));
      EXPECT_EQ(fxtest::compare_values(got, want), "");
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ zoo      ] %-20s %4zu nodes %5.2f s, alone:", stem(path).c_str(),
                base->graph().size(), s);
    for (const auto& [pass, n] : fired[stem(path)])
      if (n >= 0) std::printf(" %s(-%ld)", pass.c_str(), n);
    std::printf("; pipeline:");
    for (const std::string& p : pipeline[stem(path)]) std::printf(" %s", p.c_str());
    std::printf("\n");
  }

  // What must fire where (checked for the models present in this run). Alone, each pass sees
  // the import as is; in the pipeline, after fold.
  const std::vector<std::pair<std::string, std::string>> alone = {
      {"resnet18", "cse"},  // duplicate Identity nodes of shared initializers merge
      {"mobilenet_v2", "cse"},
      {"squeezenet1_1", "cse"},
      {"shufflenet_v2_x1_0", "cse"},
      {"gpt_block", "fuse-gelu"},
      {"gpt_block", "fuse-layernorm"},
      {"cnn_bn_train", "dce"},  // the unused running-stat outputs of training-mode BN
      {"resnet18", "fold"},
  };
  for (const auto& [model, pass] : alone) {
    auto m = fired.find(model);
    if (m == fired.end()) continue;
    EXPECT_GE(m->second.at(pass), 0) << pass << " did not fire alone on " << model;
  }
  const std::vector<std::pair<std::string, std::string>> in_pipeline = {
      // its LayerNorm biases are Identity nodes of initializers until fold turns them constant
      {"transformer_encoder", "fuse-layernorm"},
      {"gpt_block", "fuse-gelu"},
      // inference BatchNormalization after each Conv; its parameters are Identity nodes of
      // initializers, constants only after fold
      {"cnn_bn_eval", "fuse-conv-bn"},
  };
  for (const auto& [model, pass] : in_pipeline) {
    auto m = pipeline.find(model);
    if (m == pipeline.end()) continue;
    EXPECT_TRUE(m->second.count(pass)) << pass << " did not fire in the pipeline on " << model;
  }
  // Nothing fires on a model that has nothing to do.
  if (fired.count("mymodule")) {
    for (const auto& [pass, n] : fired["mymodule"]) {
      if (pass != "fold") {
        EXPECT_EQ(n, -1) << pass << " fired on mymodule";
      }
    }
  }
}

}  // namespace
