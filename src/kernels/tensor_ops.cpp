#include "kernels/tensor_ops.h"

#include "kernels/cpu.h"
#ifdef FXWASM_X86_DISPATCH
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/scratch.h"
#include "kernels/simd.h"
#include "kernels/thread_pool.h"

namespace fx::kernels {

bool matmul_shape(const Shape& a0, const Shape& b0, Shape& out) {
  if (a0.empty() || b0.empty()) return false;
  Shape a = a0, b = b0;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  if (a.back() != b[b.size() - 2]) return false;
  Shape batch;
  if (!broadcast_shapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2), batch))
    return false;
  out = batch;
  if (a0.size() > 1) out.push_back(a[a.size() - 2]);
  if (b0.size() > 1) out.push_back(b.back());
  return true;
}

namespace {

// One batch item's product with a fused Softmax over its rows: the product into this thread's
// buffer (ldc N, beta 0: the bits it would have in `C`), then the softmax of each row into C
// (rows ldc apart), while the product is in L1 or L2: the Softmax's pass over the whole scores
// tensor (cold by then: 0.8 MB at 128 tokens, 12 heads) and its buffer are gone. Model-167 Xeon,
// one thread: BERT-sized's QK^T and Softmax steps 0.303 + 0.112 -> 0.386 ms a layer (minimums);
// paired against the build before, BERT-sized 0.988x, ViT-B/16 0.973x.
// (The buffer is a batch item's product, kept per thread: items over 4 MB are left to the Softmax,
// which gains nothing from this on them anyway.)
constexpr int64_t kFusedSoftmaxMaxFloats = int64_t{1} << 20;

// Whether a Softmax asked for in *softmax_rows (null: none) fuses into products of M x N, which
// it records there.
bool fuses_softmax(bool* softmax_rows, int64_t M, int64_t N) {
  if (!softmax_rows) return false;
  return *softmax_rows = *softmax_rows && M * N <= kFusedSoftmaxMaxFloats;
}

void product_softmax(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                     const float* B, int64_t ldb, float* C, int64_t ldc, const GemmEpilogue& ep) {
  float* t = aligned_floats(scratch(Scratch::MatmulRows), M * N);
  sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, t, N, &ep);
  if (ldc == N) return softmax_f32(t, C, M, N);
  for (int64_t r = 0; r < M; ++r) softmax_f32(t + r * N, C + r * ldc, 1, N);
}

}  // namespace

void matmul_f32(const Shape& a0, const float* a, const Shape& b0, const float* b, float* out,
                const PackedOperand* packed_b, const float* col_bias, float lo, float hi,
                const float* residual, bool* softmax_rows) {
  GemmEpilogue ep;
  ep.col_bias = col_bias;
  ep.lo = lo;
  ep.hi = hi;
  Shape as = a0, bs = b0;
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  ep.residual = residual;
  ep.ldr = N;
  const Shape abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
  Shape batch;
  broadcast_shapes(abatch, bbatch, batch);
  const int64_t nbatch = numel(batch);
  // (A fused Softmax takes the batch items one by one, which needs b's elements, and rows.)
  if (softmax_rows && (!b || a0.size() < 2 || b0.size() < 2)) *softmax_rows = false;
  const bool softmax = fuses_softmax(softmax_rows, M, N);
  if (numel(bbatch) == 1 && numel(abatch) == nbatch && !softmax) {
    // b shared by every batch (x @ W): one GEMM over the stacked rows of a.
    sgemm(false, false, nbatch * M, N, K, 1.0f, a, K, b, N, 0.0f, out, N, &ep, nullptr, packed_b);
    return;
  }
  // General case (attention's per-head products): map each output batch index to the operands'
  // batch offsets. The batch items are independent products, split over the kernels' threads in
  // chunks of at least ~1 MFLOP (each item writes its own output: bit-identical for any count; a
  // product large enough to split by itself does so when the batch runs on one chunk).
  const int64_t flops = std::max<int64_t>(1, 2 * M * N * K);
  parallel_for(nbatch, std::max<int64_t>(1, (int64_t{1} << 20) / flops),
               [&](int64_t begin, int64_t end) {
                 for (int64_t i = begin; i < end; ++i) {
                   int64_t rem = i, ia = 0, ib = 0, sa = 1, sb = 1;
                   for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
                     const int64_t coord = rem % batch[d];
                     rem /= batch[d];
                     const int64_t da = d - static_cast<int64_t>(batch.size() - abatch.size());
                     const int64_t db = d - static_cast<int64_t>(batch.size() - bbatch.size());
                     if (da >= 0) {
                       if (abatch[da] != 1) ia += coord * sa;
                       sa *= abatch[da];
                     }
                     if (db >= 0) {
                       if (bbatch[db] != 1) ib += coord * sb;
                       sb *= bbatch[db];
                     }
                   }
                   GemmEpilogue item = ep;
                   if (residual) item.residual = residual + i * M * N;
                   if (softmax)
                     product_softmax(false, false, M, N, K, a + ia * M * K, K, b + ib * K * N, N,
                                     out + i * M * N, N, item);
                   else
                     sgemm(false, false, M, N, K, 1.0f, a + ia * M * K, K, b + ib * K * N, N, 0.0f,
                           out + i * M * N, N, &item);
                 }
               });
}

