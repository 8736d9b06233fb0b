// to_folder: torch.fx 1.13's GraphModule.to_folder (torch/fx/graph_module.py), rewritten so that
// the package stands on its own: every submodule is built in __init__ (1.13 pickles all but seven
// layer classes into <name>.pt files), the weights load from next to module.py (1.13 writes an
// absolute path), and the globals the generated code names are imported (1.13 imports only its
// custom builtins, so `math_sqrt` & co. were undefined).
#include <algorithm>
#include <cctype>
#include <set>
#include <unordered_map>

#include "fx/namespace.h"
#include "fx/torch_codegen.h"
#include "torch_codegen/control_flow.h"

namespace fx::torch_codegen {

namespace {

// A torch.nn class that to_folder constructs as `torch.nn.<name>(<extra_repr>)`.
struct KnownClass {
  const char* name;
  // The tensors the class owns (as parameters / as buffers). A submodule of this type holding
  // any other tensor, or one of these as the wrong kind, cannot be reproduced.
  std::vector<const char*> params;
  std::vector<const char*> buffers;
  // Constructor arguments that extra_repr() prints without quotes (`padding_mode=reflect`).
  std::vector<const char*> string_kwargs;
  // Whether a call_module of it means something (containers like ModuleList are not callable).
  bool callable = true;
};

const std::vector<KnownClass>& known_classes() {
  // Every class here takes its own extra_repr() as constructor arguments (checked against
  // torch 1.13 by tests/torch_codegen/check_package.py through the tests).
  static const std::vector<KnownClass> table = [] {
    std::vector<KnownClass> t;
    const std::vector<const char*> wb = {"weight", "bias"};
    const std::vector<const char*> norm_buffers = {"running_mean", "running_var",
                                                   "num_batches_tracked"};
    for (const char* c :
         {"Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"})
      t.push_back({c, wb, {}, {"padding", "padding_mode"}, true});
    for (const char* c : {"Linear", "Bilinear", "LayerNorm", "GroupNorm"})
      t.push_back({c, wb, {}, {}, true});
    for (const char* c : {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d",
                          "InstanceNorm2d", "InstanceNorm3d"})
      t.push_back({c, wb, norm_buffers, {}, true});
    for (const char* c : {"Embedding", "PReLU"}) t.push_back({c, {"weight"}, {}, {}, true});
    // Recurrent layers of one layer (what lower() makes of an ONNX LSTM node), either direction.
    const std::vector<const char*> rnn = {
        "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",         "bias_hh_l0",
        "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse"};
    for (const char* c : {"LSTM", "GRU", "RNN"}) t.push_back({c, rnn, {}, {"nonlinearity"}, true});
    t.push_back({"Upsample", {}, {}, {"mode"}, true});
    for (const char* c : {"ReLU",
                          "ReLU6",
                          "LeakyReLU",
                          "ELU",
                          "SELU",
                          "CELU",
                          "GELU",
                          "SiLU",
                          "Mish",
                          "Sigmoid",
                          "Tanh",
                          "Hardsigmoid",
                          "Hardswish",
                          "Hardtanh",
                          "Softplus",
                          "Softsign",
                          "Softmax",
                          "LogSoftmax",
                          "Identity",
                          "Flatten",
                          "Unflatten",
                          "Dropout",
                          "Dropout1d",
                          "Dropout2d",
                          "Dropout3d",
                          "AlphaDropout",
                          "MaxPool1d",
                          "MaxPool2d",
                          "MaxPool3d",
                          "AvgPool1d",
                          "AvgPool2d",
                          "AvgPool3d",
                          "AdaptiveAvgPool1d",
                          "AdaptiveAvgPool2d",
                          "AdaptiveAvgPool3d",
                          "AdaptiveMaxPool1d",
                          "AdaptiveMaxPool2d",
                          "AdaptiveMaxPool3d",
                          "ZeroPad2d",
                          "ConstantPad1d",
                          "ConstantPad2d",
                          "ConstantPad3d",
                          "ReflectionPad1d",
                          "ReflectionPad2d",
                          "ReplicationPad1d",
                          "ReplicationPad2d",
                          "ReplicationPad3d",
                          "PixelShuffle",
                          "PixelUnshuffle",
                          "ChannelShuffle"})
      t.push_back({c, {}, {}, {}, true});
    // Containers: built empty, their children added one by one.
    t.push_back({"Sequential", {}, {}, {}, true});
    t.push_back({"ModuleList", {}, {}, {}, false});
    t.push_back({"ModuleDict", {}, {}, {}, false});
    std::sort(t.begin(), t.end(), [](const KnownClass& a, const KnownClass& b) {
      return std::string(a.name) < b.name;
    });
    return t;
  }();
  return table;
}

const KnownClass* find_class(const std::string& name) {
  for (const KnownClass& k : known_classes())
    if (name == k.name) return &k;
  return nullptr;
}

bool is_container(const KnownClass& k) {
  const std::string n = k.name;
  return n == "Sequential" || n == "ModuleList" || n == "ModuleDict";
}

// An atom usable as `x.atom` (identifiers that are not keywords).
bool plain(const std::string& atom) {
  return py_is_identifier(atom) && !Namespace::is_keyword(atom);
}

// Python string literal, single-quoted like repr().
std::string py_str(const std::string& s) {
  std::string o = "'";
  for (unsigned char c : s) {
    if (c == '\\' || c == '\'') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      o += "\\x";
      o += kHex[c >> 4];
      o += kHex[c & 15];
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "'";
}

std::string shape_list(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string torch_dtype(Dtype d) { return std::string("torch.") + dtype_name(d); }

bool is_floating(Dtype d) {
  return d == Dtype::Float32 || d == Dtype::Float64 || d == Dtype::Float16 || d == Dtype::BFloat16;
}

// extra_repr() with the values of `keys` quoted where torch prints a bare word
// (`padding_mode=reflect` -> `padding_mode='reflect'`).
std::string quote_string_kwargs(const std::string& repr, const std::vector<const char*>& keys) {
  std::string out = repr;
  for (const char* key : keys) {
    const std::string k = std::string(key) + "=";
    for (size_t pos = 0; (pos = out.find(k, pos)) != std::string::npos; pos += k.size()) {
      if (pos != 0 && out.compare(pos - 2, 2, ", ") != 0) continue;  // part of another name
      const size_t start = pos + k.size();
      size_t end = out.find(", ", start);
      if (end == std::string::npos) end = out.size();
      const std::string value = out.substr(start, end - start);
      if (plain(value) && value != "None" && value != "True" && value != "False")
        out.replace(start, value.size(), py_str(value));
    }
  }
  return out;
}

// The identifiers `code` names, except attribute names (`x.device`): which globals it uses.
std::set<std::string> names_used(const std::string& code) {
  std::set<std::string> names;
  for (size_t i = 0; i < code.size();) {
    const unsigned char c = code[i];
    if (std::isalpha(c) || c == '_') {
      size_t j = i;
      while (j < code.size() &&
             (std::isalnum(static_cast<unsigned char>(code[j])) || code[j] == '_'))
        ++j;
      if (i == 0 || code[i - 1] != '.') names.insert(code.substr(i, j - i));
      i = j;
    } else {
      ++i;
    }
  }
  return names;
}

// How module.py gets torch.fx's custom builtins (torch/fx/graph.py `_custom_builtins`).
const char* custom_builtin_import(const std::string& name) {
  static const std::pair<const char*, const char*> kImports[] = {
      {"inf", "from math import inf"},
      {"nan", "from math import nan"},
      {"NoneType", "NoneType = type(None)"},
      {"torch", "import torch"},
      {"device", "from torch import device"},
      {"fx_pytree", "import torch.fx._pytree as fx_pytree"},
      {"pytree", "import torch.utils._pytree as pytree"}};
  for (const auto& [n, imp] : kImports)
    if (name == n) return imp;
  return nullptr;
}

// Modules whose functions the package may import by name.
bool importable_module(const std::string& m) {
  static const std::set<std::string> kStd = {"builtins", "_operator",   "operator",  "math",
                                             "typing",   "collections", "functools", "itertools"};
  return kStd.count(m) || m == "torch" || m.rfind("torch.", 0) == 0;
}

// Adds `text` indented by `spaces`, leaving blank lines empty.
void append_indented(std::string& out, const std::string& text, int spaces) {
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    // Blank and whitespace-only lines stay empty (the generated code ends with one).
    if (text.find_first_not_of(' ', start) < nl)
      out.append(static_cast<size_t>(spaces), ' ').append(text, start, nl - start);
    out += '\n';
    start = nl + 1;
  }
}

// A submodule to_folder writes as a class of its own: lowered control flow and its bodies.
bool has_own_class(const Module& m) {
  return dynamic_cast<const ControlFlowModule*>(&m) || dynamic_cast<const GraphModule*>(&m);
}

void check_graph(const GraphModule& gm) {
  std::vector<std::string> onnx_nodes;
  for (Node* n : gm.graph().nodes()) {
    if (n->op() == Opcode::CallFunction) {
      const FunctionInfo& fn = n->target().function().info();
      if (fn.qualname.rfind("onnx.", 0) == 0) {
        onnx_nodes.push_back(n->name() + " (" + fn.qualname + ")");
      } else if (!importable_module(fn.module)) {
        throw Error(ErrorKind::Unsupported,
                    "to_folder: node `" + n->name() + "` calls " + fn.qualname + " from module `" +
                        fn.module + "`, which the generated package cannot import",
                    n->name());
      }
    } else if (n->op() == Opcode::CallModule) {
      const std::string& target = n->target().str();
      std::shared_ptr<Module> m = gm.get_submodule(target);
      if (dynamic_cast<const ControlFlowModule*>(m.get())) continue;
      const KnownClass* k = find_class(m->type_name());
      if (!k || !k->callable)
        throw Error(ErrorKind::Unsupported,
                    "to_folder: node `" + n->name() + "` calls submodule `" + target +
                        "` of type " + m->type_name() +
                        ", which is not a torch.nn layer to_folder knows how to build (see "
                        "fx::torch_codegen::known_module_types())",
                    n->name());
    }
  }
  if (!onnx_nodes.empty()) {
    std::string list;
    for (size_t i = 0; i < onnx_nodes.size() && i < 3; ++i) list += (i ? ", " : "") + onnx_nodes[i];
    if (onnx_nodes.size() > 3) list += ", ... (" + std::to_string(onnx_nodes.size()) + " in all)";
    throw Error(ErrorKind::Unsupported,
                "to_folder: the graph has onnx.* targets, which PyTorch cannot run: " + list +
                    ". Lower it to torch targets first (fx::torch_codegen::lower)",
                onnx_nodes.front().substr(0, onnx_nodes.front().find(' ')));
  }
}

}  // namespace

std::vector<std::string> known_module_types() {
  std::vector<std::string> names;
  for (const KnownClass& k : known_classes()) names.emplace_back(k.name);
  return names;
}

std::vector<PackageFile> to_folder(const GraphModule& gm, const std::string& module_name) {
  if (!plain(module_name))
    throw Error(ErrorKind::Value,
                "to_folder: module_name `" + module_name + "` is not a Python identifier");
  check_graph(gm);

  // ---- __init__: the submodule tree, walked in torch's state_dict order (pre-order, a
  // module's own tensors before its children), iteratively. A module reached again under a
  // second path (shared) is aliased there, and torch saves its tensors under both paths; the
  // walk does not descend into an alias, so it ends even if the tree has a cycle.
  std::vector<std::pair<std::string, const Tensor*>> state;
  // Submodules written as classes of their own (lowered control flow and its bodies), in the
  // order they are reached; each is walked like the root when its class is written.
  struct ClassJob {
    const Module* module;
    std::string class_name;
    std::string path;  // from the root, for the state_dict
  };
  std::vector<ClassJob> jobs;
  std::set<std::string> class_names = {module_name};
  auto class_for = [&](const Module& m, const std::string& path) {
    std::string base = dynamic_cast<const ControlFlowModule*>(&m) ? m.type_name() : "Body";
    base += "_";
    for (char c : path) base += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    std::string name = base;
    for (int i = 1; !class_names.insert(name).second; ++i) name = base + "_" + std::to_string(i);
    return name;
  };
  auto build_init = [&](const Module& top, const std::string& top_prefix) {
    std::string init;
    std::unordered_map<const Module*, std::string> first_path;
    // A container reached through an atom that is not an identifier ("layer1.0") gets a local
    // variable, so that its children read `layer1_0.conv1 = ...`, not get_submodule calls.
    std::unordered_map<std::string, std::string> local_of;
    std::set<std::string> local_names = {"self", "torch", "os", "state_dict", "super"};
    auto new_local = [&](const std::string& path) {
      std::string base;
      for (char c : path) base += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
      if (std::isdigit(static_cast<unsigned char>(base[0]))) base = "m_" + base;
      if (Namespace::is_keyword(base)) base += '_';
      std::string name = base;
      for (int i = 1; !local_names.insert(name).second; ++i) name = base + "_" + std::to_string(i);
      local_of.emplace(path, name);
      return name;
    };
    // The Python expression of the module at `path`, atom by atom from the nearest local.
    auto expr_of = [&](const std::string& path) {
      std::string e = "self";
      for (size_t s = 0; s < path.size();) {
        size_t dot = path.find('.', s);
        if (dot == std::string::npos) dot = path.size();
        const std::string atom = path.substr(s, dot - s);
        if (auto l = local_of.find(path.substr(0, dot)); l != local_of.end())
          e = l->second;
        else if (plain(atom))
          e += "." + atom;
        else
          e = "self.get_submodule(" + py_str(path.substr(0, dot)) + ")";
        s = dot + 1;
      }
      return e;
    };
    auto assign = [&](const std::string& parent, const std::string& atom,
                      const std::string& value) {
      const std::string p = expr_of(parent);
      init += plain(atom) ? p + "." + atom + " = " + value + "\n"
                          : p + ".add_module(" + py_str(atom) + ", " + value + ")\n";
    };
    struct Item {
      std::string path;
      const Module* module;
    };
    std::vector<Item> stack{{"", &top}};
    while (!stack.empty()) {
      Item it = stack.back();
      stack.pop_back();
      const Module& m = *it.module;
      const std::string prefix = it.path.empty() ? "" : it.path + ".";
      const size_t dot = it.path.rfind('.');
      const std::string parent = dot == std::string::npos ? "" : it.path.substr(0, dot);
      const std::string atom = dot == std::string::npos ? it.path : it.path.substr(dot + 1);

      auto seen = first_path.find(&m);
      const bool alias = seen != first_path.end();
      if (!alias) first_path.emplace(&m, it.path);
      const KnownClass* k = it.path.empty() ? nullptr : find_class(m.type_name());
      const bool layer = k && !is_container(*k);
      if (alias) {
        assign(parent, atom, expr_of(seen->second));
        for (const auto& [sub, sm] : m.named_modules()) {
          const std::string p = prefix + (sub.empty() ? "" : sub + ".");
          for (const auto& [name, t] : sm->parameters())
            state.emplace_back(top_prefix + p + name, &t);
          for (const auto& [name, t] : sm->buffers()) state.emplace_back(top_prefix + p + name, &t);
        }
        continue;
      }
      if (!it.path.empty() && has_own_class(m)) {
        const std::string cls = class_for(m, top_prefix + it.path);
        assign(parent, atom, cls + "()");
        for (const auto& [sub, sm] : m.named_modules()) {
          const std::string p = prefix + (sub.empty() ? "" : sub + ".");
          for (const auto& [name, t] : sm->parameters())
            state.emplace_back(top_prefix + p + name, &t);
          for (const auto& [name, t] : sm->buffers()) state.emplace_back(top_prefix + p + name, &t);
        }
        jobs.push_back({&m, cls, top_prefix + it.path});
        continue;
      }
      if (!it.path.empty()) {
        if (layer) {
          // The layer's tensors must be the ones its class makes, of the kind it makes them.
          std::set<Dtype> float_dtypes;
          auto check = [&](const std::vector<std::pair<std::string, Tensor>>& tensors,
                           const std::vector<const char*>& allowed, const char* kind) {
            for (const auto& kv : tensors) {
              // (No structured binding: C++17 lambdas cannot capture one; clang refuses it.)
              const std::string& name = kv.first;
              if (std::none_of(allowed.begin(), allowed.end(),
                               [&](const char* a) { return name == a; }))
                throw Error(ErrorKind::Unsupported,
                            "to_folder: submodule `" + it.path + "` of type torch.nn." + k->name +
                                " has " + kind + " `" + name + "`, which torch.nn." + k->name +
                                " does not have as a " + kind,
                            it.path);
              if (is_floating(kv.second.dtype)) float_dtypes.insert(kv.second.dtype);
            }
          };
          check(m.parameters(), k->params, "parameter");
          check(m.buffers(), k->buffers, "buffer");
          if (float_dtypes.size() > 1)
            throw Error(ErrorKind::Unsupported,
                        "to_folder: submodule `" + it.path + "` of type torch.nn." + k->name +
                            " mixes floating-point dtypes, which its constructor cannot make",
                        it.path);
          std::string args = quote_string_kwargs(m.extra_repr(), k->string_kwargs);
          if (!float_dtypes.empty() && *float_dtypes.begin() != Dtype::Float32)
            args += (args.empty() ? "" : ", ") + std::string("dtype=") +
                    torch_dtype(*float_dtypes.begin());
          assign(parent, atom, std::string("torch.nn.") + k->name + "(" + args + ")");
        } else {
          const std::string ctor =
              k ? std::string("torch.nn.") + k->name + "()" : std::string("torch.nn.Module()");
          if (plain(atom)) {
            assign(parent, atom, ctor);
          } else {
            const std::string local = new_local(it.path);
            init += local + " = " + ctor + "\n";
            assign(parent, atom, local);
          }
        }
      }
      // Tensors: a layer's come from its constructor; elsewhere they are created empty (the
      // state_dict fills them) with the shape and dtype they will hold.
      const std::string self = expr_of(it.path);
      for (const auto& [name, t] : m.parameters()) {
        state.emplace_back(top_prefix + prefix + name, &t);
        if (layer) continue;
        const std::string value = "torch.nn.Parameter(torch.empty(" + shape_list(t.shape) +
                                  ", dtype=" + torch_dtype(t.dtype) + "))";
        init += plain(name) ? self + "." + name + " = " + value + "\n"
                            : self + ".register_parameter(" + py_str(name) + ", " + value + ")\n";
      }
      for (const auto& [name, t] : m.buffers()) {
        state.emplace_back(top_prefix + prefix + name, &t);
        if (layer) continue;
        init += self + ".register_buffer(" + py_str(name) + ", torch.empty(" + shape_list(t.shape) +
                ", dtype=" + torch_dtype(t.dtype) + "))\n";
      }
      const auto& children = m.children();
      for (auto c = children.rbegin(); c != children.rend(); ++c)
        stack.push_back({prefix + c->first, c->second.get()});
    }
    return init;
  };
  const std::string init = build_init(gm, "");

  // ---- forward and its globals, for the root and for every GraphModule written as a class.
  std::set<std::string> imports = {"import os", "import torch"};
  std::string aliases, prelude;
  std::set<std::string> taken = {"os", "torch"};  // names module.py defines before the classes
  auto forward_of = [&](const GraphModule& g) {
    const PythonCode& py = g.python_code();
    // Statements before `def forward` (torch.fx.wrap registrations) belong at module level.
    const size_t def = py.src.find("def forward");
    FX_CHECK(def != std::string::npos, "generated code has no forward");
    std::string pre = py.src.substr(0, def);
    while (!pre.empty() && (pre.front() == '\n' || pre.front() == ' ')) pre.erase(pre.begin());
    if (!pre.empty() && prelude.find(pre) == std::string::npos) prelude += pre;
    // A module set to verbose codegen carries stack-trace comments; the package reads without
    // them.
    std::string forward;
    for (size_t start = def; start < py.src.size();) {
      size_t nl = py.src.find('\n', start);
      if (nl == std::string::npos) nl = py.src.size();
      const std::string line = py.src.substr(start, nl - start);
      const size_t first = line.find_first_not_of(' ');
      if (first == std::string::npos || (line.compare(first, 7, "# File:") != 0 &&
                                         line.compare(first, 21, "# No stacktrace found") != 0))
        forward += line + "\n";
      start = nl + 1;
    }
    const std::set<std::string> used = names_used(py.src);
    for (const auto& [name, key] : py.globals) {
      if (!used.count(name)) continue;
      taken.insert(name);
      if (const char* imp = custom_builtin_import(name)) {
        // `import torch` is there anyway; the others are one line each.
        const std::string line = imp;
        if (line.rfind("import ", 0) == 0 || line.rfind("from ", 0) == 0)
          imports.insert(line);
        else if (aliases.find(line + "\n") == std::string::npos)
          aliases += line + "\n";
        continue;
      }
      const size_t last = key.rfind('.');
      if (last == std::string::npos) continue;  // a builtin by its own name
      const std::string module = key.substr(0, last);
      std::string alias;
      if (module == "builtins") {
        if (name != key.substr(last + 1)) alias = name + " = " + key.substr(last + 1) + "\n";
      } else {
        imports.insert("import " + module);
        if (name != key) alias = name + " = " + key + "\n";
      }
      if (!alias.empty() && aliases.find(alias) == std::string::npos) aliases += alias;
    }
    return forward;
  };
  const std::string forward = forward_of(gm);

  // Classes of the control-flow modules and their bodies, in the order reached (a worklist:
  // bodies nest as deep as the model says).
  std::string classes;
  std::vector<std::string> control_flow_classes;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const ClassJob job = jobs[j];  // (jobs grows while this one is written)
    std::string c = "\n\nclass " + job.class_name + "(torch.nn.Module):\n";
    if (auto* cf = dynamic_cast<const ControlFlowModule*>(job.module)) {
      control_flow_classes.push_back(job.class_name);
      c += "    \"\"\"ONNX " + cf->type_name() +
           ": Python control flow over its lowered bodies.\"\"\"\n\n";
      c += "    def __init__(self):\n        super().__init__()\n";
      append_indented(c, build_init(*cf, job.path + "."), 8);
      c += "\n";
      append_indented(c, cf->forward_source(), 4);
    } else {
      const auto* body = dynamic_cast<const GraphModule*>(job.module);
      check_graph(*body);
      const std::string init_body = build_init(*body, job.path + ".");
      c += "    def __init__(self):\n        super().__init__()\n";
      append_indented(c, init_body, 8);
      c += "\n";
      append_indented(c, forward_of(*body), 4);
    }
    while (!c.empty() && c.back() == '\n') c.pop_back();
    classes += c + "\n";
  }

