// Internal to fx::exec: one place that maps an element type to its C++ type, so an op written
// once as a template supports every dtype ONNX declares for it, and names the rest in a typed
// Unsupported error.
#pragma once

#include <cstdint>
#include <string>

#include "fx/exec.h"

namespace fx::exec {

/// The dtype sets ops declare (bit i: Dtype i).
using DtypeSet = uint32_t;
constexpr DtypeSet dtype_bit(Dtype d) { return DtypeSet{1} << static_cast<unsigned>(d); }
/// float32, float64.
constexpr DtypeSet kFloats = dtype_bit(Dtype::Float32) | dtype_bit(Dtype::Float64);
/// float16, bfloat16: computed in float32 (widen_half / narrow_half).
constexpr DtypeSet kHalfs = dtype_bit(Dtype::Float16) | dtype_bit(Dtype::BFloat16);
constexpr DtypeSet kSignedInts = dtype_bit(Dtype::Int8) | dtype_bit(Dtype::Int16) |
                                 dtype_bit(Dtype::Int32) | dtype_bit(Dtype::Int64);
constexpr DtypeSet kUnsignedInts = dtype_bit(Dtype::UInt8) | dtype_bit(Dtype::UInt16) |
                                   dtype_bit(Dtype::UInt32) | dtype_bit(Dtype::UInt64);
constexpr DtypeSet kInts = kSignedInts | kUnsignedInts;
/// Every type dispatch_numeric visits directly.
constexpr DtypeSet kNumeric = kFloats | kInts;

inline bool is_half(Dtype d) { return (dtype_bit(d) & kHalfs) != 0; }

/// Calls f(T{}) with T the C++ element type of `d` (float, double, int8_t..int64_t,
/// uint8_t..uint64_t) when `d` is in `Allowed` (a subset of kNumeric); otherwise fails with
/// fx::Error(Unsupported) naming c's node and the type. f is instantiated only for the types in
/// Allowed, so its body may use what only they support (shifts, make_unsigned).
template <DtypeSet Allowed, class F>
decltype(auto) dispatch_numeric(const OpCall& c, Dtype d, F&& f) {
#define FX_DISPATCH_CASE(D, T)                                         \
  case Dtype::D:                                                       \
    if constexpr ((Allowed & dtype_bit(Dtype::D)) != 0) return f(T{}); \
    break;
  switch (d) {
    FX_DISPATCH_CASE(Float32, float)
    FX_DISPATCH_CASE(Float64, double)
    FX_DISPATCH_CASE(Int8, int8_t)
    FX_DISPATCH_CASE(Int16, int16_t)
    FX_DISPATCH_CASE(Int32, int32_t)
    FX_DISPATCH_CASE(Int64, int64_t)
    FX_DISPATCH_CASE(UInt8, uint8_t)
    FX_DISPATCH_CASE(UInt16, uint16_t)
    FX_DISPATCH_CASE(UInt32, uint32_t)
    FX_DISPATCH_CASE(UInt64, uint64_t)
    default:
      break;
  }
#undef FX_DISPATCH_CASE
  c.unsupported(std::string("element type ") + dtype_name(d));
}

/// A float16/bfloat16 value as float32 (exact).
Value widen_half(const OpCall& c, const Value& v);
/// A float32 value rounded (to nearest even) to `half` (Float16 or BFloat16).
Value narrow_half(const OpCall& c, const Value& v, Dtype half);

}  // namespace fx::exec
