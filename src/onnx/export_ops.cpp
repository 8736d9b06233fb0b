// Ops that fxwasm's passes create but that the model's opset, or its consumers, may not have:
// the opset each needs, and the standard-op forms they are written in instead (export.cpp).
#include <cmath>
#include <cstring>

#include "fx/error.h"
#include "onnx/export_ops.h"

namespace fx::onnx {

int64_t min_opset(const std::string& op) {
  // The fused ops of fx::exec's passes; everything else keeps the opset it was imported with.
  if (op == "LayerNormalization") return 17;
  if (op == "Gelu") return 20;
  return 1;
}

const char* gelu_export_name(GeluExport g) {
  switch (g) {
    case GeluExport::Decomposed:
      return "decomposed";
    case GeluExport::Microsoft:
      return "com.microsoft";
    case GeluExport::Opset20:
      return "opset20";
  }
  return "?";
}

GeluExport gelu_export_from_name(const std::string& name) {
  if (name == "decomposed") return GeluExport::Decomposed;
  if (name == "com.microsoft") return GeluExport::Microsoft;
  if (name == "opset20") return GeluExport::Opset20;
  throw Error(
      ErrorKind::Value,
      "gelu export form must be 'decomposed', 'com.microsoft' or 'opset20', got '" + name + "'");
}

namespace {

// A float32 scalar Constant node named `name`.
void constant_f32(::onnx::GraphProto* g, const std::string& name, float v) {
  auto* c = g->add_node();
  c->set_op_type("Constant");
  c->add_output(name);
  auto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(::onnx::AttributeProto::TENSOR);
  auto* t = a->mutable_t();
  t->set_data_type(::onnx::TensorProto::FLOAT);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(&v), sizeof v));
}

::onnx::NodeProto* op(::onnx::GraphProto* g, const char* type,
                      std::initializer_list<std::string> inputs, const std::string& output) {
  auto* n = g->add_node();
  n->set_op_type(type);
  for (const std::string& i : inputs) n->add_input(i);
  n->add_output(output);
  return n;
}

}  // namespace

void emit_gelu_decomposed(::onnx::GraphProto* g, const std::string& x, const std::string& y,
                          bool tanh_form, const NameFn& fresh) {
  const std::string half = fresh(y + "_half"), one = fresh(y + "_one");
  constant_f32(g, half, 0.5f);
  constant_f32(g, one, 1.0f);
  std::string inner;
  if (!tanh_form) {
    // 0.5 * x * (1 + erf(x / sqrt(2)))
    const std::string sqrt2 = fresh(y + "_sqrt2"), scaled = fresh(y + "_scaled");
    constant_f32(g, sqrt2, static_cast<float>(std::sqrt(2.0)));
    op(g, "Div", {x, sqrt2}, scaled);
    inner = fresh(y + "_erf");
    op(g, "Erf", {scaled}, inner);
  } else {
    // 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
    const std::string k = fresh(y + "_k"), c = fresh(y + "_c"), x3 = fresh(y + "_cube"),
                      x2 = fresh(y + "_square"), cx3 = fresh(y + "_cx3"), sum = fresh(y + "_sum"),
                      arg = fresh(y + "_arg");
    constant_f32(g, k, static_cast<float>(std::sqrt(2.0 / M_PI)));
    constant_f32(g, c, 0.044715f);
    op(g, "Mul", {x, x}, x2);
    op(g, "Mul", {x2, x}, x3);
    op(g, "Mul", {x3, c}, cx3);
    op(g, "Add", {x, cx3}, sum);
    op(g, "Mul", {sum, k}, arg);
    inner = fresh(y + "_tanh");
    op(g, "Tanh", {arg}, inner);
  }
  const std::string plus = fresh(y + "_plus1"), xhalf = fresh(y + "_xhalf");
  op(g, "Add", {inner, one}, plus);
  op(g, "Mul", {x, half}, xhalf);
  op(g, "Mul", {xhalf, plus}, y);
}

void emit_layer_norm_decomposed(::onnx::GraphProto* g, const std::string& x,
                                const std::string& scale, const std::string& bias,
                                const std::string& y, int64_t axis, int64_t rank, float epsilon,
                                const NameFn& fresh) {
  // Normalised over dims [axis, rank): as negative axes, which need no rank when axis < 0.
  std::vector<int64_t> axes;
  if (axis < 0) {
    for (int64_t a = axis; a < 0; ++a) axes.push_back(a);
  } else {
    if (rank < 0)
      throw Error(ErrorKind::Unsupported,
                  "LayerNormalization with axis " + std::to_string(axis) +
                      " and an input of unknown rank has no form below opset 17");
    for (int64_t a = axis; a < rank; ++a) axes.push_back(a - rank);
  }
  auto reduce_mean = [&](const std::string& in, const std::string& out) {
    auto* n = op(g, "ReduceMean", {in}, out);
    auto* a = n->add_attribute();
    a->set_name("axes");
    a->set_type(::onnx::AttributeProto::INTS);
    for (int64_t v : axes) a->add_ints(v);
  };
  const std::string mean = fresh(y + "_mean"), centered = fresh(y + "_centered"),
                    sq = fresh(y + "_square"), var = fresh(y + "_var"), eps = fresh(y + "_eps"),
                    var_eps = fresh(y + "_var_eps"), stdev = fresh(y + "_std"),
                    normed = fresh(y + "_normed");
  reduce_mean(x, mean);
  op(g, "Sub", {x, mean}, centered);
  op(g, "Mul", {centered, centered}, sq);
  reduce_mean(sq, var);
  constant_f32(g, eps, epsilon);
  op(g, "Add", {var, eps}, var_eps);
  op(g, "Sqrt", {var_eps}, stdev);
  op(g, "Div", {centered, stdev}, normed);
  if (bias.empty()) {
    op(g, "Mul", {normed, scale}, y);
  } else {
    const std::string scaled = fresh(y + "_scaled");
    op(g, "Mul", {normed, scale}, scaled);
    op(g, "Add", {scaled, bias}, y);
  }
}

}  // namespace fx::onnx
