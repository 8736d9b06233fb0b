// ONNX import time (parse with protobuf + build the GraphModule): fx::onnx::import_model on the
// bytes of a model file already in memory, natively (bench/run_onnx_import.sh). The file read
// is not timed, like the wasm and onnxruntime figures of bench/onnx_import.mjs.
//
//   onnx_import MODEL.onnx [MODEL.onnx ...] [--runs 5] [--min-ms 20]
//
// One JSON line per model: median and min over --runs repetitions (each >= --min-ms, several
// imports back to back for small models), plus the peak resident set size growth of the first
// import over the process after reading the file (getrusage ru_maxrss; Linux only), beside the
// file size.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "fx/fx.h"
#include "fx/onnx.h"

namespace {

using Clock = std::chrono::steady_clock;

long max_rss_kb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> models;
  int runs = 5;
  double min_ms = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc)
      runs = std::atoi(argv[++i]);
    else if (a == "--min-ms" && i + 1 < argc)
      min_ms = std::atof(argv[++i]);
    else
      models.push_back(a);
  }
  for (const std::string& path : models) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "onnx_import: cannot open %s\n", path.c_str());
      return 1;
    }
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                     std::istreambuf_iterator<char>());
    std::string name = path.substr(path.find_last_of('/') + 1);
    name = name.substr(0, name.rfind(".onnx"));
    try {
      const long rss0 = max_rss_kb();
      auto t0 = Clock::now();
      size_t nodes = 0;
      {
        auto gm = fx::onnx::import_model(bytes.data(), bytes.size());
        nodes = gm->graph().nodes().size();
      }
      const double first = std::chrono::duration<double>(Clock::now() - t0).count();
      const long rss1 = max_rss_kb();
      const int inner = std::max(1, static_cast<int>(min_ms / 1e3 / first + 0.999));
      std::vector<double> ts;
      for (int r = 0; r < runs; ++r) {
        auto t = Clock::now();
        for (int k = 0; k < inner; ++k) fx::onnx::import_model(bytes.data(), bytes.size());
        ts.push_back(std::chrono::duration<double>(Clock::now() - t).count() / inner);
      }
      std::sort(ts.begin(), ts.end());
      std::printf(
          "{\"impl\": \"fxwasm-native\", \"model\": \"%s\", \"file_bytes\": %zu, \"nodes\": %zu, "
          "\"median_ms\": %.3f, \"min_ms\": %.3f, \"first_ms\": %.3f, \"runs\": %d, \"inner\": %d, "
          "\"peak_rss_growth_bytes\": %ld}\n",
          name.c_str(), bytes.size(), nodes, ts[ts.size() / 2] * 1e3, ts[0] * 1e3, first * 1e3,
          runs, inner, (rss1 - rss0) * 1024L);
      std::fflush(stdout);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "onnx_import: %s: %s\n", path.c_str(), e.what());
      return 1;
    }
  }
  return 0;
}
