// Direct convolution for layers with few input channels (a network's first layer: 3 -> 24 to 64
// channels, 3x3 or 7x7, stride 2), on AVX-512 and AVX2. As im2col + GEMM these are products of K =
// 27 or 147: each 6 x 32 tile of K = 27 spent as long outside its multiply-add steps (the unfold
// into panels, the tile's set-up and store) as in them; SqueezeNet's first layer ran at 0.6x
// onnxruntime's speed and ResNet-18's 7x7 one (K = 147) at 80 against its 130 GFLOP/s.
// Here, for each output row, the KH input rows of each channel are copied once into zero-padded
// rows (at stride 2, split into even and odd columns), so every tap of a vector of adjacent
// outputs is one load; eight (AVX2: four) output channels by up to three vectors of outputs
// accumulate in registers over all C x KH x KW taps, then take the bias, residual and clamp as
// they are stored. On a Zen 3 EPYC (AVX2), alone: MobileNetV2's 3 -> 32 3x3/2 layer 413 -> 354 us
// (in the model 519 -> 461), ResNet-18's 7x7/2 3.32 -> 2.71 ms.
//
// The sums are those of the GEMM path: each output's taps in (c, kh, kw) order by FMA from
// zero, then + bias, + residual, clamped (so the same bits as the GEMM on one K slice).
//
// A max-pool of the output may run in the same pass (stem_conv2d_max_pool): the rows its windows
// reach are computed into a ring of a window's rows and pooled there, so the layer's output (3 MB
// for SqueezeNet's and ResNet-18's) is never written out and read back.
#include "kernels/conv.h"

#include <stdexcept>

#include "kernels/cpu.h"

#ifdef FXWASM_X86_DISPATCH
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/avx512.h"
#include "kernels/scratch.h"
#include "kernels/thread_pool.h"
#endif

namespace fx::kernels {

#ifdef FXWASM_X86_DISPATCH
namespace {

constexpr int64_t kMB = 8;            // output channels a block of packed weights
constexpr int64_t kMaxTaps = 160;     // C * KH * KW
constexpr int64_t kMinWidth = 16;     // output columns (a first layer is wide)
constexpr int64_t kMaxPoolRows = 16;  // a fused max-pool's window rows
constexpr int64_t kMaxPoolSpan = 64;  // rows a fused max-pool's (dilated) window spans
constexpr int64_t kMaxRingFloats = int64_t{1} << 22;  // a thread's rows for a fused max-pool

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Floats of one tap row: an output row's reach along the (phase of the) padded input row, in
// whole 16-float vectors (so also in 8-float ones), so that a row's last vector may read past
// its last output.
int64_t tap_row_floats(const Conv2dParams& p) { return round_up(p.out_w() + p.KW, 16); }
// Tap rows per output row: one per (c, kh), two at stride 2 (even and odd padded columns).
int64_t tap_rows(const Conv2dParams& p) { return p.C * p.KH * p.stride_w; }

// The even columns of a padded row P (2 * RW floats) into row[0, RW), the odd ones into
// row[RW, 2 * RW).
using SplitFn = void (*)(const float* P, float* row, int64_t RW);

__attribute__((target("avx512f"))) void split_avx512(const float* P, float* row, int64_t RW) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  for (int64_t j = 0; j < RW; j += 16) {
    const __m512 a = _mm512_loadu_ps(P + 2 * j), b = _mm512_loadu_ps(P + 2 * j + 16);
    _mm512_storeu_ps(row + j, _mm512_permutex2var_ps(a, even, b));
    _mm512_storeu_ps(row + RW + j, _mm512_permutex2var_ps(a, odd, b));
  }
}

__attribute__((target("avx2"))) void split_avx2(const float* P, float* row, int64_t RW) {
  for (int64_t j = 0; j < RW; j += 8) {
    const __m256 a = _mm256_loadu_ps(P + 2 * j), b = _mm256_loadu_ps(P + 2 * j + 8);
    // [a0 a2 b0 b2 | a4 a6 b4 b6], then its 64-bit quarters in the order 0, 2, 1, 3.
    const __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    const __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    _mm256_storeu_ps(row + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8)));
    _mm256_storeu_ps(row + RW + j,
                     _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xD8)));
  }
}

