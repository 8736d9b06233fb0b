// wasm/bindings.cpp — every line of Embind in fxwasm lives here (STYLE §1, §4, §5).
//
// Design:
//  * Handles, not objects. Graphs and GraphModules live in registries keyed by integer ids that
//    are never reused; JS holds the ids (wasm/index.mjs wraps them in Graph / GraphModule / Node
//    classes). A node handle is (graph id, fx::Node::id()); every call re-resolves it through
//    Graph::node_by_id and rejects erased nodes and deleted graphs with StaleHandleError, so a
//    stale JS handle can never reach freed memory.
//  * No C++ exception crosses into JS. Every bound function runs inside `guarded`, which catches
//    fx::Error / std::exception and parks (kind, message, node) in a one-slot "pending error".
//    The façade checks `errPending()` after each call and throws `FxError`. (A C++ exception
//    reaching JS would be an opaque WebAssembly.Exception, and throwing emscripten::val from a
//    catch block skips __cxa_end_catch and leaks; a sentinel plus a slot is simple and
//    leak-free.)
//  * Values cross as a compact tagged text (see "Argument codec" below), parsed here without
//    recursion deeper than kMaxDepth, so 1 vs 1.0, tuple vs list, dtype, device, slice... all
//    survive the round trip exactly.
//  * No JS callbacks are called from C++: node_copy's arg_transform and
//    replace_all_uses_with's delete_user_cb are evaluated in JS first and passed in as tables.
#include <emscripten/bind.h>
#include <emscripten/val.h>
#include <malloc.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fx/exec.h"
#include "fx/exec/passes.h"
#include "fx/fx.h"
#include "fx/onnx.h"

#ifndef FXWASM_VERSION
#define FXWASM_VERSION "0.1.0"  // the build may pass -DFXWASM_VERSION="x.y.z" from package.json
#endif

using emscripten::val;

namespace {

using fx::Argument;
using fx::Error;
using fx::ErrorKind;

// Arguments nested deeper than this are rejected (no input-dependent unbounded recursion).
constexpr int kMaxDepth = 256;

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

struct PendingError {
  bool set = false;
  std::string kind, message, node;
};
PendingError g_error;

void set_error(std::string kind, std::string message, std::string node) {
  g_error.set = true;
  g_error.kind = std::move(kind);
  g_error.message = std::move(message);
  g_error.node = std::move(node);
}

template <class R>
R failed_value() {
  if constexpr (std::is_same_v<R, val>) {
    return val::undefined();
  } else {
    return R{};
  }
}

/// Runs `f`; on any exception records it as the pending error and returns a default value.
template <class F>
auto guarded(F&& f) -> decltype(f()) {
  using R = decltype(f());
  g_error.set = false;
  try {
    return f();
  } catch (const Error& e) {
    set_error(e.kind_name(), e.what(), e.node());
  } catch (const std::bad_alloc&) {
    set_error("RuntimeError", "out of memory (the wasm heap could not grow)", {});
  } catch (const std::exception& e) {
    set_error("InternalError", std::string("internal error: ") + e.what(), {});
  } catch (...) {
    set_error("InternalError", "internal error: unknown C++ exception", {});
  }
  if constexpr (!std::is_void_v<R>) return failed_value<R>();
}

bool err_pending() { return g_error.set; }

/// {kind, message, node} of the pending error (and clears it), or null.
val take_error() {
  if (!g_error.set) return val::null();
  val e = val::object();
  e.set("kind", g_error.kind);
  e.set("message", g_error.message);
  e.set("node", g_error.node.empty() ? val::undefined() : val(g_error.node));
  g_error = PendingError{};
  return e;
}

// ---------------------------------------------------------------------------------------------
// Registries
// ---------------------------------------------------------------------------------------------

struct GuardSlot {
  std::unique_ptr<fx::Graph::InsertGuard> guard;
  fx::Node* prev_anchor;  // our mirror of the anchor the guard restores
};

struct GraphEntry {
  fx::Graph* graph = nullptr;
  std::unique_ptr<fx::Graph> owned;  // null once a GraphModule owns the graph
  uint32_t gm = 0;                   // owning GraphModule id, or 0
  // Mirror of the graph's insert anchor (nullptr: the root), so creating a node next to an
  // anchor that has since been erased is reported instead of corrupting the node list.
  fx::Node* anchor = nullptr;
  uint32_t next_guard = 1;
  std::map<uint32_t, GuardSlot> guards;  // destroyed before `owned` (declared after it)
};

struct GmEntry {
  std::unique_ptr<fx::GraphModule> gm;
  uint32_t gid = 0;
};

std::unordered_map<uint32_t, std::unique_ptr<GraphEntry>> g_graphs;
std::unordered_map<const fx::Graph*, uint32_t> g_graph_ids;
std::unordered_map<uint32_t, GmEntry> g_gms;
uint32_t g_next_id = 1;  // shared by graphs and graph modules; never reused

uint32_t to_id(double x) {
  if (!(x >= 1 && x <= 4294967295.0) || x != std::floor(x)) return 0;
  return static_cast<uint32_t>(x);
}

GraphEntry& graph_entry(double gid) {
  auto it = g_graphs.find(to_id(gid));
  if (it == g_graphs.end())
    throw Error(ErrorKind::StaleHandle,
                "this Graph has been deleted (or its GraphModule was); its nodes and insert "
                "points can no longer be used");
  return *it->second;
}

fx::Node* node_in(const GraphEntry& e, double nid) {
  fx::Node* n = nullptr;
  if (nid >= 1 && nid <= 9007199254740991.0 && nid == std::floor(nid))
    n = e.graph->node_by_id(static_cast<uint64_t>(nid));
  if (!n || n->op() == fx::Opcode::Root)
    throw Error(
        ErrorKind::StaleHandle,
        "no node with id " + std::to_string(static_cast<long long>(nid)) + " in this Graph");
  if (n->erased())
    throw Error(ErrorKind::StaleHandle,
                "Node '" + n->name() + "' was erased from its Graph; this handle is stale",
                n->name());
  return n;
}

fx::Node* node_at(double gid, double nid) { return node_in(graph_entry(gid), nid); }

uint32_t gid_of(const fx::Graph* g) {
  auto it = g_graph_ids.find(g);
  return it == g_graph_ids.end() ? 0 : it->second;
}

GmEntry& gm_entry(double id) {
  auto it = g_gms.find(to_id(id));
  if (it == g_gms.end()) throw Error(ErrorKind::StaleHandle, "this GraphModule has been deleted");
  return it->second;
}

uint32_t register_graph(std::unique_ptr<fx::Graph> g) {
  auto e = std::make_unique<GraphEntry>();
  e->graph = g.get();
  e->owned = std::move(g);
  const uint32_t id = g_next_id++;
  g_graph_ids[e->graph] = id;
  g_graphs[id] = std::move(e);
  return id;
}

void drop_graph_entry(uint32_t gid) {
  auto it = g_graphs.find(gid);
  if (it == g_graphs.end()) return;
  GraphEntry& e = *it->second;
  for (auto& kv : e.guards) kv.second.guard->keep();  // nothing to restore into a dying graph
  e.guards.clear();
  g_graph_ids.erase(e.graph);
  g_graphs.erase(it);  // frees the graph if the entry owns it
}

/// Throws if the current insert point is a node that has since been erased.
void check_insert_point(const GraphEntry& e) {
  if (e.anchor && e.anchor->erased())
    throw Error(ErrorKind::StaleHandle,
                "the insert point is next to Node '" + e.anchor->name() +
                    "', which was erased; restore() the InsertPoint or choose a new one",
                e.anchor->name());
}

// ---------------------------------------------------------------------------------------------
// Argument codec
//
// A value is one token; tokens are self-delimiting and written back to back:
//   N  None            T / F  True / False        E  Ellipsis
//   i<int64>;          d<float>;   (strtod / JS Number syntax: 1.5, -0, 1e-7, Infinity, NaN)
//   C<re>;<im>;        complex
//   s"json string"     str
//   ( ... )  tuple     [ ... ]  list      { k v k v ... }  dict (any key kind)
//   S<start><stop><step>  slice          D"float32"  dtype       L"strided"  layout
//   V"cuda"<index: i..; or N>  device    M"channels_last"  memory format
//   #<graph id>:<node id>;  a Node
// ---------------------------------------------------------------------------------------------

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
                                      std::to_string(i_) + " (a bug in wasm/index.mjs)");
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

