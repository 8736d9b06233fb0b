// The bridge between LibTorch modules/tensors and fxwasm's attribute tree (fx::Module,
// fx::Tensor): the traced GraphModule mirrors the LibTorch module tree with the type names and
// extra_repr()s PyTorch prints, and keeps a handle to each LibTorch module so the Interpreter's
// call_module runs the original layer.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

#include "fx/graph_module.h"

namespace torch {
namespace nn {
class Module;
}
}  // namespace torch

namespace fx {
namespace torch {

/// An fx::Module mirroring one LibTorch module: Python type name ("Conv2d"), PyTorch's
/// extra_repr ("3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1)") and the module itself.
class TorchModule : public fx::Module {
 public:
  explicit TorchModule(std::shared_ptr<::torch::nn::Module> impl);
  /// The mirrored LibTorch module.
  const std::shared_ptr<::torch::nn::Module>& impl() const { return impl_; }

 private:
  std::shared_ptr<::torch::nn::Module> impl_;
};

/// Mirrors `root` and all its submodules, parameters and buffers (tensors shared, not copied:
/// see share_fx_tensor).
std::shared_ptr<TorchModule> mirror_module(const std::shared_ptr<::torch::nn::Module>& root);

/// Python class name of a LibTorch module: "Linear" for torch::nn::LinearImpl, the name given to
/// fx::torch::Module's constructor, or the unqualified C++ class name without "Impl".
std::string python_type_name(const ::torch::nn::Module& m);
/// PyTorch's extra_repr() for the LibTorch layers this library knows, else "".
std::string python_extra_repr(const ::torch::nn::Module& m);

/// Whether `m` is Sequential, ModuleList or ModuleDict (traced through, never a leaf).
bool is_container(const ::torch::nn::Module& m);

/// fx::Tensor copy of a tensor (dtype, shape, contiguous CPU bytes, requires_grad).
fx::Tensor to_fx_tensor(const at::Tensor& t);
/// An fx::Tensor that refers to `t` instead of copying it: its bytes are read (copied) only when
/// someone asks (fx::Tensor::bytes(), through ExternalData::read), and from_fx_tensor() returns
/// `t` itself, so an Interpreter runs on the live LibTorch parameters as torch.fx does.
/// `name` names the tensor in ExternalData::location ("<libtorch>/layer1.0.conv1.weight").
fx::Tensor share_fx_tensor(const at::Tensor& t, const std::string& name);
/// Replaces every shared tensor (share_fx_tensor) of `root` and its submodules with a copy of its
/// current bytes, so its tensors no longer refer to LibTorch memory: do this before handing a
/// traced GraphModule to code that writes ExternalData references (ONNX export without
/// embedding) or that must not see later changes. (The Interpreter's call_module still runs the
/// mirrored LibTorch layer.)
void materialize_tensors(fx::Module& root);
/// A CPU tensor sharing `t`'s bytes (read-only: do not modify it in place). Throws
/// fx::Error(Value) for a tensor without data.
at::Tensor from_fx_tensor(const fx::Tensor& t);
/// at::ScalarType <-> fx::Dtype; unsupported types throw fx::Error(Unsupported).
fx::Dtype to_fx_dtype(int8_t scalar_type);
int8_t to_scalar_type(fx::Dtype dtype);

}  // namespace torch
}  // namespace fx
