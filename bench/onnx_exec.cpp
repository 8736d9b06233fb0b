// fx::exec latency on an ONNX model of models/zoo/, one thread, natively or as wasm under node
// (bench/run_onnx_exec.sh builds both). The model is imported with fx::onnx::load_model and
// run on seeded random inputs: the mulberry32 stream of scripts/ort_run.mjs (seed 0, floats
// uniform in [-1, 1)), so the output checksum can be compared with onnxruntime's.
//
//   onnx_exec MODEL.onnx --input float32:1,3,224,224 [--input ...] [--runs 10] [--min-ms 20]
//             [--warmup 2] [--warmup-ms 2000] [--threads N] [--profile] [--profile-json FILE]
//             [--no-prepack] [--serve] [--step-profile N]
//
// The weights are prepacked after the import (fx::exec::prepack_weights, as onnxruntime does at
// session creation), inside the import + first run time; --no-prepack leaves it to the first run
// (which then keeps a packed copy beside each weight).
//
// Timing: after the warm-up (at least --warmup runs and --warmup-ms, so that V8 has tiered up
// the wasm code), each repetition runs the model k times back to back (k chosen so that a
// repetition takes >= --min-ms) and records the mean; the median and min over --runs
// repetitions are printed as one JSON line.
//
// --serve (bench/native_ab.mjs): after the warm-up, print one JSON line ({"ready": ...}), then
// answer each line "sample MS" on stdin with one line: the mean ms per run of back-to-back runs
// lasting >= MS; exit at the end of stdin.
//
// --step-profile N: per-node cost inside the model: N runs with RunOptions::profile (the step
// timer), each op's min and median over them, as JSON lines to --profile-json (else stdout),
// largest min first. Unlike --profile it sees the model's fusions and its cache and thread
// state, so two such files (--threads 1 and 2, say) show node by node where scaling is lost.
// stderr gets the run's time outside its timed ops (median and min of the N runs): the executor's
// own cost per run (the step loop, freeing values, results).
//
// --profile: per-node cost, measured by running every call_function node alone. One full run
// records every node's inputs (RunOptions::probe); then each node becomes a one-node
// GraphModule (its inputs as placeholders, its kwargs and meta, the module's opset meta) timed
// like the whole model (median of 5 repetitions of >= 2 ms). Per-op-type sums go to stdout as
// JSON lines ({"profile": ...}); the per-node list to --profile-json if given. The sum of the
// node times is printed beside the whole-model median (the rest is the interpreter's own cost
// plus cache effects).
#include <algorithm>
#ifndef __EMSCRIPTEN__
#include <sys/resource.h>
#endif
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "fx/exec.h"
#include "fx/fx.h"
#include "fx/onnx.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// scripts/ort_run.mjs's mulberry32.
struct Mulberry32 {
  uint32_t a;
  double operator()() {
    a += 0x6d2b79f5u;
    uint32_t t = a;
    t = (t ^ (t >> 15)) * (t | 1u);
    t ^= t + (t ^ (t >> 7)) * (t | 61u);
    return static_cast<double>(t ^ (t >> 14)) / 4294967296.0;
  }
};

struct InputSpec {
  std::string dtype;
  std::vector<int64_t> shape;
};

InputSpec parse_input(const std::string& s) {
  InputSpec spec;
  const size_t colon = s.find(':');
  if (colon == std::string::npos) {
    std::fprintf(stderr, "--input wants DTYPE:D0,D1,... (got '%s')\n", s.c_str());
    std::exit(2);
  }
  spec.dtype = s.substr(0, colon);
  const std::string dims = s.substr(colon + 1);
  size_t pos = 0;
  while (pos < dims.size()) {
    size_t end = dims.find(',', pos);
    if (end == std::string::npos) end = dims.size();
    spec.shape.push_back(std::atoll(dims.substr(pos, end - pos).c_str()));
    pos = end + 1;
  }
  return spec;
}

std::vector<fx::exec::Value> make_inputs(const std::vector<InputSpec>& specs) {
  Mulberry32 rand{0};
  std::vector<fx::exec::Value> out;
  for (const InputSpec& s : specs) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    if (s.dtype == "float32") {
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = static_cast<float>(2.0 * rand() - 1.0);
      out.push_back(fx::exec::Value::from_f32(s.shape, v));
    } else if (s.dtype == "int64") {
      std::vector<int64_t> v(static_cast<size_t>(n));
      for (int64_t& x : v) x = static_cast<int64_t>(10.0 * rand());
      out.push_back(fx::exec::Value::from_i64(s.shape, v));
    } else {
      std::fprintf(stderr, "unsupported input dtype %s\n", s.dtype.c_str());
      std::exit(2);
    }
  }
  return out;
}

