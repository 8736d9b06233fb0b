// Integer GEMM (qgemm.h) in the layout of sgemm: the left operand in MR-row panels, the right in
// NR-column panels, both K-major inside a panel, so a register-blocked MR x NR micro-kernel reads
// contiguous memory. An element of a panel is an int32 holding the int16 pair (k, k + 1) of one
// row or column, zero point subtracted: broadcasting A's pair and multiplying it with B's pairs
// by pmaddwd / i32x4.dot_i16x8 adds a[k] b[k] + a[k+1] b[k+1] to each int32 lane, exactly.
#include "kernels/qgemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "kernels/cpu.h"

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif
#ifdef FXWASM_X86_DISPATCH
#include <immintrin.h>
#endif

namespace fx::kernels {

namespace {

// Rows of a micro-tile: as in sgemm, V8 spills a 6-row tile of simd128 accumulators.
#ifdef __wasm__
constexpr int64_t MR = 4;
#else
constexpr int64_t MR = 6;
#endif
constexpr int64_t NR = 8;  // columns of the portable kernel's tile (two 4-lane vectors)
#ifdef FXWASM_X86_DISPATCH
constexpr int64_t NR_AVX2 = 16;     // two 8-lane ymm vectors
constexpr int64_t NR_VNNI512 = 32;  // two 16-lane zmm vectors
// (vpdpwssd, on AVX-512 VNNI: the multiply-add and the accumulation in one instruction, on 16
// lanes.)
#endif
// K pairs per block: a 128-pair slice of a 16-column B panel (8 KB) stays in L1 while the A
// panels stream past it.
constexpr int64_t KCP = 128;

int64_t right_panel() {
#ifdef FXWASM_X86_DISPATCH
  if (cpu_has_avx512_vnni()) return NR_VNNI512;
  if (cpu_has_avx2()) return NR_AVX2;
#endif
  return NR;
}

inline int32_t pair(int32_t lo, int32_t hi) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
                              (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
}

inline int32_t element(const void* p, QType t, int64_t i) {
  return t == QType::U8 ? static_cast<const uint8_t*>(p)[i] : static_cast<const int8_t*>(p)[i];
}

typedef int16_t v8s __attribute__((vector_size(16)));
typedef int32_t v4s __attribute__((vector_size(16)));

inline v4s madd(v4s a, v4s b) {
#if defined(__wasm_simd128__)
  return reinterpret_cast<v4s>(
      wasm_i32x4_dot_i16x8(reinterpret_cast<v128_t>(a), reinterpret_cast<v128_t>(b)));
#elif defined(__SSE2__)
  return reinterpret_cast<v4s>(
      _mm_madd_epi16(reinterpret_cast<__m128i>(a), reinterpret_cast<__m128i>(b)));
#else
  const v8s x = reinterpret_cast<v8s>(a), y = reinterpret_cast<v8s>(b);
  v4s r;
  for (int i = 0; i < 4; ++i) r[i] = x[2 * i] * y[2 * i] + x[2 * i + 1] * y[2 * i + 1];
  return r;
#endif
}

// Stores a full tile `t` (MR x nr, row stride nr) into C, or its rows x cols corner; adds to C
// unless `first`.
inline void store_tile(const int32_t* t, int64_t nr, int32_t* C, int64_t ldc, bool first,
                       int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j)
      C[r * ldc + j] = first ? t[r * nr + j] : C[r * ldc + j] + t[r * nr + j];
}

void kernel_portable(int64_t kps, const int32_t* a, const int32_t* b, int32_t* C, int64_t ldc,
                     bool first, int64_t rows, int64_t cols) {
  v4s acc[MR][2];
  for (int64_t r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = v4s{0, 0, 0, 0};
  for (int64_t k = 0; k < kps; ++k, a += MR, b += NR) {
    v4s b0, b1;
    std::memcpy(&b0, b, 16);
    std::memcpy(&b1, b + 4, 16);
    for (int64_t r = 0; r < MR; ++r) {
      const v4s av = {a[r], a[r], a[r], a[r]};
      acc[r][0] += madd(av, b0);
      acc[r][1] += madd(av, b1);
    }
  }
  int32_t t[MR * NR];
  for (int64_t r = 0; r < MR; ++r) {
    std::memcpy(t + r * NR, &acc[r][0], 16);
    std::memcpy(t + r * NR + 4, &acc[r][1], 16);
  }
  store_tile(t, NR, C, ldc, first, rows, cols);
}

#ifdef FXWASM_X86_DISPATCH
__attribute__((target("avx2"))) void kernel_avx2(int64_t kps, const int32_t* a, const int32_t* b,
                                                 int32_t* C, int64_t ldc, bool first, int64_t rows,
                                                 int64_t cols) {
  __m256i acc[MR][2];
  for (int64_t r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t k = 0; k < kps; ++k, a += MR, b += NR_AVX2) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 8));
    for (int64_t r = 0; r < MR; ++r) {
      const __m256i av = _mm256_set1_epi32(a[r]);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(av, b0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(av, b1));
    }
  }
  if (rows == MR && cols == NR_AVX2) {
    for (int64_t r = 0; r < MR; ++r) {
      __m256i* c0 = reinterpret_cast<__m256i*>(C + r * ldc);
      __m256i* c1 = reinterpret_cast<__m256i*>(C + r * ldc + 8);
      if (!first) {
        acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_loadu_si256(c0));
        acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_loadu_si256(c1));
      }
      _mm256_storeu_si256(c0, acc[r][0]);
      _mm256_storeu_si256(c1, acc[r][1]);
    }
    return;
  }
  alignas(32) int32_t t[MR * NR_AVX2];
  for (int64_t r = 0; r < MR; ++r) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(t + r * NR_AVX2), acc[r][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(t + r * NR_AVX2 + 8), acc[r][1]);
  }
  store_tile(t, NR_AVX2, C, ldc, first, rows, cols);
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) void kernel_vnni512(
    int64_t kps, const int32_t* a, const int32_t* b, int32_t* C, int64_t ldc, bool first,
    int64_t rows, int64_t cols) {
  __m512i acc[MR][2];
  for (int64_t r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  for (int64_t k = 0; k < kps; ++k, a += MR, b += NR_VNNI512) {
    const __m512i b0 = _mm512_loadu_si512(b);
    const __m512i b1 = _mm512_loadu_si512(b + 16);
    for (int64_t r = 0; r < MR; ++r) {
      const __m512i av = _mm512_set1_epi32(a[r]);
      acc[r][0] = _mm512_dpwssd_epi32(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpwssd_epi32(acc[r][1], av, b1);
    }
  }
  if (rows == MR && cols == NR_VNNI512) {
    for (int64_t r = 0; r < MR; ++r) {
      int32_t* c = C + r * ldc;
      if (!first) {
        acc[r][0] = _mm512_add_epi32(acc[r][0], _mm512_loadu_si512(c));
        acc[r][1] = _mm512_add_epi32(acc[r][1], _mm512_loadu_si512(c + 16));
      }
      _mm512_storeu_si512(c, acc[r][0]);
      _mm512_storeu_si512(c + 16, acc[r][1]);
    }
    return;
  }
  alignas(64) int32_t t[MR * NR_VNNI512];
  for (int64_t r = 0; r < MR; ++r) {
    _mm512_store_si512(t + r * NR_VNNI512, acc[r][0]);
    _mm512_store_si512(t + r * NR_VNNI512 + 16, acc[r][1]);
  }
  store_tile(t, NR_VNNI512, C, ldc, first, rows, cols);
}

// uint8 x int8 quads: vpdpbusd adds four products per lane (b: the right operand's uint8 quads,
// a: the left operand's int8 quad, broadcast).
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void kernel_u8s8_vnni512(
    int64_t kqs, const int32_t* a, const int32_t* b, int32_t* C, int64_t ldc, bool first,
    int64_t rows, int64_t cols) {
  __m512i acc[MR][2];
  for (int64_t r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  for (int64_t k = 0; k < kqs; ++k, a += MR, b += NR_VNNI512) {
    const __m512i b0 = _mm512_loadu_si512(b);
    const __m512i b1 = _mm512_loadu_si512(b + 16);
    for (int64_t r = 0; r < MR; ++r) {
      const __m512i av = _mm512_set1_epi32(a[r]);
      acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], b0, av);
      acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], b1, av);
    }
  }
  alignas(64) int32_t t[MR * NR_VNNI512];
  for (int64_t r = 0; r < MR; ++r) {
    _mm512_store_si512(t + r * NR_VNNI512, acc[r][0]);
    _mm512_store_si512(t + r * NR_VNNI512 + 16, acc[r][1]);
  }
  store_tile(t, NR_VNNI512, C, ldc, first, rows, cols);
}
#endif

}  // namespace

