#include "fx/node.h"

#include <algorithm>

#include "fx/graph.h"
#include "fx/graph_module.h"
#include "ir/printer.h"

namespace fx {

namespace {
const char* const kOpcodeNames[] = {
#define FX_OPCODE_STR(name, str) str,
    FX_OPCODES(FX_OPCODE_STR)
#undef FX_OPCODE_STR
};
constexpr size_t kNpos = static_cast<size_t>(-1);
constexpr size_t kIndexThreshold = 32;  // user sets larger than this get a hash index
}  // namespace

const char* opcode_name(Opcode op) {
  return op == Opcode::Root ? "root" : kOpcodeNames[static_cast<int>(op)];
}

Opcode opcode_from_name(const std::string& name) {
  for (int i = 0; i < kNumOpcodes; ++i)
    if (name == kOpcodeNames[i]) return static_cast<Opcode>(i);
  throw Error(ErrorKind::Value,
              "unknown opcode '" + name +
                  "': expected one of placeholder, get_attr, call_function, call_module, "
                  "call_method, output");
}

// ---- Target ----

const std::string& Target::str() const {
  if (fn_)
    throw Error(ErrorKind::Type,
                "target " + fn_->qualname() + " is a function, but a str target was expected");
  return str_;
}

Function Target::function() const {
  if (!fn_)
    throw Error(ErrorKind::Type, "target '" + str_ + "' is a str, but a function was expected");
  return *fn_;
}

const std::string& Target::pretty() const { return fn_ ? fn_->qualname() : str_; }

std::string Target::py_str() const { return fn_ ? fn_->py_repr() : str_; }

// ---- UserSet ----

size_t UserSet::index_of(const Node* n) const {
  if (index_) {
    auto it = index_->find(n);
    return it == index_->end() ? kNpos : it->second;
  }
  for (size_t i = 0; i < items_.size(); ++i)
    if (items_[i] == n) return i;
  return kNpos;
}

bool UserSet::contains(const Node* n) const { return n && index_of(n) != kNpos; }

void UserSet::insert(Node* n) {
  if (index_of(n) != kNpos) return;
  items_.push_back(n);
  if (index_) {
    (*index_)[n] = items_.size() - 1;
  } else if (items_.size() > kIndexThreshold) {
    compact();
  }
}

void UserSet::erase(Node* n) {
  size_t i = index_of(n);
  if (i == kNpos) return;
  items_[i] = nullptr;
  ++tombstones_;
  if (index_) index_->erase(n);
  if (tombstones_ > 8 && tombstones_ * 2 > items_.size()) compact();
}

void UserSet::compact() const {
  if (tombstones_) {
    items_.erase(std::remove(items_.begin(), items_.end(), nullptr), items_.end());
    tombstones_ = 0;
  }
  if (items_.size() > kIndexThreshold) {
    if (!index_) index_ = std::make_unique<std::unordered_map<const Node*, size_t>>();
    index_->clear();
    for (size_t i = 0; i < items_.size(); ++i) (*index_)[items_[i]] = i;
  } else {
    index_.reset();
  }
}

const std::vector<Node*>& UserSet::list() const {
  if (tombstones_) compact();
  return items_;
}

// ---- Node ----

Node::Node(Graph* graph, uint64_t id, std::string name, Opcode op, Target target,
           std::optional<std::string> type)
    : graph_(graph),
      id_(id),
      name_(std::move(name)),
      op_(op),
      target_(std::move(target)),
      type_(std::move(type)) {}

void Node::set_type(std::optional<std::string> type) {
  type_ = std::move(type);
  ++graph_->version_;
}

Kwargs& Node::meta() {
  ++graph_->version_;
  return meta_;
}

void Node::update_args_kwargs(std::vector<Argument> args, Kwargs kwargs) {
  ++graph_->version_;
  // Like torch.fx: drop this node from every old input's users, then re-add it, so a user
  // that is re-linked moves to the end of its inputs' user order.
  for (Node* old_input : inputs_) old_input->users_.erase(this);
  args_ = std::move(args);
  kwargs_ = std::move(kwargs);
  inputs_.clear();
  auto collect = [this](Node* n) {
    if (std::find(inputs_.begin(), inputs_.end(), n) == inputs_.end()) inputs_.push_back(n);
  };
  for (const Argument& a : args_) a.for_each_node(collect);
  for (const auto& kv : kwargs_) kv.second.for_each_node(collect);
  for (Node* input : inputs_) input->users_.insert(this);
}

void Node::set_args(std::vector<Argument> args) { update_args_kwargs(std::move(args), kwargs_); }

void Node::set_kwargs(Kwargs kwargs) { update_args_kwargs(args_, std::move(kwargs)); }

void Node::update_arg(size_t idx, Argument arg) {
  if (idx >= args_.size())
    throw Error(ErrorKind::Index,
                "update_arg: index " + std::to_string(idx) + " is out of range for node '" + name_ +
                    "' with " + std::to_string(args_.size()) + " positional args",
                name_);
  std::vector<Argument> args = args_;
  args[idx] = std::move(arg);
  set_args(std::move(args));
}

void Node::update_kwarg(const std::string& key, Argument arg) {
  Kwargs kwargs = kwargs_;
  kwargs.set(key, std::move(arg));
  set_kwargs(std::move(kwargs));
}

void Node::remove_from_list() {
  ++graph_->version_;
  Node* p = prev_;
  Node* n = next_;
  p->next_ = n;
  n->prev_ = p;
}

void Node::prepend(Node* x) {
  if (!x || x->graph_ != graph_)
    throw Error(ErrorKind::Graph,
                "Attempting to move a Node into a different Graph: '" +
                    (x ? x->name_ : std::string("null")) + "' cannot be moved next to '" + name_ +
                    "'",
                x ? x->name_ : std::string());
  if (x == this) return;  // torch.fx warns that this has no effect
  if (x->erased_)
    throw Error(ErrorKind::Graph, "cannot move erased node '" + x->name_ + "'", x->name_);
  x->remove_from_list();
  Node* p = prev_;
  p->next_ = x;
  x->prev_ = p;
  x->next_ = this;
  prev_ = x;
}

void Node::append(Node* x) { next_->prepend(x); }

std::vector<Node*> Node::replace_all_uses_with(Node* replace_with,
                                               const std::function<bool(Node*)>& delete_user_cb) {
  if (!replace_with)
    throw Error(ErrorKind::Value, "replace_all_uses_with: the replacement node is null", name_);
  std::vector<Node*> to_process = users_.list();
  std::vector<Node*> changed;
  changed.reserve(to_process.size());
  for (Node* use : to_process) {
    if (delete_user_cb && !delete_user_cb(use)) continue;
    auto remap = [&](Node* n) -> Argument { return n == this ? replace_with : n; };
    std::vector<Argument> args;
    args.reserve(use->args_.size());
    for (const Argument& a : use->args_) args.push_back(a.map_nodes(remap));
    Kwargs kwargs;
    for (const auto& kv : use->kwargs_) kwargs.set(kv.first, kv.second.map_nodes(remap));
    use->update_args_kwargs(std::move(args), std::move(kwargs));
    changed.push_back(use);
  }
  return changed;
}

void Node::replace_input_with(Node* old_input, Node* new_input) {
  if (!new_input) throw Error(ErrorKind::Value, "replace_input_with: the new input is null", name_);
  auto remap = [&](Node* n) -> Argument { return n == old_input ? new_input : n; };
  std::vector<Argument> args;
  args.reserve(args_.size());
  for (const Argument& a : args_) args.push_back(a.map_nodes(remap));
  Kwargs kwargs;
  for (const auto& kv : kwargs_) kwargs.set(kv.first, kv.second.map_nodes(remap));
  update_args_kwargs(std::move(args), std::move(kwargs));
}

std::optional<std::string> Node::stack_trace() const {
  const Argument* a = meta_.find("stack_trace");
  if (a && a->kind() == Argument::Kind::String) return a->to_string();
  return std::nullopt;
}

void Node::set_stack_trace(std::optional<std::string> trace) {
  ++graph_->version_;
  if (trace) {
    meta_.set("stack_trace", *trace);
  } else {
    meta_.set("stack_trace", Argument());
  }
}

bool Node::is_impure() const {
  switch (op_) {
    case Opcode::Placeholder:
    case Opcode::Output:
      return true;
    case Opcode::CallFunction: {
      const FunctionInfo& f = target_.function().info();
      // In-place operators (x += y, x[i] = y) and in-place functions (torch.relu_) mutate their
      // input: removing them changes the result. torch 1.13 only knows its side-effectful list
      // and drops them.
      return f.impure || !f.inplace_template.empty() ||
             (f.name.size() > 1 && f.name.back() == '_' && f.name.compare(0, 2, "__") != 0);
    }
    case Opcode::CallModule: {
      GraphModule* gm = graph_->owning_module();
      if (!gm) return false;
      const std::string& path = target_.str();
      if (gm->attr_kind(path) != 'm') return false;
      return gm->get_submodule(path)->is_impure();
    }
    case Opcode::CallMethod: {
      // Tensor methods ending in '_' (x.mul_(2), x.add_(y)) work in place; 1.13 drops them
      // (a known bug), fxwasm keeps them.
      const std::string& m = target_.str();
      return m.size() > 1 && m.back() == '_' && m.compare(0, 2, "__") != 0;
    }
    case Opcode::GetAttr:
    case Opcode::Root:
      return false;
  }
  return false;
}

std::string Node::format_node(UsersToken token) const {
  std::string s;
  Out out(s);
  fx::format_node(*this, token, ArgumentPrinter{}, out);
  out.flush();
  return s;
}

void format_node(const Node& n, UsersToken token, const ArgumentPrinter& printer, Out& out) {
  const auto& type = n.type();
  const auto& args = n.args();
  auto head = [&] {  // "%name : [type ][#users=N] = "
    out.put('%');
    out.put(n.name());
    out.put(" : ");
    if (type && (n.op() != Opcode::Placeholder || !type->empty())) {
      out.put(*type);
      out.put(' ');
    }
    if (token == UsersToken::Hash) {
      out.put("[#users=");
    } else {
      out.put("[num_users=");
    }
    out.put_int(static_cast<int64_t>(n.users().size()));
    out.put("] = ");
  };
  switch (n.op()) {
    case Opcode::Placeholder:
      head();
      out.put("placeholder[target=");
      out.put(n.target().str());
      out.put(']');
      if (!args.empty()) {
        out.put("(default=");
        printer.str(args[0], out);
        out.put(')');
      }
      return;
    case Opcode::GetAttr:
      head();
      out.put("get_attr[target=");
      out.put(n.target().pretty());
      out.put(']');
      return;
    case Opcode::Output:
      out.put("return ");
      if (!args.empty()) printer.str(args[0], out);
      return;
    case Opcode::CallFunction:
    case Opcode::CallModule:
    case Opcode::CallMethod:
      head();
      out.put(std::string_view(opcode_name(n.op())));
      out.put("[target=");
      out.put(n.target().pretty());
      out.put("](args = ");
      printer.format_tuple(args, out);
      out.put(", kwargs = ");
      printer.format_kwargs(n.kwargs(), out);
      out.put(')');
      return;
    case Opcode::Root:
      return;
  }
}

}  // namespace fx
