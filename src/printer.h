// Internal: Python-style printing of Arguments with a pluggable node namer (codegen renames
// nodes through its own namespace, like torch.fx's `_repr_fn` override).
#pragma once

#include <functional>
#include <string>

#include "fx/argument.h"

namespace fx {

struct ArgumentPrinter {
  /// How a Node prints; default: its name.
  std::function<std::string(Node*)> name_node;

  void repr(const Argument& a, std::string& out) const;
  void str(const Argument& a, std::string& out) const;
  void format_arg(const Argument& a, std::string& out) const;
  /// format_arg of a tuple / dict given as node args / kwargs, without building them.
  void format_tuple(const std::vector<Argument>& items, std::string& out) const;
  void format_kwargs(const Kwargs& kwargs, std::string& out) const;
  std::string repr(const Argument& a) const {
    std::string s;
    repr(a, s);
    return s;
  }

 private:
  std::string node_name(Node* n) const;
  const ArgumentPrinter& inner() const { return *this; }
};

}  // namespace fx
