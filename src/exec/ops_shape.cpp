// Shape and movement ONNX ops (any element type, int64 shape tensors) and reductions.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>

#include "exec/ops.h"
#include "kernels/elementwise.h"
#include "kernels/tensor_ops.h"

namespace fx::exec {

namespace {

using kernels::Shape;

// A value with the same bytes and a new shape.
Value reshaped(const Value& v, Shape shape) { return v.with_shape(std::move(shape)); }

// Axes from an optional int64 input (opset >= 13 style) or the `axes` attribute.
std::vector<int64_t> axes_of(const OpCall& c, size_t input, int64_t rank, bool* given = nullptr) {
  std::vector<int64_t> axes;
  bool has = false;
  if (c.has_input(input)) {
    axes = c.input(input).to_i64();
    has = true;
  } else if (c.has_attr("axes")) {
    axes = c.attr_ints("axes");
    has = true;
  }
  for (int64_t& a : axes) a = normalize_axis(c, a, rank, "axis");
  if (given) *given = has;
  return axes;
}

void reshape(OpCall& c) {
  const Value& x = c.input(0);
  std::vector<int64_t> target = c.has_input(1) ? c.input(1).to_i64() : c.attr_ints("shape");
  std::optional<bool> scratch;
  const bool allowzero = node_attrs(c, scratch, [&] { return c.attr_int("allowzero", 0) != 0; });
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allowzero) {
      if (i >= x.shape().size())
        c.fail("shape has a 0 at " + std::to_string(i) + " beyond the input's rank");
      target[i] = x.shape()[i];
    }
    if (target[i] == -1) {
      if (infer >= 0) c.fail("shape has more than one -1");
      infer = static_cast<int64_t>(i);
    } else if (target[i] < 0) {
      c.fail("shape has a negative dimension " + std::to_string(target[i]));
    } else {
      known = checked_mul(c, known, target[i], "the target shape");  // (fuzz_run found this)
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known) c.fail("cannot infer the -1 dimension");
    target[infer] = x.numel() / known;
  }
  // Checked: a product that wraps could equal the input's count.
  const int64_t target_numel = checked_numel(target, "the target shape");
  if (target_numel != x.numel())
    c.fail("cannot reshape " + std::to_string(x.numel()) + " elements to " +
           std::to_string(target_numel));
  c.outputs.push_back(reshaped(x, target));
}

void flatten(OpCall& c) {
  const Value& x = c.input(0);
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  int64_t axis = c.attr_int("axis", 1);
  if (axis < -rank || axis > rank) c.fail("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  // Both sides as products of their own dims: an empty [0, 5, 3] at axis 2 is [0, 3] (numel /
  // outer would give [0, 0]), and its other dims may multiply past int64 although numel is 0.
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t& side = d < axis ? outer : inner;
    side = checked_mul(c, side, x.shape()[d], "the flattened shape");
  }
  c.outputs.push_back(reshaped(x, {outer, inner}));
}

void transpose(OpCall& c) {
  const Value& x = c.input(0);
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  // The perm attribute, parsed once per plan (absent: reverse the axes).
  using Perm = std::optional<std::vector<int64_t>>;
  std::optional<Perm> scratch;
  const Perm& given = node_attrs(c, scratch, [&]() -> Perm {
    if (!c.has_attr("perm")) return std::nullopt;
    return c.attr_ints("perm");
  });
  std::vector<int64_t> perm(rank);
  if (given) {
    perm = *given;
  } else {
    for (int64_t i = 0; i < rank; ++i) perm[i] = rank - 1 - i;
  }
  if (static_cast<int64_t>(perm.size()) != rank) c.fail("perm must list every axis once");
  std::vector<bool> seen(rank, false);
  Shape os(rank);
  for (int64_t i = 0; i < rank; ++i) {
    perm[i] = normalize_axis(c, perm[i], rank, "perm entry");
    if (seen[perm[i]]) c.fail("perm must list every axis once");
    seen[perm[i]] = true;
    os[i] = x.shape()[perm[i]];
  }
  // Moving only dims of size 1 (a batch of one: [1, S, E] -> [S, 1, E], twice in each
  // attention layer of a batch_first transformer) leaves the bytes as they are: a view, as
  // Reshape returns.
  if (kernels::transpose_keeps_layout(x.shape(), perm)) {
    c.outputs.push_back(reshaped(x, os));
    return;
  }
  Value out = new_value(x.dtype(), os);
  kernels::transpose(x.shape(), x.data<void>(), perm, dtype_size(x.dtype()),
                     out.mutable_data<void>());
  c.outputs.push_back(std::move(out));
}

