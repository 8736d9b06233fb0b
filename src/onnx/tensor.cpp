// TensorProto <-> fx::Tensor, element types, and the checks shared by import and export.
#include <cstring>
#include <limits>

#include "fx/error.h"
#include "fx/limits.h"
#include "onnx/common.h"

namespace fx::onnx {

int32_t onnx_elem_type(Dtype dtype) {
  switch (dtype) {
    case Dtype::Float32:
      return ::onnx::TensorProto::FLOAT;
    case Dtype::UInt8:
      return ::onnx::TensorProto::UINT8;
    case Dtype::Int8:
      return ::onnx::TensorProto::INT8;
    case Dtype::UInt16:
      return ::onnx::TensorProto::UINT16;
    case Dtype::Int16:
      return ::onnx::TensorProto::INT16;
    case Dtype::Int32:
      return ::onnx::TensorProto::INT32;
    case Dtype::Int64:
      return ::onnx::TensorProto::INT64;
    case Dtype::String:
      return ::onnx::TensorProto::STRING;
    case Dtype::Bool:
      return ::onnx::TensorProto::BOOL;
    case Dtype::Float16:
      return ::onnx::TensorProto::FLOAT16;
    case Dtype::Float64:
      return ::onnx::TensorProto::DOUBLE;
    case Dtype::UInt32:
      return ::onnx::TensorProto::UINT32;
    case Dtype::UInt64:
      return ::onnx::TensorProto::UINT64;
    case Dtype::Complex64:
      return ::onnx::TensorProto::COMPLEX64;
    case Dtype::Complex128:
      return ::onnx::TensorProto::COMPLEX128;
    case Dtype::BFloat16:
      return ::onnx::TensorProto::BFLOAT16;
    default:
      throw Error(ErrorKind::Unsupported,
                  std::string("dtype ") + dtype_name(dtype) + " has no ONNX element type");
  }
}

Dtype dtype_from_onnx(int32_t elem_type, const std::string& what) {
  switch (elem_type) {
    case ::onnx::TensorProto::FLOAT:
      return Dtype::Float32;
    case ::onnx::TensorProto::UINT8:
      return Dtype::UInt8;
    case ::onnx::TensorProto::INT8:
      return Dtype::Int8;
    case ::onnx::TensorProto::UINT16:
      return Dtype::UInt16;
    case ::onnx::TensorProto::INT16:
      return Dtype::Int16;
    case ::onnx::TensorProto::INT32:
      return Dtype::Int32;
    case ::onnx::TensorProto::INT64:
      return Dtype::Int64;
    case ::onnx::TensorProto::STRING:
      return Dtype::String;
    case ::onnx::TensorProto::BOOL:
      return Dtype::Bool;
    case ::onnx::TensorProto::FLOAT16:
      return Dtype::Float16;
    case ::onnx::TensorProto::DOUBLE:
      return Dtype::Float64;
    case ::onnx::TensorProto::UINT32:
      return Dtype::UInt32;
    case ::onnx::TensorProto::UINT64:
      return Dtype::UInt64;
    case ::onnx::TensorProto::COMPLEX64:
      return Dtype::Complex64;
    case ::onnx::TensorProto::COMPLEX128:
      return Dtype::Complex128;
    case ::onnx::TensorProto::BFLOAT16:
      return Dtype::BFloat16;
    default:
      throw Error(ErrorKind::Unsupported, what + ": ONNX element type " +
                                              std::to_string(elem_type) +
                                              " is not supported (float8/int4 and undefined "
                                              "types have no fxwasm dtype)");
  }
}

namespace {

// Copies the `count` elements of a repeated field into `out` as `T`.
template <class T, class Field>
void copy_field(const Field& field, uint8_t* out) {
  T* dst = reinterpret_cast<T*>(out);
  for (int i = 0; i < field.size(); ++i) dst[i] = static_cast<T>(field.Get(i));
}

}  // namespace

Tensor tensor_from_proto(const ::onnx::TensorProto& p, const std::string& what,
                         const ExternalDataReader& reader) {
  Tensor t;
  t.dtype = dtype_from_onnx(p.data_type(), what);
  for (int i = 0; i < p.dims_size(); ++i) {
    const int64_t d = p.dims(i);
    if (d < 0)
      throw Error(ErrorKind::Parse, what + ": dimension " + std::to_string(i) + " is negative (" +
                                        std::to_string(d) + ")");
    t.shape.push_back(d);
  }
  // numel and byte size checked against fx::limits() before anything is allocated: an absurd
  // shape must neither wrap around nor allocate.
  const auto numel = static_cast<uint64_t>(checked_numel(t.shape, what));
  const auto nbytes = static_cast<size_t>(checked_nbytes(t.dtype, t.shape, what));

  if (t.dtype == Dtype::String) {  // string_data: one bytes field per element
    if (p.has_data_location() && p.data_location() == ::onnx::TensorProto::EXTERNAL)
      throw Error(ErrorKind::Unsupported, what + ": string tensors in external data");
    if (static_cast<uint64_t>(p.string_data_size()) != numel)
      throw Error(ErrorKind::Parse, what + ": " + std::to_string(p.string_data_size()) +
                                        " strings for " + std::to_string(numel) + " elements");
    t.strings = std::make_shared<const std::vector<std::string>>(p.string_data().begin(),
                                                                 p.string_data().end());
    return t;
  }

  if (p.has_data_location() && p.data_location() == ::onnx::TensorProto::EXTERNAL) {
    auto ext = std::make_shared<ExternalData>();
    for (const auto& kv : p.external_data()) {
      try {
        if (kv.key() == "location")
          ext->location = kv.value();
        else if (kv.key() == "offset")
          ext->offset = std::stoll(kv.value());
        else if (kv.key() == "length")
          ext->length = std::stoll(kv.value());
      } catch (const std::exception&) {
        throw Error(ErrorKind::Parse, what + ": external_data '" + kv.key() +
                                          "' is not a number ('" + kv.value() + "')");
      }
    }
    if (ext->location.empty())
      throw Error(ErrorKind::Parse, what + ": external data without a 'location'");
    if (ext->offset < 0) throw Error(ErrorKind::Parse, what + ": external data offset is negative");
    if (ext->length >= 0 && static_cast<uint64_t>(ext->length) != nbytes)
      throw Error(ErrorKind::Parse, what + ": external data length " + std::to_string(ext->length) +
                                        " does not match the " + std::to_string(nbytes) +
                                        " bytes of its shape");
    if (reader) {
      const std::string location = ext->location;
      const int64_t offset = ext->offset;
      const int64_t length = ext->length >= 0 ? ext->length : static_cast<int64_t>(nbytes);
      ext->read = [reader, location, offset, length]() { return reader(location, offset, length); };
      ext->keep = true;  // read once, on first use
    }
    t.external = std::move(ext);
    return t;
  }

  if (p.has_raw_data()) {
    // Before allocating: 83 bytes claiming a 4 GB tensor fail at once.
    if (p.raw_data().size() != nbytes)
      throw Error(ErrorKind::Parse, what + ": raw_data has " + std::to_string(p.raw_data().size()) +
                                        " bytes, the " + dtype_name(t.dtype) + " shape needs " +
                                        std::to_string(nbytes));
    auto bytes = std::make_shared<std::vector<uint8_t>>(nbytes);
    if (nbytes) std::memcpy(bytes->data(), p.raw_data().data(), nbytes);
    t.data = std::move(bytes);
    return t;
  }
  // Typed fields (little-endian machines only, like onnxruntime's).
  auto expect = [&](int have, uint64_t want, const char* field) {
    if (static_cast<uint64_t>(have) != want)
      throw Error(ErrorKind::Parse, what + ": " + field + " has " + std::to_string(have) +
                                        " values, the shape needs " + std::to_string(want));
  };
  // The field's count is checked before allocating too (the copies below check it again).
  switch (t.dtype) {
    case Dtype::Float32:
    case Dtype::Complex64:
      expect(p.float_data_size(), t.dtype == Dtype::Float32 ? numel : 2 * numel, "float_data");
      break;
    case Dtype::Float64:
    case Dtype::Complex128:
      expect(p.double_data_size(), t.dtype == Dtype::Float64 ? numel : 2 * numel, "double_data");
      break;
    case Dtype::Int64:
      expect(p.int64_data_size(), numel, "int64_data");
      break;
    case Dtype::UInt32:
    case Dtype::UInt64:
      expect(p.uint64_data_size(), numel, "uint64_data");
      break;
    case Dtype::Int32:
    case Dtype::Int16:
    case Dtype::UInt16:
    case Dtype::Float16:
    case Dtype::BFloat16:
    case Dtype::Int8:
    case Dtype::UInt8:
    case Dtype::Bool:
      expect(p.int32_data_size(), numel, "int32_data");
      break;
    default:
      break;  // unsupported: the switch below says so
  }
  auto bytes = std::make_shared<std::vector<uint8_t>>(nbytes);
  uint8_t* out = bytes->data();
  switch (t.dtype) {
    case Dtype::Float32:
      expect(p.float_data_size(), numel, "float_data");
      copy_field<float>(p.float_data(), out);
      break;
    case Dtype::Complex64:
      expect(p.float_data_size(), 2 * numel, "float_data");
      copy_field<float>(p.float_data(), out);
      break;
    case Dtype::Float64:
      expect(p.double_data_size(), numel, "double_data");
      copy_field<double>(p.double_data(), out);
      break;
    case Dtype::Complex128:
      expect(p.double_data_size(), 2 * numel, "double_data");
      copy_field<double>(p.double_data(), out);
      break;
    case Dtype::Int64:
      expect(p.int64_data_size(), numel, "int64_data");
      copy_field<int64_t>(p.int64_data(), out);
      break;
    case Dtype::UInt32:
      expect(p.uint64_data_size(), numel, "uint64_data");
      copy_field<uint32_t>(p.uint64_data(), out);
      break;
    case Dtype::UInt64:
      expect(p.uint64_data_size(), numel, "uint64_data");
      copy_field<uint64_t>(p.uint64_data(), out);
      break;
    case Dtype::Int32:
      expect(p.int32_data_size(), numel, "int32_data");
      copy_field<int32_t>(p.int32_data(), out);
      break;
    case Dtype::Int16:
      expect(p.int32_data_size(), numel, "int32_data");
      copy_field<int16_t>(p.int32_data(), out);
      break;
    case Dtype::UInt16:
    case Dtype::Float16:
    case Dtype::BFloat16:  // the 16 bits sit in the low half of each int32
      expect(p.int32_data_size(), numel, "int32_data");
      copy_field<uint16_t>(p.int32_data(), out);
      break;
    case Dtype::Int8:
      expect(p.int32_data_size(), numel, "int32_data");
      copy_field<int8_t>(p.int32_data(), out);
      break;
    case Dtype::UInt8:
    case Dtype::Bool:
      expect(p.int32_data_size(), numel, "int32_data");
      copy_field<uint8_t>(p.int32_data(), out);
      break;
    default:
      throw Error(ErrorKind::Unsupported,
                  what + ": tensors of " + dtype_name(t.dtype) + " are not supported");
  }
  t.data = std::move(bytes);
  return t;
}

bool tensor_to_proto(const Tensor& t, const std::string& name, ::onnx::TensorProto* p,
                     bool embed_external, bool defer_raw) {
  p->Clear();
  if (!name.empty()) p->set_name(name);
  p->set_data_type(onnx_elem_type(t.dtype));
  for (int64_t d : t.shape) p->add_dims(d);
  if (!t.data && t.external && !t.external->in_memory && !embed_external) {
    p->set_data_location(::onnx::TensorProto::EXTERNAL);
    auto add = [&](const char* k, const std::string& v) {
      auto* kv = p->add_external_data();
      kv->set_key(k);
      kv->set_value(v);
    };
    add("location", t.external->location);
    add("offset", std::to_string(t.external->offset));
    add("length", std::to_string(static_cast<int64_t>(t.nbytes())));
    return false;
  }
  if (t.dtype == Dtype::String) {
    if (!t.strings)
      throw Error(ErrorKind::Value,
                  "tensor '" + name + "' (" + t.describe() + ") has no data to export");
    for (const std::string& s : *t.strings) p->add_string_data(s);
    return false;
  }
  Bytes b = t.bytes();
  if (!b)
    throw Error(ErrorKind::Value,
                "tensor '" + name + "' (" + t.describe() + ") has no data to export");
  if (defer_raw) return true;
  p->set_raw_data(b->data(), b->size());
  return false;
}

Tensor tensor_from_proto_bytes(const uint8_t* data, size_t size, std::string* name) {
  ::onnx::TensorProto p;
  if (size > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !p.ParseFromArray(data, static_cast<int>(size)))
    throw Error(ErrorKind::Parse, "not a serialized onnx.TensorProto (" + std::to_string(size) +
                                      " bytes that protobuf cannot parse)");
  if (name) *name = p.name();
  return tensor_from_proto(p, "tensor '" + p.name() + "'", nullptr);
}

std::vector<uint8_t> tensor_to_proto_bytes(const Tensor& t, const std::string& name) {
  ::onnx::TensorProto p;
  tensor_to_proto(t, name, &p, true);
  std::vector<uint8_t> out(p.ByteSizeLong());
  if (!out.empty()) p.SerializeToArray(out.data(), static_cast<int>(out.size()));
  return out;
}

}  // namespace fx::onnx
