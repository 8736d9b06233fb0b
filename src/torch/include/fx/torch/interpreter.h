// Execution of fx::GraphModules on LibTorch: torch.fx's Interpreter, Transformer and ShapeProp
// (inventory §3.8), plus the op registry that maps call_function / call_method targets to
// LibTorch calls (one table, shared with eager execution of fx::torch::Value).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fx/passes.h"
#include "fx/torch/tracer.h"
#include "fx/torch/value.h"

namespace fx {
namespace torch {

/// A LibTorch implementation of one target, called with Python-style args and kwargs.
using OpFn = std::function<Value(const std::vector<Value>& args, const ValueKwargs& kwargs)>;

/// The registry of LibTorch implementations of call_function and call_method targets.
class OpRegistry {
 public:
  /// Registers (or replaces) the implementation of call_function target `qualname`
  /// ("torch.relu", "operator.add"; any spelling fx::Function accepts).
  static void def_function(const std::string& qualname, OpFn fn);
  /// Registers (or replaces) the implementation of tensor method `name` ("clamp").
  static void def_method(const std::string& name, OpFn fn);
  /// The implementation, or nullptr.
  static const OpFn* function(const fx::Function& target);
  static const OpFn* method(const std::string& name);
  /// Runs a target; an unregistered one throws fx::Error(Unsupported) naming it.
  static Value run_function(const fx::Function& target, const std::vector<Value>& args,
                            const ValueKwargs& kwargs);
  static Value run_method(const std::string& name, const std::vector<Value>& args,
                          const ValueKwargs& kwargs);
  /// Registered names, sorted (documentation / coverage).
  static std::vector<std::string> function_names();
  static std::vector<std::string> method_names();
};

/// torch.fx.Interpreter on LibTorch: runs a GraphModule node by node. Override the handlers to
/// change how nodes execute. Failures are rethrown as fx::Error naming the node, with torch.fx's
/// "\n\nWhile executing <node>\nOriginal traceback:\n<stack trace or None>" suffix.
class Interpreter {
 public:
  using Env = std::unordered_map<const fx::Node*, Value>;
  /// `module` must outlive the interpreter. With `garbage_collect_values`, each value is dropped
  /// after its last use (as torch.fx does).
  explicit Interpreter(const fx::GraphModule& module, bool garbage_collect_values = true);
  virtual ~Interpreter();

  /// Runs the graph on `args` (one per placeholder; missing ones take their defaults).
  /// Nodes in `initial_env` are not run: their given values are used (partial evaluation).
  Value run(std::vector<Value> args, const Env& initial_env = {});

  /// Executes one node: fetches its args/kwargs from the environment, then calls the handler of
  /// its opcode.
  virtual Value run_node(const fx::Node& n);
  virtual Value placeholder(const std::string& target, const std::vector<Value>& args,
                            const ValueKwargs& kwargs);
  virtual Value get_attr(const std::string& target, const std::vector<Value>& args,
                         const ValueKwargs& kwargs);
  virtual Value call_function(const fx::Function& target, const std::vector<Value>& args,
                              const ValueKwargs& kwargs);
  virtual Value call_method(const std::string& target, const std::vector<Value>& args,
                            const ValueKwargs& kwargs);
  /// A GraphModule target runs through a nested Interpreter, any other through run_fx_module
  /// (the live LibTorch module, or the layer rebuilt from the fx::Module after a pass).
  virtual Value call_module(const std::string& target, const std::vector<Value>& args,
                            const ValueKwargs& kwargs);
  virtual Value output(const std::string& target, const std::vector<Value>& args,
                       const ValueKwargs& kwargs);

  /// A parameter/buffer of the module by qualified name, as a tensor (cached); a ParameterList
  /// module as a list of its tensors.
  Value fetch_attr(const std::string& target);
  /// The node's args and kwargs with nodes replaced by their values.
  void fetch_args_kwargs_from_env(const fx::Node& n, std::vector<Value>& args,
                                  ValueKwargs& kwargs) const;

