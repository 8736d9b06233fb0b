// Quantized ONNX ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear (per tensor and
// per axis, uint8/int8), and the integer products MatMulInteger, ConvInteger, QLinearMatMul,
// QLinearConv on qgemm (int32 accumulation). Rounding is half to even and results saturate, as
// ONNX's reference and onnxruntime do. The executor's plan also runs DequantizeLinear -> Conv /
// MatMul -> QuantizeLinear (QDQ) as QLinearConv / QLinearMatMul (run_qdq below; the pattern is
// matched in quant_plan.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "exec/ops.h"
#include "exec/quant_plan.h"
#include "kernels/qgemm.h"

namespace fx::exec {

namespace {

using kernels::QType;

bool is_q8(Dtype d) { return d == Dtype::UInt8 || d == Dtype::Int8; }
QType qtype(Dtype d) { return d == Dtype::UInt8 ? QType::U8 : QType::S8; }

// Round half to even (the default floating-point rounding mode), then saturate to T.
template <class T>
T saturate_round(float v) {
  const float lo = static_cast<float>(std::numeric_limits<T>::min());
  const float hi = static_cast<float>(std::numeric_limits<T>::max());
  const float r = std::nearbyint(v);
  if (!(r >= lo)) return std::isnan(r) ? T(0) : std::numeric_limits<T>::min();
  return r > hi ? std::numeric_limits<T>::max() : static_cast<T>(r);
}

// One tensor's quantization: scales and zero points, one of each or one per index along `axis`.
struct QuantParams {
  std::vector<float> scale;
  std::vector<int32_t> zp;  // as many as scale (zeros when the zero point is omitted)
  Dtype qdtype = Dtype::UInt8;
  int64_t axis = -1;  // -1: per tensor
};

// The scale input `si` and zero point input `zi` (optional) of c for a tensor of `shape`; a
// scale of more than one element is per axis (`axis`, opset 13's attribute, default 1).
QuantParams quant_params(const OpCall& c, size_t si, size_t zi, const std::vector<int64_t>& shape,
                         int64_t axis, const char* what) {
  QuantParams q;
  const Value& s = c.input(si);
  if (s.dtype() != Dtype::Float32)
    c.unsupported(std::string(what) + " scale of element type " + dtype_name(s.dtype()));
  if (s.shape().size() > 1) c.fail(std::string(what) + " scale must be a scalar or 1-D");
  q.scale.assign(s.data<float>(), s.data<float>() + s.numel());
  if (q.scale.empty()) c.fail(std::string(what) + " scale is empty");
  if (c.has_input(zi)) {
    const Value& z = c.input(zi);
    q.qdtype = z.dtype();
    if (!is_q8(z.dtype()) && z.dtype() != Dtype::Int32)
      c.unsupported(std::string(what) + " zero point of element type " + dtype_name(z.dtype()));
    if (z.numel() != s.numel())
      c.fail(std::string(what) + " zero point has " + std::to_string(z.numel()) +
             " elements, its scale " + std::to_string(s.numel()));
    for (int64_t i = 0; i < z.numel(); ++i)
      q.zp.push_back(z.dtype() == Dtype::UInt8  ? z.data<uint8_t>()[i]
                     : z.dtype() == Dtype::Int8 ? z.data<int8_t>()[i]
                                                : z.data<int32_t>()[i]);
  } else {
    q.zp.assign(q.scale.size(), 0);
  }
  if (q.scale.size() > 1 || s.shape().size() == 1) {
    const int64_t rank = static_cast<int64_t>(shape.size());
    if (q.scale.size() > 1 || rank > 0) {
      q.axis = normalize_axis(c, axis, rank, "axis");
      if (static_cast<int64_t>(q.scale.size()) != shape[q.axis]) {
        if (q.scale.size() != 1)
          c.fail(std::string(what) + " scale has " + std::to_string(q.scale.size()) +
                 " elements for axis " + std::to_string(q.axis) + " of size " +
                 std::to_string(shape[q.axis]));
        q.axis = -1;
      }
    }
  }
  return q;
}

// (outer, channels, inner) of `shape` around q.axis.
void axis_split(const std::vector<int64_t>& shape, int64_t axis, int64_t& outer, int64_t& ch,
                int64_t& inner) {
  outer = 1, ch = 1, inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    (axis < 0 || d > axis ? inner : d < axis ? outer : ch) *= shape[d];
}

// y = saturate(round_half_even(x / s) + z) over one span with one scale (vectorisable: the
// rounding adds and subtracts 1.5 * 2^23, exact once |x / s| is bounded by 2^22, beyond which
// every 8-bit result saturates anyway; NaN gives 0).
template <class T, class X>
void quantize_span(const X* x, int64_t n, float s, float z, T* y) {
  typedef float f4 __attribute__((vector_size(16)));
  typedef int32_t i4 __attribute__((vector_size(16)));
  typedef X x4 __attribute__((vector_size(16)));
  const float lo = static_cast<float>(std::numeric_limits<T>::min());
  const float hi = static_cast<float>(std::numeric_limits<T>::max());
  const float magic = 12582912.0f, bound = 4194304.0f;
  int64_t i = 0;
  // Four lanes at a time (SSE / simd128; GCC does not vectorise the scalar loop below).
  const f4 vs = {s, s, s, s}, vz = {z, z, z, z}, vmagic = {magic, magic, magic, magic};
  const f4 vb = {bound, bound, bound, bound}, vlo = {lo, lo, lo, lo}, vhi = {hi, hi, hi, hi};
  for (; i + 4 <= n; i += 4) {
    x4 raw;
    std::memcpy(&raw, x + i, 16);
    f4 v = __builtin_convertvector(raw, f4) / vs;
    v = v == v ? v : -vz;
    v = v < -vb ? -vb : v;
    v = v > vb ? vb : v;
    v = ((v + vmagic) - vmagic) + vz;
    v = v < vlo ? vlo : v;
    v = v > vhi ? vhi : v;
    const i4 q = __builtin_convertvector(v, i4);
    for (int l = 0; l < 4; ++l) y[i + l] = static_cast<T>(q[l]);
  }
  for (; i < n; ++i) {
    float v = static_cast<float>(x[i]) / s;
    v = v == v ? v : -z;
    v = v < -bound ? -bound : v > bound ? bound : v;
    v = ((v + magic) - magic) + z;
    v = v < lo ? lo : v > hi ? hi : v;
    y[i] = static_cast<T>(static_cast<int32_t>(v));
  }
}

template <class T>
void quantize_into(const OpCall& c, const Value& x, const QuantParams& q, T* y) {
  int64_t outer, ch, inner;
  axis_split(x.shape(), q.axis, outer, ch, inner);
  const bool f32 = x.dtype() == Dtype::Float32;
  if (!f32 && x.dtype() != Dtype::Int32)
    c.unsupported(std::string("QuantizeLinear input of element type ") + dtype_name(x.dtype()));
  for (int64_t o = 0, i = 0; o < outer; ++o)
    for (int64_t k = 0; k < ch; ++k, i += inner) {
      const float s = q.scale[q.axis < 0 ? 0 : k];
      const float z = static_cast<float>(q.zp[q.axis < 0 ? 0 : k]);
      if (f32)
        quantize_span(x.data<float>() + i, inner, s, z, y + i);
      else
        quantize_span(x.data<int32_t>() + i, inner, s, z, y + i);
    }
}

void quantize_linear(OpCall& c) {
  const Value& x = c.input(0);
  const QuantParams q = quant_params(c, 1, 2, x.shape(), c.attr_int("axis", 1), "y");
  if (!is_q8(q.qdtype)) c.unsupported(std::string("QuantizeLinear to ") + dtype_name(q.qdtype));
  Value y = new_value(q.qdtype, x.shape());
  if (q.qdtype == Dtype::UInt8)
    quantize_into(c, x, q, y.mutable_data<uint8_t>());
  else
    quantize_into(c, x, q, y.mutable_data<int8_t>());
  c.outputs.push_back(std::move(y));
}

void dequantize_linear(OpCall& c) {
  const Value& x = c.input(0);
  if (!is_q8(x.dtype()) && x.dtype() != Dtype::Int32)
    c.unsupported(std::string("DequantizeLinear input of element type ") + dtype_name(x.dtype()));
  const QuantParams q = quant_params(c, 1, 2, x.shape(), c.attr_int("axis", 1), "x");
  if (c.has_input(2) && q.qdtype != x.dtype()) c.fail("x and x_zero_point differ in element type");
  Value y = new_value(Dtype::Float32, x.shape());
  int64_t outer, ch, inner;
  axis_split(x.shape(), q.axis, outer, ch, inner);
  float* out = y.mutable_data<float>();
  // In float, as the reference ((x - zp) of int32 could overflow); one loop per element type.
  auto span = [](const auto* v, int64_t n, float s, float z, float* o) {
    for (int64_t e = 0; e < n; ++e) o[e] = (static_cast<float>(v[e]) - z) * s;
  };
  for (int64_t o = 0, i = 0; o < outer; ++o)
    for (int64_t k = 0; k < ch; ++k, i += inner) {
      const float s = q.scale[q.axis < 0 ? 0 : k];
      const auto z = static_cast<float>(q.zp[q.axis < 0 ? 0 : k]);
      if (x.dtype() == Dtype::UInt8)
        span(x.data<uint8_t>() + i, inner, s, z, out + i);
      else if (x.dtype() == Dtype::Int8)
        span(x.data<int8_t>() + i, inner, s, z, out + i);
      else
        span(x.data<int32_t>() + i, inner, s, z, out + i);
    }
  c.outputs.push_back(std::move(y));
}

// uint8 quantization of x over [min(0, min x), max(0, max x)] (onnxruntime's formula: a range of
// zero has scale 1).
void dynamic_quantize_linear(OpCall& c) {
  const Value& x = c.input(0);
  need_f32(c, x, "DynamicQuantizeLinear input");
  const float* p = x.data<float>();
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < x.numel(); ++i) {
    lo = std::min(lo, p[i]);
    hi = std::max(hi, p[i]);
  }
  const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  const float zp_f = std::nearbyint(std::min(255.0f, std::max(0.0f, 0.0f - lo / scale)));
  const auto zp = static_cast<uint8_t>(zp_f);
  Value y = new_value(Dtype::UInt8, x.shape());
  uint8_t* q = y.mutable_data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i)
    q[i] = saturate_round<uint8_t>(std::nearbyint(p[i] / scale) + zp_f);
  Value s = new_value(Dtype::Float32, {});
  *s.mutable_data<float>() = scale;
  Value z = new_value(Dtype::UInt8, {});
  *z.mutable_data<uint8_t>() = zp;
  c.outputs.push_back(std::move(y));
  c.outputs.push_back(std::move(s));
  c.outputs.push_back(std::move(z));
}

