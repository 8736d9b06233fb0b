// wasm/torch_codegen.cpp — ONNX to PyTorch (fx::torch_codegen): lowering an imported module to
// torch targets, what cannot be lowered, and the Python package (to_folder) as bytes.
#include "fx/torch_codegen.h"

#include <emscripten/val.h>

#include "fx/torch_codegen/lower.h"
#include "glue.h"
#include "handles.h"

namespace fxwasm {

val gm_lowering_coverage(double id) {
  return guarded([&] {
    return objects_to_js(fx::torch_codegen::lowering_coverage(*gm_entry(id).gm),
                         [](val& o, const fx::torch_codegen::LoweringGap& g) {
                           o.set("node", g.node);
                           o.set("op", g.op);
                           o.set("opset", static_cast<double>(g.opset));
                           o.set("reason", g.reason);
                         });
  });
}

val gm_lower_to_torch(double id, std::string class_name, double size_a, double size_b,
                      val example_inputs) {
  return guarded([&] {
    fx::torch_codegen::LowerOptions opts;
    if (!example_inputs.isUndefined() && !example_inputs.isNull())
      opts.example_inputs = values_from_js(example_inputs);
    opts.class_name = class_name;
    opts.probe_sizes[0] = static_cast<int64_t>(size_a);
    opts.probe_sizes[1] = static_cast<int64_t>(size_b);
    return register_graph_module(fx::torch_codegen::lower(*gm_entry(id).gm, opts));
  });
}

namespace {

// [[name, Uint8Array], ...]: the bytes are copied out of the heap.
val files_to_js(const std::vector<fx::torch_codegen::PackageFile>& files) {
  val out = val::array();
  for (const fx::torch_codegen::PackageFile& f : files) {
    val pair = val::array();
    pair.call<void>("push", f.name);
    pair.call<void>(
        "push",
        val(emscripten::typed_memory_view(f.bytes.size(), f.bytes.data())).call<val>("slice"));
    out.call<void>("push", pair);
  }
  return out;
}

}  // namespace

val gm_to_folder(double id, std::string module_name) {
  return guarded(
      [&] { return files_to_js(fx::torch_codegen::to_folder(*gm_entry(id).gm, module_name)); });
}

val gm_torch_package(double id, std::string module_name) {
  return guarded(
      [&] { return files_to_js(fx::torch_codegen::torch_package(*gm_entry(id).gm, module_name)); });
}

}  // namespace fxwasm
