// wasm/handles.h — the state the JS boundary keeps: the pending-error slot that `guarded` fills,
// and the handle tables that turn the integer ids JS holds into graphs, graph modules and nodes.
//
//  * Handles, not objects. Graphs and GraphModules live in registries keyed by integer ids that
//    are never reused; JS holds the ids (wasm/graph.mjs, graph_module.mjs and node.mjs wrap them
//    in Graph / GraphModule / Node classes). A node handle is (graph id, fx::Node::id()); every
//    call re-resolves it through Graph::node_by_id and rejects erased nodes and deleted graphs
//    with StaleHandleError, so a stale JS handle can never reach freed memory.
//  * No C++ exception crosses into JS. Every bound function runs inside `guarded`, which catches
//    fx::Error / std::exception and parks (kind, message, node) in a one-slot "pending error".
//    The façade checks `errPending()` after each call and throws `FxError`. (A C++ exception
//    reaching JS would be an opaque WebAssembly.Exception, and throwing emscripten::val from a
//    catch block skips __cxa_end_catch and leaks; a sentinel plus a slot is simple and
//    leak-free.)
#pragma once

#include <emscripten/val.h>

#include <cstdint>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "fx/fx.h"

namespace fxwasm {

using emscripten::val;
using fx::Argument;
using fx::Error;
using fx::ErrorKind;

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// The one-slot pending error: set by `guarded`, read and cleared by takeError().
struct PendingError {
  bool set = false;
  std::string kind, message, node;
};
extern PendingError g_error;

/// Records (kind, message, node) as the pending error.
void set_error(std::string kind, std::string message, std::string node);

/// What a failed bound function returns (the façade looks at the slot, not at this).
template <class R>
R failed_value() {
  if constexpr (std::is_same_v<R, val>) {
    return val::undefined();
  } else {
    return R{};
  }
}

/// Runs `f`; on any exception records it as the pending error and returns a default value.
template <class F>
auto guarded(F&& f) -> decltype(f()) {
  using R = decltype(f());
  g_error.set = false;
  try {
    return f();
  } catch (const Error& e) {
    set_error(e.kind_name(), e.what(), e.node());
  } catch (const std::bad_alloc&) {
    set_error("ResourceError", "out of memory (the wasm heap could not grow)", {});
  } catch (const std::exception& e) {
    set_error("InternalError", std::string("internal error: ") + e.what(), {});
  } catch (...) {
    set_error("InternalError", "internal error: unknown C++ exception", {});
  }
  if constexpr (!std::is_void_v<R>) return failed_value<R>();
}

/// Whether the last guarded call failed.
bool err_pending();
/// {kind, message, node} of the pending error (and clears it), or null.
val take_error();

// ---------------------------------------------------------------------------------------------
// Registries
// ---------------------------------------------------------------------------------------------

/// An insert point JS holds (Graph.insertingBefore/After) until it restores or keeps it.
struct GuardSlot {
  std::unique_ptr<fx::Graph::InsertGuard> guard;
  fx::Node* prev_anchor;  // our mirror of the anchor the guard restores
};

/// A graph JS can reach: owned here (a free Graph) or by a GraphModule.
struct GraphEntry {
  fx::Graph* graph = nullptr;
  std::unique_ptr<fx::Graph> owned;  // null once a GraphModule owns the graph
  uint32_t gm = 0;                   // owning GraphModule id, or 0
  // Mirror of the graph's insert anchor (nullptr: the root), so creating a node next to an
  // anchor that has since been erased is reported instead of corrupting the node list.
  fx::Node* anchor = nullptr;
  uint32_t next_guard = 1;
  std::map<uint32_t, GuardSlot> guards;  // destroyed before `owned` (declared after it)
};

/// A GraphModule JS owns, and the id of its graph's entry.
struct GmEntry {
  std::unique_ptr<fx::GraphModule> gm;
  uint32_t gid = 0;
  /// The graph version whose weights gm_run last prepacked (fx::exec::prepack_weights).
  uint64_t prepacked_version = UINT64_MAX;
};

extern std::unordered_map<uint32_t, std::unique_ptr<GraphEntry>> g_graphs;
extern std::unordered_map<const fx::Graph*, uint32_t> g_graph_ids;
extern std::unordered_map<uint32_t, GmEntry> g_gms;
extern uint32_t g_next_id;  // shared by graphs and graph modules; never reused

/// A JS number as a registry id, or 0 (no entry has it) when it is not one.
uint32_t to_id(double x);
/// The entry of graph `gid`; throws StaleHandleError if it was deleted.
GraphEntry& graph_entry(double gid);
/// Node `nid` of `e`; throws StaleHandleError if there is none or it was erased.
fx::Node* node_in(const GraphEntry& e, double nid);
/// node_in(graph_entry(gid), nid).
fx::Node* node_at(double gid, double nid);
/// The id of a registered graph, or 0.
uint32_t gid_of(const fx::Graph* g);
/// The entry of GraphModule `id`; throws StaleHandleError if it was deleted.
GmEntry& gm_entry(double id);
/// Registers a free graph; returns its id.
uint32_t register_graph(std::unique_ptr<fx::Graph> g);
/// Registers a GraphModule made in C++ (and its graph); returns [gm id, graph id].
val register_graph_module(std::unique_ptr<fx::GraphModule> gm);
/// Drops graph `gid`'s entry (its guards first), freeing the graph if the entry owns it.
void drop_graph_entry(uint32_t gid);
/// Throws if the current insert point is a node that has since been erased.
void check_insert_point(const GraphEntry& e);

// ---------------------------------------------------------------------------------------------
// Small conversions shared by the glue files
// ---------------------------------------------------------------------------------------------

/// The ids of `nodes` as a Float64Array view over a reused buffer (the façade copies it at once).
val id_view(const std::vector<fx::Node*>& nodes);
/// null/undefined -> nullopt, a string -> itself; anything else throws TypeError naming `what`.
std::optional<std::string> opt_string(const val& v, const char* what);
/// nullopt -> null.
val opt_to_val(const std::optional<std::string>& s);

/// Node ids are >= 1 (0 is the graph's sentinel root), so functions returning a node id return
/// 0 exactly when they failed: the façade skips the errPending() call on success.
inline double node_result(fx::Node* n) { return static_cast<double>(n->id()); }

/// Live registry entries (graphs, graph modules): for leak tests.
double live_handles();

}  // namespace fxwasm
