// Uses each installed component once: builds a graph (core), runs a pass by name from the
// registry (core + exec's passes), exports and re-imports it as ONNX (onnx) and runs it (exec).
// Prints the generated code and the result; exits non-zero if anything disagrees.
#include <cstdio>
#include <memory>

#include "fx/exec.h"
#include "fx/exec/passes.h"
#include "fx/fx.h"
#include "fx/onnx.h"
#include "fx/torch_codegen.h"

int main() {
  auto g = std::make_unique<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* two = g->call_function(fx::fn("onnx.Add"), {x, x});
  g->call_function(fx::fn("onnx.Relu"), {x});  // unused: dce removes it
  g->output(g->call_function(fx::fn("onnx.Relu"), {two}));
  auto gm = std::make_unique<fx::GraphModule>(nullptr, std::move(g), "Consumer");
  if (!fx::exec::pass_by_name("dce")(*gm)) return std::puts("dce changed nothing"), 1;
  std::printf("%s\n", gm->code().c_str());

  const std::vector<uint8_t> bytes = fx::onnx::export_model(*gm);
  std::unique_ptr<fx::GraphModule> back = fx::onnx::import_model(bytes);
  const fx::exec::Value in = fx::exec::Value::from_f32({3}, {-1.0f, 0.5f, 2.0f});
  const std::vector<float> out = fx::exec::run(*back, {in})[0].to_f32();
  std::printf("relu(x + x) = [%g, %g, %g]\n", out[0], out[1], out[2]);
  if (out != std::vector<float>{0.0f, 1.0f, 4.0f}) return 1;

  // The same model as PyTorch code (torch_codegen).
  std::unique_ptr<fx::GraphModule> torch_gm = fx::torch_codegen::lower(*back);
  std::printf("%s\n", torch_gm->code().c_str());
  return torch_gm->code().find("torch.relu") != std::string::npos ? 0 : 1;
}
