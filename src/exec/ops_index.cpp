// Indexing and sequence ONNX ops: ScatterND, ScatterElements, GatherND, NonZero, OneHot,
// ConstantOfShape, SpaceToDepth, GroupNormalization, LRN, Einsum, LSTM.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "exec/ops.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"

namespace fx::exec {

namespace {

using kernels::Shape;

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t d = static_cast<int64_t>(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

// A writable copy of `v` (ops never write their inputs).
Value copy_of(const Value& v) {
  Value out = new_value(v.dtype(), v.shape());
  std::memcpy(out.mutable_data<uint8_t>(), v.data<uint8_t>(), v.nbytes());
  return out;
}

int64_t checked_index(const OpCall& c, int64_t i, int64_t n) {
  if (i < -n || i >= n)
    c.fail("index " + std::to_string(i) + " is out of range for a dimension of " +
           std::to_string(n));
  return i < 0 ? i + n : i;
}

// Combines `dst` with `src` per the scatter `reduction` attribute.
template <class T>
void combine(T& dst, T src, const std::string& reduction) {
  if (reduction == "add") {
    dst += src;
  } else if (reduction == "mul") {
    dst *= src;
  } else if (reduction == "max") {
    dst = std::max(dst, src);
  } else if (reduction == "min") {
    dst = std::min(dst, src);
  } else {
    dst = src;
  }
}

void scatter_nd(OpCall& c) {
  const Value& x = c.input(0);
  const Value& idx = c.input(1);
  const Value& upd = c.input(2);
  const std::string reduction = c.attr_string("reduction", "none");
  Value out = copy_of(x);
  const int64_t k = idx.shape().empty() ? 0 : idx.shape().back();
  if (k > static_cast<int64_t>(x.shape().size()))
    c.fail("index tuples are longer than the data's rank");
  const std::vector<int64_t> ind = idx.to_i64();
  const std::vector<int64_t> st = strides_of(x.shape());
  const int64_t tuples = k ? static_cast<int64_t>(ind.size()) / k : 0;
  int64_t slice = 1;
  for (size_t d = static_cast<size_t>(k); d < x.shape().size(); ++d) slice *= x.shape()[d];
  if (upd.numel() != tuples * slice) c.fail("updates do not match indices and data");
  if (upd.dtype() != x.dtype()) c.fail("updates must have the data's element type");
  const size_t es = dtype_size(x.dtype());
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; ++j) off += checked_index(c, ind[t * k + j], x.shape()[j]) * st[j];
    if (reduction == "none" || x.dtype() != Dtype::Float32) {
      if (reduction != "none")
        c.unsupported("ScatterND reduction on " + std::string(dtype_name(x.dtype())));
      std::memcpy(out.mutable_data<uint8_t>() + off * es, upd.data<uint8_t>() + t * slice * es,
                  static_cast<size_t>(slice) * es);
    } else {
      for (int64_t i = 0; i < slice; ++i)
        combine(out.mutable_data<float>()[off + i], upd.data<float>()[t * slice + i], reduction);
    }
  }
  c.outputs.push_back(out);
}

void scatter_elements(OpCall& c) {
  const Value& x = c.input(0);
  const Value& idx = c.input(1);
  const Value& upd = c.input(2);
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  const int64_t axis = normalize_axis(c, c.attr_int("axis", 0), rank, "axis");
  const std::string reduction = c.attr_string("reduction", "none");
  if (idx.shape() != upd.shape() || static_cast<int64_t>(idx.shape().size()) != rank)
    c.fail("indices and updates must have the same shape and the data's rank");
  if (reduction != "none" && x.dtype() != Dtype::Float32)
    c.unsupported("ScatterElements reduction on " + std::string(dtype_name(x.dtype())));
  Value out = copy_of(x);
  const std::vector<int64_t> ind = idx.to_i64();
  const std::vector<int64_t> st = strides_of(x.shape());
  const size_t es = dtype_size(x.dtype());
  std::vector<int64_t> pos(rank, 0);
  for (int64_t o = 0; o < idx.numel(); ++o) {
    int64_t off = 0;
    for (int64_t d = 0; d < rank; ++d)
      off += (d == axis ? checked_index(c, ind[o], x.shape()[axis]) : pos[d]) * st[d];
    if (reduction == "none") {
      std::memcpy(out.mutable_data<uint8_t>() + off * es, upd.data<uint8_t>() + o * es, es);
    } else {
      combine(out.mutable_data<float>()[off], upd.data<float>()[o], reduction);
    }
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++pos[d] < idx.shape()[d]) break;
      pos[d] = 0;
    }
  }
  c.outputs.push_back(out);
}

