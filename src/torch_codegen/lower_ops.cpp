// The lowering's handlers: one function per ONNX op (or family), registered below by
// (op type, since_version). Each reads its inputs through the Lowerer, emits torch nodes and
// sets the node's outputs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "fx/onnx.h"
#include "torch_codegen/lower_internal.h"

namespace fx::torch_codegen {

namespace {

using Kind = LVal::Kind;

// ---- small helpers ----

// Python's repr of a tuple of ints: "(3,)", "(3, 3)".
std::string py_tuple(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

Argument int_list(const std::vector<int64_t>& v) {
  Argument::Items items;
  for (int64_t x : v) items.emplace_back(static_cast<long long>(x));
  return Argument::list(std::move(items));
}

// The shortest decimal that reads back as the same float32 (ONNX float attributes are float32:
// 1e-05 rather than 9.999999747378752e-06).
double float32_value(double v) {
  const float f = static_cast<float>(v);
  char buf[32];
  for (int p = 1; p <= 9; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, static_cast<double>(f));
    if (static_cast<float>(std::strtod(buf, nullptr)) == f) return std::strtod(buf, nullptr);
  }
  return static_cast<double>(f);
}

// A copy of a constant, for a module's parameter (with another shape, or transposed).
Tensor reshaped(const Tensor& t, std::vector<int64_t> shape) {
  Tensor r = t;
  r.shape = std::move(shape);
  r.external = nullptr;
  r.data = t.bytes();
  return r;
}

Tensor transposed_2d(const Tensor& t) {
  const int64_t rows = t.shape.at(0), cols = t.shape.at(1);
  const size_t es = dtype_size(t.dtype);
  Bytes src = t.bytes();
  auto out = std::make_shared<std::vector<uint8_t>>(src->size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(out->data() + (c * rows + r) * es, src->data() + (r * cols + c) * es, es);
  Tensor o;
  o.dtype = t.dtype;
  o.shape = {cols, rows};
  o.data = std::move(out);
  return o;
}

Tensor scalar_tensor_i64(int64_t v) {
  Tensor t;
  t.dtype = Dtype::Int64;
  t.shape = {};
  auto bytes = std::make_shared<std::vector<uint8_t>>(sizeof v);
  std::memcpy(bytes->data(), &v, sizeof v);
  t.data = std::move(bytes);
  return t;
}

Tensor zeros_f32(int64_t n) {
  Tensor t;
  t.dtype = Dtype::Float32;
  t.shape = {n};
  t.data = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n) * 4, 0);
  return t;
}

bool is_float(Dtype d) {
  return d == Dtype::Float32 || d == Dtype::Float64 || d == Dtype::Float16 || d == Dtype::BFloat16;
}

// The constant tensor an old-graph argument reads, through Identity nodes, or null.
const Tensor* old_constant(const GraphModule& gm, const Argument& a) {
  const Node* n = a.is_node() ? a.to_node() : nullptr;
  while (n && n->op() == Opcode::CallFunction &&
         n->target().function().qualname() == "onnx.Identity" && !n->args().empty() &&
         n->args()[0].is_node())
    n = n->args()[0].to_node();
  return n && n->op() == Opcode::GetAttr ? gm.get_tensor(n->target().str()) : nullptr;
}

// Whether output `k` (> 0: through an operator.getitem) of `n` is read by anything.
bool output_used(const Node& n, int64_t k) {
  for (const Node* u : n.users())
    if (u->op() == Opcode::CallFunction &&
        u->target().function().qualname() == "operator.getitem" && u->args().size() == 2 &&
        u->args()[1].kind() == Argument::Kind::Int && u->args()[1].to_int() == k &&
        !u->users().empty())
      return true;
  return false;
}

// The pairs of an ONNX pads list [b0, b1, ..., e0, e1, ...] over `dims` spatial dims.
struct Pads {
  std::vector<int64_t> begin, end;
  bool symmetric() const { return begin == end; }
  bool zero() const {
    return std::all_of(begin.begin(), begin.end(), [](int64_t p) { return p == 0; }) &&
           std::all_of(end.begin(), end.end(), [](int64_t p) { return p == 0; });
  }
  // torch.nn.functional.pad's order: the last dim first.
  std::vector<int64_t> torch_order() const {
    std::vector<int64_t> out;
    for (size_t i = begin.size(); i-- > 0;) {
      out.push_back(begin[i]);
      out.push_back(end[i]);
    }
    return out;
  }
};

// Conv/pool pads from the attributes, with auto_pad resolved on the static input sizes.
Pads spatial_pads(Lowerer& L, const Node& n, const LVal& x, const std::vector<int64_t>& kernel,
                  const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations) {
  const size_t d = kernel.size();
  Pads p{std::vector<int64_t>(d, 0), std::vector<int64_t>(d, 0)};
  const std::string auto_pad = L.attr_string(n, "auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    const std::vector<int64_t> pads = L.attr_ints(n, "pads", std::vector<int64_t>(2 * d, 0));
    if (pads.size() != 2 * d) L.unsupported(n, "pads has the wrong length");
    for (size_t i = 0; i < d; ++i) {
      p.begin[i] = pads[i];
      p.end[i] = pads[d + i];
    }
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const auto s = L.shape(x);
    for (size_t i = 0; i < d; ++i) {
      const std::optional<int64_t> in = s.at(2 + i);
      if (!in) L.unsupported(n, "auto_pad " + auto_pad + " on a spatial dim that changes size");
      const int64_t out = (*in + strides[i] - 1) / strides[i];
      const int64_t total =
          std::max<int64_t>((out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - *in, 0);
      p.begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      p.end[i] = total - p.begin[i];
    }
  } else if (auto_pad != "VALID") {
    L.unsupported(n, "auto_pad " + auto_pad);
  }
  return p;
}

// ---- elementwise ----

template <const char* F>
void unary(Lowerer& L, const Node& n) {
  L.set(n, L.tensor(L.call(F, {L.as_tensor(L.in(n, 0))}), n));
}

void identity(Lowerer& L, const Node& n) {
  LVal v = L.in(n, 0);
  L.set(n, v);
}

void dropout(Lowerer& L, const Node& n) {
  if (output_used(n, 1)) L.unsupported(n, "its mask output is used");
  LVal v = L.in(n, 0);
  L.set(n, std::vector<LVal>{v, LVal{}});
}

// Integer arithmetic on Python ints (shape arithmetic), elementwise with broadcasting.
bool int_binary(Lowerer& L, const Node& n, const char* py_op, int64_t (*fold)(int64_t, int64_t)) {
  LVal a = L.in(n, 0), b = L.in(n, 1);
  if (!(a.kind == Kind::Ints || a.kind == Kind::Scalar || b.kind == Kind::Ints ||
        b.kind == Kind::Scalar))
    return false;
  std::vector<SymInt> x, y;
  if (!L.as_ints(a, x) || !L.as_ints(b, y)) return false;
  const bool vector = a.kind == Kind::Ints || b.kind == Kind::Ints ||
                      (a.constant && a.constant->shape.size() == 1) ||
                      (b.constant && b.constant->shape.size() == 1);
  const size_t len = std::max(x.size(), y.size());
  if ((x.size() != len && x.size() != 1) || (y.size() != len && y.size() != 1)) return false;
  LVal out;
  out.kind = vector ? Kind::Ints : Kind::Scalar;
  for (size_t i = 0; i < len; ++i) {
    const SymInt& l = x[x.size() == 1 ? 0 : i];
    const SymInt& r = y[y.size() == 1 ? 0 : i];
    if (l.value && r.value) {
      out.ints.push_back({fold(*l.value, *r.value), {}});
    } else {
      out.ints.push_back({std::nullopt, L.call(py_op, {l.arg(), r.arg()})});
    }
  }
  L.set(n, out);
  return true;
}

int64_t fold_add(int64_t a, int64_t b) { return a + b; }
int64_t fold_sub(int64_t a, int64_t b) { return a - b; }
int64_t fold_mul(int64_t a, int64_t b) { return a * b; }
int64_t fold_div(int64_t a, int64_t b) { return b == 0 ? 0 : a / b; }  // ONNX: truncation

// Fold null: no shape-arithmetic form (Pow).
template <const char* F, int64_t (*Fold)(int64_t, int64_t), const char* IntOp>
void binary(Lowerer& L, const Node& n) {
  if constexpr (Fold != nullptr)
    if (int_binary(L, n, IntOp, Fold)) return;
  LVal a = L.in(n, 0), b = L.in(n, 1);
  const int64_t ra = a.constant ? -1 : L.rank(a), rb = b.constant ? -1 : L.rank(b);
  Argument x = L.as_operand(a, rb), y = L.as_operand(b, ra);
  if (!x.is_node() && !y.is_node()) x = L.as_tensor(a);
  L.set(n, L.tensor(L.call(F, {x, y}), n));
}

constexpr char kAdd[] = "operator.add", kSub[] = "operator.sub", kMul[] = "operator.mul",
               kTrueDiv[] = "operator.truediv", kFloorDiv[] = "operator.floordiv",
               kPow[] = "operator.pow", kEq[] = "operator.eq", kLt[] = "operator.lt",
               kGt[] = "operator.gt", kLe[] = "operator.le", kGe[] = "operator.ge";

void div(Lowerer& L, const Node& n) {
  if (int_binary(L, n, kFloorDiv, fold_div)) return;
  LVal a = L.in(n, 0), b = L.in(n, 1);
  if (is_float(L.dtype(a))) {
    binary<kTrueDiv, fold_div, kFloorDiv>(L, n);
    return;
  }
  // Integer tensors: ONNX truncates toward zero.
  L.set(n, L.tensor(
               L.call("torch.div", {L.as_tensor(a), L.as_tensor(b)}, {{"rounding_mode", "trunc"}}),
               n));
}

void compare_like(Lowerer& L, const Node& n, const char* f) {
  LVal a = L.in(n, 0), b = L.in(n, 1);
  const int64_t ra = a.constant ? -1 : L.rank(a), rb = b.constant ? -1 : L.rank(b);
  Argument x = L.as_operand(a, rb), y = L.as_operand(b, ra);
  if (!x.is_node()) x = L.as_tensor(a);
  L.set(n, L.tensor(L.call(f, {x, y}), n));
}
template <const char* F>
void compare(Lowerer& L, const Node& n) {
  compare_like(L, n, F);
}

template <const char* F>
void tensor_binary(Lowerer& L, const Node& n) {
  L.set(n, L.tensor(L.call(F, {L.as_tensor(L.in(n, 0)), L.as_tensor(L.in(n, 1))}), n));
}

template <const char* F>
void variadic(Lowerer& L, const Node& n) {
  Node* acc = L.as_tensor(L.in(n, 0));
  for (size_t i = 1; i < L.num_inputs(n); ++i) acc = L.call(F, {acc, L.as_tensor(L.in(n, i))});
  L.set(n, L.tensor(acc, n));
}

void mean_variadic(Lowerer& L, const Node& n) {
  Node* acc = L.as_tensor(L.in(n, 0));
  for (size_t i = 1; i < L.num_inputs(n); ++i)
    acc = L.call("operator.add", {acc, L.as_tensor(L.in(n, i))});
  L.set(n, L.tensor(L.call("operator.truediv", {acc, static_cast<double>(L.num_inputs(n))}), n));
}

void clip(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  Kwargs kw;
  if (L.opset() < 11) {
    if (L.has_attr(n, "min")) kw.set("min", float32_value(L.attr_float(n, "min", 0)));
    if (L.has_attr(n, "max")) kw.set("max", float32_value(L.attr_float(n, "max", 0)));
  } else {
    const char* names[] = {"min", "max"};
    for (size_t i = 1; i <= 2; ++i) {
      LVal b = L.in(n, i);
      if (b.kind == Kind::None) continue;
      kw.set(names[i - 1], L.as_operand(b, 0));
    }
  }
  if (kw.empty()) {
    L.set(n, x);
    return;
  }
  L.set(n, L.tensor(L.call("torch.clamp", {L.as_tensor(x)}, std::move(kw)), n));
}

void leaky_relu(Lowerer& L, const Node& n) {
  L.set(n,
        L.tensor(L.call("torch.nn.functional.leaky_relu",
                        {L.as_tensor(L.in(n, 0)), float32_value(L.attr_float(n, "alpha", 0.01))}),
                 n));
}

void elu(Lowerer& L, const Node& n) {
  L.set(n, L.tensor(L.call("torch.nn.functional.elu",
                           {L.as_tensor(L.in(n, 0)), float32_value(L.attr_float(n, "alpha", 1.0))}),
                    n));
}

void gelu(Lowerer& L, const Node& n) {
  const std::string approx = L.attr_string(n, "approximate", "none");
  Kwargs kw;
  if (approx != "none") kw.set("approximate", approx);
  L.set(n,
        L.tensor(L.call("torch.nn.functional.gelu", {L.as_tensor(L.in(n, 0))}, std::move(kw)), n));
}

void hard_sigmoid(Lowerer& L, const Node& n) {
  const double alpha = float32_value(L.attr_float(n, "alpha", 0.2));
  const double beta = float32_value(L.attr_float(n, "beta", 0.5));
  Node* y =
      L.call("operator.add", {L.call("operator.mul", {L.as_tensor(L.in(n, 0)), alpha}), beta});
  L.set(n, L.tensor(L.call("torch.clamp", {y}, {{"min", 0.0}, {"max", 1.0}}), n));
}

void prelu(Lowerer& L, const Node& n) {
  Node* x = L.as_tensor(L.in(n, 0));
  Node* slope = L.as_tensor(L.in(n, 1));
  L.set(n, L.tensor(L.call("torch.where", {L.call("operator.ge", {x, 0.0}), x,
                                           L.call("operator.mul", {x, slope})}),
                    n));
}

void where(Lowerer& L, const Node& n) {
  L.set(n, L.tensor(L.call("torch.where", {L.as_tensor(L.in(n, 0)), L.as_tensor(L.in(n, 1)),
                                           L.as_tensor(L.in(n, 2))}),
                    n));
}

void cast(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const Dtype to =
      onnx::dtype_from_onnx(static_cast<int32_t>(L.attr_int(n, "to", 1)), "Cast attribute 'to'");
  if ((x.kind == Kind::Ints || x.kind == Kind::Scalar) &&
      (to == Dtype::Int64 || to == Dtype::Int32)) {
    L.set(n, x);
    return;
  }
  L.set(n, L.tensor(L.method("to", {L.as_tensor(x), to}), n));
}

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
  const int64_t a = L.axis(n, L.attr_int(n, "axis", 1), r + 1);
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

std::vector<int64_t> axes_of(Lowerer& L, const Node& n, size_t input, int64_t since_input) {
  if (L.opset() >= since_input) {
    LVal a = L.in(n, input);
    if (a.kind == Kind::None) return {};
    return L.static_ints(n, a, "axes");
  }
  return L.attr_ints(n, "axes");
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
    if (s <= 0) L.unsupported(n, "a step of " + std::to_string(s) + " (torch slices step > 0)");
  if (x.kind == Kind::Ints) {
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
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = L.axis(n, axes[i], r);
    Argument start = starts[i].arg(), stop = ends[i].arg();
    // Python slices clamp like ONNX; drop the bounds that say "from the start"/"to the end".
    if (starts[i].value && *starts[i].value == 0) start = Argument();
    if (ends[i].value && *ends[i].value >= std::numeric_limits<int32_t>::max()) stop = Argument();
    key[a] = Argument::slice(
        start, stop, steps[i] == 1 ? Argument() : Argument(static_cast<long long>(steps[i])));
    last = std::max(last, a);
  }
  key.resize(static_cast<size_t>(last + 1));
  L.set(n,
        L.tensor(L.call("operator.getitem", {L.as_tensor(x), Argument::tuple(std::move(key))}), n));
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

void constant_of_shape(Lowerer& L, const Node& n) {
  std::vector<SymInt> dims;
  if (!L.as_ints(L.in(n, 0), dims))
    L.unsupported(n, "the shape must be constant or shape arithmetic");
  LVal probe = L.tensor(nullptr, n);
  const Dtype dt = L.dtype(probe);
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
  L.set(n, L.tensor(L.call("torch.full", {Lowerer::list_arg(dims), value}, {{"dtype", dt}}), n));
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
  LVal probe = L.tensor(nullptr, n);
  L.set(n,
        L.tensor(L.call("torch.arange", {args[0], args[1], args[2]}, {{"dtype", L.dtype(probe)}}),
                 n));
}

// ---- reductions and pooling ----

void reduce(Lowerer& L, const Node& n, const char* method, int64_t axes_input_since) {
  LVal x = L.in(n, 0);
  const int64_t r = L.rank(x);
  std::vector<int64_t> axes = axes_of(L, n, 1, axes_input_since);
  if (axes.empty()) {
    if (L.attr_int(n, "noop_with_empty_axes", 0)) {
      L.set(n, x);
      return;
    }
    for (int64_t d = 0; d < r; ++d) axes.push_back(d);
  }
  for (int64_t& a : axes) a = L.axis(n, a, r);
  const bool keep = L.attr_int(n, "keepdims", 1) != 0;
  Node* t = L.as_tensor(x);
  Node* y;
  if (std::string(method) == "prod") {
    std::sort(axes.rbegin(), axes.rend());
    y = t;
    for (int64_t a : axes)
      y = L.method("prod", {y, static_cast<long long>(a)}, {{"keepdim", keep}});
  } else if (std::string(method) == "amax" || std::string(method) == "amin") {
    y = L.call(std::string(method) == "amax" ? "torch.amax" : "torch.amin", {t, int_list(axes)},
               {{"keepdim", keep}});
  } else {
    y = L.method(method, {t, int_list(axes)}, {{"keepdim", keep}});
  }
  L.set(n, L.tensor(y, n));
}
void reduce_mean(Lowerer& L, const Node& n) { reduce(L, n, "mean", 18); }
void reduce_sum(Lowerer& L, const Node& n) { reduce(L, n, "sum", 13); }
void reduce_max(Lowerer& L, const Node& n) { reduce(L, n, "amax", 18); }
void reduce_min(Lowerer& L, const Node& n) { reduce(L, n, "amin", 18); }
void reduce_prod(Lowerer& L, const Node& n) { reduce(L, n, "prod", 18); }

void global_pool(Lowerer& L, const Node& n, bool max) {
  LVal x = L.in(n, 0);
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < L.rank(x); ++d) dims.push_back(d);
  Node* t = L.as_tensor(x);
  Node* y = max ? L.call("torch.amax", {t, int_list(dims)}, {{"keepdim", true}})
                : L.method("mean", {t, int_list(dims)}, {{"keepdim", true}});
  L.set(n, L.tensor(y, n));
}
void global_average_pool(Lowerer& L, const Node& n) { global_pool(L, n, false); }
void global_max_pool(Lowerer& L, const Node& n) { global_pool(L, n, true); }

void pool(Lowerer& L, const Node& n, bool max) {
  if (output_used(n, 1)) L.unsupported(n, "its Indices output is used");
  LVal x = L.in(n, 0);
  const std::vector<int64_t> kernel = L.attr_ints(n, "kernel_shape");
  const size_t d = kernel.size();
  if (d < 1 || d > 3) L.unsupported(n, "pooling over " + std::to_string(d) + " dims");
  const std::vector<int64_t> strides = L.attr_ints(n, "strides", std::vector<int64_t>(d, 1));
  const std::vector<int64_t> dil = L.attr_ints(n, "dilations", std::vector<int64_t>(d, 1));
  Pads p = spatial_pads(L, n, x, kernel, strides, dil);
  const bool ceil = L.attr_int(n, "ceil_mode", 0) != 0;
  Node* t = L.as_tensor(x);
  std::vector<int64_t> padding = p.begin;
  bool half_ok = true;
  for (size_t i = 0; i < d; ++i) half_ok = half_ok && p.begin[i] * 2 <= kernel[i];
  if (!p.symmetric() || !half_ok) {
    if (!max && !L.attr_int(n, "count_include_pad", 0))
      L.unsupported(n, "asymmetric padding with count_include_pad = 0");
    Kwargs kw;
    if (max) kw.set("value", -std::numeric_limits<double>::infinity());
    t = L.call("torch.nn.functional.pad", {t, int_list(p.torch_order())}, std::move(kw));
    padding.assign(d, 0);
  }
  const std::string f = std::string("torch.nn.functional.") + (max ? "max_pool" : "avg_pool") +
                        std::to_string(d) + "d";
  // The argument forms torch.fx records when it traces these calls, so that tracing the
  // generated module gives this graph back.
  if (max) {
    Kwargs kw{{"stride", int_list(strides)},
              {"padding", int_list(padding)},
              {"dilation", int_list(dil)},
              {"ceil_mode", ceil},
              {"return_indices", false}};
    L.set(n, L.tensor(L.call(f.c_str(), {t, int_list(kernel)}, std::move(kw)), n));
    return;
  }
  if (dil != std::vector<int64_t>(d, 1)) L.unsupported(n, "AveragePool with dilations");
  Kwargs kw{{"kernel_size", int_list(kernel)},
            {"stride", int_list(strides)},
            {"padding", int_list(padding)},
            {"ceil_mode", ceil},
            {"count_include_pad", L.attr_int(n, "count_include_pad", 0) != 0}};
  L.set(n, L.tensor(L.call(f.c_str(), {t}, std::move(kw)), n));
}
void max_pool(Lowerer& L, const Node& n) { pool(L, n, true); }
void average_pool(Lowerer& L, const Node& n) { pool(L, n, false); }

void softmax_like(Lowerer& L, const Node& n, const char* f) {
  LVal x = L.in(n, 0);
  const int64_t r = L.rank(x);
  if (L.opset() >= 13) {
    const int64_t a = L.axis(n, L.attr_int(n, "axis", -1), r);
    L.set(n, L.tensor(L.call(f, {L.as_tensor(x), static_cast<long long>(a - r)}), n));
    return;
  }
  // Before opset 13 the input is coerced to 2-D at `axis`: the trailing dims together.
  const int64_t a = L.axis(n, L.attr_int(n, "axis", 1), r);
  Node* t = L.as_tensor(x);
  if (a == r - 1) {
    L.set(n, L.tensor(L.call(f, {t, -1LL}), n));
    return;
  }
  Node* y = L.call(f, {L.method("flatten", {t, static_cast<long long>(a)}), -1LL});
  std::vector<SymInt> dims;
  for (int64_t d = 0; d < r; ++d) dims.push_back(L.size(x, d));
  L.set(n, L.tensor(L.method("reshape", {y, Lowerer::list_arg(dims)}), n));
}
void softmax(Lowerer& L, const Node& n) { softmax_like(L, n, "torch.softmax"); }
void log_softmax(Lowerer& L, const Node& n) { softmax_like(L, n, "torch.log_softmax"); }

// ---- layers ----

void conv(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0), w = L.in(n, 1), b = L.in(n, 2);
  const auto ws = L.shape(w);
  const int64_t d = static_cast<int64_t>(ws.size()) - 2;
  if (d < 1 || d > 3) L.unsupported(n, "a " + std::to_string(d) + "-D convolution");
  std::vector<int64_t> kernel;
  for (int64_t i = 0; i < d; ++i) {
    if (!ws[2 + i]) L.unsupported(n, "a weight whose shape changes");
    kernel.push_back(*ws[2 + i]);
  }
  const std::vector<int64_t> strides = L.attr_ints(n, "strides", std::vector<int64_t>(d, 1));
  const std::vector<int64_t> dil = L.attr_ints(n, "dilations", std::vector<int64_t>(d, 1));
  const int64_t groups = L.attr_int(n, "group", 1);
  Pads p = spatial_pads(L, n, x, kernel, strides, dil);
  Node* t = L.as_tensor(x);
  std::vector<int64_t> padding = p.begin;
  if (!p.symmetric()) {
    t = L.call("torch.nn.functional.pad", {t, int_list(p.torch_order())});
    padding.assign(d, 0);
  }
  const bool constant_weight = w.constant && w.constant->has_data() &&
                               (b.kind == Kind::None || (b.constant && b.constant->has_data()));
  if (!constant_weight) {
    std::vector<Argument> args{t, L.as_tensor(w)};
    args.push_back(b.kind == Kind::None ? Argument() : Argument(L.as_tensor(b)));
    const std::string f = "torch.nn.functional.conv" + std::to_string(d) + "d";
    L.set(n, L.tensor(L.call(f.c_str(), args,
                             {{"stride", int_list(strides)},
                              {"padding", int_list(padding)},
                              {"dilation", int_list(dil)},
                              {"groups", static_cast<long long>(groups)}}),
                      n));
    return;
  }
  const int64_t out_ch = w.constant->shape[0], in_ch = w.constant->shape[1] * groups;
  std::string repr = std::to_string(in_ch) + ", " + std::to_string(out_ch) +
                     ", kernel_size=" + py_tuple(kernel) + ", stride=" + py_tuple(strides);
  if (padding != std::vector<int64_t>(d, 0)) repr += ", padding=" + py_tuple(padding);
  if (dil != std::vector<int64_t>(d, 1)) repr += ", dilation=" + py_tuple(dil);
  if (groups != 1) repr += ", groups=" + std::to_string(groups);
  if (b.kind == Kind::None) repr += ", bias=False";
  auto m = std::make_shared<Module>("Conv" + std::to_string(d) + "d", repr);
  Lowerer::put_parameter(*m, "weight", reshaped(*w.constant, w.constant->shape));
  if (b.kind != Kind::None) Lowerer::put_parameter(*m, "bias", reshaped(*b.constant, {out_ch}));
  const std::string path = L.add_module(n, w, "conv", m);
  L.set(n, L.tensor(L.module(path, {t}), n));
}

void batch_norm(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  LVal ins[4] = {L.in(n, 1), L.in(n, 2), L.in(n, 3), L.in(n, 4)};
  if (L.attr_int(n, "training_mode", 0)) {
    // Normalised with the batch's own statistics; the updated running statistics (outputs 1
    // and 2) are not computed.
    Node* t = L.as_tensor(x);
    // The argument form torch.fx records for F.batch_norm (so a re-trace gives this graph).
    Node* y = L.call("torch.nn.functional.batch_norm", {t, Argument(), Argument()},
                     {{"weight", L.as_tensor(ins[0])},
                      {"bias", L.as_tensor(ins[1])},
                      {"training", true},
                      {"momentum", 0.1},
                      {"eps", float32_value(L.attr_float(n, "epsilon", 1e-5))}});
    if (!output_used(n, 1) && !output_used(n, 2)) {
      L.set(n, std::vector<LVal>{L.tensor(y, n), LVal{}, LVal{}});
      return;
    }
    // The updated running statistics: input * momentum + batch statistic * (1 - momentum),
    // with the population variance (what onnxruntime computes).
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < L.rank(x); ++d) dims.push_back(d);
    const double momentum = float32_value(L.attr_float(n, "momentum", 0.9));
    auto running = [&](const LVal& in, Node* stat) {
      Node* old = L.call("operator.mul", {L.as_tensor(in), momentum});
      Node* now = L.call("operator.mul", {stat, 1.0 - momentum});
      LVal v = L.tensor(L.call("operator.add", {old, now}), n);
      v.shape_of = nullptr;
      return v;
    };
    Node* mean = L.method("mean", {t, int_list(dims)});
    Node* var = L.method("var", {t, int_list(dims)}, {{"unbiased", false}});
    L.set(n, std::vector<LVal>{L.tensor(y, n), running(ins[2], mean), running(ins[3], var)});
    return;
  }
  const int64_t r = L.rank(x);
  const double eps = float32_value(L.attr_float(n, "epsilon", 1e-5));
  bool constants = true;
  for (const LVal& v : ins) constants = constants && v.constant && v.constant->has_data();
  if (!constants || r < 2 || r > 5) {
    Node* y = L.call("torch.nn.functional.batch_norm",
                     {L.as_tensor(x), L.as_tensor(ins[2]), L.as_tensor(ins[3])},
                     {{"weight", L.as_tensor(ins[0])},
                      {"bias", L.as_tensor(ins[1])},
                      {"training", false},
                      {"momentum", 0.1},
                      {"eps", eps}});
    L.set(n, L.tensor(y, n));
    return;
  }
  const int64_t c = ins[0].constant->numel();
  const int dims = r <= 3 ? 1 : static_cast<int>(r - 2);
  const double momentum = std::round((1.0 - L.attr_float(n, "momentum", 0.9)) * 1e6) / 1e6;
  const std::string repr = std::to_string(c) + ", eps=" + py_float_repr(eps) +
                           ", momentum=" + py_float_repr(momentum) +
                           ", affine=True, track_running_stats=True";
  auto m = std::make_shared<Module>("BatchNorm" + std::to_string(dims) + "d", repr);
  Lowerer::put_parameter(*m, "weight", reshaped(*ins[0].constant, {c}));
  Lowerer::put_parameter(*m, "bias", reshaped(*ins[1].constant, {c}));
  Lowerer::put_buffer(*m, "running_mean", reshaped(*ins[2].constant, {c}));
  Lowerer::put_buffer(*m, "running_var", reshaped(*ins[3].constant, {c}));
  Lowerer::put_buffer(*m, "num_batches_tracked", scalar_tensor_i64(0));
  const std::string path = L.add_module(n, ins[0], "bn", m);
  L.set(n, std::vector<LVal>{L.tensor(L.module(path, {L.as_tensor(x)}), n)});
}

