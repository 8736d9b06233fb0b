// The interpreter loop of fx::exec::run.
#include <algorithm>
#include <chrono>
#include <new>
#include <optional>
#include <stdexcept>

#include "exec/ops.h"
#include "exec/plan.h"
#include "fx/exec.h"
#include "kernels/elementwise.h"

namespace fx::exec {

namespace {

// A node's result: one value per output (getitem picks one).
using Results = std::vector<Value>;

// The most a plan holds of one fixed node's values (beyond a module tensor's bytes): shape
// tensors and small tables, never a large computed value (new_value's arena starts at 32 KB).
constexpr size_t kFixedBytes = 16 << 10;

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
  std::vector<char> skip;       // by node id: computed by a fused pattern earlier (or not needed)
  std::vector<uint64_t> fused;  // by node id: 1 + id of the node that already produced its value
  std::vector<Results> env;     // by node id: the node's values
  std::vector<const Value*> inputs;  // OpCall::inputs of the current node
  std::vector<Value> concat_dest;    // by Plan::concats: the result its producers write into
};

class RunStateLease {
 public:
  explicit RunStateLease(uint64_t bound) {
    if (depth_ == states_.size()) states_.push_back(std::make_unique<RunState>());
    state_ = states_[depth_++].get();
    state_->skip.assign(bound, 0);
    state_->fused.assign(bound, 0);
    if (state_->env.size() < bound) state_->env.resize(bound);
  }
  ~RunStateLease() {
    for (Results& r : state_->env) r.clear();  // drop the references (capacity stays)
    state_->concat_dest.clear();
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

// One run of a plan.
class Runner {
 public:
  Runner(const GraphModule& gm, Plan& plan, RunState& st, const std::vector<Value>& inputs,
         bool profile)
      : gm_(gm), plan_(plan), st_(st), env_(st.env), inputs_(inputs), profile_(profile) {}

  RunResult run() {
    st_.concat_dest.assign(plan_.concats.size(), Value());
    const bool learning = plan_.fixed_pending;
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      Step& s = plan_.steps[i];
      // Fixed by the plan's key: held, or read by no step that runs.
      if (s.fixed >= Fixed::Cached) {
        if (s.fixed == Fixed::Cached) env_[s.id] = s.cached;
        finish(s);
        continue;
      }
      if (s.deferred) {  // a layout op read as a view by a later step (or run there)
        finish(s);
        continue;
      }
      if (st_.skip[s.id] || s.absorbed) {  // done (or not needed) by a fused pattern
        finish(s);
        continue;
      }
      if (const uint64_t from = st_.fused[s.id]) {  // a bias Add or Relu/Clip already applied
        env_[s.id] = env_[from - 1];
        finish(s);
        continue;
      }
      if (s.in_scale_step != kNoStep) take_in_scale(s);
      execute_timed(s);
      if (s.concat >= 0) learn_concat(s);
      if (learning && s.fixed == Fixed::Candidate) capture_fixed(s);
      finish(s);
    }
    if (next_input_ != inputs_.size())
      throw Error(ErrorKind::Value, "run: " + std::to_string(inputs_.size()) +
                                        " inputs given, the graph takes " +
                                        std::to_string(next_input_));
    if (learning) learn_fixed();
    return std::move(result_);
  }

 private:
  const Value* value_of(const Step& s, int64_t slot) const {
    if (slot == kArgNone) return nullptr;
    if (slot <= kArgBad)
      node_error(*s.node, std::string("argument of kind ") +
                              Argument::kind_name(static_cast<Argument::Kind>(kArgBad - slot)) +
                              " where a tensor was expected");
    const Results& r = env_[static_cast<size_t>(slot)];
    if (r.size() != 1) {
      const Node* src = s.node->graph().node_by_id(static_cast<uint64_t>(slot));
      node_error(*s.node, "input '" + src->name() + "' has " + std::to_string(r.size()) +
                              " outputs; select one with operator.getitem");
    }
    return &r[0];
  }

  // A fixed node's values as computed on the learning run, held when they are small or share a
  // module tensor's bytes (Identity of a weight); else none (the node then runs on every run).
  void capture_fixed(Step& s) {
    s.cached.clear();
    if (s.kind != Step::Kind::Call && s.kind != Step::Kind::Getitem) return;
    const Results& r = env_[s.id];
    size_t bytes = 0;
    for (const Value& v : r) {
      if (!v.is_tensor()) return;
      if (v.packed()) continue;  // the module's packing, shared
      const void* buffer = v.buffer().get();
      const bool module_bytes =
          buffer && std::any_of(plan_.constants.begin(), plan_.constants.end(),
                                [&](const PlannedConstant& c) { return c.data == buffer; });
      if (!module_bytes) bytes += v.nbytes();
    }
    if (r.empty() || bytes > kFixedBytes) return;
    s.cached = r;
  }

  // After the plan's first complete run: which fixed nodes are held (Cached) and which need not
  // run (Skipped, when every step reading them is Cached or Skipped), from the last user back.
  void learn_fixed() {
    std::vector<char> runs(plan_.id_bound, 1);  // whether the step computes, reading its inputs
    for (size_t i = plan_.steps.size(); i-- > 0;) {
      Step& s = plan_.steps[i];
      if (s.fixed != Fixed::Candidate) continue;
      bool needed = s.probed;
      for (const Node* u : s.node->users()) needed = needed || runs[u->id()];
      if (needed && !s.cached.empty()) {
        s.fixed = Fixed::Cached;
      } else {
        s.fixed = needed ? Fixed::No : Fixed::Skipped;
        s.cached.clear();
      }
      runs[s.id] = s.fixed == Fixed::No;
    }
    plan_.fixed_pending = false;
  }

  // Runs a step whose op makes an input of a planned Concat (PlannedConcat), pointing the op's
  // output at its slice of the Concat's result when the plan knows the shapes.
  void execute_into_concat(Step& s) {
    PlannedConcat& pc = plan_.concats[static_cast<size_t>(s.concat_writer)];
    if (!pc.armed || pc.off) return execute(s);
    Value& dest = st_.concat_dest[static_cast<size_t>(s.concat_writer)];
    if (!dest.defined()) {
      try {
        dest = new_value(pc.dtype, {pc.numel});
      } catch (const Error&) {  // (a memory limit: the op then allocates, and reports, its own)
        return execute(s);
      }
    }
    const Value slice =
        value_slice(dest, pc.offsets[s.concat_input], pc.dtype, pc.shapes[s.concat_input]);
    struct HintScope {
      explicit HintScope(const Value* v) { set_output_hint(v); }
      ~HintScope() { set_output_hint(nullptr); }
    } scope(&slice);
    execute(s);
  }

  // After a planned Concat ran: learns its inputs' dtype and shapes for the next run; if its
  // producers were given slices of a result and it did not come out as that result, turns the
  // plan off.
  void learn_concat(const Step& s) {
    PlannedConcat& pc = plan_.concats[static_cast<size_t>(s.concat)];
    Value& dest = st_.concat_dest[static_cast<size_t>(s.concat)];
    const Results& out = env_[s.id];
    if (dest.defined() && (out.size() != 1 || out[0].data<void>() != dest.data<void>()))
      pc.off = true;
    dest = Value();
    if (pc.off || out.size() != 1 || !out[0].is_tensor()) return;
    if (pc.armed && pc.dtype == out[0].dtype() && pc.numel == out[0].numel() &&
        pc.shapes.size() == s.args_end - s.args_begin) {
      bool same = true;  // (the usual case: nothing to learn, nothing to allocate)
      for (uint32_t k = s.args_begin; k < s.args_end && same; ++k) {
        const Results& r = env_[static_cast<size_t>(plan_.args[k])];
        same = r.size() == 1 && r[0].shape() == pc.shapes[k - s.args_begin];
      }
      if (same) return;
    }
    pc.armed = false;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<size_t> offsets;
    size_t at = 0;
    for (uint32_t k = s.args_begin; k < s.args_end; ++k) {
      const Results& r = env_[static_cast<size_t>(plan_.args[k])];
      if (r.size() != 1 || !r[0].is_tensor() || r[0].dtype() != out[0].dtype() ||
          r[0].nbytes() == 0)
        return;
      shapes.push_back(r[0].shape());
      offsets.push_back(at);
      at += r[0].nbytes();
    }
    // One block an input: the dimensions before the concat axis (the first where the result
    // differs from input 0) are all 1.
    const std::vector<int64_t>& os = out[0].shape();
    if (at != out[0].nbytes() || shapes[0].size() != os.size()) return;
    size_t axis = 0;
    while (axis < os.size() && os[axis] == shapes[0][axis]) ++axis;
    if (axis == os.size()) return;
    for (size_t d = 0; d < axis; ++d)
      if (os[d] != 1) return;
    pc.dtype = out[0].dtype();
    pc.numel = out[0].numel();
    pc.shapes = std::move(shapes);
    pc.offsets = std::move(offsets);
    pc.armed = true;
  }

  // The node's results are in its env slot: records its probe, then frees the values whose
  // last use it was.
  void finish(const Step& s) {
    const Results& out = env_[s.id];
    if (s.probed && !out.empty()) result_.probes.emplace_back(s.node->name(), out[0]);
    for (uint32_t k = s.frees_begin; k < s.frees_end; ++k) {
      Results& r = env_[plan_.frees[k]];
      for (Value& v : r) v.recycle();
      r.clear();
    }
  }

  void execute(Step& s) {
    Node* n = s.node;
    Results& out = env_[s.id];  // empty; written in place (its capacity is reused)
    switch (s.kind) {
      case Step::Kind::Input:
        if (next_input_ >= inputs_.size())
          throw Error(ErrorKind::Value,
                      "run: the graph takes more inputs than the " +
                          std::to_string(inputs_.size()) + " given (missing '" + n->name() + "')",
                      n->name());
        out.push_back(inputs_[next_input_++]);
        break;
      case Step::Kind::Constant: {
        const Tensor* t = plan_.constants[s.constant].tensor;      // checked by plan_for
        if (!t && gm_.attr_kind(n->target().str()) == 'm') break;  // a body: read by its user
        if (!t) node_error(*n, "get_attr target is not a parameter or buffer");
        if (const auto& w = plan_.constants[s.constant].packed)
          out.push_back(Value::packed_weight(t->dtype, t->shape, w));
        else if (t->data && t->data->size() == t->nbytes())  // loaded: no message to prepare
          out.push_back(Value::wrap(t->dtype, t->shape, t->data));
        else
          out.push_back(Value::from_tensor(*t, "attribute '" + n->target().str() + "'"));
        break;
      }
      case Step::Kind::Getitem: {
        if (!s.error.empty()) node_error(*n, s.error);
        const int64_t slot = plan_.args[s.args_begin];
        const Results& src = env_[static_cast<size_t>(slot)];
        if (s.item < 0 || s.item >= static_cast<int64_t>(src.size()))
          node_error(*n, "output " + std::to_string(s.item) + " of '" +
                             n->graph().node_by_id(static_cast<uint64_t>(slot))->name() +
                             "' does not exist (it has " + std::to_string(src.size()) + ")");
        out.push_back(src[s.item]);
        break;
      }
      case Step::Kind::Call:
        call(s, out);
        break;
      case Step::Kind::Output:
        for (uint32_t k = s.args_begin; k < s.args_end; ++k)
          result_.outputs.push_back(*value_of(s, plan_.args[k]));
        break;
      case Step::Kind::NotRunnable:
        throw Error(ErrorKind::Unsupported,
                    "node '" + n->name() + "': " + opcode_name(n->op()) +
                        " nodes do not run on fxwasm kernels",
                    n->name());
      case Step::Kind::Nothing:
        break;
    }
  }

  // The bounds of a planned Relu/Clip, or false when a bound turns out not to be a float32
  // scalar on this run (then the Relu/Clip runs as a node of its own).
  bool activation_bounds(const PlannedActivation& a, float& lo, float& hi) const {
    if (a.node == kNoNode) return false;
    lo = a.lo;
    hi = a.hi;
    for (int k = 0; k < 2; ++k) {
      if (a.bound_node[k] == kNoNode) continue;
      float v;
      if (const Results& r = env_[a.bound_node[k]]; r.size() == 1 && r[0].is_tensor() &&
                                                    r[0].numel() == 1 &&
                                                    r[0].dtype() == Dtype::Float32) {
        v = r[0].data<float>()[0];  // computed already
      } else if (const Tensor* t = a.bound_tensor[k];
                 t && t->data && t->dtype == Dtype::Float32 && t->numel() == 1) {
        v = *reinterpret_cast<const float*>(t->data->data());  // a constant read later
      } else {
        return false;
      }
      (k == 0 ? lo : hi) = v;
    }
    return true;
  }

  // A LayerNormalization written out as ReduceMean ... Add, found at its first node, the mean:
  // computed there in one pass; the other nodes of the pattern are skipped. Only when nothing
  // outside the pattern reads an intermediate (users, probes). Returns whether done.
  bool layer_norm_at(Step& s) {
    const Results& xr = env_[plan_.args[s.args_begin]];
    if (xr.size() != 1 || xr[0].dtype() != Dtype::Float32 || xr[0].shape().empty()) return false;
    const Value& x = xr[0];
    PlannedLayerNorm& ln = s.layer_norm;
    const auto rank = static_cast<int64_t>(x.shape().size());
    if (ln.rank != rank) plan_layer_norm(gm_, plan_.probes, s, rank);
    if (!ln.ok) return false;
    const int64_t size = x.shape().back();
    if (ln.scale->numel() != size || ln.bias->numel() != size) return false;
    Value out = new_value(Dtype::Float32, x.shape());
    kernels::layer_norm_f32(x.data<float>(), reinterpret_cast<const float*>(ln.scale->data->data()),
                            reinterpret_cast<const float*>(ln.bias->data->data()),
                            out.mutable_data<float>(), size ? x.numel() / size : 0, size,
                            ln.epsilon);
    env_[ln.result].push_back(std::move(out));
    for (uint32_t id : ln.covered) st_.skip[id] = 1;
    st_.skip[ln.result] = 1;
    return true;
  }

  // A GELU written out as Div/Erf/Add/Mul/Mul, or a SiLU as Sigmoid and Mul, found at its first
  // node: one pass of the unary kernel (with a planned GlobalAveragePool of its result); the
  // other nodes of the pattern, and that pool, are skipped. Returns whether done.
  bool unary_at(const Step& s) {
    const PlannedUnary& g = s.unary;
    const Results& xr = env_[g.x];
    if (xr.size() != 1 || xr[0].dtype() != Dtype::Float32 || !xr[0].is_tensor() ||
        static_cast<int64_t>(xr[0].shape().size()) < g.constant_rank)
      return false;
    const Value& x = xr[0];
    Value out = new_value(Dtype::Float32, x.shape());
    const std::vector<int64_t>& shape = x.shape();
    if (g.means != kNoNode && shape.size() >= 3) {
      // With the GlobalAveragePool of the result ([N, C, 1, ...]), which is then skipped.
      std::vector<int64_t> ms = {shape[0], shape[1]};
      ms.resize(shape.size(), 1);
      Value means = new_value(Dtype::Float32, ms);
      const int64_t planes = shape[0] * shape[1];
      kernels::unary_f32_plane_means(g.op, x.data<float>(), out.mutable_data<float>(),
                                     means.mutable_data<float>(), planes,
                                     planes ? x.numel() / planes : 0);
      env_[g.means].push_back(std::move(means));
      st_.skip[g.means] = 1;
    } else {
      kernels::unary_f32(g.op, x.data<float>(), out.mutable_data<float>(), x.numel(), 0.0f, 0.0f);
    }
    env_[g.result].push_back(std::move(out));
    for (uint32_t id : g.covered) st_.skip[id] = 1;
    st_.skip[g.result] = 1;
    return true;
  }

  // The layout of a PlannedView's value over its source's elements, worked out from this run's
  // values; nullopt when an op of the chain is not a plain view of them.
  std::optional<kernels::StridedLayout> resolve_view(PlannedView& v) const {
    const Results& src = env_[v.source];
    if (src.size() != 1 || !src[0].is_tensor() || src[0].packed() ||
        src[0].dtype() == Dtype::String || !src[0].data<void>())
      return std::nullopt;
    if (v.known && v.known_shape == src[0].shape()) return v.known_layout;
    std::optional<kernels::StridedLayout> l = layout_through(v, src[0]);
    if (v.params_fixed) {
      v.known = true;
      v.known_shape = src[0].shape();
      v.known_layout = l;
    }
    return l;
  }

  std::optional<kernels::StridedLayout> layout_through(const PlannedView& v,
                                                       const Value& source) const {
    kernels::StridedLayout l;
    l.shape = source.shape();
    l.strides.assign(l.shape.size(), 1);
    for (size_t d = l.shape.size(); d-- > 1;) l.strides[d - 1] = l.strides[d] * l.shape[d];
    std::vector<const Value*> params;
    for (size_t i = 0; i + (v.scaled ? 1 : 0) < v.chain.size(); ++i) {
      const Step& c = plan_.steps[v.chain[i]];
      params.clear();
      for (uint32_t k = c.args_begin + 1; k < c.args_end; ++k) {
        const int64_t slot = plan_.args[k];
        if (slot == kArgNone) {
          params.push_back(nullptr);
          continue;
        }
        if (slot < 0) return std::nullopt;
        const Results& r = env_[static_cast<size_t>(slot)];
        if (r.size() != 1 || !r[0].is_tensor()) return std::nullopt;
        params.push_back(&r[0]);
      }
      std::optional<kernels::StridedLayout> next = view_through(*c.node, l, params);
      if (!next) return std::nullopt;
      l = std::move(*next);
    }
    return l;
  }

  // Runs the deferred ops of view `v` as the steps they are (all but the last of a chain whose
  // last node is the owner, which then runs as usual).
  void run_deferred(const PlannedView& v) {
    for (size_t k = 0; k < v.chain.size(); ++k) {
      Step& c = plan_.steps[v.chain[k]];
      if (!c.deferred || !env_[c.id].empty()) continue;
      execute(c);
    }
  }

  // The views step `s` owns: its own value copied out once (true: done), or its MatMul operands
  // read in place (operands_ and layouts_ set for call()); a view that is not one runs its ops
  // now (all of them before any operand is set: those ops run through call() too).
  bool prepare_views(Step& s) {
    std::optional<kernels::StridedLayout> layout[2];
    Value dense[2];  // scaled operands, copied out
    for (PlannedView& v : s.views) {
      std::optional<kernels::StridedLayout> l = resolve_view(v);
      if (v.operand < 0) {
        if (!l) {
          run_deferred(v);
          continue;
        }
        const Value& src = env_[v.source][0];
        const size_t es = dtype_size(src.dtype());
        if (kernels::is_contiguous(*l)) {  // reshapes and leading-axis slices: the same bytes
          env_[s.id].push_back(
              value_slice(src, static_cast<size_t>(l->offset) * es, src.dtype(), l->shape));
          return true;
        }
        Value out = new_value(src.dtype(), l->shape);
        kernels::strided_copy(src.data<void>(), es, *l, out.mutable_data<void>());
        env_[s.id].push_back(std::move(out));
        return true;
      }
      if (!l || l->shape.size() < 2 || env_[v.source][0].dtype() != Dtype::Float32 || s.bias) {
        run_deferred(v);
        continue;
      }
      if (v.scaled) {  // copied out, divided or multiplied by the scalar as the Div/Mul would
        const Results& c = env_[v.scalar];
        if (c.size() != 1 || !c[0].is_tensor() || c[0].dtype() != Dtype::Float32 ||
            c[0].numel() != 1 || c[0].shape().size() > l->shape.size() || !c[0].data<float>()) {
          run_deferred(v);
          continue;
        }
        const auto k = static_cast<size_t>(v.operand);
        dense[k] = new_value(Dtype::Float32, l->shape);
        kernels::strided_copy_scaled_f32(env_[v.source][0].data<float>(), *l, c[0].data<float>()[0],
                                         v.divide, dense[k].mutable_data<float>());
        continue;
      }
      layout[v.operand] = std::move(l);
    }
    // A strided operand beside one the GEMM cannot take as it is (a packed weight, a vector):
    // back to the ops.
    if ((layout[0] && !kernels::is_contiguous(*layout[0])) ||
        (layout[1] && !kernels::is_contiguous(*layout[1])))
      for (size_t k = 0; k < 2; ++k) {
        if (layout[k] || dense[k].defined() || plan_.args[s.args_begin + k] < 0) continue;
        const Results& r = env_[static_cast<size_t>(plan_.args[s.args_begin + k])];
        if (r.size() == 1 && r[0].is_tensor() && !r[0].packed() && r[0].shape().size() >= 2)
          continue;
        for (const PlannedView& v : s.views)
          if (v.operand >= 0 && layout[v.operand]) {
            run_deferred(v);
            layout[v.operand].reset();
          }
        break;
      }
    for (const PlannedView& v : s.views) {
      const auto k = static_cast<size_t>(v.operand);
      if (v.operand >= 0 && dense[k].defined()) {
        aliases_[k] = std::move(dense[k]);
        operands_[k] = &aliases_[k];
        continue;
      }
      if (v.operand < 0 || !layout[k]) continue;
      const Value& src = env_[v.source][0];
      if (kernels::is_contiguous(*layout[k])) {  // reshaped, or sliced on a leading axis: an alias
        aliases_[k] = value_slice(src, static_cast<size_t>(layout[k]->offset) * sizeof(float),
                                  Dtype::Float32, layout[k]->shape);
        operands_[k] = &aliases_[k];
      } else {
        layouts_[k] = std::move(*layout[k]);
        operands_[k] = &src;
        strided_[k] = true;
      }
    }
    return false;
  }

  void clear_operands() {
    for (size_t k = 0; k < 2; ++k) {
      operands_[k] = nullptr;
      strided_[k] = false;
      aliases_[k] = Value();
    }
  }

  // Step `s` (a profiled run: timed).
  void execute_timed(Step& s) {
    const bool timed = profile_ && s.node->op() == Opcode::CallFunction;
    const auto t0 =
        timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    if (s.concat_writer >= 0) {
      execute_into_concat(s);
    } else {
      execute(s);
    }
    if (timed)
      result_.profile.push_back(
          {s.node->name(), s.node->target().pretty(),
           std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
               .count()});
  }

  // Before Conv step `s` with a planned input scale: in_scale_ set when its Mul's operands are x
  // and a per-channel scale of it (float32 tensors, the scale shaped [N or 1, C, 1, ...] against
  // x's [N, C, ...]), for call() to hand the Conv; otherwise the Mul runs now, as it would have
  // (unless another pattern computed it).
  void take_in_scale(const Step& s) {
    in_scale_ = InScale();
    Step& mul = plan_.steps[s.in_scale_step];
    if (!env_[mul.id].empty()) return;
    if (!(in_scale_ = in_scale_of(mul)).x) execute_timed(mul);
  }
  struct InScale {
    const Value* x = nullptr;  // null: none
    const float* scale = nullptr;
    int64_t stride = 0;
  };
  InScale in_scale_of(const Step& mul) const {
    const Value* v[2] = {value_of(mul, plan_.args[mul.args_begin]),
                         value_of(mul, plan_.args[mul.args_begin + 1])};
    for (int k = 0; k < 2; ++k) {
      const Value* a = v[k];
      const Value* b = v[1 - k];
      if (!a || !b || !a->is_tensor() || !b->is_tensor() || a->packed() || b->packed() ||
          a->dtype() != Dtype::Float32 || b->dtype() != Dtype::Float32)
        return InScale();
      const std::vector<int64_t>& xs = a->shape();
      const std::vector<int64_t>& ss = b->shape();
      if (xs.size() < 3 || ss.size() != xs.size() || ss[1] != xs[1] ||
          (ss[0] != xs[0] && ss[0] != 1))
        continue;
      bool ones = true;
      for (size_t d = 2; d < ss.size(); ++d) ones = ones && ss[d] == 1;
      if (!ones) continue;
      return InScale{a, b->data<float>(), ss[0] == xs[0] ? xs[1] : 0};
    }
    return InScale();
  }

  void call(Step& s, Results& out) {
    struct OperandsScope {
      Runner& r;
      ~OperandsScope() { r.clear_operands(); }
    } operands_scope{*this};
    if (!s.views.empty() && prepare_views(s)) return;
    Node* n = s.node;
    if (s.unary.x != kNoNode && unary_at(s)) return;
    if (s.layer_norm_div && layer_norm_at(s)) return;
    if (s.qdq.fn) {  // DequantizeLinear -> n [-> Relu] -> QuantizeLinear on integer kernels
      std::vector<const Value*> in;
      for (size_t k = 0; k < s.qdq.args.size(); ++k)
        in.push_back(s.qdq.constants[k] ? nullptr : value_of(s, s.qdq.args[k]));
      env_[s.qdq.result].push_back(run_qdq(s.qdq, *n, std::move(in), gm_, &s.attrs, plan_.opset));
      st_.skip[s.qdq.result] = 1;
      if (s.qdq.relu != UINT32_MAX) st_.skip[s.qdq.relu] = 1;
      return;
    }
    if (!s.fn)
      throw Error(ErrorKind::Unsupported,
                  "node '" + n->name() + "': no implementation of " +
                      n->target().function().qualname() + " (check coverage() before running)",
                  n->name());
    // A Conv's planned input scale (take_in_scale): x and the scale instead of the Mul's value.
    const InScale in_scale = s.in_scale_step != kNoStep ? in_scale_ : InScale();
    in_scale_ = InScale();
    OpCallPrivate internal;
    internal.in_scale = in_scale.scale;
    internal.in_scale_stride = in_scale.stride;
    internal.num_outputs = s.num_outputs;
    internal.opset = plan_.opset;
    internal.attrs = &s.attrs;
    OpCall call{*n, {}, n->kwargs(), {}, &gm_, &internal};
    call.inputs.swap(st_.inputs);  // reused vectors: no allocation per node
    call.inputs.clear();
    call.outputs.swap(out);
    for (uint32_t k = s.args_begin; k < s.args_end; ++k) {
      const size_t i = k - s.args_begin;
      if (i < 2 && operands_[i]) {  // read as a view (prepare_views)
        call.inputs.push_back(operands_[i]);
        if (strided_[i]) internal.operand_layout[i] = &layouts_[i];
        continue;
      }
      if (i == 0 && in_scale.x) {  // x, which the op scales as it reads it
        call.inputs.push_back(in_scale.x);
        continue;
      }
      const Value* v = value_of(s, plan_.args[k]);
      if (v && !v->is_tensor() && !takes_non_tensors(*n))  // a sequence or optional: few ops
        node_error(*n, "input " + std::to_string(k - s.args_begin) + " is " + v->describe() +
                           "; the op takes tensors");
      if (v && v->dtype() == Dtype::String && v->is_tensor() && !takes_strings(*n))
        node_error(*n, "input " + std::to_string(k - s.args_begin) + " is " + v->describe() +
                           "; the op does not take string tensors");
      call.inputs.push_back(v);
    }
    const Tensor* bias = s.bias;
    if (bias) {  // float32 operands, b at least 2-D with as many columns as the bias
      const Value* a = call.inputs.size() == 2 ? call.inputs[0] : nullptr;
      const Value* b = call.inputs.size() == 2 ? call.inputs[1] : nullptr;
      if (!a || !b || a->dtype() != Dtype::Float32 || b->dtype() != Dtype::Float32 ||
          b->shape().size() < 2 || b->shape().back() != bias->shape[0])
        bias = nullptr;
    }
    // A planned residual Add (Conv, MatMul): offered to the op, which takes it if it has the
    // output's float32 shape (fused_residual), after the bias.
    const Value* residual = nullptr;
    if (s.residual_add != kNoNode && (bias || !s.bias)) {  // (after the bias Add, if it runs here)
      const Results& r = env_[s.residual];
      if (r.size() == 1 && r[0].is_tensor() && r[0].dtype() == Dtype::Float32) residual = &r[0];
    }
    float lo = 0.0f, hi = 0.0f;
    // With a fused bias or residual, a Relu/Clip after the Add is applied here, after the Add.
    const PlannedActivation& planned = residual ? s.residual_activation
                                       : bias   ? s.bias_activation
                                                : s.activation;
    bool activation = activation_bounds(planned, lo, hi);
    if (activation) {  // (after a fused bias only for an op that adds it: see fused_clamp)
      internal.clamp_lo = lo;
      internal.clamp_hi = hi;
    }
    if (bias) internal.col_bias = reinterpret_cast<const float*>(bias->data->data());
    internal.residual = residual;
    if (s.out_transpose != kNoNode && !bias && !activation) internal.out_perm = &s.out_perm;
    if (s.softmax != kNoNode && !bias && !activation && !residual) {
      internal.softmax_offered = true;
      internal.softmax_axis = s.softmax_axis;
    }
    // (A planned Relu/Clip whose bounds this run cannot read runs as a node, before the MaxPool.)
    if (s.max_pool != kNoNode && (s.activation.node == kNoNode || activation))
      internal.max_pool = n->graph().node_by_id(s.max_pool);
    try {
      const OpCallPrivate offered = internal;
      (*s.fn)(call);
      if (in_scale.x && !internal.in_scale_applied) {
        // An op that does not take the scale (registered in the builtin's place) computed the
        // Conv of x: the Mul runs, then the op again on its value.
        call.outputs.clear();
        execute_timed(plan_.steps[s.in_scale_step]);
        call.inputs[0] = &env_[plan_.steps[s.in_scale_step].id][0];
        internal = offered;
        internal.in_scale = nullptr;
        (*s.fn)(call);
      }
    } catch (const Error& e) {
      // A size check deep in an op (new_value, checked_nbytes) does not know the node.
      if (e.kind() != ErrorKind::Resource || !e.node().empty()) throw;
      throw Error(ErrorKind::Resource,
                  "node '" + n->name() + "' (" + n->target().pretty() + "): " + e.what(),
                  n->name());
    } catch (const std::bad_alloc&) {
      throw Error(ErrorKind::Resource,
                  "node '" + n->name() + "' (" + n->target().pretty() + "): out of memory (" +
                      describe_inputs(call) + "); lower fx::Limits to fail before allocating",
                  n->name());
    } catch (const std::length_error&) {
      throw Error(ErrorKind::Resource,
                  "node '" + n->name() + "' (" + n->target().pretty() + "): a size too large (" +
                      describe_inputs(call) + ")",
                  n->name());
    } catch (const std::exception& e) {
      // Anything else an op throws (std::out_of_range from a check it missed) is a bug in fxwasm,
      // reported as one naming the node, never a terminate.
      throw Error(ErrorKind::Internal,
                  "node '" + n->name() + "' (" + n->target().pretty() +
                      "): internal error: " + e.what() + " (" + describe_inputs(call) + ")",
                  n->name());
    }
    if (call.outputs.empty()) node_error(*n, "the op produced no output");
    if (bias) {
      Value& v = call.outputs[0];
      const int64_t cols = bias->shape[0];
      if (v.dtype() != Dtype::Float32 || v.shape().empty() || v.shape().back() != cols)
        node_error(*n, "internal error: a fused bias does not match the MatMul output");
      if (!internal.col_bias_applied) {  // (the MatMul op adds it in the GEMM's store)
        const float* bv = reinterpret_cast<const float*>(bias->data->data());
        float* y = v.mutable_data<float>();
        for (int64_t r = 0, rows = v.numel() / std::max<int64_t>(cols, 1); r < rows; ++r, y += cols)
          for (int64_t j = 0; j < cols; ++j) y[j] += bv[j];
      }
      st_.fused[s.bias_add] = s.id + 1;
    }
    if (internal.out_permuted) st_.fused[s.out_transpose] = s.id + 1;  // (the Transpose's value)
    if (internal.softmax_applied) st_.fused[s.softmax] = s.id + 1;     // (the Softmax's value)
    if (internal.max_pool_applied) {
      if (activation && !internal.clamp_applied)
        node_error(*n, "internal error: a fused max-pool without its Relu/Clip");
      // (the MaxPool's value, from its input's: the Conv's is freed after its Relu/Clip)
      st_.fused[s.max_pool] = (activation ? planned.node : s.id) + 1;
    }
    if (residual) {
      if (internal.residual_applied)
        st_.fused[s.residual_add] = (bias ? s.bias_add : s.id) + 1;  // (the value before it)
      else
        activation = false;  // (the Add, and its Relu/Clip, run as nodes of their own)
    }
    if (activation && call.outputs.size() == 1 && call.outputs[0].dtype() == Dtype::Float32) {
      if (!internal.clamp_applied) {  // the whitelisted producers return fresh buffers
        Value& v = call.outputs[0];
        kernels::unary_f32(kernels::UnaryOp::Clip, v.data<float>(), v.mutable_data<float>(),
                           v.numel(), lo, hi);
      }
      // (the Add's value: the producer's is freed after the Add, its last use)
      st_.fused[planned.node] = (residual ? s.residual_add : bias ? s.bias_add : s.id) + 1;
    } else if (activation && internal.clamp_applied) {
      node_error(*n, "internal error: a fused activation was applied to a non-float output");
    }
    // Optional outputs the node does not declare (Dropout's mask...) are dropped.
    if (call.outputs.size() > 1 && call.outputs.size() > s.num_outputs)
      call.outputs.resize(s.num_outputs);
    out.swap(call.outputs);
    st_.inputs.swap(call.inputs);
  }

  const GraphModule& gm_;
  Plan& plan_;
  RunState& st_;
  std::vector<Results>& env_;
  const std::vector<Value>& inputs_;
  const bool profile_;
  RunResult result_;
  size_t next_input_ = 0;
  // The current step's MatMul operands read as views (prepare_views): the value standing for
  // input k (the view's source, or an alias of it), and its layout when strided.
  const Value* operands_[2] = {nullptr, nullptr};
  bool strided_[2] = {false, false};
  kernels::StridedLayout layouts_[2];
  Value aliases_[2];
  InScale in_scale_;  // take_in_scale's, for the next call()
};

}  // namespace

RunResult run(const GraphModule& gm, const std::vector<Value>& inputs, const RunOptions& options) {
  // Held for the whole run: a nested run (an If body) may evict it from the cache.
  const std::shared_ptr<Plan> plan = plan_for(gm, inputs, options.probe);
  RunStateLease lease(plan->id_bound);
  return Runner(gm, *plan, *lease, inputs, options.profile).run();
}

std::vector<Value> run(const GraphModule& gm, const std::vector<Value>& inputs) {
  return run(gm, inputs, RunOptions{}).outputs;
}

}  // namespace fx::exec
