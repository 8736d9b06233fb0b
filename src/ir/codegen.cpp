// Python code generation: torch 1.13's CodeGen._gen_python_code, statement for statement.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <deque>
#include <unordered_map>

#include "fx/graph.h"
#include "ir/printer.h"

namespace fx {

namespace {

const std::string kNoAnnotation;

bool is_python_builtin_name(const std::string& name) {
  return Namespace::is_reserved(name) && !Namespace::is_keyword(name);
}

class CodeGenerator {
 public:
  CodeGenerator(const Graph& graph, const std::string& root_module, const CodegenOptions& opts)
      : graph_(graph), root_module_(root_module), opts_(opts), out_(body_) {
    printer_.ctx = this;
    printer_.name_node = [](void* ctx, Node* n) -> const std::string& {
      return static_cast<CodeGenerator*>(ctx)->node_repr(n);
    };
    names_.assign(graph.id_bound(), nullptr);
    // Pre-fill the globals with torch.fx's custom builtins.
    for (const char* b : {"inf", "nan", "NoneType", "torch", "device", "fx_pytree", "pytree"})
      add_global(b, b, /*is_builtin=*/true);
  }

  PythonCode run() {
    const std::vector<Node*> nodes = graph_.nodes().to_vector();
    // A reverse scan records each value's last user (torch.fx's user_to_last_uses): a value is
    // freed after the statement of its last user, in the order that user's args name them.
    const uint64_t bound = graph_.id_bound();
    last_user_.assign(bound, nullptr);
    freed_.assign(bound, 0);
    record_last_uses(nodes);

    emit_body(nodes);
    out_.flush();
    if (body_.empty()) body_ = "pass\n";

    std::string wrap_stmts;
    if (!wrapped_fns_.empty()) {
      const std::string wrap_name =
          add_global("torch.fx._symbolic_trace.wrap", "torch.fx._symbolic_trace.wrap", false);
      for (size_t i = 0; i < wrapped_fns_.size(); ++i) {
        if (i) wrap_stmts += '\n';
        wrap_stmts += wrap_name + "(\"" + wrapped_fns_[i] + "\")";
      }
    }

    // gen_fn_def: `self` first unless the first placeholder already is `self`.
    if (free_vars_.empty() || free_vars_[0] != "self")
      free_vars_.insert(free_vars_.begin(), "self");
    std::string prologue = "def forward(";
    for (size_t i = 0; i < free_vars_.size(); ++i) {
      if (i) prologue += ", ";
      prologue += free_vars_[i];
    }
    prologue += ")" + return_annotation_ + ":";

    // Indent every line of the body, including the empty one after the final newline.
    PythonCode result;
    std::string& code = result.src;
    code.reserve(body_.size() + body_.size() / 8 + wrap_stmts.size() + prologue.size() + 16);
    {
      Out o(code);
      o.put('\n');
      o.put(wrap_stmts);
      o.put("\n\n");
      o.put(prologue);
      o.put("\n    ");
      const char* p = body_.data();
      const char* end = p + body_.size();
      while (p < end) {
        const char* nl =
            static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
        if (!nl) {
          o.put(p, static_cast<size_t>(end - p));
          break;
        }
        o.put(p, static_cast<size_t>(nl - p));
        o.put("\n    ");
        p = nl + 1;
      }
    }
    result.globals = std::move(globals_);
    return result;
  }

 private:
  // Fills last_user_ (and foreign_last_user_) by a reverse scan. Like emit_body, a frame
  // without destructors.
  void record_last_uses(const std::vector<Node*>& nodes) {
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      Node* user = *it;
      for_each_input(user, [&](Node* n) {
        if (!local(n)) {
          foreign_last_user_.emplace(n, user);
        } else if (!last_user_[n->id()]) {
          last_user_[n->id()] = user;
        }
      });
    }
  }

