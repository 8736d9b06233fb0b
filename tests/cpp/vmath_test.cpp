// The vector exp, erf, GELU and sigmoid (kernels/vmath.h) against double-precision libm, over a
// dense sweep of floats (every 97th bit pattern between -110 and 110, plus the edges), and the
// kernels that use them (Exp, Erf, Gelu, Sigmoid, Softmax) against the scalar formulas. Each bound
// is checked on the four-lane path and on the kernels as dispatched on this CPU (eight lanes with
// AVX2, sixteen with AVX-512F, and fused multiply-adds with FMA, which change the last bits).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/cpu.h"
#include "kernels/elementwise.h"
#include "kernels/vmath.h"

#if defined(__GNUC__)                     // (GCC and Clang)
#pragma GCC diagnostic ignored "-Wpsabi"  // 8-lane vectors by value without -mavx (same bits)
#endif

namespace {

using fx::kernels::v4f;
namespace vmath = fx::kernels::vmath;
const auto exp4 = [](v4f x) { return vmath::exp(x); };
const auto erf4 = [](v4f x) { return vmath::erf(x); };
const auto gelu4 = [](v4f x) { return vmath::gelu(x); };
const auto sigmoid4 = [](v4f x) { return vmath::sigmoid(x); };
template <class F>
void map4(const float* in, float* out, int64_t n, F f) {
  vmath::map<v4f>(in, out, n, f);
}

/// Floats from -110 to 110: every 97th bit pattern, both signs, and the edges of the ranges.
std::vector<float> sweep() {
  std::vector<float> xs;
  const uint32_t hi = 0x42DC0000u;  // 110.0f
  for (uint32_t bits = 0; bits <= hi; bits += 97) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    xs.push_back(f);
    xs.push_back(-f);
  }
  for (float f : {0.0f,    -0.0f,   1e-30f, 88.72283f, 88.72284f, 88.7f, -87.33f, -87.34f, -103.9f,
                  -104.0f, -150.0f, 200.0f, 4.0f,      -4.0f,     3.99f, 0.5f,    1e-7f,   -88.0f,
                  -87.99f, -88.01f, 20.0f,  19.99f,    20.01f,    16.6f, 17.0f})
    xs.push_back(f);
  return xs;
}

/// Distance in units in the last place of `want` (rounded to float), with denormals counted
/// in the smallest denormal's unit.
double ulps(float got, double want) {
  const float w = static_cast<float>(want);
  if (got == w) return 0;
  const double unit = std::max<double>(std::ldexp(1.0, std::ilogb(w == 0 ? 1e-45f : w) - 23),
                                       std::numeric_limits<float>::denorm_min());
  return std::fabs(static_cast<double>(got) - want) / unit;
}

const std::vector<float>& sweep_inputs() {
  static const std::vector<float> xs = sweep();
  return xs;
}

/// f over sweep_inputs(), four lanes at a time.
template <class F>
std::vector<float> on_sweep(F f) {
  const std::vector<float>& xs = sweep_inputs();
  std::vector<float> ys(xs.size());
  map4(xs.data(), ys.data(), static_cast<int64_t>(xs.size()), f);
  return ys;
}

/// The kernel `op` (unary_f32, as dispatched on this CPU) over sweep_inputs().
std::vector<float> on_sweep(fx::kernels::UnaryOp op) {
  const std::vector<float>& xs = sweep_inputs();
  std::vector<float> ys(xs.size());
  fx::kernels::unary_f32(op, xs.data(), ys.data(), static_cast<int64_t>(xs.size()), 0.0f, 0.0f);
  return ys;
}

/// Both paths of a function: ("four lanes", ys) and ("kernel", ys).
template <class F>
std::vector<std::pair<const char*, std::vector<float>>> both_paths(F four,
                                                                   fx::kernels::UnaryOp op) {
  return {{"four lanes", on_sweep(four)}, {"kernel", on_sweep(op)}};
}

/// The largest error seen, and where.
struct Worst {
  double error = 0;
  float at = 0;
  void see(double e, float x) {
    if (e > error) error = e, at = x;
  }
};

