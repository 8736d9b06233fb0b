// Writes a ModelProto whose main-graph initializers hold no raw_data yet: each weight goes from
// its fx::Tensor (or its external file) straight to the sink, so exporting never holds a second
// copy of the weights in a ModelProto nor a third in one output buffer.
//
// The bytes are protobuf's own: a message serializes its fields in field-number order, so a
// message cut around one field (ModelProto around graph = 7, GraphProto around initializer = 5,
// TensorProto around raw_data = 9) is the serialization of its fields before that one, then the
// field, then the fields after it. Each cut is made by serializing the "before" fields alone and
// checking they are a prefix of the whole.
#include <cstring>
#include <unordered_map>

#include "fx/error.h"
#include "onnx/common.h"

namespace fx::onnx {

namespace {

constexpr size_t kStage = size_t{64} << 10;

size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Length-delimited field tags (wire type 2).
constexpr uint8_t kModelGraphTag = (7 << 3) | 2;
constexpr uint8_t kGraphInitializerTag = (5 << 3) | 2;
constexpr uint8_t kTensorRawDataTag = (9 << 3) | 2;

// Small writes are staged and passed on in pieces of 64 KB; a weight goes through at once.
class Out {
 public:
  explicit Out(const ByteSink& sink) : sink_(sink) { stage_.reserve(kStage); }
  void bytes(const void* p, size_t n) {
    if (n >= kStage) {
      flush();
      sink_.write(static_cast<const uint8_t*>(p), n);
      written_ += n;
      return;
    }
    if (stage_.size() + n > kStage) flush();
    const auto* b = static_cast<const uint8_t*>(p);
    stage_.insert(stage_.end(), b, b + n);
  }
  void bytes(const std::string& s) { bytes(s.data(), s.size()); }
  void varint(uint64_t v) {
    uint8_t buf[10];
    size_t n = 0;
    while (v >= 0x80) {
      buf[n++] = static_cast<uint8_t>(v | 0x80);
      v >>= 7;
    }
    buf[n++] = static_cast<uint8_t>(v);
    bytes(buf, n);
  }
  void flush() {
    if (stage_.empty()) return;
    sink_.write(stage_.data(), stage_.size());
    written_ += stage_.size();
    stage_.clear();
  }
  size_t written() const { return written_ + stage_.size(); }

