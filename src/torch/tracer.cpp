// Symbolic tracing of fx::torch::Module (torch.fx's Tracer.trace, inventory §3.1).
#include "fx/torch/tracer.h"

#include "fx/torch/modules.h"

namespace fx {
namespace torch {

namespace {

thread_local Tracer* g_current = nullptr;

// Makes `t` the current tracer for the scope (nested traces restore the outer one).
class CurrentTracer {
 public:
  explicit CurrentTracer(Tracer* t) : prev_(g_current) { g_current = t; }
  ~CurrentTracer() { g_current = prev_; }
  CurrentTracer(const CurrentTracer&) = delete;
  CurrentTracer& operator=(const CurrentTracer&) = delete;

 private:
  Tracer* prev_;
};

const void* key_of(const at::Tensor& t) { return t.unsafeGetTensorImpl(); }

}  // namespace

// ---- Module ----

Module::Module(std::string name) : ::torch::nn::Module(std::move(name)) {}
Module::~Module() = default;

Value Module::forward(Value) {
  throw fx::Error(ErrorKind::Unsupported,
                  name() +
                      ".forward(x) is not implemented: override forward(Value) or "
                      "forward_args() together with signature()");
}

Value Module::forward_args(std::vector<Value> args) {
  if (args.size() != 1)
    throw fx::Error(ErrorKind::Type, name() + ".forward() takes 1 argument but " +
                                         std::to_string(args.size()) +
                                         " were given (override forward_args for more)");
  return forward(std::move(args[0]));
}

std::vector<Param> Module::signature() const { return {Param("x")}; }

Value Module::operator()(std::vector<Value> args) {
  // Python binds missing trailing arguments to their defaults.
  const std::vector<Param> sig = signature();
  if (args.size() > sig.size())
    throw fx::Error(ErrorKind::Type, name() + ".forward() takes " + std::to_string(sig.size()) +
                                         " arguments but " + std::to_string(args.size()) +
                                         " were given");
  for (size_t i = args.size(); i < sig.size(); ++i) {
    if (!sig[i].default_value)
      throw fx::Error(ErrorKind::Type,
                      name() + ".forward() missing required argument '" + sig[i].name + "'");
    args.emplace_back(*sig[i].default_value);
  }
  return call(*this, std::move(args));
}

Value call(::torch::nn::Module& m, std::vector<Value> args) {
  if (Tracer* t = Tracer::current()) return t->call_module(m, std::move(args));
  return run_module(m, std::move(args));
}

// ---- Tracer ----

Tracer::Tracer() = default;
Tracer::~Tracer() = default;

Tracer* Tracer::current() { return g_current; }

bool Tracer::is_leaf_module(const ::torch::nn::Module& m, const std::string&) const {
  if (dynamic_cast<const Module*>(&m)) return false;
  return !is_container(m);
}

void Tracer::reset() {
  graph_ = std::make_unique<fx::Graph>();
  root_.reset();
  attributes_.reset();
  module_paths_.clear();
  param_names_.clear();
  tensor_attrs_.clear();
  param_nodes_.clear();
  constants_.clear();
}

void Tracer::begin_rootless(std::shared_ptr<fx::Module> attributes) {
  reset();
  attributes_ = std::move(attributes);
}

bool Tracer::is_parameter(const at::Tensor& t) const {
  return t.defined() && param_names_.count(key_of(t)) != 0;
}

std::string Tracer::path_of_module(const ::torch::nn::Module& m) const {
  auto it = module_paths_.find(&m);
  if (it == module_paths_.end())
    throw fx::Error(ErrorKind::Attribute,
                    "module is not installed as a submodule (" + python_type_name(m) + ")");
  return it->second;
}

fx::Argument Tracer::create_arg(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Constant:
      return v.constant();
    case Value::Kind::Proxy:
      return fx::Argument(v.node());
    case Value::Kind::Tuple:
    case Value::Kind::List: {
      fx::Argument::Items items;
      for (const Value& e : v.elements()) items.push_back(create_arg(e));
      return v.kind() == Value::Kind::Tuple ? fx::Argument::tuple(std::move(items))
                                            : fx::Argument::list(std::move(items));
    }
    case Value::Kind::Dict: {
      fx::Argument::DictItems items;
      for (const auto& kv : v.dict_items()) items.emplace_back(kv.first, create_arg(kv.second));
      return fx::Argument::dict(std::move(items));
    }
    case Value::Kind::Tensor: {
      const at::Tensor& t = v.tensor();
      const void* key = key_of(t);
      if (auto p = param_names_.find(key); p != param_names_.end()) {
        // torch.fx caches the Proxy of a parameter: one get_attr per parameter per trace.
        fx::Node*& node = param_nodes_[key];
        if (!node) node = graph_->get_attr(p->second);
        return fx::Argument(node);
      }
      auto a = tensor_attrs_.find(key);
      if (a == tensor_attrs_.end()) {
        std::string name;
        for (size_t i = 0;; ++i) {
          name = "_tensor_constant" + std::to_string(i);
          if (!attributes_ || !attributes_->attr_kind(name)) {
            bool taken = false;
            for (const auto& kv : tensor_attrs_) taken = taken || kv.second == name;
            if (!taken) break;
          }
        }
        a = tensor_attrs_.emplace(key, name).first;
        constants_.push_back(t);
        if (attributes_) attributes_->register_buffer(name, share_fx_tensor(t, name));
      }
      return fx::Argument(graph_->get_attr(a->second));
    }
  }
  FX_CHECK(false, "create_arg: unknown Value kind");
}

Value Tracer::create_proxy(fx::Opcode op, fx::Target target, const std::vector<Value>& args,
                           const ValueKwargs& kwargs, std::optional<std::string> name,
                           std::optional<std::string> type) {
  FX_CHECK(graph_ != nullptr, "create_proxy outside of a trace");
  std::vector<fx::Argument> a;
  a.reserve(args.size());
  for (const Value& v : args) a.push_back(create_arg(v));
  fx::Kwargs k;
  for (const auto& kv : kwargs) k.set(kv.first, create_arg(kv.second));
  fx::Node* n = graph_->create_node(op, std::move(target), std::move(a), std::move(k),
                                    std::move(name), std::move(type));
  // torch.fx autowraps the math module's functions (Tracer(autowrap_modules=(math,))): such
  // calls are marked, and the generated code registers them with torch.fx.wrap.
  if (op == fx::Opcode::CallFunction && n->target().function().info().module == "math")
    n->meta().set("is_wrapped", true);
  return Value::proxy(n, this);
}

Value Tracer::call_module(::torch::nn::Module& m, std::vector<Value> args) {
  const std::string path = path_of_module(m);
  if (is_leaf_module(m, path)) return create_proxy(fx::Opcode::CallModule, path, args, {});
  if (auto* fxm = dynamic_cast<Module*>(&m)) return fxm->forward_args(std::move(args));
  if (is_container(m)) {
    // Sequential: its children in order. (ModuleList/ModuleDict are not callable in PyTorch.)
    if (python_type_name(m) != "Sequential")
      throw fx::Error(ErrorKind::Type, "'" + python_type_name(m) + "' object is not callable");
    if (args.size() != 1) throw fx::Error(ErrorKind::Type, "Sequential takes exactly one input");
    Value x = std::move(args[0]);
    for (const auto& child : m.children()) x = call(*child, {std::move(x)});
    return x;
  }
  throw fx::Error(ErrorKind::Unsupported,
                  "cannot trace through module '" + path + "' of type " + python_type_name(m) +
                      ": it is not an fx::torch::Module; keep it a leaf (is_leaf_module)");
}

std::unique_ptr<fx::Graph> Tracer::trace(const std::shared_ptr<Module>& root,
                                         const ConcreteArgs& concrete_args) {
  if (!root) throw fx::Error(ErrorKind::Value, "trace(): root module is null");
  reset();
  root_ = root;
  for (const auto& item : root->named_modules()) module_paths_[item.value().get()] = item.key();
  for (const auto& item : root->named_parameters()) param_names_[key_of(item.value())] = item.key();
  for (const auto& item : root->named_buffers()) tensor_attrs_[key_of(item.value())] = item.key();
  attributes_ = mirror_module(root);

  for (const auto& kv : concrete_args) {
    bool found = false;
    for (const Param& p : root->signature()) found = found || p.name == kv.first;
    if (!found)
      throw fx::Error(ErrorKind::Value, "concrete_args: forward of " + root->name() +
                                            " has no parameter '" + kv.first + "'");
  }

  CurrentTracer scope(this);
  std::vector<Value> args;
  for (const Param& p : root->signature()) {
    const Value* concrete = nullptr;
    for (const auto& kv : concrete_args)
      if (kv.first == p.name) concrete = &kv.second;
    if (!concrete) {
      args.push_back(Value::proxy(graph_->placeholder(p.name, p.type, p.default_value), this));
      continue;
    }
    // torch.fx 1.13 create_args_for_root.replace_ph: placeholder `<name>_<i>` (i counts the
    // pytree leaves of this parameter's value: 1 for a scalar) and a guard.
    const std::string ph_name = p.name + "_1";
    Value out = Value::proxy(graph_->placeholder(ph_name, p.type, p.default_value), this);
    const std::string str = concrete->is_constant() ? concrete->constant().str() : concrete->repr();
    const std::string msg =
        p.name + " has been specialized to have value " + str + " but got another value";
    if (concrete->is_none()) {
      create_proxy(fx::Opcode::CallFunction, fx::fn("torch.fx._symbolic_trace._assert_is_none"),
                   {out, Value(msg)}, {});
    } else if (concrete->is_constant()) {
      Value eq = out == *concrete;
      create_proxy(fx::Opcode::CallFunction, fx::fn("torch._assert"), {eq, Value(msg)}, {});
    }
    args.push_back(*concrete);
  }
  Value result = root->forward_args(std::move(args));
  graph_->output(create_arg(result), root->return_type());
  return std::move(graph_);
}

std::unique_ptr<fx::GraphModule> symbolic_trace(Tracer& tracer, const std::shared_ptr<Module>& root,
                                                const ConcreteArgs& concrete_args) {
  std::unique_ptr<fx::Graph> graph = tracer.trace(root, concrete_args);
  auto attrs = tracer.attributes();
  return std::make_unique<fx::GraphModule>(attrs.get(), std::move(graph), root->name());
}

std::unique_ptr<fx::GraphModule> symbolic_trace(const std::shared_ptr<Module>& root,
                                                const ConcreteArgs& concrete_args) {
  Tracer tracer;
  return symbolic_trace(tracer, root, concrete_args);
}

namespace {
// The module torch.fx would not need: a function's forward and signature, no attributes.
class FunctionModule : public Module {
 public:
  FunctionModule(std::string name, std::vector<Param> signature, TracedFunction fn)
      : Module(std::move(name)), signature_(std::move(signature)), fn_(std::move(fn)) {}
  Value forward_args(std::vector<Value> args) override { return fn_(std::move(args)); }
  std::vector<Param> signature() const override { return signature_; }

 private:
  std::vector<Param> signature_;
  TracedFunction fn_;
};
}  // namespace

std::unique_ptr<fx::GraphModule> symbolic_trace_function(std::string name,
                                                         std::vector<Param> signature,
                                                         TracedFunction fn,
                                                         const ConcreteArgs& concrete_args) {
  if (!fn)
    throw fx::Error(fx::ErrorKind::Value,
                    "symbolic_trace_function: '" + name + "' has no function");
  auto m = std::make_shared<FunctionModule>(std::move(name), std::move(signature), std::move(fn));
  return symbolic_trace(m, concrete_args);
}

}  // namespace torch
}  // namespace fx
