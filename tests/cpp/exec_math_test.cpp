// The executor's dtype coverage and math ops (ops_math.cpp, ops_elementwise.cpp) at the edges the
// backend suite does not reach: integer overflow and division edge cases, float16 rounding,
// saturating casts, Einsum's ellipsis broadcasting and diagonals, and the typed errors for the
// types an op does not declare.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "fx/exec.h"
#include "fx/fx.h"

namespace {

using fx::Argument;
using fx::Dtype;
using fx::fn;
using fx::Node;
using fx::exec::Value;

template <class T>
Value typed(Dtype dt, std::vector<int64_t> shape, const std::vector<T>& v) {
  Value out = Value::zeros(dt, std::move(shape));
  EXPECT_EQ(out.nbytes(), v.size() * sizeof(T));
  std::memcpy(out.mutable_data<T>(), v.data(), v.size() * sizeof(T));
  return out;
}

template <class T>
std::vector<T> values(const Value& v) {
  const T* p = v.data<T>();
  return std::vector<T>(p, p + v.numel());
}

// One op over `inputs` placeholders, run on `in`.
Value run_op(const char* op, const std::vector<Value>& in, fx::Kwargs kwargs = {}) {
  auto g = std::make_unique<fx::Graph>();
  std::vector<Argument> args;
  for (size_t i = 0; i < in.size(); ++i) args.emplace_back(g->placeholder("x" + std::to_string(i)));
  Node* n = g->call_function(fn(op), std::move(args), std::move(kwargs));
  g->output(n);
  fx::Module root;
  fx::GraphModule gm(&root, std::move(g));
  std::vector<Value> out = fx::exec::run(gm, in);
  EXPECT_EQ(out.size(), 1u);
  return out.at(0);
}

// Flatten's sides are products of their own dims, also for an empty tensor: [0, 5, 3] at axis 2
// is [0, 3], not [0, 0]; and its other dims may multiply past int64 (a typed error, not a
// wrapped shape).
TEST(ExecMath, FlattenOfEmptyTensorsKeepsBothSides) {
  const Value e = Value::zeros(Dtype::Float32, {0, 5, 3});
  EXPECT_EQ(run_op("onnx.Flatten", {e}, {{"axis", 2}}).shape(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(run_op("onnx.Flatten", {e}, {{"axis", 1}}).shape(), (std::vector<int64_t>{0, 15}));
  EXPECT_EQ(run_op("onnx.Flatten", {e}, {{"axis", 0}}).shape(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(
      run_op("onnx.Flatten", {Value::zeros(Dtype::Float32, {5, 3, 0})}, {{"axis", 2}}).shape(),
      (std::vector<int64_t>{15, 0}));
  const int64_t big = int64_t{1} << 40;
  const Value huge = Value::zeros(Dtype::Float32, {big, big, 0});
  try {
    run_op("onnx.Flatten", {huge}, {{"axis", 2}});
    ADD_FAILURE() << "no error";
  } catch (const fx::Error& err) {
    EXPECT_EQ(err.kind(), fx::ErrorKind::Resource);
    EXPECT_NE(std::string(err.what()).find("the flattened shape overflows int64"),
              std::string::npos)
        << err.what();
  }
  EXPECT_EQ(run_op("onnx.Flatten", {huge}, {{"axis", 1}}).shape(), (std::vector<int64_t>{big, 0}));
}

TEST(ExecMath, IntegerDivisionEdgesDoNotTrap) {
  const int64_t mn = std::numeric_limits<int64_t>::min();
  // MIN / -1 overflows (SIGFPE on x86 if computed directly): it wraps to MIN.
  Value q = run_op("onnx.Div", {typed<int64_t>(Dtype::Int64, {2}, {mn, 7}),
                                typed<int64_t>(Dtype::Int64, {2}, {-1, -2})});
  EXPECT_EQ(values<int64_t>(q), (std::vector<int64_t>{mn, -3}));
  // Mod (fmod = 0) takes the divisor's sign like Python; fmod = 1 the dividend's.
  const Value a = typed<int8_t>(Dtype::Int8, {4}, {-4, 4, -128, 5});
  const Value b = typed<int8_t>(Dtype::Int8, {4}, {3, -3, -1, 5});
  EXPECT_EQ(values<int8_t>(run_op("onnx.Mod", {a, b})), (std::vector<int8_t>{2, -2, 0, 0}));
  EXPECT_EQ(values<int8_t>(run_op("onnx.Mod", {a, b}, {{"fmod", 1}})),
            (std::vector<int8_t>{-1, 1, 0, 0}));
  try {
    run_op("onnx.Div", {a, typed<int8_t>(Dtype::Int8, {4}, {1, 0, 1, 1})});
    FAIL() << "a zero divisor ran";
  } catch (const fx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("division by zero"), std::string::npos) << e.what();
  }
}

TEST(ExecMath, NarrowIntegersWrapAndBroadcast) {
  // uint16 * uint16 promotes to a signed int in C++ (overflow would be undefined): it wraps.
  Value p = run_op("onnx.Mul", {typed<uint16_t>(Dtype::UInt16, {2}, {300, 2}),
                                typed<uint16_t>(Dtype::UInt16, {1}, {300})});
  EXPECT_EQ(values<uint16_t>(p), (std::vector<uint16_t>{24464, 600}));
  Value m = run_op("onnx.Max", {typed<uint8_t>(Dtype::UInt8, {2, 1}, {1, 200}),
                                typed<uint8_t>(Dtype::UInt8, {3}, {0, 100, 255})});
  EXPECT_EQ(m.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values<uint8_t>(m), (std::vector<uint8_t>{1, 100, 255, 200, 200, 255}));
  Value s = run_op("onnx.BitShift",
                   {typed<uint8_t>(Dtype::UInt8, {3}, {1, 255, 16}),
                    typed<uint8_t>(Dtype::UInt8, {3}, {7, 9, 2})},
                   {{"direction", "LEFT"}});
  EXPECT_EQ(values<uint8_t>(s), (std::vector<uint8_t>{128, 0, 64}));  // 9 >= width: 0
}

TEST(ExecMath, CastsRoundFloat16AndSaturateIntegers) {
  // to float16 and back: nearest even; 65520 and beyond overflow to inf; 2^-24 is the smallest
  // subnormal, 2^-26 rounds to zero.
  const std::vector<float> x = {
      1.0f / 3, 65504.0f, 65520.0f, std::ldexp(1.0f, -24), std::ldexp(1.0f, -26), -2.5f};
  Value h = run_op("onnx.Cast", {Value::from_f32({6}, x)}, {{"to", 10}});
  ASSERT_EQ(h.dtype(), Dtype::Float16);
  EXPECT_EQ(values<uint16_t>(h)[0], 0x3555);
  Value back = run_op("onnx.Cast", {h}, {{"to", 1}});
  const std::vector<float> f = values<float>(back);
  EXPECT_EQ(f[0], 0.333251953125f);
  EXPECT_EQ(f[1], 65504.0f);
  EXPECT_TRUE(std::isinf(f[2]));
  EXPECT_EQ(f[3], std::ldexp(1.0f, -24));
  EXPECT_EQ(f[4], 0.0f);
  EXPECT_EQ(f[5], -2.5f);
  // bfloat16 keeps float's exponent: 1 + 2^-8 rounds to even (1), 1 + 3 * 2^-8 up.
  Value bf = run_op("onnx.Cast", {Value::from_f32({2}, {1.0f + 1.0f / 256, 1.0f + 3.0f / 256})},
                    {{"to", 16}});
  EXPECT_EQ(values<uint16_t>(bf), (std::vector<uint16_t>{0x3f80, 0x3f82}));
  // Float to integer saturates and NaN gives 0 (undefined in C++, a trap in wasm).
  Value i =
      run_op("onnx.Cast", {Value::from_f32({4}, {1000.0f, -1000.0f, NAN, -3.7f})}, {{"to", 3}});
  EXPECT_EQ(values<int8_t>(i), (std::vector<int8_t>{127, -128, 0, -3}));
}

TEST(ExecMath, EinsumEllipsisBroadcastsAndDiagonals) {
  // "...ij,...jk->...ik": batch dims [2, 1] and [3] broadcast to [2, 3].
  std::vector<double> av(2 * 1 * 2 * 3), bv(3 * 3 * 2);
  for (size_t k = 0; k < av.size(); ++k) av[k] = static_cast<double>(k) - 4;
  for (size_t k = 0; k < bv.size(); ++k) bv[k] = 0.5 * static_cast<double>(k);
  Value r = run_op("onnx.Einsum",
                   {typed<double>(Dtype::Float64, {2, 1, 2, 3}, av),
                    typed<double>(Dtype::Float64, {3, 3, 2}, bv)},
                   {{"equation", "...ij,...jk->...ik"}});
  ASSERT_EQ(r.shape(), (std::vector<int64_t>{2, 3, 2, 2}));
  const std::vector<double> got = values<double>(r);
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t q = 0; q < 3; ++q)
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t k = 0; k < 2; ++k) {
          double s = 0;
          for (int64_t j = 0; j < 3; ++j) s += av[(p * 2 + i) * 3 + j] * bv[(q * 3 + j) * 2 + k];
          EXPECT_DOUBLE_EQ(got[((p * 3 + q) * 2 + i) * 2 + k], s) << p << q << i << k;
        }
  // A repeated label is a diagonal; the implicit output of "ii" is the trace.
  const Value m = typed<int32_t>(Dtype::Int32, {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(values<int32_t>(run_op("onnx.Einsum", {m}, {{"equation", "ii->i"}})),
            (std::vector<int32_t>{1, 5, 9}));
  Value trace = run_op("onnx.Einsum", {m}, {{"equation", "ii"}});
  EXPECT_TRUE(trace.shape().empty());
  EXPECT_EQ(values<int32_t>(trace), (std::vector<int32_t>{15}));
}

TEST(ExecMath, DetAndHardmaxAndWindows) {
  Value d = run_op("onnx.Det", {typed<double>(Dtype::Float64, {2, 3, 3},
                                              {2, 0, 1, 1, 3, 2, 1, 1, 2,      // det 6
                                               1, 2, 3, 2, 4, 6, 0, 1, 1})});  // singular
  EXPECT_NEAR(values<double>(d)[0], 6.0, 1e-12);
  EXPECT_EQ(values<double>(d)[1], 0.0);
  // Ties go to the first maximum.
  Value h = run_op("onnx.Hardmax", {Value::from_f32({2, 3}, {3, 3, 1, 0, 2, 2})});
  EXPECT_EQ(values<float>(h), (std::vector<float>{1, 0, 0, 0, 1, 0}));
  // A symmetric Hann window of 5: 0, .5, 1, .5, 0.
  Value w = run_op("onnx.HannWindow", {typed<int64_t>(Dtype::Int64, {}, {5})},
                   {{"periodic", 0}, {"output_datatype", 11}});
  const std::vector<double> wv = values<double>(w);
  const std::vector<double> want = {0, 0.5, 1, 0.5, 0};
  ASSERT_EQ(wv.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(wv[k], want[k], 1e-15);
}

TEST(ExecMath, UndeclaredTypesAreTypedErrors) {
  try {
    run_op("onnx.BitShift", {Value::from_f32({1}, {1}), Value::from_f32({1}, {1})},
           {{"direction", "LEFT"}});
    FAIL() << "BitShift on float32 ran";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Unsupported);
    const std::string what = e.what();
    EXPECT_NE(what.find("onnx.BitShift"), std::string::npos) << what;
    EXPECT_NE(what.find("float32"), std::string::npos) << what;
  }
  try {
    run_op("onnx.Acos", {typed<int32_t>(Dtype::Int32, {1}, {1})});
    FAIL() << "Acos on int32 ran";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), fx::ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("int32"), std::string::npos) << e.what();
  }
}

}  // namespace