bool is_contiguous(const StridedLayout& v) {
  int64_t expect = 1;
  for (size_t d = v.shape.size(); d-- > 0;) {
    if (v.shape[d] != 1 && v.strides[d] != expect) return false;
    expect *= v.shape[d];
  }
  return true;
}

void strided_copy(const void* base, size_t elem_size, const StridedLayout& v, void* out) {
  const auto* src = static_cast<const unsigned char*>(base);
  auto* dst = static_cast<unsigned char*>(out);
  const int64_t n = numel(v.shape);
  if (n == 0) return;
  const size_t rank = v.shape.size();
  if (rank == 0 || is_contiguous(v)) {
    std::memcpy(dst, src + v.offset * elem_size, static_cast<size_t>(n) * elem_size);
    return;
  }
  const int64_t inner = v.shape[rank - 1], step = v.strides[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  int64_t at = v.offset;
  for (int64_t o = 0; o < n; o += inner) {
    if (step == 1) {
      std::memcpy(dst + o * elem_size, src + at * elem_size,
                  static_cast<size_t>(inner) * elem_size);
    } else if (elem_size == 4) {
      const auto* s4 = reinterpret_cast<const uint32_t*>(src) + at;
      auto* d4 = reinterpret_cast<uint32_t*>(dst) + o;
      for (int64_t k = 0; k < inner; ++k) d4[k] = s4[k * step];
    } else {
      for (int64_t k = 0; k < inner; ++k)
        std::memcpy(dst + (o + k) * elem_size, src + (at + k * step) * elem_size, elem_size);
    }
    for (size_t d = rank - 1; d-- > 0;) {  // odometer over the outer dims
      at += v.strides[d];
      if (++idx[d] < v.shape[d]) break;
      at -= v.strides[d] * v.shape[d];
      idx[d] = 0;
    }
  }
}

void strided_copy_scaled_f32(const float* base, const StridedLayout& v, float scalar, bool divide,
                             float* out) {
  const int64_t n = numel(v.shape);
  if (n == 0) return;
  const size_t rank = v.shape.size();
  const int64_t inner = rank ? v.shape[rank - 1] : 1, step = rank ? v.strides[rank - 1] : 1;
  std::vector<int64_t> idx(rank, 0);
  int64_t at = v.offset;
  for (int64_t o = 0; o < n; o += inner) {
    const float* src = base + at;
    float* dst = out + o;
    if (divide) {
      for (int64_t k = 0; k < inner; ++k) dst[k] = src[k * step] / scalar;
    } else {
      for (int64_t k = 0; k < inner; ++k) dst[k] = src[k * step] * scalar;
    }
    for (size_t d = rank ? rank - 1 : 0; d-- > 0;) {  // odometer over the outer dims
      at += v.strides[d];
      if (++idx[d] < v.shape[d]) break;
      at -= v.strides[d] * v.shape[d];
      idx[d] = 0;
    }
  }
}

namespace {

// One operand's last two dims as sgemm reads them: trans when its rows are strided and its
// columns contiguous in the other direction. False when neither stride is 1.
bool gemm_operand(const StridedLayout& v, bool& trans, int64_t& ld) {
  const size_t r = v.shape.size();
  const int64_t rows = v.shape[r - 2], cols = v.shape[r - 1];
  const int64_t rs = v.strides[r - 2], cs = v.strides[r - 1];
  if (cs == 1 || cols == 1) {
    trans = false;
    ld = rows == 1 ? std::max<int64_t>(cols, 1) : rs;
    return ld >= cols;
  }
  if (rs == 1 || rows == 1) {
    trans = true;
    ld = cols == 1 ? std::max<int64_t>(rows, 1) : cs;
    return ld >= rows;
  }
  return false;
}

}  // namespace

bool matmul_strided_f32(const float* a, const StridedLayout& av, const float* b,
                        const StridedLayout& bv, float* out, const float* col_bias, float lo,
                        float hi, const StridedLayout* out_layout, bool* softmax_rows) {
  if (av.shape.size() < 2 || bv.shape.size() < 2) return false;
  bool ta = false, tb = false;
  int64_t lda = 0, ldb = 0;
  if (!gemm_operand(av, ta, lda) || !gemm_operand(bv, tb, ldb)) return false;
  GemmEpilogue ep;
  ep.col_bias = col_bias;
  ep.lo = lo;
  ep.hi = hi;
  const size_t ra = av.shape.size(), rb = bv.shape.size();
  const int64_t M = av.shape[ra - 2], K = av.shape[ra - 1], N = bv.shape[rb - 1];
  const Shape abatch(av.shape.begin(), av.shape.end() - 2);
  const Shape bbatch(bv.shape.begin(), bv.shape.end() - 2);
  Shape batch;
  if (!broadcast_shapes(abatch, bbatch, batch)) return false;
  const int64_t nbatch = numel(batch);
  int64_t ldc = N;
  if (out_layout) {
    const size_t ro = out_layout->shape.size();
    if (ro != batch.size() + 2 || out_layout->strides[ro - 1] != 1 ||
        out_layout->shape[ro - 2] != M || out_layout->shape[ro - 1] != N ||
        (M > 1 && out_layout->strides[ro - 2] < N))
      return false;
    ldc = M > 1 ? out_layout->strides[ro - 2] : N;
  }
  // Each output batch item's operand and result offsets (a broadcast dim of size 1 stays put).
  auto offsets = [&](int64_t i, int64_t& ia, int64_t& ib, int64_t& io) {
    ia = av.offset;
    ib = bv.offset;
    io = out_layout ? out_layout->offset : i * M * N;
    for (int64_t d = static_cast<int64_t>(batch.size()) - 1, rem = i; d >= 0; --d) {
      const int64_t coord = rem % batch[d];
      rem /= batch[d];
      const int64_t da = d - static_cast<int64_t>(batch.size() - abatch.size());
      const int64_t db = d - static_cast<int64_t>(batch.size() - bbatch.size());
      if (da >= 0 && abatch[da] != 1) ia += coord * av.strides[da];
      if (db >= 0 && bbatch[db] != 1) ib += coord * bv.strides[db];
      if (out_layout) io += coord * out_layout->strides[d];
    }
  };
  const int64_t flops = std::max<int64_t>(1, 2 * M * N * K);
  const bool softmax = fuses_softmax(softmax_rows, M, N);
  parallel_for(
      nbatch, std::max<int64_t>(1, (int64_t{1} << 20) / flops), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          int64_t ia, ib, io;
          offsets(i, ia, ib, io);
          if (softmax)
            product_softmax(ta, tb, M, N, K, a + ia, lda, b + ib, ldb, out + io, ldc, ep);
          else
            sgemm(ta, tb, M, N, K, 1.0f, a + ia, lda, b + ib, ldb, 0.0f, out + io, ldc, &ep);
        }
      });
  return true;
}

