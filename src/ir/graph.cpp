#include "fx/graph.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <new>

#include "fx/graph_module.h"
#include "ir/printer.h"

namespace fx {

// ---- iteration ----

Graph::NodeList::iterator::iterator(Node* cur, Node* root, bool reverse)
    : cur_(cur), root_(root), reverse_(reverse) {
  skip_erased();
}

void Graph::NodeList::iterator::skip_erased() {
  while (cur_ != root_ && cur_->erased()) cur_ = reverse_ ? cur_->prev() : cur_->next();
}

Graph::NodeList::iterator& Graph::NodeList::iterator::operator++() {
  cur_ = reverse_ ? cur_->prev() : cur_->next();
  skip_erased();
  return *this;
}

Graph::NodeList::iterator Graph::NodeList::begin() const {
  Node* root = graph_->root_;
  return iterator(reverse_ ? root->prev() : root->next(), root, reverse_);
}

Graph::NodeList::iterator Graph::NodeList::end() const {
  return iterator(graph_->root_, graph_->root_, reverse_);
}

size_t Graph::NodeList::size() const { return graph_->len_; }

std::vector<Node*> Graph::NodeList::to_vector() const {
  std::vector<Node*> out;
  out.reserve(graph_->len_);
  for (Node* n : *this) out.push_back(n);
  return out;
}

// ---- construction ----

namespace {
std::atomic<uint64_t> next_graph_serial{1};
}  // namespace

Graph::Graph() : serial_(next_graph_serial.fetch_add(1, std::memory_order_relaxed)) {
  root_ = new_node("", Opcode::Root, "", std::nullopt);
  insert_anchor_ = root_;
  insert_after_ = false;
}

Graph::~Graph() {
  for (Node* n : storage_) n->~Node();
}

Node* Graph::new_node(const std::string& candidate, Opcode op, Target target,
                      std::optional<std::string> type) {
  static_assert(alignof(Node) <= alignof(std::max_align_t), "arena chunks are max_align_t aligned");
  if (arena_left_ == 0) {
    // Chunks grow with the graph (16 nodes, then up to 256: ~80 KB, below malloc's mmap
    // threshold, so a freed graph's chunks are reused instead of unmapped and faulted in again).
    const size_t count = std::min<size_t>(256, std::max<size_t>(16, storage_.size()));
    arena_.push_back(std::unique_ptr<unsigned char[]>(new unsigned char[count * sizeof(Node)]));
    arena_left_ = count;
    arena_count_ = count;
  }
  // Grow first, so that push_back below cannot throw after the node exists.
  if (storage_.size() == storage_.capacity()) storage_.reserve(2 * storage_.size() + 16);
  void* slot = arena_.back().get() + (arena_count_ - arena_left_) * sizeof(Node);
  // The root (empty candidate) takes no name; every other node's name maps to it.
  std::string name =
      candidate.empty() ? std::string() : namespace_.create_bound_name(candidate, slot);
  Node* n = new (slot)
      Node(this, storage_.size(), std::move(name), op, std::move(target), std::move(type));
  n->name_hash_ = Namespace::hash(n->name());
  --arena_left_;
  storage_.push_back(n);
  ++version_;
  return n;
}

void Graph::insert_node(Node* n) {
  ++version_;
  if (insert_after_) {
    insert_anchor_->append(n);
  } else {
    insert_anchor_->prepend(n);
  }
}

Node* Graph::create_node(Opcode op, Target target, std::vector<Argument> args, Kwargs kwargs,
                         std::optional<std::string> name, std::optional<std::string> type) {
  if (op == Opcode::Root)
    throw Error(ErrorKind::Value, "create_node: 'root' is internal and not a valid opcode");
  if (op == Opcode::CallFunction && !target.is_function())
    throw Error(ErrorKind::Value, "create_node: call_function target '" + target.pretty() +
                                      "' is a str but a function is expected; use fx::fn(\"" +
                                      target.pretty() + "\")");
  if (op != Opcode::CallFunction && target.is_function())
    throw Error(ErrorKind::Value, std::string("create_node: ") + opcode_name(op) + " target " +
                                      target.pretty() + " is a function but a str is expected");
  auto check_input = [&](Node* n) {
    if (n->erased())
      throw Error(ErrorKind::Graph,
                  "create_node: argument '" + n->name() +
                      "' has been erased from its graph and cannot be used",
                  n->name());
  };
  for (const Argument& a : args) a.for_each_node(check_input);
  for (const auto& kv : kwargs) kv.second.for_each_node(check_input);
  if (insert_anchor_->erased())
    throw Error(ErrorKind::Graph,
                "create_node: the insert point, node '" + insert_anchor_->name() +
                    "', has been erased; set a new one with inserting_before/inserting_after",
                insert_anchor_->name());
  std::string candidate;
  if (name) {
    candidate = *name;
  } else if (target.is_function()) {
    candidate = snake_case(target.function().name());
  } else {
    candidate = target.str();
    if (candidate.size() >= 4 && candidate.compare(0, 2, "__") == 0 &&
        candidate.compare(candidate.size() - 2, 2, "__") == 0)
      candidate = candidate.substr(2, candidate.size() - 4);
    candidate = snake_case(candidate);
  }
  if (candidate.empty())
    throw Error(ErrorKind::Value,
                "cannot create a name from an empty string: pass a non-empty name");
  Node* n = new_node(candidate, op, std::move(target), std::move(type));
  n->update_args_kwargs(std::move(args), std::move(kwargs));
  insert_node(n);
  ++len_;
  return n;
}

Node* Graph::placeholder(const std::string& name, std::optional<std::string> type,
                         std::optional<Argument> default_value) {
  std::vector<Argument> args;
  if (default_value) args.push_back(std::move(*default_value));
  return create_node(Opcode::Placeholder, name, std::move(args), {}, std::nullopt, std::move(type));
}

Node* Graph::get_attr(const std::string& qualified_name, std::optional<std::string> type) {
  return create_node(Opcode::GetAttr, qualified_name, {}, {}, std::nullopt, std::move(type));
}

Node* Graph::call_module(const std::string& module_name, std::vector<Argument> args, Kwargs kwargs,
                         std::optional<std::string> type) {
  return create_node(Opcode::CallModule, module_name, std::move(args), std::move(kwargs),
                     std::nullopt, std::move(type));
}

Node* Graph::call_method(const std::string& method_name, std::vector<Argument> args, Kwargs kwargs,
                         std::optional<std::string> type) {
  return create_node(Opcode::CallMethod, method_name, std::move(args), std::move(kwargs),
                     std::nullopt, std::move(type));
}

Node* Graph::call_function(Function fn, std::vector<Argument> args, Kwargs kwargs,
                           std::optional<std::string> type) {
  return create_node(Opcode::CallFunction, fn, std::move(args), std::move(kwargs), std::nullopt,
                     std::move(type));
}

Node* Graph::output(Argument result, std::optional<std::string> type) {
  return create_node(Opcode::Output, "output", {std::move(result)}, {}, std::nullopt,
                     std::move(type));
}

Node* Graph::node_copy(const Node* node, const std::function<Argument(Node*)>& arg_transform) {
  if (!node) throw Error(ErrorKind::Value, "node_copy: node is null");
  std::vector<Argument> args;
  Kwargs kwargs;
  if (arg_transform) {
    args.reserve(node->args().size());
    for (const Argument& a : node->args()) args.push_back(a.map_nodes(arg_transform));
    for (const auto& kv : node->kwargs()) kwargs.set(kv.first, kv.second.map_nodes(arg_transform));
  } else {
    args = node->args();
    kwargs = node->kwargs();
  }
  Node* n = create_node(node->op(), node->target(), std::move(args), std::move(kwargs),
                        node->name(), node->type());
  n->meta() = node->meta();
  return n;
}

std::optional<Argument> Graph::graph_copy(const Graph& g, ValueMap& val_map) {
  auto lookup = [&val_map](Node* n) -> Argument {
    auto it = val_map.find(n);
    if (it == val_map.end())
      throw Error(ErrorKind::Key,
                  "graph_copy: node '" + n->name() +
                      "' is used before it is defined in the source graph (or belongs to another "
                      "graph); lint() the source graph",
                  n->name());
    return it->second;
  };
  for (Node* node : g.nodes()) {
    if (val_map.count(node)) continue;
    if (node->op() == Opcode::Output) {
      if (node->args().empty()) return Argument();
      return node->args()[0].map_nodes(lookup);
    }
    val_map[node] = node_copy(node, lookup);
  }
  return std::nullopt;
}

std::unique_ptr<Graph> Graph::clone() const {
  // graph_copy + output, with a dense id-indexed value map instead of a hash map.
  auto g = std::make_unique<Graph>();
  g->storage_.reserve(len_ + 1);
  std::vector<Node*> mapped(storage_.size(), nullptr);
  auto lookup = [&](Node* n) -> Argument {
    Node* m = (&n->graph() == this && n->id() < mapped.size()) ? mapped[n->id()] : nullptr;
    if (!m)
      throw Error(ErrorKind::Key,
                  "graph_copy: node '" + n->name() +
                      "' is used before it is defined in the source graph (or belongs to another "
                      "graph); lint() the source graph",
                  n->name());
    return m;
  };
  for (Node* node : nodes()) {
    if (node->op() == Opcode::Output) {
      Argument out = node->args().empty() ? Argument() : node->args()[0].map_nodes(lookup);
      g->output(std::move(out), output_node()->type())->meta() = node->meta();
      return g;
    }
    std::vector<Argument> args;
    args.reserve(node->args().size());
    for (const Argument& a : node->args()) args.push_back(a.map_nodes(lookup));
    Kwargs kwargs;
    for (const auto& kv : node->kwargs()) kwargs.set(kv.first, kv.second.map_nodes(lookup));
    Node* n = g->create_node(node->op(), node->target(), std::move(args), std::move(kwargs),
                             node->name(), node->type());
    n->meta() = node->meta();
    mapped[node->id()] = n;
  }
  return g;
}

void Graph::erase_node(Node* node) {
  if (!node) throw Error(ErrorKind::Value, "erase_node: node is null");
  if (&node->graph() != this)
    throw Error(ErrorKind::Graph,
                "erase_node: Node '" + node->name() + "' does not belong to this Graph",
                node->name());
  if (node->erased())
    throw Error(ErrorKind::Graph, "erase_node: Node '" + node->name() + "' was already erased",
                node->name());
  if (!node->users().empty()) {
    std::string users = "{";
    bool first = true;
    for (Node* u : node->users()) {
      if (!first) users += ", ";
      first = false;
      users += u->name() + ": None";
    }
    users += "}";
    throw Error(ErrorKind::Graph,
                "Tried to erase Node " + node->name() + " but it still had " +
                    std::to_string(node->users().size()) + " users in the graph: " + users + "!",
                node->name());
  }
  node->remove_from_list();
  node->erased_ = true;
  --len_;
  auto to_none = [](Node*) { return Argument(); };
  std::vector<Argument> args;
  for (const Argument& a : node->args()) args.push_back(a.map_nodes(to_none));
  Kwargs kwargs;
  for (const auto& kv : node->kwargs()) kwargs.set(kv.first, kv.second.map_nodes(to_none));
  node->update_args_kwargs(std::move(args), std::move(kwargs));
  if (namespace_.bound(node->name()) == node) namespace_.bind(node->name(), nullptr);
}

// ---- insert point ----

Graph::InsertGuard::InsertGuard(Graph* g, Node* anchor, bool after)
    : graph_(g), anchor_(g->insert_anchor_), after_(g->insert_after_) {
  g->insert_anchor_ = anchor;
  g->insert_after_ = after;
}

Graph::InsertGuard::InsertGuard(InsertGuard&& o) noexcept
    : graph_(o.graph_), anchor_(o.anchor_), after_(o.after_) {
  o.graph_ = nullptr;
}

Graph::InsertGuard::~InsertGuard() {
  if (graph_) {
    graph_->insert_anchor_ = anchor_;
    graph_->insert_after_ = after_;
  }
}

Graph::InsertGuard Graph::inserting_before(Node* n) {
  if (!n) return InsertGuard(this, root_, true);  // torch.fx: inserting_after(root)
  if (&n->graph() != this)
    throw Error(ErrorKind::Graph,
                "inserting_before: Node '" + n->name() + "' does not belong to this Graph",
                n->name());
  if (n->erased())
    throw Error(ErrorKind::Graph,
                "inserting_before: Node '" + n->name() + "' has been erased from this Graph",
                n->name());
  return InsertGuard(this, n, false);
}

Graph::InsertGuard Graph::inserting_after(Node* n) {
  if (!n) return InsertGuard(this, root_, false);  // torch.fx: inserting_before(root)
  if (&n->graph() != this)
    throw Error(ErrorKind::Graph,
                "inserting_after: Node '" + n->name() + "' does not belong to this Graph",
                n->name());
  if (n->erased())
    throw Error(ErrorKind::Graph,
                "inserting_after: Node '" + n->name() + "' has been erased from this Graph",
                n->name());
  return InsertGuard(this, n, true);
}

// ---- text ----

namespace {
// The node lines of print(graph).
void put_node_lines(const Graph& g, UsersToken token, Out& out) {
  const ArgumentPrinter printer;
  for (Node* n : g.nodes()) {
    out.put("\n    ");
    format_node(*n, token, printer, out);
  }
}
}  // namespace

std::string Graph::str(UsersToken token) const {
  std::string s;
  s.reserve(16 + len_ * 96);
  Out out(s);
  out.put("graph():");
  put_node_lines(*this, token, out);
  out.flush();
  return s;
}

namespace {
size_t display_width(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++w;  // count UTF-8 code points
  return w;
}
std::string strip(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}
}  // namespace

std::string Graph::tabular() const {
  // tabulate(rows, headers=[...]) with the default "simple" format: columns as wide as their
  // widest cell and at least the header plus 2, two-space gutters, trailing blanks stripped.
  const std::vector<std::string> headers = {"opcode", "name", "target", "args", "kwargs"};
  std::vector<std::vector<std::string>> rows;
  rows.reserve(len_);
  ArgumentPrinter printer;
  for (Node* n : nodes()) {
    std::string args, kwargs = "{";
    printer.repr(Argument::tuple(n->args()), args);
    bool first = true;
    for (const auto& kv : n->kwargs()) {
      if (!first) kwargs += ", ";
      first = false;
      kwargs += py_str_repr(kv.first) + ": ";
      printer.repr(kv.second, kwargs);
    }
    kwargs += "}";
    rows.push_back(
        {opcode_name(n->op()), n->name(), strip(n->target().py_str()), strip(args), strip(kwargs)});
  }
  std::vector<size_t> widths;
  for (const std::string& h : headers) widths.push_back(display_width(h) + 2);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], display_width(row[c]));
  auto emit_row = [&](const std::vector<std::string>& cells, std::string& out) {
    std::string line;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c) line += "  ";
      line += cells[c];
      line.append(widths[c] - display_width(cells[c]), ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line;
  };
  std::string out;
  emit_row(headers, out);
  out += '\n';
  for (size_t c = 0; c < widths.size(); ++c) {
    if (c) out += "  ";
    out.append(widths[c], '-');
  }
  for (const auto& row : rows) {
    out += '\n';
    emit_row(row, out);
  }
  return out;
}