void layer_norm(Lowerer& L, const Node& n) {
  if (output_used(n, 1) || output_used(n, 2))
    L.unsupported(n, "its Mean/InvStdDev outputs are used");
  LVal x = L.in(n, 0), scale = L.in(n, 1), bias = L.in(n, 2);
  const auto s = L.shape(x);
  const int64_t r = static_cast<int64_t>(s.size());
  const int64_t a = L.axis(n, L.attr_int(n, "axis", -1), r);
  std::vector<int64_t> norm;
  for (int64_t d = a; d < r; ++d) {
    if (!s[d]) L.unsupported(n, "normalising over a dim whose size changes");
    norm.push_back(*s[d]);
  }
  const double eps = float32_value(L.attr_float(n, "epsilon", 1e-5));
  int64_t count = 1;
  for (int64_t v : norm) count *= v;
  const bool constants =
      scale.constant && scale.constant->has_data() && scale.constant->numel() == count &&
      (bias.kind == Kind::None ||
       (bias.constant && bias.constant->has_data() && bias.constant->numel() == count));
  if (!constants) {
    Kwargs kw{{"weight", L.as_tensor(scale)}, {"eps", eps}};
    if (bias.kind != Kind::None) kw.set("bias", L.as_tensor(bias));
    L.set(n, std::vector<LVal>{L.tensor(L.call("torch.nn.functional.layer_norm",
                                               {L.as_tensor(x), int_list(norm)}, std::move(kw)),
                                        n)});
    return;
  }
  auto m = std::make_shared<Module>(
      "LayerNorm", py_tuple(norm) + ", eps=" + py_float_repr(eps) + ", elementwise_affine=True");
  Lowerer::put_parameter(*m, "weight", reshaped(*scale.constant, norm));
  Tensor b = bias.kind == Kind::None ? zeros_f32(count) : *bias.constant;
  Lowerer::put_parameter(*m, "bias", reshaped(b, norm));
  const std::string path = L.add_module(n, scale, "layer_norm", m);
  L.set(n, std::vector<LVal>{L.tensor(L.module(path, {L.as_tensor(x)}), n)});
}

