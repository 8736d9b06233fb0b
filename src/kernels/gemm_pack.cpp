// Packing of sgemm's operands (gemm_pack.h).
#include "kernels/gemm_pack.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu.h"
#include "kernels/gemm_micro.h"
#include "kernels/simd.h"

namespace fx::kernels::gemm_pack {

using gemm_micro::MR;

namespace {

// pack_a with a column scale: the same panels, each element times scale[k] (rare: a
// per-channel Mul fused before a 1x1 convolution read as the transposed product's left operand).
void pack_a_scaled(const float* A, int64_t lda, bool trans, int64_t i0, int64_t mc, int64_t k0,
                   int64_t kc, float* out, const float* scale) {
  for (int64_t p = 0; p < mc; p += MR, out += kc * MR) {
    const int64_t rows = std::min(MR, mc - p);
    if (trans && rows == MR) {  // MR consecutive floats of A's row k0 + k
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = A + (k0 + k) * lda + i0 + p;
        float* o = out + k * MR;
        int64_t r = 0;
        for (; r + 4 <= MR; r += 4) store4(o + r, load4(src + r) * splat(scale[k]));
        for (; r < MR; ++r) o[r] = src[r] * scale[k];
      }
      continue;
    }
    for (int64_t k = 0; k < kc; ++k)
      for (int64_t r = 0; r < MR; ++r)
        out[k * MR + r] = r < rows ? at_a(A, lda, trans, i0 + p + r, k0 + k) * scale[k] : 0.0f;
  }
}

// One full panel of a row-major B read in place (kc rows ldb apart, `width` columns) into
// out[k * width + c], just before its row tiles use it: with the rows prefetched a few ahead and
// whole-register copies. The micro-kernel then reads it from L1 as one stream instead of two
// cache lines from each of kc rows (see direct_b in GemmCore::blocked).
// `scale` (optional): row k times scale[k], one rounded multiply an element.
template <class V>
inline __attribute__((always_inline)) void pack_panel_rows(const float* B, int64_t ldb, int64_t kc,
                                                           int64_t width, float* out,
                                                           const float* scale) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  for (int64_t k = 0; k < kc; ++k) {
    const float* src = B + k * ldb;
    __builtin_prefetch(src + 8 * ldb);
    __builtin_prefetch(src + 8 * ldb + width - 1);
    for (int64_t c = 0; c < width; c += L) {
      V v;
      std::memcpy(&v, src + c, sizeof v);
      if (scale) v *= scale[k];
      std::memcpy(out + k * width + c, &v, sizeof v);
    }
  }
}
#ifdef FXWASM_X86_DISPATCH
typedef float v8f_ __attribute__((vector_size(32)));
typedef float v16f_ __attribute__((vector_size(64)));
__attribute__((target("avx2"))) void pack_panel_avx2(const float* B, int64_t ldb, int64_t kc,
                                                     int64_t width, float* out,
                                                     const float* scale) {
  pack_panel_rows<v8f_>(B, ldb, kc, width, out, scale);
}
__attribute__((target("avx512f"))) void pack_panel_avx512(const float* B, int64_t ldb, int64_t kc,
                                                          int64_t width, float* out,
                                                          const float* scale) {
  pack_panel_rows<v16f_>(B, ldb, kc, width, out, scale);
}
#endif
}  // namespace

void pack_a(const float* A, int64_t lda, bool trans, int64_t i0, int64_t mc, int64_t k0, int64_t kc,
            float* out, const float* scale) {
  if (scale) return pack_a_scaled(A, lda, trans, i0, mc, k0, kc, out, scale);
  for (int64_t p = 0; p < mc; p += MR) {
    const int64_t rows = std::min(MR, mc - p);
    if (!trans && rows == MR) {
      // A full panel of a row-major A: read MR rows four k at a time and transpose in
      // registers (scalar element-by-element gathers were a third of the packing time).
      const float* row[MR];
      for (int64_t r = 0; r < MR; ++r) row[r] = A + (i0 + p + r) * lda + k0;
      int64_t k = 0;
      for (; k + 4 <= kc; k += 4) {
        v4f v[MR];
        for (int64_t r = 0; r < MR; ++r) v[r] = load4(row[r] + k);
        float* o = out + k * MR;  // o[kk * MR + r] = v[r][kk]
        for (int64_t kk = 0; kk < 4; ++kk)
          for (int64_t r = 0; r < MR; ++r) o[kk * MR + r] = v[r][kk];
      }
      for (; k < kc; ++k)
        for (int64_t r = 0; r < MR; ++r) out[k * MR + r] = row[r][k];
      out += kc * MR;
      continue;
    }
    if (trans && rows == MR) {  // op(A)'s rows are A's columns: MR consecutive floats per k
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = A + (k0 + k) * lda + i0 + p;
        for (int64_t r = 0; r < MR; ++r) out[k * MR + r] = src[r];
      }
      out += kc * MR;
      continue;
    }
    for (int64_t k = 0; k < kc; ++k)  // (one loop of MR: GCC made the zero tail a memset call)
      for (int64_t r = 0; r < MR; ++r)
        out[k * MR + r] = r < rows ? at_a(A, lda, trans, i0 + p + r, k0 + k) : 0.0f;
    out += kc * MR;
  }
}

