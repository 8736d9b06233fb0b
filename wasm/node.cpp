// wasm/node.cpp — fx::Node for JS (wasm/node.mjs): every call takes (graph id, node id)
// and re-resolves the node, so a stale handle throws instead of touching freed memory.
#include <emscripten/val.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>
#include <utility>

#include "codec.h"
#include "glue.h"
#include "handles.h"

namespace fxwasm {

std::string node_name(double gid, double nid) {
  return guarded([&] { return node_at(gid, nid)->name(); });
}

/// Erased-ness without throwing for erased nodes (still throws for a deleted graph).
bool node_erased(double gid, double nid) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    fx::Node* n = nid >= 1 ? e.graph->node_by_id(static_cast<uint64_t>(nid)) : nullptr;
    if (!n) throw Error(ErrorKind::StaleHandle, "no node with this id in this Graph");
    return n->erased();
  });
}

std::string node_op(double gid, double nid) {
  return guarded([&] { return std::string(fx::opcode_name(node_at(gid, nid)->op())); });
}

std::string node_target(double gid, double nid) {
  return guarded([&] { return node_at(gid, nid)->target().pretty(); });
}

val node_type(double gid, double nid) {
  return guarded([&] { return opt_to_val(node_at(gid, nid)->type()); });
}

void node_set_type(double gid, double nid, val type) {
  guarded([&] { node_at(gid, nid)->set_type(opt_string(type, "type")); });
}

std::string node_args(double gid, double nid) {
  return guarded([&] { return encode_items(node_at(gid, nid)->args()); });
}

std::string node_kwargs(double gid, double nid) {
  return guarded([&] { return encode_kwargs(node_at(gid, nid)->kwargs()); });
}

val node_users(double gid, double nid) {
  return guarded([&] { return id_view(node_at(gid, nid)->users().list()); });
}

val node_all_input_nodes(double gid, double nid) {
  return guarded([&] { return id_view(node_at(gid, nid)->all_input_nodes()); });
}

double node_next(double gid, double nid) {
  return guarded([&] {
    fx::Node* n = node_at(gid, nid)->next();
    return n->op() == fx::Opcode::Root ? -1.0 : node_result(n);
  });
}

double node_prev(double gid, double nid) {
  return guarded([&] {
    fx::Node* n = node_at(gid, nid)->prev();
    return n->op() == fx::Opcode::Root ? -1.0 : node_result(n);
  });
}

void node_prepend(double gid, double nid, double xid) {
  guarded([&] {
    GraphEntry& e = graph_entry(gid);
    node_in(e, nid)->prepend(node_in(e, xid));
  });
}

void node_append(double gid, double nid, double xid) {
  guarded([&] {
    GraphEntry& e = graph_entry(gid);
    node_in(e, nid)->append(node_in(e, xid));
  });
}

// `keep_enc`: "" (no callback) or a list of ids of the users the JS callback accepted.
val node_replace_all_uses_with(double gid, double nid, double with_id, std::string keep_enc) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    fx::Node* n = node_in(e, nid);
    fx::Node* with = node_in(e, with_id);
    std::function<bool(fx::Node*)> cb;
    std::unordered_set<uint64_t> keep;
    if (!keep_enc.empty()) {
      const Argument ids = decode(keep_enc, nullptr, "replace_all_uses_with");
      for (const Argument& a : ids.elements()) keep.insert(static_cast<uint64_t>(a.to_int()));
      cb = [&keep](fx::Node* u) { return keep.count(u->id()) != 0; };
    }
    return id_view(n->replace_all_uses_with(with, cb));
  });
}

void node_replace_input_with(double gid, double nid, double old_id, double new_id) {
  guarded([&] {
    GraphEntry& e = graph_entry(gid);
    fx::Node* n = node_in(e, nid);
    fx::Node* old_input = node_in(e, old_id);
    n->replace_input_with(old_input, node_in(e, new_id));
  });
}

void node_update_arg(double gid, double nid, double idx, std::string value_enc) {
  guarded([&] {
    GraphEntry& e = graph_entry(gid);
    fx::Node* n = node_in(e, nid);
    Argument v = decode(value_enc, e.graph, "update_arg");
    if (!(idx >= 0) || idx != std::floor(idx))
      throw Error(ErrorKind::Index, "update_arg: index must be a non-negative integer", n->name());
    n->update_arg(static_cast<size_t>(idx), std::move(v));
  });
}

void node_update_kwarg(double gid, double nid, std::string key, std::string value_enc) {
  guarded([&] {
    GraphEntry& e = graph_entry(gid);
    fx::Node* n = node_in(e, nid);
    n->update_kwarg(key, decode(value_enc, e.graph, "update_kwarg"));
  });
}

void node_set_args(double gid, double nid, std::string args_enc) {
  guarded([&] {
    GraphEntry& e = graph_entry(gid);
    fx::Node* n = node_in(e, nid);
    n->set_args(decode_args(args_enc, e.graph, "args"));
  });
}

void node_set_kwargs(double gid, double nid, std::string kwargs_enc) {
  guarded([&] {
    GraphEntry& e = graph_entry(gid);
    fx::Node* n = node_in(e, nid);
    n->set_kwargs(decode_kwargs(kwargs_enc, e.graph, "kwargs"));
  });
}

/// meta[key] encoded, or null when absent.
val node_get_meta(double gid, double nid, std::string key) {
  return guarded([&] {
    const Argument* a = node_at(gid, nid)->meta().find(key);
    return a ? val(encode(*a)) : val::null();
  });
}

void node_set_meta(double gid, double nid, std::string key, std::string value_enc) {
  guarded([&] {
    fx::Node* n = node_at(gid, nid);
    // Node values would dangle once copied into another graph (node_copy copies meta).
    n->meta().set(key, decode(value_enc, nullptr, "meta"));
  });
}

bool node_delete_meta(double gid, double nid, std::string key) {
  return guarded([&] { return node_at(gid, nid)->meta().erase(key); });
}

std::string node_meta(double gid, double nid) {
  return guarded([&] { return encode_kwargs(node_at(gid, nid)->meta()); });
}

val node_stack_trace(double gid, double nid) {
  return guarded([&] { return opt_to_val(node_at(gid, nid)->stack_trace()); });
}

void node_set_stack_trace(double gid, double nid, val trace) {
  guarded([&] { node_at(gid, nid)->set_stack_trace(opt_string(trace, "stackTrace")); });
}

bool node_is_impure(double gid, double nid) {
  return guarded([&] { return node_at(gid, nid)->is_impure(); });
}

std::string node_format_node(double gid, double nid, bool num_users) {
  return guarded([&] {
    return node_at(gid, nid)->format_node(num_users ? fx::UsersToken::NumUsers
                                                    : fx::UsersToken::Hash);
  });
}

}  // namespace fxwasm
