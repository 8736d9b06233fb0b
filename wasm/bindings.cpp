// wasm/bindings.cpp — the Embind table of fxwasm: which C++ function each JS name of the module
// (dist/fx.mjs) calls. Every line of Embind in fxwasm is in wasm/ (STYLE §1, §4, §5):
//   handles.h/.cpp   the handle tables (graphs, graph modules, nodes as ids) and the
//                    pending-error slot every bound function reports through (`guarded`)
//   codec.h/.cpp     the tagged-text value format (JS half: codec.mjs)
//   glue.h           the bound functions, defined by concept in graph.cpp, node.cpp,
//                    graph_module.cpp, exec.cpp, passes.cpp and onnx.cpp
//
// Design (details in handles.h and codec.h):
//  * Handles, not objects: JS holds integer ids, re-resolved and checked on every call, so a
//    stale JS handle throws StaleHandleError instead of reaching freed memory.
//  * No C++ exception crosses into JS: failures park in a one-slot pending error that the
//    façade turns into FxError.
//  * Values cross as a compact tagged text, so 1 vs 1.0, tuple vs list, dtype, device, slice...
//    all survive the round trip exactly.
//  * No JS callbacks are called from C++ (so no JS exception can unwind through C++ frames, and
//    no user code runs while C++ holds pointers into a graph): node_copy's arg_transform and
//    replace_all_uses_with's delete_user_cb are evaluated in JS first and passed in as tables;
//    replacePattern's filters run in JS on gmMatchPattern's matches and gmReplacePattern
//    replaces the accepted ones; loadONNX's external data is listed by gmExternalData, read in
//    JS and handed in with gmSupplyExternalData before loadONNX returns. C++ reads only
//    values, arrays and byte views the façade made, so no user getter runs from C++ either.
#include <emscripten/bind.h>

#include <string>

#include "fx/fx.h"
#include "glue.h"
#include "handles.h"

#ifndef FXWASM_VERSION
#define FXWASM_VERSION "0.1.0"  // the build may pass -DFXWASM_VERSION="x.y.z" from package.json
#endif

namespace {

std::string version() { return FXWASM_VERSION; }

}  // namespace

