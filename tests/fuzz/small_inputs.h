// Small deterministic inputs for a model, as fuzz_run feeds it (and malformed_test replays the
// fuzzers' regressions): every dimension the model declares clamped to [1, 4], symbolic ones 1,
// varied small byte values. Returns false when the model's inputs cannot be made that way
// (strings, rank over 6, more than 4096 elements).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "fx/exec.h"
#include "fx/fx.h"
#include "fx/onnx.h"

inline bool small_inputs(const fx::GraphModule& gm, std::vector<fx::exec::Value>& inputs) {
  for (const fx::Node* n : gm.graph().nodes()) {
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
    if (dtype == fx::Dtype::String || shape.size() > 6) return false;
    fx::exec::Value v = fx::exec::Value::zeros(dtype, shape);
    if (v.numel() > 4096) return false;
    // Deterministic, varied contents (small integers: indices stay mostly in range).
    uint8_t* b = v.mutable_data<uint8_t>();
    for (size_t i = 0; i < v.nbytes(); ++i) b[i] = static_cast<uint8_t>(i * 7 % 3);
    inputs.push_back(std::move(v));
  }
  return true;
}
