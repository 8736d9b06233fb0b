// wasm/graph_module.cpp — fx::GraphModule and its attribute tree for JS (wasm/graph_module.mjs).
#include <emscripten/val.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "codec.h"
#include "fx/exec.h"
#include "glue.h"
#include "handles.h"

namespace fxwasm {

namespace {

const Argument* dict_get(const Argument& d, const char* key) {
  for (const auto& kv : d.dict_items())
    if (kv.first.kind() == Argument::Kind::String && kv.first.to_string() == key) return &kv.second;
  return nullptr;
}

void check_keys(const Argument& d, std::initializer_list<const char*> allowed,
                const std::string& where) {
  if (d.kind() != Argument::Kind::Dict) throw Error(ErrorKind::Type, where + " must be an object");
  for (const auto& kv : d.dict_items()) {
    bool ok = false;
    for (const char* k : allowed)
      if (kv.first.kind() == Argument::Kind::String && kv.first.to_string() == k) ok = true;
    if (!ok) throw Error(ErrorKind::Value, where + ": unknown field " + kv.first.repr());
  }
}

fx::Tensor build_tensor(const Argument& spec, const std::string& blob, const std::string& where) {
  check_keys(spec, {"dtype", "shape", "requiresGrad", "data"}, where);
  fx::Tensor t;
  if (const Argument* d = dict_get(spec, "dtype")) t.dtype = fx::dtype_from_name(d->to_string());
  const Argument* shape = dict_get(spec, "shape");
  if (!shape || !shape->is_sequence())
    throw Error(ErrorKind::Value, where + ": shape must be an array of non-negative integers");
  for (const Argument& s : shape->elements()) {
    int64_t v = s.to_int();
    if (v < 0) throw Error(ErrorKind::Value, where + ": negative dimension " + std::to_string(v));
    t.shape.push_back(v);
  }
  if (const Argument* rg = dict_get(spec, "requiresGrad")) t.requires_grad = rg->to_bool();
  if (const Argument* data = dict_get(spec, "data"); data && !data->is_none()) {
    const int64_t off = data->elements().at(0).to_int();
    const int64_t len = data->elements().at(1).to_int();
    if (off < 0 || len < 0 || static_cast<uint64_t>(off + len) > blob.size())
      throw Error(ErrorKind::Internal, "internal error: tensor data outside the staging buffer");
    if (static_cast<size_t>(len) != t.nbytes())
      throw Error(ErrorKind::Value, where + ": data has " + std::to_string(len) + " bytes but " +
                                        t.describe() + " needs " + std::to_string(t.nbytes()));
    t.data =
        std::make_shared<const std::vector<uint8_t>>(blob.begin() + off, blob.begin() + off + len);
  }
  return t;
}

/// Builds a module tree from its encoded description (iteratively: the depth is user input).
std::shared_ptr<fx::Module> build_module(const std::string& spec_enc, const std::string& blob) {
  Argument spec = decode(spec_enc, nullptr, "module spec");
  auto root = std::make_shared<fx::Module>();
  std::vector<std::tuple<Argument, fx::Module*, std::string>> stack{{spec, root.get(), "root"}};
  while (!stack.empty()) {
    auto [s, m, path] = stack.back();
    stack.pop_back();
    check_keys(s, {"type", "extraRepr", "impure", "modules", "parameters", "buffers"},
               "module '" + path + "'");
    if (const Argument* t = dict_get(s, "type")) m->set_type_name(t->to_string());
    if (const Argument* r = dict_get(s, "extraRepr")) m->set_extra_repr(r->to_string());
    if (const Argument* i = dict_get(s, "impure")) m->set_impure(i->to_bool());
    for (const char* field : {"parameters", "buffers"}) {
      const Argument* ts = dict_get(s, field);
      if (!ts) continue;
      if (ts->kind() != Argument::Kind::Dict)
        throw Error(ErrorKind::Type, "module '" + path + "': " + field + " must be an object");
      for (const auto& kv : ts->dict_items()) {
        const std::string& name = kv.first.to_string();
        fx::Tensor t = build_tensor(kv.second, blob, path + "." + name);
        if (field[0] == 'p')
          m->register_parameter(name, std::move(t));
        else
          m->register_buffer(name, std::move(t));
      }
    }
    if (const Argument* mods = dict_get(s, "modules")) {
      if (mods->kind() != Argument::Kind::Dict)
        throw Error(ErrorKind::Type, "module '" + path + "': modules must be an object");
      for (const auto& kv : mods->dict_items()) {
        const std::string& name = kv.first.to_string();
        auto child = std::make_shared<fx::Module>();
        m->add_module(name, child);
        stack.emplace_back(kv.second, child.get(), path + "." + name);
      }
    }
  }
  return root;
}

std::string encode_tensors(const std::vector<std::pair<std::string, const fx::Tensor*>>& ts) {
  std::string s = "[";
  for (const auto& [name, t] : ts) {
    s += "(s";
    encode_string(name, s);
    s += "{s\"dtype\"s";
    encode_string(fx::dtype_name(t->dtype), s);
    s += "s\"shape\"(";
    for (int64_t d : t->shape) s += 'i' + std::to_string(d) + ';';
    s += ")s\"requiresGrad\"";
    s += t->requires_grad ? 'T' : 'F';
    s += "s\"hasData\"";
    s += t->data || (t->external && t->external->in_memory) ? 'T' : 'F';  // (prepacked)
    s += "})";
  }
  return s + "]";
}

}  // namespace

double gm_new(double gid, std::string spec_enc, std::string blob, std::string class_name) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    if (!e.owned)
      throw Error(ErrorKind::Graph,
                  "this Graph already belongs to a GraphModule; pass graph.clone() instead");
    std::shared_ptr<fx::Module> root;
    if (!spec_enc.empty()) root = build_module(spec_enc, blob);
    // The constructor only takes the graph on success: on error the Graph stays usable in JS.
    auto gm = std::make_unique<fx::GraphModule>(root.get(), std::move(e.owned), class_name);
    const uint32_t id = g_next_id++;
    g_gms[id] = GmEntry{std::move(gm), to_id(gid)};
    e.gm = id;
    return static_cast<double>(id);
  });
}

