// Argument construction, accessors and the three Python printers (repr, str, format_arg).
#include "fx/argument.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fx/node.h"
#include "printer.h"

namespace fx {

namespace {
const char* const kDtypeNames[] = {
#define FX_DTYPE_STR(name, str) str,
    FX_DTYPES(FX_DTYPE_STR)
#undef FX_DTYPE_STR
};
const char* const kMemoryFormatNames[] = {
#define FX_MF_STR(name, str) str,
    FX_MEMORY_FORMATS(FX_MF_STR)
#undef FX_MF_STR
};
const char* const kLayoutNames[] = {
#define FX_LAYOUT_STR(name, str) str,
    FX_LAYOUTS(FX_LAYOUT_STR)
#undef FX_LAYOUT_STR
};
}  // namespace

const char* dtype_name(Dtype d) { return kDtypeNames[static_cast<int>(d)]; }
const char* memory_format_name(MemoryFormat m) { return kMemoryFormatNames[static_cast<int>(m)]; }
const char* layout_name(Layout l) { return kLayoutNames[static_cast<int>(l)]; }

Dtype dtype_from_name(const std::string& name_in) {
  std::string name = name_in.rfind("torch.", 0) == 0 ? name_in.substr(6) : name_in;
  static const std::pair<const char*, Dtype> aliases[] = {
      {"float", Dtype::Float32},    {"double", Dtype::Float64},    {"half", Dtype::Float16},
      {"long", Dtype::Int64},       {"int", Dtype::Int32},         {"short", Dtype::Int16},
      {"cfloat", Dtype::Complex64}, {"cdouble", Dtype::Complex128}};
  for (const auto& a : aliases)
    if (name == a.first) return a.second;
  for (size_t i = 0; i < sizeof(kDtypeNames) / sizeof(kDtypeNames[0]); ++i)
    if (name == kDtypeNames[i]) return static_cast<Dtype>(i);
  throw Error(ErrorKind::Value, "unknown dtype '" + name_in +
                                    "': expected a torch dtype name such as 'float32' or 'int64'");
}

size_t dtype_size(Dtype d) {
  switch (d) {
    case Dtype::Float32:
    case Dtype::Int32:
    case Dtype::QInt32:
    case Dtype::UInt32:
    case Dtype::Complex32:
      return 4;
    case Dtype::Float64:
    case Dtype::Int64:
    case Dtype::Complex64:
    case Dtype::UInt64:
      return 8;
    case Dtype::Float16:
    case Dtype::BFloat16:
    case Dtype::Int16:
    case Dtype::UInt16:
      return 2;
    case Dtype::Int8:
    case Dtype::UInt8:
    case Dtype::Bool:
    case Dtype::QInt8:
    case Dtype::QUInt8:
      return 1;
    case Dtype::Complex128:
      return 16;
    case Dtype::String:
      return 0;
  }
  return 0;
}

const char* Argument::kind_name(Kind k) {
  switch (k) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::Complex:
      return "complex";
    case Kind::String:
      return "str";
    case Kind::Node:
      return "Node";
    case Kind::Tuple:
      return "tuple";
    case Kind::List:
      return "list";
    case Kind::Dict:
      return "dict";
    case Kind::Slice:
      return "slice";
    case Kind::Ellipsis:
      return "ellipsis";
    case Kind::Dtype:
      return "dtype";
    case Kind::Device:
      return "device";
    case Kind::MemoryFormat:
      return "memory_format";
    case Kind::Layout:
      return "layout";
  }
  return "?";
}

Argument::Argument(Node* n) : kind_(Kind::Node), v_(n) {
  if (!n) throw Error(ErrorKind::Value, "a Node argument may not be null; use None (Argument())");
}

Argument Argument::tuple(Items items) {
  return Argument(Kind::Tuple, std::make_shared<const Items>(std::move(items)));
}
Argument Argument::list(Items items) {
  return Argument(Kind::List, std::make_shared<const Items>(std::move(items)));
}
Argument Argument::dict(DictItems items) {
  for (const auto& kv : items)
    if (kv.first.contains_node())
      throw Error(ErrorKind::Value,
                  "Keys for dictionaries used as an argument cannot contain a Node. Got key: " +
                      kv.first.repr());
  return Argument(Kind::Dict, std::make_shared<const DictItems>(std::move(items)));
}
Argument Argument::slice(Argument start, Argument stop, Argument step) {
  return Argument(Kind::Slice, std::make_shared<const Items>(
                                   Items{std::move(start), std::move(stop), std::move(step)}));
}
Argument Argument::ellipsis() { return Argument(Kind::Ellipsis, std::monostate{}); }

