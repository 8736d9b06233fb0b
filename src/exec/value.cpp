// fx::exec::Value: a dense tensor value over shared bytes (its storage for computed values
// comes from memory.cpp).
#include <cstring>

#include "fx/exec.h"

namespace fx::exec {

int64_t Value::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

Value Value::zeros(Dtype dtype, std::vector<int64_t> shape) {
  Value v;
  v.dtype_ = dtype;
  v.shape_ = std::move(shape);
  for (int64_t d : v.shape_)
    if (d < 0)
      throw Error(ErrorKind::Value,
                  "a tensor dimension cannot be negative (" + std::to_string(d) + ")");
  auto bytes =
      std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(v.numel()) * dtype_size(dtype));
  v.data_ = bytes->data();
  v.nbytes_ = bytes->size();
  v.bytes_ = std::move(bytes);
  return v;
}

Value Value::wrap(Dtype dtype, std::vector<int64_t> shape,
                  std::shared_ptr<const std::vector<uint8_t>> bytes) {
  Value v;
  v.dtype_ = dtype;
  v.shape_ = std::move(shape);
  const size_t need = static_cast<size_t>(v.numel()) * dtype_size(dtype);
  if (!bytes || bytes->size() != need)
    throw Error(ErrorKind::Value, "tensor " + std::string(dtype_name(dtype)) + " of " +
                                      std::to_string(v.numel()) + " elements needs " +
                                      std::to_string(need) + " bytes, got " +
                                      std::to_string(bytes ? bytes->size() : 0));
  v.data_ = bytes->data();
  v.nbytes_ = bytes->size();
  v.bytes_ = std::move(bytes);
  return v;
}

Value Value::from_tensor(const Tensor& t, const std::string& what) {
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

Value Value::scalar_f32(float v) { return from_f32({}, {v}); }

Value Value::from_f32(std::vector<int64_t> shape, const std::vector<float>& data) {
  Value v = zeros(Dtype::Float32, std::move(shape));
  if (static_cast<int64_t>(data.size()) != v.numel())
    throw Error(ErrorKind::Value,
                "from_f32: " + std::to_string(data.size()) + " values for " + v.describe());
  std::memcpy(v.mutable_data<float>(), data.data(), data.size() * sizeof(float));
  return v;
}

Value Value::from_i64(std::vector<int64_t> shape, const std::vector<int64_t>& data) {
  Value v = zeros(Dtype::Int64, std::move(shape));
  if (static_cast<int64_t>(data.size()) != v.numel())
    throw Error(ErrorKind::Value,
                "from_i64: " + std::to_string(data.size()) + " values for " + v.describe());
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
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
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
  // (A computed value's arena range is copied: tensors hold whole byte vectors.)
  t.data = bytes_ ? bytes_ : std::make_shared<const std::vector<uint8_t>>(data_, data_ + nbytes_);
  return t;
}

std::string Value::describe() const {
  std::string s = std::string(dtype_name(dtype_)) + "[";
  for (size_t i = 0; i < shape_.size(); ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + "]";
}

}  // namespace fx::exec
