// libFuzzer target: ONNX import of arbitrary bytes, then what a caller does next without running
// (printing, Python code, export). Any failure must be an fx::Error.
#include <cstdint>

#include "fx/fx.h"
#include "fx/onnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool limited = [] {  // small limits: the fuzzer looks for crashes, not OOMs
    fx::set_limits({int64_t{64} << 20, int64_t{256} << 20, int64_t{16} << 20});
    return true;
  }();
  (void)limited;
  try {
    auto gm = fx::onnx::import_model(data, size);
    (void)gm->graph().str();
    (void)gm->code();
    (void)fx::onnx::export_model(*gm);
  } catch (const fx::Error&) {
  }
  return 0;
}