void encode(const Argument& a, std::string& out, int depth = 0) {
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

// Id lists go back as a Float64Array view over this buffer; the façade copies it at once.
std::vector<double> g_ids;

val id_view(const std::vector<fx::Node*>& nodes) {
  g_ids.clear();
  g_ids.reserve(nodes.size());
  for (fx::Node* n : nodes) g_ids.push_back(static_cast<double>(n->id()));
  return val(emscripten::typed_memory_view(g_ids.size(), g_ids.data()));
}

std::optional<std::string> opt_string(const val& v, const char* what) {
  if (v.isNull() || v.isUndefined()) return std::nullopt;
  if (!v.isString()) throw Error(ErrorKind::Type, std::string(what) + " must be a string");
  return v.as<std::string>();
}

val opt_to_val(const std::optional<std::string>& s) { return s ? val(*s) : val::null(); }

// Node ids are >= 1 (0 is the graph's sentinel root), so functions returning a node id return
// 0 exactly when they failed: the façade skips the errPending() call on success.
double node_result(fx::Node* n) { return static_cast<double>(n->id()); }

// ---------------------------------------------------------------------------------------------
// Graph
// ---------------------------------------------------------------------------------------------

double graph_new() {
  return guarded([] { return static_cast<double>(register_graph(std::make_unique<fx::Graph>())); });
}

/// Frees a graph the caller owns. A graph owned by a GraphModule is left alone (returns false).
bool graph_delete(double gid) {
  return guarded([&] {
    auto it = g_graphs.find(to_id(gid));
    if (it == g_graphs.end() || !it->second->owned) return false;
    drop_graph_entry(it->first);
    return true;
  });
}

bool graph_alive(double gid) { return g_graphs.count(to_id(gid)) != 0; }

double graph_owner(double gid) {
  return guarded([&] { return static_cast<double>(graph_entry(gid).gm); });
}

double graph_size(double gid) {
  return guarded([&] { return static_cast<double>(graph_entry(gid).graph->size()); });
}

val graph_nodes(double gid) {
  return guarded([&] { return id_view(graph_entry(gid).graph->nodes().to_vector()); });
}

double graph_placeholder(double gid, std::string name, val type, std::string default_enc,
                         bool has_default) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    check_insert_point(e);
    std::optional<Argument> def;
    if (has_default) def = decode(default_enc, e.graph, "placeholder defaultValue");
    return node_result(e.graph->placeholder(name, opt_string(type, "type"), std::move(def)));
  });
}

double graph_get_attr(double gid, std::string qualified_name, val type) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    check_insert_point(e);
    return node_result(e.graph->get_attr(qualified_name, opt_string(type, "type")));
  });
}

// One per call opcode, so the hot path passes no opcode string.
template <fx::Opcode Op>
double graph_call(double gid, std::string target, std::string args_enc, std::string kwargs_enc,
                  val type) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    check_insert_point(e);
    const char* what = fx::opcode_name(Op);
    std::vector<Argument> args = decode_args(args_enc, e.graph, what);
    fx::Kwargs kwargs = decode_kwargs(kwargs_enc, e.graph, what);
    std::optional<std::string> t = opt_string(type, "type");
    fx::Node* n = nullptr;
    if constexpr (Op == fx::Opcode::CallFunction) {
      n = e.graph->call_function(fx::fn(target), std::move(args), std::move(kwargs), t);
    } else if constexpr (Op == fx::Opcode::CallMethod) {
      n = e.graph->call_method(target, std::move(args), std::move(kwargs), t);
    } else {
      static_assert(Op == fx::Opcode::CallModule, "call opcodes only");
      n = e.graph->call_module(target, std::move(args), std::move(kwargs), t);
    }
    return node_result(n);
  });
}

double graph_output(double gid, std::string result_enc, val type) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    check_insert_point(e);
    Argument result = decode(result_enc, e.graph, "output");
    return node_result(e.graph->output(std::move(result), opt_string(type, "type")));
  });
}

double graph_create_node(double gid, std::string op, std::string target, std::string args_enc,
                         std::string kwargs_enc, val name, val type) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    check_insert_point(e);
    fx::Opcode opcode = fx::opcode_from_name(op);
    std::vector<Argument> args = decode_args(args_enc, e.graph, "create_node");
    fx::Kwargs kwargs = decode_kwargs(kwargs_enc, e.graph, "create_node");
    fx::Target t =
        opcode == fx::Opcode::CallFunction ? fx::Target(fx::fn(target)) : fx::Target(target);
    return node_result(e.graph->create_node(opcode, std::move(t), std::move(args),
                                            std::move(kwargs), opt_string(name, "name"),
                                            opt_string(type, "type")));
  });
}

void graph_erase_node(double gid, double nid) {
  guarded([&] {
    GraphEntry& e = graph_entry(gid);
    e.graph->erase_node(node_in(e, nid));
  });
}

