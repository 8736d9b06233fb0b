// torch 1.13 `_Namespace.create_name`, made amortised O(1).
//
// 1.13 probes base_1, base_2, ... until a free name turns up, which is quadratic over a trace
// (10k `add` nodes probe 50M names). Names are never freed, so for each base we keep a
// union-find "next possibly free suffix" map with path compression: the probe visits the same
// candidates 1.13 would in the same order, but jumps over runs of taken ones.
#include "fx/namespace.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <unordered_set>

#include "fx/error.h"

namespace fx {

namespace {

#if __has_include("python_names.inc")
#include "python_names.inc"
#else
// Fallback lists (Python 3.11); scripts/gen_python_tables.py generates the exact ones.
// clang-format off
#define FX_PY_KEYWORDS(X)\
  X("False")       \
  X("None")        \
  X("True")        \
  X("and")         \
  X("as")          \
  X("assert")      \
  X("async")       \
  X("await")       \
  X("break")       \
  X("class")       \
  X("continue")    \
  X("def")         \
  X("del")         \
  X("elif")        \
  X("else")        \
  X("except")      \
  X("finally")     \
  X("for")         \
  X("from")        \
  X("global")      \
  X("if")          \
  X("import")      \
  X("in")          \
  X("is")          \
  X("lambda")      \
  X("nonlocal")    \
  X("not")         \
  X("or")          \
  X("pass")        \
  X("raise")       \
  X("return")      \
  X("try")         \
  X("while")       \
  X("with")        \
  X("yield")
// clang-format on
// clang-format off
#define FX_PY_BUILTINS(X)\
  X("abs")        \
  X("all")        \
  X("any")        \
  X("bool")       \
  X("dict")       \
  X("float")      \
  X("getattr")    \
  X("input")      \
  X("int")        \
  X("len")        \
  X("list")       \
  X("max")        \
  X("min")        \
  X("print")      \
  X("range")      \
  X("set")        \
  X("slice")      \
  X("str")        \
  X("sum")        \
  X("tuple")      \
  X("type")
// clang-format on
// clang-format off
#define FX_CUSTOM_BUILTINS(X)\
  X("inf")          \
  X("nan")          \
  X("NoneType")     \
  X("torch")        \
  X("device")       \
  X("fx_pytree")    \
  X("pytree")
// clang-format on
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

// ---- state ----
//
// Used names live in an open-addressing hash set of string_views into a chunked character
// arena (no allocation per name; freeing the namespace frees a few chunks). Per base name, a
// union-find "next possibly free suffix" array (dense for small suffixes, a hash map beyond)
// lets the probe skip runs of taken suffixes while visiting candidates in 1.13's order.

namespace {

uint64_t hash_name(std::string_view s) { return std::hash<std::string_view>{}(s); }

class NameSet {
 public:
  bool contains(std::string_view s, uint64_t h) const { return find(s, h) != nullptr; }
  /// The value slot of `s`, or nullptr if absent.
  const void** find(std::string_view s, uint64_t h) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (!slot.data) return nullptr;
      if (slot.hash == h && slot.size == s.size() &&
          std::memcmp(slot.data, s.data(), s.size()) == 0)
        return const_cast<const void**>(&slot.value);
    }
  }
  /// Adds `s` and returns its value slot, or returns nullptr if `s` is already present.
  const void** find_or_insert(std::string_view s, uint64_t h) {
    if ((count_ + 1) * 4 > slots_.size() * 3) rehash();
    size_t i = h & mask_;
    for (;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (!slot.data) break;
      if (slot.hash == h && slot.size == s.size() &&
          std::memcmp(slot.data, s.data(), s.size()) == 0)
        return nullptr;
    }
    slots_[i] = Slot{store(s), static_cast<uint32_t>(s.size()), h, nullptr};
    ++count_;
    return &slots_[i].value;
  }

 private:
  struct Slot {
    const char* data = nullptr;
    uint32_t size = 0;
    uint64_t hash = 0;
    const void* value = nullptr;
  };
  const char* store(std::string_view s) {
    constexpr size_t kChunk = 64 * 1024;
    const size_t need = s.size() + 1;  // +1: keeps empty views distinct from "free slot"
    if (chunk_left_ < need) {
      const size_t size = std::max(kChunk, need);
      chunks_.push_back(std::make_unique<char[]>(size));
      chunk_pos_ = chunks_.back().get();
      chunk_left_ = size;
    }
    char* p = chunk_pos_;
    std::memcpy(p, s.data(), s.size());
    p[s.size()] = '\0';
    chunk_pos_ += need;
    chunk_left_ -= need;
    return p;
  }
  void rehash() {
    std::vector<Slot> old = std::move(slots_);
    const size_t n = old.empty() ? 64 : old.size() * 2;
    slots_.assign(n, Slot{});
    mask_ = n - 1;
    for (const Slot& slot : old) {
      if (!slot.data) continue;
      size_t i = slot.hash & mask_;
      while (slots_[i].data) i = (i + 1) & mask_;
      slots_[i] = slot;
    }
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
  std::vector<std::unique_ptr<char[]>> chunks_;
  char* chunk_pos_ = nullptr;
  size_t chunk_left_ = 0;
};

// Per base: for a suffix k known to be taken, next(k) is a larger suffix to try.
class SuffixSkips {
 public:
  uint64_t get(uint64_t k) const {  // 0: k not known to be taken
    if (k < dense_.size()) return dense_[k];
    auto it = sparse_.find(k);
    return it == sparse_.end() ? 0 : it->second;
  }
  void set(uint64_t k, uint64_t next) {
    if (k < dense_.size()) {
      dense_[k] = next;
    } else if (k < 2 * dense_.size() + 64) {
      dense_.resize(2 * dense_.size() + 64, 0);
      for (auto it = sparse_.begin(); it != sparse_.end();) {
        if (it->first < dense_.size()) {
          dense_[it->first] = it->second;
          it = sparse_.erase(it);
        } else {
          ++it;
        }
      }
      dense_[k] = next;
    } else {
      sparse_[k] = next;
    }
  }
  /// The first suffix >= k not known to be taken (path-compressing).
  uint64_t find(uint64_t k) {
    uint64_t root = k;
    for (uint64_t n = get(root); n; n = get(root)) root = n;
    while (k != root) {
      uint64_t n = get(k);
      set(k, root);
      k = n;
    }
    return root;
  }