Shape reduce_shape(const Shape& in, const std::vector<int64_t>& axes, bool keepdims) {
  std::vector<bool> reduced(in.size(), axes.empty());
  for (int64_t a : axes) reduced[a] = true;
  Shape out;
  for (size_t d = 0; d < in.size(); ++d) {
    if (!reduced[d]) {
      out.push_back(in[d]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  return out;
}

namespace {

// Iterates the input as (outer, reduced, inner) after moving reduced axes together: calls
// f(out_index, in_offset) for every input element, grouped arbitrarily.
template <class F>
void for_each_reduced(const Shape& in, const std::vector<int64_t>& axes, F&& f) {
  const size_t rank = in.size();
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) reduced[a] = true;
  // Output strides (0 for reduced dims) over the input's dims.
  std::vector<int64_t> ostride(rank, 0);
  for (int64_t d = static_cast<int64_t>(rank) - 1, s = 1; d >= 0; --d) {
    if (!reduced[d]) {
      ostride[d] = s;
      s *= in[d];
    }
  }
  const int64_t n = numel(in);
  std::vector<int64_t> idx(rank, 0);
  int64_t oi = 0;
  for (int64_t i = 0; i < n; ++i) {
    f(oi, i);
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      oi += ostride[d];
      if (++idx[d] < in[d]) break;
      oi -= ostride[d] * in[d];
      idx[d] = 0;
    }
  }
}

// Reduction whose reduced axes are consecutive, seen as (outer, n, inner): acc[o * inner + j]
// = step(...step(acc, x[o][0][j])..., x[o][n-1][j]). Contiguous loops, no index arithmetic.
template <class T, class Step>
void reduce_block(const T* in, int64_t outer, int64_t n, int64_t inner, double* acc, Step step) {
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) {
      const T* x = in + o * n;
      double a = acc[o];
      for (int64_t k = 0; k < n; ++k) a = step(a, static_cast<double>(x[k]));
      acc[o] = a;
    }
    return;
  }
  for (int64_t o = 0; o < outer; ++o) {
    double* ac = acc + o * inner;
    for (int64_t k = 0; k < n; ++k) {
      const T* x = in + (o * n + k) * inner;
      for (int64_t j = 0; j < inner; ++j) ac[j] = step(ac[j], static_cast<double>(x[j]));
    }
  }
}

