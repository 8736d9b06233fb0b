// Winograd convolutions (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks",
// 2015) for 3x3 stride-1 convolutions: each R x R block of outputs (a tile) comes from an
// (R + 2) x (R + 2) input patch d as Y = A^T [ (G g G^T) . (B^T d B) ] A. Over all tiles and
// channels that is (R + 2)^2 independent GEMMs, U[xi] (M x C, the transformed weights) times
// V[xi] (C x tiles, the transformed input).
//
// F(2x2, 3x3), 16 GEMMs, 2.25x fewer multiplications than im2col + GEMM. Its transforms only
// add, subtract and halve, so results stay within a few ulps of the direct convolution:
//
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1]
//   A^T = [1 1 1 0; 0 1 -1 -1]
//
// F(4x4, 3x3), 36 GEMMs, 4x fewer multiplications (the interpolation points 0, +-1, +-2). Its
// transforms scale by up to 8 and 1/24, so results carry more rounding error: on random data
// 4e-6 to 1.3e-5 of the largest output, against 2e-7 to 7e-7 for F(2x2, 3x3) (the trade
// cuDNN's and NNPACK's Winograd kernels make too):
//
//   B^T = [4  0 -5  0 1 0;      G = [ 1/4     0    0;     A^T = [1 1  1 1  1 0;
//          0 -4 -4  1 1 0;            -1/6 -1/6 -1/6;            0 1 -1 2 -2 0;
//          0  4 -4 -1 1 0;            -1/6  1/6 -1/6;            0 1  1 4  4 0;
//          0 -2 -1  2 1 0;            1/24 1/12  1/6;            0 1 -1 8 -8 1]
//          0  2 -1 -2 1 0;            1/24 -1/12 1/6;
//          0  4  0 -5 0 1]               0    0    1]
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/conv.h"
#include "kernels/cpu.h"
#include "kernels/gemm.h"
#include "kernels/scratch.h"
#include "kernels/simd.h"
#include "kernels/thread_pool.h"

