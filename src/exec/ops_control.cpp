// Control flow and constants: If (runs the chosen body, a sub-GraphModule, on the values it
// captures), Loop, Scan and SequenceMap (run their body once per step, iterating), and Constant in
// its scalar/list forms (tensor-valued Constant nodes import as get_attr of a buffer and never
// reach the executor).
#include <algorithm>
#include <cstring>
#include <limits>

#include "exec/ops.h"
#include "fx/limits.h"
#include "fx/onnx.h"

namespace fx::exec {
namespace {

// A body attribute (a get_attr of a sub-GraphModule) and how to call it.
struct Body {
  std::shared_ptr<const GraphModule> gm;
  std::string path;
  size_t num_formal = 0;  // placeholders without meta "onnx_outer_scope", which come first
};

Body body_of(const OpCall& c, const char* attr) {
  const Argument* branch = c.attrs.find(attr);
  if (!branch || !branch->is_node() || branch->to_node()->op() != Opcode::GetAttr || !c.module)
    c.fail(std::string("'") + attr + "' must be a get_attr of a sub-GraphModule");
  Body b;
  b.path = branch->to_node()->target().str();
  b.gm = std::dynamic_pointer_cast<const GraphModule>(c.module->get_submodule(b.path));
  if (!b.gm) c.fail("'" + b.path + "' is not a GraphModule");
  for (const Node* p : b.gm->graph().nodes())
    if (p->op() == Opcode::Placeholder && !p->meta().find(fx::onnx::meta::kOuterScope))
      ++b.num_formal;
  return b;
}

// Runs `body` on its formal inputs `formal` and the values it captures: a body placeholder
// with meta "onnx_outer_scope" takes the node's trailing arg of that name (the node lists them
// in meta "onnx_captures", after its meta "onnx_num_inputs" ONNX inputs).
std::vector<Value> run_body(const OpCall& c, const Body& body, const std::vector<Value>& formal) {
  if (formal.size() != body.num_formal)
    c.fail("body '" + body.path + "' takes " + std::to_string(body.num_formal) +
           " inputs, the op gives it " + std::to_string(formal.size()));
  size_t first = c.inputs.size();
  if (const Argument* k = c.node.meta().find(fx::onnx::meta::kNumInputs);
      k && k->kind() == Argument::Kind::Int)
    first = static_cast<size_t>(k->to_int());
  const Argument* names = c.node.meta().find(fx::onnx::meta::kCaptures);
  auto captured = [&](const std::string& name) -> const Value& {
    if (names && names->is_sequence())
      for (size_t k = 0; k < names->elements().size(); ++k)
        if (names->elements()[k].kind() == Argument::Kind::String &&
            names->elements()[k].to_string() == name && first + k < c.inputs.size() &&
            c.inputs[first + k])
          return *c.inputs[first + k];
    c.fail("body '" + body.path + "' uses '" + name + "', which the node does not pass");
  };
  std::vector<Value> args;
  size_t next = 0;
  for (const Node* p : body.gm->graph().nodes()) {
    if (p->op() != Opcode::Placeholder) continue;
    const Argument* outer = p->meta().find(fx::onnx::meta::kOuterScope);
    if (outer && outer->kind() == Argument::Kind::String)
      args.push_back(captured(outer->to_string()));
    else
      args.push_back(formal[next++]);
  }
  return run(*body.gm, args);
}

bool truth(const OpCall& c, const Value& v, const char* what) {
  if (!v.is_tensor() || v.numel() != 1)
    c.fail(std::string(what) + " must have one element, it is " + v.describe());
  return v.to_f32()[0] != 0.0f;
}

Value bool_scalar(bool b) {
  Value v = new_value(Dtype::Bool, {});
  v.mutable_data<uint8_t>()[0] = b ? 1 : 0;
  return v;
}

void if_op(OpCall& c) {
  const bool take_then = truth(c, c.input(0), "the condition");
  c.outputs = run_body(c, body_of(c, take_then ? "then_branch" : "else_branch"), {});
}

// Bytes a list of scan-output values holds, checked against what memory can hold: a trip count
// from data must fail as an error, not as an allocation that cannot succeed.
void add_scan_bytes(const OpCall& c, uint64_t& total, const Value& v) {
  total += v.nbytes();
  if (total > std::numeric_limits<size_t>::max() / 4)
    c.fail("the scan outputs grow past " + std::to_string(total) +
           " bytes (a trip count too large for memory)");
}

// Loop (opset 1..19): M and cond may be omitted; the body takes (iteration_num, cond, carried...)
// and returns (cond, carried..., scan outputs...); the scan outputs of all iterations are stacked
// on a new first axis. Iterates; never recurses.
void loop_op(OpCall& c) {
  const Body body = body_of(c, "body");
  size_t num_inputs = c.inputs.size();
  if (const Argument* k = c.node.meta().find(fx::onnx::meta::kNumInputs);
      k && k->kind() == Argument::Kind::Int)
    num_inputs = static_cast<size_t>(k->to_int());
  if (num_inputs < 2) c.fail("Loop takes M, cond and the loop-carried values");
  const size_t n_carried = num_inputs - 2;
  if (body.num_formal != n_carried + 2)
    c.fail("the body takes " + std::to_string(body.num_formal) + " inputs; with " +
           std::to_string(n_carried) + " loop-carried values it must take " +
           std::to_string(n_carried + 2));
  int64_t max_trips = -1;  // none
  if (c.has_input(0)) {
    const Value& m = c.input(0);
    if (!m.is_tensor() || m.numel() != 1) c.fail("M must have one element, it is " + m.describe());
    max_trips = m.to_i64()[0];
  }
  const bool has_cond = c.has_input(1);
  bool cond = has_cond ? truth(c, c.input(1), "cond") : true;
  std::vector<Value> state(2 + n_carried);
  for (size_t i = 0; i < n_carried; ++i) {
    if (!c.has_input(2 + i)) c.fail("loop-carried input " + std::to_string(i) + " is missing");
    state[2 + i] = c.input(2 + i);
  }
  std::vector<std::vector<Value>> scans;
  size_t n_scan = 0;
  uint64_t scan_bytes = 0;
  const int64_t max_iterations = fx::limits().max_loop_iterations;
  for (int64_t i = 0; (max_trips < 0 || i < max_trips) && cond; ++i) {
    if (i == max_iterations)
      throw Error(ErrorKind::Resource,
                  "node '" + c.node.name() + "' (" + c.node.target().pretty() +
                      "): the loop would run past " + std::to_string(max_iterations) +
                      " iterations (M = " + (max_trips < 0 ? "none" : std::to_string(max_trips)) +
                      ", cond still true), over the limit of fx::Limits::max_loop_iterations "
                      "(fx::set_limits / init({limits: {maxLoopIterations}}) / "
                      "--max-loop-iterations)",
                  c.node.name());
    state[0] = Value::from_i64({}, {i});
    state[1] = bool_scalar(cond);
    std::vector<Value> out = run_body(c, body, state);
    if (out.size() < 1 + n_carried)
      c.fail("the body returns " + std::to_string(out.size()) + " values, fewer than 1 + " +
             std::to_string(n_carried));
    if (i == 0) {
      n_scan = out.size() - 1 - n_carried;
      scans.resize(n_scan);
    } else if (out.size() != 1 + n_carried + n_scan) {
      c.fail("the body returned " + std::to_string(out.size()) + " values, before " +
             std::to_string(1 + n_carried + n_scan));
    }
    if (has_cond) cond = truth(c, out[0], "the body's condition");
    for (size_t k = 0; k < n_carried; ++k) state[2 + k] = std::move(out[1 + k]);
    for (size_t k = 0; k < n_scan; ++k) {
      Value& v = out[1 + n_carried + k];
      if (!v.is_tensor()) c.fail("scan output " + std::to_string(k) + " is " + v.describe());
      add_scan_bytes(c, scan_bytes, v);
      scans[k].push_back(std::move(v));
    }
    // Without a condition, the first step tells how much the scan outputs of all M steps will
    // hold: fail now if that cannot fit, rather than when memory runs out. (With one, M is only
    // a bound: exporters write INT64_MAX for a while loop.)
    if (i == 0 && !has_cond && max_trips > 0 && scan_bytes > 0 &&
        static_cast<uint64_t>(max_trips) > std::numeric_limits<size_t>::max() / 4 / scan_bytes)
      c.fail("M = " + std::to_string(max_trips) + " steps of " + std::to_string(scan_bytes) +
             " bytes of scan outputs each cannot fit in memory");
  }
  for (size_t k = 0; k < n_carried; ++k) c.outputs.push_back(std::move(state[2 + k]));
  // Scan outputs of a loop that never ran: as many as the node declares, empty.
  const size_t declared = c.num_outputs();
  if (scans.empty() && declared > n_carried) scans.resize(declared - n_carried);
  for (auto& list : scans)
    c.outputs.push_back(list.empty() ? new_value(Dtype::Float32, {0}) : stack_values(c, list, 0));
}

// One Scan over `states` and `inputs` (opset 9+ form, no batch axis).
std::vector<Value> scan_once(const OpCall& c, const Body& body, std::vector<Value> states,
                             const std::vector<const Value*>& inputs,
                             const std::vector<int64_t>& in_axes,
                             const std::vector<int64_t>& in_dirs,
                             const std::vector<int64_t>& out_axes,
                             const std::vector<int64_t>& out_dirs) {
  const size_t n_state = states.size(), m = inputs.size();
  if (m == 0) c.fail("Scan needs at least one scan input");
  int64_t length = -1;
  std::vector<int64_t> axes(m);
  for (size_t j = 0; j < m; ++j) {
    const Value& x = *inputs[j];
    const auto rank = static_cast<int64_t>(x.shape().size());
    axes[j] = normalize_axis(c, j < in_axes.size() ? in_axes[j] : 0, rank, "scan_input_axes");
    const int64_t len = x.shape()[axes[j]];
    if (length >= 0 && len != length)
      c.fail("scan inputs have " + std::to_string(length) + " and " + std::to_string(len) +
             " steps");
    length = len;
  }
  std::vector<Value> formal(n_state + m);
  std::vector<std::vector<Value>> scans;
  uint64_t scan_bytes = 0;
  for (int64_t t = 0; t < length; ++t) {
    for (size_t k = 0; k < n_state; ++k) formal[k] = std::move(states[k]);
    for (size_t j = 0; j < m; ++j) {
      const int64_t at = j < in_dirs.size() && in_dirs[j] == 1 ? length - 1 - t : t;
      formal[n_state + j] = take_index(c, *inputs[j], axes[j], at);
    }
    std::vector<Value> out = run_body(c, body, formal);
    if (out.size() < n_state) c.fail("the body returns fewer values than the state");
    if (t == 0) scans.resize(out.size() - n_state);
    if (out.size() != n_state + scans.size()) c.fail("the body's output count changed");
    for (size_t k = 0; k < n_state; ++k) states[k] = std::move(out[k]);
    for (size_t k = 0; k < scans.size(); ++k) {
      add_scan_bytes(c, scan_bytes, out[n_state + k]);
      scans[k].push_back(std::move(out[n_state + k]));
    }
  }
  const size_t declared = c.num_outputs();
  if (length == 0 && declared > n_state) scans.resize(declared - n_state);
  std::vector<Value> result = std::move(states);
  for (size_t k = 0; k < scans.size(); ++k) {
    std::vector<Value>& list = scans[k];
    if (list.empty()) {
      result.push_back(new_value(Dtype::Float32, {0}));
      continue;
    }
    if (k < out_dirs.size() && out_dirs[k] == 1) std::reverse(list.begin(), list.end());
    const auto rank = static_cast<int64_t>(list[0].shape().size()) + 1;
    result.push_back(stack_values(
        c, list,
        normalize_axis(c, k < out_axes.size() ? out_axes[k] : 0, rank, "scan_output_axes")));
  }
  return result;
}

// Scan: opset 9+ (state..., scan inputs...) with per-input axes and directions; opset 8
// (sequence_lens, state..., scan inputs...) with a batch axis 0 and the scan axis 1.
void scan_op(OpCall& c) {
  const Body body = body_of(c, "body");
  size_t num_inputs = c.inputs.size();
  if (const Argument* k = c.node.meta().find(fx::onnx::meta::kNumInputs);
      k && k->kind() == Argument::Kind::Int)
    num_inputs = static_cast<size_t>(k->to_int());
  const int64_t m = c.attr_int("num_scan_inputs", -1);
  const bool v8 = c.opset() < 9;
  const size_t first = v8 ? 1 : 0;
  if (m <= 0 || static_cast<size_t>(m) + first > num_inputs)
    c.fail("num_scan_inputs must be between 1 and the number of inputs");
  const size_t n_state = num_inputs - first - static_cast<size_t>(m);
  std::vector<Value> states;
  std::vector<const Value*> inputs;
  for (size_t i = first; i < num_inputs; ++i) {
    const Value& v = c.input(i);
    if (!v.is_tensor()) c.fail("input " + std::to_string(i) + " is " + v.describe());
    if (i < first + n_state)
      states.push_back(v);
    else
      inputs.push_back(&v);
  }
  if (!v8) {
    c.outputs = scan_once(c, body, std::move(states), inputs, c.attr_ints("scan_input_axes"),
                          c.attr_ints("scan_input_directions"), c.attr_ints("scan_output_axes"),
                          c.attr_ints("scan_output_directions"));
    return;
  }
  // Opset 8: every input has a batch axis 0; each batch entry scans on its own (axis 1, now 0).
  if (c.has_input(0)) c.unsupported("Scan-8 with sequence_lens");
  const std::vector<int64_t> dirs = c.attr_ints("directions");
  int64_t batch = -1;
  for (size_t i = first; i < num_inputs; ++i) {
    const Value& v = c.input(i);
    if (v.shape().empty()) c.fail("Scan-8 inputs need a batch axis");
    if (batch >= 0 && v.shape()[0] != batch) c.fail("inputs differ in batch size");
    batch = v.shape()[0];
  }
  std::vector<std::vector<Value>> per_batch;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Value> st, xs;
    for (const Value& s : states) st.push_back(take_index(c, s, 0, b));
    std::vector<const Value*> ptrs;
    for (const Value* x : inputs) xs.push_back(take_index(c, *x, 0, b));
    for (const Value& x : xs) ptrs.push_back(&x);
    per_batch.push_back(scan_once(c, body, std::move(st), ptrs, {}, dirs, {}, {}));
  }
  if (per_batch.empty()) c.unsupported("Scan-8 with a batch of 0");
  for (size_t k = 0; k < per_batch[0].size(); ++k) {
    std::vector<Value> list;
    for (auto& r : per_batch) list.push_back(std::move(r[k]));
    c.outputs.push_back(stack_values(c, list, 0));
  }
}

// SequenceMap: the body runs once per element of the first input (a sequence); further inputs
// are sequences of the same length (element i each time) or tensors (the same each time). Each
// body output becomes a sequence.
void sequence_map(OpCall& c) {
  const Body body = body_of(c, "body");
  size_t num_inputs = c.inputs.size();
  if (const Argument* k = c.node.meta().find(fx::onnx::meta::kNumInputs);
      k && k->kind() == Argument::Kind::Int)
    num_inputs = static_cast<size_t>(k->to_int());
  const Value& first = c.input(0);
  if (first.kind() != ValueKind::Sequence)
    c.fail("input 0 must be a sequence, it is " + first.describe());
  const size_t n = first.elements().size();
  for (size_t j = 1; j < num_inputs; ++j) {
    const Value& v = c.input(j);
    if (v.kind() == ValueKind::Sequence && v.elements().size() != n)
      c.fail("input " + std::to_string(j) + " has " + std::to_string(v.elements().size()) +
             " elements, input 0 has " + std::to_string(n));
    if (v.kind() == ValueKind::Optional) c.fail("input " + std::to_string(j) + " is an optional");
  }
  std::vector<std::vector<Value>> outs(c.num_outputs());
  std::vector<Value> formal(num_inputs);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < num_inputs; ++j) {
      const Value& v = c.input(j);
      formal[j] = v.kind() == ValueKind::Sequence ? v.elements()[i] : v;
    }
    std::vector<Value> out = run_body(c, body, formal);
    if (out.size() != outs.size())
      c.fail("the body returns " + std::to_string(out.size()) + " values, the node has " +
             std::to_string(outs.size()) + " outputs");
    for (size_t k = 0; k < out.size(); ++k) {
      if (!out[k].is_tensor()) c.fail("body output " + std::to_string(k) + " is not a tensor");
      outs[k].push_back(std::move(out[k]));
    }
  }
  // An empty map: the element types the body declares for its outputs.
  const Argument* types = nullptr;
  for (const Node* q : body.gm->graph().nodes())
    if (q->op() == Opcode::Output) types = q->meta().find(fx::onnx::meta::kOutputTypes);
  for (size_t k = 0; k < outs.size(); ++k) {
    Dtype d = outs[k].empty() ? Dtype::Float32 : outs[k][0].dtype();
    if (outs[k].empty() && types && types->is_sequence() && k < types->elements().size())
      if (const Argument& t = types->elements()[k]; t.kind() == Argument::Kind::Dict)
        for (const auto& kv : t.dict_items())
          if (kv.first.kind() == Argument::Kind::String && kv.first.to_string() == "dtype" &&
              meta_dtype(kv.second))
            d = *meta_dtype(kv.second);
    c.outputs.push_back(Value::sequence(d, std::move(outs[k])));
  }
}

