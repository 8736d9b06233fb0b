// Values, the op registry, coverage and the interpreter loop of fx::exec.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "exec/ops.h"
#include "fx/exec.h"
#include "fx/onnx.h"
#include "kernels/elementwise.h"

namespace fx::exec {

// ---- Value ----

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

// ---- arena ----
//
// Computed values of kArenaMin bytes and more live in ranges of a per-thread arena: a few large
// chunks and an address-ordered free list with coalescing, best fit first. A value's range returns
// to it when the last Value sharing it goes (its deleter holds the arena, so values may outlive the
// thread or be dropped on another one). Against a pool of same-size buffers, a new value reuses
// memory freed a moment ago by values of any size, so the run's values keep to a compact,
// cache-warm set of addresses: a layer writing its output into a buffer last touched a whole run
// earlier paid for reading it back from memory first (MobileNetV2's 4.8 MB expand layer: 0.38 ms
// cold, 0.27 warm). Whole models, natively (min of 15, five interleaved pairs): MobileNetV2
// 6.23-6.93 -> 5.82-6.21 ms, SqueezeNet 5.30-5.51 -> 5.07-5.22 ms.

namespace {
class Arena : public std::enable_shared_from_this<Arena> {
 public:
  std::shared_ptr<const uint8_t> allocate(size_t n) {
    n = (std::max<size_t>(n, 1) + kAlign - 1) / kAlign * kAlign;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_size_.lower_bound(n);
    if (it == by_size_.end()) {
      add_chunk(n);
      it = by_size_.lower_bound(n);
    }
    uint8_t* p = it->second;
    const size_t size = it->first;
    by_size_.erase(it);
    const int chunk = by_addr_.at(p).chunk;
    by_addr_.erase(p);
    if (size > n) insert(p + n, size - n, chunk);
    // The range goes back when the last Value sharing it does (the deleter holds the arena).
    return std::shared_ptr<const uint8_t>(p, [self = shared_from_this(), p, n, chunk](
                                                 const uint8_t*) { self->release(p, n, chunk); });
  }

  // Frees the chunks no range of is in use.
  void trim() {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t c = 0; c < chunks_.size(); ++c) {
      Chunk& ch = chunks_[c];
      if (!ch.mem) continue;
      auto it = by_addr_.find(ch.start);
      if (it == by_addr_.end() || it->second.size != ch.size) continue;
      erase_size(ch.start, ch.size);
      by_addr_.erase(it);
      ch.mem.reset();
    }
  }

 private:
  static constexpr size_t kAlign = 64;  // kernels' vector loads stay within cache lines
#ifdef __EMSCRIPTEN__
  static constexpr size_t kChunk = 8u << 20;
#else
  static constexpr size_t kChunk = 32u << 20;
#endif
  struct Chunk {
    std::unique_ptr<uint8_t[]> mem;
    uint8_t* start = nullptr;
    size_t size = 0;
  };
  struct Free {
    size_t size;
    int chunk;
  };

  void add_chunk(size_t n) {
    Chunk ch;
    ch.size = std::max(n, kChunk);
    ch.mem.reset(new uint8_t[ch.size + kAlign]);
    const uintptr_t a = reinterpret_cast<uintptr_t>(ch.mem.get());
    ch.start = ch.mem.get() + (kAlign - a % kAlign) % kAlign;
    chunks_.push_back(std::move(ch));
    insert(chunks_.back().start, chunks_.back().size, static_cast<int>(chunks_.size() - 1));
  }
  void insert(uint8_t* p, size_t size, int chunk) {
    by_addr_[p] = Free{size, chunk};
    by_size_.emplace(size, p);
  }
  void erase_size(uint8_t* p, size_t size) {
    auto [lo, hi] = by_size_.equal_range(size);
    for (auto it = lo; it != hi; ++it)
      if (it->second == p) {
        by_size_.erase(it);
        return;
      }
  }
  // The range [p, p + size) of chunk `chunk` is free again.
  void release(uint8_t* p, size_t size, int chunk) {
    std::lock_guard<std::mutex> lock(mu_);
    // Coalesce with the free neighbours in the same chunk.
    auto next = by_addr_.find(p + size);
    if (next != by_addr_.end() && next->second.chunk == chunk) {
      erase_size(next->first, next->second.size);
      size += next->second.size;
      by_addr_.erase(next);
    }
    auto after = by_addr_.lower_bound(p);
    if (after != by_addr_.begin()) {
      auto prev = std::prev(after);
      if (prev->second.chunk == chunk && prev->first + prev->second.size == p) {
        erase_size(prev->first, prev->second.size);
        p = prev->first;
        size += prev->second.size;
        by_addr_.erase(prev);
      }
    }
    insert(p, size, chunk);
  }

