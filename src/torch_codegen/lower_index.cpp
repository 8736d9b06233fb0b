// Lowering handlers of indexing ops: GatherND, ScatterElements, ScatterND, OneHot (Gather and
// GatherElements are in lower_shape.cpp).
#include <algorithm>

#include "fx/onnx.h"
#include "torch_codegen/lower_ops.h"

namespace fx::torch_codegen {

namespace {

using Kind = LVal::Kind;

// ONNX index tensors may hold negative indices; torch.gather/scatter do not take them.
Node* non_negative(Lowerer& L, Node* idx, const SymInt& size) {
  return L.call("torch.where", {L.call("operator.lt", {idx, 0LL}),
                                L.call("operator.add", {idx, size.arg()}), idx});
}

// (indices[..., 0], indices[..., 1], ...) as a tuple of nodes: the last dim must be static.
Argument index_tuple(Lowerer& L, const Node& n, const LVal& indices) {
  const auto s = L.shape(indices);
  if (s.empty() || !s.back()) L.unsupported(n, "an index depth (last dim of indices) that changes");
  Node* parts = L.method("unbind", {L.as_tensor(indices), -1LL});
  Argument::Items items;
  for (int64_t k = 0; k < *s.back(); ++k)
    items.push_back(L.call("operator.getitem", {parts, static_cast<long long>(k)}));
  return Argument::tuple(std::move(items));
}

// data[indices[..., 0], indices[..., 1], ...]: advanced indexing takes negative indices. With
// batch_dims b, the batch dims of both are flattened into one, indexed by an arange beside the
// tuples, and the result takes the batch dims back.
void gather_nd(Lowerer& L, const Node& n) {
  const int64_t b = L.attr_int(n, "batch_dims", 0);
  LVal x = L.in(n, 0), idx = L.in(n, 1);
  Node* data = L.as_tensor(x);
  if (b == 0) {
    L.set(n, L.tensor(L.call("operator.getitem", {data, index_tuple(L, n, idx)}), n));
    return;
  }
  const auto xs = L.shape(x), is = L.shape(idx);
  if (b < 0 || b >= static_cast<int64_t>(std::min(xs.size(), is.size())))
    L.unsupported(n, "batch_dims outside [0, min(rank(data), rank(indices)))");
  if (!is.back()) L.unsupported(n, "an index depth (last dim of indices) that changes");
  std::vector<SymInt> batch, flat_x{SymInt{-1, {}}}, flat_i{SymInt{-1, {}}};
  for (int64_t d = 0; d < b; ++d) batch.push_back(L.size(x, d));
  for (size_t d = static_cast<size_t>(b); d < xs.size(); ++d)
    flat_x.push_back(L.size(x, static_cast<int64_t>(d)));
  for (size_t d = static_cast<size_t>(b); d < is.size(); ++d)
    flat_i.push_back(L.size(idx, static_cast<int64_t>(d)));
  Node* fx = L.method("reshape", {data, Lowerer::list_arg(flat_x)});
  Node* fi = L.method("reshape", {L.as_tensor(idx), Lowerer::list_arg(flat_i)});
  // arange(B) shaped [B, 1, ...] against the tuples' [B, M...] dims.
  Node* rows = L.call("torch.arange", {L.method("size", {fi, 0LL})});
  std::vector<int64_t> view = {-1};
  for (size_t d = static_cast<size_t>(b) + 1; d < is.size(); ++d) view.push_back(1);
  rows = L.method("reshape", {rows, int_list(view)});
  Node* parts = L.method("unbind", {fi, -1LL});
  Argument::Items items{rows};
  for (int64_t k = 0; k < *is.back(); ++k)
    items.push_back(L.call("operator.getitem", {parts, static_cast<long long>(k)}));
  Node* y = L.call("operator.getitem", {fx, Argument::tuple(std::move(items))});
  // [B, M..., rest...] -> batch dims back in front.
  std::vector<SymInt> out = batch;
  for (size_t d = static_cast<size_t>(b); d + 1 < is.size(); ++d)
    out.push_back(L.size(idx, static_cast<int64_t>(d)));
  for (size_t d = static_cast<size_t>(b + *is.back()); d < xs.size(); ++d)
    out.push_back(L.size(x, static_cast<int64_t>(d)));
  L.set(n, L.tensor(L.method("reshape", {y, Lowerer::list_arg(out)}), n));
}

// ScatterND with reduction mul/max/min: scatter_reduce over the flattened data at each index
// tuple's elements (its row-major offset plus 0..slice-1); the data's shape must be static.
void scatter_nd_reduce(Lowerer& L, const Node& n, const std::string& reduction) {
  LVal x = L.in(n, 0), idx = L.in(n, 1);
  const auto xs = L.shape(x), is = L.shape(idx);
  std::vector<int64_t> shape;
  for (const auto& d : xs) {
    if (!d) L.unsupported(n, "reduction " + reduction + " on data whose shape changes");
    shape.push_back(*d);
  }
  if (is.empty() || !is.back())
    L.unsupported(n, "an index depth (last dim of indices) that changes");
  const int64_t k = *is.back(), r = static_cast<int64_t>(shape.size());
  if (k > r) L.unsupported(n, "index tuples longer than the data's rank");
  int64_t slice = 1;
  for (int64_t d = k; d < r; ++d) slice *= shape[d];
  std::vector<int64_t> dims(shape.begin(), shape.begin() + k), strides(k);
  for (int64_t j = k - 1, st = slice; j >= 0; --j) {
    strides[j] = st;
    st *= shape[j];
  }
  Node* ind = L.as_tensor(idx);
  Node* dims_t = L.call("torch.tensor", {int_list(dims)});
  ind = L.call("torch.where",
               {L.call("operator.lt", {ind, 0LL}), L.call("operator.add", {ind, dims_t}), ind});
  Node* base = L.method(
      "sum", {L.call("operator.mul", {ind, L.call("torch.tensor", {int_list(strides)})}), -1LL});
  Node* lin = L.call("operator.add", {L.method("unsqueeze", {base, -1LL}),
                                      L.call("torch.arange", {static_cast<long long>(slice)})});
  Node* data = L.method("reshape", {L.as_tensor(x), int_list({-1})});
  Node* upd = L.method("reshape", {L.as_tensor(L.in(n, 2)), int_list({-1})});
  const std::string how = reduction == "mul" ? "prod" : reduction == "max" ? "amax" : "amin";
  Node* y = L.method("scatter_reduce", {data, 0LL, L.method("flatten", {lin}), upd, how});
  L.set(n, L.tensor(L.method("reshape", {y, int_list(shape)}), n));
}

// A copy of data with updates put at indices (torch.index_put, functional).
void scatter_nd(Lowerer& L, const Node& n) {
  const std::string reduction = L.attr_string(n, "reduction", "none");
  if (reduction == "mul" || reduction == "max" || reduction == "min")
    return scatter_nd_reduce(L, n, reduction);
  if (reduction != "none" && reduction != "add") L.unsupported(n, "reduction " + reduction);
  Node* data = L.as_tensor(L.in(n, 0));
  Argument parts = index_tuple(L, n, L.in(n, 1));
  Node* updates = L.as_tensor(L.in(n, 2));
  Kwargs kw;
  if (reduction == "add") kw.set("accumulate", true);
  L.set(n, L.tensor(L.call("torch.index_put", {data, parts, updates}, std::move(kw)), n));
}

void scatter_elements(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const int64_t a = L.axis(n, L.attr_int(n, "axis", 0), L.rank(x));
  const std::string reduction = L.attr_string(n, "reduction", "none");
  Node* idx = non_negative(L, L.as_tensor(L.in(n, 1)), L.size(x, a));
  std::vector<Argument> args{L.as_tensor(x), static_cast<long long>(a), idx,
                             L.as_tensor(L.in(n, 2))};
  Node* y;
  if (reduction == "none") {
    y = L.call("torch.scatter", args);
  } else if (reduction == "add") {
    y = L.call("torch.scatter_add", args);
  } else if (reduction == "mul" || reduction == "max" || reduction == "min") {
    y = L.call("torch.scatter_reduce", args,
               {{"reduce", reduction == "mul"   ? std::string("prod")
                           : reduction == "max" ? std::string("amax")
                                                : std::string("amin")}});
  } else {
    L.unsupported(n, "reduction " + reduction);
  }
  L.set(n, L.tensor(y, n));
}

// OneHot(indices, depth, values = [off, on]): one_hot over a constant depth, then where().
void one_hot(Lowerer& L, const Node& n) {
  LVal idx = L.in(n, 0);
  // depth: a literal when constant, else int(depth) at run time (its first element).
  std::vector<SymInt> depth;
  SymInt d;
  if (L.as_ints(L.in(n, 1), depth) && depth.size() == 1) {
    d = depth[0];
  } else {
    Node* one = L.method("reshape", {L.as_tensor(L.in(n, 1)), int_list({-1})});
    d.expr = L.call("builtins.int", {L.method("item", {one})});
  }
  Node* i = L.as_tensor(idx);
  if (L.dtype(idx) != Dtype::Int64) i = L.method("to", {i, Dtype::Int64});
  Node* hot = L.call("torch._C._nn.one_hot", {non_negative(L, i, d), d.arg()});
  Node* values = L.as_tensor(L.in(n, 2));
  Node* y = L.call("torch.where", {L.method("bool", {hot}), L.method("select", {values, 0LL, 1LL}),
                                   L.method("select", {values, 0LL, 0LL})});
  const int64_t r = L.rank(idx) + 1;
  const int64_t a = L.axis(n, L.attr_int(n, "axis", -1), r);
  if (a != r - 1) y = L.method("movedim", {y, -1LL, static_cast<long long>(a)});
  L.set(n, L.tensor(y, n));
}

}  // namespace

void add_index_handlers(std::vector<HandlerEntry>& table) {
  table.insert(table.end(), {
                                {"GatherND", 11, gather_nd},
                                {"OneHot", 9, one_hot},
                                {"Scatter", 9, scatter_elements},  // ScatterElements before 11
                                {"ScatterElements", 11, scatter_elements},
                                {"ScatterND", 11, scatter_nd},
                            });
}

}  // namespace fx::torch_codegen