double graph_inserting(double gid, double nid, bool after) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    fx::Node* n = nid < 0 ? nullptr : node_in(e, nid);
    auto guard = std::make_unique<fx::Graph::InsertGuard>(after ? e.graph->inserting_after(n)
                                                                : e.graph->inserting_before(n));
    const uint32_t id = e.next_guard++;
    e.guards[id] = GuardSlot{std::move(guard), e.anchor};
    e.anchor = n;
    return static_cast<double>(id);
  });
}

/// Restores the insert point that was current when guard `id` was made. Idempotent.
void graph_restore_insert(double gid, double id) {
  guarded([&] {
    auto it = g_graphs.find(to_id(gid));
    if (it == g_graphs.end()) return;  // the graph is gone: nothing to restore
    GraphEntry& e = *it->second;
    auto g = e.guards.find(to_id(id));
    if (g == e.guards.end()) return;
    e.anchor = g->second.prev_anchor;
    e.guards.erase(g);  // ~InsertGuard restores the graph's insert point
  });
}

/// Makes guard `id`'s insert point permanent (drops the guard without restoring).
void graph_keep_insert(double gid, double id) {
  guarded([&] {
    auto it = g_graphs.find(to_id(gid));
    if (it == g_graphs.end()) return;
    auto g = it->second->guards.find(to_id(id));
    if (g == it->second->guards.end()) return;
    g->second.guard->keep();
    it->second->guards.erase(g);
  });
}

// `map_enc`: "" for identity, else a list of (source node id, value) pairs computed in JS.
double graph_node_copy(double gid, double src_gid, double src_nid, std::string map_enc) {
  return guarded([&] {
    GraphEntry& dst = graph_entry(gid);
    GraphEntry& src = graph_entry(src_gid);
    fx::Node* n = node_in(src, src_nid);
    check_insert_point(dst);
    if (map_enc.empty()) {
      if (src.graph != dst.graph && !n->all_input_nodes().empty())
        throw Error(ErrorKind::Graph,
                    "node_copy: Node '" + n->name() + "' comes from another Graph and uses '" +
                        n->all_input_nodes().front()->name() +
                        "'; pass an argTransform that maps its inputs into this Graph",
                    n->name());
      return node_result(dst.graph->node_copy(n));
    }
    Argument table = decode(map_enc, dst.graph, "node_copy argTransform");
    std::unordered_map<uint64_t, Argument> mapping;
    for (const Argument& pair : table.elements())
      mapping[static_cast<uint64_t>(pair.elements()[0].to_int())] = pair.elements()[1];
    auto transform = [&](fx::Node* in) -> Argument {
      auto it = mapping.find(in->id());
      if (it == mapping.end() || &in->graph() != src.graph)
        throw Error(ErrorKind::Key,
                    "node_copy: argTransform gave no value for input '" + in->name() + "'",
                    in->name());
      return it->second;
    };
    return node_result(dst.graph->node_copy(n, transform));
  });
}

// `map_enc`: list of (source node id, value) pre-seeding val_map. Returns the encoded tuple
// (mapped output or None, [(source node id, value) for every mapped node in source order]).
std::string graph_graph_copy(double gid, double src_gid, std::string map_enc) {
  return guarded([&] {
    GraphEntry& dst = graph_entry(gid);
    GraphEntry& src = graph_entry(src_gid);
    if (dst.graph == src.graph)
      throw Error(ErrorKind::Value, "graph_copy: cannot copy a Graph into itself; clone() it");
    check_insert_point(dst);
    fx::ValueMap vm;
    Argument table = decode(map_enc, dst.graph, "graph_copy valMap");
    for (const Argument& pair : table.elements())
      vm[node_in(src, static_cast<double>(pair.elements()[0].to_int()))] = pair.elements()[1];
    std::optional<Argument> out = dst.graph->graph_copy(*src.graph, vm);
    std::string s = "(";
    if (out)
      encode(*out, s);
    else
      s += 'N';
    s += '[';
    for (fx::Node* n : src.graph->nodes()) {
      auto it = vm.find(n);
      if (it == vm.end()) continue;
      s += "(i" + std::to_string(n->id()) + ';';
      encode(it->second, s);
      s += ')';
    }
    return s + "])";
  });
}

double graph_clone(double gid) {
  return guarded([&] {
    std::unique_ptr<fx::Graph> g = graph_entry(gid).graph->clone();
    return static_cast<double>(register_graph(std::move(g)));
  });
}

std::string graph_str(double gid, bool num_users) {
  return guarded([&] {
    return graph_entry(gid).graph->str(num_users ? fx::UsersToken::NumUsers : fx::UsersToken::Hash);
  });
}

std::string graph_tabular(double gid) {
  return guarded([&] { return graph_entry(gid).graph->tabular(); });
}

val python_code_to_val(const fx::PythonCode& pc) {
  val globals = val::object();
  for (const auto& kv : pc.globals) globals.set(kv.first, kv.second);
  val out = val::object();
  out.set("src", pc.src);
  out.set("globals", globals);
  return out;
}

val graph_python_code(double gid, std::string root_module, bool verbose, bool torch113_bugs) {
  return guarded([&] {
    fx::CodegenOptions opts;
    opts.verbose = verbose;
    opts.torch113_bugs = torch113_bugs;
    return python_code_to_val(graph_entry(gid).graph->python_code(root_module, opts));
  });
}

void graph_lint(double gid) {
  guarded([&] { graph_entry(gid).graph->lint(); });
}

bool graph_eliminate_dead_code(double gid) {
  return guarded([&] { return graph_entry(gid).graph->eliminate_dead_code(); });
}

double graph_find_node(double gid, std::string name) {
  return guarded([&] {
    fx::Node* n = graph_entry(gid).graph->find_node(name);
    return n ? node_result(n) : -1.0;
  });
}

double graph_output_node(double gid) {
  return guarded([&] {
    fx::Node* n = graph_entry(gid).graph->output_node();
    return n ? node_result(n) : -1.0;
  });
}

// ---------------------------------------------------------------------------------------------
// Node
// ---------------------------------------------------------------------------------------------

std::string node_name(double gid, double nid) {
  return guarded([&] { return node_at(gid, nid)->name(); });
}

/// Erased-ness without throwing for erased nodes (still throws for a deleted graph).
bool node_erased(double gid, double nid) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    fx::Node* n = nid >= 1 ? e.graph->node_by_id(static_cast<uint64_t>(nid)) : nullptr;
    if (!n) throw Error(ErrorKind::StaleHandle, "no node with this id in this Graph");
    return n->erased();
  });
}

