// IR chain benchmark (issue "FX IR core"), C++ runner: native with g++, wasm with em++.
//
// Graph: placeholder x, then N/2 steps of `add = operator.add(prev, 1)`, `relu = torch.relu(add)`,
// then output. Ops: build, print (g.str()), codegen (g.python_code("self").src), lint,
// dce (eliminate_dead_code() on the chain plus one dead `operator.mul(add, 2)` per 10 steps; only
// the call is timed), graph_copy (Graph::clone()). Median of 5 samples per op, each sample
// repeating the op until it takes at least 20 ms.
// Output: one JSON line per (impl, N, op, seconds), plus `check` lines with the length and
// FNV-1a 64 of the 1k chain's str() and code, which run_ir.sh compares with torch.fx.
//
//   ir_chain [--impl NAME] [--sizes 1000,10000,50000] [--runs 5] [--dump PREFIX]
//
// --dump writes the 1k chain's text to PREFIX.str / PREFIX.code (native only: the wasm build has
// no host file system).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "fx/fx.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// The chain; `dead_every` > 0 adds a dead `operator.mul(add, 2)` after every dead_every-th step.
std::unique_ptr<fx::Graph> build_chain(int steps, int dead_every = 0) {
  const fx::Function add_fn = fx::fn("operator.add");
  const fx::Function relu_fn = fx::fn("torch.relu");
  const fx::Function mul_fn = fx::fn("operator.mul");
  auto g = std::make_unique<fx::Graph>();
  fx::Node* prev = g->placeholder("x");
  for (int i = 0; i < steps; ++i) {
    fx::Node* add = g->call_function(add_fn, {prev, 1});
    prev = g->call_function(relu_fn, {add});
    if (dead_every && i % dead_every == dead_every - 1) g->call_function(mul_fn, {add, 2});
  }
  g->output(prev);
  return g;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string impl_name = "native";

void emit(int n, const char* op, double secs, int runs) {
  std::printf(
      "{\"impl\": \"%s\", \"N\": %d, \"op\": \"%s\", \"seconds\": %.9g, \"runs\": %d, "
      "\"lower_bound\": false}\n",
      impl_name.c_str(), n, op, secs, runs);
  std::fflush(stdout);
}

void emit_check(int n, const char* what, const std::string& text) {
  std::printf(
      "{\"impl\": \"%s\", \"N\": %d, \"check\": \"%s\", \"len\": %zu, \"fnv1a64\": \"%s\"}\n",
      impl_name.c_str(), n, what, text.size(), fnv1a64(text).c_str());
  std::fflush(stdout);
}

// Keeps results alive so the optimizer cannot drop the timed work.
volatile size_t g_sink = 0;

// One sample times `reps` back-to-back calls of the op (reps grows until a sample takes at least
// 20 ms, so sub-millisecond ops are not lost in timer and scheduler noise); the figure is the
// median over `runs` samples of the time per call. `f(reps)` returns the seconds for reps calls.
template <class F>
void bench(int n, const char* op, int runs, F&& f) {
  int reps = 1;
  for (double t = f(1); t < 0.02 && reps < (1 << 20); t = f(reps))
    reps *= t > 0 ? std::min(16.0, std::max(2.0, 0.025 / t)) : 16;
  std::vector<double> ts;
  for (int r = 0; r < runs; ++r) ts.push_back(f(reps) / reps);
  emit(n, op, median(ts), runs);
}

}  // namespace

int main(int argc, char** argv) {
#ifdef __EMSCRIPTEN__
  impl_name = "wasm";
#endif
  std::vector<int> sizes = {1000, 10000, 50000};
  int runs = 5;
  std::string dump;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value for %s\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--impl") {
      impl_name = next();
    } else if (a == "--runs") {
      runs = std::atoi(next().c_str());
    } else if (a == "--dump") {
      dump = next();
    } else if (a == "--sizes") {
      sizes.clear();
      std::string s = next();
      for (size_t p = 0; p <= s.size();) {
        size_t q = s.find(',', p);
        if (q == std::string::npos) q = s.size();
        sizes.push_back(std::atoi(s.substr(p, q - p).c_str()));
        p = q + 1;
      }
    } else {
      std::fprintf(stderr,
                   "usage: %s [--impl NAME] [--sizes 1000,10000,50000] [--runs 5] "
                   "[--dump PREFIX]\n",
                   argv[0]);
      return 2;
    }
  }

  try {
    for (int n : sizes) {
      const int steps = n / 2;
      auto g = build_chain(steps);

      if (n == 1000) {
        const std::string s = g->str();
        const std::string c = g->python_code("self").src;
        emit_check(n, "str", s);
        emit_check(n, "code", c);
        if (!dump.empty()) {
          std::ofstream(dump + ".str", std::ios::binary) << s;
          std::ofstream(dump + ".code", std::ios::binary) << c;
        }
      }

      bench(n, "build", runs, [&](int reps) {
        std::vector<std::unique_ptr<fx::Graph>> built(reps);
        auto t0 = Clock::now();
        for (auto& b : built) b = build_chain(steps);
        double dt = seconds_since(t0);
        g_sink = g_sink + built.back()->size();
        return dt;  // the graphs are freed outside the timed region
      });
      bench(n, "print", runs, [&](int reps) {
        auto t0 = Clock::now();
        for (int i = 0; i < reps; ++i) g_sink = g_sink + g->str().size();
        return seconds_since(t0);
      });
      bench(n, "codegen", runs, [&](int reps) {
        auto t0 = Clock::now();
        for (int i = 0; i < reps; ++i) g_sink = g_sink + g->python_code("self").src.size();
        return seconds_since(t0);
      });
      bench(n, "lint", runs, [&](int reps) {
        auto t0 = Clock::now();
        for (int i = 0; i < reps; ++i) g->lint();
        return seconds_since(t0);
      });
      bench(n, "dce", runs, [&](int reps) {
        // Each graph is built right before its (separately timed) DCE, as torch.fx's run does.
        double dt = 0;
        for (int i = 0; i < reps; ++i) {
          auto d = build_chain(steps, 10);
          auto t0 = Clock::now();
          bool changed = d->eliminate_dead_code();
          dt += seconds_since(t0);
          if (!changed || d->size() != g->size()) {
            std::fprintf(stderr, "dce: expected %zu nodes after DCE, got %zu\n", g->size(),
                         d->size());
            std::exit(1);
          }
        }
        return dt;
      });
      bench(n, "graph_copy", runs, [&](int reps) {
        std::vector<std::unique_ptr<fx::Graph>> copies(reps);
        auto t0 = Clock::now();
        for (auto& c : copies) c = g->clone();
        double dt = seconds_since(t0);
        if (copies.back()->size() != g->size()) {
          std::fprintf(stderr, "graph_copy: %zu nodes, expected %zu\n", copies.back()->size(),
                       g->size());
          std::exit(1);
        }
        return dt;
      });
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ir_chain: %s\n", e.what());
    return 1;
  }
  return 0;
}
