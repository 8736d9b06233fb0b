// operator new / delete for the threaded modules: small blocks come from a per-thread cache.
//
// Emscripten 3.1.6's dlmalloc takes a pthread mutex around every malloc and free once the module
// has threads, and in wasm each lock and unlock is an atomic read-modify-write through the engine
// (a_cas, a_swap). The executor's small, short-lived allocations (shape vectors, an op call's
// input list, a Value's shared state) then cost more in locking than in allocating: in the tiny
// transformer's run at 2 threads (81 ops, 0.18 ms) 15 % of the calling thread's time was in
// malloc and free, 11 % of it the mutex. (The single-thread module has no locks; natively,
// glibc's malloc has its own per-thread cache. This Emscripten's other allocator, emmalloc, locks
// too: linked instead, 1 % faster.)
//
// Blocks of up to kMaxSmall bytes are rounded up to a multiple of 16; each size class keeps a
// thread's freed blocks on a list (up to 64 KB on all of a thread's lists: the rest go back to
// free), which that thread's next allocations of the class take first. A 16-byte header in front of
// every block says its class, or that it is large, so delete needs no size. A block freed on
// another thread than the one that allocated it joins that thread's lists: any block of a class
// fits any request of it. A thread's lists go back to free when it exits (the pool's workers when
// threads change or releaseCachedMemory restarts them) or on release_thread_alloc_cache; after its
// cache is destroyed (the main thread's own thread_local destructors at exit) delete frees
// directly.
#include "alloc_cache.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#ifdef __EMSCRIPTEN_PTHREADS__
namespace {

constexpr size_t kHeader = 16;     // a block is as aligned as malloc's
constexpr size_t kMaxSmall = 256;  // larger blocks: malloc and free directly
constexpr size_t kClasses = kMaxSmall / 16;
constexpr size_t kMaxCachedBytes = 64 << 10;  // what a thread's lists hold at most
constexpr uint32_t kLarge = 0xFFFFFFFFu;

// Bytes of a block of class c (its header aside).
constexpr size_t class_bytes(size_t c) { return (c + 1) * 16; }

struct FreeBlock {
  FreeBlock* next;
};

struct Cache {
  FreeBlock* head[kClasses] = {};
  size_t bytes = 0;  // on the lists
  bool alive = true;
  void release() {
    for (size_t c = 0; c < kClasses; ++c)
      while (FreeBlock* b = head[c]) {
        head[c] = b->next;
        std::free(reinterpret_cast<char*>(b) - kHeader);
      }
    bytes = 0;
  }
  ~Cache() {
    alive = false;
    release();
  }
};

thread_local Cache t_cache;

void* allocate(size_t n) {
  if (n == 0) n = 1;
  if (n <= kMaxSmall) {
    const size_t c = (n - 1) / 16;
    Cache& cache = t_cache;
    if (FreeBlock* b = cache.head[c]) {
      cache.head[c] = b->next;
      cache.bytes -= class_bytes(c);
      return b;
    }
    char* raw = static_cast<char*>(std::malloc(kHeader + class_bytes(c)));
    if (!raw) return nullptr;
    *reinterpret_cast<uint32_t*>(raw) = static_cast<uint32_t>(c);
    return raw + kHeader;
  }
  if (n > SIZE_MAX - kHeader) return nullptr;
  char* raw = static_cast<char*>(std::malloc(kHeader + n));
  if (!raw) return nullptr;
  *reinterpret_cast<uint32_t*>(raw) = kLarge;
  return raw + kHeader;
}

void deallocate(void* p) {
  if (!p) return;
  char* raw = static_cast<char*>(p) - kHeader;
  const uint32_t c = *reinterpret_cast<const uint32_t*>(raw);
  if (c != kLarge) {
    Cache& cache = t_cache;
    const size_t size = class_bytes(c);
    if (cache.alive && cache.bytes + size <= kMaxCachedBytes) {
      FreeBlock* b = static_cast<FreeBlock*>(p);
      b->next = cache.head[c];
      cache.head[c] = b;
      cache.bytes += size;
      return;
    }
  }
  std::free(raw);
}

void* allocate_or_throw(size_t n) {
  for (;;) {
    if (void* p = allocate(n)) return p;
    std::new_handler h = std::get_new_handler();
    if (!h) throw std::bad_alloc();
    h();
  }
}

}  // namespace

void fxwasm::release_thread_alloc_cache() { t_cache.release(); }

void* operator new(size_t n) { return allocate_or_throw(n); }
void* operator new[](size_t n) { return allocate_or_throw(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void operator delete(void* p) noexcept { deallocate(p); }
void operator delete[](void* p) noexcept { deallocate(p); }
void operator delete(void* p, size_t) noexcept { deallocate(p); }
void operator delete[](void* p, size_t) noexcept { deallocate(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { deallocate(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { deallocate(p); }
#else
void fxwasm::release_thread_alloc_cache() {}
#endif
