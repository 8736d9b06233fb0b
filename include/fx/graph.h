// fx::Graph — torch.fx's Graph: an ordered list of Nodes with a sentinel root.
//
// Ownership: the graph owns all the nodes inside it; all references to nodes are raw pointers.
// erase_node() only unlinks a node and marks it erased, so passes may erase while iterating;
// erased nodes are freed with the graph.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fx/argument.h"
#include "fx/namespace.h"
#include "fx/node.h"

namespace fx {

class GraphModule;

/// Options of the Python code generator.
struct CodegenOptions {
  /// Emit `# File: ...` stack-trace comments (print_readable's verbose mode).
  bool verbose = false;
  /// Reproduce torch 1.13's two codegen bugs instead of fixing them: `-2 ** x` for
  /// `operator.pow(-2, x)` and `self.lambda` for keyword attribute names.
  bool torch113_bugs = false;
};

/// Result of Graph::python_code(): the source of `forward` and the globals it references.
struct PythonCode {
  std::string src;
  /// Global name -> what it refers to (a qualified Python name such as "math.sqrt" or
  /// "typing.List"), in registration order.
  std::vector<std::pair<std::string, std::string>> globals;
};

/// Maps nodes of a source graph to values in a destination graph (graph_copy).
using ValueMap = std::unordered_map<const Node*, Argument>;

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // ---- iteration ----
  /// A live view of the non-erased nodes; safe to mutate the graph while iterating.
  class NodeList {
   public:
    class iterator {
     public:
      iterator(Node* cur, Node* root, bool reverse);
      Node* operator*() const { return cur_; }
      iterator& operator++();
      bool operator!=(const iterator& o) const { return cur_ != o.cur_; }
      bool operator==(const iterator& o) const { return cur_ == o.cur_; }

     private:
      void skip_erased();
      Node* cur_;
      Node* root_;
      bool reverse_;
    };
    iterator begin() const;
    iterator end() const;
    /// The same nodes, last to first.
    NodeList reversed() const { return NodeList(graph_, !reverse_); }
    size_t size() const;
    std::vector<Node*> to_vector() const;

   private:
    friend class Graph;
    NodeList(const Graph* g, bool reverse) : graph_(g), reverse_(reverse) {}
    const Graph* graph_;
    bool reverse_;
  };
  NodeList nodes() const { return NodeList(this, false); }
  /// len(graph.nodes).
  size_t size() const { return len_; }

  // ---- construction ----
  /// Creates a node at the insert point. `name` is a hint (uniquified like torch.fx);
  /// without it the name derives from the target. Throws fx::Error(Value) for a string
  /// target on call_function, a function target on other ops, or Opcode::Root.
  Node* create_node(Opcode op, Target target, std::vector<Argument> args = {}, Kwargs kwargs = {},
                    std::optional<std::string> name = std::nullopt,
                    std::optional<std::string> type = std::nullopt);
  /// A function input. `default_value` becomes args[0] (printed `(default=...)`).
  Node* placeholder(const std::string& name, std::optional<std::string> type = std::nullopt,
                    std::optional<Argument> default_value = std::nullopt);
  Node* get_attr(const std::string& qualified_name, std::optional<std::string> type = std::nullopt);
  Node* call_module(const std::string& module_name, std::vector<Argument> args = {},
                    Kwargs kwargs = {}, std::optional<std::string> type = std::nullopt);
  /// args[0] is the object the method is called on.
  Node* call_method(const std::string& method_name, std::vector<Argument> args = {},
                    Kwargs kwargs = {}, std::optional<std::string> type = std::nullopt);
  Node* call_function(Function fn, std::vector<Argument> args = {}, Kwargs kwargs = {},
                      std::optional<std::string> type = std::nullopt);
  /// The `return` of the graph.
  Node* output(Argument result, std::optional<std::string> type = std::nullopt);

  /// Copies `node` (from any graph) into this graph at the insert point, mapping its Node
  /// arguments through `arg_transform` (identity by default); meta is copied.
  Node* node_copy(const Node* node, const std::function<Argument(Node*)>& arg_transform = nullptr);
  /// Copies all nodes of `g` except its output into this graph. Nodes already in `val_map` are
  /// not copied (pre-seed it to bind placeholders); the map is filled in. Returns the mapped
  /// output value, or nullopt if `g` has no output node.
  std::optional<Argument> graph_copy(const Graph& g, ValueMap& val_map);
  /// A deep copy (torch.fx deepcopy): same names, same output type.
  std::unique_ptr<Graph> clone() const;

