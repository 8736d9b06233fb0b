#include "exec/sym_dim.h"

#include <algorithm>
#include <iterator>

namespace fx::exec {

SymDim::SymDim(int64_t v) : known_(true) {
  if (v != 0) terms_[{}] = v;
}

SymDim SymDim::symbol(const std::string& name) {
  SymDim d;
  if (name.empty()) return d;
  d.known_ = true;
  d.terms_[{name}] = 1;
  return d;
}

std::optional<int64_t> SymDim::value() const {
  if (!known_) return std::nullopt;
  if (terms_.empty()) return 0;
  if (terms_.size() == 1 && terms_.begin()->first.empty()) return terms_.begin()->second;
  return std::nullopt;
}

void SymDim::add_term(const Monomial& m, int64_t c) {
  int64_t sum = 0;
  int64_t& slot = terms_[m];
  if (__builtin_add_overflow(slot, c, &sum)) {
    *this = unknown();
    return;
  }
  slot = sum;
  if (slot == 0) terms_.erase(m);
}

std::string SymDim::str() const {
  if (!known_) return "?";
  if (terms_.empty()) return "0";
  // Higher degree first, then by name; the constant last.
  std::vector<std::pair<Monomial, int64_t>> order(terms_.begin(), terms_.end());
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::string s;
  for (const auto& [m, c] : order) {
    int64_t coef = c;
    if (!s.empty()) {
      s += coef < 0 ? " - " : " + ";
      if (coef < 0) coef = -coef;
    } else if (coef < 0 && !m.empty()) {
      s += "-";
      coef = -coef;
    }
    std::string factors;
    for (const std::string& f : m) factors += (factors.empty() ? "" : "*") + f;
    if (m.empty())
      s += std::to_string(coef);
    else if (coef == 1)
      s += factors;
    else
      s += std::to_string(coef) + "*" + factors;
  }
  return s;
}

SymDim operator+(const SymDim& a, const SymDim& b) {
  if (!a.known_ || !b.known_) return SymDim::unknown();
  SymDim r = a;
  for (const auto& [m, c] : b.terms_) {
    r.add_term(m, c);
    if (!r.known_) break;
  }
  return r;
}

SymDim operator-(const SymDim& a, const SymDim& b) { return a + b * SymDim(-1); }

SymDim operator*(const SymDim& a, const SymDim& b) {
  if (!a.known_ || !b.known_) return SymDim::unknown();
  SymDim r(0);
  for (const auto& [ma, ca] : a.terms_)
    for (const auto& [mb, cb] : b.terms_) {
      int64_t c = 0;
      if (__builtin_mul_overflow(ca, cb, &c)) return SymDim::unknown();
      SymDim::Monomial m;
      std::merge(ma.begin(), ma.end(), mb.begin(), mb.end(), std::back_inserter(m));
      r.add_term(m, c);
      if (!r.known_) return r;
    }
  return r;
}

SymDim floordiv(const SymDim& a, const SymDim& b) {
  if (!a.known_ || !b.known_ || b.is(0)) return SymDim::unknown();
  if (a.value() && b.value()) {
    const int64_t x = *a.value(), y = *b.value();
    if (x == INT64_MIN && y == -1) return SymDim::unknown();
    int64_t q = x / y;
    if ((x % y != 0) && ((x < 0) != (y < 0))) --q;  // floor, as ONNX's integer Div of sizes
    return SymDim(q);
  }
  if (a == b) return SymDim(1);
  if (b.terms_.size() != 1) return SymDim::unknown();
  // Divide every term by b's single term, exactly.
  const auto& [mb, cb] = *b.terms_.begin();
  SymDim r(0);
  for (const auto& [ma, ca] : a.terms_) {
    if (ca % cb != 0 || !std::includes(ma.begin(), ma.end(), mb.begin(), mb.end()))
      return SymDim::unknown();
    SymDim::Monomial m;
    std::set_difference(ma.begin(), ma.end(), mb.begin(), mb.end(), std::back_inserter(m));
    r.add_term(m, ca / cb);
  }
  return r;
}

bool operator==(const SymDim& a, const SymDim& b) {
  return a.known_ && b.known_ && a.terms_ == b.terms_;
}

SymDim numel(const SymShape& s) {
  SymDim n(1);
  for (const SymDim& d : s) n = n * d;
  return n;
}

std::string to_string(const SymShape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + s[i].str();
  return r + "]";
}

}  // namespace fx::exec
