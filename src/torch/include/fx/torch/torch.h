// fxwasm's LibTorch layer (library fxtorch, CMake option FXWASM_WITH_TORCH): write a LibTorch
// module once, run it eagerly, trace it into an fx::GraphModule exactly as torch.fx 1.13 traces
// the equivalent Python module, and run the GraphModule on LibTorch.
//
//   #include "fx/torch/torch.h"
//   using fx::torch::Value; using fx::torch::kw; using fx::torch::call;
//
//   struct Net : fx::torch::Module {
//     Net() : Module("Net") { fc = register_module("fc", torch::nn::Linear(4, 2)); }
//     Value forward(Value x) override { return fx::torch::F::relu(call(fc, x + 1)); }
//     torch::nn::Linear fc{nullptr};
//   };
//
//   auto net = std::make_shared<Net>();
//   Value eager = (*net)({torch::randn({3, 4})});                   // LibTorch, now
//   auto gm = fx::torch::symbolic_trace(net);                       // fx::GraphModule
//   gm->code();  // "def forward(self, x):\n    add = x + 1;  x = None\n    fc = self.fc(add)..."
//   Value same = fx::torch::Interpreter(*gm).run({torch::randn({3, 4})});
//   fx::torch::ShapeProp(*gm).propagate({torch::randn({3, 4})});   // node meta "tensor_meta"
//
// value.h: the Value/Proxy type and the Python-level calls (operators, torch.*, tensor methods,
// torch.nn.functional). tracer.h: Module, call(), Tracer, symbolic_trace, concrete_args.
// interpreter.h: OpRegistry, Interpreter, Transformer, ShapeProp. modules.h: the fx::Module
// mirror of LibTorch modules and tensor conversions. Errors are fx::Error (TraceError for
// data-dependent control flow), never crashes.
#pragma once

#include "fx/torch/interpreter.h"
#include "fx/torch/modules.h"
#include "fx/torch/tracer.h"
#include "fx/torch/value.h"
