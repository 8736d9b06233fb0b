// Lowering handlers of the ops that move data without computing: Shape and the shape
// arithmetic around it, Reshape, Transpose, Concat, Gather, Slice, Split, Expand...
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "fx/onnx.h"
#include "torch_codegen/lower_ops.h"

namespace fx::torch_codegen {

namespace {

using Kind = LVal::Kind;

// ---- shapes ----

void shape(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const int64_t r = L.rank(x);
  int64_t start = L.attr_int(n, "start", 0), end = L.attr_int(n, "end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  LVal out;
  out.kind = Kind::Ints;
  for (int64_t d = start; d < end; ++d) out.ints.push_back(L.size(x, d));
  L.set(n, out);
}

void size(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const auto s = L.shape(x);
  LVal out;
  out.kind = Kind::Scalar;
  int64_t prod = 1;
  bool known = true;
  for (const auto& d : s) {
    if (!d) known = false;
    if (d) prod *= *d;
  }
  out.ints.push_back(known ? SymInt{prod, {}}
                           : SymInt{std::nullopt, L.method("numel", {L.as_tensor(x)})});
  L.set(n, out);
}

void reshape(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0), s = L.in(n, 1);
  std::vector<SymInt> dims;
  if (!L.as_ints(s, dims)) {
    Node* list = L.method("tolist", {L.as_tensor(s)});
    L.set(n, L.tensor(L.method("reshape", {L.as_tensor(x), list}), n));
    return;
  }
  if (!L.attr_int(n, "allowzero", 0))
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i].value && *dims[i].value == 0) dims[i] = L.size(x, static_cast<int64_t>(i));
  L.set(n, L.tensor(L.method("reshape", {L.as_tensor(x), Lowerer::list_arg(dims)}), n));
}

void flatten(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const int64_t r = L.rank(x);
  // Flatten's axis lies in [-r, r]: a negative one counts from the end of the r dims.
  int64_t a = L.attr_int(n, "axis", 1);
  a = L.axis(n, a < 0 ? a + r : a, r + 1);
  Node* t = L.as_tensor(x);
  Node* y;
  if (a == 0) {
    y = L.method("reshape", {t, int_list({1, -1})});
  } else if (a == r) {
    y = L.method("reshape", {t, int_list({-1, 1})});
  } else if (a == 1) {
    y = L.call("torch.flatten", {t, 1LL});
  } else {
    y = L.method("flatten", {L.method("flatten", {t, 0LL, static_cast<long long>(a - 1)}), 1LL});
  }
  L.set(n, L.tensor(y, n));
}

void transpose(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const int64_t r = L.rank(x);
  std::vector<int64_t> perm = L.attr_ints(n, "perm");
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  L.set(n, L.tensor(L.method("permute", {L.as_tensor(x), int_list(perm)}), n));
}

void unsqueeze(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  std::vector<int64_t> axes = axes_of(L, n, 1, 13);
  if (x.kind == Kind::Scalar && axes.size() == 1 && (axes[0] == 0 || axes[0] == -1)) {
    LVal out = x;
    out.kind = Kind::Ints;
    L.set(n, out);
    return;
  }
  const int64_t out_rank = L.rank(x) + static_cast<int64_t>(axes.size());
  for (int64_t& a : axes) a = L.axis(n, a, out_rank);
  std::sort(axes.begin(), axes.end());
  Node* t = L.as_tensor(x);
  for (int64_t a : axes) t = L.method("unsqueeze", {t, static_cast<long long>(a)});
  L.set(n, L.tensor(t, n));
}

void squeeze(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  std::vector<int64_t> axes = axes_of(L, n, 1, 13);
  if (x.kind == Kind::Ints && x.ints.size() == 1 &&
      (axes.empty() || axes == std::vector<int64_t>{0} || axes == std::vector<int64_t>{-1})) {
    LVal out = x;
    out.kind = Kind::Scalar;
    L.set(n, out);
    return;
  }
  const auto s = L.shape(x);
  const int64_t r = static_cast<int64_t>(s.size());
  if (axes.empty()) {
    for (int64_t d = 0; d < r; ++d) {
      if (!s[d]) L.unsupported(n, "Squeeze without axes on a dim whose size changes");
      if (*s[d] == 1) axes.push_back(d);
    }
  }
  for (int64_t& a : axes) a = L.axis(n, a, r);
  std::sort(axes.rbegin(), axes.rend());
  Node* t = L.as_tensor(x);
  for (int64_t a : axes) t = L.method("squeeze", {t, static_cast<long long>(a)});
  L.set(n, L.tensor(t, n));
}

