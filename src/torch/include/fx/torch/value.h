// fx::torch::Value — the one value type a LibTorch module's forward is written with, so the same
// body runs eagerly and traces symbolically (torch.fx's Proxy, in C++).
//
// A Value is a real at::Tensor, a Python-like constant (None, bool, int, float, str, dtype,
// slice...), a tuple/list/dict of Values, or a Proxy: a node of the graph being traced. Every
// operation on Values is a Python-level call — `operator.add`, `torch.relu`, the tensor method
// `clamp` — written with its positional and keyword arguments exactly as the twin Python code
// writes them. If any argument holds a Proxy, the call is recorded as a node (call_function /
// call_method) with those arguments; otherwise it runs now on LibTorch through the op registry
// (interpreter.h), the same table fx::torch::Interpreter executes graphs with.
//
//   Value y = x + 1;                              // operator.add(x, 1)      -> `add = x + 1`
//   Value z = fx::torch::relu(y);                 // torch.relu(add)         -> `relu =
//   torch.relu(add)` Value c = z.clamp(kw("min", 0.0), kw("max", 1.0));  // -> `clamp =
//   relu.clamp(min = 0.0, max = 1.0)` Value n = x.size(0);                          // eager: an
//   int; traced: call_method size if (x.sum() > 0) ...                          // traced: throws
//   fx::torch::TraceError
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fx/fx.h"

namespace fx {
namespace torch {

class Tracer;
struct Arg;
struct ProxyState;

/// torch.fx.proxy.TraceError: symbolic tracing hit data-dependent control flow (bool of a Proxy,
/// iterating a Proxy, len of a Proxy). kind() is ErrorKind::Trace.
class TraceError : public fx::Error {
 public:
  explicit TraceError(const std::string& message) : fx::Error(ErrorKind::Trace, message) {}
};

/// torch.fx's message for `bool(proxy)` (`if proxy:`).
extern const char* const kControlFlowMessage;
/// torch.fx's message for iterating a Proxy (`for v in proxy`, `a, b = proxy`).
extern const char* const kIterMessage;
/// torch.fx's message for `len(proxy)`.
extern const char* const kLenMessage;

class Value {
 public:
  enum class Kind : uint8_t {
    Constant,  ///< an fx::Argument without nodes: None, bool, int, float, str, dtype, slice...
    Tensor,    ///< a real at::Tensor
    Proxy,     ///< a node of the graph being traced
    Tuple,
    List,
    Dict
  };
  using Items = std::vector<Value>;
  using DictItems = std::vector<std::pair<fx::Argument, Value>>;

  Value() : kind_(Kind::Constant) {}  ///< None
  Value(std::nullptr_t) : kind_(Kind::Constant) {}
  Value(bool v) : kind_(Kind::Constant), constant_(v) {}
  Value(int v) : kind_(Kind::Constant), constant_(v) {}
  Value(long v) : kind_(Kind::Constant), constant_(v) {}
  Value(long long v) : kind_(Kind::Constant), constant_(v) {}
  Value(unsigned v) : kind_(Kind::Constant), constant_(static_cast<long long>(v)) {}
  Value(unsigned long v) : kind_(Kind::Constant), constant_(static_cast<long long>(v)) {}
  Value(double v) : kind_(Kind::Constant), constant_(v) {}
  Value(const char* s) : kind_(Kind::Constant), constant_(s) {}
  Value(std::string s) : kind_(Kind::Constant), constant_(std::move(s)) {}
  Value(fx::Dtype d) : kind_(Kind::Constant), constant_(d) {}
  Value(fx::Device d) : kind_(Kind::Constant), constant_(std::move(d)) {}
  Value(fx::MemoryFormat m) : kind_(Kind::Constant), constant_(m) {}
  /// A constant; throws fx::Error(Value) if `a` holds a Node (use Value::proxy).
  Value(fx::Argument a);
  Value(at::Tensor t) : kind_(Kind::Tensor), tensor_(std::move(t)) {}
  Value(fx::Node*) = delete;  // a Node is not a value; use Value::proxy(node, tracer)

  /// A Proxy for `node`, recording into `tracer`'s graph.
  static Value proxy(fx::Node* node, Tracer* tracer);
  static Value tuple(Items items);
  static Value list(Items items);
  static Value dict(DictItems items);

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::Constant && constant_.is_none(); }
  bool is_tensor() const { return kind_ == Kind::Tensor; }
  bool is_proxy() const { return kind_ == Kind::Proxy; }
  bool is_constant() const { return kind_ == Kind::Constant; }
  bool is_sequence() const { return kind_ == Kind::Tuple || kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }

