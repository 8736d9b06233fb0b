// Shape inference without data (infer_shapes): every value's dtype and shape from the inputs'
// declared types, with dynamic dims kept as symbols. Constants and what is computed from them
// only (small shape tensors) run on the executor's own ops; size arithmetic on dynamic dims runs
// on SymDim polynomials; every other op maps its inputs' facts to its outputs' through a rule
// (shape_rules.cpp). A node nothing can type is reported, never guessed.
#include "exec/shape_infer.h"

#include <algorithm>
#include <exception>
#include <unordered_map>

#include "exec/ops.h"
#include "exec/plan.h"
#include "fx/error.h"
#include "fx/exec/passes.h"
#include "fx/onnx.h"

namespace fx::exec {

namespace {

// Constants and computed values up to this many elements keep their data (shape tensors,
// scalars, small tables), so that ops reading them (Reshape, Slice, Expand...) know the sizes.
constexpr int64_t kSmall = 1 << 16;

const Argument* dict_get(const Argument* d, const char* key) {
  if (!d || d->kind() != Argument::Kind::Dict) return nullptr;
  for (const auto& kv : d->dict_items())
    if (kv.first.kind() == Argument::Kind::String && kv.first.to_string() == key) return &kv.second;
  return nullptr;
}

SymDim dim_from(const Argument& d) {
  if (d.kind() == Argument::Kind::Int) return d.to_int() >= 0 ? SymDim(d.to_int()) : SymDim();
  if (d.kind() == Argument::Kind::String) return SymDim::symbol(d.to_string());
  return SymDim();
}

Argument dim_to_arg(const SymDim& d) {
  if (auto v = d.value()) return Argument(static_cast<long long>(*v));
  if (d.known()) return Argument(d.str());
  return Argument();
}

bool deterministic(const std::string& op) {
  return op.rfind("Random", 0) != 0 && op != "Bernoulli" && op != "Multinomial" && op != "Dropout";
}

class Inference {
 public:
  Inference(GraphModule& gm, const ShapeInferOptions& options) : gm_(gm), options_(options) {}

  ShapeInferResult run() {
    check_input_names();
    ShapeInferResult result;
    for (Node* n : gm_.graph().nodes()) {
      if (n->op() == Opcode::Output) continue;
      ++result.total;
      std::string reason;
      try {
        facts_[n] = infer(n);
      } catch (const RuleGap& g) {
        reason = g.reason;
        facts_[n] = {};
      } catch (const Error& e) {
        reason = e.what();
        facts_[n] = {};
      } catch (const std::exception& e) {  // an op run on constants failed in an untyped way
        reason = std::string("internal error: ") + e.what();
        facts_[n] = {};
      }
      const std::vector<Fact>& f = facts_[n];
      const bool typed = f.size() == 1 && f[0].ranked && f[0].dtype;
      const bool multi = f.size() > 1;  // recorded on its getitem users
      if (typed) {
        Argument::Items dims;
        for (const SymDim& d : f[0].dims) dims.push_back(dim_to_arg(d));
        n->meta().set("tensor_meta", Argument::dict({{"shape", Argument::tuple(std::move(dims))},
                                                     {"dtype", *f[0].dtype}}));
        ++result.typed;
      } else {
        n->meta().erase("tensor_meta");  // a stale one would be silently wrong
        if (multi) {
          ++result.typed;
        } else {
          if (reason.empty())
            reason = f.empty() || !f[0].present ? "no value"
                     : !f[0].ranked             ? "its rank is unknown"
                                                : "its element type is unknown";
          result.gaps.push_back({n->name(), target_name(n), reason});
        }
      }
    }
    return result;
  }

 private:
  // Every name in options.input_shapes must be an input's: a misspelt one would silently do
  // nothing.
  void check_input_names() const {
    std::vector<std::string> names;
    for (const Node* n : gm_.graph().nodes()) {
      if (n->op() != Opcode::Placeholder) continue;
      names.push_back(n->name());
      if (const Argument* on = n->meta().find(onnx::kName);
          on && on->kind() == Argument::Kind::String && on->to_string() != n->name())
        names.push_back(on->to_string());
    }
    for (const auto& [name, dims] : options_.input_shapes) {
      if (std::find(names.begin(), names.end(), name) != names.end()) continue;
      std::string known;
      for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
      throw Error(ErrorKind::Value, "infer_shapes: input_shapes names '" + name +
                                        "', which is not an input of the graph (inputs: " +
                                        (known.empty() ? "none" : known) + ")");
    }
  }

  static std::string target_name(const Node* n) {
    if (n->op() == Opcode::CallFunction) return n->target().function().qualname();
    if (n->op() == Opcode::Placeholder || n->op() == Opcode::GetAttr ||
        n->op() == Opcode::CallModule || n->op() == Opcode::CallMethod)
      return n->target().str();
    return "";
  }

  std::vector<Fact> infer(Node* n) {
    switch (n->op()) {
      case Opcode::Placeholder:
        return {placeholder(n)};
      case Opcode::GetAttr:
        return {constant(n)};
      case Opcode::CallFunction:
        return call(n);
      default:
        throw RuleGap{"not an ONNX op (" + std::string(opcode_name(n->op())) + ")"};
    }
  }

