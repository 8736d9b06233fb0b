// fx::Function — the target of a call_function node. Python targets are callables; ours are
// interned records named by their qualified name ("operator.add", "torch.relu",
// "torch.nn.functional.gelu", "builtins.getattr", "onnx.Conv"). One table
// (src/ir/function_table.inc, generated from the oracle) says how each prints; unknown names are
// accepted and get defaults.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fx {

/// How Python's repr() of the callable looks; decides print_tabular's target column.
enum class CallableKind : uint8_t {
  BuiltinFunction,  ///< `<built-in function add>` (operator, builtins, math, torch._C._nn)
  BuiltinMethod,    ///< `<built-in method sum of type object at 0x...>` (torch.* C functions)
  Function,         ///< `<function relu at 0x...>` (Python functions)
  Class,            ///< `<class 'int'>` (types called as functions: int, float, range...)
  OpPacket,         ///< `<OpOverloadPacket(op='aten.add')>` (torch.ops.* operators)
};

struct FunctionInfo {
  std::string module;    ///< Python __module__: "_operator", "builtins", "torch", "math", "onnx"
  std::string name;      ///< Python __name__: "add", "relu", "Conv"
  std::string qualname;  ///< printed target: "operator.add", "builtins.getattr", "torch.relu"
  /// Python __qualname__ where repr() shows one other than `name`
  /// ("boolean_dispatch.<locals>.fn" for F.max_pool2d), else empty.
  std::string repr_name;
  CallableKind callable_kind = CallableKind::Function;
  bool impure = false;  ///< side-effectful: never removed by dead-code elimination
  /// Codegen keeps the qualified name (`torch.relu(x)`, `onnx.Conv(...)`) instead of a global.
  bool keep_qualified = false;
  /// Infix/prefix template for operator magic methods ("{} + {}"), or empty.
  std::string magic_template;
  /// In-place operator template ("{} += {}"), or empty.
  std::string inplace_template;
};

/// A handle to an interned FunctionInfo; equal handles mean the same callable.
class Function {
 public:
  /// Looks up or interns the function with this qualified name. Accepts the printed form
  /// ("operator.add"), Python's module form ("_operator.add") and the other spellings of the
  /// same Python object ("torch.nn.functional.gelu" is "torch._C._nn.gelu", as torch.fx prints
  /// it). Throws fx::Error(Value) on an empty or malformed name.
  explicit Function(std::string_view qualified_name);
  /// Registers (or overrides the attributes of) a function; returns its handle.
  static Function define(FunctionInfo info);

  const FunctionInfo& info() const { return *info_; }
  const std::string& qualname() const { return info_->qualname; }
  const std::string& name() const { return info_->name; }
  /// Python repr() of the callable, with a stable 12-hex-digit address where Python shows one.
  std::string py_repr() const;
  bool operator==(const Function& o) const { return info_ == o.info_; }
  bool operator!=(const Function& o) const { return info_ != o.info_; }
  const FunctionInfo* get() const { return info_; }

  /// All registered functions, in registration order.
  static std::vector<Function> all();

 private:
  explicit Function(const FunctionInfo* info) : info_(info) {}
  const FunctionInfo* info_;
};

/// Shorthand: fx::fn("torch.relu").
inline Function fn(std::string_view qualified_name) { return Function(qualified_name); }

}  // namespace fx