// The (outer, n, inner) split when the reduced axes are consecutive dims; false otherwise.
bool consecutive_block(const Shape& in, const std::vector<int64_t>& axes, int64_t& outer,
                       int64_t& n, int64_t& inner) {
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<bool> reduced(in.size(), axes.empty());
  for (int64_t a : axes) reduced[a] = true;
  int64_t first = -1, last = -1;
  for (int64_t d = 0; d < rank; ++d)
    if (reduced[d]) {
      if (first < 0) first = d;
      last = d;
    }
  if (first < 0) return false;
  for (int64_t d = first; d <= last; ++d)
    if (!reduced[d]) return false;
  outer = n = inner = 1;
  for (int64_t d = 0; d < first; ++d) outer *= in[d];
  for (int64_t d = first; d <= last; ++d) n *= in[d];
  for (int64_t d = last + 1; d < rank; ++d) inner *= in[d];
  return true;
}

}  // namespace

namespace {
// Both element types accumulate in double.
template <class T>
void reduce_any(ReduceOp op, const Shape& in_shape, const T* in, const std::vector<int64_t>& axes,
                T* out) {
  const Shape os = reduce_shape(in_shape, axes, false);
  const int64_t on = numel(os);
  const int64_t count = on == 0 ? 0 : numel(in_shape) / std::max<int64_t>(on, 1);
  std::vector<double> acc(static_cast<size_t>(on));
  double init = 0.0;
  if (op == ReduceOp::Max) init = -std::numeric_limits<double>::infinity();
  if (op == ReduceOp::Min) init = std::numeric_limits<double>::infinity();
  if (op == ReduceOp::Prod) init = 1.0;
  std::fill(acc.begin(), acc.end(), init);
  if (op == ReduceOp::LogSumExp) {  // max first, for a stable log-sum-exp
    std::vector<double> mx(acc.size(), -std::numeric_limits<double>::infinity());
    for_each_reduced(in_shape, axes,
                     [&](int64_t o, int64_t i) { mx[o] = std::max(mx[o], double{in[i]}); });
    for_each_reduced(in_shape, axes,
                     [&](int64_t o, int64_t i) { acc[o] += std::exp(in[i] - mx[o]); });
    for (int64_t o = 0; o < on; ++o) out[o] = static_cast<T>(mx[o] + std::log(acc[o]));
    return;
  }
  int64_t bo = 1, bn = 1, bi = 1;
  if (on > 0 && consecutive_block(in_shape, axes, bo, bn, bi)) {
    double* a = acc.data();
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Mean:
      case ReduceOp::LogSum:
        reduce_block(in, bo, bn, bi, a, [](double s, double x) { return s + x; });
        break;
      case ReduceOp::Max:
        reduce_block(in, bo, bn, bi, a,
                     [](double s, double x) { return (x != x || s != s) ? NAN : std::max(s, x); });
        break;
      case ReduceOp::Min:
        reduce_block(in, bo, bn, bi, a,
                     [](double s, double x) { return (x != x || s != s) ? NAN : std::min(s, x); });
        break;
      case ReduceOp::Prod:
        reduce_block(in, bo, bn, bi, a, [](double s, double x) { return s * x; });
        break;
      case ReduceOp::L1:
        reduce_block(in, bo, bn, bi, a, [](double s, double x) { return s + std::fabs(x); });
        break;
      case ReduceOp::L2:
      case ReduceOp::SumSquare:
        reduce_block(in, bo, bn, bi, a, [](double s, double x) { return s + x * x; });
        break;
      case ReduceOp::LogSumExp:
        break;
    }
  } else {
    for_each_reduced(in_shape, axes, [&](int64_t o, int64_t i) {
      const double x = in[i];
      double& a = acc[o];
      switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Mean:
        case ReduceOp::LogSum:
          a += x;
          break;
        case ReduceOp::Max:
          a = (x != x || a != a) ? NAN : std::max(a, x);
          break;
        case ReduceOp::Min:
          a = (x != x || a != a) ? NAN : std::min(a, x);
          break;
        case ReduceOp::Prod:
          a *= x;
          break;
        case ReduceOp::L1:
          a += std::fabs(x);
          break;
        case ReduceOp::L2:
        case ReduceOp::SumSquare:
          a += x * x;
          break;
        case ReduceOp::LogSumExp:
          break;
      }
    });
  }
  for (int64_t o = 0; o < on; ++o) {
    double v = acc[o];
    if (op == ReduceOp::Mean) v = count ? v / static_cast<double>(count) : NAN;
    if (op == ReduceOp::L2) v = std::sqrt(v);
    if (op == ReduceOp::LogSum) v = std::log(v);
    out[o] = static_cast<T>(v);
  }
}
}  // namespace

