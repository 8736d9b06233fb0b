// Convolution and pooling kernels (NCHW, float32) of the executor.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/gemm.h"

namespace fx::kernels {

/// 2-D convolution parameters in ONNX's terms (Conv with 2 spatial dims).
struct Conv2dParams {
  int64_t N = 1, C = 1, H = 1, W = 1;  ///< input
  int64_t M = 1;                       ///< output channels
  int64_t KH = 1, KW = 1;              ///< kernel
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t group = 1;
  /// A residual Add fused into the store: out += residual, element by element (a tensor of the
  /// output's shape that does not overlap it), after the bias and before the clamp. Null: none.
  const float* residual = nullptr;
  /// A per-channel Mul fused before the convolution (a squeeze-and-excitation block's scale): the
  /// input is read as in[n, c, h, w] * in_scale[n * in_scale_stride + c], each product rounded as
  /// the Mul would round it. 1x1 stride-1 convolutions scale the GEMM's packed panels; the others
  /// scale a copy of the input first. Null: none.
  const float* in_scale = nullptr;
  int64_t in_scale_stride = 0;  ///< C (a scale per image), or 0 (one for every image)
  /// Activation fused into the store: out = min(max(out, clamp_lo), clamp_hi) (Relu: 0, inf).
  float clamp_lo = -__builtin_inff(), clamp_hi = __builtin_inff();
  /// The tiling of a convolution conv2d runs as Winograd (winograd_output_tile): 0 (and any value
  /// but 2 and 4) lets conv2d choose, 2 asks for F(2x2, 3x3), 4 for F(4x4, 3x3) (4x fewer
  /// multiplications than im2col, against 2.25x, and a few more rounding errors).
  int64_t winograd_tile = 0;

