// fx::torch_codegen — GraphModules whose targets are PyTorch's, written out for PyTorch: here
// PyTorch's own state_dict file format, in C++ (no LibTorch, so it works in wasm too).
//
//   save_state_dict({{"fc.weight", &w}, ...}) gives the bytes of a file that
// `torch.load(path)` reads into an OrderedDict of tensors (torch 1.13, default arguments).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fx/graph_module.h"

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

}  // namespace fx::torch_codegen
