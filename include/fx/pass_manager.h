// fx::PassManager — an ordered pipeline of graph passes (torch.fx.passes.infra.pass_manager):
// ordering constraints checked up front, lint() after every pass, per-pass `modified` flags and
// node counts, optional fixed-point iteration, and an optional per-pass equivalence check that
// stops at the first pass that changes what the graph computes.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "fx/graph_module.h"

namespace fx {

/// A pass: rewrites the module in place and says whether it changed anything.
using PassFn = std::function<bool(GraphModule&)>;

/// Compares a module before and after a pass (typically by running both on the same inputs,
/// see fx::exec::equivalence_check); returns an empty string when they agree, else what differs.
using EquivalenceCheck =
    std::function<std::string(const GraphModule& before, const GraphModule& after)>;

struct PassReport {
  std::string pass;
  int iteration = 0;
  bool modified = false;
  size_t nodes_before = 0, nodes_after = 0;
  /// What the equivalence check said ("" = equivalent), when one was run.
  std::string check;
};

class PassManager {
 public:
  PassManager& add(std::string name, PassFn fn);
  /// `first` must run before `second` wherever both are in the pipeline (torch.fx's
  /// this_before_that_pass_constraint); checked when run() starts.
  PassManager& constrain(std::string first, std::string second);
  /// Re-run the whole pipeline until no pass modifies the graph, at most `n` times (default 1).
  PassManager& max_iterations(int n);
  /// Check every pass that modified the graph; run() throws at the first disagreement.
  PassManager& check_equivalence(EquivalenceCheck check);

  /// Runs the pipeline. Throws fx::Error(Value) for an unknown name in a constraint or a
  /// violated constraint, fx::Error(Lint) naming the pass if one leaves the graph ill-formed,
  /// and fx::Error(Runtime) naming the pass and the difference if the check fails.
  std::vector<PassReport> run(GraphModule& gm) const;

 private:
  std::vector<std::pair<std::string, PassFn>> passes_;
  std::vector<std::pair<std::string, std::string>> constraints_;
  int max_iterations_ = 1;
  EquivalenceCheck check_;
};

/// A copy of `gm` (graph cloned, attribute tree shared): what a pass's "before" looks like.
std::unique_ptr<GraphModule> copy_graph_module(const GraphModule& gm);

// ---- The pass registry -------------------------------------------------------------------------
// One list of the passes that are run by name: the CLI's --passes, fx.runPasses and fx.passNames()
// in JS, the playground's pipeline. The core registers its IR passes (dce, cse, remove-dropout);
// other layers add theirs (fx::exec::register_onnx_passes() adds fold and the fusions).
//
//   fx::register_pass({"my-pass", "what it does, in one line", my_pass});
//   fx::PassManager pm;
//   for (const char* name : {"dce", "my-pass"}) pm.add(name, fx::pass_by_name(name));

/// A pass the registry knows by name.
struct PassInfo {
  std::string name;         ///< "dce", "fuse-conv-bn": lower case, words joined by '-'
  std::string description;  ///< one line, for --help, fx.passNames() and the playground
  PassFn fn;
};

/// Registers a pass, or replaces the function and description of the pass of that name (which
/// keeps its place in the order). Throws fx::Error(Value) for an empty name or function.
void register_pass(PassInfo info);
/// Every registered pass, in registration order.
std::vector<PassInfo> registered_passes();
/// The names of registered_passes(), in order.
std::vector<std::string> registered_pass_names();
/// The registered pass called `name`; throws fx::Error(Value) listing the registered names.
PassFn pass_by_name(const std::string& name);

}  // namespace fx
