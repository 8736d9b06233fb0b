// The registry of call_function targets. Known callables come from function_table.inc, which
// scripts/gen_python_tables.py generates from the real torch 1.13; the operator templates are
// torch.fx's `magic_methods` / `inplace_methods`.
#include "fx/function.h"

#include <cstdio>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "fx/error.h"

namespace fx {

namespace {

struct Template {
  const char* name;
  const char* format;
};
// torch.fx.graph.magic_methods (reflectable ones first, then the comparison/unary ones).
const Template kMagic[] = {
    {"add", "{} + {}"},     {"sub", "{} - {}"},     {"mul", "{} * {}"},    {"floordiv", "{} // {}"},
    {"truediv", "{} / {}"}, {"div", "{} / {}"},     {"mod", "{} % {}"},    {"pow", "{} ** {}"},
    {"lshift", "{} << {}"}, {"rshift", "{} >> {}"}, {"and_", "{} & {}"},   {"or_", "{} | {}"},
    {"xor", "{} ^ {}"},     {"getitem", "{}[{}]"},  {"matmul", "{} @ {}"}, {"eq", "{} == {}"},
    {"ne", "{} != {}"},     {"lt", "{} < {}"},      {"gt", "{} > {}"},     {"le", "{} <= {}"},
    {"ge", "{} >= {}"},     {"pos", "+{}"},         {"neg", "-{}"},        {"invert", "~{}"}};
// torch.fx.graph.inplace_methods.
const Template kInplace[] = {
    {"iadd", "{} += {}"},     {"iand", "{} &= {}"},      {"ifloordiv", "{} //= {}"},
    {"ilshift", "{} <<= {}"}, {"imod", "{} %= {}"},      {"imul", "{} *= {}"},
    {"imatmul", "{} @= {}"},  {"ior", "{} |= {}"},       {"ipow", "{} **= {}"},
    {"irshift", "{} >>= {}"}, {"isub", "{} -= {}"},      {"itruediv", "{} /= {}"},
    {"ixor", "{} ^= {}"},     {"setitem", "{}[{}] = {}"}};

struct TableRow {
  const char* qualname;
  const char* module;
  const char* name;
  CallableKind kind;
  bool impure;
};
const TableRow kTable[] = {
#define FX_FUNCTION(qualname, module, name, kind, impure) \
  {qualname, module, name, CallableKind::kind, impure},
#include "ir/function_table.inc"
#undef FX_FUNCTION
    {"torch._assert", "torch", "_assert", CallableKind::Function, true},
};

struct AliasRow {
  const char* spelling;
  const char* qualname;
};
const AliasRow kAliases[] = {
#define FX_FUNCTION(qualname, module, name, kind, impure)
#define FX_FUNCTION_ALIAS(spelling, qualname) {spelling, qualname},
#include "ir/function_table.inc"
#undef FX_FUNCTION_ALIAS
#undef FX_FUNCTION
    {nullptr, nullptr},
};
const AliasRow kReprNames[] = {
#define FX_FUNCTION(qualname, module, name, kind, impure)
#define FX_FUNCTION_REPR_NAME(qualname, repr_name) {qualname, repr_name},
#include "ir/function_table.inc"
#undef FX_FUNCTION_REPR_NAME
#undef FX_FUNCTION
    {nullptr, nullptr},
};

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string base_module(const std::string& module) { return module.substr(0, module.find('.')); }

// Node._pretty_print_target for a callable with this module and name.
std::string printed_qualname(const std::string& module, const std::string& name) {
  if (module == "builtins") return "builtins." + name;
  if (module == "_operator") return "operator." + name;
  std::string m = module;
  if (starts_with(m, "torch._ops")) m = "torch.ops" + m.substr(10);
  return m + "." + name;
}

class Registry {
 public:
  static Registry& get() {
    static Registry r;
    return r;
  }

  const FunctionInfo* lookup_or_intern(std::string_view qualified) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_name_.find(std::string(qualified));
    if (it != by_name_.end()) return it->second;
    return add_locked(infer(std::string(qualified)));
  }

  const FunctionInfo* define(FunctionInfo info) {
    std::lock_guard<std::mutex> lock(mu_);
    if (info.qualname.empty()) info.qualname = printed_qualname(info.module, info.name);
    complete(info);
    auto it = by_name_.find(info.qualname);
    if (it != by_name_.end()) {
      *const_cast<FunctionInfo*>(it->second) = std::move(info);
      return it->second;
    }
    return add_locked(std::move(info));
  }

  std::vector<const FunctionInfo*> all() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<const FunctionInfo*> out;
    for (const auto& f : storage_) out.push_back(&f);
    return out;
  }

