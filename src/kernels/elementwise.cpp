// Broadcasting binary ops walk the output with the innermost dimension as a tight loop whose
// operand strides are 0 (broadcast) or 1; the common cases (same shape, scalar operand) are
// single flat loops the compiler vectorises.
#include "kernels/elementwise.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/conv.h"  // global_avg_plane
#include "kernels/cpu.h"
#include "kernels/thread_pool.h"
#include "kernels/vmath.h"

namespace fx::kernels {

int64_t numel(const Shape& s) {
  // (an empty shape's other dimensions may multiply past int64: see Value::numel)
  if (std::find(s.begin(), s.end(), 0) != s.end()) return 0;
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

int64_t broadcast_index(const Shape& out, const Shape& operand, int64_t flat) {
  int64_t idx = 0, stride = 1;
  const int64_t offset = static_cast<int64_t>(out.size() - operand.size());
  for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
    const int64_t coord = flat % out[d];
    flat /= out[d];
    const int64_t od = d - offset;
    if (od < 0) continue;
    if (operand[od] != 1) idx += coord * stride;
    stride *= operand[od];
  }
  return idx;
}

bool broadcast_shapes(const Shape& a, const Shape& b, Shape& out) {
  const size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

namespace {

// Elementwise ops on the pool's threads (parallel_for_inline), each element or row computed as
// on one thread, so any thread count gives the same bits. A chunk must outweigh waking a thread
// (a few microseconds): cheap ops (adds, compares, Relu, Clip: memory-bound, ~0.1-0.3 ns an
// element) take 64K elements, the transcendental ones (exp, erf, GELU, Softmax, LayerNorm: ~1
// ns) 8K. (A transformer's elementwise ops were serial: ViT-B/16 ran 1.63x faster on 2 threads
// against onnxruntime's 1.89x.)
constexpr int64_t kCheapGrain = 65536;
constexpr int64_t kCostlyGrain = 8192;

// Rows of `size` elements: at least kCostlyGrain elements a chunk.
int64_t costly_row_grain(int64_t size) {
  return std::max<int64_t>(1, kCostlyGrain / std::max<int64_t>(size, 1));
}

// Calls f(a_index, b_index, out_index, count, a_step, b_step) for runs of the innermost
// dimension of the broadcast output; steps are 0 or 1. Runs go to the threads in chunks of at
// least kCheapGrain elements (each run writes its own output: f must allow that). Dimensions of
// size 1 are dropped and neighbours that both operands step through alike (both broadcast, or
// both contiguous across them) merge first: a per-channel scale of [1, C, H, W] by [1, C, 1, 1]
// runs C runs of H x W, not C x H runs of W (squeeze-excitation's Mul of EfficientNet-B0, W = 7
// to 112: the runs' overhead was most of its time).
template <class F>
void for_each_run(const Shape& as, const Shape& bs, F&& f) {
  Shape out;
  broadcast_shapes(as, bs, out);
  const size_t full_rank = out.size();
  if (numel(out) == 0) return;
  // The merged dims and strides of a and b over them (0 where broadcast), and each chunk's
  // odometer: on the stack up to rank 8 (small ops run many times; allocations were a visible
  // share of them).
  constexpr size_t kInline = 8;
  int64_t inline_buf[3 * kInline];
  std::vector<int64_t> heap_buf;
  int64_t* buf = inline_buf;
  if (full_rank > kInline) {
    heap_buf.resize(3 * full_rank);
    buf = heap_buf.data();
  }
  int64_t* dims = buf;  // innermost first while merging
  int64_t* sa = buf + full_rank;
  int64_t* sb = buf + 2 * full_rank;
  size_t rank = 0;
  for (int64_t i = static_cast<int64_t>(full_rank) - 1, ka = 1, kb = 1; i >= 0; --i) {
    const size_t oa = full_rank - as.size(), ob = full_rank - bs.size();
    const int64_t da = static_cast<size_t>(i) < oa ? 1 : as[i - oa];
    const int64_t db = static_cast<size_t>(i) < ob ? 1 : bs[i - ob];
    const int64_t step_a = da == 1 ? 0 : ka, step_b = db == 1 ? 0 : kb;
    ka *= da;
    kb *= db;
    if (out[i] == 1) continue;
    if (rank > 0 && step_a == sa[rank - 1] * dims[rank - 1] &&
        step_b == sb[rank - 1] * dims[rank - 1]) {
      dims[rank - 1] *= out[i];  // (the inner dim's steps carry on across it)
      continue;
    }
    dims[rank] = out[i];
    sa[rank] = step_a;
    sb[rank] = step_b;
    ++rank;
  }
  if (rank == 0) return f(0, 0, 0, 1, 0, 0);
  std::reverse(dims, dims + rank);
  std::reverse(sa, sa + rank);
  std::reverse(sb, sb + rank);
  const int64_t inner = dims[rank - 1];
  const int64_t outer = numel(out) / inner;
  // Runs [o0, o1), the odometer over the outer dims started at run o0. (Not inlined: the body,
  // with f's four vectorised loops, is then compiled once for both of parallel_for_inline's
  // paths instead of twice. ~140 instantiations of it made this file the build's longest to
  // compile with GCC: 38-42 s -> 29-30 s. What it adds at run time is one direct call per op,
  // or per chunk on threads.)
  auto runs = [&](int64_t o0, int64_t o1) __attribute__((noinline)) {
    int64_t inline_idx[kInline];
    std::vector<int64_t> heap_idx;
    int64_t* idx = inline_idx;
    if (rank > kInline) {
      heap_idx.resize(rank);
      idx = heap_idx.data();
    }
    int64_t ia = 0, ib = 0;
    for (int64_t d = static_cast<int64_t>(rank) - 2, q = o0; d >= 0; --d) {
      idx[d] = q % dims[d];
      q /= dims[d];
      ia += idx[d] * sa[d];
      ib += idx[d] * sb[d];
    }
    for (int64_t o = o0; o < o1; ++o) {
      f(ia, ib, o * inner, inner, sa[rank - 1], sb[rank - 1]);
      for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d) {  // odometer over outer dims
        ia += sa[d];
        ib += sb[d];
        if (++idx[d] < dims[d]) break;
        ia -= sa[d] * dims[d];
        ib -= sb[d] * dims[d];
        idx[d] = 0;
      }
    }
  };
  parallel_for_inline(outer, std::max<int64_t>(1, kCheapGrain / inner), runs);
}

template <class T, class R, class Op>
void apply(const Shape& as, const T* a, const Shape& bs, const T* b, R* out, Op op) {
  if (as == bs) {  // (not inlined: see for_each_run)
    parallel_for_inline(
        numel(as), kCheapGrain, [&](int64_t i0, int64_t i1) __attribute__((noinline)) {
          for (int64_t i = i0; i < i1; ++i) out[i] = op(a[i], b[i]);
        });
    return;
  }
  for_each_run(as, bs, [&](int64_t ia, int64_t ib, int64_t io, int64_t n, int64_t da, int64_t db) {
    const T* pa = a + ia;
    const T* pb = b + ib;
    R* po = out + io;
    if (da && db) {
      for (int64_t i = 0; i < n; ++i) po[i] = op(pa[i], pb[i]);
    } else if (da) {
      const T y = *pb;
      for (int64_t i = 0; i < n; ++i) po[i] = op(pa[i], y);
    } else if (db) {
      const T x = *pa;
      for (int64_t i = 0; i < n; ++i) po[i] = op(x, pb[i]);
    } else {
      const R v = op(*pa, *pb);
      for (int64_t i = 0; i < n; ++i) po[i] = v;
    }
  });
}

template <class T>
void compare(BinaryOp op, const Shape& as, const T* a, const Shape& bs, const T* b, uint8_t* o) {
  switch (op) {
    case BinaryOp::Equal:
      return apply(as, a, bs, b, o, [](T x, T y) -> uint8_t { return x == y; });
    case BinaryOp::Less:
      return apply(as, a, bs, b, o, [](T x, T y) -> uint8_t { return x < y; });
    case BinaryOp::Greater:
      return apply(as, a, bs, b, o, [](T x, T y) -> uint8_t { return x > y; });
    case BinaryOp::LessOrEqual:
      return apply(as, a, bs, b, o, [](T x, T y) -> uint8_t { return x <= y; });
    case BinaryOp::GreaterOrEqual:
      return apply(as, a, bs, b, o, [](T x, T y) -> uint8_t { return x >= y; });
    default:
      return;
  }
}

bool is_comparison(BinaryOp op) {
  return op == BinaryOp::Equal || op == BinaryOp::Less || op == BinaryOp::Greater ||
         op == BinaryOp::LessOrEqual || op == BinaryOp::GreaterOrEqual;
}

}  // namespace

void binary_f32(BinaryOp op, const Shape& as, const float* a, const Shape& bs, const float* b,
                void* out) {
  if (is_comparison(op)) return compare(op, as, a, bs, b, static_cast<uint8_t*>(out));
  float* o = static_cast<float*>(out);
  switch (op) {
    case BinaryOp::Add:
      return apply(as, a, bs, b, o, [](float x, float y) { return x + y; });
    case BinaryOp::Sub:
      return apply(as, a, bs, b, o, [](float x, float y) { return x - y; });
    case BinaryOp::Mul:
      return apply(as, a, bs, b, o, [](float x, float y) { return x * y; });
    case BinaryOp::Div:
      return apply(as, a, bs, b, o, [](float x, float y) { return x / y; });
    case BinaryOp::Pow:
      return apply(as, a, bs, b, o, [](float x, float y) {
        return y == 2.0f ? x * x : y == 0.5f ? std::sqrt(x) : std::pow(x, y);
      });
    case BinaryOp::Min:
      return apply(as, a, bs, b, o,
                   [](float x, float y) { return x != x || y != y ? NAN : std::min(x, y); });
    case BinaryOp::Max:
      return apply(as, a, bs, b, o,
                   [](float x, float y) { return x != x || y != y ? NAN : std::max(x, y); });
    case BinaryOp::Mod:
    case BinaryOp::FMod:
      return apply(as, a, bs, b, o, [](float x, float y) { return std::fmod(x, y); });
    default:
      return;
  }
}

namespace {
// Integer ops computed in an unsigned type at least as wide as int, so that overflow wraps
// instead of being undefined (uint16 * uint16 promotes to a signed int otherwise).
template <class T>
using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <class T>
T int_pow(T x, T y) {
  if constexpr (std::is_signed_v<T>) {
    if (y < 0) return x == 1 ? T(1) : x == -1 ? ((y & 1) ? T(-1) : T(1)) : T(0);
  }
  // Squaring: an exponent of 10^18 takes 60 steps, not 10^18.
  Wide<T> r = 1, base = static_cast<Wide<T>>(x);
  for (auto e = static_cast<std::make_unsigned_t<T>>(y); e; e >>= 1) {
    if (e & 1) r *= base;
    base *= base;
  }
  return static_cast<T>(r);
}

template <class T>
void binary_int(BinaryOp op, const Shape& as, const T* a, const Shape& bs, const T* b, T* o) {
  using W = Wide<T>;
  switch (op) {
    case BinaryOp::Add:
      return apply(as, a, bs, b, o, [](T x, T y) { return static_cast<T>(W(x) + W(y)); });
    case BinaryOp::Sub:
      return apply(as, a, bs, b, o, [](T x, T y) { return static_cast<T>(W(x) - W(y)); });
    case BinaryOp::Mul:
      return apply(as, a, bs, b, o, [](T x, T y) { return static_cast<T>(W(x) * W(y)); });
    case BinaryOp::Div:  // MIN / -1 overflows (a trap on x86): it wraps to MIN like -MIN
      return apply(as, a, bs, b, o, [](T x, T y) {
        if (y == 0) return T(0);
        if constexpr (std::is_signed_v<T>)
          if (y == -1) return static_cast<T>(W(0) - W(x));
        return static_cast<T>(x / y);
      });
    case BinaryOp::Pow:
      return apply(as, a, bs, b, o, [](T x, T y) { return int_pow(x, y); });
    case BinaryOp::Min:
      return apply(as, a, bs, b, o, [](T x, T y) { return std::min(x, y); });
    case BinaryOp::Max:
      return apply(as, a, bs, b, o, [](T x, T y) { return std::max(x, y); });
    case BinaryOp::Mod:
      return apply(as, a, bs, b, o, [](T x, T y) {
        if (y == 0) return T(0);
        if constexpr (std::is_signed_v<T>) {
          if (y == -1) return T(0);
          const T r = static_cast<T>(x % y);
          return (r != 0 && ((r < 0) != (y < 0))) ? static_cast<T>(r + y) : r;
        } else {
          return static_cast<T>(x % y);
        }
      });
    case BinaryOp::FMod:
      return apply(as, a, bs, b, o, [](T x, T y) {
        if (y == 0) return T(0);
        if constexpr (std::is_signed_v<T>)
          if (y == -1) return T(0);
        return static_cast<T>(x % y);
      });
    default:
      return;
  }
}

void binary_double(BinaryOp op, const Shape& as, const double* a, const Shape& bs, const double* b,
                   double* o) {
  switch (op) {
    case BinaryOp::Add:
      return apply(as, a, bs, b, o, [](double x, double y) { return x + y; });
    case BinaryOp::Sub:
      return apply(as, a, bs, b, o, [](double x, double y) { return x - y; });
    case BinaryOp::Mul:
      return apply(as, a, bs, b, o, [](double x, double y) { return x * y; });
    case BinaryOp::Div:
      return apply(as, a, bs, b, o, [](double x, double y) { return x / y; });
    case BinaryOp::Pow:
      return apply(as, a, bs, b, o, [](double x, double y) { return std::pow(x, y); });
    case BinaryOp::Min:
      return apply(as, a, bs, b, o,
                   [](double x, double y) { return x != x || y != y ? NAN : std::min(x, y); });
    case BinaryOp::Max:
      return apply(as, a, bs, b, o,
                   [](double x, double y) { return x != x || y != y ? NAN : std::max(x, y); });
    case BinaryOp::Mod:
    case BinaryOp::FMod:
      return apply(as, a, bs, b, o, [](double x, double y) { return std::fmod(x, y); });
    default:
      return;
  }
}
}  // namespace

template <class T>
void binary_typed(BinaryOp op, const Shape& as, const T* a, const Shape& bs, const T* b,
                  void* out) {
  if (is_comparison(op)) return compare(op, as, a, bs, b, static_cast<uint8_t*>(out));
  if constexpr (std::is_floating_point_v<T>) {
    binary_double(op, as, a, bs, b, static_cast<double*>(out));
  } else {
    binary_int(op, as, a, bs, b, static_cast<T*>(out));
  }
}

#define FX_BINARY_TYPED(T) \
  template void binary_typed<T>(BinaryOp, const Shape&, const T*, const Shape&, const T*, void*);
FX_BINARY_TYPED(double)
FX_BINARY_TYPED(int8_t)
FX_BINARY_TYPED(int16_t)
FX_BINARY_TYPED(int32_t)
FX_BINARY_TYPED(int64_t)
FX_BINARY_TYPED(uint8_t)
FX_BINARY_TYPED(uint16_t)
FX_BINARY_TYPED(uint32_t)
FX_BINARY_TYPED(uint64_t)
#undef FX_BINARY_TYPED

void binary_i64(BinaryOp op, const Shape& as, const int64_t* a, const Shape& bs, const int64_t* b,
                void* out) {
  binary_typed<int64_t>(op, as, a, bs, b, out);
}

void binary_bool(BinaryOp op, const Shape& as, const uint8_t* a, const Shape& bs, const uint8_t* b,
                 uint8_t* out) {
  switch (op) {
    case BinaryOp::And:
      return apply(as, a, bs, b, out, [](uint8_t x, uint8_t y) -> uint8_t { return x && y; });
    case BinaryOp::Or:
      return apply(as, a, bs, b, out, [](uint8_t x, uint8_t y) -> uint8_t { return x || y; });
    case BinaryOp::Xor:
      return apply(as, a, bs, b, out,
                   [](uint8_t x, uint8_t y) -> uint8_t { return (x != 0) != (y != 0); });
    case BinaryOp::Equal:
      return apply(as, a, bs, b, out,
                   [](uint8_t x, uint8_t y) -> uint8_t { return (x != 0) == (y != 0); });
    default:
      return;
  }
}

namespace {
template <class F>
void map(const float* in, float* out, int64_t n, F f) {
  parallel_for_inline(n, kCheapGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) out[i] = f(in[i]);
  });
}
// The transcendental maps of kernels/vmath.h: four lanes (SSE, or simd128 in wasm), and where
// the CPU has them (the native build targets baseline x86-64) eight with AVX2, eight with AVX2 and
// fused multiply-adds, sixteen with AVX-512F. Four and eight lanes without FMA give the same
// bits (vmath.h); the FMA paths differ from them in the last bits, as the x86 GEMM kernels do.
enum class VecOp { Exp, Erf, Gelu, Sigmoid, Silu };