// ---- integer products ----

// The zero point input i of an integer product: its values (one, or one per row / column of
// `count`), checked against the operand's type; {0} when omitted.
std::vector<int32_t> zero_points(const OpCall& c, size_t i, Dtype operand, int64_t count,
                                 const char* what) {
  if (!c.has_input(i)) return {0};
  const Value& z = c.input(i);
  if (z.dtype() != operand)
    c.fail(std::string(what) + " zero point has element type " + dtype_name(z.dtype()) +
           ", its operand " + dtype_name(operand));
  if (z.numel() != 1 && z.numel() != count)
    c.unsupported(std::string(what) + " zero point of " + std::to_string(z.numel()) +
                  " elements (one, or " + std::to_string(count) + ")");
  std::vector<int32_t> out;
  for (int64_t k = 0; k < z.numel(); ++k)
    out.push_back(operand == Dtype::UInt8 ? z.data<uint8_t>()[k] : z.data<int8_t>()[k]);
  return out;
}

std::vector<float> scales(const OpCall& c, size_t i, int64_t count, const char* what) {
  const Value& s = c.input(i);
  need_f32(c, s, what);
  if (s.numel() != 1 && s.numel() != count)
    c.unsupported(std::string(what) + " of " + std::to_string(s.numel()) + " elements (one, or " +
                  std::to_string(count) + ")");
  return std::vector<float>(s.data<float>(), s.data<float>() + s.numel());
}

