// Internal to fx::exec: what the shape rule files (shape_rules.cpp, shape_rules_nn.cpp) share.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "exec/shape_infer.h"

namespace fx::exec {

using ShapeRule = std::function<void(const OpCall&, const std::vector<Fact>&, std::vector<Fact>&)>;

/// The layer ops' rules (shape_rules_nn.cpp), added to the table.
void add_nn_shape_rules(std::unordered_map<std::string, ShapeRule>& table);

/// Throws RuleGap{reason}.
[[noreturn]] void gap(const std::string& reason);
/// Input i, or a RuleGap when it is omitted.
const Fact& need(const std::vector<Fact>& in, size_t i);
/// Input i with a known rank, or a RuleGap.
const Fact& ranked(const std::vector<Fact>& in, size_t i);
/// Whether input i is given.
bool has(const std::vector<Fact>& in, size_t i);
/// axis in [-rank, rank) as [0, rank), or a RuleGap naming `what`.
int64_t norm_axis(int64_t axis, int64_t rank, const char* what);
/// The known, constant elements of input i (axes, pads, starts...), or nullopt.
std::optional<std::vector<int64_t>> ints(const std::vector<Fact>& in, size_t i);
/// The known elements of a float input i (scales), or nullopt.
std::optional<std::vector<double>> floats(const std::vector<Fact>& in, size_t i);
/// An attribute list, or (for the opsets that moved it to an input) input i's constant elements.
std::optional<std::vector<int64_t>> attr_or_input(const OpCall& c, const char* name,
                                                  const std::vector<Fact>& in, size_t i);
/// Numpy broadcasting of two dims; a named size is taken as not 1 (as ONNX's shape inference
/// does). Known sizes that cannot broadcast are a RuleGap.
SymDim broadcast_dim(const SymDim& a, const SymDim& b);
SymShape broadcast(const std::vector<const SymShape*>& shapes);
/// Output 0 is input 0's type and shape.
void same(const OpCall&, const std::vector<Fact>& in, std::vector<Fact>& out);
/// x's shape (or unknown rank) with another element type, its elements dropped.
Fact like(const Fact& x, std::optional<Dtype> dtype);
/// The broadcast of every given input, of `dtype`.
void elementwise(const std::vector<Fact>& in, std::optional<Dtype> dtype, std::vector<Fact>& out);
/// The element type an attribute names (a TensorProto.DataType code), `fallback` when absent.
std::optional<Dtype> elem_type_attr(const OpCall& c, const char* name, Dtype fallback);
/// The element type the importer kept for a tensor attribute read as a scalar (ConstantOfShape's
/// value), or nullopt.
std::optional<Dtype> tensor_attr_dtype(const OpCall& c, const char* name);
/// Input i's element type, `fallback` when omitted.
std::optional<Dtype> dtype_of(const std::vector<Fact>& in, size_t i, std::optional<Dtype> fallback);

}  // namespace fx::exec
