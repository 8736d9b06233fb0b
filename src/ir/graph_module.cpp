#include "fx/graph_module.h"

#include <atomic>
#include <string_view>
#include <unordered_set>

namespace fx {

namespace {

std::vector<std::string> split_dots(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t dot = s.find('.', start);
    out.push_back(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) return out;
    start = dot + 1;
  }
}

// nn.Module's _addindent: indent every line but the first.
std::string add_indent(const std::string& s, int n) {
  if (s.find('\n') == std::string::npos) return s;
  std::string out;
  const std::string pad(n, ' ');
  for (char c : s) {
    out += c;
    if (c == '\n') out += pad;
  }
  return out;
}

template <class V>
V* find_named(std::vector<std::pair<std::string, V>>& v, const std::string& name) {
  for (auto& kv : v)
    if (kv.first == name) return &kv.second;
  return nullptr;
}
template <class V>
const V* find_named(const std::vector<std::pair<std::string, V>>& v, std::string_view name) {
  for (const auto& kv : v)
    if (kv.first == name) return &kv.second;
  return nullptr;
}
template <class V>
bool erase_named(std::vector<std::pair<std::string, V>>& v, const std::string& name) {
  for (auto it = v.begin(); it != v.end(); ++it)
    if (it->first == name) {
      v.erase(it);
      return true;
    }
  return false;
}

}  // namespace

// ---- Tensor ----

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      throw Error(ErrorKind::Resource,
                  "tensor " + describe() + " has more elements than int64 can count");
  return n;
}

Bytes Tensor::bytes() const {
  if (data || !external) return data;
  std::unique_lock<std::mutex> lock(external->kept_mutex, std::defer_lock);
  if (external->keep) {
    lock.lock();
    if (external->kept) return external->kept;
  }
  if (!external->read)
    throw Error(ErrorKind::Value, "tensor data lives in the external file '" + external->location +
                                      "' and no reader was supplied: pass the external data "
                                      "(files next to the model) when importing");
  Bytes b = external->read();
  if (!b || b->size() != nbytes())
    throw Error(ErrorKind::Parse, "external data '" + external->location + "' at offset " +
                                      std::to_string(external->offset) + " has " +
                                      std::to_string(b ? b->size() : 0) + " bytes, the tensor " +
                                      describe() + " needs " + std::to_string(nbytes()));
  if (external->keep) external->kept = b;
  return b;
}