// Where a QLinear op's result goes: requantized to y's scale and zero point, or (integer ops)
// int32 as it is.
struct Output {
  bool requant = false;
  Dtype dtype = Dtype::Int32;
  std::vector<float> scale;   // a_scale * b_scale / y_scale: one, or per row / column
  std::vector<float> offset;  // a float bias / y_scale (QDQ fusion), or empty
  std::vector<int32_t> bias;  // int32 bias, or empty
  int32_t zp = 0;
  int32_t lo_q = -(1 << 30), hi_q = 1 << 30;  // a fused Relu/Clip
};

// Bounds of a fused Relu/Clip in y's quantized domain (quantization is monotone, so clamping
// before it is clamping after it).
void quantized_clamp(OpCall& c, Output& o, float y_scale) {
  float lo, hi;
  fused_clamp(c, lo, hi);
  auto q = [&](float v) {
    return static_cast<int32_t>(std::max(-1e9f, std::min(1e9f, std::nearbyint(v / y_scale)))) +
           o.zp;
  };
  if (lo > -__builtin_inff()) o.lo_q = q(lo);
  if (hi < __builtin_inff()) o.hi_q = q(hi);
}

// Writes rows x cols int32 results `acc` (row stride lda) to `out` (row stride ldo) through o;
// `first` is the index of row 0 / column 0 in o's per-row (`per_row`) or per-column vectors.
void emit(const Output& o, bool per_row, int64_t first, int64_t rows, int64_t cols,
          const int32_t* acc, int64_t lda, Value& out, int64_t out_offset, int64_t ldo) {
  if (!o.requant) {
    int32_t* y = out.mutable_data<int32_t>() + out_offset;
    for (int64_t i = 0; i < rows; ++i) std::copy(acc + i * lda, acc + i * lda + cols, y + i * ldo);
    return;
  }
  kernels::Requant r;
  r.per_row = per_row;
  r.scale_count = static_cast<int64_t>(o.scale.size());
  r.scale = o.scale.data() + (r.scale_count == 1 ? 0 : first);
  r.bias_i32 = o.bias.empty() ? nullptr : o.bias.data() + first;
  r.offset = o.offset.empty() ? nullptr : o.offset.data() + first;
  r.zp = o.zp;
  r.type = qtype(o.dtype);
  r.lo_q = o.lo_q;
  r.hi_q = o.hi_q;
  void* y = o.dtype == Dtype::UInt8 ? static_cast<void*>(out.mutable_data<uint8_t>() + out_offset)
                                    : static_cast<void*>(out.mutable_data<int8_t>() + out_offset);
  kernels::requantize(r, rows, cols, acc, lda, y, ldo);
}