std::string node_op(double gid, double nid) {
  return guarded([&] { return std::string(fx::opcode_name(node_at(gid, nid)->op())); });
}

std::string node_target(double gid, double nid) {
  return guarded([&] { return node_at(gid, nid)->target().pretty(); });
}

val node_type(double gid, double nid) {
  return guarded([&] { return opt_to_val(node_at(gid, nid)->type()); });
}

void node_set_type(double gid, double nid, val type) {
  guarded([&] { node_at(gid, nid)->set_type(opt_string(type, "type")); });
}

std::string node_args(double gid, double nid) {
  return guarded([&] { return encode_items(node_at(gid, nid)->args()); });
}

std::string node_kwargs(double gid, double nid) {
  return guarded([&] { return encode_kwargs(node_at(gid, nid)->kwargs()); });
}

val node_users(double gid, double nid) {
  return guarded([&] { return id_view(node_at(gid, nid)->users().list()); });
}

val node_all_input_nodes(double gid, double nid) {
  return guarded([&] { return id_view(node_at(gid, nid)->all_input_nodes()); });
}

double node_next(double gid, double nid) {
  return guarded([&] {
    fx::Node* n = node_at(gid, nid)->next();
    return n->op() == fx::Opcode::Root ? -1.0 : node_result(n);
  });
}

double node_prev(double gid, double nid) {
  return guarded([&] {
    fx::Node* n = node_at(gid, nid)->prev();
    return n->op() == fx::Opcode::Root ? -1.0 : node_result(n);
  });
}

void node_prepend(double gid, double nid, double xid) {
  guarded([&] {
    GraphEntry& e = graph_entry(gid);
    node_in(e, nid)->prepend(node_in(e, xid));
  });
}

void node_append(double gid, double nid, double xid) {
  guarded([&] {
    GraphEntry& e = graph_entry(gid);
    node_in(e, nid)->append(node_in(e, xid));
  });
}

// `keep_enc`: "" (no callback) or a list of ids of the users the JS callback accepted.
val node_replace_all_uses_with(double gid, double nid, double with_id, std::string keep_enc) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    fx::Node* n = node_in(e, nid);
    fx::Node* with = node_in(e, with_id);
    std::function<bool(fx::Node*)> cb;
    std::unordered_set<uint64_t> keep;
    if (!keep_enc.empty()) {
      const Argument ids = decode(keep_enc, nullptr, "replace_all_uses_with");
      for (const Argument& a : ids.elements()) keep.insert(static_cast<uint64_t>(a.to_int()));
      cb = [&keep](fx::Node* u) { return keep.count(u->id()) != 0; };
    }
    return id_view(n->replace_all_uses_with(with, cb));
  });
}

void node_replace_input_with(double gid, double nid, double old_id, double new_id) {
  guarded([&] {
    GraphEntry& e = graph_entry(gid);
    fx::Node* n = node_in(e, nid);
    fx::Node* old_input = node_in(e, old_id);
    n->replace_input_with(old_input, node_in(e, new_id));
  });
}

void node_update_arg(double gid, double nid, double idx, std::string value_enc) {
  guarded([&] {
    GraphEntry& e = graph_entry(gid);
    fx::Node* n = node_in(e, nid);
    Argument v = decode(value_enc, e.graph, "update_arg");
    if (!(idx >= 0) || idx != std::floor(idx))
      throw Error(ErrorKind::Index, "update_arg: index must be a non-negative integer", n->name());
    n->update_arg(static_cast<size_t>(idx), std::move(v));
  });
}

void node_update_kwarg(double gid, double nid, std::string key, std::string value_enc) {
  guarded([&] {
    GraphEntry& e = graph_entry(gid);
    fx::Node* n = node_in(e, nid);
    n->update_kwarg(key, decode(value_enc, e.graph, "update_kwarg"));
  });
}

void node_set_args(double gid, double nid, std::string args_enc) {
  guarded([&] {
    GraphEntry& e = graph_entry(gid);
    fx::Node* n = node_in(e, nid);
    n->set_args(decode_args(args_enc, e.graph, "args"));
  });
}

void node_set_kwargs(double gid, double nid, std::string kwargs_enc) {
  guarded([&] {
    GraphEntry& e = graph_entry(gid);
    fx::Node* n = node_in(e, nid);
    n->set_kwargs(decode_kwargs(kwargs_enc, e.graph, "kwargs"));
  });
}

/// meta[key] encoded, or null when absent.
val node_get_meta(double gid, double nid, std::string key) {
  return guarded([&] {
    const Argument* a = node_at(gid, nid)->meta().find(key);
    return a ? val(encode(*a)) : val::null();
  });
}

void node_set_meta(double gid, double nid, std::string key, std::string value_enc) {
  guarded([&] {
    fx::Node* n = node_at(gid, nid);
    // Node values would dangle once copied into another graph (node_copy copies meta).
    n->meta().set(key, decode(value_enc, nullptr, "meta"));
  });
}

bool node_delete_meta(double gid, double nid, std::string key) {
  return guarded([&] { return node_at(gid, nid)->meta().erase(key); });
}

std::string node_meta(double gid, double nid) {
  return guarded([&] { return encode_kwargs(node_at(gid, nid)->meta()); });
}

val node_stack_trace(double gid, double nid) {
  return guarded([&] { return opt_to_val(node_at(gid, nid)->stack_trace()); });
}

void node_set_stack_trace(double gid, double nid, val trace) {
  guarded([&] { node_at(gid, nid)->set_stack_trace(opt_string(trace, "stackTrace")); });
}

bool node_is_impure(double gid, double nid) {
  return guarded([&] { return node_at(gid, nid)->is_impure(); });
}

std::string node_format_node(double gid, double nid, bool num_users) {
  return guarded([&] {
    return node_at(gid, nid)->format_node(num_users ? fx::UsersToken::NumUsers
                                                    : fx::UsersToken::Hash);
  });
}

// ---------------------------------------------------------------------------------------------
// GraphModule
// ---------------------------------------------------------------------------------------------

const Argument* dict_get(const Argument& d, const char* key) {
  for (const auto& kv : d.dict_items())
    if (kv.first.kind() == Argument::Kind::String && kv.first.to_string() == key) return &kv.second;
  return nullptr;
}

void check_keys(const Argument& d, std::initializer_list<const char*> allowed,
                const std::string& where) {
  if (d.kind() != Argument::Kind::Dict) throw Error(ErrorKind::Type, where + " must be an object");
  for (const auto& kv : d.dict_items()) {
    bool ok = false;
    for (const char* k : allowed)
      if (kv.first.kind() == Argument::Kind::String && kv.first.to_string() == k) ok = true;
    if (!ok) throw Error(ErrorKind::Value, where + ": unknown field " + kv.first.repr());
  }
}