#if defined(__GNUC__)  // (GCC and Clang)
// GCC notes (at the end of the file) that an 8-lane value passed by value changes the ABI
// without AVX: the lambdas below are inlined into the dispatch functions, compiled for AVX.
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// (Forced inline, with its lambdas, into the dispatch functions below: see vmath.h.)
template <class V>
inline __attribute__((always_inline)) void vec_map(VecOp op, const float* in, float* out,
                                                   int64_t n) {
  switch (op) {
    case VecOp::Exp:
      return vmath::map<V>(
          in, out, n, [](V x) __attribute__((always_inline)) { return vmath::exp(x); });
    case VecOp::Erf:
      return vmath::map<V>(
          in, out, n, [](V x) __attribute__((always_inline)) { return vmath::erf(x); });
    case VecOp::Gelu:
      return vmath::map<V>(
          in, out, n, [](V x) __attribute__((always_inline)) { return vmath::gelu(x); });
    case VecOp::Sigmoid:
      return vmath::map<V>(
          in, out, n, [](V x) __attribute__((always_inline)) { return vmath::sigmoid(x); });
    case VecOp::Silu:  // (one rounded multiply after the sigmoid: the bits of Sigmoid, then Mul)
      return vmath::map<V>(
          in, out, n, [](V x) __attribute__((always_inline)) { return x * vmath::sigmoid(x); });
  }
}