void transpose_rows(const float* rows, int64_t ldr, int64_t kc, int64_t width, float* out,
                    int64_t ldo) {
  int64_t k = 0;
  for (; k + 4 <= kc; k += 4)
    for (int64_t c = 0; c < width; c += 4) {
      const float* src = rows + c * ldr + k;
      v4f r0 = load4(src), r1 = load4(src + ldr), r2 = load4(src + 2 * ldr),
          r3 = load4(src + 3 * ldr);
      transpose4x4(r0, r1, r2, r3);
      store4(out + k * ldo + c, r0);
      store4(out + (k + 1) * ldo + c, r1);
      store4(out + (k + 2) * ldo + c, r2);
      store4(out + (k + 3) * ldo + c, r3);
    }
  for (; k < kc; ++k)
    for (int64_t c = 0; c < width; ++c) out[k * ldo + c] = rows[c * ldr + k];
}

void pack_b(const float* B, int64_t ldb, bool trans, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
            int64_t width, float* out, const float* scale) {
  for (int64_t p = 0; p < nc; p += width) {
    const int64_t cols = std::min(width, nc - p);
    if (scale) {  // (rare: a per-channel Mul fused before a 1x1 convolution)
      for (int64_t k = 0; k < kc; ++k) {
        const float s = scale[k];
        float* dst = out + k * width;
        if (!trans && cols == width) {
          const float* src = B + (k0 + k) * ldb + j0 + p;
          for (int64_t c = 0; c < width; c += 4) store4(dst + c, load4(src + c) * splat(s));
          continue;
        }
        for (int64_t c = 0; c < width; ++c)
          dst[c] = c < cols ? at_b(B, ldb, trans, k0 + k, j0 + p + c) * s : 0.0f;
      }
      out += kc * width;
      continue;
    }
    if (trans && cols == width && width % 4 == 0) {
      // op(B)'s columns are B's rows (element by element, packing a head's keys took longer than
      // attention's K^T product).
      transpose_rows(B + (j0 + p) * ldb + k0, ldb, kc, width, out, width);
      out += kc * width;
      continue;
    }
    for (int64_t k = 0; k < kc; ++k) {
      if (!trans && cols == width) {
        // Vector copies: a memcpy of this run-time size became `rep movsq`, whose start-up
        // cost made packing take half as long as the multiply-adds on conv shapes.
        const float* src = B + (k0 + k) * ldb + j0 + p;
        float* dst = out + k * width;
        for (int64_t c = 0; c < width; c += 4) store4(dst + c, load4(src + c));
        continue;
      }
      for (int64_t c = 0; c < width; ++c)  // (one loop: not a memset call per k)
        out[k * width + c] = c < cols ? at_b(B, ldb, trans, k0 + k, j0 + p + c) : 0.0f;
    }
    out += kc * width;
  }
}

void pack_panel(const float* B, int64_t ldb, int64_t kc, int64_t width, float* out,
                const float* scale) {
#ifdef FXWASM_X86_DISPATCH
  if (width % 16 == 0 && cpu_has_avx512()) return pack_panel_avx512(B, ldb, kc, width, out, scale);
  if (width % 8 == 0 && cpu_has_avx2()) return pack_panel_avx2(B, ldb, kc, width, out, scale);
#endif
  // (every kernel's panel width is a multiple of 8)
  pack_panel_rows<v4f>(B, ldb, kc, width, out, scale);
}

}  // namespace fx::kernels::gemm_pack
