// The lowering's driver: probing the model for shapes, walking the ONNX graph through the
// handler table, and what handlers share (constants, Python ints, module paths).
#include <algorithm>
#include <cctype>
#include <cstring>

#include "fx/exec.h"
#include "fx/exec/passes.h"
#include "fx/onnx.h"
#include "fx/pass_manager.h"
#include "fx/torch_codegen.h"
#include "torch_codegen/lower_internal.h"
#include "torch_codegen/lower_ops.h"

namespace fx::torch_codegen {

namespace {

// "onnx.Conv" -> "Conv"; other domains ("onnx.com.microsoft.Gelu") keep their domain.
std::string op_type(const Node& n) {
  const std::string& q = n.target().function().qualname();
  return q.rfind("onnx.", 0) == 0 ? q.substr(5) : q;
}

bool is_onnx(const Node& n) {
  return n.op() == Opcode::CallFunction && n.target().function().qualname().rfind("onnx.", 0) == 0;
}

bool is_getitem(const Node& n) {
  return n.op() == Opcode::CallFunction && n.target().function().qualname() == "operator.getitem";
}

int64_t model_opset(const GraphModule& gm) {
  if (const Argument* ops = gm.meta().find(onnx::meta::kOpsetImport);
      ops && ops->kind() == Argument::Kind::Dict)
    for (const auto& kv : ops->dict_items())
      if (kv.first.kind() == Argument::Kind::String && kv.first.to_string().empty() &&
          kv.second.kind() == Argument::Kind::Int)
        return kv.second.to_int();
  return 17;  // a graph built by hand: today's ops
}

// The handler for `op` at `opset`: the newest whose since_version is <= opset.
Handler find_handler(const std::string& op, int64_t opset) {
  Handler best = nullptr;
  int64_t best_since = -1;
  for (const HandlerEntry& e : handler_table())
    if (op == e.op && e.since <= opset && e.since > best_since) {
      best = e.fn;
      best_since = e.since;
    }
  return best;
}

// Joins FX-name atoms into a dotted path, keeping only atoms that are valid module names.
std::string sanitize_atom(const std::string& a) {
  std::string out;
  for (char c : a) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (!out.empty() && std::isdigit(static_cast<unsigned char>(out[0])) && out.size() > 1 &&
      !std::all_of(out.begin(), out.end(), [](char c) { return std::isdigit(c); }))
    out = "_" + out;  // "1x" is no attribute name; "0" (a Sequential index) is fine
  return out;
}

}  // namespace

std::string module_path_from_weight(const std::string& weight_path) {
  const size_t dot = weight_path.rfind('.');
  if (dot == std::string::npos || dot == 0) return {};
  return weight_path.substr(0, dot);
}

std::string module_path_from_onnx_name(const std::string& onnx_name) {
  // torch.onnx names nodes "/layer1/layer1.0/conv1/Conv": scopes, each either the full dotted
  // path so far or one more atom, then the op.
  if (onnx_name.empty() || onnx_name[0] != '/') return {};
  std::vector<std::string> parts;
  size_t start = 1;
  while (start <= onnx_name.size()) {
    size_t slash = onnx_name.find('/', start);
    if (slash == std::string::npos) slash = onnx_name.size();
    parts.push_back(onnx_name.substr(start, slash - start));
    start = slash + 1;
  }
  if (parts.size() < 2) return {};
  parts.pop_back();  // the op ("Conv", "Conv_1")
  // A scope that starts with the previous scope and a dot names the same parent's child
  // ("layer2.0/downsample/downsample.0": layer2.0's downsample.0), else a child of it.
  std::string path, last;
  size_t last_start = 0;
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    if (!last.empty() && p.rfind(last + ".", 0) == 0) {
      path = path.substr(0, last_start) + p;
    } else {
      last_start = path.empty() ? 0 : path.size() + 1;
      path = path.empty() ? p : path + "." + p;
    }
    last = p;
  }
  // Every atom must be a module name torch accepts (no '/', no empty atoms).
  std::string out;
  size_t a = 0;
  while (a <= path.size()) {
    size_t dot = path.find('.', a);
    if (dot == std::string::npos) dot = path.size();
    std::string atom = sanitize_atom(path.substr(a, dot - a));
    if (atom.empty()) return {};
    out += (out.empty() ? "" : ".") + atom;
    a = dot + 1;
  }
  return out;
}

