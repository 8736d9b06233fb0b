// Convolution as im2col + SGEMM (per image and group), with a GEMM-only path for unpadded 1x1
// stride-1 ones; depthwise convolutions run their direct kernels (depthwise.cpp), first layers
// of few input channels a direct one (conv_stem.cpp), most 3x3 stride-1 ones Winograd F(2x2,
// 3x3) or F(4x4, 3x3) (winograd.cpp).
#include "kernels/conv.h"
#include "kernels/scratch.h"
#include "kernels/thread_pool.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/simd.h"

namespace fx::kernels {

namespace {
bool is_pointwise(const Conv2dParams& p) {
  return p.KH == 1 && p.KW == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 &&
         p.pad_left == 0 && p.pad_bottom == 0 && p.pad_right == 0;
}
bool is_depthwise(const Conv2dParams& p) { return p.group == p.C && p.M == p.C && p.group > 1; }

// out[i] = min(max(out[i] + res[i], lo), hi) for i < n.
void add_clamp(float* out, const float* res, int64_t n, float lo, float hi) {
  const v4f vlo = splat(lo), vhi = splat(hi);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) store4(out + i, clamp4(load4(out + i) + load4(res + i), vlo, vhi));
  for (; i < n; ++i) out[i] = std::min(std::max(out[i] + res[i], lo), hi);
}

// Output pixels per im2col band: about kBandFloats floats of kdim rows (an L2-sized part of the
// unfolded input), at least 256 columns, then evened out into an even number of equal bands (a
// multiple of 8 columns): threads take whole bands, and 3 x 256 + 16 columns (ResNet-18's 28x28
// stride-2 layer) or 7 bands (MobileNetV2's first layer) left one thread with most of the work.
// A function of the shape alone, so the weights packed for it fit on any thread count.
int64_t im2col_band(int64_t kdim, int64_t pixels) {
  constexpr int64_t kBandFloats = 48 * 1024;
  const int64_t band = std::max<int64_t>(256, kBandFloats / kdim / 32 * 32);
  if (band >= pixels) return pixels;
  int64_t bands = (pixels + band - 1) / band;
  bands += bands & 1;
  return ((pixels + bands - 1) / bands + 7) / 8 * 8;
}

// The products conv2d's GEMM path runs, per group: M x N x K, N all the output pixels (1x1) or
// an im2col band of them.
struct GemmShape {
  int64_t M, N, K;
};
GemmShape im2col_gemm_shape(const Conv2dParams& p) {
  const int64_t kdim = (p.C / p.group) * p.KH * p.KW, OHW = p.out_h() * p.out_w();
  return {p.M / p.group, is_pointwise(p) ? OHW : im2col_band(kdim, OHW), kdim};
}

// Rows k = (c, kh, kw), c in [c0, c1), x columns [q0, q1) of the unfolded input of one image and
// group, whose columns are the output pixels oh * OW + ow: each row is written to row_at(k)
// (q1 - q0 floats), then handed to done(k, row).
template <class RowAt, class Done>
void im2col(const Conv2dParams& p, const float* in, int64_t c0, int64_t c1, int64_t q0, int64_t q1,
            RowAt&& row_at, Done&& done) {
  const int64_t OW = p.out_w();
  const int64_t oh_first = q0 / OW, oh_last = (q1 - 1) / OW;
  for (int64_t c = c0; c < c1; ++c) {
    const float* plane = in + c * p.H * p.W;
    for (int64_t kh = 0; kh < p.KH; ++kh) {
      for (int64_t kw = 0; kw < p.KW; ++kw) {
        const int64_t k = (c * p.KH + kh) * p.KW + kw;
        float* const col = row_at(k);
        const int64_t off = kw * p.dilation_w - p.pad_left;
        // Output columns whose input is inside the row: [in_lo, in_hi).
        const int64_t in_lo = std::min(OW, off >= 0 ? 0 : (-off + p.stride_w - 1) / p.stride_w);
        const int64_t in_hi = std::max(
            in_lo, std::min(OW, (p.W - 1 - off) < 0 ? 0 : (p.W - 1 - off) / p.stride_w + 1));
        for (int64_t oh = oh_first; oh <= oh_last; ++oh) {
          // This row's part of the range: output columns [from, to).
          const int64_t from = oh == oh_first ? q0 - oh * OW : 0;
          const int64_t to = oh == oh_last ? q1 - oh * OW : OW;
          float* dst = col + oh * OW - q0;  // dst[ow] is pixel (oh, ow)
          const int64_t ih = oh * p.stride_h - p.pad_top + kh * p.dilation_h;
          if (ih < 0 || ih >= p.H) {
            std::fill(dst + from, dst + to, 0.0f);
            continue;
          }
          const float* src = plane + ih * p.W;
          const int64_t lo = std::clamp(in_lo, from, to), hi = std::clamp(in_hi, lo, to);
          std::fill(dst + from, dst + lo, 0.0f);
          if (p.stride_w == 1) {
            std::memcpy(dst + lo, src + lo + off, static_cast<size_t>(hi - lo) * sizeof(float));
          } else if (p.stride_w == 2) {  // the even lanes of 8 floats, while they are in the row
            int64_t ow = lo;
            for (; ow + 4 <= hi && 2 * ow + off + 8 <= p.W; ow += 4)
              store4(dst + ow, __builtin_shufflevector(load4(src + 2 * ow + off),
                                                       load4(src + 2 * ow + off + 4), 0, 2, 4, 6));
            for (; ow < hi; ++ow) dst[ow] = src[2 * ow + off];
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow * p.stride_w + off];
          }
          std::fill(dst + hi, dst + to, 0.0f);
        }
        done(k, col);
      }
    }
  }
}

