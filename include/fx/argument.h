// fx::Argument — the value type of Node::args / kwargs / meta: what torch.fx's `Argument` holds.
// Values are immutable once built (like torch.fx's immutable_list / immutable_dict): containers
// share their storage, copying an Argument is cheap, and "mutation" builds a new value.
#pragma once

#include <complex>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "fx/error.h"

namespace fx {

class Node;

/// torch dtypes, printed as `torch.float32` etc.
// clang-format off
#define FX_DTYPES(X)             \
  X(Float32, "float32")          \
  X(Float64, "float64")          \
  X(Float16, "float16")          \
  X(BFloat16, "bfloat16")        \
  X(Int8, "int8")                \
  X(Int16, "int16")              \
  X(Int32, "int32")              \
  X(Int64, "int64")              \
  X(UInt8, "uint8")              \
  X(Bool, "bool")                \
  X(Complex32, "complex32")      \
  X(Complex64, "complex64")      \
  X(Complex128, "complex128")    \
  X(QInt8, "qint8")              \
  X(QUInt8, "quint8")            \
  X(QInt32, "qint32")            \
  X(UInt16, "uint16")            \
  X(UInt32, "uint32")            \
  X(UInt64, "uint64")            \
  X(String, "string")
// clang-format on

enum class Dtype : uint8_t {
#define FX_DTYPE_ENUM(name, str) name,
  FX_DTYPES(FX_DTYPE_ENUM)
#undef FX_DTYPE_ENUM
};
/// "float32" for Dtype::Float32.
const char* dtype_name(Dtype d);
/// Parses "float32" or "torch.float32"; also the torch aliases "float", "double", "half",
/// "long", "int", "short". Throws fx::Error(Value) naming the string otherwise.
Dtype dtype_from_name(const std::string& name);
/// Size in bytes of one element (0 for String).
size_t dtype_size(Dtype d);

// clang-format off
#define FX_MEMORY_FORMATS(X)               \
  X(Contiguous, "contiguous_format")       \
  X(ChannelsLast, "channels_last")         \
  X(ChannelsLast3d, "channels_last_3d")    \
  X(Preserve, "preserve_format")
// clang-format on
enum class MemoryFormat : uint8_t {
#define FX_MF_ENUM(name, str) name,
  FX_MEMORY_FORMATS(FX_MF_ENUM)
#undef FX_MF_ENUM
};
const char* memory_format_name(MemoryFormat m);

// clang-format off
#define FX_LAYOUTS(X)           \
  X(Strided, "strided")         \
  X(SparseCoo, "sparse_coo")    \
  X(SparseCsr, "sparse_csr")
// clang-format on
enum class Layout : uint8_t {
#define FX_LAYOUT_ENUM(name, str) name,
  FX_LAYOUTS(FX_LAYOUT_ENUM)
#undef FX_LAYOUT_ENUM
};
const char* layout_name(Layout l);

/// torch.device: `str()` is "cpu" / "cuda:0", `repr()` is "device(type='cpu')".
struct Device {
  std::string type = "cpu";
  int index = -1;  ///< -1: no index
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
};

class Argument;
/// An insertion-ordered dictionary (Python dict semantics): kwargs, meta, dict arguments.
/// Assigning an existing key keeps its position; a new key is appended.
template <class K>
class OrderedDict {
 public:
  using value_type = std::pair<K, Argument>;
  OrderedDict() = default;
  OrderedDict(std::initializer_list<value_type> items);
  explicit OrderedDict(std::vector<value_type> items);

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  bool contains(const K& key) const { return find(key) != nullptr; }
  /// The value for `key`; throws fx::Error(Key) naming the key if absent.
  const Argument& at(const K& key) const;
  /// Pointer to the value, or nullptr.
  const Argument* find(const K& key) const;
  void set(const K& key, Argument value);
  /// Removes `key`; returns whether it was present.
  bool erase(const K& key);
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }
  const std::vector<value_type>& items() const { return items_; }
  bool operator==(const OrderedDict& o) const { return items_ == o.items_; }

 private:
  std::vector<value_type> items_;
};

/// Keyword arguments and node meta: string keys.
using Kwargs = OrderedDict<std::string>;

