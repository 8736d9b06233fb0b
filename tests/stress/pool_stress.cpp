// fx_pool_stress: the kernels' thread pool driven hard from two caller threads at once, as a plain
// program (no GoogleTest) so that it builds in seconds under ThreadSanitizer: scripts/test.sh
// builds it with -fsanitize=thread (build/tsan) and runs it there, where a data race or a lock
// order inversion in the pool's hand-over (thread_pool.cpp: the generation counter, the claim and
// done counters, the sleepers' condition variables) or in a kernel's per-thread scratch fails the
// run. The native ctest runs it too, without the sanitizer.
//
// What it does, at 3 threads:
//   1. 20,000 jobs of three tiny chunks, back to back from two callers (the second one runs its
//      jobs inline while the first holds the pool), with sleeps past the workers' spin time and a
//      chunk that throws now and then: every chunk runs exactly once on its own job, every throw
//      reaches its caller.
//   2. The workers' scratch released (the pool restarts its workers) while the other caller
//      keeps submitting jobs.
//   3. Real kernels from both callers: GEMMs split by columns and by row tiles, a Winograd
//      convolution, a depthwise one, Softmax: each result equal, bit for bit, to the one computed
//      on one thread beforehand.
// Exit status 0 when all holds, 1 (with a line saying what) otherwise.
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kernels/conv.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/thread_pool.h"

namespace {

namespace k = fx::kernels;

int failures = 0;

void check(bool ok, const std::string& what) {
  if (ok) return;
  std::printf("FAILED: %s\n", what.c_str());
  ++failures;
}

std::vector<float> ramp(size_t n, int a, int b) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(static_cast<int>(i * a % b) - b / 2) / static_cast<float>(b);
  return v;
}

// 1. Tiny jobs back to back from two callers.
void tiny_jobs() {
  constexpr int kJobs = 20000;
  std::vector<std::array<std::atomic<int>, 3>> hits(kJobs);
  std::atomic<int> thrown{0};
  auto caller = [&](int first, int step) {
    for (int j = first; j < kJobs; j += step) {
      if (j % 5000 == 4999) std::this_thread::sleep_for(std::chrono::milliseconds(3));
      const bool fail = j % 997 == 0;
      try {
        k::parallel_for(3, 1, [&, j](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[j][i]++;
          if (fail && e == 3) throw std::runtime_error("chunk failed");
        });
      } catch (const std::runtime_error&) {
        ++thrown;
      }
    }
  };
  std::thread other(caller, 1, 2);
  caller(0, 2);
  other.join();
  int wrong = 0;
  for (const auto& job : hits)
    for (const std::atomic<int>& h : job) wrong += h != 1;
  check(wrong == 0, "tiny jobs: " + std::to_string(wrong) + " chunks did not run exactly once");
  check(thrown == (kJobs + 996) / 997,
        "tiny jobs: " + std::to_string(thrown.load()) + " throws reached their callers");
}

// 2. Restarting the workers (release_worker_scratch) while another caller submits jobs.
void restarts() {
  std::atomic<bool> done{false};
  std::atomic<int64_t> covered{0};
  std::thread other([&] {
    while (!done) k::parallel_for(300, 1, [&](int64_t b, int64_t e) { covered += e - b; });
  });
  for (int r = 0; r < 50; ++r) {
    k::release_worker_scratch();
    check(k::num_threads() == 3, "restarts: the pool has " + std::to_string(k::num_threads()) +
                                     " threads after a restart");
  }
  done = true;
  other.join();
  check(covered % 300 == 0, "restarts: a job covered part of its range");
  std::atomic<int64_t> sum{0};
  k::parallel_for(300, 1, [&](int64_t b, int64_t e) { sum += e - b; });
  check(sum == 300, "restarts: the pool does not cover a range after the restarts");
}

// 3. Kernels from two callers, against their one-thread bits.
struct Work {
  std::string name;
  std::function<std::vector<float>()> run;
  std::vector<float> expected;
};