  int64_t out_h() const {
    return (H + pad_top + pad_bottom - dilation_h * (KH - 1) - 1) / stride_h + 1;
  }
  int64_t out_w() const {
    return (W + pad_left + pad_right - dilation_w * (KW - 1) - 1) / stride_w + 1;
  }
};

/// out[N, M, OH, OW] = conv(in[N, C, H, W], weight[M, C/group, KH, KW]) + bias[M] (bias may be
/// null) + p.residual, clamped. Depthwise convolutions (group == C == M) run a direct kernel, 1x1
/// stride-1 unpadded ones a plain GEMM, first layers of few input channels a direct kernel on
/// AVX-512 hosts (conv2d_uses_stem), most 3x3 stride-1 ones Winograd F(2x2, 3x3) or F(4x4, 3x3),
/// the rest im2col + GEMM. `scratch` needs conv2d_scratch_size(p) floats. `packed` (optional):
/// conv2d_pack_weights(p, weight), made once for many calls.
void conv2d(const Conv2dParams& p, const float* in, const float* weight, const float* bias,
            float* out, float* scratch, const std::vector<PackedOperand>* packed = nullptr);
int64_t conv2d_scratch_size(const Conv2dParams& p);
/// The weights packed for conv2d's GEMMs: one operand per group, the 16 or 36 transformed
/// matrices of a Winograd convolution, or none where conv2d runs no GEMM (depthwise). Depends on
/// M, C, KH, KW and group, and on winograd_output_tile(p) and conv2d_packs_transposed(p), which
/// the output size decides.
std::vector<PackedOperand> conv2d_pack_weights(const Conv2dParams& p, const float* weight);
/// Whether conv2d_pack_weights keeps the weights for transposed products
/// (sgemm_prefers_transposed of conv2d's GEMM shapes).
bool conv2d_packs_transposed(const Conv2dParams& p);

/// Whether conv2d runs `p` as a Winograd convolution (3x3, stride 1, dilation 1, one group,
/// enough channels and output tiles).
bool conv2d_uses_winograd(const Conv2dParams& p);
/// The side of the output tiles conv2d's Winograd convolution of `p` computes: 2 (F(2x2, 3x3),
/// 16 GEMMs), 4 (F(4x4, 3x3), 36 GEMMs), or 0 where conv2d runs no Winograd convolution.
int64_t winograd_output_tile(const Conv2dParams& p);
/// The output tiles of a Winograd convolution: the N of its GEMMs.
int64_t winograd_tiles(const Conv2dParams& p);
/// The tile rows each thread takes through all three phases (transform, products, inverse
/// transform) when winograd_conv2d splits `p` into blocks of tile rows at num_threads() threads,
/// or 0 where it splits each phase across the threads instead (one thread, few tile rows, rows
/// that split unevenly into fewer than four a thread, or transformed weights larger than the
/// transformed tiles).
int64_t winograd_block_rows(const Conv2dParams& p);
/// The Winograd path (src/kernels/winograd.cpp), which conv2d takes when conv2d_uses_winograd:
/// `U` is winograd_pack_weights(p, weight) (std::logic_error if packed for another tiling).
std::vector<PackedOperand> winograd_pack_weights(const Conv2dParams& p, const float* weight);
void winograd_conv2d(const Conv2dParams& p, const float* in, const float* bias, float* out,
                     const std::vector<PackedOperand>& U);

/// The direct path for few input channels (a network's first layer, src/kernels/conv_stem.cpp),
/// which conv2d takes when conv2d_uses_stem: AVX-512, one group, C <= 4 and C * KH * KW <= 160,
/// no dilation, stride 1 or 2 along rows, M a multiple of 8 and outputs at least 16 wide.
bool conv2d_uses_stem(const Conv2dParams& p);
void stem_conv2d(const Conv2dParams& p, const float* in, const float* weight, const float* bias,
                 float* out);
struct Pool2dParams;
/// Whether stem_conv2d_max_pool takes `p` and a max-pool `q` of its output (conv2d_uses_stem(p),
/// no residual nor input scale, q over p's output shape with at most 16 rows a window, and the
/// rows a window spans at most 16 MB).
bool stem_fuses_max_pool(const Conv2dParams& p, const Pool2dParams& q);
/// max_pool2d(q) of stem_conv2d(p)'s output in one pass, the same values: each thread computes
/// the convolution's rows as its pooled rows' windows reach them, into a few rows that stay in
/// cache, and pools them there; the convolution's output never goes to memory (a first layer's is
/// 3 MB, written, read back and pooled to a quarter of it).
void stem_conv2d_max_pool(const Conv2dParams& p, const Pool2dParams& q, const float* in,
                          const float* weight, const float* bias, float* out);

/// The depthwise path (src/kernels/depthwise.cpp), which conv2d takes when group == C == M > 1.
void depthwise_conv2d(const Conv2dParams& p, const float* in, const float* weight,
                      const float* bias, float* out);

/// Direct 7-loop convolution (double accumulation), the reference conv2d is tested against.
void conv2d_reference(const Conv2dParams& p, const float* in, const float* weight,
                      const float* bias, float* out);

/// Pooling window parameters (MaxPool / AveragePool with 2 spatial dims).
struct Pool2dParams {
  int64_t N = 1, C = 1, H = 1, W = 1;
  int64_t KH = 1, KW = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  bool ceil_mode = false;
  /// AveragePool: divide by the full window (true) or by the in-bounds part (false, ONNX's
  /// default count_include_pad = 0).
  bool count_include_pad = false;

  int64_t out_h() const { return out_dim(H, KH, stride_h, pad_top, pad_bottom, dilation_h); }
  int64_t out_w() const { return out_dim(W, KW, stride_w, pad_left, pad_right, dilation_w); }

 private:
  int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t pad_begin, int64_t pad_end,
                  int64_t d) const {
    const int64_t span = in + pad_begin + pad_end - d * (k - 1) - 1;
    int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    // ceil_mode (as PyTorch and onnxruntime): the last window must start inside the input or
    // its leading padding.
    if (ceil_mode && (out - 1) * s >= in + pad_begin) --out;
    return out;
  }
};

/// MaxPool: padding never wins (it is -inf).
void max_pool2d(const Pool2dParams& p, const float* in, float* out);
/// One output row of max_pool2d for `channels` channels: channel c's window rows inside the
/// input are rows[i] + c * in_stride (i < n, in window order, p.W floats each), its output row
/// out + c * out_stride (p.out_w() floats). The values max_pool2d gives: a NaN in a window wins.
void max_pool2d_rows(const Pool2dParams& p, const float* const* rows, int64_t n, int64_t channels,
                     int64_t in_stride, float* out, int64_t out_stride);
/// AveragePool.
void avg_pool2d(const Pool2dParams& p, const float* in, float* out);
/// GlobalAveragePool: out[N, C] = mean over H x W.
void global_avg_pool(int64_t N, int64_t C, int64_t HW, const float* in, float* out);
/// The mean of one plane x[0, HW) as global_avg_pool computes it (the same bits).
float global_avg_plane(const float* x, int64_t HW);

}  // namespace fx::kernels
