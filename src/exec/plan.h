// Internal to fx::exec: the plan of a run. Everything run() would otherwise work out from the
// graph on every call — each node's op function, its arguments' value slots, which values die
// after it, the fusions the graph's structure allows, its declared output count, its parsed
// attributes — is worked out once per (graph, graph version, input dtypes and shapes, probes)
// and reused. What depends on the values themselves (dtypes and shapes of intermediate values,
// the contents of Clip bounds) is still checked on every run, cheaply, so a plan never changes
// a result: with or without it, run() computes the same bits.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "exec/ops.h"
#include "exec/quant_plan.h"
#include "fx/exec.h"
#include "kernels/elementwise.h"

namespace fx::exec {

// What the interpreter needs to know about a call_function target, looked up once per function
// (functions are interned: their FunctionInfo lives as long as the process) and again after any
// registration.
struct TargetInfo {
  const OpFn* fn = nullptr;  // the implementation, or null
  bool getitem = false;
  bool clamp_producer = false;  // may take a following Relu/Clip into its output
  bool relu = false, clip = false;
  bool matmul = false, add = false, div = false, reduce_mean = false, softmax = false;
  bool max_pool = false;  // onnx.MaxPool
  bool conv = false;     // onnx.Conv: may take a following residual Add into its output (as MatMul)
  bool builtin = false;  // fn is the built-in op (register_op has not replaced it)
};

/// The facts about `f` (cached per thread until the next registration).
const TargetInfo& target_info(const Function& f);
/// Bumped by every registration: plans hold OpFn pointers and must not outlive a change.
uint64_t registry_generation();
/// OpCall::num_outputs() of a node, computed from the graph (meta "onnx_outputs", getitem users).
size_t declared_outputs(const Node& node);
/// The default-domain opset in the module's meta, or -1 if it records none.
int64_t module_opset(const GraphModule* gm);

constexpr uint32_t kNoNode = UINT32_MAX;
constexpr uint32_t kNoStep = UINT32_MAX;  // (a step position: none)

/// A Relu/Clip that may run inside the node before it (see run()).
struct PlannedActivation {
  uint32_t node = kNoNode;  // the Relu/Clip, whose value becomes the producer's
  float lo = -__builtin_inff(), hi = __builtin_inff();  // from the graph (Relu, Clip attributes)
  // Clip min/max given as inputs (opset >= 11): their value is read on each run, from the
  // bound's computed value or, if it is a constant not computed yet, from its tensor.
  uint32_t bound_node[2] = {kNoNode, kNoNode};
  const Tensor* bound_tensor[2] = {nullptr, nullptr};
};

/// A LayerNormalization written out as ReduceMean ... Add (match_layer_norm), as matched for the
/// rank of x it was last seen with.
struct PlannedLayerNorm {
  int64_t rank = -1;  // -1: not matched yet
  bool ok = false;
  uint32_t result = kNoNode;      // the final Add, which gets the value
  std::vector<uint32_t> covered;  // the pattern's other nodes (skipped)
  const Tensor* scale = nullptr;  // float32 constants
  const Tensor* bias = nullptr;
  float epsilon = 0.0f;
};

/// An activation written out in several nodes, run as one unary kernel at the pattern's first
/// node when nothing outside it reads an intermediate: a GELU as Div/Erf/Add/Mul/Mul (match_gelu,
/// exact constants), or a SiLU as Sigmoid and Mul (x * Sigmoid(x): EfficientNet, YOLO).
struct PlannedUnary {
  uint32_t x = kNoNode;       // the input's node id (kNoNode: no pattern starts here)
  uint32_t result = kNoNode;  // the last Mul, which gets the value
  // A GlobalAveragePool (the built-in) of the result, computed with it (unary_f32_plane_means)
  // and then skipped; kNoNode if none.
  uint32_t means = kNoNode;
  std::vector<uint32_t> covered;  // the pattern's other nodes (skipped)
  int64_t constant_rank = 0;      // x must have at least this rank (else the nodes broadcast)
  kernels::UnaryOp op = kernels::UnaryOp::Gelu;
};

/// A Concat whose inputs its producers may write straight into its result: on a run after one
/// that learnt the inputs' dtype and shapes, the first producer to run allocates the result and
/// each producer's op gets its slice for its output (set_output_hint); the Concat op then finds
/// its inputs back to back (joined_value) and copies nothing. Any other outcome (an op that
/// allocated elsewhere, a fused activation that ran apart, shapes that changed) is a plain
/// concat of valid inputs, and a miss turns the plan off.
struct PlannedConcat {
  uint32_t concat = kNoNode;  // the Concat's node id
  // Learnt from the last run (armed once known).
  bool armed = false, off = false;
  Dtype dtype = Dtype::Float32;
  std::vector<std::vector<int64_t>> shapes;  // the inputs'
  std::vector<size_t> offsets;               // their bytes' offsets in the result
  int64_t numel = 0;                         // the result's elements
};

/// A chain of layout ops (Transpose, Reshape, Slice, Identity), each the only reader of the one
/// before and none probed, read as one strided view of the chain's source (views.cpp): the nodes
/// before the last are deferred (not run as steps); at the step that owns the view, the layout is
/// worked out from the values of the source and of the ops' other inputs, and if any op is not a
/// plain view there, the deferred nodes run then, as they would have.
struct PlannedView {
  int operand = -1;             // the MatMul input it stands for; -1: the chain's last node's value
  uint32_t source = kNoNode;    // the first op's data input (node id)
  std::vector<uint32_t> chain;  // the ops' step positions, first to last
  // A MatMul operand that is a Div or Mul of the chain by a fixed scalar (attention's query over
  // sqrt(head size)), the chain's last step: the operand is copied out scaled, in one pass.
  bool scaled = false;
  bool divide = false;
  uint32_t scalar = kNoNode;  // the scalar's node id
  // When the ops' other inputs (Reshape's shape, Slice's starts...) are fixed (Fixed), the layout
  // depends on the source's shape only: the last one worked out, for that shape.
  bool params_fixed = false;
  bool known = false;
  std::vector<int64_t> known_shape;
  std::optional<kernels::StridedLayout> known_layout;
};

/// A node whose value the plan's key fixes (a function of the inputs' dtypes and shapes and of
/// the module's constants only: Shape and what is computed from it, Identity of a weight...):
/// computed on the plan's first complete run, then held (Cached) or, when only other such nodes
/// read it, not computed again (Skipped).
enum class Fixed : uint8_t { No, Candidate, Cached, Skipped };

/// One node of the graph, in graph order.
struct Step {
  enum class Kind : uint8_t { Input, Constant, Call, Getitem, Output, NotRunnable, Nothing };
  Node* node = nullptr;
  uint32_t id = 0;  // node id: the node's value slot
  Kind kind = Kind::Nothing;
  bool probed = false;
  Fixed fixed = Fixed::No;
  const OpFn* fn = nullptr;  // Call: the implementation (null: fails when reached)
  // The node's positional arguments (Call) or returned values (Output), Plan::args[args_begin,
  // args_end).
  uint32_t args_begin = 0, args_end = 0;
  int64_t item = 0;             // Getitem: the index (malformed: item < 0 and `error`)
  uint32_t constant = kNoNode;  // Constant: index into Plan::constants
  std::string error;            // Getitem/Output: why the node cannot run, reported when reached
  // MatMul: an Add of a constant 1-D float32 bias (x @ W + b) applied to this node's output.
  uint32_t bias_add = kNoNode;
  const Tensor* bias = nullptr;
  PlannedActivation activation;       // into this node, without a fused bias
  PlannedActivation bias_activation;  // into the fused bias Add
  // Conv, MatMul: an Add of this node's output (a MatMul's after its fused bias) and a value
  // `residual` computed before it (its only user), applied to its output as it is stored (ops.h
  // fused_residual), with the Relu/Clip after the Add.
  uint32_t residual_add = kNoNode, residual = kNoNode;
  PlannedActivation residual_activation;
  // ReduceMean: the Div of a possible LayerNormalization pattern starting here.
  Node* layer_norm_div = nullptr;
  PlannedLayerNorm layer_norm;
  PlannedUnary unary;  // a GELU or SiLU pattern whose first node this is
  // Plan::concats: the Concat this node is (concat), or whose input `concat_input` this node's
  // op makes (concat_writer); -1 if none.
  int32_t concat = -1, concat_writer = -1;
  uint32_t concat_input = 0;
  PlannedQdq qdq;         // Conv/MatMul/Gemm: a QDQ pattern run as one integer op
  bool absorbed = false;  // a DequantizeLinear only a planned QDQ pattern reads: never runs
  // A layout op of a PlannedView, or a Mul a Conv reads as a per-channel scale of its input
  // (in_scale_step): runs only if the view falls through, or the Conv cannot take the scale.
  bool deferred = false;
  // Conv: its data input is a Mul (that Mul's only use) of x by a per-channel scale, a squeeze-and-
  // excitation block's; the Mul's step (kNoStep if none). Where the operands' shapes are those of
  // x and a scale ([N or 1, C, 1, ...]) the Conv reads x and applies the scale itself
  // (OpCallPrivate::in_scale); otherwise the Mul runs just before it.
  uint32_t in_scale_step = kNoStep;
  // MatMul: its only reader, a Transpose keeping the last axis last, whose order the op may write
  // its result in (OpCallPrivate::out_perm); out_perm is the Transpose's perm, normalised.
  uint32_t out_transpose = kNoNode;
  std::vector<int64_t> out_perm;
  // MatMul: its only reader, the built-in Softmax (attention's scores), which the op may compute
  // as it stores each product's rows when it runs over the result's last axis (OpCallPrivate::
  // softmax_offered); softmax_axis is its axis (the opset's default resolved: -1 from opset 13,
  // else 1).
  uint32_t softmax = kNoNode;
  int64_t softmax_axis = -1;
  // Conv: the only reader of its value (of its fused Relu/Clip's, if one is planned), the built-in
  // MaxPool with one output, which the op may compute as it computes the convolution's rows
  // (OpCallPrivate::max_pool); none of the three probed.
  uint32_t max_pool = kNoNode;
  std::vector<PlannedView> views;  // owned here: a MatMul's operands, or this node's own value
  size_t num_outputs = 1;          // OpCall::num_outputs()
  AttrSlot attrs;                  // the op's parsed attributes (node_attrs)
  // Node ids whose last use is this node (their values are freed after it), Plan::frees.
  uint32_t frees_begin = 0, frees_end = 0;
  std::vector<Value> cached;  // Fixed::Cached: the node's values
};

/// Matches the LayerNormalization pattern at ReduceMean step `s` for x of rank `rank` into
/// s.layer_norm (done on a run, when x's rank is known; the matcher reads the constant axes,
/// epsilon and exponent, and plan_for renews the plan if any of them changes).
void plan_layer_norm(const GraphModule& gm, const std::vector<std::string>& probes, Step& s,
                     int64_t rank);

/// A get_attr tensor as the plan saw it. Checked on every run before anything runs: the plan
/// holds Tensor pointers and what it derived from their dtypes, shapes and (Clip/LayerNorm
/// scalars) contents, so a module whose attribute changed gets a new plan.
struct PlannedConstant {
  uint32_t step = 0;
  const Tensor* tensor = nullptr;  // null: not a tensor (a subgraph body, or an error when run)
  const void* data = nullptr;
  std::weak_ptr<const std::vector<uint8_t>> alive;  // so `data` cannot be a reused address
  const void* external = nullptr;                   // the tensor's ExternalData, if any
  // The weight the tensor gave way to (prepack_weights), when every reader takes it packed.
  std::shared_ptr<const PackedWeight> packed;
  Dtype dtype = Dtype::Float32;
  std::vector<int64_t> shape;
};

/// Argument slots in Plan::args: a node id, or one of these.
constexpr int64_t kArgNone = -1;
/// kArgBad - kind: an argument of that Argument::Kind where a tensor was expected.
constexpr int64_t kArgBad = -2;

struct Plan {
  // The key.
  const GraphModule* gm = nullptr;
  uint64_t serial = 0, version = 0, registry_generation = 0;
  std::vector<std::pair<Dtype, std::vector<int64_t>>> signature;  // the inputs'
  std::vector<std::string> probes;
  std::weak_ptr<const void> graph_alive;
  uint64_t last_used = 0;  // LRU tick
  // Module::attribute_generation() when the constants were last found unchanged: while it
  // stays put, they need no recheck.
  uint64_t attribute_generation = 0;

