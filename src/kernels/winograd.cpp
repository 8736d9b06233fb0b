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
#include "kernels/cpu.h"
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

namespace {

// (The 8-lane instances are only ever inlined into the AVX2 functions: GCC's note that passing
// 32-byte vectors without AVX changes the ABI does not apply. GCC reports it at the end of the
// file, so it stays off from here on.)
#pragma GCC diagnostic ignored "-Wpsabi"

// The tiling of one convolution: tiles go L at a time along a tile row (the lanes of a vector);
// the lanes past a row's end spill into the next row's first tiles, written after them, or into
// L spare columns after the last row: V and Mout rows are ld = T + L long.
struct WinogradGeometry {
  int64_t C, M, OH, OW, TH, TW, T, TWp, Hp, Wp, ld;
};

WinogradGeometry winograd_geometry(const Conv2dParams& p, int64_t L) {
  WinogradGeometry g;
  g.C = p.C;
  g.M = p.M;
  g.OH = p.out_h();
  g.OW = p.out_w();
  g.TH = (g.OH + 1) / 2;
  g.TW = (g.OW + 1) / 2;
  g.T = g.TH * g.TW;
  g.TWp = (g.TW + L - 1) / L * L;
  // The zero-padded input: every 4x4 patch, and the 2L-float loads that read it, inside.
  g.Hp = 2 * g.TH + 2;
  g.Wp = 2 * g.TWp + 8;
  g.ld = g.T + L;
  return g;
}

template <class V>
inline __attribute__((always_inline)) V load_v(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V>
inline __attribute__((always_inline)) void store_v(float* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}
// Lanes P, P + 2, P + 4... of the 2L floats at q (P = 0: the even ones, 1: the odd ones).
template <class V, int P>
inline __attribute__((always_inline)) V alternate_lanes(const float* q) {
  constexpr int L = sizeof(V) / sizeof(float);
  if constexpr (L == 4) {
    return __builtin_shufflevector(load_v<V>(q), load_v<V>(q + 4), P, P + 2, P + 4, P + 6);
  } else {
    return __builtin_shufflevector(load_v<V>(q), load_v<V>(q + 8), P, P + 2, P + 4, P + 6, P + 8,
                                   P + 10, P + 12, P + 14);
  }
}

// V[xi][c][t] = (B^T d B)[xi] for the patch d of tile t, channels [c0, c1), from the padded
// planes (Hp x Wp each).
template <class V>
inline __attribute__((always_inline)) void transform_input_impl(const WinogradGeometry& g,
                                                                const float* padded, int64_t c0,
                                                                int64_t c1, float* Vt) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  const int64_t step = g.C * g.ld;  // from V[xi] to V[xi + 1]
  for (int64_t c = c0; c < c1; ++c) {
    const float* plane = padded + c * g.Hp * g.Wp;
    float* vc = Vt + c * g.ld;
    for (int64_t ty = 0; ty < g.TH; ++ty) {
      const float* r[4];
      for (int i = 0; i < 4; ++i) r[i] = plane + (2 * ty + i) * g.Wp;
      for (int64_t tx = 0; tx < g.TWp; tx += L) {
        V t1[4][4];  // B^T d, L tiles per lane
        V d[4][4];
        for (int i = 0; i < 4; ++i) {
          const float* q = r[i] + 2 * tx;
          d[i][0] = alternate_lanes<V, 0>(q);
          d[i][1] = alternate_lanes<V, 1>(q);
          d[i][2] = alternate_lanes<V, 0>(q + 2);
          d[i][3] = alternate_lanes<V, 1>(q + 2);
        }
        for (int j = 0; j < 4; ++j) {
          t1[0][j] = d[0][j] - d[2][j];
          t1[1][j] = d[1][j] + d[2][j];
          t1[2][j] = d[2][j] - d[1][j];
          t1[3][j] = d[1][j] - d[3][j];
        }
        float* dst = vc + ty * g.TW + tx;
        for (int i = 0; i < 4; ++i) {
          store_v<V>(dst + (i * 4 + 0) * step, t1[i][0] - t1[i][2]);
          store_v<V>(dst + (i * 4 + 1) * step, t1[i][1] + t1[i][2]);
          store_v<V>(dst + (i * 4 + 2) * step, t1[i][2] - t1[i][1]);
          store_v<V>(dst + (i * 4 + 3) * step, t1[i][1] - t1[i][3]);
        }
      }
    }
  }
}

// Y = A^T m A per tile, plus bias, clamped, into the output rows 2 ty and 2 ty + 1 of output
// channels [m0, m1).
template <class V>
inline __attribute__((always_inline)) void transform_output_impl(const WinogradGeometry& g,
                                                                 const Conv2dParams& p,
                                                                 const float* Mout, int64_t m0,
                                                                 int64_t m1, const float* bias,
                                                                 float* y) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  const bool clamp = p.clamp_lo > -__builtin_inff() || p.clamp_hi < __builtin_inff();
  const V lo = V{} + p.clamp_lo, hi = V{} + p.clamp_hi;
  const int64_t step = g.M * g.ld;
  for (int64_t m = m0; m < m1; ++m) {
    const V b = V{} + (bias ? bias[m] : 0.0f);
    const float* mm = Mout + m * g.ld;
    float* ym = y + m * g.OH * g.OW;
    for (int64_t ty = 0; ty < g.TH; ++ty) {
      for (int64_t tx = 0; tx < g.TW; tx += L) {
        const float* src = mm + ty * g.TW + tx;
        V s[2][4];  // A^T m
        for (int j = 0; j < 4; ++j) {
          const V q0 = load_v<V>(src + (0 * 4 + j) * step),
                  q1 = load_v<V>(src + (1 * 4 + j) * step),
                  q2 = load_v<V>(src + (2 * 4 + j) * step),
                  q3 = load_v<V>(src + (3 * 4 + j) * step);
          s[0][j] = q0 + q1 + q2;
          s[1][j] = q1 - q2 - q3;
        }
        for (int i = 0; i < 2; ++i) {
          const int64_t oh = 2 * ty + i;
          if (oh >= g.OH) break;
          V y0 = s[i][0] + s[i][1] + s[i][2] + b;  // columns 2 tx, 2 tx + 2, ...
          V y1 = s[i][1] - s[i][2] - s[i][3] + b;  // columns 2 tx + 1, 2 tx + 3, ...
          if (clamp) {
            y0 = clamp_v(y0, lo, hi);
            y1 = clamp_v(y1, lo, hi);
          }
          V a, c;  // the row's 2L outputs, interleaved
          if constexpr (L == 4) {
            a = __builtin_shufflevector(y0, y1, 0, 4, 1, 5);
            c = __builtin_shufflevector(y0, y1, 2, 6, 3, 7);
          } else {
            a = __builtin_shufflevector(y0, y1, 0, 8, 1, 9, 2, 10, 3, 11);
            c = __builtin_shufflevector(y0, y1, 4, 12, 5, 13, 6, 14, 7, 15);
          }
          float* row = ym + oh * g.OW + 2 * tx;
          const int64_t left = g.OW - 2 * tx;
          if (left >= 2 * L) {
            store_v<V>(row, a);
            store_v<V>(row + L, c);
          } else {
            float tmp[2 * L];
            store_v<V>(tmp, a);
            store_v<V>(tmp + L, c);
            std::memcpy(row, tmp, static_cast<size_t>(left) * sizeof(float));
          }
        }
      }
    }
  }
}

