// Argument construction and accessors; the Python printers are in printer.cpp.
#include "fx/argument.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fx/node.h"
#include "ir/printer.h"

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

const Dtype* meta_dtype(const Argument& a) {
  static const Dtype kAll[] = {
#define FX_DTYPE_VALUE(name, str) Dtype::name,
      FX_DTYPES(FX_DTYPE_VALUE)
#undef FX_DTYPE_VALUE
  };
  if (a.kind() == Argument::Kind::Dtype) return &kAll[static_cast<size_t>(a.to_dtype())];
  if (a.kind() != Argument::Kind::String) return nullptr;
  try {
    return &kAll[static_cast<size_t>(dtype_from_name(a.to_string()))];
  } catch (const Error&) {
    return nullptr;
  }
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