void reduce_f32(ReduceOp op, const Shape& in_shape, const float* in,
                const std::vector<int64_t>& axes, float* out) {
  reduce_any(op, in_shape, in, axes, out);
}

void reduce_f64(ReduceOp op, const Shape& in_shape, const double* in,
                const std::vector<int64_t>& axes, double* out) {
  reduce_any(op, in_shape, in, axes, out);
}

void arg_reduce_f32(bool is_max, const Shape& in_shape, const float* in, int64_t axis,
                    bool select_last_index, int64_t* out) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= in_shape[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < in_shape.size(); ++d) inner *= in_shape[d];
  const int64_t n = in_shape[axis];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      const float* x = in + o * n * inner + j;
      int64_t best = 0;
      for (int64_t k = 1; k < n; ++k) {
        const float v = x[k * inner], b = x[best * inner];
        const bool better =
            is_max ? (select_last_index ? v >= b : v > b) : (select_last_index ? v <= b : v < b);
        if (better) best = k;
      }
      out[o * inner + j] = best;
    }
}

namespace {

// The permutation with size-1 dimensions dropped and input dimensions that stay adjacent and in
// order merged: NCHW -> NHWC ([1, C, H, W], perm 0 2 3 1) is [C, H*W] -> [H*W, C].
void merge_dims(const Shape& in_shape, const std::vector<int64_t>& perm, Shape& shape,
                std::vector<int64_t>& order) {
  std::vector<int64_t> kept;  // perm without size-1 dims
  for (int64_t d : perm)
    if (in_shape[static_cast<size_t>(d)] != 1) kept.push_back(d);
  // Runs of consecutive input dims in `kept` become one dim each.
  std::vector<std::pair<int64_t, int64_t>> runs;  // (first input dim, size), in output order
  for (size_t i = 0; i < kept.size();) {
    size_t j = i + 1;
    int64_t size = in_shape[static_cast<size_t>(kept[i])];
    while (j < kept.size() && kept[j] == kept[j - 1] + 1) size *= in_shape[kept[j++]];
    runs.push_back({kept[i], size});
    i = j;
  }
  // Renumber the runs by their position in the input.
  std::vector<size_t> by_input(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) by_input[i] = i;
  std::sort(by_input.begin(), by_input.end(),
            [&](size_t a, size_t b) { return runs[a].first < runs[b].first; });
  shape.assign(runs.size(), 1);
  order.assign(runs.size(), 0);
  for (size_t r = 0; r < by_input.size(); ++r) {
    shape[r] = runs[by_input[r]].second;
    order[by_input[r]] = static_cast<int64_t>(r);
  }
}

// Copies (transposes, copy_pieces) move on the threads from 256 KB on, at least 128 KB a chunk.
// Every element is a copy: any split gives the same bytes. (ViT's [197, 12, 64] -> [12, 197, 64],
// 0.6 MB, and ConvNeXt's NCHW <-> NHWC transposes were serial, and slower at 2 threads than at
// 1 with their data in the other core's cache.)
constexpr int64_t kParallelCopyChunk = 128 * 1024;

// A whole 16 x 16 tile (x: rows C apart; y: rows R apart) in 4 x 4 blocks: four row loads, eight
// shuffles, four column stores a block.
void transpose_tile16(const uint32_t* x, int64_t C, uint32_t* y, int64_t R) {
  for (int64_t rb = 0; rb < 16; rb += 4)
    for (int64_t cb = 0; cb < 16; cb += 4) {
      v4i q[4];
      for (int k = 0; k < 4; ++k) std::memcpy(&q[k], x + (rb + k) * C + cb, sizeof q[k]);
      transpose4x4(q[0], q[1], q[2], q[3]);
      for (int k = 0; k < 4; ++k) std::memcpy(y + (cb + k) * R + rb, &q[k], sizeof q[k]);
    }
}

#ifdef FXWASM_X86_DISPATCH
// The same tile in 8 x 8 blocks of eight-lane rows: eight loads, 24 shuffles and eight stores a
// block, half the memory operations of the 4 x 4 blocks. (Shuffles move bits: the same bytes.)
__attribute__((target("avx2"))) void transpose_tile16_avx2(const uint32_t* x, int64_t C,
                                                           uint32_t* y, int64_t R) {
  for (int64_t rb = 0; rb < 16; rb += 8)
    for (int64_t cb = 0; cb < 16; cb += 8) {
      __m256 r[8], t[8];
      for (int k = 0; k < 8; ++k)
        r[k] = _mm256_loadu_ps(reinterpret_cast<const float*>(x + (rb + k) * C + cb));
      for (int k = 0; k < 8; k += 2) {  // t[k] = r_k[0] r_k+1[0] r_k[1] r_k+1[1] | ...[4] ...[5]
        t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
      }
      for (int h = 0; h < 8; h += 4) {  // r[h + j]: columns j and j + 4 of rows h .. h + 3
        r[h] = _mm256_shuffle_ps(t[h], t[h + 2], 0x44);
        r[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], 0xEE);
        r[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0x44);
        r[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0xEE);
      }
      for (int j = 0; j < 4; ++j) {  // columns j and j + 4, rows 0 .. 7
        t[j] = _mm256_permute2f128_ps(r[j], r[j + 4], 0x20);
        t[j + 4] = _mm256_permute2f128_ps(r[j], r[j + 4], 0x31);
      }
      for (int k = 0; k < 8; ++k)
        _mm256_storeu_ps(reinterpret_cast<float*>(y + (cb + k) * R + rb), t[k]);
    }
}
#endif

