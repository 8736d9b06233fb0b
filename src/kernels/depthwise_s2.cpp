// Depthwise 3x3 at stride 2 with one pixel of padding (MobileNet's, EfficientNet's and
// ShuffleNet's downsampling layers). On x86 with AVX2: on wide rows, each plane split into four
// phase planes computed flat; on even widths under 96, split flat into even and odd elements. With
// four lanes (wasm, SSE) the even-width kernel at any even width. depthwise.cpp dispatches here
// (depthwise_flat.h).
#include <algorithm>
#include <cstring>

#include "kernels/depthwise_flat.h"
#include "kernels/prefetch.h"
#include "kernels/scratch.h"
#include "kernels/simd.h"

namespace fx::kernels {

namespace {

// (The 8- and 16-lane instances are only ever inlined into the functions compiled for AVX2 or
// AVX-512: GCC's note that passing 32- or 64-byte vectors without them changes the ABI does not
// apply. GCC reports it at the end of the file, so it stays off from here on.)
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float v8f __attribute__((vector_size(32)));
typedef float v16f __attribute__((vector_size(64)));

// One step of de-interleaving: the U-wide vectors src[0, 2 lanes) -> even elements to e[0, lanes),
// odd ones to o[0, lanes) (a two-source shuffle each; 8 or 16 lanes).
template <class U>
__attribute__((always_inline)) inline void split_step(const float* src, float* e, float* o) {
  U a, b;
  std::memcpy(&a, src, sizeof a);
  std::memcpy(&b, src + sizeof(U) / sizeof(float), sizeof b);
  U ev, od;
  if constexpr (sizeof(U) == 32) {
    ev = __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14);
    od = __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15);
  } else {
    static_assert(sizeof(U) == 64, "eight or sixteen lanes");
    ev = __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    od = __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  }
  std::memcpy(e, &ev, sizeof ev);
  std::memcpy(o, &od, sizeof od);
}

// Splits src[0, 2 n) into its even elements (to e[0, n)) and odd ones (to o[0, n)), sixteen
// output pairs at a time with AVX-512F's two-source permute (one vpermt2ps each for the even and
// the odd elements of 32 floats); returns how many pairs it did (a multiple of 16), leaving the
// rest to the caller. The eight-lane split takes two shuffles and two quarter swaps (or four
// lane-crossing permutes and two blends) for 16 input floats, all on the one shuffle port of
// Intel cores. Used by the even-width stride-2 kernel from 28 wide (min of 1000-2000, alone, this
// Xeon: 56x56 x 144 121 -> 98 us, 28x28 x 192 36 -> 31.5; at 14x14 x 576 it lost, 30.7 -> 33.3,
// and the phase-plane kernel at 112 wide did not change).
template <bool kWide>
__attribute__((always_inline)) inline int64_t split_pairs16(const float* src, float* e, float* o,
                                                            int64_t n) {
  if constexpr (!kWide) {
    return 0;
  } else {
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) split_step<v16f>(src + 2 * j, e + j, o + j);
    return j;
  }
}

// (NextPlanePrefetch, prefetch.h: the stride-2 flat kernel splits a plane into phase planes
// before computing it, and that pass had waited on L3 or memory: MobileNetV2's 96 x 112 x 112
// layer, written by the conv before it, ran 0.36 ms in the model against 0.22 ms alone.)
// The next plane of a call, or null after its last.
inline const float* next_plane(const Conv2dParams& p, const float* in, int64_t n, int64_t c) {
  return c + 1 < p.C ? in + (n * p.C + c + 1) * p.H * p.W : nullptr;
}

