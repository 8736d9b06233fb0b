// fx::onnx::check_schemas (ONNX's op schemas from onnx.defs, src/onnx/schemas.inc): every zoo
// model is clean as imported and after each pass; graphs built by hand that onnx.checker would
// refuse are named by node and rule, and export_model refuses them with a SchemaError.
#include <gtest/gtest.h>

#include <dirent.h>

#include <memory>
#include <string>
#include <vector>

#include "fx/exec.h"
#include "fx/exec/passes.h"
#include "fx/fx.h"
#include "fx/onnx.h"

namespace {

using fx::Argument;

std::vector<std::string> zoo_files() {
  const std::string dir = std::string(FXWASM_MODELS_DIR) + "/zoo";
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".onnx") == 0 && n != "resnet50.onnx")
        files.push_back(dir + "/" + n);
    }
    closedir(d);
  }
  files.push_back(std::string(FXWASM_MODELS_DIR) + "/sample.onnx");
  return files;
}

std::string describe(const std::vector<fx::onnx::SchemaProblem>& ps) {
  std::string s;
  for (const auto& p : ps) s += "\n  " + p.node + " (" + p.target + "): " + p.rule;
  return s;
}

// x -> onnx.<op>(args, kwargs) -> output, at `opset`.
std::unique_ptr<fx::GraphModule> one_op(const std::string& op, std::vector<Argument> extra,
                                        fx::Kwargs kwargs, int64_t opset = 13) {
  auto g = std::make_unique<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  std::vector<Argument> args{Argument(x)};
  for (Argument& a : extra) args.push_back(std::move(a));
  fx::Node* n = g->call_function(fx::fn("onnx." + op), std::move(args), std::move(kwargs));
  g->output(Argument(n));
  auto gm = std::make_unique<fx::GraphModule>(nullptr, std::move(g));
  gm->meta().set(fx::onnx::meta::kOpsetImport,
                 Argument::dict({{"", Argument(static_cast<long long>(opset))}}));
  return gm;
}

std::string first_rule(const fx::GraphModule& gm, int64_t opset = 0) {
  const auto ps = fx::onnx::check_schemas(gm, opset);
  return ps.empty() ? std::string() : ps.front().node + ": " + ps.front().rule;
}

TEST(OnnxSchemas, ZooModelsAreCleanAsImportedAndAfterEveryPass) {
  const std::vector<std::string> files = zoo_files();
  ASSERT_GT(files.size(), 10u) << "run scripts/setup.sh (it generates the zoo)";
  const std::vector<std::string> passes = fx::exec::pass_names();
  for (const std::string& f : files) {
    auto gm = fx::onnx::load_model(f);
    EXPECT_EQ(describe(fx::onnx::check_schemas(*gm)), "") << f;
    for (const std::string& p : passes) {
      auto copy = fx::onnx::import_model(fx::onnx::export_model(*gm));
      fx::exec::pass_by_name(p)(*copy);
      EXPECT_EQ(describe(fx::onnx::check_schemas(*copy)), "") << f << " after " << p;
    }
  }
}

TEST(OnnxSchemas, AttributesInputsAndOutputsAreCheckedAgainstTheOpsetsSchema) {
  // Clip's opset-6 form (min/max attributes) in an opset-13 model: what onnxruntime refuses as
  // "Unrecognized attribute: min for operator Clip".
  auto clip6 = one_op("Clip", {}, fx::Kwargs{{"min", Argument(0.0)}, {"max", Argument(6.0)}});
  EXPECT_EQ(first_rule(*clip6),
            "clip: attribute 'min' is not in the schema of Clip-13 (opset 13), which has no "
            "attributes");
  EXPECT_EQ(fx::onnx::check_schemas(*clip6).size(), 2u);
  EXPECT_EQ(first_rule(*clip6, 6), "");  // the same node is right at opset 6
  try {
    fx::onnx::export_model(*clip6);
    FAIL() << "exported a Clip with min/max attributes at opset 13";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Schema);
    EXPECT_EQ(e.node(), "clip");
    EXPECT_NE(std::string(e.what()).find("node 'clip' (onnx.Clip): attribute 'min'"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("and 1 more"), std::string::npos) << e.what();
  }

  // A literal where a tensor input goes.
  auto clip_lit = one_op("Clip", {Argument(0.0), Argument(6.0)}, {});
  EXPECT_EQ(first_rule(*clip_lit),
            "clip: input 1 of Clip-13 (opset 13) must be a tensor (a Node) or None, got float 0.0");
  // Omitted optional inputs are fine.
  EXPECT_EQ(first_rule(*one_op("Clip", {Argument(), Argument()}, {})), "");

  EXPECT_EQ(first_rule(*one_op("Relu", {Argument(), Argument()}, {})),
            "relu: Relu-13 (opset 13) takes 1 inputs, the node gives 3");
  EXPECT_EQ(first_rule(*one_op("Concat", {}, {})),
            "concat: Concat-13 (opset 13) requires attribute 'axis' (INT)");
  EXPECT_EQ(first_rule(*one_op("Concat", {}, fx::Kwargs{{"axis", Argument(1.5)}})),
            "concat: attribute 'axis' of Concat-13 (opset 13) must be INT, got float 1.5");
  EXPECT_EQ(first_rule(*one_op("Transpose", {}, fx::Kwargs{{"perm", Argument::list({1, 0})}})), "");
  EXPECT_EQ(first_rule(*one_op("Transpose", {},
                               fx::Kwargs{{"perm", Argument::list({Argument(1), Argument("a")})}})),
            "transpose: attribute 'perm' of Transpose-13 (opset 13) must be INTS, got list [1, "
            "'a']");
  // Ops onnx 1.12's defs do not have (newer ones, other domains) are the executor's business.
  EXPECT_EQ(first_rule(*one_op("Gelu", {}, {})), "");
  // An op newer than the opset is left to the export (it raises the opset or decomposes).
  EXPECT_EQ(first_rule(*one_op("LayerNormalization", {Argument()}, {}, 13)), "");

  // Declared outputs.
  auto split = one_op("Relu", {}, {});
  for (fx::Node* n : split->graph().nodes())
    if (n->op() == fx::Opcode::CallFunction)
      n->meta().set(fx::onnx::meta::kOutputs, Argument::list({"a", "b"}));
  EXPECT_EQ(first_rule(*split), "relu: Relu-13 (opset 13) has 1 outputs, the node declares 2");
}

}  // namespace