// ---- probing, folding, the walk ----

Lowerer::Lowerer(const GraphModule& src, const LowerOptions& options)
    : src_(src), options_(options), opset_(model_opset(src)) {}

void Lowerer::probe() {
  bool dynamic = false;
  // The probing runs' inputs: zeros, with integer inputs of one (`fill` 1: a divisor or Range
  // step of 0 would stop the run) or every input one (`fill` 2), tried in the order 1, 0, 2.
  // (Shapes that depend on input values, such as Range's, are probed at these values only.)
  auto inputs_at = [&](int64_t size, int fill) {
    std::vector<exec::Value> inputs;
    for (Node* p : src_.graph().nodes()) {
      if (p->op() != Opcode::Placeholder) continue;
      const Argument* t = p->meta().find(onnx::meta::kType);
      if (!t || t->kind() != Argument::Kind::Dict)
        throw Error(ErrorKind::Value,
                    "lower to torch: input '" + p->name() +
                        "' has no ONNX type (meta 'onnx_type'), so its shape is unknown",
                    p->name());
      Dtype dtype = Dtype::Float32;
      std::vector<int64_t> dims;
      for (const auto& kv : t->dict_items()) {
        if (kv.first.kind() != Argument::Kind::String) continue;
        if (kv.first.to_string() == "dtype") {
          const Dtype* d = meta_dtype(kv.second);
          if (!d)
            throw Error(ErrorKind::Value,
                        "lower to torch: input '" + p->name() + "' has no dtype in its ONNX type",
                        p->name());
          dtype = *d;
        }
        if (kv.first.to_string() == "shape" && kv.second.is_sequence())
          for (const Argument& d : kv.second.elements()) {
            if (d.kind() == Argument::Kind::Int && d.to_int() >= 0) {
              dims.push_back(d.to_int());
            } else {
              dims.push_back(size);
              dynamic = true;
            }
          }
      }
      exec::Value v = exec::Value::zeros(dtype, dims);
      const bool integer = dtype == Dtype::Int64 || dtype == Dtype::Int32;
      if (fill == 2 || (fill == 1 && integer)) {
        for (int64_t i = 0; i < v.numel(); ++i) {
          if (dtype == Dtype::Int64) v.mutable_data<int64_t>()[i] = 1;
          if (dtype == Dtype::Int32) v.mutable_data<int32_t>()[i] = 1;
          if (dtype == Dtype::Float32) v.mutable_data<float>()[i] = 1.0f;
          if (dtype == Dtype::Float64) v.mutable_data<double>()[i] = 1.0;
        }
      }
      inputs.push_back(std::move(v));
    }
    return inputs;
  };
  auto shapes_at = [&](int64_t size, bool first) {
    std::unique_ptr<GraphModule> copy = copy_graph_module(src_);
    std::vector<exec::Value> inputs = inputs_at(size, 1);  // also tells whether dims are dynamic
    auto try_run = [&](std::vector<exec::Value> in) {
      copy = copy_graph_module(src_);
      exec::shape_prop(*copy, in);
      if (first) probe_inputs_ = std::move(in);
    };
    try {
      if (!options_.example_inputs.empty() && !dynamic) {
        try {
          try_run(options_.example_inputs);
        } catch (const Error&) {  // not inputs this model takes: the fills
          try_run(inputs);
        }
      } else {
        try_run(inputs);
      }
    } catch (const Error&) {  // e.g. an index of 1 into a dim of 1: zeros, then all ones
      try {
        try_run(inputs_at(size, 0));
      } catch (const Error&) {
        try_run(inputs_at(size, 2));
      }
    }
    for (Node* n : copy->graph().nodes()) {
      const Argument* tm = n->meta().find("tensor_meta");
      if (!tm || tm->kind() != Argument::Kind::Dict) continue;
      Probe& p = probes_[n->name()];
      std::vector<int64_t>& dims = first ? p.a : p.b;
      dims.clear();
      for (const auto& kv : tm->dict_items()) {
        if (kv.first.to_string() == "shape")
          for (const Argument& d : kv.second.elements()) dims.push_back(d.to_int());
        if (kv.first.to_string() == "dtype") p.dtype = kv.second.to_dtype();
      }
    }
  };
  // The model's own error, with what the lowering was doing and how to change it.
  auto probe_at = [&](int64_t size, bool first) {
    try {
      shapes_at(size, first);
    } catch (const Error& e) {
      throw Error(e.kind(),
                  std::string("lower to torch: running the model to learn its shapes failed") +
                      (dynamic ? " (dynamic dims at " + std::to_string(size) +
                                     "; other sizes: LowerOptions::probe_sizes, probeSizes in JS)"
                               : "") +
                      ": " + e.what(),
                  e.node());
    }
  };
  probe_at(options_.probe_sizes[0], true);
  if (dynamic) {
    probe_at(options_.probe_sizes[1], false);
  } else {
    for (auto& kv : probes_) kv.second.b = kv.second.a;
  }
}

