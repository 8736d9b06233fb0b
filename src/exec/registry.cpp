// The op registry (register_op, has_op, the per-target facts the plan reads), what an op sees
// (OpCall's helpers) and coverage().
#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "exec/ops.h"
#include "exec/plan.h"
#include "fx/exec.h"
#include "fx/onnx.h"

namespace fx::exec {

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

int64_t module_opset(const GraphModule* gm) {
  if (!gm) return -1;
  const Argument* ops = gm->meta().find(fx::onnx::meta::kOpsetImport);
  if (!ops || ops->kind() != Argument::Kind::Dict) return -1;
  for (const auto& kv : ops->dict_items())
    if (kv.first.kind() == Argument::Kind::String &&
        (kv.first.to_string().empty() || kv.first.to_string() == "ai.onnx") &&
        kv.second.kind() == Argument::Kind::Int)
      return kv.second.to_int();
  return -1;
}

int64_t OpCall::opset(int64_t fallback) const {
  const int64_t v = internal && internal->opset != -2 ? internal->opset : module_opset(module);
  return v < 0 ? fallback : v;
}

size_t declared_outputs(const Node& node) {
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

size_t OpCall::num_outputs() const {
  return internal && internal->num_outputs ? internal->num_outputs : declared_outputs(node);
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

int64_t first_i64(const OpCall& c, const Value& v) {
  if (v.kind() != ValueKind::Tensor || v.numel() < 1)
    c.fail("an input that must hold one value (an axis, a count or a bound) is empty");
  return v.to_i64()[0];
}

float first_f32(const OpCall& c, const Value& v) {
  if (v.kind() != ValueKind::Tensor || v.numel() < 1)
    c.fail("an input that must hold one value (a bound or a parameter) is empty");
  return v.to_f32()[0];
}

int64_t normalize_axis(const OpCall& c, int64_t axis, int64_t rank, const char* what) {
  // A 0-d tensor has no axis: ops index the shape with the result, so none is in range.
  if (axis < -rank || axis >= rank)
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
  std::unordered_set<std::string> replaced;   // targets register_op has (re)registered
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
    register_indexing_ops();
    register_layout_ops();
    register_layer_ops();
    register_control_ops();
    register_quant_ops();
    register_loss_ops();
    register_rnn_ops();
    register_random_ops();
    register_math_ops();
    register_spatial_ops();
    register_select_ops();
    register_detection_ops();
    register_feature_ops();
    register_string_ops();
    register_sequence_ops();  // last: its Identity takes sequences and optionals too
  });
  return raw_registry();
}

}  // namespace

void register_builtin(const std::string& target, OpFn fn) {
  Registry& r = raw_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.ops[target] = std::move(fn);
  r.replaced.erase(target);
  ++r.generation;
}

void register_op(const std::string& target, OpFn fn) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.ops[target] = std::move(fn);
  r.replaced.insert(target);
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

}  // namespace

uint64_t registry_generation() { return registry().generation.load(); }

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
  if (info.fn) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    info.builtin = r.replaced.count(t) == 0;
  }
  info.clamp_producer = t == "onnx.Conv" || t == "onnx.Add" || t == "onnx.BatchNormalization" ||
                        t == "onnx.Gemm" || t == "onnx.MatMul";
  info.matmul = t == "onnx.MatMul";
  info.conv = t == "onnx.Conv";
  info.add = t == "onnx.Add";
  info.div = t == "onnx.Div";
  info.reduce_mean = t == "onnx.ReduceMean";
  info.softmax = t == "onnx.Softmax";
  info.max_pool = t == "onnx.MaxPool";
  info.relu = t == "onnx.Relu";
  info.clip = t == "onnx.Clip";
  return cache.infos.emplace(f.get(), info).first->second;
}

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

}  // namespace fx::exec