// Row k of an unfolded band (n columns) into the panels of `b`, with zeros past n in the last one.
void scatter_row(const PackedOperand& b, int64_t k, const float* row, int64_t n) {
  const int64_t w = b.panel_width();
  float* const first = b.right_at(k, 0);
  const int64_t stride = n > w ? b.right_at(k, w) - first : 0;  // between panels
  float* dst = first;
  int64_t j = 0;
  for (; j + w <= n; j += w, dst += stride)
    for (int64_t c = 0; c < w; c += 4) store4(dst + c, load4(row + j + c));
  if (j < n)
    for (int64_t c = 0; c < w; ++c) dst[c] = j + c < n ? row[j + c] : 0.0f;
}

// Floats of one band's buffer: the unfolded rows, or their panels (wider by up to a panel).
int64_t band_floats(int64_t kdim, int64_t band) {
  return std::max(kdim * band, PackedOperand::right_floats(kdim, band));
}

}  // namespace

int64_t conv2d_scratch_size(const Conv2dParams& p) {
  if (is_pointwise(p) || is_depthwise(p) || conv2d_uses_stem(p) || conv2d_uses_winograd(p))
    return 0;
  const int64_t kdim = (p.C / p.group) * p.KH * p.KW;
  // (+ 16: conv2d starts the bands at the first 64-byte boundary)
  return band_floats(kdim, im2col_band(kdim, p.out_h() * p.out_w())) + 16;
}

std::vector<PackedOperand> conv2d_pack_weights(const Conv2dParams& p, const float* weight) {
  std::vector<PackedOperand> packed;
  if (is_depthwise(p) || conv2d_uses_stem(p)) return packed;
  if (conv2d_uses_winograd(p)) return winograd_pack_weights(p, weight);
  const GemmShape s = im2col_gemm_shape(p);
  for (int64_t g = 0; g < p.group; ++g)
    packed.push_back(PackedOperand::left(false, s.M, s.K, weight + g * s.M * s.K, s.K, s.N));
  return packed;
}

bool conv2d_packs_transposed(const Conv2dParams& p) {
  if (is_depthwise(p) || conv2d_uses_stem(p)) return false;
  if (conv2d_uses_winograd(p)) return sgemm_prefers_transposed(p.M, winograd_tiles(p), p.C);
  const GemmShape s = im2col_gemm_shape(p);
  return sgemm_prefers_transposed(s.M, s.N, s.K);
}

