// wasm/codec.cpp — the C++ half of the tagged-text value format (the JS half is
// wasm/codec.mjs; tests/js/codec.test.mjs round-trips values through both).
#include "codec.h"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "handles.h"

namespace fxwasm {

namespace {

class Decoder {
 public:
  /// `target`: the graph Node tokens must belong to (nullptr: Node tokens are rejected).
  Decoder(const std::string& s, fx::Graph* target, const char* what)
      : s_(s), target_(target), what_(what) {}

  Argument value(int depth = 0) {
    if (depth > kMaxDepth)
      throw Error(ErrorKind::Value, std::string(what_) + ": value nested deeper than " +
                                        std::to_string(kMaxDepth) + " levels");
    const char c = next();
    switch (c) {
      case 'N':
        return Argument();
      case 'T':
        return Argument(true);
      case 'F':
        return Argument(false);
      case 'E':
        return Argument::ellipsis();
      case 'i':
        return Argument(static_cast<long long>(integer()));
      case 'd':
        return Argument(number());
      case 'C': {
        double re = number();
        double im = number();
        return Argument(std::complex<double>(re, im));
      }
      case 's':
        return Argument(string());
      case '(':
      case '[': {
        const char close = c == '(' ? ')' : ']';
        Argument::Items items;
        while (peek() != close) items.push_back(value(depth + 1));
        ++i_;
        return c == '(' ? Argument::tuple(std::move(items)) : Argument::list(std::move(items));
      }
      case '{': {
        Argument::DictItems items;
        while (peek() != '}') {
          Argument k = value(depth + 1);
          if (k.kind() == Argument::Kind::List || k.kind() == Argument::Kind::Dict)
            throw Error(ErrorKind::Type, std::string(what_) + ": unhashable dict key (" +
                                             Argument::kind_name(k.kind()) + ")");
          if (k.contains_node())
            throw Error(ErrorKind::Value, std::string(what_) +
                                              ": keys for dictionaries used as an argument "
                                              "cannot contain a Node");
          Argument v = value(depth + 1);
          bool replaced = false;
          for (auto& kv : items)
            if (kv.first == k) {
              kv.second = std::move(v);
              replaced = true;
              break;
            }
          if (!replaced) items.emplace_back(std::move(k), std::move(v));
        }
        ++i_;
        return Argument::dict(std::move(items));
      }
      case 'S': {
        Argument a = value(depth + 1);
        Argument b = value(depth + 1);
        Argument st = value(depth + 1);
        return Argument::slice(std::move(a), std::move(b), std::move(st));
      }
      case 'D':
        return Argument(fx::dtype_from_name(string()));
      case 'L': {
        std::string name = string();
#define FX_LAYOUT_PARSE(e, str) \
  if (name == str) return Argument(fx::Layout::e);
        FX_LAYOUTS(FX_LAYOUT_PARSE)
#undef FX_LAYOUT_PARSE
        throw Error(ErrorKind::Value, std::string(what_) + ": unknown layout '" + name +
                                          "' (expected strided, sparse_coo or sparse_csr)");
      }
      case 'M': {
        std::string name = string();
#define FX_MF_PARSE(e, str) \
  if (name == str) return Argument(fx::MemoryFormat::e);
        FX_MEMORY_FORMATS(FX_MF_PARSE)
#undef FX_MF_PARSE
        throw Error(ErrorKind::Value,
                    std::string(what_) + ": unknown memory format '" + name +
                        "' (expected contiguous_format, channels_last, channels_last_3d or "
                        "preserve_format)");
      }
      case 'V': {
        fx::Device d;
        d.type = string();
        if (d.type.empty())
          throw Error(ErrorKind::Value, std::string(what_) + ": device type must not be empty");
        const char t = next();
        if (t == 'i') {
          int64_t idx = integer();
          if (idx < 0 || idx > 0x7fffffff)
            throw Error(ErrorKind::Value, std::string(what_) + ": device index " +
                                              std::to_string(idx) + " is out of range");
          d.index = static_cast<int>(idx);
        } else if (t != 'N') {
          malformed();
        }
        return Argument(std::move(d));
      }
      case '#':
        return node();
      default:
        malformed();
    }
  }