TEST(Vmath, ExpIsWithinOneAndAHalfUlpFromDenormalsToOverflow) {
  const std::vector<float>& xs = sweep_inputs();
  for (const auto& [path, ys] : both_paths(exp4, fx::kernels::UnaryOp::Exp)) {
    Worst worst;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = std::exp(static_cast<double>(xs[i]));
      if (want > std::numeric_limits<float>::max())
        EXPECT_EQ(ys[i], std::numeric_limits<float>::infinity()) << path << ", x = " << xs[i];
      else
        worst.see(ulps(ys[i], want), xs[i]);
    }
    EXPECT_LE(worst.error, 1.5) << path << ", at x = " << worst.at;
  }
}

TEST(Vmath, ErfIsWithinFourUlp) {
  const std::vector<float>& xs = sweep_inputs();
  for (const auto& [path, ys] : both_paths(erf4, fx::kernels::UnaryOp::Erf)) {
    Worst worst;
    for (size_t i = 0; i < xs.size(); ++i) {
      EXPECT_LE(std::fabs(ys[i]), 1.0f) << path << ", x = " << xs[i];
      if (std::fabs(xs[i]) >= 1e-37f)  // (denormal inputs: erf(x) = 1.128 x, denormal too)
        worst.see(ulps(ys[i], std::erf(static_cast<double>(xs[i]))), xs[i]);
    }
    EXPECT_LE(worst.error, 4.0) << path << ", at x = " << worst.at;
  }
}

// Sigmoid clamps x to [-88, 20]: 1 beyond 20 (where 1 + e^-x rounds to 1 anyway), 0 below -88
// (the true results there are denormals under 6.1e-39); denormal results from -88 to -87.3 are
// still computed.
TEST(Vmath, SigmoidIsWithinTwoAndAHalfUlpAndFlushesOnlyBelowMinus88) {
  const std::vector<float>& xs = sweep_inputs();
  for (const auto& [path, ys] : both_paths(sigmoid4, fx::kernels::UnaryOp::Sigmoid)) {
    Worst worst;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = 1.0 / (1.0 + std::exp(-static_cast<double>(xs[i])));
      if (xs[i] < -88.0f) {
        EXPECT_EQ(ys[i], 0.0f) << path << ", x = " << xs[i];
        EXPECT_LT(want, 6.1e-39) << xs[i];
      } else {
        worst.see(ulps(ys[i], want), xs[i]);
      }
    }
    EXPECT_LE(worst.error, 2.5) << path << ", at x = " << worst.at;
  }
}

TEST(Vmath, GeluKeepsItsNegativeTail) {
  const std::vector<float>& xs = sweep_inputs();
  for (const auto& [path, ys] : both_paths(gelu4, fx::kernels::UnaryOp::Gelu)) {
    Worst near, far;  // |x| < 3, and beyond
    for (size_t i = 0; i < xs.size(); ++i) {
      const double x = xs[i], want = 0.5 * x * std::erfc(-x / std::sqrt(2.0));
      if (std::fabs(want) < 1e-30) continue;  // GELU(-11.5): results go denormal below
      (std::fabs(x) < 3 ? near : far).see(std::fabs(ys[i] - want) / std::fabs(want), xs[i]);
    }
    EXPECT_LE(near.error, 1e-6) << path << ", at x = " << near.at;
    // To GELU(-11.5): x^2 rounds by 6e-8, so e^(-x^2/2) by 3e-8 x^2.
    EXPECT_LE(far.error, 2e-5) << path << ", at x = " << far.at;
  }
}

TEST(Vmath, NanStaysNanAndInfinitiesSaturate) {
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  const float in[5] = {nan, inf, -inf, 0.0f, -nan};
  for (int path = 0; path < 2; ++path) {  // four lanes, then the kernels as dispatched
    float e[5], f[5], s[5];
    if (path == 0) {
      map4(in, e, 5, exp4);
      map4(in, f, 5, erf4);
      map4(in, s, 5, sigmoid4);
    } else {
      fx::kernels::unary_f32(fx::kernels::UnaryOp::Exp, in, e, 5);
      fx::kernels::unary_f32(fx::kernels::UnaryOp::Erf, in, f, 5);
      fx::kernels::unary_f32(fx::kernels::UnaryOp::Sigmoid, in, s, 5);
    }
    EXPECT_TRUE(std::isnan(e[0]) && std::isnan(e[4]) && std::isnan(f[0]) && std::isnan(f[4]) &&
                std::isnan(s[0]) && std::isnan(s[4]))
        << "path " << path;
    EXPECT_EQ(s[1], 1.0f) << "path " << path;
    EXPECT_EQ(s[2], 0.0f) << "path " << path;
    EXPECT_EQ(s[3], 0.5f) << "path " << path;
    EXPECT_EQ(e[1], inf) << "path " << path;
    EXPECT_EQ(e[2], 0.0f) << "path " << path;
    EXPECT_EQ(e[3], 1.0f) << "path " << path;
    EXPECT_EQ(f[1], 1.0f) << "path " << path;
    EXPECT_EQ(f[2], -1.0f) << "path " << path;
    EXPECT_EQ(f[3], 0.0f) << "path " << path;
  }
}