namespace fx::kernels {

namespace {
// Tiles of r x r outputs that cover the output.
int64_t tiles_of(const Conv2dParams& p, int64_t r) {
  return ((p.out_h() + r - 1) / r) * ((p.out_w() + r - 1) / r);
}
}  // namespace

int64_t winograd_output_tile(const Conv2dParams& p) {
  if (p.group != 1 || p.KH != 3 || p.KW != 3 || p.stride_h != 1 || p.stride_w != 1 ||
      p.dilation_h != 1 || p.dilation_w != 1)
    return 0;
  // Enough channels for the GEMMs to outweigh the transforms, and 16 tiles of 2x2 (a 7x7 output)
  // or more. (16 input channels pay since im2col went to bands: SqueezeNet's 16 -> 64 expand
  // layers, in-model min-of-90, 0.374 -> 0.347 ms natively; the model in wasm 15.9-16.7
  // -> 15.0-15.9 ms. 7x7 outputs, 16 tiles, pay since the GEMMs compute narrow last panels as
  // narrow tiles: ResNet-18's three 512 -> 512 layers as F(2x2, 3x3) rather than im2col + GEMM, the
  // whole model 0.93-0.99x by min and 0.94x by median natively, 0.83-0.85x in wasm; one process
  // alternating the two. Their transformed weights are 16 / 9 of the kernel's: 7.5 MB more a
  // layer.)
  if (p.C < 16 || p.M < 32 || tiles_of(p, 2) < 16) return 0;
  if (p.winograd_tile == 2 || p.winograd_tile == 4) return p.winograd_tile;
  // F(4x4, 3x3) where it has enough tiles for the GEMMs' columns (not 13x13 or 14x14 outputs:
  // 16 tiles). One process alternating the two on the same weights, min / median ratios: ResNet-18
  // 0.89-1.01 / 0.92-1.00x natively (AVX-512, 1 and 2 threads, five runs), 0.89-0.90x in wasm;
  // SqueezeNet 0.92-1.00 / 0.94-1.00x natively, 0.92-0.94x in wasm (bench/README). (Also on 13x13
  // to 14x14 outputs, natively ResNet-18's 256 -> 256 layer alone ran 1.01-1.12x as long, and in
  // wasm the model 0.96-0.98x as long, SqueezeNet within noise, for 2.25x the weights of F(2x2).)
  return tiles_of(p, 4) >= 36 ? 4 : 2;
}

bool conv2d_uses_winograd(const Conv2dParams& p) { return winograd_output_tile(p) != 0; }

int64_t winograd_tiles(const Conv2dParams& p) {
  const int64_t r = winograd_output_tile(p);
  return r ? tiles_of(p, r) : 0;
}

int64_t winograd_block_rows(const Conv2dParams& p) {
  const int64_t r = winograd_output_tile(p), threads = num_threads();
  if (r == 0 || threads < 2) return 0;
  const int64_t TH = (p.out_h() + r - 1) / r;
  // At least two tile rows a block: a block's products are M x (rows x TW) x C, and narrower
  // ones lost more to their edges than the split saved.
  if (TH < 2 * threads) return 0;
  // Each block reads all of U, (r + 2)^2 M x C matrices, and its own share of V and Mout, (r + 2)^2
  // (C + M) x tiles: only where U is the smaller (ResNet-18's 64 -> 64 layers at 56x56 and
  // SqueezeNet's expand layers at 55x55, not 128 -> 128 at 28x28, whose 2.4 MB of U the phase
  // schedule reads once).
  if (p.M * p.C > (p.C + p.M) * tiles_of(p, r)) return 0;
  // Nor where the rows split unevenly into blocks of only a few: 7 tile rows at 2 threads are
  // blocks of 4 and 3, and the thread with 4 held the other up (scaling 1.5x, where the phase
  // schedule's even split of channels, products and output channels reaches 1.9x). Alone, 2
  // threads, blocks -> phases: SqueezeNet's 32 -> 128 at 27x27 (F(4x4), 7 tile rows) 0.73x the
  // time natively (212 -> 155 us, p25 of 600) and 0.83x in wasm, its 48 -> 192 at 13x13 (F(2x2), 7
  // rows) 0.85x natively.
  if (TH % threads != 0 && TH < 4 * threads) return 0;
  return (TH + threads - 1) / threads;
}

namespace {

// U[xi] = (G g G^T)[xi] of F(2x2, 3x3), 16 M x C matrices.
void transform_weights2(const Conv2dParams& p, const float* weight, float* U) {
  const int64_t M = p.M, C = p.C;
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
        for (int j = 0; j < 4; ++j) U[((i * 4 + j) * M + m) * C + c] = u[j];
      }
    }
}

// U[xi] = (G g G^T)[xi] of F(4x4, 3x3), 36 M x C matrices, computed in double and rounded once.
void transform_weights4(const Conv2dParams& p, const float* weight, float* U) {
  static constexpr double G[6][3] = {{1.0 / 4, 0, 0},
                                     {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                     {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                     {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                     {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                     {0, 0, 1}};
  const int64_t M = p.M, C = p.C;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < C; ++c) {
      const float* g = weight + (m * C + c) * 9;
      double t[6][3];  // G g
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 3; ++j)
          t[i][j] = G[i][0] * g[j] + G[i][1] * g[3 + j] + G[i][2] * g[6 + j];
      for (int i = 0; i < 6; ++i)  // (G g) G^T
        for (int j = 0; j < 6; ++j)
          U[((i * 6 + j) * M + m) * C + c] =
              static_cast<float>(t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2]);
    }
}

}  // namespace

std::vector<PackedOperand> winograd_pack_weights(const Conv2dParams& p, const float* weight) {
  const int64_t M = p.M, C = p.C, r = winograd_output_tile(p);
  const int64_t products = (r + 2) * (r + 2);
  std::vector<float> U(static_cast<size_t>(products * M * C));
  if (r == 4) {
    transform_weights4(p, weight, U.data());
  } else {
    transform_weights2(p, weight, U.data());
  }
  std::vector<PackedOperand> packed;
  for (int64_t xi = 0; xi < products; ++xi)
    packed.push_back(PackedOperand::left(false, M, C, U.data() + xi * M * C, C, winograd_tiles(p)));
  return packed;
}