void concat(OpCall& c) {
  if (c.inputs.empty()) c.fail("needs at least one input");
  const Value& first = c.input(0);
  const int64_t rank = static_cast<int64_t>(first.shape().size());
  const int64_t axis = normalize_axis(c, c.attr_int("axis", 0), rank, "axis");
  Shape os = first.shape();
  os[axis] = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Value& v = c.input(i);
    if (v.dtype() != first.dtype() || static_cast<int64_t>(v.shape().size()) != rank)
      c.fail("inputs must have the same element type and rank");
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && v.shape()[d] != first.shape()[d])
        c.fail("inputs differ outside the concat axis");
    os[axis] += v.shape()[axis];
  }
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= os[d];
  // One block an input (a channel concat of one image): inputs the executor had their producers
  // write as consecutive slices of one buffer already are the result (run.cpp, PlannedConcat).
  if (outer == 1 && c.inputs.size() > 1) {
    if (Value joined = joined_value(c.inputs, os); joined.defined()) {
      c.outputs.push_back(std::move(joined));
      return;
    }
  }
  Value out = new_value(first.dtype(), os);
  const size_t es = dtype_size(first.dtype());
  int64_t inner_out = 1;
  for (int64_t d = axis; d < rank; ++d) inner_out *= os[d];
  uint8_t* dst = out.mutable_data<uint8_t>();
  int64_t offset = 0;  // elements along the flattened (axis..) block
  // Few large blocks (a channel concat of one image: one block an input) are copied on the
  // threads (SqueezeNet's 1.5 MB concats); many small ones (rows) directly, in order.
  const bool few = outer * static_cast<int64_t>(c.inputs.size()) <= 64;
  std::vector<kernels::CopyPiece> pieces;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Value& v = c.input(i);
    const int64_t block = outer ? v.numel() / std::max<int64_t>(outer, 1) : 0;
    for (int64_t o = 0; o < outer; ++o) {
      uint8_t* to = dst + (o * inner_out + offset) * es;
      const uint8_t* from = v.data<uint8_t>() + o * block * es;
      if (few)
        pieces.push_back({to, from, static_cast<size_t>(block) * es});
      else
        std::memcpy(to, from, static_cast<size_t>(block) * es);
    }
    offset += block;
  }
  kernels::copy_pieces(pieces);
  c.outputs.push_back(std::move(out));
}

void squeeze(OpCall& c) {
  const Value& x = c.input(0);
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  bool given = false;
  std::vector<int64_t> axes = axes_of(c, 1, rank, &given);
  Shape os;
  for (int64_t d = 0; d < rank; ++d) {
    const bool listed = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (listed && x.shape()[d] != 1)
      c.fail("cannot squeeze axis " + std::to_string(d) + " of size " +
             std::to_string(x.shape()[d]));
    if (listed || (!given && x.shape()[d] == 1)) continue;
    os.push_back(x.shape()[d]);
  }
  c.outputs.push_back(reshaped(x, os));
}

void unsqueeze(OpCall& c) {
  const Value& x = c.input(0);
  std::vector<int64_t> axes = c.has_input(1) ? c.input(1).to_i64() : c.attr_ints("axes");
  const int64_t out_rank = static_cast<int64_t>(x.shape().size() + axes.size());
  for (int64_t& a : axes) a = normalize_axis(c, a, out_rank, "axis");
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) c.fail("axes are repeated");
  Shape os;
  size_t src = 0;
  for (int64_t d = 0; d < out_rank; ++d) {
    if (std::binary_search(axes.begin(), axes.end(), d)) {
      os.push_back(1);
    } else {
      os.push_back(x.shape()[src++]);
    }
  }
  c.outputs.push_back(reshaped(x, os));
}

