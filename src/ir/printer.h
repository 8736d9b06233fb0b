// Internal: Python-style printing of Arguments into a growable text buffer, with a pluggable
// node namer (codegen renames nodes through its own namespace, like torch.fx's `_repr_fn`
// override).
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "fx/argument.h"
#include "fx/node.h"

namespace fx {

/// Appends to a std::string through a raw cursor: the hot loops of print(graph) and codegen
/// write tens of small pieces per node, and std::string::append's out-of-line capacity check
/// dominated them. The string holds the text when the Out is destroyed (or after flush()); until
/// then its size is its capacity and its tail is scratch.
class Out {
 public:
  explicit Out(std::string& s) : s_(s), pos_(s.size()) {
    s_.resize(s_.capacity());
    data_ = &s_[0];
    cap_ = s_.size();
  }
  ~Out() { flush(); }
  Out(const Out&) = delete;
  Out& operator=(const Out&) = delete;

  /// Trims the string to what was written. Nothing may be written afterwards; later calls
  /// (and the destructor's) do nothing, so the string may then be used freely.
  void flush() {
    if (done_) return;
    s_.resize(pos_);
    done_ = true;
  }

  void put(char c) {
    if (pos_ == cap_) grow(1);
    data_[pos_++] = c;
  }
  void put(const char* p, size_t n) {
    if (n > cap_ - pos_) grow(n);
    std::memcpy(data_ + pos_, p, n);
    pos_ += n;
  }
  void put(std::string_view v) { put(v.data(), v.size()); }
  void put(const std::string& v) { put(v.data(), v.size()); }
  /// A string literal: the length is a compile-time constant.
  template <size_t N>
  void put(const char (&lit)[N]) {
    put(static_cast<const char*>(lit), N - 1);
  }
  void put_int(int64_t v) {
    if (v >= 0 && v < 10) {
      put(static_cast<char>('0' + v));
      return;
    }
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    put(buf, static_cast<size_t>(r.ptr - buf));
  }
  size_t size() const { return pos_; }
  /// The text written so far starting at `from` (valid until the next write).
  std::string_view view(size_t from = 0) const {
    return std::string_view(data_ + from, pos_ - from);
  }
  /// Drops everything after `size` (size <= size()).
  void truncate(size_t size) { pos_ = size; }

 private:
  void grow(size_t n) {
    s_.resize(std::max(cap_ * 2, pos_ + n + 64));
    data_ = &s_[0];
    cap_ = s_.size();
  }
  std::string& s_;
  char* data_;
  size_t cap_;  // s_.size() while writing: the writable length
  size_t pos_;
  bool done_ = false;
};

struct ArgumentPrinter {
  /// How a Node prints; default (nullptr): its name. `ctx` is passed back to it.
  const std::string& (*name_node)(void* ctx, Node* n) = nullptr;
  void* ctx = nullptr;

  void repr(const Argument& a, Out& out) const;
  void str(const Argument& a, Out& out) const;
  void format_arg(const Argument& a, Out& out) const;
  /// format_arg of a tuple / dict given as node args / kwargs, without building them.
  void format_tuple(const std::vector<Argument>& items, Out& out) const;
  void format_kwargs(const Kwargs& kwargs, Out& out) const;

  void repr(const Argument& a, std::string& s) const {
    Out out(s);
    repr(a, out);
  }
  void str(const Argument& a, std::string& s) const {
    Out out(s);
    str(a, out);
  }
  std::string repr(const Argument& a) const {
    std::string s;
    repr(a, s);
    return s;
  }

 private:
  const std::string& node_name(Node* n) const;
};

/// Node::format_node() into a buffer, naming nodes through `printer`.
void format_node(const Node& n, UsersToken token, const ArgumentPrinter& printer, Out& out);

/// py_str_repr into a buffer.
void put_py_str_repr(std::string_view s, Out& out);
/// py_float_repr into a buffer.
void put_py_float_repr(double v, Out& out);

}  // namespace fx