TEST(Vmath, AnElementsResultDoesNotDependOnItsPosition) {
  // Lengths 1..33: the tail goes through the vector path too, with four lanes and in the kernels
  // as dispatched (up to sixteen lanes).
  const float v = 0.3718f;
  for (int64_t n = 1; n <= 33; ++n) {
    std::vector<float> in(static_cast<size_t>(n), v), out(static_cast<size_t>(n));
    map4(in.data(), out.data(), n, erf4);
    for (float y : out) EXPECT_EQ(y, out[0]) << "four lanes, n = " << n;
    for (auto op : {fx::kernels::UnaryOp::Erf, fx::kernels::UnaryOp::Gelu}) {
      fx::kernels::unary_f32(op, in.data(), out.data(), n);
      for (float y : out) EXPECT_EQ(y, out[0]) << "kernel, n = " << n;
    }
  }
}

// exp, erf, sigmoid and GELU over n floats with eight lanes: natively in an AVX2 function, as
// the kernels run them (GCC gives vmath's clamps one instruction there, with the same bits).
typedef float v8f __attribute__((vector_size(32)));
#ifdef FXWASM_X86_DISPATCH
__attribute__((target("avx2")))
#endif
void map8(int which, const float* in, float* out, int64_t n) {
  if (which == 0)
    vmath::map<v8f>(
        in, out, n, [](v8f x) __attribute__((always_inline)) { return vmath::exp(x); });
  if (which == 1)
    vmath::map<v8f>(
        in, out, n, [](v8f x) __attribute__((always_inline)) { return vmath::erf(x); });
  if (which == 2)
    vmath::map<v8f>(
        in, out, n, [](v8f x) __attribute__((always_inline)) { return vmath::sigmoid(x); });
  if (which == 3)
    vmath::map<v8f>(
        in, out, n, [](v8f x) __attribute__((always_inline)) { return vmath::gelu(x); });
}

TEST(Vmath, EightLanesGiveTheSameBitsAsFour) {
#ifdef FXWASM_X86_DISPATCH
  if (!fx::kernels::cpu_has_avx2()) GTEST_SKIP() << "no AVX2";
#endif
  const std::vector<float> xs = sweep();
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<float> a(xs.size()), b(xs.size());
  const std::pair<const char*, std::function<v4f(v4f)>> fns[] = {
      {"exp", exp4}, {"erf", erf4}, {"sigmoid", sigmoid4}, {"gelu", gelu4}};
  for (int which = 0; which < 4; ++which) {
    vmath::map<v4f>(xs.data(), a.data(), n, fns[which].second);
    map8(which, xs.data(), b.data(), n);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << fns[which].first;
  }
  // And the kernel gives the four-lane bits unless it contracts multiply-adds (an x86 CPU with
  // FMA): then the accuracy tests above hold it to the same bounds.
#ifdef FXWASM_X86_DISPATCH
  if (fx::kernels::cpu_has_avx2_fma()) return;
#endif
  fx::kernels::unary_f32(fx::kernels::UnaryOp::Gelu, xs.data(), b.data(), n, 0.0f, 0.0f);
  vmath::map<v4f>(xs.data(), a.data(), n, gelu4);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "unary_f32 Gelu";
}

