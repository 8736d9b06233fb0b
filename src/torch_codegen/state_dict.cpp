// save_state_dict: what torch.save (torch 1.13, torch/serialization.py `_save`) writes for an
// OrderedDict of tensors. data.pkl is pickle protocol 2; each tensor pickles as
//   torch._utils._rebuild_tensor_v2(
//       persistent_load(('storage', torch.<X>Storage, '<key>', 'cpu', numel)),
//       0, size, stride, False, collections.OrderedDict())
// and its bytes are the record data/<key>. The pickle has no memo (BINPUT/BINGET): the unpickler
// does not need one, and without it every opcode below is plain to read.
#include <algorithm>
#include <limits>
#include <memory>

#include "fx/torch_codegen.h"
#include "torch_codegen/zip_writer.h"

namespace fx::torch_codegen {

namespace {

// torch's legacy storage class for each dtype it can save a plain tensor of; nullptr otherwise.
const char* storage_class(Dtype d) {
  switch (d) {
    case Dtype::Float32:
      return "FloatStorage";
    case Dtype::Float64:
      return "DoubleStorage";
    case Dtype::Float16:
      return "HalfStorage";
    case Dtype::BFloat16:
      return "BFloat16Storage";
    case Dtype::Int8:
      return "CharStorage";
    case Dtype::Int16:
      return "ShortStorage";
    case Dtype::Int32:
      return "IntStorage";
    case Dtype::Int64:
      return "LongStorage";
    case Dtype::UInt8:
      return "ByteStorage";
    case Dtype::Bool:
      return "BoolStorage";
    case Dtype::Complex64:
      return "ComplexFloatStorage";
    case Dtype::Complex128:
      return "ComplexDoubleStorage";
    // torch 1.13 has no storage class for these (complex32 has none to pickle; quantized
    // tensors pickle through _rebuild_qtensor with scales we do not hold).
    case Dtype::Complex32:
    case Dtype::QInt8:
    case Dtype::QUInt8:
    case Dtype::QInt32:
    case Dtype::UInt16:
    case Dtype::UInt32:
    case Dtype::UInt64:
    case Dtype::String:
      return nullptr;
  }
  return nullptr;
}

// Pickle protocol 2 opcodes (Lib/pickletools.py).
class Pickler {
 public:
  std::vector<uint8_t> out;

  void op(char c) { out.push_back(static_cast<uint8_t>(c)); }
  void raw(const std::string& s) { out.insert(out.end(), s.begin(), s.end()); }
  void global(const std::string& module, const std::string& name) {
    op('c');  // GLOBAL
    raw(module + "\n" + name + "\n");
  }
  void str(const std::string& s) {
    op('X');  // BINUNICODE: u32 length + UTF-8
    const uint64_t n = s.size();
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
    raw(s);
  }
  void integer(int64_t v) {
    if (v >= 0 && v < 256) {
      op('K');  // BININT1
      out.push_back(static_cast<uint8_t>(v));
    } else if (v >= 0 && v < 65536) {
      op('M');  // BININT2
      out.push_back(static_cast<uint8_t>(v));
      out.push_back(static_cast<uint8_t>(v >> 8));
    } else if (v >= std::numeric_limits<int32_t>::min() &&
               v <= std::numeric_limits<int32_t>::max()) {
      op('J');  // BININT: signed 32-bit
      for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(uint64_t(v) >> (8 * i)));
    } else {
      op('\x8a');  // LONG1: 8 bytes of little-endian two's complement
      out.push_back(8);
      for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(uint64_t(v) >> (8 * i)));
    }
  }
  // A tuple of ints, with the short opcodes pickle itself uses.
  void int_tuple(const std::vector<int64_t>& v) {
    if (v.empty()) return op(')');  // EMPTY_TUPLE
    if (v.size() > 3) op('(');      // MARK
    for (int64_t x : v) integer(x);
    static const char kTupleN[] = {'\x85', '\x86', '\x87'};  // TUPLE1..3
    op(v.size() > 3 ? 't' : kTupleN[v.size() - 1]);
  }
  void empty_ordered_dict() {
    global("collections", "OrderedDict");
    op(')');  // EMPTY_TUPLE
    op('R');  // REDUCE
  }
};

}  // namespace