  // Typed accessors: throw fx::Error(Type) naming the expected and the actual kind.
  const at::Tensor& tensor() const;
  /// The constant (kind Constant).
  const fx::Argument& constant() const;
  /// The proxied node (materialising a lazy attribute access such as `x.shape`).
  fx::Node* node() const;
  /// The tracer of a Proxy.
  Tracer* tracer() const;
  /// Elements of a tuple or list.
  const Items& elements() const;
  const DictItems& dict_items() const;
  /// Python int(v): ints, bools, 0-d integer tensors. A Proxy throws fx::Error(Type) with
  /// Python's message.
  int64_t to_int() const;
  /// Python float(v).
  double to_double() const;

  /// Whether a Proxy occurs anywhere inside (containers included).
  bool contains_proxy() const;
  /// The tracer of the first Proxy inside, or nullptr.
  Tracer* find_tracer() const;

  /// Python truth value. A Proxy throws TraceError (data-dependent control flow).
  explicit operator bool() const;
  /// Python len(). A Proxy throws TraceError with torch.fx's `len` message.
  size_t len() const;
  /// Iteration over a tuple/list (a Proxy throws TraceError with torch.fx's message).
  Items::const_iterator begin() const;
  Items::const_iterator end() const;

  /// Python repr() for diagnostics: `tensor(float32[2, 3])`, `Proxy(add)`, `(1, 2)`.
  std::string repr() const;

