// Graph passes over fx::GraphModule, after torch.fx.passes. Each returns whether it changed
// the graph, keeps lint() clean and recompiles the module when it did.
#pragma once

#include <string>
#include <unordered_set>

#include "fx/graph_module.h"

namespace fx {

/// Common-subexpression elimination (torch.fx.passes.dialect.common.cse_pass.CSEPass): a node
/// computing the same target on the same arguments as an earlier node is replaced by it.
/// Placeholders, get_attr, outputs, impure nodes and targets in `banned` (qualified names such as
/// "torch.rand" or method names such as "normal_") are never merged. Unlike 1.13, literals compare
/// type-strictly, so x + 1 and x + 1.0 (which can differ in dtype) stay apart.
bool cse(GraphModule& gm, const std::unordered_set<std::string>& banned = {});

/// remove_dropout: nodes that are dropout at inference (call_module of a Dropout* submodule,
/// torch.nn.functional.dropout*, torch.dropout, torch.nn.functional.alpha_dropout...) are
/// replaced by their input.
bool remove_dropout(GraphModule& gm);

/// Graph::eliminate_dead_code() plus recompile.
bool eliminate_dead_code(GraphModule& gm);

}  // namespace fx