void shape(OpCall& c) {
  const Value& x = c.input(0);
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  int64_t start = c.attr_int("start", 0), end = c.attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  std::vector<int64_t> dims(x.shape().begin() + start, x.shape().begin() + end);
  c.outputs.push_back(Value::from_i64({static_cast<int64_t>(dims.size())}, dims));
}

void gather(OpCall& c) {
  const Value& x = c.input(0);
  const Value& idx = c.input(1);
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  if (rank == 0) c.fail("cannot gather from a scalar");
  std::optional<int64_t> scratch;
  const int64_t axis = normalize_axis(
      c, node_attrs(c, scratch, [&] { return c.attr_int("axis", 0); }), rank, "axis");
  std::vector<int64_t> ind = idx.to_i64();
  const int64_t n = x.shape()[axis];
  for (int64_t& i : ind) {
    if (i < -n || i >= n)
      c.fail("index " + std::to_string(i) + " is out of range for axis size " + std::to_string(n));
    if (i < 0) i += n;
  }
  Shape os(x.shape().begin(), x.shape().begin() + axis);
  os.insert(os.end(), idx.shape().begin(), idx.shape().end());
  os.insert(os.end(), x.shape().begin() + axis + 1, x.shape().end());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape()[d];
  const size_t es = dtype_size(x.dtype());
  Value out = new_value(x.dtype(), os);
  uint8_t* dst = out.mutable_data<uint8_t>();
  const uint8_t* src = x.data<uint8_t>();
  const int64_t k = static_cast<int64_t>(ind.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j)
      std::memcpy(dst + (o * k + j) * inner * es, src + (o * n + ind[j]) * inner * es,
                  static_cast<size_t>(inner) * es);
  c.outputs.push_back(std::move(out));
}

void slice(OpCall& c) {
  const Value& x = c.input(0);
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.has_input(1)) {  // opset >= 10
    starts = c.input(1).to_i64();
    ends = c.input(2).to_i64();
    if (c.has_input(3)) axes = c.input(3).to_i64();
    if (c.has_input(4)) steps = c.input(4).to_i64();
  } else {
    starts = c.attr_ints("starts");
    ends = c.attr_ints("ends");
    axes = c.attr_ints("axes");
  }
  if (starts.size() != ends.size()) c.fail("starts and ends differ in length");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size())
    c.fail("axes/steps differ in length from starts");
  std::vector<int64_t> st(rank, 0), sp(rank, 1);
  Shape os = x.shape();
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t a = normalize_axis(c, axes[i], rank, "axis");
    const int64_t dim = x.shape()[a], step = steps[i];
    if (step == 0) c.fail("slice step cannot be 0");
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    // ceil(span / step) as (span - 1) / step + 1: span + step - 1 overflows for a step near
    // INT64_MAX (numpy gives one element there). A step of INT64_MIN counts as -INT64_MAX.
    if (step > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      os[a] = e > b ? (e - b - 1) / step + 1 : 0;
    } else {
      b = std::clamp<int64_t>(b, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      const int64_t down = step == INT64_MIN ? INT64_MAX : -step;
      os[a] = b > e ? (b - e - 1) / down + 1 : 0;
    }
    st[a] = b;
    sp[a] = step;
  }
  Value out = new_value(x.dtype(), os);
  const size_t es = dtype_size(x.dtype());
  std::vector<int64_t> istride(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d) istride[d] = istride[d + 1] * x.shape()[d + 1];
  if (out.numel() == 0) {
    c.outputs.push_back(out);
    return;
  }
  // Copy in contiguous runs: trailing dims taken whole, plus the next one if its step is 1.
  int64_t run = 1, lead = rank - 1;
  while (lead >= 0 && sp[lead] == 1 && st[lead] == 0 && os[lead] == x.shape()[lead])
    run *= os[lead--];
  int64_t base = 0;
  if (lead >= 0 && sp[lead] == 1) {
    run *= os[lead];
    base = st[lead] * istride[lead];
    --lead;
  }
  const int64_t outer_rank = lead + 1;  // dims [0, outer_rank) are iterated
  int64_t n = 1;
  for (int64_t d = 0; d < outer_rank; ++d) n *= os[d];
  std::vector<int64_t> idx(static_cast<size_t>(outer_rank), 0);
  uint8_t* dst = out.mutable_data<uint8_t>();
  const uint8_t* src = x.data<uint8_t>();
  const size_t run_bytes = static_cast<size_t>(run) * es;
  for (int64_t o = 0; o < n; ++o) {
    int64_t off = base;
    for (int64_t d = 0; d < outer_rank; ++d) off += (st[d] + idx[d] * sp[d]) * istride[d];
    std::memcpy(dst + o * run_bytes, src + off * es, run_bytes);
    for (int64_t d = outer_rank - 1; d >= 0; --d) {
      if (++idx[d] < os[d]) break;
      idx[d] = 0;
    }
  }
  c.outputs.push_back(std::move(out));
}

