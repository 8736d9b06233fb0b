// LibTorch layers: mirroring into fx::Module (Python type names and extra_repr), tensor copies,
// and eager execution of the built-in layers (the only TU that includes the layer headers).
#include "fx/torch/modules.h"

#include <torch/nn.h>

#include <cstring>
#include <sstream>
#include <unordered_map>

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
    s += ", padding='same'";
  } else {
    s += ", padding='valid'";
  }
  bool one = true;
  for (int64_t d : *o.dilation()) one = one && d == 1;
  if (!one) s += ", dilation=" + py_tuple(*o.dilation());
  if (o.groups() != 1) s += ", groups=" + std::to_string(o.groups());
  if (!o.bias()) s += ", bias=False";
  if (!c10::get_if<::torch::enumtype::kZeros>(&o.padding_mode()))
    s += ", padding_mode='" + ::torch::enumtype::get_enum_name(o.padding_mode()) + "'";
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
    : fx::Module(python_type_name(*impl), python_extra_repr(*impl)), impl_(std::move(impl)) {}

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

}  // namespace torch
}  // namespace fx