// Depthwise 3x3 at stride 2 with one pixel of padding on every side, on the same flat plan: the
// plane is split into four phase planes of the output's size (even or odd input rows, times
// even or odd input columns; entries past the input's edge zero), so output p = oh * OW + ow
// reads each tap at p, p - 1 (odd columns left of it, masked where ow = 0) or p - OW (odd rows
// above it, zeros before the first). De-interleaving costs a shuffle per L input pixels, where
// the channel-interleaved path transposed every pixel in and out.
template <class V, int L>
__attribute__((always_inline)) inline void depthwise3x3_flat_s2_impl(
    const Conv2dParams& p, const float* in, const float* weight, const float* bias, float* out) {
  static_assert(L == 8 || L == 16, "the de-interleaving shuffles are written for 8 and 16 lanes");
  using I = decltype(V{} < V{});
  const auto load = flat_load<V>;
  const auto keep = flat_keep<V>;
  const int64_t H = p.H, W = p.W, OH = p.out_h(), OW = p.out_w(), OHW = OH * OW;
  const int64_t nv = (OHW + L - 1) / L;
  const int64_t lead = (OW + 1 + L - 1) / L * L;  // zeros before each phase plane
  const int64_t stride = lead + nv * L + L;       // one phase plane and its zeros
  const bool clamp = p.clamp_lo > -__builtin_inff() || p.clamp_hi < __builtin_inff();
  const V lo = V{} + p.clamp_lo, hi = V{} + p.clamp_hi;
  // Phase planes ee, eo, oe, oo (row parity, column parity), zeroed once: every channel writes
  // the same entries, and those past the input's edge stay zero.
  float* const X = aligned_floats(scratch(Scratch::ConvP), 4 * stride);
  std::fill(X, X + 4 * stride, 0.0f);
  float* const ph[4] = {X + lead, X + stride + lead, X + 2 * stride + lead, X + 3 * stride + lead};
  // The masks of the left column's taps: lanes with ow > 0.
  ScratchBuffer& Mbuf = scratch(Scratch::ConvT);
  Mbuf.resize(static_cast<size_t>(nv * L));
  for (int64_t v = 0, ow = 0; v < nv; ++v) {
    I m0;
    for (int j = 0; j < L; ++j, ow = ow + 1 == OW ? 0 : ow + 1) m0[j] = ow > 0 ? -1 : 0;
    std::memcpy(&Mbuf[static_cast<size_t>(v * L)], &m0, sizeof m0);
  }
  const float* const masks = Mbuf.data();  // (as in depthwise3x3_flat_impl)
  const int64_t pairs = W / 2;             // input columns 2j and 2j + 1 both inside the row
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t c = 0; c < p.C; ++c) {
      const float* plane = in + (n * p.C + c) * H * W;
      auto split_row = [&](int64_t ih) __attribute__((always_inline)) {
        const float* row = plane + ih * W;
        float* e = ph[(ih & 1) * 2] + (ih >> 1) * OW;
        float* o = ph[(ih & 1) * 2 + 1] + (ih >> 1) * OW;
        int64_t j = 0;
        for (; j + L <= pairs; j += L) split_step<V>(row + 2 * j, e + j, o + j);
        // Eight pairs more on eight lanes: a 112-wide row is 56 pairs, and its last 8 went
        // through the scalar loop, about as many instructions as the rest of the plane's split.
        // (Min of 300, alone, Intel Xeon: 112x112 x 96 332 -> 316 us, x 16 50 -> 47; 150 wide x
        // 24 153 -> 144.)
        if constexpr (L == 16) {
          if (j + 8 <= pairs) {
            split_step<v8f>(row + 2 * j, e + j, o + j);
            j += 8;
          }
        }
        for (; j < pairs; ++j) {
          e[j] = row[2 * j];
          o[j] = row[2 * j + 1];
        }
        if (W & 1) e[pairs] = row[W - 1];  // (its odd partner is past the edge: zero)
      };
      float* out_plane = out + (n * p.C + c) * OHW;
      const float* w = weight + c * 9;
      V wv[9];
      for (int k = 0; k < 9; ++k) wv[k] = V{} + w[k];
      const V b = V{} + (bias ? bias[c] : 0.0f);
      const float *ee = ph[0], *eo = ph[1], *oe = ph[2], *oo = ph[3];
      NextPlanePrefetch next(next_plane(p, in, n, c), p.H * p.W, OH);
      // Input rows are split as the outputs come to need them (output row oh reads input rows up
      // to 2 oh + 1), so the phase rows a vector reads were written just before, in L1: split
      // whole first, a 112 x 112 plane's four phase planes (51 KB) and the input plane (50 KB)
      // outgrew this Xeon's 48 KB L1d and the flat loop read them back from L2. 112x112 x 96,
      // min of 300, alone: 454 -> 392 us (the same bits: each phase row is written before any
      // output that reads it, and rows not split yet are never read). The vectors go by the
      // output row of their last output (a tight inner loop: with the splitting and the row
      // bookkeeping inside it, GCC kept the loop's pointers on the stack).
      auto vec = [&](int64_t q) __attribute__((always_inline)) {
        const V col1 = wv[1] * load(oe + q - OW) + wv[4] * load(ee + q) + wv[7] * load(oe + q);
        const V col0 =
            wv[0] * load(oo + q - OW - 1) + wv[3] * load(eo + q - 1) + wv[6] * load(oo + q - 1);
        const V col2 = wv[2] * load(oo + q - OW) + wv[5] * load(eo + q) + wv[8] * load(oo + q);
        I m0;
        std::memcpy(&m0, masks + q, sizeof m0);
        V acc = b + col1 + keep(col0, m0) + col2;
        if (clamp) acc = clamp_v(acc, lo, hi);
        return acc;
      };
      int64_t split = 0, v = 0;
      for (int64_t row = 0; row < OH; ++row) {
        next.step(row);
        // Vectors [v, v_end) end in this row (q + L <= (row + 1) * OW), the last row's all left.
        const int64_t row_end = (row + 1) * OW;
        const int64_t v_end = row + 1 == OH ? nv : row_end >= L ? (row_end - L) / L + 1 : 0;
        if (v_end <= v) continue;
        const int64_t need = std::min(H, 2 * row + 2);
        while (split < need) split_row(split++);
        for (const int64_t whole = std::min(v_end, nv - 1); v < whole; ++v) {
          const V acc = vec(v * L);
          std::memcpy(out_plane + v * L, &acc, sizeof acc);
        }
        if (v == nv - 1) {  // the plane's last, maybe partial, vector (v_end is nv here)
          const V acc = vec(v * L);
          std::memcpy(out_plane + v * L, &acc, static_cast<size_t>(OHW - v * L) * sizeof(float));
          ++v;
        }
      }
    }
  }
}