  void expect_end() {
    if (i_ != s_.size()) malformed();
  }
  char peek() const {
    if (i_ >= s_.size()) malformed();
    return s_[i_];
  }

 private:
  [[noreturn]] void malformed() const {
    throw Error(ErrorKind::Value, std::string(what_) + ": malformed encoded value at offset " +
                                      std::to_string(i_) + " (a bug in wasm/codec.mjs)");
  }
  char next() {
    if (i_ >= s_.size()) malformed();
    return s_[i_++];
  }
  // Text up to the next ';'.
  std::string until_semicolon() {
    size_t end = s_.find(';', i_);
    if (end == std::string::npos) malformed();
    std::string t = s_.substr(i_, end - i_);
    i_ = end + 1;
    return t;
  }
  int64_t integer() {
    std::string t = until_semicolon();
    if (t.empty()) malformed();
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(t.c_str(), &end, 10);
    if (*end != '\0') malformed();
    if (errno == ERANGE)
      throw Error(ErrorKind::Value,
                  std::string(what_) + ": integer " + t + " does not fit in 64 bits");
    return v;
  }
  double number() {
    std::string t = until_semicolon();
    if (t.empty()) malformed();
    char* end = nullptr;
    double v = std::strtod(t.c_str(), &end);
    if (*end != '\0') malformed();
    return v;
  }
  static void put_utf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  uint32_t hex4() {
    if (i_ + 4 > s_.size()) malformed();
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_++];
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= h - '0';
      else if (h >= 'a' && h <= 'f')
        v |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F')
        v |= h - 'A' + 10;
      else
        malformed();
    }
    return v;
  }
  // A JSON string literal (as written by JSON.stringify); non-ASCII arrives as raw UTF-8.
  std::string string() {
    if (next() != '"') malformed();
    std::string out;
    for (;;) {
      const char c = next();
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      const char esc = next();
      switch (esc) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && i_ + 6 <= s_.size() && s_[i_] == '\\' &&
              s_[i_ + 1] == 'u') {
            size_t save = i_;
            i_ += 2;
            uint32_t lo = hex4();
            if (lo >= 0xDC00 && lo < 0xE000) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else {
              i_ = save;
            }
          }
          put_utf8(cp, out);
          break;
        }
        default:
          malformed();
      }
    }
  }
  Argument node() {
    const uint32_t gid = static_cast<uint32_t>(integer_until(':'));
    const double nid = static_cast<double>(integer());
    if (!target_)
      throw Error(ErrorKind::Value,
                  std::string(what_) + ": Node handles are not allowed here (only plain values)");
    auto it = g_graphs.find(gid);
    if (it == g_graphs.end())
      throw Error(ErrorKind::StaleHandle,
                  std::string(what_) + ": a Node argument belongs to a Graph that was deleted");
    fx::Node* n = node_in(*it->second, nid);
    if (&n->graph() != target_)
      throw Error(ErrorKind::Graph,
                  std::string(what_) + ": Node '" + n->name() +
                      "' belongs to another Graph; copy it in with nodeCopy()/graphCopy() "
                      "(remapping its inputs) and use the copy",
                  n->name());
    return Argument(n);
  }
  int64_t integer_until(char sep) {
    size_t end = s_.find(sep, i_);
    if (end == std::string::npos || end == i_) malformed();
    std::string t = s_.substr(i_, end - i_);
    i_ = end + 1;
    char* e = nullptr;
    long long v = std::strtoll(t.c_str(), &e, 10);
    if (*e != '\0') malformed();
    return v;
  }

  const std::string& s_;
  size_t i_ = 0;
  fx::Graph* target_;
  const char* what_;
};

void encode_double(double v, std::string& out) {
  if (std::isnan(v)) {
    out += "NaN;";
  } else if (std::isinf(v)) {
    out += v > 0 ? "Infinity;" : "-Infinity;";
  } else {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g;", v);
    out += buf;
  }
}

}  // namespace

