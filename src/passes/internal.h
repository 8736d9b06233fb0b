// Helpers shared by the module-level passes (split_module, const_fold, fuse): not public API.
#pragma once

#include <memory>
#include <string>

#include "fx/graph_module.h"

namespace fx::detail {

/// What an attribute path of a module refers to: a submodule or a tensor (parameter/buffer).
struct AttrValue {
  std::shared_ptr<Module> module;
  const Tensor* tensor = nullptr;
  bool is_parameter = false;
};

/// Looks `target` up in `m` (getattr atom by atom); throws fx::Error(Attribute) with `message`
/// naming `node` when an atom is missing.
AttrValue get_attr_value(const Module& m, const std::string& target, const std::string& node,
                         const std::string& message);

/// torch.fx.graph_module._assign_attr: installs `value` at `target` under `to`, creating empty
/// `Module`s for missing path elements.
void assign_attr(Module& to, const std::string& target, const AttrValue& value);

/// Number of '.' in a qualified name.
size_t count_dots(const std::string& s);

}  // namespace fx::detail
