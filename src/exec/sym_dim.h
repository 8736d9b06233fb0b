// Internal to fx::exec: a tensor dimension as shape inference knows it (shape_infer.cpp). A dim is
// a polynomial with integer coefficients over named sizes ("batch", "seq"), so that the shape
// arithmetic of exported models (Shape -> Gather -> Mul -> Concat -> Reshape) keeps a dynamic
// dim symbolic: 12 * seq / 12 is seq again, batch * seq * 768 / 768 is batch * seq. Anything
// that polynomials cannot say exactly (an inexact division, a remainder, a maximum of two
// symbols) is unknown, never a guess.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fx::exec {

class SymDim {
 public:
  /// An unknown dim.
  SymDim() = default;
  /// A known size.
  SymDim(int64_t v);  // NOLINT(google-explicit-constructor): sizes read naturally as dims
  /// A named size; "" is unknown.
  static SymDim symbol(const std::string& name);

  bool known() const { return known_; }
  /// The size when it is a constant.
  std::optional<int64_t> value() const;
  bool is(int64_t v) const { return value() == v; }
  /// "batch", "2*seq + 1", "384", or "?" when unknown.
  std::string str() const;

  friend SymDim operator+(const SymDim& a, const SymDim& b);
  friend SymDim operator-(const SymDim& a, const SymDim& b);
  friend SymDim operator*(const SymDim& a, const SymDim& b);
  /// Exact floor division, else unknown (also for a zero or unknown divisor).
  friend SymDim floordiv(const SymDim& a, const SymDim& b);
  /// Equal as polynomials (two unknowns are not equal).
  friend bool operator==(const SymDim& a, const SymDim& b);
  friend bool operator!=(const SymDim& a, const SymDim& b) { return !(a == b); }

 private:
  using Monomial = std::vector<std::string>;  // sorted symbol names, repeated for powers
  bool known_ = false;
  std::map<Monomial, int64_t> terms_;  // no zero coefficients; {} is the constant term
  static SymDim unknown() { return SymDim(); }
  void add_term(const Monomial& m, int64_t c);
};

using SymShape = std::vector<SymDim>;

/// The product of dims (1 for a 0-d shape).
SymDim numel(const SymShape& s);
/// "[batch, 3, 224, 224]".
std::string to_string(const SymShape& s);

}  // namespace fx::exec
