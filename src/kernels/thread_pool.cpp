#include "kernels/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace fx::kernels {

namespace {

#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
constexpr bool kHaveThreads = false;
#else
constexpr bool kHaveThreads = true;
#endif

thread_local bool t_in_parallel = false;

// How long a worker waiting for the next job, or a caller waiting for its workers, spins before
// it sleeps on a condition variable: a model's parallel ops come back to back, and waking a
// sleeping thread costs tens of microseconds natively and more in wasm (Atomics.wait/notify).
// Counted in time, not rounds: the 20000 rounds this was took 500 us natively (pause) but 50 us
// in wasm (no pause instruction), where workers then slept between ops. ResNet-18 in wasm at 2
// threads, the two builds alternating, three runs of bench/threads_wasm_ab.mjs: 6-10 % faster
// with 1 ms (scaling 1.41-1.75x -> 1.55-1.92x; onnxruntime-web 1.57-1.87x in the same runs).
// 2 ms was no better; natively, where 500 us was already the spin, no change.
constexpr auto kSpinTime = std::chrono::microseconds(1000);

inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until done() or kSpinTime has passed (the clock is read every 256 rounds).
template <class Done>
void spin_until(Done done) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1; !done(); ++i) {
    relax();
    if (i % 256 == 0 && std::chrono::steady_clock::now() - start > kSpinTime) return;
  }
}

// Dispatch without locks: a job costs the caller a few cache-line transfers (the generation out,
// the claim and done counters back) rather than a mutex round trip per chunk and per worker. At 2
// threads an empty parallel_for took 2.2 us (median) with a mutex and condition variables on
// every job, 0.56 us now; one process alternating both pools at 2 threads (a model runs 60-80
// parallel_fors), min / median: MobileNetV2 0.984-0.993 / 0.961-0.985, SqueezeNet 0.992-0.995 /
// 0.993-0.997, EfficientNet-B0 0.998 / 0.987, ResNet-18 1.000 / 1.003.
//
// The job (job_, chunks_, the counters, error_) is written only while generation_ is odd and no
// worker is inside a job (active_ == 0). A worker counts itself active before it reads the
// generation again, so either the caller sees it (and waits for it to leave) or it sees the odd
// generation (and backs off): that handshake uses sequentially consistent operations on both
// sides. A worker that comes late to a finished job finds no chunk left and never calls it, so
// the caller returns once every chunk is done, without waiting for stragglers; the next job waits
// for them. Sleeping (after kSpinTime) is on condition variables, and each side notifies only
// when the other says it sleeps (sleepers_, caller_sleeps_), read after its own store.
//
// Each participant takes its own chunk first (the caller chunk 0, worker i chunk i: taken_ marks
// a chunk claimed), then any chunk left by a late one (next_). Ops that split their data the same
// way then find their inputs in the cache of the core that wrote them (MobileNetV2's projection
// and the next block's expansion, both split by pixels). (A shared counter alone handed chunk 0 to
// whichever thread came first.) Alternating processes at 2 threads, paired: MobileNetV2 in
// wasm 0.95-1.02x (median 0.97x), SqueezeNet 0.97-1.02x (1.00x); natively 0.99x and 1.00x.
class Pool {
 public:
  ~Pool() { resize(1); }

  int size() const { return size_.load(std::memory_order_relaxed); }

  // `restart`: stop and start the workers even when n is the current size (each worker's
  // thread_local scratch goes with its thread).
  void resize(int n, bool restart = false) {
    std::lock_guard<std::mutex> busy(busy_);
    if (n == size_ && !restart) return;
    {
      std::lock_guard<std::mutex> lock(m_);
      stopping_.store(true);
    }
    cv_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
    stopping_.store(false);
    size_ = 1;
    for (int i = 1; i < n; ++i) {
      try {
        workers_.emplace_back([this, i] { work(i); });
      } catch (const std::system_error&) {
        // No thread to be had (in wasm: the module's pre-created Worker pool is used up, and
        // pthread_create fails rather than wait for a new Worker): keep the threads started.
        break;
      }
      size_ = i + 1;
    }
  }

