// fx::Namespace — torch 1.13's `_Namespace`: unique, legal Python identifiers for nodes and
// globals. Produces exactly 1.13's names, but in amortised O(1) per name instead of 1.13's
// linear probe (which makes tracing quadratic).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace fx {

class Namespace {
 public:
  /// A unique name derived from `candidate`. `obj` identifies the named object (nullptr: none);
  /// an object already named gets its old name back. `builtin` is the Python builtin or custom
  /// builtin the object *is* (e.g. "getattr" for builtins.getattr), which may keep that name.
  /// Throws fx::Error(Value) on an empty candidate.
  std::string create_name(const std::string& candidate, const void* obj = nullptr,
                          const std::string* builtin = nullptr);
  /// Whether `name` has been handed out.
  bool is_used(const std::string& name) const { return used_.count(name) != 0; }

  /// Python keywords, builtins.__dict__ and fx's custom builtins (inf, nan, torch, ...):
  /// names a fresh node may not take.
  static bool is_reserved(const std::string& name);
  static bool is_keyword(const std::string& name);

 private:
  std::unordered_set<std::string> used_;
  std::unordered_map<const void*, std::string> obj_to_name_;
  /// Per base: suffix k -> a larger suffix to try next (b_k is taken); union-find chains.
  std::unordered_map<std::string, std::unordered_map<uint64_t, uint64_t>> next_free_;
};

/// torch.fx `_snake_case`: "MyLayer" -> "my_layer", "ALL_CAPS" -> "all_caps".
std::string snake_case(const std::string& s);

}  // namespace fx
