// Lowering of ONNX control flow: If, Loop and Scan become a call of a ControlFlowModule whose
// forward is the Python `if` / `while` / `for` over the lowered bodies (its GraphModule children).
// Each body is lowered on its own, on the values the probing run gives it (the captured values,
// and for loops the first iteration's), so its shapes are those of the probe.
#include <cctype>
#include <cstring>

#include "fx/error.h"
#include "fx/onnx.h"
#include "fx/pass_manager.h"
#include "torch_codegen/control_flow.h"
#include "torch_codegen/lower_ops.h"

namespace fx::torch_codegen {
namespace {

// Bodies nest as deep as the model says; each level is one lower() inside this one.
constexpr int kMaxNesting = 16;
thread_local int nesting = 0;

struct NestingGuard {
  explicit NestingGuard(Lowerer& L, const Node& n) {
    if (nesting >= kMaxNesting)
      L.unsupported(n, "control flow nested more than " + std::to_string(kMaxNesting) + " deep");
    ++nesting;
  }
  ~NestingGuard() { --nesting; }
};

size_t first_capture(const Node& n, size_t fallback) {
  const Argument* k = n.meta().find(onnx::meta::kNumInputs);
  return k && k->kind() == Argument::Kind::Int ? static_cast<size_t>(k->to_int()) : fallback;
}

// The index of the node's trailing arg holding the captured outer value `name`.
size_t capture_index(Lowerer& L, const Node& n, const std::string& name) {
  const Argument* names = n.meta().find(onnx::meta::kCaptures);
  if (names && names->is_sequence())
    for (size_t k = 0; k < names->elements().size(); ++k)
      if (names->elements()[k].kind() == Argument::Kind::String &&
          names->elements()[k].to_string() == name)
        return first_capture(n, 0) + k;
  L.unsupported(n, "its body uses '" + name + "', which the node does not pass");
}

std::shared_ptr<const GraphModule> body_of(Lowerer& L, const Node& n, const char* attr) {
  const Argument* b = n.kwargs().find(attr);
  if (!b || !b->is_node() || b->to_node()->op() != Opcode::GetAttr)
    L.unsupported(n, std::string("'") + attr + "' is not a get_attr of a body");
  auto body = std::dynamic_pointer_cast<const GraphModule>(
      L.source().get_submodule(b->to_node()->target().str()));
  if (!body) L.unsupported(n, std::string("'") + attr + "' is not a GraphModule");
  return body;
}

// A body input: a formal one (its position among the body's own inputs) or a captured outer
// value (the index of the node's arg that passes it).
struct BodyInput {
  bool captured = false;
  size_t index = 0;
};

std::vector<BodyInput> body_inputs(Lowerer& L, const Node& n, const GraphModule& body) {
  std::vector<BodyInput> out;
  size_t formal = 0;
  for (const Node* p : body.graph().nodes()) {
    if (p->op() != Opcode::Placeholder) continue;
    const Argument* outer = p->meta().find(onnx::meta::kOuterScope);
    if (outer && outer->kind() == Argument::Kind::String)
      out.push_back({true, capture_index(L, n, outer->to_string())});
    else
      out.push_back({false, formal++});
  }
  return out;
}

// Lowers `body` on `examples` (one per body input): a GraphModule with torch targets.
std::shared_ptr<GraphModule> lower_body(Lowerer& L, const Node& n, const GraphModule& body,
                                        const std::vector<exec::Value>& examples,
                                        const std::string& class_name) {
  std::unique_ptr<GraphModule> copy = copy_graph_module(body);
  size_t i = 0;
  for (Node* p : copy->graph().nodes()) {
    if (p->op() != Opcode::Placeholder) continue;
    const exec::Value& v = examples.at(i++);
    if (!v.defined())
      L.unsupported(n, "body input '" + p->name() + "' has no value in the probing run");
    Argument::Items dims;
    for (int64_t d : v.shape()) dims.emplace_back(static_cast<long long>(d));
    p->meta().set(onnx::meta::kType, Argument::dict({{"dtype", Argument(v.dtype())},
                                                     {"shape", Argument::tuple(std::move(dims))}}));
  }
  LowerOptions o;
  o.example_inputs = examples;
  o.class_name = class_name;
  o.probe_sizes[0] = L.options().probe_sizes[0];
  o.probe_sizes[1] = L.options().probe_sizes[1];
  try {
    return std::shared_ptr<GraphModule>(lower(*copy, o));
  } catch (const Error& e) {
    throw Error(e.kind(),
                "lower to torch: node '" + n.name() + "' (" + n.target().function().qualname() +
                    "), in its body: " + e.what(),
                n.name());
  }
}

// Element `index` of `v` along `axis` (a Scan iteration's slice).
exec::Value select(const exec::Value& v, int64_t axis, int64_t index) {
  std::vector<int64_t> shape = v.shape();
  const size_t esize = dtype_size(v.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t len = shape[axis];
  shape.erase(shape.begin() + axis);
  exec::Value out = exec::Value::zeros(v.dtype(), shape);
  const size_t block = static_cast<size_t>(inner) * esize;
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out.mutable_data<uint8_t>() + o * block,
                v.data<uint8_t>() + (o * len + index) * block, block);
  return out;
}

std::string args_list(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s;
}

// Emits the call of the control-flow module and sets the node's outputs.
void emit_call(Lowerer& L, const Node& n, const std::string& fallback,
               std::shared_ptr<ControlFlowModule> m, const std::vector<Argument>& args,
               size_t num_outputs) {
  const std::string path = L.add_module(n, LVal{}, fallback, std::move(m));
  Node* call = L.module(path, args);
  if (num_outputs == 1) {
    L.set(n, L.tensor(call, n));
    return;
  }
  std::vector<LVal> outs;
  for (size_t k = 0; k < num_outputs; ++k)
    outs.push_back(L.tensor(L.call("operator.getitem", {call, static_cast<long long>(k)}), n));
  L.set(n, std::move(outs));
}

size_t num_outputs(const Node& n) {
  const Argument* outs = n.meta().find(onnx::meta::kOutputs);
  return outs && outs->is_sequence() ? outs->elements().size() : 1;
}

Argument operand(Lowerer& L, const Node& n, size_t i) {
  const LVal v = L.in(n, i);
  return v.kind == LVal::Kind::None ? Argument() : Argument(L.as_tensor(v));
}

std::string class_base(const Node& n) {
  std::string s;
  for (char c : n.name()) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

void lower_if(Lowerer& L, const Node& n) {
  NestingGuard guard(L, n);
  const std::vector<exec::Value> values = L.probe_values(n);
  const size_t first = first_capture(n, 1);
  // forward(self, cond, <the node's captured values>)
  std::vector<std::string> params = {"cond"};
  std::vector<Argument> args = {operand(L, n, 0)};
  for (size_t i = first; i < n.args().size(); ++i) {
    params.push_back("c" + std::to_string(i - first));
    args.push_back(operand(L, n, i));
  }
  std::string forward = "def forward(self, " + args_list(params) + "):\n";
  std::vector<std::pair<const char*, std::shared_ptr<GraphModule>>> branches;
  for (const char* attr : {"then_branch", "else_branch"}) {
    std::shared_ptr<const GraphModule> body = body_of(L, n, attr);
    std::vector<exec::Value> examples;
    std::vector<std::string> call_args;
    for (const BodyInput& in : body_inputs(L, n, *body)) {
      if (!in.captured)
        L.unsupported(n, std::string("its ") + attr + " has inputs; If bodies take none");
      examples.push_back(values.at(in.index));
      call_args.push_back("c" + std::to_string(in.index - first));
    }
    branches.emplace_back(attr,
                          lower_body(L, n, *body, examples, "If_" + class_base(n) + "_" + attr));
    const std::string call = "self." + std::string(attr) + "(" + args_list(call_args) + ")";
    forward += attr == std::string("then_branch")
                   ? "    if bool(cond):\n        return " + call + "\n"
                   : "    return " + call + "\n";
  }
  auto m = std::make_shared<ControlFlowModule>("If", forward);
  for (auto& [attr, gm] : branches) m->add_module(attr, gm);
  emit_call(L, n, "if_", std::move(m), args, num_outputs(n));
}

void lower_loop(Lowerer& L, const Node& n) {
  NestingGuard guard(L, n);
  const std::vector<exec::Value> values = L.probe_values(n);
  const size_t first = first_capture(n, n.args().size());
  const size_t carried = first >= 2 ? first - 2 : 0;
  const size_t outputs = num_outputs(n);
  if (outputs < carried) L.unsupported(n, "fewer outputs than loop-carried values");
  const size_t scans = outputs - carried;
  std::shared_ptr<const GraphModule> body = body_of(L, n, "body");

  std::vector<std::string> params = {"m", "cond"};
  std::vector<Argument> args = {operand(L, n, 0), operand(L, n, 1)};
  for (size_t i = 0; i < carried; ++i) {
    params.push_back("v" + std::to_string(i));
    args.push_back(operand(L, n, 2 + i));
  }
  for (size_t i = first; i < n.args().size(); ++i) {
    params.push_back("c" + std::to_string(i - first));
    args.push_back(operand(L, n, i));
  }
  // The first iteration's body inputs: iteration 0, the condition, the initial values.
  std::vector<exec::Value> examples;
  std::vector<std::string> call_args;
  for (const BodyInput& in : body_inputs(L, n, *body)) {
    if (in.captured) {
      examples.push_back(values.at(in.index));
      call_args.push_back("c" + std::to_string(in.index - first));
    } else if (in.index == 0) {
      examples.push_back(exec::Value::from_i64({}, {0}));
      call_args.push_back("torch.tensor(i, dtype=torch.int64)");
    } else if (in.index == 1) {
      exec::Value keep = exec::Value::zeros(Dtype::Bool, {});
      keep.mutable_data<uint8_t>()[0] = 1;
      examples.push_back(keep);
      call_args.push_back("torch.tensor(keep)");
    } else if (in.index - 2 < carried) {
      examples.push_back(values.at(in.index));       // args 2.. are the initial values, in order
      if (in.index == 2) call_args.push_back("*v");  // one "*v" passes all of them
    } else {
      L.unsupported(n, "its body has more inputs than iteration, condition and carried values");
    }
  }
  std::string f = "def forward(self, " + args_list(params) + "):\n";
  f += "    trip = None if m is None else int(m)\n";
  f += "    keep = True if cond is None else bool(cond)\n";
  std::vector<std::string> vs;
  for (size_t i = 0; i < carried; ++i) vs.push_back("v" + std::to_string(i));
  f += "    v = (" + args_list(vs) + (carried == 1 ? ",)" : ")") + "\n";
  for (size_t k = 0; k < scans; ++k) f += "    scan" + std::to_string(k) + " = []\n";
  f += "    i = 0\n";
  f += "    while keep and (trip is None or i < trip):\n";
  f += "        out = self.body(" + args_list(call_args) + ")\n";
  f += "        out = out if isinstance(out, tuple) else (out,)\n";
  f += "        keep = bool(out[0])\n";
  f += "        v = tuple(out[1:" + std::to_string(1 + carried) + "])\n";
  for (size_t k = 0; k < scans; ++k)
    f += "        scan" + std::to_string(k) + ".append(out[" + std::to_string(1 + carried + k) +
         "])\n";
  f += "        i += 1\n";
  std::vector<std::string> results;
  for (size_t i = 0; i < carried; ++i) results.push_back("v[" + std::to_string(i) + "]");
  for (size_t k = 0; k < scans; ++k)
    results.push_back("torch.stack(scan" + std::to_string(k) + ")");
  f += "    return " + (results.size() == 1 ? results[0] : "(" + args_list(results) + ")") + "\n";

  auto m = std::make_shared<ControlFlowModule>("Loop", f);
  m->add_module("body", lower_body(L, n, *body, examples, "Loop_" + class_base(n) + "_body"));
  emit_call(L, n, "loop", std::move(m), args, outputs);
}

void lower_scan(Lowerer& L, const Node& n) {
  NestingGuard guard(L, n);
  const std::vector<exec::Value> values = L.probe_values(n);
  const size_t first = first_capture(n, n.args().size());
  const int64_t m_inputs = L.attr_int(n, "num_scan_inputs", 0);
  if (m_inputs <= 0 || static_cast<size_t>(m_inputs) > first)
    L.unsupported(n, "num_scan_inputs must be in [1, number of inputs]");
  const size_t states = first - static_cast<size_t>(m_inputs);
  const size_t outputs = num_outputs(n);
  if (outputs < states) L.unsupported(n, "fewer outputs than state variables");
  const size_t scans = outputs - states;
  auto ints = [&](const char* name, size_t count) {
    std::vector<int64_t> v = L.attr_ints(n, name, std::vector<int64_t>(count, 0));
    if (v.size() != count)
      L.unsupported(n, std::string(name) + " must have " + std::to_string(count) + " entries");
    return v;
  };
  const std::vector<int64_t> in_axes = ints("scan_input_axes", m_inputs);
  const std::vector<int64_t> in_dirs = ints("scan_input_directions", m_inputs);
  const std::vector<int64_t> out_axes = ints("scan_output_axes", scans);
  const std::vector<int64_t> out_dirs = ints("scan_output_directions", scans);
  std::shared_ptr<const GraphModule> body = body_of(L, n, "body");

  std::vector<std::string> params;
  std::vector<Argument> args;
  for (size_t i = 0; i < first; ++i) {
    params.push_back(i < states ? "s" + std::to_string(i) : "x" + std::to_string(i - states));
    args.push_back(operand(L, n, i));
  }
  for (size_t i = first; i < n.args().size(); ++i) {
    params.push_back("c" + std::to_string(i - first));
    args.push_back(operand(L, n, i));
  }
  // The first iteration's body inputs, and the body call.
  std::vector<exec::Value> examples;
  std::vector<std::string> call_args;
  for (const BodyInput& in : body_inputs(L, n, *body)) {
    if (in.captured) {
      examples.push_back(values.at(in.index));
      call_args.push_back("c" + std::to_string(in.index - first));
    } else if (in.index < states) {
      examples.push_back(values.at(in.index));
      call_args.push_back("s[" + std::to_string(in.index) + "]");
    } else if (in.index < first) {
      const size_t j = in.index - states;
      const exec::Value& x = values.at(in.index);
      const int64_t rank = static_cast<int64_t>(x.shape().size());
      const int64_t axis = in_axes[j] < 0 ? in_axes[j] + rank : in_axes[j];
      if (axis < 0 || axis >= rank) L.unsupported(n, "a scan_input_axes entry is out of range");
      if (x.shape()[axis] == 0) L.unsupported(n, "the probing run scans zero iterations");
      examples.push_back(select(x, axis, in_dirs[j] ? x.shape()[axis] - 1 : 0));
      const std::string t = in_dirs[j] ? "steps - 1 - t" : "t";
      call_args.push_back("x" + std::to_string(j) + ".select(" + std::to_string(in_axes[j]) + ", " +
                          t + ")");
    } else {
      L.unsupported(n, "its body has more inputs than state and scan values");
    }
  }
  std::string f = "def forward(self, " + args_list(params) + "):\n";
  std::vector<std::string> ss;
  for (size_t i = 0; i < states; ++i) ss.push_back("s" + std::to_string(i));
  f += "    s = (" + args_list(ss) + (states == 1 ? ",)" : ")") + "\n";
  f += "    steps = x0.size(" + std::to_string(in_axes[0]) + ")\n";
  for (size_t k = 0; k < scans; ++k) f += "    scan" + std::to_string(k) + " = []\n";
  f += "    for t in range(steps):\n";
  f += "        out = self.body(" + args_list(call_args) + ")\n";
  f += "        out = out if isinstance(out, tuple) else (out,)\n";
  f += "        s = tuple(out[:" + std::to_string(states) + "])\n";
  for (size_t k = 0; k < scans; ++k)
    f += "        scan" + std::to_string(k) + ".append(out[" + std::to_string(states + k) + "])\n";
  std::vector<std::string> results;
  for (size_t i = 0; i < states; ++i) results.push_back("s[" + std::to_string(i) + "]");
  for (size_t k = 0; k < scans; ++k)
    results.push_back("torch.stack(scan" + std::to_string(k) + (out_dirs[k] ? "[::-1]" : "") +
                      ", " + std::to_string(out_axes[k]) + ")");
  f += "    return " + (results.size() == 1 ? results[0] : "(" + args_list(results) + ")") + "\n";

  auto m = std::make_shared<ControlFlowModule>("Scan", f);
  m->add_module("body", lower_body(L, n, *body, examples, "Scan_" + class_base(n) + "_body"));
  emit_call(L, n, "scan", std::move(m), args, outputs);
}

}  // namespace

void add_control_handlers(std::vector<HandlerEntry>& table) {
  table.insert(table.end(), {
                                {"If", 1, lower_if},
                                {"Loop", 1, lower_loop},
                                // Opset 8's Scan has a batch axis and sequence_lens: not lowered.
                                {"Scan", 9, lower_scan},
                            });
}

}  // namespace fx::torch_codegen
