// Pass benchmark (issue 6), C++ driver; bench/run_passes.sh runs it next to its torch.fx 1.13
// twin (bench/passes_torchfx.py) and prints the ratios.
//
// Chains (as bench/ir_chain.cpp): placeholder x, N/2 steps of add = operator.add(prev, 1),
// relu = torch.relu(add), output. Ops, each on a fresh copy (building it is not timed):
//   cse            fx::cse (nothing to merge: the cost of hashing and comparing every node)
//   dce            Graph::eliminate_dead_code with one dead operator.mul(add, 2) per 10 steps
//   replace_pattern  relu(x + 1) -> sigmoid(x), N/2 matches
//   split_module   partition = node index / 1000 (N/1000 submodules)
// ONNX passes (--model PATH): each of fx::exec::pass_names() and shape_prop on a fresh copy of
// the imported model (shape_prop run once first, as fuse-matmul-add reads its meta).
// Output: one JSON line per measurement {"impl", "N" or "model", "op", "seconds", "runs", ...}.
//
//   bench_passes [--sizes 10000,50000] [--runs 5] [--model models/zoo/resnet50.onnx]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "fx/exec.h"
#include "fx/exec/passes.h"
#include "fx/fx.h"
#include "fx/onnx.h"

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::unique_ptr<fx::GraphModule> chain(int steps, int dead_every = 0) {
  const fx::Function add_fn = fx::fn("operator.add"), relu_fn = fx::fn("torch.relu"),
                     mul_fn = fx::fn("operator.mul");
  auto g = std::make_unique<fx::Graph>();
  fx::Node* prev = g->placeholder("x");
  for (int i = 0; i < steps; ++i) {
    fx::Node* add = g->call_function(add_fn, {prev, 1});
    prev = g->call_function(relu_fn, {add});
    if (dead_every && i % dead_every == dead_every - 1) g->call_function(mul_fn, {add, 2});
  }
  g->output(prev);
  return std::make_unique<fx::GraphModule>(nullptr, std::move(g));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Median over `runs` samples; each sample prepares a fresh input (untimed) and times `op` once.
template <class Prep, class Op>
double sample(int runs, Prep&& prep, Op&& op) {
  std::vector<double> ts;
  for (int r = 0; r < runs; ++r) {
    auto input = prep();
    const auto t0 = Clock::now();
    op(*input);
    ts.push_back(since(t0));
  }
  return median(ts);
}

void emit_chain(int n, const char* op, double s, int runs, size_t nodes_after) {
  std::printf(
      "{\"impl\": \"native\", \"N\": %d, \"op\": \"%s\", \"seconds\": %.9g, \"runs\": %d, "
      "\"nodes_after\": %zu}\n",
      n, op, s, runs, nodes_after);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {10000, 50000};
  int runs = 5;
  std::string model;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--runs") {
      runs = std::atoi(v.c_str());
    } else if (a == "--model") {
      model = v;
    } else if (a == "--sizes") {
      sizes.clear();
      for (size_t p = 0; p <= v.size();) {
        size_t q = v.find(',', p);
        if (q == std::string::npos) q = v.size();
        sizes.push_back(std::atoi(v.substr(p, q - p).c_str()));
        p = q + 1;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--sizes 10000,50000] [--runs 5] [--model PATH]\n", argv[0]);
      return 2;
    }
  }
  try {
    fx::Graph pattern, replacement;
    {
      fx::Node* x = pattern.placeholder("x");
      pattern.output(pattern.call_function(
          fx::fn("torch.relu"), {pattern.call_function(fx::fn("operator.add"), {x, 1})}));
      fx::Node* y = replacement.placeholder("x");
      replacement.output(replacement.call_function(fx::fn("torch.sigmoid"), {y}));
    }
    for (int n : sizes) {
      const int steps = n / 2;
      size_t after = 0;
      double s = sample(
          runs, [&] { return chain(steps); },
          [&](fx::GraphModule& gm) {
            fx::cse(gm);
            after = gm.graph().size();
          });
      emit_chain(n, "cse", s, runs, after);
      s = sample(
          runs, [&] { return chain(steps, 10); },
          [&](fx::GraphModule& gm) {
            // Graph-level, like the twin's Graph.eliminate_dead_code() (fx::eliminate_dead_code
            // on the GraphModule also recompiles, which torch.fx's graph method does not).
            gm.graph().eliminate_dead_code();
            after = gm.graph().size();
          });
      emit_chain(n, "dce", s, runs, after);
      s = sample(
          runs, [&] { return chain(steps); },
          [&](fx::GraphModule& gm) {
            fx::replace_pattern(gm, pattern, replacement);
            after = gm.graph().size();
          });
      emit_chain(n, "replace_pattern", s, runs, after);
      s = sample(
          runs, [&] { return chain(steps); },
          [&](fx::GraphModule& gm) {
            std::unordered_map<const fx::Node*, int64_t> index;
            int64_t i = 0;
            for (fx::Node* node : gm.graph().nodes()) index[node] = i++;
            auto out = fx::split_module(
                gm, &gm, [&](const fx::Node* node) { return index.at(node) / 1000; });
            after = out->graph().size();
          });
      emit_chain(n, "split_module", s, runs, after);
    }
    if (!model.empty()) {
      auto t0 = Clock::now();
      std::unique_ptr<fx::GraphModule> base = fx::onnx::load_model(model);
      const double import_s = since(t0);
      std::vector<fx::exec::Value> inputs;
      for (fx::Node* p : base->graph().nodes()) {
        if (p->op() != fx::Opcode::Placeholder) continue;
        std::vector<int64_t> shape;
        for (const auto& [k, v] : p->meta().at(fx::onnx::meta::kType).dict_items())
          if (k.to_string() == "shape")
            for (const fx::Argument& d : v.elements())
              shape.push_back(d.kind() == fx::Argument::Kind::Int ? d.to_int() : 1);
        inputs.push_back(fx::exec::Value::zeros(fx::Dtype::Float32, shape));
      }
      const std::string name = model.substr(model.rfind('/') + 1);
      auto emit = [&](const std::string& op, double secs, bool modified, size_t before,
                      size_t after_n) {
        std::printf(
            "{\"impl\": \"native\", \"model\": \"%s\", \"op\": \"%s\", \"seconds\": %.9g, "
            "\"runs\": %d, \"modified\": %s, \"nodes_before\": %zu, \"nodes_after\": %zu}\n",
            name.c_str(), op.c_str(), secs, runs, modified ? "true" : "false", before, after_n);
        std::fflush(stdout);
      };
      emit("import", import_s, false, 0, base->graph().size());
      const size_t nodes = base->graph().size();
      double s = sample(
          runs, [&] { return fx::copy_graph_module(*base); },
          [&](fx::GraphModule& gm) { fx::exec::shape_prop(gm, inputs); });
      emit("shape_prop", s, false, nodes, nodes);
      fx::exec::shape_prop(*base, inputs);
      for (const std::string& pass : fx::exec::pass_names()) {
        fx::PassFn fn = fx::exec::pass_by_name(pass);
        bool modified = false;
        size_t after_n = 0;
        s = sample(
            runs, [&] { return fx::copy_graph_module(*base); },
            [&](fx::GraphModule& gm) {
              modified = fn(gm);
              after_n = gm.graph().size();
            });
        emit(pass, s, modified, nodes, after_n);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_passes: %s\n", e.what());
    return 1;
  }
  return 0;
}
