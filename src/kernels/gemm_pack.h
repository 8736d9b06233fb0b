// Packing of sgemm's operands (gemm.cpp) into the panels its micro-kernels read (gemm_micro.h):
// op(A) into MR-high row panels, op(B) into column panels of the kernel's width, a full panel of a
// row-major B copied just before its row tiles, each optionally scaled along K (a per-channel Mul
// fused before a 1x1 convolution). Internal to the kernels.
#pragma once

#include <cstdint>

namespace fx::kernels::gemm_pack {

// Element (i, k) of op(A) and (k, j) of op(B).
inline float at_a(const float* A, int64_t lda, bool trans, int64_t i, int64_t k) {
  return trans ? A[k * lda + i] : A[i * lda + k];
}
inline float at_b(const float* B, int64_t ldb, bool trans, int64_t k, int64_t j) {
  return trans ? B[j * ldb + k] : B[k * ldb + j];
}

/// Packs rows [i0, i0+mc) x cols [k0, k0+kc) of op(A) into MR-high panels, k-major inside a
/// panel (panel[k * MR + r]); rows past mc are zero. `scale` (optional): column k is taken times
/// scale[k] (scale[0] for column k0), one rounded multiply an element.
void pack_a(const float* A, int64_t lda, bool trans, int64_t i0, int64_t mc, int64_t k0, int64_t kc,
            float* out, const float* scale = nullptr);
/// Packs rows [k0, k0+kc) x cols [j0, j0+nc) of op(B) into `width`-wide panels (panel[k * width +
/// c]), zero past nc. `scale` (optional): row k is taken times scale[k] (scale[0] for row k0).
void pack_b(const float* B, int64_t ldb, bool trans, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
            int64_t width, float* out, const float* scale = nullptr);
/// out[k * ldo + c] = rows[c * ldr + k] for k < kc and c < width (a multiple of 4): `width` rows
/// of kc floats transposed, 4 x 4 blocks at a time in registers.
void transpose_rows(const float* rows, int64_t ldr, int64_t kc, int64_t width, float* out,
                    int64_t ldo);
/// One full panel of a row-major B read in place (kc rows ldb apart, `width` columns, a multiple
/// of 8) into out[k * width + c], just before its row tiles use it. `scale` as pack_b's.
void pack_panel(const float* B, int64_t ldb, int64_t kc, int64_t width, float* out,
                const float* scale = nullptr);

}  // namespace fx::kernels::gemm_pack