  // The statements of the body.
  void emit_body(const std::vector<Node*>& nodes) {
    for (Node* node : nodes) {
      if (opts_.verbose) append_stacktrace_summary(node);
      emit_node(node);
      // delete_unused_values
      if (node->op() == Opcode::Placeholder) continue;
      if (node->op() == Opcode::Output) {
        out_.put('\n');
        continue;
      }
      bool any = false;
      for_each_input(node, [&](Node* n) {
        if (!local(n)) {
          auto f = foreign_last_user_.find(n);
          if (f == foreign_last_user_.end() || f->second != node) return;
          foreign_last_user_.erase(f);
        } else {
          if (last_user_[n->id()] != node || freed_[n->id()]) return;
          freed_[n->id()] = 1;
        }
        out_.put(any ? " = " : ";  ");
        out_.put(node_repr(n));
        any = true;
      });
      if (any) out_.put(" = None");
      out_.put('\n');
    }
  }

  bool local(const Node* n) const { return &n->graph() == &graph_ && n->id() < names_.size(); }

  // torch.fx names every node through the code's namespace (create_name(node.name, node)).
  // A graph's node names are already unique, legal and canonical (the graph's namespace made
  // them), so that call returns the node's own name unless a global took it first. We only
  // look the name up, and register it in the namespace lazily (flush_pending) before the next
  // name the namespace itself has to create: the set of used names, and so every name
  // produced, is the same as with eager registration.
  void flush_pending() {
    for (const std::string* name : pending_) ns_.create_name(*name);
    pending_.clear();
  }
  std::string create_name(const std::string& candidate, const void* obj = nullptr,
                          const std::string* builtin = nullptr) {
    flush_pending();
    return ns_.create_name(candidate, obj, builtin);
  }

  // map_arg order over args, then kwargs.
  template <class F>
  static void for_each_input(const Node* n, F&& f) {
    for (const Argument& a : n->args()) a.for_each_node(f);
    for (const auto& kv : n->kwargs()) kv.second.for_each_node(f);
  }

  const std::string& node_repr(Node* n) {
    if (local(n)) {
      const std::string*& slot = names_[n->id()];
      if (!slot) {
        if (!ns_.is_used(n->name())) {
          slot = &n->name();
          pending_.push_back(slot);
        } else {
          slot = &renamed_.emplace_back(create_name(n->name()));
        }
      }
      return *slot;
    }
    auto it = foreign_names_.find(n);
    if (it == foreign_names_.end()) it = foreign_names_.emplace(n, create_name(n->name())).first;
    return it->second;
  }

  // Registers a reference to something outside the graph (a function, a type) and returns the
  // name to use for it. torch objects keep their qualified name.
  std::string add_global(const std::string& name_hint, const std::string& key, bool is_builtin) {
    const std::string_view base = std::string_view(key).substr(0, key.find('.'));
    if ((base == "torch" && key != "torch" && key != "torch.device") || base == "onnx") return key;
    auto it = global_names_.find(key);
    if (it != global_names_.end()) return it->second;
    const void* obj = &global_names_.emplace(key, std::string()).first->first;
    std::string name = create_name(name_hint, obj, is_builtin ? &name_hint : nullptr);
    global_names_[key] = name;
    globals_.emplace_back(name, key);
    return name;
  }

  // The global a call_function target is called through (add_global of its qualified name),
  // resolved once per function.
  const std::string& function_global(const FunctionInfo& fn) {
    auto it = fn_globals_.find(&fn);
    if (it != fn_globals_.end()) return it->second;
    std::string qualified;
    if (fn.module == "builtins") {
      qualified = fn.name;
    } else {
      qualified = fn.module;
      if (qualified.rfind("torch._ops", 0) == 0) qualified = "torch.ops" + qualified.substr(10);
      qualified += "." + fn.name;
    }
    return fn_globals_.emplace(&fn, add_global(qualified, fn.qualname, fn.module == "builtins"))
        .first->second;
  }

