// Depthwise convolutions (group == C == M: MobileNet, EfficientNet, ConvNeXt), direct kernels:
// a flat whole-plane kernel for 3x3 at stride 1 (at stride 2 (x86, depthwise_s2.cpp): planes
// split into even and odd columns, or phase planes on wide rows), a channel-interleaved kernel for
// small planes and larger windows (x86, depthwise_interleaved.cpp), a row kernel otherwise for 3x3,
// a zero-padded-plane kernel for other windows at stride 1 or 2 along rows, and a scalar loop for
// the rest. Threads split the channels.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/conv.h"
#include "kernels/cpu.h"
#include "kernels/depthwise_flat.h"
#include "kernels/depthwise_interleaved.h"
#include "kernels/scratch.h"
#include "kernels/simd.h"
#include "kernels/thread_pool.h"

namespace fx::kernels {

namespace {

using DepthwiseFn = void (*)(const Conv2dParams& p, const float* in, const float* weight,
                             const float* bias, float* out);
// A depthwise kernel and the channels it computes together (threads split whole blocks of them).
struct DepthwiseKernel {
  DepthwiseFn fn;
  int64_t channels;
};

// Depthwise 3x3, dilation 1, stride 1 or 2 (MobileNet, EfficientNet, ShuffleNet): each output
// row is accumulated in registers from the three input rows it reads (rows outside the image
// read a zero row), L columns at a time in the interior (vector V of L floats), scalar at the
// borders; bias and the fused activation are applied as the row is stored. Instantiated with
// four lanes (SSE natively, simd128 in wasm) and, on x86-64 CPUs with AVX2, eight.
// (The 8-lane instance is only ever inlined into the AVX2 function: GCC's note that passing
// 32-byte vectors without AVX changes the ABI does not apply. GCC reports it at the end of the
// file, so it stays off from here on.)
#pragma GCC diagnostic ignored "-Wpsabi"
// Output columns [from, to) of one depthwise 3x3 row at stride S, lanes of VT at a time, for
// columns whose taps are all inside the input rows r[0..3) (and so are the vector loads: at
// stride 2 a tap's lanes are the even ones of twice as many floats).
template <class VT, int S>
__attribute__((always_inline)) inline void depthwise3x3_span(const float* const* r, const VT* wv,
                                                             VT bv, bool clamp, VT lo, VT hi,
                                                             int64_t pad_left, int64_t from,
                                                             int64_t to, float* orow) {
  constexpr int64_t kLanes = sizeof(VT) / sizeof(float);
  auto load = [](const float* q) __attribute__((always_inline)) {
    VT v;
    std::memcpy(&v, q, sizeof v);
    return v;
  };
  auto tap = [&](const float* q) __attribute__((always_inline)) {
    if constexpr (S == 1)
      return load(q);
    else if constexpr (kLanes == 4)
      return __builtin_shufflevector(load(q), load(q + 4), 0, 2, 4, 6);
    else
      return __builtin_shufflevector(load(q), load(q + 8), 0, 2, 4, 6, 8, 10, 12, 14);
  };
  for (int64_t ow = from; ow < to; ow += kLanes) {
    const int64_t i = ow * S - pad_left;
    VT rows[3];  // one chain per input row, summed at the end: shorter dependency chains
    for (int kh = 0; kh < 3; ++kh)
      rows[kh] = wv[kh * 3] * tap(r[kh] + i) + wv[kh * 3 + 1] * tap(r[kh] + i + 1) +
                 wv[kh * 3 + 2] * tap(r[kh] + i + 2);
    VT acc = bv + rows[0] + rows[1] + rows[2];
    if (clamp) acc = clamp_v(acc, lo, hi);
    std::memcpy(orow + ow, &acc, sizeof acc);
  }
}

template <class V, int L>
__attribute__((always_inline)) inline void depthwise3x3_impl(const Conv2dParams& p, const float* in,
                                                             const float* weight, const float* bias,
                                                             float* out) {
  auto splat_v = [](float x) __attribute__((always_inline)) { return V{} + x; };
  const int64_t OH = p.out_h(), OW = p.out_w(), sw = p.stride_w, pl = p.pad_left;
  const bool clamp = p.clamp_lo > -__builtin_inff() || p.clamp_hi < __builtin_inff();
  ScratchBuffer& zero_row = scratch(Scratch::ConvZeroRow);
  zero_row.assign(static_cast<size_t>(p.W + 2 * L + 8), 0.0f);
  // Interior columns: every tap inside the row, and (for the vector loads) the `lanes` or
  // 2 * `lanes` floats read from the last tap's start too. L lanes from v_lo to v_hi, then four
  // lanes to v_hi4 (when L is 8), then scalar.
  int64_t v_lo = (pl + sw - 1) / sw;  // first ow with ow * sw - pl >= 0
  if (v_lo > OW) v_lo = OW;
  auto interior_end = [&](int64_t from, int64_t lanes) {
    const int64_t reach = sw == 1 ? lanes : 2 * lanes;  // floats one load covers from a tap
    int64_t end = from;
    while (end + lanes - 1 < OW && (end * sw - pl) + 2 + reach - 1 <= p.W - 1) end += lanes;
    return end;
  };
  const int64_t v_hi = interior_end(v_lo, L);
  const int64_t v_hi4 = L == 4 ? v_hi : interior_end(v_hi, 4);
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t c = 0; c < p.C; ++c) {
      const float* plane = in + (n * p.C + c) * p.H * p.W;
      const float* w = weight + c * 9;
      float* o = out + (n * p.C + c) * OH * OW;
      const float b = bias ? bias[c] : 0.0f;
      V wv[9];
      v4f wv4[9];
      for (int k = 0; k < 9; ++k) {
        wv[k] = splat_v(w[k]);
        wv4[k] = splat(w[k]);
      }
      const V lo = splat_v(p.clamp_lo), hi = splat_v(p.clamp_hi), bv = splat_v(b);
      const v4f lo4 = splat(p.clamp_lo), hi4 = splat(p.clamp_hi), b4 = splat(b);
      for (int64_t oh = 0; oh < OH; ++oh) {
        const float* r[3];
        for (int64_t kh = 0; kh < 3; ++kh) {
          const int64_t ih = oh * p.stride_h - p.pad_top + kh;
          r[kh] = ih < 0 || ih >= p.H ? zero_row.data() : plane + ih * p.W;
        }
        float* orow = o + oh * OW;
        auto scalar = [&](int64_t ow) {
          float acc = b;
          for (int64_t kw = 0; kw < 3; ++kw) {
            const int64_t iw = ow * sw - pl + kw;
            if (iw < 0 || iw >= p.W) continue;
            acc += w[kw] * r[0][iw] + w[3 + kw] * r[1][iw] + w[6 + kw] * r[2][iw];
          }
          if (clamp) acc = std::min(std::max(acc, p.clamp_lo), p.clamp_hi);
          orow[ow] = acc;
        };
        for (int64_t ow = 0; ow < v_lo; ++ow) scalar(ow);
        // The interior: L lanes at a time, then (when L is 8) four.
        if (sw == 1) {
          depthwise3x3_span<V, 1>(r, wv, bv, clamp, lo, hi, pl, v_lo, v_hi, orow);
          depthwise3x3_span<v4f, 1>(r, wv4, b4, clamp, lo4, hi4, pl, v_hi, v_hi4, orow);
        } else {
          depthwise3x3_span<V, 2>(r, wv, bv, clamp, lo, hi, pl, v_lo, v_hi, orow);
          depthwise3x3_span<v4f, 2>(r, wv4, b4, clamp, lo4, hi4, pl, v_hi, v_hi4, orow);
        }
        for (int64_t ow = v_hi4; ow < OW; ++ow) scalar(ow);
      }
    }
  }
}

