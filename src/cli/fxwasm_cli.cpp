// fxwasm-cli: the native command line, the same commands as `npx fxwasm` (wasm/cli.mjs).
//
//   fxwasm-cli model.onnx [--print graph|tabular|code|readable|all|none] [--num-users]
//              [--passes dce,cse,fold,...] [--check-equivalence] [--out new.onnx]
//              [--run] [--inputs in_0.pb ...] [--save-outputs DIR] [--coverage] [--shapes]
//              [--to-torch DIR [--torch-class NAME]]
//   fxwasm-cli --sample ...      the torch.fx docs' MyModule, built through the C++ API
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>

#include "fx/exec.h"
#include "fx/exec/passes.h"
#include "fx/fx.h"
#include "fx/onnx.h"
#include "fx/torch_codegen.h"

namespace {

// The seed example of the torch.fx docs:
//   forward(x) = self.linear(x + self.param).clamp(min=0.0, max=1.0)
std::unique_ptr<fx::GraphModule> sample_module() {
  auto g = std::make_unique<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* param = g->get_attr("param");
  fx::Node* add = g->call_function(fx::fn("operator.add"), {x, param});
  fx::Node* linear = g->call_module("linear", {add});
  fx::Node* clamp = g->call_method("clamp", {linear}, {{"min", 0.0}, {"max", 1.0}});
  g->output(clamp);

  // Weights with values (a fixed ramp), so that --to-torch writes a package that runs.
  auto weights = [](std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
    auto bytes = std::make_shared<std::vector<uint8_t>>(v.size() * sizeof(float));
    std::memcpy(bytes->data(), v.data(), bytes->size());
    return fx::Tensor{fx::Dtype::Float32, std::move(shape), bytes, true, nullptr, nullptr};
  };
  fx::Module root("MyModule");
  root.register_parameter("param", weights({3, 4}));
  auto linear_mod =
      std::make_shared<fx::Module>("Linear", "in_features=4, out_features=5, bias=True");
  linear_mod->register_parameter("weight", weights({5, 4}));
  linear_mod->register_parameter("bias", weights({5}));
  root.add_module("linear", linear_mod);
  return std::make_unique<fx::GraphModule>(&root, std::move(g), "MyModule");
}

int usage(std::ostream& os, int code) {
  os << "usage: fxwasm-cli (model.onnx | --sample) [options]\n"
        "  --print WHAT          graph, tabular, code, readable, all (default), none\n"
        "  --num-users           print torch 2.x's [num_users=N] instead of [#users=N]\n"
        "  --passes a,b,...      run passes in order, from:\n";
  fx::exec::register_onnx_passes();
  for (const fx::PassInfo& p : fx::registered_passes())
    os << "      " << std::left << std::setw(18) << p.name << p.description << "\n";
  os << "  --check-equivalence   run the model before/after each pass on random inputs\n"
        "  --out FILE.onnx       export the (transformed) model\n"
        "  --export-opset N      write opset N (default: the model's, raised as fused ops need)\n"
        "  --gelu FORM           a fused Gelu as: decomposed (default), com.microsoft, opset20\n"
        "  --coverage            list the nodes the executor cannot run\n"
        "  --shapes              infer every value's dtype and shape without data (named\n"
        "                        input dims such as batch stay symbolic) and list them\n"
        "  --run                 run the model (random inputs unless --inputs)\n"
        "  --profile             with --run: the time of each op (its median over 5 more runs),\n"
        "                        the slowest nodes and the totals by op\n"
        "  --inputs A.pb B.pb    inputs as ONNX TensorProto files, one per graph input\n"
        "  --save-outputs DIR    write output_0.pb ... into DIR\n"
        "  --to-torch DIR        write a PyTorch package (module.py, __init__.py, state_dict.pt)\n"
        "                        into DIR (created), lowering an ONNX model to torch first\n"
        "  --torch-class NAME    its torch.nn.Module class (default FxModule)\n"
        "  --max-memory SIZE     refuse any tensor, and a run's computed values, over SIZE\n"
        "                        bytes (suffix K, M, G; default: from physical memory)\n"
        "  --max-loop-iterations N  refuse a Loop that runs past N iterations (default 2^20)\n"
        "  --threads N           threads for the kernels (default 1; 0: every core)\n"
        "  --opset-check MODE    an opset newer than fxwasm knows: warn (default) or error\n";
  return code;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw fx::Error(fx::ErrorKind::Value, "cannot open '" + path + "'");
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw fx::Error(fx::ErrorKind::Value, "cannot write '" + path + "'");
}

// Seeded random inputs from the placeholders' ONNX types (symbolic dimensions become 1).
std::vector<fx::exec::Value> random_inputs(const fx::GraphModule& gm, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<fx::exec::Value> out;
  for (const fx::Node* n : gm.graph().nodes()) {
    if (n->op() != fx::Opcode::Placeholder) continue;
    fx::Dtype dtype = fx::Dtype::Float32;
    std::vector<int64_t> shape;
    if (const fx::Argument* t = n->meta().find(fx::onnx::meta::kType);
        t && t->kind() == fx::Argument::Kind::Dict) {
      for (const auto& kv : t->dict_items()) {
        if (kv.first.to_string() == "dtype" && kv.second.kind() == fx::Argument::Kind::Dtype)
          dtype = kv.second.to_dtype();
        if (kv.first.to_string() == "shape" && kv.second.is_sequence())
          for (const fx::Argument& d : kv.second.elements())
            shape.push_back(d.kind() == fx::Argument::Kind::Int ? d.to_int() : 1);
      }
    }
    fx::exec::Value v = fx::exec::Value::zeros(dtype, shape);
    const int64_t count = v.numel();
    if (dtype == fx::Dtype::Float32) {
      std::normal_distribution<float> dist;
      float* p = v.mutable_data<float>();
      for (int64_t i = 0; i < count; ++i) p[i] = dist(rng);
    } else if (dtype == fx::Dtype::Int64) {
      int64_t* p = v.mutable_data<int64_t>();
      for (int64_t i = 0; i < count; ++i) p[i] = static_cast<int64_t>(rng() % 4);
    } else if (dtype == fx::Dtype::Int32) {
      int32_t* p = v.mutable_data<int32_t>();
      for (int64_t i = 0; i < count; ++i) p[i] = static_cast<int32_t>(rng() % 4);
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// --profile: from several profiled runs, each op's median time; the slowest nodes, then the
// totals by op, each with its share of the op time (the JS CLI prints the same).
void print_profile(const std::vector<std::vector<fx::exec::OpTime>>& runs) {
  std::vector<fx::exec::OpTime> ops = runs.front();
  double total = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    std::vector<double> t;
    for (const auto& r : runs)
      if (i < r.size()) t.push_back(r[i].microseconds);
    std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
    ops[i].microseconds = t[t.size() / 2];
    total += ops[i].microseconds;
  }
  auto line = [&](const std::string& a, int wa, const std::string& b, int wb, double us) {
    std::cout << "  " << std::left << std::setw(wa) << a << " " << std::setw(wb) << b << " "
              << std::right << std::fixed << std::setprecision(3) << std::setw(9) << us / 1000
              << " ms " << std::setprecision(1) << std::setw(5)
              << 100 * us / (total > 0 ? total : 1) << " %\n";
  };
  std::cout << "profile: " << ops.size() << " ops, " << std::fixed << std::setprecision(2)
            << total / 1000 << " ms\n";
  std::vector<fx::exec::OpTime> slowest = ops;
  std::stable_sort(slowest.begin(), slowest.end(),
                   [](const auto& a, const auto& b) { return a.microseconds > b.microseconds; });
  if (slowest.size() > 15) slowest.resize(15);
  for (const auto& t : slowest) line(t.node, 32, t.op, 28, t.microseconds);
  std::vector<std::pair<std::string, std::pair<int, double>>> by_op;
  for (const auto& t : ops) {
    auto it =
        std::find_if(by_op.begin(), by_op.end(), [&](const auto& e) { return e.first == t.op; });
    if (it == by_op.end()) it = by_op.insert(by_op.end(), {t.op, {0, 0.0}});
    it->second.first += 1;
    it->second.second += t.microseconds;
  }
  std::stable_sort(by_op.begin(), by_op.end(),
                   [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  std::cout << "by op:\n";
  for (const auto& [op, e] : by_op) {
    std::ostringstream count;
    count << std::setw(5) << e.first << " x";
    line(op, 28, count.str(), 7, e.second);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool sample = false, num_users = false, run = false, check = false, show_coverage = false,
       show_shapes = false, profile = false;
  std::string what = "all", model, out_path, save_dir, passes, torch_dir;
  std::string torch_class = "FxModule";
  fx::onnx::ImportOptions import_options;
  std::vector<std::string> input_files;
  fx::onnx::ExportOptions export_options;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* opt) -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "fxwasm-cli: " << opt << " needs a value\n";
        std::exit(usage(std::cerr, 2));
      }
      return argv[++i];
    };
    if (a == "--sample")
      sample = true;
    else if (a == "--num-users")
      num_users = true;
    else if (a == "--print")
      what = value("--print");
    else if (a == "--passes")
      passes = value("--passes");
    else if (a == "--check-equivalence")
      check = true;
    else if (a == "--out")
      out_path = value("--out");
    else if (a == "--export-opset") {
      const std::string v = value("--export-opset");
      char* end = nullptr;
      export_options.opset = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || export_options.opset <= 0) {
        std::cerr << "fxwasm-cli: --export-opset takes a positive opset number, got '" << v
                  << "'\n";
        return 2;
      }
    } else if (a == "--gelu") {
      const std::string v = value("--gelu");
      if (v != "decomposed" && v != "com.microsoft" && v != "opset20") {
        std::cerr << "fxwasm-cli: --gelu takes decomposed, com.microsoft or opset20\n";
        return 2;
      }
      export_options.gelu = fx::onnx::gelu_export_from_name(v);
    } else if (a == "--max-memory") {
      const std::string v = value("--max-memory");
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      const std::string suffix = end ? end : "";
      const int shift = suffix.empty()  ? 0
                        : suffix == "K" ? 10
                        : suffix == "M" ? 20
                        : suffix == "G" ? 30
                                        : -1;
      if (v.empty() || n <= 0 || shift < 0 || n > (INT64_MAX >> shift)) {
        std::cerr << "fxwasm-cli: --max-memory takes a positive byte count (suffix K, M or G), "
                     "got '"
                  << v << "'\n";
        return 2;
      }
      fx::Limits l = fx::limits();
      l.max_tensor_bytes = l.max_run_bytes = static_cast<int64_t>(n) << shift;
      fx::set_limits(l);
    } else if (a == "--threads") {
      const std::string v = value("--threads");
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || n < 0 || n > 256 || (end && *end)) {
        std::cerr << "fxwasm-cli: --threads takes a count from 0 to 256, got '" << v << "'\n";
        return 2;
      }
      fx::exec::set_num_threads(static_cast<int>(n));
    } else if (a == "--max-loop-iterations") {
      const std::string v = value("--max-loop-iterations");
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || n <= 0 || (end && *end)) {
        std::cerr << "fxwasm-cli: --max-loop-iterations takes a positive count, got '" << v
                  << "'\n";
        return 2;
      }
      fx::Limits l = fx::limits();
      l.max_loop_iterations = n;
      fx::set_limits(l);
    } else if (a == "--opset-check") {
      const std::string v = value("--opset-check");
      if (v != "warn" && v != "error") {
        std::cerr << "fxwasm-cli: --opset-check takes warn or error\n";
        return 2;
      }
      import_options.opset_check = v == "warn" ? fx::onnx::ImportOptions::OpsetCheck::Warn
                                               : fx::onnx::ImportOptions::OpsetCheck::Error;
    } else if (a == "--run")
      run = true;
    else if (a == "--profile")
      profile = true;
    else if (a == "--coverage")
      show_coverage = true;
    else if (a == "--shapes")
      show_shapes = true;
    else if (a == "--to-torch")
      torch_dir = value("--to-torch");
    else if (a == "--torch-class")
      torch_class = value("--torch-class");
    else if (a == "--save-outputs")
      save_dir = value("--save-outputs");
    else if (a == "--inputs") {
      while (i + 1 < argc && argv[i + 1][0] != '-') input_files.push_back(argv[++i]);
    } else if (a == "--help" || a == "-h")
      return usage(std::cout, 0);
    else if (!a.empty() && a[0] != '-' && model.empty())
      model = a;
    else {
      std::cerr << "fxwasm-cli: unknown argument '" << a << "'\n";
      return usage(std::cerr, 2);
    }
  }
  if (sample == !model.empty()) return usage(std::cerr, 2);
  if (what != "all" && what != "graph" && what != "tabular" && what != "code" &&
      what != "readable" && what != "none") {
    std::cerr << "fxwasm-cli: --print takes graph, tabular, code, readable, all or none\n";
    return 2;
  }
  try {
    std::unique_ptr<fx::GraphModule> gm =
        sample ? sample_module() : fx::onnx::load_model(model, import_options);
    if (const fx::Argument* w = gm->meta().find(fx::onnx::kImportWarnings); w && w->is_sequence())
      for (const fx::Argument& m : w->elements())
        std::cerr << "fxwasm-cli: warning: " << m.to_string() << "\n";
    if (!passes.empty()) {
      fx::PassManager pm;
      std::stringstream ss(passes);
      for (std::string name; std::getline(ss, name, ',');)
        if (!name.empty()) pm.add(name, fx::exec::pass_by_name(name));
      if (check) pm.check_equivalence(fx::exec::equivalence_check(random_inputs(*gm, 1)));
      for (const fx::PassReport& r : pm.run(*gm))
        std::cerr << "[pass] " << std::left << std::setw(16) << r.pass << " nodes "
                  << r.nodes_before << " -> " << r.nodes_after
                  << (r.modified ? "  modified" : "  unchanged")
                  << (check ? (r.check.empty() ? "  equivalent" : "  " + r.check) : "") << "\n";
    }
    const fx::UsersToken token = num_users ? fx::UsersToken::NumUsers : fx::UsersToken::Hash;
    const bool all = what == "all";
    if (all) std::cout << "# print(gm.graph)\n";
    if (all || what == "graph") std::cout << gm->graph().str(token) << "\n";
    if (all) std::cout << "\n# gm.graph.print_tabular()\n";
    if (all || what == "tabular") std::cout << gm->graph().tabular() << "\n";
    if (all) std::cout << "\n# print(gm.code)";
    if (all || what == "code") std::cout << gm->code() << "\n";
    if (what == "readable") std::cout << gm->print_readable() << "\n";

    if (show_shapes) {
      const fx::exec::ShapeInferResult r = fx::exec::infer_shapes(*gm);
      std::cout << "shapes (inferred without data): " << r.typed << " of " << r.total
                << " nodes typed\n";
      for (const fx::Node* n : gm->graph().nodes())
        if (const fx::Argument* tm = n->meta().find("tensor_meta"))
          std::cout << "  " << std::left << std::setw(32) << n->name() << " " << tm->repr() << "\n";
      for (const auto& g : r.gaps)
        std::cout << "  untyped: " << g.node << " (" << g.target << "): " << g.reason << "\n";
    }
    if (show_coverage) {
      const auto gaps = fx::exec::coverage(*gm);
      std::cout << "coverage: "
                << (gaps.empty() ? "every node can run"
                                 : std::to_string(gaps.size()) + " node(s) cannot run")
                << "\n";
      for (const auto& g : gaps)
        std::cout << "  " << g.node << " (" << g.target << "): " << g.reason << "\n";
    }
    if (run) {
      std::vector<fx::exec::Value> inputs;
      if (input_files.empty()) {
        inputs = random_inputs(*gm, 0);
      } else {
        for (const std::string& f : input_files) {
          const std::vector<uint8_t> b = read_file(f);
          inputs.push_back(fx::exec::Value::from_tensor(
              fx::onnx::tensor_from_proto_bytes(b.data(), b.size()), f));
        }
      }
      const auto t0 = std::chrono::steady_clock::now();
      fx::exec::prepack_weights(*gm);  // the GEMM weights held once, packed
      const std::vector<fx::exec::Value> outs = fx::exec::run(*gm, inputs);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      const fx::Argument* names = gm->graph().output_node()->meta().find(fx::onnx::meta::kOutputs);
      for (size_t i = 0; i < outs.size(); ++i) {
        std::string name = "output_" + std::to_string(i);
        if (names && names->is_sequence() && i < names->elements().size())
          name = names->elements()[i].to_string();
        double sum = 0, abs_sum = 0;
        if (outs[i].dtype() == fx::Dtype::Float32 || outs[i].dtype() == fx::Dtype::Int64) {
          for (float f : outs[i].to_f32()) {
            sum += f;
            abs_sum += std::fabs(f);
          }
        }
        std::cout << name << ": " << fx::dtype_name(outs[i].dtype()) << shape_str(outs[i].shape())
                  << std::setprecision(9) << "  sum=" << sum << "  abs_sum=" << abs_sum << "\n";
        if (!save_dir.empty())
          write_file(save_dir + "/output_" + std::to_string(i) + ".pb",
                     fx::onnx::tensor_to_proto_bytes(outs[i].to_tensor(), name));
      }
      std::cout << std::fixed << std::setprecision(2) << "run: " << ms << " ms\n";
      if (profile) {
        fx::exec::RunOptions timed;
        timed.profile = true;
        std::vector<std::vector<fx::exec::OpTime>> runs;
        for (int r = 0; r < 5; ++r) runs.push_back(fx::exec::run(*gm, inputs, timed).profile);
        print_profile(runs);
      }
    }
    if (!out_path.empty()) {
      // Streamed to the file: the weights go from the tensors to disk, never via one buffer.
      // A failed export leaves no partial file behind.
      std::ofstream file(out_path, std::ios::binary);
      try {
        if (!file) throw fx::Error(fx::ErrorKind::Value, "cannot write '" + out_path + "'");
        fx::onnx::export_model_to(*gm,
                                  fx::onnx::ByteSink{[](size_t) {},
                                                     [&](const uint8_t* p, size_t n) {
                                                       file.write(reinterpret_cast<const char*>(p),
                                                                  static_cast<std::streamsize>(n));
                                                     }},
                                  export_options);
        file.close();
        if (!file) throw fx::Error(fx::ErrorKind::Value, "cannot write '" + out_path + "'");
      } catch (...) {
        file.close();
        std::remove(out_path.c_str());
        throw;
      }
      std::cerr << "wrote " << out_path << "\n";
    }
    if (!torch_dir.empty()) {
      // An imported ONNX model is lowered to torch targets first; what cannot be is named, and
      // nothing is written then (nor when to_folder refuses the graph).
      const std::vector<fx::torch_codegen::PackageFile> files =
          fx::torch_codegen::torch_package(*gm, torch_class);
      std::error_code ec;
      std::filesystem::create_directories(torch_dir, ec);
      if (ec)
        throw fx::Error(fx::ErrorKind::Value, "cannot create '" + torch_dir + "': " + ec.message());
      for (const auto& f : files) write_file(torch_dir + "/" + f.name, f.bytes);
      std::cerr << "wrote " << torch_dir << "/{module.py,__init__.py,state_dict.pt} (class "
                << torch_class << ")\n";
    }
  } catch (const fx::Error& e) {
    std::cerr << "fxwasm-cli: " << e.kind_name() << ": " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {  // (sizes are checked first; this is the last resort)
    std::cerr << "fxwasm-cli: ResourceError: out of memory (lower --max-memory to fail sooner)\n";
    return 1;
  }
  return 0;
}