  uint64_t id_bound = 0;
  std::vector<Step> steps;
  std::vector<int64_t> args;
  std::vector<uint32_t> frees;
  std::vector<PlannedConstant> constants;
  std::vector<PlannedConcat> concats;
  int64_t opset = -1;  // module_opset
  // Steps with Fixed::Candidate, until a complete run has learnt their values (learn_fixed).
  bool fixed_pending = false;
};

/// Whether `n` is a layout op a PlannedView may cover.
bool is_layout_op(const Node& n);

/// What build_plan reads layout ops as (views.cpp).
struct ViewPlan {
  std::vector<std::pair<size_t, PlannedView>> views;  // (the owner step's position, the view)
  // (a MatMul's position, the Transpose whose order it writes in, that Transpose's perm)
  std::vector<std::tuple<size_t, uint32_t, std::vector<int64_t>>> out_transposes;
};
/// The views of a graph's nodes (in graph order, with their ids' `fixed` and `probed` flags and
/// positions): a MatMul's operands first (a head split, over a scalar or not), a MatMul's merging
/// Transpose, then chains of two ops or more ending anywhere (from the last node back, so that
/// each chain is whole). The deferred ops and their inputs live until the owner's step:
/// `last_use` is moved there.
ViewPlan plan_views(const std::vector<Node*>& nodes, const std::vector<char>& fixed,
                    const std::vector<char>& probed, const std::vector<size_t>& position,
                    std::vector<size_t>& last_use);
/// The layout of layout op `n`'s value over the elements its data input is laid out by `in`, its
/// other inputs being `params` (null: omitted); nullopt when that value is not a plain strided
/// view of them (the op then runs, and reports what is wrong).
std::optional<kernels::StridedLayout> view_through(const Node& n, const kernels::StridedLayout& in,
                                                   const std::vector<const Value*>& params);

/// The plan for running `gm` on inputs like `inputs` with these probes: the cached one when
/// the graph, its version, the registry, the inputs' dtypes and shapes, the probes and the
/// module's tensors are what it was built for, else a new one (cached, at most a few per graph
/// and per thread, least recently used out). Throws fx::Error(Key) for an unknown probe.
std::shared_ptr<Plan> plan_for(const GraphModule& gm, const std::vector<Value>& inputs,
                               const std::vector<std::string>& probes);
/// Drops this thread's cached plans (release_cached_memory()).
void release_plans();
/// How many plans this thread caches (tests).
size_t cached_plan_count();

}  // namespace fx::exec