  std::mutex mu_;
  std::vector<Chunk> chunks_;
  std::map<uint8_t*, Free> by_addr_;
  std::multimap<size_t, uint8_t*> by_size_;
};

Arena& arena() {
  thread_local std::shared_ptr<Arena> a = std::make_shared<Arena>();
  return *a;
}

// Values under kArenaMin bytes come from a per-thread pool of same-size buffers instead: a
// run's many small values (a transformer's) then cost no free-list bookkeeping, and their
// buffers stay in the caches anyway.
constexpr size_t kArenaMin = 256 * 1024;
struct BufferPool {
  // Size -> free buffers of that size (a stack: vectors, so steady state allocates no nodes).
  std::unordered_map<size_t, std::vector<std::shared_ptr<const std::vector<uint8_t>>>> free;
};
BufferPool& pool() {
  thread_local BufferPool p;
  return p;
}
}  // namespace

void release_cached_memory() {
  pool().free.clear();
  arena().trim();
  release_constant_cache();
}

Value new_value(Dtype dtype, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw Error(ErrorKind::Value,
                  "a tensor dimension cannot be negative (" + std::to_string(d) + ")");
    n *= d;
  }
  const size_t nbytes = static_cast<size_t>(n) * dtype_size(dtype);
  if (nbytes < kArenaMin) {
    BufferPool& p = pool();
    auto it = nbytes == 0 ? p.free.end() : p.free.find(nbytes);
    if (it == p.free.end() || it->second.empty()) return Value::zeros(dtype, std::move(shape));
    std::shared_ptr<const std::vector<uint8_t>> buf = std::move(it->second.back());
    it->second.pop_back();
    return Value::wrap(dtype, std::move(shape), std::move(buf));
  }
  Value v;
  v.dtype_ = dtype;
  v.shape_ = std::move(shape);
  v.nbytes_ = nbytes;
  v.arena_ = arena().allocate(nbytes);
  v.data_ = v.arena_.get();
  return v;
}

Value zeroed_value(Dtype dtype, std::vector<int64_t> shape) {
  Value v = new_value(dtype, std::move(shape));
  std::memset(v.mutable_data<uint8_t>(), 0, v.nbytes());
  return v;
}

void Value::recycle() {
  // A pool-sized buffer nobody else holds (not a weight, not an output, not a view) is reused.
  if (bytes_ && bytes_.use_count() == 1 && !bytes_->empty() && bytes_->size() < kArenaMin)
    pool().free[bytes_->size()].push_back(std::move(bytes_));
  bytes_.reset();
  arena_.reset();
  data_ = nullptr;
  nbytes_ = 0;
}

// ---- OpCall ----

std::string describe_inputs(const OpCall& c) {
  std::string s;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (i) s += ", ";
    s += c.inputs[i] ? c.inputs[i]->describe() : "None";
  }
  return s;
}

void OpCall::fail(const std::string& reason) const {
  throw Error(ErrorKind::Runtime,
              "node '" + node.name() + "' (" + node.target().pretty() + ") with inputs (" +
                  describe_inputs(*this) + "): " + reason,
              node.name());
}

void OpCall::unsupported(const std::string& what) const {
  throw Error(ErrorKind::Unsupported,
              "node '" + node.name() + "' (" + node.target().pretty() + ") with inputs (" +
                  describe_inputs(*this) + "): " + what + " is not supported by the executor",
              node.name());
}

