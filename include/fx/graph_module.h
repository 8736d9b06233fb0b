// fx::Module / fx::GraphModule — the attribute tree (parameters, buffers, submodules by
// qualified name) and a GraphModule that owns a Graph plus its generated code.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fx/argument.h"
#include "fx/graph.h"

namespace fx {

using Bytes = std::shared_ptr<const std::vector<uint8_t>>;

/// Where a tensor's bytes live while they are not loaded (ONNX external data): a side file read
/// on first use through a caller-supplied reader, so a model larger than memory can still be
/// imported, inspected, rewritten and exported.
struct ExternalData {
  std::string location;  ///< file name relative to the model ("weights.bin")
  int64_t offset = 0;
  int64_t length = -1;  ///< -1: to the end of the file
  /// Reads the bytes; throws fx::Error if it cannot. Null: no reader was supplied.
  std::function<Bytes()> read;
  /// Keep the bytes once read (data that does not change, like an ONNX model's weight files), so
  /// that every later use (each run of the model) shares them instead of reading them again.
  /// Off for views of live memory that may change (fx::torch::share_fx_tensor).
  bool keep = false;
  /// The bytes are made from memory this process holds (a live LibTorch tensor, a weight kept
  /// in its GEMM-packed form), not read from a file: an exporter writes them into the model
  /// instead of referencing `location`.
  bool in_memory = false;
  mutable std::mutex kept_mutex;
  mutable Bytes kept;
};

/// A tensor value held by a module: dtype, shape and raw little-endian bytes. The core never
/// computes with it; LibTorch (src/torch) and the executor do.
struct Tensor {
  Dtype dtype = Dtype::Float32;
  std::vector<int64_t> shape;
  Bytes data;  ///< null for metadata-only tensors and for external data not yet loaded
  bool requires_grad = false;
  /// Set when the bytes live outside the model (see ExternalData); shared by copies.
  std::shared_ptr<const ExternalData> external;
  /// A string tensor's elements (dtype String, row-major; `data` stays null).
  std::shared_ptr<const std::vector<std::string>> strings;

  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  /// The bytes: `data` if present, else read from `external` (not cached: the caller keeps
  /// them as long as it needs them). Null when neither is there. Throws fx::Error(Value)
  /// naming the location if external bytes are needed but no reader was given, or
  /// fx::Error(Parse) if the reader returns the wrong number of bytes.
  Bytes bytes() const;
  /// Whether bytes() can return data (loaded, or external with a reader).
  bool has_data() const { return data || strings || (external && external->read); }
  /// "float32[3, 4]".
  std::string describe() const;
};

/// A node of the attribute tree, like nn.Module: ordered children, parameters and buffers.
class Module {
 public:
  /// `type_name` is the Python class name shown when printing ("Linear", "Module").
  explicit Module(std::string type_name = "Module", std::string extra_repr = {});
  virtual ~Module();

  const std::string& type_name() const { return type_name_; }
  void set_type_name(std::string name) { type_name_ = std::move(name); }
  /// nn.Module.extra_repr(): "in_features=4, out_features=5, bias=True".
  const std::string& extra_repr() const { return extra_repr_; }
  void set_extra_repr(std::string s) { extra_repr_ = std::move(s); }
  /// Marks the module side-effectful: call_module nodes on it survive dead-code elimination.
  bool is_impure() const { return impure_; }
  void set_impure(bool impure) { impure_ = impure; }

  void add_module(const std::string& name, std::shared_ptr<Module> module);
  void register_parameter(const std::string& name, Tensor t);
  void register_buffer(const std::string& name, Tensor t);

  /// The direct child named `name`, or nullptr.
  std::shared_ptr<Module> child(const std::string& name) const;
  const Tensor* parameter(const std::string& name) const;
  const Tensor* buffer(const std::string& name) const;
  /// Removes a direct child/parameter/buffer; returns whether it existed.
  bool remove_child(const std::string& name);
  bool remove_attr(const std::string& name);

  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }
  const std::vector<std::pair<std::string, Tensor>>& parameters() const { return params_; }
  const std::vector<std::pair<std::string, Tensor>>& buffers() const { return buffers_; }