namespace {

// Row k = (c, kh, kw) of the im2col matrix of one image: values minus `sub`, taps in the padding
// `pad` (N = OH * OW).
template <class T, class Out>
void im2col_row(const T* image, int64_t H, int64_t W, int64_t KH, int64_t KW, int64_t stride_h,
                int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t dilation_h,
                int64_t dilation_w, int64_t OH, int64_t OW, int32_t sub, Out pad, int64_t k,
                Out* row) {
  const int64_t c = k / (KH * KW), kh = (k / KW) % KH, kw = k % KW;
  // Output columns whose tap is inside the image: iw = ow * stride_w - pad_left + kw * dw.
  const int64_t off = kw * dilation_w - pad_left;
  int64_t ow_lo = off >= 0 ? 0 : (-off + stride_w - 1) / stride_w;
  int64_t ow_hi = W - off <= 0 ? 0 : (W - off + stride_w - 1) / stride_w;
  ow_lo = std::min(ow_lo, OW);
  ow_hi = std::max(ow_lo, std::min(ow_hi, OW));
  for (int64_t oh = 0; oh < OH; ++oh) {
    const int64_t ih = oh * stride_h - pad_top + kh * dilation_h;
    Out* r = row + oh * OW;
    if (ih < 0 || ih >= H) {
      std::fill(r, r + OW, pad);
      continue;
    }
    const T* src = image + (c * H + ih) * W + off;
    std::fill(r, r + ow_lo, pad);
    if (stride_w == 1) {
      for (int64_t ow = ow_lo; ow < ow_hi; ++ow) r[ow] = static_cast<Out>(src[ow] - sub);
    } else {
      for (int64_t ow = ow_lo; ow < ow_hi; ++ow) r[ow] = static_cast<Out>(src[ow * stride_w] - sub);
    }
    std::fill(r + ow_hi, r + OW, pad);
  }
}

}  // namespace