  Fact placeholder(Node* n) {
    const Argument* type = n->meta().find(onnx::kType);
    if (dict_get(type, "proto")) throw RuleGap{"a sequence, map or optional input"};
    std::optional<Dtype> dtype;
    if (const Argument* d = dict_get(type, "dtype"); d && meta_dtype(*d)) dtype = *meta_dtype(*d);
    const Argument* shape = dict_get(type, "shape");
    auto given = options_.input_shapes.find(n->name());
    if (given == options_.input_shapes.end())
      if (const Argument* on = n->meta().find(onnx::kName);
          on && on->kind() == Argument::Kind::String)
        given = options_.input_shapes.find(on->to_string());
    if (given != options_.input_shapes.end()) {
      SymShape dims;
      for (const Argument& d : given->second) dims.push_back(dim_from(d));
      return Fact::tensor(std::move(dims), dtype);
    }
    if (!shape || !shape->is_sequence()) return Fact::unranked(dtype);
    SymShape dims;
    for (const Argument& d : shape->elements()) dims.push_back(dim_from(d));
    return Fact::tensor(std::move(dims), dtype);
  }

  Fact constant(Node* n) {
    const Tensor* t = gm_.get_tensor(n->target().str());
    if (!t) throw RuleGap{"no tensor '" + n->target().str() + "' in the module"};
    SymShape dims(t->shape.begin(), t->shape.end());
    Fact f = Fact::tensor(std::move(dims), t->dtype);
    if (t->dtype != Dtype::String && t->numel() <= kSmall && (t->data || t->external))
      f.data = Value::from_tensor(*t, n->name());
    return f;
  }

  std::vector<Fact> call(Node* n) {
    const std::string& qual = n->target().function().qualname();
    if (qual == "operator.getitem") {
      const auto& a = n->args();
      if (a.size() != 2 || !a[0].is_node() || a[1].kind() != Argument::Kind::Int)
        throw RuleGap{"getitem needs (node, int)"};
      const std::vector<Fact>& src = facts_[a[0].to_node()];
      const int64_t i = a[1].to_int();
      if (i < 0 || i >= static_cast<int64_t>(src.size()) || !src[i].present)
        throw RuleGap{"output " + std::to_string(i) + " of '" + a[0].to_node()->name() +
                      "' is not known"};
      return {src[i]};
    }
    if (qual.rfind("onnx.", 0) != 0) throw RuleGap{"not an ONNX op"};
    const std::string op = qual.substr(5);
    std::vector<Fact> in;
    for (const Argument& a : n->args()) {
      if (a.is_none()) {
        in.emplace_back();
      } else if (a.is_node()) {
        const std::vector<Fact>& f = facts_[a.to_node()];
        if (f.empty() || !f[0].present)
          throw RuleGap{"input '" + a.to_node()->name() + "' is not known"};
        in.push_back(f[0]);
      } else {
        throw RuleGap{"a literal input (" + std::string(Argument::kind_name(a.kind())) +
                      ") where ONNX takes a tensor"};
      }
    }
    OpCall c{*n, {}, n->kwargs(), {}, &gm_, nullptr};
    std::vector<Fact> out;
    const bool ruled = apply_shape_rule(op, c, in, out);
    // Constant inputs only: run the op itself when what it makes is small.
    bool all_data = deterministic(op);
    int64_t in_numel = 0;
    for (const Fact& f : in)
      if (f.present) {
        all_data = all_data && f.data.has_value();
        if (f.data) in_numel += f.data->numel();
      }
    // Outputs the rule sized as small (an op without a rule: only its small inputs bound them).
    const bool small_out = std::all_of(out.begin(), out.end(), [](const Fact& f) {
      const auto v = f.ranked ? numel(f.dims).value() : std::nullopt;
      return v && *v <= kSmall;
    });
    if (all_data && in_numel <= kSmall && small_out)
      if (auto computed = evaluate(n, in)) return *computed;
    if (apply_size_arithmetic(op, c, in, out)) return out;
    if (!ruled) throw RuleGap{"no shape rule for onnx." + op};
    return out;
  }

  // The op run on its (constant, small) inputs; nullopt when it cannot run here.
  std::optional<std::vector<Fact>> evaluate(Node* n, const std::vector<Fact>& in) {
    const TargetInfo& info = target_info(n->target().function());
    if (!info.fn || !*info.fn || takes_non_tensors(*n)) return std::nullopt;
    OpCall c{*n, {}, n->kwargs(), {}, &gm_, nullptr};
    for (const Fact& f : in) c.inputs.push_back(f.present ? &*f.data : nullptr);
    (*info.fn)(c);  // an error here is the model's own, on its constants: reported as the gap
    std::vector<Fact> out;
    for (const Value& v : c.outputs) {
      if (!v.is_tensor()) return std::nullopt;
      Fact f = Fact::tensor(SymShape(v.shape().begin(), v.shape().end()), v.dtype());
      if (v.numel() <= kSmall && v.dtype() != Dtype::String) f.data = v;
      out.push_back(std::move(f));
    }
    return out;
  }

  GraphModule& gm_;
  const ShapeInferOptions& options_;
  std::unordered_map<const Node*, std::vector<Fact>> facts_;
};

}  // namespace

std::optional<std::vector<SymDim>> Fact::values() const {
  if (sym) return sym;
  if (!data || !data->is_tensor() || data->shape().size() > 1) return std::nullopt;
  switch (data->dtype()) {
    case Dtype::Int64:
    case Dtype::Int32:
    case Dtype::Int16:
    case Dtype::Int8:
    case Dtype::UInt8:
    case Dtype::UInt16:
    case Dtype::UInt32:
    case Dtype::Bool:
      break;
    default:
      return std::nullopt;
  }
  std::vector<SymDim> r;
  for (int64_t v : data->to_i64()) r.emplace_back(v);
  return r;
}

ShapeInferResult infer_shapes(GraphModule& gm, const ShapeInferOptions& options) {
  return Inference(gm, options).run();
}

}  // namespace fx::exec
