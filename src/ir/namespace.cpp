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

#include "ir/python_names.inc"

// Reserved names as views of the literals above: lookups need no std::string.
using NameViews = std::unordered_set<std::string_view>;
const NameViews& keywords() {
#define FX_NAME_ITEM(n) std::string_view(n),
  static const NameViews s{FX_PY_KEYWORDS(FX_NAME_ITEM)};
  return s;
}
const NameViews& builtins() {
  static const NameViews s{FX_PY_BUILTINS(FX_NAME_ITEM)};
  return s;
}
const NameViews& custom_builtins() {
  static const NameViews s{FX_CUSTOM_BUILTINS(FX_NAME_ITEM)};
  return s;
}
#undef FX_NAME_ITEM

bool is_illegal(std::string_view name, const std::string* builtin) {
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
  // Two passes (count, then fill): one allocation of the right size.
  size_t inserts = 0;
  bool prev_lower = false;
  for (char c : s) {
    if (prev_lower && c >= 'A' && c <= 'Z') ++inserts;
    prev_lower = c >= 'a' && c <= 'z';
  }
  std::string out(s.size() + inserts, '_');
  size_t j = 0;
  prev_lower = false;
  for (char c : s) {
    const bool upper = c >= 'A' && c <= 'Z';
    if (prev_lower && upper) ++j;  // the '_' is already there
    out[j++] = upper ? static_cast<char>(c - 'A' + 'a') : c;
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

const void* Namespace::bound(std::string_view name) const { return bound(name, hash_name(name)); }

const void* Namespace::bound(std::string_view name, uint64_t hash) const {
  const void** slot = s_->used.find(name, hash);
  return slot ? *slot : nullptr;
}

uint64_t Namespace::hash(std::string_view name) { return hash_name(name); }

std::string Namespace::create_name(const std::string& raw, const void* obj,
                                   const std::string* builtin) {
  return create(raw, obj, builtin, nullptr);
}

std::string Namespace::create_bound_name(const std::string& candidate, const void* value) {
  return create(candidate, nullptr, nullptr, value);
}

namespace {

// Appends "_<k>" to the base (the first base_len chars of buf); returns the new length.
size_t put_suffix(char* buf, size_t base_len, uint64_t k) noexcept {
  buf[base_len] = '_';
  auto r = std::to_chars(buf + base_len + 1, buf + base_len + 22, k);
  return static_cast<size_t>(r.ptr - buf);
}

}  // namespace

// The common case (a short fresh name) stays in this frame; rare paths (long names, probing,
// objects) live in their own functions.
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
  if (raw.size() > kMaxShortName) return create_long(raw, obj, builtin, value);

  // Replace each run of characters illegal in an identifier by one '_'; prefix a leading digit.
  char buf[kMaxShortName + 24];
  size_t len = 0;
  if (raw[0] >= '0' && raw[0] <= '9') buf[len++] = '_';
  bool in_run = false;
  for (char c : raw) {
    if (is_alnum_(c)) {
      buf[len++] = c;
      in_run = false;
    } else if (!in_run) {
      buf[len++] = '_';
      in_run = true;
    }
  }
  return create_sanitized(buf, len, obj, builtin, value);
}

std::string Namespace::create_long(const std::string& raw, const void* obj,
                                   const std::string* builtin, const void* value) {
  std::string buf(raw.size() + 24, '\0');
  size_t len = 0;
  if (raw[0] >= '0' && raw[0] <= '9') buf[len++] = '_';
  bool in_run = false;
  for (char c : raw) {
    if (is_alnum_(c)) {
      buf[len++] = c;
      in_run = false;
    } else if (!in_run) {
      buf[len++] = '_';
      in_run = true;
    }
  }
  return create_sanitized(&buf[0], len, obj, builtin, value);
}

// `buf` holds a legal identifier of `len` chars and has room for a 21-char suffix.
std::string Namespace::create_sanitized(char* buf, size_t len, const void* obj,
                                        const std::string* builtin, const void* value) {
  State& st = *s_;
  // Split `^(.*)_(\d+)$` into base and number; 1.13 reprints the number ("x_01" -> "x_1").
  size_t base_len = len;
  bool has_num = false;
  uint64_t num = 0;
  {
    size_t i = len;
    while (i > 0 && buf[i - 1] >= '0' && buf[i - 1] <= '9') --i;
    if (i < len && i > 0 && buf[i - 1] == '_' && len - i <= 18) {
      has_num = true;
      for (size_t j = i; j < len; ++j) num = num * 10 + static_cast<uint64_t>(buf[j] - '0');
      base_len = i - 1;
      len = put_suffix(buf, base_len, num);
    }
  }
  // No reserved name ends in _<digits> (scripts/gen_python_tables.py checks its lists), so
  // numbered candidates skip the reserved-name lookup.
  std::string_view candidate(buf, len);
  const bool illegal = !has_num && is_illegal(candidate, builtin);
  const void** slot = illegal ? nullptr : st.used.find_or_insert(candidate, hash_name(candidate));
  if (!slot) {
    len = probe(buf, base_len, num, &slot);
    candidate = std::string_view(buf, len);
  }
  *slot = value;
  if (obj) remember(obj, candidate);
  return std::string(candidate);
}

// The first free base_<k>, k > num, in 1.13's probe order. The skip map is only an
// accelerator: every candidate is still checked against the used set, so names taken without
// a probe need no entry; a probe records each taken suffix it passes, so each is walked over
// at most once per base.
size_t Namespace::probe(char* buf, size_t base_len, uint64_t num, const void*** slot) {
  State& st = *s_;
  SuffixSkips& skips = st.skips[std::string(buf, base_len)];
  uint64_t k = skips.find(num + 1);
  for (;;) {
    const size_t len = put_suffix(buf, base_len, k);
    const std::string_view candidate(buf, len);
    *slot = st.used.find_or_insert(candidate, hash_name(candidate));
    if (*slot) {
      skips.set(k, k + 1);
      return len;
    }
    skips.set(k, k + 1);
    k = skips.find(k + 1);
  }
}

void Namespace::remember(const void* obj, std::string_view name) {
  s_->obj_to_name[obj] = std::string(name);
}

}  // namespace fx
