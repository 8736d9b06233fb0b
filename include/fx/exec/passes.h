// fx/exec/passes.h — passes over imported ONNX graphs (onnx.<Op> call_function nodes, initializers
// as get_attr), proven by running the graph before and after with fx::exec (equivalence_check).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "fx/exec.h"
#include "fx/pass_manager.h"

namespace fx::exec {

/// Folds every onnx.* node whose inputs are all constants (get_attr or omitted) into a new
/// buffer "_folded_<node>", read by a get_attr node; chains fold in one call.
bool fold_constants(GraphModule& gm);

/// Folds BatchNormalization (inference mode) into the Conv feeding it when the Conv has no
/// other user and every weight is a constant: W' = W * gamma / sqrt(var + eps) per output
/// channel, b' = (b - mean) * gamma / sqrt(var + eps) + beta.
bool fuse_conv_bn(GraphModule& gm);

/// ShapeProp for onnx.* graphs: runs the graph on `inputs` and records in every node's meta
/// "tensor_meta" = {'shape': (dims...), 'dtype': torch.<dtype>} (multi-output nodes: the first
/// output's).
void shape_prop(GraphModule& gm, const std::vector<Value>& inputs);

/// What infer_shapes is told about the graph inputs.
struct ShapeInferOptions {
  /// Shapes of inputs by placeholder name (or the input's ONNX name): per dim an Int, a String
  /// (a named size such as "batch") or None (unknown). Inputs not listed keep the shape their
  /// ONNX type declares (meta "onnx_type").
  std::map<std::string, std::vector<Argument>> input_shapes;
};

/// A node infer_shapes could not type, and why.
struct ShapeInferGap {
  std::string node;
  std::string target;
  std::string reason;
};

struct ShapeInferResult {
  size_t total = 0;  ///< nodes other than the output
  size_t typed = 0;  ///< of them, with tensor_meta (multi-output nodes: on their getitem users)
  std::vector<ShapeInferGap> gaps;
};

/// ShapeProp without data: records meta "tensor_meta" = {'shape': (dims...), 'dtype': ...} on
/// every node whose element type and rank follow from the inputs' declared types and the ops'
/// shape rules (ONNX's operator specification). A dim is an int, a size expression over the
/// inputs' named sizes ("batch", "seq + 1", "4*seq"), or None when it depends on data.
/// Constants, and the small tensors computed only from them, run on the executor's ops, so
/// shape arithmetic (Shape -> Gather -> Concat -> Reshape) stays exact; nothing large is
/// computed. A node that cannot be typed loses any earlier tensor_meta and is listed in `gaps`
/// with the reason (an op without a rule, a rank known only at run time...).
ShapeInferResult infer_shapes(GraphModule& gm, const ShapeInferOptions& options = {});

/// MatMul(A, W) + B -> Gemm(A, W, B) where A is 2-D (from tensor_meta: run shape_prop first),
/// W a constant 2-D matrix, B a constant broadcastable to the output, and the MatMul has no other
/// user.
bool fuse_matmul_add(GraphModule& gm);

/// Re-fuses decomposed GELU: x * 0.5 * (1 + Erf(x / sqrt(2))) in the orders torch exports it
/// (Div by sqrt(2) or Mul by 1/sqrt(2); the 0.5 applied before or after) -> onnx.Gelu.
bool fuse_gelu(GraphModule& gm);

/// Re-fuses decomposed LayerNorm over the last axis: ReduceMean, Sub, Pow 2, ReduceMean, Add eps,
/// Sqrt, Div, Mul scale, Add bias -> onnx.LayerNormalization(x, scale, bias, epsilon = eps).
bool fuse_layer_norm(GraphModule& gm);

/// An fx::EquivalenceCheck that runs both modules on `inputs` and compares every output
/// (|a - b| <= atol + rtol * |b|); on a difference it names the output, the largest error and the
/// first node (in the "before" graph's order, among nodes both graphs share by name) whose
/// value differs.
EquivalenceCheck equivalence_check(std::vector<Value> inputs, float rtol = 1e-4f,
                                   float atol = 1e-5f);

/// Adds this layer's passes to the pass registry (fx::register_pass), after the core's dce, cse
/// and remove-dropout: fold, fuse-conv-bn, fuse-matmul-add, fuse-gelu, fuse-layernorm. Idempotent
/// and thread-safe; pass_names() and pass_by_name() below call it.
void register_onnx_passes();

/// fx::registered_pass_names() once this layer's passes are registered: the names the CLI and
/// the JS API (fx.passNames()) run.
std::vector<std::string> pass_names();
/// fx::pass_by_name(name) once this layer's passes are registered.
PassFn pass_by_name(const std::string& name);

}  // namespace fx::exec
