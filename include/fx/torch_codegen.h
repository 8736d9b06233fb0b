// fx::torch_codegen — a GraphModule whose targets are PyTorch's, written out as a Python package
// that PyTorch imports and runs: torch.fx's GraphModule.to_folder, in C++ (no LibTorch, so it
// works in wasm too), with the weights in PyTorch's own state_dict file format.
//
//   fx::GraphModule& gm = ...;  // targets torch.relu, operator.add, call_module of nn.Conv2d...
//   for (const fx::torch_codegen::PackageFile& f : fx::torch_codegen::to_folder(gm, "Net"))
//     write_file(dir + "/" + f.name, f.bytes);  // module.py, __init__.py, state_dict.pt
//
//   # then, in Python with torch installed:
//   from dir import Net
//   net = Net()             # builds the submodules, loads state_dict.pt (strict)
//   y = net(x)              # forward is gm.code()
//
// The weights alone: save_state_dict({{"fc.weight", &w}, ...}) gives the bytes of a file that
// `torch.load(path)` reads into an OrderedDict of tensors (torch 1.13, default arguments).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fx/graph_module.h"
#include "fx/torch_codegen/lower.h"  // lower(): an imported ONNX module to torch targets

namespace fx::torch_codegen {

/// The bytes of `torch.save(OrderedDict(tensors))`: PyTorch's zip format (entries STORED, data
/// 64-byte aligned, zip64 where sizes need it) holding `archive/data.pkl` (pickle protocol 2),
/// one `archive/data/<i>` record of raw little-endian bytes per tensor, and `archive/version`.
/// Names are kept in the given order. Throws fx::Error(Value) naming the tensor if it has no
/// bytes (external data without a reader) or the wrong number of them, and
/// fx::Error(Unsupported) for a dtype torch has no storage for (unsigned 16/32/64-bit,
/// quantized, complex32, string).
std::vector<uint8_t> save_state_dict(
    const std::vector<std::pair<std::string, const Tensor*>>& tensors);

/// One file of a generated package.
struct PackageFile {
  std::string name;  ///< relative to the package folder: "module.py"
  std::vector<uint8_t> bytes;
};

/// The files of a Python package for `gm` (torch.fx's GraphModule.to_folder), in this order:
/// `module.py` (class `module_name`, a torch.nn.Module whose __init__ builds the submodule tree
/// and whose forward is the generated code), `__init__.py` (`from .module import *`) and
/// `state_dict.pt` (every parameter and buffer, loaded by __init__ with strict checking from
/// next to module.py). The output is deterministic.
///
/// Submodules of a torch.nn type in the known-class table (Module::type_name() "Conv2d",
/// "Linear", ...) are constructed from their extra_repr(); "Module" and other containers become
/// torch.nn.Module() with their children added. Throws fx::Error(Unsupported) naming the node or
/// submodule for what the package could not reproduce: a graph with onnx.* targets (lower it
/// first), a call_function target from a module that cannot be imported, a leaf submodule of an
/// unknown type, a tensor a known class does not have, a call_module of a plain container; and
/// fx::Error(Value) for a module_name that is not a Python identifier. Tensor errors are
/// save_state_dict's.
std::vector<PackageFile> to_folder(const GraphModule& gm,
                                   const std::string& module_name = "FxModule");

/// The package of any GraphModule: one with onnx.* targets (an imported ONNX model) is lowered
/// first (lower()), every node that cannot be is named in one fx::Error(Unsupported), and
/// nothing is produced then. What the CLI's --to-torch, torchPackage() in JS and the
/// playground's download write.
std::vector<PackageFile> torch_package(const GraphModule& gm,
                                       const std::string& module_name = "FxModule");

/// The torch.nn classes to_folder constructs from their extra_repr(), sorted.
std::vector<std::string> known_module_types();

}  // namespace fx::torch_codegen