fx::Tensor build_tensor(const Argument& spec, const std::string& blob, const std::string& where) {
  check_keys(spec, {"dtype", "shape", "requiresGrad", "data"}, where);
  fx::Tensor t;
  if (const Argument* d = dict_get(spec, "dtype")) t.dtype = fx::dtype_from_name(d->to_string());
  const Argument* shape = dict_get(spec, "shape");
  if (!shape || !shape->is_sequence())
    throw Error(ErrorKind::Value, where + ": shape must be an array of non-negative integers");
  for (const Argument& s : shape->elements()) {
    int64_t v = s.to_int();
    if (v < 0) throw Error(ErrorKind::Value, where + ": negative dimension " + std::to_string(v));
    t.shape.push_back(v);
  }
  if (const Argument* rg = dict_get(spec, "requiresGrad")) t.requires_grad = rg->to_bool();
  if (const Argument* data = dict_get(spec, "data"); data && !data->is_none()) {
    const int64_t off = data->elements().at(0).to_int();
    const int64_t len = data->elements().at(1).to_int();
    if (off < 0 || len < 0 || static_cast<uint64_t>(off + len) > blob.size())
      throw Error(ErrorKind::Internal, "internal error: tensor data outside the staging buffer");
    if (static_cast<size_t>(len) != t.nbytes())
      throw Error(ErrorKind::Value, where + ": data has " + std::to_string(len) + " bytes but " +
                                        t.describe() + " needs " + std::to_string(t.nbytes()));
    t.data =
        std::make_shared<const std::vector<uint8_t>>(blob.begin() + off, blob.begin() + off + len);
  }
  return t;
}

/// Builds a module tree from its encoded description (iteratively: the depth is user input).
std::shared_ptr<fx::Module> build_module(const std::string& spec_enc, const std::string& blob) {
  Argument spec = decode(spec_enc, nullptr, "module spec");
  auto root = std::make_shared<fx::Module>();
  std::vector<std::tuple<Argument, fx::Module*, std::string>> stack{{spec, root.get(), "root"}};
  while (!stack.empty()) {
    auto [s, m, path] = stack.back();
    stack.pop_back();
    check_keys(s, {"type", "extraRepr", "impure", "modules", "parameters", "buffers"},
               "module '" + path + "'");
    if (const Argument* t = dict_get(s, "type")) m->set_type_name(t->to_string());
    if (const Argument* r = dict_get(s, "extraRepr")) m->set_extra_repr(r->to_string());
    if (const Argument* i = dict_get(s, "impure")) m->set_impure(i->to_bool());
    for (const char* field : {"parameters", "buffers"}) {
      const Argument* ts = dict_get(s, field);
      if (!ts) continue;
      if (ts->kind() != Argument::Kind::Dict)
        throw Error(ErrorKind::Type, "module '" + path + "': " + field + " must be an object");
      for (const auto& kv : ts->dict_items()) {
        const std::string& name = kv.first.to_string();
        fx::Tensor t = build_tensor(kv.second, blob, path + "." + name);
        if (field[0] == 'p')
          m->register_parameter(name, std::move(t));
        else
          m->register_buffer(name, std::move(t));
      }
    }
    if (const Argument* mods = dict_get(s, "modules")) {
      if (mods->kind() != Argument::Kind::Dict)
        throw Error(ErrorKind::Type, "module '" + path + "': modules must be an object");
      for (const auto& kv : mods->dict_items()) {
        const std::string& name = kv.first.to_string();
        auto child = std::make_shared<fx::Module>();
        m->add_module(name, child);
        stack.emplace_back(kv.second, child.get(), path + "." + name);
      }
    }
  }
  return root;
}

double gm_new(double gid, std::string spec_enc, std::string blob, std::string class_name) {
  return guarded([&] {
    GraphEntry& e = graph_entry(gid);
    if (!e.owned)
      throw Error(ErrorKind::Graph,
                  "this Graph already belongs to a GraphModule; pass graph.clone() instead");
    std::shared_ptr<fx::Module> root;
    if (!spec_enc.empty()) root = build_module(spec_enc, blob);
    // The constructor only takes the graph on success: on error the Graph stays usable in JS.
    auto gm = std::make_unique<fx::GraphModule>(root.get(), std::move(e.owned), class_name);
    const uint32_t id = g_next_id++;
    g_gms[id] = GmEntry{std::move(gm), to_id(gid)};
    e.gm = id;
    return static_cast<double>(id);
  });
}

bool gm_delete(double id) {
  return guarded([&] {
    auto it = g_gms.find(to_id(id));
    if (it == g_gms.end()) return false;
    drop_graph_entry(it->second.gid);  // guards and the id mapping go before the graph
    g_gms.erase(it);
    fx::exec::release_dead_weights();  // packed copies of its weights, unless shared
    return true;
  });
}

double gm_graph_id(double id) {
  return guarded([&] { return static_cast<double>(gm_entry(id).gid); });
}

std::string gm_code(double id) {
  return guarded([&] { return gm_entry(id).gm->code(); });
}

val gm_recompile(double id) {
  return guarded([&] { return python_code_to_val(gm_entry(id).gm->recompile()); });
}

val gm_python_code(double id) {
  return guarded([&] { return python_code_to_val(gm_entry(id).gm->python_code()); });
}

std::string gm_print_readable(double id) {
  return guarded([&] { return gm_entry(id).gm->print_readable(); });
}

std::string gm_str(double id) {
  return guarded([&] { return gm_entry(id).gm->str(); });
}

std::string gm_class_name(double id) {
  return guarded([&] { return gm_entry(id).gm->type_name(); });
}

bool gm_add_submodule(double id, std::string target, std::string spec_enc, std::string blob) {
  return guarded([&] {
    fx::GraphModule& gm = *gm_entry(id).gm;
    return gm.add_submodule(target, build_module(spec_enc, blob));
  });
}

bool gm_delete_submodule(double id, std::string target) {
  return guarded([&] { return gm_entry(id).gm->delete_submodule(target); });
}

void gm_delete_all_unused_submodules(double id) {
  guarded([&] { gm_entry(id).gm->delete_all_unused_submodules(); });
}

void gm_set_torch113_bugs(double id, bool on) {
  guarded([&] { gm_entry(id).gm->codegen_options().torch113_bugs = on; });
}