// Inputs of a fused QDQ pattern that are constants (run_qdq): the op's node is the Conv /
// MatMul / Gemm, whose arguments are not the op's inputs, so is_constant_input cannot tell.
thread_local const std::vector<const Tensor*>* t_fused_constants = nullptr;

bool constant_input(const OpCall& c, size_t i) {
  if (t_fused_constants) return i < t_fused_constants->size() && (*t_fused_constants)[i];
  return is_constant_input(c, i);
}

thread_local std::vector<int32_t> t_acc;  // accumulators, reused across calls

// Fails unless a x b int32 words (an operand packed as int16 pairs or int8 quads, or the
// accumulators) stay within 2^29 words (2 GiB): checked in 64 bits before allocating, as
// wasm32's size_t is 32 bits.
void check_words(const OpCall& c, int64_t a, int64_t b, const char* what) {
  int64_t n = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &n) || n > (int64_t{1} << 29))
    c.unsupported(std::string(what) + " of " + std::to_string(a) + " x " + std::to_string(b) +
                  " elements (too large for the integer kernels)");
}

int32_t* accumulators(const OpCall& c, int64_t rows, int64_t cols) {
  check_words(c, rows, cols, "a product");
  const auto n = static_cast<size_t>(rows * cols);
  if (t_acc.size() < n) t_acc.resize(n);
  return t_acc.data();
}