Argument decode(const std::string& s, fx::Graph* target, const char* what) {
  Decoder d(s, target, what);
  Argument a = d.value();
  d.expect_end();
  return a;
}

std::vector<Argument> decode_args(const std::string& s, fx::Graph* target, const char* what) {
  Argument a = decode(s, target, what);
  if (!a.is_sequence()) throw Error(ErrorKind::Type, std::string(what) + ": args must be a list");
  return a.elements();
}

fx::Kwargs decode_kwargs(const std::string& s, fx::Graph* target, const char* what) {
  fx::Kwargs kw;
  if (s.empty()) return kw;
  Argument a = decode(s, target, what);
  if (a.kind() != Argument::Kind::Dict)
    throw Error(ErrorKind::Type, std::string(what) + ": kwargs must be a dict");
  for (const auto& kv : a.dict_items()) {
    if (kv.first.kind() != Argument::Kind::String)
      throw Error(ErrorKind::Type, std::string(what) + ": kwargs keys must be strings");
    kw.set(kv.first.to_string(), kv.second);
  }
  return kw;
}

void encode_string(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void encode(const Argument& a, std::string& out, int depth) {
  if (depth > kMaxDepth + 2)
    throw Error(ErrorKind::Internal, "internal error: value nested too deeply to encode");
  using K = Argument::Kind;
  switch (a.kind()) {
    case K::None:
      out += 'N';
      return;
    case K::Bool:
      out += a.to_bool() ? 'T' : 'F';
      return;
    case K::Int:
      out += 'i' + std::to_string(a.to_int()) + ';';
      return;
    case K::Float:
      out += 'd';
      encode_double(a.to_double(), out);
      return;
    case K::Complex: {
      out += 'C';
      encode_double(a.to_complex().real(), out);
      encode_double(a.to_complex().imag(), out);
      return;
    }
    case K::String:
      out += 's';
      encode_string(a.to_string(), out);
      return;
    case K::Node: {
      fx::Node* n = a.to_node();
      out += '#' + std::to_string(gid_of(&n->graph())) + ':' + std::to_string(n->id()) + ';';
      return;
    }
    case K::Tuple:
    case K::List: {
      out += a.kind() == K::Tuple ? '(' : '[';
      for (const Argument& x : a.elements()) encode(x, out, depth + 1);
      out += a.kind() == K::Tuple ? ')' : ']';
      return;
    }
    case K::Dict: {
      out += '{';
      for (const auto& kv : a.dict_items()) {
        encode(kv.first, out, depth + 1);
        encode(kv.second, out, depth + 1);
      }
      out += '}';
      return;
    }
    case K::Slice: {
      out += 'S';
      for (const Argument& x : a.elements()) encode(x, out, depth + 1);
      return;
    }
    case K::Ellipsis:
      out += 'E';
      return;
    case K::Dtype:
      out += 'D';
      encode_string(fx::dtype_name(a.to_dtype()), out);
      return;
    case K::Device: {
      out += 'V';
      encode_string(a.to_device().type, out);
      if (a.to_device().index < 0)
        out += 'N';
      else
        out += 'i' + std::to_string(a.to_device().index) + ';';
      return;
    }
    case K::MemoryFormat:
      out += 'M';
      encode_string(fx::memory_format_name(a.to_memory_format()), out);
      return;
    case K::Layout:
      out += 'L';
      encode_string(fx::layout_name(a.to_layout()), out);
      return;
  }
}

std::string encode(const Argument& a) {
  std::string s;
  encode(a, s);
  return s;
}

std::string encode_items(const std::vector<Argument>& items) {
  std::string s = "[";
  for (const Argument& a : items) encode(a, s);
  return s + "]";
}

std::string encode_kwargs(const fx::Kwargs& kw) {
  std::string s = "{";
  for (const auto& kv : kw) {
    s += 's';
    encode_string(kv.first, s);
    encode(kv.second, s);
  }
  return s + "}";
}

}  // namespace fxwasm
