// fx::onnx::check_schemas — onnx.* call_function nodes against ONNX's own op schemas (the table
// scripts/gen_onnx_schemas.py writes from onnx.defs into schemas.inc): what onnx.checker would
// refuse, found on the FX graph and named by node and rule.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fx/onnx.h"

namespace fx::onnx {

namespace {

struct SchemaRow {
  const char* domain;
  const char* op;
  int since;
  int deprecated;
  int min_inputs, max_inputs, min_outputs, max_outputs;
  const char* attributes;  // "name:TYPE:required;..."
};

const SchemaRow kRows[] = {
#include "schemas.inc"
};

struct Attr {
  std::string type;
  bool required = false;
};

struct Schema {
  const SchemaRow* row = nullptr;
  std::map<std::string, Attr> attrs;
};

// (domain, op) -> its versions, oldest first.
const std::map<std::pair<std::string, std::string>, std::vector<Schema>>& schemas() {
  static const auto* table = [] {
    auto* t = new std::map<std::pair<std::string, std::string>, std::vector<Schema>>();
    for (const SchemaRow& r : kRows) {
      Schema s;
      s.row = &r;
      const std::string a = r.attributes;
      size_t start = 0;
      while (start < a.size()) {
        size_t end = a.find(';', start);
        if (end == std::string::npos) end = a.size();
        const std::string item = a.substr(start, end - start);
        const size_t c1 = item.find(':'), c2 = item.rfind(':');
        s.attrs[item.substr(0, c1)] = Attr{item.substr(c1 + 1, c2 - c1 - 1), item[c2 + 1] == '1'};
        start = end + 1;
      }
      (*t)[{r.domain, r.op}].push_back(std::move(s));
    }
    for (auto& kv : *t)
      std::sort(kv.second.begin(), kv.second.end(),
                [](const Schema& x, const Schema& y) { return x.row->since < y.row->since; });
    return t;
  }();
  return *table;
}

int64_t opset_of(const GraphModule& gm, const std::string& domain, int64_t fallback) {
  const Argument* ops = gm.meta().find(meta::kOpsetImport);
  if (ops && ops->kind() == Argument::Kind::Dict)
    for (const auto& kv : ops->dict_items())
      if (kv.first.kind() == Argument::Kind::String && kv.second.kind() == Argument::Kind::Int) {
        const std::string d = kv.first.to_string() == "ai.onnx" ? "" : kv.first.to_string();
        if (d == domain) return kv.second.to_int();
      }
  return domain.empty() ? fallback : -1;
}

bool is_number(const Argument& a) {
  return a.kind() == Argument::Kind::Int || a.kind() == Argument::Kind::Float ||
         a.kind() == Argument::Kind::Bool;
}

// Whether kwarg value `v` can be written as an attribute of ONNX type `type`.
bool fits(const Argument& v, const std::string& type) {
  using K = Argument::Kind;
  if (type == "FLOAT") return is_number(v);
  if (type == "INT") return v.kind() == K::Int || v.kind() == K::Bool;
  if (type == "STRING") return v.kind() == K::String;
  if (type == "FLOATS" || type == "INTS" || type == "STRINGS") {
    if (!v.is_sequence()) return false;
    const std::string element = type.substr(0, type.size() - 1);
    for (const Argument& e : v.elements())
      if (!fits(e, element)) return false;
    return true;
  }
  if (type == "GRAPH") return v.is_node();
  // TENSOR (a get_attr node, or a scalar the importer unwrapped), SPARSE_TENSOR, TYPE_PROTO...
  return true;
}

std::string kind_text(const Argument& a) {
  if (a.is_node()) return "Node '" + a.to_node()->name() + "'";
  return std::string(Argument::kind_name(a.kind())) + " " + a.repr();
}

}  // namespace

namespace {

void check_graph(const GraphModule& gm, const GraphModule& module, int64_t opset,
                 const std::string& prefix, std::vector<SchemaProblem>& out) {
  for (const Node* n : module.graph().nodes()) {
    if (n->op() != Opcode::CallFunction) continue;
    const Function& fn = n->target().function();
    if (fn.info().module != "onnx") continue;
    const std::string& op = fn.name();
    std::string domain;
    if (const Argument* d = n->meta().find(meta::kDomain); d && d->kind() == Argument::Kind::String)
      domain = d->to_string() == "ai.onnx" ? "" : d->to_string();
    auto it = schemas().find({domain, op});
    const std::string target = "onnx." + op;
    auto problem = [&](const std::string& rule) {
      out.push_back({prefix + n->name(), target, rule});
    };
    // Not in onnx.defs of onnx 1.12: another domain's op (com.microsoft...), or one newer than
    // its opset 17 (Gelu-20, GroupNormalization-18). The executor's coverage() names an op it
    // cannot run.
    if (it == schemas().end()) continue;
    const int64_t version = domain.empty() && opset > 0 ? opset : opset_of(gm, domain, 17);
    const Schema* s = nullptr;
    for (const Schema& c : it->second)
      if (version < 0 || c.row->since <= version) s = &c;
    // Newer than the opset: a fused op the export writes in older ops or raises the opset for.
    if (!s || s->row->deprecated) continue;
    const std::string at = op + "-" + std::to_string(s->row->since) + " (opset " +
                           std::to_string(version < 0 ? s->row->since : version) + ")";

    // Positional inputs: tensors (Nodes) or omitted (None), as many as the schema takes. An
    // If/Loop/Scan lists the values its bodies capture after its own inputs.
    size_t count = n->args().size();
    if (const Argument* k = n->meta().find(meta::kNumInputs);
        k && k->kind() == Argument::Kind::Int && k->to_int() >= 0 &&
        static_cast<size_t>(k->to_int()) <= count)
      count = static_cast<size_t>(k->to_int());
    for (size_t i = 0; i < count; ++i) {
      const Argument& a = n->args()[i];
      if (!a.is_node() && !a.is_none())
        problem("input " + std::to_string(i) + " of " + at +
                " must be a tensor (a Node) or None, got " + kind_text(a));
    }
    if (static_cast<int64_t>(count) < s->row->min_inputs ||
        static_cast<int64_t>(count) > s->row->max_inputs)
      problem(at + " takes " +
              (s->row->min_inputs == s->row->max_inputs
                   ? std::to_string(s->row->min_inputs)
                   : std::to_string(s->row->min_inputs) + " to " +
                         (s->row->max_inputs == 2147483647 ? std::string("any number of")
                                                           : std::to_string(s->row->max_inputs))) +
              " inputs, the node gives " + std::to_string(count));

    // Outputs: the ONNX outputs the node declares.
    if (const Argument* outs = n->meta().find(meta::kOutputs); outs && outs->is_sequence()) {
      const auto k = static_cast<int64_t>(outs->elements().size());
      if (k < s->row->min_outputs || k > s->row->max_outputs)
        problem(at + " has " + std::to_string(s->row->min_outputs) +
                (s->row->min_outputs == s->row->max_outputs
                     ? ""
                     : " to " + (s->row->max_outputs == 2147483647
                                     ? std::string("any number of")
                                     : std::to_string(s->row->max_outputs))) +
                " outputs, the node declares " + std::to_string(k));
    }

    // Attributes: known names, values of the schema's type, required ones present.
    for (const auto& kv : n->kwargs()) {
      auto a = s->attrs.find(kv.first);
      if (a == s->attrs.end()) {
        std::string known;
        for (const auto& k : s->attrs) known += (known.empty() ? "" : ", ") + k.first;
        problem("attribute '" + kv.first + "' is not in the schema of " + at +
                (known.empty() ? ", which has no attributes" : "; it has: " + known));
        continue;
      }
      if (!fits(kv.second, a->second.type))
        problem("attribute '" + kv.first + "' of " + at + " must be " + a->second.type + ", got " +
                kind_text(kv.second));
    }
    for (const auto& [name, a] : s->attrs)
      if (a.required && !n->kwargs().find(name))
        problem(at + " requires attribute '" + name + "' (" + a.type + ")");
  }
}

}  // namespace

std::vector<SchemaProblem> check_schemas(const GraphModule& gm, int64_t opset) {
  std::vector<SchemaProblem> out;
  check_graph(gm, gm, opset, "", out);
  // If/Loop/Scan bodies: sub-GraphModules of the attribute tree, at the model's opsets.
  for (const auto& [path, m] : gm.named_modules()) {
    if (path.empty()) continue;
    if (const auto* body = dynamic_cast<const GraphModule*>(m))
      check_graph(gm, *body, opset, path + ".", out);
  }
  return out;
}

}  // namespace fx::onnx
