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

class Pool {
 public:
  ~Pool() { resize(1); }

  int size() const { return size_; }

  // `restart`: stop and start the workers even when n is the current size (each worker's
  // thread_local scratch goes with its thread).
  void resize(int n, bool restart = false) {
    std::lock_guard<std::mutex> busy(busy_);
    if (n == size_ && !restart) return;
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
      stopping_.store(true);
    }
    cv_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
    stop_ = false;
    stopping_.store(false);
    size_ = 1;
    for (int i = 1; i < n; ++i) {
      try {
        workers_.emplace_back([this] { work(); });
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
    {
      std::lock_guard<std::mutex> lock(m_);
      job_ = &chunk;
      chunks_ = chunks;
      next_.store(0);
      done_all_.store(false);
      done_ = 0;
      error_ = nullptr;
      generation_.fetch_add(1);
    }
    cv_.notify_all();
    claim(&chunk, chunks);
    // The other chunks usually finish within microseconds: spin a little before sleeping.
    spin_until([&] { return done_all_.load() && active_count_.load() == 0; });
    std::unique_lock<std::mutex> lock(m_);
    // Every chunk done, and no worker still inside claim() for this job (one that woke late must
    // not reach for it once this caller's stack frame is gone).
    done_cv_.wait(lock, [&] { return done_ == chunks_ && active_ == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  // Takes chunks of `job` until none are left; counts each one done.
  void claim(const std::function<void(int64_t)>* job, int64_t chunks) {
    for (;;) {
      const int64_t i = next_.fetch_add(1);
      if (i >= chunks) return;
      std::exception_ptr err;
      t_in_parallel = true;
      try {
        (*job)(i);
      } catch (...) {
        err = std::current_exception();
      }
      t_in_parallel = false;
      std::lock_guard<std::mutex> lock(m_);
      if (err && !error_) error_ = err;
      if (++done_ == chunks) {
        done_all_.store(true);
        done_cv_.notify_all();
      }
    }
  }

  void work() {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int64_t)>* job;
      int64_t chunks;
      // A model runs its products back to back: spin a little for the next job before sleeping
      // (waking a sleeping thread costs tens of microseconds, as much as a small product).
      spin_until([&] { return generation_.load() != seen || stopping_.load(); });
      {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [&] { return stop_ || (generation_.load() != seen && job_ != nullptr); });
        if (stop_) return;
        seen = generation_.load();
        job = job_;
        chunks = chunks_;
        ++active_;
        active_count_.store(active_);
      }
      claim(job, chunks);
      std::lock_guard<std::mutex> lock(m_);
      active_count_.store(--active_);
      if (active_ == 0) done_cv_.notify_all();
    }
  }

  std::mutex busy_;  // held by the caller of run() (and by resize)
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t chunks_ = 0;
  std::atomic<int64_t> next_{0};
  int64_t done_ = 0;
  int active_ = 0;  // workers inside claim()
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> done_all_{false}, stopping_{false};
  std::atomic<int> active_count_{0};
  std::exception_ptr error_;
  bool stop_ = false;
  int size_ = 1;
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