void concat(Lowerer& L, const Node& n) {
  bool ints = true, any_shape = false;
  std::vector<SymInt> all;
  for (size_t i = 0; i < L.num_inputs(n); ++i) {
    LVal v = L.in(n, i);
    std::vector<SymInt> part;
    if (v.kind == Kind::Ints) any_shape = true;
    if (v.kind == Kind::Scalar || !L.as_ints(v, part)) {
      ints = false;
      break;
    }
    all.insert(all.end(), part.begin(), part.end());
  }
  if (ints && any_shape) {
    LVal out;
    out.kind = Kind::Ints;
    out.ints = std::move(all);
    L.set(n, out);
    return;
  }
  Argument::Items items;
  for (size_t i = 0; i < L.num_inputs(n); ++i) items.push_back(L.as_tensor(L.in(n, i)));
  LVal first = L.in(n, 0);
  const int64_t a = L.axis(n, L.attr_int(n, "axis", 0), L.rank(first));
  L.set(n, L.tensor(L.call("torch.cat", {Argument::list(std::move(items))},
                           {{"dim", static_cast<long long>(a)}}),
                    n));
}

void gather(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0), idx = L.in(n, 1);
  std::vector<SymInt> xi, ii;
  if ((x.kind == Kind::Ints) && L.as_ints(idx, ii)) {
    LVal out;
    out.kind = (idx.kind == Kind::Scalar || (idx.constant && idx.constant->shape.empty()))
                   ? Kind::Scalar
                   : Kind::Ints;
    for (const SymInt& k : ii) {
      if (!k.value) L.unsupported(n, "a shape element picked by a computed index");
      int64_t j = *k.value < 0 ? *k.value + static_cast<int64_t>(x.ints.size()) : *k.value;
      if (j < 0 || j >= static_cast<int64_t>(x.ints.size()))
        L.unsupported(n, "index " + std::to_string(*k.value) + " is out of range");
      out.ints.push_back(x.ints[j]);
    }
    L.set(n, out);
    return;
  }
  const int64_t r = L.rank(x);
  const int64_t a = L.axis(n, L.attr_int(n, "axis", 0), r);
  Node* t = L.as_tensor(x);
  const bool scalar_index =
      idx.kind == Kind::Scalar || (idx.constant && idx.constant->shape.empty());
  if (scalar_index) {
    Argument i = L.as_operand(idx, 0);
    if (i.is_node() && idx.kind != Kind::Scalar) i = L.method("item", {i});
    L.set(n, L.tensor(L.method("select", {t, static_cast<long long>(a), i}), n));
    return;
  }
  Argument::Items key;
  for (int64_t d = 0; d < a; ++d) key.push_back(Argument::slice({}, {}, {}));
  key.push_back(L.as_tensor(idx));
  L.set(n, L.tensor(L.call("operator.getitem", {t, Argument::tuple(std::move(key))}), n));
}

void gather_elements(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  Node* idx = L.as_tensor(L.in(n, 1));
  const int64_t a = L.axis(n, L.attr_int(n, "axis", 0), L.rank(x));
  Node* t = L.as_tensor(x);
  // ONNX allows negative indices; torch.gather does not.
  Node* fixed = L.call("torch.where", {L.call("operator.lt", {idx, 0LL}),
                                       L.call("operator.add", {idx, L.size(x, a).arg()}), idx});
  L.set(n, L.tensor(L.call("torch.gather", {t, static_cast<long long>(a), fixed}), n));
}

