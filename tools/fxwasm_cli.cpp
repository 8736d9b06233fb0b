// fxwasm-cli: the native command line. Until ONNX import lands it works on the bundled sample
// graph (torch.fx's documentation example, MyModule) and prints it the ways torch.fx does.
#include <cstring>
#include <iostream>
#include <memory>
#include <string>

#include "fx/fx.h"

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

  fx::Module root("MyModule");
  root.register_parameter("param", fx::Tensor{fx::Dtype::Float32, {3, 4}, nullptr, true});
  auto linear_mod =
      std::make_shared<fx::Module>("Linear", "in_features=4, out_features=5, bias=True");
  linear_mod->register_parameter("weight", fx::Tensor{fx::Dtype::Float32, {5, 4}, nullptr, true});
  linear_mod->register_parameter("bias", fx::Tensor{fx::Dtype::Float32, {5}, nullptr, true});
  root.add_module("linear", linear_mod);
  return std::make_unique<fx::GraphModule>(&root, std::move(g), "MyModule");
}

int usage(std::ostream& os, int code) {
  os << "usage: fxwasm-cli --sample [--print graph|tabular|code|readable|all] [--num-users]\n"
        "  Prints the bundled sample graph (torch.fx's MyModule example) as print(graph),\n"
        "  graph.print_tabular() and the generated Python code.\n"
        "  --num-users  print torch 2.x's [num_users=N] instead of [#users=N]\n";
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  bool sample = false, num_users = false;
  std::string what = "all";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--sample") {
      sample = true;
    } else if (a == "--num-users") {
      num_users = true;
    } else if (a == "--print" && i + 1 < argc) {
      what = argv[++i];
    } else if (a == "--help" || a == "-h") {
      return usage(std::cout, 0);
    } else if (a.size() > 5 && a.compare(a.size() - 5, 5, ".onnx") == 0) {
      std::cerr << "fxwasm-cli: cannot read '" << a
                << "': ONNX import is not implemented yet; use --sample\n";
      return 2;
    } else {
      std::cerr << "fxwasm-cli: unknown argument '" << a << "'\n";
      return usage(std::cerr, 2);
    }
  }
  if (!sample) return usage(std::cerr, 2);
  if (what != "all" && what != "graph" && what != "tabular" && what != "code" &&
      what != "readable") {
    std::cerr << "fxwasm-cli: --print takes graph, tabular, code, readable or all\n";
    return 2;
  }
  try {
    auto gm = sample_module();
    const fx::UsersToken token = num_users ? fx::UsersToken::NumUsers : fx::UsersToken::Hash;
    const bool all = what == "all";
    if (all) std::cout << "# print(gm.graph)\n";
    if (all || what == "graph") std::cout << gm->graph().str(token) << "\n";
    if (all) std::cout << "\n# gm.graph.print_tabular()\n";
    if (all || what == "tabular") std::cout << gm->graph().tabular() << "\n";
    if (all) std::cout << "\n# print(gm.code)";
    if (all || what == "code") std::cout << gm->code() << "\n";
    if (what == "readable") std::cout << gm->print_readable() << "\n";
  } catch (const fx::Error& e) {
    std::cerr << "fxwasm-cli: " << e.kind_name() << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