// Depthwise 3x3 at stride 1 with one pixel of padding on every side, each plane taken as one
// flat array: output p = oh * W + ow is the sum over the taps of w[kh][kw] * x[p + (kh - 1) * W
// + kw - 1]. The input is read from a copy with zeros before and after it (the rows above and
// below the plane); a tap of column kw = 0 (kw = 2) is masked off where ow = 0 (ow = W - 1),
// as its flat neighbour there is the end of the previous (start of the next) row. Every tap of
// L outputs is then one unaligned load and one multiply-add, with no transposes and no row ends,
// whatever the plane's width (a 7-wide row otherwise leaves most lanes idle or pays for
// interleaving channels). Each output sums its taps in one order (column 1, then the masked
// columns 0 and 2, each top to bottom), so a channel's bits do not depend on the thread split.
template <class V, int L>
__attribute__((always_inline)) inline void depthwise3x3_flat_impl(const Conv2dParams& p,
                                                                  const float* in,
                                                                  const float* weight,
                                                                  const float* bias, float* out) {
  using I = decltype(V{} < V{});
  const auto load = flat_load<V>;
  const auto keep = flat_keep<V>;
  const int64_t W = p.W, HW = p.H * p.W, nv = (HW + L - 1) / L;
  const int64_t lead = (W + 1 + L - 1) / L * L;  // zeros before the plane, whole vectors
  const bool clamp = p.clamp_lo > -__builtin_inff() || p.clamp_hi < __builtin_inff();
  const V lo = V{} + p.clamp_lo, hi = V{} + p.clamp_hi;
  // The padded plane: zeros, the plane (copied per channel), zeros past the last vector's taps.
  const int64_t x_floats = lead + nv * L + W + 1 + L;
  float* const X = aligned_floats(scratch(Scratch::ConvP), x_floats);
  std::fill(X, X + x_floats, 0.0f);
  // The column masks of each output vector: lanes with ow > 0, then lanes with ow < W - 1 (not
  // needed when each vector lies inside one row).
  ScratchBuffer& Mbuf = scratch(Scratch::ConvT);
  Mbuf.resize(static_cast<size_t>(2 * nv * L));
  for (int64_t v = 0, ow = 0; v < nv && W % L != 0; ++v) {
    I m0, m2;
    for (int j = 0; j < L; ++j, ow = ow + 1 == W ? 0 : ow + 1) {
      m0[j] = ow > 0 ? -1 : 0;
      m2[j] = ow < W - 1 ? -1 : 0;
    }
    std::memcpy(&Mbuf[static_cast<size_t>(2 * v * L)], &m0, sizeof m0);
    std::memcpy(&Mbuf[static_cast<size_t>((2 * v + 1) * L)], &m2, sizeof m2);
  }
  // (Read through a local pointer: through the buffer the compiler reloads its data pointer after
  // every store of outputs, which might have changed it.)
  const float* const masks = Mbuf.data();
  I first_lanes, last_lanes;  // lanes with ow > 0, with ow < W - 1, in a vector inside one row
  for (int j = 0; j < L; ++j) {
    first_lanes[j] = j > 0 ? -1 : 0;
    last_lanes[j] = j < L - 1 ? -1 : 0;
  }
  float* x = X + lead;
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t c = 0; c < p.C; ++c) {
      // The plane into the padded buffer: small planes in vectors (a memcpy call was a sixth of
      // a 7x7 plane's time), the last overlapping the one before, within the plane; from 28x28
      // on the vector loop lost 2-9 % to memcpy.
      // On larger planes of whole-vector rows only the head and the tail are copied: a vector
      // whose taps all lie in the plane (outputs [f, f + L) read [f - W - 1, f + L + W]) reads
      // the input in place. Min of 2000, alone, sixteen lanes: 112x112 x 32 142 -> 121 us,
      // 112x112 x 96 488 -> 426 (copying the planes was 1.5 % of EfficientNet-B0's run); with
      // eight lanes at 56 wide it tied; on masked rows (28x28 x 192) it lost 3-5 %, so those copy.
      const float* src = in + (n * p.C + c) * HW;
      const int64_t edge = 2 * W + L + 2;  // the head (tail) vectors read no further in (back)
      const bool in_place = W % L == 0 && HW > 256 && HW > 2 * edge;
      if (in_place) {
        std::memcpy(x, src, static_cast<size_t>(edge) * sizeof(float));
        std::memcpy(x + HW - edge, src + HW - edge, static_cast<size_t>(edge) * sizeof(float));
      } else if (HW <= 256 && HW >= L) {
        for (int64_t i = 0; i + L < HW; i += L) std::memcpy(x + i, src + i, sizeof(V));
        std::memcpy(x + HW - L, src + HW - L, sizeof(V));
      } else {
        std::memcpy(x, src, static_cast<size_t>(HW) * sizeof(float));
      }
      // The outputs [f, f + L) read from the input itself, or from the padded copy.
      auto at = [&](int64_t f) __attribute__((always_inline)) {
        return in_place && f >= W + 1 && f + L + W + 1 <= HW ? src + f : x + f;
      };
      float* o = out + (n * p.C + c) * HW;
      V w[9];
      for (int k = 0; k < 9; ++k) w[k] = V{} + weight[c * 9 + k];
      const V b = V{} + (bias ? bias[c] : 0.0f);
      // The three columns of taps of the L outputs at q, each summed top to bottom; the output is
      // then column 1, then columns 0 and 2 (masked where their taps are off the row), clamped.
      auto columns = [&](const float* q, V* col) __attribute__((always_inline)) {
        for (int kw = 0; kw < 3; ++kw)
          col[kw] = w[kw] * load(q - W + kw - 1) + w[3 + kw] * load(q + kw - 1) +
                    w[6 + kw] * load(q + W + kw - 1);
      };
      auto clamped = [&](V acc) __attribute__((always_inline)) {
        return clamp ? clamp_v(acc, lo, hi) : acc;
      };
      if (W % L == 0) {
        // Every vector inside one row: only a row's first (last) vector has taps left (right) of
        // it, so the others need no masks (the same sums: a mask of all lanes keeps them all).
        auto vec = [&](const float* q, float* dst, auto left, auto right)
            __attribute__((always_inline)) {
          V col[3];
          columns(q, col);
          if constexpr (decltype(left)::value) col[0] = keep(col[0], first_lanes);
          if constexpr (decltype(right)::value) col[2] = keep(col[2], last_lanes);
          const V acc = clamped(b + col[1] + col[0] + col[2]);
          std::memcpy(dst, &acc, sizeof acc);
        };
        for (int64_t r = 0; r < p.H; ++r) {
          const int64_t f = r * W;
          float* orow = o + f;
          if (W == L) {
            vec(at(f), orow, std::true_type{}, std::true_type{});
            continue;
          }
          vec(at(f), orow, std::true_type{}, std::false_type{});
          for (int64_t ow = L; ow + L < W; ow += L)
            vec(at(f + ow), orow + ow, std::false_type{}, std::false_type{});
          vec(at(f + W - L), orow + W - L, std::false_type{}, std::true_type{});
        }
        continue;
      }
      // Vectors stored whole: the plane's last one too, running on into the next plane (which
      // then overwrites it), except at a call's last plane (the next is another thread's) and
      // where the run would pass the next plane (planes of under L / 2 pixels).
      const int64_t whole = c + 1 < p.C && nv * L <= 2 * HW ? nv : nv - 1;
      for (int64_t v = 0; v < nv; ++v) {
        V col[3];
        columns(at(v * L), col);
        I m0, m2;
        std::memcpy(&m0, masks + 2 * v * L, sizeof m0);
        std::memcpy(&m2, masks + (2 * v + 1) * L, sizeof m2);
        const V acc = clamped(b + col[1] + keep(col[0], m0) + keep(col[2], m2));
        if (v < whole)
          std::memcpy(o + v * L, &acc, sizeof acc);
        else
          std::memcpy(o + v * L, &acc, static_cast<size_t>(HW - v * L) * sizeof(float));
      }
    }
  }
}

