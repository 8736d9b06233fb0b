// Pooling: max-pool (3-wide windows at stride 2 sixteen outputs at a time with AVX-512; else
// separable: a column pass over each window's rows, then an AVX2 or scalar row pass; a NaN-exact
// plane path for the general case), average pool and global average pool.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/conv.h"
#include "kernels/cpu.h"
#include "kernels/prefetch.h"
#include "kernels/scratch.h"
#include "kernels/simd.h"
#include "kernels/thread_pool.h"

#ifdef FXWASM_X86_DISPATCH
#include <immintrin.h>

#include "kernels/avx512.h"
#endif

namespace fx::kernels {

namespace {

// One plane of max_pool2d, any window, NaN-exact: row at a time, for each window offset (kh, kw)
// the output columns whose input is inside the row form one range, so the inner loop has no
// bounds checks and no branches (a select that lets NaN win and stay).
// One output row of the exact path: orow from the window's rows inside the input, rows[0, n) in
// window order.
void max_pool_row_exact(const Pool2dParams& p, const float* const* rows, int64_t n, float* orow) {
  const int64_t OW = p.out_w();
  std::fill(orow, orow + OW, -std::numeric_limits<float>::infinity());
  for (int64_t r = 0; r < n; ++r) {
    const float* irow = rows[r];
    for (int64_t kw = 0; kw < p.KW; ++kw) {
      const int64_t off = kw * p.dilation_w - p.pad_left;
      const int64_t lo = off >= 0 ? 0 : (-off + p.stride_w - 1) / p.stride_w;
      const int64_t hi = std::min(OW, (p.W - 1 - off) < 0 ? 0 : (p.W - 1 - off) / p.stride_w + 1);
      for (int64_t ow = lo; ow < hi; ++ow) {
        const float v = irow[ow * p.stride_w + off], b = orow[ow];
        orow[ow] = (v > b || v != v) ? v : b;
      }
    }
  }
}

// The rows of output row oh's window inside the plane, in window order, into rows; returns how
// many.
int64_t window_rows(const Pool2dParams& p, const float* plane, int64_t oh, const float** rows) {
  int64_t n = 0;
  for (int64_t kh = 0; kh < p.KH; ++kh) {
    const int64_t ih = oh * p.stride_h - p.pad_top + kh * p.dilation_h;
    if (ih >= 0 && ih < p.H) rows[n++] = plane + ih * p.W;
  }
  return n;
}

void max_pool_plane_exact(const Pool2dParams& p, const float* plane, float* o) {
  const int64_t OH = p.out_h(), OW = p.out_w();
  std::vector<const float*> rows(static_cast<size_t>(p.KH));
  for (int64_t oh = 0; oh < OH; ++oh)
    max_pool_row_exact(p, rows.data(), window_rows(p, plane, oh, rows.data()), o + oh * OW);
}

#ifdef FXWASM_X86_DISPATCH

// The even and odd lanes of q[0..16): [q0 q2 .. q14] and [q1 q3 .. q15].
__attribute__((target("avx2"), always_inline)) inline void even_odd_avx2(const float* q,
                                                                         __m256& even,
                                                                         __m256& odd) {
  const __m256 a = _mm256_loadu_ps(q), b = _mm256_loadu_ps(q + 8);
  even = _mm256_castpd_ps(_mm256_permute4x64_pd(
      _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))), 0xD8));
  odd = _mm256_castpd_ps(_mm256_permute4x64_pd(
      _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))), 0xD8));
}

// hrow[0..8) = max of q[2j], q[2j + 1], q[2j + 2] (reads q[0..18)).
__attribute__((target("avx2"), always_inline)) inline void max8_k3s2_avx2(const float* q,
                                                                          float* hrow) {
  __m256 e0, o0, e2, o2;
  even_odd_avx2(q, e0, o0);
  even_odd_avx2(q + 2, e2, o2);
  _mm256_storeu_ps(hrow, _mm256_max_ps(_mm256_max_ps(e0, o0), e2));
}