std::vector<exec::Value> Lowerer::probe_values(const Node& n) {
  exec::RunOptions opts;
  for (const Argument& a : n.args())
    if (a.is_node() && a.to_node()->op() != Opcode::GetAttr)
      opts.probe.push_back(a.to_node()->name());
  const exec::RunResult r = exec::run(src_, probe_inputs_, opts);
  std::unordered_map<std::string, exec::Value> by_name(r.probes.begin(), r.probes.end());
  std::vector<exec::Value> out;
  for (const Argument& a : n.args()) {
    if (!a.is_node()) {
      out.emplace_back();
    } else if (a.to_node()->op() == Opcode::GetAttr) {
      const Tensor* t = src_.get_tensor(a.to_node()->target().str());
      out.push_back(t ? exec::Value::from_tensor(*t, a.to_node()->name()) : exec::Value());
    } else {
      out.push_back(by_name.at(a.to_node()->name()));
    }
  }
  return out;
}

void Lowerer::fold(const Node& n) {
  std::vector<LVal>& outs = env_[&n];
  if (outs.size() != 1 || outs[0].kind != LVal::Kind::Tensor || outs[0].constant) return;
  if (n.is_impure()) return;  // random ops: new values on every run
  auto g = std::make_unique<Graph>();
  Module root;
  std::vector<Argument> args;
  bool any = false;
  for (size_t i = 0; i < n.args().size(); ++i) {
    const LVal v = in(n, i);
    if (v.kind == LVal::Kind::None) {
      args.emplace_back();
      continue;
    }
    Tensor t;
    if (v.kind == LVal::Kind::Tensor) {
      if (!v.constant || !v.constant->has_data()) return;
      t = *v.constant;
    } else {
      std::vector<int64_t> values;
      for (const SymInt& s : v.ints) {
        if (!s.value) return;
        values.push_back(*s.value);
      }
      t.dtype = Dtype::Int64;
      if (v.kind == LVal::Kind::Ints) t.shape = {static_cast<int64_t>(values.size())};
      auto bytes = std::make_shared<std::vector<uint8_t>>(values.size() * sizeof(int64_t));
      if (!values.empty()) std::memcpy(bytes->data(), values.data(), bytes->size());
      t.data = std::move(bytes);
    }
    const std::string name = "c" + std::to_string(i);
    root.register_buffer(name, std::move(t));
    args.push_back(g->get_attr(name));
    any = true;
  }
  if (!any) return;
  g->output(g->call_function(n.target().function(), std::move(args), n.kwargs()));
  std::vector<exec::Value> values;
  try {
    GraphModule one(&root, std::move(g));
    if (const Argument* ops = src_.meta().find(onnx::meta::kOpsetImport))
      one.meta().set(onnx::meta::kOpsetImport, *ops);
    values = exec::run(one, {});
  } catch (const Error&) {
    return;  // not computable here: keep the emitted torch code
  }
  if (values.size() != 1) return;
  folded_.push_back(std::make_unique<Tensor>(values[0].to_tensor()));
  LVal v;
  v.kind = LVal::Kind::Tensor;
  v.constant = folded_.back().get();
  v.constant_path = "_folded_" + n.name();
  v.constant_is_buffer = true;
  v.shape_of = &n;
  outs[0] = v;
}

