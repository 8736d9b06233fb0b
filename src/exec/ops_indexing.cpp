// Indexing ONNX ops: GatherElements, GatherND, ScatterElements, ScatterND, NonZero, OneHot,
// TopK, CumSum, Trilu.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "exec/dtype_dispatch.h"
#include "exec/ops.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"

namespace fx::exec {

namespace {

using kernels::Shape;

// A writable copy of `v` (ops never write their inputs).
Value copy_of(const Value& v) {
  Value out = new_value(v.dtype(), v.shape());
  std::memcpy(out.mutable_data<uint8_t>(), v.data<uint8_t>(), v.nbytes());
  return out;
}

int64_t checked_index(const OpCall& c, int64_t i, int64_t n) {
  if (i < -n || i >= n)
    c.fail("index " + std::to_string(i) + " is out of range for a dimension of " +
           std::to_string(n));
  return i < 0 ? i + n : i;
}

// Combines `dst` with `src` per the scatter `reduction` attribute.
template <class T>
void combine(T& dst, T src, const std::string& reduction) {
  if (reduction == "add") {
    dst += src;
  } else if (reduction == "mul") {
    dst *= src;
  } else if (reduction == "max") {
    dst = std::max(dst, src);
  } else if (reduction == "min") {
    dst = std::min(dst, src);
  } else {
    dst = src;
  }
}

void gather_elements(OpCall& c) {
  const Value& x = c.input(0);
  const Value& idx = c.input(1);
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  if (static_cast<int64_t>(idx.shape().size()) != rank)
    c.fail("indices must have the input's rank");
  const int64_t axis = normalize_axis(c, c.attr_int("axis", 0), rank, "axis");
  const std::vector<int64_t> ind = idx.to_i64();
  const std::vector<int64_t> xst = strides_of(x.shape());
  const size_t es = dtype_size(x.dtype());
  Value out = new_value(x.dtype(), idx.shape());
  std::vector<int64_t> pos(rank, 0);
  for (int64_t o = 0; o < out.numel(); ++o) {
    int64_t i = ind[o];
    const int64_t n = x.shape()[axis];
    if (i < -n || i >= n)
      c.fail("index " + std::to_string(i) + " is out of range for axis size " + std::to_string(n));
    if (i < 0) i += n;
    int64_t src = 0;
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t coord = d == axis ? i : pos[d];
      if (d != axis && coord >= x.shape()[d])
        c.fail("indices are larger than the input outside the axis");
      src += coord * xst[d];
    }
    std::memcpy(out.mutable_data<uint8_t>() + o * es, x.data<uint8_t>() + src * es, es);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++pos[d] < idx.shape()[d]) break;
      pos[d] = 0;
    }
  }
  c.outputs.push_back(std::move(out));
}

void gather_nd(OpCall& c) {
  const Value& x = c.input(0);
  const Value& idx = c.input(1);
  const int64_t b = c.attr_int("batch_dims", 0);
  const int64_t xr = static_cast<int64_t>(x.shape().size());
  const int64_t ir = static_cast<int64_t>(idx.shape().size());
  if (b < 0 || b >= std::min(xr, ir))
    c.fail("batch_dims must be in [0, min(rank(data), rank(indices)))");
  for (int64_t d = 0; d < b; ++d)
    if (x.shape()[d] != idx.shape()[d]) c.fail("the batch dimensions of data and indices differ");
  const int64_t k = idx.shape().empty() ? 0 : idx.shape().back();
  if (k < 1 || k > xr - b) c.fail("the last indices dim must be in [1, rank - batch_dims]");
  Shape os(idx.shape().begin(), idx.shape().end() - 1);
  os.insert(os.end(), x.shape().begin() + b + k, x.shape().end());
  int64_t slice = 1, batches = 1;
  for (int64_t d = b + k; d < xr; ++d) slice *= x.shape()[d];
  for (int64_t d = 0; d < b; ++d) batches *= x.shape()[d];
  int64_t batch_elems = 1;  // elements of data per batch
  for (int64_t d = b; d < xr; ++d) batch_elems *= x.shape()[d];
  const std::vector<int64_t> ind = idx.to_i64();
  const Shape inner(x.shape().begin() + b, x.shape().end());
  const std::vector<int64_t> st = strides_of(inner);
  const size_t es = dtype_size(x.dtype());
  Value out = new_value(x.dtype(), os);
  const int64_t tuples = static_cast<int64_t>(ind.size()) / k;
  const int64_t per_batch = tuples / batches;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = (t / per_batch) * batch_elems;
    for (int64_t j = 0; j < k; ++j) off += checked_index(c, ind[t * k + j], inner[j]) * st[j];
    std::memcpy(out.mutable_data<uint8_t>() + t * slice * es, x.data<uint8_t>() + off * es,
                static_cast<size_t>(slice) * es);
  }
  c.outputs.push_back(std::move(out));
}

