// ONNX's recurrent layers RNN, GRU and LSTM on float32, every variant the spec has: forward /
// reverse / bidirectional, layout 0 ([seq, batch, ...]) and 1 ([batch, seq, ...]),
// sequence_lens, initial states, LSTM peepholes and input_forget, clip, and the activation
// functions by name (with activation_alpha / activation_beta).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "exec/ops.h"
#include "kernels/gemm.h"

namespace fx::exec {

namespace {

using Shape = std::vector<int64_t>;

// One activation function of the spec's list, with its alpha/beta.
struct Activation {
  enum Kind {
    Relu,
    Tanh,
    Sigmoid,
    Affine,
    LeakyRelu,
    ThresholdedRelu,
    ScaledTanh,
    HardSigmoid,
    Elu,
    Softsign,
    Softplus
  } kind = Tanh;
  float alpha = 0, beta = 0;

  float operator()(float x) const {
    switch (kind) {
      case Relu:
        return x > 0 ? x : 0;
      case Tanh:
        return std::tanh(x);
      case Sigmoid:
        return 1.0f / (1.0f + std::exp(-x));
      case Affine:
        return alpha * x + beta;
      case LeakyRelu:
        return x >= 0 ? x : alpha * x;
      case ThresholdedRelu:
        return x > alpha ? x : 0;
      case ScaledTanh:
        return alpha * std::tanh(beta * x);
      case HardSigmoid:
        return std::max(0.0f, std::min(1.0f, alpha * x + beta));
      case Elu:
        return x >= 0 ? x : alpha * (std::exp(x) - 1);
      case Softsign:
        return x / (1 + std::fabs(x));
      case Softplus:
        return std::log1p(std::exp(x));
    }
    return x;
  }
};

// The attributes of one RNN/GRU/LSTM node.
struct RnnAttrs {
  int64_t dirs = 1;
  bool reverse_only = false;  // direction "reverse"
  int64_t layout = 0;
  int64_t hidden = 0;  // 0: from R's shape
  float clip = 0;      // 0: no clip
  bool linear_before_reset = false, input_forget = false;
  std::vector<Activation> acts;  // per direction: the op's `per_dir` functions, in order
};

// `per_dir` activations for each direction: the attribute's (given for each direction, or once
// for both), else the op's defaults.
RnnAttrs rnn_attrs(const OpCall& c, const std::vector<Activation::Kind>& defaults) {
  RnnAttrs a;
  const std::string direction = c.attr_string("direction", "forward");
  if (direction == "bidirectional")
    a.dirs = 2;
  else if (direction == "reverse")
    a.reverse_only = true;
  else if (direction != "forward")
    c.fail("direction must be forward, reverse or bidirectional, got '" + direction + "'");
  a.layout = c.attr_int("layout", 0);
  if (a.layout != 0 && a.layout != 1) c.fail("layout must be 0 or 1");
  a.hidden = c.attr_int("hidden_size", 0);
  if (c.has_attr("clip")) {
    a.clip = c.attr_float("clip", 0);
    if (!(a.clip > 0)) c.fail("clip must be positive");
  }
  a.linear_before_reset = c.attr_int("linear_before_reset", 0) != 0;
  a.input_forget = c.attr_int("input_forget", 0) != 0;
  const size_t per_dir = defaults.size();
  std::vector<std::string> names;
  if (const Argument* acts = c.attrs.find("activations")) {
    if (!acts->is_sequence()) c.fail("attribute 'activations' must be a list of strings");
    for (const Argument& e : acts->elements()) {
      if (e.kind() != Argument::Kind::String)
        c.fail("attribute 'activations' must be a list of strings");
      names.push_back(e.to_string());
    }
    if (names.size() == per_dir && a.dirs == 2)
      names.insert(names.end(), names.begin(), names.end());
    if (names.size() != per_dir * static_cast<size_t>(a.dirs))
      c.fail("'activations' must name " + std::to_string(per_dir * a.dirs) + " functions");
  }
  auto floats = [&](const char* name) {
    std::vector<float> v;
    if (const Argument* f = c.attrs.find(name)) {
      if (!f->is_sequence()) c.fail(std::string("attribute '") + name + "' must be floats");
      for (const Argument& e : f->elements()) v.push_back(static_cast<float>(e.to_double()));
    }
    return v;
  };
  const std::vector<float> alphas = floats("activation_alpha"), betas = floats("activation_beta");
  size_t ai = 0, bi = 0;
  for (size_t i = 0; i < per_dir * static_cast<size_t>(a.dirs); ++i) {
    Activation f;
    if (names.empty()) {
      f.kind = defaults[i % per_dir];
      a.acts.push_back(f);
      continue;
    }
    // onnxruntime's defaults for the parameters a list leaves out; each function that takes
    // alpha (beta) consumes the next one of activation_alpha (activation_beta).
    struct Known {
      const char* name;
      Activation::Kind kind;
      bool uses_a, uses_b;
      float da, db;
    };
    static const Known kKnown[] = {
        {"Relu", Activation::Relu, false, false, 0, 0},
        {"Tanh", Activation::Tanh, false, false, 0, 0},
        {"Sigmoid", Activation::Sigmoid, false, false, 0, 0},
        {"Softsign", Activation::Softsign, false, false, 0, 0},
        {"Softplus", Activation::Softplus, false, false, 0, 0},
        {"Affine", Activation::Affine, true, true, 1, 0},
        {"LeakyRelu", Activation::LeakyRelu, true, false, 0.01f, 0},
        {"ThresholdedRelu", Activation::ThresholdedRelu, true, false, 1, 0},
        {"ScaledTanh", Activation::ScaledTanh, true, true, 1, 1},
        {"HardSigmoid", Activation::HardSigmoid, true, true, 0.2f, 0.5f},
        {"Elu", Activation::Elu, true, false, 1, 0},
    };
    const Known* k = nullptr;
    for (const Known& e : kKnown)
      if (names[i] == e.name) k = &e;
    if (!k) c.unsupported("activation function '" + names[i] + "'");
    f.kind = k->kind;
    const bool uses_a = k->uses_a, uses_b = k->uses_b;
    const float da = k->da, db = k->db;
    f.alpha = uses_a ? (ai < alphas.size() ? alphas[ai++] : da) : 0;
    f.beta = uses_b ? (bi < betas.size() ? betas[bi++] : db) : 0;
    a.acts.push_back(f);
  }
  return a;
}

// [a, b, c, ...] -> [b, a, c, ...] of a float32 tensor (layout 1 <-> layout 0).
void swap_first_axes(const float* src, float* dst, int64_t a, int64_t b, int64_t inner) {
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      std::memcpy(dst + (j * a + i) * inner, src + (i * b + j) * inner,
                  static_cast<size_t>(inner) * sizeof(float));
}

enum class Cell { Rnn, Gru, Lstm };

// The shared driver: checks shapes, runs each direction over the sequence, writes Y [seq, dirs,
// batch, H] (layout 0) or [batch, seq, dirs, H] (layout 1), Y_h and (LSTM) Y_c [dirs, batch, H]
// (layout 1: [batch, dirs, H]). For batch entry n only the steps t < sequence_lens[n] run;
// Y is 0 after them and Y_h / Y_c hold the state of the last step that ran.
void recurrent(OpCall& c, Cell cell, const RnnAttrs& a) {
  const char* op = cell == Cell::Rnn ? "RNN" : cell == Cell::Gru ? "GRU" : "LSTM";
  const int64_t G = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;  // gates
  const Value& X = c.input(0);
  const Value& W = c.input(1);
  const Value& R = c.input(2);
  for (size_t i : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{6}, size_t{7}})
    if (c.has_input(i) && c.input(i).dtype() != Dtype::Float32)
      c.unsupported(std::string(op) + " on element type " + dtype_name(c.input(i).dtype()));
  if (X.shape().size() != 3) c.fail("X must have rank 3");
  const int64_t S = X.shape()[a.layout ? 1 : 0], B = X.shape()[a.layout ? 0 : 1], I = X.shape()[2];
  const int64_t D = a.dirs;
  const int64_t H = a.hidden ? a.hidden : (R.shape().size() == 3 ? R.shape()[2] : 0);
  if (W.shape() != Shape{D, G * H, I})
    c.fail("W must be [" + std::to_string(D) + ", " + std::to_string(G * H) + ", " +
           std::to_string(I) + "]");
  if (R.shape() != Shape{D, G * H, H})
    c.fail("R must be [" + std::to_string(D) + ", " + std::to_string(G * H) + ", " +
           std::to_string(H) + "]");
  if (c.has_input(3) && c.input(3).shape() != Shape{D, 2 * G * H})
    c.fail("B must be [" + std::to_string(D) + ", " + std::to_string(2 * G * H) + "]");
  const Shape state_shape = a.layout ? Shape{B, D, H} : Shape{D, B, H};
  for (size_t i : {size_t{5}, size_t{6}})
    if (c.has_input(i) && c.input(i).shape() != state_shape)
      c.fail(std::string(i == 5 ? "initial_h" : "initial_c") + " must be " +
             (a.layout ? "[batch, directions, hidden]" : "[directions, batch, hidden]"));
  if (cell == Cell::Lstm && c.has_input(7) && c.input(7).shape() != Shape{D, 3 * H})
    c.fail("P must be [" + std::to_string(D) + ", " + std::to_string(3 * H) + "]");
  std::vector<int64_t> lens(static_cast<size_t>(B), S);
  if (c.has_input(4)) {
    const Value& sl = c.input(4);
    if (sl.shape() != Shape{B}) c.fail("sequence_lens must be [batch]");
    lens = sl.to_i64();
    for (int64_t l : lens)
      if (l < 0 || l > S) c.fail("a sequence_lens value is outside [0, seq_length]");
  }
  // Layout 1 runs as layout 0 on transposed copies.
  std::vector<float> xt, h0t, c0t;
  const float* x = X.data<float>();
  auto to_layout0 = [&](const Value& v, std::vector<float>& buf, int64_t d0, int64_t d1) {
    buf.resize(static_cast<size_t>(v.numel()));
    swap_first_axes(v.data<float>(), buf.data(), d0, d1, v.shape()[2]);
    return buf.data();
  };
  if (a.layout) x = to_layout0(X, xt, B, S);
  const float* h0 = c.has_input(5)
                        ? (a.layout ? to_layout0(c.input(5), h0t, B, D) : c.input(5).data<float>())
                        : nullptr;
  const float* c0 = cell == Cell::Lstm && c.has_input(6)
                        ? (a.layout ? to_layout0(c.input(6), c0t, B, D) : c.input(6).data<float>())
                        : nullptr;

