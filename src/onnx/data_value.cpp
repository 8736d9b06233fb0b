// ONNX's test data in its three forms: TensorProto, SequenceProto and OptionalProto
// (onnx-data.proto). Debian's onnx.proto lacks the last two, so their few fields are read here
// straight from the protobuf wire format; their tensors go through tensor_from_proto.
#include <limits>

#include "onnx/common.h"

namespace fx::onnx {
namespace {

// SequenceProto and OptionalProto number their fields alike: 1 name, 2 elem_type, then one
// (repeated, for a sequence) field per kind of element.
enum Field : uint32_t {
  kName = 1,
  kElemType = 2,
  kTensor = 3,
  kSparse = 4,
  kSequence = 5,
  kMap = 6,
  kOptional = 7
};
constexpr int kMaxDepth = 16;  // sequences of sequences...: a constant bound, not the input's

class WireReader {
 public:
  WireReader(const uint8_t* p, size_t n, const char* what) : p_(p), end_(p + n), what_(what) {}
  bool done() const { return p_ == end_; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) bad("a truncated varint");
      const uint8_t b = *p_++;
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    bad("a varint longer than 10 bytes");
  }
  // A length-delimited field's bytes.
  std::pair<const uint8_t*, size_t> bytes() {
    const uint64_t n = varint();
    if (n > static_cast<uint64_t>(end_ - p_)) bad("a field longer than the message");
    const uint8_t* start = p_;
    p_ += n;
    return {start, static_cast<size_t>(n)};
  }
  void skip(uint32_t wire) {
    switch (wire) {
      case 0:
        varint();
        return;
      case 1:
        advance(8);
        return;
      case 2:
        bytes();
        return;
      case 5:
        advance(4);
        return;
      default:
        bad("wire type " + std::to_string(wire));
    }
  }
  [[noreturn]] void bad(const std::string& why) const {
    throw Error(ErrorKind::Parse, std::string("not a serialized onnx.") + what_ + ": " + why);
  }

 private:
  void advance(size_t n) {
    if (n > static_cast<size_t>(end_ - p_)) bad("a truncated field");
    p_ += n;
  }
  const uint8_t* p_;
  const uint8_t* end_;
  const char* what_;
};

DataValue decode_tensor(const uint8_t* data, size_t size) {
  DataValue v;
  v.kind = DataValue::Kind::Tensor;
  v.tensor = tensor_from_proto_bytes(data, size, &v.name);
  v.element_dtype = v.tensor.dtype;
  return v;
}

// A SequenceProto (`sequence`) or an OptionalProto.
DataValue decode_container(const uint8_t* data, size_t size, bool sequence, int depth) {
  const char* what = sequence ? "SequenceProto" : "OptionalProto";
  if (depth > kMaxDepth)
    throw Error(ErrorKind::Unsupported, std::string("an onnx.") + what + " nested more than " +
                                            std::to_string(kMaxDepth) + " deep");
  DataValue v;
  v.kind = sequence ? DataValue::Kind::Sequence : DataValue::Kind::Optional;
  WireReader r(data, size, what);
  bool dtype_known = false;
  while (!r.done()) {
    const uint64_t key = r.varint();
    const auto field = static_cast<uint32_t>(key >> 3), wire = static_cast<uint32_t>(key & 7);
    if (field == kElemType && wire == 0) {
      r.varint();  // the kind of element (the fields below say it too)
    } else if (field >= kName && field <= kOptional && wire == 2) {
      const auto [p, n] = r.bytes();
      switch (field) {
        case kName:
          v.name.assign(reinterpret_cast<const char*>(p), n);
          break;
        case kTensor:
          v.elements.push_back(decode_tensor(p, n));
          if (!dtype_known) v.element_dtype = v.elements.back().tensor.dtype;
          dtype_known = true;
          break;
        case kSequence:
        case kOptional:
          v.elements.push_back(decode_container(p, n, field == kSequence, depth + 1));
          v.element_dtype = v.elements.back().element_dtype;
          break;
        default:
          throw Error(ErrorKind::Unsupported, std::string("an onnx.") + what + " holding " +
                                                  (field == kMap ? "maps" : "sparse tensors") +
                                                  " (not supported)");
      }
    } else {
      r.skip(wire);
    }
  }
  if (!sequence && v.elements.size() > 1)
    r.bad("an optional holds " + std::to_string(v.elements.size()) + " values");
  return v;
}

const Argument* dict_get(const Argument* d, const char* key) {
  if (!d || d->kind() != Argument::Kind::Dict) return nullptr;
  for (const auto& kv : d->dict_items())
    if (kv.first.kind() == Argument::Kind::String && kv.first.to_string() == key) return &kv.second;
  return nullptr;
}

// The tensor element type inside a sequence/optional type, if it names one.
bool element_dtype_of(const ::onnx::TypeProto& t, Dtype* out) {
  const ::onnx::TypeProto* cur = &t;
  for (int depth = 0; depth <= kMaxDepth; ++depth) {
    if (cur->has_tensor_type()) {
      if (cur->tensor_type().elem_type() == 0) return false;
      *out = dtype_from_onnx(cur->tensor_type().elem_type(), "element type");
      return true;
    }
    if (cur->has_sequence_type() && cur->sequence_type().has_elem_type())
      cur = &cur->sequence_type().elem_type();
    else if (cur->has_optional_type() && cur->optional_type().has_elem_type())
      cur = &cur->optional_type().elem_type();
    else
      return false;
  }
  return false;
}

}  // namespace

namespace {

// The TypeProto an "onnx_type" dict keeps verbatim (sequences, optionals...); false for a
// tensor type or none.
bool parse_type(const Argument* type, ::onnx::TypeProto* t) {
  const Argument* proto = dict_get(type, "proto");
  if (!proto || proto->kind() != Argument::Kind::String) return false;
  if (!t->ParseFromString(proto->to_string()))
    throw Error(ErrorKind::Parse, "the value's type is not a serialized TypeProto");
  return true;
}

}  // namespace

DataValue::Kind value_kind(const Argument* type) {
  ::onnx::TypeProto t;
  if (!parse_type(type, &t) || t.has_tensor_type()) return DataValue::Kind::Tensor;
  if (t.has_sequence_type()) return DataValue::Kind::Sequence;
  if (t.has_optional_type()) return DataValue::Kind::Optional;
  throw Error(ErrorKind::Unsupported,
              "only tensor, sequence and optional values are supported (not maps or sparse "
              "tensors)");
}

DataValue value_from_proto_bytes(const uint8_t* data, size_t size, DataValue::Kind kind) {
  if (kind == DataValue::Kind::Tensor) return decode_tensor(data, size);
  if (size > static_cast<size_t>(std::numeric_limits<int64_t>::max()))
    throw Error(ErrorKind::Parse, "value_from_proto_bytes: too many bytes");
  return decode_container(data, size, kind == DataValue::Kind::Sequence, 0);
}

DataValue value_from_proto_bytes(const uint8_t* data, size_t size, const Argument* type) {
  DataValue v = value_from_proto_bytes(data, size, value_kind(type));
  // An empty sequence or optional says nothing of its element type: its declared type does.
  ::onnx::TypeProto t;
  Dtype d;
  if (v.kind != DataValue::Kind::Tensor && parse_type(type, &t) && element_dtype_of(t, &d))
    v.element_dtype = d;
  return v;
}

}  // namespace fx::onnx
