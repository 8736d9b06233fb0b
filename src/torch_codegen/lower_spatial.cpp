// Lowering handlers of the selection, sampling and detection ops: Compress, Unique,
// ReverseSequence, GridSample, MaxUnpool, RoiAlign (fixed sampling_ratio), TfIdfVectorizer
// (integer pool), Upsample, and the ops that have no torch form and are named as not lowerable
// with the reason (NonMaxSuppression, MelWeightMatrix). Resize modes torch's interpolate lacks are
// written out here too (resize_explicit).
#include <cmath>

#include "fx/onnx.h"
#include "torch_codegen/lower_ops.h"

namespace fx::torch_codegen {

namespace {

using Kind = LVal::Kind;

Argument lit(int64_t v) { return static_cast<long long>(v); }

// Compress(x, condition[, axis]): index_select of the positions where condition holds (no axis:
// of the flattened input).
void compress(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0), cond = L.in(n, 1);
  Node* t = L.as_tensor(x);
  int64_t axis = 0;
  if (L.has_attr(n, "axis")) {
    axis = L.axis(n, L.attr_int(n, "axis", 0), L.rank(x));
  } else {
    t = L.method("flatten", {t});
  }
  Node* c = L.as_tensor(cond);
  if (L.dtype(cond) != Dtype::Bool) c = L.method("bool", {c});
  Node* idx = L.method("flatten", {L.call("torch.nonzero", {c})});
  L.set(n, L.tensor(L.call("torch.index_select", {t, lit(axis), idx}), n));
}

// Unique: torch.unique (sorted) for Y, inverse and counts; the first occurrences by a scatter
// of positions with amin; sorted = 0 reorders all four by first occurrence.
void unique(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  Node* t = L.as_tensor(x);
  int64_t dim = 0;
  Kwargs kw{{"sorted", true}, {"return_inverse", true}, {"return_counts", true}};
  if (L.has_attr(n, "axis")) {
    dim = L.axis(n, L.attr_int(n, "axis", 0), L.rank(x));
    kw.set("dim", lit(dim));
  } else {
    t = L.method("flatten", {t});
  }
  Node* r = L.call("torch.unique", {t}, std::move(kw));
  Node* y = L.call("operator.getitem", {r, 0LL});
  Node* inv = L.call("operator.getitem", {r, 1LL});
  Node* counts = L.call("operator.getitem", {r, 2LL});
  Node* len = L.method("size", {t, lit(dim)});
  Node* positions = L.call("torch.arange", {len});
  Node* first = L.method("scatter_reduce", {L.call("torch.full_like", {counts, len}), 0LL, inv,
                                            positions, std::string("amin")});
  if (!L.attr_int(n, "sorted", 1)) {
    Node* perm = L.call("torch.argsort", {first});
    y = L.call("torch.index_select", {y, lit(dim), perm});
    first = L.call("torch.index_select", {first, 0LL, perm});
    counts = L.call("torch.index_select", {counts, 0LL, perm});
    inv = L.call("torch.index_select", {L.call("torch.argsort", {perm}), 0LL, inv});
  }
  std::vector<LVal> outs;
  for (Node* v : {y, first, inv, counts}) {
    LVal o = L.tensor(v, n);
    o.shape_of = nullptr;
    outs.push_back(o);
  }
  L.set(n, outs);
}

// ReverseSequence: a gather along the time axis of t < len ? len - 1 - t : t.
void reverse_sequence(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const int64_t time = L.attr_int(n, "time_axis", 0), batch = L.attr_int(n, "batch_axis", 1);
  if (!((time == 0 && batch == 1) || (time == 1 && batch == 0)))
    L.unsupported(n, "batch_axis and time_axis other than 0 and 1");
  Node* t = L.call("torch.arange", {L.size(x, time).arg()});
  t = L.method("unsqueeze", {t, lit(time == 0 ? 1 : 0)});  // [T, 1] or [1, T]
  Node* len = L.method("unsqueeze", {L.as_tensor(L.in(n, 1)), lit(time == 0 ? 0 : 1)});
  Node* src =
      L.call("torch.where", {L.call("operator.lt", {t, len}),
                             L.call("operator.sub", {L.call("operator.sub", {len, 1LL}), t}), t});
  const int64_t r = L.rank(x);
  std::vector<int64_t> view_shape = {-1};
  for (int64_t d = 1; d < r; ++d) view_shape.push_back(1);
  Node* xt = L.as_tensor(x);
  // [T, B] (or [B, T]) then trailing 1s, expanded over the feature dims.
  for (int64_t d = 2; d < r; ++d) src = L.method("unsqueeze", {src, -1LL});
  src = L.method("expand_as", {src, xt});
  L.set(n, L.tensor(L.call("torch.gather", {xt, lit(time), src}), n));
}

void grid_sample(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  if (L.rank(x) != 4) L.unsupported(n, "an input that is not 4-D");
  Kwargs kw{{"mode", L.attr_string(n, "mode", "bilinear")},
            {"padding_mode", L.attr_string(n, "padding_mode", "zeros")},
            {"align_corners", L.attr_int(n, "align_corners", 0) != 0}};
  L.set(n, L.tensor(L.call("torch.nn.functional.grid_sample",
                           {L.as_tensor(x), L.as_tensor(L.in(n, 1))}, std::move(kw)),
                    n));
}

// MaxUnpool: the values scattered to their flattened (N * C * spatial) indices in zeros.
void max_unpool(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const auto s = L.shape(x);
  std::vector<int64_t> os;
  if (L.in(n, 2).kind != Kind::None) {
    os = L.static_ints(n, L.in(n, 2), "output_shape");
  } else {
    const size_t sp = s.size() - 2;
    const std::vector<int64_t> k = L.attr_ints(n, "kernel_shape");
    const std::vector<int64_t> st = L.attr_ints(n, "strides", std::vector<int64_t>(sp, 1));
    const std::vector<int64_t> pads = L.attr_ints(n, "pads", std::vector<int64_t>(2 * sp, 0));
    if (k.size() != sp || st.size() != sp || pads.size() != 2 * sp)
      L.unsupported(n, "kernel_shape/strides/pads of the wrong length");
    for (size_t d = 0; d < s.size(); ++d)
      if (!s[d]) L.unsupported(n, "an input whose shape changes");
    os = {*s[0], *s[1]};
    for (size_t d = 0; d < sp; ++d)
      os.push_back((*s[2 + d] - 1) * st[d] + k[d] - pads[d] - pads[d + sp]);
  }
  int64_t total = 1;
  for (int64_t v : os) total *= v;
  Node* xt = L.as_tensor(x);
  Node* zeros = L.method("new_zeros", {xt, int_list({total})});
  Node* idx = L.method("flatten", {L.as_tensor(L.in(n, 1))});
  Node* y = L.method("scatter", {zeros, 0LL, idx, L.method("flatten", {xt})});
  L.set(n, L.tensor(L.method("reshape", {y, int_list(os)}), n));
}

void not_lowerable(Lowerer& L, const Node& n, const char* why) { L.unsupported(n, why); }
void nms(Lowerer& L, const Node& n) {
  not_lowerable(L, n,
                "NonMaxSuppression is a data-dependent greedy loop with no torch form "
                "(torchvision.ops.nms is not used)");
}
// RoiAlign with a fixed sampling_ratio, as onnxruntime computes it: per roi a grid of
// (output_height * ratio) x (output_width * ratio) sample points, each bilinear in the roi's
// image (points beyond one pixel outside count 0), averaged (or, mode max, the largest weighted
// corner) per output cell. An adaptive ratio (0) makes the grid depend on each roi's size.
void roi_align(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const int64_t g = L.attr_int(n, "sampling_ratio", 0);
  if (g <= 0)
    not_lowerable(L, n,
                  "RoiAlign with sampling_ratio = 0 (adaptive: the sampling grid depends on "
                  "each roi's size) has no torch form without torchvision");
  const auto xs = L.shape(x);
  if (xs.size() != 4 || !xs[2] || !xs[3])
    L.unsupported(n, "an input that is not 4-D of static H, W");
  const int64_t H = *xs[2], W = *xs[3];
  const int64_t PH = L.attr_int(n, "output_height", 1), PW = L.attr_int(n, "output_width", 1);
  const double scale = float32_value(L.attr_float(n, "spatial_scale", 1.0));
  const std::string mode = L.attr_string(n, "mode", "avg");
  const std::string ctm = L.attr_string(n, "coordinate_transformation_mode",
                                        L.opset() >= 16 ? "half_pixel" : "output_half_pixel");
  if (mode != "avg" && mode != "max") L.unsupported(n, "mode " + mode);
  const bool half = ctm == "half_pixel";
  Node* rois = L.as_tensor(L.in(n, 1));
  auto col = [&](int64_t k) {  // rois[:, k] * scale - offset
    Node* v = L.call("operator.mul", {L.method("select", {rois, 1LL, lit(k)}), scale});
    return half ? L.call("operator.sub", {v, 0.5}) : v;
  };
  Node* x1 = col(0);
  Node* y1 = col(1);
  Node* rw = L.call("operator.sub", {col(2), x1});
  Node* rh = L.call("operator.sub", {col(3), y1});
  if (!half) {
    rw = L.method("clamp", {rw}, {{"min", 1.0}});
    rh = L.method("clamp", {rh}, {{"min", 1.0}});
  }
  // Sample positions in units of a bin: p + (i + 0.5) / g.
  auto grid = [&](int64_t bins) {
    Argument::Items f;
    for (int64_t p = 0; p < bins; ++p)
      for (int64_t i = 0; i < g; ++i)
        f.emplace_back(static_cast<double>(p) +
                       (static_cast<double>(i) + 0.5) / static_cast<double>(g));
    return L.call("torch.tensor", {Argument::list(std::move(f))}, {{"dtype", L.dtype(x)}});
  };
  // Per axis: [R, S] coordinates -> (low index, high index, low weight, high weight, valid).
  struct Axis {
    Node *lo, *hi, *wlo, *whi, *valid;
  };
  auto axis = [&](Node* start, Node* len, int64_t bins, int64_t size) {
    Node* bin =
        L.method("unsqueeze", {L.call("operator.truediv", {len, static_cast<double>(bins)}), 1LL});
    Node* c = L.call("operator.add", {L.method("unsqueeze", {start, 1LL}),
                                      L.call("operator.mul", {grid(bins), bin})});
    Axis a;
    a.valid = L.call("torch.logical_and", {L.call("operator.ge", {c, -1.0}),
                                           L.call("operator.le", {c, static_cast<double>(size)})});
    c = L.method("clamp", {c}, {{"min", 0.0}});
    Node* low = L.method("to", {L.call("torch.floor", {c}), Dtype::Int64});
    Node* edge = L.call("operator.ge", {low, lit(size - 1)});
    low = L.method("clamp", {low}, {{"max", lit(size - 1)}});
    a.lo = low;
    a.hi = L.call("torch.where", {edge, low, L.call("operator.add", {low, 1LL})});
    c = L.call("torch.where", {edge, L.method("to", {low, L.dtype(x)}), c});
    Node* frac = L.call("operator.sub", {c, L.method("to", {low, L.dtype(x)})});
    a.whi = frac;
    a.wlo = L.call("operator.sub", {1.0, frac});
    return a;
  };
  const Axis ay = axis(y1, rh, PH, H), ax = axis(x1, rw, PW, W);
  Node* bi = L.as_tensor(L.in(n, 2));
  Node* feats = L.call("torch.index_select", {L.as_tensor(x), 0LL, bi});  // [R, C, H, W]
  Node* flat = L.method("flatten", {feats, 2LL});                         // [R, C, H * W]
  auto corner = [&](Node* yi, Node* xi) {                                 // [R, C, A, B]
    Node* idx =
        L.call("operator.add", {L.call("operator.mul", {L.method("unsqueeze", {yi, 2LL}), lit(W)}),
                                L.method("unsqueeze", {xi, 1LL})});  // [R, A, B]
    Node* e = L.method("expand", {L.method("unsqueeze", {L.method("flatten", {idx, 1LL}), 1LL}),
                                  -1LL, L.method("size", {flat, 1LL}), -1LL});
    Node* v = L.call("torch.gather", {flat, 2LL, e});
    return L.method("reshape", {v, L.method("size", {feats, 0LL}), L.method("size", {feats, 1LL}),
                                lit(PH * g), lit(PW * g)});
  };
  auto weight = [&](Node* wy, Node* wx) {  // [R, 1, A, B]
    return L.method("unsqueeze", {L.call("operator.mul", {L.method("unsqueeze", {wy, 2LL}),
                                                          L.method("unsqueeze", {wx, 1LL})}),
                                  1LL});
  };
  Node* terms[4] = {L.call("operator.mul", {weight(ay.wlo, ax.wlo), corner(ay.lo, ax.lo)}),
                    L.call("operator.mul", {weight(ay.wlo, ax.whi), corner(ay.lo, ax.hi)}),
                    L.call("operator.mul", {weight(ay.whi, ax.wlo), corner(ay.hi, ax.lo)}),
                    L.call("operator.mul", {weight(ay.whi, ax.whi), corner(ay.hi, ax.hi)})};
  Node* v = terms[0];
  for (int i = 1; i < 4; ++i)
    v = mode == "avg" ? L.call("operator.add", {v, terms[i]})
                      : L.call("torch.maximum", {v, terms[i]});
  Node* valid =
      L.method("unsqueeze", {L.call("torch.logical_and", {L.method("unsqueeze", {ay.valid, 2LL}),
                                                          L.method("unsqueeze", {ax.valid, 1LL})}),
                             1LL});
  v = L.call("torch.where", {valid, v, L.call("torch.zeros_like", {v})});
  v = L.method("reshape", {v, L.method("size", {v, 0LL}), L.method("size", {v, 1LL}), lit(PH),
                           lit(g), lit(PW), lit(g)});
  v = mode == "avg" ? L.method("mean", {v, int_list({3, 5})})
                    : L.call("torch.amax", {v, int_list({3, 5})});
  L.set(n, L.tensor(v, n));
}
// TfIdfVectorizer with an integer pool: per n-gram length and skip, the tokens at i, i + (skip
// + 1), ... compared with every pooled n-gram of that length at once ([B, positions, pool]),
// summed over positions (a unigram counts once per position), then placed at ngram_indexes and
// weighted per mode. The sequence length must be static.
void tfidf(Lowerer& L, const Node& n) {
  if (L.has_attr(n, "pool_strings")) not_lowerable(L, n, "TfIdfVectorizer with pool_strings");
  LVal x = L.in(n, 0);
  const auto xs = L.shape(x);
  if ((xs.size() != 1 && xs.size() != 2) || !xs.back())
    L.unsupported(n, "an input that is not 1-D or 2-D of static length");
  const int64_t len = *xs.back();
  const int64_t min_n = L.attr_int(n, "min_gram_length", 1),
                max_n = L.attr_int(n, "max_gram_length", 1);
  const int64_t max_skip = L.attr_int(n, "max_skip_count", 0);
  const std::string mode = L.attr_string(n, "mode", "TF");
  const std::vector<int64_t> counts = L.attr_ints(n, "ngram_counts");
  const std::vector<int64_t> indexes = L.attr_ints(n, "ngram_indexes");
  const std::vector<int64_t> pool = L.attr_ints(n, "pool_int64s");
  std::vector<double> weights;
  if (const Argument* w = n.kwargs().find("weights"); w && w->is_sequence())
    for (const Argument& e : w->elements()) weights.push_back(e.to_double());
  if (indexes.empty()) L.unsupported(n, "empty ngram_indexes");
  Node* t = L.method("to", {L.as_tensor(x), Dtype::Int64});
  if (xs.size() == 1) t = L.method("unsqueeze", {t, 0LL});  // [B, L]
  const SymInt batch = xs.size() == 2 ? L.size(x, 0) : SymInt{1, {}};
  std::vector<Argument> per_level;  // [B, pool n-grams of that length] in pool order
  for (size_t g = 0; g < counts.size(); ++g) {
    const int64_t gn = static_cast<int64_t>(g) + 1;
    const int64_t begin = counts[g];
    const int64_t end = g + 1 < counts.size() ? counts[g + 1] : static_cast<int64_t>(pool.size());
    if (begin < 0 || end > static_cast<int64_t>(pool.size()) || begin > end || (end - begin) % gn)
      L.unsupported(n, "ngram_counts that do not split pool_int64s into n-grams");
    const int64_t k = (end - begin) / gn;
    if (k == 0) continue;
    Node* level = nullptr;
    if (gn >= min_n && gn <= max_n) {
      for (int64_t skip = 0; skip <= (gn == 1 ? 0 : max_skip); ++skip) {
        const int64_t positions = len - (gn - 1) * (skip + 1);
        if (positions <= 0) break;
        Node* match = nullptr;
        for (int64_t j = 0; j < gn; ++j) {
          std::vector<int64_t> tok;
          for (int64_t q = 0; q < k; ++q) tok.push_back(pool[begin + q * gn + j]);
          Node* window = L.method("narrow", {t, 1LL, lit(j * (skip + 1)), lit(positions)});
          Node* eq = L.call("operator.eq", {L.method("unsqueeze", {window, -1LL}),
                                            L.call("torch.tensor", {int_list(tok)})});
          match = match ? L.call("operator.and_", {match, eq}) : eq;
        }
        Node* c = L.method("sum", {match, 1LL});  // [B, k]
        level = level ? L.call("operator.add", {level, c}) : c;
      }
    }
    if (!level) level = L.method("new_zeros", {t, Lowerer::list_arg({batch, SymInt{k, {}}})});
    per_level.push_back(level);
  }
  if (per_level.empty()) L.unsupported(n, "an empty pool");
  Node* tf = L.method(
      "to", {L.call("torch.cat",
                    {Argument::list(Argument::Items(per_level.begin(), per_level.end())), 1LL}),
             Dtype::Float32});
  if (!weights.empty() || mode != "TF") {
    Argument::Items w;
    for (size_t i = 0; i < indexes.size(); ++i) w.emplace_back(weights.empty() ? 1.0 : weights[i]);
    Node* wt = L.call("torch.tensor", {Argument::list(std::move(w))}, {{"dtype", Dtype::Float32}});
    if (mode == "IDF") {
      tf = L.call("operator.mul",
                  {L.method("to", {L.call("operator.gt", {tf, 0.0}), Dtype::Float32}), wt});
    } else if (mode == "TFIDF") {
      tf = L.call("operator.mul", {tf, wt});
    }
  }
  int64_t width = 0;
  for (int64_t i : indexes) width = std::max(width, i + 1);
  Node* out = L.method("new_zeros", {tf, Lowerer::list_arg({batch, SymInt{width, {}}})});
  out = L.method("index_copy", {out, 1LL, L.call("torch.tensor", {int_list(indexes)}), tf});
  if (xs.size() == 1) out = L.method("squeeze", {out, 0LL});
  L.set(n, L.tensor(out, n));
}
// MelWeightMatrix as the executor computes it (ONNX's reference): the band edges in float32 mel
// units, the bins in float64, then each column's rising and falling ramps as where() over the
// [spectrogram bins, mel bins] grid.
void mel(Lowerer& L, const Node& n) {
  const int64_t dtype = L.attr_int(n, "output_datatype", 1);
  if (dtype != 1 && dtype != 11) L.unsupported(n, "output_datatype other than float and double");
  auto item = [&](size_t i) { return L.method("item", {L.as_tensor(L.in(n, i))}); };
  Node* bins = L.call("builtins.int", {item(0)});
  Node* dft = L.call("builtins.int", {item(1)});
  Node* rate = item(2);
  auto mel_of = [&](size_t i) {  // 2595 * log10(1 + hz / 700) in float32
    Node* hz = L.method("to", {L.as_tensor(L.in(n, i)), Dtype::Float32});
    return L.call("operator.mul",
                  {L.call("torch.log10",
                          {L.call("operator.add", {L.call("operator.truediv", {hz, 700.0}), 1.0})}),
                   2595.0});
  };
  Node* lo = mel_of(3);
  Node* step =
      L.call("operator.truediv", {L.call("operator.sub", {mel_of(4), lo}),
                                  L.call("builtins.float", {L.call("operator.add", {bins, 2LL})})});
  Node* i =
      L.call("torch.arange", {L.call("operator.add", {bins, 2LL})}, {{"dtype", Dtype::Float64}});
  Node* m =
      L.call("operator.add", {L.call("operator.mul", {i, L.method("to", {step, Dtype::Float64})}),
                              L.method("to", {lo, Dtype::Float64})});
  Node* hz =
      L.call("operator.mul",
             {L.call("operator.sub",
                     {L.call("torch.pow", {10.0, L.call("operator.truediv", {m, 2595.0})}), 1.0}),
              700.0});
  Node* f =
      L.call("torch.floor",
             {L.call("operator.truediv",
                     {L.call("operator.mul", {hz, L.call("operator.add", {dft, 1LL})}), rate})});
  Node* left = L.method("narrow", {f, 0LL, 0LL, bins});
  Node* mid = L.method("narrow", {f, 0LL, 1LL, bins});
  Node* right = L.method("narrow", {f, 0LL, 2LL, bins});
  Node* spec = L.call("operator.add", {L.call("operator.floordiv", {dft, 2LL}), 1LL});
  Node* j =
      L.method("unsqueeze", {L.call("torch.arange", {spec}, {{"dtype", Dtype::Float64}}), 1LL});
  Node* zero = L.call("torch.zeros_like", {L.call("operator.add", {j, left})});
  Node* rising = L.call(
      "torch.where",
      {L.call("operator.and_", {L.call("operator.ge", {j, left}), L.call("operator.le", {j, mid})}),
       L.call("operator.truediv",
              {L.call("operator.sub", {j, left}), L.call("operator.sub", {mid, left})}),
       zero});
  Node* at_mid = L.method(
      "to", {L.call("operator.eq", {j, L.call("operator.add", {zero, mid})}), Dtype::Float64});
  Node* w = L.call("torch.where", {L.call("operator.eq", {mid, left}), at_mid, rising});
  Node* falling =
      L.call("operator.and_", {L.call("operator.and_", {L.call("operator.gt", {right, mid}),
                                                        L.call("operator.ge", {j, mid})}),
                               L.call("operator.lt", {j, right})});
  w = L.call("torch.where", {falling,
                             L.call("operator.truediv", {L.call("operator.sub", {right, j}),
                                                         L.call("operator.sub", {right, mid})}),
                             w});
  L.set(n, L.tensor(L.method("to", {w, dtype == 1 ? Dtype::Float32 : Dtype::Float64}), n));
}

// ---- Resize written out: one 1-D interpolation per resized axis, last axis first, as the
// executor and ONNX's reference do. Every mode and coordinate mode; scales/sizes may be runtime
// tensors.

struct ResizeAttrs {
  std::string mode, ctm, nearest;
  double a = -0.75, extrapolation = 0;
  bool exclude = false;
};

Node* f64(Lowerer& L, Node* t) { return L.method("to", {t, Dtype::Float64}); }
Node* op(Lowerer& L, const char* f, Argument a, Argument b) { return L.call(f, {a, b}); }

// The taps (index, weight) of axis d as tensors over the output positions, then the pass.
Node* resize_axis(Lowerer& L, const Node& n, const ResizeAttrs& r, Node* x, int64_t d, Node* in_len,
                  Node* out_len, Node* scale, Node* roi, int64_t rank) {
  Node* o = f64(L, L.call("torch.arange", {out_len}));
  Node* in_f = L.call("builtins.float", {in_len});
  Node* out_f = L.call("builtins.float", {out_len});
  Node* xs = nullptr;
  Node* outside = nullptr;
  if (r.ctm == "asymmetric") {
    xs = op(L, "operator.truediv", o, scale);
  } else if (r.ctm == "half_pixel" || r.ctm == "pytorch_half_pixel") {
    xs =
        op(L, "operator.sub", op(L, "operator.truediv", op(L, "operator.add", o, 0.5), scale), 0.5);
    if (r.ctm == "pytorch_half_pixel")
      xs = L.call("torch.where", {op(L, "operator.gt", L.call("torch.full_like", {o, out_f}), 1.0),
                                  xs, L.call("torch.zeros_like", {o})});
  } else if (r.ctm == "align_corners") {
    // o * (in - 1) / max(out - 1, 1): position 0 when out = 1.
    Node* den =
        L.method("clamp", {op(L, "operator.sub", L.call("torch.full_like", {o, out_f}), 1.0)},
                 {{"min", 1.0}});
    xs = op(L, "operator.truediv", op(L, "operator.mul", o, op(L, "operator.sub", in_f, 1.0)), den);
  } else if (r.ctm == "tf_crop_and_resize") {
    Node* lo = L.method("to", {L.call("operator.getitem", {roi, lit(d)}), Dtype::Float64});
    Node* hi = L.method("to", {L.call("operator.getitem", {roi, lit(d + rank)}), Dtype::Float64});
    Node* span =
        op(L, "operator.mul", op(L, "operator.sub", hi, lo), op(L, "operator.sub", in_f, 1.0));
    Node* den =
        L.method("clamp", {op(L, "operator.sub", L.call("torch.full_like", {o, out_f}), 1.0)},
                 {{"min", 1.0}});
    Node* many = op(L, "operator.truediv", op(L, "operator.mul", o, span), den);
    Node* one = L.call("torch.full_like", {o, 0.0});
    one = op(L, "operator.add", one, op(L, "operator.truediv", span, 2.0));
    xs = L.call("torch.where",
                {op(L, "operator.gt", L.call("torch.full_like", {o, out_f}), 1.0), many, one});
    xs = op(L, "operator.add", xs, op(L, "operator.mul", lo, op(L, "operator.sub", in_f, 1.0)));
    outside =
        L.call("torch.logical_or", {op(L, "operator.lt", xs, 0.0),
                                    op(L, "operator.gt", xs, op(L, "operator.sub", in_f, 1.0))});
  } else {
    L.unsupported(n, "coordinate_transformation_mode " + r.ctm);
  }
  Node* last = op(L, "operator.sub", in_len, 1LL);
  auto clamp_idx = [&](Node* i) {
    return L.method("clamp", {L.method("to", {i, Dtype::Int64})}, {{"min", 0LL}, {"max", last}});
  };
  std::vector<std::pair<Node*, Node*>> taps;  // (index [O], weight [O] or null = 1)
  std::vector<Node*> raw_idx;
  if (r.mode == "nearest") {
    Node* v;
    if (r.nearest == "floor") {
      v = L.call("torch.floor", {xs});
    } else if (r.nearest == "ceil") {
      v = L.call("torch.ceil", {xs});
    } else if (r.nearest == "round_prefer_ceil") {
      v = L.call("torch.floor", {op(L, "operator.add", xs, 0.5)});
    } else {  // round_prefer_floor
      v = L.call("torch.ceil", {op(L, "operator.sub", xs, 0.5)});
    }
    taps.push_back({clamp_idx(v), nullptr});
  } else {
    // The fraction in (0, 1]: an integer position takes its left neighbours (as the reference).
    Node* fl = L.call("torch.floor", {xs});
    Node* frac = op(L, "operator.sub", xs, fl);
    Node* whole = op(L, "operator.eq", frac, 0.0);
    Node* base = L.call("torch.where", {whole, op(L, "operator.sub", fl, 1.0), fl});
    Node* t = L.call("torch.where", {whole, L.call("torch.ones_like", {frac}), frac});
    std::vector<std::pair<int64_t, Node*>> parts;  // (offset from base, weight)
    if (r.mode == "linear") {
      parts = {{0, op(L, "operator.sub", 1.0, t)}, {1, t}};
    } else if (r.mode == "cubic") {
      const double A = r.a;
      auto near = [&](Node* s) {  // ((A + 2) s - (A + 3)) s^2 + 1
        Node* p = op(L, "operator.sub", op(L, "operator.mul", s, A + 2), A + 3);
        return op(L, "operator.add", op(L, "operator.mul", op(L, "operator.mul", p, s), s), 1.0);
      };
      auto far = [&](Node* s) {  // ((A s - 5A) s + 8A) s - 4A
        Node* p = op(L, "operator.sub", op(L, "operator.mul", s, A), 5 * A);
        p = op(L, "operator.add", op(L, "operator.mul", p, s), 8 * A);
        return op(L, "operator.sub", op(L, "operator.mul", p, s), 4 * A);
      };
      parts = {{-1, far(op(L, "operator.add", t, 1.0))},
               {0, near(t)},
               {1, near(op(L, "operator.sub", 1.0, t))},
               {2, far(op(L, "operator.sub", 2.0, t))}};
    } else {
      L.unsupported(n, "mode " + r.mode);
    }
    Node* sum = nullptr;
    for (auto& [off, w] : parts) {
      Node* i = op(L, "operator.add", base, static_cast<double>(off));
      if (r.exclude) {
        Node* out_of =
            L.call("torch.logical_or", {op(L, "operator.lt", i, 0.0),
                                        op(L, "operator.gt", i, op(L, "operator.sub", in_f, 1.0))});
        w = L.call("torch.where", {out_of, L.call("torch.zeros_like", {w}), w});
        sum = sum ? op(L, "operator.add", sum, w) : w;
      }
      taps.push_back({clamp_idx(i), w});
    }
    if (r.exclude)
      for (auto& tp : taps) tp.second = op(L, "operator.truediv", tp.second, sum);
  }
  // Weights broadcast along axis d: shape [O, 1, ..., 1].
  auto along = [&](Node* w) {
    for (int64_t k = d + 1; k < rank; ++k) w = L.method("unsqueeze", {w, -1LL});
    return w;
  };
  Node* y = nullptr;
  for (auto& [i, w] : taps) {
    Node* g = L.call("torch.index_select", {x, lit(d), i});
    if (w) g = op(L, "operator.mul", g, along(w));
    y = y ? op(L, "operator.add", y, g) : g;
  }
  if (outside)
    y = L.call("torch.where", {along(outside), L.call("torch.full_like", {y, r.extrapolation}), y});
  return y;
}

}  // namespace