// Fills R with output row oh's tap rows: row (c * KH + kh) * S + phase holds padded input row
// oh * stride_h + kh of channel c (zeros outside the input), all of it at stride 1, its even
// (phase 0) or odd (phase 1) columns at stride 2. P: a padded row's buffer (S * RW floats).
void fill_tap_rows(const Conv2dParams& p, const float* x, int64_t oh, float* R, float* P,
                   SplitFn split) {
  const int64_t RW = tap_row_floats(p), S = p.stride_w;
  // Input columns [c0, c1) land at padded columns pad_left + c0 ...
  const int64_t c0 = std::max<int64_t>(0, -p.pad_left);
  const int64_t c1 = std::min(p.W, S * RW - p.pad_left);
  for (int64_t c = 0; c < p.C; ++c) {
    for (int64_t kh = 0; kh < p.KH; ++kh) {
      float* row = R + (c * p.KH + kh) * S * RW;
      const int64_t ih = oh * p.stride_h + kh - p.pad_top;
      float* dst = S == 1 ? row : P;
      std::memset(dst, 0, static_cast<size_t>(S * RW) * sizeof(float));
      if (ih >= 0 && ih < p.H && c1 > c0)
        std::memcpy(dst + p.pad_left + c0, x + (c * p.H + ih) * p.W + c0,
                    static_cast<size_t>(c1 - c0) * sizeof(float));
      if (S == 2) split(P, row, RW);
    }
  }
}

// A tile: output channels [m, m + kChannels) x columns [ow0, ow0 + NV * kLanes) of one output
// row (clipped to OW). `off[t]`: tap t's offset in R of output column 0; `w`: the channels'
// weights of each tap in turn, kMB apart (w[t * kMB + i]: tap t of channel m + i).
#define FXWASM_STEM_TILE_ARGS                                                           \
  const Conv2dParams &p, const float *R, const int64_t *off, int64_t T, const float *w, \
      const float *bias, int64_t ow0, float *y, const float *res, int64_t plane

// AVX-512: 8 channels x up to 3 vectors of 16 (24 accumulators of 32 registers).
template <int NV>
__attribute__((target("avx512f"))) void stem_tile_avx512(FXWASM_STEM_TILE_ARGS) {
  constexpr int64_t kL = 16;
  __m512 acc[kMB][NV];
#pragma GCC unroll 8
  for (int i = 0; i < kMB; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t t = 0; t < T; ++t) {
    const float* xt = R + off[t] + ow0;
    __m512 xv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) xv[v] = _mm512_loadu_ps(xt + v * kL);
#pragma GCC unroll 8
    for (int i = 0; i < kMB; ++i) {
      const __m512 wv = _mm512_set1_ps(w[t * kMB + i]);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(wv, xv[v], acc[i][v]);
    }
  }
  const bool clamp = p.clamp_lo > -__builtin_inff() || p.clamp_hi < __builtin_inff();
  const __m512 lo = _mm512_set1_ps(p.clamp_lo), hi = _mm512_set1_ps(p.clamp_hi);
  const int64_t OW = p.out_w();
#pragma GCC unroll 3
  for (int v = 0; v < NV; ++v) {
    const int64_t col = ow0 + v * kL;
    const int64_t n = std::min(kL, OW - col);
    const __mmask16 m = n == kL ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
#pragma GCC unroll 8
    for (int i = 0; i < kMB; ++i) {
      __m512 out = acc[i][v];
      if (bias) out = _mm512_add_ps(out, _mm512_set1_ps(bias[i]));
      if (res) out = _mm512_add_ps(out, _mm512_maskz_loadu_ps(m, res + i * plane + col));
      if (clamp) out = min512(hi, max512(lo, out));  // (the GEMM's order: a NaN stays a NaN)
      _mm512_mask_storeu_ps(y + i * plane + col, m, out);
    }
  }
}

