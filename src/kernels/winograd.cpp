// Winograd F(2x2, 3x3) convolution (Lavin & Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2015) for 3x3 stride-1 convolutions: each 2x2 block of outputs (a tile) comes from
// a 4x4 input patch d as Y = A^T [ (G g G^T) . (B^T d B) ] A. Over all tiles and channels that
// is 16 independent GEMMs, U[xi] (M x C, the transformed weights) times V[xi] (C x tiles, the
// transformed input), 2.25x fewer multiplications than im2col + GEMM. The transforms only add,
// subtract and halve, so results stay within a few ulps of the direct convolution.
//
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1]
//   A^T = [1 1 1 0; 0 1 -1 -1]
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/conv.h"
#include "kernels/gemm.h"
#include "kernels/scratch.h"
#include "kernels/simd.h"
#include "kernels/thread_pool.h"

namespace fx::kernels {

int64_t winograd_tiles(const Conv2dParams& p) {
  return ((p.out_h() + 1) / 2) * ((p.out_w() + 1) / 2);
}

bool conv2d_uses_winograd(const Conv2dParams& p) {
  if (p.group != 1 || p.KH != 3 || p.KW != 3 || p.stride_h != 1 || p.stride_w != 1 ||
      p.dilation_h != 1 || p.dilation_w != 1)
    return false;
  // Enough channels for the GEMMs to outweigh the transforms, enough tiles to fill the GEMMs'
  // column panels. (16 input channels pay since im2col went to bands: SqueezeNet's 16 -> 64
  // expand layers, in-model min-of-90, 0.374 -> 0.347 ms natively; the model in wasm 15.9-16.7
  // -> 15.0-15.9 ms.)
  return p.C >= 16 && p.M >= 32 && winograd_tiles(p) >= 36;
}

std::vector<PackedOperand> winograd_pack_weights(const Conv2dParams& p, const float* weight) {
  const int64_t M = p.M, C = p.C;
  std::vector<float> U(static_cast<size_t>(16 * M * C));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < C; ++c) {
      const float* g = weight + (m * C + c) * 9;
      float t[4][3];  // G g
      for (int j = 0; j < 3; ++j) {
        t[0][j] = g[j];
        t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
        t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
        t[3][j] = g[6 + j];
      }
      for (int i = 0; i < 4; ++i) {  // (G g) G^T
        const float u[4] = {t[i][0], 0.5f * (t[i][0] + t[i][1] + t[i][2]),
                            0.5f * (t[i][0] - t[i][1] + t[i][2]), t[i][2]};
        for (int j = 0; j < 4; ++j) U[static_cast<size_t>(((i * 4 + j) * M + m) * C + c)] = u[j];
      }
    }
  std::vector<PackedOperand> packed;
  for (int64_t xi = 0; xi < 16; ++xi)
    packed.push_back(PackedOperand::left(false, M, C, U.data() + xi * M * C, C, winograd_tiles(p)));
  return packed;
}