// Depthwise 3x3 at stride 2 with one pixel of padding on every side and an even input width:
// each plane is split once, flat, into its even and odd elements E and O (with W even, an
// element's column has the parity of its flat index), so row i of E (of O) is input row i's even
// (odd) columns, OW = W / 2 floats, and the split has no row ends. Output (oh, ow) reads input
// rows 2oh - 1 .. 2oh + 1 at columns 2ow - 1 (O, one to the left: masked at ow = 0), 2ow (E) and
// 2ow + 1 (O): every tap of L outputs along a row is one load. A row's last vector runs on into
// the next rows' outputs, which those rows then overwrite; the rows whose vectors would run past
// the plane go through a buffer. Rows above and below the input read zeros around E and O.
template <class V, int L, bool kWide>
__attribute__((always_inline)) inline void depthwise3x3_s2_even_impl(
    const Conv2dParams& p, const float* in, const float* weight, const float* bias, float* out) {
  static_assert(L == 4 || L == 8 || (L == 16 && kWide),
                "the de-interleaving shuffles are written for four and eight lanes, and sixteen "
                "take split_pairs16's");
  using I = decltype(V{} < V{});
  const auto load = flat_load<V>;
  const auto keep = flat_keep<V>;
  const int64_t H = p.H, OH = p.out_h(), OW = p.out_w(), OHW = OH * OW, half = H * OW;
  const int64_t lead = (OW + 1 + L - 1) / L * L;  // the zero row above, whole vectors
  const int64_t stride = lead + half + OW + L;    // E or O, its zero rows and the loads' reach
  const bool clamp = p.clamp_lo > -__builtin_inff() || p.clamp_hi < __builtin_inff();
  const V lo = V{} + p.clamp_lo, hi = V{} + p.clamp_hi;
  float* const X = aligned_floats(scratch(Scratch::ConvP), 2 * stride);
  std::fill(X, X + 2 * stride, 0.0f);  // every channel writes the same entries
  float* const E = X + lead;
  float* const O = X + stride + lead;
  I first;  // lanes of a row's first vector whose left column is inside the input
  for (int j = 0; j < L; ++j) first[j] = j > 0 ? -1 : 0;
  const int64_t row_vectors = (OW + L - 1) / L;
  ScratchBuffer& last_buf = scratch(Scratch::ConvRow);  // a row, and what its vectors run on to
  last_buf.resize(static_cast<size_t>(row_vectors * L));
  float* const last_row = last_buf.data();
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t c = 0; c < p.C; ++c) {
      const float* plane = in + (n * p.C + c) * H * p.W;
      int64_t i = 2 * split_pairs16<kWide>(plane, E, O, half);
      // (With sixteen lanes split_pairs16 took every whole 32 floats.)
      for (; L < 16 && i + 2 * L <= 2 * half; i += 2 * L) {
        const V a = load(plane + i), b = load(plane + i + L);
        if constexpr (L == 4) {
          const V ev = __builtin_shufflevector(a, b, 0, 2, 4, 6);
          const V od = __builtin_shufflevector(a, b, 1, 3, 5, 7);
          std::memcpy(E + i / 2, &ev, sizeof ev);
          std::memcpy(O + i / 2, &od, sizeof od);
        } else if constexpr (L == 8) {
          // Within 128-bit lanes (vshufps), then the middle quarters swapped (vpermpd): the
          // one-step shuffle became two vpermd and a blend.
          const V e = __builtin_shufflevector(a, b, 0, 2, 8, 10, 4, 6, 12, 14);
          const V o = __builtin_shufflevector(a, b, 1, 3, 9, 11, 5, 7, 13, 15);
          const V ev = __builtin_shufflevector(e, e, 0, 1, 4, 5, 2, 3, 6, 7);
          const V od = __builtin_shufflevector(o, o, 0, 1, 4, 5, 2, 3, 6, 7);
          std::memcpy(E + i / 2, &ev, sizeof ev);
          std::memcpy(O + i / 2, &od, sizeof od);
        }
      }
      for (; i < 2 * half; i += 2) {
        E[i / 2] = plane[i];
        O[i / 2] = plane[i + 1];
      }
      float* out_plane = out + (n * p.C + c) * OHW;
      const float* w = weight + c * 9;
      V wv[9];
      for (int k = 0; k < 9; ++k) wv[k] = V{} + w[k];
      const V b = V{} + (bias ? bias[c] : 0.0f);
      // How far this plane's vectors may run: into the next plane's first row, which that plane
      // then overwrites, but only within this call (its last plane is another thread's
      // neighbour) and where that row covers the run.
      const int64_t spill_end =
          c + 1 < p.C && row_vectors * L <= OHW ? OHW + row_vectors * L - OW : OHW;
      // (Planes of rows under 48 are in L2 already: prefetching them cost 8 %, 28x28 x 192 and
      // 14x14 x 576.)
      const NextPlanePrefetch next =
          p.W >= 48 ? NextPlanePrefetch(next_plane(p, in, n, c), p.H * p.W, OH * row_vectors)
                    : NextPlanePrefetch();
      for (int64_t oh = 0; oh < OH; ++oh) {
        const float *e0 = E + (2 * oh - 1) * OW, *e1 = e0 + OW, *e2 = e1 + OW;
        const float *o0 = O + (2 * oh - 1) * OW, *o1 = o0 + OW, *o2 = o1 + OW;
        float* orow = oh * OW + row_vectors * L <= spill_end ? out_plane + oh * OW : last_row;
        for (int64_t ow = 0; ow < OW; ow += L) {
          next.step(oh * row_vectors + ow / L);
          const V col1 = wv[1] * load(e0 + ow) + wv[4] * load(e1 + ow) + wv[7] * load(e2 + ow);
          V col0 =
              wv[0] * load(o0 + ow - 1) + wv[3] * load(o1 + ow - 1) + wv[6] * load(o2 + ow - 1);
          const V col2 = wv[2] * load(o0 + ow) + wv[5] * load(o1 + ow) + wv[8] * load(o2 + ow);
          if (ow == 0) col0 = keep(col0, first);
          V acc = b + col1 + col0 + col2;
          if (clamp) acc = clamp_v(acc, lo, hi);
          std::memcpy(orow + ow, &acc, sizeof acc);
        }
        if (orow == last_row)
          std::memcpy(out_plane + oh * OW, last_row, static_cast<size_t>(OW) * sizeof(float));
      }
    }
  }
}

}  // namespace