 private:
  const ByteSink& sink_;
  std::vector<uint8_t> stage_;
  size_t written_ = 0;
};

// `whole` with `head` cut off its front (`what` names the message for the internal error).
std::string after_prefix(const std::string& whole, const std::string& head, const char* what) {
  if (whole.compare(0, head.size(), head) != 0)
    throw Error(ErrorKind::Internal,
                std::string("export: protobuf did not serialize ") + what + " in field order");
  return whole.substr(head.size());
}

struct Weight {
  const Tensor* tensor;
  size_t raw;    // bytes of raw_data
  size_t small;  // the TensorProto without raw_data
  size_t full;   // with it
};

void write_tensor(Out& out, const ::onnx::TensorProto& p, const Weight& w) {
  const std::string all = p.SerializeAsString();
  // Fields after raw_data (9): double_data 10, uint64_data 11, doc_string 12, external_data 13,
  // data_location 14.
  ::onnx::TensorProto tail;
  *tail.mutable_double_data() = p.double_data();
  *tail.mutable_uint64_data() = p.uint64_data();
  if (p.has_doc_string()) tail.set_doc_string(p.doc_string());
  *tail.mutable_external_data() = p.external_data();
  if (p.has_data_location()) tail.set_data_location(p.data_location());
  const std::string after = tail.SerializeAsString();
  if (all.size() < after.size() || all.compare(all.size() - after.size(), after.size(), after) != 0)
    throw Error(ErrorKind::Internal, "export: protobuf did not serialize a tensor in field order");
  out.bytes(all.data(), all.size() - after.size());
  out.varint(kTensorRawDataTag);
  out.varint(w.raw);
  const Bytes b = w.tensor->bytes();
  if (!b || b->size() != w.raw)
    throw Error(ErrorKind::Value,
                "tensor '" + p.name() + "' (" + w.tensor->describe() + ") has no data to export");
  out.bytes(b->data(), b->size());
  out.bytes(after);
}

}  // namespace

void serialize_model(::onnx::ModelProto& model, const std::vector<DeferredWeight>& deferred,
                     const ByteSink& sink) {
  if (deferred.empty()) {
    const std::string all = model.SerializeAsString();
    sink.begin(all.size());
    Out out(sink);
    out.bytes(all);
    out.flush();
    return;
  }
  ::onnx::GraphProto& graph = *model.mutable_graph();
  std::unordered_map<const ::onnx::TensorProto*, Weight> weights;
  size_t graph_growth = 0;
  for (const DeferredWeight& d : deferred) {
    Weight w{d.tensor, static_cast<size_t>(d.tensor->nbytes()), d.proto->ByteSizeLong(), 0};
    w.full = w.small + 1 + varint_size(w.raw) + w.raw;
    graph_growth += (w.full + varint_size(w.full)) - (w.small + varint_size(w.small));
    weights.emplace(d.proto, w);
  }
  const size_t graph_small = graph.ByteSizeLong();
  const size_t graph_full = graph_small + graph_growth;
  const size_t model_full = model.ByteSizeLong() + (graph_full + varint_size(graph_full)) -
                            (graph_small + varint_size(graph_small));
  sink.begin(model_full);
  Out out(sink);

  // ModelProto: the fields before graph (1..6), the graph, the fields after it (8...).
  std::unique_ptr<::onnx::GraphProto> g(model.release_graph());
  const std::string model_rest = model.SerializeAsString();
  ::onnx::ModelProto head;
  if (model.has_ir_version()) head.set_ir_version(model.ir_version());
  if (model.has_producer_name()) head.set_producer_name(model.producer_name());
  if (model.has_producer_version()) head.set_producer_version(model.producer_version());
  if (model.has_domain()) head.set_domain(model.domain());
  if (model.has_model_version()) head.set_model_version(model.model_version());
  if (model.has_doc_string()) head.set_doc_string(model.doc_string());
  const std::string model_head = head.SerializeAsString();
  const std::string model_tail = after_prefix(model_rest, model_head, "the model");
  out.bytes(model_head);
  out.varint(kModelGraphTag);
  out.varint(graph_full);
  const size_t graph_start = out.written();

  // GraphProto: node (1) and name (2), the initializers (5), the fields after them (10...).
  google::protobuf::RepeatedPtrField<::onnx::TensorProto> inits;
  inits.Swap(g->mutable_initializer());
  const std::string graph_rest = g->SerializeAsString();
  ::onnx::GraphProto graph_head;
  graph_head.mutable_node()->Swap(g->mutable_node());
  if (g->has_name()) graph_head.set_name(g->name());
  const std::string graph_head_bytes = graph_head.SerializeAsString();
  g->mutable_node()->Swap(graph_head.mutable_node());
  out.bytes(graph_head_bytes);
  for (const ::onnx::TensorProto& t : inits) {
    out.varint(kGraphInitializerTag);
    auto it = weights.find(&t);
    if (it == weights.end()) {
      const std::string s = t.SerializeAsString();
      out.varint(s.size());
      out.bytes(s);
    } else {
      out.varint(it->second.full);
      write_tensor(out, t, it->second);
    }
  }
  out.bytes(after_prefix(graph_rest, graph_head_bytes, "the graph"));
  inits.Swap(g->mutable_initializer());
  model.set_allocated_graph(g.release());
  if (out.written() - graph_start != graph_full)
    throw Error(ErrorKind::Internal, "export: the graph's size changed while it was written");
  out.bytes(model_tail);
  out.flush();
  if (out.written() != model_full)
    throw Error(ErrorKind::Internal, "export: wrote " + std::to_string(out.written()) +
                                         " bytes of the " + std::to_string(model_full) +
                                         " announced");
}

}  // namespace fx::onnx