bool flat_3x3(const Conv2dParams& p) {
  return p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 1 && p.pad_left == 1 &&
         p.pad_bottom == 1 && p.pad_right == 1;
}

#ifdef FXWASM_X86_DISPATCH
typedef float v8f __attribute__((vector_size(32)));
typedef float v16f __attribute__((vector_size(64)));

__attribute__((target("avx2,fma"))) void depthwise3x3_avx2(const Conv2dParams& p, const float* in,
                                                           const float* weight, const float* bias,
                                                           float* out) {
  depthwise3x3_impl<v8f, 8>(p, in, weight, bias, out);
}
__attribute__((target("avx2,fma"))) void depthwise3x3_flat_avx2(const Conv2dParams& p,
                                                                const float* in,
                                                                const float* weight,
                                                                const float* bias, float* out) {
  depthwise3x3_flat_impl<v8f, 8>(p, in, weight, bias, out);
}
__attribute__((target("avx512f,avx2,fma"))) void depthwise3x3_flat_avx512(
    const Conv2dParams& p, const float* in, const float* weight, const float* bias, float* out) {
  depthwise3x3_flat_impl<v16f, 16>(p, in, weight, bias, out);
}
#endif

// The four-lane instances (wasm's simd128; SSE natively).
void depthwise3x3_flat4(const Conv2dParams& p, const float* in, const float* weight,
                        const float* bias, float* out) {
  depthwise3x3_flat_impl<v4f, 4>(p, in, weight, bias, out);
}
void depthwise3x3_rows4(const Conv2dParams& p, const float* in, const float* weight,
                        const float* bias, float* out) {
  depthwise3x3_impl<v4f, 4>(p, in, weight, bias, out);
}

