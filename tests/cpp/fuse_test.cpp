// fx::fuse_conv_bn_modules against torch.fx 1.13's torch.fx.experimental.optimization.fuse
// (goldens written by scripts/gen_fuse_goldens.py from seeded eval-mode modules): the fused
// module's repr, graph text and code byte for byte, and every fused tensor against torch's values.
#include <gtest/gtest.h>

#include <cmath>

#include "fx/fx.h"
#include "golden_graph_util.h"

namespace {

class FuseGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(FuseGolden, MatchesTorch113) {
  auto sec = fxtest::sections(
      fxtest::read_file(std::string(FXWASM_GOLDEN_DIR) + "/fuse/" + GetParam() + ".txt"));
  auto root = fxtest::build_modules(sec.at("modules"), sec.at("tensors"));
  fx::GraphModule gm(root.get(), fxtest::build_graph(sec.at("graph")));
  const std::string before = gm.repr();
  auto fused = fx::fuse_conv_bn_modules(gm);
  EXPECT_EQ(gm.repr(), before);  // the input is not changed
  EXPECT_EQ(fused->repr(), sec.at("repr"));
  EXPECT_EQ(fused->graph().str(), sec.at("fused.graph"));
  EXPECT_EQ(fused->code(), sec.at("fused.code"));
  fused->graph().lint();

  // torch's fused tensors, numerically: the same fp32 operations in the same order.
  auto want = fxtest::build_modules(sec.at("modules"), sec.at("fused_tensors"));
  size_t compared = 0, exact = 0;
  for (const auto& [name, t] : want->named_parameters()) {
    const fx::Tensor* got = fused->get_tensor(name);
    ASSERT_NE(got, nullptr) << name;
    EXPECT_EQ(got->shape, t->shape) << name;
    std::vector<float> a = fxtest::floats_of(*got), b = fxtest::floats_of(*t);
    ASSERT_EQ(a.size(), b.size()) << name;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_NEAR(a[i], b[i], 1e-6f * std::max(1.f, std::fabs(b[i]))) << name << "[" << i << "]";
      exact += a[i] == b[i];
    }
    compared += a.size();
  }
  EXPECT_GT(compared, 0u);
  // Same fp32 operations in the same order as torch: bit-exact.
  EXPECT_EQ(exact, compared) << exact << " of " << compared << " bit-exact";
}

INSTANTIATE_TEST_SUITE_P(Goldens, FuseGolden, ::testing::ValuesIn(fxtest::golden_index("fuse")),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(FuseModules, MissingRunningVarNamesTheBatchNormNode) {
  auto root = std::make_shared<fx::Module>();
  auto conv = std::make_shared<fx::Module>("Conv2d", "1, 1, kernel_size=(1, 1), stride=(1, 1)");
  conv->register_parameter("weight", fxtest::float_tensor({1, 1, 1, 1}, {2.f}));
  auto bn = std::make_shared<fx::Module>("BatchNorm2d", "1, eps=1e-05, momentum=0.1");
  bn->register_buffer("running_mean", fxtest::float_tensor({1}, {0.f}));
  root->add_module("conv", conv);
  root->add_module("bn", bn);
  auto g = std::make_unique<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  g->output(g->call_module("bn", {g->call_module("conv", {x})}));
  fx::GraphModule gm(root.get(), std::move(g));
  try {
    fx::fuse_conv_bn_modules(gm);
    FAIL() << "expected an error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Value);
    EXPECT_EQ(e.node(), "bn");
  }
  // with the variance the fusion works: w' = 2 / sqrt(4 + 1e-5), b' = 0
  bn->register_buffer("running_var", fxtest::float_tensor({1}, {4.f}));
  auto fused = fx::fuse_conv_bn_modules(gm);
  EXPECT_EQ(fused->graph().find_node("bn"), nullptr);
  EXPECT_FLOAT_EQ(fxtest::floats_of(*fused->get_tensor("conv.weight"))[0],
                  2.f / std::sqrt(4.f + 1e-5f));
  EXPECT_EQ(fxtest::floats_of(*fused->get_tensor("conv.bias"))[0], 0.f);
}

}  // namespace