// Matrix product of a (input ai, zero points azp) and b (input bi, bzp) with numpy's batching.
// `o` says what to write; b's per-column scales/zero points need a 2-D b.
void integer_matmul(OpCall& c, size_t ai, size_t bi, const std::vector<int32_t>& azp,
                    const std::vector<int32_t>& bzp, const Output& o, bool trans_b = false) {
  const Value& a = c.input(ai);
  const Value& b = c.input(bi);
  if (!is_q8(a.dtype()) || !is_q8(b.dtype()))
    c.unsupported(std::string("operands of element types ") + dtype_name(a.dtype()) + " and " +
                  dtype_name(b.dtype()));
  std::vector<int64_t> as = a.shape(), bs = b.shape();
  if (as.empty() || bs.empty()) c.fail("operands must have rank >= 1");
  if (trans_b) {  // Gemm's transB (QDQ fusion): a 2-D N x K b
    if (bs.size() != 2) c.fail("a transposed B must be 2-D");
    std::swap(bs[0], bs[1]);
  }
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K)
    c.fail("inner dimensions differ (" + std::to_string(K) + " and " +
           std::to_string(bs[bs.size() - 2]) + ")");
  if (azp.size() > 1 && (as.size() != 2 || static_cast<int64_t>(azp.size()) != M))
    c.unsupported("a per-row a zero point for an A that is not 2-D");
  if (bzp.size() > 1 && (b.shape().size() != 2 || static_cast<int64_t>(bzp.size()) != N))
    c.unsupported("a per-column b zero point for a B that is not 2-D");
  // Batch dims, broadcast.
  const size_t rank = std::max(as.size(), bs.size());
  std::vector<int64_t> batch(rank - 2), a_bst(rank - 2, 0), b_bst(rank - 2, 0);
  int64_t batches = 1;
  {
    int64_t sa = M * K, sb = K * N;
    for (int64_t d = static_cast<int64_t>(rank) - 3; d >= 0; --d) {
      const int64_t da = d - (static_cast<int64_t>(rank) - static_cast<int64_t>(as.size()));
      const int64_t db = d - (static_cast<int64_t>(rank) - static_cast<int64_t>(bs.size()));
      const int64_t ea = da >= 0 ? as[da] : 1, eb = db >= 0 ? bs[db] : 1;
      if (ea != eb && ea != 1 && eb != 1) c.fail("batch dimensions do not broadcast");
      batch[d] = std::max(ea, eb);
      a_bst[d] = ea == 1 ? 0 : sa;
      b_bst[d] = eb == 1 ? 0 : sb;
      sa *= ea;
      sb *= eb;
      batches *= batch[d];
    }
  }
  std::vector<int64_t> out_shape = batch;
  if (!a_vec) out_shape.push_back(M);
  if (!b_vec) out_shape.push_back(N);
  Value y = new_value(o.requant ? o.dtype : Dtype::Int32, out_shape);
  // A 2-D b (weights) shared by every batch: every batch's rows form one product.
  const bool shared_b = bs.size() == 2;
  const int64_t rows = shared_b ? batches * M : M;
  const int64_t runs = shared_b ? 1 : batches;
  check_words(c, rows, K + 1, "an operand");
  check_words(c, K + 1, N, "an operand");
  auto pack_b = [&](int64_t offset) {
    return kernels::QPacked::right(
        K, N, static_cast<const uint8_t*>(static_cast<const void*>(b.data<uint8_t>())) + offset,
        qtype(b.dtype()), trans_b ? K : N, trans_b, bzp.data(), bzp.size() > 1);
  };
  std::shared_ptr<const void> cached;
  if (shared_b && constant_input(c, bi)) {
    std::vector<int64_t> key = {3, K, N, trans_b};
    key.insert(key.end(), bzp.begin(), bzp.end());
    cached = derived_from_constant(
        b, key, [&] { return std::make_shared<const kernels::QPacked>(pack_b(0)); });
  }
  int32_t* acc = accumulators(c, rows, N);
  // Whether a's batches are contiguous as one rows x K matrix (always, for a dense a without
  // broadcast over its batch dims).
  bool a_dense = true;
  for (size_t d = 0; d + 2 < rank; ++d)
    if (batch[d] != 1 && a_bst[d] == 0) a_dense = false;
  if (shared_b && !a_dense) c.unsupported("an A broadcast over batch dims with a 2-D B");
  for (int64_t r = 0; r < runs; ++r) {
    int64_t ao = 0, bo = 0;
    for (int64_t d = static_cast<int64_t>(rank) - 3, rem = r; d >= 0; --d) {
      ao += (rem % batch[d]) * a_bst[d];
      bo += (rem % batch[d]) * b_bst[d];
      rem /= batch[d];
    }
    const kernels::QPacked A = kernels::QPacked::left(
        rows, K, a.data<uint8_t>() + ao, qtype(a.dtype()), K, azp.data(), azp.size() > 1);
    std::optional<kernels::QPacked> own;
    if (!cached) own.emplace(pack_b(bo));
    const kernels::QPacked& B = cached ? *static_cast<const kernels::QPacked*>(cached.get()) : *own;
    kernels::qgemm(A, B, acc, N);
    emit(o, false, 0, rows, N, acc, N, y, r * M * N, N);
  }
  c.outputs.push_back(std::move(y));
}

void matmul_integer(OpCall& c) {
  const Value& a = c.input(0);
  const Value& b = c.input(1);
  const int64_t M = a.shape().size() >= 2 ? a.shape()[a.shape().size() - 2] : 1;
  const int64_t N = b.shape().empty() ? 1 : b.shape().back();
  integer_matmul(c, 0, 1, zero_points(c, 2, a.dtype(), M, "a"),
                 zero_points(c, 3, b.dtype(), N, "b"), Output{});
}

// y's requantization for QLinear ops: scale a_scale * b_scale[k] / y_scale, as onnxruntime.
Output qlinear_output(OpCall& c, const std::vector<float>& as, const std::vector<float>& bs,
                      size_t ys_i, size_t yzp_i) {
  Output o;
  o.requant = true;
  const std::vector<float> ys = scales(c, ys_i, 1, "y_scale");
  o.dtype = c.has_input(yzp_i) ? c.input(yzp_i).dtype() : Dtype::UInt8;
  if (!is_q8(o.dtype)) c.unsupported(std::string("y of element type ") + dtype_name(o.dtype));
  o.zp = zero_points(c, yzp_i, o.dtype, 1, "y")[0];
  for (float b : bs) o.scale.push_back(as[0] * b / ys[0]);
  quantized_clamp(c, o, ys[0]);
  return o;
}

