// Four-lane float vectors over GCC/Clang vector extensions: SSE natively, simd128 in wasm.
// Loads and stores go through memcpy, so pointers need no alignment.
#pragma once

#include <cstring>

namespace fx::kernels {

typedef float v4f __attribute__((vector_size(16)));

inline v4f load4(const float* p) {
  v4f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(float* p, v4f v) { std::memcpy(p, &v, sizeof v); }
inline v4f splat(float x) { return v4f{x, x, x, x}; }

}  // namespace fx::kernels