// AVX2: 4 channels x up to 3 vectors of 8 (12 accumulators of 16 registers; each tap loads 3
// vectors and 4 weights for 12 multiply-adds, where 8 channels x 1 vector would load 9 for 8).
template <int NV>
__attribute__((target("avx2,fma"))) void stem_tile_avx2(FXWASM_STEM_TILE_ARGS) {
  constexpr int64_t kL = 8, kC = 4;
  __m256 acc[kC][NV];
#pragma GCC unroll 4
  for (int i = 0; i < kC; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_ps();
  for (int64_t t = 0; t < T; ++t) {
    const float* xt = R + off[t] + ow0;
    __m256 xv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) xv[v] = _mm256_loadu_ps(xt + v * kL);
#pragma GCC unroll 4
    for (int i = 0; i < kC; ++i) {
      const __m256 wv = _mm256_broadcast_ss(w + t * kMB + i);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(wv, xv[v], acc[i][v]);
    }
  }
  const bool clamp = p.clamp_lo > -__builtin_inff() || p.clamp_hi < __builtin_inff();
  const __m256 lo = _mm256_set1_ps(p.clamp_lo), hi = _mm256_set1_ps(p.clamp_hi);
  const int64_t OW = p.out_w();
#pragma GCC unroll 3
  for (int v = 0; v < NV; ++v) {
    const int64_t col = ow0 + v * kL;
    const int64_t n = std::min(kL, OW - col);
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
#pragma GCC unroll 4
    for (int i = 0; i < kC; ++i) {
      __m256 out = acc[i][v];
      if (bias) out = _mm256_add_ps(out, _mm256_set1_ps(bias[i]));
      if (res) out = _mm256_add_ps(out, _mm256_maskload_ps(res + i * plane + col, m));
      if (clamp) out = _mm256_min_ps(hi, _mm256_max_ps(lo, out));  // (a NaN stays a NaN)
      if (n == kL)
        _mm256_storeu_ps(y + i * plane + col, out);
      else
        _mm256_maskstore_ps(y + i * plane + col, m, out);
    }
  }
}
using TileFn = void (*)(FXWASM_STEM_TILE_ARGS);
#undef FXWASM_STEM_TILE_ARGS

// The kernels of one instruction set: lanes a vector, output channels a tile, the tiles of one,
// two and three vectors, and the even / odd split of a padded row.
struct StemKernels {
  int64_t lanes, channels;
  TileFn tile[3];
  SplitFn split;
};

const StemKernels* stem_kernels() {
  static const StemKernels avx512{
      16, kMB, {stem_tile_avx512<1>, stem_tile_avx512<2>, stem_tile_avx512<3>}, split_avx512};
  static const StemKernels avx2{
      8, 4, {stem_tile_avx2<1>, stem_tile_avx2<2>, stem_tile_avx2<3>}, split_avx2};
  return cpu_has_avx512() ? &avx512 : cpu_has_avx2_fma() ? &avx2 : nullptr;
}