namespace {

// (The 8-lane instances are only ever inlined into the AVX2 functions: GCC's note that passing
// 32-byte vectors without AVX changes the ABI does not apply. GCC reports it at the end of the
// file, so it stays off from here on.)
#pragma GCC diagnostic ignored "-Wpsabi"

// The tiling of one convolution in R x R tiles: tiles go L at a time along a tile row (the lanes
// of a vector); the lanes past a row's end spill into the next row's first tiles, written after
// them, or into L spare columns after the last row: V and Mout rows are ld = T + L long. In the
// blocked schedule a block of tile rows has its own: TH, T, Hp, ld and OH are the block's, its
// output rows start R * (first tile row) rows into each output plane.
struct WinogradGeometry {
  int64_t R, C, M, OH, OW, TH, TW, T, TWp, Hp, Wp, ld;
  int64_t plane;  // an output channel's floats (OH x OW of the whole convolution)
};

WinogradGeometry winograd_geometry(const Conv2dParams& p, int64_t L, int64_t R) {
  WinogradGeometry g;
  g.R = R;
  g.C = p.C;
  g.M = p.M;
  g.OH = p.out_h();
  g.OW = p.out_w();
  g.TH = (g.OH + R - 1) / R;
  g.TW = (g.OW + R - 1) / R;
  g.T = g.TH * g.TW;
  g.TWp = (g.TW + L - 1) / L * L;
  // The zero-padded input: every (R + 2)-square patch, and the loads that read it, inside.
  g.Hp = R * g.TH + 2;
  g.Wp = R * g.TWp + 8;
  g.ld = g.T + L;
  g.plane = g.OH * g.OW;
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
// The first n lanes of v (n < the lane count) at p: a row's partial last vector of outputs. One
// float at a time, in a loop of constant length (a memcpy of a run-time size is a libc call,
// rep movsb, and cost 6-10 % of a Winograd convolution).
template <class V>
inline __attribute__((always_inline)) void store_first(float* p, const V& v, int64_t n) {
  constexpr int L = sizeof(V) / sizeof(float);
  for (int i = 0; i < L; ++i)
    if (i < n) p[i] = v[i];
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

// How the output transform finishes one output channel's results and stores them: finish(v)
// adds the channel's bias to a vector of the transform's results (and clamps it, without a
// residual); put(dst, v, n) stores the first n lanes of a vector of outputs in row order at dst
// (all of them when n >= its lanes), with a residual first adding the residual's values at the
// same place and then clamping. The bits of an Add after an unfused convolution.
template <class V, bool kResidual>
struct OutputStore {
  V b, lo, hi;
  float lo_s, hi_s;
  bool clamp;
  const float* residual;  // the residual of the output `y` (kResidual)
  const float* y;

  inline __attribute__((always_inline)) V finish(V v) const {
    v += b;
    return !kResidual && clamp ? clamp_v(v, lo, hi) : v;
  }
  template <class W>
  inline __attribute__((always_inline)) void put(float* dst, W v, int64_t n) const {
    constexpr int64_t L = sizeof(W) / sizeof(float);
    if constexpr (kResidual) {
      const float* r = residual + (dst - y);
      if (n >= L) {
        v += load_v<W>(r);
      } else {
        W t{};
        for (int64_t i = 0; i < L; ++i)
          if (i < n) t[i] = r[i];
        v += t;
      }
      if (clamp) v = clamp_v(v, W{} + lo_s, W{} + hi_s);
    }
    n >= L ? store_v<W>(dst, v) : store_first(dst, v, n);
  }
};

// Calls tile(src, step, ym, ty, tx, out) for each vector of L tiles (tile row ty, tiles tx ...)
// of output channels [m0, m1): src is their first product's values in Mout (product xi's at
// src + xi * step), ym the channel's output plane, and out its OutputStore. `res`: the residual
// of y (kResidual).
template <class V, bool kResidual, class Tile>
inline __attribute__((always_inline)) void for_each_output_vector(
    const WinogradGeometry& g, const Conv2dParams& p, const float* Mout, int64_t m0, int64_t m1,
    const float* bias, float* y, const float* res, Tile&& tile) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  OutputStore<V, kResidual> out;
  out.clamp = p.clamp_lo > -__builtin_inff() || p.clamp_hi < __builtin_inff();
  out.lo = V{} + p.clamp_lo;
  out.hi = V{} + p.clamp_hi;
  out.lo_s = p.clamp_lo;
  out.hi_s = p.clamp_hi;
  out.residual = res;
  out.y = y;
  const int64_t step = g.M * g.ld;
  for (int64_t m = m0; m < m1; ++m) {
    out.b = V{} + (bias ? bias[m] : 0.0f);
    const float* mm = Mout + m * g.ld;
    float* ym = y + m * g.plane;
    for (int64_t ty = 0; ty < g.TH; ++ty)
      for (int64_t tx = 0; tx < g.TW; tx += L) tile(mm + ty * g.TW + tx, step, ym, ty, tx, out);
  }
}

// F(2x2, 3x3): Y = A^T m A for a vector of L tiles (see for_each_output_vector), into output rows
// 2 ty and 2 ty + 1.
template <class V, class Out>
inline __attribute__((always_inline)) void output_vector2(const WinogradGeometry& g,
                                                          const float* src, int64_t step, float* ym,
                                                          int64_t ty, int64_t tx, const Out& out) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  V s[2][4];  // A^T m
  for (int j = 0; j < 4; ++j) {
    const V q0 = load_v<V>(src + (0 * 4 + j) * step), q1 = load_v<V>(src + (1 * 4 + j) * step),
            q2 = load_v<V>(src + (2 * 4 + j) * step), q3 = load_v<V>(src + (3 * 4 + j) * step);
    s[0][j] = q0 + q1 + q2;
    s[1][j] = q1 - q2 - q3;
  }
  for (int i = 0; i < 2; ++i) {
    const int64_t oh = 2 * ty + i;
    if (oh >= g.OH) break;
    const V y0 = out.finish(s[i][0] + s[i][1] + s[i][2]);  // columns 2 tx, 2 tx + 2, ...
    const V y1 = out.finish(s[i][1] - s[i][2] - s[i][3]);  // columns 2 tx + 1, 2 tx + 3, ...
    V a, c;                                                // the row's 2L outputs, interleaved
    if constexpr (L == 4) {
      a = __builtin_shufflevector(y0, y1, 0, 4, 1, 5);
      c = __builtin_shufflevector(y0, y1, 2, 6, 3, 7);
    } else {
      a = __builtin_shufflevector(y0, y1, 0, 8, 1, 9, 2, 10, 3, 11);
      c = __builtin_shufflevector(y0, y1, 4, 12, 5, 13, 6, 14, 7, 15);
    }
    float* row = ym + oh * g.OW + 2 * tx;
    const int64_t left = g.OW - 2 * tx;
    out.put(row, a, left);
    if (left > L) out.put(row + L, c, left - L);
  }
}

// F(4x4, 3x3): lanes l of d[j] = q[4 l + j], j < 6 (the six columns of L patches 4 apart).
inline __attribute__((always_inline)) void patch_columns(const float* q, v4f (&d)[6]) {
  const v4f a0 = load4(q), a1 = load4(q + 4), a2 = load4(q + 8), a3 = load4(q + 12),
            a4 = load4(q + 16);
  const v4f t0 = __builtin_shufflevector(a0, a1, 0, 4, 1, 5);
  const v4f t1 = __builtin_shufflevector(a0, a1, 2, 6, 3, 7);
  const v4f t2 = __builtin_shufflevector(a2, a3, 0, 4, 1, 5);
  const v4f t3 = __builtin_shufflevector(a2, a3, 2, 6, 3, 7);
  d[0] = __builtin_shufflevector(t0, t2, 0, 1, 4, 5);
  d[1] = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
  d[2] = __builtin_shufflevector(t1, t3, 0, 1, 4, 5);
  d[3] = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
  const v4f u0 = __builtin_shufflevector(a1, a2, 0, 4, 1, 5);
  const v4f u1 = __builtin_shufflevector(a3, a4, 0, 4, 1, 5);
  d[4] = __builtin_shufflevector(u0, u1, 0, 1, 4, 5);
  d[5] = __builtin_shufflevector(u0, u1, 2, 3, 6, 7);
}
template <class V>
inline __attribute__((always_inline)) void patch_columns(const float* q, V (&d)[6]) {
  v4f lo[6], hi[6];  // eight lanes: tiles 0-3 and 4-7
  patch_columns(q, lo);
  patch_columns(q + 16, hi);
  for (int j = 0; j < 6; ++j) d[j] = __builtin_shufflevector(lo[j], hi[j], 0, 1, 2, 3, 4, 5, 6, 7);
}

// t = B^T d for F(4x4, 3x3), along one dimension of the patch.
template <class V>
inline __attribute__((always_inline)) void input_rows4(const V (&d)[6], V (&t)[6]) {
  t[0] = (V{} + 4.0f) * d[0] - (V{} + 5.0f) * d[2] + d[4];
  t[1] = (d[3] + d[4]) - (V{} + 4.0f) * (d[1] + d[2]);
  t[2] = (d[4] - d[3]) + (V{} + 4.0f) * (d[1] - d[2]);
  t[3] = (d[4] - d[2]) + (V{} + 2.0f) * (d[3] - d[1]);
  t[4] = (d[4] - d[2]) + (V{} + 2.0f) * (d[1] - d[3]);
  t[5] = (V{} + 4.0f) * d[1] - (V{} + 5.0f) * d[3] + d[5];
}

// V[xi][c][t] = (B^T d B)[xi] of F(4x4, 3x3) (36 products), as transform_input_impl.
template <class V>
inline __attribute__((always_inline)) void transform_input4_impl(const WinogradGeometry& g,
                                                                 const float* padded, int64_t c0,
                                                                 int64_t c1, float* Vt) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  const int64_t step = g.C * g.ld;
  for (int64_t c = c0; c < c1; ++c) {
    const float* plane = padded + c * g.Hp * g.Wp;
    float* vc = Vt + c * g.ld;
    for (int64_t ty = 0; ty < g.TH; ++ty) {
      for (int64_t tx = 0; tx < g.TWp; tx += L) {
        V d[6][6];  // d[i][j]: patch row i, column j
        for (int i = 0; i < 6; ++i) patch_columns(plane + (4 * ty + i) * g.Wp + 4 * tx, d[i]);
        V t[6][6];  // (B^T d)[k][j]
        for (int j = 0; j < 6; ++j) {
          const V col[6] = {d[0][j], d[1][j], d[2][j], d[3][j], d[4][j], d[5][j]};
          V out[6];
          input_rows4(col, out);
          for (int k = 0; k < 6; ++k) t[k][j] = out[k];
        }
        float* dst = vc + ty * g.TW + tx;
        for (int k = 0; k < 6; ++k) {
          V out[6];
          input_rows4(t[k], out);
          for (int j = 0; j < 6; ++j) store_v<V>(dst + (k * 6 + j) * step, out[j]);
        }
      }
    }
  }
}