// orow[at..at+8) = max over rows[0..n) at the same columns; lanes where a row has a NaN are
// set in `nan`. N > 0: n is N (unrolled, the usual 2- and 3-row windows); else any n.
template <int N>
__attribute__((target("avx2"), always_inline)) inline void max_rows8_avx2(const float* const* rows,
                                                                          int64_t n, float* orow,
                                                                          int64_t at, __m256& nan) {
  if (N > 0) n = N;
  __m256 m = _mm256_loadu_ps(rows[0] + at);
  __m256 bad = _mm256_cmp_ps(m, m, _CMP_UNORD_Q);
  for (int64_t r = 1; r < n; ++r) {
    const __m256 x = _mm256_loadu_ps(rows[r] + at);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    m = _mm256_max_ps(m, x);
  }
  nan = _mm256_or_ps(nan, bad);
  _mm256_storeu_ps(orow + at, m);
}

template <int N>
__attribute__((target("avx2"))) int64_t max_rows_n_avx2(const float* const* rows, int64_t n,
                                                        float* orow, int64_t W, bool& nan) {
  __m256 bad = _mm256_setzero_ps();
  int64_t w = 0;
  for (; w + 8 <= W; w += 8) max_rows8_avx2<N>(rows, n, orow, w, bad);
  if (w < W && W >= 8) {  // the last eight once more, overlapping
    max_rows8_avx2<N>(rows, n, orow, W - 8, bad);
    w = W;
  }
  nan = nan || _mm256_movemask_ps(bad) != 0;
  return w;
}

// Eight outputs at a time of a 3-wide, stride-2 window row (ResNet's and SqueezeNet's 3x3/2
// pools), for outputs [ow, end) whose windows are inside the row. The 18 floats loaded for eight
// outputs may run past the row (those land in no used lane), never past `limit`, the end of its
// buffer. A last group of fewer than eight is done as the last
// eight, overlapping. Returns where it stopped.
__attribute__((target("avx2"))) int64_t max_row_k3s2_avx2(const float* irow, float* hrow,
                                                          int64_t ow, int64_t end, int64_t pad_left,
                                                          const float* limit) {
  const int64_t first = ow;
  for (; ow + 8 <= end && irow + ow * 2 - pad_left + 18 <= limit; ow += 8)
    max8_k3s2_avx2(irow + ow * 2 - pad_left, hrow + ow);
  // (Only when those eight cover everything left: end - 8 <= ow.)
  if (ow < end && end - 8 >= first && end - 8 <= ow &&
      irow + (end - 8) * 2 - pad_left + 18 <= limit) {
    max8_k3s2_avx2(irow + (end - 8) * 2 - pad_left, hrow + end - 8);
    ow = end;
  }
  return ow;
}

// orow[ow] = max of rows[0..n)[ow], eight at a time; returns where it stopped. Sets `nan` when
// one of the values read is a NaN. (Unrolled for two and three rows: the loop over n kept one
// max chain per eight columns in flight and took twice as long.)
int64_t max_rows_avx2(const float* const* rows, int64_t n, float* orow, int64_t W, bool& nan) {
  if (n == 3) return max_rows_n_avx2<3>(rows, n, orow, W, nan);
  if (n == 2) return max_rows_n_avx2<2>(rows, n, orow, W, nan);
  return max_rows_n_avx2<0>(rows, n, orow, W, nan);
}
#endif

#ifdef FXWASM_X86_DISPATCH
// Lanes i of a sixteen-float load at row position s with 0 <= s + i < W.
inline __mmask16 in_row_mask(int64_t s, int64_t W) {
  const int64_t lo = std::max<int64_t>(0, -s), hi = std::min<int64_t>(16, W - s);
  if (hi <= lo) return 0;
  return static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
}