void gather_nd(OpCall& c) {
  const Value& x = c.input(0);
  const Value& idx = c.input(1);
  const int64_t b = c.attr_int("batch_dims", 0);
  const int64_t xr = static_cast<int64_t>(x.shape().size());
  const int64_t ir = static_cast<int64_t>(idx.shape().size());
  if (b < 0 || b >= std::min(xr, ir))
    c.fail("batch_dims must be in [0, min(rank(data), rank(indices)))");
  for (int64_t d = 0; d < b; ++d)
    if (x.shape()[d] != idx.shape()[d]) c.fail("the batch dimensions of data and indices differ");
  const int64_t k = idx.shape().empty() ? 0 : idx.shape().back();
  if (k < 1 || k > xr - b) c.fail("the last indices dim must be in [1, rank - batch_dims]");
  Shape os(idx.shape().begin(), idx.shape().end() - 1);
  os.insert(os.end(), x.shape().begin() + b + k, x.shape().end());
  int64_t slice = 1, batches = 1;
  for (int64_t d = b + k; d < xr; ++d) slice *= x.shape()[d];
  for (int64_t d = 0; d < b; ++d) batches *= x.shape()[d];
  int64_t batch_elems = 1;  // elements of data per batch
  for (int64_t d = b; d < xr; ++d) batch_elems *= x.shape()[d];
  const std::vector<int64_t> ind = idx.to_i64();
  const Shape inner(x.shape().begin() + b, x.shape().end());
  const std::vector<int64_t> st = strides_of(inner);
  const size_t es = dtype_size(x.dtype());
  Value out = new_value(x.dtype(), os);
  const int64_t tuples = static_cast<int64_t>(ind.size()) / k;
  const int64_t per_batch = tuples / batches;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = (t / per_batch) * batch_elems;
    for (int64_t j = 0; j < k; ++j) off += checked_index(c, ind[t * k + j], inner[j]) * st[j];
    std::memcpy(out.mutable_data<uint8_t>() + t * slice * es, x.data<uint8_t>() + off * es,
                static_cast<size_t>(slice) * es);
  }
  c.outputs.push_back(out);
}

void nonzero(OpCall& c) {
  const Value& x = c.input(0);
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  const size_t es = dtype_size(x.dtype());
  std::vector<int64_t> hits;
  const std::vector<uint8_t> zero(es, 0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const uint8_t* p = x.data<uint8_t>() + i * es;
    bool nz = std::memcmp(p, zero.data(), es) != 0;
    if (x.dtype() == Dtype::Float32)
      nz = *reinterpret_cast<const float*>(p) != 0.0f;  // -0.0 is zero
    if (nz) hits.push_back(i);
  }
  const int64_t n = static_cast<int64_t>(hits.size());
  std::vector<int64_t> out(static_cast<size_t>(std::max<int64_t>(rank, 1) * n));
  const std::vector<int64_t> st = strides_of(x.shape());
  for (int64_t j = 0; j < n; ++j)
    for (int64_t d = 0; d < rank; ++d) out[d * n + j] = (hits[j] / st[d]) % x.shape()[d];
  c.outputs.push_back(Value::from_i64({rank, n}, rank ? out : std::vector<int64_t>{}));
}