// The kernel for a 3x3 depthwise `p` (dilation 1, stride 1 or 2 along rows).
DepthwiseKernel depthwise3x3_kernel(const Conv2dParams& p) {
#ifdef FXWASM_X86_DISPATCH
  const bool eight_lanes = cpu_has_avx2_fma();
  // Sixteen lanes where the core runs 512-bit operations whole, on rows that eight lanes would
  // also need the column masks for (or sixteen need none). The same bits (each output sums its
  // taps in one order). Min of 3000 alternating on an Intel Xeon, against the eight-lane flat
  // kernel (at 112 wide, the row path): 14x14 x 576 0.86x, 14x14 x 672 0.92x, 28x28 x 192 0.84x,
  // 28x28 x 240 0.87x, 112x112 x 32 0.90x, 7x7 x 960 1.00x; at 56 wide (whole eight-lane rows,
  // masked sixteen-lane ones) 1.06x, so 56 keeps eight. Whole models, one process alternating:
  // MobileNetV2 0.98x (0.99x with 112 on the row path), ShuffleNetV2 0.99x, EfficientNet-B0 1.00x.
  if (cpu_has_full_width_avx512() && flat_3x3(p) && p.W <= 128 && (p.W % 16 == 0 || p.W % 8 != 0))
    return {depthwise3x3_flat_avx512, 1};
  // Eight lanes elsewhere: on a Zen 4 EPYC (512-bit ops in two halves, and unaligned 64-byte
  // loads crossing lines more often) the eight-lane flat kernel ran 3-15 % faster than sixteen.
  // Min of 2000, against the best path before it: 7x7 x 960 0.033 -> 0.029 ms, 14x14 x 576 0.064
  // -> 0.051, 28x28 x 192 0.080 -> 0.060, 56x56 x 144 0.269 -> 0.189. At 112x112 x 32 it tied in
  // isolation (0.192 -> 0.188) and lost inside MobileNetV2 (0.169 -> 0.184), so rows over 64 keep
  // the row path (and again once rows of whole vectors went unmasked: 0.996x). Without AVX-512
  // (a Zen 3 EPYC) the flat kernel wins on rows of whole vectors at any width, as it reads them
  // in place (min of 400, alone: 112x112 x 32 236 -> 162 us, 224x224 x 16 413 -> 303, 96x96 x 16
  // 91 -> 76; inside MobileNetV2 the 112-wide layer 0.23 -> 0.18 ms), and loses on the others,
  // which it copies (150x150 x 16 179 -> 266).
  if (eight_lanes && flat_3x3(p) && (p.W <= 64 || (p.W % 8 == 0 && !cpu_has_avx512())))
    return {depthwise3x3_flat_avx2, 1};
#else
  const bool eight_lanes = false;
#endif
  // With four lanes (wasm's simd128, SSE) the masked flat loop won only on short rows (7x7 x 960:
  // 0.081 -> 0.054 ms with SSE; from 14 wide on it tied or lost to the row path). Rows of whole
  // vectors need no masks, and in wasm those won at any width: MobileNetV2 (56, 28 and 112 wide)
  // 0.97x, EfficientNet-B0 0.98x, alternating processes. In wasm the masked loop also beats the
  // row path on rows up to 32 wide, where that leaves the columns its vectors cannot reach to a
  // scalar loop (6 of 14 at 14 wide): MobileNetV2's 14x14 layers 0.20 -> 0.12 ms (384 channels).
  if (!eight_lanes && flat_3x3(p) && (p.W <= 32 || p.W % 4 == 0)) return {depthwise3x3_flat4, 1};
#ifdef FXWASM_X86_DISPATCH
  // Even widths split flat (min of 2000, eight lanes, against the path before it: 56x56 x 144
  // 99 -> 74 us, 28x28 x 192 42 -> 26, 14x14 x 576 37 -> 26, 20x20 x 64 8.7 -> 5.6); on rows of
  // fewer than five outputs most lanes idle (8x8 x 256 5.5 -> 7.0 us), and from 96 wide the
  // phase planes' flat loop won on that Intel host (112x112 x 96 201 against 205). In wasm, with
  // four lanes, it tied the row path (MobileNetV2 1.000x), so wasm keeps that.
  // Where 512-bit operations do not run whole (AVX2, Zen 4), at every even width: on a Zen 3
  // EPYC, min of 400, alone, the phase planes -> this: 112x112 x 96 290 -> 242 us, 224x224 x 32
  // 408 -> 336, 96x96 x 32 74 -> 60; in MobileNetV2 the layer 0.31-0.35 -> 0.27 ms and the
  // product reading its output 0.26-0.27 -> 0.19 (the phase planes' buffers no longer evict it).
  // From 28 wide (14 outputs a row, one vector) sixteen lanes where the core runs 512-bit
  // operations whole: the same lanes as two eight-lane vectors in half the instructions (the
  // same bits). Min of 300, alone, Intel Xeon: 56x56 x 144 98 -> 82 us, 28x28 x 192 31.4 ->
  // 26.2, 56x56 x 58 38.9 -> 31.1, 28x28 x 240 36.7 -> 32.6; 40x40 x 64 (20 outputs: two
  // vectors either way) 18.9 both.
  if (s2_even_3x3(p) && p.W >= 10 && (p.W < 96 || !cpu_has_full_width_avx512()) &&
      cpu_has_avx2_fma()) {
    if (p.W >= 28 && cpu_has_full_width_avx512()) return {depthwise3x3_s2_even_avx512_16, 1};
    return {p.W >= 28 && cpu_has_avx512() ? depthwise3x3_s2_even_avx512 : depthwise3x3_s2_even_avx2,
            1};
  }
  // Other widths: at stride 2 the phase planes pay on rows of 48 and more (min of 2000, eight
  // lanes, against the channel-interleaved path: 56x56 x 144 0.128 -> 0.093 ms, 112x112 x 96 0.264
  // -> 0.207); on shorter rows their de-interleaving is mostly scalar tails and the interleaved
  // path wins (28x28 x 192 0.037 against 0.045). With four lanes it won only at 56 wide (SSE), so
  // wasm keeps the row path.
  // Sixteen lanes where the core runs 512-bit operations whole (the same bits; Intel Xeon, min of
  // 300, alone: 112x112 x 16 60.6 -> 49.7 us with the row-grouped loop, 97x97 x 32 91 -> 76).
  if (flat_3x3_s2(p) && p.W >= 48 && cpu_has_avx2_fma()) {
    if (cpu_has_full_width_avx512()) return {depthwise3x3_flat_s2_avx512, 1};
    return {depthwise3x3_flat_s2_avx2, 1};
  }
#endif
#ifdef FXWASM_X86_DISPATCH
  // (The channel-interleaved path pays with eight lanes; with four, in wasm, it was slower
  // than the row path.)
  if (cpu_has_avx512() && depthwise_small_plane(p, true)) return {depthwise_interleaved_avx512, 16};
  if (cpu_has_avx2_fma() && depthwise_small_plane(p, false)) return {depthwise_interleaved_avx2, 8};
  if (cpu_has_avx2_fma()) return {depthwise3x3_avx2, 1};
#endif
  // Even widths at stride 2 with four lanes (wasm): the row path reaches no output of a 14-wide
  // row with its vectors and 6 of 14 at 28 wide. Per-layer minima in MobileNetV2 (one thread,
  // row path -> this): 14 -> 7 x 576 0.176 -> 0.078 ms, 28 -> 14 x 192 0.129 -> 0.080, 56 -> 28 x
  // 144 0.365 -> 0.201, 112 -> 56 x 96 0.83 -> 0.72 (EfficientNet-B0's, unclamped, 0.68 -> 0.70).
  if (s2_even_3x3(p)) return {depthwise3x3_s2_even4, 1};
  return {depthwise3x3_rows4, 1};
}

