// fx::exec on ResNet-18 as torch.onnx exports it in eval mode (BatchNorm folded into Conv
// biases): Conv/Relu/MaxPool/Add/GlobalAveragePool/Flatten/Gemm, built with the graph API with
// seeded random weights, input 1x3x224x224, one thread. Prints one JSON line (native or wasm)
// with the median latency after two warm-up runs.
//
//   exec_resnet18 [--runs 10]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fx/exec.h"
#include "fx/fx.h"

namespace {

using fx::Argument;
using fx::fn;
using fx::Node;

Argument ints(std::vector<int64_t> v) {
  Argument::Items items;
  for (int64_t x : v) items.emplace_back(static_cast<long long>(x));
  return Argument::list(std::move(items));
}

struct Builder {
  fx::Graph* g;
  fx::Module* root;
  std::mt19937 rng{2024};
  int counter = 0;

  Node* param(const std::string& name, std::vector<int64_t> shape, float scale) {
    fx::Tensor t;
    t.shape = shape;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n) * 4);
    std::uniform_real_distribution<float> dist(-scale, scale);
    float* p = reinterpret_cast<float*>(bytes->data());
    for (int64_t i = 0; i < n; ++i) p[i] = dist(rng);
    t.data = bytes;
    root->register_parameter(name, t);
    return g->get_attr(name);
  }

  Node* conv(Node* x, int64_t cin, int64_t cout, int64_t k, int64_t stride, int64_t pad) {
    const std::string p = "conv" + std::to_string(counter++);
    const float scale = std::sqrt(6.0f / static_cast<float>(cin * k * k));
    Node* w = param(p + "_w", {cout, cin, k, k}, scale);
    Node* b = param(p + "_b", {cout}, 0.1f);
    return g->call_function(fn("onnx.Conv"), {x, w, b},
                            {{"kernel_shape", ints({k, k})},
                             {"pads", ints({pad, pad, pad, pad})},
                             {"strides", ints({stride, stride})}});
  }
  Node* relu(Node* x) { return g->call_function(fn("onnx.Relu"), {x}); }

  Node* basic_block(Node* x, int64_t cin, int64_t cout, int64_t stride) {
    Node* y = relu(conv(x, cin, cout, 3, stride, 1));
    y = conv(y, cout, cout, 3, 1, 1);
    Node* shortcut = (stride != 1 || cin != cout) ? conv(x, cin, cout, 1, stride, 0) : x;
    return relu(g->call_function(fn("onnx.Add"), {y, shortcut}));
  }
};

std::unique_ptr<fx::GraphModule> resnet18() {
  auto g = std::make_unique<fx::Graph>();
  fx::Module root;
  Builder b{g.get(), &root};
  Node* x = g->placeholder("input");
  Node* y = b.relu(b.conv(x, 3, 64, 7, 2, 3));
  y = g->call_function(
      fn("onnx.MaxPool"), {y},
      {{"kernel_shape", ints({3, 3})}, {"pads", ints({1, 1, 1, 1})}, {"strides", ints({2, 2})}});
  int64_t c = 64;
  for (int64_t stage = 0; stage < 4; ++stage) {
    const int64_t cout = 64 << stage;
    y = b.basic_block(y, c, cout, stage == 0 ? 1 : 2);
    y = b.basic_block(y, cout, cout, 1);
    c = cout;
  }
  y = g->call_function(fn("onnx.GlobalAveragePool"), {y});
  y = g->call_function(fn("onnx.Flatten"), {y});
  y = g->call_function(fn("onnx.Gemm"),
                       {y, b.param("fc_w", {1000, 512}, 0.05f), b.param("fc_b", {1000}, 0.05f)},
                       {{"transB", 1}});
  g->output(y);
  return std::make_unique<fx::GraphModule>(&root, std::move(g), "ResNet18");
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 10;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--runs") runs = std::atoi(argv[i + 1]);
#ifdef __EMSCRIPTEN__
  const char* impl = "wasm";
#else
  const char* impl = "native";
#endif
  auto gm = resnet18();
  std::vector<float> input(3 * 224 * 224);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : input) v = dist(rng);
  const fx::exec::Value x = fx::exec::Value::from_f32({1, 3, 224, 224}, input);

  for (int w = 0; w < 2; ++w) fx::exec::run(*gm, {x});  // warm-up (V8 tiers up)
  std::vector<double> ts;
  float checksum = 0;
  for (int r = 0; r < runs; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<fx::exec::Value> out = fx::exec::run(*gm, {x});
    ts.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    checksum = 0;
    for (float v : out[0].to_f32()) checksum += v;
  }
  std::sort(ts.begin(), ts.end());
  std::printf(
      "{\"impl\": \"%s\", \"model\": \"resnet18 (BN folded)\", \"input\": [1, 3, 224, 224], "
      "\"median_ms\": %.2f, \"min_ms\": %.2f, \"runs\": %d, \"checksum\": %.6g}\n",
      impl, ts[ts.size() / 2] * 1e3, ts[0] * 1e3, runs, checksum);
  return 0;
}
