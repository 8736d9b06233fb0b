// Python-style printing of Arguments (ir/printer.h): CPython's number and string reprs, and
// ArgumentPrinter's repr / str / format_arg, shared by print(graph), codegen and Node::format_node.
#include "ir/printer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fx/node.h"

namespace fx {
// ---------------------------------------------------------------------------------------------
// Python number and string formatting

namespace {
// Shortest round-tripping digits of a finite, non-zero |v|: fills `digits` (no dot) and returns
// the decimal exponent `decpt` such that v = 0.d1d2... * 10^decpt (CPython's convention).
int shortest_digits(double v, std::string& digits) {
  char buf[64];
  for (int prec = 0; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  // buf is "d.ddde[+-]XX"
  const char* e = std::strchr(buf, 'e');
  digits.clear();
  for (const char* p = buf; p < e; ++p)
    if (*p != '.') digits += *p;
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  return std::atoi(e + 1) + 1;
}

// CPython's PyOS_double_to_string(v, 'r', 0, flags): `add_dot_0` appends ".0" to integral
// values (float repr), `sign` forces a leading '+' (imaginary parts of complex).
std::string format_double_r(double v, bool add_dot_0, bool sign) {
  std::string out;
  if (std::isnan(v)) return sign ? "+nan" : "nan";
  if (std::signbit(v)) {
    out = "-";
    v = -v;
  } else if (sign) {
    out = "+";
  }
  if (std::isinf(v)) return out + "inf";
  if (v == 0) return out + (add_dot_0 ? "0.0" : "0");
  std::string d;
  int decpt = shortest_digits(v, d);
  const int nd = static_cast<int>(d.size());
  if (decpt <= -4 || decpt > 16) {
    out += d.substr(0, 1);
    if (nd > 1) out += "." + d.substr(1);
    int exp = decpt - 1;
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  } else if (decpt <= 0) {
    out += "0." + std::string(-decpt, '0') + d;
  } else if (decpt >= nd) {
    out += d + std::string(decpt - nd, '0');
    if (add_dot_0) out += ".0";
  } else {
    out += d.substr(0, decpt) + "." + d.substr(decpt);
  }
  return out;
}

std::string complex_repr(std::complex<double> c) {
  if (c.real() == 0 && !std::signbit(c.real()))
    return format_double_r(c.imag(), false, false) + "j";
  return "(" + format_double_r(c.real(), false, false) + format_double_r(c.imag(), false, true) +
         "j)";
}

std::string device_repr(const Device& d) {
  std::string s = "device(type='" + d.type + "'";
  if (d.index >= 0) s += ", index=" + std::to_string(d.index);
  return s + ")";
}
std::string device_str(const Device& d) {
  return d.index >= 0 ? d.type + ":" + std::to_string(d.index) : d.type;
}
}  // namespace

std::string py_float_repr(double v) { return format_double_r(v, true, false); }

void put_py_str_repr(std::string_view s, Out& out) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  out.put(quote);
  size_t run = 0;  // start of the pending run of characters that print as themselves
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const bool plain =
        c != static_cast<unsigned char>(quote) && c != '\\' && c >= 0x20 && c != 0x7f;
    if (plain) continue;  // printable ASCII, or UTF-8 bytes of printable text
    out.put(s.data() + run, i - run);
    run = i + 1;
    if (c == static_cast<unsigned char>(quote) || c == '\\') {
      out.put('\\');
      out.put(static_cast<char>(c));
    } else if (c == '\t') {
      out.put("\\t");
    } else if (c == '\n') {
      out.put("\\n");
    } else if (c == '\r') {
      out.put("\\r");
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out.put(buf, 4);
    }
  }
  out.put(s.data() + run, s.size() - run);
  out.put(quote);
}

std::string py_str_repr(const std::string& s) {
  std::string r;
  Out out(r);
  put_py_str_repr(s, out);
  out.flush();
  return r;
}

void put_py_float_repr(double v, Out& out) { out.put(format_double_r(v, true, false)); }

