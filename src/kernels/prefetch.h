// Software prefetch of the next plane while a kernel works through this one (depthwise_s2.cpp's
// stride-2 kernels, pool.cpp's max-pool): the layer before wrote it, and on wide planes those
// kernels waited on L3 or memory for it.
#pragma once

#include <cstdint>

namespace fx::kernels {

/// Fetches `floats` floats from `next` into L2 in `steps` equal parts, step(i) for the i-th.
struct NextPlanePrefetch {
  NextPlanePrefetch() = default;  // fetches nothing
  NextPlanePrefetch(const float* next, int64_t floats, int64_t steps)
      : next_(reinterpret_cast<const char*>(next)) {
    if (!next) return;
    const int64_t lines = (floats * static_cast<int64_t>(sizeof(float)) + 63) / 64;
    per_step_ = (lines + steps - 1) / steps;
    end_ = next_ + lines * 64;
  }
  __attribute__((always_inline)) void step(int64_t i) const {
    if (!next_) return;
    for (int64_t j = 0; j < per_step_; ++j) {
      const char* q = next_ + (i * per_step_ + j) * 64;
      if (q < end_) __builtin_prefetch(q, 0, 2);
    }
  }

 private:
  const char* next_ = nullptr;
  const char* end_ = nullptr;
  int64_t per_step_ = 0;
};

}  // namespace fx::kernels