void scatter_elements(OpCall& c) {
  const Value& x = c.input(0);
  const Value& idx = c.input(1);
  const Value& upd = c.input(2);
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  const int64_t axis = normalize_axis(c, c.attr_int("axis", 0), rank, "axis");
  const std::string reduction = c.attr_string("reduction", "none");
  if (idx.shape() != upd.shape() || static_cast<int64_t>(idx.shape().size()) != rank)
    c.fail("indices and updates must have the same shape and the data's rank");
  if (reduction != "none" && x.dtype() != Dtype::Float32)
    c.unsupported("ScatterElements reduction on " + std::string(dtype_name(x.dtype())));
  Value out = copy_of(x);
  const std::vector<int64_t> ind = idx.to_i64();
  const std::vector<int64_t> st = strides_of(x.shape());
  const size_t es = dtype_size(x.dtype());
  std::vector<int64_t> pos(rank, 0);
  for (int64_t o = 0; o < idx.numel(); ++o) {
    int64_t off = 0;
    for (int64_t d = 0; d < rank; ++d)
      off += (d == axis ? checked_index(c, ind[o], x.shape()[axis]) : pos[d]) * st[d];
    if (reduction == "none") {
      std::memcpy(out.mutable_data<uint8_t>() + off * es, upd.data<uint8_t>() + o * es, es);
    } else {
      combine(out.mutable_data<float>()[off], upd.data<float>()[o], reduction);
    }
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++pos[d] < idx.shape()[d]) break;
      pos[d] = 0;
    }
  }
  c.outputs.push_back(std::move(out));
}

void scatter_nd(OpCall& c) {
  const Value& x = c.input(0);
  const Value& idx = c.input(1);
  const Value& upd = c.input(2);
  const std::string reduction = c.attr_string("reduction", "none");
  Value out = copy_of(x);
  const int64_t k = idx.shape().empty() ? 0 : idx.shape().back();
  if (k > static_cast<int64_t>(x.shape().size()))
    c.fail("index tuples are longer than the data's rank");
  const std::vector<int64_t> ind = idx.to_i64();
  const std::vector<int64_t> st = strides_of(x.shape());
  const int64_t tuples = k ? static_cast<int64_t>(ind.size()) / k : 0;
  int64_t slice = 1;
  for (size_t d = static_cast<size_t>(k); d < x.shape().size(); ++d) slice *= x.shape()[d];
  if (upd.numel() != tuples * slice) c.fail("updates do not match indices and data");
  if (upd.dtype() != x.dtype()) c.fail("updates must have the data's element type");
  const size_t es = dtype_size(x.dtype());
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; ++j) off += checked_index(c, ind[t * k + j], x.shape()[j]) * st[j];
    if (reduction == "none" || x.dtype() != Dtype::Float32) {
      if (reduction != "none")
        c.unsupported("ScatterND reduction on " + std::string(dtype_name(x.dtype())));
      std::memcpy(out.mutable_data<uint8_t>() + off * es, upd.data<uint8_t>() + t * slice * es,
                  static_cast<size_t>(slice) * es);
    } else {
      for (int64_t i = 0; i < slice; ++i)
        combine(out.mutable_data<float>()[off + i], upd.data<float>()[t * slice + i], reduction);
    }
  }
  c.outputs.push_back(std::move(out));
}

void nonzero(OpCall& c) {
  const Value& x = c.input(0);
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  const size_t es = dtype_size(x.dtype());
  std::vector<int64_t> hits;
  const std::vector<uint8_t> zero(es, 0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const uint8_t* p = x.data<uint8_t>() + i * es;
    bool nz = std::memcmp(p, zero.data(), es) != 0;
    if (x.dtype() == Dtype::Float32)
      nz = *reinterpret_cast<const float*>(p) != 0.0f;  // -0.0 is zero
    if (nz) hits.push_back(i);
  }
  const int64_t n = static_cast<int64_t>(hits.size());
  std::vector<int64_t> out(static_cast<size_t>(std::max<int64_t>(rank, 1) * n));
  const std::vector<int64_t> st = strides_of(x.shape());
  for (int64_t j = 0; j < n; ++j)
    for (int64_t d = 0; d < rank; ++d) out[d * n + j] = (hits[j] / st[d]) % x.shape()[d];
  c.outputs.push_back(Value::from_i64({rank, n}, rank ? out : std::vector<int64_t>{}));
}

void one_hot(OpCall& c) {
  const std::vector<int64_t> ind = c.input(0).to_i64();
  const int64_t depth = first_i64(c, c.input(1));
  const Value& values = c.input(2);
  if (values.numel() != 2) c.fail("values must hold [off, on]");
  if (depth < 1) c.fail("depth must be positive");
  const Shape& is = c.input(0).shape();
  const int64_t rank = static_cast<int64_t>(is.size()) + 1;
  const int64_t axis = normalize_axis(c, c.attr_int("axis", -1), rank, "axis");
  Shape os(is.begin(), is.begin() + axis);
  os.push_back(depth);
  os.insert(os.end(), is.begin() + axis, is.end());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= is[d];
  for (size_t d = static_cast<size_t>(axis); d < is.size(); ++d) inner *= is[d];
  const size_t es = dtype_size(values.dtype());
  Value out = new_value(values.dtype(), os);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t h = 0; h < depth; ++h)
      for (int64_t j = 0; j < inner; ++j) {
        int64_t i = ind[o * inner + j];
        if (i < 0) i += depth;
        const bool on = i == h;
        std::memcpy(out.mutable_data<uint8_t>() + ((o * depth + h) * inner + j) * es,
                    values.data<uint8_t>() + (on ? es : 0), es);
      }
  c.outputs.push_back(std::move(out));
}

