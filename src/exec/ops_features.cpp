// Feature-extraction ONNX ops: TfIdfVectorizer (integer tokens), MelWeightMatrix.
#include <algorithm>
#include <cmath>
#include <map>

#include "exec/ops.h"

namespace fx::exec {

namespace {

std::vector<double> attr_floats(const OpCall& c, const char* name) {
  std::vector<double> out;
  const Argument* a = c.attrs.find(name);
  if (!a) return out;
  if (!a->is_sequence()) c.fail(std::string("attribute '") + name + "' must be a list of floats");
  for (const Argument& e : a->elements()) out.push_back(e.to_double());
  return out;
}

// Counts the pool's n-grams in each row (n in [min_gram_length, max_gram_length], the tokens of
// one n-gram max_skip_count or fewer apart; a unigram counts once per position), as onnxruntime.
void tfidf_vectorizer(OpCall& c) {
  const Value& x = c.input(0);
  if (x.dtype() == Dtype::String) c.unsupported("TfIdfVectorizer on strings");
  if (c.has_attr("pool_strings")) c.unsupported("TfIdfVectorizer with pool_strings");
  const int64_t min_n = c.attr_int("min_gram_length", 1), max_n = c.attr_int("max_gram_length", 1);
  const int64_t max_skip = c.attr_int("max_skip_count", 0);
  const std::string mode = c.attr_string("mode", "TF");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") c.fail("mode must be TF, IDF or TFIDF");
  if (min_n < 1 || max_n < min_n || max_skip < 0)
    c.fail("needs 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0");
  const std::vector<int64_t> counts = c.attr_ints("ngram_counts");
  const std::vector<int64_t> indexes = c.attr_ints("ngram_indexes");
  const std::vector<int64_t> pool = c.attr_ints("pool_int64s");
  const std::vector<double> weights = attr_floats(c, "weights");
  if (indexes.empty()) c.fail("ngram_indexes is empty");
  if (!weights.empty() && weights.size() != indexes.size())
    c.fail("weights must have one entry per n-gram");
  // The pool's n-grams (level g + 1 starts at counts[g]) -> their position in ngram_indexes.
  std::map<std::vector<int64_t>, size_t> ids;
  size_t id = 0;
  for (size_t g = 0; g < counts.size(); ++g) {
    const int64_t n = static_cast<int64_t>(g) + 1;
    const int64_t begin = counts[g];
    const int64_t end = g + 1 < counts.size() ? counts[g + 1] : static_cast<int64_t>(pool.size());
    if (begin < 0 || end > static_cast<int64_t>(pool.size()) || begin > end || (end - begin) % n)
      c.fail("ngram_counts does not split pool_int64s into n-grams");
    for (int64_t p = begin; p < end; p += n)
      ids.emplace(std::vector<int64_t>(pool.begin() + p, pool.begin() + p + n), id++);
  }
  if (id != indexes.size()) c.fail("ngram_indexes must have one entry per pooled n-gram");
  const int64_t width = *std::max_element(indexes.begin(), indexes.end()) + 1;
  const std::vector<int64_t> tok = x.to_i64();
  const bool batched = x.shape().size() == 2;
  if (x.shape().size() != 1 && !batched) c.fail("the input must be 1-D or 2-D");
  const int64_t rows = batched ? x.shape()[0] : 1, len = x.shape().back();
  const std::string what = "the output";
  std::vector<float> out(
      static_cast<size_t>(checked_nbytes(Dtype::Float32, {rows, width}, what) / 4));
  std::vector<int64_t> gram;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> tf(indexes.size(), 0.0);
    const int64_t* t = tok.data() + r * len;
    for (int64_t start = 0; start < len; ++start)
      for (int64_t skip = 0; skip <= max_skip; ++skip) {
        gram.clear();
        for (int64_t n = 1; n <= max_n; ++n) {
          const int64_t at = start + (n - 1) * (skip + 1);
          if (at >= len) break;
          gram.push_back(t[at]);
          if (n < min_n || (n == 1 && skip > 0)) continue;
          auto it = ids.find(gram);
          if (it != ids.end()) tf[it->second] += 1;
        }
      }
    for (size_t i = 0; i < indexes.size(); ++i) {
      const double w = weights.empty() ? 1.0 : weights[i];
      const double v = mode == "TF" ? tf[i] : mode == "IDF" ? (tf[i] > 0 ? w : 0.0) : tf[i] * w;
      out[r * width + indexes[i]] = static_cast<float>(v);
    }
  }
  c.outputs.push_back(Value::from_f32(
      batched ? std::vector<int64_t>{rows, width} : std::vector<int64_t>{width}, out));
}

// Triangular mel filters over the bins of a one-sided DFT, as ONNX's reference computes them.
void mel_weight_matrix(OpCall& c) {
  const int64_t bins = first_i64(c, c.input(0)), dft = first_i64(c, c.input(1));
  const int64_t rate = first_i64(c, c.input(2));
  const float lo = first_f32(c, c.input(3)), hi = first_f32(c, c.input(4));
  if (bins < 1 || dft < 1 || rate < 1)
    c.fail("num_mel_bins, dft_length and sample_rate must be >= 1");
  const int64_t dtype = c.attr_int("output_datatype", 1);
  if (dtype != 1 && dtype != 11)
    c.unsupported("output_datatype " + std::to_string(dtype) + " (only float and double)");
  if (bins > (int64_t{1} << 40)) size_overflow(c, "num_mel_bins");
  const int64_t spec = dft / 2 + 1;
  // Checked before anything is allocated (the band edges too are num_mel_bins + 2 long).
  checked_nbytes(Dtype::Float64, {spec, bins + 2}, "the output");
  const float lo_mel = 2595.0f * std::log10(1.0f + lo / 700.0f);
  const float hi_mel = 2595.0f * std::log10(1.0f + hi / 700.0f);
  const float step = (hi_mel - lo_mel) / static_cast<float>(bins + 2);
  std::vector<int64_t> f(static_cast<size_t>(bins + 2));
  for (int64_t i = 0; i < bins + 2; ++i) {
    const double mel = static_cast<double>(i) * static_cast<double>(step) + lo_mel;
    const double hz = 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
    f[i] = static_cast<int64_t>(std::floor(static_cast<double>(dft + 1) * hz / rate));
  }
  std::vector<double> w(static_cast<size_t>(spec * bins));  // within the checked size
  auto set = [&](int64_t j, int64_t i, double v) {
    if (j < 0 || j >= spec) c.fail("a mel band edge lies beyond the spectrogram's bins");
    w[j * bins + i] = v;
  };
  for (int64_t i = 0; i < bins; ++i) {
    const int64_t left = f[i], mid = f[i + 1], right = f[i + 2];
    if (mid == left) {
      set(mid, i, 1.0);
    } else {
      for (int64_t j = left; j <= mid; ++j)
        set(j, i, static_cast<double>(j - left) / static_cast<double>(mid - left));
    }
    if (right > mid)
      for (int64_t j = mid; j < right; ++j)
        set(j, i, static_cast<double>(right - j) / static_cast<double>(right - mid));
  }
  Value out = new_value(dtype == 1 ? Dtype::Float32 : Dtype::Float64, {spec, bins});
  for (size_t i = 0; i < w.size(); ++i) {
    if (dtype == 1) {
      out.mutable_data<float>()[i] = static_cast<float>(w[i]);
    } else {
      out.mutable_data<double>()[i] = w[i];
    }
  }
  c.outputs.push_back(std::move(out));
}

}  // namespace

void register_feature_ops() {
  register_builtin("onnx.TfIdfVectorizer", tfidf_vectorizer);
  register_builtin("onnx.MelWeightMatrix", mel_weight_matrix);
}

}  // namespace fx::exec
