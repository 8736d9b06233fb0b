// Internal to the LibTorch op registry (ops.cpp, ops_functional.cpp): the table of
// implementations and Python-style access to one call's arguments.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fx/torch/interpreter.h"
#include "fx/torch/modules.h"

namespace fx {
namespace torch {
namespace detail {

using Args = std::vector<Value>;

struct Table {
  std::unordered_map<const fx::FunctionInfo*, OpFn> functions;
  std::unordered_map<std::string, OpFn> methods;
};

// Python-style argument access for one call: positional i or keyword `key`.
class Call {
 public:
  Call(const char* what, const Args& a, const ValueKwargs& k) : what_(what), a_(a), k_(k) {}
  const Value* get(size_t i, const char* key) const {
    if (i < a_.size()) return &a_[i];
    if (key)
      for (const auto& kv : k_)
        if (kv.first == key) return &kv.second;
    return nullptr;
  }
  /// Present and not None.
  const Value* opt(size_t i, const char* key) const {
    const Value* v = get(i, key);
    return v && !v->is_none() ? v : nullptr;
  }
  const Value& req(size_t i, const char* key) const {
    if (const Value* v = get(i, key)) return *v;
    throw fx::Error(ErrorKind::Type, std::string(what_) + "() missing required argument '" +
                                         (key ? key : std::to_string(i)) + "'");
  }
  at::Tensor tensor(size_t i, const char* key) const { return as_tensor(req(i, key)); }
  int64_t i64(size_t i, const char* key, int64_t dflt) const {
    const Value* v = opt(i, key);
    return v ? v->to_int() : dflt;
  }
  double f64(size_t i, const char* key, double dflt) const {
    const Value* v = opt(i, key);
    return v ? v->to_double() : dflt;
  }
  bool flag(size_t i, const char* key, bool dflt) const {
    const Value* v = opt(i, key);
    return v ? static_cast<bool>(*v) : dflt;
  }
  size_t npos() const { return a_.size(); }
  const Args& args() const { return a_; }

  static at::Tensor as_tensor(const Value& v) {
    if (v.is_tensor()) return v.tensor();
    if (v.is_constant()) return at::scalar_tensor(scalar(v), scalar_dtype(v));
    throw fx::Error(ErrorKind::Type, "expected a Tensor, got " + v.repr());
  }
  static at::Scalar scalar(const Value& v) {
    if (v.is_tensor()) return v.tensor().item();
    const fx::Argument& c = v.constant();
    switch (c.kind()) {
      case fx::Argument::Kind::Bool:
        return at::Scalar(c.to_bool());
      case fx::Argument::Kind::Int:
        return at::Scalar(c.to_int());
      case fx::Argument::Kind::Float:
        return at::Scalar(c.to_double());
      default:
        throw fx::Error(ErrorKind::Type, "expected a number, got " + v.repr());
    }
  }
  static at::ScalarType scalar_dtype(const Value& v) {
    switch (v.constant().kind()) {
      case fx::Argument::Kind::Bool:
        return at::kBool;
      case fx::Argument::Kind::Int:
        return at::kLong;
      default:
        return at::kDouble;
    }
  }
  // Sizes: a tuple/list argument at i, or the ints from position i on (view(b, -1)).
  std::vector<int64_t> sizes(size_t i, const char* key) const {
    const Value* v = get(i, key);
    if (!v) return {};
    if (v->is_sequence()) return ints(*v);
    std::vector<int64_t> out;
    if (i < a_.size())
      for (size_t j = i; j < a_.size(); ++j) out.push_back(a_[j].to_int());
    else
      out.push_back(v->to_int());
    return out;
  }
  static std::vector<int64_t> ints(const Value& v) {
    std::vector<int64_t> out;
    if (v.is_sequence()) {
      for (const Value& e : v.elements()) out.push_back(e.to_int());
    } else {
      out.push_back(v.to_int());
    }
    return out;
  }

 private:
  const char* what_;
  const Args& a_;
  const ValueKwargs& k_;
};

inline at::ScalarType dtype_of(const Value& v) {
  return static_cast<at::ScalarType>(to_scalar_type(v.constant().to_dtype()));
}
inline c10::optional<at::ScalarType> opt_dtype(const Call& c, size_t i, const char* key) {
  if (const Value* v = c.opt(i, key)) return dtype_of(*v);
  return c10::nullopt;
}

inline bool is_number(const Value& v) {
  if (!v.is_constant()) return false;
  auto k = v.constant().kind();
  return k == fx::Argument::Kind::Int || k == fx::Argument::Kind::Float ||
         k == fx::Argument::Kind::Bool;
}
inline bool is_float(const Value& v) { return v.constant().kind() == fx::Argument::Kind::Float; }

inline Value tuple_of(const std::vector<at::Tensor>& ts) {
  Value::Items items(ts.begin(), ts.end());
  return Value::tuple(std::move(items));
}
inline Value int_tuple(at::IntArrayRef r) {
  Value::Items items;
  for (int64_t d : r) items.emplace_back(static_cast<long>(d));
  return Value::tuple(std::move(items));
}

/// Registers the torch.nn.functional.* implementations (ops_functional.cpp).
void register_functional_ops(Table& t);

}  // namespace detail
}  // namespace torch
}  // namespace fx