/// [(name, {type, extraRepr, impure}) ...] encoded.
std::string gm_named_modules(double id) {
  return guarded([&] {
    std::string s = "[";
    for (const auto& [name, m] : gm_entry(id).gm->named_modules()) {
      s += "(s";
      encode_string(name, s);
      s += "{s\"type\"s";
      encode_string(m->type_name(), s);
      s += "s\"extraRepr\"s";
      encode_string(m->extra_repr(), s);
      s += "s\"impure\"";
      s += m->is_impure() ? 'T' : 'F';
      s += "})";
    }
    return s + "]";
  });
}

std::string encode_tensors(const std::vector<std::pair<std::string, const fx::Tensor*>>& ts) {
  std::string s = "[";
  for (const auto& [name, t] : ts) {
    s += "(s";
    encode_string(name, s);
    s += "{s\"dtype\"s";
    encode_string(fx::dtype_name(t->dtype), s);
    s += "s\"shape\"(";
    for (int64_t d : t->shape) s += 'i' + std::to_string(d) + ';';
    s += ")s\"requiresGrad\"";
    s += t->requires_grad ? 'T' : 'F';
    s += "s\"hasData\"";
    s += t->data ? 'T' : 'F';
    s += "})";
  }
  return s + "]";
}

std::string gm_named_parameters(double id) {
  return guarded([&] { return encode_tensors(gm_entry(id).gm->named_parameters()); });
}

std::string gm_named_buffers(double id) {
  return guarded([&] { return encode_tensors(gm_entry(id).gm->named_buffers()); });
}

/// A copy of the bytes of parameter/buffer `target`, or null if it has none.
val gm_tensor_data(double id, std::string target) {
  return guarded([&] {
    const fx::Tensor* t = gm_entry(id).gm->get_tensor(target);
    if (!t) throw Error(ErrorKind::Attribute, "no parameter or buffer named '" + target + "'");
    const fx::Bytes b = t->bytes();  // loads external data through the import's reader
    if (!b) return val::null();
    val view(emscripten::typed_memory_view(b->size(), b->data()));
    return view.call<val>("slice");
  });
}

// ---------------------------------------------------------------------------------------------
// Module
// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// Execution (fx::exec), passes and the subgraph rewriter
// ---------------------------------------------------------------------------------------------

// {dtype, shape, data (a typed array)} -> Value; the bytes are copied into the wasm heap.
fx::exec::Value value_from_js(const val& v, size_t index) {
  const std::string where = "input " + std::to_string(index);
  if (v.typeOf().as<std::string>() != "object" || v.isNull())
    throw Error(ErrorKind::Type, where + ": expected {dtype, shape, data}");
  const fx::Dtype dtype = fx::dtype_from_name(v["dtype"].as<std::string>());
  std::vector<int64_t> shape;
  const val js_shape = v["shape"];
  const unsigned rank = js_shape["length"].as<unsigned>();
  for (unsigned i = 0; i < rank; ++i)
    shape.push_back(static_cast<int64_t>(js_shape[i].as<double>()));
  fx::exec::Value out = fx::exec::Value::zeros(dtype, shape);
  const val data = v["data"];
  const size_t nbytes = data["byteLength"].as<size_t>();
  if (nbytes != out.nbytes())
    throw Error(ErrorKind::Value, where + ": " + out.describe() + " needs " +
                                      std::to_string(out.nbytes()) + " bytes of data, got " +
                                      std::to_string(nbytes));
  const val bytes = val::global("Uint8Array").new_(data["buffer"], data["byteOffset"], nbytes);
  val(emscripten::typed_memory_view(nbytes, out.mutable_data<uint8_t>())).call<void>("set", bytes);
  return out;
}

std::vector<fx::exec::Value> values_from_js(const val& inputs) {
  std::vector<fx::exec::Value> out;
  const unsigned n = inputs["length"].as<unsigned>();
  for (unsigned i = 0; i < n; ++i) out.push_back(value_from_js(inputs[i], i));
  return out;
}

// Value -> {dtype, shape, bytes (a Uint8Array copy)}; the facade makes the typed array.
val value_to_js(const fx::exec::Value& v) {
  val o = val::object();
  o.set("dtype", std::string(fx::dtype_name(v.dtype())));
  val shape = val::array();
  for (int64_t d : v.shape()) shape.call<void>("push", static_cast<double>(d));
  o.set("shape", shape);
  o.set("bytes",
        val(emscripten::typed_memory_view(v.nbytes(), v.data<uint8_t>())).call<val>("slice"));
  return o;
}

val gm_run(double id, val inputs, val probe) {
  return guarded([&] {
    fx::exec::RunOptions opts;
    const unsigned np = probe["length"].as<unsigned>();
    for (unsigned i = 0; i < np; ++i) opts.probe.push_back(probe[i].as<std::string>());
    const fx::exec::RunResult r = fx::exec::run(*gm_entry(id).gm, values_from_js(inputs), opts);
    val out = val::object();
    val outputs = val::array();
    for (const auto& v : r.outputs) outputs.call<void>("push", value_to_js(v));
    val probes = val::array();
    for (const auto& [name, v] : r.probes) {
      val p = value_to_js(v);
      p.set("node", name);
      probes.call<void>("push", p);
    }
    out.set("outputs", outputs);
    out.set("probes", probes);
    return out;
  });
}

val gm_coverage(double id) {
  return guarded([&] {
    val out = val::array();
    for (const fx::exec::CoverageGap& g : fx::exec::coverage(*gm_entry(id).gm)) {
      val o = val::object();
      o.set("node", g.node);
      o.set("target", g.target);
      o.set("reason", g.reason);
      out.call<void>("push", o);
    }
    return out;
  });
}

void gm_shape_prop(double id, val inputs) {
  guarded([&] { fx::exec::shape_prop(*gm_entry(id).gm, values_from_js(inputs)); });
}

// The passes callable by name (CLI, JS pipelines).
val gm_run_passes(double id, val names, val check_inputs, double rtol, double atol,
                  double max_iterations) {
  return guarded([&] {
    fx::PassManager pm;
    const unsigned n = names["length"].as<unsigned>();
    for (unsigned i = 0; i < n; ++i) {
      const std::string name = names[i].as<std::string>();
      pm.add(name, fx::exec::pass_by_name(name));
    }
    pm.max_iterations(static_cast<int>(max_iterations));
    if (!check_inputs.isNull() && !check_inputs.isUndefined())
      pm.check_equivalence(fx::exec::equivalence_check(
          values_from_js(check_inputs), static_cast<float>(rtol), static_cast<float>(atol)));
    val out = val::array();
    for (const fx::PassReport& r : pm.run(*gm_entry(id).gm)) {
      val o = val::object();
      o.set("pass", r.pass);
      o.set("iteration", r.iteration);
      o.set("modified", r.modified);
      o.set("nodesBefore", static_cast<double>(r.nodes_before));
      o.set("nodesAfter", static_cast<double>(r.nodes_after));
      out.call<void>("push", o);
    }
    return out;
  });
}