// Whether plane[0..n) holds a NaN.
__attribute__((target("avx512f"))) bool has_nan_avx512(const float* plane, int64_t n) {
  // (One unordered compare checks two vectors: compares run on one port of Intel cores.)
  __mmask16 bad0 = 0, bad1 = 0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512 x = _mm512_loadu_ps(plane + i), y = _mm512_loadu_ps(plane + i + 16);
    const __m512 z = _mm512_loadu_ps(plane + i + 32), w = _mm512_loadu_ps(plane + i + 48);
    bad0 |= _mm512_cmp_ps_mask(x, y, _CMP_UNORD_Q);
    bad1 |= _mm512_cmp_ps_mask(z, w, _CMP_UNORD_Q);
  }
  for (; i + 32 <= n; i += 32)
    bad0 |= _mm512_cmp_ps_mask(_mm512_loadu_ps(plane + i), _mm512_loadu_ps(plane + i + 16),
                               _CMP_UNORD_Q);
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(m, plane + i);
    bad0 |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  }
  return (bad0 | bad1) != 0;
}

// The load and store masks of max_pool_plane_k3s2_avx512's groups of sixteen outputs, the same
// for every row: lanes of the three loads inside the row, lanes of the store inside the output row.
struct K3S2Group {
  __mmask16 a, b, c, store;
};
std::vector<K3S2Group> k3s2_groups(const Pool2dParams& p) {
  const int64_t OW = p.out_w();
  std::vector<K3S2Group> g;
  for (int64_t ow = 0; ow < OW; ow += 16) {
    const int64_t base = ow * 2 - p.pad_left;
    g.push_back(
        {in_row_mask(base, p.W), in_row_mask(base + 16, p.W),
         static_cast<__mmask16>(in_row_mask(base + 32, p.W) & 1),
         OW - ow >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (OW - ow)) - 1)});
  }
  return g;
}

// Sixteen columns from `at` of rows[0, n) (loaded under mask k, -inf outside it), maxed over the
// rows; lanes where either of the last two rows holds a NaN are set in `nan` (one unordered
// compare for both).
__attribute__((target("avx512f"), always_inline)) inline __m512 max_of_rows(
    const float* const* rows, int64_t n, int64_t at, __mmask16 k, __m512 ninf, __mmask16& nan) {
  __m512 x = _mm512_mask_loadu_ps(ninf, k, rows[0] + at), v = x;
  if (n == 1) {
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return v;
  }
  for (int64_t r = 1; r + 1 < n; ++r) {
    x = _mm512_mask_loadu_ps(ninf, k, rows[r] + at);
    v = max512(v, x);
  }
  const __m512 y = _mm512_mask_loadu_ps(ninf, k, rows[n - 1] + at);
  nan |= _mm512_cmp_ps_mask(x, y, _CMP_UNORD_Q);
  return max512(v, y);
}

// One output row of a 3-wide, stride-2 max-pool along rows from the window's rows[0, n) (n > 0;
// N > 0: n is N, unrolled), sixteen outputs at a time (see max_pool_plane_k3s2_avx512); false if
// the last two rows held a NaN where a window read them.
template <int N>
__attribute__((target("avx512f"), always_inline)) inline bool max_pool_row_k3s2_avx512(
    const Pool2dParams& p, const std::vector<K3S2Group>& groups, const float* const* rows,
    int64_t n, float* orow) {
  if constexpr (N > 0) n = N;
  const int64_t OW = p.out_w();
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  __mmask16 nan = 0;
  auto rows_max = [&](int64_t at, __mmask16 k) __attribute__((target("avx512f"), always_inline)) {
    return max_of_rows(rows, n, at, k, ninf, nan);
  };
  // A group's 33rd column starts the next group's columns: their rows' max, computed once, is
  // both (2 of 3 loads and row maxes a group, not 3: 16 of SqueezeNet's 111 x 111 planes alone,
  // in L2, 38.8 -> 34.6 us, medians).
  const int64_t last_group = static_cast<int64_t>(groups.size()) - 1;
  __m512 a = rows_max(-p.pad_left, groups[0].a);
  for (int64_t ow = 0, g = 0; ow < OW; ow += 16, ++g) {
    const int64_t base = ow * 2 - p.pad_left;  // the first window's first column
    const K3S2Group m = groups[static_cast<size_t>(g)];
    const __m512 b = rows_max(base + 16, m.b);
    const __m512 c =
        rows_max(base + 32, g < last_group ? groups[static_cast<size_t>(g + 1)].a : m.c);
    const __m512 e = _mm512_permutex2var_ps(a, even, b);
    const __m512 d = _mm512_permutex2var_ps(a, odd, b);
    // The even lanes one on, [e1 .. e15, c0] (the all-lanes masked form: see max512).
    const __m512i ei = _mm512_castps_si512(e);
    const __m512 e2 =
        _mm512_castsi512_ps(_mm512_mask_alignr_epi32(ei, 0xFFFF, _mm512_castps_si512(c), ei, 1));
    _mm512_mask_storeu_ps(orow + ow, m.store, max512(max512(e, d), e2));
    a = c;
  }
  return nan == 0;
}

