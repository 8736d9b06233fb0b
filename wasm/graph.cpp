// wasm/graph.cpp — fx::Graph for JS (wasm/graph.mjs).
#include <emscripten/val.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "codec.h"
#include "glue.h"
#include "handles.h"

namespace fxwasm {

double graph_new() {
  return guarded([] { return static_cast<double>(register_graph(std::make_unique<fx::Graph>())); });
}

/// Frees a graph the caller owns. A graph owned by a GraphModule is left alone (returns false).
bool graph_delete(double gid) {
  return guarded([&] {
    auto it = g_graphs.find(to_id(gid));
    if (it == g_graphs.end() || !it->second->owned) return false;
    drop_graph_entry(it->first);
    return true;
  });
}

bool graph_alive(double gid) { return g_graphs.count(to_id(gid)) != 0; }

double graph_owner(double gid) {
  return guarded([&] { return static_cast<double>(graph_entry(gid).gm); });
}

double graph_size(double gid) {
  return guarded([&] { return static_cast<double>(graph_entry(gid).graph->size()); });
}

val graph_nodes(double gid) {
  return guarded([&] { return id_view(graph_entry(gid).graph->nodes().to_vector()); });
}

double graph_placeholder(double gid, std::string name, val type, std::string default_enc,
                         bool has_default) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    check_insert_point(e);
    std::optional<Argument> def;
    if (has_default) def = decode(default_enc, e.graph, "placeholder defaultValue");
    return node_result(e.graph->placeholder(name, opt_string(type, "type"), std::move(def)));
  });
}

double graph_get_attr(double gid, std::string qualified_name, val type) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    check_insert_point(e);
    return node_result(e.graph->get_attr(qualified_name, opt_string(type, "type")));
  });
}

// One per call opcode, so the hot path passes no opcode string.
template <fx::Opcode Op>
double graph_call(double gid, std::string target, std::string args_enc, std::string kwargs_enc,
                  val type) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    check_insert_point(e);
    const char* what = fx::opcode_name(Op);
    std::vector<Argument> args = decode_args(args_enc, e.graph, what);
    fx::Kwargs kwargs = decode_kwargs(kwargs_enc, e.graph, what);
    std::optional<std::string> t = opt_string(type, "type");
    fx::Node* n = nullptr;
    if constexpr (Op == fx::Opcode::CallFunction) {
      n = e.graph->call_function(fx::fn(target), std::move(args), std::move(kwargs), t);
    } else if constexpr (Op == fx::Opcode::CallMethod) {
      n = e.graph->call_method(target, std::move(args), std::move(kwargs), t);
    } else {
      static_assert(Op == fx::Opcode::CallModule, "call opcodes only");
      n = e.graph->call_module(target, std::move(args), std::move(kwargs), t);
    }
    return node_result(n);
  });
}

double graph_output(double gid, std::string result_enc, val type) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    check_insert_point(e);
    Argument result = decode(result_enc, e.graph, "output");
    return node_result(e.graph->output(std::move(result), opt_string(type, "type")));
  });
}

double graph_create_node(double gid, std::string op, std::string target, std::string args_enc,
                         std::string kwargs_enc, val name, val type) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    check_insert_point(e);
    fx::Opcode opcode = fx::opcode_from_name(op);
    std::vector<Argument> args = decode_args(args_enc, e.graph, "create_node");
    fx::Kwargs kwargs = decode_kwargs(kwargs_enc, e.graph, "create_node");
    fx::Target t =
        opcode == fx::Opcode::CallFunction ? fx::Target(fx::fn(target)) : fx::Target(target);
    return node_result(e.graph->create_node(opcode, std::move(t), std::move(args),
                                            std::move(kwargs), opt_string(name, "name"),
                                            opt_string(type, "type")));
  });
}

void graph_erase_node(double gid, double nid) {
  guarded([&] {
    GraphEntry& e = graph_entry(gid);
    e.graph->erase_node(node_in(e, nid));
  });
}

double graph_inserting(double gid, double nid, bool after) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    fx::Node* n = nid < 0 ? nullptr : node_in(e, nid);
    auto guard = std::make_unique<fx::Graph::InsertGuard>(after ? e.graph->inserting_after(n)
                                                                : e.graph->inserting_before(n));
    const uint32_t id = e.next_guard++;
    e.guards[id] = GuardSlot{std::move(guard), e.anchor};
    e.anchor = n;
    return static_cast<double>(id);
  });
}

/// Restores the insert point that was current when guard `id` was made. Idempotent.
void graph_restore_insert(double gid, double id) {
  guarded([&] {
    auto it = g_graphs.find(to_id(gid));
    if (it == g_graphs.end()) return;  // the graph is gone: nothing to restore
    GraphEntry& e = *it->second;
    auto g = e.guards.find(to_id(id));
    if (g == e.guards.end()) return;
    e.anchor = g->second.prev_anchor;
    e.guards.erase(g);  // ~InsertGuard restores the graph's insert point
  });
}