// nn.Linear(in, out) from a [out, in] weight and an optional [out] bias.
Node* linear(Lowerer& L, const Node& n, const LVal& weight_src, Node* x, const Tensor& weight,
             const Tensor* bias) {
  const int64_t out = weight.shape[0], in = weight.shape[1];
  auto m = std::make_shared<Module>("Linear", "in_features=" + std::to_string(in) +
                                                  ", out_features=" + std::to_string(out) +
                                                  ", bias=" + (bias ? "True" : "False"));
  Lowerer::put_parameter(*m, "weight", weight);
  if (bias) Lowerer::put_parameter(*m, "bias", reshaped(*bias, {out}));
  return L.module(L.add_module(n, weight_src, "linear", m), {x});
}

void gemm(Lowerer& L, const Node& n) {
  LVal a = L.in(n, 0), b = L.in(n, 1), c = L.in(n, 2);
  const double alpha = L.attr_float(n, "alpha", 1.0), beta = L.attr_float(n, "beta", 1.0);
  const bool ta = L.attr_int(n, "transA", 0) != 0, tb = L.attr_int(n, "transB", 0) != 0;
  const bool const_b = b.constant && b.constant->has_data() && b.constant->shape.size() == 2;
  if (const_b && !ta && alpha == 1.0) {
    const int64_t out = b.constant->shape[tb ? 0 : 1];
    const bool bias_ok =
        c.kind == Kind::None ||
        (beta == 1.0 && c.constant && c.constant->has_data() && c.constant->numel() == out &&
         (c.constant->shape.size() == 1 || c.constant->shape[0] == 1));
    if (bias_ok) {
      Tensor w = tb ? reshaped(*b.constant, b.constant->shape) : transposed_2d(*b.constant);
      L.set(n, L.tensor(
                   linear(L, n, b, L.as_tensor(a), w, c.kind == Kind::None ? nullptr : c.constant),
                   n));
      return;
    }
  }
  Node* x = L.as_tensor(a);
  if (ta) x = L.method("t", {x});
  Node* y = L.as_tensor(b);
  if (tb) y = L.method("t", {y});
  Node* r = L.call("operator.matmul", {x, y});
  if (alpha != 1.0) r = L.call("operator.mul", {r, float32_value(alpha)});
  if (c.kind != Kind::None) {
    Argument cc = L.as_operand(c, 2);
    if (beta != 1.0) cc = L.call("operator.mul", {cc, float32_value(beta)});
    r = L.call("operator.add", {r, cc});
  }
  L.set(n, L.tensor(r, n));
}

