// libFuzzer target: ONNX import, then a run on small inputs (every dimension the model declares
// clamped to [1, 4], symbolic ones 1, at most 4096 elements an input), under small limits
// (and few Loop iterations).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "fx/exec.h"
#include "fx/fx.h"
#include "fx/onnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool limited = [] {
    // 4096 Loop iterations: the default 2^20 of a data-driven trip count takes ~10 s under
    // ASan, libFuzzer's timeout (tests/malformed/loop_runaway.onnx is a seed).
    fx::set_limits({int64_t{16} << 20, int64_t{64} << 20, int64_t{4} << 20, 4096});
    return true;
  }();
  (void)limited;
  try {
    auto gm = fx::onnx::import_model(data, size);
    if (!fx::exec::coverage(*gm).empty()) return 0;
    std::vector<fx::exec::Value> inputs;
    for (const fx::Node* n : gm->graph().nodes()) {
      if (n->op() != fx::Opcode::Placeholder) continue;
      fx::Dtype dtype = fx::Dtype::Float32;
      std::vector<int64_t> shape;
      using K = fx::Argument::Kind;
      if (const fx::Argument* t = n->meta().find(fx::onnx::kType); t && t->kind() == K::Dict)
        for (const auto& [k, v] : t->dict_items()) {
          if (k.kind() != K::String) continue;
          if (k.to_string() == "dtype" && v.kind() == K::Dtype) dtype = v.to_dtype();
          if (k.to_string() == "shape" && v.is_sequence())
            for (const fx::Argument& d : v.elements())
              shape.push_back(d.kind() == K::Int ? std::clamp<int64_t>(d.to_int(), 1, 4) : 1);
        }
      if (dtype == fx::Dtype::String || shape.size() > 6) return 0;
      fx::exec::Value v = fx::exec::Value::zeros(dtype, shape);
      if (v.numel() > 4096) return 0;
      // Deterministic, varied contents (small integers: indices stay mostly in range).
      uint8_t* b = v.mutable_data<uint8_t>();
      for (size_t i = 0; i < v.nbytes(); ++i) b[i] = static_cast<uint8_t>(i * 7 % 3);
      inputs.push_back(std::move(v));
    }
    (void)fx::exec::run(*gm, inputs);
  } catch (const fx::Error&) {
  }
  return 0;
}
