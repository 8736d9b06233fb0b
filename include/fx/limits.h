// Resource limits: how large a tensor, a shape and a run may get before fxwasm refuses to
// allocate. Every size computed from input (an initializer's dims, a shape an op reads from
// data, a JS buffer's shape) goes through checked_numel / checked_nbytes, in 64-bit arithmetic
// that cannot wrap (also in wasm32, whose size_t has 32 bits), and a breach is an
// fx::Error(Resource) thrown before any memory is taken.
//
//   fx::Limits l = fx::limits();
//   l.max_tensor_bytes = 256 << 20;  // refuse any tensor over 256 MB
//   fx::set_limits(l);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fx/argument.h"

namespace fx {

/// Caller-set resource limits (process-wide). Zero or negative fields mean "the default".
struct Limits {
  /// Bytes of any one tensor: a weight, an input, a value an op computes.
  int64_t max_tensor_bytes = 0;
  /// Bytes of the computed values alive at once in one run (the executor's arena, where values
  /// of 32 KB and more live; inputs and weights are the caller's and not counted).
  int64_t max_run_bytes = 0;
  /// Elements of any one shape (also for element types of one byte).
  int64_t max_elements = 0;
  /// Iterations of one Loop node (its trip count and condition come from data, so a model can
  /// ask for 2^63 steps of a cheap body: a hang, not an allocation).
  int64_t max_loop_iterations = 0;
};

/// The defaults: natively a quarter of physical memory per tensor and half of it per run; in
/// wasm a quarter of the 4 GB a wasm32 module can address per tensor and half of it per run;
/// 2^40 elements per shape natively, 2^30 in wasm; 2^20 iterations per Loop.
Limits default_limits();
/// The limits in force (defaults filled in).
Limits limits();
/// Sets the limits (fields <= 0 take the default). Thread-safe; affects later checks only.
void set_limits(const Limits& l);

/// Elements of `shape`: fx::Error(Value) for a negative dimension, fx::Error(Resource) when the
/// product overflows int64 or exceeds max_elements. `what` names the tensor or node
/// ("node 'x' (onnx.Expand) output") in the message.
int64_t checked_numel(const std::vector<int64_t>& shape, const std::string& what);
/// Bytes of a `dtype` tensor of `shape` (checked_numel, then the byte size): also
/// fx::Error(Resource) above max_tensor_bytes or what size_t holds.
int64_t checked_nbytes(Dtype dtype, const std::vector<int64_t>& shape, const std::string& what);
/// Bytes of `numel` elements of `dtype` against the same limits (for sizes known as counts).
int64_t checked_nbytes(Dtype dtype, int64_t numel, const std::string& what);
/// The same checks for hot paths (every value the executor makes): `what` becomes a string, and
/// the shape is formatted, only when a check fails.
int64_t checked_numel(const std::vector<int64_t>& shape, const char* what);
int64_t checked_nbytes(Dtype dtype, const std::vector<int64_t>& shape, const char* what);
/// The checks of checked_nbytes without a message: false when `shape` has a negative dimension,
/// overflows or is over a limit (then call checked_nbytes for the error).
bool try_nbytes(Dtype dtype, const std::vector<int64_t>& shape, int64_t* nbytes);
/// "1.5 GB" style byte counts for messages.
std::string format_bytes(int64_t bytes);

}  // namespace fx
