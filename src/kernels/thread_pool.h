// A fixed pool of worker threads for the kernels' data-parallel loops. Work is split statically
// into contiguous chunks whose bounds depend only on the size and the thread count, and each chunk
// writes its own part of the output, so a result never depends on timing: with any number of
// threads it is bit-identical to one thread (the kernels keep the reduction order per element).
//
// The calling thread runs chunks too. A parallel_for inside a chunk (or while another caller holds
// the pool) runs inline on its thread, so nesting and concurrent callers cannot deadlock. An
// exception thrown by a chunk is rethrown on the caller once every chunk has finished.
// Without threads (a wasm build without pthreads) the pool is one thread and runs inline; in the
// pthreads wasm build (dist/fx-threads.*) its threads are the module's pre-created Workers.
#pragma once

#include <cstdint>
#include <functional>

namespace fx::kernels {

/// Sets the threads kernels use (1 = the caller only; clamped to [1, 256]; 0 = the hardware's
/// count). Workers start and stop here, not per call. When the system gives fewer threads (a
/// pthreads wasm module's Worker pool is fixed when it loads), the pool keeps those it got:
/// num_threads() says how many.
void set_num_threads(int n);
/// The threads kernels use (1 unless set).
int num_threads();
/// Frees the pool's workers' scratch buffers (scratch.h keeps one set per thread): restarts the
/// workers, once every caller of parallel_for has returned. The caller's own: release_scratch().
void release_worker_scratch();
/// Runs fn(begin, end) over [0, n) in at most num_threads() contiguous chunks of at least `grain`
/// items (fewer chunks when n is small), the caller taking part; returns when all are done.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
/// parallel_for for loops that are mostly small (elementwise ops, copies): fn(0, n) on the caller,
/// without building the std::function, when it would be a single chunk (one thread, or fewer
/// than 2 * grain items).
template <class F>
void parallel_for_inline(int64_t n, int64_t grain, F&& fn) {
  if (n <= 0) return;
  if (num_threads() < 2 || n < 2 * grain) return fn(int64_t{0}, n);
  parallel_for(n, grain, fn);
}

}  // namespace fx::kernels