  /// Erases a node without users. Throws fx::Error(Graph) naming the node and its users
  /// otherwise, or if the node belongs to another graph or was already erased.
  void erase_node(Node* node);

  // ---- insert point ----
  /// Restores the previous insert point when destroyed, unless keep() was called.
  class [[nodiscard]] InsertGuard {
   public:
    InsertGuard(InsertGuard&& o) noexcept;
    InsertGuard(const InsertGuard&) = delete;
    ~InsertGuard();
    /// Make the new insert point permanent.
    void keep() { graph_ = nullptr; }

   private:
    friend class Graph;
    InsertGuard(Graph* g, Node* anchor, bool after);
    Graph* graph_;
    Node* anchor_;
    bool after_;
  };
  /// New nodes go right before `n` (nullptr: at the beginning of the graph).
  InsertGuard inserting_before(Node* n = nullptr);
  /// New nodes go right after `n` (nullptr: at the end). Like torch.fx, each new node is
  /// inserted directly after `n`, so successive nodes end up in reverse creation order.
  InsertGuard inserting_after(Node* n = nullptr);

  // ---- text ----
  /// `print(graph)`.
  std::string str(UsersToken token = UsersToken::Hash) const;
  /// `graph.print_tabular()` (tabulate's "simple" format).
  std::string tabular() const;
  /// Generated Python code (`Graph.python_code(root_module)`).
  PythonCode python_code(const std::string& root_module = "self",
                         const CodegenOptions& options = {}) const;

  // ---- checks and passes ----
  /// Checks opcodes, ownership, topological order, unique names and (when owned by a
  /// GraphModule) that targets exist. Throws fx::Error(Lint) with torch.fx's message.
  void lint() const;
  /// Erases, in reverse order, every node with no users that is not impure. Returns whether
  /// anything was erased. Lints first.
  bool eliminate_dead_code();

  /// The GraphModule that owns this graph, if any.
  GraphModule* owning_module() const { return owning_module_; }
  /// Whether `node` is a live node of this graph.
  bool owns(const Node* node) const { return node && &node->graph() == this && !node->erased(); }
  /// The output node, or nullptr.
  Node* output_node() const;
  /// A node by name (live nodes only), or nullptr.
  Node* find_node(const std::string& name) const;
  /// Any node ever created in this graph, by id (erased included), or nullptr.
  Node* node_by_id(uint64_t id) const;
  /// One past the largest node id handed out so far: passes index dense per-node arrays by
  /// Node::id() with it.
  uint64_t id_bound() const { return storage_.size(); }

  /// A counter bumped by every change of the graph or of one of its nodes: node creation,
  /// insertion, move (prepend/append) and erase; args/kwargs changes (set_args, update_arg,
  /// replace_all_uses_with..., which also change users); set_type, set_stack_trace and every
  /// non-const access to a node's meta() (the caller may write through the reference: take it
  /// again for each change, so the counter moves with it). Caches derived from a graph (the
  /// executor's plans) are valid while (serial(), version()) is unchanged. It never decreases.
  uint64_t version() const { return version_; }
  /// A process-unique number for this graph, never reused (unlike its address).
  uint64_t serial() const { return serial_; }
  /// Expires when the graph is destroyed, so a cache keyed by serial() can drop its entries.
  std::weak_ptr<const void> lifetime() const { return lifetime_; }

 private:
  friend class GraphModule;
  friend class Node;
  struct LintIssue {
    enum What { None, Foreign, ForeignArg, UseBeforeDef, Redefined } what = None;
    const Node* node = nullptr;
    const Node* arg = nullptr;
  };
  LintIssue lint_scan(char* seen) const;
  void insert_node(Node* n);
  Node* new_node(const std::string& candidate, Opcode op, Target target,
                 std::optional<std::string> type);

  // Nodes are placement-constructed in chunks (arena_) for locality and to save one heap
  // allocation each; storage_[id] points at them, erased ones included, until ~Graph.
  std::vector<Node*> storage_;  // index == id
  std::vector<std::unique_ptr<unsigned char[]>> arena_;
  size_t arena_left_ = 0;   // free node slots in arena_.back()
  size_t arena_count_ = 0;  // node slots in arena_.back()
  Node* root_;
  Node* insert_anchor_;
  bool insert_after_ = false;
  size_t len_ = 0;
  Namespace namespace_;  // also maps each name to its node (Namespace::bound)
  GraphModule* owning_module_ = nullptr;
  uint64_t version_ = 0;
  const uint64_t serial_;
  std::shared_ptr<const char> lifetime_ = std::make_shared<const char>(0);
};

}  // namespace fx