#ifdef FXWASM_X86_DISPATCH
typedef float v8f __attribute__((vector_size(32)));
__attribute__((target("avx2"))) void vec_map_avx2(VecOp op, const float* in, float* out,
                                                  int64_t n) {
  vec_map<v8f>(op, in, out, n);
}
// With FMA, the multiply-adds of vmath's polynomials contract into fused ones: GELU 2.1 -> 1.4 ns
// an element. Results differ from the other paths in the last bits, as the AVX2 GEMM's do
// (tests/cpp/vmath_test.cpp holds every path to the same accuracy).
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
__attribute__((target("avx2,fma"))) void vec_map_fma(VecOp op, const float* in, float* out,
                                                     int64_t n) {
  vec_map<v8f>(op, in, out, n);
}
// Sixteen lanes where the CPU has AVX-512F (fused multiply-adds too): half the instructions of
// eight lanes, GELU 1.4 -> 0.86 ns an element on a Zen 4 core.
typedef float v16f __attribute__((vector_size(64)));
__attribute__((target("avx512f"))) void vec_map_avx512(VecOp op, const float* in, float* out,
                                                       int64_t n) {
  vec_map<v16f>(op, in, out, n);
}
#pragma GCC pop_options
#endif

void vec_apply_serial(VecOp op, const float* in, float* out, int64_t n) {
#ifdef FXWASM_X86_DISPATCH
  if (cpu_has_avx512()) return vec_map_avx512(op, in, out, n);
  if (cpu_has_avx2_fma()) return vec_map_fma(op, in, out, n);
  if (cpu_has_avx2()) return vec_map_avx2(op, in, out, n);
#endif
  vec_map<v4f>(op, in, out, n);
}

