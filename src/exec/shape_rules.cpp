// Shape rules of ONNX ops for infer_shapes (shape_infer.cpp): each maps its inputs' facts (dtype,
// rank, SymDim dims, small known elements) to its outputs'. They follow the ONNX operator
// specification of the module's opset (attributes that became inputs are read from either place).
// A dim a rule cannot know exactly is unknown; a rule that cannot know the rank throws RuleGap.
// This file: elementwise, reduction, layout and indexing ops, and the size arithmetic; the
// layers (convolution, pooling, products, normalisation, recurrences) are in shape_rules_nn.cpp.
#include "exec/shape_rules.h"

#include <algorithm>
#include <cmath>

#include "exec/ops.h"
#include "fx/onnx.h"

namespace fx::exec {

[[noreturn]] void gap(const std::string& reason) { throw RuleGap{reason}; }

const Fact& need(const std::vector<Fact>& in, size_t i) {
  if (i >= in.size() || !in[i].present) gap("input " + std::to_string(i) + " is missing");
  return in[i];
}
const Fact& ranked(const std::vector<Fact>& in, size_t i) {
  const Fact& f = need(in, i);
  if (!f.ranked) gap("the rank of input " + std::to_string(i) + " is unknown");
  return f;
}
bool has(const std::vector<Fact>& in, size_t i) { return i < in.size() && in[i].present; }

int64_t norm_axis(int64_t axis, int64_t rank, const char* what) {
  if (axis < -rank || axis >= rank)
    gap(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
        std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

// The known, constant elements of input i (e.g. axes, pads, starts), or nullopt.
std::optional<std::vector<int64_t>> ints(const std::vector<Fact>& in, size_t i) {
  if (!has(in, i)) return std::nullopt;
  auto v = in[i].values();
  if (!v) return std::nullopt;
  std::vector<int64_t> r;
  for (const SymDim& d : *v) {
    if (!d.value()) return std::nullopt;
    r.push_back(*d.value());
  }
  return r;
}

std::optional<std::vector<double>> floats(const std::vector<Fact>& in, size_t i) {
  if (!has(in, i) || !in[i].data) return std::nullopt;
  if (in[i].data->dtype() != Dtype::Float32 && in[i].data->dtype() != Dtype::Float64)
    return std::nullopt;
  std::vector<float> f = in[i].data->to_f32();
  return std::vector<double>(f.begin(), f.end());
}

// An attribute list, or (for the opsets that moved it to an input) input i's constant elements.
// nullopt when neither says.
std::optional<std::vector<int64_t>> attr_or_input(const OpCall& c, const char* name,
                                                  const std::vector<Fact>& in, size_t i) {
  if (c.has_attr(name)) return c.attr_ints(name);
  return ints(in, i);
}

SymDim broadcast_dim(const SymDim& a, const SymDim& b) {
  if (a.is(1)) return b;
  if (b.is(1)) return a;
  if (a == b) return a;
  if (a.value() && b.value()) gap("cannot broadcast " + a.str() + " with " + b.str());
  // A known size other than 1 is the result in any valid model (a named size is taken as not 1,
  // as ONNX's own shape inference does).
  if (a.known() && !b.known()) return a;
  if (b.known() && !a.known()) return b;
  if (a.value()) return a;
  if (b.value()) return b;
  return SymDim();
}

SymShape broadcast(const std::vector<const SymShape*>& shapes) {
  size_t rank = 0;
  for (const SymShape* s : shapes) rank = std::max(rank, s->size());
  SymShape r(rank, SymDim(1));
  for (const SymShape* s : shapes)
    for (size_t k = 0; k < s->size(); ++k) {
      SymDim& d = r[rank - s->size() + k];
      d = broadcast_dim(d, (*s)[k]);
    }
  return r;
}

void same(const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
  out.push_back(need(in, 0));
  out.back().data.reset();
  out.back().sym.reset();
}

Fact like(const Fact& x, std::optional<Dtype> dtype) {
  Fact f = x;
  f.data.reset();
  f.sym.reset();
  f.dtype = dtype;
  return f;
}

void elementwise(const std::vector<Fact>& in, std::optional<Dtype> dtype, std::vector<Fact>& out) {
  std::vector<const SymShape*> shapes;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i].present) continue;
    if (!in[i].ranked) return out.push_back(Fact::unranked(dtype));
    shapes.push_back(&in[i].dims);
  }
  if (shapes.empty()) gap("no inputs");
  out.push_back(Fact::tensor(broadcast(shapes), dtype));
}

