// Sequences and optionals: SequenceEmpty/Construct/Insert/Erase/At/Length, SplitToSequence,
// ConcatFromSequence, Optional, OptionalHasElement, OptionalGetElement, and Identity on any
// value. A sequence shares its tensors with the values it was built from (values are never
// written after they are made), so inserting or erasing copies pointers, not elements.
#include <cstring>
#include <limits>
#include <mutex>
#include <set>

#include "exec/ops.h"
#include "fx/onnx.h"

namespace fx::exec {
namespace {

std::mutex& value_ops_mutex() {
  static std::mutex m;
  return m;
}
std::set<std::string>& value_ops() {
  static std::set<std::string> s;
  return s;
}

const Value& sequence_input(const OpCall& c, size_t i) {
  const Value& v = c.input(i);
  if (v.kind() != ValueKind::Sequence)
    c.fail("input " + std::to_string(i) + " must be a sequence, it is " + v.describe());
  return v;
}

const Value& tensor_input(const OpCall& c, size_t i) {
  const Value& v = c.input(i);
  if (!v.is_tensor())
    c.fail("input " + std::to_string(i) + " must be a tensor, it is " + v.describe());
  return v;
}

// A position input (a scalar int32/int64) in [-n, n - 1 + extra], made non-negative.
int64_t position(const OpCall& c, size_t i, int64_t n, int64_t extra) {
  const Value& p = tensor_input(c, i);
  if (p.numel() != 1 || (p.dtype() != Dtype::Int64 && p.dtype() != Dtype::Int32))
    c.fail("'position' must be one int32/int64, it is " + p.describe());
  int64_t k = p.to_i64()[0];
  if (k < -n || k > n - 1 + extra)
    c.fail("position " + std::to_string(k) + " is out of range for a sequence of " +
           std::to_string(n));
  return k < 0 ? k + n : k;
}

// The ONNX element type number of an attribute ('dtype', 'type'), as a dtype.
Dtype dtype_attr(const OpCall& c, const char* name, Dtype fallback) {
  if (!c.has_attr(name)) return fallback;
  return fx::onnx::dtype_from_onnx(static_cast<int32_t>(c.attr_int(name, 1)),
                                   "attribute '" + std::string(name) + "'");
}

// Elements times element size, checked: a size computed from data must not wrap (wasm32 has
// a 32-bit size_t).
size_t checked_bytes(const OpCall& c, Dtype dtype, const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) c.fail("a dimension cannot be negative");
    if (d != 0 && n > (uint64_t(1) << 50) / static_cast<uint64_t>(d))
      c.fail("the result would have more than 2^50 elements");
    n *= static_cast<uint64_t>(d);
  }
  const uint64_t bytes = n * dtype_size(dtype);
  if (bytes > std::numeric_limits<size_t>::max() / 2)
    c.fail("the result of " + std::to_string(bytes) + " bytes does not fit in memory");
  return static_cast<size_t>(bytes);
}

void sequence_empty(OpCall& c) {
  c.outputs.push_back(Value::sequence(dtype_attr(c, "dtype", Dtype::Float32), {}));
}

void sequence_construct(OpCall& c) {
  if (c.inputs.empty()) c.fail("SequenceConstruct needs at least one tensor");
  std::vector<Value> elements;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Value& v = tensor_input(c, i);
    if (v.dtype() != tensor_input(c, 0).dtype())
      c.fail("input " + std::to_string(i) + " is " + v.describe() + ", input 0 is " +
             c.inputs[0]->describe() + ": a sequence holds tensors of one type");
    elements.push_back(v);
  }
  const Dtype dtype = elements[0].dtype();  // (before the move: argument order is unspecified)
  c.outputs.push_back(Value::sequence(dtype, std::move(elements)));
}

void sequence_insert(OpCall& c) {
  const Value& s = sequence_input(c, 0);
  const Value& t = tensor_input(c, 1);
  if (t.dtype() != s.dtype())
    c.fail("cannot insert " + t.describe() + " into a sequence of " + dtype_name(s.dtype()));
  std::vector<Value> elements = s.elements();
  const auto n = static_cast<int64_t>(elements.size());
  const int64_t at = c.has_input(2) ? position(c, 2, n, 1) : n;
  elements.insert(elements.begin() + at, t);
  c.outputs.push_back(Value::sequence(s.dtype(), std::move(elements)));
}

void sequence_erase(OpCall& c) {
  const Value& s = sequence_input(c, 0);
  std::vector<Value> elements = s.elements();
  const auto n = static_cast<int64_t>(elements.size());
  if (n == 0) c.fail("cannot erase from an empty sequence");
  const int64_t at = c.has_input(1) ? position(c, 1, n, 0) : n - 1;
  elements.erase(elements.begin() + at);
  c.outputs.push_back(Value::sequence(s.dtype(), std::move(elements)));
}

