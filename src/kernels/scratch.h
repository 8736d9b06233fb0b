// Scratch buffers the kernels reuse from call to call (packed panels, im2col rows, Winograd
// tiles): one set per thread, grown as needed and kept, so a steady-state run allocates nothing.
// release_scratch() gives this thread's back to the allocator (fx::exec::release_cached_memory).
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace fx::kernels {

/// std::allocator, except that a value-initialising construct (what vector::resize(n) does for
/// the new elements) default-initialises: a float buffer grows without being zeroed. Scratch
/// sizes change from layer to layer, and zeroing each growth was 2.4 % of SqueezeNet's run
/// (Winograd's buffers, 0.2 ms natively). Callers that need zeros ask for them (assign).
template <class T>
struct UninitAllocator : std::allocator<T> {
  using value_type = T;
  UninitAllocator() = default;
  template <class U>
  UninitAllocator(const UninitAllocator<U>&) noexcept {}
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
template <class T, class U>
bool operator==(const UninitAllocator<T>&, const UninitAllocator<U>&) {
  return true;
}
template <class T, class U>
bool operator!=(const UninitAllocator<T>&, const UninitAllocator<U>&) {
  return false;
}

/// A float buffer whose resize() leaves new elements unset.
using ScratchBuffer = std::vector<float, UninitAllocator<float>>;

/// `p` moved up to the next 64-byte boundary (at most 15 floats on). malloc promises 16 bytes (8
/// in wasm), and vector loads that straddle cache lines cost: an im2col band read 16 bytes off
/// made ResNet-18's 7x7 convolution 15-20 % slower on an AVX-512 Xeon.
inline float* align64(float* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  return p + ((64 - a % 64) % 64) / sizeof(float);
}

/// The first of n floats at a 64-byte boundary inside `buf` (grown as needed).
template <class Buffer>
float* aligned_floats(Buffer& buf, int64_t n) {
  buf.resize(static_cast<size_t>(n) + 16);
  return align64(buf.data());
}

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
  Im2colRow,
  MatmulRows,  // a batched MatMul's product before its fused Softmax (tensor_ops.cpp)
  Exec,        // for the executor's own ops (src/exec)
  kCount,
};

/// This thread's buffer for `slot` (its size is whatever the last user left; elements it grows
/// by are unset).
ScratchBuffer& scratch(Scratch slot);
/// Frees this thread's scratch buffers.
void release_scratch();

}  // namespace fx::kernels
