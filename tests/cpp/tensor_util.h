// Small helpers for tests that build float32 tensors by hand: seeded values and attribute-tree
// tensors over them.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "fx/graph_module.h"

namespace fxtest {

// n floats uniform in [-1, 1), from a seeded mt19937.
inline std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// A float32 tensor of `shape` over a copy of `data`.
inline fx::Tensor tensor_f32(std::vector<int64_t> shape, const std::vector<float>& data) {
  fx::Tensor t;
  t.shape = std::move(shape);
  auto bytes = std::make_shared<std::vector<uint8_t>>(data.size() * sizeof(float));
  if (!data.empty()) std::memcpy(bytes->data(), data.data(), bytes->size());
  t.data = bytes;
  return t;
}

}  // namespace fxtest
