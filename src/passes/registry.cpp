// The pass registry (fx/pass_manager.h): one ordered table of named passes, seeded with the
// core's own IR passes on first use (no static initialisers, which a static library's linker
// may drop), extended by other layers at run time.
#include <mutex>

#include "fx/pass_manager.h"
#include "fx/passes.h"

namespace fx {

namespace {

struct Registry {
  std::mutex mu;
  std::vector<PassInfo> passes;  // registration order
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;  // never destroyed: passes may be looked up during exit
    reg->passes = {
        {"dce", "remove nodes whose values nothing uses (Graph::eliminate_dead_code)",
         [](GraphModule& gm) { return eliminate_dead_code(gm); }},
        {"cse", "merge nodes that compute the same value from the same inputs",
         [](GraphModule& gm) { return cse(gm); }},
        {"remove-dropout", "replace inference-time dropout by its input", remove_dropout},
    };
    return reg;
  }();
  return *r;
}

}  // namespace

void register_pass(PassInfo info) {
  if (info.name.empty()) throw Error(ErrorKind::Value, "register_pass: a pass needs a name");
  if (!info.fn)
    throw Error(ErrorKind::Value, "register_pass: pass '" + info.name + "' has no function");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (PassInfo& p : r.passes)
    if (p.name == info.name) {
      p = std::move(info);
      return;
    }
  r.passes.push_back(std::move(info));
}

std::vector<PassInfo> registered_passes() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.passes;
}

std::vector<std::string> registered_pass_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  names.reserve(r.passes.size());
  for (const PassInfo& p : r.passes) names.push_back(p.name);
  return names;
}

PassFn pass_by_name(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::string all;
  for (const PassInfo& p : r.passes) {
    if (p.name == name) return p.fn;
    all += (all.empty() ? "" : ", ") + p.name;
  }
  throw Error(ErrorKind::Value, "unknown pass '" + name + "': expected one of " + all);
}

}  // namespace fx
