// Python code generation: torch 1.13's CodeGen._gen_python_code, statement for statement.
#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "fx/graph.h"
#include "printer.h"

namespace fx {

namespace {

bool is_python_builtin_name(const std::string& name) {
  return Namespace::is_reserved(name) && !Namespace::is_keyword(name);
}

class CodeGenerator {
 public:
  CodeGenerator(const Graph& graph, const std::string& root_module, const CodegenOptions& opts)
      : graph_(graph), root_module_(root_module), opts_(opts) {
    printer_.name_node = [this](Node* n) { return node_repr(n); };
    // Pre-fill the globals with torch.fx's custom builtins.
    for (const char* b : {"inf", "nan", "NoneType", "torch", "device", "fx_pytree", "pytree"})
      add_global(b, b, /*is_builtin=*/true);
  }

  PythonCode run() {
    const std::vector<Node*> nodes = graph_.nodes().to_vector();
    // A reverse scan records each value's last user: values are freed after that statement.
    std::unordered_map<const Node*, std::vector<Node*>> user_to_last_uses;
    {
      std::unordered_map<const Node*, bool> seen;
      for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
        Node* user = *it;
        auto reg = [&](Node* n) {
          if (seen.emplace(n, true).second) user_to_last_uses[user].push_back(n);
        };
        for (const Argument& a : user->args()) a.for_each_node(reg);
        for (const auto& kv : user->kwargs()) kv.second.for_each_node(reg);
      }
    }

    for (Node* node : nodes) {
      if (opts_.verbose) append_stacktrace_summary(node);
      emit_node(node);
      // delete_unused_values
      if (node->op() == Opcode::Placeholder) continue;
      if (node->op() == Opcode::Output) {
        body_ += '\n';
        continue;
      }
      auto it = user_to_last_uses.find(node);
      if (it != user_to_last_uses.end() && !it->second.empty()) {
        body_ += ";  ";
        for (Node* n : it->second) {
          body_ += node_repr(n);
          body_ += " = ";
        }
        body_ += "None\n";
      } else {
        body_ += '\n';
      }
    }
    if (body_.empty()) body_ = "pass\n";

    std::string wrap_stmts;
    if (!wrapped_fns_.empty()) {
      const std::string wrap_name = add_global("torch.fx._symbolic_trace.wrap", "torch.fx._symbolic_trace.wrap", false);
      for (size_t i = 0; i < wrapped_fns_.size(); ++i) {
        if (i) wrap_stmts += '\n';
        wrap_stmts += wrap_name + "(\"" + wrapped_fns_[i] + "\")";
      }
    }

    // gen_fn_def: `self` first unless the first placeholder already is `self`.
    if (free_vars_.empty() || free_vars_[0] != "self") free_vars_.insert(free_vars_.begin(), "self");
    std::string prologue = "def forward(";
    for (size_t i = 0; i < free_vars_.size(); ++i) {
      if (i) prologue += ", ";
      prologue += free_vars_[i];
    }
    prologue += ")" + return_annotation_ + ":";

    // Indent every line of the body, including the empty one after the final newline.
    std::string code;
    code.reserve(body_.size() + body_.size() / 8 + 8);
    code += "    ";
    for (char c : body_) {
      code += c;
      if (c == '\n') code += "    ";
    }
    PythonCode result;
    result.src = "\n" + wrap_stmts + "\n\n" + prologue + "\n" + code;
    result.globals = std::move(globals_);
    return result;
  }

 private:
  std::string node_repr(Node* n) { return ns_.create_name(n->name(), n); }

  std::string repr(const Argument& a) { return printer_.repr(a); }

  // Registers a reference to something outside the graph (a function, a type) and returns the
  // name to use for it. torch objects keep their qualified name.
  std::string add_global(const std::string& name_hint, const std::string& key, bool is_builtin) {
    const std::string base = key.substr(0, key.find('.'));
    if ((base == "torch" && key != "torch" && key != "torch.device") || base == "onnx") return key;
    auto it = global_names_.find(key);
    if (it != global_names_.end()) return it->second;
    const void* obj = &global_names_.emplace(key, std::string()).first->first;
    std::string name = ns_.create_name(name_hint, obj, is_builtin ? &name_hint : nullptr);
    global_names_[key] = name;
    globals_.emplace_back(name, key);
    return name;
  }

