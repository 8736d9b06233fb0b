// The channel-interleaved depthwise kernel (x86, depthwise_interleaved.cpp): L channels in the
// lanes of a vector (eight with AVX2, sixteen with AVX-512), interleaved into a zero-padded
// buffer, so every tap of L outputs is one load and one multiply-add. depthwise.cpp takes it for
// 3x3 on small planes and for every larger window up to 7x7.
#pragma once

#include <cstdint>

#include "kernels/conv.h"
#include "kernels/cpu.h"  // FXWASM_X86_DISPATCH

#ifdef FXWASM_X86_DISPATCH
namespace fx::kernels {

/// The largest window whose taps the kernel keeps in registers (7x7).
constexpr int64_t kMaxDepthwiseTaps = 49;

/// Whether the channel-interleaved kernel beats the row path for a 3x3 depthwise `p` with
/// sixteen lanes (`avx512`) or eight.
bool depthwise_small_plane(const Conv2dParams& p, bool avx512);

/// Depthwise KxK convolution (KH * KW <= kMaxDepthwiseTaps, dilation 1, any stride and padding),
/// eight channels at a time (AVX2 + FMA) or sixteen (AVX-512F); as depthwise_conv2d otherwise.
void depthwise_interleaved_avx2(const Conv2dParams& p, const float* in, const float* weight,
                                const float* bias, float* out);
void depthwise_interleaved_avx512(const Conv2dParams& p, const float* in, const float* weight,
                                  const float* bias, float* out);

}  // namespace fx::kernels
#endif
