// Internal to the lowering (lower.cpp, lower_ops.cpp): the state of one conversion and what a
// handler sees.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fx/exec.h"
#include "fx/graph_module.h"
#include "fx/torch_codegen/lower.h"

namespace fx::torch_codegen {

/// One integer of shape arithmetic: a literal when it is the same at every input size, else the
/// expression (a Node producing a Python int) that computes it.
struct SymInt {
  std::optional<int64_t> value;
  Argument expr;
  Argument arg() const { return value ? Argument(static_cast<long long>(*value)) : expr; }
};

/// A converted value.
struct LVal {
  enum class Kind {
    Tensor,  ///< a torch.Tensor: `node` (maybe a get_attr of a constant)
    Ints,    ///< a 1-D integer tensor kept as Python ints (shape arithmetic): `ints`
    Scalar,  ///< a 0-d integer tensor kept as one Python int: `ints[0]`
    None,    ///< an omitted optional input
  };
  Kind kind = Kind::None;
  Node* node = nullptr;  ///< Tensor: the value in the new graph (null until materialised)
  std::vector<SymInt> ints;
  /// The old-graph node whose probed shape describes this value (its getitem for an output of a
  /// multi-output node).
  const Node* shape_of = nullptr;
  /// A constant: the tensor of the old graph's get_attr, and its qualified name there.
  const Tensor* constant = nullptr;
  std::string constant_path;
  bool constant_is_buffer = false;  ///< an ONNX Constant (or non-float): a buffer, not a param
};

class Lowerer;
using Handler = void (*)(Lowerer& L, const Node& n);

struct HandlerEntry {
  const char* op;
  int64_t since;
  Handler fn;
};
/// The handler table (lower_ops.cpp), in any order.
const std::vector<HandlerEntry>& handler_table();

/// The state of one lower() call.
class Lowerer {
 public:
  Lowerer(const GraphModule& src, const LowerOptions& options);
  std::unique_ptr<GraphModule> run();

  // ---- what handlers use ----
  /// Input i of `n` (None when omitted or absent).
  LVal in(const Node& n, size_t i);
  size_t num_inputs(const Node& n) const { return n.args().size(); }
  /// Sets the node's outputs.
  void set(const Node& n, std::vector<LVal> outs);
  void set(const Node& n, LVal out) { set(n, std::vector<LVal>{std::move(out)}); }
  /// A tensor value produced by `node` in the new graph, described by `n`'s probed shape.
  LVal tensor(Node* node, const Node& n) const;

  /// The value as a tensor node of the new graph (constants become get_attr of a parameter or
  /// buffer; Python ints become torch.tensor(...)).
  Node* as_tensor(const LVal& v);
  /// The value as an argument: a tensor node, or a literal for a one-element float/int constant
  /// whose rank does not exceed `max_rank` (so broadcasting is unchanged).
  Argument as_operand(const LVal& v, int64_t max_rank);
  /// Whether the value is (or is a constant of) Python ints; fills `out`.
  bool as_ints(const LVal& v, std::vector<SymInt>& out);
  /// An integer tensor of static length (at most 64) that the model computes from values: its
  /// ints read at run time (`t.tolist()`); false for anything else.
  bool runtime_ints(const LVal& v, std::vector<SymInt>& out);
  /// The ints of an input that must be known statically (axes, pads...); throws naming `what`.
  std::vector<int64_t> static_ints(const Node& n, const LVal& v, const char* what);
  /// A constant made while lowering (kept as long as the Lowerer), read as a buffer at `path`.
  LVal new_constant(Tensor t, const std::string& path);
  /// A list argument from SymInts.
  static Argument list_arg(const std::vector<SymInt>& ints);