std::unique_ptr<GraphModule> Lowerer::run() {
  for (const LoweringGap& gap : lowering_coverage(src_))
    throw Error(ErrorKind::Unsupported,
                "lower to torch: node '" + gap.node + "' (onnx." + gap.op + "): " + gap.reason,
                gap.node);
  probe();
  graph_ = std::make_unique<Graph>();
  root_ = std::make_shared<Module>("Module");
  Argument result;
  for (Node* n : src_.graph().nodes()) {
    switch (n->op()) {
      case Opcode::Placeholder: {
        Node* p = graph_->placeholder(n->target().str());
        set(*n, tensor(p, *n));
        break;
      }
      case Opcode::GetAttr: {
        const Tensor* t = src_.get_tensor(n->target().str());
        if (!t) break;  // a control-flow body: its op's handler reads it (lowering_coverage)
        LVal v;
        v.kind = LVal::Kind::Tensor;
        v.constant = t;
        v.constant_path = n->target().str();
        v.constant_is_buffer =
            n->meta().contains(onnx::meta::kConstant) || src_.attr_kind(n->target().str()) == 'b';
        v.shape_of = n;
        set(*n, v);
        break;
      }
      case Opcode::CallFunction: {
        if (is_getitem(*n)) {
          const Argument& src = n->args().at(0);
          const int64_t k = n->args().at(1).to_int();
          auto it = env_.find(src.to_node());
          if (it == env_.end() || k < 0 || k >= static_cast<int64_t>(it->second.size()))
            unsupported(*n, "output " + std::to_string(k) + " of '" + src.to_node()->name() +
                                "' was not converted");
          LVal v = it->second[k];
          if (v.kind == LVal::Kind::Tensor) v.shape_of = n;
          set(*n, v);
          break;
        }
        if (env_.count(n)) break;  // converted with the node before it (MatMul + bias Add)
        const std::string op = op_type(*n);
        Handler h = find_handler(op, opset_);
        if (!h) unsupported(*n, "no handler for " + op + " at opset " + std::to_string(opset_));
        h(*this, *n);
        if (!env_.count(n)) unsupported(*n, "internal error: the handler produced no value");
        // A node read directly (not through operator.getitem) has one output, whatever optional
        // outputs its op may produce (Dropout's mask...).
        bool getitem_users = false;
        for (const Node* u : n->users()) getitem_users = getitem_users || is_getitem(*u);
        if (!getitem_users && env_[n].size() > 1) env_[n].resize(1);
        fold(*n);
        break;
      }
      case Opcode::Output: {
        const Argument& a = n->args().empty() ? Argument() : n->args()[0];
        auto out = [&](const Argument& e) -> Argument {
          if (!e.is_node()) return e;
          auto it = env_.find(e.to_node());
          if (it == env_.end() || it->second.size() != 1)
            unsupported(*n, "output '" + e.to_node()->name() + "' was not converted");
          return as_tensor(it->second[0]);
        };
        if (a.is_sequence()) {
          Argument::Items items;
          for (const Argument& e : a.elements()) items.push_back(out(e));
          result = a.kind() == Argument::Kind::List ? Argument::list(std::move(items))
                                                    : Argument::tuple(std::move(items));
        } else {
          result = out(a);
        }
        break;
      }
      case Opcode::CallModule:
      case Opcode::CallMethod:
        unsupported(*n, "the module is not an imported ONNX graph (" +
                            std::string(opcode_name(n->op())) + " node)");
      case Opcode::Root:
        break;
    }
  }
  graph_->output(result);
  graph_->eliminate_dead_code();
  // Names as torch.fx's tracer gives them when it traces the generated module (from each
  // target, in order): the nodes the dead-code pass removed took names too.
  auto fresh = std::make_unique<Graph>();
  std::unordered_map<const Node*, Node*> map;
  for (Node* n : graph_->nodes()) {
    auto remap = [&](Node* x) -> Argument { return map.at(x); };
    std::vector<Argument> args;
    for (const Argument& a : n->args()) args.push_back(a.map_nodes(remap));
    Kwargs kwargs;
    for (const auto& kv : n->kwargs()) kwargs.set(kv.first, kv.second.map_nodes(remap));
    if (n->op() == Opcode::Output) {
      fresh->output(args.at(0));
      continue;
    }
    std::optional<std::string> name;
    if (n->op() == Opcode::Placeholder) name = n->name();
    map[n] = fresh->create_node(n->op(), n->target(), std::move(args), std::move(kwargs), name);
  }
  graph_ = std::move(fresh);
  std::string cls = options_.class_name.empty() ? src_.type_name() : options_.class_name;
  auto gm = std::make_unique<GraphModule>(root_.get(), std::move(graph_), cls);
  gm->graph().lint();
  return gm;
}