/// The argument value. Kinds mirror what torch.fx accepts in args/kwargs.
class Argument {
 public:
  enum class Kind : uint8_t {
    None,
    Bool,
    Int,
    Float,
    Complex,
    String,
    Node,
    Tuple,
    List,
    Dict,
    Slice,
    Ellipsis,
    Dtype,
    Device,
    MemoryFormat,
    Layout
  };
  using Items = std::vector<Argument>;
  using DictItems = std::vector<std::pair<Argument, Argument>>;

  Argument() : kind_(Kind::None) {}                ///< None
  Argument(std::nullptr_t) : kind_(Kind::None) {}  ///< None
  Argument(bool v) : kind_(Kind::Bool), v_(v) {}
  Argument(int v) : kind_(Kind::Int), v_(int64_t{v}) {}
  Argument(long v) : kind_(Kind::Int), v_(int64_t{v}) {}
  Argument(long long v) : kind_(Kind::Int), v_(static_cast<int64_t>(v)) {}
  Argument(unsigned v) : kind_(Kind::Int), v_(int64_t{v}) {}
  Argument(double v) : kind_(Kind::Float), v_(v) {}
  Argument(std::complex<double> v) : kind_(Kind::Complex), v_(v) {}
  Argument(const char* s) : kind_(Kind::String), v_(std::make_shared<const std::string>(s)) {}
  Argument(std::string s)
      : kind_(Kind::String), v_(std::make_shared<const std::string>(std::move(s))) {}
  Argument(Node* n);
  Argument(fx::Dtype d) : kind_(Kind::Dtype), v_(d) {}
  Argument(fx::Device d)
      : kind_(Kind::Device), v_(std::make_shared<const fx::Device>(std::move(d))) {}
  Argument(fx::MemoryFormat m) : kind_(Kind::MemoryFormat), v_(m) {}
  Argument(fx::Layout l) : kind_(Kind::Layout), v_(l) {}

  static Argument tuple(Items items);
  static Argument list(Items items);
  static Argument dict(DictItems items);
  /// Python slice(start, stop, step); each part is any Argument (usually None/int/Node).
  static Argument slice(Argument start, Argument stop, Argument step = {});
  static Argument ellipsis();

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_node() const { return kind_ == Kind::Node; }
  bool is_sequence() const { return kind_ == Kind::Tuple || kind_ == Kind::List; }

  // Typed accessors: throw fx::Error(Type) naming the expected and actual kind.
  bool to_bool() const;
  int64_t to_int() const;
  double to_double() const;  ///< Float, or Int/Bool widened
  std::complex<double> to_complex() const;
  const std::string& to_string() const;
  Node* to_node() const;
  fx::Dtype to_dtype() const;
  const fx::Device& to_device() const;
  fx::MemoryFormat to_memory_format() const;
  fx::Layout to_layout() const;
  /// Elements of a Tuple, List or Slice (start, stop, step).
  const Items& elements() const;
  const DictItems& dict_items() const;

  /// Structural equality; kinds must match (1 != 1.0 != True), Nodes compare by identity,
  /// floats by value with nan == nan (so a pattern literal nan matches nan).
  bool operator==(const Argument& o) const;
  bool operator!=(const Argument& o) const { return !(*this == o); }

  /// Calls `f(Node*)` for every Node inside, depth-first in Python's map_arg order.
  template <class F>
  void for_each_node(F&& f) const;
  /// torch.fx map_arg: a copy with every Node replaced by `f(Node*) -> Argument`.
  template <class F>
  Argument map_nodes(F&& f) const;
  bool contains_node() const;

  /// Python `repr()` of the value as torch.fx codegen prints it (`'msg'`, `slice(None, 2, None)`,
  /// `device(type='cpu')`, `torch.float16`, `(1+2j)`, `inf`). Nodes print their name.
  std::string repr() const;
  /// Python `str()` of the value (strings unquoted at top level, `cpu` for devices).
  std::string str() const;
  /// torch.fx `_format_arg` as used by `print(graph)`: `%name` for nodes, unquoted dict keys.
  std::string format_arg() const;

  static const char* kind_name(Kind k);