// QLinearMatMul. When the QDQ fusion runs a Gemm through it, c's attributes are the Gemm's
// (transB) and input 8 is its bias C (float32 or int32, one value per column).
void qlinear_matmul_impl(OpCall& c) {
  const Value& a = c.input(0);
  const Value& b = c.input(3);
  const bool trans_b = c.attr_int("transB", 0) != 0;
  const int64_t M = a.shape().size() >= 2 ? a.shape()[a.shape().size() - 2] : 1;
  const int64_t N = b.shape().empty() ? 1 : trans_b ? b.shape()[0] : b.shape().back();
  const std::vector<float> as = scales(c, 1, 1, "a_scale");
  const std::vector<float> bs = scales(c, 4, N, "b_scale");
  Output o = qlinear_output(c, as, bs, 6, 7);
  if (c.has_input(8)) {
    const Value& bias = c.input(8);
    if (bias.numel() != N) c.fail("the bias must have one value per column");
    const float ys = c.input(6).data<float>()[0];
    if (bias.dtype() == Dtype::Int32)
      o.bias.assign(bias.data<int32_t>(), bias.data<int32_t>() + N);
    else if (bias.dtype() == Dtype::Float32)
      for (int64_t j = 0; j < N; ++j) o.offset.push_back(bias.data<float>()[j] / ys);
    else
      c.unsupported(std::string("a bias of element type ") + dtype_name(bias.dtype()));
    if (o.scale.size() == 1 && N > 1) o.scale.assign(static_cast<size_t>(N), o.scale[0]);
  }
  integer_matmul(c, 0, 3, zero_points(c, 2, a.dtype(), M, "a"),
                 zero_points(c, 5, b.dtype(), N, "b"), o, trans_b);
}

// ---- convolutions ----

struct ConvAttrs {
  std::optional<std::vector<int64_t>> kernel_shape, strides, dilations, pads;
  std::string auto_pad;
  int64_t group = 1;
};

struct ConvGeometry {
  int64_t N, C, H, W, M, KH, KW, sh, sw, dh, dw, pt, pl, pb, pr, group, OH, OW;
};