// Median and min (seconds per call) of `reps` repetitions of >= min_s each.
struct Timing {
  double median, min;
  int inner;
};
template <class F>
Timing time_it(F&& f, int reps, double min_s) {
  auto t0 = Clock::now();
  f();
  const double once = std::max(seconds_since(t0), 1e-7);
  const int inner = std::max(1, static_cast<int>(min_s / once + 0.999));
  std::vector<double> ts;
  for (int r = 0; r < reps; ++r) {
    auto t = Clock::now();
    for (int i = 0; i < inner; ++i) f();
    ts.push_back(seconds_since(t) / inner);
  }
  std::sort(ts.begin(), ts.end());
  return {ts[ts.size() / 2], ts[0], inner};
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

std::string op_type(const fx::Node& n) {
  std::string t = n.target().function().qualname();
  if (t.rfind("onnx.", 0) == 0) t = t.substr(5);
  return t;
}

bool is_getitem(const fx::Node& n) {
  return n.op() == fx::Opcode::CallFunction &&
         n.target().function().qualname() == "operator.getitem";
}

struct NodeCost {
  std::string name, op;
  double median = 0, min = 0;
  std::string shapes;
};

// Runs every call_function node alone on the inputs it sees in a full run.
std::vector<NodeCost> profile_nodes(const fx::GraphModule& gm,
                                    const std::vector<fx::exec::Value>& inputs) {
  std::vector<const fx::Node*> compute;
  fx::exec::RunOptions opts;
  std::vector<std::string> probe_names;
  for (const fx::Node* n : gm.graph().nodes()) {
    if (n->op() != fx::Opcode::CallFunction || is_getitem(*n)) continue;
    compute.push_back(n);
    for (const fx::Node* in : n->all_input_nodes()) probe_names.push_back(in->name());
  }
  std::sort(probe_names.begin(), probe_names.end());
  probe_names.erase(std::unique(probe_names.begin(), probe_names.end()), probe_names.end());
  opts.probe = probe_names;
  fx::exec::RunResult full = fx::exec::run(gm, inputs, opts);
  std::unordered_map<std::string, fx::exec::Value> values;
  for (auto& [name, v] : full.probes) values[name] = v;

  std::vector<NodeCost> costs;
  for (const fx::Node* n : compute) {
    auto g = std::make_unique<fx::Graph>();
    std::unordered_map<const fx::Node*, fx::Node*> map;
    std::vector<fx::exec::Value> node_inputs;
    std::vector<std::pair<std::string, fx::Tensor>> constants;
    std::string shapes;
    bool ok = true;
    for (const fx::Node* in : n->all_input_nodes()) {
      auto it = values.find(in->name());
      if (it == values.end()) {
        ok = false;  // a subgraph body (get_attr of a module): not profiled alone
        break;
      }
      if (in->op() == fx::Opcode::GetAttr && gm.get_tensor(in->target().str())) {
        // A constant stays one: kernels cache what they derive from constants (packed weights)
        // as in a full run.
        map[in] = g->get_attr("c_" + std::to_string(map.size()));
        constants.emplace_back(map[in]->target().str(), *gm.get_tensor(in->target().str()));
      } else {
        map[in] = g->placeholder("in_" + std::to_string(map.size()));
        node_inputs.push_back(it->second);
      }
      if (!shapes.empty()) shapes += ", ";
      shapes += it->second.describe();
    }
    if (!ok) continue;
    fx::Node* copy = g->node_copy(n, [&](fx::Node* x) -> fx::Argument { return map.at(x); });
    fx::Argument::Items outs;
    for (const fx::Node* u : n->users())
      if (is_getitem(*u))
        outs.emplace_back(g->node_copy(
            u, [&](fx::Node* x) -> fx::Argument { return x == n ? copy : map.at(x); }));
    g->output(outs.empty() ? fx::Argument(copy) : fx::Argument::tuple(std::move(outs)));
    fx::GraphModule one(nullptr, std::make_unique<fx::Graph>(), "OneNode");
    for (auto& [name, t] : constants) one.register_buffer(name, t);
    one.set_graph(std::move(g));
    for (const auto& [k, v] : gm.meta()) one.meta().set(k, v);
    Timing t = time_it([&] { fx::exec::run(one, node_inputs); }, 5, 0.002);
    costs.push_back({n->name(), op_type(*n), t.median, t.min, shapes});
  }
  return costs;
}

}  // namespace