void slice(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  std::vector<SymInt> starts, ends, axes_s, steps_s;
  std::vector<int64_t> axes, steps;
  if (L.opset() < 10) {
    for (int64_t v : L.attr_ints(n, "starts")) starts.push_back({v, {}});
    for (int64_t v : L.attr_ints(n, "ends")) ends.push_back({v, {}});
    axes = L.attr_ints(n, "axes");
  } else {
    if (!L.as_ints(L.in(n, 1), starts) || !L.as_ints(L.in(n, 2), ends))
      L.unsupported(n, "starts/ends must be constants or shape arithmetic");
    if (L.in(n, 3).kind != Kind::None) axes = L.static_ints(n, L.in(n, 3), "axes");
    if (L.in(n, 4).kind != Kind::None) steps = L.static_ints(n, L.in(n, 4), "steps");
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (starts.size() != ends.size() || axes.size() != starts.size() || steps.size() != starts.size())
    L.unsupported(n, "starts, ends, axes and steps differ in length");
  for (int64_t s : steps)
    if (s == 0) L.unsupported(n, "a step of 0");
  if (x.kind == Kind::Ints) {
    for (int64_t s : steps)
      if (s < 0) L.unsupported(n, "a negative step over a shape");
    std::vector<SymInt> in = x.ints;
    const int64_t len = static_cast<int64_t>(in.size());
    if (!starts[0].value || !ends[0].value) L.unsupported(n, "a computed slice of a shape");
    auto clampi = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + len : v, 0, len); };
    LVal out;
    out.kind = Kind::Ints;
    for (int64_t i = clampi(*starts[0].value); i < clampi(*ends[0].value); i += steps[0])
      out.ints.push_back(in[i]);
    L.set(n, out);
    return;
  }
  const int64_t r = L.rank(x);
  std::vector<Argument> key(static_cast<size_t>(r), Argument::slice({}, {}, {}));
  int64_t last = -1;
  Node* t = L.as_tensor(x);
  const auto dims = L.shape(x);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = L.axis(n, axes[i], r);
    if (steps[i] < 0) {
      // torch slices only forward: flip the dim and walk it forward. ONNX clamps a backward
      // start to [0, D - 1] and end to [-1, D - 1]; position p is D - 1 - p after the flip.
      if (!dims[a] || !starts[i].value || !ends[i].value)
        L.unsupported(n, "a negative step over a dim or bounds that change");
      const int64_t d = *dims[a];
      auto clamp_to = [&](int64_t v, int64_t lo) {
        return std::clamp<int64_t>(v < 0 ? v + d : v, lo, d - 1);
      };
      const int64_t s0 = clamp_to(*starts[i].value, 0), e0 = clamp_to(*ends[i].value, -1);
      t = L.method("flip", {t, int_list({a})});
      key[a] = Argument::slice(
          static_cast<long long>(d - 1 - s0), static_cast<long long>(d - 1 - e0),
          steps[i] == -1 ? Argument() : Argument(static_cast<long long>(-steps[i])));
      last = std::max(last, a);
      continue;
    }
    Argument start = starts[i].arg(), stop = ends[i].arg();
    // Python slices clamp like ONNX; drop the bounds that say "from the start"/"to the end".
    if (starts[i].value && *starts[i].value == 0) start = Argument();
    if (ends[i].value && *ends[i].value >= std::numeric_limits<int32_t>::max()) stop = Argument();
    key[a] = Argument::slice(
        start, stop, steps[i] == 1 ? Argument() : Argument(static_cast<long long>(steps[i])));
    last = std::max(last, a);
  }
  key.resize(static_cast<size_t>(last + 1));
  L.set(n, L.tensor(L.call("operator.getitem", {t, Argument::tuple(std::move(key))}), n));
}

void split(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const int64_t a = L.axis(n, L.attr_int(n, "axis", 0), L.rank(x));
  std::vector<int64_t> sizes;
  if (L.opset() >= 13) {
    if (L.in(n, 1).kind != Kind::None) sizes = L.static_ints(n, L.in(n, 1), "split");
  } else {
    sizes = L.attr_ints(n, "split");
  }
  size_t outs = 0;
  for (const Node* u : n.users())
    if (u->args().size() == 2) outs = std::max<size_t>(outs, u->args()[1].to_int() + 1);
  if (const Argument* names = n.meta().find(onnx::meta::kOutputs); names && names->is_sequence())
    outs = std::max(outs, names->elements().size());
  if (L.has_attr(n, "num_outputs")) outs = static_cast<size_t>(L.attr_int(n, "num_outputs", 1));
  Argument how;
  if (!sizes.empty()) {
    how = int_list(sizes);
    outs = sizes.size();
  } else {
    const std::optional<int64_t> dim = L.shape(x).at(a);
    if (!dim) L.unsupported(n, "an even split of a dim whose size changes");
    how = static_cast<long long>((*dim + static_cast<int64_t>(outs) - 1) /
                                 static_cast<int64_t>(outs));
  }
  Node* parts = L.call("torch.split", {L.as_tensor(x), how}, {{"dim", static_cast<long long>(a)}});
  std::vector<LVal> values;
  for (size_t i = 0; i < outs; ++i) {
    LVal v = L.tensor(L.call("operator.getitem", {parts, static_cast<long long>(i)}), n);
    v.shape_of = nullptr;  // the getitem users of the old node carry the shapes
    values.push_back(v);
  }
  L.set(n, values);
}

void expand(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  std::vector<SymInt> dims;
  if (!L.as_ints(L.in(n, 1), dims))
    L.unsupported(n, "the shape must be constant or shape arithmetic");
  const int64_t r = L.rank(x), k = static_cast<int64_t>(dims.size());
  const int64_t out_rank = std::max(r, k);
  Argument::Items target;
  for (int64_t i = 0; i < out_rank; ++i) {
    const int64_t di = i - (out_rank - k);  // index into dims
    if (di < 0) {
      target.emplace_back(-1LL);
    } else if (dims[di].value && *dims[di].value == 1 && i - (out_rank - r) >= 0) {
      target.emplace_back(-1LL);  // keeps x's size (ONNX broadcasts both ways)
    } else {
      target.push_back(dims[di].arg());
    }
  }
  L.set(n, L.tensor(L.method("expand", {L.as_tensor(x), Argument::list(std::move(target))}), n));
}

