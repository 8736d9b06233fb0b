// Internal to the lowering's handler files (lower_*.cpp): the helpers they share, and the
// functions that add each file's handlers to the table (lower.cpp's handler_table()).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "torch_codegen/lower_internal.h"

namespace fx::torch_codegen {

/// Python's repr of a tuple of ints: "(3,)", "(3, 3)".
std::string py_tuple(const std::vector<int64_t>& v);
/// A list argument of int literals.
Argument int_list(const std::vector<int64_t>& v);
/// The shortest decimal that reads back as the same float32 (ONNX float attributes are float32:
/// 1e-05 rather than 9.999999747378752e-06).
double float32_value(double v);
/// A copy of a constant with another shape (the same bytes), for a module's parameter.
Tensor reshaped(const Tensor& t, std::vector<int64_t> shape);
/// A [rows, cols] constant transposed into a new tensor.
Tensor transposed_2d(const Tensor& t);
Tensor scalar_tensor_i64(int64_t v);
Tensor zeros_f32(int64_t n);
bool is_float(Dtype d);
/// The constant tensor an old-graph argument reads, through Identity nodes, or null.
const Tensor* old_constant(const GraphModule& gm, const Argument& a);
/// Whether output `k` (through an operator.getitem) of `n` is read by anything.
bool output_used(const Node& n, int64_t k);

/// The axes of a reduction/Squeeze/Unsqueeze: input `input` from opset `since_input` on (it must
/// be constant), the attribute before; empty when absent.
std::vector<int64_t> axes_of(Lowerer& L, const Node& n, size_t input, int64_t since_input);

/// `a * k` and `a // k` of shape arithmetic: literals when `a` is, else an operator node.
SymInt sym_mul(Lowerer& L, const SymInt& a, int64_t k);
SymInt sym_add(Lowerer& L, const SymInt& a, int64_t k);
SymInt sym_div(Lowerer& L, const SymInt& a, int64_t k);

/// The pairs of an ONNX pads list [b0, b1, ..., e0, e1, ...] over the spatial dims.
struct Pads {
  std::vector<int64_t> begin, end;
  bool symmetric() const { return begin == end; }
  /// torch.nn.functional.pad's order: the last dim first.
  std::vector<int64_t> torch_order() const;
};
/// Conv/pool pads from the attributes, with auto_pad resolved on the static input sizes.
Pads spatial_pads(Lowerer& L, const Node& n, const LVal& x, const std::vector<int64_t>& kernel,
                  const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations);

// Each handler file's entries (op type, since_version, handler).
void add_elementwise_handlers(std::vector<HandlerEntry>& table);
void add_shape_handlers(std::vector<HandlerEntry>& table);
void add_nn_handlers(std::vector<HandlerEntry>& table);
void add_other_handlers(std::vector<HandlerEntry>& table);
void add_index_handlers(std::vector<HandlerEntry>& table);
void add_layout_handlers(std::vector<HandlerEntry>& table);
void add_control_handlers(std::vector<HandlerEntry>& table);
void add_layers_handlers(std::vector<HandlerEntry>& table);
void add_quant_handlers(std::vector<HandlerEntry>& table);
void add_spatial_handlers(std::vector<HandlerEntry>& table);
void add_math_handlers(std::vector<HandlerEntry>& table);

/// Resize (or Upsample) written out in torch ops, one interpolation per axis: every mode and
/// coordinate mode, runtime scales or sizes (lower_spatial.cpp).
void resize_explicit(Lowerer& L, const Node& n, bool upsample);

}  // namespace fx::torch_codegen