// A graph value as [name, true] for a node, [encoded literal, false] otherwise.
val match_value_to_js(const Argument& a) {
  val pair = val::array();
  pair.call<void>("push", a.is_node() ? val(a.to_node()->name()) : val(encode(a)));
  pair.call<void>("push", a.is_node());
  return pair;
}

// `filter` (JS, or undefined): called with each InternalMatch as {anchors, nodesMap,
// placeholderNodes, returningNodes}; returns true/false, or null when a user filter threw (the
// JS facade rethrows that error; nothing is replaced).
val gm_replace_pattern(double id, double pattern_gid, double replacement_gid, val filter) {
  return guarded([&] {
    const fx::Graph& pattern = *graph_entry(pattern_gid).graph;
    const fx::Graph& replacement = *graph_entry(replacement_gid).graph;
    std::vector<fx::MatchFilter> filters;
    if (filter.typeOf().as<std::string>() == "function") {
      filters.push_back([&filter](const fx::InternalMatch& m, const fx::Graph&, const fx::Graph&) {
        val o = val::object();
        val anchors = val::array();
        for (const fx::Node* a : m.anchors) anchors.call<void>("push", a->name());
        val nodes = val::array();
        for (const auto& [pn, gv] : m.nodes_map) {
          val pair = match_value_to_js(gv);
          pair.call<void>("unshift", pn->name());
          nodes.call<void>("push", pair);
        }
        val placeholders = val::array();
        for (const Argument& a : m.placeholder_nodes)
          placeholders.call<void>("push", match_value_to_js(a));
        val returning = val::array();
        for (const fx::Node* r : m.returning_nodes) returning.call<void>("push", r->name());
        o.set("anchors", anchors);
        o.set("nodesMap", nodes);
        o.set("placeholderNodes", placeholders);
        o.set("returningNodes", returning);
        const val keep = filter(o);
        if (keep.isNull())
          throw Error(ErrorKind::Value, "replacePattern: a filter threw; nothing was replaced");
        return keep.as<bool>();
      });
    }
    const std::vector<fx::Match> matches =
        fx::replace_pattern_with_filters(*gm_entry(id).gm, pattern, replacement, filters);
    val out = val::array();
    for (const fx::Match& m : matches) {
      val o = val::object();
      o.set("anchor", m.anchor ? m.anchor->name() : std::string());
      val map = val::array();
      for (const auto& [pn, gv] : m.nodes_map) {
        val pair = val::array();
        pair.call<void>("push", pn->name());
        pair.call<void>("push", gv.is_node() ? val(gv.to_node()->name()) : val(encode(gv)));
        pair.call<void>("push", gv.is_node());
        map.call<void>("push", pair);
      }
      o.set("nodesMap", map);
      out.call<void>("push", o);
    }
    return out;
  });
}

// ---------------------------------------------------------------------------------------------
// ONNX import/export (fx::onnx)
// ---------------------------------------------------------------------------------------------

// A Uint8Array (or any ArrayBufferView) copied into a byte vector in the wasm heap.
std::vector<uint8_t> bytes_from_js(const val& data, const char* what) {
  if (data.isNull() || data.isUndefined() || data["byteLength"].isUndefined() ||
      data["buffer"].isUndefined())
    throw Error(ErrorKind::Type, std::string(what) + ": expected a Uint8Array or ArrayBuffer view");
  const size_t n = data["byteLength"].as<size_t>();
  std::vector<uint8_t> out(n);
  if (n) {
    const val bytes = val::global("Uint8Array").new_(data["buffer"], data["byteOffset"], n);
    val(emscripten::typed_memory_view(n, out.data())).call<void>("set", bytes);
  }
  return out;
}

val bytes_to_js(const std::vector<uint8_t>& b) {
  return val(emscripten::typed_memory_view(b.size(), b.data())).call<val>("slice");
}

// Registers a GraphModule made in C++ (and its graph) with the handle tables; returns
// [gm id, graph id].
val register_graph_module(std::unique_ptr<fx::GraphModule> gm) {
  auto e = std::make_unique<GraphEntry>();
  e->graph = &gm->graph();
  const uint32_t gid = g_next_id++;
  const uint32_t id = g_next_id++;
  e->gm = id;
  g_graph_ids[e->graph] = gid;
  g_graphs[gid] = std::move(e);
  g_gms[id] = GmEntry{std::move(gm), gid};
  val out = val::array();
  out.call<void>("push", static_cast<double>(id));
  out.call<void>("push", static_cast<double>(gid));
  return out;
}

// `reader`: null, or a JS function (location, offset, length) -> Uint8Array called when a
// tensor stored as external data is needed.
val load_onnx(val data, val reader) {
  return guarded([&] {
    fx::onnx::ImportOptions opts;
    if (!reader.isNull() && !reader.isUndefined()) {
      opts.external_data = [reader](const std::string& location, int64_t offset,
                                    int64_t length) -> fx::Bytes {
        val r = reader(location, static_cast<double>(offset), static_cast<double>(length));
        if (r.isNull() || r.isUndefined())
          throw Error(ErrorKind::Value, "external data '" + location + "' was not supplied");
        return std::make_shared<const std::vector<uint8_t>>(bytes_from_js(r, "external data"));
      };
    }
    // The file is streamed in from JS in 1 MB chunks (never copied whole into the heap), and
    // each initializer's parsed bytes are released once its tensor holds them.
    if (data.isNull() || data.isUndefined() || data["byteLength"].isUndefined() ||
        data["buffer"].isUndefined())
      throw Error(ErrorKind::Type, "loadONNX: expected a Uint8Array or ArrayBuffer view");
    const size_t total = data["byteLength"].as<size_t>();
    const val base = val::global("Uint8Array").new_(data["buffer"], data["byteOffset"], total);
    size_t offset = 0;
    const fx::onnx::ChunkReader read = [&](uint8_t* buffer, size_t size) -> size_t {
      const size_t n = std::min(size, total - offset);
      if (n == 0) return 0;
      val(emscripten::typed_memory_view(n, buffer))
          .call<void>("set", base.call<val>("subarray", static_cast<double>(offset),
                                            static_cast<double>(offset + n)));
      offset += n;
      return n;
    };
    std::unique_ptr<fx::GraphModule> gm = fx::onnx::import_model_stream(read, opts);
    return register_graph_module(std::move(gm));
  });
}

