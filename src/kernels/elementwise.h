// Elementwise kernels of the executor: numpy/ONNX multidirectional broadcasting for binary ops,
// and the unary activations. Shapes are int64 dims, data dense row-major.
#pragma once

#include <cstdint>
#include <vector>

namespace fx::kernels {

using Shape = std::vector<int64_t>;

/// numpy broadcasting of two shapes (right-aligned; each dim equal or 1). Returns false, leaving
/// `out` unspecified, when they are incompatible.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape& out);
int64_t numel(const Shape& s);
/// The flat index, in an operand of shape `operand` broadcast to `out`, of output element
/// `flat` (index arithmetic per element: for rare ops and tests, not hot loops).
int64_t broadcast_index(const Shape& out, const Shape& operand, int64_t flat);

enum class BinaryOp : uint8_t {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Min,
  Max,
  Mod,   ///< ONNX Mod with fmod = 0 (integers): the result has the divisor's sign, like Python %
  FMod,  ///< ONNX Mod with fmod = 1: C fmod, the result has the dividend's sign
  Equal,
  Less,
  Greater,
  LessOrEqual,
  GreaterOrEqual,  ///< results are bool (uint8 0/1)
  And,
  Or,
  Xor,  ///< bool inputs and result
};

/// out = a op b with broadcasting; `out` has broadcast_shapes(a, b) elements. Element types:
/// float32 (all arithmetic and comparisons; Mod behaves as FMod), int64 (arithmetic and
/// comparisons; Div truncates toward zero, as onnxruntime), bool (And/Or/Xor/Equal).
void binary_f32(BinaryOp op, const Shape& a_shape, const float* a, const Shape& b_shape,
                const float* b, void* out);
void binary_i64(BinaryOp op, const Shape& a_shape, const int64_t* a, const Shape& b_shape,
                const int64_t* b, void* out);
/// out = a op b with broadcasting for T = double or any integer width (int8..int64,
/// uint8..uint64): arithmetic and comparisons (bool out). Integer Add/Sub/Mul/Pow wrap as unsigned
/// arithmetic does; Div truncates toward zero; Mod takes the divisor's sign, FMod the dividend's;
/// a zero divisor gives 0 (the executor rejects it first). For double, Mod is fmod and Min/Max
/// propagate NaN.
template <class T>
void binary_typed(BinaryOp op, const Shape& a_shape, const T* a, const Shape& b_shape, const T* b,
                  void* out);
void binary_bool(BinaryOp op, const Shape& a_shape, const uint8_t* a, const Shape& b_shape,
                 const uint8_t* b, uint8_t* out);

enum class UnaryOp : uint8_t {
  Relu,
  Sigmoid,
  Tanh,
  Exp,
  Log,
  Sqrt,
  Neg,
  Abs,
  Erf,
  Floor,
  Ceil,
  Round,
  Reciprocal,
  Sin,
  Cos,
  Sign,
  Softplus,
  Identity,
  LeakyRelu,    ///< alpha
  Elu,          ///< alpha
  Selu,         ///< alpha, gamma
  HardSigmoid,  ///< alpha, beta: max(0, min(1, alpha * x + beta))
  HardSwish,    ///< x * HardSigmoid(x; 1/6, 1/2)
  Gelu,         ///< exact (erf) form
  Silu,         ///< x * Sigmoid(x): the bits of Sigmoid, then Mul(x, s)
  GeluTanh,     ///< tanh approximation
  Clip,         ///< alpha = min, beta = max
};

/// out[i] = op(in[i]) for n floats; alpha/beta as documented per op (in-place allowed).
void unary_f32(UnaryOp op, const float* in, float* out, int64_t n, float alpha = 0.0f,
               float beta = 0.0f);
/// unary_f32 over `planes` planes of `hw` floats (x[N, C, ...] read as N * C planes) that also
/// writes each result plane's mean to means[plane], as global_avg_pool would compute it from
/// `out` (the same bits as unary_f32 then global_avg_pool): each plane is summed just after it is
/// written, from the cache, where GlobalAveragePool read the whole result back from memory.
void unary_f32_plane_means(UnaryOp op, const float* in, float* out, float* means, int64_t planes,
                           int64_t hw);

/// Softmax over the last `axis_size` elements of each of `rows` rows (ONNX opset >= 13 with
/// the axis moved last); `log` gives LogSoftmax. Max-subtracted, so large inputs do not
/// overflow. `in` and `out` must not overlap.
void softmax_f32(const float* in, float* out, int64_t rows, int64_t axis_size, bool log = false);

/// LayerNormalization over the last `size` elements of each row: (x - mean) / sqrt(var + eps)
/// * scale + bias (bias may be null).
void layer_norm_f32(const float* in, const float* scale, const float* bias, float* out,
                    int64_t rows, int64_t size, float epsilon);

/// BatchNormalization in inference mode over NC(spatial): per channel c,
/// (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c].
void batch_norm_f32(const float* in, const float* scale, const float* bias, const float* mean,
                    const float* var, float* out, int64_t N, int64_t C, int64_t spatial,
                    float epsilon);

}  // namespace fx::kernels