DepthwiseKernel depthwise_kernel(const Conv2dParams& p);

}  // namespace

// The kernel is chosen once for the whole layer; threads split its channels in blocks of the
// channels it takes at once (an interleaved kernel's vector of channels, else one), so a channel
// takes the same code path, and gives the same bits, however the channels are split. (Blocks of
// 16 for every kernel split 144 channels, MobileNetV2's 56-wide layers, 64 / 80: in wasm at 2
// threads the caller then waited 47 us for the other thread each time.) Alternating processes at
// 2 threads, paired medians: MobileNetV2 natively 0.99x, EfficientNet-B0 0.98x; in wasm
// MobileNetV2 1.00x (minima 0.99x).
void depthwise_conv2d(const Conv2dParams& p, const float* in, const float* weight,
                      const float* bias, float* out) {
  const DepthwiseKernel k = depthwise_kernel(p);
  const int64_t OHW = p.out_h() * p.out_w();
  const double work =
      static_cast<double>(p.C) * static_cast<double>(OHW) * static_cast<double>(p.KH * p.KW);
  if (p.N != 1 || num_threads() < 2 || work < 2e5 || p.C < 32)
    return k.fn(p, in, weight, bias, out);
  const int64_t blocks = (p.C + k.channels - 1) / k.channels;
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    const int64_t cb = b0 * k.channels, ce = std::min(p.C, b1 * k.channels);
    Conv2dParams q = p;
    q.C = q.M = q.group = ce - cb;
    k.fn(q, in + cb * p.H * p.W, weight + cb * p.KH * p.KW, bias ? bias + cb : nullptr,
         out + cb * OHW);
  });
}