void conv2d(const Conv2dParams& p, const float* in, const float* weight, const float* bias,
            float* out, float* scratch, const std::vector<PackedOperand>* packed) {
  // A fused per-channel scale goes into the GEMM's packing where that keeps the bits; elsewhere
  // the input is scaled first, then convolved as without the scale.
  if (p.in_scale &&
      !(is_pointwise(p) &&
        sgemm_row_scale_keeps_bits(p.M / p.group, p.out_h() * p.out_w(), p.C / p.group))) {
    // (the Mul's own kernel: x [N, C, H, W] times the scale [N or 1, C, 1, 1])
    std::vector<float> scaled(static_cast<size_t>(p.N * p.C * p.H * p.W));
    binary_f32(BinaryOp::Mul, {p.N, p.C, p.H, p.W}, in, {p.in_scale_stride ? p.N : 1, p.C, 1, 1},
               p.in_scale, scaled.data());
    Conv2dParams q = p;
    q.in_scale = nullptr;
    return conv2d(q, scaled.data(), weight, bias, out, scratch, packed);
  }
  if (is_depthwise(p)) {
    if (!p.residual) return depthwise_conv2d(p, in, weight, bias, out);
    // (no network adds a residual to a depthwise convolution's output: one pass after it)
    Conv2dParams q = p;
    q.residual = nullptr;
    q.clamp_lo = -__builtin_inff();
    q.clamp_hi = __builtin_inff();
    depthwise_conv2d(q, in, weight, bias, out);
    add_clamp(out, p.residual, p.N * p.M * p.out_h() * p.out_w(), p.clamp_lo, p.clamp_hi);
    return;
  }
  if (conv2d_uses_stem(p)) return stem_conv2d(p, in, weight, bias, out);
  if (conv2d_uses_winograd(p)) {
    const int64_t r = winograd_output_tile(p);
    if (packed && static_cast<int64_t>(packed->size()) == (r + 2) * (r + 2))
      return winograd_conv2d(p, in, bias, out, *packed);
    return winograd_conv2d(p, in, bias, out, winograd_pack_weights(p, weight));
  }
  const int64_t OH = p.out_h(), OW = p.out_w(), OHW = OH * OW;
  const int64_t cg = p.C / p.group, mg = p.M / p.group;
  const int64_t kdim = cg * p.KH * p.KW;
  // The GEMM reads the bands in place (the B operand): from a cache-line boundary.
  scratch = align64(scratch);
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t g = 0; g < p.group; ++g) {
      const float* x = in + (n * p.C + g * cg) * p.H * p.W;
      float* y = out + (n * p.M + g * mg) * OHW;
      const float* w = weight + g * mg * kdim;
      // Bias and activation are applied as the GEMM stores its results (no extra passes).
      GemmEpilogue ep;
      ep.row_bias = bias ? bias + g * mg : nullptr;
      ep.residual = p.residual ? p.residual + (n * p.M + g * mg) * OHW : nullptr;
      ep.ldr = OHW;
      ep.lo = p.clamp_lo;
      ep.hi = p.clamp_hi;
      const PackedOperand* pw =
          packed && static_cast<int64_t>(packed->size()) == p.group ? &(*packed)[g] : nullptr;
      // (a packed operand of another shape is ignored by sgemm)
      if (is_pointwise(p)) {  // 1x1, stride 1, no padding: the input already is the matrix
        const float* scale = p.in_scale ? p.in_scale + n * p.in_scale_stride + g * cg : nullptr;
        sgemm(false, false, mg, OHW, kdim, 1.0f, w, kdim, x, OHW, 0.0f, y, OHW, &ep, pw, nullptr,
              scale);
        continue;
      }
      // Unfolded and multiplied a band of output pixels at a time, so that the band's columns
      // are still in the cache when the GEMM reads them.
      const int64_t band = im2col_band(kdim, OHW);
      const int64_t bands = (OHW + band - 1) / band;
      // The bands on one thread with the pool idle (a single band: late layers, 7x7 or 14x14
      // outputs) unfold on all threads, by channels (ResNet-18's 512-channel 7x7 layers: the
      // serial unfold kept the second thread waiting for 13 % of the time).
      const bool threaded_unfold =
          bands == 1 && num_threads() > 1 && cg > 1 && kdim * band >= 32768;
      // The bands are unfolded straight into the GEMM's panels (a packed B, same bits): a
      // few-row product read an unpacked band in place, two cache lines from each of K rows per
      // tile, and a many-row one packed it again. Alone, alternating: SqueezeNet's first layer
      // 0.79-0.85x (its 64 x 1544 x 27 bands' products 0.76x), MobileNetV2's 0.82-0.89x,
      // ResNet-18's 7x7 stem 0.80-0.84x and its 64 -> 128 3x3/2 0.94x. Not for weights kept for
      // the transposed product, which reads B as its left operand.
      const bool into_panels = !(pw && pw->transposed());
      auto run_bands = [&](int64_t b0, int64_t b1, float* cols) {
        for (int64_t q0 = b0 * band; q0 < std::min(OHW, b1 * band); q0 += band) {
          const int64_t q1 = std::min(OHW, q0 + band), n = q1 - q0;
          const PackedOperand panels = PackedOperand::right_over(kdim, n, cols);
          auto unfold = [&](int64_t c0, int64_t c1) {
            if (!into_panels)
              return im2col(
                  p, x, c0, c1, q0, q1, [&](int64_t k) { return cols + k * n; },
                  [](int64_t, const float*) {});
            float* row = aligned_floats(kernels::scratch(Scratch::Im2colRow), n);
            im2col(
                p, x, c0, c1, q0, q1, [&](int64_t) { return row; },
                [&](int64_t k, const float* r) { scatter_row(panels, k, r, n); });
          };
          if (threaded_unfold) {
            const int64_t per_channel = p.KH * p.KW * n;
            parallel_for(cg, std::max<int64_t>(1, 16384 / per_channel), unfold);
          } else {
            unfold(0, cg);
          }
          GemmEpilogue band_ep = ep;
          if (ep.residual) band_ep.residual += q0;
          sgemm(false, false, mg, n, kdim, 1.0f, w, kdim, into_panels ? nullptr : cols, n, 0.0f,
                y + q0, OHW, &band_ep, pw, into_panels ? &panels : nullptr);
        }
      };
      if (bands > 1 && num_threads() > 1) {
        // Bands on threads, each unfolding into its own buffer (the band's GEMM then runs on
        // that thread alone); a band's result does not depend on which thread made it.
        parallel_for(bands, 1, [&](int64_t b0, int64_t b1) {
          ScratchBuffer& cols = kernels::scratch(Scratch::Im2col);
          run_bands(b0, b1, aligned_floats(cols, band_floats(kdim, band)));
        });
      } else {
        run_bands(0, bands, scratch);
      }
    }
  }
}