// s = A^T m for F(4x4, 3x3), along one dimension of the tile.
template <class V>
inline __attribute__((always_inline)) void output_rows4(const V (&m)[6], V (&s)[4]) {
  const V a = m[1] + m[2], b = m[1] - m[2], c = m[3] + m[4], e = m[3] - m[4];
  s[0] = m[0] + a + c;
  s[1] = b + (V{} + 2.0f) * e;
  s[2] = a + (V{} + 4.0f) * c;
  s[3] = b + (V{} + 8.0f) * e + m[5];
}

// F(4x4, 3x3): Y = A^T m A for a vector of L tiles, into output rows 4 ty ... 4 ty + 3.
template <class V, class Out>
inline __attribute__((always_inline)) void output_vector4(const WinogradGeometry& g,
                                                          const float* src, int64_t step, float* ym,
                                                          int64_t ty, int64_t tx, const Out& out) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  V s[4][6];  // (A^T m)[i][j]
  for (int j = 0; j < 6; ++j) {
    V col[6];
    for (int k = 0; k < 6; ++k) col[k] = load_v<V>(src + (k * 6 + j) * step);
    V out[4];
    output_rows4(col, out);
    for (int i = 0; i < 4; ++i) s[i][j] = out[i];
  }
  const int64_t left = g.OW - 4 * tx;
  for (int i = 0; i < 4; ++i) {
    const int64_t oh = 4 * ty + i;
    if (oh >= g.OH) break;
    V yv[4];  // yv[j]: columns 4 (tx + l) + j
    output_rows4(s[i], yv);
    // The row's 4L outputs, interleaved (4x4 transposes: tile k's four columns), stored a tile at
    // a time while the row has room for them.
    float* const row = ym + oh * g.OW + 4 * tx;
    for (int j = 0; j < 4; ++j) yv[j] = out.finish(yv[j]);
    for (int64_t h = 0; h < L && 4 * h < left; h += 4) {
      v4f q[4];  // lanes h ... h + 3
      for (int j = 0; j < 4; ++j) {
        if constexpr (L == 4) {
          q[j] = yv[j];
        } else {
          q[j] = h == 0 ? __builtin_shufflevector(yv[j], yv[j], 0, 1, 2, 3)
                        : __builtin_shufflevector(yv[j], yv[j], 4, 5, 6, 7);
        }
      }
      const v4f t0 = __builtin_shufflevector(q[0], q[1], 0, 4, 1, 5);
      const v4f t1 = __builtin_shufflevector(q[0], q[1], 2, 6, 3, 7);
      const v4f t2 = __builtin_shufflevector(q[2], q[3], 0, 4, 1, 5);
      const v4f t3 = __builtin_shufflevector(q[2], q[3], 2, 6, 3, 7);
      const v4f tile[4] = {
          __builtin_shufflevector(t0, t2, 0, 1, 4, 5), __builtin_shufflevector(t0, t2, 2, 3, 6, 7),
          __builtin_shufflevector(t1, t3, 0, 1, 4, 5), __builtin_shufflevector(t1, t3, 2, 3, 6, 7)};
      for (int64_t k = 0; k < 4 && 4 * (h + k) < left; ++k)
        out.put(row + 4 * (h + k), tile[k], left - 4 * (h + k));  // (the last: 1-4 columns)
    }
  }
}