#ifdef FXWASM_X86_DISPATCH
typedef float v16f __attribute__((vector_size(64)));
#if !defined(__clang__)
// exp, erf and GELU over n floats with sixteen lanes (AVX-512F, which scales by 2^n with
// vscalefps where fewer lanes build 2^n in two halves), no fused multiply-adds (GCC, ISO C++).
__attribute__((target("avx512f"))) void map16(int which, const float* in, float* out, int64_t n) {
  if (which == 0)
    vmath::map<v16f>(
        in, out, n, [](v16f x) __attribute__((always_inline)) { return vmath::exp(x); });
  if (which == 1)
    vmath::map<v16f>(
        in, out, n, [](v16f x) __attribute__((always_inline)) { return vmath::erf(x); });
  if (which == 2)
    vmath::map<v16f>(
        in, out, n, [](v16f x) __attribute__((always_inline)) { return vmath::gelu(x); });
}
#endif

// exp_in_range over n floats clamped to its range [-104, 88.8], with sixteen lanes (`scaled`:
// as vmath.h computes it, by vscalefps under GCC) or with 2^n applied in two halves (the
// four- and eight-lane way), in the same function's contraction.
// (Forced inline into the AVX-512F function, as elementwise.cpp's kernels: Clang rejects a call
// between it and a function without the target that passes sixteen-lane vectors.)
template <class V>
inline __attribute__((always_inline)) void exp_in_range_lanes(bool scaled, const float* in,
                                                              float* out, int64_t n) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  for (int64_t i = 0; i + L <= n; i += L) {
    V x;
    std::memcpy(&x, in + i, sizeof x);
    const V lo = vmath::splat<V>(-104.0f), hi = vmath::splat<V>(88.8f);
    x = x < lo ? lo : (x > hi ? hi : x);
    V y;
    if (scaled) {
      y = vmath::exp_in_range(x);
    } else {
      vmath::mask_t<V> e;
      y = vmath::exp_reduced(x, e);
      const vmath::mask_t<V> h = e >> 1;
      y = y * vmath::pow2i<V>(h) * vmath::pow2i<V>(e - h);
    }
    std::memcpy(out + i, &y, sizeof y);
  }
}
__attribute__((target("avx512f"))) void exp_in_range16(bool scaled, const float* in, float* out,
                                                       int64_t n) {
  exp_in_range_lanes<v16f>(scaled, in, out, n);
}

// vscalefps rounds y * 2^n once, as the two halves' products do (the first exact): the same bits
// for every input of the sweep, denormal results and overflow included; and (GCC, which does not
// contract a * b + c into FMA in ISO C++) sixteen lanes give the four-lane bits of exp, erf and
// GELU. Clang contracts within an expression wherever the target has FMA (AVX-512F does), so
// there sixteen lanes differ from four in the last bits, as the FMA-compiled kernels do.
TEST(Vmath, SixteenLanesScaleByTwoToTheNWithTheTwoStepsBits) {
  if (!fx::kernels::cpu_has_avx512()) GTEST_SKIP() << "no AVX-512F";
  const std::vector<float>& xs = sweep_inputs();
  const int64_t n = static_cast<int64_t>(xs.size()) / 16 * 16;
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  exp_in_range16(true, xs.data(), a.data(), n);
  exp_in_range16(false, xs.data(), b.data(), n);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
#if !defined(__clang__)
  const std::pair<const char*, std::function<v4f(v4f)>> fns[] = {
      {"exp", exp4}, {"erf", erf4}, {"gelu", gelu4}};
  for (int which = 0; which < 3; ++which) {
    map4(xs.data(), a.data(), n, fns[which].second);
    map16(which, xs.data(), b.data(), n);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << fns[which].first;
  }
#endif
}
#endif

