// Building, validating and caching plans (plan.h).
#include "exec/plan.h"

#include <algorithm>
#include <optional>
#include <sstream>
#include <unordered_map>

namespace fx::exec {

namespace {

// The Relu/Clip after `n` that may run inside it (its only user, reading n as its input), with
// the bounds the graph fixes; node == kNoNode if none.
PlannedActivation plan_activation(const GraphModule& gm, const Node* n, bool probed,
                                  const std::vector<size_t>& position) {
  PlannedActivation act;
  if (probed || n->users().size() != 1 || !target_info(n->target().function()).clamp_producer)
    return act;
  Node* u = *n->users().begin();
  if (u->op() != Opcode::CallFunction || u->args().empty() || !u->args()[0].is_node() ||
      u->args()[0].to_node() != n)
    return act;
  const TargetInfo& ut = target_info(u->target().function());
  if (ut.relu) {
    if (u->args().size() != 1 || !u->kwargs().empty()) return act;
    act.lo = 0.0f;
    act.node = static_cast<uint32_t>(u->id());
    return act;
  }
  if (!ut.clip) return act;
  for (const auto& kv : u->kwargs()) {  // opset < 11: bounds as attributes
    if (kv.first != "min" && kv.first != "max") return act;
    if (kv.second.kind() != Argument::Kind::Float && kv.second.kind() != Argument::Kind::Int)
      return act;
    (kv.first == "min" ? act.lo : act.hi) = static_cast<float>(kv.second.to_double());
  }
  for (size_t k = 1; k < u->args().size(); ++k) {  // opset >= 11: bounds as inputs
    const Argument& a = u->args()[k];
    if (a.is_none()) continue;
    if (!a.is_node() || a.to_node() == n || k > 2) return act;
    const Node* b = a.to_node();
    act.bound_node[k - 1] = static_cast<uint32_t>(b->id());
    // A constant the run has not reached when n runs is read from its tensor.
    if (b->op() == Opcode::GetAttr && position[b->id()] > position[n->id()])
      act.bound_tensor[k - 1] = gm.get_tensor(b->target().str());
  }
  act.node = static_cast<uint32_t>(u->id());
  return act;
}

// The only user of `n`, when it is an Add of n and another argument (returned in `other`), and
// neither n nor the Add is probed; else null. (Where a MatMul's bias or a Conv's residual may
// run inside n.)
const Node* sole_add_user(const Node* n, const std::vector<char>& probed, const Argument*& other) {
  if (probed[n->id()] || n->users().size() != 1) return nullptr;
  const Node* u = *n->users().begin();
  if (u->op() != Opcode::CallFunction || probed[u->id()] || u->args().size() != 2 ||
      !u->kwargs().empty() || !target_info(u->target().function()).add)
    return nullptr;
  const Argument& a0 = u->args()[0];
  const Argument& a1 = u->args()[1];
  const bool first = a0.is_node() && a0.to_node() == n;
  if (!first && !(a1.is_node() && a1.to_node() == n)) return nullptr;
  other = first ? &a1 : &a0;
  return u;
}

// The Add of a constant 1-D float32 bias that may run inside MatMul `n`, or null.
const Tensor* plan_bias(const GraphModule& gm, const Node* n, const std::vector<char>& probed,
                        uint32_t& add) {
  const Argument* other = nullptr;
  if (!target_info(n->target().function()).matmul) return nullptr;
  const Node* u = sole_add_user(n, probed, other);
  if (!u) return nullptr;
  const Tensor* t = constant_tensor(gm, *other);
  if (!t || t->dtype != Dtype::Float32 || t->shape.size() != 1) return nullptr;
  add = static_cast<uint32_t>(u->id());
  return t;
}

// The residual Add that may run inside Conv or MatMul `n`: the only user of `last` (n, or the bias
// Add planned into the MatMul), an Add of it and a value computed before n (`residual`), neither
// probed. Returns the Add's id, or kNoNode. Of a ResNet block's two convolutions both read by the
// Add (the downsampling one), the later one takes it.
uint32_t plan_residual(const Node* n, const Node* last, const std::vector<char>& probed,
                       const std::vector<size_t>& position, uint32_t& residual) {
  const Argument* other = nullptr;
  const TargetInfo& info = target_info(n->target().function());
  if (!info.conv && !info.matmul) return kNoNode;
  const Node* u = sole_add_user(last, probed, other);
  if (!u || !other->is_node() || other->to_node() == last ||
      position[other->to_node()->id()] >= position[n->id()])
    return kNoNode;
  residual = static_cast<uint32_t>(other->to_node()->id());
  return static_cast<uint32_t>(u->id());
}

// The only user of `n` when it is a call reading n alone, neither of them probed; else null.
const Node* sole_reader(const Node* n, const std::vector<char>& probed) {
  if (probed[n->id()] || n->users().size() != 1) return nullptr;
  const Node* u = *n->users().begin();
  if (u->op() != Opcode::CallFunction || probed[u->id()] || u->args().size() != 1 ||
      !u->args()[0].is_node() || u->args()[0].to_node() != n)
    return nullptr;
  return u;
}

// The Softmax that may run inside MatMul `n` (its only user, reading only n, the built-in op,
// neither probed), with its axis in `axis` (the default of `opset` when the node gives none), or
// kNoNode.
uint32_t plan_softmax(const Node* n, const std::vector<char>& probed, int64_t opset,
                      int64_t& axis) {
  const Node* u = target_info(n->target().function()).matmul ? sole_reader(n, probed) : nullptr;
  if (!u) return kNoNode;
  const TargetInfo& info = target_info(u->target().function());
  if (!info.softmax || !info.builtin) return kNoNode;
  axis = opset >= 0 && opset < 13 ? 1 : -1;
  for (const auto& kv : u->kwargs()) {
    if (kv.first != "axis" || kv.second.kind() != Argument::Kind::Int) return kNoNode;
    axis = kv.second.to_int();
  }
  return static_cast<uint32_t>(u->id());
}

// The MaxPool that may run inside Conv `n` (see Step::max_pool): the only user of `last` (n, or
// its planned Relu/Clip), reading only it; or kNoNode.
uint32_t plan_max_pool(const Node* n, const Node* last, const std::vector<char>& probed) {
  const Node* u = target_info(n->target().function()).conv && !probed[n->id()]
                      ? sole_reader(last, probed)
                      : nullptr;
  if (!u) return kNoNode;
  const TargetInfo& info = target_info(u->target().function());
  if (!info.max_pool || !info.builtin || declared_outputs(*u) != 1) return kNoNode;
  return static_cast<uint32_t>(u->id());
}

// The Div of the LayerNormalization pattern that may start at ReduceMean `mean`, or null.
Node* plan_layer_norm_div(const Node* mean, bool probed) {
  if (probed || mean->users().size() != 1 || mean->args().empty() || !mean->args()[0].is_node())
    return nullptr;
  Node* sub = *mean->users().begin();
  Node* div = nullptr;
  for (Node* u : sub->users())
    if (u->op() == Opcode::CallFunction && target_info(u->target().function()).div) div = u;
  return div;
}

// The GELU pattern at Erf node `erf`, planned at its first node (run.cpp's unary_at), when no
// intermediate is probed or read outside the pattern.
void plan_gelu(const GraphModule& gm, Node* erf, const std::vector<char>& probed,
               const std::vector<size_t>& position, Plan& p) {
  const std::optional<GeluMatch> m = match_gelu(gm, erf, true);
  if (!m || probed[m->result->id()]) return;
  size_t first = position[m->result->id()];
  for (const Node* q : m->interior) {
    if (probed[q->id()]) return;
    for (const Node* u : q->users())
      if (u != m->result &&
          std::find(m->interior.begin(), m->interior.end(), u) == m->interior.end())
        return;
    first = std::min(first, position[q->id()]);
  }
  PlannedUnary& g = p.steps[first].unary;
  if (g.x != kNoNode) return;  // (one pattern per first node)
  g.x = static_cast<uint32_t>(m->x->id());
  g.result = static_cast<uint32_t>(m->result->id());
  for (const Node* q : m->interior) g.covered.push_back(static_cast<uint32_t>(q->id()));
  g.constant_rank = m->constant_rank;
}

// The Mul feeding Conv `conv`'s data input that the Conv may take as a per-channel scale of x
// (Step::in_scale_step): a Mul of two computed values that only the Conv reads, and only there;
// null if none. Whether one operand is x and the other a scale is known when the Conv runs.
const Node* input_scale_mul(const Node* conv, const std::vector<char>& probed,
                            const std::vector<char>& fixed) {
  if (conv->op() != Opcode::CallFunction || conv->target().function().qualname() != "onnx.Conv" ||
      fixed[conv->id()] || conv->args().empty() || !conv->args()[0].is_node())
    return nullptr;
  const Node* mul = conv->args()[0].to_node();
  if (mul->op() != Opcode::CallFunction || mul->target().function().qualname() != "onnx.Mul" ||
      probed[mul->id()] || fixed[mul->id()] || mul->users().size() != 1 ||
      mul->args().size() != 2 || !mul->kwargs().empty() || !mul->args()[0].is_node() ||
      !mul->args()[1].is_node())
    return nullptr;
  for (size_t k = 1; k < conv->args().size(); ++k)  // (read as the weight or bias too)
    if (conv->args()[k].is_node() && conv->args()[k].to_node() == mul) return nullptr;
  return mul;
}

// x * Sigmoid(x) (Mul of the Sigmoid and its own input, either order) at Sigmoid node `sig`,
// planned at the Sigmoid's step when the Mul is its only user and neither is probed: one pass of
// the SiLU kernel instead of two (EfficientNet-B0: 3.6 + 3.1 ms of its 20 natively). The same
// bits as the nodes (where x is a NaN, Mul(s, x) would keep s's NaN and the kernel keeps x's).
void plan_silu(Node* sig, const std::vector<char>& probed, Plan& p, size_t position) {
  if (sig->args().size() != 1 || !sig->args()[0].is_node() || sig->users().size() != 1 ||
      probed[sig->id()])
    return;
  Node* x = sig->args()[0].to_node();
  Node* mul = *sig->users().begin();
  if (mul->op() != Opcode::CallFunction || mul->target().function().qualname() != "onnx.Mul" ||
      probed[mul->id()] || mul->args().size() != 2 || !mul->kwargs().empty())
    return;
  const Argument& a = mul->args()[0];
  const Argument& b = mul->args()[1];
  const bool xs = a.is_node() && a.to_node() == x && b.is_node() && b.to_node() == sig;
  const bool sx = a.is_node() && a.to_node() == sig && b.is_node() && b.to_node() == x;
  if (!xs && !sx) return;
  PlannedUnary& u = p.steps[position].unary;
  if (u.x != kNoNode) return;
  u.x = static_cast<uint32_t>(x->id());
  u.result = static_cast<uint32_t>(mul->id());
  u.covered = {static_cast<uint32_t>(sig->id())};
  u.op = kernels::UnaryOp::Silu;
}

// A GlobalAveragePool reading the result of unary pattern `u` (its last Mul), to compute with it
// (PlannedUnary::means): the built-in op, of that value alone, neither probed nor fixed, writing
// no Concat's input.
void plan_unary_means(PlannedUnary& u, const std::vector<char>& probed,
                      const std::vector<char>& fixed, const std::vector<size_t>& position,
                      Plan& p) {
  const Node* result = p.steps[position[u.result]].node;
  for (const Node* user : result->users()) {
    if (user->op() != Opcode::CallFunction || probed[user->id()] || fixed[user->id()] ||
        user->target().function().qualname() != "onnx.GlobalAveragePool" ||
        !target_info(user->target().function()).builtin || user->args().size() != 1 ||
        !user->kwargs().empty())
      continue;
    const Step& g = p.steps[position[user->id()]];
    if (g.kind != Step::Kind::Call || g.concat_writer >= 0 || g.deferred || g.num_outputs != 1)
      continue;
    u.means = static_cast<uint32_t>(user->id());
    return;
  }
}

// The Concat at `n` as a PlannedConcat when each input is a distinct computed node that nothing
// else reads and no probe names: its writer is that node's step, or the producer a Relu/Clip
// input is planned to run inside.
void plan_concat(Node* n, const std::vector<char>& probed, const std::vector<size_t>& position,
                 Plan& p) {
  const auto& args = n->args();
  if (args.size() < 2 || probed[n->id()]) return;
  std::vector<uint32_t> writers;
  for (const Argument& a : args) {
    if (!a.is_node()) return;
    const Node* in = a.to_node();
    if (probed[in->id()] || in->users().size() != 1 ||
        p.steps[position[in->id()]].fixed != Fixed::No)
      return;
    for (const Argument& b : args)  // (listed twice: one value, two places)
      if (&b != &a && b.is_node() && b.to_node() == in) return;
    uint32_t writer = static_cast<uint32_t>(in->id());
    const Step& s = p.steps[position[in->id()]];
    if (s.kind != Step::Kind::Call) return;
    if (!in->args().empty() && in->args()[0].is_node()) {
      const Step& producer = p.steps[position[in->args()[0].to_node()->id()]];
      if (producer.activation.node == in->id() && !producer.bias)
        writer = static_cast<uint32_t>(producer.id);
    }
    if (p.steps[position[writer]].concat_writer >= 0) return;
    writers.push_back(writer);
  }
  const auto index = static_cast<int32_t>(p.concats.size());
  PlannedConcat c;
  c.concat = static_cast<uint32_t>(n->id());
  p.concats.push_back(std::move(c));
  p.steps[position[n->id()]].concat = index;
  for (size_t k = 0; k < writers.size(); ++k) {
    Step& w = p.steps[position[writers[k]]];
    w.concat_writer = index;
    w.concat_input = static_cast<uint32_t>(k);
  }
}

// The ops whose output shapes follow from their inputs' shapes and attributes and from the
// values of the inputs whose bits are set (Reshape's shape, Slice's starts...). Ops whose output
// shape depends on data (NonZero, Unique, Compress, NonMaxSuppression, Loop...) are not here,
// nor any op not checked against its definition.
const std::unordered_map<std::string, uint32_t>& shape_value_inputs() {
  static const std::unordered_map<std::string, uint32_t> table = [] {
    std::unordered_map<std::string, uint32_t> t;
    // Only shapes: elementwise ops, products, convolutions, pools, normalisations, layout.
    std::istringstream only_shapes(
        "Abs Acos Acosh Add And Asin Asinh Atan Atanh BitShift BitwiseAnd BitwiseNot "
        "BitwiseOr BitwiseXor Cast CastLike Ceil Celu Clip Cos Cosh Div Elu Equal Erf Exp "
        "Floor Gelu Greater GreaterOrEqual HardSigmoid HardSwish Hardmax Identity IsInf IsNaN "
        "LeakyRelu Less LessOrEqual Log LogSoftmax Max Mean Min Mish Mod Mul Neg Not Or PRelu "
        "Pow Reciprocal Relu Round Selu Shrink Sigmoid Sign Sin Sinh Softmax Softplus "
        "Softsign Sqrt Sub Sum Tan Tanh ThresholdedRelu Where Xor ArgMax ArgMin AveragePool "
        "BatchNormalization Concat Conv ConvTranspose CumSum DepthToSpace DequantizeLinear "
        "Einsum Flatten Gather GatherElements GatherND Gemm GlobalAveragePool GlobalLpPool "
        "GlobalMaxPool InstanceNormalization LayerNormalization LpNormalization LpPool LRN "
        "MatMul MaxPool MeanVarianceNormalization QuantizeLinear ScatterElements ScatterND "
        "SpaceToDepth Transpose Trilu");
    for (std::string op; only_shapes >> op;) t[op] = 0;
    for (const char* op :
         {"Reshape", "Squeeze", "Unsqueeze", "Expand", "Tile", "Split", "TopK", "OneHot",
          "Upsample", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
          "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare"})
      t[op] = 1u << 1;
    t["Slice"] = 0b11110;  // starts, ends, axes, steps
    t["Pad"] = 0b1010;     // pads, axes (not the constant value)
    t["Resize"] = 0b1110;  // roi, scales, sizes
    t["ConstantOfShape"] = 0b1;
    t["Range"] = 0b111;
    return t;
  }();
  return table;
}

// Which nodes the plan's key fixes (Fixed), and which have shapes it fixes (`shaped`): inputs have
// the key's shapes; constants are fixed (the plan is rechecked when one changes); Shape and Size
// of a shaped value are fixed; a deterministic op on fixed tensors is fixed; and an op of
// shape_value_inputs() on shaped inputs, the listed ones fixed, is shaped.
std::vector<char> fixed_nodes(const GraphModule& gm, const std::vector<Node*>& nodes,
                              const std::vector<Value>& inputs, uint64_t id_bound) {
  std::vector<char> fixed(id_bound, 0), shaped(id_bound, 0);
  size_t next_input = 0;
  for (Node* n : nodes) {
    const uint64_t id = n->id();
    if (n->op() == Opcode::Placeholder) {
      shaped[id] = next_input < inputs.size() && inputs[next_input].is_tensor();
      ++next_input;
      continue;
    }
    if (n->op() == Opcode::GetAttr) {
      fixed[id] = shaped[id] = gm.get_tensor(n->target().str()) != nullptr;
      continue;
    }
    if (n->op() != Opcode::CallFunction) continue;
    const TargetInfo& info = target_info(n->target().function());
    const auto& args = n->args();
    if (info.getitem) {
      if (args.size() == 2 && args[0].is_node()) {
        fixed[id] = fixed[args[0].to_node()->id()];
        shaped[id] = shaped[args[0].to_node()->id()];
      }
      continue;
    }
    const std::string& qual = n->target().function().qualname();
    if (qual.rfind("onnx.", 0) != 0 || !info.fn || !*info.fn) continue;
    const std::string op = qual.substr(5);
    bool all_fixed = true, all_shaped = true;
    for (const Argument& a : args) {
      if (a.is_none()) continue;
      all_fixed = all_fixed && a.is_node() && fixed[a.to_node()->id()];
      all_shaped = all_shaped && a.is_node() && shaped[a.to_node()->id()];
    }
    if (op == "Shape" || op == "Size") {
      fixed[id] = shaped[id] =
          args.size() == 1 && args[0].is_node() && shaped[args[0].to_node()->id()];
      continue;
    }
    // Not functions of their inputs (Random*, Bernoulli, Multinomial, Dropout), or running
    // subgraphs (If, Loop, Scan): never fixed.
    const bool excluded = op.rfind("Random", 0) == 0 || op == "Bernoulli" || op == "Multinomial" ||
                          op == "Dropout" || op == "If" || op == "Loop" || op == "Scan";
    fixed[id] = all_fixed && !excluded;
    shaped[id] = fixed[id];
    const auto rule = shape_value_inputs().find(op);
    if (!shaped[id] && all_shaped && rule != shape_value_inputs().end()) {
      bool values = true;
      for (size_t k = 0; k < args.size() && k < 32; ++k)
        if ((rule->second >> k) & 1)
          values = values &&
                   (args[k].is_none() || (args[k].is_node() && fixed[args[k].to_node()->id()]));
      shaped[id] = values;
    }
  }
  return fixed;
}

std::shared_ptr<Plan> build_plan(const GraphModule& gm, const std::vector<Value>& inputs,
                                 const std::vector<std::string>& probes) {
  const Graph& g = gm.graph();
  auto plan = std::make_shared<Plan>();
  Plan& p = *plan;
  p.gm = &gm;
  p.serial = g.serial();
  p.version = g.version();
  p.registry_generation = registry_generation();
  for (const Value& v : inputs) p.signature.emplace_back(v.dtype(), v.shape());
  p.probes = probes;
  p.graph_alive = g.lifetime();
  p.id_bound = g.id_bound();
  p.opset = module_opset(&gm);

  std::vector<char> probed(p.id_bound, 0);
  for (const std::string& name : probes) {
    Node* n = g.find_node(name);
    if (!n) throw Error(ErrorKind::Key, "probe: the graph has no node named '" + name + "'", name);
    probed[n->id()] = 1;
  }
  const std::vector<Node*> nodes = g.nodes().to_vector();
  std::vector<size_t> position(p.id_bound, 0), last_use(p.id_bound, 0);
  std::vector<PlannedQdq> qdq(nodes.size());
  // Fixed nodes run plainly, once: no fusion is planned at them.
  const std::vector<char> fixed = fixed_nodes(gm, nodes, inputs, p.id_bound);
  for (size_t i = 0; i < nodes.size(); ++i) {
    position[nodes[i]->id()] = i;
    for (Node* in : nodes[i]->all_input_nodes()) last_use[in->id()] = i;
    if (!fixed[nodes[i]->id()]) qdq[i] = plan_qdq(gm, nodes[i], probed);
  }
  for (size_t i = 0; i < nodes.size(); ++i)  // a QDQ pattern reads its DequantizeLinears' inputs
    for (int64_t id : qdq[i].args)
      if (id >= 0) last_use[id] = std::max(last_use[id], i);
  // Layout chains read as views (their ops' inputs now live until the owner's step).
  ViewPlan view_plan = plan_views(nodes, fixed, probed, position, last_use);
  // Per-channel Muls a Conv may take: (Conv position, Mul position).
  std::vector<std::pair<size_t, size_t>> in_scales;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (const Node* mul = input_scale_mul(nodes[i], probed, fixed))
      in_scales.emplace_back(i, position[mul->id()]);
  auto add_arg = [&](const Argument& a) {
    if (a.is_none())
      p.args.push_back(kArgNone);
    else if (a.is_node())
      p.args.push_back(static_cast<int64_t>(a.to_node()->id()));
    else
      p.args.push_back(kArgBad - static_cast<int64_t>(a.kind()));
  };

  p.steps.resize(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node* n = nodes[i];
    Step& s = p.steps[i];
    s.node = n;
    s.id = static_cast<uint32_t>(n->id());
    s.probed = probed[n->id()] != 0;
    if (fixed[n->id()]) {
      s.fixed = Fixed::Candidate;
      p.fixed_pending = true;
    }
    s.args_begin = s.args_end = static_cast<uint32_t>(p.args.size());
    switch (n->op()) {
      case Opcode::Placeholder:
        s.kind = Step::Kind::Input;
        break;
      case Opcode::GetAttr: {
        s.kind = Step::Kind::Constant;
        s.constant = static_cast<uint32_t>(p.constants.size());
        PlannedConstant c;
        c.step = static_cast<uint32_t>(i);
        c.tensor = gm.get_tensor(n->target().str());
        if (c.tensor) {
          c.data = c.tensor->data.get();
          c.alive = c.tensor->data;
          c.external = c.tensor->external.get();
          if (auto w = packed_weight_of(*c.tensor); w && !s.probed && takes_packed_weight(*n, *w))
            c.packed = std::move(w);
          c.dtype = c.tensor->dtype;
          c.shape = c.tensor->shape;
        }
        p.constants.push_back(std::move(c));
        break;
      }
      case Opcode::CallFunction: {
        const TargetInfo& info = target_info(n->target().function());
        if (info.getitem) {
          s.kind = Step::Kind::Getitem;
          const auto& a = n->args();
          if (a.size() != 2 || !a[0].is_node() || a[1].kind() != Argument::Kind::Int) {
            s.error = "getitem needs (node, int)";
          } else {
            add_arg(a[0]);
            s.item = a[1].to_int();
          }
          break;
        }
        s.kind = Step::Kind::Call;
        s.fn = info.fn && *info.fn ? info.fn : nullptr;
        for (const Argument& a : n->args()) add_arg(a);
        s.num_outputs = declared_outputs(*n);
        if (fixed[n->id()]) break;
        s.qdq = std::move(qdq[i]);
        for (uint32_t id : s.qdq.absorbed) p.steps[position[id]].absorbed = true;
        if (info.reduce_mean) s.layer_norm_div = plan_layer_norm_div(n, s.probed);
        s.bias = plan_bias(gm, n, probed, s.bias_add);
        s.softmax = plan_softmax(n, probed, p.opset, s.softmax_axis);
        s.activation = plan_activation(gm, n, s.probed, position);
        if (s.bias)
          s.bias_activation =
              plan_activation(gm, g.node_by_id(s.bias_add), probed[s.bias_add] != 0, position);
        s.residual_add =
            plan_residual(n, s.bias ? g.node_by_id(s.bias_add) : n, probed, position, s.residual);
        if (s.residual_add != kNoNode)
          s.residual_activation = plan_activation(gm, g.node_by_id(s.residual_add),
                                                  probed[s.residual_add] != 0, position);
        else
          s.max_pool = plan_max_pool(
              n, s.activation.node != kNoNode ? g.node_by_id(s.activation.node) : n, probed);
        break;
      }
      case Opcode::Output: {
        s.kind = Step::Kind::Output;
        const Argument& a = n->args().empty() ? Argument() : n->args()[0];
        if (a.is_sequence()) {
          for (const Argument& e : a.elements())  // a None output is not a tensor either
            e.is_none() ? p.args.push_back(kArgBad - static_cast<int64_t>(e.kind())) : add_arg(e);
        } else if (!a.is_none()) {
          add_arg(a);
        }
        break;
      }
      case Opcode::CallModule:
      case Opcode::CallMethod:
        s.kind = Step::Kind::NotRunnable;
        break;
      case Opcode::Root:
        break;
    }
    s.args_end = static_cast<uint32_t>(p.args.size());
  }
  for (auto& [pos, transpose, perm] : view_plan.out_transposes) {
    p.steps[pos].out_transpose = transpose;
    p.steps[pos].out_perm = std::move(perm);
  }
  for (auto& [owner, v] : view_plan.views) {
    for (size_t k = 0; k + (v.operand < 0 ? 1 : 0) < v.chain.size(); ++k)
      p.steps[v.chain[k]].deferred = true;
    p.steps[owner].views.push_back(std::move(v));
  }
  for (Node* n : nodes) {
    if (n->op() != Opcode::CallFunction || fixed[n->id()]) continue;
    const std::string& op = n->target().function().qualname();
    if (op == "onnx.Erf") plan_gelu(gm, n, probed, position, p);
    if (op == "onnx.Sigmoid") plan_silu(n, probed, p, position[n->id()]);
    if (op == "onnx.Concat" && p.steps[position[n->id()]].kind == Step::Kind::Call)
      plan_concat(n, probed, position, p);
  }
  // A GlobalAveragePool of a GELU's or SiLU's result (EfficientNet's squeeze-and-excitation
  // blocks, its head) is computed with it, plane by plane from the cache.
  for (Step& s : p.steps)
    if (s.unary.x != kNoNode) plan_unary_means(s.unary, probed, fixed, position, p);
  // A Mul another pattern computes or skips (the last Mul of a GELU or SiLU) runs as planned. (A
  // LayerNormalization is matched on its first run: a Mul it computed is found computed.)
  std::vector<char> in_pattern(p.id_bound, 0);
  for (const Step& s : p.steps) {
    if (s.unary.x != kNoNode) {
      in_pattern[s.unary.result] = 1;
      for (uint32_t id : s.unary.covered) in_pattern[id] = 1;
    }
  }
  // (The Mul's operands now live until the Conv's step.)
  for (const auto& [conv, mul] : in_scales) {
    Step& m = p.steps[mul];
    if (in_pattern[m.id] || m.deferred || m.kind != Step::Kind::Call) continue;
    m.deferred = true;
    p.steps[conv].in_scale_step = static_cast<uint32_t>(mul);
    for (Node* in : m.node->all_input_nodes())
      last_use[in->id()] = std::max(last_use[in->id()], conv);
  }
  // The values each step reads last, freed after it.
  for (size_t i = 0; i < nodes.size(); ++i) {
    Step& s = p.steps[i];
    s.frees_begin = static_cast<uint32_t>(p.frees.size());
    for (Node* in : nodes[i]->all_input_nodes())
      if (last_use[in->id()] == i) p.frees.push_back(static_cast<uint32_t>(in->id()));
    s.frees_end = static_cast<uint32_t>(p.frees.size());
  }
  return plan;
}

// Whether the module's tensors are still the ones the plan was built with.
bool constants_unchanged(const GraphModule& gm, const Plan& p) {
  for (const PlannedConstant& c : p.constants) {
    const Tensor* t = gm.get_tensor(p.steps[c.step].node->target().str());
    if (t != c.tensor) return false;
    if (!t) continue;
    if (t->data.get() != c.data || (c.data && c.alive.expired()) ||
        t->external.get() != c.external || t->dtype != c.dtype || t->shape != c.shape)
      return false;
  }
  return true;
}

bool key_matches(const Plan& p, const GraphModule& gm, const std::vector<Value>& inputs,
                 const std::vector<std::string>& probes, uint64_t generation) {
  const Graph& g = gm.graph();
  if (p.serial != g.serial() || p.gm != &gm || p.version != g.version() ||
      p.registry_generation != generation || p.signature.size() != inputs.size() ||
      p.probes != probes)
    return false;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (p.signature[i].first != inputs[i].dtype() || p.signature[i].second != inputs[i].shape())
      return false;
  return true;
}

// This thread's plans. A recursive run (an If body) may add plans while its caller's plan is in
// use: callers hold their plan's shared_ptr, so an eviction never frees a plan being run.
struct PlanCache {
  std::vector<std::shared_ptr<Plan>> plans;
  uint64_t tick = 0;
};
PlanCache& plan_cache() {
  thread_local PlanCache cache;
  return cache;
}

// A graph rarely runs with more than a few input shapes; beyond these bounds the least
// recently used plan goes.
constexpr std::ptrdiff_t kPlansPerGraph = 4;
constexpr size_t kPlansPerThread = 32;

}  // namespace

std::shared_ptr<Plan> plan_for(const GraphModule& gm, const std::vector<Value>& inputs,
                               const std::vector<std::string>& probes) {
  PlanCache& cache = plan_cache();
  const uint64_t generation = registry_generation();
  const uint64_t serial = gm.graph().serial();
  const uint64_t attributes = Module::attribute_generation();
  for (size_t i = 0; i < cache.plans.size(); ++i) {
    std::shared_ptr<Plan>& p = cache.plans[i];
    if (!key_matches(*p, gm, inputs, probes, generation)) continue;
    if (p->attribute_generation != attributes) {
      if (!constants_unchanged(gm, *p)) {
        cache.plans.erase(cache.plans.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
      p->attribute_generation = attributes;
    }
    p->last_used = ++cache.tick;
    return p;
  }
  std::shared_ptr<Plan> plan = build_plan(gm, inputs, probes);
  plan->attribute_generation = attributes;
  plan->last_used = ++cache.tick;
  // Drop the plans no run can use again: of destroyed graphs, of this graph's older versions
  // (versions only grow) and of an older registry.
  auto dead = [&](const std::shared_ptr<Plan>& p) {
    return p->graph_alive.expired() || (p->serial == serial && p->version != plan->version) ||
           p->registry_generation != generation;
  };
  cache.plans.erase(std::remove_if(cache.plans.begin(), cache.plans.end(), dead),
                    cache.plans.end());
  auto evict_lru = [&](bool same_graph_only) {
    auto victim = cache.plans.end();
    for (auto it = cache.plans.begin(); it != cache.plans.end(); ++it)
      if ((!same_graph_only || (*it)->serial == serial) &&
          (victim == cache.plans.end() || (*it)->last_used < (*victim)->last_used))
        victim = it;
    if (victim != cache.plans.end()) cache.plans.erase(victim);
  };
  if (std::count_if(cache.plans.begin(), cache.plans.end(),
                    [&](const auto& p) { return p->serial == serial; }) >= kPlansPerGraph)
    evict_lru(true);
  if (cache.plans.size() >= kPlansPerThread) evict_lru(false);
  cache.plans.push_back(plan);
  return plan;
}

void release_plans() { plan_cache().plans.clear(); }

size_t cached_plan_count() { return plan_cache().plans.size(); }

void plan_layer_norm(const GraphModule& gm, const std::vector<std::string>& probes, Step& s,
                     int64_t rank) {
  PlannedLayerNorm& ln = s.layer_norm;
  ln = PlannedLayerNorm();
  ln.rank = rank;
  const std::optional<LayerNormMatch> m = match_layer_norm(gm, s.layer_norm_div, rank);
  if (!m || m->interior.front() != s.node) return;
  auto probed = [&](const Node* q) {
    for (const std::string& name : probes)
      if (q->name() == name) return true;
    return false;
  };
  if (probed(m->result)) return;
  for (const Node* q : m->interior) {
    if (probed(q)) return;
    for (const Node* u : q->users())
      if (u != m->result &&
          std::find(m->interior.begin(), m->interior.end(), u) == m->interior.end())
        return;
  }
  auto constant_f32 = [&](const Argument& a) -> const Tensor* {
    const Tensor* t = constant_tensor(gm, a);
    return t && t->dtype == Dtype::Float32 && t->data ? t : nullptr;
  };
  ln.scale = constant_f32(m->scale);
  ln.bias = constant_f32(m->bias);
  if (!ln.scale || !ln.bias) return;
  ln.result = static_cast<uint32_t>(m->result->id());
  for (const Node* q : m->interior) ln.covered.push_back(static_cast<uint32_t>(q->id()));
  ln.epsilon = static_cast<float>(m->epsilon);
  ln.ok = true;
}

}  // namespace fx::exec