#ifdef FXWASM_X86_DISPATCH
typedef float v8f __attribute__((vector_size(32)));
// Eight tiles at a time: the transforms only add, subtract and shuffle, so every width gives the
// same bits. (Sixteen would leave most lanes empty on 13x13 and 27x27 outputs.)
__attribute__((target("avx2"))) void transform_input_avx2(const WinogradGeometry& g,
                                                          const float* padded, int64_t c0,
                                                          int64_t c1, float* Vt) {
  transform_input_impl<v8f>(g, padded, c0, c1, Vt);
}
__attribute__((target("avx2"))) void transform_output_avx2(const WinogradGeometry& g,
                                                           const Conv2dParams& p, const float* Mout,
                                                           int64_t m0, int64_t m1,
                                                           const float* bias, float* y) {
  transform_output_impl<v8f>(g, p, Mout, m0, m1, bias, y);
}
#endif

}  // namespace

void winograd_conv2d(const Conv2dParams& p, const float* in, const float* bias, float* out,
                     const std::vector<PackedOperand>& U) {
  bool wide = false;  // eight tiles a vector (AVX2), else four
#ifdef FXWASM_X86_DISPATCH
  wide = cpu_has_avx2();
#endif
  const WinogradGeometry g = winograd_geometry(p, wide ? 8 : 4);
  const int64_t C = g.C, M = g.M, Hp = g.Hp, Wp = g.Wp, ld = g.ld;
  // The 16 products read V (their B, in place when M is small) and write Mout from cache-line
  // boundaries.
  float* const padded = aligned_floats(scratch(Scratch::WinogradPadded), C * Hp * Wp);
  float* const V = aligned_floats(scratch(Scratch::WinogradV), 16 * C * ld);
  float* const Mout = aligned_floats(scratch(Scratch::WinogradM), 16 * M * ld);
  auto transform_input = [&](int64_t c0, int64_t c1) {
#ifdef FXWASM_X86_DISPATCH
    if (wide) return transform_input_avx2(g, padded, c0, c1, V);
#endif
    transform_input_impl<v4f>(g, padded, c0, c1, V);
  };
  auto transform_output = [&](int64_t m0, int64_t m1, float* y) {
#ifdef FXWASM_X86_DISPATCH
    if (wide) return transform_output_avx2(g, p, Mout, m0, m1, bias, y);
#endif
    transform_output_impl<v4f>(g, p, Mout, m0, m1, bias, y);
  };

  for (int64_t n = 0; n < p.N; ++n) {
    const float* x = in + n * C * p.H * p.W;
    float* y = out + n * M * g.OH * g.OW;
    // Each plane: zero rows above and below the image, zero margins left and right of its rows.
    const int64_t right = Wp - p.pad_left - p.W;
    // Channels, the 16 products and output channels on threads: each writes its own part.
    const int64_t grain = std::max<int64_t>(1, 4096 / (Hp * Wp));
    parallel_for(C, grain, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        float* plane = padded + c * Hp * Wp;
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
      transform_input(c0, c1);
    });

    parallel_for(16, 1, [&](int64_t x0, int64_t x1) {
      for (int64_t xi = x0; xi < x1; ++xi)
        sgemm(false, false, M, g.T, C, 1.0f, nullptr, C, V + xi * C * ld, ld, 0.0f,
              Mout + xi * M * ld, ld, nullptr, &U[xi]);
    });

    parallel_for(M, std::max<int64_t>(1, 4096 / (g.OH * g.OW)),
                 [&](int64_t m0, int64_t m1) { transform_output(m0, m1, y); });
  }
}

}  // namespace fx::kernels