bool QPacked::u8s8_available() {
#ifdef FXWASM_X86_DISPATCH
  return cpu_has_avx512_vnni();
#else
  return false;
#endif
}

QPacked QPacked::left_s8_quads(int64_t M, int64_t K, const int8_t* A, int64_t lda) {
  QPacked p;
  p.left_ = true;
  p.quads_ = true;
  p.rows_ = M;
  p.cols_ = K;
  p.panel_ = MR;
  p.padded_ = (M + MR - 1) / MR * MR;
  p.pairs_ = (K + 3) / 4;
  p.data_.assign(static_cast<size_t>(p.padded_ * p.pairs_), 0);
  p.sums_.assign(static_cast<size_t>(M), 0);
  for (int64_t i = 0; i < M && p.pairs_ > 0; ++i) {  // K = 0: nothing to pack (and no buffer)
    int8_t* out = reinterpret_cast<int8_t*>(p.data_.data() + (i / MR) * p.pairs_ * MR + i % MR);
    for (int64_t k = 0; k < K; ++k) {
      out[(k / 4) * MR * 4 + k % 4] = A[i * lda + k];
      p.sums_[i] += A[i * lda + k];
    }
  }
  return p;
}

QPacked QPacked::right_im2col_u8_quads(const uint8_t* image, int64_t C, int64_t H, int64_t W,
                                       int64_t KH, int64_t KW, int64_t stride_h, int64_t stride_w,
                                       int64_t pad_top, int64_t pad_left, int64_t dilation_h,
                                       int64_t dilation_w, int64_t OH, int64_t OW, uint8_t zp) {
  QPacked p;
  p.left_ = false;
  p.quads_ = true;
  const int64_t K = C * KH * KW, N = OH * OW;
  p.rows_ = K;
  p.cols_ = N;
#ifdef FXWASM_X86_DISPATCH
  p.panel_ = NR_VNNI512;
#else
  p.panel_ = NR;  // (never used: u8s8_available() is false)
#endif
  const int64_t nr = p.panel_;
  p.padded_ = (N + nr - 1) / nr * nr;
  p.pairs_ = (K + 3) / 4;
  p.data_.resize(static_cast<size_t>(p.padded_ * p.pairs_));
  std::vector<uint8_t> rows(static_cast<size_t>(4 * p.padded_), 0);
  for (int64_t g = 0; g < p.pairs_; ++g) {
    for (int64_t h = 0; h < 4; ++h) {
      uint8_t* r = rows.data() + h * p.padded_;
      const int64_t k = 4 * g + h;
      if (k >= K)
        std::fill(r, r + N, uint8_t{0});
      else
        im2col_row(image, H, W, KH, KW, stride_h, stride_w, pad_top, pad_left, dilation_h,
                   dilation_w, OH, OW, 0, zp, k, r);
    }
    const uint8_t* r0 = rows.data();
    const uint8_t* r1 = r0 + p.padded_;
    const uint8_t* r2 = r1 + p.padded_;
    const uint8_t* r3 = r2 + p.padded_;
    for (int64_t j0 = 0; j0 < p.padded_; j0 += nr) {
      uint8_t* out =
          reinterpret_cast<uint8_t*>(p.data_.data() + (j0 / nr) * p.pairs_ * nr + g * nr);
      for (int64_t j = 0; j < nr; ++j) {
        out[4 * j] = r0[j0 + j];
        out[4 * j + 1] = r1[j0 + j];
        out[4 * j + 2] = r2[j0 + j];
        out[4 * j + 3] = r3[j0 + j];
      }
    }
  }
  return p;
}

