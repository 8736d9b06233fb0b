// The Lowerer's services to the handlers (lower_internal.h): inputs and outputs, shapes and
// dtypes from the probes, attributes, emitting torch nodes, constants and Python ints, module
// paths.
#include <algorithm>
#include <cstring>

#include "fx/onnx.h"
#include "torch_codegen/lower_internal.h"

namespace fx::torch_codegen {

void Lowerer::unsupported(const Node& n, const std::string& what) const {
  throw Error(ErrorKind::Unsupported,
              "lower to torch: node '" + n.name() + "' (" + n.target().pretty() + "): " + what,
              n.name());
}

int64_t Lowerer::axis(const Node& n, int64_t a, int64_t rank) const {
  if (a < -rank || a >= std::max<int64_t>(rank, 1))
    unsupported(n,
                "axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
  return a < 0 ? a + rank : a;
}

std::vector<std::optional<int64_t>> Lowerer::shape(const LVal& v) const {
  if (v.kind == LVal::Kind::Ints) return {static_cast<int64_t>(v.ints.size())};
  if (v.kind == LVal::Kind::Scalar) return {};
  if (v.constant && !v.shape_of)
    return std::vector<std::optional<int64_t>>(v.constant->shape.begin(), v.constant->shape.end());
  if (!v.shape_of) throw Error(ErrorKind::Value, "lower to torch: a value without a shape");
  auto it = probes_.find(v.shape_of->name());
  if (it == probes_.end())
    throw Error(ErrorKind::Value,
                "lower to torch: no shape was probed for '" + v.shape_of->name() + "'",
                v.shape_of->name());
  const Probe& p = it->second;
  std::vector<std::optional<int64_t>> out;
  for (size_t i = 0; i < p.a.size(); ++i)
    if (i < p.b.size() && p.a[i] == p.b[i])
      out.emplace_back(p.a[i]);
    else
      out.emplace_back(std::nullopt);
  if (p.a.size() != p.b.size()) unsupported(*v.shape_of, "its rank depends on the input sizes");
  return out;
}

Dtype Lowerer::dtype(const LVal& v) const {
  if (v.kind == LVal::Kind::Ints || v.kind == LVal::Kind::Scalar) return Dtype::Int64;
  if (v.constant) return v.constant->dtype;
  if (!v.shape_of) return Dtype::Float32;
  auto it = probes_.find(v.shape_of->name());
  return it == probes_.end() ? Dtype::Float32 : it->second.dtype;
}

LVal Lowerer::tensor(Node* node, const Node& n) const {
  LVal v;
  v.kind = LVal::Kind::Tensor;
  v.node = node;
  v.shape_of = &n;
  return v;
}

LVal Lowerer::in(const Node& n, size_t i) {
  if (i >= n.args().size() || n.args()[i].is_none()) return LVal{};
  const Argument& a = n.args()[i];
  if (!a.is_node()) unsupported(n, "input " + std::to_string(i) + " is not a value: " + a.repr());
  auto it = env_.find(a.to_node());
  if (it == env_.end() || it->second.size() != 1)
    unsupported(n, "input '" + a.to_node()->name() + "' has no single converted value");
  return it->second[0];
}

void Lowerer::set(const Node& n, std::vector<LVal> outs) { env_[&n] = std::move(outs); }

int64_t Lowerer::attr_int(const Node& n, const char* name, int64_t fallback) const {
  const Argument* a = n.kwargs().find(name);
  if (!a) return fallback;
  if (a->kind() != Argument::Kind::Int && a->kind() != Argument::Kind::Bool)
    unsupported(n, std::string("attribute ") + name + " is not an int: " + a->repr());
  return a->to_int();
}

double Lowerer::attr_float(const Node& n, const char* name, double fallback) const {
  const Argument* a = n.kwargs().find(name);
  if (!a) return fallback;
  if (a->kind() != Argument::Kind::Float && a->kind() != Argument::Kind::Int)
    unsupported(n, std::string("attribute ") + name + " is not a float: " + a->repr());
  return a->to_double();
}

std::string Lowerer::attr_string(const Node& n, const char* name,
                                 const std::string& fallback) const {
  const Argument* a = n.kwargs().find(name);
  if (!a) return fallback;
  if (a->kind() != Argument::Kind::String)
    unsupported(n, std::string("attribute ") + name + " is not a string: " + a->repr());
  return a->to_string();
}

std::vector<int64_t> Lowerer::attr_ints(const Node& n, const char* name,
                                        std::vector<int64_t> fallback) const {
  const Argument* a = n.kwargs().find(name);
  if (!a) return fallback;
  if (!a->is_sequence())
    unsupported(n, std::string("attribute ") + name + " is not a list of ints: " + a->repr());
  std::vector<int64_t> out;
  for (const Argument& e : a->elements()) out.push_back(e.to_int());
  return out;
}

Node* Lowerer::call(const char* function, std::vector<Argument> args, Kwargs kwargs) {
  return graph_->call_function(fx::fn(function), std::move(args), std::move(kwargs));
}

Node* Lowerer::method(const char* name, std::vector<Argument> args, Kwargs kwargs) {
  return graph_->call_method(name, std::move(args), std::move(kwargs));
}

Node* Lowerer::module(const std::string& path, std::vector<Argument> args) {
  return graph_->call_module(path, std::move(args));
}

namespace {

// The module at `path` under `root`, creating plain containers on the way.
Module& ensure_module(Module& root, const std::string& path) {
  Module* m = &root;
  size_t a = 0;
  while (!path.empty() && a <= path.size()) {
    size_t dot = path.find('.', a);
    if (dot == std::string::npos) dot = path.size();
    const std::string atom = path.substr(a, dot - a);
    std::shared_ptr<Module> child = m->child(atom);
    if (!child) {
      child = std::make_shared<Module>("Module");
      m->add_module(atom, child);
    }
    m = child.get();
    a = dot + 1;
  }
  return *m;
}

std::pair<std::string, std::string> split_last(const std::string& path) {
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos) return {"", path};
  return {path.substr(0, dot), path.substr(dot + 1)};
}

}  // namespace

void Lowerer::put_parameter(Module& m, const std::string& name, const Tensor& t) {
  Tensor p = t;
  p.requires_grad = true;
  m.register_parameter(name, std::move(p));
}

void Lowerer::put_buffer(Module& m, const std::string& name, const Tensor& t) {
  Tensor b = t;
  b.requires_grad = false;
  m.register_buffer(name, std::move(b));
}

std::string Lowerer::add_module(const Node& n, const LVal& weight, const std::string& fallback,
                                std::shared_ptr<Module> m) {
  std::string path;
  if (weight.constant) {
    const auto [parent, leaf] = split_last(weight.constant_path);
    if (leaf == "weight") path = parent;
  }
  if (path.empty())
    if (const Argument* name = n.meta().find(onnx::meta::kName);
        name && name->kind() == Argument::Kind::String)
      path = module_path_from_onnx_name(name->to_string());
  if (path.empty()) path = fallback;
  // Unique, and not inside or over another module this conversion made.
  const std::string base = path;
  for (int k = 1; used_paths_.count(path) || root_->attr_kind(path) != 0; ++k)
    path = base + "_" + std::to_string(k);
  used_paths_[path] = 1;
  const auto [parent, leaf] = split_last(path);
  ensure_module(*root_, parent).add_module(leaf, std::move(m));
  return path;
}

Node* Lowerer::constant_node(const LVal& v) {
  auto it = constants_.find(v.constant_path);
  if (it != constants_.end()) return it->second;
  // Same path as in the ONNX module (initializer names are usually PyTorch's own parameter
  // names); a path a converted module now owns gets a suffix. A tensor that would land inside a
  // converted module (nn.MultiheadAttention's in_proj_bias once its MatMul became the Linear at
  // `layers.0.self_attn`) becomes a root attribute instead: torch.nn.Linear owns exactly
  // weight and bias.
  std::string path = v.constant_path;
  for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', dot + 1))
    if (used_paths_.count(path.substr(0, dot))) {
      std::replace(path.begin(), path.end(), '.', '_');
      break;
    }
  const std::string base = path;
  for (int k = 1;; ++k) {
    const char kind = root_->attr_kind(path);
    if (kind == 0) break;
    if ((kind == 'p' || kind == 'b') && root_->get_tensor(path)->data == v.constant->data) break;
    path = base + "_" + std::to_string(k);
  }
  if (root_->attr_kind(path) == 0) {
    const auto [parent, leaf] = split_last(path);
    Module& owner = ensure_module(*root_, parent);
    const bool buffer =
        v.constant_is_buffer ||
        !(v.constant->dtype == Dtype::Float32 || v.constant->dtype == Dtype::Float64 ||
          v.constant->dtype == Dtype::Float16 || v.constant->dtype == Dtype::BFloat16);
    if (buffer)
      put_buffer(owner, leaf, *v.constant);
    else
      put_parameter(owner, leaf, *v.constant);
  }
  Node* g = graph_->get_attr(path);
  constants_[v.constant_path] = g;
  return g;
}

LVal Lowerer::new_constant(Tensor t, const std::string& path) {
  folded_.push_back(std::make_unique<Tensor>(std::move(t)));
  LVal c;
  c.kind = LVal::Kind::Tensor;
  c.constant = folded_.back().get();
  c.constant_path = path;
  c.constant_is_buffer = true;
  return c;
}

Argument Lowerer::list_arg(const std::vector<SymInt>& ints) {
  Argument::Items items;
  for (const SymInt& s : ints) items.push_back(s.arg());
  return Argument::list(std::move(items));
}

Node* Lowerer::as_tensor(const LVal& v) {
  switch (v.kind) {
    case LVal::Kind::Tensor:
      if (v.node) return v.node;
      if (v.constant) return constant_node(v);
      throw Error(ErrorKind::Value, "lower to torch: a tensor value without a node");
    case LVal::Kind::Ints:
    case LVal::Kind::Scalar: {
      // Known ints become an int64 buffer (what tracing makes of a constant tensor); ints that
      // follow the input sizes a torch.tensor of them (runs, but symbolic_trace cannot trace it).
      bool known = true;
      for (const SymInt& i : v.ints) known = known && i.value.has_value();
      if (!known)
        return v.kind == LVal::Kind::Ints
                   ? call("torch.tensor", {list_arg(v.ints)}, {{"dtype", Dtype::Int64}})
                   : call("torch.tensor", {v.ints.at(0).arg()}, {{"dtype", Dtype::Int64}});
      auto t = std::make_unique<Tensor>();
      t->dtype = Dtype::Int64;
      if (v.kind == LVal::Kind::Ints) t->shape = {static_cast<int64_t>(v.ints.size())};
      auto bytes = std::make_shared<std::vector<uint8_t>>(v.ints.size() * sizeof(int64_t));
      for (size_t i = 0; i < v.ints.size(); ++i)
        std::memcpy(bytes->data() + i * sizeof(int64_t), &*v.ints[i].value, sizeof(int64_t));
      t->data = std::move(bytes);
      folded_.push_back(std::move(t));
      LVal c;
      c.kind = LVal::Kind::Tensor;
      c.constant = folded_.back().get();
      c.constant_path = "_shape_constant_" + std::to_string(folded_.size());
      c.constant_is_buffer = true;
      return constant_node(c);
    }
    case LVal::Kind::None:
      break;
  }
  throw Error(ErrorKind::Value, "lower to torch: an omitted input where a tensor is needed");
}

namespace {

template <class T>
T read_element(const Tensor& t, int64_t i) {
  T v;
  std::memcpy(&v, t.data->data() + i * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

Argument Lowerer::as_operand(const LVal& v, int64_t max_rank) {
  if (v.kind == LVal::Kind::Tensor && v.constant && v.constant->data && v.constant->numel() == 1 &&
      static_cast<int64_t>(v.constant->shape.size()) <= max_rank) {
    switch (v.constant->dtype) {
      case Dtype::Float32:
        return static_cast<double>(read_element<float>(*v.constant, 0));
      case Dtype::Float64:
        return read_element<double>(*v.constant, 0);
      case Dtype::Int64:
        return static_cast<long long>(read_element<int64_t>(*v.constant, 0));
      case Dtype::Int32:
        return static_cast<long long>(read_element<int32_t>(*v.constant, 0));
      default:
        break;
    }
  }
  if (v.kind == LVal::Kind::Scalar && max_rank >= 0 && v.ints.size() == 1) return v.ints[0].arg();
  return as_tensor(v);
}

bool Lowerer::as_ints(const LVal& v, std::vector<SymInt>& out) {
  if (v.kind == LVal::Kind::Ints || v.kind == LVal::Kind::Scalar) {
    out = v.ints;
    return true;
  }
  if (v.kind == LVal::Kind::Tensor && !v.constant) return runtime_ints(v, out);
  if (v.kind != LVal::Kind::Tensor || !v.constant || !v.constant->data ||
      v.constant->shape.size() > 1 || v.constant->numel() > 1024)
    return false;
  const Tensor& t = *v.constant;
  if (t.data->size() != t.nbytes()) return false;
  out.clear();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.dtype == Dtype::Int64)
      out.push_back({read_element<int64_t>(t, i), {}});
    else if (t.dtype == Dtype::Int32)
      out.push_back({static_cast<int64_t>(read_element<int32_t>(t, i)), {}});
    else
      return false;
  }
  return true;
}

bool Lowerer::runtime_ints(const LVal& v, std::vector<SymInt>& out) {
  // An integer tensor the model computes from its inputs' values (not their sizes), such as a
  // loop's iteration number or a shape given as an input: its ints are read at run time with
  // tolist(), which torch.fx records like any method call.
  if (!v.shape_of) return false;
  const Dtype d = dtype(v);
  if (d != Dtype::Int64 && d != Dtype::Int32) return false;
  const std::vector<std::optional<int64_t>> s = shape(v);
  if (s.size() > 1 || (s.size() == 1 && (!s[0] || *s[0] > 64))) return false;
  Node* list = method("tolist", {as_tensor(v)});
  out.clear();
  if (s.empty()) {
    out.push_back({std::nullopt, Argument(list)});
    return true;
  }
  for (int64_t i = 0; i < *s[0]; ++i)
    out.push_back(
        {std::nullopt, Argument(call("operator.getitem", {list, static_cast<long long>(i)}))});
  return true;
}

std::vector<int64_t> Lowerer::static_ints(const Node& n, const LVal& v, const char* what) {
  std::vector<SymInt> ints;
  if (!as_ints(v, ints)) unsupported(n, std::string(what) + " must be a constant list of ints");
  std::vector<int64_t> out;
  for (const SymInt& s : ints) {
    if (!s.value) unsupported(n, std::string(what) + " depends on the input sizes");
    out.push_back(*s.value);
  }
  return out;
}

SymInt Lowerer::size(const LVal& v, int64_t dim) {
  const std::vector<std::optional<int64_t>> s = shape(v);
  if (dim < 0 || dim >= static_cast<int64_t>(s.size()))
    throw Error(ErrorKind::Value, "lower to torch: size() of a missing dim");
  if (s[dim]) return {*s[dim], {}};
  Node* x = as_tensor(v);
  auto key = std::make_pair(x, dim);
  auto it = sizes_.find(key);
  if (it == sizes_.end())
    it = sizes_.emplace(key, method("size", {x, static_cast<long long>(dim)})).first;
  return {std::nullopt, it->second};
}

}  // namespace fx::torch_codegen
