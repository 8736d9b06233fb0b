// The channel-interleaved depthwise kernel (see depthwise_interleaved.h).
#include "kernels/depthwise_interleaved.h"

#ifdef FXWASM_X86_DISPATCH

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/scratch.h"
#include "kernels/simd.h"

namespace fx::kernels {

namespace {

// The 8- and 16-lane helpers are only ever inlined into the AVX2 and AVX-512 functions below:
// GCC's note that returning such vectors without AVX changes the ABI does not apply. (GCC reports
// it at the end of the file, so it stays off from here on.)
#pragma GCC diagnostic ignored "-Wpsabi"

template <int N>
using int_c = std::integral_constant<int, N>;

typedef float v8f __attribute__((vector_size(32)));

// r[0..8) rows of an 8x8 block -> its columns (three rounds of shuffles).
__attribute__((always_inline)) inline void transpose8x8(v8f* r) {
  v8f t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4)
    for (int h = 0; h < 2; ++h) {
      u[i + 2 * h] = __builtin_shufflevector(t[i + h], t[i + 2 + h], 0, 1, 8, 9, 4, 5, 12, 13);
      u[i + 2 * h + 1] =
          __builtin_shufflevector(t[i + h], t[i + 2 + h], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  for (int i = 0; i < 4; ++i) {
    r[i] = __builtin_shufflevector(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    r[i + 4] = __builtin_shufflevector(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

// Depthwise KxK (K <= 7) on small planes (the 28x28, 14x14 and 7x7 layers of MobileNet, where
// rows are too short for vectors along them), and every 5x5 and 7x7 (ConvNeXt's, EfficientNet's,
// where the scalar row loop ran at 2-6 GMAC/s): L channels at a time (the lanes of V), interleaved
// into a zero-padded buffer P[row][col][channel] (8x8 blocks transposed in registers), so every tap
// of L outputs is one vector load and one multiply-add with no bounds checks; the results are
// de-interleaved into the planes at the end the same way.
template <class V, int L>
__attribute__((always_inline)) inline void depthwise_small_impl(const Conv2dParams& p,
                                                                const float* in,
                                                                const float* weight,
                                                                const float* bias, float* out) {
  static_assert(L % 8 == 0 && sizeof(V) == L * sizeof(float), "L lanes, in blocks of eight");
  auto load = [](const float* q) __attribute__((always_inline)) {
    V v;
    std::memcpy(&v, q, sizeof v);
    return v;
  };
  auto load8 = [](const float* q) __attribute__((always_inline)) {
    v8f v;
    std::memcpy(&v, q, sizeof v);
    return v;
  };
  const int64_t OH = p.out_h(), OW = p.out_w(), sh = p.stride_h, sw = p.stride_w;
  const int64_t KH = p.KH, KW = p.KW, taps = KH * KW;
  const int64_t Hp = (OH - 1) * sh + KH, Wp = (OW - 1) * sw + KW, HW = p.H * p.W;
  const bool clamp = p.clamp_lo > -__builtin_inff() || p.clamp_hi < __builtin_inff();
  const V lo = V{} + p.clamp_lo, hi = V{} + p.clamp_hi;
  // From 64-byte boundaries: each pixel's L channels are then whole cache lines (sixteen lanes),
  // and no tap's load straddles two. With malloc's 16-byte alignment three loads in four did
  // (sixteen lanes, min of 200): 5x5 28x28 x 240 333 -> 216 us, 56x56/2 x 144 313 -> 231, 14x14
  // x 672 228 -> 147; 7x7 56x56 x 96 693 -> 424, 14x14 x 384 193 -> 123. EfficientNet-B0's 5x5
  // layers 25-35 % faster in the model, its convolutions 10.06 -> 9.50 ms (sums of per-node
  // minimums).
  float* const P = aligned_floats(scratch(Scratch::ConvP), Hp * Wp * L);
  float* const T = aligned_floats(scratch(Scratch::ConvT), OH * OW * L);
  // Zeroed once per call: every block writes the same interior cells (all L lanes of each, or
  // its first `lanes` in a partial last block, whose other lanes are never stored), so the
  // padding stays zero. (Zeroing per block was 10 MB of memset per MobileNetV2 run.)
  std::fill(P, P + Hp * Wp * L, 0.0f);
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t c0 = 0; c0 < p.C; c0 += L) {
      const int64_t lanes = std::min<int64_t>(L, p.C - c0);
      V w[kMaxDepthwiseTaps], b;
      const float* planes = in + (n * p.C + c0) * HW;
      int64_t pix = 0;
      if (lanes == L) {  // eight pixels of eight planes at a time, transposed in registers
        int64_t ih = p.pad_top, iw = p.pad_left;  // where pixel `pix + k` goes in P
        for (; pix + 8 <= HW; pix += 8) {
          v8f r[L / 8][8];
          for (int h = 0; h < L / 8; ++h) {
            for (int j = 0; j < 8; ++j) r[h][j] = load8(planes + (8 * h + j) * HW + pix);
            transpose8x8(r[h]);
          }
          for (int k = 0; k < 8; ++k) {
            if (ih < Hp && iw < Wp)
              for (int h = 0; h < L / 8; ++h)
                std::memcpy(&P[static_cast<size_t>((ih * Wp + iw) * L + 8 * h)], &r[h][k],
                            sizeof(v8f));
            if (++iw == p.W + p.pad_left) {  // (counters: a division per pixel cost 10-30 %)
              iw = p.pad_left;
              ++ih;
            }
          }
        }
      }
      for (int64_t j = 0; j < lanes; ++j)
        for (int64_t q = pix; q < HW; ++q) {
          const int64_t ih = q / p.W + p.pad_top, iw = q % p.W + p.pad_left;
          if (ih < Hp && iw < Wp)
            P[static_cast<size_t>((ih * Wp + iw) * L + j)] = planes[j * HW + q];
        }
      {  // the taps and biases of these channels, lane j channel c0 + j (built in memory: lane
         // inserts into the vectors cost more than the taps' products on 7x7 planes)
        float wt[kMaxDepthwiseTaps * L] = {}, bt[L] = {};
        for (int64_t j = 0; j < lanes; ++j) {
          for (int64_t k = 0; k < taps; ++k) wt[k * L + j] = weight[(c0 + j) * taps + k];
          bt[j] = bias ? bias[c0 + j] : 0.0f;
        }
        std::memcpy(w, wt, static_cast<size_t>(taps) * sizeof(V));
        std::memcpy(&b, bt, sizeof b);
      }
      // Four outputs of a row at a time, each its own sum: one output at a time was a chain of
      // KH * KW dependent adds, so the adds' latency, not their throughput, set the pace (7x7
      // x 960: 0.041 -> 0.023 ms). A row's last four (when it has at least four) cover its
      // tail, recomputing up to three outputs with the same bits. Each output adds its taps in
      // the same order either way.
      // (KH and KW as constants for 3x3, 5x5 and 7x7: the tap loops unrolled, the taps in
      // registers. EfficientNet-B0's 5x5 layers in the model, min of 300 at one thread: 14x14 x
      // 480 95.9 -> 86.3 us, 14x14 x 672 134 -> 122, 7x7 x 1152 73.4 -> 65.7, 28x28 x 240 161 ->
      // 143; the model 0.995x, eight rounds alternating.)
      auto rows = [&](auto kh_c, auto kw_c) __attribute__((always_inline)) {
        constexpr int CKH = decltype(kh_c)::value, CKW = decltype(kw_c)::value;
        const int64_t kh_n = CKH ? CKH : KH, kw_n = CKW ? CKW : KW;
        auto outputs = [&](int64_t oh, int64_t ow, auto count) __attribute__((always_inline)) {
          constexpr int B = decltype(count)::value;
          const float* q = &P[static_cast<size_t>((oh * sh * Wp + ow * sw) * L)];
          V acc[B];
          for (int j = 0; j < B; ++j) acc[j] = b;
          for (int64_t kh = 0; kh < kh_n; ++kh)
            for (int64_t kw = 0; kw < kw_n; ++kw) {
              const V wk = w[kh * kw_n + kw];
              const float* t = q + (kh * Wp + kw) * L;
              for (int j = 0; j < B; ++j) acc[j] += wk * load(t + j * sw * L);
            }
          for (int j = 0; j < B; ++j) {
            if (clamp) acc[j] = clamp_v(acc[j], lo, hi);
            std::memcpy(&T[static_cast<size_t>((oh * OW + ow + j) * L)], &acc[j], sizeof(V));
          }
        };
        auto row = [&](int64_t oh, auto count) __attribute__((always_inline)) {
          constexpr int B = decltype(count)::value;
          for (int64_t ow = 0; ow + B <= OW; ow += B) outputs(oh, ow, count);
          if (OW % B) outputs(oh, OW - B, count);
        };
        for (int64_t oh = 0; oh < OH; ++oh) {
          if (OW >= 8) {
            row(oh, int_c<8>{});
          } else if (OW >= 4) {
            row(oh, int_c<4>{});
          } else {
            for (int64_t ow = 0; ow < OW; ++ow) outputs(oh, ow, int_c<1>{});
          }
        }
      };
      if (KH == 3 && KW == 3)
        rows(int_c<3>{}, int_c<3>{});
      else if (KH == 5 && KW == 5)
        rows(int_c<5>{}, int_c<5>{});
      else if (KH == 7 && KW == 7)
        rows(int_c<7>{}, int_c<7>{});
      else
        rows(int_c<0>{}, int_c<0>{});
      float* outs = out + (n * p.C + c0) * OH * OW;
      int64_t done = 0;
      if (lanes == L) {
        for (; done + 8 <= OH * OW; done += 8)
          for (int h = 0; h < L / 8; ++h) {
            v8f r[8];
            for (int k = 0; k < 8; ++k)
              r[k] = load8(&T[static_cast<size_t>((done + k) * L + 8 * h)]);
            transpose8x8(r);
            for (int j = 0; j < 8; ++j)
              std::memcpy(outs + (8 * h + j) * OH * OW + done, &r[j], sizeof(v8f));
          }
      }
      for (int64_t j = 0; j < lanes; ++j)
        for (int64_t i = done; i < OH * OW; ++i)
          outs[j * OH * OW + i] = T[static_cast<size_t>(i * L + j)];
    }
  }
}

typedef float v16f __attribute__((vector_size(64)));

}  // namespace

// Whether the channel-interleaved 3x3 kernel beats the row path. Min-of-30 times with eight lanes
// (AVX2): 7x7 x 960 0.083 -> 0.034 ms, 14x14 x 576 0.097 -> 0.080, but at stride 2 with 14-wide
// rows it lost (0.045 -> 0.056). With sixteen (AVX-512) it wins up to 28-wide rows at either stride
// (28x28 x 192: 0.102 -> 0.061, 28x28/2 0.044 -> 0.031) and on 56-wide ones at stride 1
// (56x56 x 144: 0.229 -> 0.187), but loses on 112x112/2 (0.243 -> 0.274).
bool depthwise_small_plane(const Conv2dParams& p, bool avx512) {
  if (avx512) return p.out_w() <= 32 || (p.stride_w == 1 && p.out_w() <= 64);
  return p.out_w() <= 8 || (p.stride_w == 1 && p.out_w() <= 16);
}

__attribute__((target("avx2,fma"))) void depthwise_interleaved_avx2(const Conv2dParams& p,
                                                                    const float* in,
                                                                    const float* weight,
                                                                    const float* bias, float* out) {
  depthwise_small_impl<v8f, 8>(p, in, weight, bias, out);
}

__attribute__((target("avx512f,avx2,fma"))) void depthwise_interleaved_avx512(
    const Conv2dParams& p, const float* in, const float* weight, const float* bias, float* out) {
  depthwise_small_impl<v16f, 16>(p, in, weight, bias, out);
}

}  // namespace fx::kernels

#endif