void vec_apply(VecOp op, const float* in, float* out, int64_t n) {
  parallel_for_inline(n, kCostlyGrain, [&](int64_t i0, int64_t i1) {
    vec_apply_serial(op, in + i0, out + i0, i1 - i0);
  });
}

// a[0] + ... + a[W-1] in double, pairwise ((a0 + a1) + (a2 + a3)) + ...: a chain of log2(W)
// adds, where a running total waited on W of them.
template <int64_t W>
inline double pairwise_sum(const float* a) {
  double d[W];
  for (int64_t j = 0; j < W; ++j) d[j] = a[j];
  for (int64_t w = W / 2; w >= 1; w /= 2)
    for (int64_t j = 0; j < w; ++j) d[j] = d[2 * j] + d[2 * j + 1];
  return d[0];
}

// y = e^(x - shift) over n floats, where no x - shift is above 0 (shift is the row's maximum),
// returning sum(y): the sum in a fixed order for four and eight lanes, eight float partial sums
// over each block of 256 elements (element i into sum i mod 8; with four lanes, vectors alternate
// between two accumulators), each block's sums added pairwise in double. Sixteen lanes keep
// sixteen sums (i mod 16). A row's last partial vector is the row's last L elements, the lanes
// already done masked out of the sum (element i into sum (i - n) mod L): staging it through a
// buffer had cost ViT's 197-wide rows 20 %. (A sequential double sum made Softmax wait on one
// add's latency per element.)
template <class V>
inline __attribute__((always_inline)) double exp_shifted_sum(const float* x, float* y, int64_t n,
                                                             float shift) {
  constexpr int64_t L = sizeof(V) / sizeof(float), W = L > 8 ? L : 8, A = W / L;
  using I = vmath::mask_t<V>;
  const V s = vmath::splat<V>(shift);
  double total = 0;
  for (int64_t b = 0; b < n; b += 256) {
    const int64_t e = std::min<int64_t>(n, b + 256);
    V acc[A] = {};
    int64_t i = b, k = 0;
    for (; i + L <= e; i += L, ++k) {
      V v;
      std::memcpy(&v, x + i, sizeof v);
      v = vmath::exp_nonpositive(v - s);
      std::memcpy(y + i, &v, sizeof v);
      acc[k % A] += v;
    }
    if (i < e && e - b >= L) {  // the last L elements; lanes before i recomputed, not summed
      V v;
      std::memcpy(&v, x + e - L, sizeof v);
      v = vmath::exp_nonpositive(v - s);
      std::memcpy(y + e - L, &v, sizeof v);
      I lane;
      for (int64_t j = 0; j < L; ++j) lane[j] = static_cast<int32_t>(j);
      acc[k % A] += vmath::select<V>(lane >= static_cast<int32_t>(L - (e - i)), v, V{});
    } else if (i < e) {  // a row shorter than a vector: through a buffer, missing lanes zero
      float buf[L] = {};
      std::memcpy(buf, x + i, static_cast<size_t>(e - i) * sizeof(float));
      V v;
      std::memcpy(&v, buf, sizeof v);
      v = vmath::exp_nonpositive(v - s);
      std::memcpy(buf, &v, sizeof v);
      for (int64_t j = e - i; j < L; ++j) buf[j] = 0.0f;
      std::memcpy(y + i, buf, static_cast<size_t>(e - i) * sizeof(float));
      std::memcpy(&v, buf, sizeof v);
      acc[k % A] += v;
    }
    float lanes[W];
    std::memcpy(lanes, acc, sizeof lanes);
    total += pairwise_sum<W>(lanes);
  }
  return total;
}