// Constant with value_float(s)/value_int(s) (value= tensors are buffers after import).
void constant(OpCall& c) {
  if (const Argument* f = c.attrs.find("value_float")) {
    c.outputs.push_back(Value::scalar_f32(static_cast<float>(f->to_double())));
  } else if (const Argument* i = c.attrs.find("value_int")) {
    c.outputs.push_back(Value::from_i64({}, {i->to_int()}));
  } else if (const Argument* fs = c.attrs.find("value_floats"); fs && fs->is_sequence()) {
    std::vector<float> v;
    for (const Argument& e : fs->elements()) v.push_back(static_cast<float>(e.to_double()));
    c.outputs.push_back(Value::from_f32({static_cast<int64_t>(v.size())}, v));
  } else if (const Argument* is = c.attrs.find("value_ints"); is && is->is_sequence()) {
    std::vector<int64_t> v;
    for (const Argument& e : is->elements()) v.push_back(e.to_int());
    c.outputs.push_back(Value::from_i64({static_cast<int64_t>(v.size())}, v));
  } else if (const Argument* t = c.attrs.find("value"); t && t->is_node() && c.module) {
    const Tensor* tensor = c.module->get_tensor(t->to_node()->target().str());
    if (!tensor) c.fail("'value' does not name a tensor");
    c.outputs.push_back(Value::from_tensor(*tensor, "Constant value"));
  } else {
    c.unsupported(
        "a Constant without value_float(s)/value_int(s)/value (strings and sparse tensors)");
  }
}

}  // namespace

void register_control_ops() {
  register_value_op("onnx.If", if_op);
  register_value_op("onnx.Loop", loop_op);
  register_value_op("onnx.Scan", scan_op);
  register_value_op("onnx.SequenceMap", sequence_map);
  register_builtin("onnx.Constant", constant);
}

}  // namespace fx::exec
