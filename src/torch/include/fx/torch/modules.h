// The bridge between LibTorch modules/tensors and fxwasm's attribute tree (fx::Module,
// fx::Tensor): the traced GraphModule mirrors the LibTorch module tree with the type names and
// extra_repr()s PyTorch prints, and keeps a handle to each LibTorch module so the Interpreter's
// call_module runs the original layer. A module the mirror no longer matches (rebuilt by a pass
// such as fx::fuse_conv_bn_modules, or with replaced tensors) runs from the fx::Module instead:
// run_fx_module.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fx/graph_module.h"
#include "fx/torch/value.h"

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
  /// Whether this mirror and all its submodules still hold exactly the LibTorch modules' own
  /// tensors (shared, see share_fx_tensor) and submodules: nothing replaced, added, removed or
  /// materialized. Only then does running impl() compute what the mirror describes.
  bool mirrors_impl() const;

 private:
  std::shared_ptr<::torch::nn::Module> impl_;
  // impl_'s own parameters, buffers (TensorImpl*) and children when the mirror was made.
  std::vector<std::pair<std::string, const void*>> impl_params_, impl_buffers_, impl_children_;
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

/// Runs `m` as the callee of a call_module node. A TorchModule that mirrors_impl() runs its
/// LibTorch module (run_module); a GraphModule runs through an Interpreter. Any other module --
/// one a pass built (fx::fuse_conv_bn_modules' fused convs and the copies of the tree it
/// returns), or a TorchModule whose tensors were replaced or materialized -- is recomputed from
/// the fx::Module alone: type_name() picks the LibTorch function, its parameters and buffers are
/// the weights, and the options are read back from extra_repr() as python_extra_repr() prints
/// them (so those PyTorch does not print take their defaults: AvgPool2d's ceil_mode,
/// count_include_pad and divisor_override, Embedding's max_norm, MaxPool2d's return_indices).
/// Sequential runs its children in order. A plain fx::Module runs in inference mode (Dropout is
/// the identity, BatchNorm uses its running statistics); a TorchModule in its LibTorch module's
/// mode, except that BatchNorm never updates the running statistics. Throws
/// fx::Error(Unsupported) "module of type T ..." for a type it cannot rebuild (any
/// fx::torch::Module subclass among them) or missing/ill-shaped tensors.
Value run_fx_module(const fx::Module& m, std::vector<Value> args);

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
/// embedding) or that must not see later changes. (The Interpreter's call_module then runs the
/// layers from these copies, see run_fx_module.)
void materialize_tensors(fx::Module& root);
/// A CPU tensor sharing `t`'s bytes (read-only: do not modify it in place). Throws
/// fx::Error(Value) for a tensor without data.
at::Tensor from_fx_tensor(const fx::Tensor& t);
/// at::ScalarType <-> fx::Dtype; unsupported types throw fx::Error(Unsupported).
fx::Dtype to_fx_dtype(int8_t scalar_type);
int8_t to_scalar_type(fx::Dtype dtype);

}  // namespace torch
}  // namespace fx