  /// nn.Module.get_submodule: "" is this module. Throws fx::Error(Attribute) naming the
  /// missing atom ("Module has no attribute `x`").
  std::shared_ptr<Module> get_submodule(const std::string& target) const;
  /// A parameter or buffer by qualified name ("layer1.0.conv1.weight"), or nullptr.
  const Tensor* get_tensor(const std::string& target) const;
  /// Kind of attribute at a qualified name: 'm' module, 'p' parameter, 'b' buffer, 0 none.
  char attr_kind(const std::string& target) const;

  /// nn.Module.named_modules(): ("", this) first, then depth-first, each module once.
  std::vector<std::pair<std::string, const Module*>> named_modules() const;
  /// All parameters / buffers with qualified names, depth-first.
  std::vector<std::pair<std::string, const Tensor*>> named_parameters() const;
  std::vector<std::pair<std::string, const Tensor*>> named_buffers() const;

  /// nn.Module.__repr__: "Linear(in_features=4, out_features=5, bias=True)" or the nested form.
  std::string repr() const;

  /// A process-wide count of changes to any module's parameters, buffers or children (and of
  /// modules destroyed): while it stays put, no tensor a get_attr names has changed, so the
  /// executor's cached plans skip rechecking their constants.
  static uint64_t attribute_generation();

 protected:
  std::string type_name_;
  std::string extra_repr_;
  bool impure_ = false;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
};

/// torch.fx.GraphModule: a Module that owns a Graph and the Python code generated from it.
class GraphModule : public Module {
 public:
  /// Like torch.fx: copies from `root` only the attributes that get_attr/call_module nodes
  /// reference (creating empty intermediate modules; tensors that are not parameters become
  /// buffers), then recompiles. `root` may be null for a graph without attribute references.
  /// Throws fx::Error(Attribute) naming the node whose target `root` lacks. The graph is only
  /// taken on success: if the constructor throws, `graph` still holds it.
  GraphModule(const Module* root, std::unique_ptr<Graph>&& graph,
              std::string class_name = "GraphModule");
  ~GraphModule() override;

  Graph& graph() { return *graph_; }
  const Graph& graph() const { return *graph_; }
  /// Installs a new graph and recompiles. If code generation throws, nothing changes and
  /// `graph` still holds the new graph.
  void set_graph(std::unique_ptr<Graph>&& graph);

  /// Regenerates `code()` from the graph; call after mutating the graph.
  const PythonCode& recompile();
  /// The generated source of `forward` (as of the last recompile()).
  const std::string& code() const { return code_.src; }
  const PythonCode& python_code() const { return code_; }
  /// print_readable(): `class <Name>(torch.nn.Module):` + verbose code + nested GraphModules.
  std::string print_readable() const;
  /// str(gm): module repr, code and the print_readable() reminder.
  std::string str() const;

  /// Installs `module` at `target`, creating empty intermediate modules. Returns false if a path
  /// element exists but is not a module.
  bool add_submodule(const std::string& target, std::shared_ptr<Module> module);
  /// Deletes the submodule at `target`; false if the path is invalid or not a module.
  bool delete_submodule(const std::string& target);
  /// Deletes every submodule no call_module/get_attr node references (keeping the
  /// descendants of called modules).
  void delete_all_unused_submodules();

  /// Variables for the codegen (defaults: fixed codegen bugs).
  CodegenOptions& codegen_options() { return codegen_options_; }

  /// Free-form metadata of the module as a whole (an imported ONNX model keeps its opsets,
  /// producer, doc strings and metadata_props here so that export is lossless). The non-const
  /// access bumps graph().version(), like a node's meta() (the executor's plans read the opsets).
  Kwargs& meta();
  const Kwargs& meta() const { return meta_; }

 private:
  // Makes `graph` the graph and recompiles; on failure puts everything back and rethrows.
  void install(std::unique_ptr<Graph>& graph);
  std::unique_ptr<Graph> graph_;
  PythonCode code_;
  CodegenOptions codegen_options_;
  Kwargs meta_;
};

}  // namespace fx