bool flat_3x3_s2(const Conv2dParams& p) {
  return p.stride_h == 2 && p.stride_w == 2 && p.pad_top == 1 && p.pad_left == 1 &&
         p.pad_bottom == 1 && p.pad_right == 1;
}

bool s2_even_3x3(const Conv2dParams& p) { return flat_3x3_s2(p) && p.W % 2 == 0; }

// The even-width kernel on four lanes (wasm's simd128; SSE natively).
void depthwise3x3_s2_even4(const Conv2dParams& p, const float* in, const float* weight,
                           const float* bias, float* out) {
  depthwise3x3_s2_even_impl<v4f, 4, false>(p, in, weight, bias, out);
}

#ifdef FXWASM_X86_DISPATCH
__attribute__((target("avx2,fma"))) void depthwise3x3_flat_s2_avx2(const Conv2dParams& p,
                                                                   const float* in,
                                                                   const float* weight,
                                                                   const float* bias, float* out) {
  depthwise3x3_flat_s2_impl<v8f, 8>(p, in, weight, bias, out);
}
__attribute__((target("avx512f,avx2,fma"))) void depthwise3x3_flat_s2_avx512(
    const Conv2dParams& p, const float* in, const float* weight, const float* bias, float* out) {
  depthwise3x3_flat_s2_impl<v16f, 16>(p, in, weight, bias, out);
}
// The even-width kernel with the AVX-512 split (the same bits: the split only copies).
__attribute__((target("avx512f,avx2,fma"))) void depthwise3x3_s2_even_avx512(
    const Conv2dParams& p, const float* in, const float* weight, const float* bias, float* out) {
  depthwise3x3_s2_even_impl<v8f, 8, true>(p, in, weight, bias, out);
}
__attribute__((target("avx512f,avx2,fma"))) void depthwise3x3_s2_even_avx512_16(
    const Conv2dParams& p, const float* in, const float* weight, const float* bias, float* out) {
  depthwise3x3_s2_even_impl<v16f, 16, true>(p, in, weight, bias, out);
}
__attribute__((target("avx2,fma"))) void depthwise3x3_s2_even_avx2(const Conv2dParams& p,
                                                                   const float* in,
                                                                   const float* weight,
                                                                   const float* bias, float* out) {
  depthwise3x3_s2_even_impl<v8f, 8, false>(p, in, weight, bias, out);
}

#endif

}  // namespace fx::kernels