std::vector<uint8_t> save_state_dict(
    const std::vector<std::pair<std::string, const Tensor*>>& tensors) {
  // Everything is checked, and each tensor's bytes fetched, before anything is written.
  std::vector<Bytes> bytes;
  bytes.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    if (!t) throw Error(ErrorKind::Value, "state_dict entry `" + name + "` is null", name);
    if (!storage_class(t->dtype))
      throw Error(ErrorKind::Unsupported,
                  "state_dict entry `" + name + "` has dtype " + dtype_name(t->dtype) +
                      ", which torch 1.13 cannot load as a plain tensor",
                  name);
    // numel * element size in 64-bit arithmetic that refuses to wrap (numel() itself is
    // Tensor's; negative dims are refused here).
    uint64_t nbytes = dtype_size(t->dtype);
    for (int64_t d : t->shape) {
      if (d < 0)
        throw Error(ErrorKind::Value,
                    "state_dict entry `" + name + "` has a negative dimension: " + t->describe(),
                    name);
      if (d != 0 && nbytes > std::numeric_limits<uint64_t>::max() / uint64_t(d))
        throw Error(ErrorKind::Value, "state_dict entry `" + name + "` is too large", name);
      nbytes *= uint64_t(d);
    }
    Bytes b = t->has_data() ? t->bytes() : nullptr;
    // An empty tensor needs no bytes; anything else without them cannot be saved.
    if (!b && nbytes == 0 && !t->external) b = std::make_shared<const std::vector<uint8_t>>();
    if (!b)
      throw Error(
          ErrorKind::Value,
          "state_dict entry `" + name + "` (" + t->describe() +
              ") has no data: its bytes were never loaded" +
              (t->external ? " (external data `" + t->external->location + "` without a reader)"
                           : std::string()),
          name);
    if (b->size() != nbytes)
      throw Error(ErrorKind::Value,
                  "state_dict entry `" + name + "` (" + t->describe() + ") holds " +
                      std::to_string(b->size()) + " bytes instead of " + std::to_string(nbytes),
                  name);
    bytes.push_back(std::move(b));
  }

  Pickler p;
  p.op('\x80');  // PROTO 2
  p.out.push_back(2);
  p.empty_ordered_dict();
  if (!tensors.empty()) p.op('(');  // MARK for SETITEMS
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = *tensors[i].second;
    p.str(tensors[i].first);
    p.global("torch._utils", "_rebuild_tensor_v2");
    p.op('(');  // MARK: the arguments
    p.op('(');  // MARK: the persistent id
    p.str("storage");
    p.global("torch", storage_class(t.dtype));
    p.str(std::to_string(i));
    p.str("cpu");
    p.integer(t.numel());
    p.op('t');     // TUPLE
    p.op('Q');     // BINPERSID
    p.integer(0);  // storage offset
    p.int_tuple(t.shape);
    // Contiguous strides.
    std::vector<int64_t> stride(t.shape.size());
    int64_t s = 1;
    for (size_t k = t.shape.size(); k-- > 0;) {
      stride[k] = s;
      s *= std::max<int64_t>(t.shape[k], 1);
    }
    p.int_tuple(stride);
    p.op('\x89');            // NEWFALSE: requires_grad (load_state_dict keeps the module's own)
    p.empty_ordered_dict();  // backward hooks
    p.op('t');               // TUPLE
    p.op('R');               // REDUCE
  }
  if (!tensors.empty()) p.op('u');  // SETITEMS
  p.op('.');                        // STOP

  // Record order as torch writes it: data.pkl, the tensors by key, version.
  // One allocation for the whole archive: its size is known up to the alignment padding.
  ZipWriter zip;
  uint64_t total =
      ZipWriter::kEndBound + ZipWriter::bound(16, p.out.size()) + ZipWriter::bound(15, 2);
  for (size_t i = 0; i < bytes.size(); ++i) {
    const uint64_t b = ZipWriter::bound(13 + std::to_string(i).size(), bytes[i]->size());
    total = b > std::numeric_limits<uint64_t>::max() - total ? std::numeric_limits<uint64_t>::max()
                                                             : total + b;
  }
  zip.reserve(total);
  zip.add("archive/data.pkl", p.out.data(), p.out.size());
  for (size_t i = 0; i < bytes.size(); ++i)
    zip.add("archive/data/" + std::to_string(i), bytes[i]->data(), bytes[i]->size());
  static const uint8_t kVersion[] = {'3', '\n'};  // torch 1.13's file format version
  zip.add("archive/version", kVersion, sizeof kVersion);
  return zip.finish();
}

}  // namespace fx::torch_codegen
