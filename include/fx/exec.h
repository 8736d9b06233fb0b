// fx::exec — execution of ONNX-style graphs (call_function nodes with `onnx.<Op>` targets) on
// fxwasm's own kernels, natively and in wasm. No LibTorch: the LibTorch Interpreter lives in
// fx/torch.
//
//   fx::exec::Value x = fx::exec::Value::zeros(fx::Dtype::Float32, {1, 3, 224, 224});
//   std::vector<fx::exec::Value> out = fx::exec::run(gm, {x});
//
// Every failure is an fx::Error naming the node, the op, the input shapes and the reason.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fx/graph_module.h"

namespace fx::onnx {
struct DataValue;
}

namespace fx::exec {

struct PackedWeight;  // the executor's (prepack_weights)

/// What a Value holds: ONNX's data model (a tensor, a sequence of tensors, or an optional).
enum class ValueKind : uint8_t {
  Tensor,    ///< a dense tensor (the fast path: every op but the few below takes only these)
  Sequence,  ///< an ordered list of tensors of one element type (SequenceConstruct, Loop...)
  Optional,  ///< empty, or holding one tensor or sequence (Optional, OptionalGetElement...)
};

/// A dense, row-major tensor value, or a sequence/optional of values (kind()). Copies share the
/// buffer (and a sequence's element list); ops never write their inputs.
class Value {
 public:
  Value() = default;
  /// A sequence of `elements` (each a tensor of `element_dtype`; checked).
  static Value sequence(Dtype element_dtype, std::vector<Value> elements);
  /// An empty optional; `element_dtype` is the element type its type names.
  static Value none(Dtype element_dtype);
  /// An optional holding `v` (a tensor or a sequence).
  static Value some(Value v);
  /// From ONNX's decoded test data (fx::onnx::value_from_proto_bytes); throws fx::Error(Value)
  /// for a tensor without data and fx::Error(Unsupported) for maps and sparse tensors.
  static Value from_onnx(const fx::onnx::DataValue& d, const std::string& what);
  /// A value of `shape` with uninitialised (zeroed) storage.
  static Value zeros(Dtype dtype, std::vector<int64_t> shape);
  /// A value over existing bytes (shared, read-only: the executor never writes inputs).
  static Value wrap(Dtype dtype, std::vector<int64_t> shape,
                    std::shared_ptr<const std::vector<uint8_t>> bytes);
  /// From an attribute-tree tensor; throws fx::Error(Value) if it has no data.
  static Value from_tensor(const Tensor& t, const std::string& what);
  /// A string tensor (dtype String) of `shape` over `strings` (one per element; checked).
  static Value from_strings(std::vector<int64_t> shape,
                            std::shared_ptr<const std::vector<std::string>> strings);
  /// A weight kept only in its GEMM-packed form (prepack_weights), as the executor hands it to
  /// MatMul and Gemm: it has no bytes (data() is null, packed() is set); to_tensor() unpacks it.
  static Value packed_weight(Dtype dtype, std::vector<int64_t> shape,
                             std::shared_ptr<const PackedWeight> weight);
  /// 0-d or 1-d helpers for tests and shape arithmetic.
  static Value scalar_f32(float v);
  static Value from_f32(std::vector<int64_t> shape, const std::vector<float>& data);
  static Value from_i64(std::vector<int64_t> shape, const std::vector<int64_t>& data);

  ValueKind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == ValueKind::Tensor; }
  /// A tensor's element type; a sequence's or optional's element (tensor) type.
  Dtype dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const;
  size_t nbytes() const { return nbytes_; }
  bool defined() const {
    return data_ != nullptr || strings_ != nullptr || packed_ != nullptr ||
           kind_ != ValueKind::Tensor;
  }
  /// A packed weight's packing (Value::packed_weight), else null.
  const std::shared_ptr<const PackedWeight>& packed() const { return packed_; }
  /// A string tensor's elements (row-major); throws fx::Error(Type) for other values. String
  /// tensors hold no bytes: only the ops that say so take them (the executor checks).
  const std::vector<std::string>& strings() const;
  /// A sequence's elements; an optional's element (none when empty); empty for a tensor.
  const std::vector<Value>& elements() const;
  /// An optional that holds a value.
  bool has_element() const { return kind_ == ValueKind::Optional && !elements().empty(); }

  template <class T>
  const T* data() const {
    return reinterpret_cast<const T*>(data_);
  }
  /// Writable data: only for a value this op just created.
  template <class T>
  T* mutable_data() {
    return reinterpret_cast<T*>(const_cast<uint8_t*>(data_));
  }
  /// The same elements (shared storage) viewed with another shape of equal numel.
  Value with_shape(std::vector<int64_t> shape) const;
  /// Elements converted to int64 (int32/int64/uint8/bool/float dtypes): for shape inputs.
  std::vector<int64_t> to_i64() const;
  std::vector<float> to_f32() const;
  /// The bytes as an attribute-tree tensor (shares buffer(), or copies an arena range).
  Tensor to_tensor() const;
  /// "float32[1, 3, 224, 224]", "sequence(float32[2], float32[3])", "optional(none)".
  std::string describe() const;
  /// Drops this value's reference to its storage, which goes back to the executor (its pool of
  /// same-size buffers, or its arena) when nothing else holds it.
  void recycle();
  /// The shared bytes of the value; null for a large value the executor computed (a range of
  /// its arena, see new_value) and for a default-constructed one.
  const std::shared_ptr<const std::vector<uint8_t>>& buffer() const { return bytes_; }

