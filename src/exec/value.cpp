// fx::exec::Value: a dense tensor value over shared bytes (its storage for computed values
// comes from memory.cpp).
#include <cstring>

#include "exec/ops.h"
#include "fx/exec.h"
#include "fx/limits.h"
#include "fx/onnx.h"
#include "kernels/elementwise.h"

namespace fx::exec {

namespace {
// Where an empty tensor's data points: never null, so that a zero-length memcpy or loop over
// it is well defined (UBSan's nonnull check; fuzz_run found Range/Split outputs of 0 elements).
alignas(64) const uint8_t kNoBytes[64] = {};
const uint8_t* data_of(const std::vector<uint8_t>& b) { return b.empty() ? kNoBytes : b.data(); }
}  // namespace

int64_t Value::numel() const {
  // (kernels::numel: 0 for any empty shape, whose other dimensions may multiply past int64;
  // checked_numel accepts {0, huge, huge}, and fuzz_run found ConstantOfShape [2^20, 2^52, 0].)
  return kernels::numel(shape_);
}

Value Value::zeros(Dtype dtype, std::vector<int64_t> shape) {
  Value v;
  v.dtype_ = dtype;
  // Checked before allocating: an absurd shape is a ResourceError, not a bad_alloc or a wrap.
  const int64_t nbytes = checked_nbytes(dtype, shape, "a new tensor");
  v.shape_ = std::move(shape);
  auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(nbytes));
  v.data_ = data_of(*bytes);
  v.nbytes_ = bytes->size();
  v.bytes_ = std::move(bytes);
  return v;
}

Value Value::wrap(Dtype dtype, std::vector<int64_t> shape,
                  std::shared_ptr<const std::vector<uint8_t>> bytes) {
  Value v;
  v.dtype_ = dtype;
  // Checked: in wasm32 a size_t product of [2^30 + 1] float32 would wrap to 4 bytes.
  const int64_t need64 = checked_nbytes(dtype, shape, "a tensor");
  v.shape_ = std::move(shape);
  const auto need = static_cast<size_t>(need64);
  if (!bytes || bytes->size() != need)
    throw Error(ErrorKind::Value, "tensor " + std::string(dtype_name(dtype)) + " of " +
                                      std::to_string(v.numel()) + " elements needs " +
                                      std::to_string(need) + " bytes, got " +
                                      std::to_string(bytes ? bytes->size() : 0));
  v.data_ = data_of(*bytes);
  v.nbytes_ = bytes->size();
  v.bytes_ = std::move(bytes);
  return v;
}

Value Value::from_strings(std::vector<int64_t> shape,
                          std::shared_ptr<const std::vector<std::string>> strings) {
  const int64_t n = checked_numel(shape, "a string tensor");
  if (!strings || static_cast<int64_t>(strings->size()) != n)
    throw Error(ErrorKind::Value, "a string tensor of " + std::to_string(n) + " elements got " +
                                      std::to_string(strings ? strings->size() : 0) + " strings");
  Value v;
  v.dtype_ = Dtype::String;
  v.shape_ = std::move(shape);
  v.strings_ = std::move(strings);
  return v;
}

const std::vector<std::string>& Value::strings() const {
  if (!strings_) throw Error(ErrorKind::Type, describe() + " is not a string tensor");
  return *strings_;
}

Value Value::from_tensor(const Tensor& t, const std::string& what) {
  if (t.dtype == Dtype::String) {
    if (!t.strings) throw Error(ErrorKind::Value, what + " has no data (" + t.describe() + ")");
    return from_strings(t.shape, t.strings);
  }
  Bytes b;
  try {
    b = t.bytes();
  } catch (const Error& e) {
    throw Error(e.kind(), what + ": " + e.what());
  }
  if (!b)
    throw Error(ErrorKind::Value, what + " has no data (" + t.describe() +
                                      "): load the model's weights before running it");
  return wrap(t.dtype, t.shape, std::move(b));
}

Value Value::packed_weight(Dtype dtype, std::vector<int64_t> shape,
                           std::shared_ptr<const PackedWeight> weight) {
  Value v;
  v.dtype_ = dtype;
  v.shape_ = std::move(shape);
  v.nbytes_ = static_cast<size_t>(kernels::numel(v.shape_)) * dtype_size(dtype);
  v.packed_ = std::move(weight);
  return v;
}

Value Value::scalar_f32(float v) { return from_f32({}, {v}); }

Value Value::from_f32(std::vector<int64_t> shape, const std::vector<float>& data) {
  Value v = zeros(Dtype::Float32, std::move(shape));
  if (static_cast<int64_t>(data.size()) != v.numel())
    throw Error(ErrorKind::Value,
                "from_f32: " + std::to_string(data.size()) + " values for " + v.describe());
  if (!data.empty())  // (memcpy from an empty vector's null data is undefined)
    std::memcpy(v.mutable_data<float>(), data.data(), data.size() * sizeof(float));
  return v;
}

Value Value::from_i64(std::vector<int64_t> shape, const std::vector<int64_t>& data) {
  Value v = zeros(Dtype::Int64, std::move(shape));
  if (static_cast<int64_t>(data.size()) != v.numel())
    throw Error(ErrorKind::Value,
                "from_i64: " + std::to_string(data.size()) + " values for " + v.describe());
  if (!data.empty())  // (fuzz_run: an empty Range)
    std::memcpy(v.mutable_data<int64_t>(), data.data(), data.size() * sizeof(int64_t));
  return v;
}

