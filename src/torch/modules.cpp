// LibTorch layers: mirroring into fx::Module (Python type names and extra_repr), tensor copies,
// eager execution of the built-in layers, and their execution from an fx::Module alone (the only
// TU that includes the layer headers).
#include "fx/torch/modules.h"

#include <torch/nn.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <unordered_map>

#include "fx/torch/interpreter.h"
#include "fx/torch/tracer.h"

namespace fx {
namespace torch {

namespace nn = ::torch::nn;

// ---- dtypes and tensors ----

fx::Dtype to_fx_dtype(int8_t st) {
  switch (static_cast<at::ScalarType>(st)) {
    case at::kFloat:
      return fx::Dtype::Float32;
    case at::kDouble:
      return fx::Dtype::Float64;
    case at::kHalf:
      return fx::Dtype::Float16;
    case at::kBFloat16:
      return fx::Dtype::BFloat16;
    case at::kChar:
      return fx::Dtype::Int8;
    case at::kShort:
      return fx::Dtype::Int16;
    case at::kInt:
      return fx::Dtype::Int32;
    case at::kLong:
      return fx::Dtype::Int64;
    case at::kByte:
      return fx::Dtype::UInt8;
    case at::kBool:
      return fx::Dtype::Bool;
    case at::kComplexFloat:
      return fx::Dtype::Complex64;
    case at::kComplexDouble:
      return fx::Dtype::Complex128;
    default:
      throw fx::Error(ErrorKind::Unsupported, std::string("unsupported tensor dtype ") +
                                                  c10::toString(static_cast<at::ScalarType>(st)));
  }
}

int8_t to_scalar_type(fx::Dtype d) {
  at::ScalarType st;
  switch (d) {
    case fx::Dtype::Float32:
      st = at::kFloat;
      break;
    case fx::Dtype::Float64:
      st = at::kDouble;
      break;
    case fx::Dtype::Float16:
      st = at::kHalf;
      break;
    case fx::Dtype::BFloat16:
      st = at::kBFloat16;
      break;
    case fx::Dtype::Int8:
      st = at::kChar;
      break;
    case fx::Dtype::Int16:
      st = at::kShort;
      break;
    case fx::Dtype::Int32:
      st = at::kInt;
      break;
    case fx::Dtype::Int64:
      st = at::kLong;
      break;
    case fx::Dtype::UInt8:
      st = at::kByte;
      break;
    case fx::Dtype::Bool:
      st = at::kBool;
      break;
    case fx::Dtype::Complex64:
      st = at::kComplexFloat;
      break;
    case fx::Dtype::Complex128:
      st = at::kComplexDouble;
      break;
    default:
      throw fx::Error(ErrorKind::Unsupported, std::string("dtype torch.") + fx::dtype_name(d) +
                                                  " has no LibTorch type here");
  }
  return static_cast<int8_t>(st);
}

fx::Tensor to_fx_tensor(const at::Tensor& t) {
  fx::Tensor out;
  out.dtype = to_fx_dtype(static_cast<int8_t>(t.scalar_type()));
  out.shape = t.sizes().vec();
  out.requires_grad = t.requires_grad();
  at::Tensor c = t.detach().to(at::kCPU).contiguous();
  auto bytes = std::make_shared<std::vector<uint8_t>>(c.nbytes());
  if (c.nbytes()) std::memcpy(bytes->data(), c.data_ptr(), c.nbytes());
  out.data = std::move(bytes);
  return out;
}

namespace {

// The reader of a shared tensor; from_fx_tensor() recognises it (std::function::target) and
// hands back the tensor itself.
struct TorchTensorReader {
  at::Tensor tensor;
  fx::Bytes operator()() const { return to_fx_tensor(tensor).data; }
};

}  // namespace

fx::Tensor share_fx_tensor(const at::Tensor& t, const std::string& name) {
  fx::Tensor out;
  out.dtype = to_fx_dtype(static_cast<int8_t>(t.scalar_type()));
  out.shape = t.sizes().vec();
  out.requires_grad = t.requires_grad();
  auto ext = std::make_shared<fx::ExternalData>();
  ext->location = "<libtorch>/" + name;
  ext->length = static_cast<int64_t>(t.nbytes());
  ext->read = TorchTensorReader{t};
  ext->in_memory = true;
  out.external = std::move(ext);
  return out;
}

void materialize_tensors(fx::Module& root) {
  // Iterative walk; a module reachable twice is materialised once.
  std::vector<fx::Module*> stack{&root};
  std::unordered_map<const fx::Module*, bool> seen;
  auto loaded = [](const fx::Tensor& t) {
    fx::Tensor c = t;
    if (!c.data && c.external && c.external->read.target<TorchTensorReader>()) {
      c.data = t.bytes();
      c.external.reset();
    }
    return c;
  };
  while (!stack.empty()) {
    fx::Module* m = stack.back();
    stack.pop_back();
    if (seen[m]) continue;
    seen[m] = true;
    std::vector<std::pair<std::string, fx::Tensor>> params = m->parameters();
    std::vector<std::pair<std::string, fx::Tensor>> buffers = m->buffers();
    for (const auto& kv : params) m->register_parameter(kv.first, loaded(kv.second));
    for (const auto& kv : buffers) m->register_buffer(kv.first, loaded(kv.second));
    for (const auto& kv : m->children()) stack.push_back(kv.second.get());
  }
}

at::Tensor from_fx_tensor(const fx::Tensor& t) {
  if (!t.data && t.external)
    if (const auto* r = t.external->read.target<TorchTensorReader>()) return r->tensor;
  if (!t.data && t.has_data()) {
    fx::Tensor loaded = t;
    loaded.data = t.bytes();
    return from_fx_tensor(loaded);
  }
  if (!t.data)
    throw fx::Error(ErrorKind::Value, "tensor " + t.describe() + " has no data (metadata only)");
  if (t.data->size() != t.nbytes())
    throw fx::Error(ErrorKind::Value, "tensor " + t.describe() + " holds " +
                                          std::to_string(t.data->size()) + " bytes, expected " +
                                          std::to_string(t.nbytes()));
  auto keep = t.data;  // the tensor shares the bytes and keeps them alive
  void* ptr = const_cast<uint8_t*>(keep->data());
  auto opts = at::TensorOptions().dtype(static_cast<at::ScalarType>(to_scalar_type(t.dtype)));
  at::Tensor out = at::from_blob(
      ptr, t.shape, [keep](void*) mutable { keep.reset(); }, opts);
  return out;
}

// ---- Python names and extra_repr ----

bool is_container(const nn::Module& m) {
  return dynamic_cast<const nn::SequentialImpl*>(&m) ||
         dynamic_cast<const nn::ModuleListImpl*>(&m) || dynamic_cast<const nn::ModuleDictImpl*>(&m);
}

std::string python_type_name(const nn::Module& m) {
  std::string n = m.name();
  // Strip template arguments and namespaces: "torch::nn::Conv2dImpl" -> "Conv2dImpl".
  if (size_t lt = n.find('<'); lt != std::string::npos) n.erase(lt);
  if (size_t colon = n.rfind("::"); colon != std::string::npos) n.erase(0, colon + 2);
  if (n.size() > 4 && n.compare(n.size() - 4, 4, "Impl") == 0) n.erase(n.size() - 4);
  return n;
}

namespace {

std::string py_bool(bool b) { return b ? "True" : "False"; }

std::string py_tuple(at::IntArrayRef r) {
  std::string s = "(";
  for (size_t i = 0; i < r.size(); ++i) s += (i ? ", " : "") + std::to_string(r[i]);
  return s + (r.size() == 1 ? ",)" : ")");
}

// PyTorch keeps pooling arguments as given (int or tuple); LibTorch expands them. An int is
// the common spelling when all entries agree.
std::string py_int_or_tuple(at::IntArrayRef r) {
  for (size_t i = 1; i < r.size(); ++i)
    if (r[i] != r[0]) return py_tuple(r);
  return r.empty() ? "()" : std::to_string(r[0]);
}

template <size_t D, class Impl>
std::string conv_repr(const Impl& m) {
  const auto& o = m.options;
  std::string s = std::to_string(o.in_channels()) + ", " + std::to_string(o.out_channels()) +
                  ", kernel_size=" + py_tuple(*o.kernel_size()) +
                  ", stride=" + py_tuple(*o.stride());
  if (const auto* pad = c10::get_if<::torch::ExpandingArray<D>>(&o.padding())) {
    bool zero = true;
    for (int64_t p : **pad) zero = zero && p == 0;
    if (!zero) s += ", padding=" + py_tuple(**pad);
  } else if (c10::get_if<::torch::enumtype::kSame>(&o.padding())) {
    s += ", padding=same";  // PyTorch formats the string with str(), no quotes
  } else {
    s += ", padding=valid";
  }
  bool one = true;
  for (int64_t d : *o.dilation()) one = one && d == 1;
  if (!one) s += ", dilation=" + py_tuple(*o.dilation());
  if (o.groups() != 1) s += ", groups=" + std::to_string(o.groups());
  if (!o.bias()) s += ", bias=False";
  if (!c10::get_if<::torch::enumtype::kZeros>(&o.padding_mode())) {
    std::string mode = ::torch::enumtype::get_enum_name(o.padding_mode());  // "kReflect"
    if (mode.size() > 1 && mode[0] == 'k')
      mode = static_cast<char>(std::tolower(static_cast<unsigned char>(mode[1]))) + mode.substr(2);
    s += ", padding_mode=" + mode;  // "reflect", unquoted like PyTorch
  }
  return s;
}

template <class Impl>
std::string bn_repr(const Impl& m) {
  const auto& o = m.options;
  return std::to_string(o.num_features()) + ", eps=" + fx::py_float_repr(o.eps()) +
         ", momentum=" + (o.momentum() ? fx::py_float_repr(*o.momentum()) : "None") +
         ", affine=" + py_bool(o.affine()) +
         ", track_running_stats=" + py_bool(o.track_running_stats());
}

}  // namespace

std::string python_extra_repr(const nn::Module& m) {
  if (auto* l = dynamic_cast<const nn::LinearImpl*>(&m))
    return "in_features=" + std::to_string(l->options.in_features()) +
           ", out_features=" + std::to_string(l->options.out_features()) +
           ", bias=" + py_bool(l->options.bias());
  if (auto* c = dynamic_cast<const nn::Conv1dImpl*>(&m)) return conv_repr<1>(*c);
  if (auto* c = dynamic_cast<const nn::Conv2dImpl*>(&m)) return conv_repr<2>(*c);
  if (auto* c = dynamic_cast<const nn::Conv3dImpl*>(&m)) return conv_repr<3>(*c);
  if (auto* b = dynamic_cast<const nn::BatchNorm1dImpl*>(&m)) return bn_repr(*b);
  if (auto* b = dynamic_cast<const nn::BatchNorm2dImpl*>(&m)) return bn_repr(*b);
  if (auto* b = dynamic_cast<const nn::BatchNorm3dImpl*>(&m)) return bn_repr(*b);
  if (auto* r = dynamic_cast<const nn::ReLUImpl*>(&m))
    return r->options.inplace() ? "inplace=True" : "";
  if (auto* g = dynamic_cast<const nn::GELUImpl*>(&m))
    return "approximate='" + g->options.approximate() + "'";
  if (auto* d = dynamic_cast<const nn::DropoutImpl*>(&m))
    return "p=" + fx::py_float_repr(d->options.p()) + ", inplace=" + py_bool(d->options.inplace());
  if (auto* p = dynamic_cast<const nn::MaxPool2dImpl*>(&m)) {
    const auto& o = p->options;
    return "kernel_size=" + py_int_or_tuple(*o.kernel_size()) +
           ", stride=" + py_int_or_tuple(*o.stride()) +
           ", padding=" + py_int_or_tuple(*o.padding()) +
           ", dilation=" + py_int_or_tuple(*o.dilation()) + ", ceil_mode=" + py_bool(o.ceil_mode());
  }
  if (auto* p = dynamic_cast<const nn::AvgPool2dImpl*>(&m)) {
    const auto& o = p->options;
    return "kernel_size=" + py_int_or_tuple(*o.kernel_size()) +
           ", stride=" + py_int_or_tuple(*o.stride()) +
           ", padding=" + py_int_or_tuple(*o.padding());
  }
  if (auto* p = dynamic_cast<const nn::AdaptiveAvgPool2dImpl*>(&m)) {
    std::string s = "output_size=(";
    const auto& sz = *p->options.output_size();
    for (size_t i = 0; i < sz.size(); ++i)
      s += (i ? ", " : "") + (sz[i] ? std::to_string(*sz[i]) : std::string("None"));
    return s + ")";
  }
  if (auto* f = dynamic_cast<const nn::FlattenImpl*>(&m))
    return "start_dim=" + std::to_string(f->options.start_dim()) +
           ", end_dim=" + std::to_string(f->options.end_dim());
  if (auto* l = dynamic_cast<const nn::LayerNormImpl*>(&m))
    return py_tuple(l->options.normalized_shape()) +
           ", eps=" + fx::py_float_repr(l->options.eps()) +
           ", elementwise_affine=" + py_bool(l->options.elementwise_affine());
  if (auto* e = dynamic_cast<const nn::EmbeddingImpl*>(&m)) {
    std::string s = std::to_string(e->options.num_embeddings()) + ", " +
                    std::to_string(e->options.embedding_dim());
    if (e->options.padding_idx()) s += ", padding_idx=" + std::to_string(*e->options.padding_idx());
    return s;
  }
  if (auto* s = dynamic_cast<const nn::SoftmaxImpl*>(&m))
    return "dim=" + std::to_string(s->options.dim());
  return "";
}

// ---- mirror ----

TorchModule::TorchModule(std::shared_ptr<nn::Module> impl)
    : fx::Module(python_type_name(*impl), python_extra_repr(*impl)), impl_(std::move(impl)) {
  for (const auto& p : impl_->named_parameters(/*recurse=*/false))
    impl_params_.emplace_back(p.key(), p.value().unsafeGetTensorImpl());
  for (const auto& b : impl_->named_buffers(/*recurse=*/false))
    impl_buffers_.emplace_back(b.key(), b.value().unsafeGetTensorImpl());
  for (const auto& c : impl_->named_children())
    impl_children_.emplace_back(c.key(), c.value().get());
}

namespace {

// The TensorImpl a shared tensor (share_fx_tensor) refers to, or nullptr for any other tensor.
const void* shared_impl(const fx::Tensor& t) {
  if (t.data || !t.external) return nullptr;
  const auto* r = t.external->read.target<TorchTensorReader>();
  return r ? r->tensor.unsafeGetTensorImpl() : nullptr;
}

}  // namespace

bool TorchModule::mirrors_impl() const {
  auto same_tensors = [](const std::vector<std::pair<std::string, fx::Tensor>>& have,
                         const std::vector<std::pair<std::string, const void*>>& want) {
    if (have.size() != want.size()) return false;
    for (size_t i = 0; i < have.size(); ++i)
      if (have[i].first != want[i].first || shared_impl(have[i].second) != want[i].second)
        return false;
    return true;
  };
  // Iterative walk of the mirror's subtree against what each LibTorch module held.
  std::vector<const TorchModule*> stack{this};
  while (!stack.empty()) {
    const TorchModule* m = stack.back();
    stack.pop_back();
    if (!same_tensors(m->parameters(), m->impl_params_) ||
        !same_tensors(m->buffers(), m->impl_buffers_) ||
        m->children().size() != m->impl_children_.size())
      return false;
    for (size_t i = 0; i < m->children().size(); ++i) {
      const auto* c = dynamic_cast<const TorchModule*>(m->children()[i].second.get());
      if (!c || m->children()[i].first != m->impl_children_[i].first ||
          c->impl().get() != m->impl_children_[i].second)
        return false;
      stack.push_back(c);
    }
  }
  return true;
}

std::shared_ptr<TorchModule> mirror_module(const std::shared_ptr<nn::Module>& root) {
  std::unordered_map<const nn::Module*, std::shared_ptr<TorchModule>> made;
  std::shared_ptr<TorchModule> out;
  // named_modules() is pre-order: a parent is mirrored before its children (no recursion).
  for (const auto& item : root->named_modules()) {
    const std::shared_ptr<nn::Module>& m = item.value();
    auto mirror = std::make_shared<TorchModule>(m);
    const std::string prefix = item.key().empty() ? "" : item.key() + ".";
    for (const auto& p : m->named_parameters(/*recurse=*/false))
      mirror->register_parameter(p.key(), share_fx_tensor(p.value(), prefix + p.key()));
    for (const auto& b : m->named_buffers(/*recurse=*/false))
      mirror->register_buffer(b.key(), share_fx_tensor(b.value(), prefix + b.key()));
    made[m.get()] = mirror;
    if (item.key().empty()) out = mirror;
  }
  // Children in registration order.
  for (const auto& item : root->named_modules()) {
    auto& parent = made[item.value().get()];
    for (const auto& c : item.value()->named_children())
      parent->add_module(c.key(), made[c.value().get()]);
  }
  return out;
}

// ---- eager execution ----

namespace {

at::Tensor one_tensor(const std::vector<Value>& args, const std::string& type) {
  if (args.size() != 1 || !args[0].is_tensor())
    throw fx::Error(ErrorKind::Type, type + ".forward expects one Tensor, got " +
                                         std::to_string(args.size()) + " argument(s)" +
                                         (args.empty() ? "" : ": " + args[0].repr()));
  return args[0].tensor();
}

}  // namespace

Value run_module(nn::Module& m, std::vector<Value> args) {
  if (auto* fxm = dynamic_cast<Module*>(&m)) return fxm->forward_args(std::move(args));
  if (dynamic_cast<nn::SequentialImpl*>(&m)) {
    if (args.size() != 1) throw fx::Error(ErrorKind::Type, "Sequential takes exactly one input");
    Value x = std::move(args[0]);
    for (const auto& child : m.children()) x = call(*child, {std::move(x)});
    return x;
  }
  const std::string type = python_type_name(m);
  at::Tensor x = one_tensor(args, type);
#define FX_TORCH_LAYER(T) \
  if (auto* l = dynamic_cast<nn::T##Impl*>(&m)) return Value(l->forward(x));
  FX_TORCH_LAYER(Linear)
  FX_TORCH_LAYER(Conv1d)
  FX_TORCH_LAYER(Conv2d)
  FX_TORCH_LAYER(Conv3d)
  FX_TORCH_LAYER(BatchNorm1d)
  FX_TORCH_LAYER(BatchNorm2d)
  FX_TORCH_LAYER(BatchNorm3d)
  FX_TORCH_LAYER(ReLU)
  FX_TORCH_LAYER(GELU)
  FX_TORCH_LAYER(Sigmoid)
  FX_TORCH_LAYER(Tanh)
  FX_TORCH_LAYER(Softmax)
  FX_TORCH_LAYER(Dropout)
  FX_TORCH_LAYER(MaxPool2d)
  FX_TORCH_LAYER(AvgPool2d)
  FX_TORCH_LAYER(AdaptiveAvgPool2d)
  FX_TORCH_LAYER(Flatten)
  FX_TORCH_LAYER(LayerNorm)
  FX_TORCH_LAYER(Embedding)
  FX_TORCH_LAYER(Identity)
#undef FX_TORCH_LAYER
  throw fx::Error(ErrorKind::Unsupported,
                  "cannot run module of type " + type +
                      ": not a LibTorch layer fxwasm knows nor an fx::torch::Module");
}

// ---- execution from the fx::Module alone ----

namespace {

// An extra_repr as python_extra_repr prints it: positional items and key=value items, split at
// top-level commas ("3, 8, kernel_size=(3, 3), padding=same").
class ReprFields {
 public:
  ReprFields(const std::string& type, const std::string& repr) : type_(type), repr_(repr) {
    std::string cur;
    int depth = 0;
    char quote = 0;
    auto flush = [&] {
      size_t b = cur.find_first_not_of(' '), e = cur.find_last_not_of(' ');
      std::string item = b == std::string::npos ? "" : cur.substr(b, e - b + 1);
      cur.clear();
      if (item.empty()) return;
      size_t eq = item.find('=');
      size_t open = item.find_first_of("('\"");
      if (eq != std::string::npos && (open == std::string::npos || eq < open))
        named_.emplace_back(item.substr(0, eq), item.substr(eq + 1));
      else
        positional_.push_back(item);
    };
    for (char c : repr) {
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == '(' || c == '[') {
        ++depth;
      } else if (c == ')' || c == ']') {
        --depth;
      } else if (c == ',' && depth == 0) {
        flush();
        continue;
      }
      cur += c;
    }
    flush();
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw fx::Error(ErrorKind::Unsupported, "module of type " + type_ + " (" + repr_ +
                                                ") cannot run from its fx::Module: " + what);
  }
  const std::string* find(const std::string& key) const {
    for (const auto& kv : named_)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
  const std::string* positional(size_t i) const {
    return i < positional_.size() ? &positional_[i] : nullptr;
  }
  int64_t to_int(const std::string& s) const {
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end) fail("cannot read an int from '" + s + "'");
    return v;
  }
  // An int or a tuple of ints ("2", "(1, 2)", "(8,)"); an int is repeated `n` times.
  std::vector<int64_t> ints(const std::string& key, size_t n, int64_t dflt) const {
    const std::string* s = find(key);
    if (!s) return std::vector<int64_t>(n, dflt);
    return parse_ints(*s, n);
  }
  std::vector<int64_t> parse_ints(const std::string& s, size_t n) const {
    if (s.empty() || s[0] != '(') return std::vector<int64_t>(n, to_int(s));
    std::vector<int64_t> out;
    std::string cur;
    for (size_t i = 1; i < s.size(); ++i) {
      const char c = s[i];
      if (c == ',' || c == ')') {
        size_t b = cur.find_first_not_of(' ');
        if (b != std::string::npos) out.push_back(to_int(cur.substr(b)));
        cur.clear();
      } else {
        cur += c;
      }
    }
    return out;
  }
  double number(const std::string& key, double dflt) const {
    const std::string* s = find(key);
    if (!s || *s == "None") return dflt;
    char* end = nullptr;
    const double v = std::strtod(s->c_str(), &end);
    if (s->empty() || *end) fail("cannot read " + key + " from '" + *s + "'");
    return v;
  }
  bool flag(const std::string& key, bool dflt) const {
    const std::string* s = find(key);
    if (!s) return dflt;
    if (*s == "True") return true;
    if (*s == "False") return false;
    fail("cannot read " + key + " from '" + *s + "'");
  }
  std::string str(const std::string& key, const std::string& dflt) const {
    const std::string* s = find(key);
    if (!s) return dflt;
    if (s->size() < 2 || ((*s)[0] != '\'' && (*s)[0] != '"')) return *s;
    return s->substr(1, s->size() - 2);
  }

 private:
  std::string type_, repr_;
  std::vector<std::string> positional_;
  std::vector<std::pair<std::string, std::string>> named_;
};

// A parameter or buffer of `m` as a tensor; undefined when absent and not `required`.
at::Tensor weight(const fx::Module& m, const ReprFields& f, const std::string& name,
                  bool required) {
  const fx::Tensor* t = m.parameter(name);
  if (!t) t = m.buffer(name);
  if (!t) {
    if (required) f.fail("it has no tensor '" + name + "'");
    return at::Tensor();
  }
  if (!t->has_data()) f.fail("tensor '" + name + "' (" + t->describe() + ") has no data");
  return from_fx_tensor(*t);
}

Value run_conv(const fx::Module& m, const ReprFields& f, size_t dims, const at::Tensor& x) {
  const at::Tensor w = weight(m, f, "weight", true);
  const at::Tensor b = weight(m, f, "bias", false);
  if (w.dim() != static_cast<int64_t>(dims) + 2)
    f.fail("its weight has " + std::to_string(w.dim()) + " dimensions, a " + std::to_string(dims) +
           "-d convolution needs " + std::to_string(dims + 2));
  const std::vector<int64_t> stride = f.ints("stride", dims, 1);
  const std::vector<int64_t> dilation = f.ints("dilation", dims, 1);
  const int64_t groups = f.find("groups") ? f.to_int(*f.find("groups")) : 1;
  const std::string mode = f.str("padding_mode", "zeros");
  // padding: an int, a tuple, or same/valid (quoted or not).
  const std::string* pad_s = f.find("padding");
  std::string pad_name;
  if (pad_s && !pad_s->empty() && (*pad_s)[0] != '(' && (*pad_s)[0] != '-' &&
      !std::isdigit(static_cast<unsigned char>((*pad_s)[0])))
    pad_name = f.str("padding", "");
  std::vector<int64_t> pad =
      pad_name.empty() ? f.ints("padding", dims, 0) : std::vector<int64_t>(dims, 0);
  if (stride.size() != dims || dilation.size() != dims || pad.size() != dims)
    f.fail("stride, padding and dilation need " + std::to_string(dims) + " entries");
  at::Tensor in = x;
  if (mode != "zeros") {
    // LibTorch's _conv_forward: pad explicitly in the given mode, then convolve unpadded.
    std::vector<int64_t> twice;  // last dimension first, (left, right) per dimension
    for (size_t i = dims; i-- > 0;) {
      int64_t left = pad[i], right = pad[i];
      if (pad_name == "same") {
        const int64_t total = dilation[i] * (w.size(static_cast<int64_t>(i) + 2) - 1);
        left = total / 2;
        right = total - left;
      }
      twice.push_back(left);
      twice.push_back(right);
    }
    namespace F = ::torch::nn::functional;
    F::PadFuncOptions::mode_t pm;
    if (mode == "reflect")
      pm = ::torch::kReflect;
    else if (mode == "replicate")
      pm = ::torch::kReplicate;
    else if (mode == "circular")
      pm = ::torch::kCircular;
    else
      f.fail("unknown padding_mode '" + mode + "'");
    in = F::pad(x, F::PadFuncOptions(twice).mode(pm));
    pad_name.clear();
    pad.assign(dims, 0);
  }
  const c10::optional<at::Tensor> bias = b.defined() ? c10::optional<at::Tensor>(b) : c10::nullopt;
  if (!pad_name.empty()) {
    if (dims == 1) return Value(at::conv1d(in, w, bias, stride, pad_name, dilation, groups));
    if (dims == 2) return Value(at::conv2d(in, w, bias, stride, pad_name, dilation, groups));
    return Value(at::conv3d(in, w, bias, stride, pad_name, dilation, groups));
  }
  if (dims == 1) return Value(at::conv1d(in, w, bias, stride, pad, dilation, groups));
  if (dims == 2) return Value(at::conv2d(in, w, bias, stride, pad, dilation, groups));
  return Value(at::conv3d(in, w, bias, stride, pad, dilation, groups));
}

// nn.LSTM(input[, (h0, c0)]) -> (output, (h_n, c_n)), one layer or more, either direction, as
// torch.onnx exports it and fx::torch_codegen::lower makes it (inference: no dropout).
Value run_lstm(const fx::Module& m, const std::vector<Value>& args) {
  const ReprFields f("LSTM", m.extra_repr());
  if (args.empty() || args.size() > 2 || !args[0].is_tensor())
    f.fail("forward takes (input[, (h0, c0)])");
  const at::Tensor x = args[0].tensor();
  const bool bidirectional = f.flag("bidirectional", false);
  const bool batch_first = f.flag("batch_first", false);
  const bool bias = f.flag("bias", true);
  const int64_t layers = f.find("num_layers") ? f.to_int(*f.find("num_layers")) : 1;
  const std::string* hidden_text = f.positional(1);
  if (!hidden_text) f.fail("no hidden_size");
  const int64_t hidden = f.to_int(*hidden_text);
  std::vector<at::Tensor> params;
  for (int64_t l = 0; l < layers; ++l)
    for (const char* suffix : {"", "_reverse"}) {
      if (*suffix && !bidirectional) continue;
      const std::string s = "_l" + std::to_string(l) + suffix;
      params.push_back(weight(m, f, "weight_ih" + s, true));
      params.push_back(weight(m, f, "weight_hh" + s, true));
      if (bias) {
        params.push_back(weight(m, f, "bias_ih" + s, true));
        params.push_back(weight(m, f, "bias_hh" + s, true));
      }
    }
  at::Tensor h0, c0;
  if (args.size() == 2) {
    const Value& state = args[1];
    if (!state.is_sequence() || state.elements().size() != 2)
      f.fail("the state must be a tuple (h0, c0)");
    h0 = state.elements()[0].tensor();
    c0 = state.elements()[1].tensor();
  } else {
    const int64_t batch = x.size(batch_first ? 0 : 1);
    h0 = at::zeros({layers * (bidirectional ? 2 : 1), batch, hidden}, x.options());
    c0 = at::zeros_like(h0);
  }
  auto r = at::lstm(x, {h0, c0}, params, bias, layers, /*dropout=*/0.0, /*train=*/false,
                    bidirectional, batch_first);
  return Value::tuple(
      {Value(std::get<0>(r)), Value::tuple({Value(std::get<1>(r)), Value(std::get<2>(r))})});
}

Value run_layer(const fx::Module& m, const at::Tensor& x, bool training) {
  const std::string& type = m.type_name();
  const ReprFields f(type, m.extra_repr());
  if (type == "Identity") return Value(x);
  if (type == "Linear")
    return Value(at::linear(x, weight(m, f, "weight", true), weight(m, f, "bias", false)));
  if (type == "Conv1d") return run_conv(m, f, 1, x);
  if (type == "Conv2d") return run_conv(m, f, 2, x);
  if (type == "Conv3d") return run_conv(m, f, 3, x);
  if (type == "BatchNorm1d" || type == "BatchNorm2d" || type == "BatchNorm3d") {
    at::Tensor rm = weight(m, f, "running_mean", false);
    at::Tensor rv = weight(m, f, "running_var", false);
    // Batch statistics when training or without running ones; the running statistics are
    // never updated (they may be bytes shared with other modules).
    const bool batch_stats = training || !rm.defined() || !rv.defined();
    if (batch_stats) rm = rv = at::Tensor();
    return Value(at::batch_norm(x, weight(m, f, "weight", false), weight(m, f, "bias", false), rm,
                                rv, batch_stats, f.number("momentum", 0.1), f.number("eps", 1e-5),
                                /*cudnn_enabled=*/false));
  }
  if (type == "LayerNorm") {
    const std::string* shape = f.positional(0);
    if (!shape) f.fail("no normalized_shape");
    return Value(at::layer_norm(x, f.parse_ints(*shape, 1), weight(m, f, "weight", false),
                                weight(m, f, "bias", false), f.number("eps", 1e-5)));
  }
  if (type == "Embedding") {
    const int64_t pad = f.find("padding_idx") ? f.to_int(*f.find("padding_idx")) : -1;
    return Value(at::embedding(weight(m, f, "weight", true), x, pad));
  }
  if (type == "ReLU") return Value(at::relu(x));
  if (type == "GELU") return Value(at::gelu(x, f.str("approximate", "none")));
  if (type == "Sigmoid") return Value(at::sigmoid(x));
  if (type == "Tanh") return Value(at::tanh(x));
  if (type == "Softmax") {
    if (!f.find("dim") || *f.find("dim") == "None") f.fail("Softmax needs dim");
    return Value(at::softmax(x, f.to_int(*f.find("dim"))));
  }
  if (type == "Dropout")
    return Value(training ? at::dropout(x, f.number("p", 0.5), /*train=*/true) : x);
  if (type == "MaxPool2d") {
    const std::vector<int64_t> k = f.ints("kernel_size", 2, 1);
    return Value(at::max_pool2d(x, k, f.find("stride") ? f.ints("stride", 2, 1) : k,
                                f.ints("padding", 2, 0), f.ints("dilation", 2, 1),
                                f.flag("ceil_mode", false)));
  }
  if (type == "AvgPool2d") {
    const std::vector<int64_t> k = f.ints("kernel_size", 2, 1);
    return Value(at::avg_pool2d(x, k, f.find("stride") ? f.ints("stride", 2, 1) : k,
                                f.ints("padding", 2, 0)));
  }
  if (type == "AdaptiveAvgPool2d") {
    const std::string* s = f.find("output_size");
    if (!s) f.fail("no output_size");
    // "(1, None)": None keeps the input's size.
    std::vector<int64_t> size;
    std::string cur;
    const std::string body = (*s)[0] == '(' ? s->substr(1) : *s + ")";
    for (char c : body) {
      if (c != ',' && c != ')') {
        if (c != ' ') cur += c;
        continue;
      }
      if (cur.empty()) continue;
      const int64_t dim = x.dim() - 2 + static_cast<int64_t>(size.size());
      size.push_back(cur == "None" ? x.size(dim) : f.to_int(cur));
      cur.clear();
    }
    if (size.size() == 1) size.push_back(size[0]);
    return Value(at::adaptive_avg_pool2d(x, size));
  }
  if (type == "Flatten") {
    const int64_t start = f.find("start_dim") ? f.to_int(*f.find("start_dim")) : 1;
    const int64_t end = f.find("end_dim") ? f.to_int(*f.find("end_dim")) : -1;
    return Value(x.flatten(start, end));
  }
  f.fail(
      "not a LibTorch layer fxwasm can rebuild (the LibTorch module is gone or no longer "
      "matches its fx::Module)");
}

}  // namespace

Value run_fx_module(const fx::Module& m, std::vector<Value> args) {
  if (const auto* tm = dynamic_cast<const TorchModule*>(&m))
    if (tm->mirrors_impl()) return run_module(*tm->impl(), std::move(args));
  if (const auto* gm = dynamic_cast<const fx::GraphModule*>(&m))
    return Interpreter(*gm).run(std::move(args));
  if (m.type_name() == "Sequential") {
    if (args.size() != 1) throw fx::Error(ErrorKind::Type, "Sequential takes exactly one input");
    Value x = std::move(args[0]);
    for (const auto& child : m.children()) x = run_fx_module(*child.second, {std::move(x)});
    return x;
  }
  const auto* tm = dynamic_cast<const TorchModule*>(&m);
  const bool training = tm && tm->impl()->is_training();
  if (m.type_name() == "LSTM") return run_lstm(m, args);
  return run_layer(m, one_tensor(args, m.type_name()), training);
}

}  // namespace torch
}  // namespace fx