int64_t OpCall::opset(int64_t fallback) const {
  if (!module) return fallback;
  const Argument* ops = module->meta().find(fx::onnx::meta::kOpsetImport);
  if (!ops || ops->kind() != Argument::Kind::Dict) return fallback;
  for (const auto& kv : ops->dict_items())
    if (kv.first.kind() == Argument::Kind::String &&
        (kv.first.to_string().empty() || kv.first.to_string() == "ai.onnx") &&
        kv.second.kind() == Argument::Kind::Int)
      return kv.second.to_int();
  return fallback;
}

size_t OpCall::num_outputs() const {
  if (const Argument* outs = node.meta().find(fx::onnx::meta::kOutputs);
      outs && outs->is_sequence())
    return std::max<size_t>(1, outs->elements().size());
  size_t n = 1;
  for (const Node* u : node.users())
    if (u->op() == Opcode::CallFunction &&
        u->target().function().qualname() == "operator.getitem" && u->args().size() == 2 &&
        u->args()[1].kind() == Argument::Kind::Int && u->args()[1].to_int() >= 0)
      n = std::max(n, static_cast<size_t>(u->args()[1].to_int()) + 1);
  return n;
}

const Value& OpCall::input(size_t i) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is required but missing");
  return *inputs[i];
}

int64_t OpCall::attr_int(const char* name, int64_t fallback) const {
  const Argument* a = attrs.find(name);
  if (!a) return fallback;
  if (a->kind() != Argument::Kind::Int && a->kind() != Argument::Kind::Bool)
    fail(std::string("attribute '") + name + "' must be an int, got " +
         Argument::kind_name(a->kind()));
  return a->to_int();
}

float attr_float_impl(const OpCall& c, const char* name, float fallback) {
  const Argument* a = c.attrs.find(name);
  if (!a) return fallback;
  if (a->kind() != Argument::Kind::Float && a->kind() != Argument::Kind::Int)
    c.fail(std::string("attribute '") + name + "' must be a float, got " +
           Argument::kind_name(a->kind()));
  return static_cast<float>(a->to_double());
}
float OpCall::attr_float(const char* name, float fallback) const {
  return attr_float_impl(*this, name, fallback);
}

std::string OpCall::attr_string(const char* name, const std::string& fallback) const {
  const Argument* a = attrs.find(name);
  if (!a) return fallback;
  if (a->kind() != Argument::Kind::String)
    fail(std::string("attribute '") + name + "' must be a string, got " +
         Argument::kind_name(a->kind()));
  return a->to_string();
}

std::vector<int64_t> OpCall::attr_ints(const char* name, std::vector<int64_t> fallback) const {
  const Argument* a = attrs.find(name);
  if (!a) return fallback;
  if (!a->is_sequence())
    fail(std::string("attribute '") + name + "' must be a list of ints, got " +
         Argument::kind_name(a->kind()));
  std::vector<int64_t> out;
  for (const Argument& e : a->elements()) {
    if (e.kind() != Argument::Kind::Int)
      fail(std::string("attribute '") + name + "' must be a list of ints, found " +
           Argument::kind_name(e.kind()));
    out.push_back(e.to_int());
  }
  return out;
}

int64_t normalize_axis(const OpCall& c, int64_t axis, int64_t rank, const char* what) {
  const int64_t lo = -std::max<int64_t>(rank, 1), hi = std::max<int64_t>(rank, 1);
  if (axis < lo || axis >= hi)
    c.fail(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
           std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

// ---- registry ----

namespace {

struct Registry {
  std::mutex mu;
  std::unordered_map<std::string, OpFn> ops;  // node-based: element addresses are stable
  std::atomic<uint64_t> generation{0};        // bumped by every registration
};

Registry& raw_registry() {
  static Registry r;
  return r;
}

// The registry with the built-in ops in it (registered once, on first use).
Registry& registry() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_elementwise_ops();
    register_nn_ops();
    register_shape_ops();
    register_more_ops();
    register_index_ops();
    register_control_ops();
  });
  return raw_registry();
}

}  // namespace