std::string Tensor::describe() const {
  std::string s = std::string(dtype_name(dtype)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// ---- Module ----

Module::Module(std::string type_name, std::string extra_repr)
    : type_name_(std::move(type_name)), extra_repr_(std::move(extra_repr)) {}

namespace {
std::atomic<uint64_t> g_attribute_generation{0};
void attributes_changed() { g_attribute_generation.fetch_add(1, std::memory_order_relaxed); }
}  // namespace

uint64_t Module::attribute_generation() {
  return g_attribute_generation.load(std::memory_order_relaxed);
}

Module::~Module() { attributes_changed(); }

void Module::add_module(const std::string& name, std::shared_ptr<Module> module) {
  if (name.empty() || name.find('.') != std::string::npos)
    throw Error(ErrorKind::Value,
                "module name '" + name + "' must be non-empty and contain no '.'");
  if (!module) throw Error(ErrorKind::Value, "add_module('" + name + "'): module is null");
  remove_attr(name);
  attributes_changed();
  if (auto* slot = find_named(children_, name)) {
    *slot = std::move(module);
  } else {
    children_.emplace_back(name, std::move(module));
  }
}

void Module::register_parameter(const std::string& name, Tensor t) {
  if (name.empty() || name.find('.') != std::string::npos)
    throw Error(ErrorKind::Value,
                "parameter name '" + name + "' must be non-empty and contain no '.'");
  attributes_changed();
  erase_named(buffers_, name);
  erase_named(children_, name);
  if (auto* slot = find_named(params_, name)) {
    *slot = std::move(t);
  } else {
    params_.emplace_back(name, std::move(t));
  }
}

void Module::register_buffer(const std::string& name, Tensor t) {
  if (name.empty() || name.find('.') != std::string::npos)
    throw Error(ErrorKind::Value,
                "buffer name '" + name + "' must be non-empty and contain no '.'");
  attributes_changed();
  erase_named(params_, name);
  erase_named(children_, name);
  if (auto* slot = find_named(buffers_, name)) {
    *slot = std::move(t);
  } else {
    buffers_.emplace_back(name, std::move(t));
  }
}

std::shared_ptr<Module> Module::child(const std::string& name) const {
  const auto* c = find_named(children_, name);
  return c ? *c : nullptr;
}
const Tensor* Module::parameter(const std::string& name) const { return find_named(params_, name); }
const Tensor* Module::buffer(const std::string& name) const { return find_named(buffers_, name); }
bool Module::remove_child(const std::string& name) {
  attributes_changed();
  return erase_named(children_, name);
}
bool Module::remove_attr(const std::string& name) {
  attributes_changed();
  // A name is either a parameter or a buffer, never both (set_* erases the other kind first).
  const bool was_param = erase_named(params_, name);
  const bool was_buffer = erase_named(buffers_, name);
  return was_param || was_buffer;
}

std::shared_ptr<Module> Module::get_submodule(const std::string& target) const {
  // The root itself is not owned by a shared_ptr here; callers get it via an aliasing pointer.
  if (target.empty())
    return std::shared_ptr<Module>(std::shared_ptr<Module>(), const_cast<Module*>(this));
  const Module* m = this;
  std::shared_ptr<Module> cur;
  for (const std::string& atom : split_dots(target)) {
    cur = m->child(atom);
    if (!cur)
      throw Error(ErrorKind::Attribute, m->type_name() + " has no attribute `" + atom +
                                            "` (looking up submodule '" + target + "')");
    m = cur.get();
  }
  return cur;
}

const Tensor* Module::get_tensor(const std::string& target) const {
  // Walks the path in place (no strings, no shared_ptr copies): the executor looks up every
  // constant on every run.
  std::string_view rest(target);
  const Module* m = this;
  for (size_t dot; (dot = rest.find('.')) != std::string_view::npos; rest.remove_prefix(dot + 1)) {
    const std::shared_ptr<Module>* c = find_named(m->children_, rest.substr(0, dot));
    if (!c || !*c) return nullptr;
    m = c->get();
  }
  if (const Tensor* p = find_named(m->params_, rest)) return p;
  return find_named(m->buffers_, rest);
}

char Module::attr_kind(const std::string& target) const {
  std::vector<std::string> atoms = split_dots(target);
  const Module* m = this;
  for (size_t i = 0; i + 1 < atoms.size(); ++i) {
    auto c = m->child(atoms[i]);
    if (!c) return 0;
    m = c.get();
  }
  if (m->child(atoms.back())) return 'm';
  if (m->parameter(atoms.back())) return 'p';
  if (m->buffer(atoms.back())) return 'b';
  return 0;
}

std::vector<std::pair<std::string, const Module*>> Module::named_modules() const {
  std::vector<std::pair<std::string, const Module*>> out;
  std::unordered_set<const Module*> seen;
  // Iterative pre-order walk (no recursion on user-controlled depth).
  std::vector<std::pair<std::string, const Module*>> stack{{"", this}};
  while (!stack.empty()) {
    auto [prefix, m] = stack.back();
    stack.pop_back();
    if (!seen.insert(m).second) continue;
    out.emplace_back(prefix, m);
    for (auto it = m->children_.rbegin(); it != m->children_.rend(); ++it)
      stack.emplace_back(prefix.empty() ? it->first : prefix + "." + it->first, it->second.get());
  }
  return out;
}

std::vector<std::pair<std::string, const Tensor*>> Module::named_parameters() const {
  std::vector<std::pair<std::string, const Tensor*>> out;
  for (const auto& [prefix, m] : named_modules())
    for (const auto& kv : m->params_)
      out.emplace_back(prefix.empty() ? kv.first : prefix + "." + kv.first, &kv.second);
  return out;
}

std::vector<std::pair<std::string, const Tensor*>> Module::named_buffers() const {
  std::vector<std::pair<std::string, const Tensor*>> out;
  for (const auto& [prefix, m] : named_modules())
    for (const auto& kv : m->buffers_)
      out.emplace_back(prefix.empty() ? kv.first : prefix + "." + kv.first, &kv.second);
  return out;
}

std::string Module::repr() const {
  std::vector<std::string> extra_lines, child_lines;
  if (!extra_repr_.empty()) {
    size_t start = 0;
    for (;;) {
      size_t nl = extra_repr_.find('\n', start);
      extra_lines.push_back(
          extra_repr_.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
  }
  for (const auto& kv : children_)
    child_lines.push_back("(" + kv.first + "): " + add_indent(kv.second->repr(), 2));
  std::string s = type_name_ + "(";
  if (!extra_lines.empty() || !child_lines.empty()) {
    if (extra_lines.size() == 1 && child_lines.empty()) {
      s += extra_lines[0];
    } else {
      std::vector<std::string> lines = extra_lines;
      lines.insert(lines.end(), child_lines.begin(), child_lines.end());
      s += "\n  ";
      for (size_t i = 0; i < lines.size(); ++i) s += (i ? "\n  " : "") + lines[i];
      s += "\n";
    }
  }
  return s + ")";
}

// ---- GraphModule ----

GraphModule::GraphModule(const Module* root, std::unique_ptr<Graph>&& graph, std::string class_name)
    : Module(std::move(class_name)) {
  if (!graph) throw Error(ErrorKind::Value, "GraphModule: graph is null");
  for (Node* node : graph->nodes()) {
    if (node->op() != Opcode::GetAttr && node->op() != Opcode::CallModule) continue;
    const std::string& target = node->target().str();
    // _copy_attr: walk the prefix, creating empty intermediate modules; stop early when a parent
    // module has already been installed (its children come along).
    std::vector<std::string> atoms = split_dots(target);
    const Module* from = root;
    Module* to = this;
    bool done = false;
    for (size_t i = 0; i + 1 < atoms.size(); ++i) {
      std::shared_ptr<Module> f = from ? from->child(atoms[i]) : nullptr;
      if (!f)
        throw Error(ErrorKind::Attribute,
                    "Node " + node->name() + " referenced target " + target +
                        " but that target was not provided in root (no submodule '" + atoms[i] +
                        "')",
                    node->name());
      std::shared_ptr<Module> t = to->child(atoms[i]);
      if (t == f) {
        done = true;
        break;
      }
      if (!t) {
        t = std::make_shared<Module>();
        to->add_module(atoms[i], t);
      }
      from = f.get();
      to = t.get();
    }
    if (done) continue;
    const std::string& field = atoms.back();
    if (auto m = from ? from->child(field) : nullptr) {
      to->add_module(field, m);
    } else if (const Tensor* p = from ? from->parameter(field) : nullptr) {
      to->register_parameter(field, *p);
    } else if (const Tensor* b = from ? from->buffer(field) : nullptr) {
      to->register_buffer(field, *b);
    } else {
      throw Error(ErrorKind::Attribute,
                  "Node " + node->name() + " referenced target " + target +
                      " but that target was not provided in root",
                  node->name());
    }
  }
  install(graph);
}

Kwargs& GraphModule::meta() {
  ++graph_->version_;
  return meta_;
}

void GraphModule::install(std::unique_ptr<Graph>& graph) {
  std::unique_ptr<Graph> old = std::move(graph_);
  graph_ = std::move(graph);
  graph_->owning_module_ = this;
  try {
    recompile();
  } catch (...) {
    graph_->owning_module_ = nullptr;
    graph = std::move(graph_);
    graph_ = std::move(old);
    throw;
  }
  if (old) old->owning_module_ = nullptr;
}

GraphModule::~GraphModule() {
  if (graph_) graph_->owning_module_ = nullptr;
}

void GraphModule::set_graph(std::unique_ptr<Graph>&& graph) {
  if (!graph) throw Error(ErrorKind::Value, "set_graph: graph is null");
  install(graph);  // recompile() assigns code_ only once generation succeeded
}

const PythonCode& GraphModule::recompile() {
  code_ = graph_->python_code("self", codegen_options_);
  return code_;
}

std::string GraphModule::print_readable() const {
  CodegenOptions opts = codegen_options_;
  opts.verbose = true;
  std::string code = graph_->python_code("self", opts).src;
  code.erase(0, code.find_first_not_of('\n'));
  std::string out = add_indent("class " + type_name_ + "(torch.nn.Module):\n" + code, 4);
  std::string sub;
  for (const auto& kv : children_)
    if (auto* gm = dynamic_cast<const GraphModule*>(kv.second.get()))
      sub += "\n" + gm->print_readable();
  return out + add_indent(sub, 4);
}

std::string GraphModule::str() const {
  return repr() + "\n" + code_.src +
         "\n# To see more debug info, please use `graph_module.print_readable()`";
}

bool GraphModule::add_submodule(const std::string& target, std::shared_ptr<Module> module) {
  std::vector<std::string> atoms = split_dots(target);
  Module* mod = this;
  for (size_t i = 0; i + 1 < atoms.size(); ++i) {
    std::shared_ptr<Module> sub = mod->child(atoms[i]);
    if (!sub) {
      if (mod->parameter(atoms[i]) || mod->buffer(atoms[i])) return false;
      sub = std::make_shared<Module>();
      mod->add_module(atoms[i], sub);
    }
    mod = sub.get();
  }
  mod->add_module(atoms.back(), std::move(module));
  return true;
}

bool GraphModule::delete_submodule(const std::string& target) {
  std::vector<std::string> atoms = split_dots(target);
  Module* mod = this;
  for (size_t i = 0; i + 1 < atoms.size(); ++i) {
    std::shared_ptr<Module> sub = mod->child(atoms[i]);
    if (!sub) return false;
    mod = sub.get();
  }
  return mod->remove_child(atoms.back());
}

void GraphModule::delete_all_unused_submodules() {
  std::unordered_set<std::string> used;
  for (Node* node : graph_->nodes()) {
    if (node->op() != Opcode::CallModule && node->op() != Opcode::GetAttr) continue;
    const std::string& target = node->target().str();
    std::string path;
    for (const std::string& atom : split_dots(target)) {
      path = path.empty() ? atom : path + "." + atom;
      used.insert(path);
    }
    if (node->op() == Opcode::CallModule && attr_kind(target) == 'm')
      for (const auto& kv : get_submodule(target)->named_modules())
        if (!kv.first.empty()) used.insert(target + "." + kv.first);
  }
  std::vector<std::string> to_delete;
  for (const auto& kv : named_modules())
    if (!used.count(kv.first)) to_delete.push_back(kv.first);
  for (const std::string& name : to_delete)
    if (!name.empty()) delete_submodule(name);
}

}  // namespace fx
