// wasm/glue.h — the functions wasm/bindings.cpp binds, by the file that defines them. Each takes
// and returns plain numbers, strings and emscripten::val, runs inside `guarded` (handles.h), and
// leaves failures in the pending-error slot. Argument values travel in the codec's text
// (codec.h); graphs, graph modules and nodes as registry ids (handles.h).
#pragma once

#include <emscripten/val.h>

#include <string>
#include <vector>

#include "fx/exec.h"
#include "fx/fx.h"

namespace fxwasm {

using emscripten::val;

/// A JS array with one plain object per item, its fields set by fill(object, item): the shape of
/// every report list (coverage, schema problems, shape-inference and lowering gaps).
template <class T, class Fill>
val objects_to_js(const std::vector<T>& items, Fill&& fill) {
  val out = val::array();
  for (const T& item : items) {
    val o = val::object();
    fill(o, item);
    out.call<void>("push", o);
  }
  return out;
}

// graph.cpp: fx::Graph.
double graph_new();
bool graph_delete(double gid);
bool graph_alive(double gid);
double graph_owner(double gid);
double graph_size(double gid);
val graph_nodes(double gid);
double graph_placeholder(double gid, std::string name, val type, std::string default_enc,
                         bool has_default);
double graph_get_attr(double gid, std::string qualified_name, val type);
/// call_function / call_method / call_module (instantiated for those three opcodes only).
template <fx::Opcode Op>
double graph_call(double gid, std::string target, std::string args_enc, std::string kwargs_enc,
                  val type);
double graph_output(double gid, std::string result_enc, val type);
double graph_create_node(double gid, std::string op, std::string target, std::string args_enc,
                         std::string kwargs_enc, val name, val type);
void graph_erase_node(double gid, double nid);
double graph_inserting(double gid, double nid, bool after);
void graph_restore_insert(double gid, double id);
void graph_keep_insert(double gid, double id);
double graph_node_copy(double gid, double src_gid, double src_nid, std::string map_enc);
std::string graph_graph_copy(double gid, double src_gid, std::string map_enc);
double graph_clone(double gid);
std::string graph_str(double gid, bool num_users);
std::string graph_tabular(double gid);
val graph_python_code(double gid, std::string root_module, bool verbose, bool torch113_bugs);
void graph_lint(double gid);
bool graph_eliminate_dead_code(double gid);
double graph_find_node(double gid, std::string name);
double graph_output_node(double gid);
/// {src, globals} of generated code (graph.cpp; graph_module.cpp uses it too).
val python_code_to_val(const fx::PythonCode& pc);

// node.cpp: fx::Node, addressed as (graph id, node id).
std::string node_name(double gid, double nid);
bool node_erased(double gid, double nid);
std::string node_op(double gid, double nid);
std::string node_target(double gid, double nid);
val node_type(double gid, double nid);
void node_set_type(double gid, double nid, val type);
std::string node_args(double gid, double nid);
std::string node_kwargs(double gid, double nid);
val node_users(double gid, double nid);
val node_all_input_nodes(double gid, double nid);
double node_next(double gid, double nid);
double node_prev(double gid, double nid);
void node_prepend(double gid, double nid, double xid);
void node_append(double gid, double nid, double xid);
val node_replace_all_uses_with(double gid, double nid, double with_id, std::string keep_enc);
void node_replace_input_with(double gid, double nid, double old_id, double new_id);
void node_update_arg(double gid, double nid, double idx, std::string value_enc);
void node_update_kwarg(double gid, double nid, std::string key, std::string value_enc);
void node_set_args(double gid, double nid, std::string args_enc);
void node_set_kwargs(double gid, double nid, std::string kwargs_enc);
val node_get_meta(double gid, double nid, std::string key);
void node_set_meta(double gid, double nid, std::string key, std::string value_enc);
bool node_delete_meta(double gid, double nid, std::string key);
std::string node_meta(double gid, double nid);
val node_stack_trace(double gid, double nid);
void node_set_stack_trace(double gid, double nid, val trace);
bool node_is_impure(double gid, double nid);
std::string node_format_node(double gid, double nid, bool num_users);

// graph_module.cpp: fx::GraphModule and its attribute tree.
double gm_new(double gid, std::string spec_enc, std::string blob, std::string class_name);
double gm_new_with_root(double gid, double root_id, std::string class_name);
bool gm_delete(double id);
double gm_graph_id(double id);
std::string gm_code(double id);
val gm_recompile(double id);
val gm_python_code(double id);
std::string gm_print_readable(double id);
std::string gm_str(double id);
std::string gm_class_name(double id);
bool gm_add_submodule(double id, std::string target, std::string spec_enc, std::string blob);
bool gm_delete_submodule(double id, std::string target);
void gm_delete_all_unused_submodules(double id);
void gm_set_torch113_bugs(double id, bool on);
std::string gm_named_modules(double id);
std::string gm_named_parameters(double id);
std::string gm_named_buffers(double id);
val gm_tensor_data(double id, std::string target);
std::string gm_add_constant(double id, std::string base, val tensor);

// exec.cpp: running a GraphModule (fx::exec), and tensors as JS objects.
val gm_run(double id, val inputs, val probe, bool profile);
val gm_coverage(double id);
val gm_call_op(double id, double tmp_gid, std::string target, std::string args, std::string kwargs,
               val inputs, double num_outputs, double meta_gid, double meta_nid);
val gm_value_kinds(double id);
void gm_shape_prop(double id, val inputs);
val gm_infer_shapes(double id, val shapes);
/// {dtype, shape, data (a typed array)} -> Value (input `index`, for messages); copies the bytes.
/// `for_run`: a run's input, dropped when the run ends (its bytes may then be the executor's).
fx::exec::Value value_from_js(const val& v, size_t index, bool for_run = false);
/// An array of such objects.
std::vector<fx::exec::Value> values_from_js(const val& inputs, bool for_run = false);
/// Value -> {dtype, shape, bytes (a Uint8Array copy)}.
val value_to_js(const fx::exec::Value& v);
/// Bytes currently allocated by malloc (mallinfo().uordblks): for leak tests.
double heap_used();
/// fx::exec::release_cached_memory(): the executor's arena, packed weights and plans.
void release_cached_memory();
/// fx::exec::set_num_threads(n) (1 in the single-thread module; in the threaded one at most the
/// Worker pool + 1); returns the count the kernels got.
double set_num_threads(double n);
/// fx::exec::num_threads().
double num_threads();

// passes.cpp: the pass manager and the subgraph rewriter.
val pass_info();
val gm_run_passes(double id, val names, val check_inputs, double rtol, double atol,
                  double max_iterations);
val gm_match_pattern(double id, double pattern_gid, bool ignore_literals, bool match_output,
                     bool match_placeholder, bool remove_overlapping);
val gm_replace_pattern(double id, double pattern_gid, double replacement_gid, val accepted,
                       bool ignore_literals);
val gm_extract_subgraph(double id, val inputs, val outputs);
val gm_split_module(double id, val partitions, bool keep_original_order);
val gm_split_const_subgraphs(double id, val skip);

// onnx.cpp: ONNX import/export (fx::onnx).
val load_onnx(val data, bool external, std::string opset_check);

// limits.cpp: fx::Limits ({maxTensorBytes, maxRunBytes, maxElements}; 0: the default).
void set_limits(val limits);
val get_limits();
val gm_external_data(double id);
void gm_supply_external_data(double id, val supplied);
val gm_to_onnx(double id, bool embed_external, double default_opset, double opset,
               std::string gelu);
std::string gm_meta(double id);
val gm_submodule_graph_module(double id, std::string target);
val gm_check_schemas(double id, double opset);
val tensor_from_onnx(val data);
val value_from_onnx(val data, std::string kind);
val tensor_to_onnx(val tensor, std::string name);
val onnx_meta_keys();

// torch_codegen.cpp: ONNX to PyTorch (fx::torch_codegen).
val gm_lowering_coverage(double id);
val gm_lower_to_torch(double id, std::string class_name, double size_a, double size_b,
                      val example_inputs);
val gm_to_folder(double id, std::string module_name);
val gm_torch_package(double id, std::string module_name);

}  // namespace fxwasm
