// The interpreter loop of fx::exec::run.
#include <algorithm>
#include <optional>

#include "exec/ops.h"
#include "exec/plan.h"
#include "fx/exec.h"
#include "kernels/elementwise.h"

namespace fx::exec {

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
