// Interpreter, Transformer and ShapeProp on LibTorch (torch.fx 1.13 semantics, inventory §3.8).
#include "fx/torch/interpreter.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "fx/torch/modules.h"

namespace fx {
namespace torch {

// ---- Interpreter ----

Interpreter::Interpreter(const fx::GraphModule& module, bool garbage_collect_values)
    : module_(module), gc_(garbage_collect_values) {
  const fx::Graph& g = module.graph();
  for (fx::Node* n : g.nodes()) nodes_.push_back(n);
  free_after_.resize(nodes_.size());
  if (gc_) {
    // torch.fx: a reverse scan finds, for every value, the node that uses it last.
    std::vector<char> seen(g.id_bound(), 0);
    for (size_t i = nodes_.size(); i-- > 0;) {
      for (const fx::Node* in : nodes_[i]->all_input_nodes()) {
        if (seen[in->id()]) continue;
        seen[in->id()] = 1;
        free_after_[i].push_back(in);
      }
    }
  }
}

Interpreter::~Interpreter() = default;

const Value& Interpreter::env_value(const fx::Node* user, const fx::Node* n) const {
  if (n->id() >= has_.size() || !has_[n->id()])
    throw fx::Error(ErrorKind::Runtime,
                    "Node " + user->name() + " referenced nonexistent value " + n->name() +
                        "! Run Graph.lint() to diagnose such issues",
                    user->name());
  return env_[n->id()];
}

namespace {

// Argument -> Value with nodes replaced by their values (map_arg over env).
template <class Lookup>
Value load(const fx::Argument& a, const Lookup& lookup) {
  switch (a.kind()) {
    case fx::Argument::Kind::Node:
      return lookup(a.to_node());
    case fx::Argument::Kind::Tuple:
    case fx::Argument::Kind::List: {
      if (!a.contains_node()) return Value(a);
      Value::Items items;
      items.reserve(a.elements().size());
      for (const fx::Argument& e : a.elements()) items.push_back(load(e, lookup));
      return a.kind() == fx::Argument::Kind::Tuple ? Value::tuple(std::move(items))
                                                   : Value::list(std::move(items));
    }
    case fx::Argument::Kind::Dict: {
      Value::DictItems items;
      for (const auto& kv : a.dict_items()) items.emplace_back(kv.first, load(kv.second, lookup));
      return Value::dict(std::move(items));
    }
    case fx::Argument::Kind::Slice:
      if (a.contains_node())
        throw fx::Error(ErrorKind::Unsupported, "slices with node bounds are not supported");
      return Value(a);
    default:
      return Value(a);
  }
}

std::string augment(const std::string& what, const fx::Node& n) {
  auto st = n.stack_trace();
  return what + "\n\nWhile executing " + n.format_node() + "\nOriginal traceback:\n" +
         (st ? *st : std::string("None"));
}

}  // namespace

void Interpreter::fetch_args_kwargs_from_env(const fx::Node& n, std::vector<Value>& args,
                                             ValueKwargs& kwargs) const {
  auto lookup = [&](const fx::Node* in) -> Value { return env_value(&n, in); };
  args.clear();
  kwargs.clear();
  args.reserve(n.args().size());
  for (const fx::Argument& a : n.args()) args.push_back(load(a, lookup));
  for (const auto& kv : n.kwargs()) kwargs.emplace_back(kv.first, load(kv.second, lookup));
}

Value Interpreter::run(std::vector<Value> args, const Env& initial_env) {
  const size_t bound = module_.graph().id_bound();
  env_.assign(bound, Value());
  has_.assign(bound, 0);
  env_count_ = 0;
  for (const auto& kv : initial_env) {
    if (kv.first->id() >= bound || &kv.first->graph() != &module_.graph())
      throw fx::Error(ErrorKind::Value,
                      "initial_env: node " + kv.first->name() + " is not in this graph");
    env_[kv.first->id()] = kv.second;
    has_[kv.first->id()] = 1;
    ++env_count_;
  }
  args_ = std::move(args);
  next_arg_ = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const fx::Node* node = nodes_[i];
    if (has_[node->id()]) continue;
    current_ = node;
    Value v;
    try {
      v = run_node(*node);
    } catch (const fx::Error& e) {
      // torch.fx re-raises KeyErrors as RuntimeErrors.
      ErrorKind kind = e.kind() == ErrorKind::Key ? ErrorKind::Runtime : e.kind();
      throw fx::Error(kind, augment(e.what(), *node), node->name());
    } catch (const c10::Error& e) {
      throw fx::Error(ErrorKind::Runtime, augment(e.what_without_backtrace(), *node), node->name());
    } catch (const std::exception& e) {
      throw fx::Error(ErrorKind::Runtime, augment(e.what(), *node), node->name());
    }
    env_[node->id()] = std::move(v);
    has_[node->id()] = 1;
    ++env_count_;
    for (const fx::Node* dead : free_after_[i]) {
      if (!has_[dead->id()]) continue;
      env_[dead->id()] = Value();
      has_[dead->id()] = 0;
      --env_count_;
    }
    if (node->op() == fx::Opcode::Output) {
      current_ = nullptr;
      Value out = std::move(env_[node->id()]);
      args_.clear();
      return out;
    }
  }
  current_ = nullptr;
  return Value();
}

Value Interpreter::run_node(const fx::Node& n) {
  std::vector<Value> args;
  ValueKwargs kwargs;
  fetch_args_kwargs_from_env(n, args, kwargs);
  switch (n.op()) {
    case fx::Opcode::Placeholder:
      return placeholder(n.target().str(), args, kwargs);
    case fx::Opcode::GetAttr:
      return get_attr(n.target().str(), args, kwargs);
    case fx::Opcode::CallFunction:
      return call_function(n.target().function(), args, kwargs);
    case fx::Opcode::CallMethod:
      return call_method(n.target().str(), args, kwargs);
    case fx::Opcode::CallModule:
      return call_module(n.target().str(), args, kwargs);
    case fx::Opcode::Output:
      return output(n.target().str(), args, kwargs);
    case fx::Opcode::Root:
      break;
  }
  FX_CHECK(false, "run_node: the root sentinel is not a node");
}

Value Interpreter::placeholder(const std::string& target, const std::vector<Value>& args,
                               const ValueKwargs&) {
  if (!target.empty() && target[0] == '*') {
    Value::Items rest(args_.begin() + static_cast<std::ptrdiff_t>(next_arg_), args_.end());
    next_arg_ = args_.size();
    return Value::tuple(std::move(rest));
  }
  if (next_arg_ < args_.size()) return args_[next_arg_++];
  if (!args.empty()) return args[0];
  throw fx::Error(ErrorKind::Runtime, "Expected positional argument for parameter " + target +
                                          ", but one was not passed in!");
}

Value Interpreter::fetch_attr(const std::string& target) {
  auto it = attr_cache_.find(target);
  if (it != attr_cache_.end()) return it->second;
  const fx::Tensor* t = module_.get_tensor(target);
  if (!t) {
    // torch.fx names the longest prefix that resolved.
    std::string prefix;
    const fx::Module* m = &module_;
    size_t start = 0;
    for (;;) {
      size_t dot = target.find('.', start);
      std::string atom = target.substr(start, dot == std::string::npos ? dot : dot - start);
      prefix = prefix.empty() ? atom : prefix + "." + atom;
      auto c = m->child(atom);
      if (!c || dot == std::string::npos) break;
      m = c.get();
      start = dot + 1;
    }
    if (module_.attr_kind(target) == 'm') {
      // A ParameterList (const folding's _FX_CONST_FOLDED_ATTRS) reads as a list of tensors,
      // indexed by operator.getitem nodes.
      std::shared_ptr<fx::Module> list = module_.get_submodule(target);
      if (list->type_name() == "ParameterList" && list->children().empty() &&
          list->buffers().empty()) {
        Value::Items items;
        for (size_t i = 0; i < list->parameters().size(); ++i) {
          const fx::Tensor* p = list->parameter(std::to_string(i));
          if (!p)
            throw fx::Error(ErrorKind::Attribute, "ParameterList " + target + " has no entry " +
                                                      std::to_string(i) + " but " +
                                                      std::to_string(list->parameters().size()) +
                                                      " parameters");
          items.emplace_back(from_fx_tensor(*p));
        }
        return attr_cache_.emplace(target, Value::list(std::move(items))).first->second;
      }
      throw fx::Error(ErrorKind::Unsupported, "get_attr " + target + " is a module of type " +
                                                  list->type_name() +
                                                  ", not a tensor or ParameterList; not supported");
    }
    throw fx::Error(ErrorKind::Attribute, "Node referenced nonexistent target " + prefix);
  }
  at::Tensor v = from_fx_tensor(*t);
  if (t->requires_grad && !v.requires_grad() && v.is_floating_point()) v.set_requires_grad(true);
  return attr_cache_.emplace(target, Value(v)).first->second;
}

Value Interpreter::get_attr(const std::string& target, const std::vector<Value>&,
                            const ValueKwargs&) {
  return fetch_attr(target);
}

Value Interpreter::call_function(const fx::Function& target, const std::vector<Value>& args,
                                 const ValueKwargs& kwargs) {
  return invoke_function(target, args, kwargs);
}

Value Interpreter::call_method(const std::string& target, const std::vector<Value>& args,
                               const ValueKwargs& kwargs) {
  return invoke_method(target, args, kwargs);
}

Value Interpreter::call_module(const std::string& target, const std::vector<Value>& args,
                               const ValueKwargs& kwargs) {
  std::shared_ptr<fx::Module> m = module_.get_submodule(target);
  if (auto* gm = dynamic_cast<fx::GraphModule*>(m.get())) {
    Interpreter inner(*gm);
    return inner.run(args);
  }
  if (!kwargs.empty())
    throw fx::Error(ErrorKind::Unsupported,
                    "call_module " + target + ": keyword arguments are not supported");
  // The live LibTorch module while the mirror still matches it, else the layer rebuilt from
  // the fx::Module (a pass such as fuse_conv_bn_modules made it, or its tensors changed).
  try {
    return run_fx_module(*m, args);
  } catch (const fx::Error& e) {
    if (e.kind() != ErrorKind::Unsupported) throw;
    throw fx::Error(e.kind(), "call_module " + target + ": " + e.what());
  }
}

Value Interpreter::output(const std::string&, const std::vector<Value>& args, const ValueKwargs&) {
  if (args.empty()) throw fx::Error(ErrorKind::Runtime, "output node without a value");
  return args[0];
}

// ---- const folding ----

namespace {

// const_fold's _create_param: a tensor as is (detached), a number as torch.Tensor([i]) (float32).
fx::Tensor folded_tensor(const Value& v, const std::string& name) {
  at::Tensor t;
  if (v.is_tensor()) {
    t = v.tensor().detach();
  } else if (v.is_constant() && (v.constant().kind() == fx::Argument::Kind::Int ||
                                 v.constant().kind() == fx::Argument::Kind::Float)) {
    t = at::tensor({v.to_double()}, at::kFloat);
  } else {
    throw fx::Error(ErrorKind::Type, "run_folding: the folded value " + name + " is " + v.repr() +
                                         ", not a tensor or a number");
  }
  fx::Tensor out = share_fx_tensor(t, name);
  out.requires_grad = v.is_tensor() && v.tensor().requires_grad();
  return out;
}

}  // namespace

bool run_folding(fx::FoldedGraphModule& folded) {
  if (!folded.const_subgraph_module) return false;
  if (!folded.module)
    throw fx::Error(ErrorKind::Value, "run_folding: the FoldedGraphModule has no module");
  const std::string& name = folded.fx_const_folded_attrs_name;
  Value out = Interpreter(*folded.const_subgraph_module).run({});
  if (folded.module->attr_kind(name) == 'm') {
    std::shared_ptr<fx::Module> list = folded.module->get_submodule(name);
    if (!out.is_sequence())
      throw fx::Error(ErrorKind::Type, "run_folding: " + name +
                                           " is a ParameterList but the constant subgraph "
                                           "returned " +
                                           out.repr());
    for (size_t i = 0; i < out.elements().size(); ++i)
      list->register_parameter(std::to_string(i),
                               folded_tensor(out.elements()[i], name + "." + std::to_string(i)));
  } else {
    folded.module->register_parameter(name, folded_tensor(out, name));
  }
  return true;
}

// ---- Transformer ----

Transformer::Transformer(const fx::GraphModule& module)
    : Interpreter(module), constants_(std::make_shared<fx::Module>()) {
  tracer_.begin_rootless(constants_);
}

Transformer::~Transformer() = default;

Value Transformer::placeholder(const std::string& target, const std::vector<Value>& args,
                               const ValueKwargs&) {
  std::optional<fx::Argument> dflt;
  if (!args.empty()) dflt = tracer_.create_arg(args[0]);
  return Value::proxy(tracer_.graph().placeholder(target, std::nullopt, dflt), &tracer_);
}

Value Transformer::get_attr(const std::string& target, const std::vector<Value>&,
                            const ValueKwargs&) {
  return Value::proxy(tracer_.graph().get_attr(target), &tracer_);
}

Value Transformer::call_function(const fx::Function& target, const std::vector<Value>& args,
                                 const ValueKwargs& kwargs) {
  return tracer_.create_proxy(fx::Opcode::CallFunction, target, args, kwargs);
}

Value Transformer::call_module(const std::string& target, const std::vector<Value>& args,
                               const ValueKwargs& kwargs) {
  return tracer_.create_proxy(fx::Opcode::CallModule, target, args, kwargs);
}

std::unique_ptr<fx::GraphModule> Transformer::transform() {
  Value result = run({});
  tracer_.graph().output(tracer_.create_arg(result));
  std::unique_ptr<fx::Graph> graph = tracer_.take_graph();
  tracer_.begin_rootless(constants_);
  // The new module copies its attributes from the old one plus any constants recorded now.
  fx::Module root(module().type_name(), module().extra_repr());
  for (const auto& kv : module().children()) root.add_module(kv.first, kv.second);
  for (const auto& kv : module().parameters()) root.register_parameter(kv.first, kv.second);
  for (const auto& kv : module().buffers()) root.register_buffer(kv.first, kv.second);
  for (const auto& kv : constants_->buffers()) root.register_buffer(kv.first, kv.second);
  return std::make_unique<fx::GraphModule>(&root, std::move(graph), module().type_name());
}

// ---- ShapeProp ----

TensorMeta extract_tensor_meta(const at::Tensor& t) {
  TensorMeta m;
  m.shape = t.sizes().vec();
  m.dtype = to_fx_dtype(static_cast<int8_t>(t.scalar_type()));
  m.requires_grad = t.requires_grad();
  m.stride = t.strides().vec();
  if (t.is_contiguous(at::MemoryFormat::Contiguous))
    m.memory_format = fx::MemoryFormat::Contiguous;
  else if (t.is_contiguous(at::MemoryFormat::ChannelsLast))
    m.memory_format = fx::MemoryFormat::ChannelsLast;
  else if (t.is_contiguous(at::MemoryFormat::ChannelsLast3d))
    m.memory_format = fx::MemoryFormat::ChannelsLast3d;
  m.is_quantized = t.is_quantized();
  return m;
}

namespace {

fx::Argument int_tuple_arg(const std::vector<int64_t>& v) {
  fx::Argument::Items items;
  for (int64_t d : v) items.emplace_back(static_cast<long>(d));
  return fx::Argument::tuple(std::move(items));
}

std::string int_list_str(const std::vector<int64_t>& v, bool tuple) {
  std::string s = tuple ? "(" : "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  if (tuple && v.size() == 1) s += ",";
  return s + (tuple ? ")" : "]");
}

}  // namespace

fx::Argument tensor_meta_argument(const TensorMeta& m) {
  fx::Argument::DictItems items;
  items.emplace_back("shape", int_tuple_arg(m.shape));
  items.emplace_back("dtype", m.dtype);
  items.emplace_back("requires_grad", m.requires_grad);
  items.emplace_back("stride", int_tuple_arg(m.stride));
  items.emplace_back("memory_format",
                     m.memory_format ? fx::Argument(*m.memory_format) : fx::Argument());
  items.emplace_back("is_quantized", m.is_quantized);
  items.emplace_back("qparams", fx::Argument::dict({}));
  return fx::Argument::dict(std::move(items));
}

std::optional<TensorMeta> tensor_meta(const fx::Node& n) {
  const fx::Argument* a = n.meta().find("tensor_meta");
  if (!a || a->kind() != fx::Argument::Kind::Dict) return std::nullopt;
  TensorMeta m;
  for (const auto& kv : a->dict_items()) {
    const std::string& k = kv.first.to_string();
    if (k == "shape" || k == "stride") {
      std::vector<int64_t>& dst = k == "shape" ? m.shape : m.stride;
      for (const fx::Argument& e : kv.second.elements()) dst.push_back(e.to_int());
    } else if (k == "dtype") {
      m.dtype = kv.second.to_dtype();
    } else if (k == "requires_grad") {
      m.requires_grad = kv.second.to_bool();
    } else if (k == "memory_format" && !kv.second.is_none()) {
      m.memory_format = kv.second.to_memory_format();
    } else if (k == "is_quantized") {
      m.is_quantized = kv.second.to_bool();
    }
  }
  return m;
}

std::string tensor_meta_repr(const TensorMeta& m) {
  return "TensorMetadata(shape=torch.Size(" + int_list_str(m.shape, false) + "), dtype=torch." +
         fx::dtype_name(m.dtype) + ", requires_grad=" + (m.requires_grad ? "True" : "False") +
         ", stride=" + int_list_str(m.stride, true) + ", memory_format=" +
         (m.memory_format ? std::string("torch.") + fx::memory_format_name(*m.memory_format)
                          : std::string("None")) +
         ", is_quantized=" + (m.is_quantized ? "True" : "False") + ", qparams={})";
}

ShapeProp::ShapeProp(fx::GraphModule& module) : Interpreter(module) {}

namespace {

// map_aggregate(result, extract_tensor_meta); sets `found` if a tensor occurs.
fx::Argument meta_of(const Value& v, bool& found) {
  switch (v.kind()) {
    case Value::Kind::Tensor:
      found = true;
      return tensor_meta_argument(extract_tensor_meta(v.tensor()));
    case Value::Kind::Tuple:
    case Value::Kind::List: {
      fx::Argument::Items items;
      for (const Value& e : v.elements()) items.push_back(meta_of(e, found));
      return v.kind() == Value::Kind::Tuple ? fx::Argument::tuple(std::move(items))
                                            : fx::Argument::list(std::move(items));
    }
    case Value::Kind::Dict: {
      fx::Argument::DictItems items;
      for (const auto& kv : v.dict_items()) items.emplace_back(kv.first, meta_of(kv.second, found));
      return fx::Argument::dict(std::move(items));
    }
    case Value::Kind::Constant:
      return v.constant();
    case Value::Kind::Proxy:
      return fx::Argument();
  }
  return fx::Argument();
}

const char* python_type_of(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Tensor:
      return "torch.Tensor";
    case Value::Kind::Tuple:
      return "tuple";
    case Value::Kind::List:
      return "list";
    case Value::Kind::Dict:
      return "dict";
    case Value::Kind::Proxy:
      return "torch.fx.proxy.Proxy";
    case Value::Kind::Constant:
      switch (v.constant().kind()) {
        case fx::Argument::Kind::None:
          return "NoneType";
        case fx::Argument::Kind::Bool:
          return "bool";
        case fx::Argument::Kind::Int:
          return "int";
        case fx::Argument::Kind::Float:
          return "float";
        case fx::Argument::Kind::String:
          return "str";
        default:
          return "object";
      }
  }
  return "object";
}

}  // namespace

Value ShapeProp::run_node(const fx::Node& n) {
  Value result;
  try {
    result = Interpreter::run_node(n);
  } catch (const std::exception& e) {
    fx::Argument::DictItems meta;
    for (const auto& kv : n.meta()) meta.emplace_back(kv.first, kv.second);
    throw fx::Error(ErrorKind::Runtime,
                    "ShapeProp error for: node=" + n.format_node() + " with meta=" +
                        fx::Argument::dict(meta).repr() + "\ncaused by: " + e.what(),
                    n.name());
  }
  bool found = false;
  fx::Argument meta = meta_of(result, found);
  fx::Node& node = const_cast<fx::Node&>(n);  // ShapeProp was given a mutable GraphModule
  if (found) node.meta().set("tensor_meta", meta);
  node.meta().set("type", python_type_of(result));
  return result;
}

}  // namespace torch
}  // namespace fx