void matmul(Lowerer& L, const Node& n, const GraphModule& src) {
  LVal a = L.in(n, 0), b = L.in(n, 1);
  if (b.constant && b.constant->has_data() && b.constant->shape.size() == 2 &&
      is_float(b.constant->dtype) && L.rank(a) >= 1) {
    // x @ W (+ b): an exported nn.Linear. Take the Add of a constant [out] bias along.
    const int64_t out = b.constant->shape[1];
    const Node* add = nullptr;
    const Tensor* bias = nullptr;
    if (n.users().size() == 1) {
      const Node* u = *n.users().begin();
      if (u->op() == Opcode::CallFunction && u->target().function().qualname() == "onnx.Add" &&
          u->args().size() == 2) {
        const Argument& other =
            u->args()[0].is_node() && u->args()[0].to_node() == &n ? u->args()[1] : u->args()[0];
        const Tensor* t = old_constant(src, other);
        if (t && t->has_data() && t->numel() == out && t->shape.size() == 1 &&
            t->dtype == b.constant->dtype) {
          add = u;
          bias = t;
        }
      }
    }
    Node* y = linear(L, n, b, L.as_tensor(a), transposed_2d(*b.constant), bias);
    L.set(n, L.tensor(y, n));
    if (add) L.set(*add, L.tensor(y, *add));
    return;
  }
  L.set(n, L.tensor(L.call("operator.matmul", {L.as_tensor(a), L.as_tensor(b)}), n));
}

