// SGEMM throughput of fx::kernels::sgemm (one thread), native and wasm: the executor issue's
// "SGEMM 512^3 >= 15 GFLOP/s in wasm" figure, plus the GEMM shapes of ResNet-18's 3x3 convs
// (im2col) and of a transformer block's projections. One JSON line per shape (median of runs
// after three warm-up calls).
//
//   sgemm [--runs 7]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/gemm.h"

int main(int argc, char** argv) {
  int runs = 7;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--runs") runs = std::atoi(argv[i + 1]);
#ifdef __EMSCRIPTEN__
  const char* impl = "wasm";
#else
  const char* impl = "native";
#endif
  struct Shape {
    const char* what;
    int64_t M, N, K;
  };
  const Shape shapes[] = {
      {"square 512", 512, 512, 512},
      {"resnet18 layer1 conv3x3 (im2col)", 64, 3136, 576},
      {"resnet18 layer4 conv3x3 (im2col)", 512, 49, 4608},
      {"transformer qkv (128 tokens, d=256)", 128, 768, 256},
      {"transformer mlp up (128 tokens, 256->1024)", 128, 1024, 256},
  };
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const Shape& s : shapes) {
    std::vector<float> A(s.M * s.K), B(s.K * s.N), C(s.M * s.N);
    for (float& x : A) x = dist(rng);
    for (float& x : B) x = dist(rng);
    // Warm up first: V8 runs wasm with its baseline compiler until the optimizing tier has
    // compiled the hot functions in the background.
    for (int r = 0; r < 3; ++r)
      fx::kernels::sgemm(false, false, s.M, s.N, s.K, 1.0f, A.data(), s.K, B.data(), s.N, 0.0f,
                         C.data(), s.N);
    std::vector<double> ts;
    for (int r = 0; r < runs; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      fx::kernels::sgemm(false, false, s.M, s.N, s.K, 1.0f, A.data(), s.K, B.data(), s.N, 0.0f,
                         C.data(), s.N);
      ts.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ts.begin(), ts.end());
    const double median = ts[ts.size() / 2];
    std::printf(
        "{\"impl\": \"%s\", \"shape\": \"%s\", \"M\": %lld, \"N\": %lld, \"K\": %lld, "
        "\"seconds\": %.6g, \"gflops\": %.2f}\n",
        impl, s.what, static_cast<long long>(s.M), static_cast<long long>(s.N),
        static_cast<long long>(s.K), median, 2.0 * s.M * s.N * s.K / median / 1e9);
  }
  return 0;
}
