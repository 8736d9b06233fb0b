// Integer GEMM of the executor's quantized ops: 8-bit operands (uint8 or int8, each with its zero
// points) multiplied with exact int32 accumulation. Both operands are widened to int16 with their
// zero points subtracted as they are packed ((x - zp) fits int16 for every 8-bit x and zp), so
// one kernel serves every signedness and the products are pairs of int16 multiply-adds:
// pmaddwd natively (SSE2, and AVX2 when the CPU has it), i32x4.dot_i16x8 in wasm simd128.
#pragma once

#include <cstdint>
#include <vector>

namespace fx::kernels {

/// The element type of an 8-bit operand.
enum class QType : uint8_t { U8, S8 };

/// One operand of qgemm, packed: the left op(A) (M x K) in row panels, or the right B (K x N) in
/// column panels, both as int16 pairs along K with the zero points already subtracted. A layer's
/// constant weights are packed once and reused.
class QPacked {
 public:
  /// op(A) = A (M x K, row stride lda); `zp`: one zero point, or M of them when `zp_per_row`.
  static QPacked left(int64_t M, int64_t K, const void* A, QType type, int64_t lda,
                      const int32_t* zp, bool zp_per_row);
  /// B (K x N; when trans_b, B is stored N x K), row stride ldb; `zp`: one zero point, or N of
  /// them when `zp_per_col`.
  static QPacked right(int64_t K, int64_t N, const void* B, QType type, int64_t ldb, bool trans_b,
                       const int32_t* zp, bool zp_per_col);
  /// The right operand of a convolution as im2col + GEMM, packed straight from one image (C x H x
  /// W) without an im2col buffer: rows k = (c, kh, kw), columns the output pixels (N = OH * OW);
  /// taps in the padding read `zp` and so contribute zero.
  static QPacked right_im2col(const void* image, QType type, int64_t C, int64_t H, int64_t W,
                              int64_t KH, int64_t KW, int64_t stride_h, int64_t stride_w,
                              int64_t pad_top, int64_t pad_left, int64_t dilation_h,
                              int64_t dilation_w, int64_t OH, int64_t OW, int32_t zp);

  /// Whether this CPU multiplies uint8 by int8 four products per lane (AVX-512 VNNI vpdpbusd):
  /// then left_s8_quads x right_im2col_u8_quads runs twice as many products per instruction as
  /// the int16 pairs.
  static bool u8s8_available();
  /// The left operand as int8 quads (k .. k + 3) with no zero point (symmetric int8 weights);
  /// row_sums()[i] = sum_k A[i, k]. Its right operand must be right_im2col_u8_quads.
  static QPacked left_s8_quads(int64_t M, int64_t K, const int8_t* A, int64_t lda);
  /// right_im2col as raw uint8 quads: taps in the padding read `zp` and nothing is subtracted,
  /// so qgemm's result includes zp * row_sums() of the left operand, which the caller subtracts.
  static QPacked right_im2col_u8_quads(const uint8_t* image, int64_t C, int64_t H, int64_t W,
                                       int64_t KH, int64_t KW, int64_t stride_h, int64_t stride_w,
                                       int64_t pad_top, int64_t pad_left, int64_t dilation_h,
                                       int64_t dilation_w, int64_t OH, int64_t OW, uint8_t zp);
  const std::vector<int32_t>& row_sums() const { return sums_; }

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }

 private:
  friend void qgemm(const QPacked&, const QPacked&, int32_t*, int64_t);
  friend struct QPackAccess;
  bool left_ = true;
  int64_t rows_ = 0, cols_ = 0;
  int64_t panel_ = 0;   // rows (left) / columns (right) of a panel
  int64_t padded_ = 0;  // M or N rounded up to the panel size
  int64_t pairs_ = 0;   // ceil(K / 2)
  bool quads_ = false;  // int8 quads (k .. k + 3) instead of int16 pairs; pairs_ counts quads
  std::vector<int32_t> data_;  // each int32 is an int16 pair (k, k + 1) of one row / column
  std::vector<int32_t> sums_;  // left_s8_quads: the row sums
};

/// C (M x N, row stride ldc) = op(A) * B in int32, from operands packed by QPacked (A.cols() ==
/// B.rows()).
void qgemm(const QPacked& A, const QPacked& B, int32_t* C, int64_t ldc);

/// The triple loop over unpacked operands, which qgemm is tested against.
void qgemm_reference(int64_t M, int64_t N, int64_t K, const void* A, QType a_type, int64_t lda,
                     const int32_t* a_zp, bool a_zp_per_row, const void* B, QType b_type,
                     int64_t ldb, bool trans_b, const int32_t* b_zp, bool b_zp_per_col, int32_t* C,
                     int64_t ldc);

/// Requantizes an int32 accumulator block to 8 bits as onnxruntime does:
/// out = saturate(round_half_even((acc + bias_i32) * scale + offset) + zp), with round half to
/// even. `bias_i32`, `scale` and `offset` are indexed by row when `per_row`, else by column;
/// `scale` has one value when `scale_count` is 1; bias_i32/offset may be null. `lo_q`/`hi_q`
/// further bound the result (a fused Relu is lo_q = zp). out has row stride ldo.
struct Requant {
  const int32_t* bias_i32 = nullptr;
  const float* scale = nullptr;
  int64_t scale_count = 1;
  const float* offset = nullptr;
  bool per_row = true;
  int32_t zp = 0;
  QType type = QType::U8;
  int32_t lo_q = -(1 << 30), hi_q = 1 << 30;
};
void requantize(const Requant& r, int64_t rows, int64_t cols, const int32_t* acc, int64_t lda,
                void* out, int64_t ldo);

}  // namespace fx::kernels