// ---- the rest ----

void topk(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  std::vector<SymInt> k;
  if (!L.as_ints(L.in(n, 1), k) || k.size() != 1) L.unsupported(n, "K must be one int");
  const int64_t a = L.axis(n, L.attr_int(n, "axis", -1), L.rank(x));
  Node* r = L.call("torch.topk", {L.as_tensor(x), k[0].arg()},
                   {{"dim", static_cast<long long>(a)},
                    {"largest", L.attr_int(n, "largest", 1) != 0},
                    {"sorted", L.attr_int(n, "sorted", 1) != 0}});
  LVal v = L.tensor(L.call("operator.getitem", {r, 0LL}), n);
  LVal i = L.tensor(L.call("operator.getitem", {r, 1LL}), n);
  v.shape_of = i.shape_of = nullptr;
  L.set(n, std::vector<LVal>{v, i});
}

void arg_reduce(Lowerer& L, const Node& n, const char* f) {
  if (L.attr_int(n, "select_last_index", 0)) L.unsupported(n, "select_last_index = 1");
  LVal x = L.in(n, 0);
  const int64_t a = L.axis(n, L.attr_int(n, "axis", 0), L.rank(x));
  L.set(n, L.tensor(L.call(f, {L.as_tensor(x), static_cast<long long>(a)},
                           {{"keepdim", L.attr_int(n, "keepdims", 1) != 0}}),
                    n));
}
void arg_max(Lowerer& L, const Node& n) { arg_reduce(L, n, "torch.argmax"); }
void arg_min(Lowerer& L, const Node& n) { arg_reduce(L, n, "torch.argmin"); }