 private:
  Registry() {
    for (const TableRow& r : kTable) {
      FunctionInfo info;
      info.module = r.module;
      info.name = r.name;
      info.qualname = r.qualname;
      info.callable_kind = r.kind;
      info.impure = r.impure;
      complete(info);
      if (!by_name_.count(info.qualname)) add_locked(std::move(info));
    }
    for (const AliasRow* r = kReprNames; r->spelling; ++r) {
      auto it = by_name_.find(r->spelling);
      if (it != by_name_.end()) const_cast<FunctionInfo*>(it->second)->repr_name = r->qualname;
    }
    for (const AliasRow* r = kAliases; r->spelling; ++r) {
      auto it = by_name_.find(r->qualname);
      if (it != by_name_.end()) by_name_.emplace(r->spelling, it->second);
    }
  }

  static void complete(FunctionInfo& info) {
    const std::string base = base_module(info.module);
    info.keep_qualified = base == "torch" || base == "onnx";
    // ONNX's random ops draw new values on every run: no pass may fold, merge or drop them.
    if (info.module == "onnx")
      for (const char* r : {"RandomUniform", "RandomUniformLike", "RandomNormal",
                            "RandomNormalLike", "Bernoulli", "Multinomial"})
        if (info.name == r) info.impure = true;
    if (info.module == "_operator") {
      for (const Template& t : kMagic)
        if (info.name == t.name) info.magic_template = t.format;
      for (const Template& t : kInplace)
        if (info.name == t.name) info.inplace_template = t.format;
    }
  }

  // Derives module/name/kind for a name not in the table: "operator.x" is a C function of
  // _operator; builtins and math are C functions; torch.* are C functions of torch._C
  // (printed "built-in method"); everything else is a Python function.
  static FunctionInfo infer(const std::string& q) {
    size_t dot = q.rfind('.');
    if (q.empty() || dot == std::string::npos || dot == 0 || dot + 1 == q.size())
      throw Error(ErrorKind::Value, "call_function target '" + q +
                                        "' is not a qualified name: write it as module.name, e.g. "
                                        "'torch.relu', 'operator.add' or 'onnx.Conv'");
    FunctionInfo info;
    info.module = q.substr(0, dot);
    info.name = q.substr(dot + 1);
    if (info.module == "operator") info.module = "_operator";
    if (starts_with(q, "torch.ops.")) {  // OpOverloadPackets live in torch._ops.<namespace>
      info.module = "torch._ops" + info.module.substr(9);
      info.callable_kind = CallableKind::OpPacket;
      info.qualname = printed_qualname(info.module, info.name);
      complete(info);
      return info;
    }
    if (info.module == "_operator" || info.module == "builtins" || info.module == "math" ||
        info.module == "torch._C._nn")
      info.callable_kind = CallableKind::BuiltinFunction;
    else if (info.module == "torch")
      info.callable_kind = CallableKind::BuiltinMethod;
    else
      info.callable_kind = CallableKind::Function;
    info.qualname = printed_qualname(info.module, info.name);
    complete(info);
    return info;
  }

  const FunctionInfo* add_locked(FunctionInfo info) {
    storage_.push_back(std::move(info));
    const FunctionInfo* p = &storage_.back();
    by_name_[p->qualname] = p;
    by_name_[p->module + "." + p->name] = p;
    return p;
  }

  std::mutex mu_;
  std::deque<FunctionInfo> storage_;  // stable addresses
  std::unordered_map<std::string, const FunctionInfo*> by_name_;
};

// A stable, 12-hex-digit stand-in for a CPython object address (column widths of
// print_tabular stay the same as CPython's on 64-bit Linux).
std::string fake_address(const void* p) {
  char buf[32];
  std::snprintf(
      buf, sizeof buf, "0x%012llx",
      static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p) & 0xffffffffffffULL));
  return buf;
}

}  // namespace

Function::Function(std::string_view qualified_name)
    : info_(Registry::get().lookup_or_intern(qualified_name)) {}

Function Function::define(FunctionInfo info) {
  return Function(Registry::get().define(std::move(info)));
}

std::vector<Function> Function::all() {
  std::vector<Function> out;
  for (const FunctionInfo* f : Registry::get().all()) out.push_back(Function(f));
  return out;
}

std::string Function::py_repr() const {
  switch (info_->callable_kind) {
    case CallableKind::BuiltinFunction:
      return "<built-in function " + info_->name + ">";
    case CallableKind::BuiltinMethod: {
      static const int type_object = 0;  // all torch C functions share one type object
      return "<built-in method " + info_->name + " of type object at " +
             fake_address(&type_object) + ">";
    }
    case CallableKind::Function:
      return "<function " + (info_->repr_name.empty() ? info_->name : info_->repr_name) + " at " +
             fake_address(info_) + ">";
    case CallableKind::Class:
      return "<class '" +
             (info_->module == "builtins" ? info_->name : info_->module + "." + info_->name) + "'>";
    case CallableKind::OpPacket: {
      const std::string& q = info_->qualname;
      return "<OpOverloadPacket(op='" + (q.rfind("torch.ops.", 0) == 0 ? q.substr(10) : q) + "')>";
    }
  }
  return info_->qualname;
}

}  // namespace fx
