// Symbolic tracing of LibTorch modules (torch.fx.symbolic_trace for C++).
//
// Write the module once against fx::torch::Value; it runs eagerly and traces:
//
//   struct MyModule : fx::torch::Module {
//     MyModule() : Module("MyModule") {
//       param = register_parameter("param", torch::rand({3, 4}));
//       linear = register_module("linear", torch::nn::Linear(4, 5));
//     }
//     Value forward(Value x) override {
//       return call(linear, x + param).clamp(kw("min", 0.0), kw("max", 1.0));
//     }
//     torch::Tensor param;
//     torch::nn::Linear linear{nullptr};
//   };
//   auto m = std::make_shared<MyModule>();
//   at::Tensor y = (*m)({torch::rand({3, 4})}).tensor();     // eager
//   std::unique_ptr<fx::GraphModule> gm = fx::torch::symbolic_trace(m);
//   gm->graph().str();   // == print(symbolic_trace(MyModule()).graph) in torch 1.13
//
// Semantics follow torch.fx 1.13 (inventory §1.5, §3.1): LibTorch's own layers (torch::nn::*)
// are leaves and become call_module nodes named by their registration path ("layer1.0.conv1");
// Sequential / ModuleList and fx::torch::Module subclasses are traced through; a parameter used
// in forward becomes one get_attr per parameter per trace, a buffer one get_attr per use, any other
// tensor a `_tensor_constant<i>` attribute.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fx/torch/value.h"

namespace fx {
namespace torch {

/// One parameter of forward as Python's signature shows it (name, default, annotation).
struct Param {
  Param(const char* n) : name(n) {}
  Param(std::string n, std::optional<fx::Argument> default_value = std::nullopt,
        std::optional<std::string> type = std::nullopt)
      : name(std::move(n)), default_value(std::move(default_value)), type(std::move(type)) {}
  std::string name;
  std::optional<fx::Argument> default_value;  ///< becomes the placeholder's `(default=...)`
  std::optional<std::string> type;            ///< annotation repr: "float", "torch.Tensor"
};

/// Base class of traceable LibTorch modules. Override forward(Value) for one input, or
/// forward_args() plus signature() for several.
class Module : public ::torch::nn::Module {
 public:
  /// `name` is the Python class name: the traced GraphModule's class name and the type shown in
  /// module reprs.
  explicit Module(std::string name);
  ~Module() override;

  /// forward(x) of a single-input module. The default throws fx::Error(Unsupported).
  virtual Value forward(Value x);
  /// forward(*args): one Value per signature() parameter. The default calls forward(args[0]).
  virtual Value forward_args(std::vector<Value> args);
  /// forward's parameters (default: a single `x`).
  virtual std::vector<Param> signature() const;
  /// forward's return annotation (the output node's type), if any.
  virtual std::optional<std::string> return_type() const { return std::nullopt; }

  /// Runs forward eagerly (or traces it when called inside a trace).
  Value operator()(std::vector<Value> args);
};

/// Calls submodule `m` from a forward: while tracing, a leaf becomes a call_module node and a
/// non-leaf is traced through; otherwise it runs on LibTorch. Works for torch::nn layers,
/// Sequential (children in order) and fx::torch::Module.
Value call(::torch::nn::Module& m, std::vector<Value> args);
template <class M>
Value call(const ::torch::nn::ModuleHolder<M>& holder, Value x) {
  return call(*holder.ptr(), std::vector<Value>{std::move(x)});
}
template <class M>
Value call(const std::shared_ptr<M>& module, Value x) {
  return call(static_cast<::torch::nn::Module&>(*module), std::vector<Value>{std::move(x)});
}

/// Runs `m` eagerly on LibTorch: leaf layers on tensors, Sequential child by child,
/// fx::torch::Module through forward_args. Throws fx::Error(Unsupported) naming the type of a
/// torch::nn layer this library cannot run.
Value run_module(::torch::nn::Module& m, std::vector<Value> args);

/// Specialised values for forward parameters, by name (torch.fx concrete_args).
using ConcreteArgs = std::vector<std::pair<std::string, Value>>;

/// torch.fx.Tracer for LibTorch modules. Subclass it to change is_leaf_module.
class Tracer {
 public:
  Tracer();
  virtual ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  /// torch.fx's default rule: LibTorch's built-in layers (type in torch::nn) are leaves,
  /// Sequential, ModuleList and ModuleDict are not; fx::torch::Module subclasses are not.
  virtual bool is_leaf_module(const ::torch::nn::Module& m,
                              const std::string& module_qualified_name) const;

