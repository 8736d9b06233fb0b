// ONNX ops that select or reorder slices of a tensor: Compress, Unique, ReverseSequence.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "exec/ops.h"

namespace fx::exec {

namespace {

using Shape = std::vector<int64_t>;

void compress(OpCall& c) {
  const Value& x = c.input(0);
  const Value& cond_v = c.input(1);
  if (cond_v.shape().size() != 1) c.fail("condition must be 1-D");
  const Value cond = cond_v.dtype() == Dtype::Bool ? cond_v : cast_value(c, cond_v, Dtype::Bool);
  const bool* keep = cond.data<bool>();
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  // No axis: the input flattened.
  const bool flat = !c.has_attr("axis");
  const int64_t axis = flat ? 0 : normalize_axis(c, c.attr_int("axis", 0), rank, "axis");
  const Shape shape = flat ? Shape{x.numel()} : x.shape();
  const int64_t n = shape[axis];
  if (cond.numel() > n)
    c.fail("condition has " + std::to_string(cond.numel()) + " entries for an axis of " +
           std::to_string(n));
  std::vector<int64_t> picked;
  for (int64_t i = 0; i < cond.numel(); ++i)
    if (keep[i]) picked.push_back(i);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  Shape os = shape;
  os[axis] = static_cast<int64_t>(picked.size());
  Value out = new_value(x.dtype(), os);
  const size_t es = dtype_size(x.dtype()), row = static_cast<size_t>(inner) * es;
  uint8_t* dst = out.mutable_data<uint8_t>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : picked) {
      std::memcpy(dst, x.data<uint8_t>() + (o * n + i) * inner * es, row);
      dst += row;
    }
  c.outputs.push_back(std::move(out));
}

// Unique over slices along `axis` (or the flattened elements): Y, first indices, inverse
// indices and counts; sorted = 1 orders the slices lexicographically (numpy.unique's order).
void unique(OpCall& c) {
  const Value& x = c.input(0);
  if (x.dtype() == Dtype::String) c.unsupported("Unique of strings");
  const bool flat = !c.has_attr("axis");
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  const int64_t axis = flat ? 0 : normalize_axis(c, c.attr_int("axis", 0), rank, "axis");
  const Shape shape = flat ? Shape{x.numel()} : x.shape();
  const bool sorted = c.attr_int("sorted", 1) != 0;
  const int64_t n = shape[axis];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  const size_t es = dtype_size(x.dtype());
  const Value xd = x.dtype() == Dtype::Float64 ? x : cast_value(c, x, Dtype::Float64);
  // Slice i's elements in order: (o, i, j) for every o, j.
  auto elem = [&](int64_t i, int64_t k) { return (k / inner * n + i) * inner + k % inner; };
  const int64_t slice = outer * inner;
  auto less = [&](int64_t a, int64_t b) {
    for (int64_t k = 0; k < slice; ++k) {
      const double va = xd.data<double>()[elem(a, k)], vb = xd.data<double>()[elem(b, k)];
      if (va != vb) return va < vb;
    }
    return false;
  };
  auto same = [&](int64_t a, int64_t b) {
    for (int64_t k = 0; k < slice; ++k)
      if (std::memcmp(x.data<uint8_t>() + elem(a, k) * es, x.data<uint8_t>() + elem(b, k) * es,
                      es) != 0)
        return false;
    return true;
  };
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), less);
  // Groups of equal slices in sorted order; each group's first member is its first occurrence.
  std::vector<int64_t> first, counts, group_of(static_cast<size_t>(n));
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || !same(order[i - 1], order[i])) {
      first.push_back(order[i]);
      counts.push_back(0);
    }
    group_of[order[i]] = static_cast<int64_t>(first.size()) - 1;
    ++counts.back();
  }
  const int64_t u = static_cast<int64_t>(first.size());
  std::vector<int64_t> rank_of(static_cast<size_t>(u));  // group -> output position
  std::vector<int64_t> groups(static_cast<size_t>(u));
  std::iota(groups.begin(), groups.end(), 0);
  if (!sorted)
    std::sort(groups.begin(), groups.end(),
              [&](int64_t a, int64_t b) { return first[a] < first[b]; });
  for (int64_t p = 0; p < u; ++p) rank_of[groups[p]] = p;
  Shape os = shape;
  os[axis] = u;
  Value y = new_value(x.dtype(), os);
  std::vector<int64_t> indices(static_cast<size_t>(u)), cnt(static_cast<size_t>(u)),
      inverse(static_cast<size_t>(n));
  for (int64_t p = 0; p < u; ++p) {
    const int64_t g = groups[p];
    indices[p] = first[g];
    cnt[p] = counts[g];
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(y.mutable_data<uint8_t>() + (o * u + p) * inner * es,
                  x.data<uint8_t>() + (o * n + first[g]) * inner * es,
                  static_cast<size_t>(inner) * es);
  }
  for (int64_t i = 0; i < n; ++i) inverse[i] = rank_of[group_of[i]];
  c.outputs.push_back(std::move(y));
  c.outputs.push_back(Value::from_i64({u}, indices));
  c.outputs.push_back(Value::from_i64({n}, inverse));
  c.outputs.push_back(Value::from_i64({u}, cnt));
}

void reverse_sequence(OpCall& c) {
  const Value& x = c.input(0);
  const std::vector<int64_t> lens = c.input(1).to_i64();
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  if (rank < 2) c.fail("the input must have rank >= 2");
  const int64_t batch_axis = c.attr_int("batch_axis", 1), time_axis = c.attr_int("time_axis", 0);
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0)))
    c.fail("batch_axis and time_axis must be 0 and 1 in some order");
  const int64_t B = x.shape()[batch_axis], T = x.shape()[time_axis];
  if (static_cast<int64_t>(lens.size()) != B) c.fail("sequence_lens must have one entry per batch");
  int64_t inner = 1;
  for (int64_t d = 2; d < rank; ++d) inner *= x.shape()[d];
  const size_t es = dtype_size(x.dtype()), row = static_cast<size_t>(inner) * es;
  Value out = new_value(x.dtype(), x.shape());
  auto at = [&](int64_t b, int64_t t) {
    return (batch_axis == 0 ? b * T + t : t * B + b) * inner * static_cast<int64_t>(es);
  };
  for (int64_t b = 0; b < B; ++b) {
    if (lens[b] < 0 || lens[b] > T)
      c.fail("sequence length " + std::to_string(lens[b]) + " is not in [0, " + std::to_string(T) +
             "]");
    for (int64_t t = 0; t < T; ++t) {
      const int64_t from = t < lens[b] ? lens[b] - 1 - t : t;
      std::memcpy(out.mutable_data<uint8_t>() + at(b, t), x.data<uint8_t>() + at(b, from), row);
    }
  }
  c.outputs.push_back(std::move(out));
}

}  // namespace

void register_select_ops() {
  register_builtin("onnx.Compress", compress);
  register_builtin("onnx.Unique", unique);
  register_builtin("onnx.ReverseSequence", reverse_sequence);
}

}  // namespace fx::exec