namespace {
template <class To>
std::vector<To> convert_all(const Value& v) {
  const int64_t n = v.numel();
  std::vector<To> out(static_cast<size_t>(n));
  auto fill = [&](auto* p) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<To>(p[i]);
  };
  switch (v.dtype()) {
    case Dtype::Float32:
      fill(v.data<float>());
      break;
    case Dtype::Float64:
      fill(v.data<double>());
      break;
    case Dtype::Int64:
      fill(v.data<int64_t>());
      break;
    case Dtype::Int32:
      fill(v.data<int32_t>());
      break;
    case Dtype::Int16:
      fill(v.data<int16_t>());
      break;
    case Dtype::Int8:
      fill(v.data<int8_t>());
      break;
    case Dtype::UInt8:
    case Dtype::Bool:
      fill(v.data<uint8_t>());
      break;
    default:
      throw Error(ErrorKind::Unsupported,
                  std::string("cannot convert ") + dtype_name(v.dtype()) + " elements");
  }
  return out;
}
}  // namespace

Value Value::with_shape(std::vector<int64_t> shape) const {
  int64_t n = 0;
  if (int64_t bytes = 0; try_nbytes(dtype_, shape, &bytes))
    n = dtype_size(dtype_) != 0 ? bytes / static_cast<int64_t>(dtype_size(dtype_))
                                : checked_numel(shape, "a view");
  else
    n = checked_numel(shape,
                      "a view of " + describe());  // throws, or the count without a byte limit
  if (n != numel())
    throw Error(ErrorKind::Value,
                "cannot view " + describe() + " with " + std::to_string(n) + " elements");
  Value v = *this;
  v.shape_ = std::move(shape);
  return v;
}

std::vector<int64_t> Value::to_i64() const { return convert_all<int64_t>(*this); }
std::vector<float> Value::to_f32() const { return convert_all<float>(*this); }

Tensor Value::to_tensor() const {
  Tensor t;
  t.dtype = dtype_;
  t.shape = shape_;
  if (strings_) {
    t.strings = strings_;
    return t;
  }
  if (packed_) {
    t.data = packed_->unpack();
    return t;
  }
  // (A computed value's arena range is copied: tensors hold whole byte vectors.)
  t.data = bytes_ ? bytes_ : std::make_shared<const std::vector<uint8_t>>(data_, data_ + nbytes_);
  return t;
}

const std::vector<Value>& Value::elements() const {
  static const std::vector<Value> none;
  return elements_ ? *elements_ : none;
}

Value Value::sequence(Dtype element_dtype, std::vector<Value> elements) {
  for (const Value& e : elements)
    if (!e.is_tensor() || e.dtype() != element_dtype)
      throw Error(ErrorKind::Value, std::string("a sequence of ") + dtype_name(element_dtype) +
                                        " tensors cannot hold " + e.describe());
  Value v;
  v.kind_ = ValueKind::Sequence;
  v.dtype_ = element_dtype;
  v.elements_ = std::make_shared<const std::vector<Value>>(std::move(elements));
  return v;
}

Value Value::none(Dtype element_dtype) {
  Value v;
  v.kind_ = ValueKind::Optional;
  v.dtype_ = element_dtype;
  return v;
}

Value Value::some(Value element) {
  if (element.kind() == ValueKind::Optional)
    throw Error(ErrorKind::Value,
                "an optional cannot hold an optional (" + element.describe() + ")");
  Value v;
  v.kind_ = ValueKind::Optional;
  v.dtype_ = element.dtype();
  v.elements_ = std::make_shared<const std::vector<Value>>(1, std::move(element));
  return v;
}

Value Value::from_onnx(const fx::onnx::DataValue& d, const std::string& what) {
  using K = fx::onnx::DataValue::Kind;
  switch (d.kind) {
    case K::Tensor:
      return from_tensor(d.tensor, what);
    case K::Sequence: {
      std::vector<Value> elements;
      for (size_t i = 0; i < d.elements.size(); ++i) {
        if (d.elements[i].kind != K::Tensor)
          throw Error(ErrorKind::Unsupported,
                      what + ": element " + std::to_string(i) +
                          " of the sequence is not a tensor (sequences hold tensors here)");
        elements.push_back(
            from_tensor(d.elements[i].tensor, what + " element " + std::to_string(i)));
      }
      return sequence(d.element_dtype, std::move(elements));
    }
    case K::Optional: {
      if (d.elements.empty()) return none(d.element_dtype);
      const fx::onnx::DataValue& e = d.elements[0];
      if (e.kind == K::Optional)
        throw Error(ErrorKind::Unsupported, what + ": an optional of an optional");
      // Depth 2 at most: a sequence inside holds tensors (checked above).
      return some(from_onnx(e, what));
    }
  }
  throw Error(ErrorKind::Value, what + ": unknown kind of value");
}

std::string Value::describe() const {
  if (kind_ == ValueKind::Sequence) {
    std::string s = std::string("sequence<") + dtype_name(dtype_) + ">(";
    for (size_t i = 0; i < elements().size(); ++i) {
      if (i == 4) {
        s += ", ... " + std::to_string(elements().size()) + " in all";
        break;
      }
      s += (i ? ", " : "") + elements()[i].describe();
    }
    return s + ")";
  }
  if (kind_ == ValueKind::Optional)
    return has_element() ? "optional(" + elements()[0].describe() + ")"
                         : std::string("optional<") + dtype_name(dtype_) + ">(none)";
  std::string s = std::string(dtype_name(dtype_)) + "[";
  for (size_t i = 0; i < shape_.size(); ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + "]";
}

}  // namespace fx::exec