void topk(OpCall& c) {
  const Value& x = c.input(0);
  need_f32(c, x, "TopK input");
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  const int64_t axis = normalize_axis(c, c.attr_int("axis", -1), rank, "axis");
  const int64_t k = c.has_input(1) ? first_i64(c, c.input(1)) : c.attr_int("k", -1);
  const int64_t n = x.shape()[axis];
  if (k < 0 || k > n)
    c.fail("k = " + std::to_string(k) + " is not in [0, " + std::to_string(n) + "]");
  const bool largest = c.attr_int("largest", 1) != 0;
  Shape os = x.shape();
  os[axis] = k;
  Value values = new_value(Dtype::Float32, os), indices = new_value(Dtype::Int64, os);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape()[d];
  std::vector<int64_t> order(static_cast<size_t>(n));
  const float* px = x.data<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t i) { return px[(o * n + i) * inner + j]; };
      std::iota(order.begin(), order.end(), 0);
      // Ties keep the lower index first, as onnxruntime (sorted = 1).
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return largest ? at(a) > at(b) : at(a) < at(b);
      });
      for (int64_t i = 0; i < k; ++i) {
        values.mutable_data<float>()[(o * k + i) * inner + j] = at(order[i]);
        indices.mutable_data<int64_t>()[(o * k + i) * inner + j] = order[i];
      }
    }
  c.outputs.push_back(std::move(values));
  c.outputs.push_back(indices);
}

void cumsum(OpCall& c) {
  const Value& x = c.input(0);
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  const int64_t axis = normalize_axis(c, first_i64(c, c.input(1)), rank, "axis");
  const bool exclusive = c.attr_int("exclusive", 0) != 0, reverse = c.attr_int("reverse", 0) != 0;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape()[d];
  const int64_t n = x.shape()[axis];
  auto run = [&](auto* dst, const auto* src) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) {
        std::remove_const_t<std::remove_pointer_t<decltype(src)>> acc = 0;
        for (int64_t t = 0; t < n; ++t) {
          const int64_t i = reverse ? n - 1 - t : t;
          const int64_t at = (o * n + i) * inner + j;
          if (exclusive) {
            dst[at] = acc;
            acc += src[at];
          } else {
            acc += src[at];
            dst[at] = acc;
          }
        }
      }
  };
  Value out = new_value(x.dtype(), x.shape());
  // ONNX's types (float16/bfloat16 accumulate in float32, rounded once at the end).
  const Value xs = is_half(x.dtype()) ? widen_half(c, x) : x;
  Value acc = is_half(x.dtype()) ? new_value(Dtype::Float32, x.shape()) : out;
  dispatch_numeric<kFloats | dtype_bit(Dtype::Int32) | dtype_bit(Dtype::Int64) |
                   dtype_bit(Dtype::UInt32) | dtype_bit(Dtype::UInt64)>(
      c, xs.dtype(), [&](auto tag) {
        using T = decltype(tag);
        run(acc.mutable_data<T>(), xs.data<T>());
      });
  c.outputs.push_back(is_half(x.dtype()) ? narrow_half(c, acc, x.dtype()) : acc);
}

void trilu(OpCall& c) {
  const Value& x = c.input(0);
  if (x.shape().size() < 2) c.fail("the input must have rank >= 2");
  const int64_t k = c.has_input(1) ? first_i64(c, c.input(1)) : 0;
  const bool upper = c.attr_int("upper", 1) != 0;
  const int64_t rows = x.shape()[x.shape().size() - 2], cols = x.shape().back();
  const size_t es = dtype_size(x.dtype());
  Value out = zeroed_value(x.dtype(), x.shape());
  const int64_t mats = (rows * cols != 0) ? x.numel() / (rows * cols) : 0;
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const bool keep = upper ? (j - i >= k) : (j - i <= k);
        if (!keep) continue;
        const int64_t at = (m * rows + i) * cols + j;
        std::memcpy(out.mutable_data<uint8_t>() + at * es, x.data<uint8_t>() + at * es, es);
      }
  c.outputs.push_back(std::move(out));
}

}  // namespace

void register_indexing_ops() {
  register_builtin("onnx.GatherElements", gather_elements);
  register_builtin("onnx.GatherND", gather_nd);
  register_builtin("onnx.ScatterElements", scatter_elements);
  register_builtin("onnx.Scatter", scatter_elements);  // its name before opset 11
  register_builtin("onnx.ScatterND", scatter_nd);
  register_builtin("onnx.NonZero", nonzero);
  register_builtin("onnx.OneHot", one_hot);
  register_builtin("onnx.TopK", topk);
  register_builtin("onnx.CumSum", cumsum);
  register_builtin("onnx.Trilu", trilu);
}

}  // namespace fx::exec