void expand(OpCall& c) {
  const Value& x = c.input(0);
  Shape target = c.input(1).to_i64(), os;
  if (!kernels::broadcast_shapes(x.shape(), target, os)) c.fail("shapes do not broadcast");
  Value out = new_value(x.dtype(), os);
  const size_t es = dtype_size(x.dtype());
  const int64_t n = out.numel();
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out.mutable_data<uint8_t>() + i * es,
                x.data<uint8_t>() + kernels::broadcast_index(os, x.shape(), i) * es, es);
  c.outputs.push_back(std::move(out));
}

void split(OpCall& c) {
  const Value& x = c.input(0);
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  const int64_t axis = normalize_axis(c, c.attr_int("axis", 0), rank, "axis");
  const int64_t dim = x.shape()[axis];
  std::vector<int64_t> parts = c.has_input(1) ? c.input(1).to_i64() : c.attr_ints("split");
  if (parts.empty()) {
    int64_t k = c.attr_int("num_outputs", 0);
    if (k <= 0) k = static_cast<int64_t>(c.num_outputs());
    const int64_t each = (dim + k - 1) / k;
    for (int64_t i = 0, left = dim; i < k; ++i, left -= each)
      parts.push_back(std::max<int64_t>(0, std::min(each, left)));
  }
  if (std::accumulate(parts.begin(), parts.end(), int64_t{0}) != dim)
    c.fail("split sizes do not add up to the axis");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape()[d];
  const size_t es = dtype_size(x.dtype());
  int64_t start = 0;
  for (int64_t p : parts) {
    Shape os = x.shape();
    os[axis] = p;
    Value out = new_value(x.dtype(), os);
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(out.mutable_data<uint8_t>() + o * p * inner * es,
                  x.data<uint8_t>() + (o * dim + start) * inner * es,
                  static_cast<size_t>(p * inner) * es);
    c.outputs.push_back(std::move(out));
    start += p;
  }
}

void range(OpCall& c) {
  const Value& s = c.input(0);
  if (s.dtype() == Dtype::Float32) {
    const float a = first_f32(c, s), b = first_f32(c, c.input(1)), d = first_f32(c, c.input(2));
    if (d == 0) c.fail("delta cannot be 0");
    // Checked before the conversion (a NaN or 2^70 would be undefined behaviour).
    const float count = std::ceil((b - a) / d);
    if (!(count <= 9.2e18)) {
      if (std::isnan(count)) c.fail("the number of elements is not a number (start, limit, delta)");
      size_overflow(c, "the number of elements");
    }
    const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
    checked_nbytes(Dtype::Float32, n, "output");
    Value out = new_value(Dtype::Float32, {n});
    for (int64_t i = 0; i < n; ++i) out.mutable_data<float>()[i] = a + static_cast<float>(i) * d;
    c.outputs.push_back(out);
    return;
  }
  const int64_t a = first_i64(c, s), b = first_i64(c, c.input(1)), d = first_i64(c, c.input(2));
  if (d == 0) c.fail("delta cannot be 0");
  // ceil((b - a) / d) in 128 bits: b - a alone overflows int64 for a Range up to INT64_MAX.
  const __int128 span = static_cast<__int128>(b) - a;
  const __int128 n128 = (span + d + (d > 0 ? -1 : 1)) / d;
  if (n128 > INT64_MAX) size_overflow(c, "the number of elements");
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(n128));
  checked_nbytes(Dtype::Int64, n, "output");  // before the vector below is allocated
  std::vector<int64_t> v(static_cast<size_t>(n));
  // Stepwise: every element lies between a and b, but i * d alone may not fit in int64.
  for (int64_t i = 0, x = a; i < n; ++i, x = i < n ? x + d : x) v[i] = x;
  Value out = Value::from_i64({n}, v);
  c.outputs.push_back(s.dtype() == Dtype::Int64 ? out : cast_value(c, out, s.dtype()));
}

