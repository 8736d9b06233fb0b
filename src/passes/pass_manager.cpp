#include "fx/pass_manager.h"

#include <algorithm>

namespace fx {

PassManager& PassManager::add(std::string name, PassFn fn) {
  if (!fn) throw Error(ErrorKind::Value, "PassManager::add: pass '" + name + "' has no function");
  passes_.emplace_back(std::move(name), std::move(fn));
  return *this;
}

PassManager& PassManager::constrain(std::string first, std::string second) {
  constraints_.emplace_back(std::move(first), std::move(second));
  return *this;
}

PassManager& PassManager::max_iterations(int n) {
  if (n < 1)
    throw Error(ErrorKind::Value,
                "PassManager::max_iterations: needs at least 1, got " + std::to_string(n));
  max_iterations_ = n;
  return *this;
}

PassManager& PassManager::check_equivalence(EquivalenceCheck check) {
  check_ = std::move(check);
  return *this;
}

std::unique_ptr<GraphModule> copy_graph_module(const GraphModule& gm) {
  auto copy = std::make_unique<GraphModule>(&gm, gm.graph().clone(), gm.type_name());
  copy->meta() = gm.meta();
  return copy;
}

std::vector<PassReport> PassManager::run(GraphModule& gm) const {
  auto index_of = [&](const std::string& name) {
    for (size_t i = 0; i < passes_.size(); ++i)
      if (passes_[i].first == name) return static_cast<int64_t>(i);
    return int64_t{-1};
  };
  for (const auto& [first, second] : constraints_) {
    const int64_t a = index_of(first), b = index_of(second);
    if (a < 0 || b < 0) continue;  // a constraint on a pass not in this pipeline holds
    if (a > b)
      throw Error(ErrorKind::Value, "PassManager: pass '" + first + "' must run before '" + second +
                                        "', but the pipeline has it after; reorder the passes");
  }
  std::vector<PassReport> reports;
  for (int it = 0; it < max_iterations_; ++it) {
    bool any = false;
    for (const auto& [name, fn] : passes_) {
      PassReport r;
      r.pass = name;
      r.iteration = it;
      r.nodes_before = gm.graph().size();
      std::unique_ptr<GraphModule> before = check_ ? copy_graph_module(gm) : nullptr;
      r.modified = fn(gm);
      r.nodes_after = gm.graph().size();
      try {
        gm.graph().lint();
      } catch (const Error& e) {
        throw Error(ErrorKind::Lint, "pass '" + name + "' left an ill-formed graph: " + e.what(),
                    e.node());
      }
      if (r.modified) {
        gm.recompile();
        if (check_) {
          r.check = check_(*before, gm);
          if (!r.check.empty())
            throw Error(ErrorKind::Runtime,
                        "pass '" + name + "' changed what the graph computes: " + r.check);
        }
      }
      any = any || r.modified;
      reports.push_back(std::move(r));
    }
    if (!any) break;
  }
  return reports;
}

}  // namespace fx
