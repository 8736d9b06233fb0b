// Scratch buffers the kernels reuse from call to call (packed panels, im2col rows, Winograd
// tiles): one set per thread, grown as needed and kept, so a steady-state run allocates nothing.
// release_scratch() gives this thread's back to the allocator (fx::exec::release_cached_memory).
#pragma once

#include <vector>

namespace fx::kernels {

enum class Scratch {
  GemmAcc,
  GemmTranspose,
  GemmPackedA,
  GemmPackedB,
  WinogradPadded,
  WinogradV,
  WinogradM,
  ConvZeroRow,
  ConvP,
  ConvT,
  ConvRow,
  Im2col,
  Exec,  // for the executor's own ops (src/exec)
  kCount,
};

/// This thread's buffer for `slot` (its size is whatever the last user left).
std::vector<float>& scratch(Scratch slot);
/// Frees this thread's scratch buffers.
void release_scratch();

}  // namespace fx::kernels