void cum_sum(Lowerer& L, const Node& n) {
  if (L.attr_int(n, "exclusive", 0) || L.attr_int(n, "reverse", 0))
    L.unsupported(n, "exclusive or reverse CumSum");
  LVal x = L.in(n, 0);
  const std::vector<int64_t> a = L.static_ints(n, L.in(n, 1), "axis");
  if (a.size() != 1) L.unsupported(n, "axis must be one int");
  L.set(n, L.tensor(L.call("torch.cumsum",
                           {L.as_tensor(x), static_cast<long long>(L.axis(n, a[0], L.rank(x)))}),
                    n));
}

void trilu(Lowerer& L, const Node& n) {
  Argument k = 0LL;
  if (L.in(n, 1).kind != Kind::None) {
    const std::vector<int64_t> v = L.static_ints(n, L.in(n, 1), "k");
    k = static_cast<long long>(v.at(0));
  }
  L.set(n, L.tensor(L.call(L.attr_int(n, "upper", 1) ? "torch.triu" : "torch.tril",
                           {L.as_tensor(L.in(n, 0)), k}),
                    n));
}

void einsum(Lowerer& L, const Node& n) {
  std::vector<Argument> args{L.attr_string(n, "equation", "")};
  for (size_t i = 0; i < L.num_inputs(n); ++i) args.push_back(L.as_tensor(L.in(n, i)));
  L.set(n, L.tensor(L.call("torch.einsum", args), n));
}

void pad(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const int64_t r = L.rank(x);
  std::vector<int64_t> pads;
  Argument value = 0.0;
  if (L.opset() < 11) {
    pads = L.attr_ints(n, "pads");
    value = float32_value(L.attr_float(n, "value", 0.0));
  } else {
    pads = L.static_ints(n, L.in(n, 1), "pads");
    if (L.in(n, 2).kind != Kind::None) value = L.as_operand(L.in(n, 2), 0);
    if (L.in(n, 3).kind != Kind::None) L.unsupported(n, "the axes input");
  }
  if (pads.size() != static_cast<size_t>(2 * r)) L.unsupported(n, "pads has the wrong length");
  Pads p{std::vector<int64_t>(pads.begin(), pads.begin() + r),
         std::vector<int64_t>(pads.begin() + r, pads.end())};
  std::vector<int64_t> order = p.torch_order();
  while (order.size() > 2 && order[order.size() - 1] == 0 && order[order.size() - 2] == 0)
    order.resize(order.size() - 2);  // untouched leading dims
  const std::string mode = L.attr_string(n, "mode", "constant");
  Kwargs kw;
  if (mode == "constant") {
    if (!(value.kind() == Argument::Kind::Float && value.to_double() == 0.0))
      kw.set("value", value);
  } else if (mode == "reflect" || mode == "edge") {
    kw.set("mode", mode == "edge" ? "replicate" : "reflect");
  } else {
    L.unsupported(n, "mode " + mode);
  }
  L.set(n, L.tensor(
               L.call("torch.nn.functional.pad", {L.as_tensor(x), int_list(order)}, std::move(kw)),
               n));
}

void instance_norm(Lowerer& L, const Node& n) {
  L.set(n, L.tensor(L.call("torch.nn.functional.instance_norm", {L.as_tensor(L.in(n, 0))},
                           {{"weight", L.as_tensor(L.in(n, 1))},
                            {"bias", L.as_tensor(L.in(n, 2))},
                            {"eps", float32_value(L.attr_float(n, "epsilon", 1e-5))}}),
                    n));
}