  /// Traces `root`'s forward into a new Graph. `concrete_args` specialise parameters: each becomes
  /// placeholder `<name>_<i>` guarded by torch._assert(<name>_<i> == value, ...) (or
  /// _assert_is_none for None), and forward sees the constant. Throws TraceError on
  /// data-dependent control flow; the tracer is reusable afterwards.
  std::unique_ptr<fx::Graph> trace(const std::shared_ptr<Module>& root,
                                   const ConcreteArgs& concrete_args = {});

  /// The attribute tree of the last trace: a mirror of the LibTorch module tree (tensors copied)
  /// plus the `_tensor_constant<i>` tensors. Pass it as root of fx::GraphModule.
  std::shared_ptr<fx::Module> attributes() const { return attributes_; }

  // ---- hooks used by Value and call(), overridable like torch.fx's ----
  /// Leaf check and call_module node, or trace through.
  virtual Value call_module(::torch::nn::Module& m, std::vector<Value> args);
  /// Qualified name of `m` in the traced root; throws fx::Error(Attribute) "module is not
  /// installed as a submodule" otherwise.
  std::string path_of_module(const ::torch::nn::Module& m) const;
  /// Lowers a Value to a node argument: Proxy -> Node, parameter -> its (cached) get_attr,
  /// buffer -> get_attr, other tensor -> `_tensor_constant<i>` get_attr, containers recursively.
  fx::Argument create_arg(const Value& v);
  /// Creates a node from Value arguments and returns its Proxy.
  Value create_proxy(fx::Opcode op, fx::Target target, const std::vector<Value>& args,
                     const ValueKwargs& kwargs, std::optional<std::string> name = std::nullopt,
                     std::optional<std::string> type = std::nullopt);
  /// Whether `t` is a parameter of the traced root (a Proxy in torch.fx, unlike buffers).
  bool is_parameter(const at::Tensor& t) const;
  /// The graph being built (valid during trace(); trace() hands it to the caller).
  fx::Graph& graph() { return *graph_; }

  /// The tracer tracing on this thread, or nullptr.
  static Tracer* current();

  /// Starts recording into a fresh graph without a LibTorch root (used by Transformer):
  /// `attributes` resolves nothing but receives tensor constants.
  void begin_rootless(std::shared_ptr<fx::Module> attributes);
  /// Takes the graph built so far.
  std::unique_ptr<fx::Graph> take_graph() { return std::move(graph_); }

 private:
  void reset();
  std::unique_ptr<fx::Graph> graph_;
  std::shared_ptr<Module> root_;
  std::shared_ptr<fx::Module> attributes_;
  std::unordered_map<const ::torch::nn::Module*, std::string> module_paths_;
  std::unordered_map<const void*, std::string> param_names_;   // TensorImpl* -> qualified name
  std::unordered_map<const void*, std::string> tensor_attrs_;  // buffers and constants
  std::unordered_map<const void*, fx::Node*> param_nodes_;
  std::vector<at::Tensor> constants_;  // keeps constant tensors alive (their TensorImpl* is a key)
};

/// torch.fx.symbolic_trace(root, concrete_args): a GraphModule named after root->name().
std::unique_ptr<fx::GraphModule> symbolic_trace(const std::shared_ptr<Module>& root,
                                                const ConcreteArgs& concrete_args = {});
/// The same with a custom tracer (e.g. one overriding is_leaf_module).
std::unique_ptr<fx::GraphModule> symbolic_trace(Tracer& tracer, const std::shared_ptr<Module>& root,
                                                const ConcreteArgs& concrete_args = {});

/// A free function of Values, traced like torch.fx.symbolic_trace(fn): placeholders named by
/// `signature` (Python reads them from fn's parameters; C++ cannot), the GraphModule's class
/// named `name` (fn.__name__ in Python). Used for replace_pattern patterns and replacements:
///
///   auto pattern = fx::torch::symbolic_trace_function(
///       "pattern", {"x"}, [](std::vector<Value> a) { return F::relu(a[0] + 1); });
///   fx::replace_pattern(*gm, pattern->graph(), replacement->graph());
using TracedFunction = std::function<Value(std::vector<Value>)>;
std::unique_ptr<fx::GraphModule> symbolic_trace_function(std::string name,
                                                         std::vector<Param> signature,
                                                         TracedFunction fn,
                                                         const ConcreteArgs& concrete_args = {});

}  // namespace torch
}  // namespace fx