namespace {
// Depthwise KH x KW at stride 1 or 2 along rows (any stride down columns), dilation 1, on
// four-lane vectors (wasm; natively where the channel-interleaved kernels do not apply: no AVX2,
// or more than kMaxDepthwiseTaps taps): each plane is copied into a zero-padded plane
// (Hp x Wp, the padding around it), so every tap of four outputs is one load, one multiply and
// one add, with no bounds and no row ends. At stride 2 each padded row is kept as its even
// columns then its odd ones (phase halves): tap kw of outputs ow... reads padded columns
// 2 ow + kw..., which are consecutive in one half (EfficientNet-B0's 5x5 stride-2 layers; they
// ran the scalar loop below). An output row goes four vectors at a time (then two,
// then one), the taps' weights splatted once per group; a row's last vector starts at OW - 4,
// recomputing some outputs of the one before it with the same taps in the same order, so the same
// bits. Each output sums its taps row by row, left to right, from the bias (as the scalar loop
// does, padding adding +0). In wasm, one process alternating it with the scalar loop below: a 7x7
// pad 3 layer of 384 channels at 14x14 3.93 -> 0.72 ms, of 96 at 56x56 7.74 -> 3.75; ConvNeXt-T
// 0.80-0.89x, EfficientNet-B0 (5x5 at stride 1) 0.80-0.84x. (Pads of at most the kernel's size: the
// padded plane is then at most the input plane and a margin of twice the kernel around it.)
bool padded_rows(const Conv2dParams& p) {
  return (p.stride_w == 1 || p.stride_w == 2) && p.dilation_h == 1 && p.dilation_w == 1 &&
         p.out_w() >= 4 && p.KH * p.KW <= 64 && p.pad_top <= p.KH && p.pad_bottom <= p.KH &&
         p.pad_left <= p.KW && p.pad_right <= p.KW;
}

// G output vectors of one row of depthwise_padded_rows, starting at columns start[0..G); tap kw
// of output column ow is at tap[kw] + ow in a padded row.
template <int G>
inline __attribute__((always_inline)) void padded_rows_group(const float* top, int64_t Wp,
                                                             int64_t KH, int64_t KW, const float* w,
                                                             const int64_t* tap, v4f b,
                                                             const int64_t* start, bool clamp,
                                                             v4f lo, v4f hi, float* orow) {
  v4f acc[G];
  for (int g = 0; g < G; ++g) acc[g] = b;
  for (int64_t kh = 0; kh < KH; ++kh) {
    const float* row = top + kh * Wp;
    for (int64_t kw = 0; kw < KW; ++kw) {
      const v4f wv = splat(w[kh * KW + kw]);
      for (int g = 0; g < G; ++g) acc[g] += wv * load4(row + start[g] + tap[kw]);
    }
  }
  for (int g = 0; g < G; ++g) store4(orow + start[g], clamp ? clamp4(acc[g], lo, hi) : acc[g]);
}

void depthwise_padded_rows(const Conv2dParams& p, const float* in, const float* weight,
                           const float* bias, float* out) {
  constexpr int64_t L = 4;
  const int64_t OH = p.out_h(), OW = p.out_w(), KH = p.KH, KW = p.KW;
  const int64_t Hp = p.H + p.pad_top + p.pad_bottom, Wp = p.W + p.pad_left + p.pad_right;
  const bool clamp = p.clamp_lo > -__builtin_inff() || p.clamp_hi < __builtin_inff();
  const v4f lo = splat(p.clamp_lo), hi = splat(p.clamp_hi);
  ScratchBuffer& buf = scratch(Scratch::ConvRow);
  buf.assign(static_cast<size_t>(Hp * Wp), 0.0f);  // the borders stay zero for every plane
  float* const padded = buf.data();
  // A row's vectors start every L columns, the last at OW - L; they go four at a time, then two,
  // then one.
  std::vector<int64_t> start(static_cast<size_t>((OW + L - 1) / L));
  for (size_t v = 0; v < start.size(); ++v)
    start[v] = std::min(static_cast<int64_t>(v) * L, OW - L);
  const int64_t vectors = static_cast<int64_t>(start.size());
  // Where tap kw of output column 0 is in a padded row: column kw, or at stride 2 in the even
  // half (the first ceil(Wp / 2) floats) or the odd one.
  const int64_t even = (Wp + 1) / 2;
  int64_t tap[64];
  for (int64_t kw = 0; kw < KW; ++kw) tap[kw] = p.stride_w == 1 ? kw : (kw % 2) * even + kw / 2;
  // At stride 2, input column iw is padded column iw + pad_left: the input's even columns go to
  // one half from index pad_left / 2, its odd ones to the other from (pad_left + 1) / 2.
  const int64_t pl = p.pad_left;
  const int64_t to_even = (pl % 2) * even + pl / 2, to_odd = (1 - pl % 2) * even + (pl + 1) / 2;
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t c = 0; c < p.C; ++c) {
      const float* plane = in + (n * p.C + c) * p.H * p.W;
      for (int64_t ih = 0; ih < p.H; ++ih) {
        const float* src = plane + ih * p.W;
        float* dst = padded + (ih + p.pad_top) * Wp;
        if (p.stride_w == 1) {
          std::memcpy(dst + pl, src, static_cast<size_t>(p.W) * sizeof(float));
          continue;
        }
        int64_t t = 0;  // input columns 2 t and 2 t + 1
        for (; 2 * t + 8 <= p.W; t += 4) {
          const v4f v0 = load4(src + 2 * t), v1 = load4(src + 2 * t + 4);
          store4(dst + to_even + t, __builtin_shufflevector(v0, v1, 0, 2, 4, 6));
          store4(dst + to_odd + t, __builtin_shufflevector(v0, v1, 1, 3, 5, 7));
        }
        for (; 2 * t < p.W; ++t) {
          dst[to_even + t] = src[2 * t];
          if (2 * t + 1 < p.W) dst[to_odd + t] = src[2 * t + 1];
        }
      }
      const float* w = weight + c * KH * KW;
      float* o = out + (n * p.C + c) * OH * OW;
      const v4f b = splat(bias ? bias[c] : 0.0f);
      for (int64_t oh = 0; oh < OH; ++oh) {
        const float* top = padded + oh * p.stride_h * Wp;
        float* orow = o + oh * OW;
        int64_t v = 0;
        for (; v + 4 <= vectors; v += 4)
          padded_rows_group<4>(top, Wp, KH, KW, w, tap, b, &start[v], clamp, lo, hi, orow);
        for (; v + 2 <= vectors; v += 2)
          padded_rows_group<2>(top, Wp, KH, KW, w, tap, b, &start[v], clamp, lo, hi, orow);
        if (v < vectors)
          padded_rows_group<1>(top, Wp, KH, KW, w, tap, b, &start[v], clamp, lo, hi, orow);
      }
    }
  }
}

