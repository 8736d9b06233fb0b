// wasm/onnx.cpp — ONNX import/export (fx::onnx) for JS (wasm/onnx.mjs).
#include <emscripten/val.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
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

}  // namespace

// `reader`: null, or a JS function (location, offset, length) -> Uint8Array called when a
// tensor stored as external data is needed.
val load_onnx(val data, val reader) {
  return guarded([&] {
    fx::onnx::ImportOptions opts;
    if (!reader.isNull() && !reader.isUndefined()) {
      opts.external_data = [reader](const std::string& location, int64_t offset,
                                    int64_t length) -> fx::Bytes {
        val r = reader(location, static_cast<double>(offset), static_cast<double>(length));
        if (r.isNull() || r.isUndefined())
          throw Error(ErrorKind::Value, "external data '" + location + "' was not supplied");
        return std::make_shared<const std::vector<uint8_t>>(bytes_from_js(r, "external data"));
      };
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
    return register_graph_module(std::move(gm));
  });
}

val gm_to_onnx(double id, bool embed_external, double default_opset) {
  return guarded([&] {
    fx::onnx::ExportOptions opts;
    opts.embed_external_data = embed_external;
    if (default_opset > 0) opts.default_opset = static_cast<int64_t>(default_opset);
    return bytes_to_js(fx::onnx::export_model(*gm_entry(id).gm, opts));
  });
}

std::string gm_meta(double id) {
  return guarded([&] { return encode_kwargs(gm_entry(id).gm->meta()); });
}

// A GraphModule that an attribute path names (If/Loop bodies of imported models).
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

val tensor_to_onnx(val tensor, std::string name) {
  return guarded([&] {
    return bytes_to_js(fx::onnx::tensor_to_proto_bytes(value_from_js(tensor, 0).to_tensor(), name));
  });
}

}  // namespace fxwasm
