// Shape rules of the layer ops for infer_shapes: convolution and pooling windows, matrix
// products, normalisation, recurrences, resampling and Einsum (the rest: shape_rules.cpp).
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "exec/ops.h"
#include "exec/shape_rules.h"

namespace fx::exec {

namespace {

// One output dim of a convolution or pool window along an axis.
SymDim window_out(const SymDim& in, int64_t k, int64_t stride, int64_t dil, int64_t pb, int64_t pe,
                  const std::string& auto_pad, bool ceil_mode) {
  if (stride < 1 || dil < 1 || k < 1) gap("a kernel, stride or dilation below 1");
  const int64_t ek = (k - 1) * dil + 1;
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")
    return stride == 1 ? in : floordiv(in + SymDim(stride - 1), SymDim(stride));
  if (auto_pad == "VALID") pb = pe = 0;
  const SymDim span = in + SymDim(pb + pe - ek);
  if (stride == 1) return span + SymDim(1);
  auto v = span.value();
  if (!v) return SymDim();
  if (*v < 0) gap("the window (" + std::to_string(ek) + ") is larger than the padded input");
  int64_t out = (ceil_mode ? (*v + stride - 1) / stride : *v / stride) + 1;
  // The last window must start inside the input or its left padding (ONNX, as PyTorch).
  if (ceil_mode && in.value() && (out - 1) * stride >= *in.value() + pb) --out;
  return SymDim(out);
}

// Conv-like: X [N, C, spatial...], kernel dims `k`; `channels` the output's C.
void windowed(const OpCall& c, const Fact& x, const std::vector<int64_t>& k, const SymDim& channels,
              std::optional<Dtype> dtype, std::vector<Fact>& out, bool pool) {
  const int64_t sp = x.rank() - 2;
  if (sp < 1 || static_cast<int64_t>(k.size()) != sp)
    gap("the kernel has " + std::to_string(k.size()) + " dims for an input of rank " +
        std::to_string(x.rank()));
  const auto strides = c.attr_ints("strides", std::vector<int64_t>(sp, 1));
  const auto dil = c.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  const auto pads = c.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  if (static_cast<int64_t>(strides.size()) != sp || static_cast<int64_t>(dil.size()) != sp ||
      static_cast<int64_t>(pads.size()) != 2 * sp)
    gap("strides, dilations or pads do not match the spatial rank " + std::to_string(sp));
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  const bool ceil_mode = pool && c.attr_int("ceil_mode", 0) != 0;
  SymShape d{x.dims[0], channels};
  for (int64_t i = 0; i < sp; ++i)
    d.push_back(window_out(x.dims[2 + i], k[i], strides[i], dil[i], pads[i], pads[sp + i], auto_pad,
                           ceil_mode));
  out.push_back(Fact::tensor(std::move(d), dtype));
}

std::vector<int64_t> kernel_of(const OpCall& c, const Fact& w) {
  if (c.has_attr("kernel_shape")) return c.attr_ints("kernel_shape");
  std::vector<int64_t> k;
  for (size_t i = 2; i < w.dims.size(); ++i) {
    if (!w.dims[i].value()) gap("the kernel's size is not known");
    k.push_back(*w.dims[i].value());
  }
  return k;
}

void conv(const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out, size_t w_at,
          std::optional<Dtype> dtype) {
  const Fact& x = ranked(in, 0);
  const Fact& w = ranked(in, w_at);
  if (w.rank() != x.rank()) gap("the weight's rank differs from the input's");
  windowed(c, x, kernel_of(c, w), w.dims[0], dtype, out, false);
}

void conv_transpose(const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
  const Fact& x = ranked(in, 0);
  const Fact& w = ranked(in, 1);
  const int64_t sp = x.rank() - 2;
  if (sp < 1 || w.rank() != x.rank()) gap("the weight's rank differs from the input's");
  const std::vector<int64_t> k = kernel_of(c, w);
  const auto strides = c.attr_ints("strides", std::vector<int64_t>(sp, 1));
  const auto dil = c.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  const auto pads = c.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  const auto opad = c.attr_ints("output_padding", std::vector<int64_t>(sp, 0));
  const auto oshape = c.attr_ints("output_shape");
  if (static_cast<int64_t>(k.size()) != sp || static_cast<int64_t>(strides.size()) != sp ||
      static_cast<int64_t>(dil.size()) != sp || static_cast<int64_t>(pads.size()) != 2 * sp ||
      static_cast<int64_t>(opad.size()) != sp)
    gap("kernel_shape, strides, dilations, pads or output_padding do not match the spatial rank");
  SymShape d{x.dims[0], w.dims[1] * SymDim(c.attr_int("group", 1))};
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  for (int64_t i = 0; i < sp; ++i) {
    if (!oshape.empty()) {
      d.push_back(SymDim(oshape[oshape.size() - sp + i]));
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      d.push_back(x.dims[2 + i] * SymDim(strides[i]));
    } else {
      const int64_t p = auto_pad == "VALID" ? 0 : pads[i] + pads[sp + i];
      d.push_back(SymDim(strides[i]) * (x.dims[2 + i] - SymDim(1)) +
                  SymDim(opad[i] + (k[i] - 1) * dil[i] + 1 - p));
    }
  }
  out.push_back(Fact::tensor(std::move(d), x.dtype));
}

void matmul(const Fact& a, const Fact& b, std::optional<Dtype> dtype, std::vector<Fact>& out) {
  if (a.rank() < 1 || b.rank() < 1) gap("MatMul of a 0-d tensor");
  SymShape sa = a.dims, sb = b.dims;
  const bool va = sa.size() == 1, vb = sb.size() == 1;
  if (va) sa.insert(sa.begin(), SymDim(1));
  if (vb) sb.push_back(SymDim(1));
  const SymDim ka = sa.back(), kb = sb[sb.size() - 2];
  if (ka.value() && kb.value() && ka != kb)
    gap("inner dims differ: " + ka.str() + " and " + kb.str());
  SymShape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  SymShape d = broadcast({&ba, &bb});
  if (!va) d.push_back(sa[sa.size() - 2]);
  if (!vb) d.push_back(sb.back());
  out.push_back(Fact::tensor(std::move(d), dtype));
}

void einsum(const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
  std::string eq = c.attr_string("equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  if (eq.find("...") != std::string::npos) gap("an einsum equation with '...'");
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  size_t from = 0;
  for (size_t comma; (comma = lhs.find(',', from)) != std::string::npos; from = comma + 1)
    terms.push_back(lhs.substr(from, comma - from));
  terms.push_back(lhs.substr(from));
  if (terms.size() != in.size())
    gap("the equation names " + std::to_string(terms.size()) + " operands for " +
        std::to_string(in.size()) + " inputs");
  std::unordered_map<char, SymDim> size;
  std::unordered_map<char, int> count;
  for (size_t t = 0; t < terms.size(); ++t) {
    const Fact& f = ranked(in, t);
    if (terms[t].size() != f.dims.size()) gap("an operand's rank differs from its subscripts");
    for (size_t k = 0; k < terms[t].size(); ++k) {
      const char l = terms[t][k];
      size[l] = count[l]++ ? broadcast_dim(size[l], f.dims[k]) : f.dims[k];
    }
  }
  std::string rhs;
  if (arrow != std::string::npos) {
    rhs = eq.substr(arrow + 2);
  } else {  // implicit: the letters used once, sorted
    for (const auto& [l, n] : count)
      if (n == 1) rhs += l;
    std::sort(rhs.begin(), rhs.end());
  }
  SymShape d;
  for (char l : rhs) {
    if (!size.count(l)) gap(std::string("output subscript '") + l + "' is not an input's");
    d.push_back(size[l]);
  }
  out.push_back(Fact::tensor(std::move(d), in[0].dtype));
}

void rnn(const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out, bool lstm) {
  const Fact& x = ranked(in, 0);
  if (x.rank() != 3) gap("X must be 3-d");
  const SymDim dirs(c.attr_string("direction", "forward") == "bidirectional" ? 2 : 1);
  const SymDim hidden =
      c.has_attr("hidden_size")
          ? SymDim(c.attr_int("hidden_size", 0))
          : (has(in, 2) && in[2].ranked && in[2].rank() == 3 ? in[2].dims[2] : SymDim());
  const bool batch_first = c.attr_int("layout", 0) != 0;
  const SymDim seq = batch_first ? x.dims[1] : x.dims[0],
               batch = batch_first ? x.dims[0] : x.dims[1];
  out.push_back(Fact::tensor(
      batch_first ? SymShape{batch, seq, dirs, hidden} : SymShape{seq, dirs, batch, hidden},
      x.dtype));
  const SymShape state =
      batch_first ? SymShape{batch, dirs, hidden} : SymShape{dirs, batch, hidden};
  out.push_back(Fact::tensor(state, x.dtype));
  if (lstm) out.push_back(Fact::tensor(state, x.dtype));
}

}  // namespace

void add_nn_shape_rules(std::unordered_map<std::string, ShapeRule>& r) {
  r["MatMul"] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
    matmul(ranked(in, 0), ranked(in, 1), in[0].dtype, out);
  };
  r["MatMulInteger"] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
    matmul(ranked(in, 0), ranked(in, 1), Dtype::Int32, out);
  };
  r["QLinearMatMul"] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
    matmul(ranked(in, 0), ranked(in, 3), dtype_of(in, 7, Dtype::UInt8), out);
  };
  r["Gemm"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
    const Fact& a = ranked(in, 0);
    const Fact& b = ranked(in, 1);
    if (a.rank() != 2 || b.rank() != 2) gap("Gemm takes 2-d A and B");
    const bool ta = c.attr_int("transA", 0) != 0, tb = c.attr_int("transB", 0) != 0;
    out.push_back(Fact::tensor({a.dims[ta ? 1 : 0], b.dims[tb ? 0 : 1]}, a.dtype));
  };
  r["Conv"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
    conv(c, in, out, 1, in[0].dtype);
  };
  r["ConvInteger"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
    conv(c, in, out, 1, Dtype::Int32);
  };
  r["QLinearConv"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
    conv(c, in, out, 3, dtype_of(in, 7, Dtype::UInt8));
  };
  r["ConvTranspose"] = conv_transpose;
  for (const char* op : {"MaxPool", "AveragePool", "LpPool"})
    r[op] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = ranked(in, 0);
      if (!c.has_attr("kernel_shape")) gap("no kernel_shape");
      if (x.rank() < 3) gap("the input must have spatial dims");
      windowed(c, x, c.attr_ints("kernel_shape"), x.dims[1], x.dtype, out, true);
      if (c.node.target().function().qualname() == "onnx.MaxPool" && c.num_outputs() > 1)
        out.push_back(like(out[0], Dtype::Int64));
    };
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"})
    r[op] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const Fact& x = ranked(in, 0);
      if (x.rank() < 2) gap("the input must have a channel dim");
      SymShape d{x.dims[0], x.dims[1]};
      d.resize(x.dims.size(), SymDim(1));
      out.push_back(Fact::tensor(std::move(d), x.dtype));
    };
  r["BatchNormalization"] = [](const OpCall& c, const std::vector<Fact>& in,
                               std::vector<Fact>& out) {
    out.push_back(like(need(in, 0), in[0].dtype));
    for (size_t i = 1; i < c.num_outputs(); ++i) out.push_back(like(need(in, 3), in[3].dtype));
  };
  r["LayerNormalization"] = [](const OpCall& c, const std::vector<Fact>& in,
                               std::vector<Fact>& out) {
    const Fact& x = need(in, 0);
    out.push_back(like(x, x.dtype));
    if (c.num_outputs() == 1) return;
    if (!x.ranked) gap("the rank of the input is unknown");
    const int64_t axis = norm_axis(c.attr_int("axis", -1), x.rank(), "axis");
    SymShape d = x.dims;
    for (int64_t i = axis; i < x.rank(); ++i) d[i] = SymDim(1);
    for (size_t i = 1; i < c.num_outputs(); ++i) out.push_back(Fact::tensor(d, Dtype::Float32));
  };
  r["DepthToSpace"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
    const Fact& x = ranked(in, 0);
    const SymDim b(c.attr_int("blocksize", 1));
    if (x.rank() != 4) gap("the input must be 4-d");
    out.push_back(Fact::tensor(
        {x.dims[0], floordiv(x.dims[1], b * b), x.dims[2] * b, x.dims[3] * b}, x.dtype));
  };
  r["SpaceToDepth"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
    const Fact& x = ranked(in, 0);
    const SymDim b(c.attr_int("blocksize", 1));
    if (x.rank() != 4) gap("the input must be 4-d");
    out.push_back(Fact::tensor(
        {x.dims[0], x.dims[1] * b * b, floordiv(x.dims[2], b), floordiv(x.dims[3], b)}, x.dtype));
  };
  for (const char* op : {"Resize", "Upsample"})
    r[op] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      const bool up = c.node.target().function().qualname() == "onnx.Upsample";
      const Fact& x = ranked(in, 0);
      const bool opset10 = up || c.opset() < 11;
      auto sizes = opset10 ? std::nullopt : ints(in, 3);
      auto scales = up && c.has_attr("scales") ? std::nullopt : floats(in, opset10 ? 1 : 2);
      if (up && c.has_attr("scales")) {
        const Argument* s = c.attrs.find("scales");
        scales.emplace();
        for (const Argument& e : s->elements()) scales->push_back(e.to_double());
      }
      if (c.has_attr("axes")) gap("Resize with axes");
      SymShape d = x.dims;
      for (int64_t i = 0; i < x.rank(); ++i) {
        if (sizes && static_cast<int64_t>(sizes->size()) == x.rank()) {
          d[i] = SymDim((*sizes)[i]);
        } else if (scales && static_cast<int64_t>(scales->size()) == x.rank()) {
          const double s = (*scales)[i];
          if (auto v = x.dims[i].value())
            d[i] = SymDim(static_cast<int64_t>(std::floor(static_cast<double>(*v) * s)));
          else
            d[i] = s == std::floor(s) ? x.dims[i] * SymDim(static_cast<int64_t>(s)) : SymDim();
        } else {
          d[i] = SymDim();
        }
      }
      out.push_back(Fact::tensor(std::move(d), x.dtype));
    };
  r["GridSample"] = [](const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out) {
    const Fact& x = ranked(in, 0);
    const Fact& g = ranked(in, 1);
    if (x.rank() < 3 || g.rank() != x.rank()) gap("grid and input ranks differ");
    SymShape d{x.dims[0], x.dims[1]};
    d.insert(d.end(), g.dims.begin() + 1, g.dims.end() - 1);
    out.push_back(Fact::tensor(std::move(d), x.dtype));
  };
  r["RoiAlign"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
    const Fact& x = ranked(in, 0);
    const Fact& rois = ranked(in, 1);
    if (x.rank() != 4 || rois.rank() != 2) gap("RoiAlign takes 4-d X and 2-d rois");
    out.push_back(Fact::tensor({rois.dims[0], x.dims[1], SymDim(c.attr_int("output_height", 1)),
                                SymDim(c.attr_int("output_width", 1))},
                               x.dtype));
  };
  r["Einsum"] = einsum;
  r["LSTM"] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
    rnn(c, in, out, true);
  };
  for (const char* op : {"GRU", "RNN"})
    r[op] = [](const OpCall& c, const std::vector<Fact>& in, std::vector<Fact>& out) {
      rnn(c, in, out, false);
    };
}

}  // namespace fx::exec