void conv2d_reference(const Conv2dParams& p, const float* in, const float* weight,
                      const float* bias, float* out) {
  const int64_t OH = p.out_h(), OW = p.out_w();
  const int64_t cg = p.C / p.group, mg = p.M / p.group;
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t m = 0; m < p.M; ++m) {
      const int64_t g = m / mg;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = bias ? bias[m] : 0.0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t kh = 0; kh < p.KH; ++kh)
              for (int64_t kw = 0; kw < p.KW; ++kw) {
                const int64_t ih = oh * p.stride_h - p.pad_top + kh * p.dilation_h;
                const int64_t iw = ow * p.stride_w - p.pad_left + kw * p.dilation_w;
                if (ih < 0 || ih >= p.H || iw < 0 || iw >= p.W) continue;
                acc += static_cast<double>(in[((n * p.C + g * cg + c) * p.H + ih) * p.W + iw]) *
                       weight[((m * cg + c) * p.KH + kh) * p.KW + kw];
              }
          const int64_t at = ((n * p.M + m) * OH + oh) * OW + ow;
          const float v = static_cast<float>(acc) + (p.residual ? p.residual[at] : 0.0f);
          out[at] = std::min(std::max(v, p.clamp_lo), p.clamp_hi);
        }
    }
}

}  // namespace fx::kernels