// ---- checks ----

// The structural checks of lint(), as a scan that cannot throw: returns the first problem found,
// in torch.fx's order, and lint() builds the error text from it.
Graph::LintIssue Graph::lint_scan(char* seen) const {
  for (Node* node = root_->next(); node != root_; node = node->next()) {
    if (node->erased()) continue;
    if (&node->graph() != this) return {LintIssue::Foreign, node, nullptr};
    LintIssue issue;
    auto check_arg = [&](Node* arg) {
      if (issue.what != LintIssue::None) return;
      if (&arg->graph() != this) {
        issue = {LintIssue::ForeignArg, node, arg};
      } else if (!seen[arg->id()]) {
        issue = {LintIssue::UseBeforeDef, node, arg};
      }
    };
    for (const Argument& a : node->args()) a.for_each_node(check_arg);
    for (const auto& kv : node->kwargs()) kv.second.for_each_node(check_arg);
    if (issue.what != LintIssue::None) return issue;
    seen[node->id()] = 1;
    // Every live name is bound to its node in the namespace; a second node with the same
    // name would not be the one bound.
    if (namespace_.bound(node->name(), node->name_hash_) != node)
      return {LintIssue::Redefined, node, nullptr};
  }
  return {};
}

void Graph::lint() const {
  std::vector<char> seen(storage_.size(), 0);
  const LintIssue issue = lint_scan(seen.data());
  const Node* node = issue.node;
  const Node* arg = issue.arg;
  switch (issue.what) {
    case LintIssue::None:
      break;
    case LintIssue::Foreign:
      throw Error(ErrorKind::Lint, "Node '" + node->name() + "' does not belong to this Graph!",
                  node->name());
    case LintIssue::ForeignArg:
      throw Error(ErrorKind::Lint,
                  "Argument '" + arg->name() + "' of Node '" + node->name() +
                      "' does not belong to this Graph, but was used as an argument! If you are "
                      "copying nodes from another graph, make sure to use ``arg_transform`` on "
                      "node_copy() to remap values\n" +
                      str(),
                  node->name());
    case LintIssue::UseBeforeDef:
      throw Error(ErrorKind::Lint,
                  "Argument '" + arg->name() + "' of Node '" + node->name() +
                      "' was used before it has been defined! Please check that Nodes in the "
                      "graph are topologically ordered\n" +
                      str(),
                  node->name());
    case LintIssue::Redefined:
      throw Error(ErrorKind::Lint, "Node redefined name " + node->name() + "!", node->name());
  }
  if (!owning_module_) return;
  for (Node* node : nodes()) {
    if (node->op() != Opcode::GetAttr && node->op() != Opcode::CallModule) continue;
    const std::string& target = node->target().str();
    const Module* m = owning_module_;
    std::string seen_qualname;
    size_t start = 0;
    for (;;) {
      size_t dot = target.find('.', start);
      std::string atom =
          target.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      const bool last = dot == std::string::npos;
      std::shared_ptr<Module> child = m ? m->child(atom) : nullptr;
      const bool is_tensor = m && (m->parameter(atom) || m->buffer(atom));
      if (!child && !is_tensor)
        throw Error(ErrorKind::Lint,
                    "Node " + node->name() + " target " + target +
                        " references nonexistent attribute " + atom + " of " + seen_qualname,
                    node->name());
      if (node->op() == Opcode::CallModule && !child)
        throw Error(ErrorKind::Lint,
                    "Node " + node->name() + " target " + target + " " + atom + " of " +
                        seen_qualname + " does not reference an nn.Module",
                    node->name());
      if (last) break;
      m = child.get();  // a tensor followed by more atoms: the next lookup fails as in Python
      seen_qualname += (seen_qualname.empty() ? "" : ".") + atom;
      start = dot + 1;
    }
  }
}

bool Graph::eliminate_dead_code() {
  lint();
  bool changed = false;
  for (Node* node : nodes().reversed()) {
    if (!node->is_impure() && node->users().empty()) {
      erase_node(node);
      changed = true;
    }
  }
  return changed;
}

Node* Graph::output_node() const {
  for (Node* n : nodes().reversed())
    if (n->op() == Opcode::Output) return n;
  return nullptr;
}

Node* Graph::find_node(const std::string& name) const {
  return static_cast<Node*>(const_cast<void*>(namespace_.bound(name)));
}

Node* Graph::node_by_id(uint64_t id) const {
  if (id == 0 || id >= storage_.size()) return nullptr;
  return storage_[id];
}

}  // namespace fx