void reduce(OpCall& c, kernels::ReduceOp op, bool axes_input) {
  const Value& x = c.input(0);
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  bool given = false;
  std::vector<int64_t> axes = axes_of(c, axes_input ? 1 : 99, rank, &given);
  const bool keepdims = c.attr_int("keepdims", 1) != 0;
  if (axes.empty() && c.attr_int("noop_with_empty_axes", 0)) {
    c.outputs.push_back(x);
    return;
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  c.outputs.push_back(reduce_typed(c, op, x, axes, keepdims));
}

void arg_reduce(OpCall& c, bool is_max) {
  const Value& x = c.input(0);
  if (x.dtype() != Dtype::Float32)
    c.unsupported(std::string("element type ") + dtype_name(x.dtype()));
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  const int64_t axis = normalize_axis(c, c.attr_int("axis", 0), rank, "axis");
  if (x.shape()[axis] == 0) c.fail("cannot reduce an empty axis");
  Shape os = kernels::reduce_shape(x.shape(), {axis}, c.attr_int("keepdims", 1) != 0);
  Value out = new_value(Dtype::Int64, os);
  kernels::arg_reduce_f32(is_max, x.shape(), x.data<float>(), axis,
                          c.attr_int("select_last_index", 0) != 0, out.mutable_data<int64_t>());
  c.outputs.push_back(std::move(out));
}

}  // namespace

void register_shape_ops() {
  register_builtin("onnx.Reshape", reshape);
  register_builtin("onnx.Flatten", flatten);
  register_builtin("onnx.Transpose", transpose);
  register_builtin("onnx.Concat", concat);
  register_builtin("onnx.Squeeze", squeeze);
  register_builtin("onnx.Unsqueeze", unsqueeze);
  register_builtin("onnx.Shape", shape);
  register_builtin("onnx.Size", [](OpCall& c) {
    c.outputs.push_back(Value::from_i64({}, {c.input(0).numel()}));
  });
  register_builtin("onnx.Gather", gather);
  register_builtin("onnx.Slice", slice);
  register_builtin("onnx.Expand", expand);
  register_builtin("onnx.Split", split);
  register_builtin("onnx.Range", range);
  using kernels::ReduceOp;
  // ReduceSum takes axes as an input from opset 13, the others from opset 18; both forms work.
  const std::pair<const char*, ReduceOp> reductions[] = {{"ReduceSum", ReduceOp::Sum},
                                                         {"ReduceMean", ReduceOp::Mean},
                                                         {"ReduceMax", ReduceOp::Max},
                                                         {"ReduceMin", ReduceOp::Min},
                                                         {"ReduceProd", ReduceOp::Prod},
                                                         {"ReduceL1", ReduceOp::L1},
                                                         {"ReduceL2", ReduceOp::L2},
                                                         {"ReduceSumSquare", ReduceOp::SumSquare},
                                                         {"ReduceLogSumExp", ReduceOp::LogSumExp},
                                                         {"ReduceLogSum", ReduceOp::LogSum}};
  for (const auto& [name, op] : reductions) {
    const ReduceOp o = op;
    register_builtin(std::string("onnx.") + name, [o](OpCall& c) { reduce(c, o, true); });
  }
  register_builtin("onnx.ArgMax", [](OpCall& c) { arg_reduce(c, true); });
  register_builtin("onnx.ArgMin", [](OpCall& c) { arg_reduce(c, false); });
}

}  // namespace fx::exec