// One NaN-free plane of a 3-wide, stride-2 max-pool along rows (ResNet's, SqueezeNet's and
// ShuffleNet's 3x3/2 pools), any window height, stride and padding down columns, sixteen outputs
// at a time: the 33 inputs of sixteen windows, loaded masked to the row (positions outside it read
// as -inf, so padding and ceil_mode windows need no edge code), maxed over the window's rows, then
// their even, odd and next even lanes picked by permutes. N > 0: every window has N rows
// (unrolled). Every input value a window reads is checked for NaN: a window's last two rows as
// they are loaded, rows above them that no window before read with has_nan_avx512 (windows of
// three rows at stride 2 share their first row with the window above, so only the first window
// needs that); returns false after the first output row that read one, the plane to be redone on
// the exact path. (Checked ahead of the loads, 8 KB at a time, the check waited on memory and then
// the pool on nothing. With the shared columns below, min of 300 in the model: SqueezeNet's three
// pools 174, 91 and 45 -> 137, 73 and 34 us; ResNet-18's alone 182 -> 155 us, medians.)
template <int N>
__attribute__((target("avx512f"))) bool max_pool_plane_k3s2_avx512(
    const Pool2dParams& p, const std::vector<K3S2Group>& groups, const float* plane, float* o,
    const NextPlanePrefetch& next) {
  const int64_t OH = p.out_h(), OW = p.out_w(), W = p.W;
  int64_t checked = 0;  // the row after the last one a window read (each checked as read)
  // Whether no window above read row ih (windows of adjacent rows read every row up to the last
  // one read; dilated ones skip rows that a later window reads).
  auto unread = [&](int64_t ih) { return ih >= checked || p.dilation_h > 1; };
  for (int64_t oh = 0; oh < OH; ++oh) {
    next.step(oh);
    float* orow = o + oh * OW;
    const float* rows[16];
    int64_t n = 0;
    if constexpr (N > 0) {  // every window's N rows are in the plane (and pad_top is 0)
      for (int64_t kh = 0; kh < N; ++kh) {
        const int64_t ih = oh * p.stride_h + kh * p.dilation_h;
        if (kh + 2 < N && unread(ih) && has_nan_avx512(plane + ih * W, W)) return false;
        rows[kh] = plane + ih * W;
      }
      n = N;
      checked = oh * p.stride_h + (N - 1) * p.dilation_h + 1;
    } else {
      for (int64_t kh = 0; kh < p.KH; ++kh) {
        const int64_t ih = oh * p.stride_h - p.pad_top + kh * p.dilation_h;
        if (ih < 0 || ih >= p.H) continue;
        if (kh + 2 < p.KH && unread(ih) && has_nan_avx512(plane + ih * W, W)) return false;
        rows[n++] = plane + ih * W;
        checked = std::max(checked, ih + 1);
      }
    }
    if (n == 0) {  // (a window wholly in the padding)
      std::fill(orow, orow + OW, -std::numeric_limits<float>::infinity());
      continue;
    }
    if (!max_pool_row_k3s2_avx512<N>(p, groups, rows, n, orow)) return false;
  }
  return true;
}
#endif

constexpr int64_t kMaxRows = 16;  // taller windows (rare) take the exact path

// Floats max_pool_row may read past a row's W: the row buffer's margin (max_pool_planes).
constexpr int64_t kRowMargin = 32;

