// Where computed values live: a per-thread arena for large values and a pool of same-size
// buffers for small ones (new_value, Value::recycle), and release_cached_memory().
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "exec/ops.h"
#include "exec/plan.h"
#include "fx/exec.h"
#include "fx/limits.h"
#include "kernels/scratch.h"
#include "kernels/thread_pool.h"

namespace fx::exec {

// ---- arena ----
//
// Computed values of kArenaMin bytes and more live in ranges of a per-thread arena: a few large
// chunks and an address-ordered free list with coalescing, best fit first. A value's range returns
// to it when the last Value sharing it goes (its deleter holds the arena, so values may outlive the
// thread or be dropped on another one). Against a pool of same-size buffers, a new value reuses
// memory freed a moment ago by values of any size, so the run's values keep to a compact,
// cache-warm set of addresses: a layer writing its output into a buffer last touched a whole run
// earlier pays for reading it back from memory first (bench/README.md, "Executor arena", has the
// measurements).

namespace {
class Arena : public std::enable_shared_from_this<Arena> {
 public:
  std::shared_ptr<const uint8_t> allocate(size_t n) {
    n = (std::max<size_t>(n, 1) + kAlign - 1) / kAlign * kAlign;
    std::lock_guard<std::mutex> lock(mu_);
    // fx::Limits::max_run_bytes bounds the large values alive at once.
    const int64_t max_run = limits().max_run_bytes;
    if (static_cast<int64_t>(n) > max_run - static_cast<int64_t>(in_use_))
      throw Error(ErrorKind::Resource, "output of " + format_bytes(static_cast<int64_t>(n)) +
                                           " with " + format_bytes(static_cast<int64_t>(in_use_)) +
                                           " of computed values alive: over the per-run limit of " +
                                           format_bytes(max_run) +
                                           " (fx::set_limits / init({limits}) / --max-memory)");
    auto it = by_size_.lower_bound(n);
    if (it == by_size_.end()) {
      add_chunk(n);
      it = by_size_.lower_bound(n);
    }
    in_use_ += n;  // (after add_chunk, which may throw bad_alloc)
    uint8_t* p = it->second;
    const size_t size = it->first;
    by_size_.erase(it);
    const int chunk = by_addr_.at(p).chunk;
    by_addr_.erase(p);
    if (size > n) insert(p + n, size - n, chunk);
    // The range goes back when the last Value sharing it does (the deleter holds the arena).
    return std::shared_ptr<const uint8_t>(p, [self = shared_from_this(), p, n, chunk](
                                                 const uint8_t*) { self->release(p, n, chunk); });
  }

  // Frees the chunks no range of is in use.
  void trim() {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t c = 0; c < chunks_.size(); ++c) {
      Chunk& ch = chunks_[c];
      if (!ch.mem) continue;
      auto it = by_addr_.find(ch.start);
      if (it == by_addr_.end() || it->second.size != ch.size) continue;
      erase_size(ch.start, ch.size);
      by_addr_.erase(it);
      ch.mem.reset();
    }
  }

 private:
  static constexpr size_t kAlign = 64;  // kernels' vector loads stay within cache lines
#ifdef __EMSCRIPTEN__
  static constexpr size_t kChunk = 8u << 20;
#else
  static constexpr size_t kChunk = 32u << 20;
#endif
  struct Chunk {
    std::unique_ptr<uint8_t[]> mem;
    uint8_t* start = nullptr;
    size_t size = 0;
  };
  struct Free {
    size_t size;
    int chunk;
  };

  void add_chunk(size_t n) {
    Chunk ch;
    ch.size = std::max(n, kChunk);
    ch.mem.reset(new uint8_t[ch.size + kAlign]);
    const uintptr_t a = reinterpret_cast<uintptr_t>(ch.mem.get());
    ch.start = ch.mem.get() + (kAlign - a % kAlign) % kAlign;
    chunks_.push_back(std::move(ch));
    insert(chunks_.back().start, chunks_.back().size, static_cast<int>(chunks_.size() - 1));
  }
  void insert(uint8_t* p, size_t size, int chunk) {
    by_addr_[p] = Free{size, chunk};
    by_size_.emplace(size, p);
  }
  void erase_size(uint8_t* p, size_t size) {
    auto [lo, hi] = by_size_.equal_range(size);
    for (auto it = lo; it != hi; ++it)
      if (it->second == p) {
        by_size_.erase(it);
        return;
      }
  }
  // The range [p, p + size) of chunk `chunk` is free again.
  void release(uint8_t* p, size_t size, int chunk) {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ -= size;
    // Coalesce with the free neighbours in the same chunk.
    auto next = by_addr_.find(p + size);
    if (next != by_addr_.end() && next->second.chunk == chunk) {
      erase_size(next->first, next->second.size);
      size += next->second.size;
      by_addr_.erase(next);
    }
    auto after = by_addr_.lower_bound(p);
    if (after != by_addr_.begin()) {
      auto prev = std::prev(after);
      if (prev->second.chunk == chunk && prev->first + prev->second.size == p) {
        erase_size(prev->first, prev->second.size);
        p = prev->first;
        size += prev->second.size;
        by_addr_.erase(prev);
      }
    }
    insert(p, size, chunk);
  }