void lrn(Lowerer& L, const Node& n) {
  L.set(n,
        L.tensor(L.call("torch.nn.functional.local_response_norm",
                        {L.as_tensor(L.in(n, 0)), static_cast<long long>(L.attr_int(n, "size", 1))},
                        {{"alpha", float32_value(L.attr_float(n, "alpha", 1e-4))},
                         {"beta", float32_value(L.attr_float(n, "beta", 0.75))},
                         {"k", float32_value(L.attr_float(n, "bias", 1.0))}}),
                 n));
}

void non_zero(Lowerer& L, const Node& n) {
  L.set(n, L.tensor(L.method("t", {L.call("torch.nonzero", {L.as_tensor(L.in(n, 0))})}), n));
}

constexpr char kRelu[] = "torch.relu", kSigmoid[] = "torch.sigmoid", kTanh[] = "torch.tanh",
               kErf[] = "torch.erf", kSqrt[] = "torch.sqrt", kExp[] = "torch.exp",
               kLog[] = "torch.log", kAbs[] = "torch.abs", kNeg[] = "operator.neg",
               kReciprocal[] = "torch.reciprocal", kFloor[] = "torch.floor", kCeil[] = "torch.ceil",
               kSin[] = "torch.sin", kCos[] = "torch.cos", kTan[] = "torch.tan",
               kAsin[] = "torch.asin", kAcos[] = "torch.acos", kAtan[] = "torch.atan",
               kSinh[] = "torch.sinh", kCosh[] = "torch.cosh", kAsinh[] = "torch.asinh",
               kAcosh[] = "torch.acosh", kAtanh[] = "torch.atanh", kSign[] = "torch.sign",
               kRound[] = "torch.round", kIsNaN[] = "torch.isnan", kNot[] = "torch.logical_not",
               kSoftsign[] = "torch.nn.functional.softsign",
               kSoftplus[] = "torch.nn.functional.softplus", kMish[] = "torch.nn.functional.mish",
               kHardSwish[] = "torch.nn.functional.hardswish", kAnd[] = "torch.logical_and",
               kOr[] = "torch.logical_or", kXor[] = "torch.logical_xor",
               kMaximum[] = "torch.maximum", kMinimum[] = "torch.minimum";

void mod(Lowerer& L, const Node& n) {
  const bool fmod = L.attr_int(n, "fmod", 0) != 0;
  L.set(n, L.tensor(L.call(fmod ? "torch.fmod" : "torch.remainder",
                           {L.as_tensor(L.in(n, 0)), L.as_tensor(L.in(n, 1))}),
                    n));
}

// ---- recurrent ----

// Rows of a [dirs, gates * hidden, k] ONNX weight for direction `dir`, gate blocks reordered
// (ONNX LSTM: i, o, f, c; torch: i, f, g(c), o), as a [gates * hidden, k] tensor.
Tensor gate_rows(const Tensor& t, int64_t dir, int64_t hidden, const std::vector<int>& order) {
  Bytes src = t.bytes();
  const int64_t gates = static_cast<int64_t>(order.size());
  const int64_t k = t.shape.size() == 3 ? t.shape[2] : 1;
  const size_t es = dtype_size(t.dtype);
  const size_t block = static_cast<size_t>(hidden * k) * es;
  const uint8_t* base = src->data() + static_cast<size_t>(dir * gates) * block;
  auto out = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(gates) * block);
  for (int64_t g = 0; g < gates; ++g)
    std::memcpy(out->data() + g * block, base + order[g] * block, block);
  Tensor r;
  r.dtype = t.dtype;
  r.shape = t.shape.size() == 3 ? std::vector<int64_t>{gates * hidden, k}
                                : std::vector<int64_t>{gates * hidden};
  r.data = std::move(out);
  return r;
}

void lstm(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0), w = L.in(n, 1), r = L.in(n, 2), b = L.in(n, 3);
  if (L.in(n, 4).kind != Kind::None) L.unsupported(n, "sequence_lens");
  if (L.in(n, 7).kind != Kind::None) L.unsupported(n, "peepholes (P)");
  if (L.has_attr(n, "clip")) L.unsupported(n, "clip");
  if (L.attr_int(n, "input_forget", 0)) L.unsupported(n, "input_forget = 1");
  const std::vector<std::string> defaults{"Sigmoid", "Tanh", "Tanh"};
  if (const Argument* acts = n.kwargs().find("activations")) {
    std::vector<std::string> got;
    for (const Argument& a : acts->elements()) got.push_back(a.to_string());
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != defaults[i % 3]) L.unsupported(n, "activation " + got[i]);
  }
  const std::string direction = L.attr_string(n, "direction", "forward");
  if (direction == "reverse")
    L.unsupported(n, "direction = reverse (torch has no reverse-only LSTM)");
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  const bool batch_first = L.attr_int(n, "layout", 0) != 0;
  for (const LVal* v : {&w, &r})
    if (!v->constant || !v->constant->has_data()) L.unsupported(n, "W and R must be constants");
  if (b.kind != Kind::None && (!b.constant || !b.constant->has_data()))
    L.unsupported(n, "B must be a constant");
  const int64_t hidden = L.attr_int(n, "hidden_size", w.constant->shape[1] / 4);
  const int64_t input = w.constant->shape[2];
  std::string repr = std::to_string(input) + ", " + std::to_string(hidden);
  if (b.kind == Kind::None) repr += ", bias=False";
  if (batch_first) repr += ", batch_first=True";
  if (dirs == 2) repr += ", bidirectional=True";
  auto m = std::make_shared<Module>("LSTM", repr);
  const std::vector<int> order{0, 2, 3, 1};
  for (int64_t d = 0; d < dirs; ++d) {
    const std::string suffix = d ? "_l0_reverse" : "_l0";
    Lowerer::put_parameter(*m, "weight_ih" + suffix, gate_rows(*w.constant, d, hidden, order));
    Lowerer::put_parameter(*m, "weight_hh" + suffix, gate_rows(*r.constant, d, hidden, order));
    if (b.kind != Kind::None) {
      // B is [dirs, 8 * hidden]: the input biases, then the recurrent ones.
      Tensor halves = reshaped(*b.constant, {dirs * 2, 4 * hidden});
      Lowerer::put_parameter(*m, "bias_ih" + suffix, gate_rows(halves, 2 * d, hidden, order));
      Lowerer::put_parameter(*m, "bias_hh" + suffix, gate_rows(halves, 2 * d + 1, hidden, order));
    }
  }
  // A weight named "lstm.weight_ih_l0" is rare in exports; the node name gives the path.
  const std::string path = L.add_module(n, LVal{}, "lstm", m);
  std::vector<Argument> args{L.as_tensor(x)};
  LVal h0 = L.in(n, 5), c0 = L.in(n, 6);
  if (h0.kind != Kind::None || c0.kind != Kind::None) {
    Node* h = h0.kind != Kind::None ? L.as_tensor(h0) : nullptr;
    Node* c = c0.kind != Kind::None ? L.as_tensor(c0) : nullptr;
    if (!h) h = L.call("torch.zeros_like", {c});
    if (!c) c = L.call("torch.zeros_like", {h});
    if (batch_first) {  // ONNX layout 1 keeps states [batch, dirs, hidden]; torch wants dirs first
      h = L.method("transpose", {h, 0LL, 1LL});
      c = L.method("transpose", {c, 0LL, 1LL});
    }
    args.push_back(Argument::tuple({h, c}));
  }
  Node* call = L.module(path, args);
  Node* out = L.call("operator.getitem", {call, 0LL});
  Node* states = L.call("operator.getitem", {call, 1LL});
  // Y: torch [seq, batch, dirs * hidden] -> ONNX [seq, dirs, batch, hidden] (layout 1: [batch,
  // seq, dirs, hidden]).
  Node* y = L.method(
      "unflatten",
      {out, 2LL, Argument::tuple({static_cast<long long>(dirs), static_cast<long long>(hidden)})});
  if (!batch_first) y = L.method("transpose", {y, 1LL, 2LL});
  Node* yh = L.call("operator.getitem", {states, 0LL});
  Node* yc = L.call("operator.getitem", {states, 1LL});
  if (batch_first) {
    yh = L.method("transpose", {yh, 0LL, 1LL});
    yc = L.method("transpose", {yc, 0LL, 1LL});
  }
  std::vector<LVal> outs;
  for (Node* v : {y, yh, yc}) {
    LVal t = L.tensor(v, n);
    t.shape_of = nullptr;
    outs.push_back(t);
  }
  L.set(n, outs);
}