void depthwise_direct(const Conv2dParams& p, const float* in, const float* weight,
                      const float* bias, float* out);

// The kernel for a depthwise `p`.
DepthwiseKernel depthwise_kernel(const Conv2dParams& p) {
  if (p.KH == 3 && p.KW == 3 && p.dilation_h == 1 && p.dilation_w == 1 &&
      (p.stride_w == 1 || p.stride_w == 2))
    return depthwise3x3_kernel(p);
#ifdef FXWASM_X86_DISPATCH
  // Larger kernels, channel-interleaved at any plane size. ConvNeXt-T's 7x7 pad 3 layers with
  // sixteen lanes, medians, row loop -> this: 56x56 x 96 2.28 -> 0.68 ms, 28x28 x 192 1.57 ->
  // 0.35, 14x14 x 384 1.31 -> 0.19, 7x7 x 768 1.08 -> 0.10. Not in wasm: with four lanes the
  // interleaved 3x3 lost to the row loop there.
  if (p.dilation_h == 1 && p.dilation_w == 1 && p.KH * p.KW <= kMaxDepthwiseTaps) {
    if (cpu_has_avx512()) return {depthwise_interleaved_avx512, 16};
    if (cpu_has_avx2_fma()) return {depthwise_interleaved_avx2, 8};
  }
#endif
  if (padded_rows(p)) return {depthwise_padded_rows, 1};
  return {depthwise_direct, 1};
}