val gm_to_onnx(double id, bool embed_external, double default_opset) {
  return guarded([&] {
    fx::onnx::ExportOptions opts;
    opts.embed_external_data = embed_external;
    if (default_opset > 0) opts.default_opset = static_cast<int64_t>(default_opset);
    return bytes_to_js(fx::onnx::export_model(*gm_entry(id).gm, opts));
  });
}

std::string gm_meta(double id) {
  return guarded([&] { return encode_kwargs(gm_entry(id).gm->meta()); });
}

// A GraphModule that an attribute path names (If/Loop bodies of imported models).
val gm_submodule_graph_module(double id, std::string target) {
  return guarded([&] {
    auto sub = std::dynamic_pointer_cast<fx::GraphModule>(gm_entry(id).gm->get_submodule(target));
    if (!sub) throw Error(ErrorKind::Attribute, "'" + target + "' is not a GraphModule");
    // A detached copy the caller owns (the original stays in the attribute tree).
    auto copy =
        std::make_unique<fx::GraphModule>(sub.get(), sub->graph().clone(), sub->type_name());
    copy->meta() = sub->meta();
    return register_graph_module(std::move(copy));
  });
}

val tensor_from_onnx(val data) {
  return guarded([&] {
    const std::vector<uint8_t> bytes = bytes_from_js(data, "tensorFromONNX");
    std::string name;
    fx::Tensor t = fx::onnx::tensor_from_proto_bytes(bytes.data(), bytes.size(), &name);
    val o = value_to_js(fx::exec::Value::from_tensor(t, "tensor '" + name + "'"));
    o.set("name", name);
    return o;
  });
}

val tensor_to_onnx(val tensor, std::string name) {
  return guarded([&] {
    return bytes_to_js(fx::onnx::tensor_to_proto_bytes(value_from_js(tensor, 0).to_tensor(), name));
  });
}

std::string version() { return FXWASM_VERSION; }

/// Bytes currently allocated by malloc (mallinfo().uordblks): for leak tests.
double heap_used() { return static_cast<double>(mallinfo().uordblks); }

/// Live registry entries (graphs, graph modules): for leak tests.
double live_handles() { return static_cast<double>(g_graphs.size() + g_gms.size()); }

}  // namespace

EMSCRIPTEN_BINDINGS(fxwasm) {
  using emscripten::function;
  function("errPending", &err_pending);
  function("takeError", &take_error);
  function("version", &version);
  function("gmRun", &gm_run);
  function("loadOnnx", &load_onnx);
  function("gmToOnnx", &gm_to_onnx);
  function("gmMeta", &gm_meta);
  function("gmSubmoduleGraphModule", &gm_submodule_graph_module);
  function("tensorFromOnnx", &tensor_from_onnx);
  function("tensorToOnnx", &tensor_to_onnx);
  function("gmCoverage", &gm_coverage);
  function("gmShapeProp", &gm_shape_prop);
  function("gmRunPasses", &gm_run_passes);
  function("gmReplacePattern", &gm_replace_pattern);
  function("heapUsed", &heap_used);
  function("liveHandles", &live_handles);

  function("graphNew", &graph_new);
  function("graphDelete", &graph_delete);
  function("graphAlive", &graph_alive);
  function("graphOwner", &graph_owner);
  function("graphSize", &graph_size);
  function("graphNodes", &graph_nodes);
  function("graphPlaceholder", &graph_placeholder);
  function("graphGetAttr", &graph_get_attr);
  function("graphCallFunction", &graph_call<fx::Opcode::CallFunction>);
  function("graphCallMethod", &graph_call<fx::Opcode::CallMethod>);
  function("graphCallModule", &graph_call<fx::Opcode::CallModule>);
  function("graphOutput", &graph_output);
  function("graphCreateNode", &graph_create_node);
  function("graphEraseNode", &graph_erase_node);
  function("graphInserting", &graph_inserting);
  function("graphRestoreInsert", &graph_restore_insert);
  function("graphKeepInsert", &graph_keep_insert);
  function("graphNodeCopy", &graph_node_copy);
  function("graphGraphCopy", &graph_graph_copy);
  function("graphClone", &graph_clone);
  function("graphStr", &graph_str);
  function("graphTabular", &graph_tabular);
  function("graphPythonCode", &graph_python_code);
  function("graphLint", &graph_lint);
  function("graphEliminateDeadCode", &graph_eliminate_dead_code);
  function("graphFindNode", &graph_find_node);
  function("graphOutputNode", &graph_output_node);

  function("nodeName", &node_name);
  function("nodeErased", &node_erased);
  function("nodeOp", &node_op);
  function("nodeTarget", &node_target);
  function("nodeType", &node_type);
  function("nodeSetType", &node_set_type);
  function("nodeArgs", &node_args);
  function("nodeKwargs", &node_kwargs);
  function("nodeUsers", &node_users);
  function("nodeAllInputNodes", &node_all_input_nodes);
  function("nodeNext", &node_next);
  function("nodePrev", &node_prev);
  function("nodePrepend", &node_prepend);
  function("nodeAppend", &node_append);
  function("nodeReplaceAllUsesWith", &node_replace_all_uses_with);
  function("nodeReplaceInputWith", &node_replace_input_with);
  function("nodeUpdateArg", &node_update_arg);
  function("nodeUpdateKwarg", &node_update_kwarg);
  function("nodeSetArgs", &node_set_args);
  function("nodeSetKwargs", &node_set_kwargs);
  function("nodeGetMeta", &node_get_meta);
  function("nodeSetMeta", &node_set_meta);
  function("nodeDeleteMeta", &node_delete_meta);
  function("nodeMeta", &node_meta);
  function("nodeStackTrace", &node_stack_trace);
  function("nodeSetStackTrace", &node_set_stack_trace);
  function("nodeIsImpure", &node_is_impure);
  function("nodeFormatNode", &node_format_node);

  function("gmNew", &gm_new);
  function("gmDelete", &gm_delete);
  function("gmGraphId", &gm_graph_id);
  function("gmCode", &gm_code);
  function("gmRecompile", &gm_recompile);
  function("gmPythonCode", &gm_python_code);
  function("gmPrintReadable", &gm_print_readable);
  function("gmStr", &gm_str);
  function("gmClassName", &gm_class_name);
  function("gmAddSubmodule", &gm_add_submodule);
  function("gmDeleteSubmodule", &gm_delete_submodule);
  function("gmDeleteAllUnusedSubmodules", &gm_delete_all_unused_submodules);
  function("gmSetTorch113Bugs", &gm_set_torch113_bugs);
  function("gmNamedModules", &gm_named_modules);
  function("gmNamedParameters", &gm_named_parameters);
  function("gmNamedBuffers", &gm_named_buffers);
  function("gmTensorData", &gm_tensor_data);
}