// The column ranges of max_pool_row, the same for every row of a call: outputs [lo, hi) have
// their whole window inside the row, and the four-lane stride-2 loops stop at `end`, where their
// loads of the taps' eight floats would leave the row's buffer (past the row they fill lanes no
// output uses: on SqueezeNet's 27-, 55- and 111-wide rows it stopped 5-7 outputs short of hi at the
// row's end, left to the scalar loop). (Computed once a call: their divisions, once a row, were a
// tenth of SqueezeNet's 27x27 pool.)
struct PoolRowRange {
  PoolRowRange(const Pool2dParams& p, int64_t OW) {
    const int64_t sw = p.stride_w, span = (p.KW - 1) * p.dilation_w;
    lo = std::min(OW, (p.pad_left + sw - 1) / sw);
    const int64_t last = p.W - 1 - span + p.pad_left;  // largest window start (+ pad) inside
    hi = std::max(lo, std::min(OW, last < 0 ? 0 : last / sw + 1));
    end = sw == 2 ? std::min(hi, (p.W + kRowMargin - 8 - span + p.pad_left) / 2 + 1) : hi;
  }
  int64_t lo, hi, end;
};

// hrow[ow] = max over kw of irow[ow * stride_w - pad_left + kw * dilation_w], in-row positions
// only (-inf where the window has none). NaN-free rows.
// `limit`: the end of the row's buffer (vector loads may run past the row, not past it).
void max_pool_row(const Pool2dParams& p, const PoolRowRange& range, const float* irow, float* hrow,
                  int64_t OW, [[maybe_unused]] const float* limit) {
  const int64_t sw = p.stride_w, dw = p.dilation_w;
  const int64_t lo = range.lo, hi = range.hi;
  auto edge = [&](int64_t ow) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t kw = 0; kw < p.KW; ++kw) {
      const int64_t iw = ow * sw - p.pad_left + kw * dw;
      if (iw >= 0 && iw < p.W) m = std::max(m, irow[iw]);
    }
    hrow[ow] = m;
  };
  for (int64_t ow = 0; ow < lo; ++ow) edge(ow);
  int64_t ow = lo;
  if (dw == 1 && sw == 1) {
    for (; ow + 4 <= hi; ow += 4) {
      const float* q = irow + ow - p.pad_left;
      v4f m = load4(q);
      for (int64_t kw = 1; kw < p.KW; ++kw) m = max4(m, load4(q + kw));
      store4(hrow + ow, m);
    }
  } else if (dw == 1 && sw == 2) {
    // Four outputs from the even lanes of eight consecutive inputs per kw, while those eight
    // floats are inside the row; 3-wide windows (the common 3x3 / stride 2 pool) unrolled.
    auto even = [](const float* q) {
      return __builtin_shufflevector(load4(q), load4(q + 4), 0, 2, 4, 6);
    };
    const int64_t end = range.end;
    if (p.KW == 3) {
#ifdef FXWASM_X86_DISPATCH
      if (cpu_has_avx2()) ow = max_row_k3s2_avx2(irow, hrow, ow, hi, p.pad_left, limit);
#endif
      // The three taps of four outputs from three loads, the third the next group's first: the
      // even lanes of q[0..8), the odd ones, and the even ones shifted by one with q[8].
      if (ow + 4 <= end) {
        const float* q = irow + ow * 2 - p.pad_left;
        v4f v0 = load4(q);
        for (; ow + 4 <= end && q + 12 <= limit; ow += 4, q += 8) {
          const v4f v1 = load4(q + 4), v2 = load4(q + 8);
          const v4f e = __builtin_shufflevector(v0, v1, 0, 2, 4, 6);
          const v4f o = __builtin_shufflevector(v0, v1, 1, 3, 5, 7);
          const v4f e1 = __builtin_shufflevector(e, v2, 1, 2, 3, 4);
          store4(hrow + ow, max4(max4(e, o), e1));
          v0 = v2;
        }
      }
    }
    for (; ow + 4 <= end; ow += 4) {
      const float* q = irow + ow * 2 - p.pad_left;
      v4f m = even(q);
      for (int64_t kw = 1; kw < p.KW; ++kw) m = max4(m, even(q + kw));
      store4(hrow + ow, m);
    }
  }
  for (; ow < hi; ++ow) {
    const float* q = irow + ow * sw - p.pad_left;
    float m = q[0];
    for (int64_t kw = 1; kw < p.KW; ++kw) m = std::max(m, q[kw * dw]);
    hrow[ow] = m;
  }
  for (ow = hi; ow < OW; ++ow) edge(ow);
}

}  // namespace