// out[b][c][r] = in[b][r][c] for 4-byte elements, in 16 x 16 tiles so that both sides touch
// whole cache lines (the element loop read every output row's elements a whole input row apart:
// 0.9 ns an element on ConvNeXt-T's NCHW <-> NHWC transposes).
void transpose_tiled(const uint32_t* in, uint32_t* out, int64_t batch, int64_t R, int64_t C) {
  constexpr int64_t T = 16;
  void (*tile)(const uint32_t*, int64_t, uint32_t*, int64_t) = transpose_tile16;
#ifdef FXWASM_X86_DISPATCH
  if (cpu_has_avx2()) tile = transpose_tile16_avx2;
#endif
  // Blocks of T rows of every batch item, on the threads.
  const int64_t row_blocks = (R + T - 1) / T;
  auto blocks = [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t b = q / row_blocks, r0 = q % row_blocks * T, r1 = std::min(R, r0 + T);
      const uint32_t* x = in + b * R * C;
      uint32_t* y = out + b * R * C;
      for (int64_t c0 = 0; c0 < C; c0 += T) {
        const int64_t c1 = std::min(C, c0 + T);
        if (r1 - r0 == T && c1 - c0 == T) {
          tile(x + r0 * C + c0, C, y + c0 * R + r0, R);
          continue;
        }
        for (int64_t c = c0; c < c1; ++c)
          for (int64_t r = r0; r < r1; ++r) y[c * R + r] = x[r * C + c];
      }
    }
  };
  const int64_t block_bytes = T * C * static_cast<int64_t>(sizeof(uint32_t));
  parallel_for_inline(batch * row_blocks, std::max<int64_t>(1, kParallelCopyChunk / block_bytes),
                      blocks);
}

}  // namespace

