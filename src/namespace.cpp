// torch 1.13 `_Namespace.create_name`, made amortised O(1).
//
// 1.13 probes base_1, base_2, ... until a free name turns up, which is quadratic over a trace
// (10k `add` nodes probe 50M names). Names are never freed, so for each base we keep a
// union-find "next possibly free suffix" map with path compression: the probe visits the same
// candidates 1.13 would in the same order, but jumps over runs of taken ones.
#include "fx/namespace.h"

#include <unordered_set>

#include "fx/error.h"

namespace fx {

namespace {

#if __has_include("python_names.inc")
#include "python_names.inc"
#else
// Fallback lists (Python 3.11); scripts/gen_python_tables.py generates the exact ones.
#define FX_PY_KEYWORDS(X)                                                                     \
  X("False") X("None") X("True") X("and") X("as") X("assert") X("async") X("await") X("break") \
  X("class") X("continue") X("def") X("del") X("elif") X("else") X("except") X("finally")     \
  X("for") X("from") X("global") X("if") X("import") X("in") X("is") X("lambda")              \
  X("nonlocal") X("not") X("or") X("pass") X("raise") X("return") X("try") X("while")         \
  X("with") X("yield")
#define FX_PY_BUILTINS(X)                                                                   \
  X("abs") X("all") X("any") X("bool") X("dict") X("float") X("getattr") X("input") X("int") \
  X("len") X("list") X("max") X("min") X("print") X("range") X("set") X("slice") X("str")   \
  X("sum") X("tuple") X("type")
#define FX_CUSTOM_BUILTINS(X) \
  X("inf") X("nan") X("NoneType") X("torch") X("device") X("fx_pytree") X("pytree")
#endif

const std::unordered_set<std::string>& keywords() {
#define FX_NAME_ITEM(n) n,
  static const std::unordered_set<std::string> s{FX_PY_KEYWORDS(FX_NAME_ITEM)};
  return s;
}
const std::unordered_set<std::string>& builtins() {
  static const std::unordered_set<std::string> s{FX_PY_BUILTINS(FX_NAME_ITEM)};
  return s;
}
const std::unordered_set<std::string>& custom_builtins() {
  static const std::unordered_set<std::string> s{FX_CUSTOM_BUILTINS(FX_NAME_ITEM)};
  return s;
}
#undef FX_NAME_ITEM

bool is_illegal(const std::string& name, const std::string* builtin) {
  if (keywords().count(name)) return true;
  if (builtins().count(name) || custom_builtins().count(name))
    return !(builtin && *builtin == name);
  return false;
}

bool is_alnum_(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

}  // namespace

bool Namespace::is_keyword(const std::string& name) { return keywords().count(name) != 0; }

bool Namespace::is_reserved(const std::string& name) { return is_illegal(name, nullptr); }

std::string snake_case(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 4);
  bool prev_lower = false;
  for (char c : s) {
    const bool upper = c >= 'A' && c <= 'Z';
    if (prev_lower && upper) out += '_';
    out += upper ? static_cast<char>(c - 'A' + 'a') : c;
    prev_lower = c >= 'a' && c <= 'z';
  }
  return out;
}

std::string Namespace::create_name(const std::string& raw, const void* obj,
                                   const std::string* builtin) {
  if (obj) {
    auto it = obj_to_name_.find(obj);
    if (it != obj_to_name_.end()) return it->second;
  }
  if (raw.empty())
    throw Error(ErrorKind::Value, "cannot create a name from an empty string: pass a non-empty name");

  // Replace each run of characters illegal in an identifier by one '_'.
  std::string candidate;
  candidate.reserve(raw.size() + 1);
  bool in_run = false;
  for (char c : raw) {
    if (is_alnum_(c)) {
      candidate += c;
      in_run = false;
    } else if (!in_run) {
      candidate += '_';
      in_run = true;
    }
  }
  if (candidate[0] >= '0' && candidate[0] <= '9') candidate.insert(candidate.begin(), '_');

  // Split `^(.*)_(\d+)$`.
  std::string base = candidate;
  bool has_num = false;
  uint64_t num = 0;
  {
    size_t end = candidate.size(), i = end;
    while (i > 0 && candidate[i - 1] >= '0' && candidate[i - 1] <= '9') --i;
    if (i < end && i > 0 && candidate[i - 1] == '_' && end - i <= 18) {
      has_num = true;
      num = std::stoull(candidate.substr(i));
      base = candidate.substr(0, i - 1);
    }
  }
  if (has_num) candidate = base + "_" + std::to_string(num);

  auto& skips = next_free_[base];
  // Follows the union-find chain from k to the first suffix not known to be taken.
  auto find = [&skips](uint64_t k) {
    uint64_t root = k;
    for (auto it = skips.find(root); it != skips.end(); it = skips.find(root)) root = it->second;
    while (k != root) {  // path compression
      auto it = skips.find(k);
      uint64_t next = it->second;
      it->second = root;
      k = next;
    }
    return root;
  };

  uint64_t taken_suffix = num;
  bool numbered = has_num;
  if (used_.count(candidate) || is_illegal(candidate, builtin)) {
    uint64_t k = find(num + 1);
    for (;;) {
      candidate = base + "_" + std::to_string(k);
      if (!used_.count(candidate) && !is_illegal(candidate, builtin)) break;
      k = find(k + 1);
    }
    taken_suffix = k;
    numbered = true;
  }
  used_.insert(candidate);
  if (numbered) skips[taken_suffix] = taken_suffix + 1;
  if (obj) obj_to_name_[obj] = candidate;
  return candidate;
}

}  // namespace fx