TEST(Vmath, KernelsUsingThemMatchTheScalarFormulas) {
  using fx::kernels::UnaryOp;
  std::vector<float> xs;
  for (int i = -400; i <= 400; ++i) xs.push_back(static_cast<float>(i) * 0.0253f);
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<float> y(xs.size());
  const struct {
    UnaryOp op;
    double (*f)(double);
    double rel;  // relative tolerance
  } cases[] = {
      {UnaryOp::Exp, [](double x) { return std::exp(x); }, 1e-6},
      {UnaryOp::Erf, [](double x) { return std::erf(x); }, 1e-6},
      {UnaryOp::Sigmoid, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, 1e-6},
      // (down to GELU(-10.1) ~ 1e-23: the tail's bound, GeluKeepsItsNegativeTail)
      {UnaryOp::Gelu, [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }, 2e-5},
  };
  for (const auto& c : cases) {
    fx::kernels::unary_f32(c.op, xs.data(), y.data(), n, 0.0f, 0.0f);
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = c.f(xs[i]);
      EXPECT_NEAR(y[i], want, c.rel * std::fabs(want) + 1e-37)
          << "op " << static_cast<int>(c.op) << " x = " << xs[i];
    }
  }
  // Softmax and LogSoftmax over rows of 7 (a partial vector at each row's end): exp / sum and
  // (x - max) - log(sum).
  std::vector<float> s(xs.size() / 7 * 7), ls(s.size());
  const int64_t rows = static_cast<int64_t>(s.size() / 7);
  fx::kernels::softmax_f32(xs.data(), s.data(), rows, 7, false);
  fx::kernels::softmax_f32(xs.data(), ls.data(), rows, 7, true);
  for (size_t r = 0; r < s.size() / 7; ++r) {
    double mx = -1e30, sum = 0;
    for (size_t k = 0; k < 7; ++k) mx = std::max<double>(mx, xs[r * 7 + k]);
    for (size_t k = 0; k < 7; ++k) sum += std::exp(xs[r * 7 + k] - mx);
    for (size_t k = 0; k < 7; ++k) {
      EXPECT_NEAR(s[r * 7 + k], std::exp(xs[r * 7 + k] - mx) / sum, 3e-7) << "row " << r;
      EXPECT_NEAR(ls[r * 7 + k], xs[r * 7 + k] - mx - std::log(sum), 1e-6) << "row " << r;
    }
  }
}

// Softmax and LogSoftmax over rows long enough for whole vectors at every width, one longer
// than a 256-element summing block, against double-precision loops. A row's last partial vector
// is read as its last whole one (lanes recomputed, not summed twice): rows of 20 and 197 end in
// one, and row 2's maximum sits in it. A row holding a NaN comes out all NaN (the maximum skips
// it, its exponential does not), at the start of row 1 or the last element of row 3; the other
// rows are untouched.
TEST(Vmath, SoftmaxOfLongRowsMatchesDoubleLoops) {
  for (const int64_t len : {20, 197, 300}) {
    const int64_t rows = 4;
    std::vector<float> x(static_cast<size_t>(rows * len)), s(x.size()), ls(x.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = 6.0f * std::sin(0.37f * static_cast<float>(i));
    x[static_cast<size_t>(len + 5)] = std::numeric_limits<float>::quiet_NaN();  // in row 1
    x[static_cast<size_t>(3 * len - 2)] = 9.0f;     // row 2's maximum, in its last vector
    x[static_cast<size_t>(3 * len - 1)] = -120.0f;  // e^(x - max) far below the normal floats
    x[static_cast<size_t>(4 * len - 1)] = std::numeric_limits<float>::quiet_NaN();  // row 3
    fx::kernels::softmax_f32(x.data(), s.data(), rows, len, false);
    fx::kernels::softmax_f32(x.data(), ls.data(), rows, len, true);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.data() + r * len;
      if (r == 1 || r == 3) {
        for (int64_t k = 0; k < len; ++k)
          ASSERT_TRUE(std::isnan(s[r * len + k]) && std::isnan(ls[r * len + k])) << k;
        continue;
      }
      double mx = -1e30, sum = 0;
      for (int64_t k = 0; k < len; ++k) mx = std::max<double>(mx, xr[k]);
      for (int64_t k = 0; k < len; ++k) sum += std::exp(xr[k] - mx);
      for (int64_t k = 0; k < len; ++k) {
        const double want = std::exp(xr[k] - mx) / sum;
        ASSERT_NEAR(s[r * len + k], want, 2e-6 * want + 1e-30) << len << " row " << r << " " << k;
        const double want_log = xr[k] - mx - std::log(sum);  // (-130 is 8e-6 from a float)
        ASSERT_NEAR(ls[r * len + k], want_log, 2e-6 + 1.2e-7 * std::fabs(want_log))
            << len << " row " << r << " " << k;
      }
    }
  }
}

}  // namespace
