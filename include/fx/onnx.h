// fx::onnx — ONNX models in and out of FX graphs, over the C++ classes protoc generates from
// ONNX's own onnx.proto (protobuf-lite runtime).
//
//   std::unique_ptr<fx::GraphModule> gm = fx::onnx::import_model(bytes.data(), bytes.size());
//   std::cout << gm->code();        // conv = onnx.Conv(x, conv1_weight, ..., pads = [1, 1, 1, 1])
//   std::vector<uint8_t> out = fx::onnx::export_model(*gm);
//
// How a model maps onto the IR:
//   graph inputs   -> placeholders (meta "onnx_type": {"dtype": ..., "shape": (1, 3, "N", ...)})
//   initializers   -> parameters/buffers of the GraphModule + one get_attr node each; a name like
//                     "layer1.0.conv1.weight" becomes that submodule path, others are sanitised
//   nodes          -> call_function nodes with target onnx.<OpType> (onnx.<domain>.<OpType> for
//                     other domains), inputs as args (an empty optional input is None),
//                     attributes as kwargs keeping ONNX types (int, float, str, lists of those;
//                     tensors as get_attr nodes or, for one-element tensors, scalars; graphs as
//                     get_attr nodes of sub-GraphModules)
//   Constant       -> a buffer + get_attr node (exported again as a Constant node)
//   several outputs-> the node yields a tuple; each used output is an operator.getitem node
//   If/Loop/Scan   -> bodies become sub-GraphModules; values a body captures from the enclosing
//                     graph become extra placeholders of the body and extra trailing args of the
//                     node (meta "onnx_num_inputs" counts the real inputs)
// Original names (meta "onnx_name", "onnx_outputs"), opsets, producer, doc strings and
// metadata_props (GraphModule::meta()) are kept, so import -> export -> import is lossless.
//
// Every malformed model throws fx::Error (kind Parse for bad bytes or structure, Unsupported for
// what we cannot represent) naming the node, value or field; nothing is silently dropped.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fx/graph_module.h"