const std::vector<HandlerEntry>& handler_table() {
  static const std::vector<HandlerEntry> table = [] {
    std::vector<HandlerEntry> t;
    add_elementwise_handlers(t);
    add_shape_handlers(t);
    add_nn_handlers(t);
    add_other_handlers(t);
    add_index_handlers(t);
    add_layout_handlers(t);
    add_control_handlers(t);
    add_layers_handlers(t);
    add_quant_handlers(t);
    add_spatial_handlers(t);
    add_math_handlers(t);
    return t;
  }();
  return table;
}

// ---- public ----

std::vector<LoweringGap> lowering_coverage(const GraphModule& gm) {
  std::vector<LoweringGap> gaps;
  // The module and, through a worklist (bodies nest as deep as the model says), every If/Loop/
  // Scan body in it; a body's nodes are named "<op node>.<body>.<node>".
  std::vector<std::pair<const GraphModule*, std::string>> bodies{{&gm, ""}};
  for (size_t b = 0; b < bodies.size(); ++b) {
    const GraphModule& m = *bodies[b].first;
    const std::string prefix = bodies[b].second.empty() ? "" : bodies[b].second + ".";
    const int64_t opset = model_opset(m);
    for (Node* n : m.graph().nodes()) {
      LoweringGap gap = {prefix + n->name(), "", opset, ""};
      if (n->op() == Opcode::CallModule || n->op() == Opcode::CallMethod) {
        gap.op = n->target().str();
        gap.reason = std::string(opcode_name(n->op())) + " nodes are not ONNX ops";
        gaps.push_back(gap);
        continue;
      }
      if (n->op() == Opcode::GetAttr && !m.get_tensor(n->target().str())) {
        // A control-flow body: converted by the op that runs it, so its nodes must convert too.
        const Node* user = n->users().empty() ? nullptr : *n->users().begin();
        const std::string op = user && is_onnx(*user) ? op_type(*user) : std::string();
        auto body =
            std::dynamic_pointer_cast<const GraphModule>(m.get_submodule(n->target().str()));
        if (!body || (op != "If" && op != "Loop" && op != "Scan")) {
          gap.op = op.empty() ? n->target().str() : op;
          gap.reason = "its body '" + n->target().str() + "' is run by no If, Loop or Scan";
          gaps.push_back(gap);
          continue;
        }
        bodies.emplace_back(body.get(), prefix + user->name() + "." + n->target().str());
        continue;
      }
      if (n->op() != Opcode::CallFunction || is_getitem(*n)) continue;
      if (!is_onnx(*n)) {
        gap.op = n->target().function().qualname();
        gap.reason = "not an ONNX op (" + gap.op + ")";
        gaps.push_back(gap);
        continue;
      }
      const std::string op = op_type(*n);
      if (!find_handler(op, opset)) {
        gap.op = op;
        gap.reason = "no handler for " + op + " at opset " + std::to_string(opset);
        gaps.push_back(gap);
      }
    }
  }
  return gaps;
}

std::vector<std::pair<std::string, int64_t>> lowering_handlers() {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const HandlerEntry& e : handler_table()) out.emplace_back(e.op, e.since);
  std::sort(out.begin(), out.end());
  return out;
}

std::unique_ptr<GraphModule> lower(const GraphModule& gm, const LowerOptions& options) {
  return Lowerer(gm, options).run();
}

std::vector<PackageFile> torch_package(const GraphModule& gm, const std::string& module_name) {
  bool onnx_targets = false;
  for (const Node* n : gm.graph().nodes()) onnx_targets = onnx_targets || is_onnx(*n);
  if (!onnx_targets) return to_folder(gm, module_name);
  const std::vector<LoweringGap> gaps = lowering_coverage(gm);
  if (!gaps.empty()) {
    std::string what = std::to_string(gaps.size()) + " node(s) cannot be lowered to PyTorch:";
    for (const LoweringGap& g : gaps)
      what += "\n  node '" + g.node + "' (" + g.op + "): " + g.reason;
    throw Error(ErrorKind::Unsupported, what, gaps.front().node);
  }
  return to_folder(*lower(gm), module_name);
}

}  // namespace fx::torch_codegen
