// Shape-level kernels of the executor over dense row-major float32 data: batched MatMul with
// numpy broadcasting, reductions over axes, and Transpose.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/gemm.h"

namespace fx::kernels {

/// numpy.matmul shapes: 1-D operands are promoted (and the added dim removed from the result),
/// batch dims broadcast. Returns false if the shapes do not multiply.
bool matmul_shape(const Shape& a, const Shape& b, Shape& out);
/// out = a @ b (numpy.matmul / ONNX MatMul) for float32. `packed_b` (optional): a 2-D b packed
/// ahead of time (PackedOperand::right); b may then be null (a weight kept only packed).
/// `col_bias` (optional): b's column count of values added
/// to every output row as the GEMM stores it (x @ W + bias), the bits of adding them after.
/// `residual` (optional): a tensor of the output's shape (row-major, not overlapping `out`) added
/// after the bias (x @ W + bias + r, the bits of the two Adds after). [lo, hi]: a clamp applied
/// last as the GEMM stores (a fused Relu or Clip; a NaN stays a NaN). `softmax_rows` (optional,
/// in and out): a Softmax over the result's last axis asked for, fused in where *softmax_rows is
/// left true: each batch item's product goes to a per-thread buffer and `out` gets the softmax of
/// its rows while they are in cache, the bits of softmax_f32 on the result (not for a 1-D operand,
/// items of over 1M floats, nor where b is only packed: then `out` holds the product).
void matmul_f32(const Shape& a_shape, const float* a, const Shape& b_shape, const float* b,
                float* out, const PackedOperand* packed_b = nullptr,
                const float* col_bias = nullptr, float lo = -__builtin_inff(),
                float hi = __builtin_inff(), const float* residual = nullptr,
                bool* softmax_rows = nullptr);

/// A tensor read in place from another one's elements: element (i0, i1, ...) is
/// base[offset + i0 * strides[0] + i1 * strides[1] + ...] (in elements; strides >= 0).
struct StridedLayout {
  Shape shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};
/// Whether the layout's elements are base[offset, offset + numel) in row-major order.
bool is_contiguous(const StridedLayout& v);
/// Copies the elements of `v` (over `base`, elements of elem_size bytes) into `out`, row-major.
void strided_copy(const void* base, size_t elem_size, const StridedLayout& v, void* out);
/// strided_copy for float32 with each element divided by `scalar` (`divide`) or multiplied by it,
/// as a Div or Mul by a scalar computes them (x / c, x * c).
void strided_copy_scaled_f32(const float* base, const StridedLayout& v, float scalar, bool divide,
                             float* out);
/// out = a @ b (numpy.matmul broadcasting) for float32 operands of rank >= 2 read in place
/// through their layouts; `out` is row-major. The bits of matmul_f32 on the operands copied out.
/// `out_layout` (optional): where each result element goes in `out` (its shape the result's, its
/// last stride 1); else row-major. Returns false (writing nothing) when the last two dims of an
/// operand have neither a column stride nor a row stride of 1 (sgemm reads rows or columns
/// contiguously), or the result's columns are not contiguous. `softmax_rows`: as matmul_f32's.
bool matmul_strided_f32(const float* a, const StridedLayout& av, const float* b,
                        const StridedLayout& bv, float* out, const float* col_bias = nullptr,
                        float lo = -__builtin_inff(), float hi = __builtin_inff(),
                        const StridedLayout* out_layout = nullptr, bool* softmax_rows = nullptr);

/// LogSum: log of the sum (ReduceLogSum).
enum class ReduceOp : uint8_t { Sum, Mean, Max, Min, Prod, L1, L2, SumSquare, LogSumExp, LogSum };

/// The shape of reducing `in` over `axes` (already normalised to [0, rank), any order; empty
/// means all axes), keeping reduced dims as 1 when keepdims.
Shape reduce_shape(const Shape& in, const std::vector<int64_t>& axes, bool keepdims);
/// Reduces over `axes` (empty: all); the output has numel(reduce_shape(...)) elements.
/// Max/Min propagate NaN; reducing zero elements gives the identity (0 for Sum/Mean..., -inf for
/// Max, +inf for Min, 1 for Prod), Mean of zero elements is NaN as in numpy.
void reduce_f32(ReduceOp op, const Shape& in_shape, const float* in,
                const std::vector<int64_t>& axes, float* out);
/// reduce_f32 for double (the executor reduces float64 and, widened, every integer type).
void reduce_f64(ReduceOp op, const Shape& in_shape, const double* in,
                const std::vector<int64_t>& axes, double* out);
/// ArgMax / ArgMin along one axis (first occurrence unless select_last_index).
void arg_reduce_f32(bool is_max, const Shape& in_shape, const float* in, int64_t axis,
                    bool select_last_index, int64_t* out);

/// One contiguous copy of copy_pieces.
struct CopyPiece {
  void* dst;
  const void* src;
  size_t bytes;
};
/// Every piece copied (Concat's blocks), split across the threads in chunks of at least 64 KB
/// when there are 256 KB or more in all; the bytes are the same however they are split.
void copy_pieces(const std::vector<CopyPiece>& pieces);

/// Whether transposing `in_shape` by `perm` keeps every element where it is in memory: the
/// dimensions it moves all have size 1 (or none moves), as a batch-of-one [1, S, E] -> [S, 1, E].
bool transpose_keeps_layout(const Shape& in_shape, const std::vector<int64_t>& perm);

/// out = in.transpose(perm) for elements of `elem_size` bytes.
void transpose(const Shape& in_shape, const void* in, const std::vector<int64_t>& perm,
               size_t elem_size, void* out);

}  // namespace fx::kernels