 private:
  friend Value new_value(Dtype dtype, std::vector<int64_t> shape);
  friend Value value_slice(const Value& whole, size_t offset, Dtype dtype,
                           std::vector<int64_t> shape);
  friend Value joined_value(const std::vector<const Value*>& parts, std::vector<int64_t> shape);
  ValueKind kind_ = ValueKind::Tensor;
  Dtype dtype_ = Dtype::Float32;
  std::vector<int64_t> shape_;
  std::shared_ptr<const std::vector<uint8_t>> bytes_;  // storage made from bytes, or
  std::shared_ptr<const uint8_t> arena_;               // a range of the executor's arena
  const uint8_t* data_ = nullptr;
  size_t nbytes_ = 0;
  std::shared_ptr<const std::vector<Value>> elements_;       // a sequence's or optional's
  std::shared_ptr<const std::vector<std::string>> strings_;  // a string tensor's
  std::shared_ptr<const PackedWeight> packed_;               // a packed weight's
};

/// A new value of `shape` whose elements the op will all write (contents unspecified). Values of
/// 32 KB and more are ranges of the executor's per-thread arena, which reuses the memory of
/// values freed earlier, best fit first, so a run's large values stay within a compact,
/// cache-warm working set; smaller ones reuse freed buffers of the same size.
Value new_value(Dtype dtype, std::vector<int64_t> shape);

struct OpCallPrivate;

/// What an op implementation sees.
struct OpCall {
  const Node& node;
  /// Positional inputs; nullptr for an omitted optional input (None).
  std::vector<const Value*> inputs;
  /// Attributes (the node's kwargs).
  const Kwargs& attrs;
  /// Outputs the op produces, in order.
  std::vector<Value> outputs;
  /// The module being run (subgraph bodies, opset).
  const GraphModule* module = nullptr;
  /// The executor's private state for this call (a Relu/Clip fused into the node, the node's
  /// attributes parsed on an earlier run, facts its plan knows); null when an op is called
  /// outside run(). Ops reach it through src/exec/ops.h.
  OpCallPrivate* internal = nullptr;