// Y = A^T m A per tile (R = 2 or 4), plus bias (and `res`, the residual of y, if any), clamped,
// into output channels [m0, m1).
template <class V, int R, bool kResidual>
inline __attribute__((always_inline)) void transform_output_tiles(const WinogradGeometry& g,
                                                                  const Conv2dParams& p,
                                                                  const float* Mout, int64_t m0,
                                                                  int64_t m1, const float* bias,
                                                                  float* y, const float* res) {
  for_each_output_vector<V, kResidual>(
      g, p, Mout, m0, m1, bias, y, res,
      [&](const float* src, int64_t step, float* ym, int64_t ty, int64_t tx, const auto& out)
          __attribute__((always_inline)) {
            if constexpr (R == 2) {
              output_vector2<V>(g, src, step, ym, ty, tx, out);
            } else {
              output_vector4<V>(g, src, step, ym, ty, tx, out);
            }
          });
}
template <class V>
inline __attribute__((always_inline)) void transform_output_impl(const WinogradGeometry& g,
                                                                 const Conv2dParams& p,
                                                                 const float* Mout, int64_t m0,
                                                                 int64_t m1, const float* bias,
                                                                 float* y, const float* res) {
  if (g.R == 4) {
    res ? transform_output_tiles<V, 4, true>(g, p, Mout, m0, m1, bias, y, res)
        : transform_output_tiles<V, 4, false>(g, p, Mout, m0, m1, bias, y, nullptr);
  } else {
    res ? transform_output_tiles<V, 2, true>(g, p, Mout, m0, m1, bias, y, res)
        : transform_output_tiles<V, 2, false>(g, p, Mout, m0, m1, bias, y, nullptr);
  }
}