std::optional<Dtype> elem_type_attr(const OpCall& c, const char* name, Dtype fallback) {
  if (!c.has_attr(name)) return fallback;
  const Dtype* d = onnx_dtype(c.attr_int(name, 1));
  if (!d) gap(std::string("attribute '") + name + "' names an element type fxwasm has not");
  return *d;
}

std::optional<Dtype> tensor_attr_dtype(const OpCall& c, const char* name) {
  const Argument* spec = c.node.meta().find(onnx::kTensorAttrs);
  if (!spec || spec->kind() != Argument::Kind::Dict) return std::nullopt;
  for (const auto& [k, attr] : spec->dict_items())
    if (k.kind() == Argument::Kind::String && k.to_string() == name &&
        attr.kind() == Argument::Kind::Dict)
      for (const auto& [f, dt] : attr.dict_items())
        if (f.kind() == Argument::Kind::String && f.to_string() == "dtype" && meta_dtype(dt))
          return *meta_dtype(dt);
  return std::nullopt;
}

std::optional<Dtype> dtype_of(const std::vector<Fact>& in, size_t i,
                              std::optional<Dtype> fallback) {
  return has(in, i) ? in[i].dtype : fallback;
}

namespace {

// Reduce* ops and ArgMax/ArgMin: `axes` (nullopt: not known), keepdims.
void reduce(const Fact& x, const std::optional<std::vector<int64_t>>& axes, bool keep, bool noop,
            std::optional<Dtype> dtype, std::vector<Fact>& out) {
  if (!x.ranked) {
    if (keep) return out.push_back(Fact::unranked(dtype));
    gap("the rank of the input is unknown");
  }
  if (!axes) {
    if (!keep) gap("the axes are computed at run time");
    return out.push_back(Fact::tensor(SymShape(x.dims.size()), dtype));
  }
  std::vector<bool> reduced(x.dims.size(), axes->empty() && !noop);
  for (int64_t a : *axes) reduced[norm_axis(a, x.rank(), "axis")] = true;
  SymShape d;
  for (size_t i = 0; i < x.dims.size(); ++i) {
    if (!reduced[i])
      d.push_back(x.dims[i]);
    else if (keep)
      d.push_back(SymDim(1));
  }
  out.push_back(Fact::tensor(std::move(d), dtype));
}

SymDim slice_dim(const SymDim& dim, int64_t start, int64_t end, int64_t step) {
  if (step == 0 || step == INT64_MIN) gap("a slice step of " + std::to_string(step));
  if (auto n = dim.value()) {
    if (*n == 0) return SymDim(0);
    int64_t s = start < 0 ? start + *n : start, e = end < 0 ? end + *n : end;
    int64_t len = 0;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, *n);
      e = std::clamp<int64_t>(e, 0, *n);
      len = e > s ? (e - s - 1) / step + 1 : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, *n - 1);
      e = std::clamp<int64_t>(e, -1, *n - 1);
      len = s > e ? (s - e - 1) / -step + 1 : 0;
    }
    return SymDim(len);
  }
  // A named size: the slices exports write, [k:], [:-k], [k:-j] and [:], with step 1.
  if (step != 1 || start < 0) return SymDim();
  const bool to_end = end >= (int64_t{1} << 62);
  if (to_end) return dim - SymDim(start);
  if (end < 0) return dim + SymDim(end - start);
  return SymDim();
}