  /// inputs[i], or an fx::Error naming the op if it is missing.
  const Value& input(size_t i) const;
  bool has_input(size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
  int64_t attr_int(const char* name, int64_t fallback) const;
  float attr_float(const char* name, float fallback) const;
  std::string attr_string(const char* name, const std::string& fallback) const;
  /// A list-of-ints attribute; `fallback` if absent.
  std::vector<int64_t> attr_ints(const char* name, std::vector<int64_t> fallback = {}) const;
  bool has_attr(const char* name) const { return attrs.find(name) != nullptr; }
  /// How many outputs the node declares: the length of meta "onnx_outputs" (set by the ONNX
  /// importer), else one past the largest operator.getitem index among its users, else 1.
  size_t num_outputs() const;
  /// The opset of the default ONNX domain the module was imported with (meta
  /// "onnx_opset_import"), or `fallback` for graphs built by hand.
  int64_t opset(int64_t fallback = 17) const;
  /// Throws fx::Error(Runtime) naming the node, op and input shapes, with `reason`.
  [[noreturn]] void fail(const std::string& reason) const;
  /// Throws fx::Error(Unsupported) (a dtype, attribute value or variant we do not run).
  [[noreturn]] void unsupported(const std::string& what) const;
};

using OpFn = std::function<void(OpCall&)>;

/// Registers (or replaces) the implementation of an `onnx.<Op>` target. Like ONNX's own ops
/// (but Random*, Bernoulli, Multinomial and Dropout), it must compute its outputs from its inputs
/// and attributes alone: a run computes a node whose inputs the input shapes fix (constants,
/// Shape) once per plan and reuses the value.
void register_op(const std::string& target, OpFn fn);
/// Whether a target can run.
bool has_op(const std::string& target);
/// All registered targets, sorted.
std::vector<std::string> registered_ops();

/// One node the executor cannot run, found before running (gm.coverage()).
struct CoverageGap {
  std::string node;
  std::string target;
  std::string reason;
};
/// Every call_function node whose target has no implementation (and other static problems),
/// in graph order; empty when the whole graph can run.
std::vector<CoverageGap> coverage(const GraphModule& gm);

struct RunOptions {
  /// Nodes whose values to return in `probes` (by node name), besides the outputs.
  std::vector<std::string> probe;
  /// Time every op the run executes (RunResult::profile).
  bool profile = false;
};
/// One op a profiled run executed: its node, the node's target as printed (e.g. "onnx.Conv")
/// and the wall time of the op, in microseconds. A node the run fused into the op before it (a
/// Relu after a Conv, a bias Add after a MatMul, a residual Add) has no entry: its time is in
/// that op's. Nor have, after a plan's first run, the nodes whose values the input shapes fix
/// (Shape and the size arithmetic on it, Identity of a weight: computed once and held), nor the
/// layout ops a later op reads as a view (a MatMul reads a Slice -> Reshape -> Transpose chain of
/// its operand in place; a chain ending elsewhere is copied once, at its last node), nor a Mul of
/// x by a per-channel scale that a Conv reads (a squeeze-and-excitation block's: the Conv scales
/// x as it reads it). A GELU or SiLU written out in several nodes runs at its first node in
/// graph order (a SiLU's Sigmoid), whose entry holds the pattern and a GlobalAveragePool of its
/// result computed with it.
struct OpTime {
  std::string node;
  std::string op;
  double microseconds = 0;
};
struct RunResult {
  std::vector<Value> outputs;
  std::vector<std::pair<std::string, Value>> probes;
  /// With RunOptions::profile: the ops in the order they ran (call_function nodes only).
  std::vector<OpTime> profile;
};

/// Threads the kernels split large products over (1, the default, runs on the caller only; 0
/// takes the hardware's count). Results are bit-identical for any count: threads split the
/// output by columns, and every element keeps its reduction order. Natively only: the wasm build
/// has one thread.
void set_num_threads(int n);
int num_threads();

/// Frees the arena memory the executor keeps for reuse between runs (the parts no value holds),
/// the weights it packed for its kernels and its plans (this thread's), and the kernel scratch of
/// this thread and of the thread pool's workers (set_num_threads; they are restarted).
void release_cached_memory();
/// Frees only what was derived from weights nothing holds any more (the packed copies of a
/// deleted model's weights; this thread's). Also happens whenever a new weight is packed.
void release_dead_weights();

/// Packs the GEMM weights of `gm` (and of its subgraph bodies) ahead of its first run, the way
/// onnxruntime prepacks them at session creation, and lets each module tensor give way to its
/// packed copy: the weights are then held once instead of twice (the module's bytes beside the
/// copy run() packs and keeps). A weight qualifies when it is a loaded 2-D float32 parameter or
/// buffer and every node that reads it is a MatMul or Gemm taking it as B (the Gemms with one
/// transB). The tensor keeps its dtype and shape; its bytes become ExternalData (in_memory)
/// unpacked on demand, bit for bit, by Tensor::bytes(): export, inspection and passes see the
/// same values. If the graph later gives it another use, that use reads the unpacked bytes (on
/// every run). Passes that rewrite weight bytes (fold, fuse-conv-bn) leave a packed weight
/// alone (fuse-matmul-add, which needs only its shape, still fires): run them first. Returns how
/// many tensors were packed. Mutates the module: not while another thread runs it. The CLI's
/// --run and the wasm GraphModule.run() call it (the latter on each graph version's first run).
size_t prepack_weights(GraphModule& gm);

/// Runs the graph on `inputs` (one per placeholder, in order). Values are freed after their
/// last use (their memory is reused by later values). The output node's
/// argument may be a node or a tuple/list of nodes.
///
/// The graph is not changed, but some patterns run fused, within float rounding of the
/// node-by-node result: a Relu/Clip into the Conv/Gemm/MatMul/Add/BatchNormalization before it;
/// an Add of a constant 1-D bias into the MatMul before it; an Add of a Conv's output and a value
/// computed before the Conv (a residual connection, with the Relu/Clip after it) into the Conv,
/// with the Add's bits; a LayerNormalization written out as
/// ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add into one kernel; a GELU written out as
/// Div(x, sqrt 2)/Erf/Add 1/Mul x/Mul 0.5 (float32 constants equal to those values) into one
/// kernel. A pattern runs unfused when any of its intermediate values is probed or used elsewhere.
/// Constant weights of Conv, MatMul and Gemm are packed for the GEMM (Winograd-transformed for 3x3
/// stride-1 convolutions) on the first run and reused while the weight tensor lives
/// (release_cached_memory()), beside it; prepack_weights() instead keeps a MatMul/Gemm weight
/// in its packed form only.
///
/// What run() works out from the graph alone (each node's op, value slots, last uses, fusions,
/// parsed attributes) is kept in a plan per (graph, Graph::version(), input dtypes and shapes,
/// probes), a few per graph on each thread, and reused by the next runs like it. Any change of
/// the graph, its nodes, the module's meta or tensors, or the op registry makes a new plan.
RunResult run(const GraphModule& gm, const std::vector<Value>& inputs, const RunOptions& options);
std::vector<Value> run(const GraphModule& gm, const std::vector<Value>& inputs);

}  // namespace fx::exec
