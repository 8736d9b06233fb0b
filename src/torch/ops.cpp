// The op registry: LibTorch implementations of call_function / call_method targets, called with
// Python-style args and kwargs. Shared by eager Value calls and the Interpreter, so a traced graph
// runs exactly the kernels the eager forward ran.
#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "fx/torch/interpreter.h"
#include "fx/torch/modules.h"
#include "torch/ops_internal.h"

namespace fx {
namespace torch {

namespace {

using namespace detail;

Table& table();
void register_builtin_ops(Table& t);

// Python arithmetic on two numbers (sizes, scalars).
enum class Bin { Add, Sub, Mul, TrueDiv, FloorDiv, Mod, Pow, Eq, Ne, Lt, Le, Gt, Ge, And, Or, Xor };

// Python's comparison operators, for both number types; nullopt for the other operators.
template <class T>
std::optional<Value> compare(Bin op, T x, T y) {
  switch (op) {
    case Bin::Eq:
      return Value(x == y);
    case Bin::Ne:
      return Value(x != y);
    case Bin::Lt:
      return Value(x < y);
    case Bin::Le:
      return Value(x <= y);
    case Bin::Gt:
      return Value(x > y);
    case Bin::Ge:
      return Value(x >= y);
    default:
      return std::nullopt;
  }
}

Value number_op(Bin op, const Value& a, const Value& b) {
  const bool fl = is_float(a) || is_float(b);
  if (op == Bin::TrueDiv) return Value(a.to_double() / b.to_double());
  if (fl) {
    double x = a.to_double(), y = b.to_double();
    if (auto c = compare(op, x, y)) return *c;
    switch (op) {
      case Bin::Add:
        return Value(x + y);
      case Bin::Sub:
        return Value(x - y);
      case Bin::Mul:
        return Value(x * y);
      case Bin::FloorDiv:
        return Value(std::floor(x / y));
      case Bin::Mod:
        return Value(x - std::floor(x / y) * y);
      case Bin::Pow:
        return Value(std::pow(x, y));
      default:
        throw fx::Error(ErrorKind::Type, "unsupported operand types for a bitwise operator: " +
                                             a.repr() + ", " + b.repr());
    }
  }
  int64_t x = a.to_int(), y = b.to_int();
  auto floordiv = [](int64_t p, int64_t q) {
    if (q == 0) throw fx::Error(ErrorKind::Value, "integer division or modulo by zero");
    int64_t d = p / q;
    if ((p % q != 0) && ((p < 0) != (q < 0))) --d;
    return d;
  };
  if (auto c = compare(op, x, y)) return *c;
  switch (op) {
    case Bin::Add:
      return Value(static_cast<long>(x + y));
    case Bin::Sub:
      return Value(static_cast<long>(x - y));
    case Bin::Mul:
      return Value(static_cast<long>(x * y));
    case Bin::FloorDiv:
      return Value(static_cast<long>(floordiv(x, y)));
    case Bin::Mod:
      return Value(static_cast<long>(x - floordiv(x, y) * y));
    case Bin::Pow:
      if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
      return Value(static_cast<long>(std::llround(std::pow(x, y))));
    case Bin::And:
      return Value(static_cast<long>(x & y));
    case Bin::Or:
      return Value(static_cast<long>(x | y));
    case Bin::Xor:
      return Value(static_cast<long>(x ^ y));
    default:  // TrueDiv and the comparisons are handled above
      break;
  }
  FX_CHECK(false, "number_op");
}

at::Tensor tensor_op(Bin op, const at::Tensor& x, const at::Tensor& y) {
  switch (op) {
    case Bin::Add:
      return at::add(x, y);
    case Bin::Sub:
      return at::sub(x, y);
    case Bin::Mul:
      return at::mul(x, y);
    case Bin::TrueDiv:
      return at::div(x, y);
    case Bin::FloorDiv:
      return at::floor_divide(x, y);
    case Bin::Mod:
      return at::remainder(x, y);
    case Bin::Pow:
      return at::pow(x, y);
    case Bin::Eq:
      return at::eq(x, y);
    case Bin::Ne:
      return at::ne(x, y);
    case Bin::Lt:
      return at::lt(x, y);
    case Bin::Le:
      return at::le(x, y);
    case Bin::Gt:
      return at::gt(x, y);
    case Bin::Ge:
      return at::ge(x, y);
    case Bin::And:
      return at::bitwise_and(x, y);
    case Bin::Or:
      return at::bitwise_or(x, y);
    case Bin::Xor:
      return at::bitwise_xor(x, y);
  }
  FX_CHECK(false, "tensor_op");
}

// Tensor (op) scalar keeps the tensor's dtype category like Python does: the number becomes a
// 0-d tensor, which never promotes a dimensioned tensor within its category.
at::Tensor wrap_number(const Value& v, const at::Tensor& other) {
  if (v.is_tensor()) return v.tensor();
  at::Tensor t = at::scalar_tensor(Call::scalar(v), Call::scalar_dtype(v));
  (void)other;
  return t;
}

Value binary_value(Bin op, const Value& a, const Value& b) {
  if (is_number(a) && is_number(b)) return number_op(op, a, b);
  if (a.is_sequence() && b.is_sequence() && op == Bin::Add) {
    Value::Items items = a.elements();
    items.insert(items.end(), b.elements().begin(), b.elements().end());
    return a.kind() == Value::Kind::Tuple ? Value::tuple(std::move(items))
                                          : Value::list(std::move(items));
  }
  if (!a.is_tensor() && !b.is_tensor())
    throw fx::Error(ErrorKind::Type, "unsupported operand types: " + a.repr() + " and " + b.repr());
  at::Tensor x = a.is_tensor() ? a.tensor() : wrap_number(a, b.tensor());
  at::Tensor y = b.is_tensor() ? b.tensor() : wrap_number(b, a.tensor());
  return tensor_op(op, x, y);
}

OpFn binary_fn(Bin op) {
  return [op](const Args& a, const ValueKwargs& k) {
    Call c("binary operator", a, k);
    return binary_value(op, c.req(0, nullptr), c.req(1, "other"));
  };
}

// at::indexing index from a Python index value.
at::indexing::TensorIndex tensor_index(const Value& v) {
  using namespace at::indexing;
  if (v.is_tensor()) return TensorIndex(v.tensor());
  const fx::Argument& c = v.constant();
  switch (c.kind()) {
    case fx::Argument::Kind::None:
      return TensorIndex(None);
    case fx::Argument::Kind::Ellipsis:
      return TensorIndex(Ellipsis);
    case fx::Argument::Kind::Bool:
      return TensorIndex(c.to_bool());
    case fx::Argument::Kind::Int:
      return TensorIndex(c.to_int());
    case fx::Argument::Kind::Slice: {
      const auto& e = c.elements();
      auto part = [](const fx::Argument& p) -> c10::optional<int64_t> {
        if (p.is_none()) return c10::nullopt;
        return p.to_int();
      };
      return TensorIndex(Slice(part(e[0]), part(e[1]), part(e[2])));
    }
    default:
      throw fx::Error(ErrorKind::Type, "unsupported tensor index " + v.repr());
  }
}

int64_t wrap_index(int64_t i, size_t n) {
  int64_t j = i < 0 ? i + static_cast<int64_t>(n) : i;
  if (j < 0 || j >= static_cast<int64_t>(n))
    throw fx::Error(ErrorKind::Index,
                    "index " + std::to_string(i) + " out of range for length " + std::to_string(n));
  return j;
}

Value getitem(const Args& a, const ValueKwargs& k) {
  Call c("getitem", a, k);
  const Value& obj = c.req(0, nullptr);
  const Value& idx = c.req(1, nullptr);
  if (obj.is_sequence()) {
    const auto& items = obj.elements();
    if (idx.is_constant() && idx.constant().kind() == fx::Argument::Kind::Slice) {
      const auto& e = idx.constant().elements();
      int64_t n = static_cast<int64_t>(items.size());
      int64_t step = e[2].is_none() ? 1 : e[2].to_int();
      if (step != 1) throw fx::Error(ErrorKind::Unsupported, "sequence slice with step != 1");
      auto clampi = [n](int64_t i) { return std::max<int64_t>(0, std::min(n, i < 0 ? i + n : i)); };
      int64_t lo = e[0].is_none() ? 0 : clampi(e[0].to_int());
      int64_t hi = e[1].is_none() ? n : clampi(e[1].to_int());
      Value::Items out;
      for (int64_t i = lo; i < hi; ++i) out.push_back(items[i]);
      return obj.kind() == Value::Kind::Tuple ? Value::tuple(std::move(out))
                                              : Value::list(std::move(out));
    }
    return items[wrap_index(idx.to_int(), items.size())];
  }
  if (obj.is_dict()) {
    for (const auto& kv : obj.dict_items())
      if (idx.is_constant() && kv.first == idx.constant()) return kv.second;
    throw fx::Error(ErrorKind::Key, "KeyError: " + idx.repr());
  }
  if (obj.is_tensor()) {
    std::vector<at::indexing::TensorIndex> indices;
    if (idx.kind() == Value::Kind::Tuple) {
      for (const Value& e : idx.elements()) indices.push_back(tensor_index(e));
    } else {
      indices.push_back(tensor_index(idx));
    }
    return obj.tensor().index(indices);
  }
  throw fx::Error(ErrorKind::Type, "object is not subscriptable: " + obj.repr());
}

Value getattr_fn(const Args& a, const ValueKwargs& k) {
  Call c("getattr", a, k);
  const at::Tensor t = c.tensor(0, nullptr);
  const std::string& name = c.req(1, nullptr).constant().to_string();
  if (name == "shape") return int_tuple(t.sizes());
  if (name == "ndim") return Value(static_cast<long>(t.dim()));
  if (name == "T") return Value(t.t());
  if (name == "dtype") return Value(to_fx_dtype(static_cast<int8_t>(t.scalar_type())));
  if (name == "is_cuda") return Value(t.is_cuda());
  throw fx::Error(ErrorKind::Unsupported, "getattr(Tensor, '" + name + "') is not supported");
}

// ---- ops shared by torch.<f>(input, ...) and input.<f>(...) ----

Value sum_like(const Call& c, bool mean) {
  at::Tensor x = c.tensor(0, "input");
  auto dtype = opt_dtype(c, 3, "dtype");
  if (const Value* d = c.opt(1, "dim")) {
    std::vector<int64_t> dims = Call::ints(*d);
    bool keep = c.flag(2, "keepdim", false);
    return mean ? at::mean(x, dims, keep, dtype) : at::sum(x, dims, keep, dtype);
  }
  return mean ? at::mean(x, dtype) : at::sum(x, dtype);
}

Value max_like(const Call& c, bool is_max) {
  at::Tensor x = c.tensor(0, "input");
  if (const Value* d = c.opt(1, "dim")) {
    if (d->is_tensor()) return is_max ? at::maximum(x, d->tensor()) : at::minimum(x, d->tensor());
    bool keep = c.flag(2, "keepdim", false);
    auto r = is_max ? at::max(x, d->to_int(), keep) : at::min(x, d->to_int(), keep);
    return tuple_of({std::get<0>(r), std::get<1>(r)});
  }
  return is_max ? at::max(x) : at::min(x);
}

Value softmax_like(const Call& c, bool log) {
  at::Tensor x = c.tensor(0, "input");
  int64_t dim = c.req(1, "dim").to_int();
  auto dtype = opt_dtype(c, 2, "dtype");
  return log ? at::log_softmax(x, dim, dtype) : at::softmax(x, dim, dtype);
}

Value clamp_fn(const Call& c) {
  at::Tensor x = c.tensor(0, "input");
  const Value* lo = c.opt(1, "min");
  const Value* hi = c.opt(2, "max");
  auto bound = [](const Value* v) -> c10::optional<at::Scalar> {
    if (!v) return c10::nullopt;
    return Call::scalar(*v);
  };
  return at::clamp(x, bound(lo), bound(hi));
}

Value to_fn(const Call& c) {
  at::Tensor x = c.tensor(0, nullptr);
  c10::optional<at::ScalarType> dtype;
  for (size_t i = 1; i < c.npos(); ++i) {
    const Value& v = c.args()[i];
    if (v.is_tensor()) return x.to(v.tensor().scalar_type());
    if (v.is_constant() && v.constant().kind() == fx::Argument::Kind::Dtype) dtype = dtype_of(v);
  }
  if (const Value* d = c.opt(99, "dtype")) dtype = dtype_of(*d);
  if (const Value* dev = c.opt(99, "device")) {
    const std::string type = dev->constant().kind() == fx::Argument::Kind::Device
                                 ? dev->constant().to_device().type
                                 : dev->constant().to_string();
    if (type != "cpu")
      throw fx::Error(ErrorKind::Unsupported, "to(device=" + type + "): only cpu is supported");
  }
  return dtype ? x.to(*dtype) : x;
}

Value size_fn(const Args& a, const ValueKwargs& k) {
  Call c("size", a, k);
  at::Tensor x = c.tensor(0, nullptr);
  if (const Value* d = c.opt(1, "dim")) return Value(static_cast<long>(x.size(d->to_int())));
  return int_tuple(x.sizes());
}

Value cat_like(const Call& c, bool stack) {
  std::vector<at::Tensor> ts;
  for (const Value& v : c.req(0, "tensors").elements()) ts.push_back(Call::as_tensor(v));
  int64_t dim = c.i64(1, "dim", 0);
  return stack ? at::stack(ts, dim) : at::cat(ts, dim);
}

Value topk_fn(const Call& c) {
  auto r = at::topk(c.tensor(0, "input"), c.req(1, "k").to_int(), c.i64(2, "dim", -1),
                    c.flag(3, "largest", true), c.flag(4, "sorted", true));
  return tuple_of({std::get<0>(r), std::get<1>(r)});
}

Value factory(const Call& c, bool ones) {
  std::vector<int64_t> size = c.sizes(0, "size");
  at::TensorOptions opts = at::TensorOptions().dtype(at::kFloat);
  if (auto d = opt_dtype(c, 99, "dtype")) opts = opts.dtype(*d);
  return ones ? at::ones(size, opts) : at::zeros(size, opts);
}

using Unary = at::Tensor (*)(const at::Tensor&);

void def_unary(Table& t, const char* name, Unary f) {
  OpFn fn = [f, name](const Args& a, const ValueKwargs& k) {
    return Value(f(Call(name, a, k).tensor(0, "input")));
  };
  t.functions[fx::fn(std::string("torch.") + name).get()] = fn;
  t.methods[name] = fn;
}

// Registers `fn` both as torch.<name> and as the method <name>.
void def_both(Table& t, const std::string& name, const OpFn& fn) {
  t.functions[fx::fn("torch." + name).get()] = fn;
  t.methods[name] = fn;
}

#define FX_CALL(name) Call c(name, a, k)

void register_builtin_ops(Table& t) {
  // operator.*
  const std::pair<const char*, Bin> bins[] = {{"operator.add", Bin::Add},
                                              {"operator.sub", Bin::Sub},
                                              {"operator.mul", Bin::Mul},
                                              {"operator.truediv", Bin::TrueDiv},
                                              {"operator.floordiv", Bin::FloorDiv},
                                              {"operator.mod", Bin::Mod},
                                              {"operator.pow", Bin::Pow},
                                              {"operator.eq", Bin::Eq},
                                              {"operator.ne", Bin::Ne},
                                              {"operator.lt", Bin::Lt},
                                              {"operator.le", Bin::Le},
                                              {"operator.gt", Bin::Gt},
                                              {"operator.ge", Bin::Ge},
                                              {"operator.and_", Bin::And},
                                              {"operator.or_", Bin::Or},
                                              {"operator.xor", Bin::Xor}};
  for (const auto& [name, op] : bins) t.functions[fx::fn(name).get()] = binary_fn(op);
  const std::pair<const char*, Bin> methods[] = {
      {"add", Bin::Add}, {"sub", Bin::Sub}, {"mul", Bin::Mul}, {"div", Bin::TrueDiv},
      {"pow", Bin::Pow}, {"eq", Bin::Eq},   {"ne", Bin::Ne},   {"lt", Bin::Lt},
      {"le", Bin::Le},   {"gt", Bin::Gt},   {"ge", Bin::Ge}};
  for (const auto& [name, op] : methods) t.methods[name] = binary_fn(op);
  t.functions[fx::fn("torch.add").get()] = binary_fn(Bin::Add);
  t.functions[fx::fn("torch.mul").get()] = binary_fn(Bin::Mul);
  t.functions[fx::fn("operator.matmul").get()] = [](const Args& a, const ValueKwargs& k) {
    FX_CALL("matmul");
    return Value(at::matmul(c.tensor(0, nullptr), c.tensor(1, "other")));
  };
  t.functions[fx::fn("operator.neg").get()] = [](const Args& a, const ValueKwargs& k) {
    FX_CALL("neg");
    const Value& x = c.req(0, nullptr);
    if (is_number(x)) return is_float(x) ? Value(-x.to_double()) : Value(-x.to_int());
    return Value(at::neg(x.tensor()));
  };
  t.functions[fx::fn("operator.pos").get()] = [](const Args& a, const ValueKwargs& k) {
    return Call("pos", a, k).req(0, nullptr);
  };
  t.functions[fx::fn("operator.invert").get()] = [](const Args& a, const ValueKwargs& k) {
    FX_CALL("invert");
    const Value& x = c.req(0, nullptr);
    if (is_number(x)) return Value(static_cast<long>(~x.to_int()));
    return Value(at::bitwise_not(x.tensor()));
  };
  t.functions[fx::fn("operator.getitem").get()] = getitem;
  t.functions[fx::fn("math.sqrt").get()] = [](const Args& a, const ValueKwargs& k) {
    FX_CALL("sqrt");
    const Value& x = c.req(0, nullptr);
    if (x.is_tensor()) return Value(at::sqrt(x.tensor()));
    return Value(std::sqrt(x.to_double()));
  };
  t.functions[fx::fn("builtins.getattr").get()] = getattr_fn;
  t.functions[fx::fn("torch._assert").get()] = [](const Args& a, const ValueKwargs& k) {
    FX_CALL("_assert");
    if (!static_cast<bool>(c.req(0, "condition")))
      throw fx::Error(ErrorKind::Runtime,
                      "AssertionError: " + c.req(1, "message").constant().str());
    return Value();
  };
  t.functions[fx::fn("torch.fx._symbolic_trace._assert_is_none").get()] = [](const Args& a,
                                                                             const ValueKwargs& k) {
    FX_CALL("_assert_is_none");
    if (!c.req(0, nullptr).is_none())
      throw fx::Error(ErrorKind::Runtime, "AssertionError: " + c.req(1, nullptr).constant().str());
    return Value();
  };

  // Unary elementwise ops, as torch.<f> and as methods.
  def_unary(t, "relu", [](const at::Tensor& x) { return at::relu(x); });
  def_unary(t, "sigmoid", [](const at::Tensor& x) { return at::sigmoid(x); });
  def_unary(t, "tanh", [](const at::Tensor& x) { return at::tanh(x); });
  def_unary(t, "exp", [](const at::Tensor& x) { return at::exp(x); });
  def_unary(t, "log", [](const at::Tensor& x) { return at::log(x); });
  def_unary(t, "sqrt", [](const at::Tensor& x) { return at::sqrt(x); });
  def_unary(t, "abs", [](const at::Tensor& x) { return at::abs(x); });
  def_unary(t, "sin", [](const at::Tensor& x) { return at::sin(x); });
  def_unary(t, "cos", [](const at::Tensor& x) { return at::cos(x); });
  def_unary(t, "erf", [](const at::Tensor& x) { return at::erf(x); });
  def_unary(t, "reciprocal", [](const at::Tensor& x) { return at::reciprocal(x); });
  def_unary(t, "floor", [](const at::Tensor& x) { return at::floor(x); });
  def_unary(t, "ceil", [](const at::Tensor& x) { return at::ceil(x); });
  def_unary(t, "round", [](const at::Tensor& x) { return at::round(x); });
  def_unary(t, "sign", [](const at::Tensor& x) { return at::sign(x); });
  def_unary(t, "tan", [](const at::Tensor& x) { return at::tan(x); });
  def_unary(t, "asin", [](const at::Tensor& x) { return at::asin(x); });
  def_unary(t, "acos", [](const at::Tensor& x) { return at::acos(x); });
  def_unary(t, "atan", [](const at::Tensor& x) { return at::atan(x); });
  def_unary(t, "sinh", [](const at::Tensor& x) { return at::sinh(x); });
  def_unary(t, "cosh", [](const at::Tensor& x) { return at::cosh(x); });
  def_unary(t, "isnan", [](const at::Tensor& x) { return at::isnan(x); });
  def_unary(t, "bitwise_not", [](const at::Tensor& x) { return at::bitwise_not(x); });
  t.methods["contiguous"] = [](const Args& a, const ValueKwargs& k) {
    return Value(Call("contiguous", a, k).tensor(0, nullptr).contiguous());
  };
  t.methods["t"] = [](const Args& a, const ValueKwargs& k) {
    return Value(Call("t", a, k).tensor(0, nullptr).t());
  };
  t.methods["float"] = [](const Args& a, const ValueKwargs& k) {
    return Value(Call("float", a, k).tensor(0, nullptr).to(at::kFloat));
  };

  def_both(t, "sum",
           [](const Args& a, const ValueKwargs& k) { return sum_like(Call("sum", a, k), false); });
  def_both(t, "mean",
           [](const Args& a, const ValueKwargs& k) { return sum_like(Call("mean", a, k), true); });
  def_both(t, "max",
           [](const Args& a, const ValueKwargs& k) { return max_like(Call("max", a, k), true); });
  t.methods["min"] = [](const Args& a, const ValueKwargs& k) {
    return max_like(Call("min", a, k), false);
  };
  def_both(t, "softmax", [](const Args& a, const ValueKwargs& k) {
    return softmax_like(Call("softmax", a, k), false);
  });
  t.methods["log_softmax"] = [](const Args& a, const ValueKwargs& k) {
    return softmax_like(Call("log_softmax", a, k), true);
  };
  def_both(t, "clamp",
           [](const Args& a, const ValueKwargs& k) { return clamp_fn(Call("clamp", a, k)); });
  def_both(t, "matmul", [](const Args& a, const ValueKwargs& k) {
    FX_CALL("matmul");
    return Value(at::matmul(c.tensor(0, "input"), c.tensor(1, "other")));
  });
  def_both(t, "flatten", [](const Args& a, const ValueKwargs& k) {
    FX_CALL("flatten");
    return Value(
        at::flatten(c.tensor(0, "input"), c.i64(1, "start_dim", 0), c.i64(2, "end_dim", -1)));
  });
  def_both(t, "transpose", [](const Args& a, const ValueKwargs& k) {
    FX_CALL("transpose");
    return Value(
        c.tensor(0, "input").transpose(c.req(1, "dim0").to_int(), c.req(2, "dim1").to_int()));
  });
  def_both(t, "permute", [](const Args& a, const ValueKwargs& k) {
    FX_CALL("permute");
    return Value(c.tensor(0, "input").permute(c.sizes(1, "dims")));
  });
  def_both(t, "reshape", [](const Args& a, const ValueKwargs& k) {
    FX_CALL("reshape");
    return Value(c.tensor(0, "input").reshape(c.sizes(1, "shape")));
  });
  t.methods["view"] = [](const Args& a, const ValueKwargs& k) {
    FX_CALL("view");
    const Value* v = c.get(1, "dtype");
    if (v && v->is_constant() && v->constant().kind() == fx::Argument::Kind::Dtype)
      return Value(c.tensor(0, nullptr).view(dtype_of(*v)));
    return Value(c.tensor(0, nullptr).view(c.sizes(1, "size")));
  };
  t.methods["expand"] = [](const Args& a, const ValueKwargs& k) {
    FX_CALL("expand");
    return Value(c.tensor(0, nullptr).expand(c.sizes(1, "size")));
  };
  t.methods["repeat"] = [](const Args& a, const ValueKwargs& k) {
    FX_CALL("repeat");
    return Value(c.tensor(0, nullptr).repeat(c.sizes(1, "repeats")));
  };
  def_both(t, "unsqueeze", [](const Args& a, const ValueKwargs& k) {
    FX_CALL("unsqueeze");
    return Value(c.tensor(0, "input").unsqueeze(c.req(1, "dim").to_int()));
  });
  t.methods["squeeze"] = [](const Args& a, const ValueKwargs& k) {
    FX_CALL("squeeze");
    if (const Value* d = c.opt(1, "dim")) return Value(c.tensor(0, nullptr).squeeze(d->to_int()));
    return Value(c.tensor(0, nullptr).squeeze());
  };
  t.methods["size"] = size_fn;
  t.methods["dim"] = [](const Args& a, const ValueKwargs& k) {
    return Value(static_cast<long>(Call("dim", a, k).tensor(0, nullptr).dim()));
  };
  t.methods["numel"] = [](const Args& a, const ValueKwargs& k) {
    return Value(static_cast<long>(Call("numel", a, k).tensor(0, nullptr).numel()));
  };
  t.methods["to"] = [](const Args& a, const ValueKwargs& k) { return to_fn(Call("to", a, k)); };
  t.methods["chunk"] = [](const Args& a, const ValueKwargs& k) {
    FX_CALL("chunk");
    return tuple_of(c.tensor(0, nullptr).chunk(c.req(1, "chunks").to_int(), c.i64(2, "dim", 0)));
  };
  t.methods["split"] = [](const Args& a, const ValueKwargs& k) {
    FX_CALL("split");
    const Value& s = c.req(1, "split_size");
    int64_t dim = c.i64(2, "dim", 0);
    if (s.is_sequence()) return tuple_of(c.tensor(0, nullptr).split_with_sizes(Call::ints(s), dim));
    return tuple_of(c.tensor(0, nullptr).split(s.to_int(), dim));
  };
  def_both(t, "argmax", [](const Args& a, const ValueKwargs& k) {
    FX_CALL("argmax");
    c10::optional<int64_t> dim;
    if (const Value* d = c.opt(1, "dim")) dim = d->to_int();
    return Value(at::argmax(c.tensor(0, "input"), dim, c.flag(2, "keepdim", false)));
  });
  t.methods["masked_fill"] = [](const Args& a, const ValueKwargs& k) {
    FX_CALL("masked_fill");
    return Value(
        c.tensor(0, nullptr).masked_fill(c.tensor(1, "mask"), Call::scalar(c.req(2, "value"))));
  };
  t.functions[fx::fn("torch.cat").get()] = [](const Args& a, const ValueKwargs& k) {
    return cat_like(Call("cat", a, k), false);
  };
  t.functions[fx::fn("torch.stack").get()] = [](const Args& a, const ValueKwargs& k) {
    return cat_like(Call("stack", a, k), true);
  };
  t.functions[fx::fn("torch.topk").get()] = [](const Args& a, const ValueKwargs& k) {
    return topk_fn(Call("topk", a, k));
  };
  t.methods["topk"] = t.functions[fx::fn("torch.topk").get()];
  t.functions[fx::fn("torch.zeros").get()] = [](const Args& a, const ValueKwargs& k) {
    return factory(Call("zeros", a, k), false);
  };
  t.functions[fx::fn("torch.ones").get()] = [](const Args& a, const ValueKwargs& k) {
    return factory(Call("ones", a, k), true);
  };
  t.functions[fx::fn("torch.where").get()] = [](const Args& a, const ValueKwargs& k) {
    FX_CALL("where");
    return Value(at::where(c.tensor(0, "condition"), c.tensor(1, "input"), c.tensor(2, "other")));
  };

  register_functional_ops(t);
}

#undef FX_CALL

Table& table() {
  // Built once, on first use, and never destroyed (no order-of-destruction issues at exit).
  static Table* t = [] {
    auto* tab = new Table;
    register_builtin_ops(*tab);
    return tab;
  }();
  return *t;
}

}  // namespace

void OpRegistry::def_function(const std::string& qualname, OpFn fn) {
  table().functions[fx::fn(qualname).get()] = std::move(fn);
}
void OpRegistry::def_method(const std::string& name, OpFn fn) {
  table().methods[name] = std::move(fn);
}
const OpFn* OpRegistry::function(const fx::Function& target) {
  auto& f = table().functions;
  auto it = f.find(target.get());
  return it == f.end() ? nullptr : &it->second;
}
const OpFn* OpRegistry::method(const std::string& name) {
  auto& m = table().methods;
  auto it = m.find(name);
  return it == m.end() ? nullptr : &it->second;
}
Value OpRegistry::run_function(const fx::Function& target, const std::vector<Value>& args,
                               const ValueKwargs& kwargs) {
  const OpFn* f = function(target);
  if (!f)
    throw fx::Error(ErrorKind::Unsupported,
                    "no LibTorch implementation registered for call_function target " +
                        target.qualname() +
                        " (register one with fx::torch::OpRegistry::def_function)");
  return (*f)(args, kwargs);
}
Value OpRegistry::run_method(const std::string& name, const std::vector<Value>& args,
                             const ValueKwargs& kwargs) {
  const OpFn* f = method(name);
  if (!f)
    throw fx::Error(ErrorKind::Unsupported,
                    "no LibTorch implementation registered for call_method target " + name +
                        " (register one with fx::torch::OpRegistry::def_method)");
  if (args.empty() || !args[0].is_tensor())
    throw fx::Error(ErrorKind::Type, "call_method " + name + ": self must be a Tensor, got " +
                                         (args.empty() ? std::string("nothing") : args[0].repr()));
  return (*f)(args, kwargs);
}
std::vector<std::string> OpRegistry::function_names() {
  std::vector<std::string> out;
  for (const auto& kv : table().functions) out.push_back(kv.first->qualname);
  std::sort(out.begin(), out.end());
  return out;
}
std::vector<std::string> OpRegistry::method_names() {
  std::vector<std::string> out;
  for (const auto& kv : table().methods) out.push_back(kv.first);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace torch
}  // namespace fx