void one_hot(OpCall& c) {
  const std::vector<int64_t> ind = c.input(0).to_i64();
  const int64_t depth = c.input(1).to_i64().at(0);
  const Value& values = c.input(2);
  if (values.numel() != 2) c.fail("values must hold [off, on]");
  if (depth < 1) c.fail("depth must be positive");
  const Shape& is = c.input(0).shape();
  const int64_t rank = static_cast<int64_t>(is.size()) + 1;
  const int64_t axis = normalize_axis(c, c.attr_int("axis", -1), rank, "axis");
  Shape os(is.begin(), is.begin() + axis);
  os.push_back(depth);
  os.insert(os.end(), is.begin() + axis, is.end());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= is[d];
  for (size_t d = static_cast<size_t>(axis); d < is.size(); ++d) inner *= is[d];
  const size_t es = dtype_size(values.dtype());
  Value out = new_value(values.dtype(), os);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t h = 0; h < depth; ++h)
      for (int64_t j = 0; j < inner; ++j) {
        int64_t i = ind[o * inner + j];
        if (i < 0) i += depth;
        const bool on = i == h;
        std::memcpy(out.mutable_data<uint8_t>() + ((o * depth + h) * inner + j) * es,
                    values.data<uint8_t>() + (on ? es : 0), es);
      }
  c.outputs.push_back(out);
}

void constant_of_shape(OpCall& c) {
  const std::vector<int64_t> shape = c.input(0).to_i64();
  for (int64_t d : shape)
    if (d < 0) c.fail("shape has a negative dimension");
  const Argument* v = c.attrs.find("value");
  if (!v || v->kind() == Argument::Kind::Float) {  // default: float32 zeros
    Value out = new_value(Dtype::Float32, shape);
    const float f = v ? static_cast<float>(v->to_double()) : 0.0f;
    std::fill(out.mutable_data<float>(), out.mutable_data<float>() + out.numel(), f);
    c.outputs.push_back(out);
  } else if (v->kind() == Argument::Kind::Int || v->kind() == Argument::Kind::Bool) {
    const bool is_bool = v->kind() == Argument::Kind::Bool;
    Value out = new_value(is_bool ? Dtype::Bool : Dtype::Int64, shape);
    if (is_bool) {
      std::fill(out.mutable_data<uint8_t>(), out.mutable_data<uint8_t>() + out.numel(),
                v->to_bool() ? 1 : 0);
    } else {
      std::fill(out.mutable_data<int64_t>(), out.mutable_data<int64_t>() + out.numel(),
                v->to_int());
    }
    c.outputs.push_back(out);
  } else {
    c.unsupported(std::string("a 'value' attribute of kind ") + Argument::kind_name(v->kind()));
  }
}

void space_to_depth(OpCall& c) {
  const Value& x = c.input(0);
  if (x.shape().size() != 4) c.fail("the input must be 4-D");
  const int64_t b = c.attr_int("blocksize", 0);
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  if (b < 1 || H % b || W % b) c.fail("blocksize must divide height and width");
  const size_t es = dtype_size(x.dtype());
  Value out = new_value(x.dtype(), {N, C * b * b, H / b, W / b});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          const int64_t oc = ((h % b) * b + (w % b)) * C + ch;
          const int64_t dst = ((n * C * b * b + oc) * (H / b) + h / b) * (W / b) + w / b;
          const int64_t src = ((n * C + ch) * H + h) * W + w;
          std::memcpy(out.mutable_data<uint8_t>() + dst * es, x.data<uint8_t>() + src * es, es);
        }
  c.outputs.push_back(out);
}