void sequence_at(OpCall& c) {
  const Value& s = sequence_input(c, 0);
  const auto n = static_cast<int64_t>(s.elements().size());
  c.outputs.push_back(s.elements()[static_cast<size_t>(position(c, 1, n, 0))]);
}

void sequence_length(OpCall& c) {
  c.outputs.push_back(
      Value::from_i64({}, {static_cast<int64_t>(sequence_input(c, 0).elements().size())}));
}

// Copies `len` slices along `axis` starting at `from` of x into a new tensor of `shape`.
Value slice_axis(const OpCall& c, const Value& x, int64_t axis, int64_t from, int64_t len,
                 std::vector<int64_t> shape) {
  checked_bytes(c, x.dtype(), shape);
  Value out = new_value(x.dtype(), std::move(shape));
  const size_t es = dtype_size(x.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.shape().size(); ++d) inner *= x.shape()[d];
  const int64_t dim = x.shape()[axis];
  const uint8_t* src = x.data<uint8_t>();
  uint8_t* dst = out.mutable_data<uint8_t>();
  const size_t chunk = static_cast<size_t>(len * inner) * es;
  for (int64_t o = 0; o < outer && chunk; ++o)
    std::memcpy(dst + o * chunk, src + static_cast<size_t>((o * dim + from) * inner) * es, chunk);
  return out;
}

void split_to_sequence(OpCall& c) {
  const Value& x = tensor_input(c, 0);
  const auto rank = static_cast<int64_t>(x.shape().size());
  if (rank == 0) c.fail("SplitToSequence needs a tensor of rank 1 or more");
  const int64_t axis = normalize_axis(c, c.attr_int("axis", 0), rank, "axis");
  const int64_t dim = x.shape()[axis];
  std::vector<int64_t> sizes;
  bool drop_axis = false;
  if (!c.has_input(1)) {  // pieces of one; keepdims = 0 drops the axis
    sizes.assign(static_cast<size_t>(dim), 1);
    drop_axis = c.attr_int("keepdims", 1) == 0;
  } else {
    const Value& split = tensor_input(c, 1);
    const std::vector<int64_t> v = split.to_i64();
    if (split.shape().empty()) {  // a scalar: pieces of that size, the last one shorter
      if (v[0] <= 0) c.fail("split must be positive, it is " + std::to_string(v[0]));
      for (int64_t at = 0; at < dim; at += v[0]) sizes.push_back(std::min(v[0], dim - at));
    } else {
      int64_t sum = 0;
      for (int64_t s : v) {
        if (s < 0) c.fail("split sizes cannot be negative");
        sum += s;
        if (sum > dim) break;
      }
      if (sum != dim)
        c.fail("split sizes add up to " + std::to_string(sum) + ", the axis has " +
               std::to_string(dim));
      sizes = v;
    }
  }
  std::vector<Value> pieces;
  int64_t at = 0;
  for (int64_t len : sizes) {
    std::vector<int64_t> shape = x.shape();
    shape[axis] = len;
    if (drop_axis) shape.erase(shape.begin() + axis);
    pieces.push_back(slice_axis(c, x, axis, at, len, std::move(shape)));
    at += len;
  }
  c.outputs.push_back(Value::sequence(x.dtype(), std::move(pieces)));
}

// The tensors `e` joined along `axis` (of the result; a new axis of size 1 per tensor when
// `new_axis`).
Value concat_values(const OpCall& c, const std::vector<Value>& e, int64_t axis, bool new_axis) {
  if (e.empty()) c.fail("nothing to concatenate");
  std::vector<int64_t> shape = e[0].shape();
  if (new_axis) shape.insert(shape.begin() + axis, 1);
  int64_t total = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    if (!e[i].is_tensor() || e[i].dtype() != e[0].dtype())
      c.fail("element " + std::to_string(i) + " is " + e[i].describe() + ", element 0 is " +
             e[0].describe());
    std::vector<int64_t> si = e[i].shape();
    if (new_axis) si.insert(si.begin() + axis, 1);
    bool ok = si.size() == shape.size();
    for (size_t d = 0; ok && d < si.size(); ++d)
      ok = static_cast<int64_t>(d) == axis || si[d] == shape[d];
    if (!ok)
      c.fail("element " + std::to_string(i) + " is " + e[i].describe() + ", element 0 is " +
             e[0].describe() + ": they differ off the axis");
    total += si[axis];
    if (total > (int64_t(1) << 50)) c.fail("the result is too large");
  }
  shape[axis] = total;
  checked_bytes(c, e[0].dtype(), shape);
  Value out = new_value(e[0].dtype(), shape);
  const size_t es = dtype_size(e[0].dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  uint8_t* dst = out.mutable_data<uint8_t>();
  const size_t row = static_cast<size_t>(total * inner) * es;
  size_t offset = 0;
  for (const Value& v : e) {
    const int64_t len = outer * inner != 0 ? v.numel() / (outer * inner) : 0;
    const size_t chunk = static_cast<size_t>(len * inner) * es;
    for (int64_t o = 0; o < outer && chunk; ++o)
      std::memcpy(dst + o * row + offset, v.data<uint8_t>() + o * chunk, chunk);
    offset += chunk;
  }
  return out;
}

