// tests/fuzz: a Graph built from fuzz bytes, one instruction a byte (graph building from op
// sequences; the matcher target builds a graph and a pattern this way).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fx/fx.h"

namespace fxfuzz {

/// Reads bytes [p, end); every failure is an fx::Error the caller catches.
inline std::unique_ptr<fx::Graph> graph_from_bytes(const uint8_t*& p, const uint8_t* end,
                                                   size_t max_ops) {
  static const char* kOps[] = {"onnx.Relu", "onnx.Add", "onnx.Mul", "onnx.Sigmoid", "onnx.MatMul"};
  auto g = std::make_unique<fx::Graph>();
  std::vector<fx::Node*> nodes;
  auto next = [&]() -> uint8_t { return p < end ? *p++ : 0; };
  auto pick = [&]() -> fx::Node* { return nodes.empty() ? nullptr : nodes[next() % nodes.size()]; };
  nodes.push_back(g->placeholder("x"));
  for (size_t i = 0; i < max_ops && p < end; ++i) {
    const uint8_t op = next();
    try {
      switch (op % 7) {
        case 0:
          nodes.push_back(g->placeholder("p" + std::to_string(i)));
          break;
        case 1:
        case 2: {
          const char* target = kOps[next() % 5];
          const int arity =
              target == std::string("onnx.Relu") || target == std::string("onnx.Sigmoid") ? 1 : 2;
          std::vector<fx::Argument> args;
          for (int k = 0; k < arity; ++k) args.emplace_back(pick());
          nodes.push_back(g->call_function(fx::fn(target), std::move(args)));
          break;
        }
        case 3: {
          // (A Node* is invalid after erase_node: the harness forgets it; erasing a node that
          // still has users must be a typed error.)
          if (nodes.size() < 2) break;
          const size_t k = next() % nodes.size();
          g->erase_node(nodes[k]);
          nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(k));
          break;
        }
        case 4: {
          fx::Node* a = pick();
          fx::Node* b = pick();
          if (a && b && a != b) a->replace_all_uses_with(b);
          break;
        }
        case 5: {
          fx::Kwargs kw;
          kw.set("axis", static_cast<long long>(static_cast<int8_t>(next())));
          nodes.push_back(g->call_function(fx::fn("onnx.Concat"), {pick(), pick()}, std::move(kw)));
          break;
        }
        case 6:
          g->lint();
          break;
      }
    } catch (const fx::Error&) {
    }
  }
  return g;
}

}  // namespace fxfuzz
