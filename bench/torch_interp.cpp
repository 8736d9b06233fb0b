// fx::torch benchmark: Interpreter vs eager forward on LibTorch (ResNet-18 at 1x3x224x224 and a
// transformer encoder block (d=256, 8 heads, ff=1024) at 1x64x256), one thread, median of
// interleaved runs; and the time to symbolic_trace ResNet-18 into a GraphModule (bench/run_torch.sh
// compares it with torch.fx 1.13 tracing the Python twin). Prints one `key value` line per figure.
#include <ATen/Parallel.h>
#include <torch/nn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "../tests/torch/zoo.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs a and b alternately `runs` times after `warmup` rounds; returns their medians.
std::pair<double, double> compare(int warmup, int runs, const std::function<void()>& a,
                                  const std::function<void()>& b) {
  for (int i = 0; i < warmup; ++i) {
    a();
    b();
  }
  std::vector<double> ta, tb;
  for (int i = 0; i < runs; ++i) {
    auto t0 = Clock::now();
    a();
    ta.push_back(ms_since(t0));
    t0 = Clock::now();
    b();
    tb.push_back(ms_since(t0));
  }
  return {median(ta), median(tb)};
}

void report(const char* name, std::pair<double, double> eager_interp) {
  const double e = eager_interp.first, i = eager_interp.second;
  std::printf("%s_eager_ms %.3f\n%s_interpreter_ms %.3f\n%s_overhead_pct %.2f\n", name, e, name, i,
              name, (i / e - 1.0) * 100.0);
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 21;
  at::set_num_threads(1);
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  namespace ft = fx::torch;

  auto resnet = std::make_shared<zoo::ResNet18>();
  resnet->eval();
  {
    std::vector<double> t;
    for (int i = 0; i < runs; ++i) {
      auto t0 = Clock::now();
      auto gm = ft::symbolic_trace(resnet);
      t.push_back(ms_since(t0));
    }
    std::printf("resnet18_trace_ms %.3f\n", median(t));
  }
  auto gm = ft::symbolic_trace(resnet);
  ft::Interpreter interp(*gm);
  torch::Tensor x = torch::randn({1, 3, 224, 224});
  report("resnet18", compare(
                         2, runs, [&] { (*resnet)({x}); }, [&] { interp.run({x}); }));

  auto block = std::make_shared<zoo::EncoderBlock>(256, 8, 1024);
  block->eval();
  auto bgm = ft::symbolic_trace(block);
  ft::Interpreter binterp(*bgm);
  torch::Tensor h = torch::randn({1, 64, 256});
  report("encoder_block", compare(
                              5, runs * 5, [&] { (*block)({h}); }, [&] { binterp.run({h}); }));
  return 0;
}