  for (const std::string& line : imports)
    if (line.rfind("import ", 0) == 0) taken.insert(line.substr(7, line.find('.') - 7));
  if (taken.count(module_name))
    throw Error(ErrorKind::Value, "to_folder: module_name `" + module_name +
                                      "` would hide a name module.py imports; choose another");
  if (!control_flow_classes.empty()) imports.insert("import torch.fx");

  std::string src = "# Generated by fxwasm's to_folder from a torch.fx GraphModule.\n";
  for (const std::string& line : imports)
    if (line.rfind("import ", 0) == 0) src += line + "\n";
  for (const std::string& line : imports)
    if (line.rfind("from ", 0) == 0) src += line + "\n";
  src += "\n__all__ = [" + py_str(module_name) +
         (control_flow_classes.empty() ? "" : ", 'Tracer', 'symbolic_trace'") + "]\n";
  if (!aliases.empty()) src += "\n" + aliases;
  if (!prelude.empty()) src += "\n" + prelude;
  src += "\n\nclass " + module_name + "(torch.nn.Module):\n";
  src += "    def __init__(self):\n        super().__init__()\n";
  append_indented(src, init, 8);
  src +=
      "        state_dict = os.path.join(os.path.dirname(os.path.abspath(__file__)), "
      "'state_dict.pt')\n";
  src += "        self.load_state_dict(torch.load(state_dict), strict=True)\n\n";
  append_indented(src, forward, 4);
  while (src.size() > 1 && src[src.size() - 1] == '\n' && src[src.size() - 2] == '\n')
    src.pop_back();
  src += classes;
  if (!control_flow_classes.empty()) {
    // torch.fx's default tracer would trace into the control flow (and fail on `if` of a
    // Proxy): the package's tracer keeps those modules as leaves, so the rest traces.
    std::string tuple;
    for (const std::string& c : control_flow_classes) tuple += c + ", ";
    src += "\n\n_CONTROL_FLOW = (" + tuple + ")\n\n\n";
    src +=
        "class Tracer(torch.fx.Tracer):\n"
        "    \"\"\"torch.fx.Tracer that keeps this package's If/Loop/Scan modules as "
        "leaves.\"\"\"\n\n"
        "    def is_leaf_module(self, m, module_qualified_name):\n"
        "        return isinstance(m, _CONTROL_FLOW) or super().is_leaf_module(m, "
        "module_qualified_name)\n\n\n"
        "def symbolic_trace(root):\n"
        "    \"\"\"torch.fx.symbolic_trace of `root` with this package's Tracer.\"\"\"\n"
        "    return torch.fx.GraphModule(root, Tracer().trace(root), root.__class__.__name__)\n";
  }
  while (src.size() > 1 && src[src.size() - 1] == '\n' && src[src.size() - 2] == '\n')
    src.pop_back();

  std::vector<PackageFile> files;
  files.push_back({"module.py", std::vector<uint8_t>(src.begin(), src.end())});
  const std::string init_py = "from .module import *\n";
  files.push_back({"__init__.py", std::vector<uint8_t>(init_py.begin(), init_py.end())});
  files.push_back({"state_dict.pt", save_state_dict(state)});
  return files;
}

}  // namespace fx::torch_codegen
