// Graph passes over fx::GraphModule, after torch.fx.passes. Each returns whether it changed
// the graph, keeps lint() clean and recompiles the module when it did.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

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

/// Partition id of a node, as split_module's callback returns it (printed as submod_<id>).
using SplitCallback = std::function<int64_t(const Node*)>;
/// New qualified name -> old one, in insertion order (a Python dict).
using QualnameMap = std::vector<std::pair<std::string, std::string>>;

/// torch.fx.passes.split_module.split_module (1.13): every call_* node goes to the partition the
/// callback names; each partition becomes a GraphModule `submod_<id>` whose placeholders are the
/// values it uses from outside (placeholders, get_attr values, other partitions' nodes) and whose
/// outputs are the values used outside; the returned module calls them (in topological order of
/// partitions, or first-seen order with `keep_original_order`) and unpacks multiple results with
/// operator.getitem. call_module targets are renamed `a_b` for `a.b` inside a partition;
/// `qualname_map` (if given) receives "submod_<id>.a_b" -> "a.b". `root` is unused, like in
/// torch. Throws fx::Error(Runtime) "cycle exists between partitions!" when partitions depend on
/// each other circularly, and fx::Error(Attribute) naming a node whose target is missing.
/// Unlike 1.13 (an IndexError), a partition whose values nobody uses returns ().
std::unique_ptr<GraphModule> split_module(const GraphModule& gm, const Module* root,
                                          const SplitCallback& split_callback,
                                          QualnameMap* qualname_map = nullptr,
                                          bool keep_original_order = false);

/// A new GraphModule computing `outputs` (node names) from `inputs` (node names), like
/// onnx.utils.extract_model on an FX graph: the inputs become placeholders (same names, meta
/// copied), every node between them and the outputs is copied in graph order with get_attr
/// attributes and the module's meta; several outputs are returned as a tuple. Throws
/// fx::Error(Value) naming an unknown name, and fx::Error(Graph) naming the node that needs a
/// placeholder outside `inputs` (the boundary is not closed).
std::unique_ptr<GraphModule> extract_subgraph(const GraphModule& gm,
                                              const std::vector<std::string>& inputs,
                                              const std::vector<std::string>& outputs);

/// torch.fx.experimental.const_fold.split_const_subgraphs (1.13), the graph surgery: nodes whose
/// inputs are all constant (get_attr, or constant nodes) and that are pure move to
/// `const_subgraph_module`, which reads the attributes directly and returns the folded values;
/// `module` reads them from the attribute `fx_const_folded_attrs_name`
/// ("_FX_CONST_FOLDED_ATTRS", uniquified; an empty parameter, or a ParameterList module indexed
/// with operator.getitem when there are several). Computing the values (run_folding) needs a
/// runtime: run const_subgraph_module and install its outputs under that name.
struct FoldedGraphModule {
  std::unique_ptr<GraphModule> module;
  /// Null when nothing was constant (then `module` is a copy of the input).
  std::unique_ptr<GraphModule> const_subgraph_module;
  std::string fx_const_folded_attrs_name;
};
/// `skip_folding_node` (optional): nodes it returns true for stay in the main graph.
FoldedGraphModule split_const_subgraphs(
    const GraphModule& gm, const std::function<bool(const Node*)>& skip_folding_node = nullptr);

/// torch.fx.experimental.optimization.fuse (1.13): every call_module of a BatchNorm{1,2,3}d
/// (with track_running_stats) whose input is the only use of a call_module of the matching
/// Conv{1,2,3}d is folded into a new conv module with fp32 weights W * gamma / sqrt(var + eps)
/// and bias (b - mean) / sqrt(var + eps) * gamma + beta; the bn node is removed. Modules are the
/// attribute tree's fx::Module with type_name "Conv2d"/"BatchNorm2d", tensors weight, bias,
/// running_mean, running_var, and eps from extra_repr. Returns a new module (the input is not
/// changed) that holds only the attributes its graph references. Throws fx::Error(Value) naming
/// the node when a tensor is missing, not float32 or has no data.
std::unique_ptr<GraphModule> fuse_conv_bn_modules(const GraphModule& gm);

}  // namespace fx
