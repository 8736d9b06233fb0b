// fx::torch::Value: construction, accessors, Python truthiness, and the record-or-run dispatch
// of every Python-level call (operators, torch functions, tensor methods).
#include "fx/torch/value.h"

#include <ATen/core/Tensor.h>

#include "fx/torch/interpreter.h"
#include "fx/torch/modules.h"
#include "fx/torch/tracer.h"

namespace fx {
namespace torch {

const char* const kControlFlowMessage =
    "symbolically traced variables cannot be used as inputs to control flow";
const char* const kIterMessage =
    "Proxy object cannot be iterated. This can be attempted when the Proxy is used in a loop or "
    "as a *args or **kwargs function argument. See the torch.fx docs on pytorch.org for a more "
    "detailed explanation of what types of control flow can be traced, and check out the Proxy "
    "docstring for help troubleshooting Proxy iteration errors";
const char* const kLenMessage =
    "'len' is not supported in symbolic tracing by default. If you want this call to be "
    "recorded, please call torch.fx.wrap('len') at module scope";

/// A Proxy's state. A lazy attribute access (`x.shape`) has no node until first used, like
/// torch.fx's Attribute.
struct ProxyState {
  fx::Node* node = nullptr;
  Tracer* tracer = nullptr;
  Value base;  // the object of a lazy attribute access
  std::string attr;