  // The scratch below is sized from the inputs' dims; refuse sizes whose count overflows or
  // would not fit a 32-bit address space rather than allocate a wrapped-around size.
  int64_t count = 0;
  if (__builtin_mul_overflow(S, B, &count) || __builtin_mul_overflow(count, G * H, &count) ||
      __builtin_mul_overflow(count, int64_t{D}, &count) || count > (int64_t{1} << 29))
    c.fail("the sequence, batch and hidden sizes give more than 2^29 gate values");
  Value Y = new_value(Dtype::Float32, {S, D, B, H});  // layout 0 here; transposed at the end
  Value Yh = new_value(Dtype::Float32, {D, B, H}), Yc = new_value(Dtype::Float32, {D, B, H});
  std::fill(Y.mutable_data<float>(), Y.mutable_data<float>() + Y.numel(), 0.0f);
  const int64_t GH = G * H;
  std::vector<float> xw(static_cast<size_t>(S * B * GH)), hr(static_cast<size_t>(B * GH)),
      h(static_cast<size_t>(B * H)), cs(h.size()), rh(h.size()), hh(h.size());
  const size_t per_dir = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 2 : 3;
  const float clip = a.clip;
  auto clipped = [clip](float v) { return clip > 0 ? std::max(-clip, std::min(clip, v)) : v; };
  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = a.reverse_only || d == 1;
    const Activation& f = a.acts[d * per_dir];
    const Activation& g = a.acts[d * per_dir + (per_dir > 1 ? 1 : 0)];
    const Activation& hact = a.acts[d * per_dir + (per_dir > 2 ? 2 : 0)];
    const float* w = W.data<float>() + d * GH * I;
    const float* r = R.data<float>() + d * GH * H;
    const float* wb = c.has_input(3) ? c.input(3).data<float>() + d * 2 * GH : nullptr;
    const float* rb = wb ? wb + GH : nullptr;
    const float* p =
        cell == Cell::Lstm && c.has_input(7) ? c.input(7).data<float>() + d * 3 * H : nullptr;
    // Every step's input projection at once: xw[S * B, G * H] = X W^T + Wb (+ Rb, except for
    // GRU's hidden gate, whose Rb sits inside the reset when linear_before_reset).
    kernels::sgemm(false, true, S * B, GH, I, 1.0f, x, I, w, I, 0.0f, xw.data(), GH);
    if (wb)
      for (int64_t row = 0; row < S * B; ++row)
        for (int64_t j = 0; j < GH; ++j)
          xw[row * GH + j] += wb[j] + (cell == Cell::Gru && j >= 2 * H ? 0.0f : rb[j]);
    if (h0)
      std::memcpy(h.data(), h0 + d * B * H, h.size() * sizeof(float));
    else
      std::fill(h.begin(), h.end(), 0.0f);
    if (c0)
      std::memcpy(cs.data(), c0 + d * B * H, cs.size() * sizeof(float));
    else
      std::fill(cs.begin(), cs.end(), 0.0f);
    for (int64_t step = 0; step < S; ++step) {
      const int64_t t = reverse ? S - 1 - step : step;
      // hr[B, G * H] = h R^T (GRU: the hidden gate's part is recomputed below when the reset
      // applies before the product).
      kernels::sgemm(false, true, B, GH, H, 1.0f, h.data(), H, r, H, 0.0f, hr.data(), GH);
      if (cell == Cell::Gru && !a.linear_before_reset) {
        // rh = r * h, then hh = rh R_h^T: needs r first.
        for (int64_t n = 0; n < B; ++n)
          for (int64_t j = 0; j < H; ++j) {
            const float rg = f(clipped(xw[(t * B + n) * GH + H + j] + hr[n * GH + H + j]));
            rh[n * H + j] = rg * h[n * H + j];
          }
        kernels::sgemm(false, true, B, H, H, 1.0f, rh.data(), H, r + 2 * H * H, H, 0.0f, hh.data(),
                       H);
      }
      for (int64_t n = 0; n < B; ++n) {
        if (t >= lens[static_cast<size_t>(n)]) continue;  // past this entry's end: Y stays 0
        const float* xg = xw.data() + (t * B + n) * GH;
        const float* hg = hr.data() + n * GH;
        float* hn = h.data() + n * H;
        for (int64_t j = 0; j < H; ++j) {
          switch (cell) {
            case Cell::Rnn:
              hn[j] = f(clipped(xg[j] + hg[j]));
              break;
            case Cell::Gru: {
              const float z = f(clipped(xg[j] + hg[j]));
              float pre;
              if (a.linear_before_reset) {
                const float rg = f(clipped(xg[H + j] + hg[H + j]));
                pre = xg[2 * H + j] + rg * (hg[2 * H + j] + (rb ? rb[2 * H + j] : 0.0f));
              } else {
                pre = xg[2 * H + j] + hh[n * H + j] + (rb ? rb[2 * H + j] : 0.0f);
              }
              const float ht = g(clipped(pre));
              hn[j] = (1 - z) * ht + z * hn[j];
              break;
            }
            case Cell::Lstm: {
              float& ct = cs[n * H + j];
              const float ig = f(clipped(xg[j] + hg[j] + (p ? p[j] * ct : 0.0f)));
              const float fg =
                  a.input_forget
                      ? 1 - ig
                      : f(clipped(xg[2 * H + j] + hg[2 * H + j] + (p ? p[2 * H + j] * ct : 0.0f)));
              const float cg = g(clipped(xg[3 * H + j] + hg[3 * H + j]));
              ct = fg * ct + ig * cg;
              const float og = f(clipped(xg[H + j] + hg[H + j] + (p ? p[H + j] * ct : 0.0f)));
              hn[j] = og * hact(ct);
              break;
            }
          }
        }
        std::memcpy(Y.mutable_data<float>() + ((t * D + d) * B + n) * H, hn,
                    static_cast<size_t>(H) * sizeof(float));
      }
    }
    std::memcpy(Yh.mutable_data<float>() + d * B * H, h.data(), h.size() * sizeof(float));
    std::memcpy(Yc.mutable_data<float>() + d * B * H, cs.data(), cs.size() * sizeof(float));
  }
  if (a.layout) {
    Value y1 = new_value(Dtype::Float32, {B, S, D, H});
    // [S, D, B, H] -> [B, S, D, H]
    for (int64_t s = 0; s < S; ++s)
      for (int64_t d = 0; d < D; ++d)
        for (int64_t n = 0; n < B; ++n)
          std::memcpy(y1.mutable_data<float>() + ((n * S + s) * D + d) * H,
                      Y.data<float>() + ((s * D + d) * B + n) * H,
                      static_cast<size_t>(H) * sizeof(float));
    Y = y1;
    for (Value* v : {&Yh, &Yc}) {
      Value t = new_value(Dtype::Float32, {B, D, H});
      swap_first_axes(v->data<float>(), t.mutable_data<float>(), D, B, H);
      *v = t;
    }
  }
  c.outputs.push_back(std::move(Y));
  c.outputs.push_back(std::move(Yh));
  if (cell == Cell::Lstm) c.outputs.push_back(Yc);
}

template <Cell K>
void recurrent_op(OpCall& c) {
  std::optional<RnnAttrs> scratch;
  using A = Activation;
  const RnnAttrs& a = node_attrs(c, scratch, [&] {
    return rnn_attrs(c, K == Cell::Rnn   ? std::vector<A::Kind>{A::Tanh}
                        : K == Cell::Gru ? std::vector<A::Kind>{A::Sigmoid, A::Tanh}
                                         : std::vector<A::Kind>{A::Sigmoid, A::Tanh, A::Tanh});
  });
  recurrent(c, K, a);
}

}  // namespace

void register_rnn_ops() {
  register_builtin("onnx.RNN", recurrent_op<Cell::Rnn>);
  register_builtin("onnx.GRU", recurrent_op<Cell::Gru>);
  register_builtin("onnx.LSTM", recurrent_op<Cell::Lstm>);
}

}  // namespace fx::exec