// The process's peak resident memory (getrusage; 0 where there is none, as in wasm).
double peak_rss_mb() {
#ifdef __EMSCRIPTEN__
  return 0;
#else
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // KB on Linux
#endif
}

int main(int argc, char** argv) {
  std::string model, profile_json;
  std::vector<InputSpec> specs;
  int runs = 10, warmup = 2;
  double min_ms = 20, warmup_ms = 2000;
  bool profile = false, prepack = true, serve = false;
  int step_profile = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--input")
      specs.push_back(parse_input(next()));
    else if (a == "--runs")
      runs = std::atoi(next().c_str());
    else if (a == "--warmup")
      warmup = std::atoi(next().c_str());
    else if (a == "--min-ms")
      min_ms = std::atof(next().c_str());
    else if (a == "--warmup-ms")
      warmup_ms = std::atof(next().c_str());
    else if (a == "--threads")
      fx::exec::set_num_threads(std::atoi(next().c_str()));
    else if (a == "--profile")
      profile = true;
    else if (a == "--no-prepack")
      prepack = false;
    else if (a == "--serve")
      serve = true;
    else if (a == "--step-profile")
      step_profile = std::atoi(next().c_str());
    else if (a == "--profile-json")
      profile_json = next();
    else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    } else
      model = a;
  }
  if (model.empty() || specs.empty()) {
    std::fprintf(stderr, "usage: onnx_exec MODEL.onnx --input float32:1,3,224,224 [...]\n");
    return 2;
  }
#ifdef __EMSCRIPTEN__
  const char* impl = "fxwasm-wasm-driver";
#else
  const char* impl = "fxwasm-native";