void matmul_handler(Lowerer& L, const Node& n) { matmul(L, n, L.source()); }

}  // namespace

const std::vector<HandlerEntry>& handler_table() {
  static const std::vector<HandlerEntry> table = {
      // elementwise
      {"Abs", 6, unary<kAbs>},
      {"Acos", 7, unary<kAcos>},
      {"Acosh", 9, unary<kAcosh>},
      {"Add", 7, binary<kAdd, fold_add, kAdd>},
      {"And", 7, tensor_binary<kAnd>},
      {"Asin", 7, unary<kAsin>},
      {"Asinh", 9, unary<kAsinh>},
      {"Atan", 7, unary<kAtan>},
      {"Atanh", 9, unary<kAtanh>},
      {"Ceil", 6, unary<kCeil>},
      {"Clip", 6, clip},
      {"Clip", 11, clip},
      {"Cos", 7, unary<kCos>},
      {"Cosh", 9, unary<kCosh>},
      {"Div", 7, div},
      {"Elu", 6, elu},
      {"Equal", 7, compare<kEq>},
      {"Erf", 9, unary<kErf>},
      {"Exp", 6, unary<kExp>},
      {"Floor", 6, unary<kFloor>},
      {"Gelu", 20, gelu},
      {"Greater", 7, compare<kGt>},
      {"GreaterOrEqual", 12, compare<kGe>},
      {"HardSigmoid", 6, hard_sigmoid},
      {"HardSwish", 14, unary<kHardSwish>},
      {"Identity", 1, identity},
      {"IsNaN", 9, unary<kIsNaN>},
      {"LeakyRelu", 6, leaky_relu},
      {"Less", 7, compare<kLt>},
      {"LessOrEqual", 12, compare<kLe>},
      {"Log", 6, unary<kLog>},
      {"Max", 8, variadic<kMaximum>},
      {"Mean", 8, mean_variadic},
      {"Min", 8, variadic<kMinimum>},
      {"Mish", 18, unary<kMish>},
      {"Mod", 10, mod},
      {"Mul", 7, binary<kMul, fold_mul, kMul>},
      {"Neg", 6, unary<kNeg>},
      {"Not", 1, unary<kNot>},
      {"Or", 7, tensor_binary<kOr>},
      {"Pow", 7, binary<kPow, nullptr, kPow>},
      {"PRelu", 7, prelu},
      {"Reciprocal", 6, unary<kReciprocal>},
      {"Relu", 6, unary<kRelu>},
      {"Round", 11, unary<kRound>},
      {"Sigmoid", 6, unary<kSigmoid>},
      {"Sign", 9, unary<kSign>},
      {"Sin", 7, unary<kSin>},
      {"Sinh", 9, unary<kSinh>},
      {"Softplus", 1, unary<kSoftplus>},
      {"Softsign", 1, unary<kSoftsign>},
      {"Sqrt", 6, unary<kSqrt>},
      {"Sub", 7, binary<kSub, fold_sub, kSub>},
      {"Sum", 8, variadic<kAdd>},
      {"Tan", 7, unary<kTan>},
      {"Tanh", 6, unary<kTanh>},
      {"Where", 9, where},
      {"Xor", 7, tensor_binary<kXor>},
      {"Cast", 6, cast},
      {"Dropout", 7, dropout},
      // shapes
      {"Concat", 4, concat},
      {"ConstantOfShape", 9, constant_of_shape},
      {"Expand", 8, expand},
      {"Flatten", 1, flatten},
      {"Gather", 1, gather},
      {"GatherElements", 11, gather_elements},
      {"NonZero", 9, non_zero},
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
      // reductions, pooling, normalisation
      {"ArgMax", 1, arg_max},
      {"ArgMin", 1, arg_min},
      {"AveragePool", 7, average_pool},
      {"BatchNormalization", 9, batch_norm},
      {"CumSum", 11, cum_sum},
      {"GlobalAveragePool", 1, global_average_pool},
      {"GlobalMaxPool", 1, global_max_pool},
      {"InstanceNormalization", 6, instance_norm},
      {"LayerNormalization", 17, layer_norm},
      {"LogSoftmax", 1, log_softmax},
      {"LogSoftmax", 13, log_softmax},
      {"LRN", 1, lrn},
      {"MaxPool", 8, max_pool},
      {"ReduceMax", 1, reduce_max},
      {"ReduceMean", 1, reduce_mean},
      {"ReduceMin", 1, reduce_min},
      {"ReduceProd", 1, reduce_prod},
      {"ReduceSum", 1, reduce_sum},
      {"Softmax", 1, softmax},
      {"Softmax", 13, softmax},
      {"TopK", 10, topk},
      // layers and the rest
      {"Conv", 1, conv},
      {"Einsum", 12, einsum},
      {"Gemm", 7, gemm},
      {"LSTM", 7, lstm},
      {"MatMul", 1, matmul_handler},
      {"Pad", 2, pad},
      {"Pad", 11, pad},
      {"Trilu", 14, trilu},
  };
  return table;
}

}  // namespace fx::torch_codegen