// The largest of x[0..n), NaNs skipped (as a sequential `mx < x ? x : mx` does): running maxima
// in V's lanes, the last partial vector read as the last L elements. The maximum does not depend
// on the order, so every width gives the same value.
template <class V>
inline __attribute__((always_inline)) float max_skipping_nan(const float* x, int64_t n) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  V m = vmath::splat<V>(-INFINITY), m2 = m;  // two chains: a select waits on the one before
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    V v, w;
    std::memcpy(&v, x + i, sizeof v);
    std::memcpy(&w, x + i + L, sizeof w);
    m = vmath::select<V>(m < v, v, m);
    m2 = vmath::select<V>(m2 < w, w, m2);
  }
  m = vmath::select<V>(m < m2, m2, m);
  for (; i + L <= n; i += L) {
    V v;
    std::memcpy(&v, x + i, sizeof v);
    m = vmath::select<V>(m < v, v, m);
  }
  if (i < n && n >= L) {
    V v;
    std::memcpy(&v, x + n - L, sizeof v);
    m = vmath::select<V>(m < v, v, m);
    i = n;
  }
  float lanes[L];
  std::memcpy(lanes, &m, sizeof m);
  float mx = lanes[0];
  for (int64_t j = 1; j < L; ++j) mx = mx < lanes[j] ? lanes[j] : mx;
  for (; i < n; ++i) mx = mx < x[i] ? x[i] : mx;
  return mx;
}