  // ---- Python-level calls ----
  /// `self.<method>(*args, **kwargs)`: call_method when tracing, else the registry.
  Value call_method(const std::string& method, std::vector<Arg> args = {}) const;
  /// `self[index]` (operator.getitem). Index: int, slice(), ellipsis(), None, a tuple of those,
  /// or a Value.
  Value operator[](const Value& index) const;
  /// `getattr(self, name)` (builtins.getattr), e.g. attr("shape"). Tracing records it lazily
  /// like torch.fx's Attribute: the node is created when the value is first used.
  Value attr(const std::string& name) const;
  /// `self.shape`.
  Value shape() const { return attr("shape"); }

// Tensor methods recorded as call_method[target=NAME]; arguments as in Python.
// clang-format off
#define FX_TORCH_VALUE_METHODS(X)                                                                  \
  X(abs) X(add) X(argmax) X(chunk) X(clamp) X(contiguous) X(cos) X(dim) X(div) X(exp) X(expand)    \
  X(flatten) X(float_) X(log) X(log_softmax) X(masked_fill) X(matmul) X(max) X(mean) X(min)        \
  X(mul) X(numel) X(permute) X(pow) X(relu) X(repeat) X(reshape) X(sigmoid) X(sin) X(size)         \
  X(softmax) X(split) X(sqrt) X(squeeze) X(sub) X(sum) X(t) X(tanh) X(to) X(transpose)             \
  X(unsqueeze) X(view)
// clang-format on
#define FX_TORCH_DECLARE_METHOD(name)                                     \
  template <class... A>                                                   \
  Value name(A&&... a) const {                                            \
    return call_method(method_name(#name), {Arg(std::forward<A>(a))...}); \
  }
  FX_TORCH_VALUE_METHODS(FX_TORCH_DECLARE_METHOD)
#undef FX_TORCH_DECLARE_METHOD

 private:
  friend struct ProxyState;
  // "float_" -> "float" (a C++ keyword as a method name).
  static std::string method_name(const char* name);
  Kind kind_;
  fx::Argument constant_;
  at::Tensor tensor_;
  std::shared_ptr<ProxyState> proxy_;
  std::shared_ptr<const Items> items_;
  std::shared_ptr<const DictItems> dict_;
};

/// Keyword arguments of a call, in order.
using ValueKwargs = std::vector<std::pair<std::string, Value>>;

/// A keyword argument: `kw("dim", -1)` is Python's `dim=-1`.
struct Kw {
  std::string key;
  Value value;
};
inline Kw kw(std::string key, Value value) { return Kw{std::move(key), std::move(value)}; }

/// One argument of a Python-level call: positional (empty key) or keyword.
struct Arg {
  Arg(Value v) : value(std::move(v)) {}
  Arg(Kw k) : key(std::move(k.key)), value(std::move(k.value)) {}
  template <class T, class = std::enable_if_t<std::is_constructible<Value, T&&>::value &&
                                              !std::is_same<std::decay_t<T>, Value>::value &&
                                              !std::is_same<std::decay_t<T>, Kw>::value>>
  Arg(T&& v) : value(Value(std::forward<T>(v))) {}
  std::string key;
  Value value;
};

/// Splits a call's arguments into positional and keyword ones (keyword order kept).
void split_args(std::vector<Arg> args, std::vector<Value>& positional, ValueKwargs& kwargs);

/// Python slice(start, stop, step) of constants (None for an omitted part).
Value slice(Value start = {}, Value stop = {}, Value step = {});
/// Python's Ellipsis (`...`).
Value ellipsis();

// ---- Python operators: call_function[target=operator.*] ----
Value operator+(const Value& a, const Value& b);
Value operator-(const Value& a, const Value& b);
Value operator*(const Value& a, const Value& b);
Value operator/(const Value& a, const Value& b);  ///< operator.truediv
Value operator%(const Value& a, const Value& b);
Value operator-(const Value& a);  ///< operator.neg
Value operator+(const Value& a);  ///< operator.pos
Value operator==(const Value& a, const Value& b);
Value operator!=(const Value& a, const Value& b);
Value operator<(const Value& a, const Value& b);
Value operator<=(const Value& a, const Value& b);
Value operator>(const Value& a, const Value& b);
Value operator>=(const Value& a, const Value& b);
Value operator&(const Value& a, const Value& b);  ///< operator.and_
Value operator|(const Value& a, const Value& b);  ///< operator.or_
Value operator^(const Value& a, const Value& b);  ///< operator.xor
Value operator~(const Value& a);                  ///< operator.invert
/// Python's `a @ b` (operator.matmul).
Value matmul_op(const Value& a, const Value& b);
/// Python's `a ** b` (operator.pow).
Value pow_op(const Value& a, const Value& b);
/// Python's `a // b` (operator.floordiv).
Value floordiv_op(const Value& a, const Value& b);

/// Python's math.sqrt (torch.fx autowraps the math module: call_function[target=math.sqrt]).
Value math_sqrt(const Value& x);

/// Records call_method `name` (args[0] is self) when an argument holds a Proxy, else runs it
/// through the op registry.
Value invoke_method(const std::string& name, const std::vector<Value>& args,
                    const ValueKwargs& kwargs);
/// The same for a call_function target.
Value invoke_function(const fx::Function& target, const std::vector<Value>& args,
                      const ValueKwargs& kwargs);

/// `target(*args, **kwargs)` for a call_function target ("torch.relu", "operator.add", ...):
/// recorded when an argument holds a Proxy, else executed by the registry.
Value call_function(const std::string& target, std::vector<Arg> args = {});

// torch.* functions recorded as call_function[target=torch.NAME]; arguments as in Python.
// clang-format off
#define FX_TORCH_FUNCTIONS(X)                                                                      \
  X(abs) X(add) X(argmax) X(cat) X(clamp) X(cos) X(exp) X(flatten) X(log) X(matmul) X(max)         \
  X(mean) X(mul) X(ones) X(permute) X(relu) X(reshape) X(sigmoid) X(sin) X(softmax) X(sqrt)        \
  X(stack) X(sum) X(tanh) X(topk) X(transpose) X(unsqueeze) X(where) X(zeros)
// clang-format on
#define FX_TORCH_DECLARE_FUNCTION(name)                                 \
  template <class... A>                                                 \
  Value name(A&&... a) {                                                \
    return call_function("torch." #name, {Arg(std::forward<A>(a))...}); \
  }
FX_TORCH_FUNCTIONS(FX_TORCH_DECLARE_FUNCTION)
#undef FX_TORCH_DECLARE_FUNCTION

/// torch.nn.functional: records what torch.fx records for the Python function, default keyword
/// arguments included (F.relu(x) -> `relu(x, inplace = False)`).
namespace F {
Value relu(const Value& x, bool inplace = false);
/// torch._C._nn.gelu (a C function: only the arguments given are recorded).
Value gelu(const Value& x);
Value gelu(const Value& x, const std::string& approximate);
Value softmax(const Value& x, const Value& dim);
Value log_softmax(const Value& x, const Value& dim);
Value adaptive_avg_pool2d(const Value& x, const Value& output_size);
Value dropout(const Value& x, double p = 0.5, bool training = true, bool inplace = false);
/// torch._C._nn.linear(x, weight, bias).
Value linear(const Value& x, const Value& weight, const Value& bias = {});
Value layer_norm(const Value& x, const Value& normalized_shape, const Value& weight = {},
                 const Value& bias = {}, double eps = 1e-5);
}  // namespace F

}  // namespace torch
}  // namespace fx
