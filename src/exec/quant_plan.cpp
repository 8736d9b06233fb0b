// The QDQ pattern of quantized models (quant_plan.h): matched at a Conv / MatMul / Gemm when the
// plan is built; ops_quant.cpp runs it (run_qdq) on the QLinear ops.
#include <string>

#include "exec/ops.h"
#include "exec/quant_plan.h"

namespace fx::exec {

namespace {

bool is_q8(Dtype d) { return d == Dtype::UInt8 || d == Dtype::Int8; }

const Node* call_to(const Argument& a, const char* qualname) {
  const Node* n = a.is_node() ? a.to_node() : nullptr;
  return n && n->op() == Opcode::CallFunction && n->target().function().qualname() == qualname
             ? n
             : nullptr;
}

const Node* only_user(const Node* n) {
  return n->users().size() == 1 ? *n->users().begin() : nullptr;
}

// A constant scale (float32) or zero point (8-bit, or int32 when `int32_ok`) of `count` elements
// (0: any), or null.
const Tensor* constant_param(const GraphModule& gm, const Argument& a, bool scale, int64_t count) {
  const Tensor* t = constant_tensor(gm, a);
  if (!t || t->shape.size() > 1 || (count && t->numel() != count)) return nullptr;
  if (scale ? t->dtype != Dtype::Float32 : !is_q8(t->dtype)) return nullptr;
  return t;
}

int64_t int_kwarg(const Node* n, const char* name, int64_t fallback) {
  const Argument* a = n->kwargs().find(name);
  return a && a->kind() == Argument::Kind::Int ? a->to_int() : fallback;
}

}  // namespace

PlannedQdq plan_qdq(const GraphModule& gm, const Node* n, const std::vector<char>& probed) {
  PlannedQdq none;
  if (n->op() != Opcode::CallFunction || probed[n->id()]) return none;
  const std::string& t = n->target().function().qualname();
  const bool conv = t == "onnx.Conv", gemm = t == "onnx.Gemm";
  if (!conv && !gemm && t != "onnx.MatMul") return none;
  const auto& args = n->args();
  if (args.size() < 2 || args.size() > (t == "onnx.MatMul" ? 2u : 3u)) return none;
  if (gemm) {
    for (const auto& kv : n->kwargs())
      if (kv.first != "alpha" && kv.first != "beta" && kv.first != "transA" && kv.first != "transB")
        return none;
    const Argument* alpha = n->kwargs().find("alpha");
    const Argument* beta = n->kwargs().find("beta");
    if ((alpha && alpha->to_double() != 1.0) || (beta && beta->to_double() != 1.0) ||
        int_kwarg(n, "transA", 0) != 0)
      return none;
  }
  // y = QuantizeLinear(n [-> Relu]) with constant per-tensor parameters.
  const Node* last = n;
  const Node* u = only_user(n);
  uint32_t relu = UINT32_MAX;
  if (u && u->op() == Opcode::CallFunction && u->target().function().qualname() == "onnx.Relu" &&
      u->args().size() == 1 && !probed[u->id()]) {
    relu = static_cast<uint32_t>(u->id());
    last = u;
    u = only_user(u);
  }
  if (!u || u->op() != Opcode::CallFunction ||
      u->target().function().qualname() != "onnx.QuantizeLinear" || u->args().size() != 3 ||
      !u->args()[0].is_node() || u->args()[0].to_node() != last)
    return none;
  const Node* q = u;
  if (!constant_param(gm, q->args()[1], true, 1) || !constant_param(gm, q->args()[2], false, 1))
    return none;
  // x and w through DequantizeLinear with constant parameters; per-axis only along the
  // op's output channels.
  const Node* dx = call_to(args[0], "onnx.DequantizeLinear");
  const Node* dw = call_to(args[1], "onnx.DequantizeLinear");
  if (!dx || !dw || dx->args().size() != 3 || dw->args().size() != 3) return none;
  if (!constant_param(gm, dx->args()[1], true, 1) || !constant_param(gm, dx->args()[2], false, 1))
    return none;
  const Tensor* ws = constant_param(gm, dw->args()[1], true, 0);
  const Tensor* wz = constant_param(gm, dw->args()[2], false, 0);
  if (!ws || !wz || ws->numel() != wz->numel()) return none;
  if (ws->numel() > 1) {
    const Tensor* w = constant_tensor(gm, dw->args()[0]);
    if (!w || w->shape.size() != (conv ? w->shape.size() : 2u) || w->shape.size() < 2) return none;
    const int64_t rank = static_cast<int64_t>(w->shape.size());
    int64_t axis = int_kwarg(dw, "axis", 1);
    if (axis < 0) axis += rank;
    const int64_t want = conv ? 0 : gemm && int_kwarg(n, "transB", 0) ? 0 : 1;
    if (axis != want || ws->numel() != w->shape[want]) return none;
  }
  // The bias: a constant 1-D tensor or a DequantizeLinear of one.
  if (args.size() == 3 && !args[2].is_none()) {
    const Node* db = call_to(args[2], "onnx.DequantizeLinear");
    const Tensor* b = constant_tensor(gm, db ? db->args()[0] : args[2]);
    if (!b || b->shape.size() != 1 || !args[2].is_node()) return none;
  }
  // A bias DequantizeLinear(int32 b, x_scale * w_scale, 0) is read as b, added to the
  // accumulators (as onnxruntime does: no float rounding of the bias).
  const Node* bias_dq = args.size() == 3 ? call_to(args[2], "onnx.DequantizeLinear") : nullptr;
  if (bias_dq) {
    const Tensor* b = constant_tensor(gm, bias_dq->args()[0]);
    const Tensor* bs =
        bias_dq->args().size() > 1 ? constant_param(gm, bias_dq->args()[1], true, 0) : nullptr;
    const Tensor* bz =
        bias_dq->args().size() > 2 ? constant_tensor(gm, bias_dq->args()[2]) : nullptr;
    bool exact = b && b->dtype == Dtype::Int32 && bs &&
                 (bs->numel() == 1 || bs->numel() == b->numel()) &&
                 (bias_dq->args().size() < 3 || bias_dq->args()[2].is_none() ||
                  (bz && bz->dtype == Dtype::Int32 && bz->numel() == bs->numel()));
    const float xs =
        reinterpret_cast<const float*>(constant_tensor(gm, dx->args()[1])->data->data())[0];
    const auto* w_scale = reinterpret_cast<const float*>(ws->data->data());
    for (int64_t i = 0; exact && i < bs->numel(); ++i)
      exact = reinterpret_cast<const float*>(bs->data->data())[i] ==
                  xs * w_scale[ws->numel() == 1 ? 0 : i] &&
              (!bz || reinterpret_cast<const int32_t*>(bz->data->data())[i] == 0);
    if (!exact) bias_dq = nullptr;
  }
  PlannedQdq p;
  p.fn = conv ? qlinear_conv : qlinear_matmul;
  auto add = [&](const Argument& a) {
    const Tensor* c = a.is_none() ? nullptr : constant_tensor(gm, a);
    p.args.push_back(a.is_node() ? static_cast<int64_t>(a.to_node()->id()) : -1);
    p.constants.push_back(c);
  };
  for (const Node* d : {dx, dw})
    for (const Argument& a : d->args()) add(a);
  add(q->args()[1]);
  add(q->args()[2]);
  if (args.size() == 3) add(bias_dq ? bias_dq->args()[0] : args[2]);
  p.result = static_cast<uint32_t>(q->id());
  p.relu = relu;
  for (const Node* d : {dx, dw, bias_dq})
    if (d && d->users().size() == 1 && !probed[d->id()])
      p.absorbed.push_back(static_cast<uint32_t>(d->id()));
  return p;
}

}  // namespace fx::exec
