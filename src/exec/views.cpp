// Layout ops read as strided views (plan.h PlannedView), planned (plan_views) and worked out
// (view_through): a chain of Transpose, Reshape, Slice and Identity nodes, each the only reader
// of the one before, describes its result as a layout of the chain's source elements. A MatMul then
// reads its operand in place (sgemm takes a row or column stride), and any other chain is copied
// out once instead of once per op (attention's Slice -> Reshape -> Transpose of the fused QKV
// projection). Only the plain cases are views: anything else (a negative step, a reshape across
// strided dims, an error the op would report) leaves the ops to run as nodes.
#include <algorithm>
#include <tuple>

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

// The chain of layout ops ending at `end` that a PlannedView may cover (their step positions,
// first to last; `source` gets the first one's data input): each reads its data input as its
// first argument, is neither fixed nor probed nor in another chain, and each before `end` is
// read by the next one only, once. Empty if `end` itself does not qualify.
std::vector<uint32_t> layout_chain(Node* end, const std::vector<char>& fixed,
                                   const std::vector<char>& probed,
                                   const std::vector<size_t>& position,
                                   const std::vector<char>& claimed, Node*& source) {
  auto qualifies = [&](const Node* c) {
    if (!is_layout_op(*c) || fixed[c->id()] || claimed[c->id()] || c->args().empty() ||
        !c->args()[0].is_node())
      return false;
    for (const Argument& a : c->args())
      if (!a.is_none() && !a.is_node()) return false;
    return true;
  };
  std::vector<uint32_t> chain;
  if (!qualifies(end)) return chain;
  Node* c = end;
  chain.push_back(static_cast<uint32_t>(position[c->id()]));
  for (;;) {
    Node* prev = c->args()[0].to_node();
    if (!qualifies(prev) || probed[prev->id()] || prev->users().size() != 1) break;
    int uses = 0;
    for (const Argument& a : c->args()) uses += a.is_node() && a.to_node() == prev;
    if (uses != 1) break;
    chain.push_back(static_cast<uint32_t>(position[prev->id()]));
    c = prev;
  }
  std::reverse(chain.begin(), chain.end());
  source = c->args()[0].to_node();
  return chain;
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

ViewPlan plan_views(const std::vector<Node*>& nodes, const std::vector<char>& fixed,
                    const std::vector<char>& probed, const std::vector<size_t>& position,
                    std::vector<size_t>& last_use) {
  ViewPlan plan;
  std::vector<char> claimed(fixed.size(), 0);
  auto& views = plan.views;
  auto claim = [&](size_t owner, int operand, std::vector<uint32_t> chain, Node* source) {
    for (uint32_t pos : chain) {
      Node* c = nodes[pos];
      claimed[c->id()] = 1;
      last_use[c->id()] = std::max(last_use[c->id()], owner);
      for (Node* in : c->all_input_nodes())
        last_use[in->id()] = std::max(last_use[in->id()], owner);
    }
    PlannedView v;
    v.operand = operand;
    v.source = static_cast<uint32_t>(source->id());
    v.params_fixed = true;
    for (uint32_t pos : chain)
      for (size_t k = 1; is_layout_op(*nodes[pos]) && k < nodes[pos]->args().size(); ++k) {
        const Argument& a = nodes[pos]->args()[k];
        if (a.is_node() && !fixed[a.to_node()->id()]) v.params_fixed = false;
      }
    v.chain = std::move(chain);
    views.emplace_back(owner, std::move(v));
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node* n = nodes[i];
    if (n->op() != Opcode::CallFunction || fixed[n->id()] || n->args().size() != 2 ||
        !target_info(n->target().function()).matmul)
      continue;
    for (int k = 0; k < 2; ++k) {
      const Argument& a = n->args()[k];
      if (!a.is_node() ||
          (k == 1 && n->args()[0].is_node() && n->args()[0].to_node() == a.to_node()))
        continue;
      Node* end = a.to_node();
      if (probed[end->id()] || end->users().size() != 1) continue;
      // A Div or Mul of a chain by a fixed scalar (Div: the chain first), read by nothing else.
      Node* scale = nullptr;
      Node* scalar = nullptr;
      if (end->op() == Opcode::CallFunction && !fixed[end->id()] && end->args().size() == 2 &&
          end->kwargs().empty() && end->args()[0].is_node() && end->args()[1].is_node()) {
        const std::string& q = end->target().function().qualname();
        const bool div = q == "onnx.Div", mul = q == "onnx.Mul";
        for (int side = 0; side < (mul ? 2 : div ? 1 : 0) && !scale; ++side) {
          Node* x = end->args()[side].to_node();
          Node* c = end->args()[1 - side].to_node();
          if (fixed[c->id()] && !fixed[x->id()] && is_layout_op(*x) && !probed[x->id()] &&
              x->users().size() == 1 && x != c) {
            scale = end;
            scalar = c;
            end = x;
          }
        }
      }
      Node* source = nullptr;
      std::vector<uint32_t> chain = layout_chain(end, fixed, probed, position, claimed, source);
      if (chain.empty()) continue;
      if (scale) chain.push_back(static_cast<uint32_t>(position[scale->id()]));
      claim(i, k, std::move(chain), source);
      if (scale) {
        PlannedView& v = views.back().second;
        v.scaled = true;
        v.divide = scale->target().function().qualname() == "onnx.Div";
        v.scalar = static_cast<uint32_t>(scalar->id());
        claimed[scale->id()] = 1;
      }
    }
  }
  // A MatMul read only by a Transpose that keeps the last axis last (attention's heads merged
  // back): written in the Transpose's order.
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node* n = nodes[i];
    if (n->op() != Opcode::CallFunction || fixed[n->id()] || probed[n->id()] ||
        n->users().size() != 1 || !target_info(n->target().function()).matmul)
      continue;
    Node* t = *n->users().begin();
    if (t->op() != Opcode::CallFunction || t->target().function().qualname() != "onnx.Transpose" ||
        fixed[t->id()] || claimed[t->id()] || t->args().size() != 1 || !t->args()[0].is_node() ||
        t->args()[0].to_node() != n)
      continue;
    const Argument* p_arg = t->kwargs().find("perm");
    if (!p_arg || !p_arg->is_sequence()) continue;
    std::vector<int64_t> perm;
    for (const Argument& e : p_arg->elements())
      if (e.kind() == Argument::Kind::Int) perm.push_back(e.to_int());
    const auto rank = static_cast<int64_t>(perm.size());
    if (rank < 2 || rank != static_cast<int64_t>(p_arg->elements().size())) continue;
    std::vector<char> seen(perm.size(), 0);
    bool ok = true;
    for (int64_t& d : perm) {
      if (d < 0) d += rank;
      ok = ok && d >= 0 && d < rank && !seen[d];
      if (ok) seen[d] = 1;
    }
    if (!ok || perm.back() != rank - 1) continue;
    claimed[t->id()] = 1;
    plan.out_transposes.emplace_back(i, static_cast<uint32_t>(t->id()), std::move(perm));
  }
  for (size_t i = nodes.size(); i-- > 0;) {
    Node* source = nullptr;
    std::vector<uint32_t> chain = layout_chain(nodes[i], fixed, probed, position, claimed, source);
    if (chain.size() >= 2) claim(i, -1, std::move(chain), source);
  }
  return plan;
}

}  // namespace fx::exec