// dst[0, n) = src[0, n) and dst[0, n) = 0, four floats at a time, for the padded planes' rows:
// memcpy and memset calls (rep movsb) on rows of 13-56 floats took 10 % of SqueezeNet's 16 -> 64
// layer.
inline void copy_row(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) store4(dst + i, load4(src + i));
  if (i < n && n >= 4) {  // the last four, overlapping
    store4(dst + n - 4, load4(src + n - 4));
  } else {
    for (; i < n; ++i) dst[i] = src[i];
  }
}
inline void zero_row(float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) store4(dst + i, v4f{});
  for (; i < n; ++i) dst[i] = 0.0f;
}

#ifdef FXWASM_X86_DISPATCH
typedef float v8f __attribute__((vector_size(32)));
// Eight tiles at a time: the transforms add, subtract, shuffle and scale by constants, lane by
// lane and without FMA (the target is AVX2 alone), so every width gives the same bits. (Sixteen
// would leave most lanes empty on 13x13 and 27x27 outputs.)
__attribute__((target("avx2"))) void transform_input_avx2(const WinogradGeometry& g,
                                                          const float* padded, int64_t c0,
                                                          int64_t c1, float* Vt) {
  if (g.R == 4) return transform_input4_impl<v8f>(g, padded, c0, c1, Vt);
  transform_input_impl<v8f>(g, padded, c0, c1, Vt);
}
__attribute__((target("avx2"))) void transform_output_avx2(const WinogradGeometry& g,
                                                           const Conv2dParams& p, const float* Mout,
                                                           int64_t m0, int64_t m1,
                                                           const float* bias, float* y,
                                                           const float* res) {
  transform_output_impl<v8f>(g, p, Mout, m0, m1, bias, y, res);
}
#endif

}  // namespace

