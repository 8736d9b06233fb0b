// String tensors: Cast/CastLike to and from STRING, StringNormalizer, and the list of ops that
// take string tensors at all (the executor refuses a string tensor anywhere else, naming the
// node, rather than reading bytes a string tensor does not have).
//
// Numbers print as numpy's str() does, which is what ONNX's reference (and its backend tests)
// use: the shortest digits that read back to the same value, positional for 1e-4 <= |x| < 1e16
// ("0.039187793", "100.0"), scientific otherwise ("1e-05", "1.5e+16"); "nan", "inf", "-inf".
// Strings read as numbers by strtod/strtoll over the whole string ("NaN", "INF", "+INF" too).
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <unordered_set>

#include "exec/dtype_dispatch.h"
#include "exec/ops.h"
#include "fx/limits.h"
#include "kernels/half.h"

namespace fx::exec {

namespace {

std::mutex& string_ops_mutex() {
  static std::mutex m;
  return m;
}
std::set<std::string>& string_ops() {
  static std::set<std::string> s;
  return s;
}

// numpy's str() of a float32 (digits ≤ 9) or float64 (≤ 17).
template <class F>
std::string number_to_string(F v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  constexpr int kMax = sizeof(F) == 4 ? 9 : 17;
  char buf[64];
  int p = 1;
  for (; p < kMax; ++p) {
    std::snprintf(buf, sizeof buf, "%.*e", p - 1, static_cast<double>(v));
    if (static_cast<F>(std::strtod(buf, nullptr)) == v) break;
  }
  std::snprintf(buf, sizeof buf, "%.*e", p - 1, static_cast<double>(v));
  // buf: [-]d[.ddd]e[+-]XX
  std::string s(buf);
  const bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  const size_t e = s.find('e');
  std::string digits = s.substr(0, 1) + (e > 2 ? s.substr(2, e - 2) : std::string());
  const int exp = std::atoi(s.c_str() + e + 1);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  const double mag = std::fabs(static_cast<double>(v));
  if (mag >= 1e-4 && mag < 1e16) {
    if (exp < 0) {
      out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exp) + 1) + "." +
             digits.substr(static_cast<size_t>(exp) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ex[16];
  std::snprintf(ex, sizeof ex, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return out + ex;
}

// A string's number: the whole string must be read (surrounding spaces allowed).
double parse_double(const OpCall& c, const std::string& s, int64_t i) {
  const char* b = s.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(b, &end);
  while (end && *end == ' ') ++end;
  if (end == b || !end || *end != '\0' || s.size() != std::strlen(b))
    c.fail("element " + std::to_string(i) + " ('" + s.substr(0, 40) + "') is not a number");
  return v;
}

int64_t parse_int(const OpCall& c, const std::string& s, int64_t i, bool is_unsigned) {
  const char* b = s.c_str();
  char* end = nullptr;
  errno = 0;
  int64_t v = 0;
  if (is_unsigned) {
    const unsigned long long u = std::strtoull(b, &end, 10);
    if (std::strchr(b, '-')) errno = ERANGE;
    v = static_cast<int64_t>(u);
  } else {
    v = std::strtoll(b, &end, 10);
  }
  while (end && *end == ' ') ++end;
  if (end == b || !end || *end != '\0' || s.size() != std::strlen(b))
    c.fail("element " + std::to_string(i) + " ('" + s.substr(0, 40) + "') is not an integer");
  if (errno == ERANGE)
    c.fail("element " + std::to_string(i) + " ('" + s.substr(0, 40) + "') is out of range");
  return v;
}

Value to_strings(const OpCall& c, const Value& v) {
  const int64_t n = v.numel();
  // A number's string is at most 24 bytes plus the std::string: checked as 16 per element.
  checked_nbytes(Dtype::Complex128, n, "the strings of Cast's output");
  auto out = std::make_shared<std::vector<std::string>>();
  out->reserve(static_cast<size_t>(n));
  switch (v.dtype()) {
    case Dtype::Float32:
      for (int64_t i = 0; i < n; ++i) out->push_back(number_to_string(v.data<float>()[i]));
      break;
    case Dtype::Float64:
      for (int64_t i = 0; i < n; ++i) out->push_back(number_to_string(v.data<double>()[i]));
      break;
    case Dtype::Float16:
    case Dtype::BFloat16: {
      const Value f = cast_value(c, v, Dtype::Float32);
      for (int64_t i = 0; i < n; ++i) out->push_back(number_to_string(f.data<float>()[i]));
      break;
    }
    case Dtype::Bool:
      for (int64_t i = 0; i < n; ++i) out->push_back(v.data<uint8_t>()[i] ? "True" : "False");
      break;
    case Dtype::UInt64:
      for (int64_t i = 0; i < n; ++i) out->push_back(std::to_string(v.data<uint64_t>()[i]));
      break;
    default:
      dispatch_numeric<kNumeric>(c, v.dtype(), [&](auto tag) {
        using T = decltype(tag);
        for (int64_t i = 0; i < n; ++i)
          out->push_back(std::to_string(static_cast<int64_t>(v.data<T>()[i])));
      });
  }
  return Value::from_strings(v.shape(), std::move(out));
}

Value from_strings(const OpCall& c, const Value& v, Dtype dtype) {
  const std::vector<std::string>& s = v.strings();
  const auto n = static_cast<int64_t>(s.size());
  if (dtype == Dtype::Float32 || dtype == Dtype::Float16 || dtype == Dtype::BFloat16) {
    Value out = new_value(Dtype::Float32, v.shape());
    for (int64_t i = 0; i < n; ++i)
      out.mutable_data<float>()[i] = static_cast<float>(parse_double(c, s[i], i));
    return dtype == Dtype::Float32 ? out : cast_value(c, out, dtype);
  }
  if (dtype == Dtype::Float64) {
    Value out = new_value(Dtype::Float64, v.shape());
    for (int64_t i = 0; i < n; ++i) out.mutable_data<double>()[i] = parse_double(c, s[i], i);
    return out;
  }
  if (dtype == Dtype::Bool) {
    Value out = new_value(Dtype::Bool, v.shape());
    for (int64_t i = 0; i < n; ++i) {
      const std::string& e = s[i];
      uint8_t b;
      if (e == "True" || e == "true")
        b = 1;
      else if (e == "False" || e == "false")
        b = 0;
      else
        b = parse_double(c, e, i) != 0;
      out.mutable_data<uint8_t>()[i] = b;
    }
    return out;
  }
  Value out = new_value(dtype, v.shape());
  dispatch_numeric<kNumeric>(c, dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t x = parse_int(c, s[i], i, std::is_unsigned_v<T>);
        if constexpr (sizeof(T) < 8) {
          if (x < static_cast<int64_t>(std::numeric_limits<T>::lowest()) ||
              x > static_cast<int64_t>(std::numeric_limits<T>::max()))
            c.fail("element " + std::to_string(i) + " ('" + s[i].substr(0, 40) +
                   "') is out of range for " + dtype_name(dtype));
        }
        out.mutable_data<T>()[i] = static_cast<T>(x);
      }
    } else {
      c.unsupported(std::string("casting strings to ") + dtype_name(dtype));
    }
  });
  return out;
}

// ASCII case mapping; other bytes (UTF-8 sequences) are kept as they are.
std::string change_case(const std::string& s, int action) {
  std::string out = s;
  if (action == 1)
    for (char& ch : out) ch = (ch >= 'a' && ch <= 'z') ? static_cast<char>(ch - 32) : ch;
  if (action == -1)
    for (char& ch : out) ch = (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch + 32) : ch;
  return out;
}

void string_normalizer(OpCall& c) {
  const Value& x = c.input(0);
  if (x.dtype() != Dtype::String) c.fail("X must be a string tensor, got " + x.describe());
  const auto& shape = x.shape();
  if (!(shape.size() == 1 || (shape.size() == 2 && shape[0] == 1)))
    c.fail("X must be [C] or [1, C], got " + x.describe());
  const std::string action = c.attr_string("case_change_action", "NONE");
  int act = 0;
  if (action == "UPPER")
    act = 1;
  else if (action == "LOWER")
    act = -1;
  else if (action != "NONE")
    c.fail("case_change_action must be LOWER, UPPER or NONE, got '" + action + "'");
  const bool sensitive = c.attr_int("is_case_sensitive", 0) != 0;
  std::unordered_set<std::string> stop;
  if (const Argument* a = c.attrs.find("stopwords")) {
    if (!a->is_sequence()) c.fail("stopwords must be a list of strings");
    for (const Argument& w : a->elements()) {
      if (w.kind() != Argument::Kind::String) c.fail("stopwords must be a list of strings");
      stop.insert(sensitive ? w.to_string() : change_case(w.to_string(), -1));
    }
  }
  auto out = std::make_shared<std::vector<std::string>>();
  for (const std::string& s : x.strings()) {
    if (stop.count(sensitive ? s : change_case(s, -1))) continue;
    out->push_back(change_case(s, act));
  }
  // Everything filtered out: one empty string (ONNX's rule), [1] or [1, 1].
  const bool empty = out->empty();
  if (empty) out->push_back(std::string());
  const auto count = static_cast<int64_t>(out->size());
  std::vector<int64_t> out_shape =
      shape.size() == 1 ? std::vector<int64_t>{count} : std::vector<int64_t>{1, count};
  c.outputs.push_back(Value::from_strings(std::move(out_shape), std::move(out)));
}

}  // namespace

Value cast_strings(const OpCall& c, const Value& v, Dtype dtype) {
  if (v.dtype() == dtype) return v;
  return dtype == Dtype::String ? to_strings(c, v) : from_strings(c, v, dtype);
}

void mark_takes_strings(const std::string& target) {
  std::lock_guard<std::mutex> lock(string_ops_mutex());
  string_ops().insert(target);
}

bool takes_strings(const Node& n) {
  if (n.op() != Opcode::CallFunction) return false;
  std::lock_guard<std::mutex> lock(string_ops_mutex());
  return string_ops().count(n.target().function().qualname()) != 0;
}

void register_string_ops() {
  register_builtin("onnx.StringNormalizer", string_normalizer);
  // Ops that move whole elements without reading their bytes (views, copies) or convert them.
  for (const char* op : {"onnx.StringNormalizer", "onnx.Cast", "onnx.CastLike", "onnx.Identity",
                         "onnx.Reshape", "onnx.Flatten", "onnx.Squeeze", "onnx.Unsqueeze"})
    mark_takes_strings(op);
}

}  // namespace fx::exec