namespace {
// One output row of the separable path from the window's rows[0, n) (n > 0): their max column
// by column into vrow, then along each window (max_pool_row). Returns whether a value read was a
// NaN (orow is then not the max: the row is to be redone on the exact path).
bool max_pool_row_separable(const Pool2dParams& p, const PoolRowRange& range,
                            const float* const* rows, int64_t n, ScratchBuffer& vrow, float* orow) {
  const int64_t OW = p.out_w();
  const float* vrow_end = vrow.data() + vrow.size();
  bool nan = false;
  float* v = vrow.data();
  int64_t w = 0;
#ifdef FXWASM_X86_DISPATCH
  if (cpu_has_avx2()) w = max_rows_avx2(rows, n, v, p.W, nan);
#endif
  v4i bad = {0, 0, 0, 0};
  // Two- and three-row windows unrolled, their NaN check on the rows' sum (a NaN in any of
  // them makes it NaN; so does inf + -inf, which only sends the plane to the exact path):
  // SqueezeNet's 64 x 111 x 111 pool in wasm 0.68 -> 0.52 ms (with the row pass below; its
  // three pools 1.32 -> 1.08).
  if (n == 3) {
    for (; w + 4 <= p.W; w += 4) {
      const v4f a = load4(rows[0] + w), b = load4(rows[1] + w), c = load4(rows[2] + w);
      const v4f sum = a + b + c;
      bad |= sum != sum;
      store4(v + w, max4(max4(a, b), c));
    }
  } else if (n == 2) {
    for (; w + 4 <= p.W; w += 4) {
      const v4f a = load4(rows[0] + w), b = load4(rows[1] + w);
      const v4f sum = a + b;
      bad |= sum != sum;
      store4(v + w, max4(a, b));
    }
  }
  for (; w + 4 <= p.W; w += 4) {
    v4f m = load4(rows[0] + w);
    bad |= m != m;
    for (int64_t r = 1; r < n; ++r) {
      const v4f x = load4(rows[r] + w);
      bad |= x != x;
      m = max4(m, x);
    }
    store4(v + w, m);
  }
  nan = nan || (bad[0] | bad[1] | bad[2] | bad[3]) != 0;
  for (; w < p.W; ++w) {
    float m = rows[0][w];
    for (int64_t r = 1; r < n; ++r) {
      nan = nan || rows[r][w] != rows[r][w];
      m = std::max(m, rows[r][w]);
    }
    nan = nan || m != m;
    v[w] = m;
  }
  max_pool_row(p, range, v, orow, OW, vrow_end);
  return nan;
}

// max_pool2d of planes [first, last) (image n, channel c is plane n * C + c).
void max_pool_planes(const Pool2dParams& p, const float* in, float* out, int64_t first,
                     int64_t last) {
  // Separable on NaN-free planes: per output row, the max over the window's input rows, column
  // by column (into vrow), then the max along each window of vrow, with plain vector max
  // instructions (rows first: at stride 2 the row pass, which shuffles, then runs on half as
  // many rows). The column pass notes any NaN it reads; such a plane is redone on the exact path
  // (a NaN must win wherever it is in the window, and vector max instructions drop it).
  const int64_t OH = p.out_h(), OW = p.out_w();
  ScratchBuffer& vrow = scratch(Scratch::ConvRow);
  vrow.resize(static_cast<size_t>(p.W + kRowMargin));  // the row pass's loads may run past W
  const PoolRowRange range(p, OW);
#ifdef FXWASM_X86_DISPATCH
  // Windows of three columns at stride 2; all_rows: every window has its KH rows in the plane.
  const bool k3s2 = cpu_has_avx512() && p.KW == 3 && p.stride_w == 2 && p.dilation_w == 1;
  const bool all_rows = p.pad_top == 0 && (OH - 1) * p.stride_h + (p.KH - 1) * p.dilation_h < p.H;
  const std::vector<K3S2Group> groups = k3s2 ? k3s2_groups(p) : std::vector<K3S2Group>();
#endif
  for (int64_t nc = first; nc < last; ++nc) {
    const float* plane = in + nc * p.H * p.W;
    float* o = out + nc * OH * OW;
    if (p.KH > kMaxRows) {
      max_pool_plane_exact(p, plane, o);
      continue;
    }
    bool nan = false;
    // The next plane, fetched into L2 a few lines per output row while this one is pooled: the
    // layer before wrote it. Min in the model: ResNet-18's 64 x 112 x 112 pool 374-389 -> 348-361
    // us (medians 0.8x), SqueezeNet's 64 x 111 x 111 one 310-328 -> 249-263, its 128 x 55 x 55
    // one unchanged. (Planes under 48 wide are not fetched.)
    const NextPlanePrefetch next = nc + 1 < last && p.W >= 48
                                       ? NextPlanePrefetch(plane + p.H * p.W, p.H * p.W, OH)
                                       : NextPlanePrefetch();
#ifdef FXWASM_X86_DISPATCH
    if (k3s2) {
      const bool ok = all_rows && p.KH == 3
                          ? max_pool_plane_k3s2_avx512<3>(p, groups, plane, o, next)
                          : max_pool_plane_k3s2_avx512<0>(p, groups, plane, o, next);
      if (!ok) max_pool_plane_exact(p, plane, o);
      continue;
    }
#endif
    for (int64_t oh = 0; oh < OH && !nan; ++oh) {
      next.step(oh);
      const float* rows[kMaxRows];
      const int64_t n = window_rows(p, plane, oh, rows);
      float* orow = o + oh * OW;
      if (n == 0)
        std::fill(orow, orow + OW, -std::numeric_limits<float>::infinity());
      else
        nan = max_pool_row_separable(p, range, rows, n, vrow, orow);
    }
    if (nan) max_pool_plane_exact(p, plane, o);
  }
}
}  // namespace

