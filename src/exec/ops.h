// Internal to fx::exec: op registration and helpers shared by the op files.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fx/exec.h"
#include "fx/limits.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/tensor_ops.h"

namespace fx::exec {

// Each ops_*.cpp registers its ops here; the registry calls them once, on first use (static
// registrars in a static library would be dropped by the linker).
void register_elementwise_ops();
void register_nn_ops();
void register_shape_ops();
void register_indexing_ops();
void register_layout_ops();
void register_layer_ops();
void register_control_ops();
void register_quant_ops();
void register_loss_ops();
void register_rnn_ops();
void register_random_ops();
void register_math_ops();
void register_spatial_ops();    // ops_spatial.cpp
void register_select_ops();     // ops_select.cpp
void register_detection_ops();  // ops_detection.cpp
void register_feature_ops();    // ops_features.cpp
/// MaxPool/AveragePool in any number of spatial dims and element type, with MaxPool's Indices
/// output (ops_spatial.cpp); ops_nn.cpp's float32 1-D/2-D kernels hand it everything else.
void pool_nd(OpCall& c, bool is_max);
/// Registration used by those functions (does not trigger the first-use registration).
void register_builtin(const std::string& target, OpFn fn);
/// Sequences, optionals, Loop, Scan (ops_sequence.cpp, ops_control.cpp): register_builtin for
/// an op that may take sequence/optional inputs; the executor gives every other op tensors only.
void register_value_op(const std::string& target, OpFn fn);
void register_sequence_ops();
/// String tensors (ops_string.cpp): StringNormalizer; Cast to and from STRING.
void register_string_ops();
Value cast_strings(const OpCall& c, const Value& v, Dtype dtype);
/// Marks an op as taking string tensors; the executor gives every other op none.
void mark_takes_strings(const std::string& target);
bool takes_strings(const Node& n);
/// Whether n's op was registered with register_value_op.
bool takes_non_tensors(const Node& n);
/// Sub-tensor `index` of x along `axis` (that axis removed), and tensors of one shape stacked on
/// a new `axis` (sizes checked): Loop/Scan slices and scan outputs (ops_sequence.cpp).
Value take_index(const OpCall& c, const Value& x, int64_t axis, int64_t index);
Value stack_values(const OpCall& c, const std::vector<Value>& values, int64_t axis);

/// Row-major strides (in elements) of a shape.
inline std::vector<int64_t> strides_of(const std::vector<int64_t>& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t d = static_cast<int64_t>(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

/// Fails with fx::Error(Unsupported) naming `what` unless `v` is float32.
inline void need_f32(const OpCall& c, const Value& v, const char* what) {
  if (v.dtype() != Dtype::Float32)
    c.unsupported(std::string(what) + " of element type " + dtype_name(v.dtype()));
}

/// Normalises an axis in [-rank, rank) to [0, rank), or fails naming the attribute.
int64_t normalize_axis(const OpCall& c, int64_t axis, int64_t rank, const char* what);

/// The first element of `v` (an input ONNX requires to be a scalar or one value: an axis, a
/// count, a bound) as int64 / float, or an error naming the node when `v` is empty.
int64_t first_i64(const OpCall& c, const Value& v);
float first_f32(const OpCall& c, const Value& v);

/// The element type of an ONNX TensorProto.DataType code, or nullptr (complex, unknown codes).
const Dtype* onnx_dtype(int64_t code);

/// A new value of `shape` filled with zero bytes.
Value zeroed_value(Dtype dtype, std::vector<int64_t> shape);

/// The `shape` elements of `dtype` at byte `offset` of `whole` (a tensor new_value made, which
/// the slice keeps alive; checked to lie inside it), to be written once by the op that gets it.
Value value_slice(const Value& whole, size_t offset, Dtype dtype, std::vector<int64_t> shape);
/// `parts` back to back as one value of `shape`, without copying, when they are consecutive
/// slices of one buffer, in order (value_slice); else an undefined value. The caller checks that
/// `shape` holds exactly their elements in that order (a concat whose outer size is 1).
Value joined_value(const std::vector<const Value*>& parts, std::vector<int64_t> shape);
/// While set, the next new_value of exactly `hint`'s dtype and shape returns `hint` (once) instead
/// of new memory: the executor points an op's output at its slice of a Concat's result. Null
/// clears it.
void set_output_hint(const Value* hint);
/// How many Concat results were joined in place on this thread (tests).
size_t joined_concat_count();

/// `v` converted to `dtype` (numeric static_cast; to bool: != 0).
Value cast_value(const OpCall& c, const Value& v, Dtype dtype);
/// `x` reduced over `axes` (normalised, sorted) for every numeric type and float16: float32 by
/// the float32 kernel, the others in double (ops_math.cpp).
Value reduce_typed(const OpCall& c, kernels::ReduceOp op, const Value& x,
                   const std::vector<int64_t>& axes, bool keepdims);

/// The get_attr node behind `a` (through onnx.Identity nodes, which exporters put in front of
/// shared initializers), or null when `a` is not a constant.
const Node* constant_source(const Argument& a);
/// The loaded tensor behind `a` (constant_source), or null.
const Tensor* constant_tensor(const GraphModule& gm, const Argument& a);
/// Whether input i is a constant (constant_source).
bool is_constant_input(const OpCall& c, size_t i);
/// What `derive` computes from the constant `constant` (packed weights), computed once per
/// (buffer, key) and reused while the buffer lives (values never change their bytes).
/// release_cached_memory() drops it all.
std::shared_ptr<const void> derived_from_constant(
    const Value& constant, const std::vector<int64_t>& key,
    const std::function<std::shared_ptr<const void>()>& derive);
void release_constant_cache();
/// Input i, when it is a constant, packed once as sgemm's right operand op(B) (K x N, B's row
/// stride ld), shared with every later run; null when the input is not a constant.
std::shared_ptr<const kernels::PackedOperand> packed_right_operand(const OpCall& c, size_t i,
                                                                   bool trans, int64_t K, int64_t N,
                                                                   int64_t ld);

/// A 2-D float32 weight kept only in its GEMM-packed form (prepack_weights): the module's tensor
/// reads it back on demand (export, inspection), and the plan hands it to MatMul/Gemm as a Value
/// without bytes (Value::packed_weight).
struct PackedWeight {
  std::shared_ptr<const kernels::PackedOperand> operand;  // op(B), K x N
  bool trans = false;                                     // B is N x K (Gemm's transB)
  /// B's bytes, bit for bit what was packed.
  Bytes unpack() const;
};
/// The packed weight a module tensor gave way to (prepack_weights), or null.
std::shared_ptr<const PackedWeight> packed_weight_of(const Tensor& t);
/// Whether every user of the get_attr node `n` takes it as B of a MatMul, or of a Gemm whose
/// transB is w.trans: then runs may be handed the packed weight alone.
bool takes_packed_weight(const Node& n, const PackedWeight& w);

/// A LayerNormalization over the last axis decomposed as exporters write it:
/// mean = ReduceMean(x); d = x - mean; var = ReduceMean(d ^ 2); (d / Sqrt(var + eps)) * scale +
/// bias with constant 1-D scale and bias. Found from its Div node (fuse-layernorm and the
/// executor).
struct LayerNormMatch {
  Node* x = nullptr;
  Argument scale, bias;
  double epsilon = 0.0;
  std::vector<Node*> interior;  // mean, d, d^2, var, var + eps, sqrt, quotient, scaled
  Node* result = nullptr;       // the final Add
};
/// `rank`: the rank of x if known (the executor), else -1 (read from shape metadata).
std::optional<LayerNormMatch> match_layer_norm(const GraphModule& gm, Node* div, int64_t rank = -1);

/// A GELU decomposed as exporters write it (the Erf form): x / sqrt(2) (or x * (1 / sqrt(2))),
/// Erf, + 1, then * x and * 0.5 in either order, every intermediate used once. Found from its Erf
/// node (fuse-gelu and the executor). `exact`: the constants must be float32 and equal to the
/// float values (the executor); else within 1e-4 relative.
struct GeluMatch {
  Node* x = nullptr;
  std::vector<Node*> interior;  // the scaling, Erf, Add, and the first of the two products
  Node* result = nullptr;       // the last Mul
  int64_t constant_rank = 0;    // the largest rank of the scalar constants (exact matches)
};
std::optional<GeluMatch> match_gelu(const GraphModule& gm, Node* erf, bool exact);

/// LayerNormalization's optional outputs Mean and InvStdDev (shape x.shape[:axis] + 1s), pushed
/// when the node declares them (ops_layers.cpp).
void layer_norm_stats(OpCall& c, const Value& x, int64_t axis, float epsilon);

/// "float32[1, 3]" for every input, comma separated (error messages).
std::string describe_inputs(const OpCall& c);

/// a + b / a * b for an output size an op computes from data (pads, repeats, a Range's count),
/// or fx::Error(Resource) naming the node when int64 would overflow. Allocation then checks the
/// result against fx::limits() (new_value).
[[noreturn]] inline void size_overflow(const OpCall& c, const char* what) {
  throw Error(ErrorKind::Resource,
              "node '" + c.node.name() + "' (" + c.node.target().pretty() + "): " + what +
                  " overflows int64 (" + describe_inputs(c) + ")",
              c.node.name());
}
inline int64_t checked_add(const OpCall& c, int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) size_overflow(c, what);
  return r;
}
inline int64_t checked_mul(const OpCall& c, int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) size_overflow(c, what);
  return r;
}

/// One node's parsed attributes, kept by the executor's plan across runs (node_attrs).
struct AttrSlot {
  const void* type = nullptr;  // which T `value` holds (attr_type<T>())
  std::shared_ptr<const void> value;
};

/// OpCall::internal: the executor's state for one call of a node.
struct OpCallPrivate {
  /// A Relu/Clip fused into this node: the op may clamp its (single, float32) output to [lo, hi]
  /// as it stores it (fused_clamp); otherwise the executor clamps after.
  float clamp_lo = -__builtin_inff(), clamp_hi = __builtin_inff();
  bool clamp_applied = false;
  /// A MatMul's fused bias Add (x @ W + b, b float32 with W's column count): the op may add it as
  /// it stores its output (fused_col_bias); otherwise the executor adds it after.
  const float* col_bias = nullptr;
  bool col_bias_applied = false;
  /// A Conv's or MatMul's fused residual Add (conv(x) + r, x @ W + b + r, r computed earlier;
  /// fused_residual): the op may add r to its output as it stores it (after a fused bias, which it
  /// must then have taken too), and then applies the fused clamp (the Relu/Clip after the Add);
  /// otherwise the Add and its Relu/Clip run as nodes of their own.
  const Value* residual = nullptr;
  bool residual_applied = false;
  /// A Conv's input scale (plan.h Step::in_scale_step): input 0 is x of a Mul the Conv must read
  /// as x[n, c, ...] * in_scale[n * in_scale_stride + c] (float32, C values per image or one set
  /// for all, in_scale_stride 0). Null: none.
  const float* in_scale = nullptr;
  int64_t in_scale_stride = 0;
  /// Set by an op that applied in_scale; otherwise (an op registered in the builtin's place) the
  /// executor runs the Mul and then the op again on its value.
  bool in_scale_applied = false;
  /// OpCall::num_outputs() and opset() as the plan computed them (0 / -2: not known).
  size_t num_outputs = 0;
  int64_t opset = -2;
  /// Where node_attrs keeps this node's attributes; null: parse on every call.
  AttrSlot* attrs = nullptr;
  /// MatMul inputs read in place (a PlannedView of layout ops): input k's elements laid out by
  /// operand_layout[k] within inputs[k], the view's source; null: inputs[k] itself.
  const kernels::StridedLayout* operand_layout[2] = {nullptr, nullptr};
  /// A MatMul whose only reader is a Transpose keeping the last axis last: the op may write its
  /// result in the transposed order (a tensor of the Transpose's shape, out_permuted set), which
  /// then is the Transpose's value.
  const std::vector<int64_t>* out_perm = nullptr;
  bool out_permuted = false;
  /// A MatMul whose only reader is a Softmax (plan.h Step::softmax), over the axis softmax_axis
  /// (negative: from the end; the plan resolved its default): where that is the result's last
  /// axis, the op may store the softmax of each row of its result instead (fused_softmax), which
  /// then is the Softmax's value (softmax_applied).
  bool softmax_offered = false;
  int64_t softmax_axis = -1;
  bool softmax_applied = false;
  /// A Conv whose only reader (after its fused Relu/Clip, if any) is this MaxPool node (plan.h
  /// Step::max_pool): the op may return the max-pool of its (clamped) result instead, which then
  /// is the MaxPool's value (max_pool_applied). Offered only where the Conv applies the clamp.
  const Node* max_pool = nullptr;
  bool max_pool_applied = false;
};

/// Whether a Softmax fused into c's node runs over the last axis of its result of rank
/// `out_rank`: the op may then compute it as it stores the rows, and sets softmax_applied.
inline bool fused_softmax(const OpCall& c, size_t out_rank) {
  if (!c.internal || !c.internal->softmax_offered || out_rank == 0) return false;
  const int64_t rank = static_cast<int64_t>(out_rank), axis = c.internal->softmax_axis;
  return axis == -1 || axis == rank - 1;
}

/// The bounds of a Relu/Clip fused into c's node ([-inf, inf] if none), which the op promises
/// to apply to its single float32 output as it stores it. With a planned residual or bias, only
/// once the op took it (fused_residual or fused_col_bias first): the Relu/Clip follows the Add.
inline void fused_clamp(OpCall& c, float& lo, float& hi) {
  lo = -__builtin_inff();
  hi = __builtin_inff();
  if (!c.internal || (c.internal->residual && !c.internal->residual_applied) ||
      (c.internal->col_bias && !c.internal->col_bias_applied))
    return;
  lo = c.internal->clamp_lo;
  hi = c.internal->clamp_hi;
  c.internal->clamp_applied = true;
}

/// The fused bias of c's MatMul node (null if none), which the op promises to add to its output
/// as it stores it.
inline const float* fused_col_bias(OpCall& c) {
  if (!c.internal || !c.internal->col_bias) return nullptr;
  c.internal->col_bias_applied = true;
  return c.internal->col_bias;
}

/// The residual planned into c's Conv or MatMul node, when it is a float32 tensor of the output's
/// `shape` (else null): the op promises to add it to its output, element by element, after the
/// bias and before the fused clamp (whose bounds it then asks for with fused_clamp).
inline const float* fused_residual(OpCall& c, const std::vector<int64_t>& shape) {
  if (!c.internal || !c.internal->residual) return nullptr;
  const Value& r = *c.internal->residual;
  if (!r.is_tensor() || r.dtype() != Dtype::Float32 || r.shape() != shape || !r.data<float>())
    return nullptr;  // (no bytes: empty, or a weight kept packed)
  c.internal->residual_applied = true;
  return r.data<float>();
}

template <class T>
const void* attr_type() {
  static const char tag = 0;
  return &tag;
}

/// The attributes of c's node as `parse()` returns them (a T, computed from c.attrs only): parsed
/// on the node's first run and kept in its plan (a change of the node's kwargs makes a new
/// plan), or parsed into `scratch` on every call outside a plan. A parse that throws keeps
/// nothing, so the error comes again on the next run.
template <class T, class Parse>
const T& node_attrs(const OpCall& c, std::optional<T>& scratch, Parse&& parse) {
  AttrSlot* slot = c.internal ? c.internal->attrs : nullptr;
  if (!slot) return scratch.emplace(parse());
  if (slot->type != attr_type<T>()) {
    slot->value = std::make_shared<const T>(parse());
    slot->type = attr_type<T>();
  }
  return *static_cast<const T*>(slot->value.get());
}

}  // namespace fx::exec