// Any window, stride and dilation: a scalar loop over each output row, tap by tap.
void depthwise_direct(const Conv2dParams& p, const float* in, const float* weight,
                      const float* bias, float* out) {
  const int64_t OH = p.out_h(), OW = p.out_w();
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t c = 0; c < p.C; ++c) {
      const float* plane = in + (n * p.C + c) * p.H * p.W;
      const float* w = weight + c * p.KH * p.KW;
      float* o = out + (n * p.C + c) * OH * OW;
      const float b = bias ? bias[c] : 0.0f;
      for (int64_t oh = 0; oh < OH; ++oh) {
        float* orow = o + oh * OW;
        std::fill(orow, orow + OW, b);
        for (int64_t kh = 0; kh < p.KH; ++kh) {
          const int64_t ih = oh * p.stride_h - p.pad_top + kh * p.dilation_h;
          if (ih < 0 || ih >= p.H) continue;
          const float* irow = plane + ih * p.W;
          for (int64_t kw = 0; kw < p.KW; ++kw) {
            const float wv = w[kh * p.KW + kw];
            const int64_t off = kw * p.dilation_w - p.pad_left;
            // Output columns whose input column is inside the row.
            int64_t lo = off >= 0 ? 0 : (-off + p.stride_w - 1) / p.stride_w;
            int64_t hi = (p.W - 1 - off) < 0 ? 0 : (p.W - 1 - off) / p.stride_w + 1;
            hi = std::min(hi, OW);
            if (p.stride_w == 1) {
              for (int64_t ow = lo; ow < hi; ++ow) orow[ow] += wv * irow[ow + off];
            } else {
              for (int64_t ow = lo; ow < hi; ++ow) orow[ow] += wv * irow[ow * p.stride_w + off];
            }
          }
        }
        if (p.clamp_lo > -__builtin_inff() || p.clamp_hi < __builtin_inff())
          for (int64_t ow = 0; ow < OW; ++ow)
            orow[ow] = std::min(std::max(orow[ow], p.clamp_lo), p.clamp_hi);
      }
    }
  }
}

}  // namespace

}  // namespace fx::kernels