  // _format_target: `self.a.b`, with `getattr(x, "0")` for atoms that are not identifiers
  // (and, unless reproducing 1.13's bug, for Python keywords).
  bool plain_attr(std::string_view e) const {
    // Python keywords are at most 8 characters long.
    return py_is_identifier(e) &&
           (opts_.torch113_bugs || e.size() > 8 || !Namespace::is_keyword(std::string(e)));
  }
  void put_target(std::string_view base, const std::string& target) {
    bool all_plain = true;
    for (size_t start = 0;;) {
      size_t dot = target.find('.', start);
      if (!plain_attr(std::string_view(target).substr(
              start, dot == std::string::npos ? std::string::npos : dot - start))) {
        all_plain = false;
        break;
      }
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    if (all_plain) {
      out_.put(base);
      out_.put('.');
      out_.put(target);
      return;
    }
    out_.put(format_target(std::string(base), target));
  }
  std::string format_target(const std::string& base, const std::string& target) const {
    std::string r = base;
    size_t start = 0;
    for (;;) {
      size_t dot = target.find('.', start);
      std::string e =
          target.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (plain_attr(e)) {
        r += "." + e;
      } else if (opts_.torch113_bugs ||
                 (e.find('"') == std::string::npos && e.find('\\') == std::string::npos)) {
        r = "getattr(" + r + ", \"" + e + "\")";
      } else {
        r = "getattr(" + r + ", " + py_str_repr(e) + ")";
      }
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    return r;
  }

  void put_args(const std::vector<Argument>& args, size_t first, const Kwargs& kwargs) {
    bool need_sep = false;
    for (size_t i = first; i < args.size(); ++i) {
      if (need_sep) out_.put(", ");
      need_sep = true;
      printer_.repr(args[i], out_);
    }
    for (const auto& kv : kwargs) {
      if (need_sep) out_.put(", ");
      need_sep = true;
      out_.put(kv.first);
      out_.put(" = ");
      printer_.repr(kv.second, out_);
    }
  }

  std::string repr(const Argument& a) { return printer_.repr(a); }

  // type_repr over the repr form of a type annotation: "typing.List[torch.Tensor]" becomes
  // "typing_List[torch.Tensor]", generic arguments joined with ',' (no space) as in 1.13.
  std::string type_repr(const std::string& t) {
    size_t pos = 0;
    return type_repr_at(t, pos);
  }
  std::string type_repr_at(const std::string& t, size_t& pos) {
    while (pos < t.size() && t[pos] == ' ') ++pos;
    if (t.compare(pos, 2, "()") == 0) {
      pos += 2;
      return "()";
    }
    size_t start = pos;
    while (pos < t.size() && t[pos] != '[' && t[pos] != ']' && t[pos] != ',') ++pos;
    std::string name = t.substr(start, pos - start);
    while (!name.empty() && name.back() == ' ') name.pop_back();
    std::string origin = add_global(name, name, is_python_builtin_name(name));
    if (pos < t.size() && t[pos] == '[') {
      ++pos;
      std::string out = origin + "[";
      bool first = true;
      while (pos < t.size() && t[pos] != ']') {
        if (!first) out += ",";
        first = false;
        out += type_repr_at(t, pos);
        while (pos < t.size() && (t[pos] == ' ' || t[pos] == ',')) ++pos;
      }
      ++pos;  // ']'
      return out + "]";
    }
    return origin;
  }

  // "name[ : type] = "
  void put_lhs(Node* node, const std::string& ann) {
    out_.put(node_repr(node));
    out_.put(ann);
    out_.put(" = ");
  }

  void emit_node(Node* node) {
    // The annotation is resolved first: its globals are named before the node, as in 1.13.
    if (node->type()) {
      emit_node(node, " : " + type_repr(*node->type()));
    } else {
      emit_node(node, kNoAnnotation);
    }
  }
  void emit_node(Node* node, const std::string& ann) {
    const auto& args = node->args();
    switch (node->op()) {
      case Opcode::Placeholder: {
        const std::string& target = node->target().str();
        std::string fv = target + ann;
        if (!args.empty()) fv += " = " + repr(args[0]);
        free_vars_.push_back(std::move(fv));
        std::string raw_name;
        for (char c : target)
          if (c != '*') raw_name += c;
        const std::string& name = node_repr(node);
        if (raw_name != name) {
          out_.put(name);
          out_.put(" = ");
          out_.put(raw_name);
          out_.put('\n');
        }
        return;
      }
      case Opcode::CallMethod: {
        if (args.empty())
          throw Error(ErrorKind::Value,
                      "call_method node '" + node->name() +
                          "' has no args: args[0] must be the object the method is called on",
                      node->name());
        put_lhs(node, ann);
        put_target(repr(args[0]), node->target().str());
        out_.put('(');
        put_args(args, 1, node->kwargs());
        out_.put(')');
        return;
      }
      case Opcode::CallFunction: {
        const FunctionInfo& fn = node->target().function().info();
        if (!fn.magic_template.empty()) {
          put_lhs(node, ann);
          put_template(node, fn.magic_template, fn.name == "pow");
          return;
        }
        if (!fn.inplace_template.empty()) {
          put_template(node, fn.inplace_template, false);
          out_.put(";  ");
          put_lhs(node, ann);
          printer_.repr(args.at(0), out_);
          return;
        }
        const std::string& global = function_global(fn);
        if (global == "getattr" && args.size() == 2 && args[1].kind() == Argument::Kind::String &&
            py_is_identifier(args[1].to_string())) {
          put_lhs(node, ann);
          put_target(repr(args[0]), args[1].to_string());
          return;
        }
        put_lhs(node, ann);
        out_.put(global);
        out_.put('(');
        put_args(args, 0, node->kwargs());
        out_.put(')');
        // Through a const node: a read must not bump the graph's version (Graph::version()).
        const Argument* wrapped = static_cast<const Node*>(node)->meta().find("is_wrapped");
        if (wrapped && *wrapped == Argument(true) &&
            std::find(wrapped_fns_.begin(), wrapped_fns_.end(), global) == wrapped_fns_.end())
          wrapped_fns_.push_back(global);
        return;
      }
      case Opcode::CallModule:
        put_lhs(node, ann);
        put_target(root_module_, node->target().str());
        out_.put('(');
        put_args(args, 0, node->kwargs());
        out_.put(')');
        return;
      case Opcode::GetAttr:
        put_lhs(node, ann);
        put_target(root_module_, node->target().str());
        return;
      case Opcode::Output:
        if (node->type()) return_annotation_ = " -> " + type_repr(*node->type());
        out_.put("return ");
        if (args.empty()) {
          out_.put("None");
        } else {
          printer_.repr(args[0], out_);
        }
        return;
      case Opcode::Root:
        return;
    }
  }

  // Fills "{}" slots of an operator template with the reprs of the node's args.
  void put_template(Node* node, const std::string& tmpl, bool is_pow) {
    const auto& args = node->args();
    size_t slot = 0;
    for (size_t i = 0; i < tmpl.size(); ++i) {
      if (tmpl[i] == '{' && i + 1 < tmpl.size() && tmpl[i + 1] == '}') {
        if (slot >= args.size())
          throw Error(ErrorKind::Value,
                      "call_function node '" + node->name() + "' (" + node->target().pretty() +
                          ") needs more positional args than the " + std::to_string(args.size()) +
                          " it has",
                      node->name());
        if (is_pow && slot == 0 && !opts_.torch113_bugs) {
          // 1.13 prints operator.pow(-2, x) as `-2 ** x`, which Python parses as -(2 ** x).
          std::string operand = repr(args[slot]);
          if (!operand.empty() && operand[0] == '-') operand = "(" + operand + ")";
          out_.put(operand);
        } else {
          printer_.repr(args[slot], out_);
        }
        ++slot;
        ++i;
      } else {
        out_.put(tmpl[i]);
      }
    }
  }

  // The `# File: ...` comments of verbose mode (print_readable).
  void append_stacktrace_summary(Node* node) {
    if (node->op() == Opcode::Placeholder || node->op() == Opcode::Output) return;
    std::optional<std::string> st = node->stack_trace();
    if (st && !st->empty()) {
      if (!prev_stacktrace_ || *st != *prev_stacktrace_) {
        prev_stacktrace_ = *st;
        std::vector<std::string> lines;
        {
          std::string trimmed = *st;
          const char* ws = " \t\n\r\f\v";
          size_t b = trimmed.find_first_not_of(ws), e = trimmed.find_last_not_of(ws);
          trimmed = b == std::string::npos ? "" : trimmed.substr(b, e - b + 1);
          size_t start = 0;
          for (;;) {
            size_t nl = trimmed.find('\n', start);
            lines.push_back(
                trimmed.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
            if (nl == std::string::npos) break;
            start = nl + 1;
          }
        }
        auto strip = [](const std::string& s) {
          const char* ws = " \t\n\r\f\v";
          size_t b = s.find_first_not_of(ws), e = s.find_last_not_of(ws);
          return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
        };
        size_t idx = 0;
        std::vector<std::string> context;
        while (idx < lines.size()) {
          std::string line = strip(lines[idx]);
          if (line.rfind("File ", 0) == 0) break;
          context.push_back(line);
          ++idx;
        }
        std::vector<std::string> summary;
        if (!context.empty()) {
          std::string c;
          for (size_t i = 0; i < context.size(); ++i) c += (i ? ", " : "") + context[i];
          summary.push_back(c);
        }
        if (idx + 1 < lines.size()) {
          // ^File "(.+)", line (\d+), in (.+)$
          std::string l = strip(lines[idx]);
          size_t q1 = l.find('"');
          size_t q2 = l.find("\", line ", q1 == std::string::npos ? 0 : q1 + 1);
          if (l.rfind("File \"", 0) == 0 && q2 != std::string::npos) {
            size_t num_start = q2 + 8, num_end = num_start;
            while (num_end < l.size() && isdigit(static_cast<unsigned char>(l[num_end]))) ++num_end;
            if (num_end > num_start && l.compare(num_end, 5, ", in ") == 0 &&
                num_end + 5 < l.size())
              summary.push_back("File: " + l.substr(6, q2 - 6) + ":" +
                                l.substr(num_start, num_end - num_start));
          }
          summary.push_back("code: " + strip(lines[idx + 1]));
        }
        std::string s;
        for (size_t i = 0; i < summary.size(); ++i) s += (i ? ", " : "") + summary[i];
        out_.put("\n# ");
        out_.put(s);
        out_.put('\n');
      }
    } else if (!prev_stacktrace_ || !prev_stacktrace_->empty()) {
      prev_stacktrace_ = std::string();
      out_.put("\n# No stacktrace found for following nodes \n");
    }
  }

  const Graph& graph_;
  const std::string& root_module_;
  const CodegenOptions& opts_;
  std::string body_;
  Out out_;  // writes body_
  Namespace ns_;
  ArgumentPrinter printer_;
  // Names in the code's namespace, by node id (nullptr until named; the node's own name or one
  // of renamed_), pending_ registration in ns_, and names of nodes of
  // other graphs (a graph that fails lint still prints).
  std::vector<const std::string*> names_;
  std::deque<std::string> renamed_;
  std::vector<const std::string*> pending_;
  std::unordered_map<const Node*, std::string> foreign_names_;
  std::vector<Node*> last_user_;  // by node id
  std::vector<char> freed_;       // by node id
  std::unordered_map<const Node*, Node*> foreign_last_user_;
  std::unordered_map<const FunctionInfo*, std::string> fn_globals_;
  std::unordered_map<std::string, std::string> global_names_;
  std::vector<std::pair<std::string, std::string>> globals_;
  std::vector<std::string> free_vars_;
  std::vector<std::string> wrapped_fns_;
  std::string return_annotation_;
  std::optional<std::string> prev_stacktrace_;
};

}  // namespace

PythonCode Graph::python_code(const std::string& root_module, const CodegenOptions& options) const {
  return CodeGenerator(*this, root_module, options).run();
}

}  // namespace fx