void register_builtin(const std::string& target, OpFn fn) {
  Registry& r = raw_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.ops[target] = std::move(fn);
  ++r.generation;
}

void register_op(const std::string& target, OpFn fn) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.ops[target] = std::move(fn);
  ++r.generation;
}

bool has_op(const std::string& target) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.ops.count(target) != 0;
}

std::vector<std::string> registered_ops() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> out;
  for (const auto& kv : r.ops) out.push_back(kv.first);
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// The registered function, or nullptr. The pointer stays valid until the target is registered
// again (register_op replaces the function in place).
const OpFn* find_op(const std::string& target) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.ops.find(target);
  return it == r.ops.end() ? nullptr : &it->second;
}

bool is_getitem(const Node& n) {
  return n.op() == Opcode::CallFunction && n.target().function().qualname() == "operator.getitem";
}

// What the interpreter loop needs to know about a call_function target, looked up once per
// function (functions are interned: their FunctionInfo lives as long as the process) and again
// after any registration.
struct TargetInfo {
  const OpFn* fn = nullptr;  // the implementation, or null
  bool getitem = false;
  bool clamp_producer = false;  // may take a following Relu/Clip into its output
  bool relu = false, clip = false;
  bool matmul = false, add = false, div = false, reduce_mean = false;
};

const TargetInfo& target_info(const Function& f) {
  struct Cache {
    uint64_t generation = ~uint64_t{0};
    std::unordered_map<const FunctionInfo*, TargetInfo> infos;
  };
  thread_local Cache cache;
  const uint64_t gen = registry().generation.load();
  if (gen != cache.generation) {
    cache.infos.clear();
    cache.generation = gen;
  }
  auto it = cache.infos.find(f.get());
  if (it != cache.infos.end()) return it->second;
  const std::string& t = f.qualname();
  TargetInfo info;
  info.getitem = t == "operator.getitem";
  info.fn = info.getitem ? nullptr : find_op(t);
  info.clamp_producer = t == "onnx.Conv" || t == "onnx.Add" || t == "onnx.BatchNormalization" ||
                        t == "onnx.Gemm" || t == "onnx.MatMul";
  info.matmul = t == "onnx.MatMul";
  info.add = t == "onnx.Add";
  info.div = t == "onnx.Div";
  info.reduce_mean = t == "onnx.ReduceMean";
  info.relu = t == "onnx.Relu";
  info.clip = t == "onnx.Clip";
  return cache.infos.emplace(f.get(), info).first->second;
}

}  // namespace

// ---- coverage ----

std::vector<CoverageGap> coverage(const GraphModule& gm) {
  std::vector<CoverageGap> gaps;
  for (Node* n : gm.graph().nodes()) {
    switch (n->op()) {
      case Opcode::Placeholder:
      case Opcode::Output:
        break;
      case Opcode::GetAttr:
        if (gm.get_tensor(n->target().str())) break;
        if (auto body = std::dynamic_pointer_cast<const GraphModule>(
                gm.attr_kind(n->target().str()) == 'm' ? gm.get_submodule(n->target().str())
                                                       : nullptr)) {
          for (CoverageGap g : coverage(*body)) {  // what the body cannot run, named by path
            g.node = n->target().str() + "." + g.node;
            gaps.push_back(std::move(g));
          }
          break;
        }
        gaps.push_back(
            {n->name(), n->target().str(), "get_attr target is not a parameter or buffer"});
        break;
      case Opcode::CallFunction: {
        if (is_getitem(*n)) break;
        const std::string& t = n->target().function().qualname();
        if (!has_op(t)) gaps.push_back({n->name(), t, "no implementation of " + t});
        break;
      }
      case Opcode::CallModule:
      case Opcode::CallMethod:
        gaps.push_back({n->name(), n->target().str(),
                        std::string(opcode_name(n->op())) + " nodes do not run on fxwasm kernels"});
        break;
      case Opcode::Root:
        break;
    }
  }
  return gaps;
}