ConvGeometry conv_geometry(const OpCall& c, const Value& x, const Value& w) {
  std::optional<ConvAttrs> scratch;
  const ConvAttrs& a = node_attrs(c, scratch, [&] {
    ConvAttrs r;
    auto ints = [&](const char* n) -> std::optional<std::vector<int64_t>> {
      if (!c.has_attr(n)) return std::nullopt;
      return c.attr_ints(n);
    };
    r.kernel_shape = ints("kernel_shape");
    r.strides = ints("strides");
    r.dilations = ints("dilations");
    r.pads = ints("pads");
    r.auto_pad = c.attr_string("auto_pad", "NOTSET");
    r.group = c.attr_int("group", 1);
    return r;
  });
  const auto& xs = x.shape();
  const auto& ws = w.shape();
  if (xs.size() < 3 || ws.size() != xs.size())
    c.fail("input and weight must have the same rank (>= 3)");
  const size_t sp = xs.size() - 2;
  if (sp > 2) c.unsupported(std::to_string(sp) + "-D spatial inputs (only 1-D and 2-D)");
  const std::vector<int64_t> k =
      a.kernel_shape.value_or(std::vector<int64_t>(ws.begin() + 2, ws.end()));
  const std::vector<int64_t> st = a.strides.value_or(std::vector<int64_t>(sp, 1));
  const std::vector<int64_t> dl = a.dilations.value_or(std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = a.pads.value_or(std::vector<int64_t>(2 * sp, 0));
  if (k.size() != sp || st.size() != sp || dl.size() != sp || pads.size() != 2 * sp)
    c.fail("kernel_shape/strides/dilations/pads do not match the number of spatial dims");
  for (size_t d = 0; d < sp; ++d) {
    if (st[d] < 1 || dl[d] < 1 || k[d] < 1) c.fail("kernel, strides and dilations must be >= 1");
    if (k[d] != ws[2 + d]) c.fail("kernel_shape does not match the weight");
    const int64_t in = xs[2 + d];
    if (a.auto_pad == "VALID") {
      pads[d] = pads[d + sp] = 0;
    } else if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
      const int64_t out = (in + st[d] - 1) / st[d];
      const int64_t total = std::max<int64_t>(0, (out - 1) * st[d] + (k[d] - 1) * dl[d] + 1 - in);
      const int64_t small = total / 2, big = total - small;
      pads[d] = a.auto_pad == "SAME_UPPER" ? small : big;
      pads[d + sp] = a.auto_pad == "SAME_UPPER" ? big : small;
    } else if (a.auto_pad != "NOTSET") {
      c.fail("auto_pad '" + a.auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
    }
  }
  ConvGeometry g{};
  g.N = xs[0], g.C = xs[1], g.M = ws[0], g.group = a.group;
  if (sp == 1) {
    g.H = 1, g.W = xs[2], g.KH = 1, g.KW = k[0], g.sh = 1, g.sw = st[0], g.dh = 1, g.dw = dl[0];
    g.pt = 0, g.pb = 0, g.pl = pads[0], g.pr = pads[1];
  } else {
    g.H = xs[2], g.W = xs[3], g.KH = k[0], g.KW = k[1], g.sh = st[0], g.sw = st[1];
    g.dh = dl[0], g.dw = dl[1], g.pt = pads[0], g.pl = pads[1], g.pb = pads[2], g.pr = pads[3];
  }
  if (g.group < 1 || g.C % g.group || g.M % g.group)
    c.fail("group must divide the input and output channels");
  if (ws[1] != g.C / g.group)
    c.fail("weight has " + std::to_string(ws[1]) + " input channels per group, expected " +
           std::to_string(g.C / g.group));
  g.OH = (g.H + g.pt + g.pb - g.dh * (g.KH - 1) - 1) / g.sh + 1;
  g.OW = (g.W + g.pl + g.pr - g.dw * (g.KW - 1) - 1) / g.sw + 1;
  if (g.OH < 1 || g.OW < 1) c.fail("the output would be empty");
  return g;
}

// Convolution of x (input xi, one zero point) with w (input wi, zero points one or per output
// channel) as, per image and group, W_g (M/group x K) times the image's im2col (K x OH*OW).
void integer_conv(OpCall& c, size_t xi, size_t wi, int32_t xzp, const std::vector<int32_t>& wzp,
                  const Output& o) {
  const Value& x = c.input(xi);
  const Value& w = c.input(wi);
  if (!is_q8(x.dtype()) || !is_q8(w.dtype()))
    c.unsupported(std::string("operands of element types ") + dtype_name(x.dtype()) + " and " +
                  dtype_name(w.dtype()));
  const ConvGeometry g = conv_geometry(c, x, w);
  const int64_t Cg = g.C / g.group, Mg = g.M / g.group, K = Cg * g.KH * g.KW, P = g.OH * g.OW;
  std::vector<int64_t> out_shape = {g.N, g.M};
  if (x.shape().size() == 4) out_shape.push_back(g.OH);
  out_shape.push_back(g.OW);
  Value y = new_value(o.requant ? o.dtype : Dtype::Int32, out_shape);
  check_words(c, Mg, K + 1, "a weight");
  check_words(c, K + 1, P, "an image's im2col");
  // uint8 images and symmetric int8 weights: four products per lane where the CPU has them
  // (the image's zero point then comes out as x_zp * row sum of the weights, subtracted below).
  const bool quads = kernels::QPacked::u8s8_available() && x.dtype() == Dtype::UInt8 &&
                     w.dtype() == Dtype::Int8 &&
                     std::all_of(wzp.begin(), wzp.end(), [](int32_t z) { return z == 0; });
  auto pack = [&] {
    auto packs = std::make_shared<std::vector<kernels::QPacked>>();
    for (int64_t gi = 0; gi < g.group; ++gi)
      packs->push_back(
          quads ? kernels::QPacked::left_s8_quads(Mg, K, w.data<int8_t>() + gi * Mg * K, K)
                : kernels::QPacked::left(Mg, K, w.data<uint8_t>() + gi * Mg * K, qtype(w.dtype()),
                                         K, wzp.data() + (wzp.size() > 1 ? gi * Mg : 0),
                                         wzp.size() > 1));
    return packs;
  };
  std::shared_ptr<const void> weights;
  if (constant_input(c, wi)) {
    std::vector<int64_t> key = {4, g.M, K, g.group, quads};
    key.insert(key.end(), wzp.begin(), wzp.end());
    weights = derived_from_constant(w, key, pack);
  } else {
    weights = pack();
  }
  const auto& packs = *static_cast<const std::vector<kernels::QPacked>*>(weights.get());
  int32_t* acc = accumulators(c, Mg, P);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gi = 0; gi < g.group; ++gi) {
      const uint8_t* image = x.data<uint8_t>() + (n * g.C + gi * Cg) * g.H * g.W;
      if (quads) {
        const kernels::QPacked B = kernels::QPacked::right_im2col_u8_quads(
            image, Cg, g.H, g.W, g.KH, g.KW, g.sh, g.sw, g.pt, g.pl, g.dh, g.dw, g.OH, g.OW,
            static_cast<uint8_t>(xzp));
        kernels::qgemm(packs[gi], B, acc, P);
        const std::vector<int32_t>& sums = packs[gi].row_sums();
        if (xzp != 0)
          for (int64_t m = 0; m < Mg; ++m) {
            const int32_t shift = xzp * sums[m];
            for (int64_t q = 0; q < P; ++q) acc[m * P + q] -= shift;
          }
      } else {
        const kernels::QPacked B =
            kernels::QPacked::right_im2col(image, qtype(x.dtype()), Cg, g.H, g.W, g.KH, g.KW, g.sh,
                                           g.sw, g.pt, g.pl, g.dh, g.dw, g.OH, g.OW, xzp);
        kernels::qgemm(packs[gi], B, acc, P);
      }
      emit(o, true, gi * Mg, Mg, P, acc, P, y, (n * g.M + gi * Mg) * P, P);
    }
  c.outputs.push_back(std::move(y));
}