// A GraphModule over `root_id`'s attribute tree (what the graph references) and module meta
// (an imported model's opsets): torch.fx.GraphModule(root_module, graph).
double gm_new_with_root(double gid, double root_id, std::string class_name) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    if (!e.owned)
      throw Error(ErrorKind::Graph,
                  "this Graph already belongs to a GraphModule; pass graph.clone() instead");
    const fx::GraphModule& root = *gm_entry(root_id).gm;
    auto gm = std::make_unique<fx::GraphModule>(&root, std::move(e.owned), class_name);
    gm->meta() = root.meta();
    const uint32_t id = g_next_id++;
    g_gms[id] = GmEntry{std::move(gm), to_id(gid)};
    e.gm = id;
    return static_cast<double>(id);
  });
}

bool gm_delete(double id) {
  return guarded([&] {
    auto it = g_gms.find(to_id(id));
    if (it == g_gms.end()) return false;
    drop_graph_entry(it->second.gid);  // guards and the id mapping go before the graph
    g_gms.erase(it);
    fx::exec::release_dead_weights();  // packed copies of its weights, unless shared
    return true;
  });
}

double gm_graph_id(double id) {
  return guarded([&] { return static_cast<double>(gm_entry(id).gid); });
}

std::string gm_code(double id) {
  return guarded([&] { return gm_entry(id).gm->code(); });
}

val gm_recompile(double id) {
  return guarded([&] { return python_code_to_val(gm_entry(id).gm->recompile()); });
}

val gm_python_code(double id) {
  return guarded([&] { return python_code_to_val(gm_entry(id).gm->python_code()); });
}

std::string gm_print_readable(double id) {
  return guarded([&] { return gm_entry(id).gm->print_readable(); });
}

std::string gm_str(double id) {
  return guarded([&] { return gm_entry(id).gm->str(); });
}

std::string gm_class_name(double id) {
  return guarded([&] { return gm_entry(id).gm->type_name(); });
}

bool gm_add_submodule(double id, std::string target, std::string spec_enc, std::string blob) {
  return guarded([&] {
    fx::GraphModule& gm = *gm_entry(id).gm;
    return gm.add_submodule(target, build_module(spec_enc, blob));
  });
}

bool gm_delete_submodule(double id, std::string target) {
  return guarded([&] { return gm_entry(id).gm->delete_submodule(target); });
}

void gm_delete_all_unused_submodules(double id) {
  guarded([&] { gm_entry(id).gm->delete_all_unused_submodules(); });
}

void gm_set_torch113_bugs(double id, bool on) {
  guarded([&] { gm_entry(id).gm->codegen_options().torch113_bugs = on; });
}

// g.constant: `tensor` ({dtype, shape, data}) as a buffer of the root module under `base`
// ("_tensor_constant" by default), uniquified as torch.fx does (_tensor_constant0, 1, ...);
// returns the attribute name the caller's get_attr node reads.
std::string gm_add_constant(double id, std::string base, val tensor) {
  return guarded([&] {
    fx::GraphModule& gm = *gm_entry(id).gm;
    const fx::exec::Value v = value_from_js(tensor, 0);
    if (v.kind() != fx::exec::ValueKind::Tensor)
      throw Error(ErrorKind::Type, "constant: expected a tensor {data, shape, dtype}");
    if (base.empty()) base = "_tensor_constant";
    std::string name;
    for (int64_t i = 0;; ++i) {
      name = base + std::to_string(i);
      bool taken = gm.get_tensor(name) != nullptr;
      try {
        taken = taken || gm.get_submodule(name) != nullptr;
      } catch (const Error&) {  // no such submodule
      }
      if (!taken) break;
    }
    gm.register_buffer(name, v.to_tensor());
    return name;
  });
}

/// [(name, {type, extraRepr, impure}) ...] encoded.
std::string gm_named_modules(double id) {
  return guarded([&] {
    std::string s = "[";
    for (const auto& [name, m] : gm_entry(id).gm->named_modules()) {
      s += "(s";
      encode_string(name, s);
      s += "{s\"type\"s";
      encode_string(m->type_name(), s);
      s += "s\"extraRepr\"s";
      encode_string(m->extra_repr(), s);
      s += "s\"impure\"";
      s += m->is_impure() ? 'T' : 'F';
      s += "})";
    }
    return s + "]";
  });
}

std::string gm_named_parameters(double id) {
  return guarded([&] { return encode_tensors(gm_entry(id).gm->named_parameters()); });
}

std::string gm_named_buffers(double id) {
  return guarded([&] { return encode_tensors(gm_entry(id).gm->named_buffers()); });
}

/// A copy of the bytes of parameter/buffer `target`, or null if it has none.
val gm_tensor_data(double id, std::string target) {
  return guarded([&] {
    const fx::Tensor* t = gm_entry(id).gm->get_tensor(target);
    if (!t) throw Error(ErrorKind::Attribute, "no parameter or buffer named '" + target + "'");
    const fx::Bytes b = t->bytes();  // loads external data through the import's reader
    if (!b) return val::null();
    val view(emscripten::typed_memory_view(b->size(), b->data()));
    return view.call<val>("slice");
  });
}

}  // namespace fxwasm