void group_norm(OpCall& c) {
  const Value& x = c.input(0);
  if (x.dtype() != Dtype::Float32) c.unsupported("GroupNormalization on non-float32");
  if (x.shape().size() < 2) c.fail("the input must have rank >= 2");
  const int64_t N = x.shape()[0], C = x.shape()[1];
  const int64_t groups = c.attr_int("num_groups", 0);
  if (groups < 1 || C % groups) c.fail("num_groups must divide the channels");
  const int64_t spatial = (N * C != 0) ? x.numel() / (N * C) : 0;
  const Value& scale = c.input(1);
  const Value& bias = c.input(2);
  // Opset 18 gives scale/bias per group, opset 21 per channel.
  const bool per_group = scale.numel() == groups && groups != C;
  if (!per_group && scale.numel() != C) c.fail("scale must have one value per group or channel");
  const float eps = c.attr_float("epsilon", 1e-5f);
  const int64_t cpg = C / groups;
  Value out = new_value(Dtype::Float32, x.shape());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      const float* px = x.data<float>() + (n * C + g * cpg) * spatial;
      float* po = out.mutable_data<float>() + (n * C + g * cpg) * spatial;
      const int64_t cnt = cpg * spatial;
      double m = 0, v = 0;
      for (int64_t i = 0; i < cnt; ++i) m += px[i];
      m /= static_cast<double>(cnt);
      for (int64_t i = 0; i < cnt; ++i) v += (px[i] - m) * (px[i] - m);
      v /= static_cast<double>(cnt);
      const float inv = static_cast<float>(1.0 / std::sqrt(v + eps));
      for (int64_t i = 0; i < cnt; ++i) {
        const int64_t ch = per_group ? g : g * cpg + i / spatial;
        po[i] = (px[i] - static_cast<float>(m)) * inv * scale.data<float>()[ch] +
                bias.data<float>()[ch];
      }
    }
  c.outputs.push_back(out);
}

void lrn(OpCall& c) {
  const Value& x = c.input(0);
  if (x.dtype() != Dtype::Float32 || x.shape().size() < 3)
    c.fail("LRN needs a float32 input of rank >= 3");
  const int64_t size = c.attr_int("size", 0);
  if (size < 1) c.fail("size must be positive");
  const float alpha = c.attr_float("alpha", 1e-4f), beta = c.attr_float("beta", 0.75f),
              bias = c.attr_float("bias", 1.0f);
  const int64_t N = x.shape()[0], C = x.shape()[1];
  const int64_t spatial = (N * C != 0) ? x.numel() / (N * C) : 0;
  Value out = new_value(Dtype::Float32, x.shape());
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t i = 0; i < spatial; ++i) {
        double sq = 0;
        for (int64_t k = std::max<int64_t>(0, ch - lo); k <= std::min(C - 1, ch + hi); ++k) {
          const double v = x.data<float>()[(n * C + k) * spatial + i];
          sq += v * v;
        }
        const int64_t at = (n * C + ch) * spatial + i;
        out.mutable_data<float>()[at] =
            static_cast<float>(x.data<float>()[at] / std::pow(bias + alpha / size * sq, beta));
      }
  c.outputs.push_back(out);
}