void Argument::type_error(const char* expected) const {
  throw Error(ErrorKind::Type, std::string("expected an argument of type ") + expected +
                                   " but got " + kind_name(kind_) + " (" + repr() + ")");
}

bool Argument::to_bool() const {
  if (kind_ != Kind::Bool) type_error("bool");
  return std::get<bool>(v_);
}
int64_t Argument::to_int() const {
  if (kind_ != Kind::Int) type_error("int");
  return std::get<int64_t>(v_);
}
double Argument::to_double() const {
  switch (kind_) {
    case Kind::Float:
      return std::get<double>(v_);
    case Kind::Int:
      return static_cast<double>(std::get<int64_t>(v_));
    case Kind::Bool:
      return std::get<bool>(v_) ? 1.0 : 0.0;
    default:
      type_error("float");
  }
}
std::complex<double> Argument::to_complex() const {
  if (kind_ != Kind::Complex) type_error("complex");
  return std::get<std::complex<double>>(v_);
}
const std::string& Argument::to_string() const {
  if (kind_ != Kind::String) type_error("str");
  return *std::get<std::shared_ptr<const std::string>>(v_);
}
Node* Argument::to_node() const {
  if (kind_ != Kind::Node) type_error("Node");
  return std::get<Node*>(v_);
}
Dtype Argument::to_dtype() const {
  if (kind_ != Kind::Dtype) type_error("dtype");
  return std::get<fx::Dtype>(v_);
}
const Device& Argument::to_device() const {
  if (kind_ != Kind::Device) type_error("device");
  return *std::get<std::shared_ptr<const fx::Device>>(v_);
}
MemoryFormat Argument::to_memory_format() const {
  if (kind_ != Kind::MemoryFormat) type_error("memory_format");
  return std::get<fx::MemoryFormat>(v_);
}
Layout Argument::to_layout() const {
  if (kind_ != Kind::Layout) type_error("layout");
  return std::get<fx::Layout>(v_);
}
const Argument::Items& Argument::elements() const {
  if (kind_ != Kind::Tuple && kind_ != Kind::List && kind_ != Kind::Slice)
    type_error("tuple, list or slice");
  return *std::get<std::shared_ptr<const Items>>(v_);
}
const Argument::DictItems& Argument::dict_items() const {
  if (kind_ != Kind::Dict) type_error("dict");
  return *std::get<std::shared_ptr<const DictItems>>(v_);
}

bool Argument::contains_node() const {
  bool found = false;
  for_each_node([&](Node*) { found = true; });
  return found;
}

bool Argument::operator==(const Argument& o) const {
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::None:
    case Kind::Ellipsis:
      return true;
    case Kind::Bool:
      return std::get<bool>(v_) == std::get<bool>(o.v_);
    case Kind::Int:
      return std::get<int64_t>(v_) == std::get<int64_t>(o.v_);
    case Kind::Float: {
      double a = std::get<double>(v_), b = std::get<double>(o.v_);
      return a == b || (std::isnan(a) && std::isnan(b));
    }
    case Kind::Complex:
      return std::get<std::complex<double>>(v_) == std::get<std::complex<double>>(o.v_);
    case Kind::String:
      return to_string() == o.to_string();
    case Kind::Node:
      return std::get<Node*>(v_) == std::get<Node*>(o.v_);
    case Kind::Tuple:
    case Kind::List:
    case Kind::Slice:
      return elements() == o.elements();
    case Kind::Dict:
      return dict_items() == o.dict_items();
    case Kind::Dtype:
      return to_dtype() == o.to_dtype();
    case Kind::Device:
      return to_device() == o.to_device();
    case Kind::MemoryFormat:
      return to_memory_format() == o.to_memory_format();
    case Kind::Layout:
      return to_layout() == o.to_layout();
  }
  return false;
}

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

std::string Argument::repr() const {
  std::string s;
  ArgumentPrinter{}.repr(*this, s);
  return s;
}
std::string Argument::str() const {
  std::string s;
  ArgumentPrinter{}.str(*this, s);
  return s;
}
std::string Argument::format_arg() const {
  std::string s;
  Out out(s);
  ArgumentPrinter{}.format_arg(*this, out);
  out.flush();
  return s;
}

}  // namespace fx
