// wasm/onnx.cpp — ONNX import/export (fx::onnx) for JS (wasm/onnx.mjs).
#include <emscripten/val.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "codec.h"
#include "fx/exec.h"
#include "fx/onnx.h"
#include "glue.h"
#include "handles.h"

namespace fxwasm {

namespace {

// A Uint8Array (or any ArrayBufferView) copied into a byte vector in the wasm heap.
std::vector<uint8_t> bytes_from_js(const val& data, const char* what) {
  if (data.isNull() || data.isUndefined() || data["byteLength"].isUndefined() ||
      data["buffer"].isUndefined())
    throw Error(ErrorKind::Type, std::string(what) + ": expected a Uint8Array or ArrayBuffer view");
  const size_t n = data["byteLength"].as<size_t>();
  std::vector<uint8_t> out(n);
  if (n) {
    const val bytes = val::global("Uint8Array").new_(data["buffer"], data["byteOffset"], n);
    val(emscripten::typed_memory_view(n, out.data())).call<void>("set", bytes);
  }
  return out;
}

val bytes_to_js(const std::vector<uint8_t>& b) {
  return val(emscripten::typed_memory_view(b.size(), b.data())).call<val>("slice");
}

// External data without callbacks into JS. load_onnx gives the import a C++ reader over a
// per-import table; gm_external_data lists the ranges the model's tensors reference, JS reads
// them itself (from a folder, a Map of bytes, a Blob, or the user's function) and hands the bytes
// in (gm_supply_external_data) before loadONNX returns. A tensor reads from the table on first
// use and keeps its bytes (ExternalData::keep), so each range crosses from JS once; the table
// lets go of a range once every tensor on it has read it, so bytes a pass drops are freed.
struct ExternalTable {
  struct Entry {
    fx::Bytes bytes;     // null: not supplied (or every reader has its copy)
    std::string reason;  // why not, when JS knows (the reader's error)
    int readers = 0;     // tensors (ExternalData objects) that have not read it yet
  };
  std::map<std::tuple<std::string, int64_t, int64_t>, Entry> entries;
};

// Tables of imports whose data JS has not supplied yet, by GraphModule id (only between the
// two calls of one loadONNX).
std::map<uint32_t, std::shared_ptr<ExternalTable>> g_external_tables;

fx::onnx::ExternalDataReader table_reader(std::shared_ptr<ExternalTable> table) {
  return [table](const std::string& location, int64_t offset, int64_t length) -> fx::Bytes {
    auto it = table->entries.find({location, offset, length});
    if (it == table->entries.end() || !it->second.bytes)
      throw Error(ErrorKind::Value, "external data '" + location + "' was not supplied" +
                                        (it == table->entries.end() || it->second.reason.empty()
                                             ? std::string()
                                             : " (" + it->second.reason + ")"));
    ExternalTable::Entry& e = it->second;
    fx::Bytes b = e.bytes;
    // The tensor keeps a copy of the right size (Tensor::bytes); a wrong size throws there and
    // may be asked again, so the table keeps those bytes.
    if (b->size() == static_cast<size_t>(length) && --e.readers <= 0) e.bytes.reset();
    return b;
  };
}

}  // namespace

// `external`: whether the caller gave external data (else such tensors have no reader, as in
// fx::onnx::import_model without one).
// `opset_check`: "warn" or "error" (ImportOptions::opset_check).
val load_onnx(val data, bool external, std::string opset_check) {
  return guarded([&] {
    fx::onnx::ImportOptions opts;
    if (opset_check != "warn" && opset_check != "error")
      throw Error(ErrorKind::Value,
                  "loadONNX: opsetCheck must be 'warn' or 'error', got '" + opset_check + "'");
    opts.opset_check = opset_check == "error" ? fx::onnx::ImportOptions::OpsetCheck::Error
                                              : fx::onnx::ImportOptions::OpsetCheck::Warn;
    std::shared_ptr<ExternalTable> table;
    if (external) {
      table = std::make_shared<ExternalTable>();
      opts.external_data = table_reader(table);
    }
    // The file is streamed in from JS in 1 MB chunks (never copied whole into the heap), and
    // each initializer's parsed bytes are released once its tensor holds them.
    if (data.isNull() || data.isUndefined() || data["byteLength"].isUndefined() ||
        data["buffer"].isUndefined())
      throw Error(ErrorKind::Type, "loadONNX: expected a Uint8Array or ArrayBuffer view");
    const size_t total = data["byteLength"].as<size_t>();
    const val base = val::global("Uint8Array").new_(data["buffer"], data["byteOffset"], total);
    size_t offset = 0;
    const fx::onnx::ChunkReader read = [&](uint8_t* buffer, size_t size) -> size_t {
      const size_t n = std::min(size, total - offset);
      if (n == 0) return 0;
      val(emscripten::typed_memory_view(n, buffer))
          .call<void>("set", base.call<val>("subarray", static_cast<double>(offset),
                                            static_cast<double>(offset + n)));
      offset += n;
      return n;
    };
    std::unique_ptr<fx::GraphModule> gm = fx::onnx::import_model_stream(read, opts);
    val ids = register_graph_module(std::move(gm));
    if (table) g_external_tables[ids[0].as<uint32_t>()] = std::move(table);
    return ids;
  });
}

// The external-data ranges the tensors of a loadONNX in progress reference, each once, in the
// order of named_parameters() then named_buffers(): [[location, offset, length], ...] (length:
// the bytes the tensor needs). [] when the import had no externalData option.
val gm_external_data(double id) {
  return guarded([&] {
    const fx::GraphModule& gm = *gm_entry(id).gm;
    auto table = g_external_tables.find(to_id(id));
    std::set<const fx::ExternalData*> counted;
    val out = val::array();
    auto visit = [&](const std::vector<std::pair<std::string, const fx::Tensor*>>& ts) {
      if (table == g_external_tables.end()) return;
      for (const auto& [name, t] : ts) {
        if (t->data || !t->external || !t->external->keep) continue;
        const fx::ExternalData& e = *t->external;
        if (!counted.insert(&e).second) continue;  // copies of a tensor share their ExternalData
        const int64_t length = e.length >= 0 ? e.length : static_cast<int64_t>(t->nbytes());
        if (table->second->entries[{e.location, e.offset, length}].readers++ > 0) continue;
        val r = val::array();
        r.call<void>("push", e.location);
        r.call<void>("push", static_cast<double>(e.offset));
        r.call<void>("push", static_cast<double>(length));
        out.call<void>("push", r);
      }
    };
    visit(gm.named_parameters());
    visit(gm.named_buffers());
    return out;
  });
}

// Hands in what JS read for gm_external_data's ranges: `supplied` is [[location, offset, length,
// bytes or null, reason], ...]. Ends the import's table (later reads go through the tensors).
void gm_supply_external_data(double id, val supplied) {
  guarded([&] {
    auto it = g_external_tables.find(to_id(id));
    if (it == g_external_tables.end()) return;
    std::shared_ptr<ExternalTable> table = std::move(it->second);
    g_external_tables.erase(it);
    const unsigned n = supplied["length"].as<unsigned>();
    for (unsigned i = 0; i < n; ++i) {
      const val s = supplied[i];
      auto entry =
          table->entries.find({s[0].as<std::string>(), static_cast<int64_t>(s[1].as<double>()),
                               static_cast<int64_t>(s[2].as<double>())});
      if (entry == table->entries.end()) continue;  // not a range gm_external_data listed
      ExternalTable::Entry& e = entry->second;
      if (!s[3].isNull())
        e.bytes =
            std::make_shared<const std::vector<uint8_t>>(bytes_from_js(s[3], "external data"));
      else
        e.reason = s[4].isNull() ? std::string() : s[4].as<std::string>();
    }
  });
}

val gm_to_onnx(double id, bool embed_external, double default_opset, double opset,
               std::string gelu) {
  return guarded([&] {
    fx::onnx::ExportOptions opts;
    opts.embed_external_data = embed_external;
    if (default_opset > 0) opts.default_opset = static_cast<int64_t>(default_opset);
    if (opset > 0) opts.opset = static_cast<int64_t>(opset);
    if (!gelu.empty()) opts.gelu = fx::onnx::gelu_export_from_name(gelu);
    // Straight into a JS Uint8Array, piece by piece: the wasm heap never holds the serialized
    // model (its weights go from the tensors to the array).
    val out = val::null();
    size_t at = 0;
    fx::onnx::export_model_to(
        *gm_entry(id).gm,
        fx::onnx::ByteSink{
            [&](size_t total) { out = val::global("Uint8Array").new_(static_cast<double>(total)); },
            [&](const uint8_t* p, size_t n) {
              out.call<void>("set", val(emscripten::typed_memory_view(n, p)),
                             static_cast<double>(at));
              at += n;
            }},
        opts);
    return out;
  });
}

std::string gm_meta(double id) {
  return guarded([&] { return encode_kwargs(gm_entry(id).gm->meta()); });
}

// A GraphModule that an attribute path names (If/Loop bodies of imported models).
// fx::onnx::check_schemas: [{node, target, rule}] (empty when onnx.checker's schema checks
// would accept the graph); `opset` 0 is the module's own.
val gm_check_schemas(double id, double opset) {
  return guarded([&] {
    return objects_to_js(fx::onnx::check_schemas(*gm_entry(id).gm, static_cast<int64_t>(opset)),
                         [](val& o, const fx::onnx::SchemaProblem& p) {
                           o.set("node", p.node);
                           o.set("target", p.target);
                           o.set("rule", p.rule);
                         });
  });
}

val gm_submodule_graph_module(double id, std::string target) {
  return guarded([&] {
    auto sub = std::dynamic_pointer_cast<fx::GraphModule>(gm_entry(id).gm->get_submodule(target));
    if (!sub) throw Error(ErrorKind::Attribute, "'" + target + "' is not a GraphModule");
    // A detached copy the caller owns (the original stays in the attribute tree).
    auto copy =
        std::make_unique<fx::GraphModule>(sub.get(), sub->graph().clone(), sub->type_name());
    copy->meta() = sub->meta();
    return register_graph_module(std::move(copy));
  });
}

val tensor_from_onnx(val data) {
  return guarded([&] {
    const std::vector<uint8_t> bytes = bytes_from_js(data, "tensorFromONNX");
    std::string name;
    fx::Tensor t = fx::onnx::tensor_from_proto_bytes(bytes.data(), bytes.size(), &name);
    val o = value_to_js(fx::exec::Value::from_tensor(t, "tensor '" + name + "'"));
    o.set("name", name);
    return o;
  });
}

// A TensorProto, SequenceProto or OptionalProto ("tensor", "sequence", "optional" says which).
val value_from_onnx(val data, std::string kind) {
  return guarded([&] {
    const std::vector<uint8_t> bytes = bytes_from_js(data, "valueFromONNX");
    using K = fx::onnx::DataValue::Kind;
    if (kind != "tensor" && kind != "sequence" && kind != "optional")
      throw Error(
          ErrorKind::Value,
          "valueFromONNX: kind must be 'tensor', 'sequence' or 'optional', not '" + kind + "'");
    const K k = kind == "tensor" ? K::Tensor : kind == "sequence" ? K::Sequence : K::Optional;
    const fx::onnx::DataValue d = fx::onnx::value_from_proto_bytes(bytes.data(), bytes.size(), k);
    val o = value_to_js(fx::exec::Value::from_onnx(d, "valueFromONNX"));
    o.set("name", d.name);
    return o;
  });
}

val tensor_to_onnx(val tensor, std::string name) {
  return guarded([&] {
    return bytes_to_js(fx::onnx::tensor_to_proto_bytes(value_from_js(tensor, 0).to_tensor(), name));
  });
}

// fx::onnx::meta's keys by their C++ names without the k, in camelCase (kOutputs -> outputs), so
// JS reads meta through fx.onnxMetaKeys.outputs instead of spelling "onnx_outputs".
val onnx_meta_keys() {
  namespace m = fx::onnx::meta;
  const std::pair<const char*, const char*> keys[] = {
      {"name", m::kName},
      {"outputs", m::kOutputs},
      {"type", m::kType},
      {"domain", m::kDomain},
      {"doc", m::kDoc},
      {"nodeName", m::kNodeName},
      {"tensorName", m::kTensorName},
      {"numInputs", m::kNumInputs},
      {"captures", m::kCaptures},
      {"outerScope", m::kOuterScope},
      {"constant", m::kConstant},
      {"tensorAttrs", m::kTensorAttrs},
      {"attrTypes", m::kAttrTypes},
      {"outputTypes", m::kOutputTypes},
      {"outputSources", m::kOutputSources},
      {"opsetImport", m::kOpsetImport},
      {"irVersion", m::kIrVersion},
      {"producerName", m::kProducerName},
      {"producerVersion", m::kProducerVersion},
      {"modelVersion", m::kModelVersion},
      {"metadataProps", m::kMetadataProps},
      {"functions", m::kFunctions},
      {"graphName", m::kGraphName},
      {"graphDoc", m::kGraphDoc},
      {"initializerInputs", m::kInitializerInputs},
  };
  val out = val::object();
  for (const auto& [js, key] : keys) out.set(js, std::string(key));
  return out;
}

}  // namespace fxwasm
