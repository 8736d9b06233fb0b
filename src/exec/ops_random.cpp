// ONNX's random ops: Dropout (inference and training), Bernoulli, RandomUniform(Like),
// RandomNormal(Like). Their values cannot match another implementation's bit for bit (ONNX does
// not fix the generator), so tests check shapes, dtypes and statistics.
//
// The generator is splitmix64. A node with a `seed` attribute draws the same values on every
// run (the stream starts from the seed); without one, every call continues one per-thread
// stream seeded once from std::random_device.
#include <cmath>
#include <cstring>
#include <random>

#include "exec/ops.h"
#include "fx/onnx.h"

namespace fx::exec {

namespace {

class Generator {
 public:
  explicit Generator(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Standard normal (Box-Muller; 1 - u keeps the log's argument in (0, 1]).
  double normal() {
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t s_;
};

Generator& unseeded() {
  thread_local Generator g{(static_cast<uint64_t>(std::random_device{}()) << 32) ^
                           std::random_device{}()};
  return g;
}

// Runs `fill` with the generator the node's `seed` attribute asks for.
template <class F>
void with_generator(const OpCall& c, F&& fill) {
  if (c.has_attr("seed")) {
    const double seed = c.attrs.find("seed")->to_double();
    uint64_t bits = 0;
    std::memcpy(&bits, &seed, sizeof bits);
    Generator g(bits);
    fill(g);
  } else {
    fill(unseeded());
  }
}

// The element type of a random op's output: attribute `dtype` (a TensorProto code), else
// `fallback`; only float32 and float64 are generated.
Dtype random_dtype(const OpCall& c, Dtype fallback) {
  const Dtype d = c.has_attr("dtype")
                      ? fx::onnx::dtype_from_onnx(static_cast<int32_t>(c.attr_int("dtype", 1)),
                                                  "attribute 'dtype'")
                      : fallback;
  if (d != Dtype::Float32 && d != Dtype::Float64)
    c.unsupported(std::string("random values of element type ") + dtype_name(d));
  return d;
}

// A new value whose elements are `draw(g, T{})`, T float or double for a float32 or float64
// output.
template <class Draw>
Value random_value(const OpCall& c, Dtype dtype, const std::vector<int64_t>& shape, Draw&& draw) {
  Value out = new_value(dtype, shape);
  with_generator(c, [&](Generator& g) {
    const int64_t n = out.numel();
    if (dtype == Dtype::Float64)
      for (int64_t i = 0; i < n; ++i) out.mutable_data<double>()[i] = draw(g, 0.0);
    else
      for (int64_t i = 0; i < n; ++i) out.mutable_data<float>()[i] = draw(g, 0.0f);
  });
  return out;
}

std::vector<int64_t> attr_shape(const OpCall& c) {
  if (!c.has_attr("shape")) c.fail("attribute 'shape' is required");
  std::vector<int64_t> s = c.attr_ints("shape");
  for (int64_t d : s)
    if (d < 0) c.fail("attribute 'shape' has a negative dimension");
  return s;
}

void random_uniform(OpCall& c, bool like) {
  const float lo = c.attr_float("low", 0.0f), hi = c.attr_float("high", 1.0f);
  const Dtype d = random_dtype(c, like ? c.input(0).dtype() : Dtype::Float32);
  c.outputs.push_back(
      random_value(c, d, like ? c.input(0).shape() : attr_shape(c), [&](Generator& g, auto zero) {
        // Rounded to the output type, a draw just below `high` can become `high`: keep
        // [low, high) as torch.rand and numpy do.
        using T = decltype(zero);
        const T v = static_cast<T>(lo + (hi - lo) * g.uniform());
        const T top = static_cast<T>(hi);
        return v < top ? v : std::nextafter(top, static_cast<T>(lo));
      }));
}

void random_normal(OpCall& c, bool like) {
  const float mean = c.attr_float("mean", 0.0f), scale = c.attr_float("scale", 1.0f);
  const Dtype d = random_dtype(c, like ? c.input(0).dtype() : Dtype::Float32);
  c.outputs.push_back(
      random_value(c, d, like ? c.input(0).shape() : attr_shape(c), [&](Generator& g, auto zero) {
        return static_cast<decltype(zero)>(mean + scale * g.normal());
      }));
}

// Bernoulli: 1 with probability input[i], as the input's type or attribute `dtype`.
void bernoulli(OpCall& c) {
  const Value& p = c.input(0);
  if (p.dtype() != Dtype::Float32 && p.dtype() != Dtype::Float64)
    c.unsupported(std::string("Bernoulli of element type ") + dtype_name(p.dtype()));
  const Dtype out_type =
      c.has_attr("dtype") ? fx::onnx::dtype_from_onnx(static_cast<int32_t>(c.attr_int("dtype", 1)),
                                                      "attribute 'dtype'")
                          : p.dtype();
  Value draws = new_value(p.dtype(), p.shape());
  with_generator(c, [&](Generator& g) {
    for (int64_t i = 0; i < p.numel(); ++i) {
      const double pi = p.dtype() == Dtype::Float64 ? p.data<double>()[i] : p.data<float>()[i];
      const bool one = g.uniform() < pi;
      if (p.dtype() == Dtype::Float64)
        draws.mutable_data<double>()[i] = one;
      else
        draws.mutable_data<float>()[i] = one;
    }
  });
  c.outputs.push_back(out_type == p.dtype() ? draws : cast_value(c, draws, out_type));
}

// Dropout. Inference (the default, and every opset before 12) is the identity with an all-true
// mask. Training (input 2 true, opset >= 12): each element is kept with probability 1 - ratio
// and scaled by 1 / (1 - ratio); ratio 0 is the identity (exporters write that for a model in
// train() mode whose dropout is disabled, as torchvision's swin_t does).
void dropout(OpCall& c) {
  const Value& x = c.input(0);
  bool training = c.attr_int("training_mode", 0) != 0;
  if (c.has_input(2)) {
    const std::vector<int64_t> t = c.input(2).to_i64();
    if (t.size() != 1) c.fail("training_mode must be a single bool");
    training = t[0] != 0;
  }
  float ratio = c.attr_float("ratio", 0.5f);
  if (c.has_input(1)) {
    const std::vector<float> r = c.input(1).to_f32();
    if (r.size() != 1) c.fail("ratio must be a scalar");
    ratio = r[0];
  }
  const bool want_mask = c.num_outputs() > 1;
  if (!training || ratio == 0.0f) {
    c.outputs.push_back(x);
    if (want_mask) {
      Value mask = new_value(Dtype::Bool, x.shape());
      std::fill(mask.mutable_data<uint8_t>(), mask.mutable_data<uint8_t>() + mask.numel(), 1);
      c.outputs.push_back(mask);
    }
    return;
  }
  if (!(ratio > 0.0f && ratio <= 1.0f)) c.fail("ratio must be in [0, 1]");
  if (x.dtype() != Dtype::Float32 && x.dtype() != Dtype::Float64)
    c.unsupported(std::string("training Dropout of element type ") + dtype_name(x.dtype()));
  Value out = new_value(x.dtype(), x.shape());
  Value mask = new_value(Dtype::Bool, x.shape());
  // ratio 1 drops everything (the scale would be infinite; 0 * inf must not make NaN).
  const double scale = ratio < 1.0f ? 1.0 / (1.0 - ratio) : 0.0;
  with_generator(c, [&](Generator& g) {
    uint8_t* m = mask.mutable_data<uint8_t>();
    for (int64_t i = 0; i < x.numel(); ++i) m[i] = g.uniform() >= ratio;
    if (x.dtype() == Dtype::Float64)
      for (int64_t i = 0; i < x.numel(); ++i)
        out.mutable_data<double>()[i] = m[i] ? x.data<double>()[i] * scale : 0.0;
    else
      for (int64_t i = 0; i < x.numel(); ++i)
        out.mutable_data<float>()[i] = m[i] ? static_cast<float>(x.data<float>()[i] * scale) : 0.0f;
  });
  c.outputs.push_back(std::move(out));
  if (want_mask) c.outputs.push_back(std::move(mask));
}

}  // namespace

void register_random_ops() {
  register_builtin("onnx.Dropout", dropout);
  register_builtin("onnx.Bernoulli", bernoulli);
  register_builtin("onnx.RandomUniform", [](OpCall& c) { random_uniform(c, false); });
  register_builtin("onnx.RandomUniformLike", [](OpCall& c) { random_uniform(c, true); });
  register_builtin("onnx.RandomNormal", [](OpCall& c) { random_normal(c, false); });
  register_builtin("onnx.RandomNormalLike", [](OpCall& c) { random_normal(c, true); });
}

}  // namespace fx::exec
