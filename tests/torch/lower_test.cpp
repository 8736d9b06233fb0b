// ONNX models lowered to torch targets (fx::torch_codegen::lower) run on fxwasm's LibTorch
// Interpreter with the outputs fxwasm's own executor gives for the ONNX graph.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "fx/exec.h"
#include "fx/onnx.h"
#include "fx/torch/torch.h"
#include "fx/torch_codegen.h"

namespace {

// Seeded inputs from the placeholders' ONNX types (dynamic dims = `dynamic`), as LibTorch
// tensors and as executor values over the same bytes.
void inputs_for(const fx::GraphModule& gm, int64_t dynamic, std::vector<fx::torch::Value>& torch_in,
                std::vector<fx::exec::Value>& exec_in) {
  ::torch::manual_seed(7);
  for (fx::Node* p : gm.graph().nodes()) {
    if (p->op() != fx::Opcode::Placeholder) continue;
    std::vector<int64_t> dims;
    fx::Dtype dtype = fx::Dtype::Float32;
    for (const auto& [k, v] : p->meta().at(fx::onnx::meta::kType).dict_items()) {
      if (k.to_string() == "dtype") dtype = v.to_dtype();
      if (k.to_string() == "shape")
        for (const fx::Argument& d : v.elements())
          dims.push_back(d.kind() == fx::Argument::Kind::Int && d.to_int() >= 0 ? d.to_int()
                                                                                : dynamic);
    }
    ASSERT_EQ(dtype, fx::Dtype::Float32) << p->name();
    at::Tensor x = ::torch::randn(dims).contiguous();
    auto bytes = std::make_shared<std::vector<uint8_t>>(
        static_cast<const uint8_t*>(x.data_ptr()),
        static_cast<const uint8_t*>(x.data_ptr()) + x.nbytes());
    torch_in.emplace_back(x);
    exec_in.push_back(fx::exec::Value::wrap(dtype, dims, bytes));
  }
}

std::vector<at::Tensor> flat_tensors(const fx::torch::Value& v) {
  if (v.is_tensor()) return {v.tensor()};
  std::vector<at::Tensor> out;
  for (const fx::torch::Value& e : v.elements()) out.push_back(e.tensor());
  return out;
}

TEST(TorchLowered, ZooModelsRunOnTheLibTorchInterpreter) {
  for (const char* name :
       {"cnn_bn_eval", "cnn_bn_train", "cnn_dynamic", "efficientnet_b0", "gpt_block", "lstm", "mlp",
        "mobilenet_v2", "mymodule", "resnet18", "shufflenet_v2_x1_0", "squeezenet1_1",
        "transformer_dynamic", "transformer_encoder"}) {
    SCOPED_TRACE(name);
    auto gm = fx::onnx::load_model(std::string("models/zoo/") + name + ".onnx");
    auto lowered = fx::torch_codegen::lower(*gm);
    for (int64_t dynamic : {1, 3}) {  // the dynamic models at two sizes
      std::vector<fx::torch::Value> torch_in;
      std::vector<fx::exec::Value> exec_in;
      inputs_for(*gm, dynamic, torch_in, exec_in);
      const std::vector<fx::exec::Value> want = fx::exec::run(*gm, exec_in);
      const std::vector<at::Tensor> got =
          flat_tensors(fx::torch::Interpreter(*lowered).run(torch_in));
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        const at::Tensor w = ::torch::from_blob(const_cast<float*>(want[i].data<float>()),
                                                want[i].shape(), ::torch::kFloat);
        ASSERT_EQ(got[i].sizes(), w.sizes()) << "output " << i;
        EXPECT_TRUE(::torch::allclose(got[i], w, /*rtol=*/1e-3, /*atol=*/1e-4))
            << "output " << i << ": max |diff| " << (got[i] - w).abs().max().item<float>();
      }
    }
  }
}

}  // namespace