  /// The probed shape of a value: per dim, the size if static, else nullopt. Throws when the
  /// value was never probed.
  std::vector<std::optional<int64_t>> shape(const LVal& v) const;
  int64_t rank(const LVal& v) const { return static_cast<int64_t>(shape(v).size()); }
  /// The dtype the probes saw.
  Dtype dtype(const LVal& v) const;
  /// The dtype the probes saw for the (first) output of `n`.
  Dtype dtype(const Node& n) const { return dtype(tensor(nullptr, n)); }
  /// x.size(dim) in the new graph as a SymInt (a literal when static); memoised.
  SymInt size(const LVal& v, int64_t dim);

  // attributes
  int64_t attr_int(const Node& n, const char* name, int64_t fallback) const;
  double attr_float(const Node& n, const char* name, double fallback) const;
  std::string attr_string(const Node& n, const char* name, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const Node& n, const char* name,
                                 std::vector<int64_t> fallback = {}) const;
  bool has_attr(const Node& n, const char* name) const { return n.kwargs().contains(name); }
  int64_t opset() const { return opset_; }
  /// The module being converted.
  const GraphModule& source() const { return src_; }

  // emitting
  Node* call(const char* function, std::vector<Argument> args, Kwargs kwargs = {});
  Node* method(const char* name, std::vector<Argument> args, Kwargs kwargs = {});
  Node* module(const std::string& path, std::vector<Argument> args);
  /// Adds a torch.nn submodule at a path derived from the node (its weight's name, else its ONNX
  /// node name, else `fallback`), unique; returns the path.
  std::string add_module(const Node& n, const LVal& weight, const std::string& fallback,
                         std::shared_ptr<Module> m);
  /// A tensor (copied from a constant, or new) as a parameter of `m`.
  static void put_parameter(Module& m, const std::string& name, const Tensor& t);
  static void put_buffer(Module& m, const std::string& name, const Tensor& t);

  /// The values the probing run gave the inputs of `n` (an undefined Value for an omitted
  /// one), from a run of the model on the first probe's inputs: what a control-flow body is
  /// lowered with.
  std::vector<exec::Value> probe_values(const Node& n);
  /// The options this conversion runs with.
  const LowerOptions& options() const { return options_; }

  /// Throws fx::Error(Unsupported) naming the node.
  [[noreturn]] void unsupported(const Node& n, const std::string& what) const;
  /// Normalises a possibly negative axis against `rank`.
  int64_t axis(const Node& n, int64_t a, int64_t rank) const;

 private:
  void probe();
  Node* constant_node(const LVal& v);
  /// After `n`'s handler ran: if every input of `n` is a constant (or static ints) and the
  /// handler made a tensor, the tensor is computed now (by fx::exec on a one-node module) and
  /// becomes a constant, as torch.fx's tracer would fold it.
  void fold(const Node& n);

  const GraphModule& src_;
  LowerOptions options_;
  int64_t opset_ = 13;
  std::unique_ptr<Graph> graph_;
  std::shared_ptr<Module> root_;
  std::unordered_map<const Node*, std::vector<LVal>> env_;
  // The probes: per old node name, the shapes at the two sizes, and the dtype.
  struct Probe {
    std::vector<int64_t> a, b;
    Dtype dtype = Dtype::Float32;
  };
  std::unordered_map<std::string, Probe> probes_;
  std::vector<exec::Value> probe_inputs_;             // the inputs of the first probing run
  std::map<std::pair<Node*, int64_t>, Node*> sizes_;  // memoised x.size(d)
  std::map<std::string, Node*> constants_;            // old path -> get_attr in the new graph
  std::map<std::string, int> used_paths_;
  std::vector<std::unique_ptr<Tensor>> folded_;  // constants computed by fold()
};

/// A module path made of Python identifiers from an ONNX or FX name ("/layer1/layer1.0/conv1/
/// Conv" -> "layer1.0.conv1", "features.0.weight" -> "features.0"); empty when there is none.
std::string module_path_from_weight(const std::string& weight_path);
std::string module_path_from_onnx_name(const std::string& onnx_name);

}  // namespace fx::torch_codegen
