// wasm/handles.cpp — the pending-error slot and the handle tables (see handles.h).
#include "handles.h"

#include <emscripten/val.h>

#include <cmath>
#include <string>
#include <utility>

namespace fxwasm {

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

PendingError g_error;

void set_error(std::string kind, std::string message, std::string node) {
  g_error.set = true;
  g_error.kind = std::move(kind);
  g_error.message = std::move(message);
  g_error.node = std::move(node);
}

bool err_pending() { return g_error.set; }

val take_error() {
  if (!g_error.set) return val::null();
  val e = val::object();
  e.set("kind", g_error.kind);
  e.set("message", g_error.message);
  e.set("node", g_error.node.empty() ? val::undefined() : val(g_error.node));
  g_error = PendingError{};
  return e;
}

// ---------------------------------------------------------------------------------------------
// Registries
// ---------------------------------------------------------------------------------------------

std::unordered_map<uint32_t, std::unique_ptr<GraphEntry>> g_graphs;
std::unordered_map<const fx::Graph*, uint32_t> g_graph_ids;
std::unordered_map<uint32_t, GmEntry> g_gms;
uint32_t g_next_id = 1;  // shared by graphs and graph modules; never reused

uint32_t to_id(double x) {
  if (!(x >= 1 && x <= 4294967295.0) || x != std::floor(x)) return 0;
  return static_cast<uint32_t>(x);
}

GraphEntry& graph_entry(double gid) {
  auto it = g_graphs.find(to_id(gid));
  if (it == g_graphs.end())
    throw Error(ErrorKind::StaleHandle,
                "this Graph has been deleted (or its GraphModule was); its nodes and insert "
                "points can no longer be used");
  return *it->second;
}

fx::Node* node_in(const GraphEntry& e, double nid) {
  fx::Node* n = nullptr;
  if (nid >= 1 && nid <= 9007199254740991.0 && nid == std::floor(nid))
    n = e.graph->node_by_id(static_cast<uint64_t>(nid));
  if (!n || n->op() == fx::Opcode::Root)
    throw Error(
        ErrorKind::StaleHandle,
        "no node with id " + std::to_string(static_cast<long long>(nid)) + " in this Graph");
  if (n->erased())
    throw Error(ErrorKind::StaleHandle,
                "Node '" + n->name() + "' was erased from its Graph; this handle is stale",
                n->name());
  return n;
}

fx::Node* node_at(double gid, double nid) { return node_in(graph_entry(gid), nid); }

uint32_t gid_of(const fx::Graph* g) {
  auto it = g_graph_ids.find(g);
  return it == g_graph_ids.end() ? 0 : it->second;
}

GmEntry& gm_entry(double id) {
  auto it = g_gms.find(to_id(id));
  if (it == g_gms.end()) throw Error(ErrorKind::StaleHandle, "this GraphModule has been deleted");
  return it->second;
}

uint32_t register_graph(std::unique_ptr<fx::Graph> g) {
  auto e = std::make_unique<GraphEntry>();
  e->graph = g.get();
  e->owned = std::move(g);
  const uint32_t id = g_next_id++;
  g_graph_ids[e->graph] = id;
  g_graphs[id] = std::move(e);
  return id;
}

void drop_graph_entry(uint32_t gid) {
  auto it = g_graphs.find(gid);
  if (it == g_graphs.end()) return;
  GraphEntry& e = *it->second;
  for (auto& kv : e.guards) kv.second.guard->keep();  // nothing to restore into a dying graph
  e.guards.clear();
  g_graph_ids.erase(e.graph);
  g_graphs.erase(it);  // frees the graph if the entry owns it
}

void check_insert_point(const GraphEntry& e) {
  if (e.anchor && e.anchor->erased())
    throw Error(ErrorKind::StaleHandle,
                "the insert point is next to Node '" + e.anchor->name() +
                    "', which was erased; restore() the InsertPoint or choose a new one",
                e.anchor->name());
}

val register_graph_module(std::unique_ptr<fx::GraphModule> gm) {
  auto e = std::make_unique<GraphEntry>();
  e->graph = &gm->graph();
  const uint32_t gid = g_next_id++;
  const uint32_t id = g_next_id++;
  e->gm = id;
  g_graph_ids[e->graph] = gid;
  g_graphs[gid] = std::move(e);
  g_gms[id] = GmEntry{std::move(gm), gid};
  val out = val::array();
  out.call<void>("push", static_cast<double>(id));
  out.call<void>("push", static_cast<double>(gid));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Small conversions
// ---------------------------------------------------------------------------------------------

// id_view's buffer: reused by every call.
std::vector<double> g_ids;

val id_view(const std::vector<fx::Node*>& nodes) {
  g_ids.clear();
  g_ids.reserve(nodes.size());
  for (fx::Node* n : nodes) g_ids.push_back(static_cast<double>(n->id()));
  return val(emscripten::typed_memory_view(g_ids.size(), g_ids.data()));
}

std::optional<std::string> opt_string(const val& v, const char* what) {
  if (v.isNull() || v.isUndefined()) return std::nullopt;
  if (!v.isString()) throw Error(ErrorKind::Type, std::string(what) + " must be a string");
  return v.as<std::string>();
}

val opt_to_val(const std::optional<std::string>& s) { return s ? val(*s) : val::null(); }

double live_handles() { return static_cast<double>(g_graphs.size() + g_gms.size()); }

}  // namespace fxwasm