// One thread's state for computing output rows: the tap rows, the weights by blocks of channels,
// each tap's offset in the tap rows.
class StemRows {
 public:
  StemRows(const StemKernels& k, const Conv2dParams& p, const float* weight)
      : k_(k),
        p_(p),
        RW_(tap_row_floats(p)),
        T_(p.C * p.KH * p.KW),
        R_(aligned_floats(scratch(Scratch::Im2col), tap_rows(p) * RW_)),
        P_(aligned_floats(scratch(Scratch::Im2colRow), p.stride_w * RW_)),
        wt_(aligned_floats(scratch(Scratch::ConvT), p.M * T_)) {
    // The weights by blocks of eight channels, tap by tap (one pointer for a tile's broadcasts).
    for (int64_t m = 0; m < p.M; ++m)
      for (int64_t t = 0; t < T_; ++t) wt_[(m / kMB * T_ + t) * kMB + m % kMB] = weight[m * T_ + t];
    const int64_t S = p.stride_w;
    for (int64_t c = 0, t = 0; c < p.C; ++c)
      for (int64_t kh = 0; kh < p.KH; ++kh)
        for (int64_t kw = 0; kw < p.KW; ++kw, ++t)
          off_[t] =
              S == 1 ? (c * p.KH + kh) * RW_ + kw : ((c * p.KH + kh) * 2 + kw % 2) * RW_ + kw / 2;
  }

  // Output row oh of the image whose input is x: channel m's row to y + m * stride (the
  // residual's at res + m * stride).
  void row(const float* x, const float* bias, int64_t oh, float* y, const float* res,
           int64_t stride) const {
    const int64_t L = k_.lanes, vectors = (p_.out_w() + L - 1) / L;
    fill_tap_rows(p_, x, oh, R_, P_, k_.split);
    for (int64_t m = 0; m < p_.M; m += k_.channels) {
      const float* const w = wt_ + m / kMB * T_ * kMB + m % kMB;
      const float* const b = bias ? bias + m : nullptr;
      // Tiles of three vectors, and of two where a one-vector tile would be left (a row of 7
      // vectors: 3 + 2 + 2): a single vector's tile loads as much as it multiplies.
      for (int64_t v = 0; v < vectors;) {
        const int64_t left = vectors - v;
        const int64_t nv = left == 1 ? 1 : left == 2 || left == 4 ? 2 : 3;
        k_.tile[nv - 1](p_, R_, off_, T_, w, b, v * L, y + m * stride,
                        res ? res + m * stride : nullptr, stride);
        v += nv;
      }
    }
  }

 private:
  const StemKernels& k_;
  const Conv2dParams& p_;
  const int64_t RW_, T_;
  float* const R_;
  float* const P_;
  float* const wt_;
  int64_t off_[kMaxTaps];
};

// Output rows [r0, r1) of all images (row r: image r / OH, row r % OH).
void stem_rows(const StemKernels& k, const Conv2dParams& p, const float* in, const float* weight,
               const float* bias, float* out, int64_t r0, int64_t r1) {
  const int64_t OH = p.out_h(), OW = p.out_w(), plane = OH * OW;
  const StemRows rows(k, p, weight);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / OH, oh = r % OH;
    const int64_t at = n * p.M * plane + oh * OW;
    rows.row(in + n * p.C * p.H * p.W, bias, oh, out + at, p.residual ? p.residual + at : nullptr,
             plane);
  }
}

// Pooled rows [r0, r1) of all images (row r: image r / PH, row r % PH) of max_pool2d(q) of
// the convolution's output: each window's convolution rows computed into a ring of `span`
// rows (all M channels each; row ih in slot ih % span, so a window's rows never share a slot)
// unless the window before computed them.
void stem_pool_rows(const StemKernels& k, const Conv2dParams& p, const Pool2dParams& q,
                    const float* in, const float* weight, const float* bias, float* out, int64_t r0,
                    int64_t r1) {
  const int64_t OH = p.out_h(), PH = q.out_h(), PW = q.out_w();
  const int64_t span = (q.KH - 1) * q.dilation_h + 1;
  const int64_t stride = round_up(p.out_w(), 16);  // a ring row's channel stride
  const StemRows rows(k, p, weight);
  float* const ring = aligned_floats(scratch(Scratch::ConvP), span * p.M * stride);
  std::vector<int64_t> held(static_cast<size_t>(span), -1);  // the row each slot holds
  const float* window[kMaxPoolRows];
  int64_t image = -1;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / PH, ph = r % PH;
    if (n != image) std::fill(held.begin(), held.end(), -1);
    image = n;
    int64_t count = 0;
    for (int64_t kh = 0; kh < q.KH; ++kh) {
      const int64_t ih = ph * q.stride_h - q.pad_top + kh * q.dilation_h;
      if (ih < 0 || ih >= OH) continue;
      const size_t slot = static_cast<size_t>(ih % span);
      float* const at = ring + static_cast<int64_t>(slot) * p.M * stride;
      if (held[slot] != ih) {
        rows.row(in + n * p.C * p.H * p.W, bias, ih, at, nullptr, stride);
        held[slot] = ih;
      }
      window[count++] = at;
    }
    max_pool2d_rows(q, window, count, p.M, stride, out + n * p.M * PH * PW + ph * PW, PH * PW);
  }
}

}  // namespace

