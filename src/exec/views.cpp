// Layout ops read as strided views (plan.h PlannedView): a chain of Transpose, Reshape, Slice and
// Identity nodes, each the only reader of the one before, describes its result as a layout of
// the chain's source elements. A MatMul then reads its operand in place (sgemm takes a row or
// column stride), and any other chain is copied out once instead of once per op (attention's
// Slice -> Reshape -> Transpose of the fused QKV projection). Only the plain cases are views:
// anything else (a negative step, a reshape across strided dims, an error the op would report)
// leaves the ops to run as nodes.
#include <algorithm>

#include "exec/plan.h"

namespace fx::exec {

namespace {

using kernels::StridedLayout;

bool int_tensor(const Value* v) {
  return v && v->is_tensor() && v->shape().size() <= 1 &&
         (v->dtype() == Dtype::Int64 || v->dtype() == Dtype::Int32);
}

// The strides of `in`'s elements viewed with shape `to` (equal count), as torch's view() computes
// them: each run of dims contiguous in `in` may be split or merged, never across a gap.
std::optional<std::vector<int64_t>> view_strides(const StridedLayout& in,
                                                 const std::vector<int64_t>& to) {
  const std::vector<int64_t>& from = in.shape;
  const std::vector<int64_t>& st = in.strides;
  std::vector<int64_t> out(to.size(), 0);
  if (from.empty()) {  // a scalar: every dim of `to` is 1
    for (int64_t& s : out) s = 1;
    return out;
  }
  int64_t view_d = static_cast<int64_t>(to.size()) - 1;
  int64_t chunk_stride = st.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(from.size()) - 1; d >= 0; --d) {
    tensor_numel *= from[d];
    if (d == 0 || (from[d - 1] != 1 && st[d - 1] != tensor_numel * chunk_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || to[view_d] == 1)) {
        out[view_d] = view_numel * chunk_stride;
        view_numel *= to[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_stride = st[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

std::optional<StridedLayout> transpose_view(const Node& n, const StridedLayout& in) {
  const auto rank = static_cast<int64_t>(in.shape.size());
  std::vector<int64_t> perm;
  if (const Argument* p = n.kwargs().find("perm")) {
    if (!p->is_sequence()) return std::nullopt;
    for (const Argument& e : p->elements()) {
      if (e.kind() != Argument::Kind::Int) return std::nullopt;
      perm.push_back(e.to_int());
    }
  } else {
    for (int64_t d = rank - 1; d >= 0; --d) perm.push_back(d);
  }
  if (static_cast<int64_t>(perm.size()) != rank) return std::nullopt;
  std::vector<char> seen(static_cast<size_t>(rank), 0);
  StridedLayout out = in;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t p = perm[d];
    if (p < 0) p += rank;
    if (p < 0 || p >= rank || seen[p]) return std::nullopt;
    seen[p] = 1;
    out.shape[d] = in.shape[p];
    out.strides[d] = in.strides[p];
  }
  return out;
}

std::optional<StridedLayout> reshape_view(const Node& n, const StridedLayout& in,
                                          const Value* shape) {
  if (!int_tensor(shape)) return std::nullopt;
  bool allowzero = false;
  if (const Argument* a = n.kwargs().find("allowzero")) {
    if (a->kind() != Argument::Kind::Int) return std::nullopt;
    allowzero = a->to_int() != 0;
  }
  std::vector<int64_t> to = shape->to_i64();
  const int64_t count = kernels::numel(in.shape);
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < to.size(); ++i) {
    if (to[i] == 0 && !allowzero) {
      if (i >= in.shape.size()) return std::nullopt;
      to[i] = in.shape[i];
    }
    if (to[i] == -1) {
      if (infer >= 0) return std::nullopt;
      infer = static_cast<int64_t>(i);
    } else if (to[i] <= 0 || to[i] > count || known > count / to[i]) {
      return std::nullopt;  // (an empty, negative or too large target: the op decides)
    } else {
      known *= to[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || count % known) return std::nullopt;
    to[infer] = count / known;
    known *= to[infer];
  }
  if (known != count || count == 0) return std::nullopt;
  std::optional<std::vector<int64_t>> strides = view_strides(in, to);
  if (!strides) return std::nullopt;
  return StridedLayout{std::move(to), std::move(*strides), in.offset};
}

std::optional<StridedLayout> slice_view(const StridedLayout& in,
                                        const std::vector<const Value*>& params) {
  // Opset >= 10: starts, ends[, axes[, steps]] as inputs.
  if (params.size() < 2 || !int_tensor(params[0]) || !int_tensor(params[1])) return std::nullopt;
  const std::vector<int64_t> starts = params[0]->to_i64(), ends = params[1]->to_i64();
  std::vector<int64_t> axes, steps;
  if (params.size() > 2 && params[2]) {
    if (!int_tensor(params[2])) return std::nullopt;
    axes = params[2]->to_i64();
  }
  if (params.size() > 3 && params[3]) {
    if (!int_tensor(params[3])) return std::nullopt;
    steps = params[3]->to_i64();
  }
  const auto rank = static_cast<int64_t>(in.shape.size());
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return std::nullopt;
  StridedLayout out = in;
  std::vector<char> seen(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = axes[i];
    if (a < 0) a += rank;
    if (a < 0 || a >= rank || seen[a] || steps[i] <= 0) return std::nullopt;
    seen[a] = 1;
    const int64_t dim = in.shape[a], step = steps[i];
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    b = std::clamp<int64_t>(b, 0, dim);
    e = std::clamp<int64_t>(e, 0, dim);
    if (e <= b) return std::nullopt;  // (empty: the op makes it)
    out.offset += b * in.strides[a];
    out.shape[a] = (e - b - 1) / step + 1;
    out.strides[a] = in.strides[a] * step;
  }
  return out;
}

}  // namespace

bool is_layout_op(const Node& n) {
  if (n.op() != Opcode::CallFunction) return false;
  const std::string& q = n.target().function().qualname();
  return q == "onnx.Transpose" || q == "onnx.Reshape" || q == "onnx.Slice" || q == "onnx.Identity";
}

std::optional<StridedLayout> view_through(const Node& n, const StridedLayout& in,
                                          const std::vector<const Value*>& params) {
  const std::string& q = n.target().function().qualname();
  if (q == "onnx.Identity") return params.empty() ? std::optional<StridedLayout>(in) : std::nullopt;
  if (q == "onnx.Transpose") return params.empty() ? transpose_view(n, in) : std::nullopt;
  if (q == "onnx.Reshape")
    return params.size() == 1 ? reshape_view(n, in, params[0]) : std::nullopt;
  if (q == "onnx.Slice") return slice_view(in, params);
  return std::nullopt;
}

}  // namespace fx::exec
