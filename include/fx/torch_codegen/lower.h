// fx::torch_codegen::lower — an imported ONNX GraphModule (onnx.<Op> call_function nodes,
// initializers as get_attr) turned into an equivalent GraphModule whose targets are PyTorch's,
// so that its generated code (gm.code(), byte-identical to torch.fx's) runs in PyTorch:
//
//   std::unique_ptr<fx::GraphModule> onnx_gm = fx::onnx::import_model(bytes);
//   for (const auto& gap : fx::torch_codegen::lowering_coverage(*onnx_gm)) ...;  // before
//   std::unique_ptr<fx::GraphModule> torch_gm = fx::torch_codegen::lower(*onnx_gm);
//   std::cout << torch_gm->code();   // conv1 = self.conv1(input_1);  relu = torch.relu(conv1)
//
// What it produces:
//   Conv/ConvTranspose  -> call_module of torch.nn.Conv{1,2,3}d / ConvTranspose{1,2,3}d whose
//                          parameters are the ONNX weights, at the path their names give
//                          ("features.0.weight" -> module "features.0")
//   Gemm, MatMul (+Add) -> torch.nn.Linear where the weight is a constant matrix
//   BatchNormalization  -> torch.nn.BatchNorm{1,2,3}d; LayerNormalization -> torch.nn.LayerNorm
//   elementwise ops     -> operator.add/mul/..., torch.relu, torch.sigmoid, ...
//   shape arithmetic    -> Python ints: Shape(x) -> x.size(i) for the dims that change with the
//                          input (found by running the model at two sizes of every dynamic
//                          input dim), literals for static ones; so Reshape(x, Concat(...))
//                          becomes x.reshape([size, -1, 64]) and keeps working at other sizes
//   other constants     -> parameters (float initializers) and buffers of the root module; a
//                          one-element constant operand becomes a Python literal
//
// Ops are converted by handlers keyed by (op type, since_version): the newest handler at or
// below the model's opset converts a node. lowering_coverage() lists, before converting, every
// node no handler takes; lower() refuses such a model with fx::Error(Unsupported) naming the
// node, and throws the same for attribute values a handler does not support (never a silent
// `torch.ops.unknown`).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fx/exec.h"
#include "fx/graph_module.h"

namespace fx::torch_codegen {

/// A node lower() cannot convert, found before converting.
struct LoweringGap {
  std::string node;    ///< the FX node's name
  std::string op;      ///< the ONNX op type ("Loop")
  int64_t opset = 0;   ///< the model's opset for the op's domain
  std::string reason;  ///< "no handler for Loop at opset 13", ...
};

/// Every node of `gm` that no handler converts at the model's opset, in graph order. Empty when
/// lower() can convert the whole graph (it may still refuse an unsupported attribute value).
std::vector<LoweringGap> lowering_coverage(const GraphModule& gm);

/// The (op type, since_version) pairs that have a handler, sorted: what the lowering knows.
std::vector<std::pair<std::string, int64_t>> lowering_handlers();

struct LowerOptions {
  /// Sizes every dynamic input dimension takes in the two runs that tell the dims that depend
  /// on the input apart from static ones. They must be sizes the model accepts.
  int64_t probe_sizes[2] = {2, 3};
  /// Inputs to probe with (one per placeholder), for a model whose inputs have no dynamic dims:
  /// when the model only runs on meaningful values (indices into a dim, a valid Range), the
  /// default zero/one fills may not. Ignored when an input has a dynamic dim.
  std::vector<exec::Value> example_inputs;
  /// The class name of the result ("OnnxModule" when empty: the imported module's).
  std::string class_name;
};

/// The converted module (see the top of this file). `gm` is not changed. Throws
/// fx::Error(Unsupported) naming the node for what cannot be converted, and fx::Error as
/// fx::exec::run does if the model cannot be run at the probe sizes.
std::unique_ptr<GraphModule> lower(const GraphModule& gm, const LowerOptions& options = {});

}  // namespace fx::torch_codegen