/// Makes guard `id`'s insert point permanent (drops the guard without restoring).
void graph_keep_insert(double gid, double id) {
  guarded([&] {
    auto it = g_graphs.find(to_id(gid));
    if (it == g_graphs.end()) return;
    auto g = it->second->guards.find(to_id(id));
    if (g == it->second->guards.end()) return;
    g->second.guard->keep();
    it->second->guards.erase(g);
  });
}

// `map_enc`: "" for identity, else a list of (source node id, value) pairs computed in JS.
double graph_node_copy(double gid, double src_gid, double src_nid, std::string map_enc) {
  return guarded([&] {
    GraphEntry& dst = graph_entry(gid);
    GraphEntry& src = graph_entry(src_gid);
    fx::Node* n = node_in(src, src_nid);
    check_insert_point(dst);
    if (map_enc.empty()) {
      if (src.graph != dst.graph && !n->all_input_nodes().empty())
        throw Error(ErrorKind::Graph,
                    "node_copy: Node '" + n->name() + "' comes from another Graph and uses '" +
                        n->all_input_nodes().front()->name() +
                        "'; pass an argTransform that maps its inputs into this Graph",
                    n->name());
      return node_result(dst.graph->node_copy(n));
    }
    Argument table = decode(map_enc, dst.graph, "node_copy argTransform");
    std::unordered_map<uint64_t, Argument> mapping;
    for (const Argument& pair : table.elements())
      mapping[static_cast<uint64_t>(pair.elements()[0].to_int())] = pair.elements()[1];
    auto transform = [&](fx::Node* in) -> Argument {
      auto it = mapping.find(in->id());
      if (it == mapping.end() || &in->graph() != src.graph)
        throw Error(ErrorKind::Key,
                    "node_copy: argTransform gave no value for input '" + in->name() + "'",
                    in->name());
      return it->second;
    };
    return node_result(dst.graph->node_copy(n, transform));
  });
}

// `map_enc`: list of (source node id, value) pre-seeding val_map. Returns the encoded tuple
// (mapped output or None, [(source node id, value) for every mapped node in source order]).
std::string graph_graph_copy(double gid, double src_gid, std::string map_enc) {
  return guarded([&] {
    GraphEntry& dst = graph_entry(gid);
    GraphEntry& src = graph_entry(src_gid);
    if (dst.graph == src.graph)
      throw Error(ErrorKind::Value, "graph_copy: cannot copy a Graph into itself; clone() it");
    check_insert_point(dst);
    fx::ValueMap vm;
    Argument table = decode(map_enc, dst.graph, "graph_copy valMap");
    for (const Argument& pair : table.elements())
      vm[node_in(src, static_cast<double>(pair.elements()[0].to_int()))] = pair.elements()[1];
    std::optional<Argument> out = dst.graph->graph_copy(*src.graph, vm);
    std::string s = "(";
    if (out)
      encode(*out, s);
    else
      s += 'N';
    s += '[';
    for (fx::Node* n : src.graph->nodes()) {
      auto it = vm.find(n);
      if (it == vm.end()) continue;
      s += "(i" + std::to_string(n->id()) + ';';
      encode(it->second, s);
      s += ')';
    }
    return s + "])";
  });
}

double graph_clone(double gid) {
  return guarded([&] {
    std::unique_ptr<fx::Graph> g = graph_entry(gid).graph->clone();
    return static_cast<double>(register_graph(std::move(g)));
  });
}

std::string graph_str(double gid, bool num_users) {
  return guarded([&] {
    return graph_entry(gid).graph->str(num_users ? fx::UsersToken::NumUsers : fx::UsersToken::Hash);
  });
}

std::string graph_tabular(double gid) {
  return guarded([&] { return graph_entry(gid).graph->tabular(); });
}

val python_code_to_val(const fx::PythonCode& pc) {
  val globals = val::object();
  for (const auto& kv : pc.globals) globals.set(kv.first, kv.second);
  val out = val::object();
  out.set("src", pc.src);
  out.set("globals", globals);
  return out;
}

val graph_python_code(double gid, std::string root_module, bool verbose, bool torch113_bugs) {
  return guarded([&] {
    fx::CodegenOptions opts;
    opts.verbose = verbose;
    opts.torch113_bugs = torch113_bugs;
    return python_code_to_val(graph_entry(gid).graph->python_code(root_module, opts));
  });
}

void graph_lint(double gid) {
  guarded([&] { graph_entry(gid).graph->lint(); });
}

bool graph_eliminate_dead_code(double gid) {
  return guarded([&] { return graph_entry(gid).graph->eliminate_dead_code(); });
}

double graph_find_node(double gid, std::string name) {
  return guarded([&] {
    fx::Node* n = graph_entry(gid).graph->find_node(name);
    return n ? node_result(n) : -1.0;
  });
}

double graph_output_node(double gid) {
  return guarded([&] {
    fx::Node* n = graph_entry(gid).graph->output_node();
    return n ? node_result(n) : -1.0;
  });
}

template double graph_call<fx::Opcode::CallFunction>(double, std::string, std::string, std::string,
                                                     val);
template double graph_call<fx::Opcode::CallMethod>(double, std::string, std::string, std::string,
                                                   val);
template double graph_call<fx::Opcode::CallModule>(double, std::string, std::string, std::string,
                                                   val);

}  // namespace fxwasm