EMSCRIPTEN_BINDINGS(fxwasm) {
  using emscripten::function;
  using namespace fxwasm;
  function("errPending", &err_pending);
  function("takeError", &take_error);
  function("version", &version);
  function("gmRun", &gm_run);
  function("loadOnnx", &load_onnx);
  function("setLimits", &set_limits);
  function("getLimits", &get_limits);
  function("gmExternalData", &gm_external_data);
  function("gmSupplyExternalData", &gm_supply_external_data);
  function("gmToOnnx", &gm_to_onnx);
  function("gmMeta", &gm_meta);
  function("gmSubmoduleGraphModule", &gm_submodule_graph_module);
  function("gmCheckSchemas", &gm_check_schemas);
  function("tensorFromOnnx", &tensor_from_onnx);
  function("valueFromOnnx", &value_from_onnx);
  function("tensorToOnnx", &tensor_to_onnx);
  function("onnxMetaKeys", &onnx_meta_keys);
  function("gmLoweringCoverage", &gm_lowering_coverage);
  function("gmLowerToTorch", &gm_lower_to_torch);
  function("gmToFolder", &gm_to_folder);
  function("gmTorchPackage", &gm_torch_package);
  function("gmCoverage", &gm_coverage);
  function("gmCallOp", &gm_call_op);
  function("gmValueKinds", &gm_value_kinds);
  function("gmShapeProp", &gm_shape_prop);
  function("gmInferShapes", &gm_infer_shapes);
  function("passInfo", &pass_info);
  function("gmRunPasses", &gm_run_passes);
  function("gmMatchPattern", &gm_match_pattern);
  function("gmReplacePattern", &gm_replace_pattern);
  function("gmExtractSubgraph", &gm_extract_subgraph);
  function("gmSplitModule", &gm_split_module);
  function("gmSplitConstSubgraphs", &gm_split_const_subgraphs);
  function("heapUsed", &heap_used);
  function("releaseCachedMemory", &release_cached_memory);
  function("liveHandles", &live_handles);
  function("setNumThreads", &set_num_threads);
  function("numThreads", &num_threads);

  function("graphNew", &graph_new);
  function("graphDelete", &graph_delete);
  function("graphAlive", &graph_alive);
  function("graphOwner", &graph_owner);
  function("graphSize", &graph_size);
  function("graphNodes", &graph_nodes);
  function("graphPlaceholder", &graph_placeholder);
  function("graphGetAttr", &graph_get_attr);
  function("graphCallFunction", &graph_call<fx::Opcode::CallFunction>);
  function("graphCallMethod", &graph_call<fx::Opcode::CallMethod>);
  function("graphCallModule", &graph_call<fx::Opcode::CallModule>);
  function("graphOutput", &graph_output);
  function("graphCreateNode", &graph_create_node);
  function("graphEraseNode", &graph_erase_node);
  function("graphInserting", &graph_inserting);
  function("graphRestoreInsert", &graph_restore_insert);
  function("graphKeepInsert", &graph_keep_insert);
  function("graphNodeCopy", &graph_node_copy);
  function("graphGraphCopy", &graph_graph_copy);
  function("graphClone", &graph_clone);
  function("graphStr", &graph_str);
  function("graphTabular", &graph_tabular);
  function("graphPythonCode", &graph_python_code);
  function("graphLint", &graph_lint);
  function("graphEliminateDeadCode", &graph_eliminate_dead_code);
  function("graphFindNode", &graph_find_node);
  function("graphOutputNode", &graph_output_node);

  function("nodeName", &node_name);
  function("nodeErased", &node_erased);
  function("nodeOp", &node_op);
  function("nodeTarget", &node_target);
  function("nodeType", &node_type);
  function("nodeSetType", &node_set_type);
  function("nodeArgs", &node_args);
  function("nodeKwargs", &node_kwargs);
  function("nodeUsers", &node_users);
  function("nodeAllInputNodes", &node_all_input_nodes);
  function("nodeNext", &node_next);
  function("nodePrev", &node_prev);
  function("nodePrepend", &node_prepend);
  function("nodeAppend", &node_append);
  function("nodeReplaceAllUsesWith", &node_replace_all_uses_with);
  function("nodeReplaceInputWith", &node_replace_input_with);
  function("nodeUpdateArg", &node_update_arg);
  function("nodeUpdateKwarg", &node_update_kwarg);
  function("nodeSetArgs", &node_set_args);
  function("nodeSetKwargs", &node_set_kwargs);
  function("nodeGetMeta", &node_get_meta);
  function("nodeSetMeta", &node_set_meta);
  function("nodeDeleteMeta", &node_delete_meta);
  function("nodeMeta", &node_meta);
  function("nodeStackTrace", &node_stack_trace);
  function("nodeSetStackTrace", &node_set_stack_trace);
  function("nodeIsImpure", &node_is_impure);
  function("nodeFormatNode", &node_format_node);

  function("gmNew", &gm_new);
  function("gmNewWithRoot", &gm_new_with_root);
  function("gmDelete", &gm_delete);
  function("gmGraphId", &gm_graph_id);
  function("gmCode", &gm_code);
  function("gmRecompile", &gm_recompile);
  function("gmPythonCode", &gm_python_code);
  function("gmPrintReadable", &gm_print_readable);
  function("gmStr", &gm_str);
  function("gmClassName", &gm_class_name);
  function("gmAddSubmodule", &gm_add_submodule);
  function("gmDeleteSubmodule", &gm_delete_submodule);
  function("gmDeleteAllUnusedSubmodules", &gm_delete_all_unused_submodules);
  function("gmSetTorch113Bugs", &gm_set_torch113_bugs);
  function("gmNamedModules", &gm_named_modules);
  function("gmNamedParameters", &gm_named_parameters);
  function("gmNamedBuffers", &gm_named_buffers);
  function("gmTensorData", &gm_tensor_data);
  function("gmAddConstant", &gm_add_constant);
}