bool conv2d_uses_stem(const Conv2dParams& p) {
  return stem_kernels() && p.group == 1 && p.C <= 4 && p.C * p.KH * p.KW <= kMaxTaps &&
         p.dilation_h == 1 && p.dilation_w == 1 && (p.stride_w == 1 || p.stride_w == 2) &&
         p.M % kMB == 0 && p.out_w() >= kMinWidth && p.out_h() >= 1;
}

void stem_conv2d(const Conv2dParams& p, const float* in, const float* weight, const float* bias,
                 float* out) {
  // Threads take whole output rows (each output's sum is the same on any thread).
  const int64_t row_flops = 2 * p.M * p.out_w() * p.C * p.KH * p.KW;
  parallel_for(p.N * p.out_h(), std::max<int64_t>(1, 200000 / row_flops),
               [&](int64_t r0, int64_t r1) {
                 stem_rows(*stem_kernels(), p, in, weight, bias, out, r0, r1);
               });
}

bool stem_fuses_max_pool(const Conv2dParams& p, const Pool2dParams& q) {
  return conv2d_uses_stem(p) && !p.residual && !p.in_scale && q.N == p.N && q.C == p.M &&
         q.H == p.out_h() && q.W == p.out_w() && q.KH >= 1 && q.KH <= kMaxPoolRows &&
         q.dilation_h >= 1 && (q.KH - 1) * q.dilation_h < kMaxPoolSpan && q.stride_h >= 1 &&
         q.out_h() >= 1 && q.out_w() >= 1 &&
         ((q.KH - 1) * q.dilation_h + 1) * p.M * round_up(p.out_w(), 16) <= kMaxRingFloats;
}

void stem_conv2d_max_pool(const Conv2dParams& p, const Pool2dParams& q, const float* in,
                          const float* weight, const float* bias, float* out) {
  if (!stem_fuses_max_pool(p, q))
    throw std::logic_error("stem_conv2d_max_pool: not a stem convolution and its max-pool");
  // Threads take whole pooled rows (each output the same on any thread; a thread's first window
  // computes its convolution rows again where the thread before computed them too).
  const int64_t row_flops = 2 * p.M * p.out_w() * p.C * p.KH * p.KW * q.stride_h;
  parallel_for(q.N * q.out_h(), std::max<int64_t>(1, 200000 / row_flops),
               [&](int64_t r0, int64_t r1) {
                 stem_pool_rows(*stem_kernels(), p, q, in, weight, bias, out, r0, r1);
               });
}
#else
bool conv2d_uses_stem(const Conv2dParams&) { return false; }
void stem_conv2d(const Conv2dParams&, const float*, const float*, const float*, float*) {
  throw std::logic_error("stem_conv2d: this build has no x86 kernels (see conv2d_uses_stem)");
}
bool stem_fuses_max_pool(const Conv2dParams&, const Pool2dParams&) { return false; }
void stem_conv2d_max_pool(const Conv2dParams&, const Pool2dParams&, const float*, const float*,
                          const float*, float*) {
  throw std::logic_error("stem_conv2d_max_pool: this build has no x86 kernels");
}
#endif

}  // namespace fx::kernels