// Einsum by explicit index loops: any equation over float32 operands (with '...' unsupported).
void einsum(OpCall& c) {
  std::string eq = c.attr_string("equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  if (eq.find("...") != std::string::npos) c.unsupported("Einsum with '...'");
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t s = 0;;) {
    const size_t comma = lhs.find(',', s);
    terms.push_back(lhs.substr(s, comma == std::string::npos ? std::string::npos : comma - s));
    if (comma == std::string::npos) break;
    s = comma + 1;
  }
  if (terms.size() != c.inputs.size())
    c.fail("the equation names " + std::to_string(terms.size()) + " operands");
  std::map<char, int64_t> dims;
  for (size_t t = 0; t < terms.size(); ++t) {
    const Value& v = c.input(t);
    if (v.dtype() != Dtype::Float32) c.unsupported("Einsum on non-float32");
    if (terms[t].size() != v.shape().size())
      c.fail("term '" + terms[t] + "' does not match its operand's rank");
    for (size_t i = 0; i < terms[t].size(); ++i) {
      auto it = dims.find(terms[t][i]);
      if (it != dims.end() && it->second != v.shape()[i] && v.shape()[i] != 1 && it->second != 1)
        c.fail(std::string("label '") + terms[t][i] + "' has inconsistent sizes");
      dims[terms[t][i]] = it == dims.end() ? v.shape()[i] : std::max(it->second, v.shape()[i]);
    }
  }
  std::string out_labels;
  if (arrow != std::string::npos) {
    out_labels = eq.substr(arrow + 2);
  } else {  // implicit: labels appearing once, sorted
    std::map<char, int> count;
    for (const std::string& t : terms)
      for (char ch : t) ++count[ch];
    for (const auto& [ch, n] : count)
      if (n == 1) out_labels += ch;
  }
  std::vector<char> labels;
  for (const auto& kv : dims) labels.push_back(kv.first);
  Shape os;
  for (char ch : out_labels) {
    if (!dims.count(ch)) c.fail(std::string("output label '") + ch + "' is not an input label");
    os.push_back(dims[ch]);
  }
  Value out = zeroed_value(Dtype::Float32, os);
  // Iterate over every label combination.
  std::vector<int64_t> idx(labels.size(), 0);
  std::map<char, size_t> pos;
  for (size_t i = 0; i < labels.size(); ++i) pos[labels[i]] = i;
  int64_t total = 1;
  for (char l : labels) total *= dims[l];
  std::vector<std::vector<int64_t>> st(terms.size());
  for (size_t t = 0; t < terms.size(); ++t) st[t] = strides_of(c.input(t).shape());
  const std::vector<int64_t> ost = strides_of(os);
  for (int64_t it = 0; it < total; ++it) {
    double prod = 1;
    for (size_t t = 0; t < terms.size(); ++t) {
      int64_t off = 0;
      for (size_t i = 0; i < terms[t].size(); ++i) {
        const int64_t coord = c.input(t).shape()[i] == 1 ? 0 : idx[pos[terms[t][i]]];
        off += coord * st[t][i];
      }
      prod *= c.input(t).data<float>()[off];
    }
    int64_t o = 0;
    for (size_t i = 0; i < out_labels.size(); ++i) o += idx[pos[out_labels[i]]] * ost[i];
    out.mutable_data<float>()[o] += static_cast<float>(prod);
    for (int64_t d = static_cast<int64_t>(labels.size()) - 1; d >= 0; --d) {
      if (++idx[d] < dims[labels[d]]) break;
      idx[d] = 0;
    }
  }
  c.outputs.push_back(out);
}