const std::unordered_map<std::string, ShapeRule>& rules() {
  static const std::unordered_map<std::string, ShapeRule> table = [] {
    std::unordered_map<std::string, ShapeRule> r;
    // clang-format off
    for (const char* op : {
        "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BitwiseNot", "Ceil", "Celu",
        "Clip", "Cos", "Cosh", "CumSum", "Elu", "Erf", "Exp", "Floor", "Gelu", "GroupNormalization",
        "HardSigmoid", "HardSwish", "Hardmax", "Identity", "InstanceNormalization", "LeakyRelu",
        "Log", "LogSoftmax", "LpNormalization", "LRN", "MeanVarianceNormalization", "Mish",
        "Neg", "Not", "Reciprocal", "Relu", "ReverseSequence", "Round", "Scatter", "ScatterElements",
        "ScatterND", "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Softmax", "Softplus",
        "Softsign", "Sqrt", "Tan", "Tanh", "ThresholdedRelu", "Trilu"
    })
      r[op] = same;
    // clang-format on
    for (const char* op : {"IsNaN", "IsInf"})
      r[op] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
        out.push_back(like(need(in, 0), Dtype::Bool));
      };
    for (const char* op :
         {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "And", "Or", "Xor",
          "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "PRelu"})
      r[op] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
        elementwise(in, need(in, 0).dtype, out);
      };
    for (const char* op : {"Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"})
      r[op] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
        elementwise(in, Dtype::Bool, out);
      };
    r["Where"] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
      elementwise(in, need(in, 1).dtype, out);
    };
    r["Cast"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      out.push_back(like(need(in, 0), elem_type_attr(c, "to", Dtype::Float32)));
    };
    r["CastLike"] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
      out.push_back(like(need(in, 0), need(in, 1).dtype));
    };
    r["Dropout"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      out.push_back(like(need(in, 0), in[0].dtype));
      if (c.num_outputs() > 1) out.push_back(like(in[0], Dtype::Bool));
    };
    r["QuantizeLinear"] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
      out.push_back(like(need(in, 0), dtype_of(in, 2, Dtype::UInt8)));
    };
    r["DequantizeLinear"] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
      out.push_back(like(need(in, 0), Dtype::Float32));
    };
    r["DynamicQuantizeLinear"] = [](const OpCall&, const std::vector<Fact>& in,
                                    std::vector<Fact>& out) {
      out.push_back(like(need(in, 0), Dtype::UInt8));
      out.push_back(Fact::tensor({}, Dtype::Float32));
      out.push_back(Fact::tensor({}, Dtype::UInt8));
    };
    for (const char* op :
         {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"})
      r[op] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
        std::optional<std::vector<int64_t>> axes = attr_or_input(c, "axes", in, 1);
        if (!axes && !has(in, 1)) axes = std::vector<int64_t>{};
        reduce(need(in, 0), axes, c.attr_int("keepdims", 1) != 0,
               c.attr_int("noop_with_empty_axes", 0) != 0, in[0].dtype, out);
      };
    for (const char* op : {"ArgMax", "ArgMin"})
      r[op] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
        reduce(need(in, 0), std::vector<int64_t>{c.attr_int("axis", 0)},
               c.attr_int("keepdims", 1) != 0, false, Dtype::Int64, out);
      };
    r["Flatten"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = ranked(in, 0);
      int64_t axis = c.attr_int("axis", 1);
      if (axis < 0) axis += x.rank();
      if (axis < 0 || axis > x.rank()) gap("axis out of range");
      SymShape a(x.dims.begin(), x.dims.begin() + axis), b(x.dims.begin() + axis, x.dims.end());
      out.push_back(Fact::tensor({numel(a), numel(b)}, x.dtype));
    };
    r["Transpose"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = ranked(in, 0);
      std::vector<int64_t> perm = c.attr_ints("perm");
      if (perm.empty())
        for (int64_t i = x.rank() - 1; i >= 0; --i) perm.push_back(i);
      if (static_cast<int64_t>(perm.size()) != x.rank()) gap("perm does not match the rank");
      SymShape d;
      for (int64_t p : perm) d.push_back(x.dims[norm_axis(p, x.rank(), "perm entry")]);
      out.push_back(Fact::tensor(std::move(d), x.dtype));
    };
    r["Reshape"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = need(in, 0);
      const Fact& s = need(in, 1);
      auto v = s.values();
      if (!v) {
        if (s.ranked && s.rank() == 1 && s.dims[0].value())
          return out.push_back(Fact::tensor(SymShape(*s.dims[0].value()), x.dtype));
        gap("the target shape is computed at run time");
      }
      const bool allowzero = c.attr_int("allowzero", 0) != 0;
      SymShape d;
      int infer_at = -1;
      SymDim known(1);
      for (size_t i = 0; i < v->size(); ++i) {
        const SymDim& e = (*v)[i];
        if (e.is(-1)) {
          if (infer_at >= 0) gap("two -1 entries in the target shape");
          infer_at = static_cast<int>(i);
          d.emplace_back();
          continue;
        }
        if (e.is(0) && !allowzero) {
          if (!x.ranked || static_cast<int64_t>(i) >= x.rank())
            gap("a 0 entry copies an input dim that is not known");
          d.push_back(x.dims[i]);
        } else {
          if (e.value() && *e.value() < 0) gap("a negative entry in the target shape");
          d.push_back(e);
        }
        known = known * d.back();
      }
      if (infer_at >= 0 && x.ranked) d[infer_at] = floordiv(numel(x.dims), known);
      out.push_back(Fact::tensor(std::move(d), x.dtype));
    };
    r["Squeeze"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = ranked(in, 0);
      auto axes = attr_or_input(c, "axes", in, 1);
      if (!axes && has(in, 1)) gap("the axes are computed at run time");
      std::vector<bool> drop(x.dims.size(), false);
      if (!axes || axes->empty()) {
        for (size_t i = 0; i < x.dims.size(); ++i) {
          if (!x.dims[i].value()) gap("squeezing all 1-dims of a shape with unknown dims");
          drop[i] = x.dims[i].is(1);
        }
      } else {
        for (int64_t a : *axes) drop[norm_axis(a, x.rank(), "axis")] = true;
      }
      SymShape d;
      for (size_t i = 0; i < x.dims.size(); ++i)
        if (!drop[i]) d.push_back(x.dims[i]);
      out.push_back(Fact::tensor(std::move(d), x.dtype));
    };
    r["Unsqueeze"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = ranked(in, 0);
      auto axes = attr_or_input(c, "axes", in, 1);
      if (!axes) gap("the axes are computed at run time");
      const int64_t rank = x.rank() + static_cast<int64_t>(axes->size());
      std::vector<bool> added(rank, false);
      for (int64_t a : *axes) added[norm_axis(a, rank, "axis")] = true;
      SymShape d;
      size_t k = 0;
      for (int64_t i = 0; i < rank; ++i) d.push_back(added[i] ? SymDim(1) : x.dims[k++]);
      out.push_back(Fact::tensor(std::move(d), x.dtype));
    };
    r["Concat"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& first = ranked(in, 0);
      const int64_t axis = norm_axis(c.attr_int("axis", 0), first.rank(), "axis");
      SymShape d = first.dims;
      d[axis] = SymDim(0);
      for (size_t i = 0; i < in.size(); ++i) {
        const Fact& f = ranked(in, i);
        if (f.rank() != first.rank()) gap("inputs of different ranks");
        for (int64_t k = 0; k < f.rank(); ++k)
          d[k] =
              k == axis ? d[k] + f.dims[k] : (d[k].value() ? d[k] : broadcast_dim(d[k], f.dims[k]));
      }
      out.push_back(Fact::tensor(std::move(d), first.dtype));
    };
    r["Split"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = ranked(in, 0);
      const int64_t axis = norm_axis(c.attr_int("axis", 0), x.rank(), "axis");
      const size_t n = c.num_outputs();
      auto split = attr_or_input(c, "split", in, 1);
      if (!split && has(in, 1)) gap("the split sizes are computed at run time");
      std::vector<SymDim> sizes;
      if (split) {
        if (split->size() != n)
          gap("split has " + std::to_string(split->size()) + " entries for " + std::to_string(n) +
              " outputs");
        for (int64_t s : *split) sizes.emplace_back(s);
      } else if (auto len = x.dims[axis].value()) {
        const int64_t each = (*len + static_cast<int64_t>(n) - 1) / static_cast<int64_t>(n);
        for (size_t i = 0; i < n; ++i)
          sizes.emplace_back(
              std::max<int64_t>(0, std::min(each, *len - each * static_cast<int64_t>(i))));
      } else {
        sizes.assign(n, floordiv(x.dims[axis], SymDim(static_cast<int64_t>(n))));
      }
      for (const SymDim& s : sizes) {
        SymShape d = x.dims;
        d[axis] = s;
        out.push_back(Fact::tensor(std::move(d), x.dtype));
      }
    };
    r["Slice"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = ranked(in, 0);
      const bool attrs = c.has_attr("starts");
      auto starts = attrs ? std::optional(c.attr_ints("starts")) : ints(in, 1);
      auto ends = attrs ? std::optional(c.attr_ints("ends")) : ints(in, 2);
      auto axes = attrs ? (c.has_attr("axes") ? std::optional(c.attr_ints("axes")) : std::nullopt)
                        : ints(in, 3);
      auto steps = attrs ? std::nullopt : ints(in, 4);
      if ((!attrs && has(in, 3) && !axes) || !starts)
        gap("the sliced axes are computed at run time");
      const size_t k = starts->size();
      if (!axes) {
        axes.emplace();
        for (size_t i = 0; i < k; ++i) axes->push_back(static_cast<int64_t>(i));
      }
      if (!steps) steps = std::vector<int64_t>(k, 1);
      if (axes->size() != k || steps->size() != k || (ends && ends->size() != k))
        gap("starts, ends, axes and steps differ in length");
      SymShape d = x.dims;
      for (size_t i = 0; i < k; ++i) {
        const int64_t a = norm_axis((*axes)[i], x.rank(), "axis");
        d[a] = ends ? slice_dim(x.dims[a], (*starts)[i], (*ends)[i], (*steps)[i]) : SymDim();
      }
      out.push_back(Fact::tensor(std::move(d), x.dtype));
    };
    r["Gather"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = ranked(in, 0);
      const Fact& idx = ranked(in, 1);
      const int64_t axis = norm_axis(c.attr_int("axis", 0), x.rank(), "axis");
      SymShape d(x.dims.begin(), x.dims.begin() + axis);
      d.insert(d.end(), idx.dims.begin(), idx.dims.end());
      d.insert(d.end(), x.dims.begin() + axis + 1, x.dims.end());
      out.push_back(Fact::tensor(std::move(d), x.dtype));
    };
    r["GatherElements"] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
      out.push_back(like(need(in, 1), need(in, 0).dtype));
    };
    r["GatherND"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = ranked(in, 0);
      const Fact& idx = ranked(in, 1);
      const int64_t b = c.attr_int("batch_dims", 0);
      auto k = idx.rank() ? idx.dims.back().value() : std::nullopt;
      if (!k) gap("the index depth is not known");
      if (b + *k > x.rank()) gap("indices deeper than the data");
      SymShape d(idx.dims.begin(), idx.dims.end() - 1);
      d.insert(d.end(), x.dims.begin() + b + *k, x.dims.end());
      out.push_back(Fact::tensor(std::move(d), x.dtype));
    };
    r["Expand"] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = ranked(in, 0);
      auto v = need(in, 1).values();
      if (!v) {
        if (in[1].ranked && in[1].rank() == 1 && in[1].dims[0].value())
          return out.push_back(
              Fact::tensor(SymShape(std::max<int64_t>(x.rank(), *in[1].dims[0].value())), x.dtype));
        gap("the target shape is computed at run time");
      }
      out.push_back(Fact::tensor(broadcast({&x.dims, &*v}), x.dtype));
    };
    r["Tile"] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = ranked(in, 0);
      auto v = need(in, 1).values();
      SymShape d = x.dims;
      for (size_t i = 0; i < d.size(); ++i)
        d[i] = v && v->size() == d.size() ? d[i] * (*v)[i] : SymDim();
      out.push_back(Fact::tensor(std::move(d), x.dtype));
    };
    r["Pad"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = ranked(in, 0);
      auto pads = attr_or_input(c, "pads", in, 1);
      auto axes = ints(in, 3);
      if (has(in, 3) && !axes) gap("the padded axes are computed at run time");
      if (!axes) {
        axes.emplace();
        for (int64_t i = 0; i < x.rank(); ++i) axes->push_back(i);
      }
      SymShape d = x.dims;
      if (pads && pads->size() != 2 * axes->size()) gap("pads does not match the axes");
      for (size_t i = 0; i < axes->size(); ++i) {
        const int64_t a = norm_axis((*axes)[i], x.rank(), "axis");
        d[a] = pads ? d[a] + SymDim((*pads)[i] + (*pads)[axes->size() + i]) : SymDim();
      }
      out.push_back(Fact::tensor(std::move(d), x.dtype));
    };
    r["Shape"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = ranked(in, 0);
      int64_t s = c.attr_int("start", 0), e = c.attr_int("end", x.rank());
      s = std::clamp<int64_t>(s < 0 ? s + x.rank() : s, 0, x.rank());
      e = std::clamp<int64_t>(e < 0 ? e + x.rank() : e, 0, x.rank());
      Fact f = Fact::tensor({SymDim(std::max<int64_t>(e - s, 0))}, Dtype::Int64);
      f.sym = std::vector<SymDim>(x.dims.begin() + s, x.dims.begin() + std::max(s, e));
      out.push_back(std::move(f));
    };
    r["Size"] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
      Fact f = Fact::tensor({}, Dtype::Int64);
      if (need(in, 0).ranked) f.sym = std::vector<SymDim>{numel(in[0].dims)};
      out.push_back(std::move(f));
    };
    r["ConstantOfShape"] = [](const OpCall& c, const std::vector<Fact>& in,
                              std::vector<Fact>& out) {
      auto v = need(in, 0).values();
      const Argument* value = c.attrs.find("value");
      const Argument::Kind k = value ? value->kind() : Argument::Kind::Float;
      if (k != Argument::Kind::Int && k != Argument::Kind::Bool && k != Argument::Kind::Float)
        gap(std::string("a 'value' attribute of kind ") + Argument::kind_name(k));
      const Dtype dtype = k == Argument::Kind::Int    ? Dtype::Int64
                          : k == Argument::Kind::Bool ? Dtype::Bool
                                                      : Dtype::Float32;
      const std::optional<Dtype> kept = tensor_attr_dtype(c, "value");
      if (v) return out.push_back(Fact::tensor(*v, kept.value_or(dtype)));
      if (in[0].ranked && in[0].rank() == 1 && in[0].dims[0].value())
        return out.push_back(Fact::tensor(SymShape(*in[0].dims[0].value()), kept.value_or(dtype)));
      gap("the shape is computed at run time");
    };
    r["Range"] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
      out.push_back(Fact::tensor({SymDim()}, need(in, 0).dtype));
    };
    r["EyeLike"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      out.push_back(
          like(need(in, 0), elem_type_attr(c, "dtype", in[0].dtype.value_or(Dtype::Float32))));
    };
    r["TopK"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = ranked(in, 0);
      const int64_t axis = norm_axis(c.attr_int("axis", -1), x.rank(), "axis");
      SymShape d = x.dims;
      if (c.has_attr("k")) {
        d[axis] = SymDim(c.attr_int("k", 0));
      } else {
        auto k = need(in, 1).values();
        d[axis] = k && k->size() == 1 ? (*k)[0] : SymDim();
      }
      out.push_back(Fact::tensor(d, x.dtype));
      out.push_back(Fact::tensor(d, Dtype::Int64));
    };
    r["OneHot"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& idx = ranked(in, 0);
      auto depth = need(in, 1).values();
      SymShape d = idx.dims;
      const int64_t axis = norm_axis(c.attr_int("axis", -1), idx.rank() + 1, "axis");
      d.insert(d.begin() + axis, depth && depth->size() == 1 ? (*depth)[0] : SymDim());
      out.push_back(Fact::tensor(std::move(d), need(in, 2).dtype));
    };
    r["NonZero"] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
      out.push_back(Fact::tensor({SymDim(ranked(in, 0).rank()), SymDim()}, Dtype::Int64));
    };
    r["NonMaxSuppression"] = [](const OpCall&, const std::vector<Fact>&, std::vector<Fact>& out) {
      out.push_back(Fact::tensor({SymDim(), SymDim(3)}, Dtype::Int64));
    };
    r["Compress"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = ranked(in, 0);
      if (!c.has_attr("axis")) return out.push_back(Fact::tensor({SymDim()}, x.dtype));
      SymShape d = x.dims;
      d[norm_axis(c.attr_int("axis", 0), x.rank(), "axis")] = SymDim();
      out.push_back(Fact::tensor(std::move(d), x.dtype));
    };
    r["Unique"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = ranked(in, 0);
      SymShape y{SymDim()};
      SymDim inverse = numel(x.dims);
      if (c.has_attr("axis")) {
        const int64_t axis = norm_axis(c.attr_int("axis", 0), x.rank(), "axis");
        y = x.dims;
        y[axis] = SymDim();
        inverse = x.dims[axis];
      }
      out.push_back(Fact::tensor(y, x.dtype));
      out.push_back(Fact::tensor({SymDim()}, Dtype::Int64));
      out.push_back(Fact::tensor({inverse}, Dtype::Int64));
      out.push_back(Fact::tensor({SymDim()}, Dtype::Int64));
    };
    for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"})
      r[op] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
        auto n = need(in, 0).values();
        out.push_back(Fact::tensor({n && n->size() == 1 ? (*n)[0] : SymDim()},
                                   elem_type_attr(c, "output_datatype", Dtype::Float32)));
      };
    r["Det"] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = ranked(in, 0);
      if (x.rank() < 2) gap("Det takes a matrix or a batch of them");
      out.push_back(Fact::tensor(SymShape(x.dims.begin(), x.dims.end() - 2), x.dtype));
    };
    // Losses: per-element with reduction 'none' (the target's shape), else a scalar; the
    // log-probabilities output of SoftmaxCrossEntropyLoss has the scores' shape.
    for (const char* op : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"})
      r[op] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
        const Fact& scores = need(in, 0);
        const Fact& target = need(in, 1);
        if (c.attr_string("reduction", "mean") == "none")
          out.push_back(like(target, scores.dtype));
        else
          out.push_back(Fact::tensor({}, scores.dtype));
        if (c.num_outputs() > 1) out.push_back(like(scores, scores.dtype));
      };
    for (const char* op : {"RandomNormal", "RandomUniform"})
      r[op] = [](const OpCall& c, const std::vector<Fact>&, std::vector<Fact>& out) {
        if (!c.has_attr("shape")) gap("no shape attribute");
        const std::vector<int64_t> shape = c.attr_ints("shape");
        out.push_back(Fact::tensor(SymShape(shape.begin(), shape.end()),
                                   elem_type_attr(c, "dtype", Dtype::Float32)));
      };
    for (const char* op : {"RandomNormalLike", "RandomUniformLike", "Bernoulli"})
      r[op] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
        const Fact& x = need(in, 0);
        out.push_back(
            like(x, c.has_attr("dtype") ? elem_type_attr(c, "dtype", Dtype::Float32) : x.dtype));
      };
    add_nn_shape_rules(r);
    return r;
  }();
  return table;
}