// y[0..n) *= k, in V's lanes (the last partial vector as the last L elements, read before the
// loop rescales the lanes it shares with it).
template <class V>
inline __attribute__((always_inline)) void scale_in_place(float* y, int64_t n, float k) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  const V vk = vmath::splat<V>(k);
  if (n < L) {
    for (int64_t i = 0; i < n; ++i) y[i] *= k;
    return;
  }
  V last;
  std::memcpy(&last, y + n - L, sizeof last);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    V v;
    std::memcpy(&v, y + i, sizeof v);
    v *= vk;
    std::memcpy(y + i, &v, sizeof v);
  }
  if (i < n) {
    last *= vk;
    std::memcpy(y + n - L, &last, sizeof last);
  }
}

// Softmax (or LogSoftmax) of each row, all three passes compiled for the caller's target.
template <class V>
inline __attribute__((always_inline)) void softmax_rows(const float* in, float* out, int64_t rows,
                                                        int64_t axis_size, bool log) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * axis_size;
    float* y = out + r * axis_size;
    const float mx = max_skipping_nan<V>(x, axis_size);
    const double sum = exp_shifted_sum<V>(x, y, axis_size, mx);  // e^(x - max) into y
    if (log) {
      // (x - max) - log(sum): subtracting max first keeps precision for large inputs.
      const float log_sum = static_cast<float>(std::log(sum));
      for (int64_t i = 0; i < axis_size; ++i) y[i] = (x[i] - mx) - log_sum;
    } else {
      scale_in_place<V>(y, axis_size, static_cast<float>(1.0 / sum));
    }
  }
}

