// libFuzzer target: ONNX import, then a run on small inputs (every dimension the model declares
// clamped to [1, 4], symbolic ones 1, at most 4096 elements an input), under small limits
// (and few Loop iterations).
#include <cstdint>
#include <cstring>

#include "fx/exec.h"
#include "fx/fx.h"
#include "fx/onnx.h"
#include "small_inputs.h"

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
    if (!small_inputs(*gm, inputs)) return 0;
    (void)fx::exec::run(*gm, inputs);
  } catch (const fx::Error&) {
  }
  return 0;
}