// Elementwise integer arithmetic on sizes, broadcasting a one-element side.
std::optional<std::vector<SymDim>> size_binary(const std::string& op, const std::vector<SymDim>& a,
                                               const std::vector<SymDim>& b) {
  if (a.size() != b.size() && a.size() != 1 && b.size() != 1) return std::nullopt;
  const size_t n = std::max(a.size(), b.size());
  std::vector<SymDim> r;
  for (size_t i = 0; i < n; ++i) {
    const SymDim& x = a[a.size() == 1 ? 0 : i];
    const SymDim& y = b[b.size() == 1 ? 0 : i];
    if (op == "Add")
      r.push_back(x + y);
    else if (op == "Sub")
      r.push_back(x - y);
    else if (op == "Mul")
      r.push_back(x * y);
    else if (op == "Div")
      r.push_back(floordiv(x, y));
    else if (op == "Max" || op == "Min")
      r.push_back(x == y ? x : SymDim());
    else
      return std::nullopt;
  }
  return r;
}

bool integral(std::optional<Dtype> d) { return d && (*d == Dtype::Int64 || *d == Dtype::Int32); }

}  // namespace

bool apply_shape_rule(const std::string& op, const OpCall& c, const std::vector<Fact>& in,
                      std::vector<Fact>& out) {
  auto it = rules().find(op);
  if (it == rules().end()) return false;
  out.clear();
  it->second(c, in, out);
  return true;
}