bool transpose_keeps_layout(const Shape& in_shape, const std::vector<int64_t>& perm) {
  // The order in which the dims of more than one element are read must be the input's.
  int64_t last = -1;
  for (int64_t d : perm) {
    if (in_shape[static_cast<size_t>(d)] == 1) continue;
    if (d < last) return false;
    last = d;
  }
  return true;
}

void transpose(const Shape& in_shape, const void* in, const std::vector<int64_t>& perm,
               size_t elem_size, void* out) {
  if (elem_size == 4) {
    Shape shape;
    std::vector<int64_t> order;
    merge_dims(in_shape, perm, shape, order);
    // A batched swap of the last two (merged) dims, with rows long enough to be worth tiling.
    const size_t m = shape.size();
    if (m >= 2 && order[m - 1] == static_cast<int64_t>(m - 2) &&
        order[m - 2] == static_cast<int64_t>(m - 1) && shape[m - 1] >= 8 && shape[m - 2] >= 8) {
      bool leading_in_place = true;
      for (size_t d = 0; d + 2 < m; ++d) leading_in_place &= order[d] == static_cast<int64_t>(d);
      if (leading_in_place) {
        int64_t batch = 1;
        for (size_t d = 0; d + 2 < m; ++d) batch *= shape[d];
        transpose_tiled(static_cast<const uint32_t*>(in), static_cast<uint32_t*>(out), batch,
                        shape[m - 2], shape[m - 1]);
        return;
      }
    }
  }
  const size_t rank = in_shape.size();
  std::vector<int64_t> istride(rank, 1);
  for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d)
    istride[d] = istride[d + 1] * in_shape[d + 1];
  Shape os(rank);
  std::vector<int64_t> step(rank);  // input stride of each output dim
  for (size_t d = 0; d < rank; ++d) {
    os[d] = in_shape[perm[d]];
    step[d] = istride[perm[d]];
  }
  const int64_t n = numel(os);
  const auto* src = static_cast<const unsigned char*>(in);
  auto* dst = static_cast<unsigned char*>(out);
  if (rank == 0) {
    std::memcpy(dst, src, elem_size);
    return;
  }
  const int64_t inner = os[rank - 1], inner_step = step[rank - 1];
  if (inner == 0) return;
  // Output rows [o0, o1) (of `inner` elements), each read with an odometer over the outer dims
  // started at o0.
  auto rows = [&](int64_t o0, int64_t o1) {
    std::vector<int64_t> idx(rank, 0);
    int64_t ii = 0;
    for (int64_t d = static_cast<int64_t>(rank) - 2, q = o0; d >= 0; --d) {
      idx[d] = q % os[d];
      q /= os[d];
      ii += idx[d] * step[d];
    }
    for (int64_t o = o0 * inner; o < o1 * inner; o += inner) {
      if (inner_step == 1) {  // the last dim stays last: whole rows (attention's head splits)
        std::memcpy(dst + o * elem_size, src + ii * elem_size,
                    static_cast<size_t>(inner) * elem_size);
      } else if (elem_size == 4) {
        const auto* s4 = reinterpret_cast<const uint32_t*>(src);
        auto* d4 = reinterpret_cast<uint32_t*>(dst);
        for (int64_t k = 0; k < inner; ++k) d4[o + k] = s4[ii + k * inner_step];
      } else {
        for (int64_t k = 0; k < inner; ++k)
          std::memcpy(dst + (o + k) * elem_size, src + (ii + k * inner_step) * elem_size,
                      elem_size);
      }
      for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d) {
        ii += step[d];
        if (++idx[d] < os[d]) break;
        ii -= step[d] * os[d];
        idx[d] = 0;
      }
    }
  };
  const int64_t row_bytes = inner * static_cast<int64_t>(elem_size);
  parallel_for_inline(n / inner, std::max<int64_t>(1, kParallelCopyChunk / row_bytes), rows);
}

void copy_pieces(const std::vector<CopyPiece>& pieces) {
  constexpr size_t kChunk = 64 * 1024;
  size_t total = 0;
  for (const CopyPiece& p : pieces) total += p.bytes;
  if (num_threads() < 2 || total < 2 * static_cast<size_t>(kParallelCopyChunk)) {
    for (const CopyPiece& p : pieces)
      if (p.bytes) std::memcpy(p.dst, p.src, p.bytes);
    return;
  }
  // Chunk k of piece i: (i, k); the chunks of all pieces numbered in a row.
  std::vector<std::pair<size_t, size_t>> chunks;
  for (size_t i = 0; i < pieces.size(); ++i)
    for (size_t at = 0; at < pieces[i].bytes; at += kChunk) chunks.emplace_back(i, at);
  parallel_for(static_cast<int64_t>(chunks.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      const CopyPiece& p = pieces[chunks[static_cast<size_t>(c)].first];
      const size_t at = chunks[static_cast<size_t>(c)].second;
      std::memcpy(static_cast<uint8_t*>(p.dst) + at, static_cast<const uint8_t*>(p.src) + at,
                  std::min(kChunk, p.bytes - at));
    }
  });
}

}  // namespace fx::kernels
