// Internal to fx::torch_codegen: the submodule an ONNX If, Loop or Scan lowers to
// (lower_control.cpp) and that to_folder writes as a Python class (to_folder.cpp).
#pragma once

#include <string>
#include <utility>

#include "fx/graph_module.h"

namespace fx::torch_codegen {

/// A submodule whose forward is Python control flow (an `if`, a `while` or a `for` over its
/// lowered bodies, which are its GraphModule children): readable and runnable, and a leaf for
/// torch.fx tracing (the package's `Tracer`), so the rest of the module stays traceable.
class ControlFlowModule : public Module {
 public:
  /// `kind`: "If", "Loop" or "Scan" (the Python class name starts with it); `forward` the
  /// source of `def forward(self, ...)`, unindented.
  ControlFlowModule(std::string kind, std::string forward)
      : Module(kind), forward_(std::move(forward)) {}
  const std::string& forward_source() const { return forward_; }

 private:
  std::string forward_;
};

}  // namespace fx::torch_codegen
