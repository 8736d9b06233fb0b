// What the lowering's handler files share (lower_ops.h).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "torch_codegen/lower_ops.h"

namespace fx::torch_codegen {

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

std::vector<int64_t> Pads::torch_order() const {
  std::vector<int64_t> out;
  for (size_t i = begin.size(); i-- > 0;) {
    out.push_back(begin[i]);
    out.push_back(end[i]);
  }
  return out;
}

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

std::vector<int64_t> axes_of(Lowerer& L, const Node& n, size_t input, int64_t since_input) {
  if (L.opset() >= since_input) {
    LVal a = L.in(n, input);
    if (a.kind == LVal::Kind::None) return {};
    return L.static_ints(n, a, "axes");
  }
  return L.attr_ints(n, "axes");
}

SymInt sym_mul(Lowerer& L, const SymInt& a, int64_t k) {
  if (a.value) return {*a.value * k, {}};
  return {std::nullopt, L.call("operator.mul", {a.expr, static_cast<long long>(k)})};
}

SymInt sym_add(Lowerer& L, const SymInt& a, int64_t k) {
  if (a.value) return {*a.value + k, {}};
  return {std::nullopt, L.call("operator.add", {a.expr, static_cast<long long>(k)})};
}

SymInt sym_div(Lowerer& L, const SymInt& a, int64_t k) {
  if (a.value) return {*a.value / k, {}};
  return {std::nullopt, L.call("operator.floordiv", {a.expr, static_cast<long long>(k)})};
}

}  // namespace fx::torch_codegen