#endif
  std::string name = model.substr(model.find_last_of('/') + 1);
  name = name.substr(0, name.rfind(".onnx"));
  try {
    // Import + first run (issue 19: against onnxruntime's session creation + first run).
    const auto l0 = Clock::now();
    std::unique_ptr<fx::GraphModule> gm = fx::onnx::load_model(model);
    // As onnxruntime prepacks at session creation: the GEMM weights are then held once.
    if (prepack) fx::exec::prepack_weights(*gm);
    const std::vector<fx::exec::Value> inputs = make_inputs(specs);
    std::vector<fx::exec::Value> out = fx::exec::run(*gm, inputs);
    const double load_first_ms = seconds_since(l0) * 1e3;
    // Warm up by count and by time: V8 runs wasm on its baseline tier until the optimizing
    // tier has compiled the hot functions in the background.
    const auto w0 = Clock::now();
    for (int w = 0; w < warmup || seconds_since(w0) < warmup_ms / 1e3; ++w)
      out = fx::exec::run(*gm, inputs);
    double sum = 0, abs_sum = 0;
    for (float v : out.at(0).to_f32()) {
      sum += v;
      abs_sum += std::abs(v);
    }
    if (serve) {
      std::printf(
          "{\"ready\": \"%s\", \"model\": \"%s\", \"out_sum\": %.9g, \"out_abs_sum\": %.9g}\n",
          impl, name.c_str(), sum, abs_sum);
      std::fflush(stdout);
      char line[64];
      while (std::fgets(line, sizeof line, stdin)) {
        double ms = 0;
        if (std::sscanf(line, "sample %lf", &ms) != 1) {
          std::fprintf(stderr, "--serve: expected 'sample MS', got '%s'\n", line);
          return 2;
        }
        const auto t0 = Clock::now();
        int k = 0;
        do {
          fx::exec::run(*gm, inputs);
          ++k;
        } while (seconds_since(t0) * 1e3 < ms);
        std::printf("%.6f\n", seconds_since(t0) * 1e3 / k);
        std::fflush(stdout);
      }
      return 0;
    }
    if (step_profile > 0) {
      fx::exec::RunOptions opts;
      opts.profile = true;
      std::map<std::string, std::pair<std::string, std::vector<double>>> by_node;
      std::vector<double> outside;  // each run's time outside its timed ops
      for (int r = 0; r < step_profile; ++r) {
        const auto t0 = Clock::now();
        const fx::exec::RunResult result = fx::exec::run(*gm, inputs, opts);
        double in_ops = 0;
        for (const fx::exec::OpTime& op : result.profile) {
          auto& [target, times] = by_node[op.node];
          target = op.op;
          times.push_back(op.microseconds / 1e3);
          in_ops += op.microseconds / 1e3;
        }
        outside.push_back(seconds_since(t0) * 1e3 - in_ops);
      }
      std::sort(outside.begin(), outside.end());
      std::fprintf(stderr, "run time outside the ops: median %.4f ms, min %.4f\n",
                   outside[outside.size() / 2], outside.front());
      std::vector<NodeCost> costs;
      for (auto& [node, v] : by_node) {
        std::vector<double>& ms = v.second;
        std::sort(ms.begin(), ms.end());
        costs.push_back({node, v.first, ms[ms.size() / 2], ms.front(), ""});
      }
      std::sort(costs.begin(), costs.end(),
                [](const NodeCost& a, const NodeCost& b) { return a.min > b.min; });
      FILE* f = profile_json.empty() ? stdout : std::fopen(profile_json.c_str(), "w");
      if (!f) {
        std::fprintf(stderr, "cannot write %s\n", profile_json.c_str());
        return 1;
      }
      for (const NodeCost& c : costs)
        std::fprintf(f,
                     "{\"impl\": \"%s\", \"model\": \"%s\", \"node\": \"%s\", \"op\": \"%s\", "
                     "\"median_ms\": %.4f, \"min_ms\": %.4f, \"runs\": %d}\n",
                     impl, name.c_str(), json_escape(c.name).c_str(), c.op.c_str(), c.median, c.min,
                     step_profile);
      if (f != stdout) std::fclose(f);
      return 0;
    }
    Timing t = time_it([&] { fx::exec::run(*gm, inputs); }, runs, min_ms / 1e3);
    std::printf(
        "{\"impl\": \"%s\", \"model\": \"%s\", \"median_ms\": %.4f, \"min_ms\": %.4f, "
        "\"runs\": %d, \"inner\": %d, \"out_sum\": %.9g, \"out_abs_sum\": %.9g, "
        "\"load_first_ms\": %.1f, \"peak_rss_mb\": %.1f}\n",
        impl, name.c_str(), t.median * 1e3, t.min * 1e3, runs, t.inner, sum, abs_sum, load_first_ms,
        peak_rss_mb());
    std::fflush(stdout);
    if (profile) {
      std::vector<NodeCost> costs = profile_nodes(*gm, inputs);
      std::map<std::string, std::pair<double, int>> by_op;
      double total = 0;
      for (const NodeCost& c : costs) {
        by_op[c.op].first += c.median;
        by_op[c.op].second += 1;
        total += c.median;
      }
      std::vector<std::pair<std::string, std::pair<double, int>>> sorted(by_op.begin(),
                                                                         by_op.end());
      std::sort(sorted.begin(), sorted.end(),
                [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
      for (const auto& [op, v] : sorted)
        std::printf(
            "{\"profile\": \"%s\", \"impl\": \"%s\", \"model\": \"%s\", \"op\": \"%s\", "
            "\"nodes\": %d, \"ms\": %.4f, \"share\": %.4f}\n",
            "op", impl, name.c_str(), op.c_str(), v.second, v.first * 1e3, v.first / total);
      std::printf(
          "{\"profile\": \"total\", \"impl\": \"%s\", \"model\": \"%s\", \"node_sum_ms\": %.4f, "
          "\"model_median_ms\": %.4f}\n",
          impl, name.c_str(), total * 1e3, t.median * 1e3);
      if (!profile_json.empty()) {
        FILE* f = std::fopen(profile_json.c_str(), "w");
        if (!f) {
          std::fprintf(stderr, "cannot write %s\n", profile_json.c_str());
          return 1;
        }
        std::sort(costs.begin(), costs.end(),
                  [](const NodeCost& a, const NodeCost& b) { return a.median > b.median; });
        for (const NodeCost& c : costs)
          std::fprintf(f,
                       "{\"impl\": \"%s\", \"model\": \"%s\", \"node\": \"%s\", \"op\": \"%s\", "
                       "\"median_ms\": %.4f, \"min_ms\": %.4f, \"inputs\": \"%s\"}\n",
                       impl, name.c_str(), json_escape(c.name).c_str(), c.op.c_str(),
                       c.median * 1e3, c.min * 1e3, json_escape(c.shapes).c_str());
        std::fclose(f);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "onnx_exec: %s: %s\n", model.c_str(), e.what());
    return 1;
  }
  return 0;
}