bool apply_size_arithmetic(const std::string& op, const OpCall& c, const std::vector<Fact>& in,
                           std::vector<Fact>& out) {
  if (out.size() != 1 || !out[0].ranked || out[0].rank() > 1 || !integral(out[0].dtype))
    return false;
  std::optional<std::vector<SymDim>> r;
  if (op == "Shape" || op == "Size") {
    r = out[0].sym;
  } else if (op == "Cast" || op == "Identity" || op == "Reshape" || op == "Squeeze" ||
             op == "Unsqueeze" || op == "Flatten") {
    r = need(in, 0).values();
  } else if (op == "Gather") {
    auto data = need(in, 0).values();
    auto idx = ints(in, 1);
    if (data && idx && c.attr_int("axis", 0) == 0) {
      r.emplace();
      for (int64_t i : *idx) {
        const int64_t n = static_cast<int64_t>(data->size());
        if (i < -n || i >= n) return false;
        r->push_back((*data)[i < 0 ? i + n : i]);
      }
    }
  } else if (op == "Concat") {
    r.emplace();
    for (size_t i = 0; i < in.size() && r; ++i) {
      auto v = need(in, i).values();
      if (!v)
        r.reset();
      else
        r->insert(r->end(), v->begin(), v->end());
    }
  } else if (op == "Slice") {
    auto data = need(in, 0).values();
    const bool attrs = c.has_attr("starts");
    auto starts = attrs ? std::optional(c.attr_ints("starts")) : ints(in, 1);
    auto ends = attrs ? std::optional(c.attr_ints("ends")) : ints(in, 2);
    auto steps = attrs ? std::nullopt : ints(in, 4);
    if (data && starts && ends && starts->size() == 1 && ends->size() == 1 &&
        (!steps || (steps->size() == 1 && (*steps)[0] > 0))) {
      const int64_t n = static_cast<int64_t>(data->size()), step = steps ? (*steps)[0] : 1;
      auto clamp = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
      r.emplace();
      for (int64_t i = clamp((*starts)[0]); i < clamp((*ends)[0]); i += step)
        r->push_back((*data)[i]);
    }
  } else if (in.size() == 2) {
    auto a = need(in, 0).values();
    auto b = need(in, 1).values();
    if (a && b) r = size_binary(op, *a, *b);
  }
  if (!r) return false;
  const int64_t expect = out[0].rank() == 0 ? 1 : out[0].dims[0].value().value_or(-1);
  if (static_cast<int64_t>(r->size()) != expect) return false;
  out[0].sym = r;
  out[0].data.reset();
  // All sizes known: the elements themselves, so that ops reading them can run on them.
  std::vector<int64_t> known;
  for (const SymDim& d : *r)
    if (auto v = d.value()) known.push_back(*v);
  if (known.size() == r->size() && out[0].dtype == Dtype::Int64)
    out[0].data = Value::from_i64(
        out[0].rank() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{expect}, known);
  return true;
}

}  // namespace fx::exec