// ---- interpreter ----

namespace {

// A node's result: one value per output (getitem picks one).
using Results = std::vector<Value>;

[[noreturn]] void node_error(const Node& n, const std::string& msg) {
  throw Error(ErrorKind::Runtime, "node '" + n.name() + "' (" + n.target().pretty() + "): " + msg,
              n.name());
}

}  // namespace

namespace {

// The interpreter's working arrays, kept per thread and nesting depth (If bodies run nested)
// between runs: in steady state a run allocates none of them, and the per-node result vectors
// keep their capacity.
struct RunState {
  std::vector<Node*> nodes;
  std::vector<size_t> last_use;  // by node id: position of the last user
  std::vector<char> probed;
  std::vector<char> skip;       // by node id: computed by a fused pattern earlier (or not needed)
  std::vector<uint64_t> fused;  // by node id: 1 + id of the node that already produced its value
  std::vector<Results> env;     // by node id: the node's values
  std::vector<const Value*> inputs;  // OpCall::inputs of the current node
};

class RunStateLease {
 public:
  explicit RunStateLease(uint64_t bound) {
    if (depth_ == states_.size()) states_.push_back(std::make_unique<RunState>());
    state_ = states_[depth_++].get();
    state_->last_use.assign(bound, 0);
    state_->probed.assign(bound, 0);
    state_->skip.assign(bound, 0);
    state_->fused.assign(bound, 0);
    if (state_->env.size() < bound) state_->env.resize(bound);
  }
  ~RunStateLease() {
    for (Results& r : state_->env) r.clear();  // drop the references (capacity stays)
    --depth_;
  }
  RunState& operator*() const { return *state_; }

 private:
  RunState* state_;
  static thread_local std::vector<std::unique_ptr<RunState>> states_;
  static thread_local size_t depth_;
};
thread_local std::vector<std::unique_ptr<RunState>> RunStateLease::states_;
thread_local size_t RunStateLease::depth_ = 0;

}  // namespace