void winograd_conv2d(const Conv2dParams& p, const float* in, const float* bias, float* out,
                     const std::vector<PackedOperand>& U) {
  bool wide = false;  // eight tiles a vector (AVX2), else four
#ifdef FXWASM_X86_DISPATCH
  wide = cpu_has_avx2();
#endif
  const int64_t R = winograd_output_tile(p), products = (R + 2) * (R + 2);
  if (R == 0 || static_cast<int64_t>(U.size()) != products)
    throw std::logic_error("winograd_conv2d: weights packed for another tiling");
  const WinogradGeometry g = winograd_geometry(p, wide ? 8 : 4, R);
  const int64_t C = g.C, M = g.M, Wp = g.Wp, L = wide ? 8 : 4;
  auto transform_input = [&](const WinogradGeometry& gb, const float* padded, int64_t c0,
                             int64_t c1, float* V) {
#ifdef FXWASM_X86_DISPATCH
    if (wide) return transform_input_avx2(gb, padded, c0, c1, V);
#endif
    if (R == 4) return transform_input4_impl<v4f>(gb, padded, c0, c1, V);
    transform_input_impl<v4f>(gb, padded, c0, c1, V);
  };
  auto transform_output = [&](const WinogradGeometry& gb, const float* Mout, int64_t m0, int64_t m1,
                              float* y, const float* res) {
#ifdef FXWASM_X86_DISPATCH
    if (wide) return transform_output_avx2(gb, p, Mout, m0, m1, bias, y, res);
#endif
    transform_output_impl<v4f>(gb, p, Mout, m0, m1, bias, y, res);
  };
  const int64_t right = Wp - p.pad_left - p.W;  // zeros right of each padded row
  // Rows [r0, r0 + Hp) of channels [c0, c1)'s zero-padded planes of image x into `padded` (Hp x
  // Wp a channel): zero rows above and below the image, zero margins left and right of its rows.
  auto pad_rows = [&](const float* x, int64_t Hp, int64_t r0, int64_t c0, int64_t c1,
                      float* padded) {
    for (int64_t c = c0; c < c1; ++c)
      for (int64_t r = 0; r < Hp; ++r) {
        float* row = padded + (c * Hp + r) * Wp;
        const int64_t ih = r0 + r - p.pad_top;
        if (ih < 0 || ih >= p.H) {
          zero_row(row, Wp);
          continue;
        }
        zero_row(row, p.pad_left);
        copy_row(row + p.pad_left, x + (c * p.H + ih) * p.W, p.W);
        zero_row(row + p.pad_left + p.W, right);
      }
  };

  const int64_t rows = winograd_block_rows(p);
  for (int64_t n = 0; n < p.N; ++n) {
    const float* x = in + n * C * p.H * p.W;
    float* y = out + n * M * g.plane;
    const float* res = p.residual ? p.residual + n * M * g.plane : nullptr;
    if (rows > 0) {
      // Blocks of tile rows, each taken through all three phases by one thread (its own padded
      // rows, V and Mout in its scratch): what it transforms and multiplies stays in its core's
      // cache, and only U is shared. The products keep each element's K order, so the bits are
      // the phase schedule's.
      const int64_t blocks = (g.TH + rows - 1) / rows;
      parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t ty0 = b * rows;
          WinogradGeometry gb = g;
          gb.TH = std::min(rows, g.TH - ty0);
          gb.T = gb.TH * g.TW;
          gb.Hp = R * gb.TH + 2;
          gb.ld = gb.T + L;
          gb.OH = std::min(R * gb.TH, g.OH - R * ty0);
          float* const padded = aligned_floats(scratch(Scratch::WinogradPadded), C * gb.Hp * Wp);
          float* const V = aligned_floats(scratch(Scratch::WinogradV), products * C * gb.ld);
          float* const Mout = aligned_floats(scratch(Scratch::WinogradM), products * M * gb.ld);
          pad_rows(x, gb.Hp, R * ty0, 0, C, padded);
          transform_input(gb, padded, 0, C, V);
          for (int64_t xi = 0; xi < products; ++xi)
            sgemm(false, false, M, gb.T, C, 1.0f, nullptr, C, V + xi * C * gb.ld, gb.ld, 0.0f,
                  Mout + xi * M * gb.ld, gb.ld, nullptr, &U[xi]);
          const int64_t at = R * ty0 * g.OW;
          transform_output(gb, Mout, 0, M, y + at, res ? res + at : nullptr);
        }
      });
      continue;
    }
    // The phase schedule: channels, the 16 or 36 products and output channels on threads, each
    // writing its own part. The products read V (their B, in place when M is small) and write
    // Mout from cache-line boundaries.
    const int64_t ld = g.ld;
    float* const padded = aligned_floats(scratch(Scratch::WinogradPadded), C * g.Hp * Wp);
    float* const V = aligned_floats(scratch(Scratch::WinogradV), products * C * ld);
    float* const Mout = aligned_floats(scratch(Scratch::WinogradM), products * M * ld);
    const int64_t grain = std::max<int64_t>(1, 4096 / (g.Hp * Wp));
    parallel_for(C, grain, [&](int64_t c0, int64_t c1) {
      pad_rows(x, g.Hp, 0, c0, c1, padded);
      transform_input(g, padded, c0, c1, V);
    });

    parallel_for(products, 1, [&](int64_t x0, int64_t x1) {
      for (int64_t xi = x0; xi < x1; ++xi)
        sgemm(false, false, M, g.T, C, 1.0f, nullptr, C, V + xi * C * ld, ld, 0.0f,
              Mout + xi * M * ld, ld, nullptr, &U[xi]);
    });

    parallel_for(M, std::max<int64_t>(1, 4096 / g.plane),
                 [&](int64_t m0, int64_t m1) { transform_output(g, Mout, m0, m1, y, res); });
  }
}

}  // namespace fx::kernels