bool py_is_identifier(std::string_view s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    bool ok = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80 ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Printers

const std::string& ArgumentPrinter::node_name(Node* n) const {
  return name_node ? name_node(ctx, n) : n->name();
}

void ArgumentPrinter::repr(const Argument& a, Out& out) const {
  using Kind = Argument::Kind;
  switch (a.kind_) {
    case Kind::None:
      out.put("None");
      return;
    case Kind::Bool:
      if (std::get<bool>(a.v_)) {
        out.put("True");
      } else {
        out.put("False");
      }
      return;
    case Kind::Int:
      out.put_int(std::get<int64_t>(a.v_));
      return;
    case Kind::Float:
      put_py_float_repr(std::get<double>(a.v_), out);
      return;
    case Kind::Complex:
      out.put(complex_repr(std::get<std::complex<double>>(a.v_)));
      return;
    case Kind::String:
      put_py_str_repr(a.to_string(), out);
      return;
    case Kind::Node:
      out.put(node_name(std::get<Node*>(a.v_)));
      return;
    case Kind::Tuple: {
      const auto& items = a.elements();
      out.put('(');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out.put(", ");
        repr(items[i], out);
      }
      if (items.size() == 1) out.put(',');
      out.put(')');
      return;
    }
    case Kind::List: {
      const auto& items = a.elements();
      out.put('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out.put(", ");
        repr(items[i], out);
      }
      out.put(']');
      return;
    }
    case Kind::Dict: {
      out.put('{');
      bool first = true;
      for (const auto& kv : a.dict_items()) {
        if (!first) out.put(", ");
        first = false;
        repr(kv.first, out);
        out.put(": ");
        repr(kv.second, out);
      }
      out.put('}');
      return;
    }
    case Kind::Slice: {
      const auto& p = a.elements();
      out.put("slice(");
      repr(p[0], out);
      out.put(", ");
      repr(p[1], out);
      out.put(", ");
      repr(p[2], out);
      out.put(')');
      return;
    }
    case Kind::Ellipsis:
      out.put("Ellipsis");
      return;
    case Kind::Dtype:
      out.put("torch.");
      out.put(std::string_view(dtype_name(a.to_dtype())));
      return;
    case Kind::Device:
      out.put(device_repr(a.to_device()));
      return;
    case Kind::MemoryFormat:
      out.put("torch.");
      out.put(std::string_view(memory_format_name(a.to_memory_format())));
      return;
    case Kind::Layout:
      out.put("torch.");
      out.put(std::string_view(layout_name(a.to_layout())));
      return;
  }
}

void ArgumentPrinter::str(const Argument& a, Out& out) const {
  switch (a.kind_) {
    case Argument::Kind::String:
      out.put(a.to_string());
      return;
    case Argument::Kind::Device:
      out.put(device_str(a.to_device()));
      return;
    default:
      repr(a, out);
      return;
  }
}

void ArgumentPrinter::format_arg(const Argument& a, Out& out) const {
  using Kind = Argument::Kind;
  switch (a.kind_) {
    case Kind::List: {
      const auto& items = a.elements();
      out.put('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out.put(", ");
        format_arg(items[i], out);
      }
      out.put(']');
      return;
    }
    case Kind::Tuple:
      format_tuple(a.elements(), out);
      return;
    case Kind::Dict: {
      out.put('{');
      bool first = true;
      for (const auto& kv : a.dict_items()) {
        if (!first) out.put(", ");
        first = false;
        str(kv.first, out);
        out.put(": ");
        format_arg(kv.second, out);
      }
      out.put('}');
      return;
    }
    case Kind::Node:
      out.put('%');
      out.put(node_name(std::get<Node*>(a.v_)));
      return;
    default:
      str(a, out);
      return;
  }
}

void ArgumentPrinter::format_tuple(const std::vector<Argument>& items, Out& out) const {
  out.put('(');
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out.put(", ");
    format_arg(items[i], out);
  }
  if (items.size() == 1) out.put(',');
  out.put(')');
}

void ArgumentPrinter::format_kwargs(const Kwargs& kwargs, Out& out) const {
  out.put('{');
  bool first = true;
  for (const auto& kv : kwargs) {
    if (!first) out.put(", ");
    first = false;
    out.put(kv.first);
    out.put(": ");
    format_arg(kv.second, out);
  }
  out.put('}');
}

}  // namespace fx