QPacked QPacked::left(int64_t M, int64_t K, const void* A, QType type, int64_t lda,
                      const int32_t* zp, bool zp_per_row) {
  QPacked p;
  p.left_ = true;
  p.rows_ = M;
  p.cols_ = K;
  p.panel_ = MR;
  p.padded_ = (M + MR - 1) / MR * MR;
  p.pairs_ = (K + 1) / 2;
  p.data_.assign(static_cast<size_t>(p.padded_ * p.pairs_), 0);
  for (int64_t i = 0; i < M && p.pairs_ > 0; ++i) {  // K = 0: nothing to pack (and no buffer)
    const int32_t z = zp ? zp[zp_per_row ? i : 0] : 0;
    int32_t* out = p.data_.data() + (i / MR) * p.pairs_ * MR + i % MR;
    const int64_t row = i * lda;
    for (int64_t kp = 0; kp < p.pairs_; ++kp) {
      const int64_t k = 2 * kp;
      const int32_t lo = element(A, type, row + k) - z;
      const int32_t hi = k + 1 < K ? element(A, type, row + k + 1) - z : 0;
      out[kp * MR] = pair(lo, hi);
    }
  }
  return p;
}

QPacked QPacked::right(int64_t K, int64_t N, const void* B, QType type, int64_t ldb, bool trans_b,
                       const int32_t* zp, bool zp_per_col) {
  QPacked p;
  p.left_ = false;
  p.rows_ = K;
  p.cols_ = N;
  p.panel_ = right_panel();
  const int64_t nr = p.panel_;
  p.padded_ = (N + nr - 1) / nr * nr;
  p.pairs_ = (K + 1) / 2;
  p.data_.assign(static_cast<size_t>(p.padded_ * p.pairs_), 0);
  for (int64_t j = 0; j < N && p.pairs_ > 0; ++j) {  // K = 0: nothing to pack (and no buffer)
    const int32_t z = zp ? zp[zp_per_col ? j : 0] : 0;
    int32_t* out = p.data_.data() + (j / nr) * p.pairs_ * nr + j % nr;
    auto at = [&](int64_t k) { return element(B, type, trans_b ? j * ldb + k : k * ldb + j) - z; };
    for (int64_t kp = 0; kp < p.pairs_; ++kp) {
      const int64_t k = 2 * kp;
      out[kp * nr] = pair(at(k), k + 1 < K ? at(k + 1) : 0);
    }
  }
  return p;
}

