// fx::kernels — compute kernels of the fxwasm executor, one C++ source for native builds and
// WebAssembly. No LibTorch, no Embind: plain loops over GCC/Clang vector extensions, which
// lower to SSE/AVX natively and to simd128 in wasm (-msimd128).
#pragma once

#include <cstdint>
#include <vector>

namespace fx::kernels {

/// What sgemm applies to each result as it stores it (fusing a convolution's or a linear layer's
/// bias, a residual Add and a following Relu/Clip into the GEMM instead of extra passes over the
/// output): C[i, j] += row_bias[i], then C[i, j] += col_bias[j] (on top of beta * C), then
/// C[i, j] += residual[i * ldr + j], then C[i, j] = min(max(C[i, j], lo), hi).
struct GemmEpilogue {
  const float* row_bias = nullptr;  ///< M values, or null
  const float* col_bias = nullptr;  ///< N values, or null
  /// An M x N matrix (row stride ldr) added last, before the clamp, or null. It must not overlap
  /// C (which holds partial sums while K is split into blocks).
  const float* residual = nullptr;
  int64_t ldr = 0;
  float lo = -__builtin_inff();
  float hi = __builtin_inff();
};

/// One operand of sgemm packed ahead of time into the panels sgemm would pack it into on every
/// call: a layer's weights, packed once and reused by every run. op(A) (M x K) as the left
/// operand or op(B) (K x N) as the right one. Valid for this process only (the right operand's
/// panel width follows the micro-kernel the CPU selects).
class PackedOperand {
 public:
  /// `n_hint`: the N of the products it will take part in, when known (a convolution's output
  /// pixels). Where sgemm_prefers_transposed(M, n_hint, K), op(A) is kept as the right operand of
  /// the transposed product C^T = op(B)^T op(A)^T, which sgemm then computes instead.
  static PackedOperand left(bool trans_a, int64_t M, int64_t K, const float* A, int64_t lda,
                            int64_t n_hint = 0);
  static PackedOperand right(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb);

  /// A right operand (K x N) in right()'s layout over the caller's `data` (right_floats(K, N)
  /// floats from a 64-byte boundary, which must outlive it and every product using it), for a
  /// caller that writes the panels itself (conv2d unfolds its input straight into them): element
  /// (k, j) goes to right_at(k, j)[0], and the columns after j up to the end of its panel (panels
  /// are panel_width() columns, a multiple of 4, from column 0) follow it; the columns past N in
  /// the last panel must be written too (zeros).
  static PackedOperand right_over(int64_t K, int64_t N, float* data);
  static int64_t right_floats(int64_t K, int64_t N);
  float* right_at(int64_t k, int64_t j) const;
  int64_t panel_width() const { return width_; }

  /// Writes back the B that right(trans_b, K, N, B, ldb) packed, bit for bit (a weight kept only
  /// in its packed form is unpacked on demand). Throws std::logic_error for a left operand.
  void unpack_right(bool trans_b, float* B, int64_t ldb) const;

  bool is_left() const { return left_; }
  /// A left operand kept as the right one of the transposed product (see left()).
  bool transposed() const { return transposed_; }
  /// op(A)'s M x K, or op(B)'s K x N.
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }

 private:
  friend void sgemm(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                    const float*, int64_t, float, float*, int64_t, const GemmEpilogue*,
                    const PackedOperand*, const PackedOperand*, const float*);
  friend struct GemmCore;
  // The panels of the KC-deep slice starting at k0, from row (left) / column (right) `at`.
  const float* block(int64_t k0, int64_t kc, int64_t at) const {
    return data_ + k0 * padded_ + at * kc;
  }
  bool left_ = true;
  bool transposed_ = false;  // a left operand packed as the right one of the transposed product
  int64_t rows_ = 0, cols_ = 0;
  int64_t padded_ = 0;  // M rounded up to the panel height / N to the panel width
  int64_t width_ = 0;   // a right operand's panel width
  std::vector<float> buf_;
  float* data_ = nullptr;
};

/// Single-precision GEMM, row-major: C = alpha * op(A) * op(B) + beta * C, where op(A) is
/// M x K (A is K x M when trans_a) and op(B) is K x N (B is N x K when trans_b); lda/ldb/ldc are
/// row strides in elements. beta == 0 ignores C's previous contents (NaNs included), as BLAS.
/// Blocked for caches (panels of A and B are packed) with a 6x8 register-blocked micro-kernel.
/// `packed_a` / `packed_b` (optional): the same A / B packed ahead of time (PackedOperand::left /
/// right with the same M, N, K); sgemm then reads their panels instead of packing A / B (which
/// must still be given: small products read them directly). The one exception: B may be null
/// when packed_b is this product's op(B) (a weight kept only packed); a row vector times it then
/// takes the blocked path. `b_row_scale` (optional, K values): op(B)'s row k is taken multiplied
/// by b_row_scale[k], each element rounded as a separate multiply would round it (a per-channel
/// Mul before a 1x1 convolution, applied as B is packed; never with packed_b, which is ignored).
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           const GemmEpilogue* epilogue = nullptr, const PackedOperand* packed_a = nullptr,
           const PackedOperand* packed_b = nullptr, const float* b_row_scale = nullptr);

/// Whether sgemm with a b_row_scale gives the bits of the same product of the scaled B: where the
/// unscaled product takes the blocked loops too (not a row or column vector, nor wasm's small
/// products, which sum in other orders).
bool sgemm_row_scale_keeps_bits(int64_t M, int64_t N, int64_t K);

/// Whether an M x N x K product runs clearly faster transposed (N x M): N short of a whole
/// number of column panels, M a multiple of the panel width (a 7x7 layer's 49 output pixels fill
/// 49 of 64 columns; as rows, 49 of 54), and K long enough to pay for transposing the result.
bool sgemm_prefers_transposed(int64_t M, int64_t N, int64_t K);

/// The textbook triple loop (double accumulation); the reference sgemm is tested against.
void sgemm_reference(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                     const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                     int64_t ldc);

}  // namespace fx::kernels
