// Internal to src/onnx: the opset the ops fxwasm's passes create need, and their standard-op
// forms for models that stay below it (export_ops.cpp; used by export.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "onnx/common.h"

namespace fx::onnx {

/// The first opset of the default domain that has `op` (1 for every op the passes do not create).
int64_t min_opset(const std::string& op);

/// A fresh value name in the graph being written, from a base.
using NameFn = std::function<std::string(const std::string&)>;

/// Writes y = Gelu(x) as Div/Erf/Add/Mul (approximate = "none") or its tanh form, with float32
/// constants.
void emit_gelu_decomposed(::onnx::GraphProto* g, const std::string& x, const std::string& y,
                          bool tanh_form, const NameFn& fresh);

/// Writes y = LayerNormalization(x, scale, bias) over dims [axis, rank) as
/// ReduceMean/Sub/Mul/ReduceMean/Add/Sqrt/Div/Mul/Add (ReduceMean with the `axes` attribute, as
/// opsets below 18 have it). `bias` empty when absent; `rank` -1 when unknown (then axis must be
/// negative).
void emit_layer_norm_decomposed(::onnx::GraphProto* g, const std::string& x,
                                const std::string& scale, const std::string& bias,
                                const std::string& y, int64_t axis, int64_t rank, float epsilon,
                                const NameFn& fresh);

}  // namespace fx::onnx