RunResult run(const GraphModule& gm, const std::vector<Value>& inputs, const RunOptions& options) {
  const Graph& g = gm.graph();
  const uint64_t bound = g.id_bound();
  RunStateLease lease(bound);
  RunState& st = *lease;
  std::vector<Node*>& nodes = st.nodes;
  nodes.clear();
  for (Node* n : g.nodes()) nodes.push_back(n);
  // Last user of every value (by position), to free values after it.
  std::vector<size_t>& last_use = st.last_use;
  std::vector<char>& probed = st.probed;
  for (const std::string& name : options.probe) {
    Node* n = g.find_node(name);
    if (!n) throw Error(ErrorKind::Key, "probe: the graph has no node named '" + name + "'", name);
    probed[n->id()] = 1;
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    for (Node* in : nodes[i]->all_input_nodes()) last_use[in->id()] = i;

  std::vector<Results>& env = st.env;
  RunResult result;
  size_t next_input = 0;
  auto value_of = [&](const Node* user, const Argument& a) -> const Value* {
    if (a.is_none()) return nullptr;
    if (!a.is_node())
      node_error(*user, std::string("argument of kind ") + Argument::kind_name(a.kind()) +
                            " where a tensor was expected");
    const Node* src = a.to_node();
    const Results& r = env[src->id()];
    if (r.size() != 1)
      node_error(*user, "input '" + src->name() + "' has " + std::to_string(r.size()) +
                            " outputs; select one with operator.getitem");
    return &r[0];
  };

  // Relu/Clip nodes fused into the node before them: their value is that node's, clamped as it
  // was produced (Conv applies it in the GEMM's store; other producers right after the op).
  std::vector<uint64_t>& fused = st.fused;
  auto fusion_bounds = [&](const Node* n, float& lo, float& hi) -> Node* {
    if (probed[n->id()] || n->users().size() != 1 ||
        !target_info(n->target().function()).clamp_producer)
      return nullptr;
    Node* u = *n->users().begin();
    if (u->op() != Opcode::CallFunction || u->args().empty() || !u->args()[0].is_node() ||
        u->args()[0].to_node() != n)
      return nullptr;
    const TargetInfo& ut = target_info(u->target().function());
    lo = -__builtin_inff();
    hi = __builtin_inff();
    if (ut.relu) {
      if (u->args().size() != 1 || !u->kwargs().empty()) return nullptr;
      lo = 0.0f;
      return u;
    }
    if (!ut.clip) return nullptr;
    for (const auto& kv : u->kwargs()) {  // opset < 11: bounds as attributes
      if (kv.first != "min" && kv.first != "max") return nullptr;
      if (kv.second.kind() != Argument::Kind::Float && kv.second.kind() != Argument::Kind::Int)
        return nullptr;
      (kv.first == "min" ? lo : hi) = static_cast<float>(kv.second.to_double());
    }
    for (size_t k = 1; k < u->args().size(); ++k) {  // opset >= 11: bounds as inputs, known now
      const Argument& a = u->args()[k];
      if (a.is_none()) continue;
      if (!a.is_node() || a.to_node() == n || k > 2) return nullptr;
      const Node* bound_node = a.to_node();
      float v;
      if (const Results& r = env[bound_node->id()];
          r.size() == 1 && r[0].numel() == 1 && r[0].dtype() == Dtype::Float32) {
        v = r[0].data<float>()[0];  // computed already
      } else if (const Tensor* t = bound_node->op() == Opcode::GetAttr
                                       ? gm.get_tensor(bound_node->target().str())
                                       : nullptr;
                 t && t->data && t->dtype == Dtype::Float32 && t->numel() == 1) {
        v = *reinterpret_cast<const float*>(t->data->data());  // a constant read later
      } else {
        return nullptr;
      }
      (k == 1 ? lo : hi) = v;
    }
    return u;
  };

  // An Add of a constant 1-D bias right after a MatMul (x @ W + b: exported Linear layers) is
  // applied to the MatMul's fresh output in place, not run as a node of its own. Returns the
  // bias and sets `add`, or null.
  auto matmul_bias = [&](const Node* n, Node*& add) -> const Tensor* {
    if (probed[n->id()] || n->users().size() != 1 || !target_info(n->target().function()).matmul)
      return nullptr;
    Node* u = *n->users().begin();
    if (u->op() != Opcode::CallFunction || probed[u->id()] || u->args().size() != 2 ||
        !u->kwargs().empty() || !target_info(u->target().function()).add)
      return nullptr;
    const Argument& a0 = u->args()[0];
    const Argument& a1 = u->args()[1];
    const bool first = a0.is_node() && a0.to_node() == n;
    const Argument& other = first ? a1 : a0;
    if (!first && !(a1.is_node() && a1.to_node() == n)) return nullptr;
    const Tensor* t = constant_tensor(gm, other);
    if (!t || t->dtype != Dtype::Float32 || t->shape.size() != 1) return nullptr;
    add = u;
    return t;
  };

  // A LayerNormalization written out as ReduceMean ... Add (match_layer_norm), found at its first
  // node, the mean: computed there in one pass; the other nodes of the pattern are skipped. Only
  // when nothing outside the pattern reads an intermediate (users, probes). Returns whether done.
  std::vector<char>& skip = st.skip;
  auto layer_norm_at = [&](Node* mean) -> bool {
    if (probed[mean->id()] || mean->users().size() != 1 || mean->args().empty() ||
        !mean->args()[0].is_node())
      return false;
    Node* sub = *mean->users().begin();
    Node* div = nullptr;
    for (Node* u : sub->users())
      if (u->op() == Opcode::CallFunction && target_info(u->target().function()).div) div = u;
    const Results& xr = env[mean->args()[0].to_node()->id()];
    if (!div || xr.size() != 1 || xr[0].dtype() != Dtype::Float32 || xr[0].shape().empty())
      return false;
    const Value& x = xr[0];
    const std::optional<LayerNormMatch> m =
        match_layer_norm(gm, div, static_cast<int64_t>(x.shape().size()));
    if (!m || m->interior.front() != mean || probed[m->result->id()]) return false;
    for (const Node* q : m->interior) {
      if (probed[q->id()]) return false;
      for (const Node* u : q->users())
        if (u != m->result &&
            std::find(m->interior.begin(), m->interior.end(), u) == m->interior.end())
          return false;
    }
    auto constant_f32 = [&](const Argument& a) -> const float* {
      const Tensor* t = constant_tensor(gm, a);
      return t && t->dtype == Dtype::Float32 && t->numel() == x.shape().back()
                 ? reinterpret_cast<const float*>(t->data->data())
                 : nullptr;
    };
    const float* scale = constant_f32(m->scale);
    const float* bias = constant_f32(m->bias);
    if (!scale || !bias) return false;
    const int64_t size = x.shape().back();
    Value out = new_value(Dtype::Float32, x.shape());
    kernels::layer_norm_f32(x.data<float>(), scale, bias, out.mutable_data<float>(),
                            size ? x.numel() / size : 0, size, static_cast<float>(m->epsilon));
    env[m->result->id()].push_back(std::move(out));
    for (const Node* q : m->interior) skip[q->id()] = 1;
    skip[m->result->id()] = 1;
    return true;
  };

  // Node i's results are in its env slot: records its probe, then frees the inputs whose last
  // use it was.
  auto finish = [&](size_t i, const Node* n) {
    const Results& out = env[n->id()];
    if (probed[n->id()] && !out.empty()) result.probes.emplace_back(n->name(), out[0]);
    for (Node* in : n->all_input_nodes())
      if (last_use[in->id()] == i) {
        for (Value& v : env[in->id()]) v.recycle();
        env[in->id()].clear();
      }
  };

  for (size_t i = 0; i < nodes.size(); ++i) {
    Node* n = nodes[i];
    Results& out = env[n->id()];  // empty; written in place (its capacity is reused)
    if (skip[n->id()]) {          // done (or not needed) by a fused pattern
      finish(i, n);
      continue;
    }
    if (fused[n->id()]) {  // a bias Add or Relu/Clip already applied by its producer
      out = env[fused[n->id()] - 1];
      finish(i, n);
      continue;
    }
    switch (n->op()) {
      case Opcode::Placeholder:
        if (next_input >= inputs.size())
          throw Error(ErrorKind::Value,
                      "run: the graph takes more inputs than the " + std::to_string(inputs.size()) +
                          " given (missing '" + n->name() + "')",
                      n->name());
        out.push_back(inputs[next_input++]);
        break;
      case Opcode::GetAttr: {
        const Tensor* t = gm.get_tensor(n->target().str());
        if (!t && gm.attr_kind(n->target().str()) == 'm') break;  // a body: read by its user
        if (!t) node_error(*n, "get_attr target is not a parameter or buffer");
        if (t->data && t->data->size() == t->nbytes())  // loaded: no message to prepare
          out.push_back(Value::wrap(t->dtype, t->shape, t->data));
        else
          out.push_back(Value::from_tensor(*t, "attribute '" + n->target().str() + "'"));
        break;
      }
      case Opcode::CallFunction: {
        const TargetInfo& info = target_info(n->target().function());
        if (info.getitem) {
          const auto& args = n->args();
          if (args.size() != 2 || !args[0].is_node() || args[1].kind() != Argument::Kind::Int)
            node_error(*n, "getitem needs (node, int)");
          const Results& src = env[args[0].to_node()->id()];
          const int64_t k = args[1].to_int();
          if (k < 0 || k >= static_cast<int64_t>(src.size()))
            node_error(*n, "output " + std::to_string(k) + " of '" + args[0].to_node()->name() +
                               "' does not exist (it has " + std::to_string(src.size()) + ")");
          out.push_back(src[k]);
          break;
        }
        if (info.reduce_mean && layer_norm_at(n)) {
          finish(i, n);
          continue;
        }
        const OpFn* fn = info.fn;
        if (!fn || !*fn)
          throw Error(ErrorKind::Unsupported,
                      "node '" + n->name() + "': no implementation of " +
                          n->target().function().qualname() + " (check coverage() before running)",
                      n->name());
        OpCall call{*n, {}, n->kwargs(), {}, &gm};
        call.inputs.swap(st.inputs);  // reused vectors: no allocation per node
        call.inputs.clear();
        call.outputs.swap(out);
        for (const Argument& a : n->args()) call.inputs.push_back(value_of(n, a));
        Node* bias_add = nullptr;
        const Tensor* bias = matmul_bias(n, bias_add);
        if (bias) {  // float32 operands, b at least 2-D with as many columns as the bias
          const Value* a = call.inputs.size() == 2 ? call.inputs[0] : nullptr;
          const Value* b = call.inputs.size() == 2 ? call.inputs[1] : nullptr;
          if (!a || !b || a->dtype() != Dtype::Float32 || b->dtype() != Dtype::Float32 ||
              b->shape().size() < 2 || b->shape().back() != bias->shape[0])
            bias = nullptr;
        }
        float lo = 0.0f, hi = 0.0f;
        // With a fused bias, a Relu/Clip after the Add is applied here, after the bias.
        Node* activation = fusion_bounds(bias ? bias_add : n, lo, hi);
        if (activation && !bias) {
          call.clamp_lo = lo;
          call.clamp_hi = hi;
        }
        (*fn)(call);
        if (call.outputs.empty()) node_error(*n, "the op produced no output");
        if (bias) {
          Value& v = call.outputs[0];
          const int64_t cols = bias->shape[0];
          if (v.dtype() != Dtype::Float32 || v.shape().empty() || v.shape().back() != cols)
            node_error(*n, "internal error: a fused bias does not match the MatMul output");
          const float* bv = reinterpret_cast<const float*>(bias->data->data());
          float* y = v.mutable_data<float>();
          for (int64_t r = 0, rows = v.numel() / std::max<int64_t>(cols, 1); r < rows;
               ++r, y += cols)
            for (int64_t j = 0; j < cols; ++j) y[j] += bv[j];
          fused[bias_add->id()] = n->id() + 1;
        }
        if (activation && call.outputs.size() == 1 && call.outputs[0].dtype() == Dtype::Float32) {
          if (!call.clamp_applied) {  // the whitelisted producers return fresh buffers
            Value& v = call.outputs[0];
            kernels::unary_f32(kernels::UnaryOp::Clip, v.data<float>(), v.mutable_data<float>(),
                               v.numel(), lo, hi);
          }
          fused[activation->id()] = (bias ? bias_add : n)->id() + 1;
        } else if (activation && call.clamp_applied) {
          node_error(*n, "internal error: a fused activation was applied to a non-float output");
        }
        // Optional outputs the node does not declare (Dropout's mask...) are dropped.
        if (call.outputs.size() > 1 && call.outputs.size() > call.num_outputs())
          call.outputs.resize(call.num_outputs());
        out.swap(call.outputs);
        st.inputs.swap(call.inputs);
        break;
      }
      case Opcode::Output: {
        const Argument& a = n->args().empty() ? Argument() : n->args()[0];
        if (a.is_sequence()) {
          for (const Argument& e : a.elements()) result.outputs.push_back(*value_of(n, e));
        } else if (!a.is_none()) {
          result.outputs.push_back(*value_of(n, a));
        }
        break;
      }
      case Opcode::CallModule:
      case Opcode::CallMethod:
        throw Error(ErrorKind::Unsupported,
                    "node '" + n->name() + "': " + opcode_name(n->op()) +
                        " nodes do not run on fxwasm kernels",
                    n->name());
      case Opcode::Root:
        break;
    }
    finish(i, n);
  }
  if (next_input != inputs.size())
    throw Error(ErrorKind::Value, "run: " + std::to_string(inputs.size()) +
                                      " inputs given, the graph takes " +
                                      std::to_string(next_input));
  return result;
}

std::vector<Value> run(const GraphModule& gm, const std::vector<Value>& inputs) {
  return run(gm, inputs, RunOptions{}).outputs;
}

}  // namespace fx::exec