void resize_explicit(Lowerer& L, const Node& n, bool upsample) {
  LVal x = L.in(n, 0);
  const int64_t rank = L.rank(x);
  if (!is_float(L.dtype(x))) L.unsupported(n, "a Resize input that is not floating point");
  ResizeAttrs r;
  r.mode = L.attr_string(n, "mode", "nearest");
  if (upsample || L.opset() < 11) {
    if (r.mode == "bilinear" || r.mode == "trilinear") r.mode = "linear";
    r.ctm = "asymmetric";
    r.nearest = "floor";
  } else {
    r.ctm = L.attr_string(n, "coordinate_transformation_mode", "half_pixel");
    r.nearest = L.attr_string(n, "nearest_mode", "round_prefer_floor");
    r.a = L.attr_float(n, "cubic_coeff_a", -0.75);
    r.exclude = L.attr_int(n, "exclude_outside", 0) != 0;
    r.extrapolation = L.attr_float(n, "extrapolation_value", 0.0);
  }
  if (L.attr_int(n, "antialias", 0)) L.unsupported(n, "antialias = 1");
  if (L.has_attr(n, "axes")) L.unsupported(n, "the axes attribute");
  LVal scales, sizes, roi;
  std::vector<double> attr_scales;
  if (upsample && L.in(n, 1).kind == Kind::None) {
    const Argument* a = n.kwargs().find("scales");
    if (!a || !a->is_sequence()) L.unsupported(n, "Upsample without scales");
    for (const Argument& e : a->elements()) attr_scales.push_back(e.to_double());
  } else if (upsample || L.opset() < 11) {
    scales = L.in(n, 1);
  } else {
    roi = L.in(n, 1);
    scales = L.in(n, 2);
    sizes = L.in(n, 3);
  }
  const bool have_sizes =
      sizes.kind != Kind::None && L.shape(sizes).size() == 1 && L.shape(sizes)[0].value_or(0) > 0;
  Node* t = L.as_tensor(x);
  const bool is32 = L.dtype(x) == Dtype::Float32;
  if (is32) t = f64(L, t);  // weights and sums in float64, as the executor
  Node* sz = have_sizes ? L.as_tensor(sizes) : nullptr;
  Node* sc = !have_sizes && attr_scales.empty() ? f64(L, L.as_tensor(scales)) : nullptr;
  Node* roi_t =
      r.ctm == "tf_crop_and_resize" && roi.kind != Kind::None ? L.as_tensor(roi) : nullptr;
  if (r.ctm == "tf_crop_and_resize" && !roi_t) L.unsupported(n, "tf_crop_and_resize without roi");
  for (int64_t d = rank - 1; d >= 0; --d) {
    Node* in_len = L.method("size", {t, lit(d)});
    Node* out_len;
    Node* scale;
    if (sz) {
      out_len = L.method("item", {L.call("operator.getitem", {sz, lit(d)})});
      scale = op(L, "operator.truediv", L.call("builtins.float", {out_len}),
                 L.call("builtins.float", {in_len}));
    } else if (sc) {
      scale = L.method("item", {L.call("operator.getitem", {sc, lit(d)})});
      out_len =
          L.call("builtins.int", {L.call("math.floor", {op(L, "operator.mul", in_len, scale)})});
    } else {
      const double s = attr_scales.at(static_cast<size_t>(d));
      if (s == 1.0) continue;
      scale = nullptr;
      out_len = L.call("builtins.int", {L.call("math.floor", {op(L, "operator.mul", in_len, s)})});
      scale = L.call("builtins.float", {Argument(s)});
    }
    t = resize_axis(L, n, r, t, d, in_len, out_len, scale, roi_t, rank);
  }
  if (is32) t = L.method("to", {t, Dtype::Float32});
  L.set(n, L.tensor(t, n));
}

namespace {
void upsample(Lowerer& L, const Node& n) { resize_explicit(L, n, true); }
}  // namespace

void add_spatial_handlers(std::vector<HandlerEntry>& table) {
  table.insert(table.end(), {
                                {"Compress", 9, compress},
                                {"Unique", 11, unique},
                                {"ReverseSequence", 10, reverse_sequence},
                                {"GridSample", 16, grid_sample},
                                {"MaxUnpool", 9, max_unpool},
                                {"Upsample", 7, upsample},
                                {"NonMaxSuppression", 10, nms},
                                {"RoiAlign", 10, roi_align},
                                {"TfIdfVectorizer", 9, tfidf},
                                {"MelWeightMatrix", 17, mel},
                            });
}

}  // namespace fx::torch_codegen