QPacked QPacked::right_im2col(const void* image, QType type, int64_t C, int64_t H, int64_t W,
                              int64_t KH, int64_t KW, int64_t stride_h, int64_t stride_w,
                              int64_t pad_top, int64_t pad_left, int64_t dilation_h,
                              int64_t dilation_w, int64_t OH, int64_t OW, int32_t zp) {
  QPacked p;
  p.left_ = false;
  const int64_t K = C * KH * KW, N = OH * OW;
  p.rows_ = K;
  p.cols_ = N;
  p.panel_ = right_panel();
  const int64_t nr = p.panel_;
  p.padded_ = (N + nr - 1) / nr * nr;
  p.pairs_ = (K + 1) / 2;
  p.data_.resize(static_cast<size_t>(p.padded_ * p.pairs_));
  // Two rows of the im2col matrix at a time (a pair k, k + 1), interleaved into the panels:
  // pair kp of column j is data[(j / nr) * pairs * nr + kp * nr + j % nr]. Columns past N and
  // the row past an odd K are zero.
  std::vector<int16_t> rows(static_cast<size_t>(2 * p.padded_), 0);
  int16_t* r0 = rows.data();
  int16_t* r1 = rows.data() + p.padded_;
  for (int64_t kp = 0; kp < p.pairs_; ++kp) {
    for (int64_t h = 0; h < 2; ++h) {
      int16_t* r = h ? r1 : r0;
      const int64_t k = 2 * kp + h;
      if (k >= K) {
        std::fill(r, r + N, int16_t{0});
      } else if (type == QType::U8) {
        im2col_row(static_cast<const uint8_t*>(image), H, W, KH, KW, stride_h, stride_w, pad_top,
                   pad_left, dilation_h, dilation_w, OH, OW, zp, int16_t{0}, k, r);
      } else {
        im2col_row(static_cast<const int8_t*>(image), H, W, KH, KW, stride_h, stride_w, pad_top,
                   pad_left, dilation_h, dilation_w, OH, OW, zp, int16_t{0}, k, r);
      }
    }
    for (int64_t j0 = 0; j0 < p.padded_; j0 += nr) {
      int16_t* out =
          reinterpret_cast<int16_t*>(p.data_.data() + (j0 / nr) * p.pairs_ * nr + kp * nr);
      for (int64_t j = 0; j < nr; ++j) {  // little-endian: the low half is k
        out[2 * j] = r0[j0 + j];
        out[2 * j + 1] = r1[j0 + j];
      }
    }
  }
  return p;
}

void qgemm(const QPacked& A, const QPacked& B, int32_t* C, int64_t ldc) {
  const int64_t M = A.rows_, N = B.cols_, pairs = A.pairs_;
  const int64_t nr = B.panel_;
  auto kernel = kernel_portable;
#ifdef FXWASM_X86_DISPATCH
  if (nr == NR_AVX2) kernel = kernel_avx2;
  if (nr == NR_VNNI512) kernel = A.quads_ ? kernel_u8s8_vnni512 : kernel_vnni512;
#endif
  if (A.quads_ != B.quads_ || (A.quads_ && kernel == kernel_portable))
    throw std::logic_error("qgemm: operands packed for different kernels");
  if (pairs == 0) {  // K == 0: the empty sum
    for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, 0);
    return;
  }
  for (int64_t k0 = 0; k0 < pairs; k0 += KCP) {
    const int64_t kps = std::min(KCP, pairs - k0);
    for (int64_t j0 = 0; j0 < N; j0 += nr) {
      const int32_t* b = B.data_.data() + (j0 / nr) * pairs * nr + k0 * nr;
      for (int64_t i0 = 0; i0 < M; i0 += MR) {
        const int32_t* a = A.data_.data() + (i0 / MR) * pairs * MR + k0 * MR;
        kernel(kps, a, b, C + i0 * ldc + j0, ldc, k0 == 0, std::min(MR, M - i0),
               std::min(nr, N - j0));
      }
    }
  }
}

void qgemm_reference(int64_t M, int64_t N, int64_t K, const void* A, QType a_type, int64_t lda,
                     const int32_t* a_zp, bool a_zp_per_row, const void* B, QType b_type,
                     int64_t ldb, bool trans_b, const int32_t* b_zp, bool b_zp_per_col, int32_t* C,
                     int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      const int32_t za = a_zp ? a_zp[a_zp_per_row ? i : 0] : 0;
      const int32_t zb = b_zp ? b_zp[b_zp_per_col ? j : 0] : 0;
      int64_t s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += int64_t{element(A, a_type, i * lda + k) - za} *
             (element(B, b_type, trans_b ? j * ldb + k : k * ldb + j) - zb);
      C[i * ldc + j] = static_cast<int32_t>(s);
    }
}