 private:
  friend struct ArgumentPrinter;
  using Storage =
      std::variant<std::monostate, bool, int64_t, double, std::complex<double>,
                   std::shared_ptr<const std::string>, Node*, std::shared_ptr<const Items>,
                   std::shared_ptr<const DictItems>, fx::Dtype, std::shared_ptr<const fx::Device>,
                   fx::MemoryFormat, fx::Layout>;
  Argument(Kind k, Storage v) : kind_(k), v_(std::move(v)) {}
  [[noreturn]] void type_error(const char* expected) const;
  template <class F>
  void for_each_node_impl(F& f) const;

  Kind kind_;
  Storage v_;
};

/// A dtype as meta holds it: a Dtype, or a String naming one ("float32", "torch.float32"), which
/// is how the JS API writes meta dtypes (tensors and meta share the one spelling there); nullptr
/// for anything else. Readers of meta types (tensor_meta, onnx_type...) use this.
const Dtype* meta_dtype(const Argument& a);

/// Python `repr()` of a double ("1.0", "1e-05", "inf", "nan", "-0.0").
std::string py_float_repr(double v);
/// Python `repr()` of a str: single quotes unless the text holds ' and no ".
std::string py_str_repr(const std::string& s);
/// Python `str.isidentifier()` for ASCII text (non-ASCII letters count as identifier chars).
bool py_is_identifier(std::string_view s);

// ---- template implementations ----

template <class F>
void Argument::for_each_node_impl(F& f) const {
  switch (kind_) {
    case Kind::Node:
      f(std::get<Node*>(v_));
      return;
    case Kind::Tuple:
    case Kind::List:
    case Kind::Slice:
      for (const Argument& a : *std::get<std::shared_ptr<const Items>>(v_)) a.for_each_node_impl(f);
      return;
    case Kind::Dict:
      for (const auto& kv : *std::get<std::shared_ptr<const DictItems>>(v_))
        kv.second.for_each_node_impl(f);
      return;
    default:
      return;
  }
}

template <class F>
void Argument::for_each_node(F&& f) const {
  for_each_node_impl(f);
}

template <class F>
Argument Argument::map_nodes(F&& f) const {
  switch (kind_) {
    case Kind::Node:
      return f(std::get<Node*>(v_));
    case Kind::Tuple:
    case Kind::List:
    case Kind::Slice: {
      const Items& src = *std::get<std::shared_ptr<const Items>>(v_);
      Items out;
      out.reserve(src.size());
      for (const Argument& a : src) out.push_back(a.map_nodes(f));
      return Argument(kind_, std::make_shared<const Items>(std::move(out)));
    }
    case Kind::Dict: {
      const DictItems& src = *std::get<std::shared_ptr<const DictItems>>(v_);
      DictItems out;
      out.reserve(src.size());
      for (const auto& kv : src) out.emplace_back(kv.first, kv.second.map_nodes(f));
      return Argument(kind_, std::make_shared<const DictItems>(std::move(out)));
    }
    default:
      return *this;
  }
}

template <class K>
OrderedDict<K>::OrderedDict(std::initializer_list<value_type> items) {
  for (const auto& kv : items) set(kv.first, kv.second);
}
template <class K>
OrderedDict<K>::OrderedDict(std::vector<value_type> items) {
  for (auto& kv : items) set(kv.first, std::move(kv.second));
}
template <class K>
const Argument* OrderedDict<K>::find(const K& key) const {
  for (const auto& kv : items_)
    if (kv.first == key) return &kv.second;
  return nullptr;
}
template <class K>
const Argument& OrderedDict<K>::at(const K& key) const {
  if (const Argument* a = find(key)) return *a;
  throw Error(ErrorKind::Key, "no key '" + std::string(key) + "' in this dict");
}
template <class K>
void OrderedDict<K>::set(const K& key, Argument value) {
  for (auto& kv : items_)
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  items_.emplace_back(key, std::move(value));
}
template <class K>
bool OrderedDict<K>::erase(const K& key) {
  for (auto it = items_.begin(); it != items_.end(); ++it)
    if (it->first == key) {
      items_.erase(it);
      return true;
    }
  return false;
}

}  // namespace fx