 private:
  std::vector<uint64_t> dense_;
  std::unordered_map<uint64_t, uint64_t> sparse_;
};

}  // namespace

struct Namespace::State {
  NameSet used;
  std::unordered_map<const void*, std::string> obj_to_name;
  std::unordered_map<std::string, SuffixSkips> skips;  // by base name
};

Namespace::Namespace() : s_(std::make_unique<State>()) {}
Namespace::~Namespace() = default;
Namespace::Namespace(Namespace&&) noexcept = default;
Namespace& Namespace::operator=(Namespace&&) noexcept = default;

bool Namespace::is_used(std::string_view name) const {
  return s_->used.contains(name, hash_name(name));
}

bool Namespace::bind(std::string_view name, const void* value) {
  const void** slot = s_->used.find(name, hash_name(name));
  if (!slot) return false;
  *slot = value;
  return true;
}

const void* Namespace::bound(std::string_view name) const {
  const void** slot = s_->used.find(name, hash_name(name));
  return slot ? *slot : nullptr;
}

std::string Namespace::create_name(const std::string& raw, const void* obj,
                                   const std::string* builtin) {
  return create(raw, obj, builtin, nullptr);
}

std::string Namespace::create_bound_name(const std::string& candidate, const void* value) {
  return create(candidate, nullptr, nullptr, value);
}

std::string Namespace::create(const std::string& raw, const void* obj, const std::string* builtin,
                              const void* value) {
  State& st = *s_;
  if (obj) {
    auto it = st.obj_to_name.find(obj);
    if (it != st.obj_to_name.end()) return it->second;
  }
  if (raw.empty())
    throw Error(ErrorKind::Value,
                "cannot create a name from an empty string: pass a non-empty name");

  // Replace each run of characters illegal in an identifier by one '_'.
  std::string candidate;  // no reserve(): most names fit the small-string buffer
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

  // Split `^(.*)_(\d+)$` into base and number; 1.13 reprints the number ("x_01" -> "x_1").
  size_t base_len = candidate.size();
  bool has_num = false;
  uint64_t num = 0;
  {
    size_t end = candidate.size(), i = end;
    while (i > 0 && candidate[i - 1] >= '0' && candidate[i - 1] <= '9') --i;
    if (i < end && i > 0 && candidate[i - 1] == '_' && end - i <= 18) {
      has_num = true;
      for (size_t j = i; j < end; ++j) num = num * 10 + static_cast<uint64_t>(candidate[j] - '0');
      base_len = i - 1;
    }
  }
  auto set_suffix = [&](uint64_t k) {  // candidate = base + "_" + k
    candidate.resize(base_len);
    candidate += '_';
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, k);
    candidate.append(buf, static_cast<size_t>(r.ptr - buf));
  };
  if (has_num) set_suffix(num);

  // No reserved name ends in _<digits> (scripts/gen_python_tables.py checks its lists), so
  // numbered candidates skip the reserved-name lookup.
  auto illegal = [&](bool numbered) { return !numbered && is_illegal(candidate, builtin); };
  // The skip map is only an accelerator: every candidate is still checked against the used
  // set, so names taken without a probe need no entry; a probe records each taken suffix it
  // passes, so each is walked over at most once per base.
  uint64_t h = hash_name(candidate);
  const void** slot = illegal(has_num) ? nullptr : st.used.find_or_insert(candidate, h);
  if (!slot) {
    SuffixSkips& skips = st.skips[candidate.substr(0, base_len)];
    uint64_t k = skips.find(num + 1);
    for (;;) {
      set_suffix(k);
      h = hash_name(candidate);
      slot = st.used.find_or_insert(candidate, h);
      if (slot) break;
      skips.set(k, k + 1);
      k = skips.find(k + 1);
    }
    skips.set(k, k + 1);
  }
  *slot = value;
  if (obj) st.obj_to_name[obj] = candidate;
  return candidate;
}

}  // namespace fx