  // _format_target: `self.a.b`, with `getattr(x, "0")` for atoms that are not identifiers
  // (and, unless reproducing 1.13's bug, for Python keywords).
  std::string format_target(const std::string& base, const std::string& target) const {
    std::string r = base;
    size_t start = 0;
    for (;;) {
      size_t dot = target.find('.', start);
      std::string e = target.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      bool attr_ok = py_is_identifier(e) && (opts_.torch113_bugs || !Namespace::is_keyword(e));
      if (attr_ok) {
        r += "." + e;
      } else if (opts_.torch113_bugs || (e.find('"') == std::string::npos && e.find('\\') == std::string::npos)) {
        r = "getattr(" + r + ", \"" + e + "\")";
      } else {
        r = "getattr(" + r + ", " + py_str_repr(e) + ")";
      }
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    return r;
  }

  std::string format_args(const std::vector<Argument>& args, size_t first, const Kwargs& kwargs) {
    std::string s;
    for (size_t i = first; i < args.size(); ++i) {
      if (i > first) s += ", ";
      printer_.repr(args[i], s);
    }
    bool need_sep = !s.empty();
    for (const auto& kv : kwargs) {
      if (need_sep) s += ", ";
      need_sep = true;
      s += kv.first + " = ";
      printer_.repr(kv.second, s);
    }
    return s;
  }

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

  void emit_node(Node* node) {
    const std::string ann = node->type() ? " : " + type_repr(*node->type()) : std::string();
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
        const std::string name = node_repr(node);
        if (raw_name != name) body_ += name + " = " + raw_name + "\n";
        return;
      }
      case Opcode::CallMethod: {
        if (args.empty())
          throw Error(ErrorKind::Value,
                      "call_method node '" + node->name() +
                          "' has no args: args[0] must be the object the method is called on",
                      node->name());
        body_ += node_repr(node) + ann + " = " + format_target(repr(args[0]), node->target().str()) +
                 "(" + format_args(args, 1, node->kwargs()) + ")";
        return;
      }
      case Opcode::CallFunction: {
        const FunctionInfo& fn = node->target().function().info();
        if (!fn.magic_template.empty()) {
          body_ += node_repr(node) + ann + " = " + apply_template(node, fn.magic_template, fn.name == "pow");
          return;
        }
        if (!fn.inplace_template.empty()) {
          body_ += apply_template(node, fn.inplace_template, false) + ";  " + node_repr(node) + ann +
                   " = " + repr(args.at(0));
          return;
        }
        std::string qualified;
        if (fn.module == "builtins") {
          qualified = fn.name;
        } else {
          qualified = fn.module;
          if (qualified.rfind("torch._ops", 0) == 0) qualified = "torch.ops" + qualified.substr(10);
          qualified += "." + fn.name;
        }
        const std::string global =
            add_global(qualified, fn.qualname, fn.module == "builtins");
        if (global == "getattr" && args.size() == 2 &&
            args[1].kind() == Argument::Kind::String && py_is_identifier(args[1].to_string())) {
          body_ += node_repr(node) + ann + " = " + format_target(repr(args[0]), args[1].to_string());
          return;
        }
        body_ += node_repr(node) + ann + " = " + global + "(" + format_args(args, 0, node->kwargs()) + ")";
        const Argument* wrapped = node->meta().find("is_wrapped");
        if (wrapped && *wrapped == Argument(true) &&
            std::find(wrapped_fns_.begin(), wrapped_fns_.end(), global) == wrapped_fns_.end())
          wrapped_fns_.push_back(global);
        return;
      }
      case Opcode::CallModule:
        body_ += node_repr(node) + ann + " = " + format_target(root_module_, node->target().str()) +
                 "(" + format_args(args, 0, node->kwargs()) + ")";
        return;
      case Opcode::GetAttr:
        body_ += node_repr(node) + ann + " = " + format_target(root_module_, node->target().str());
        return;
      case Opcode::Output:
        if (node->type()) return_annotation_ = " -> " + type_repr(*node->type());
        body_ += "return " + (args.empty() ? std::string("None") : repr(args[0]));
        return;
      case Opcode::Root: return;
    }
  }

  // Fills "{}" slots of an operator template with the reprs of the node's args.
  std::string apply_template(Node* node, const std::string& tmpl, bool is_pow) {
    const auto& args = node->args();
    std::string out;
    size_t slot = 0;
    for (size_t i = 0; i < tmpl.size(); ++i) {
      if (tmpl.compare(i, 2, "{}") == 0) {
        if (slot >= args.size())
          throw Error(ErrorKind::Value,
                      "call_function node '" + node->name() + "' (" +
                          node->target().pretty() + ") needs more positional args than the " +
                          std::to_string(args.size()) + " it has",
                      node->name());
        std::string operand = repr(args[slot]);
        // 1.13 prints operator.pow(-2, x) as `-2 ** x`, which Python parses as -(2 ** x).
        if (is_pow && slot == 0 && !opts_.torch113_bugs && !operand.empty() && operand[0] == '-')
          operand = "(" + operand + ")";
        out += operand;
        ++slot;
        ++i;
      } else {
        out += tmpl[i];
      }
    }
    return out;
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
            lines.push_back(trimmed.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
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
            if (num_end > num_start && l.compare(num_end, 5, ", in ") == 0 && num_end + 5 < l.size())
              summary.push_back("File: " + l.substr(6, q2 - 6) + ":" +
                                l.substr(num_start, num_end - num_start));
          }
          summary.push_back("code: " + strip(lines[idx + 1]));
        }
        std::string s;
        for (size_t i = 0; i < summary.size(); ++i) s += (i ? ", " : "") + summary[i];
        body_ += "\n# " + s + "\n";
      }
    } else if (!prev_stacktrace_ || !prev_stacktrace_->empty()) {
      prev_stacktrace_ = std::string();
      body_ += "\n# No stacktrace found for following nodes \n";
    }
  }

  const Graph& graph_;
  const std::string& root_module_;
  const CodegenOptions& opts_;
  Namespace ns_;
  ArgumentPrinter printer_;
  std::unordered_map<std::string, std::string> global_names_;
  std::vector<std::pair<std::string, std::string>> globals_;
  std::vector<std::string> free_vars_;
  std::vector<std::string> wrapped_fns_;
  std::string body_;
  std::string return_annotation_;
  std::optional<std::string> prev_stacktrace_;
};

}  // namespace

PythonCode Graph::python_code(const std::string& root_module, const CodegenOptions& options) const {
  return CodeGenerator(*this, root_module, options).run();
}

}  // namespace fx