// Planes split across threads (each plane is computed alone, so any split gives the same bits):
// SqueezeNet's three max-pools were 0.3 ms of serial time in a 4.7 ms 2-thread run.
void max_pool2d(const Pool2dParams& p, const float* in, float* out) {
  // At least 50K input elements a thread.
  const int64_t planes = p.N * p.C, plane = std::max<int64_t>(1, p.H * p.W);
  parallel_for_inline(planes, std::max<int64_t>(1, 50000 / plane),
                      [&](int64_t b, int64_t e) { max_pool_planes(p, in, out, b, e); });
}

#ifdef FXWASM_X86_DISPATCH
namespace {
// max_pool2d_rows of a 3-wide, stride-2 pool (1 <= n <= kMaxRows).
__attribute__((target("avx512f"))) void max_pool_rows_k3s2_avx512(const Pool2dParams& p,
                                                                  const float* const* rows,
                                                                  int64_t n, int64_t channels,
                                                                  int64_t in_stride, float* out,
                                                                  int64_t out_stride) {
  const std::vector<K3S2Group> groups = k3s2_groups(p);
  const float* r[kMaxRows];
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t i = 0; i < n; ++i) r[i] = rows[i] + c * in_stride;
    float* orow = out + c * out_stride;
    // (The row kernel checks a window's last two rows for NaN as it loads them.)
    bool ok = true;
    for (int64_t i = 0; i + 2 < n && ok; ++i) ok = !has_nan_avx512(r[i], p.W);
    ok = ok && (n == 3 ? max_pool_row_k3s2_avx512<3>(p, groups, r, n, orow)
                       : max_pool_row_k3s2_avx512<0>(p, groups, r, n, orow));
    if (!ok) max_pool_row_exact(p, r, n, orow);
  }
}
}  // namespace
#endif

