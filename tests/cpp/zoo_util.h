// Helpers for tests over the ONNX model zoo (models/zoo, made by models/generate.py): seeded
// inputs from the placeholders' meta "onnx_type" and output comparison.
#pragma once

#include <gtest/gtest.h>

#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "fx/exec.h"
#include "fx/fx.h"
#include "fx/onnx.h"

namespace fxtest {

// The .onnx files of a folder, sorted (empty if the folder is absent).
inline std::vector<std::string> onnx_files(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".onnx") == 0)
      out.push_back(dir + "/" + name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// One value per placeholder, from meta "onnx_type" {dtype, shape}; symbolic dims become 1.
// Floats uniform in [-1, 1), integers in [0, 4), from a fixed-seed LCG.
inline std::vector<fx::exec::Value> seeded_inputs(const fx::GraphModule& gm, uint64_t seed = 42) {
  std::vector<fx::exec::Value> out;
  uint64_t s = seed;
  auto next = [&s] {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(s >> 33);
  };
  for (fx::Node* n : gm.graph().nodes()) {
    if (n->op() != fx::Opcode::Placeholder) continue;
    const fx::Argument* t = n->meta().find(fx::onnx::meta::kType);
    if (!t) throw std::runtime_error("placeholder " + n->name() + " has no meta onnx_type");
    fx::Dtype dtype = fx::Dtype::Float32;
    std::vector<int64_t> shape;
    for (const auto& [k, v] : t->dict_items()) {
      if (k.to_string() == "dtype") dtype = v.to_dtype();
      if (k.to_string() == "shape")
        for (const fx::Argument& d : v.elements())
          shape.push_back(d.kind() == fx::Argument::Kind::Int ? d.to_int() : 1);
    }
    fx::exec::Value v = fx::exec::Value::zeros(dtype, shape);
    const int64_t count = v.numel();
    if (dtype == fx::Dtype::Float32) {
      float* p = v.mutable_data<float>();
      for (int64_t i = 0; i < count; ++i) p[i] = static_cast<float>(next()) / 2147483648.0f - 1.0f;
    } else if (dtype == fx::Dtype::Int64) {
      int64_t* p = v.mutable_data<int64_t>();
      for (int64_t i = 0; i < count; ++i) p[i] = next() % 4;
    } else if (dtype == fx::Dtype::Int32) {
      int32_t* p = v.mutable_data<int32_t>();
      for (int64_t i = 0; i < count; ++i) p[i] = static_cast<int32_t>(next() % 4);
    } else if (dtype != fx::Dtype::Bool) {
      throw std::runtime_error("seeded_inputs: dtype " + std::string(fx::dtype_name(dtype)));
    }
    out.push_back(std::move(v));
  }
  return out;
}

// "" if `a` and `b` agree (|a - b| <= atol + rtol * |b| elementwise, same shapes), else what
// differs.
inline std::string compare_values(const std::vector<fx::exec::Value>& a,
                                  const std::vector<fx::exec::Value>& b, float rtol = 1e-4f,
                                  float atol = 1e-4f) {
  if (a.size() != b.size())
    return std::to_string(a.size()) + " outputs vs " + std::to_string(b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].shape() != b[i].shape() || a[i].dtype() != b[i].dtype())
      return "output " + std::to_string(i) + ": " + a[i].describe() + " vs " + b[i].describe();
    if (a[i].dtype() != fx::Dtype::Float32) {
      if (a[i].to_i64() != b[i].to_i64()) return "output " + std::to_string(i) + " differs";
      continue;
    }
    std::vector<float> x = a[i].to_f32(), y = b[i].to_f32();
    for (size_t j = 0; j < x.size(); ++j)
      if (!(std::fabs(x[j] - y[j]) <= atol + rtol * std::fabs(y[j])))
        return "output " + std::to_string(i) + "[" + std::to_string(j) +
               "]: " + std::to_string(x[j]) + " vs " + std::to_string(y[j]);
  }
  return {};
}

}  // namespace fxtest
