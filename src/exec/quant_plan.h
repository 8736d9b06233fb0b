// Internal to fx::exec: the QDQ pattern of quantized models, which the plan runs on integer
// kernels (matched in src/exec/quant_plan.cpp, run by src/exec/ops_quant.cpp).
//
//   DequantizeLinear(xq, xs, xzp), DequantizeLinear(wq, ws, wzp) [, bias]
//     -> Conv | MatMul | Gemm [-> Relu] -> QuantizeLinear(., ys, yzp)
//
// (the bias float32, or a DequantizeLinear of int32)
// runs as one QLinearConv / QLinearMatMul on (xq, xs, xzp, wq, ws, wzp, ys, yzp, bias): int32
// accumulation, one requantization, and the Relu as the lower bound of the 8-bit result. The
// result differs from the float path by at most one quantization step (rounding once instead of
// through a float32 result).
#pragma once

#include <cstdint>
#include <vector>

#include "exec/ops.h"

namespace fx::exec {

/// One matched QDQ pattern, planned at its Conv / MatMul / Gemm node.
struct PlannedQdq {
  void (*fn)(OpCall&) = nullptr;  ///< the QLinear op that runs it; null: no pattern here
  /// Its inputs in the QLinear op's order: node ids (value slots) or -1 (omitted); where
  /// `constants[i]` is set, the input is that constant tensor, read directly (its get_attr may
  /// come later in the graph).
  std::vector<int64_t> args;
  std::vector<const Tensor*> constants;
  uint32_t result = UINT32_MAX;  ///< the QuantizeLinear, which gets the value
  uint32_t relu = UINT32_MAX;    ///< a Relu between (skipped), or UINT32_MAX
  /// DequantizeLinear nodes read only by the pattern: never run.
  std::vector<uint32_t> absorbed;
};

/// The QLinear ops a pattern runs as (ops_quant.cpp).
void qlinear_conv(OpCall& c);
void qlinear_matmul(OpCall& c);

/// The QDQ pattern at `n` (a Conv, MatMul or Gemm), or one with fn == null. Nodes marked in
/// `probed` (by id) are never fused away.
PlannedQdq plan_qdq(const GraphModule& gm, const Node* n, const std::vector<char>& probed);

/// Runs pattern `q` planned at `node`: `inputs` holds the values of q.args that are not
/// constants (null where q.constants is set). Returns the QuantizeLinear's value.
Value run_qdq(const PlannedQdq& q, const Node& node, std::vector<const Value*> inputs,
              const GraphModule& gm, AttrSlot* attrs, int64_t opset);

}  // namespace fx::exec