void concat_from_sequence(OpCall& c) {
  const Value& s = sequence_input(c, 0);
  const std::vector<Value>& e = s.elements();
  if (e.empty()) c.fail("ConcatFromSequence of an empty sequence");
  const bool new_axis = c.attr_int("new_axis", 0) == 1;
  if (!c.has_attr("axis")) c.fail("attribute 'axis' is required");
  const auto rank = static_cast<int64_t>(e[0].shape().size());
  if (!new_axis && rank == 0) c.fail("cannot concatenate scalars without new_axis = 1");
  const int64_t axis = normalize_axis(c, c.attr_int("axis", 0), rank + (new_axis ? 1 : 0), "axis");
  c.outputs.push_back(concat_values(c, e, axis, new_axis));
}

// Optional(input?) with attribute 'type' (a TypeProto, imported as {"proto": bytes} or
// {"dtype", "shape"}) when there is no input.
void optional(OpCall& c) {
  if (c.has_input(0)) {
    const Value& v = c.input(0);
    if (v.kind() == ValueKind::Optional) c.fail("Optional of an optional (" + v.describe() + ")");
    c.outputs.push_back(Value::some(v));
    return;
  }
  Dtype dtype = Dtype::Float32;
  if (const Argument* t = c.attrs.find("type"); t && t->kind() == Argument::Kind::Dict)
    for (const auto& kv : t->dict_items())
      if (kv.first.kind() == Argument::Kind::String && kv.first.to_string() == "dtype" &&
          kv.second.kind() == Argument::Kind::Dtype)
        dtype = kv.second.to_dtype();
  c.outputs.push_back(Value::none(dtype));
}

void optional_has_element(OpCall& c) {
  // Opset 18: a missing input is an empty optional; a tensor or sequence is a present one.
  const bool has =
      c.has_input(0) && (c.input(0).kind() != ValueKind::Optional || c.input(0).has_element());
  Value out = new_value(Dtype::Bool, {});
  out.mutable_data<uint8_t>()[0] = has ? 1 : 0;
  c.outputs.push_back(std::move(out));
}

void optional_get_element(OpCall& c) {
  const Value& v = c.input(0);
  if (v.kind() != ValueKind::Optional) {  // opset 18: a tensor or sequence is itself
    c.outputs.push_back(v);
    return;
  }
  if (!v.has_element()) c.fail("the optional is empty");
  c.outputs.push_back(v.elements()[0]);
}

}  // namespace

Value take_index(const OpCall& c, const Value& x, int64_t axis, int64_t index) {
  if (!x.is_tensor() || axis < 0 || axis >= static_cast<int64_t>(x.shape().size()) || index < 0 ||
      index >= x.shape()[axis])
    c.fail("cannot take index " + std::to_string(index) + " of axis " + std::to_string(axis) +
           " of " + x.describe());
  std::vector<int64_t> shape = x.shape();
  shape.erase(shape.begin() + axis);
  return slice_axis(c, x, axis, index, 1, std::move(shape));
}

Value stack_values(const OpCall& c, const std::vector<Value>& values, int64_t axis) {
  return concat_values(c, values, axis, true);
}

void register_value_op(const std::string& target, OpFn fn) {
  {
    std::lock_guard<std::mutex> lock(value_ops_mutex());
    value_ops().insert(target);
  }
  register_builtin(target, std::move(fn));
}

bool takes_non_tensors(const Node& n) {
  if (n.op() != Opcode::CallFunction) return false;
  std::lock_guard<std::mutex> lock(value_ops_mutex());
  return value_ops().count(n.target().function().qualname()) != 0;
}

void register_sequence_ops() {
  register_value_op("onnx.SequenceEmpty", sequence_empty);
  register_value_op("onnx.SequenceConstruct", sequence_construct);
  register_value_op("onnx.SequenceInsert", sequence_insert);
  register_value_op("onnx.SequenceErase", sequence_erase);
  register_value_op("onnx.SequenceAt", sequence_at);
  register_value_op("onnx.SequenceLength", sequence_length);
  register_value_op("onnx.SplitToSequence", split_to_sequence);
  register_value_op("onnx.ConcatFromSequence", concat_from_sequence);
  register_value_op("onnx.Optional", optional);
  register_value_op("onnx.OptionalHasElement", optional_has_element);
  register_value_op("onnx.OptionalGetElement", optional_get_element);
  register_value_op("onnx.Identity", [](OpCall& c) { c.outputs.push_back(c.input(0)); });
}

}  // namespace fx::exec