std::vector<Work> kernels() {
  std::vector<Work> w;
  auto gemm = [](int64_t M, int64_t N, int64_t K) {
    return [=] {
      const std::vector<float> A = ramp(M * K, 37, 101), B = ramp(K * N, 53, 89);
      const std::vector<float> bias = ramp(M, 7, 13);
      k::GemmEpilogue ep;
      ep.row_bias = bias.data();
      std::vector<float> C(M * N);
      k::sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, C.data(), N, &ep);
      return C;
    };
  };
  w.push_back({"sgemm 64x3136x147 (columns)", gemm(64, 3136, 147), {}});
  w.push_back({"sgemm 960x49x160 (row tiles)", gemm(960, 49, 160), {}});
  w.push_back({"sgemm 1x4096x256", gemm(1, 4096, 256), {}});
  auto conv = [](k::Conv2dParams p) {
    return [=] {
      const std::vector<float> in = ramp(p.N * p.C * p.H * p.W, 29, 97);
      const std::vector<float> weight = ramp(p.M * (p.C / p.group) * p.KH * p.KW, 31, 103);
      const std::vector<float> bias = ramp(p.M, 3, 11);
      std::vector<float> out(p.N * p.M * p.out_h() * p.out_w());
      if (p.group == p.C && p.M == p.C) {
        k::depthwise_conv2d(p, in.data(), weight.data(), bias.data(), out.data());
      } else {
        std::vector<float> scratch(static_cast<size_t>(k::conv2d_scratch_size(p)));
        k::conv2d(p, in.data(), weight.data(), bias.data(), out.data(), scratch.data());
      }
      return out;
    };
  };
  k::Conv2dParams winograd;
  winograd.C = 32;
  winograd.M = 64;
  winograd.H = winograd.W = 28;
  winograd.KH = winograd.KW = 3;
  winograd.pad_top = winograd.pad_left = winograd.pad_bottom = winograd.pad_right = 1;
  w.push_back({"conv 3x3 32 -> 64 at 28x28", conv(winograd), {}});
  k::Conv2dParams strided = winograd;
  strided.stride_h = strided.stride_w = 2;
  strided.clamp_lo = 0.0f;
  w.push_back({"conv 3x3/2 32 -> 64 at 28x28, Relu", conv(strided), {}});
  k::Conv2dParams dw = winograd;
  dw.C = dw.M = dw.group = 144;
  dw.H = dw.W = 56;
  dw.clamp_lo = 0.0f;
  dw.clamp_hi = 6.0f;
  w.push_back({"depthwise 3x3 144 at 56x56, Relu6", conv(dw), {}});
  w.push_back({"softmax 2364 x 197",
               [] {
                 const std::vector<float> in = ramp(2364 * 197, 41, 83);
                 std::vector<float> out(in.size());
                 k::softmax_f32(in.data(), out.data(), 2364, 197);
                 return out;
               },
               {}});
  return w;
}

void kernels_from_two_callers() {
  std::vector<Work> work = kernels();
  k::set_num_threads(1);
  for (Work& x : work) x.expected = x.run();
  k::set_num_threads(3);
  std::atomic<int> wrong{0};
  // Both callers run every kernel four times, in orders offset by one, at the same time.
  auto caller = [&](size_t offset) {
    for (size_t round = 0; round < 4; ++round)
      for (size_t i = 0; i < work.size(); ++i) {
        const Work& x = work[(i + offset + round) % work.size()];
        if (x.run() != x.expected) ++wrong;
      }
  };
  std::thread other(caller, size_t{1});
  caller(0);
  other.join();
  check(wrong == 0, "kernels: " + std::to_string(wrong.load()) +
                        " results from two callers at 3 threads differ from one thread's");
}

}  // namespace

int main() {
  k::set_num_threads(3);
  if (k::num_threads() != 3) {
    std::printf("FAILED: asked for 3 threads, the pool has %d\n", k::num_threads());
    return 1;
  }
  tiny_jobs();
  restarts();
  kernels_from_two_callers();
  k::set_num_threads(1);
  std::printf("%s\n", failures ? "fx_pool_stress: FAILED" : "fx_pool_stress: ok");
  return failures ? 1 : 0;
}