  std::mutex mu_;
  size_t in_use_ = 0;  // bytes of the ranges values hold
  std::vector<Chunk> chunks_;
  std::map<uint8_t*, Free> by_addr_;
  std::multimap<size_t, uint8_t*> by_size_;
};

Arena& arena() {
  thread_local std::shared_ptr<Arena> a = std::make_shared<Arena>();
  return *a;
}

// Values under kArenaMin bytes come from a per-thread pool of same-size buffers instead: a
// run's many small values (a transformer's) then cost no free-list bookkeeping, and their
// buffers stay in the caches anyway. The arena's ranges start on 64-byte boundaries, the pool's
// buffers on malloc's 16: from 256 KB down to 32 KB (a CNN's late layers, 14x14 and 7x7 planes)
// values are the arena's, so the kernels' 16-lane loads from them do not straddle cache lines.
// One process alternating, paired medians: EfficientNet-B0 0.95x, MobileNetV2 0.96-0.98x,
// SqueezeNet 0.96x; the transformer (values of 4 KB) 1.01x.
constexpr size_t kArenaMin = 32 * 1024;
struct BufferPool {
  // Size -> free buffers of that size (a stack: vectors, so steady state allocates no nodes).
  std::unordered_map<size_t, std::vector<std::shared_ptr<const std::vector<uint8_t>>>> free;
};
BufferPool& pool() {
  thread_local BufferPool p;
  return p;
}
}  // namespace

void set_num_threads(int n) { kernels::set_num_threads(n); }
int num_threads() { return kernels::num_threads(); }

void release_cached_memory() {
  pool().free.clear();
  arena().trim();
  release_constant_cache();
  release_plans();
  kernels::release_scratch();
  kernels::release_worker_scratch();
}

namespace {
thread_local const Value* t_output_hint = nullptr;
thread_local size_t t_joined = 0;
}  // namespace

void set_output_hint(const Value* hint) { t_output_hint = hint; }
size_t joined_concat_count() { return t_joined; }

Value new_value(Dtype dtype, std::vector<int64_t> shape) {
  if (const Value* h = t_output_hint; h && h->dtype() == dtype && h->shape() == shape) {
    t_output_hint = nullptr;
    return *h;
  }
  // Checked before allocating (the executor names the node when this throws).
  const auto nbytes = static_cast<size_t>(checked_nbytes(dtype, shape, "output"));
  if (nbytes < kArenaMin) {
    BufferPool& p = pool();
    auto it = nbytes == 0 ? p.free.end() : p.free.find(nbytes);
    if (it == p.free.end() || it->second.empty()) return Value::zeros(dtype, std::move(shape));
    std::shared_ptr<const std::vector<uint8_t>> buf = std::move(it->second.back());
    it->second.pop_back();
    return Value::wrap(dtype, std::move(shape), std::move(buf));
  }
  Value v;
  v.dtype_ = dtype;
  v.shape_ = std::move(shape);
  v.nbytes_ = nbytes;
  v.arena_ = arena().allocate(nbytes);
  v.data_ = v.arena_.get();
  return v;
}

Value value_slice(const Value& whole, size_t offset, Dtype dtype, std::vector<int64_t> shape) {
  const auto nbytes = static_cast<size_t>(checked_nbytes(dtype, shape, "slice"));
  if (!whole.is_tensor() || !whole.data_ || offset > whole.nbytes_ ||
      nbytes > whole.nbytes_ - offset)
    throw Error(ErrorKind::Internal, "value_slice: the slice is not inside the value");
  Value v;
  v.dtype_ = dtype;
  v.shape_ = std::move(shape);
  v.nbytes_ = nbytes;
  // Owned like the whole (an arena range or a pooled buffer); never `bytes_`, which would say
  // the slice is the whole buffer (to_tensor shares it).
  v.arena_ = whole.arena_ ? std::shared_ptr<const uint8_t>(whole.arena_, whole.data_ + offset)
                          : std::shared_ptr<const uint8_t>(whole.bytes_, whole.data_ + offset);
  v.data_ = v.arena_.get();
  return v;
}

Value joined_value(const std::vector<const Value*>& parts, std::vector<int64_t> shape) {
  if (parts.empty() || !parts[0] || !parts[0]->arena_) return Value();
  const Value& first = *parts[0];
  const uint8_t* next = first.data_;
  size_t total = 0;
  for (const Value* v : parts) {
    // Slices of one buffer (one owner), each starting where the one before ends.
    if (!v || !v->is_tensor() || !v->arena_ || v->dtype_ != first.dtype_ || v->data_ != next ||
        v->arena_.owner_before(first.arena_) || first.arena_.owner_before(v->arena_))
      return Value();
    next += v->nbytes_;
    total += v->nbytes_;
  }
  if (checked_nbytes(first.dtype_, shape, "output") != static_cast<int64_t>(total)) return Value();
  Value v;
  v.dtype_ = first.dtype_;
  v.shape_ = std::move(shape);
  v.nbytes_ = total;
  v.arena_ = first.arena_;
  v.data_ = first.data_;
  ++t_joined;
  return v;
}

Value zeroed_value(Dtype dtype, std::vector<int64_t> shape) {
  Value v = new_value(dtype, std::move(shape));
  std::memset(v.mutable_data<uint8_t>(), 0, v.nbytes());
  return v;
}

void Value::recycle() {
  // A pool-sized buffer nobody else holds (not a weight, not an output, not a view) is reused.
  if (bytes_ && bytes_.use_count() == 1 && !bytes_->empty() && bytes_->size() < kArenaMin)
    pool().free[bytes_->size()].push_back(std::move(bytes_));
  bytes_.reset();
  arena_.reset();
  elements_.reset();
  strings_.reset();
  packed_.reset();
  data_ = nullptr;
  nbytes_ = 0;
}

}  // namespace fx::exec