namespace {

typedef float v4f_ __attribute__((vector_size(16)));

// One row of requantize: `per_column` reads scale/offset/bias per element (offsets from `col0`
// arrays), else uses the row's scalars.
template <class T>
void requantize_row(const Requant& r, bool per_column, float row_scale, float row_offset,
                    int32_t row_bias, int64_t cols, const int32_t* a, T* o, int32_t qmin,
                    int32_t qmax) {
  // Round half to even by adding and subtracting 1.5 * 2^23 (exact for |v| < 2^22), after
  // bounding v well inside that range (results saturate to 8 bits anyway).
  const float magic = 12582912.0f, bound = 1048576.0f;
  auto scale_at = [&](int64_t j) {
    return per_column ? r.scale[r.scale_count == 1 ? 0 : j] : row_scale;
  };
  auto offset_at = [&](int64_t j) {
    return per_column ? (r.offset ? r.offset[j] : 0.0f) : row_offset;
  };
  auto bias_at = [&](int64_t j) {
    return per_column ? (r.bias_i32 ? r.bias_i32[j] : 0) : row_bias;
  };
  int64_t j = 0;
  if (!per_column) {  // four lanes at a time (SSE / simd128)
    const v4f_ vs = {row_scale, row_scale, row_scale, row_scale};
    const v4f_ voff = {row_offset, row_offset, row_offset, row_offset};
    const v4f_ vmagic = {magic, magic, magic, magic};
    const v4f_ vlo = {-bound, -bound, -bound, -bound}, vhi = {bound, bound, bound, bound};
    const v4s vzp = {r.zp, r.zp, r.zp, r.zp}, vb = {row_bias, row_bias, row_bias, row_bias};
    const v4s qlo = {qmin, qmin, qmin, qmin}, qhi = {qmax, qmax, qmax, qmax};
    for (; j + 4 <= cols; j += 4) {
      v4s x;
      std::memcpy(&x, a + j, 16);
      v4f_ v = __builtin_convertvector(x + vb, v4f_) * vs + voff;
      v = v < vlo ? vlo : v;
      v = v > vhi ? vhi : v;
      v = (v + vmagic) - vmagic;
      v4s q = __builtin_convertvector(v, v4s) + vzp;
      q = q < qlo ? qlo : q;
      q = q > qhi ? qhi : q;
      for (int l = 0; l < 4; ++l) o[j + l] = static_cast<T>(q[l]);
    }
  }
  for (; j < cols; ++j) {
    float v = static_cast<float>(a[j] + bias_at(j)) * scale_at(j) + offset_at(j);
    v = std::min(std::max(v, -bound), bound);
    const int32_t q = static_cast<int32_t>((v + magic) - magic) + r.zp;
    o[j] = static_cast<T>(std::min(std::max(q, qmin), qmax));
  }
}

}  // namespace

void requantize(const Requant& r, int64_t rows, int64_t cols, const int32_t* acc, int64_t lda,
                void* out, int64_t ldo) {
  const int32_t qmin = std::max(r.type == QType::U8 ? 0 : -128, r.lo_q);
  const int32_t qmax = std::min(r.type == QType::U8 ? 255 : 127, r.hi_q);
  for (int64_t i = 0; i < rows; ++i) {
    float row_scale = 0.0f, row_offset = 0.0f;
    int32_t row_bias = 0;
    if (r.per_row) {
      row_scale = r.scale[r.scale_count == 1 ? 0 : i];
      row_offset = r.offset ? r.offset[i] : 0.0f;
      row_bias = r.bias_i32 ? r.bias_i32[i] : 0;
    }
    if (r.type == QType::U8)
      requantize_row(r, !r.per_row, row_scale, row_offset, row_bias, cols, acc + i * lda,
                     static_cast<uint8_t*>(out) + i * ldo, qmin, qmax);
    else
      requantize_row(r, !r.per_row, row_scale, row_offset, row_bias, cols, acc + i * lda,
                     static_cast<int8_t*>(out) + i * ldo, qmin, qmax);
  }
}

}  // namespace fx::kernels