void max_pool2d_rows(const Pool2dParams& p, const float* const* rows, int64_t n, int64_t channels,
                     int64_t in_stride, float* out, int64_t out_stride) {
  const int64_t OW = p.out_w();
  std::vector<const float*> cr(static_cast<size_t>(std::max<int64_t>(n, 1)));
  auto channel_rows = [&](int64_t c) {
    for (int64_t r = 0; r < n; ++r) cr[static_cast<size_t>(r)] = rows[r] + c * in_stride;
    return cr.data();
  };
  if (n == 0 || n > kMaxRows) {
    for (int64_t c = 0; c < channels; ++c)
      max_pool_row_exact(p, channel_rows(c), n, out + c * out_stride);
    return;
  }
#ifdef FXWASM_X86_DISPATCH
  if (cpu_has_avx512() && p.KW == 3 && p.stride_w == 2 && p.dilation_w == 1) {
    max_pool_rows_k3s2_avx512(p, rows, n, channels, in_stride, out, out_stride);
    return;
  }
#endif
  ScratchBuffer& vrow = scratch(Scratch::ConvRow);
  vrow.resize(static_cast<size_t>(p.W + kRowMargin));
  const PoolRowRange range(p, OW);
  for (int64_t c = 0; c < channels; ++c) {
    const float* const* r = channel_rows(c);
    float* orow = out + c * out_stride;
    if (max_pool_row_separable(p, range, r, n, vrow, orow)) max_pool_row_exact(p, r, n, orow);
  }
}

void avg_pool2d(const Pool2dParams& p, const float* in, float* out) {
  const int64_t OH = p.out_h(), OW = p.out_w();
  for (int64_t nc = 0; nc < p.N * p.C; ++nc) {
    const float* plane = in + nc * p.H * p.W;
    float* o = out + nc * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        float sum = 0.0f;
        int64_t inside = 0, in_padded = 0;
        for (int64_t kh = 0; kh < p.KH; ++kh) {
          const int64_t ih = oh * p.stride_h - p.pad_top + kh * p.dilation_h;
          for (int64_t kw = 0; kw < p.KW; ++kw) {
            const int64_t iw = ow * p.stride_w - p.pad_left + kw * p.dilation_w;
            // Positions in the padded input (not past it, which ceil_mode can reach) count
            // when count_include_pad is set.
            if (ih < p.H + p.pad_bottom && iw < p.W + p.pad_right) ++in_padded;
            if (ih < 0 || ih >= p.H || iw < 0 || iw >= p.W) continue;
            sum += plane[ih * p.W + iw];
            ++inside;
          }
        }
        const int64_t count = p.count_include_pad ? in_padded : inside;
        o[oh * OW + ow] = count ? sum / static_cast<float>(count) : 0.0f;
      }
  }
}

float global_avg_plane(const float* x, int64_t HW) {
  // Sixteen partial sums in four independent vector chains (a single serial chain was
  // latency-bound: ~0.1 ms for SqueezeNet's 1000 x 13 x 13), combined in double.
  v4f s0 = splat(0.0f), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 16 <= HW; i += 16) {
    s0 += load4(x + i);
    s1 += load4(x + i + 4);
    s2 += load4(x + i + 8);
    s3 += load4(x + i + 12);
  }
  const v4f s = (s0 + s1) + (s2 + s3);
  double sum = static_cast<double>(s[0]) + s[1] + s[2] + s[3];
  for (; i < HW; ++i) sum += x[i];
  return static_cast<float>(sum / static_cast<double>(HW));
}

void global_avg_pool(int64_t N, int64_t C, int64_t HW, const float* in, float* out) {
  auto planes = [&](int64_t c0, int64_t c1) {
    for (int64_t nc = c0; nc < c1; ++nc) out[nc] = global_avg_plane(in + nc * HW, HW);
  };
  // Planes on threads, at least 16K floats a chunk: SqueezeNet's 1000 x 13 x 13, written by both
  // cores, took 20 us on one thread and 35 us at 2 threads with the second one idle; 11 us now
  // (per-node mins in the model).
  parallel_for_inline(N * C, std::max<int64_t>(1, 16384 / std::max<int64_t>(HW, 1)), planes);
}

}  // namespace fx::kernels
