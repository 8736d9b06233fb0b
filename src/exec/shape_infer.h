// Internal to fx::exec: what shape inference knows of one value (shape_infer.cpp), and the per-op
// rules that map the inputs' facts to the outputs' (shape_rules.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "exec/sym_dim.h"
#include "fx/exec.h"

namespace fx::exec {

/// One value as inference knows it. A tensor whose rank is unknown has `ranked` false.
struct Fact {
  bool present = false;  ///< false: an omitted optional input
  bool ranked = false;
  SymShape dims;
  std::optional<Dtype> dtype;
  /// The elements, when they are known and small (constants, and what is computed from them).
  std::optional<Value> data;
  /// The elements of a 0-d or 1-d integer tensor computed from sizes (Shape -> Gather -> Concat),
  /// when `data` is not known because some are symbolic.
  std::optional<std::vector<SymDim>> sym;

  static Fact tensor(SymShape dims, std::optional<Dtype> dtype) {
    Fact f;
    f.present = f.ranked = true;
    f.dims = std::move(dims);
    f.dtype = dtype;
    return f;
  }
  static Fact unranked(std::optional<Dtype> dtype) {
    Fact f;
    f.present = true;
    f.dtype = dtype;
    return f;
  }
  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  /// The elements as sizes: `sym`, or `data` when it is an integer tensor of rank <= 1.
  std::optional<std::vector<SymDim>> values() const;
};

/// Why a rule cannot type a node; shape inference reports it as that node's gap.
struct RuleGap {
  std::string reason;
};

/// The facts of one node's outputs from its inputs (`c.inputs` is empty: read `in`), or a
/// RuleGap thrown. Returns false when the op has no rule.
bool apply_shape_rule(const std::string& op, const OpCall& c, const std::vector<Fact>& in,
                      std::vector<Fact>& out);

/// Integer tensor elements computed from sizes (Shape, Gather, Concat, Slice, arithmetic...):
/// the outputs' `sym` when an input has one. Returns false when the op or its inputs are not
/// that kind of arithmetic.
bool apply_size_arithmetic(const std::string& op, const OpCall& c, const std::vector<Fact>& in,
                           std::vector<Fact>& out);

}  // namespace fx::exec
