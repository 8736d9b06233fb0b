// wasm/passes.cpp — passes by name (fx::PassManager) and the subgraph rewriter for JS
// (wasm/passes.mjs).
#include <emscripten/val.h>

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "codec.h"
#include "fx/exec.h"
#include "fx/exec/passes.h"
#include "fx/passes.h"
#include "glue.h"
#include "handles.h"

namespace fxwasm {

namespace {

// A graph value as [name, true] for a node, [encoded literal, false] otherwise.
val match_value_to_js(const Argument& a) {
  val pair = val::array();
  pair.call<void>("push", a.is_node() ? val(a.to_node()->name()) : val(encode(a)));
  pair.call<void>("push", a.is_node());
  return pair;
}

// What a match matched, as text: the graph node ids (and literals) of its nodes_map in order.
// Two matches of one pattern never share it (they cover different nodes).
std::string match_key(const fx::InternalMatch& m) {
  std::string key;
  for (const auto& [pn, gv] : m.nodes_map) {
    if (gv.is_node())
      key += '#' + std::to_string(gv.to_node()->id()) + ';';
    else
      encode(gv, key);
  }
  return key;
}

// A match as the filters of replacePattern see it: {anchors, nodesMap, placeholderNodes,
// returningNodes}, plus `key`, which names the match for gm_replace_pattern.
val internal_match_to_js(const fx::InternalMatch& m) {
  val o = val::object();
  val anchors = val::array();
  for (const fx::Node* a : m.anchors) anchors.call<void>("push", a->name());
  val nodes = val::array();
  for (const auto& [pn, gv] : m.nodes_map) {
    val pair = match_value_to_js(gv);
    pair.call<void>("unshift", pn->name());
    nodes.call<void>("push", pair);
  }
  val placeholders = val::array();
  for (const Argument& a : m.placeholder_nodes)
    placeholders.call<void>("push", match_value_to_js(a));
  val returning = val::array();
  for (const fx::Node* r : m.returning_nodes) returning.call<void>("push", r->name());
  o.set("anchors", anchors);
  o.set("nodesMap", nodes);
  o.set("placeholderNodes", placeholders);
  o.set("returningNodes", returning);
  o.set("key", match_key(m));
  return o;
}

}  // namespace

// The pass registry (fx::registered_passes, with this layer's ONNX passes added): [{name,
// description}] in registration order. The façade's passNames, the CLI's --passes and the
// playground's pipeline all come from here.
val pass_info() {
  return guarded([&] {
    fx::exec::register_onnx_passes();
    val out = val::array();
    for (const fx::PassInfo& p : fx::registered_passes()) {
      val o = val::object();
      o.set("name", p.name);
      o.set("description", p.description);
      out.call<void>("push", o);
    }
    return out;
  });
}

// The passes callable by name (CLI, JS pipelines).
val gm_run_passes(double id, val names, val check_inputs, double rtol, double atol,
                  double max_iterations) {
  return guarded([&] {
    fx::PassManager pm;
    const unsigned n = names["length"].as<unsigned>();
    for (unsigned i = 0; i < n; ++i) {
      const std::string name = names[i].as<std::string>();
      pm.add(name, fx::exec::pass_by_name(name));
    }
    pm.max_iterations(static_cast<int>(max_iterations));
    if (!check_inputs.isNull() && !check_inputs.isUndefined())
      pm.check_equivalence(fx::exec::equivalence_check(
          values_from_js(check_inputs), static_cast<float>(rtol), static_cast<float>(atol)));
    val out = val::array();
    for (const fx::PassReport& r : pm.run(*gm_entry(id).gm)) {
      val o = val::object();
      o.set("pass", r.pass);
      o.set("iteration", r.iteration);
      o.set("modified", r.modified);
      o.set("nodesBefore", static_cast<double>(r.nodes_before));
      o.set("nodesAfter", static_cast<double>(r.nodes_after));
      out.call<void>("push", o);
    }
    return out;
  });
}

// Every match replace_pattern would consider (the same matcher and options), for the JS filters.
// (replacePattern's filters see it with match_output = match_placeholder = false and
// remove_overlapping = true, as the rewriter matches.)
val gm_match_pattern(double id, double pattern_gid, bool ignore_literals, bool match_output,
                     bool match_placeholder, bool remove_overlapping) {
  return guarded([&] {
    const fx::Graph& pattern = *graph_entry(pattern_gid).graph;
    const fx::SubgraphMatcher matcher(pattern, match_output, match_placeholder, remove_overlapping,
                                      ignore_literals);
    val out = val::array();
    for (const fx::InternalMatch& m : matcher.match(gm_entry(id).gm->graph()))
      out.call<void>("push", internal_match_to_js(m));
    return out;
  });
}

// `accepted`: null to replace every match, else the keys (gm_match_pattern) of the matches the
// JS filters accepted. Matching is deterministic, so the rewriter finds the same matches again;
// one whose key is not in the list is left alone (as is any the filters never saw).
val gm_replace_pattern(double id, double pattern_gid, double replacement_gid, val accepted,
                       bool ignore_literals) {
  return guarded([&] {
    const fx::Graph& pattern = *graph_entry(pattern_gid).graph;
    const fx::Graph& replacement = *graph_entry(replacement_gid).graph;
    std::vector<fx::MatchFilter> filters;
    std::unordered_set<std::string> keys;
    if (!accepted.isNull() && !accepted.isUndefined()) {
      const unsigned n = accepted["length"].as<unsigned>();
      for (unsigned i = 0; i < n; ++i) keys.insert(accepted[i].as<std::string>());
      filters.push_back([&keys](const fx::InternalMatch& m, const fx::Graph&, const fx::Graph&) {
        return keys.count(match_key(m)) != 0;
      });
    }
    const std::vector<fx::Match> matches = fx::replace_pattern_with_filters(
        *gm_entry(id).gm, pattern, replacement, filters, ignore_literals);
    val out = val::array();
    for (const fx::Match& m : matches) {
      val o = val::object();
      o.set("anchor", m.anchor ? m.anchor->name() : std::string());
      val map = val::array();
      for (const auto& [pn, gv] : m.nodes_map) {
        val pair = val::array();
        pair.call<void>("push", pn->name());
        pair.call<void>("push", gv.is_node() ? val(gv.to_node()->name()) : val(encode(gv)));
        pair.call<void>("push", gv.is_node());
        map.call<void>("push", pair);
      }
      o.set("nodesMap", map);
      val made = val::array();
      for (const fx::Node* n : m.replacements) made.call<void>("push", n->name());
      o.set("replacements", made);
      out.call<void>("push", o);
    }
    return out;
  });
}

// ---------------------------------------------------------------------------------------------
// Graph surgery that makes new GraphModules (fx/passes.h)
// ---------------------------------------------------------------------------------------------

namespace {

std::vector<std::string> strings_from_js(const val& a, const char* what) {
  if (!a.isArray())
    throw Error(ErrorKind::Type, std::string(what) + " must be an array of node names");
  std::vector<std::string> out;
  const unsigned n = a["length"].as<unsigned>();
  for (unsigned i = 0; i < n; ++i) {
    const val s = a[i];
    if (!s.isString())
      throw Error(ErrorKind::Type, std::string(what) + " must be an array of node names");
    out.push_back(s.as<std::string>());
  }
  return out;
}

}  // namespace

// fx::extract_subgraph: [gm id, graph id] of a new module the caller owns.
val gm_extract_subgraph(double id, val inputs, val outputs) {
  return guarded([&] {
    return register_graph_module(fx::extract_subgraph(
        *gm_entry(id).gm, strings_from_js(inputs, "inputs"), strings_from_js(outputs, "outputs")));
  });
}

// fx::split_module with the partition of every call_* node worked out in JS (`partitions`:
// [node name, partition id] pairs, so C++ never calls back into JS mid-pass): {module: [gm id,
// graph id], qualnameMap: [[new, old] ...]}.
val gm_split_module(double id, val partitions, bool keep_original_order) {
  return guarded([&] {
    std::unordered_map<std::string, int64_t> part;
    const unsigned n = partitions["length"].as<unsigned>();
    for (unsigned i = 0; i < n; ++i)
      part[partitions[i][0].as<std::string>()] =
          static_cast<int64_t>(partitions[i][1].as<double>());
    const fx::SplitCallback cb = [&part](const fx::Node* node) -> int64_t {
      auto it = part.find(node->name());
      if (it == part.end())
        throw Error(ErrorKind::Internal,
                    "splitModule: no partition for node '" + node->name() + "'");
      return it->second;
    };
    fx::QualnameMap qualnames;
    fx::GraphModule& gm = *gm_entry(id).gm;
    val out = val::object();
    out.set("module",
            register_graph_module(fx::split_module(gm, &gm, cb, &qualnames, keep_original_order)));
    val map = val::array();
    for (const auto& [now, old] : qualnames) {
      val pair = val::array();
      pair.call<void>("push", now);
      pair.call<void>("push", old);
      map.call<void>("push", pair);
    }
    out.set("qualnameMap", map);
    return out;
  });
}

// fx::split_const_subgraphs, skipping the nodes named in `skip`: {module, constSubgraphModule
// (null when nothing is constant), attrsName}.
val gm_split_const_subgraphs(double id, val skip) {
  return guarded([&] {
    const std::vector<std::string> names = strings_from_js(skip, "skip");
    const std::unordered_set<std::string> skipped(names.begin(), names.end());
    fx::FoldedGraphModule f = fx::split_const_subgraphs(
        *gm_entry(id).gm, [&skipped](const fx::Node* n) { return skipped.count(n->name()) != 0; });
    val out = val::object();
    out.set("module", register_graph_module(std::move(f.module)));
    out.set("constSubgraphModule", f.const_subgraph_module
                                       ? register_graph_module(std::move(f.const_subgraph_module))
                                       : val::null());
    out.set("attrsName", f.fx_const_folded_attrs_name);
    return out;
  });
}

}  // namespace fxwasm
