// The threaded modules' per-thread cache of small heap blocks (alloc_cache.cpp).
#pragma once

namespace fxwasm {

/// Frees the blocks the calling thread's cache holds (releaseCachedMemory: heapUsed() then counts
/// only live allocations). A no-op in the single-thread module, which has no cache.
void release_thread_alloc_cache();

}  // namespace fxwasm