#ifdef FXWASM_X86_DISPATCH
__attribute__((target("avx2"))) void softmax_avx2(const float* in, float* out, int64_t rows,
                                                  int64_t axis_size, bool log) {
  softmax_rows<v8f>(in, out, rows, axis_size, log);
}
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
__attribute__((target("avx2,fma"))) void softmax_fma(const float* in, float* out, int64_t rows,
                                                     int64_t axis_size, bool log) {
  softmax_rows<v8f>(in, out, rows, axis_size, log);
}
__attribute__((target("avx512f"))) void softmax_avx512(const float* in, float* out, int64_t rows,
                                                       int64_t axis_size, bool log) {
  softmax_rows<v16f>(in, out, rows, axis_size, log);
}
#pragma GCC pop_options
#endif

void softmax_any(const float* in, float* out, int64_t rows, int64_t axis_size, bool log) {
#ifdef FXWASM_X86_DISPATCH
  if (cpu_has_avx512()) return softmax_avx512(in, out, rows, axis_size, log);
  if (cpu_has_avx2_fma()) return softmax_fma(in, out, rows, axis_size, log);
  if (cpu_has_avx2()) return softmax_avx2(in, out, rows, axis_size, log);
#endif
  softmax_rows<v4f>(in, out, rows, axis_size, log);
}
}  // namespace

void unary_f32_plane_means(UnaryOp op, const float* in, float* out, float* means, int64_t planes,
                           int64_t hw) {
  // Whole planes to a thread, as many as unary_f32 gives a chunk; on it, runs of planes of up to
  // 16 KB at a time (one unary_f32 call each, inline: a parallel_for inside a chunk runs on its
  // thread), each run's planes summed while they are in L1. (An element's result does not depend
  // on where a call starts.)
  const int64_t run = std::max<int64_t>(1, 4096 / std::max<int64_t>(hw, 1));
  parallel_for_inline(planes, std::max<int64_t>(1, kCostlyGrain / std::max<int64_t>(hw, 1)),
                      [&](int64_t p0, int64_t p1) {
                        for (int64_t q0 = p0; q0 < p1; q0 += run) {
                          const int64_t q1 = std::min(p1, q0 + run);
                          unary_f32(op, in + q0 * hw, out + q0 * hw, (q1 - q0) * hw, 0.0f, 0.0f);
                          for (int64_t q = q0; q < q1; ++q)
                            means[q] = global_avg_plane(out + q * hw, hw);
                        }
                      });
}

void unary_f32(UnaryOp op, const float* in, float* out, int64_t n, float alpha, float beta) {
  switch (op) {
    case UnaryOp::Relu:
      return map(in, out, n, [](float x) { return x > 0.0f ? x : (x != x ? x : 0.0f); });
    case UnaryOp::Sigmoid:
      return vec_apply(VecOp::Sigmoid, in, out, n);
    case UnaryOp::Tanh:
      return map(in, out, n, [](float x) { return std::tanh(x); });
    case UnaryOp::Exp:
      return vec_apply(VecOp::Exp, in, out, n);
    case UnaryOp::Log:
      return map(in, out, n, [](float x) { return std::log(x); });
    case UnaryOp::Sqrt:
      return map(in, out, n, [](float x) { return std::sqrt(x); });
    case UnaryOp::Neg:
      return map(in, out, n, [](float x) { return -x; });
    case UnaryOp::Abs:
      return map(in, out, n, [](float x) { return std::fabs(x); });
    case UnaryOp::Erf:
      return vec_apply(VecOp::Erf, in, out, n);
    case UnaryOp::Floor:
      return map(in, out, n, [](float x) { return std::floor(x); });
    case UnaryOp::Ceil:
      return map(in, out, n, [](float x) { return std::ceil(x); });
    case UnaryOp::Round:
      return map(in, out, n, [](float x) { return std::nearbyint(x); });  // half to even
    case UnaryOp::Reciprocal:
      return map(in, out, n, [](float x) { return 1.0f / x; });
    case UnaryOp::Sin:
      return map(in, out, n, [](float x) { return std::sin(x); });
    case UnaryOp::Cos:
      return map(in, out, n, [](float x) { return std::cos(x); });
    case UnaryOp::Sign:
      return map(in, out, n, [](float x) { return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x; });
    case UnaryOp::Softplus:
      return map(in, out, n, [](float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); });
    case UnaryOp::Identity:
      if (in != out) std::copy(in, in + n, out);
      return;
    case UnaryOp::LeakyRelu:
      return map(in, out, n, [alpha](float x) { return x >= 0.0f ? x : alpha * x; });
    case UnaryOp::Elu:
      return map(in, out, n, [alpha](float x) { return x >= 0.0f ? x : alpha * std::expm1(x); });
    case UnaryOp::Selu:
      return map(in, out, n,
                 [alpha, beta](float x) { return beta * (x > 0.0f ? x : alpha * std::expm1(x)); });
    case UnaryOp::HardSigmoid:
      return map(in, out, n, [alpha, beta](float x) {
        return std::max(0.0f, std::min(1.0f, alpha * x + beta));
      });
    case UnaryOp::HardSwish:
      return map(in, out, n,
                 [](float x) { return x * std::max(0.0f, std::min(1.0f, x / 6.0f + 0.5f)); });
    case UnaryOp::Gelu:
      return vec_apply(VecOp::Gelu, in, out, n);
    case UnaryOp::Silu:
      return vec_apply(VecOp::Silu, in, out, n);
    case UnaryOp::GeluTanh:
      return map(in, out, n, [](float x) {
        return 0.5f * x * (1.0f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
      });
    case UnaryOp::Clip:
      return map(in, out, n, [alpha, beta](float x) {
        return x != x ? x : std::min(beta, std::max(alpha, x));
      });
  }
}