void winograd_conv2d(const Conv2dParams& p, const float* in, const float* bias, float* out,
                     const std::vector<PackedOperand>& U) {
  const int64_t C = p.C, M = p.M, OH = p.out_h(), OW = p.out_w();
  const int64_t TH = (OH + 1) / 2, TW = (OW + 1) / 2, T = TH * TW;
  // Tiles go four at a time along a tile row (lanes of a vector); the lanes past the row's end
  // spill into the next row's first tiles, written after them, or into the 4 spare columns of
  // the last row: V and Mout rows are T + 4 long.
  const int64_t TWp = (TW + 3) / 4 * 4, ld = T + 4;
  // The zero-padded input: every 4x4 patch, and the 8-float loads that read it, inside.
  const int64_t Hp = 2 * TH + 2, Wp = 2 * TWp + 8;
  ScratchBuffer& padded = scratch(Scratch::WinogradPadded);
  ScratchBuffer& V = scratch(Scratch::WinogradV);
  ScratchBuffer& Mout = scratch(Scratch::WinogradM);
  padded.resize(static_cast<size_t>(C * Hp * Wp));
  V.resize(static_cast<size_t>(16 * C * ld));
  Mout.resize(static_cast<size_t>(16 * M * ld));
  const bool clamp = p.clamp_lo > -__builtin_inff() || p.clamp_hi < __builtin_inff();
  const v4f lo = splat(p.clamp_lo), hi = splat(p.clamp_hi);
  auto even = [](const float* q) {
    return __builtin_shufflevector(load4(q), load4(q + 4), 0, 2, 4, 6);
  };
  auto odd = [](const float* q) {
    return __builtin_shufflevector(load4(q), load4(q + 4), 1, 3, 5, 7);
  };

  for (int64_t n = 0; n < p.N; ++n) {
    const float* x = in + n * C * p.H * p.W;
    float* y = out + n * M * OH * OW;
    // Each plane: zero rows above and below the image, zero margins left and right of its rows.
    const int64_t right = Wp - p.pad_left - p.W;
    // Channels, the 16 products and output channels on threads: each writes its own part.
    const int64_t grain = std::max<int64_t>(1, 4096 / (Hp * Wp));
    parallel_for(C, grain, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        float* plane = &padded[static_cast<size_t>(c * Hp * Wp)];
        std::fill(plane, plane + p.pad_top * Wp, 0.0f);
        for (int64_t ih = 0; ih < p.H; ++ih) {
          float* row = plane + (ih + p.pad_top) * Wp;
          std::fill(row, row + p.pad_left, 0.0f);
          std::memcpy(row + p.pad_left, x + (c * p.H + ih) * p.W,
                      static_cast<size_t>(p.W) * sizeof(float));
          std::fill(row + p.pad_left + p.W, row + p.pad_left + p.W + right, 0.0f);
        }
        std::fill(plane + (p.pad_top + p.H) * Wp, plane + Hp * Wp, 0.0f);
      }

      // V[xi][c][t] = (B^T d B)[xi] for the patch d of tile t.
      for (int64_t c = c0; c < c1; ++c) {
        const float* plane = &padded[static_cast<size_t>(c * Hp * Wp)];
        float* vc = &V[static_cast<size_t>(c * ld)];
        for (int64_t ty = 0; ty < TH; ++ty) {
          const float* r[4];
          for (int i = 0; i < 4; ++i) r[i] = plane + (2 * ty + i) * Wp;
          for (int64_t tx = 0; tx < TWp; tx += 4) {
            v4f t1[4][4];  // B^T d, four tiles per lane
            v4f d[4][4];
            for (int i = 0; i < 4; ++i) {
              const float* q = r[i] + 2 * tx;
              d[i][0] = even(q);
              d[i][1] = odd(q);
              d[i][2] = even(q + 2);
              d[i][3] = odd(q + 2);
            }
            for (int j = 0; j < 4; ++j) {
              t1[0][j] = d[0][j] - d[2][j];
              t1[1][j] = d[1][j] + d[2][j];
              t1[2][j] = d[2][j] - d[1][j];
              t1[3][j] = d[1][j] - d[3][j];
            }
            float* dst = vc + ty * TW + tx;
            const int64_t step = C * ld;  // from V[xi] to V[xi + 1]
            for (int i = 0; i < 4; ++i) {
              store4(dst + (i * 4 + 0) * step, t1[i][0] - t1[i][2]);
              store4(dst + (i * 4 + 1) * step, t1[i][1] + t1[i][2]);
              store4(dst + (i * 4 + 2) * step, t1[i][2] - t1[i][1]);
              store4(dst + (i * 4 + 3) * step, t1[i][1] - t1[i][3]);
            }
          }
        }
      }
    });

    parallel_for(16, 1, [&](int64_t x0, int64_t x1) {
      for (int64_t xi = x0; xi < x1; ++xi)
        sgemm(false, false, M, T, C, 1.0f, nullptr, C, &V[static_cast<size_t>(xi * C * ld)], ld,
              0.0f, &Mout[static_cast<size_t>(xi * M * ld)], ld, nullptr, &U[xi]);
    });

    // Y = A^T m A per tile, plus bias, clamped, into the output rows 2 ty and 2 ty + 1.
    parallel_for(M, std::max<int64_t>(1, 4096 / (OH * OW)), [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        const v4f b = splat(bias ? bias[m] : 0.0f);
        const float* mm = &Mout[static_cast<size_t>(m * ld)];
        const int64_t step = M * ld;
        float* ym = y + m * OH * OW;
        for (int64_t ty = 0; ty < TH; ++ty) {
          for (int64_t tx = 0; tx < TW; tx += 4) {
            const float* src = mm + ty * TW + tx;
            v4f s[2][4];  // A^T m
            for (int j = 0; j < 4; ++j) {
              const v4f m0 = load4(src + (0 * 4 + j) * step), m1 = load4(src + (1 * 4 + j) * step),
                        m2 = load4(src + (2 * 4 + j) * step), m3 = load4(src + (3 * 4 + j) * step);
              s[0][j] = m0 + m1 + m2;
              s[1][j] = m1 - m2 - m3;
            }
            for (int i = 0; i < 2; ++i) {
              const int64_t oh = 2 * ty + i;
              if (oh >= OH) break;
              v4f y0 = s[i][0] + s[i][1] + s[i][2] + b;  // column 2 tx
              v4f y1 = s[i][1] - s[i][2] - s[i][3] + b;  // column 2 tx + 1
              if (clamp) {
                y0 = y0 < lo ? lo : (y0 > hi ? hi : y0);
                y1 = y1 < lo ? lo : (y1 > hi ? hi : y1);
              }
              const v4f a = __builtin_shufflevector(y0, y1, 0, 4, 1, 5);
              const v4f c = __builtin_shufflevector(y0, y1, 2, 6, 3, 7);
              float* row = ym + oh * OW + 2 * tx;
              const int64_t left = OW - 2 * tx;
              if (left >= 8) {
                store4(row, a);
                store4(row + 4, c);
              } else {
                float tmp[8];
                store4(tmp, a);
                store4(tmp + 4, c);
                std::memcpy(row, tmp, static_cast<size_t>(left) * sizeof(float));
              }
            }
          }
        }
      }
    });
  }
}

}  // namespace fx::kernels