void tile(Lowerer& L, const Node& n) {
  std::vector<SymInt> reps;
  if (!L.as_ints(L.in(n, 1), reps))
    L.unsupported(n, "repeats must be constant or shape arithmetic");
  L.set(n, L.tensor(L.method("repeat", {L.as_tensor(L.in(n, 0)), Lowerer::list_arg(reps)}), n));
}

// A Constant node the importer kept as a node (value_int(s) / value_float(s) attributes).
void constant(Lowerer& L, const Node& n) {
  if (const Argument* v = n.kwargs().find("value_ints"); v && v->is_sequence()) {
    LVal out;
    out.kind = Kind::Ints;
    for (const Argument& e : v->elements()) out.ints.push_back({e.to_int(), {}});
    L.set(n, out);
    return;
  }
  if (const Argument* v = n.kwargs().find("value_int")) {
    LVal out;
    out.kind = Kind::Scalar;
    out.ints.push_back({v->to_int(), {}});
    L.set(n, out);
    return;
  }
  std::vector<float> values;
  Tensor t;
  if (const Argument* v = n.kwargs().find("value_floats"); v && v->is_sequence()) {
    for (const Argument& e : v->elements()) values.push_back(static_cast<float>(e.to_double()));
    t.shape = {static_cast<int64_t>(values.size())};
  } else if (const Argument* f = n.kwargs().find("value_float")) {
    values.push_back(static_cast<float>(f->to_double()));
  } else {
    L.unsupported(n, "a Constant without value_int(s) or value_float(s)");
  }
  auto bytes = std::make_shared<std::vector<uint8_t>>(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(bytes->data(), values.data(), bytes->size());
  t.data = std::move(bytes);
  LVal c = L.new_constant(std::move(t), "_constant_" + n.name());
  c.shape_of = &n;
  L.set(n, c);
}

void constant_of_shape(Lowerer& L, const Node& n) {
  std::vector<SymInt> dims;
  // A shape computed as a tensor (a graph input) becomes a list at run time: that runs, but
  // symbolic_trace cannot trace a tensor used as a shape.
  Argument shape_arg;
  if (L.as_ints(L.in(n, 0), dims))
    shape_arg = Lowerer::list_arg(dims);
  else
    shape_arg = L.method("tolist", {L.as_tensor(L.in(n, 0))});
  const Dtype dt = L.dtype(n);
  Argument value = is_float(dt) ? Argument(0.0) : Argument(0LL);
  if (const Argument* v = n.kwargs().find("value")) {
    if (v->kind() == Argument::Kind::Float)
      value = float32_value(v->to_double());
    else if (v->kind() == Argument::Kind::Int || v->kind() == Argument::Kind::Bool)
      value =
          is_float(dt) ? Argument(v->to_double()) : Argument(static_cast<long long>(v->to_int()));
    else
      L.unsupported(n, "value attribute " + v->repr());
  }
  L.set(n, L.tensor(L.call("torch.full", {shape_arg, value}, {{"dtype", dt}}), n));
}

void range(Lowerer& L, const Node& n) {
  Argument args[3];
  for (size_t i = 0; i < 3; ++i) {
    LVal v = L.in(n, i);
    std::vector<SymInt> s;
    if ((v.kind == Kind::Scalar || (v.constant && v.constant->shape.empty())) && L.as_ints(v, s))
      args[i] = s[0].arg();
    else
      args[i] = L.as_operand(v, 0);
  }
  L.set(n,
        L.tensor(L.call("torch.arange", {args[0], args[1], args[2]}, {{"dtype", L.dtype(n)}}), n));
}

}  // namespace

void add_shape_handlers(std::vector<HandlerEntry>& table) {
  table.insert(table.end(), {
                                {"Concat", 4, concat},
                                {"Constant", 1, constant},
                                {"ConstantOfShape", 9, constant_of_shape},
                                {"Expand", 8, expand},
                                {"Flatten", 1, flatten},
                                {"Gather", 1, gather},
                                {"GatherElements", 11, gather_elements},
                                {"Range", 11, range},
                                {"Reshape", 5, reshape},
                                {"Shape", 1, shape},
                                {"Size", 1, size},
                                {"Slice", 1, slice},
                                {"Slice", 10, slice},
                                {"Split", 2, split},
                                {"Split", 13, split},
                                {"Squeeze", 1, squeeze},
                                {"Squeeze", 13, squeeze},
                                {"Tile", 6, tile},
                                {"Transpose", 1, transpose},
                                {"Unsqueeze", 1, unsqueeze},
                                {"Unsqueeze", 13, unsqueeze},
                            });
}

}  // namespace fx::torch_codegen