  fx::Node* materialize() {
    if (!node) {
      Value v = tracer->create_proxy(fx::Opcode::CallFunction, fx::fn("builtins.getattr"),
                                     {base, Value(attr)}, {});
      node = v.proxy_->node;
    }
    return node;
  }
};

namespace {

const char* kind_str(Value::Kind k) {
  switch (k) {
    case Value::Kind::Constant:
      return "constant";
    case Value::Kind::Tensor:
      return "Tensor";
    case Value::Kind::Proxy:
      return "Proxy";
    case Value::Kind::Tuple:
      return "tuple";
    case Value::Kind::List:
      return "list";
    case Value::Kind::Dict:
      return "dict";
  }
  return "?";
}

[[noreturn]] void type_error(const Value& v, const char* expected) {
  throw fx::Error(ErrorKind::Type,
                  std::string("expected a ") + expected + " value, got " + v.repr());
}

}  // namespace

Value::Value(fx::Argument a) : kind_(Kind::Constant) {
  if (a.contains_node())
    throw fx::Error(ErrorKind::Value, "Value(Argument): " + a.repr() +
                                          " holds a Node; use Value::proxy(node, tracer)");
  if (a.kind() == fx::Argument::Kind::Tuple || a.kind() == fx::Argument::Kind::List) {
    Items items;
    for (const fx::Argument& e : a.elements()) items.emplace_back(e);
    kind_ = a.kind() == fx::Argument::Kind::Tuple ? Kind::Tuple : Kind::List;
    items_ = std::make_shared<const Items>(std::move(items));
    return;
  }
  if (a.kind() == fx::Argument::Kind::Dict) {
    DictItems items;
    for (const auto& kv : a.dict_items()) items.emplace_back(kv.first, Value(kv.second));
    kind_ = Kind::Dict;
    dict_ = std::make_shared<const DictItems>(std::move(items));
    return;
  }
  constant_ = std::move(a);
}

Value Value::proxy(fx::Node* node, Tracer* tracer) {
  FX_CHECK(node && tracer, "Value::proxy needs a node and a tracer");
  Value v;
  v.kind_ = Kind::Proxy;
  v.proxy_ = std::make_shared<ProxyState>();
  v.proxy_->node = node;
  v.proxy_->tracer = tracer;
  return v;
}

Value Value::tuple(Items items) {
  Value v;
  v.kind_ = Kind::Tuple;
  v.items_ = std::make_shared<const Items>(std::move(items));
  return v;
}
Value Value::list(Items items) {
  Value v;
  v.kind_ = Kind::List;
  v.items_ = std::make_shared<const Items>(std::move(items));
  return v;
}
Value Value::dict(DictItems items) {
  for (const auto& kv : items)
    if (kv.first.contains_node())
      // torch.fx 1.13's text, including its missing f-string.
      throw fx::Error(ErrorKind::Runtime,
                      "Keys for dictionaries used as an argument cannot contain a Node. Got key: "
                      "{k}");
  Value v;
  v.kind_ = Kind::Dict;
  v.dict_ = std::make_shared<const DictItems>(std::move(items));
  return v;
}

const at::Tensor& Value::tensor() const {
  if (kind_ != Kind::Tensor) type_error(*this, "Tensor");
  return tensor_;
}
const fx::Argument& Value::constant() const {
  if (kind_ != Kind::Constant) type_error(*this, "constant");
  return constant_;
}
fx::Node* Value::node() const {
  if (kind_ != Kind::Proxy) type_error(*this, "Proxy");
  return proxy_->materialize();
}
Tracer* Value::tracer() const {
  if (kind_ != Kind::Proxy) type_error(*this, "Proxy");
  return proxy_->tracer;
}
const Value::Items& Value::elements() const {
  if (!is_sequence()) type_error(*this, "tuple or list");
  return *items_;
}
const Value::DictItems& Value::dict_items() const {
  if (kind_ != Kind::Dict) type_error(*this, "dict");
  return *dict_;
}

int64_t Value::to_int() const {
  switch (kind_) {
    case Kind::Constant:
      if (constant_.kind() == fx::Argument::Kind::Float)
        return static_cast<int64_t>(constant_.to_double());
      if (constant_.kind() == fx::Argument::Kind::Bool) return constant_.to_bool() ? 1 : 0;
      return constant_.to_int();
    case Kind::Tensor:
      return tensor_.item<int64_t>();
    case Kind::Proxy:
      throw fx::Error(ErrorKind::Type,
                      "int() argument must be a string, a bytes-like object or a real number, "
                      "not 'Proxy'");
    default:
      type_error(*this, "int");
  }
}

double Value::to_double() const {
  switch (kind_) {
    case Kind::Constant:
      return constant_.to_double();
    case Kind::Tensor:
      return tensor_.item<double>();
    case Kind::Proxy:
      throw fx::Error(ErrorKind::Type,
                      "float() argument must be a string or a real number, not 'Proxy'");
    default:
      type_error(*this, "float");
  }
}

bool Value::contains_proxy() const { return find_tracer() != nullptr; }

Tracer* Value::find_tracer() const {
  switch (kind_) {
    case Kind::Proxy:
      return proxy_->tracer;
    case Kind::Tuple:
    case Kind::List:
      for (const Value& v : *items_)
        if (Tracer* t = v.find_tracer()) return t;
      return nullptr;
    case Kind::Dict:
      for (const auto& kv : *dict_)
        if (Tracer* t = kv.second.find_tracer()) return t;
      return nullptr;
    case Kind::Constant:
    case Kind::Tensor:
      return nullptr;
  }
  return nullptr;
}

Value::operator bool() const {
  switch (kind_) {
    case Kind::Proxy:
      throw TraceError(kControlFlowMessage);
    case Kind::Tensor:
      if (tensor_.numel() != 1)
        throw fx::Error(ErrorKind::Runtime,
                        "Boolean value of Tensor with more than one value is ambiguous");
      return tensor_.item<bool>();
    case Kind::Tuple:
    case Kind::List:
      return !items_->empty();
    case Kind::Dict:
      return !dict_->empty();
    case Kind::Constant:
      switch (constant_.kind()) {
        case fx::Argument::Kind::None:
          return false;
        case fx::Argument::Kind::Bool:
          return constant_.to_bool();
        case fx::Argument::Kind::Int:
          return constant_.to_int() != 0;
        case fx::Argument::Kind::Float:
          return constant_.to_double() != 0.0;
        case fx::Argument::Kind::String:
          return !constant_.to_string().empty();
        default:
          return true;
      }
  }
  return true;
}

size_t Value::len() const {
  switch (kind_) {
    case Kind::Proxy:
      throw TraceError(kLenMessage);
    case Kind::Tensor:
      if (tensor_.dim() == 0) throw fx::Error(ErrorKind::Type, "len() of a 0-d tensor");
      return static_cast<size_t>(tensor_.size(0));
    case Kind::Tuple:
    case Kind::List:
      return items_->size();
    case Kind::Dict:
      return dict_->size();
    case Kind::Constant:
      if (constant_.kind() == fx::Argument::Kind::String) return constant_.to_string().size();
      throw fx::Error(ErrorKind::Type, "object of type " + constant_.repr() + " has no len()");
  }
  return 0;
}

Value::Items::const_iterator Value::begin() const {
  if (kind_ == Kind::Proxy) throw TraceError(kIterMessage);
  return elements().begin();
}
Value::Items::const_iterator Value::end() const {
  if (kind_ == Kind::Proxy) throw TraceError(kIterMessage);
  return elements().end();
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::Constant:
      return constant_.repr();
    case Kind::Tensor: {
      if (!tensor_.defined()) return "tensor(undefined)";
      std::string s = "tensor(" + std::string(c10::toString(tensor_.scalar_type())) + "[";
      for (int64_t i = 0; i < tensor_.dim(); ++i)
        s += (i ? ", " : "") + std::to_string(tensor_.size(i));
      return s + "])";
    }
    case Kind::Proxy:
      return "Proxy(" + (proxy_->node ? proxy_->node->name() : proxy_->attr) + ")";
    case Kind::Tuple:
    case Kind::List: {
      const bool tup = kind_ == Kind::Tuple;
      std::string s = tup ? "(" : "[";
      for (size_t i = 0; i < items_->size(); ++i) s += (i ? ", " : "") + (*items_)[i].repr();
      if (tup && items_->size() == 1) s += ",";
      return s + (tup ? ")" : "]");
    }
    case Kind::Dict: {
      std::string s = "{";
      for (size_t i = 0; i < dict_->size(); ++i)
        s += (i ? ", " : "") + (*dict_)[i].first.repr() + ": " + (*dict_)[i].second.repr();
      return s + "}";
    }
  }
  return kind_str(kind_);
}

std::string Value::method_name(const char* name) {
  std::string s(name);
  if (!s.empty() && s.back() == '_' && (s == "float_")) s.pop_back();
  return s;
}

void split_args(std::vector<Arg> args, std::vector<Value>& positional, ValueKwargs& kwargs) {
  for (Arg& a : args) {
    if (a.key.empty()) {
      if (!kwargs.empty())
        throw fx::Error(ErrorKind::Value, "positional argument follows keyword argument");
      positional.push_back(std::move(a.value));
    } else {
      for (const auto& kv : kwargs)
        if (kv.first == a.key)
          throw fx::Error(ErrorKind::Value, "keyword argument repeated: " + a.key);
      kwargs.emplace_back(std::move(a.key), std::move(a.value));
    }
  }
}

namespace {

Tracer* tracer_of(const std::vector<Value>& args, const ValueKwargs& kwargs) {
  for (const Value& v : args)
    if (Tracer* t = v.find_tracer()) return t;
  for (const auto& kv : kwargs)
    if (Tracer* t = kv.second.find_tracer()) return t;
  return nullptr;
}

}  // namespace

Value invoke_method(const std::string& name, const std::vector<Value>& args,
                    const ValueKwargs& kwargs) {
  if (Tracer* t = tracer_of(args, kwargs))
    return t->create_proxy(fx::Opcode::CallMethod, name, args, kwargs);
  return OpRegistry::run_method(name, args, kwargs);
}

Value invoke_function(const fx::Function& target, const std::vector<Value>& args,
                      const ValueKwargs& kwargs) {
  if (Tracer* t = tracer_of(args, kwargs))
    return t->create_proxy(fx::Opcode::CallFunction, target, args, kwargs);
  return OpRegistry::run_function(target, args, kwargs);
}

Value Value::call_method(const std::string& method, std::vector<Arg> args) const {
  std::vector<Value> positional{*this};
  ValueKwargs kwargs;
  split_args(std::move(args), positional, kwargs);
  return invoke_method(method, positional, kwargs);
}

Value call_function(const std::string& target, std::vector<Arg> args) {
  std::vector<Value> positional;
  ValueKwargs kwargs;
  split_args(std::move(args), positional, kwargs);
  return invoke_function(fx::fn(target), positional, kwargs);
}

Value Value::operator[](const Value& index) const {
  static const fx::Function getitem = fx::fn("operator.getitem");
  // Indexing a real tuple/list/dict is plain Python, even if it holds Proxies.
  if (!is_proxy() && !index.is_proxy())
    return OpRegistry::run_function(getitem, {*this, index}, {});
  return invoke_function(getitem, {*this, index}, {});
}

Value Value::attr(const std::string& name) const {
  if (kind_ == Kind::Proxy) {
    Value v;
    v.kind_ = Kind::Proxy;
    v.proxy_ = std::make_shared<ProxyState>();
    v.proxy_->tracer = proxy_->tracer;
    v.proxy_->base = *this;
    v.proxy_->attr = name;
    return v;
  }
  static const fx::Function getattr = fx::fn("builtins.getattr");
  return invoke_function(getattr, {*this, Value(name)}, {});
}

Value slice(Value start, Value stop, Value step) {
  for (const Value* v : {&start, &stop, &step})
    if (!v->is_constant())
      throw fx::Error(ErrorKind::Unsupported,
                      "slice(): only constant bounds are supported, got " + v->repr());
  return Value(fx::Argument::slice(start.constant(), stop.constant(), step.constant()));
}

Value ellipsis() { return Value(fx::Argument::ellipsis()); }

// ---- operators ----

namespace {

// torch.fx: `tensor + proxy` runs Tensor.__add__ first, which __torch_function__ records as the
// tensor method (call_method add on a `_tensor_constant`); a parameter is itself a Proxy in
// torch.fx, so it takes the operator path.
Value binary(const char* op_qualname, const char* tensor_method, const Value& a, const Value& b) {
  // Python dispatches operators on the operands themselves: a tuple holding Proxies is a tuple.
  if (!a.is_proxy() && !b.is_proxy())
    return OpRegistry::run_function(fx::fn(op_qualname), {a, b}, {});
  if (tensor_method && a.is_tensor() && !b.is_tensor()) {
    if (Tracer* t = b.find_tracer())
      if (!t->is_parameter(a.tensor()))
        return t->create_proxy(fx::Opcode::CallMethod, tensor_method, {a, b}, {});
  }
  return invoke_function(fx::fn(op_qualname), {a, b}, {});
}

}  // namespace

#define FX_TORCH_BINARY(sym, qual, method) \
  Value operator sym(const Value& a, const Value& b) { return binary(qual, method, a, b); }
FX_TORCH_BINARY(+, "operator.add", "add")
FX_TORCH_BINARY(-, "operator.sub", "sub")
FX_TORCH_BINARY(*, "operator.mul", "mul")
FX_TORCH_BINARY(/, "operator.truediv", "div")
FX_TORCH_BINARY(%, "operator.mod", nullptr)
FX_TORCH_BINARY(==, "operator.eq", "eq")
FX_TORCH_BINARY(!=, "operator.ne", "ne")
FX_TORCH_BINARY(<, "operator.lt", "lt")
FX_TORCH_BINARY(<=, "operator.le", "le")
FX_TORCH_BINARY(>, "operator.gt", "gt")
FX_TORCH_BINARY(>=, "operator.ge", "ge")
FX_TORCH_BINARY(&, "operator.and_", nullptr)
FX_TORCH_BINARY(|, "operator.or_", nullptr)
FX_TORCH_BINARY(^, "operator.xor", nullptr)
#undef FX_TORCH_BINARY

Value matmul_op(const Value& a, const Value& b) {
  return binary("operator.matmul", "matmul", a, b);
}
Value pow_op(const Value& a, const Value& b) { return binary("operator.pow", "pow", a, b); }
Value floordiv_op(const Value& a, const Value& b) {
  return binary("operator.floordiv", nullptr, a, b);
}
Value operator-(const Value& a) { return invoke_function(fx::fn("operator.neg"), {a}, {}); }
Value math_sqrt(const Value& x) { return call_function("math.sqrt", {x}); }
Value operator+(const Value& a) { return invoke_function(fx::fn("operator.pos"), {a}, {}); }
Value operator~(const Value& a) { return invoke_function(fx::fn("operator.invert"), {a}, {}); }

// ---- torch.nn.functional ----

namespace F {

Value relu(const Value& x, bool inplace) {
  return call_function("torch.nn.functional.relu", {x, kw("inplace", inplace)});
}
Value gelu(const Value& x) { return call_function("torch.nn.functional.gelu", {x}); }
Value gelu(const Value& x, const std::string& approximate) {
  return call_function("torch.nn.functional.gelu", {x, kw("approximate", approximate)});
}
Value softmax(const Value& x, const Value& dim) {
  return call_function("torch.nn.functional.softmax",
                       {x, kw("dim", dim), kw("_stacklevel", 3), kw("dtype", Value())});
}
Value log_softmax(const Value& x, const Value& dim) {
  return call_function("torch.nn.functional.log_softmax",
                       {x, kw("dim", dim), kw("_stacklevel", 3), kw("dtype", Value())});
}
Value adaptive_avg_pool2d(const Value& x, const Value& output_size) {
  return call_function("torch.nn.functional.adaptive_avg_pool2d", {x, output_size});
}
Value dropout(const Value& x, double p, bool training, bool inplace) {
  return call_function("torch.nn.functional.dropout",
                       {x, kw("p", p), kw("training", training), kw("inplace", inplace)});
}
Value linear(const Value& x, const Value& weight, const Value& bias) {
  return call_function("torch._C._nn.linear", {x, weight, bias});
}
Value layer_norm(const Value& x, const Value& normalized_shape, const Value& weight,
                 const Value& bias, double eps) {
  return call_function("torch.nn.functional.layer_norm", {x, normalized_shape, kw("weight", weight),
                                                          kw("bias", bias), kw("eps", eps)});
}

}  // namespace F

}  // namespace torch
}  // namespace fx
