// fx::Namespace — torch 1.13's `_Namespace`: unique, legal Python identifiers for nodes and
// globals. Produces exactly 1.13's names, but in amortised O(1) per name instead of 1.13's
// linear probe (which makes tracing quadratic), and without a heap allocation per name.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fx {

class Namespace {
 public:
  Namespace();
  ~Namespace();
  Namespace(Namespace&&) noexcept;
  Namespace& operator=(Namespace&&) noexcept;
  Namespace(const Namespace&) = delete;
  Namespace& operator=(const Namespace&) = delete;

  /// A unique name derived from `candidate`. `obj` identifies the named object (nullptr: none);
  /// an object already named gets its old name back. `builtin` is the Python builtin or custom
  /// builtin the object *is* (e.g. "getattr" for builtins.getattr), which may keep that name.
  /// Throws fx::Error(Value) on an empty candidate.
  std::string create_name(const std::string& candidate, const void* obj = nullptr,
                          const std::string* builtin = nullptr);
  /// create_name(candidate) that also binds `value` to the new name (see bind()).
  std::string create_bound_name(const std::string& candidate, const void* value);
  /// Whether `name` has been handed out.
  bool is_used(std::string_view name) const;
  /// Attaches `value` to a name already handed out (Graph: the node that holds it); returns
  /// false if `name` is not used.
  bool bind(std::string_view name, const void* value);
  /// The value bound to `name`, or nullptr.
  const void* bound(std::string_view name) const;
  /// bound() with `hash == Namespace::hash(name)` precomputed.
  const void* bound(std::string_view name, uint64_t hash) const;
  /// The hash the namespace uses for names.
  static uint64_t hash(std::string_view name);

  /// Python keywords, builtins.__dict__ and fx's custom builtins (inf, nan, torch, ...):
  /// names a fresh node may not take.
  static bool is_reserved(const std::string& name);
  static bool is_keyword(const std::string& name);

 private:
  static constexpr size_t kMaxShortName = 200;  // longer candidates take create_long()
  std::string create(const std::string& candidate, const void* obj, const std::string* builtin,
                     const void* value);
  std::string create_long(const std::string& candidate, const void* obj, const std::string* builtin,
                          const void* value);
  std::string create_sanitized(char* buf, size_t len, const void* obj, const std::string* builtin,
                               const void* value);
  size_t probe(char* buf, size_t base_len, uint64_t num, const void*** slot);
  void remember(const void* obj, std::string_view name);
  struct State;
  std::unique_ptr<State> s_;
};

/// torch.fx `_snake_case`: "MyLayer" -> "my_layer", "ALL_CAPS" -> "all_caps".
std::string snake_case(const std::string& s);

}  // namespace fx