  const fx::GraphModule& module() const { return module_; }
  /// The node being executed (during run()).
  const fx::Node* current_node() const { return current_; }
  /// Number of values alive in the environment (observable garbage collection).
  size_t env_size() const { return env_count_; }

 protected:
  /// The value of `n` in the environment; throws fx::Error(Runtime) with torch.fx's message.
  const Value& env_value(const fx::Node* user, const fx::Node* n) const;

 private:
  const fx::GraphModule& module_;
  bool gc_;
  std::vector<const fx::Node*> nodes_;
  std::vector<std::vector<const fx::Node*>> free_after_;  // per position in nodes_
  std::vector<Value> env_;                                // by node id
  std::vector<char> has_;                                 // by node id
  size_t env_count_ = 0;
  std::vector<Value> args_;
  size_t next_arg_ = 0;
  const fx::Node* current_ = nullptr;
  std::unordered_map<std::string, Value> attr_cache_;
};

/// torch.fx.experimental.const_fold's run_folding: runs `folded.const_subgraph_module` and
/// installs its result in `folded.module` under `fx_const_folded_attrs_name` (one parameter, or
/// the entries "0", "1", ... of the ParameterList there), so the folded module can run. Returns
/// false (and does nothing) when nothing was folded. Throws fx::Error(Type) for a folded value
/// that is neither a tensor nor a number.
bool run_folding(fx::FoldedGraphModule& folded);

/// torch.fx.Transformer: re-records the graph through the handlers, which may return new
/// values/Proxies to rewrite it. transform() returns the new GraphModule (same attributes).
class Transformer : public Interpreter {
 public:
  explicit Transformer(const fx::GraphModule& module);
  ~Transformer() override;
  std::unique_ptr<fx::GraphModule> transform();

  Value placeholder(const std::string& target, const std::vector<Value>& args,
                    const ValueKwargs& kwargs) override;
  Value get_attr(const std::string& target, const std::vector<Value>& args,
                 const ValueKwargs& kwargs) override;
  Value call_function(const fx::Function& target, const std::vector<Value>& args,
                      const ValueKwargs& kwargs) override;
  Value call_module(const std::string& target, const std::vector<Value>& args,
                    const ValueKwargs& kwargs) override;

 protected:
  /// The tracer recording the new graph.
  Tracer& tracer() { return tracer_; }

 private:
  Tracer tracer_;
  std::shared_ptr<fx::Module> constants_;
};

/// One tensor's metadata, as torch.fx.passes.shape_prop.TensorMetadata.
struct TensorMeta {
  std::vector<int64_t> shape;
  fx::Dtype dtype = fx::Dtype::Float32;
  bool requires_grad = false;
  std::vector<int64_t> stride;
  std::optional<fx::MemoryFormat> memory_format;
  bool is_quantized = false;
};

/// torch.fx.passes.shape_prop.ShapeProp: runs the module and stores in each node whose result
/// holds a tensor `meta["tensor_meta"]` (a dict Argument with TensorMetadata's fields, tuples of
/// them for tuple results) and `meta["type"]` (the Python type name, "torch.Tensor").
class ShapeProp : public Interpreter {
 public:
  explicit ShapeProp(fx::GraphModule& module);
  Value propagate(std::vector<Value> args) { return run(std::move(args)); }
  Value run_node(const fx::Node& n) override;
};

/// TensorMetadata of `t` as stored in meta["tensor_meta"].
TensorMeta extract_tensor_meta(const at::Tensor& t);
fx::Argument tensor_meta_argument(const TensorMeta& m);
/// The TensorMeta of a node ShapeProp annotated with a single tensor, or nullopt.
std::optional<TensorMeta> tensor_meta(const fx::Node& n);
/// Python repr: "TensorMetadata(shape=torch.Size([1, 3]), dtype=torch.float32, ...)".
std::string tensor_meta_repr(const TensorMeta& m);

}  // namespace torch
}  // namespace fx