void softmax_f32(const float* in, float* out, int64_t rows, int64_t axis_size, bool log) {
  parallel_for_inline(rows, costly_row_grain(axis_size), [&](int64_t r0, int64_t r1) {
    softmax_any(in + r0 * axis_size, out + r0 * axis_size, r1 - r0, axis_size, log);
  });
}

namespace {
// sum(f(x[i])) for i < n, in a fixed order that vectorizes: eight float partial sums over each
// block of 256 elements (element i into sum i mod 8), each block's sums added pairwise in
// double. (One sequential double add per element made LayerNorm wait on the add's latency: 1.2
// ns an element.)
template <class F>
double sum_in_blocks(const float* x, int64_t n, F f) {
  double total = 0;
  for (int64_t b = 0; b < n; b += 256) {
    const int64_t e = std::min<int64_t>(n, b + 256);
    float acc[8] = {};
    int64_t i = b;
    for (; i + 8 <= e; i += 8)
      for (int j = 0; j < 8; ++j) acc[j] += f(x[i + j]);
    for (int j = 0; i < e; ++i, ++j) acc[j] += f(x[i]);
    total += pairwise_sum<8>(acc);
  }
  return total;
}

void layer_norm_rows(const float* in, const float* scale, const float* bias, float* out, int64_t r0,
                     int64_t r1, int64_t size, float epsilon) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* x = in + r * size;
    float* y = out + r * size;
    const double n = static_cast<double>(size);
    const float m = static_cast<float>(sum_in_blocks(x, size, [](float v) { return v; }) / n);
    const double var = sum_in_blocks(x, size, [m](float v) { return (v - m) * (v - m); }) / n;
    const float inv = static_cast<float>(1.0 / std::sqrt(var + epsilon));
    if (bias) {
      for (int64_t i = 0; i < size; ++i) y[i] = (x[i] - m) * inv * scale[i] + bias[i];
    } else {
      for (int64_t i = 0; i < size; ++i) y[i] = (x[i] - m) * inv * scale[i];
    }
  }
}
}  // namespace

void layer_norm_f32(const float* in, const float* scale, const float* bias, float* out,
                    int64_t rows, int64_t size, float epsilon) {
  parallel_for_inline(rows, costly_row_grain(size), [&](int64_t r0, int64_t r1) {
    layer_norm_rows(in, scale, bias, out, r0, r1, size, epsilon);
  });
}

void batch_norm_f32(const float* in, const float* scale, const float* bias, const float* mean,
                    const float* var, float* out, int64_t N, int64_t C, int64_t spatial,
                    float epsilon) {
  for (int64_t c = 0; c < C; ++c) {
    const float k = scale[c] / std::sqrt(var[c] + epsilon);
    const float off = bias[c] - mean[c] * k;
    for (int64_t n = 0; n < N; ++n) {
      const float* x = in + (n * C + c) * spatial;
      float* y = out + (n * C + c) * spatial;
      for (int64_t i = 0; i < spatial; ++i) y[i] = x[i] * k + off;
    }
  }
}

}  // namespace fx::kernels