  // false when the pool is busy (another caller): the caller then runs inline.
  bool run(int64_t chunks, const std::function<void(int64_t)>& chunk) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    generation_.fetch_add(1);  // odd: the job is being written
    // Workers that came late to the last job leave it at once (they find no chunk).
    for (int i = 1; active_.load() != 0; ++i)
      if (i % 1024 == 0) std::this_thread::yield();
    job_ = &chunk;
    chunks_ = chunks;
    next_.store(0, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    for (int64_t c = 0; c < chunks; ++c)
      taken_[static_cast<size_t>(c)].store(0, std::memory_order_relaxed);
    error_ = nullptr;
    generation_.fetch_add(1);  // even: published
    if (sleepers_.load() > 0) {
      { std::lock_guard<std::mutex> lock(m_); }
      cv_.notify_all();
    }
    claim(&chunk, chunks, 0);
    // The other chunks usually finish within microseconds: spin a little before sleeping.
    spin_until([&] { return done_.load(std::memory_order_acquire) == chunks; });
    if (done_.load() != chunks) {
      std::unique_lock<std::mutex> lock(m_);
      caller_sleeps_.store(true);
      done_cv_.wait(lock, [&] { return done_.load() == chunks; });
      caller_sleeps_.store(false);
    }
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  // Takes chunk `self` of `job` (the caller is participant 0, worker i participant i), then any
  // chunks left; counts each one done.
  void claim(const std::function<void(int64_t)>* job, int64_t chunks, int self) {
    for (int64_t i = self < chunks ? self : next_.fetch_add(1); i < chunks;
         i = next_.fetch_add(1)) {
      if (taken_[static_cast<size_t>(i)].exchange(1)) continue;
      t_in_parallel = true;
      try {
        (*job)(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_m_);
        if (!error_) error_ = std::current_exception();
      }
      t_in_parallel = false;
      if (done_.fetch_add(1) + 1 == chunks && caller_sleeps_.load()) {
        { std::lock_guard<std::mutex> lock(m_); }
        done_cv_.notify_all();
      }
    }
  }

  void work(int self) {
    uint64_t seen = generation_.load();
    auto job_waiting = [&] {
      const uint64_t g = generation_.load();
      return (g != seen && g % 2 == 0) || stopping_.load();
    };
    for (;;) {
      // A model runs its products back to back: spin a little for the next job before sleeping
      // (waking a sleeping thread costs tens of microseconds, as much as a small product).
      spin_until(job_waiting);
      if (!job_waiting()) {
        std::unique_lock<std::mutex> lock(m_);
        sleepers_.fetch_add(1);
        cv_.wait(lock, job_waiting);
        sleepers_.fetch_sub(1);
      }
      if (stopping_.load()) return;
      active_.fetch_add(1);
      const uint64_t g = generation_.load();
      if (g != seen && g % 2 == 0) {
        seen = g;
        claim(job_, chunks_, self);
      }
      active_.fetch_sub(1);
    }
  }

  std::mutex busy_;  // held by the caller of run() (and by resize)
  std::mutex m_;     // for the condition variables only
  std::mutex error_m_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  // Written by the caller while generation_ is odd and active_ is 0.
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t chunks_ = 0;
  std::exception_ptr error_;
  alignas(64) std::atomic<uint64_t> generation_{0};
  alignas(64) std::atomic<int64_t> next_{0};
  alignas(64) std::atomic<int64_t> done_{0};
  std::atomic<uint8_t> taken_[256] = {};  // per chunk (chunks <= threads <= 256)
  alignas(64) std::atomic<int> active_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> caller_sleeps_{false}, stopping_{false};
  // Written by resize (holding busy_), read by any caller of parallel_for or num_threads(): a
  // caller that reads it while the workers restart then finds busy_ held and runs inline.
  std::atomic<int> size_{1};
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

void set_num_threads(int n) {
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  n = std::clamp(n, 1, 256);
  if (!kHaveThreads) n = 1;
  pool().resize(n);
}

int num_threads() { return pool().size(); }

void release_worker_scratch() { pool().resize(pool().size(), /*restart=*/true); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int threads = pool().size();
  const int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
  if (chunks <= 1 || t_in_parallel) {
    fn(0, n);
    return;
  }
  // Chunk c covers [c * n / chunks, (c + 1) * n / chunks): bounds fixed by n and chunks alone.
  const std::function<void(int64_t)> chunk = [&](int64_t c) {
    const int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
    if (b < e) fn(b, e);
  };
  if (!pool().run(chunks, chunk))
    for (int64_t c = 0; c < chunks; ++c) chunk(c);
}

}  // namespace fx::kernels