void conv_integer(OpCall& c) {
  const Value& x = c.input(0);
  const Value& w = c.input(1);
  const std::vector<int32_t> xzp = zero_points(c, 2, x.dtype(), 1, "x");
  const int64_t M = w.shape().empty() ? 1 : w.shape()[0];
  integer_conv(c, 0, 1, xzp[0], zero_points(c, 3, w.dtype(), M, "w"), Output{});
}

// QLinearConv. Its bias B is int32 at scale x_scale * w_scale; a float32 B (what the QDQ fusion
// passes for a float bias) is added in float before requantizing.
void qlinear_conv_impl(OpCall& c) {
  const Value& x = c.input(0);
  const Value& w = c.input(3);
  const int64_t M = w.shape().empty() ? 1 : w.shape()[0];
  const std::vector<float> xs = scales(c, 1, 1, "x_scale");
  const std::vector<float> ws = scales(c, 4, M, "w_scale");
  Output o = qlinear_output(c, xs, ws, 6, 7);
  if (c.has_input(8)) {
    const Value& b = c.input(8);
    if (b.numel() != M) c.fail("B must have one value per output channel");
    const float ys = c.input(6).data<float>()[0];
    if (b.dtype() == Dtype::Int32)
      o.bias.assign(b.data<int32_t>(), b.data<int32_t>() + M);
    else if (b.dtype() == Dtype::Float32)
      for (int64_t m = 0; m < M; ++m) o.offset.push_back(b.data<float>()[m] / ys);
    else
      c.unsupported(std::string("B of element type ") + dtype_name(b.dtype()));
  }
  if (o.scale.size() == 1 && M > 1) o.scale.assign(static_cast<size_t>(M), o.scale[0]);
  integer_conv(c, 0, 3, zero_points(c, 2, x.dtype(), 1, "x")[0],
               zero_points(c, 5, w.dtype(), M, "w"), o);
}

}  // namespace

// The QLinear ops, also what a planned QDQ pattern runs as (quant_plan.h).
void qlinear_matmul(OpCall& c) { qlinear_matmul_impl(c); }
void qlinear_conv(OpCall& c) { qlinear_conv_impl(c); }

Value run_qdq(const PlannedQdq& q, const Node& node, std::vector<const Value*> inputs,
              const GraphModule& gm, AttrSlot* attrs, int64_t opset) {
  // Constants as values over their tensors' bytes (the packed-weight cache keys on them).
  Value held[9];
  for (size_t i = 0; i < q.constants.size() && i < 9; ++i)
    if (const Tensor* t = q.constants[i]) {
      held[i] = Value::wrap(t->dtype, t->shape, t->data);
      inputs[i] = &held[i];
    }
  OpCallPrivate internal;
  internal.num_outputs = 1;
  internal.opset = opset;
  internal.attrs = attrs;
  if (q.relu != UINT32_MAX) internal.clamp_lo = 0.0f;
  OpCall call{node, std::move(inputs), node.kwargs(), {}, &gm, &internal};
  struct Reset {
    ~Reset() { t_fused_constants = nullptr; }
  } reset;
  t_fused_constants = &q.constants;
  q.fn(call);
  return std::move(call.outputs.at(0));
}

void register_quant_ops() {
  register_builtin("onnx.QuantizeLinear", quantize_linear);
  register_builtin("onnx.DequantizeLinear", dequantize_linear);
  register_builtin("onnx.DynamicQuantizeLinear", dynamic_quantize_linear);
  register_builtin("onnx.MatMulInteger", matmul_integer);
  register_builtin("onnx.ConvInteger", conv_integer);
  register_builtin("onnx.QLinearMatMul", qlinear_matmul);
  register_builtin("onnx.QLinearConv", qlinear_conv);
}

}  // namespace fx::exec
