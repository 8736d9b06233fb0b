// fx::Node — one operation of a Graph. The Graph owns all its Nodes; every `Node*` handed out is a
// non-owning reference that stays valid (even after erase_node) until the Graph is destroyed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fx/argument.h"
#include "fx/function.h"

namespace fx {

class Graph;

/// Printing options shared by Graph::str() and Node::format_node().
enum class UsersToken : uint8_t {
  Hash,     ///< `[#users=1]` (torch 1.x, the default)
  NumUsers  ///< `[num_users=1]` (torch 2.x)
};

/// The six opcodes (plus the internal sentinel). One table; `switch`es over it have no default.
// clang-format off
#define FX_OPCODES(X)                 \
  X(Placeholder, "placeholder")       \
  X(GetAttr, "get_attr")              \
  X(CallFunction, "call_function")    \
  X(CallModule, "call_module")        \
  X(CallMethod, "call_method")        \
  X(Output, "output")
// clang-format on

enum class Opcode : uint8_t {
#define FX_OPCODE_ENUM(name, str) name,
  FX_OPCODES(FX_OPCODE_ENUM)
#undef FX_OPCODE_ENUM
      Root,  ///< the sentinel that closes the node list; never visible to users
};
constexpr int kNumOpcodes = 6;
static_assert(static_cast<int>(Opcode::Root) == kNumOpcodes, "FX_OPCODES must list 6 opcodes");

/// "call_function" for Opcode::CallFunction.
const char* opcode_name(Opcode op);
/// Parses an opcode name; throws fx::Error(Value) naming it and listing the valid ones.
Opcode opcode_from_name(const std::string& name);

/// What a node calls: a Function for call_function, a string (qualified attribute/module path,
/// method name, placeholder name, or "output") for the other opcodes.
class Target {
 public:
  Target(const char* s) : str_(s) {}
  Target(std::string s) : str_(std::move(s)) {}
  Target(Function f) : fn_(f) {}
  bool is_function() const { return fn_.has_value(); }
  /// The string target; throws fx::Error(Type) for a function target.
  const std::string& str() const;
  /// The function target; throws fx::Error(Type) for a string target.
  Function function() const;
  /// torch.fx `_pretty_print_target`: `operator.add`, `builtins.getattr`, or the string.
  const std::string& pretty() const;
  /// Python str() of the target as print_tabular shows it (`<built-in function add>`).
  std::string py_str() const;
  bool operator==(const Target& o) const { return fn_ == o.fn_ && str_ == o.str_; }

 private:
  std::optional<Function> fn_;
  std::string str_;
};

/// An insertion-ordered set of the nodes that use a node (torch.fx's `users` dict).
class UserSet {
 public:
  size_t size() const { return items_.size() - tombstones_; }
  bool empty() const { return size() == 0; }
  bool contains(const Node* n) const;
  /// The users in insertion order.
  const std::vector<Node*>& list() const;
  auto begin() const { return list().begin(); }
  auto end() const { return list().end(); }

 private:
  friend class Node;
  void insert(Node* n);  // no-op if present
  void erase(Node* n);
  size_t index_of(const Node* n) const;  // npos if absent
  void compact() const;
  mutable std::vector<Node*> items_;  // nullptr marks a removed entry until compaction
  mutable size_t tombstones_ = 0;
  mutable std::unique_ptr<std::unordered_map<const Node*, size_t>> index_;  // for large sets
};

/// A node of the FX graph. Create nodes through Graph (placeholder, call_function, ...).
class Node {
 public:
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  Graph& graph() const { return *graph_; }
  const std::string& name() const { return name_; }
  Opcode op() const { return op_; }
  const Target& target() const { return target_; }
  /// Monotonically increasing per graph, in creation order; use it to order or hash nodes.
  uint64_t id() const { return id_; }
  /// True once erase_node() removed the node from its graph.
  bool erased() const { return erased_; }

  /// Optional Python type annotation in repr form ("torch.Tensor", "typing.List[int]").
  const std::optional<std::string>& type() const { return type_; }
  void set_type(std::optional<std::string> type);

  const std::vector<Argument>& args() const { return args_; }
  const Kwargs& kwargs() const { return kwargs_; }
  /// Replaces args/kwargs; use-def chains (users, all_input_nodes) follow.
  void set_args(std::vector<Argument> args);
  void set_kwargs(Kwargs kwargs);
  /// Copy-on-write update of one positional argument; throws fx::Error(Index) if out of range.
  void update_arg(size_t idx, Argument arg);
  /// Sets one keyword argument (appended if new).
  void update_kwarg(const std::string& key, Argument arg);

  /// The nodes that use this node, in the order they started using it.
  const UserSet& users() const { return users_; }
  /// Distinct input nodes, args before kwargs, in first-occurrence order.
  const std::vector<Node*>& all_input_nodes() const { return inputs_; }

  /// Next / previous node in the graph's order; the sentinel root closes the ring
  /// (use Graph::nodes() to iterate).
  Node* next() const { return next_; }
  Node* prev() const { return prev_; }
  /// Moves `x` (of the same graph) to just before this node.
  void prepend(Node* x);
  /// Moves `x` (of the same graph) to just after this node.
  void append(Node* x);

  /// Rewrites every user to use `replace_with` instead of this node, except users for which
  /// `delete_user_cb(user)` is false. Returns the users that changed, in order.
  /// Given   %a = f(x); %b = g(%a); %c = h(%a)      and a.replace_all_uses_with(%z)
  /// Result  %b = g(%z); %c = h(%z)                   returns [b, c]
  std::vector<Node*> replace_all_uses_with(
      Node* replace_with, const std::function<bool(Node*)>& delete_user_cb = nullptr);
  /// Replaces every occurrence of `old_input` among this node's inputs with `new_input`.
  void replace_input_with(Node* old_input, Node* new_input);

  /// Free-form metadata (torch.fx `node.meta`); insertion ordered. The non-const access bumps
  /// the graph's version() (the caller may write through it).
  Kwargs& meta();
  const Kwargs& meta() const { return meta_; }
  /// meta["stack_trace"] if it is a string.
  std::optional<std::string> stack_trace() const;
  void set_stack_trace(std::optional<std::string> trace);

  /// Side effects that make the node survive dead-code elimination: placeholder, output,
  /// impure functions (torch._assert...), call_module of a module marked impure, and in-place
  /// operations (x.mul_(2), torch.relu_(x), x += y), which torch 1.13 wrongly removes.
  bool is_impure() const;

  /// The line `print(graph)` shows for this node (torch.fx `format_node()`).
  std::string format_node(UsersToken token = UsersToken::Hash) const;

 private:
  friend class Graph;
  Node(Graph* graph, uint64_t id, std::string name, Opcode op, Target target,
       std::optional<std::string> type);
  void update_args_kwargs(std::vector<Argument> args, Kwargs kwargs);
  void remove_from_list();

  Graph* graph_;
  uint64_t id_;
  std::string name_;
  uint64_t name_hash_ = 0;  // Namespace::hash(name_), for lint's name check
  Opcode op_;
  Target target_;
  std::optional<std::string> type_;
  std::vector<Argument> args_;
  Kwargs kwargs_;
  std::vector<Node*> inputs_;
  UserSet users_;
  Node* prev_ = this;
  Node* next_ = this;
  bool erased_ = false;
  Kwargs meta_;
};

}  // namespace fx