// LSTM with the default activations (sigmoid, tanh, tanh), layout 0, forward / reverse /
// bidirectional; inputs X[seq, batch, in], W[dirs, 4H, in], R[dirs, 4H, H], B[dirs, 8H],
// sequence_lens, initial_h/initial_c[dirs, batch, H], P (peepholes).
void lstm(OpCall& c) {
  const Value& X = c.input(0);
  const Value& W = c.input(1);
  const Value& R = c.input(2);
  for (const Value* v : {&X, &W, &R})
    if (v->dtype() != Dtype::Float32) c.unsupported("LSTM on non-float32");
  if (c.has_attr("activations")) c.unsupported("LSTM with custom activations");
  if (c.attr_int("layout", 0) != 0) c.unsupported("LSTM layout = 1");
  if (c.has_input(4)) c.unsupported("LSTM with sequence_lens");
  if (c.has_input(7)) c.unsupported("LSTM with peepholes");
  if (c.has_attr("clip")) c.unsupported("LSTM with clip");
  if (c.attr_int("input_forget", 0)) c.unsupported("LSTM with input_forget");
  const std::string direction = c.attr_string("direction", "forward");
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  if (X.shape().size() != 3) c.fail("X must be [seq, batch, input]");
  const int64_t S = X.shape()[0], Bt = X.shape()[1], I = X.shape()[2];
  const int64_t H = c.attr_int("hidden_size", R.shape().size() == 3 ? R.shape()[2] : 0);
  if (W.shape() != Shape{dirs, 4 * H, I} || R.shape() != Shape{dirs, 4 * H, H})
    c.fail("W or R has the wrong shape");
  Value Y = new_value(Dtype::Float32, {S, dirs, Bt, H});
  Value Yh = new_value(Dtype::Float32, {dirs, Bt, H}),
        Yc = new_value(Dtype::Float32, {dirs, Bt, H});
  std::vector<float> gates(static_cast<size_t>(Bt * 4 * H)), h(static_cast<size_t>(Bt * H)),
      cell(h.size());
  auto sig = [](float v) { return 1.0f / (1.0f + std::exp(-v)); };
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const float* w = W.data<float>() + d * 4 * H * I;
    const float* r = R.data<float>() + d * 4 * H * H;
    const float* b = c.has_input(3) ? c.input(3).data<float>() + d * 8 * H : nullptr;
    std::fill(h.begin(), h.end(), 0.0f);
    std::fill(cell.begin(), cell.end(), 0.0f);
    if (c.has_input(5))
      std::memcpy(h.data(), c.input(5).data<float>() + d * Bt * H, h.size() * sizeof(float));
    if (c.has_input(6))
      std::memcpy(cell.data(), c.input(6).data<float>() + d * Bt * H, cell.size() * sizeof(float));
    for (int64_t step = 0; step < S; ++step) {
      const int64_t t = reverse ? S - 1 - step : step;
      // gates[Bt, 4H] = X_t W^T + h R^T + Wb + Rb   (gate order i, o, f, c)
      kernels::sgemm(false, true, Bt, 4 * H, I, 1.0f, X.data<float>() + t * Bt * I, I, w, I, 0.0f,
                     gates.data(), 4 * H);
      kernels::sgemm(false, true, Bt, 4 * H, H, 1.0f, h.data(), H, r, H, 1.0f, gates.data(), 4 * H);
      for (int64_t n = 0; n < Bt; ++n) {
        float* g = gates.data() + n * 4 * H;
        for (int64_t j = 0; j < H; ++j) {
          float gi = g[j], go = g[H + j], gf = g[2 * H + j], gc = g[3 * H + j];
          if (b) {
            gi += b[j] + b[4 * H + j];
            go += b[H + j] + b[5 * H + j];
            gf += b[2 * H + j] + b[6 * H + j];
            gc += b[3 * H + j] + b[7 * H + j];
          }
          float& ct = cell[n * H + j];
          ct = sig(gf) * ct + sig(gi) * std::tanh(gc);
          h[n * H + j] = sig(go) * std::tanh(ct);
        }
      }
      std::memcpy(Y.mutable_data<float>() + ((t * dirs + d) * Bt) * H, h.data(),
                  h.size() * sizeof(float));
    }
    std::memcpy(Yh.mutable_data<float>() + d * Bt * H, h.data(), h.size() * sizeof(float));
    std::memcpy(Yc.mutable_data<float>() + d * Bt * H, cell.data(), cell.size() * sizeof(float));
  }
  c.outputs.push_back(Y);
  c.outputs.push_back(Yh);
  c.outputs.push_back(Yc);
}

}  // namespace

void register_index_ops() {
  register_builtin("onnx.ScatterND", scatter_nd);
  register_builtin("onnx.ScatterElements", scatter_elements);
  register_builtin("onnx.GatherND", gather_nd);
  register_builtin("onnx.NonZero", nonzero);
  register_builtin("onnx.OneHot", one_hot);
  register_builtin("onnx.ConstantOfShape", constant_of_shape);
  register_builtin("onnx.SpaceToDepth", space_to_depth);
  register_builtin("onnx.GroupNormalization", group_norm);
  register_builtin("onnx.LRN", lrn);
  register_builtin("onnx.Einsum", einsum);
  register_builtin("onnx.LSTM", lstm);
}

}  // namespace fx::exec