namespace fx::onnx {

/// The meta keys through which an imported GraphModule carries what FX has no field for. Import
/// sets them, export reads them; the executor, the CLI and the JS package (fx.onnxMetaKeys) read
/// them by these names, never by spelling the strings.
namespace meta {
// Node meta.
inline constexpr const char* kName = "onnx_name";           ///< original node or value name (str)
inline constexpr const char* kOutputs = "onnx_outputs";     ///< every output name, in order (list)
inline constexpr const char* kType = "onnx_type";           ///< placeholder: {dtype, shape}
inline constexpr const char* kDomain = "onnx_domain";       ///< node domain if not the default one
inline constexpr const char* kDoc = "onnx_doc_string";      ///< doc_string (node, graph or model)
inline constexpr const char* kNodeName = "onnx_node_name";  ///< Constant node: its name
inline constexpr const char* kTensorName = "onnx_tensor_name";    ///< Constant node: its tensor's
inline constexpr const char* kNumInputs = "onnx_num_inputs";      ///< real inputs before captures
inline constexpr const char* kCaptures = "onnx_captures";         ///< captured names, arg order
inline constexpr const char* kOuterScope = "onnx_outer_scope";    ///< body placeholder: captured
inline constexpr const char* kConstant = "onnx_constant";         ///< get_attr: was a Constant
inline constexpr const char* kTensorAttrs = "onnx_tensor_attrs";  ///< scalars that were tensors
inline constexpr const char* kAttrTypes = "onnx_attr_types";      ///< empty lists' INTS/FLOATS...
inline constexpr const char* kOutputTypes = "onnx_output_types";  ///< output node: value types
/// output node: the node each output was at import; a type whose output now returns another
/// node while that one is still in the graph is stale and is not written
inline constexpr const char* kOutputSources = "onnx_output_sources";
// GraphModule meta.
inline constexpr const char* kOpsetImport = "onnx_opset_import";  ///< {domain: version}
inline constexpr const char* kIrVersion = "onnx_ir_version";
inline constexpr const char* kProducerName = "onnx_producer_name";
inline constexpr const char* kProducerVersion = "onnx_producer_version";
inline constexpr const char* kModelVersion = "onnx_model_version";
inline constexpr const char* kMetadataProps = "onnx_metadata_props";  ///< {key: value}
inline constexpr const char* kFunctions = "onnx_functions";           ///< serialized FunctionProtos
inline constexpr const char* kGraphName = "onnx_graph_name";
inline constexpr const char* kGraphDoc = "onnx_graph_doc_string";
inline constexpr const char* kInitializerInputs = "onnx_initializer_inputs";  ///< graph inputs
                                                                              ///< that are weights
}  // namespace meta
using namespace meta;  // fx::onnx::kName is fx::onnx::meta::kName

/// Reads `length` bytes at `offset` of the external-data file `location` (relative to the model;
/// `length` -1 means to the end of the file). Throws fx::Error when it cannot.
using ExternalDataReader =
    std::function<Bytes(const std::string& location, int64_t offset, int64_t length)>;

struct ImportOptions {
  /// Resolves tensors stored outside the model. Reads happen lazily, when a tensor's bytes are
  /// first needed (running, folding, exporting with embedded data), and the tensor keeps them
  /// from then on (later runs do not read again); without a reader such tensors import fine and
  /// fail only when their bytes are needed.
  ExternalDataReader external_data;
  /// What a default-domain (or ai.onnx.ml) opset newer than the importer knows does: Warn
  /// records a warning in the module's meta kImportWarnings, Error throws fx::Error(Unsupported).
  /// A model without opset_import is always an fx::Error(Parse).
  enum class OpsetCheck { Warn, Error } opset_check = OpsetCheck::Warn;
};

/// Newest opsets the importer knows: ONNX's default domain (fxwasm writes opset 20 for Gelu)
/// and ai.onnx.ml.
inline constexpr int64_t kMaxKnownOpset = 20;
inline constexpr int64_t kMaxKnownMlOpset = 3;
/// Module meta: the importer's warnings (a list of strings), absent when there are none.
inline constexpr const char* kImportWarnings = "onnx_import_warnings";

/// The external-data reader of load_model: reads `location` only when its real path (symlinks
/// resolved) is a regular file inside `folder`, and only bytes the file has; fx::Error(Value)
/// names the file otherwise, fx::Error(Parse) the range.
ExternalDataReader folder_reader(const std::string& folder);

/// Parses a serialized ModelProto and builds a GraphModule (class name "OnnxModule").
std::unique_ptr<GraphModule> import_model(const uint8_t* data, size_t size,
                                          const ImportOptions& options = {});
inline std::unique_ptr<GraphModule> import_model(const std::vector<uint8_t>& bytes,
                                                 const ImportOptions& options = {}) {
  return import_model(bytes.data(), bytes.size(), options);
}
/// Like the above, but frees `bytes` as soon as protobuf has parsed them (and each
/// initializer's parsed copy once its tensor is built), so that peak memory stays near twice the
/// file size instead of three times.
std::unique_ptr<GraphModule> import_model(std::vector<uint8_t>&& bytes,
                                          const ImportOptions& options = {});

/// Reads the next bytes of a serialized model into `buffer` (at most `size`); returns how many it
/// wrote, 0 at the end. Throws fx::Error when it cannot read.
using ChunkReader = std::function<size_t(uint8_t* buffer, size_t size)>;

/// Parses a model read in chunks through `read`, so that the file's bytes never need to be in
/// memory as a whole: with the per-initializer release of parsed data, the peak stays near one
/// copy of the weights (what the wasm build's loadONNX uses).
std::unique_ptr<GraphModule> import_model_stream(const ChunkReader& read,
                                                 const ImportOptions& options = {});

/// Reads a model file; external data is read from files next to it (folder_reader) unless
/// `options` has its own reader.
std::unique_ptr<GraphModule> load_model(const std::string& path, ImportOptions options = {});

/// How export_model writes onnx.Gelu (made by the fuse-gelu pass), which ONNX has only from
/// opset 20, newer than many consumers (onnx 1.12's checker, older runtimes).
enum class GeluExport {
  Decomposed,  ///< Div/Erf/Add/Mul (the tanh form with Tanh): any opset, every consumer
  Microsoft,   ///< onnxruntime's com.microsoft Gelu (FastGelu for approximate = "tanh")
  Opset20,     ///< ONNX's Gelu, raising the opset to 20
};
/// "decomposed", "com.microsoft", "opset20" (the CLI's and JS's names), and back (throws
/// fx::Error(Value) for another name).
const char* gelu_export_name(GeluExport g);
GeluExport gelu_export_from_name(const std::string& name);

struct ExportOptions {
  /// Opset of the default domain when the module has none recorded (a graph built by hand).
  int64_t default_opset = 17;
  /// Write tensors that live in external files into the model instead of referencing the files
  /// (reads them through the import's reader).
  bool embed_external_data = false;
  /// The default domain's opset to write. 0: the module's own, raised to what its ops need (a
  /// LayerNormalization fused into an opset-13 model makes it opset 17). Nonzero pins it: an op
  /// newer than the pinned opset is written in older ops (LayerNormalization decomposed) or the
  /// export fails naming the node. A pin below the module's own opset is an error: ops are not
  /// converted down.
  int64_t opset = 0;
  GeluExport gelu = GeluExport::Decomposed;
};

/// One way a node breaks its ONNX op schema.
struct SchemaProblem {
  std::string node;
  std::string target;
  std::string rule;
};
/// Checks every onnx.* call_function node of `gm` against ONNX's schema of its op at the opset
/// (`opset` for the default domain when nonzero, else the module's meta onnx_opset_import, else
/// 17), from onnx.defs (scripts/gen_onnx_schemas.py -> src/onnx/schemas.inc): that positional
/// inputs are tensors (Nodes) or omitted (None) and as many as the schema takes, the declared
/// outputs, and that every attribute is in the schema, has its type, and required ones are
/// there. Not checked: ops the table does not have (other domains such as com.microsoft, ops
/// newer than onnx 1.12's opset 17 such as Gelu-20), ops newer than the module's opset (a fused
/// op, which export raises the opset for or writes in older ops) and deprecated ones. Empty when
/// the graph is what onnx.checker's schema checks accept.
std::vector<SchemaProblem> check_schemas(const GraphModule& gm, int64_t opset = 0);

/// Serializes a GraphModule whose compute nodes are onnx.* call_function nodes. Throws
/// fx::Error(Unsupported) naming a node that has no ONNX form (call_module, torch.* targets...).
std::vector<uint8_t> export_model(const GraphModule& gm, const ExportOptions& options = {});

/// Where export_model_to writes: `begin` is told the total size first, then `write` gets the
/// bytes in order, in pieces.
struct ByteSink {
  std::function<void(size_t total)> begin;
  std::function<void(const uint8_t* data, size_t size)> write;
};
/// export_model's bytes, written to `sink`: the main graph's weights go from the tensors (or
/// their external files) straight to the sink, never into a ModelProto or one output buffer, so
/// exporting needs little memory beyond the model itself (wasm's toONNX writes into a JS array).
void export_model_to(const GraphModule& gm, const ByteSink& sink,
                     const ExportOptions& options = {});

/// The ONNX element type number (TensorProto.DataType) of a dtype, and back. Throws
/// fx::Error(Unsupported) for types ONNX lacks or we do not represent.
int32_t onnx_elem_type(Dtype dtype);
Dtype dtype_from_onnx(int32_t elem_type, const std::string& what);

/// A serialized TensorProto <-> Tensor (ONNX's test-data files `input_0.pb`).
Tensor tensor_from_proto_bytes(const uint8_t* data, size_t size, std::string* name = nullptr);
std::vector<uint8_t> tensor_to_proto_bytes(const Tensor& t, const std::string& name = {});

/// A value of ONNX's data model as its test data serializes it (TensorProto, SequenceProto,
/// OptionalProto): a tensor, a sequence of values, or an optional (empty or holding one value).
struct DataValue {
  enum class Kind { Tensor, Sequence, Optional };
  Kind kind = Kind::Tensor;
  Tensor tensor;                    ///< Kind::Tensor
  std::vector<DataValue> elements;  ///< a sequence's elements; an optional's value (0 or 1)
  /// The element type of the tensors a sequence/optional holds, from the type it was read with
  /// (else from its first tensor; Float32 when neither says).
  Dtype element_dtype = Dtype::Float32;
  std::string name;
};
/// Decodes a serialized TensorProto, SequenceProto or OptionalProto (a backend test's
/// `input_0.pb`). Protobuf bytes do not say which message they are: `type` does, the
/// "onnx_type" meta of the graph input (or an entry of the output node's "onnx_output_types") the
/// data is for; without it, a TensorProto. Throws fx::Error(Parse) for malformed bytes,
/// fx::Error(Unsupported) for maps and sparse tensors, and nests at most 16 deep.
DataValue value_from_proto_bytes(const uint8_t* data, size_t size, const Argument* type = nullptr);
/// The same for a known kind (without a type, an empty sequence's element type is float32).
DataValue value_from_proto_bytes(const uint8_t* data, size_t size, DataValue::Kind kind);
/// Which kind of value an "onnx_type" meta describes: Tensor when it is missing or a tensor type.
DataValue::Kind value_kind(const Argument* type);

}  // namespace fx::onnx
