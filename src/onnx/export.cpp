// fx::GraphModule -> ModelProto bytes (the inverse of import.cpp).
#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "fx/error.h"
#include "onnx/common.h"
#include "onnx/export_ops.h"

namespace fx::onnx {
namespace {

const Argument* dict_get(const Argument* d, const char* key) {
  if (!d || d->kind() != Argument::Kind::Dict) return nullptr;
  for (const auto& kv : d->dict_items())
    if (kv.first.kind() == Argument::Kind::String && kv.first.to_string() == key) return &kv.second;
  return nullptr;
}

const std::string* meta_string(const Kwargs& meta, const char* key) {
  const Argument* a = meta.find(key);
  return a && a->kind() == Argument::Kind::String ? &a->to_string() : nullptr;
}

// Fills a TypeProto from an "onnx_type" / "tensor_meta" dict; false if there is nothing usable.
bool type_from_arg(const Argument* t, ::onnx::TypeProto* out) {
  if (!t || t->kind() != Argument::Kind::Dict) return false;
  if (const Argument* proto = dict_get(t, "proto");
      proto && proto->kind() == Argument::Kind::String)
    return out->ParseFromString(proto->to_string());
  auto* tt = out->mutable_tensor_type();
  const Argument* dt = dict_get(t, "dtype");
  if (const Dtype* d = dt ? meta_dtype(*dt) : nullptr)
    tt->set_elem_type(onnx_elem_type(*d));
  else if (dt && dt->kind() == Argument::Kind::Int)
    tt->set_elem_type(static_cast<int32_t>(dt->to_int()));
  const Argument* shape = dict_get(t, "shape");
  if (shape && shape->is_sequence()) {
    auto* s = tt->mutable_shape();
    for (const Argument& d : shape->elements()) {
      auto* dim = s->add_dim();
      if (d.kind() == Argument::Kind::Int)
        dim->set_dim_value(d.to_int());
      else if (d.kind() == Argument::Kind::String)
        dim->set_dim_param(d.to_string());
    }
  }
  return true;
}

class Exporter {
 public:
  explicit Exporter(const ExportOptions& options) : options_(options) {}

  // Serializes `gm`'s graph into `out`. `outer` maps captured placeholders' names for a body.
  void export_graph(const GraphModule& gm, ::onnx::GraphProto* out,
                    const std::string& fallback_name) {
    const Graph& g = gm.graph();
    if (const std::string* s = meta_string(gm.meta(), kGraphName))
      out->set_name(*s);
    else
      out->set_name(fallback_name);
    if (const std::string* s = meta_string(gm.meta(), kGraphDoc)) out->set_doc_string(*s);
    std::unordered_set<std::string> initializer_inputs;
    if (const Argument* a = gm.meta().find(kInitializerInputs); a && a->is_sequence())
      for (const Argument& e : a->elements())
        if (e.kind() == Argument::Kind::String) initializer_inputs.insert(e.to_string());

    // Reserve the graph output names first: the values producing them take those names.
    Node* output = g.output_node();
    std::vector<Node*> out_values;
    std::vector<std::string> out_names;
    if (output) {
      const Argument& res = output->args().empty() ? Argument() : output->args()[0];
      auto add = [&](const Argument& a) {
        if (!a.is_node())
          throw Error(ErrorKind::Unsupported,
                      std::string("the graph returns a ") + Argument::kind_name(a.kind()) +
                          "; ONNX graphs return tensors (nodes)",
                      output->name());
        out_values.push_back(a.to_node());
      };
      if (res.is_sequence())
        for (const Argument& e : res.elements()) add(e);
      else if (!res.is_none())
        add(res);
      const Argument* names = output->meta().find(kOutputs);
      for (size_t i = 0; i < out_values.size(); ++i) {
        std::string name;
        if (names && names->is_sequence() && i < names->elements().size() &&
            names->elements()[i].kind() == Argument::Kind::String)
          name = names->elements()[i].to_string();
        if (name.empty()) name = preferred_name(out_values[i], 0);
        out_names.push_back(name);
      }
    }
    std::unordered_map<const Node*, std::string>& output_claims = claims_;  // value -> output name
    for (size_t i = 0; i < out_values.size(); ++i) {
      Node* v = out_values[i];
      const bool produced = v->op() == Opcode::CallFunction;
      if (produced && !output_claims.count(v) && !used_.count(out_names[i])) {
        output_claims[v] = out_names[i];
        used_.insert(out_names[i]);
      }
    }

    for (Node* n : g.nodes()) {
      switch (n->op()) {
        case Opcode::Placeholder: {
          if (const std::string* outer = meta_string(n->meta(), kOuterScope)) {
            names_[n] = outer_name(*outer);
            break;
          }
          auto* vi = out->add_input();
          vi->set_name(claim(n, preferred_name(n, 0)));
          ::onnx::TypeProto type;
          if (type_from_arg(n->meta().find(kType), &type) ||
              type_from_arg(n->meta().find("tensor_meta"), &type))
            *vi->mutable_type() = type;
          else
            vi->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::FLOAT);
          if (const std::string* d = meta_string(n->meta(), kDoc)) vi->set_doc_string(*d);
          break;
        }
        case Opcode::GetAttr: {
          const std::string& target = n->target().str();
          if (const Tensor* t = gm.get_tensor(target)) {
            const std::string name = claim(n, preferred_name(n, 0));
            if (n->meta().find(kConstant)) {
              auto* c = out->add_node();
              c->set_op_type("Constant");
              if (const std::string* nn = meta_string(n->meta(), kNodeName)) c->set_name(*nn);
              c->add_output(name);
              auto* a = c->add_attribute();
              a->set_name("value");
              a->set_type(::onnx::AttributeProto::TENSOR);
              const std::string* tn = meta_string(n->meta(), kTensorName);
              tensor_to_proto(*t, tn ? *tn : std::string(), a->mutable_t(),
                              options_.embed_external_data);
            } else {
              ::onnx::TensorProto* init = out->add_initializer();
              // The main graph's weights are written from the tensor when serializing.
              if (tensor_to_proto(*t, name, init, options_.embed_external_data, out == main_graph))
                deferred.push_back({init, t});
              if (const std::string* d = meta_string(n->meta(), kDoc)) init->set_doc_string(*d);
              if (initializer_inputs.count(name)) {
                auto* vi = out->add_input();
                vi->set_name(name);
                auto* tt = vi->mutable_type()->mutable_tensor_type();
                tt->set_elem_type(onnx_elem_type(t->dtype));
                auto* s = tt->mutable_shape();
                for (int64_t d : t->shape) s->add_dim()->set_dim_value(d);
              }
            }
          } else if (!gm.get_submodule(target)) {
            throw Error(ErrorKind::Attribute, "get_attr target '" + target + "' does not exist",
                        n->name());
          }
          break;  // a submodule (subgraph body) is emitted where a node uses it
        }
        case Opcode::CallFunction:
          export_call(gm, n, out);
          break;
        case Opcode::Output:
          break;
        default:
          throw Error(ErrorKind::Unsupported,
                      "node '" + n->name() + "' (" + opcode_name(n->op()) + " " +
                          n->target().pretty() +
                          ") has no ONNX form: only onnx.* call_function nodes export",
                      n->name());
      }
    }

    // Outputs of a multi-output node that nothing reads any more (after dead-code elimination)
    // keep a name when the model named them: an output omitted is not the same node for every
    // consumer (onnxruntime runs a BatchNormalization without its running-statistics outputs
    // in inference mode, whatever its training_mode says).
    for (Node* n : g.nodes()) {
      auto it = multi_.find(n);
      const Argument* names = n->meta().find(kOutputs);
      if (it == multi_.end() || !names || !names->is_sequence()) continue;
      ::onnx::NodeProto* p = it->second.proto;
      for (int k = 0; k < p->output_size() && k < static_cast<int>(names->elements().size()); ++k)
        if (p->output(k).empty() && names->elements()[k].kind() == Argument::Kind::String &&
            !names->elements()[k].to_string().empty())
          *p->mutable_output(k) = fresh(names->elements()[k].to_string());
    }

    // Outputs: a value already named differently (an input, an initializer, a value returned
    // twice) is renamed through an Identity node.
    const Argument* types = output ? output->meta().find(kOutputTypes) : nullptr;
    for (size_t i = 0; i < out_values.size(); ++i) {
      std::string name = name_of(out_values[i], output);
      if (name != out_names[i]) {
        std::string target = out_names[i];
        if (used_.count(target) &&
            !(output_claims.count(out_values[i]) && output_claims[out_values[i]] == target))
          target = fresh(target);
        else
          used_.insert(target);
        auto* id = out->add_node();
        id->set_op_type("Identity");
        id->add_input(name);
        id->add_output(target);
        name = target;
      }
      auto* vi = out->add_output();
      vi->set_name(name);
      ::onnx::TypeProto type;
      const Argument* t = types && types->is_sequence() && i < types->elements().size()
                              ? &types->elements()[i]
                              : nullptr;
      // The declared type is the import's: once the output returns another node (moved by the
      // user, or a pass replaced the node) its dimensions may be stale. Then the node's own type
      // (meta onnx_type, or tensor_meta from shape propagation) wins, else the element type and
      // rank are kept with every dimension unknown.
      bool moved = false;
      if (const Argument* src = output ? output->meta().find(kOutputSources) : nullptr;
          t && src && src->is_sequence() && i < src->elements().size() &&
          src->elements()[i].kind() == Argument::Kind::String)
        moved = src->elements()[i].to_string() != out_values[i]->name();
      if (moved) {
        if (!type_from_arg(out_values[i]->meta().find(kType), &type) &&
            !type_from_arg(out_values[i]->meta().find("tensor_meta"), &type) &&
            type_from_arg(t, &type) && type.has_tensor_type() && type.tensor_type().has_shape())
          for (auto& d : *type.mutable_tensor_type()->mutable_shape()->mutable_dim())
            d.Clear();  // the rank stays, every dimension is unknown
        if (type.value_case() == ::onnx::TypeProto::VALUE_NOT_SET)
          type.mutable_tensor_type()->set_elem_type(::onnx::TensorProto::FLOAT);
        *vi->mutable_type() = type;
        continue;
      }
      if (type_from_arg(t, &type) || type_from_arg(out_values[i]->meta().find(kType), &type) ||
          type_from_arg(out_values[i]->meta().find("tensor_meta"), &type))
        *vi->mutable_type() = type;
      else
        vi->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::FLOAT);
    }
    // Types of intermediate values (value_info).
    for (Node* n : g.nodes()) {
      if (n->op() != Opcode::CallFunction) continue;
      const Argument* t = n->meta().find(kType);
      if (!t) continue;
      auto it = names_.find(n);
      if (it == names_.end() || is_graph_output(n, out_values)) continue;
      ::onnx::TypeProto type;
      if (!type_from_arg(t, &type)) continue;
      auto* vi = out->add_value_info();
      vi->set_name(it->second);
      *vi->mutable_type() = type;
    }
  }

  std::unordered_set<std::string> domains_used;
  // The default domain's opset being written, whether the caller pinned it, and the highest
  // opset an op written so far needs (export_model raises the opset import to it).
  int64_t opset = 17;
  bool pinned = false;
  int64_t required_opset = 0;
  // RoiAlign nodes of a model older than opset 16, whose default coordinate_transformation_mode
  // changed in 16: made explicit if the opset is raised past it.
  std::vector<::onnx::NodeProto*> old_roi_aligns;
  // The model's own graph (not a body), and its initializers left without raw_data.
  ::onnx::GraphProto* main_graph = nullptr;
  std::vector<DeferredWeight> deferred;

 private:
  static bool is_graph_output(const Node* n, const std::vector<Node*>& outs) {
    for (const Node* o : outs)
      if (o == n) return true;
    return false;
  }

  // The name the value of `n` would like: its ONNX name when it came from ONNX, else the FX
  // node name.
  std::string preferred_name(const Node* n, size_t output) const {
    if (n->op() == Opcode::CallFunction) {
      const Argument* outs = n->meta().find(kOutputs);
      if (outs && outs->is_sequence() && output < outs->elements().size() &&
          outs->elements()[output].kind() == Argument::Kind::String &&
          !outs->elements()[output].to_string().empty())
        return outs->elements()[output].to_string();
      return output == 0 ? n->name() : n->name() + "_" + std::to_string(output);
    }
    if (const std::string* s = meta_string(n->meta(), kName)) return *s;
    if (n->op() == Opcode::GetAttr && !n->meta().find(kConstant)) return n->target().str();
    return n->name();
  }

  std::string fresh(const std::string& base) {
    std::string cand = base;
    for (int k = 1; used_.count(cand); ++k) cand = base + "__" + std::to_string(k);
    used_.insert(cand);
    return cand;
  }

  std::string claim(const Node* n, const std::string& want) {
    if (auto it = claims_.find(n); it != claims_.end()) return names_[n] = it->second;
    std::string name = used_.count(want) ? fresh(want) : (used_.insert(want), want);
    names_[n] = name;
    return name;
  }

  std::string outer_name(const std::string& captured) {
    // A body's captured value is named like the enclosing graph's value it maps to.
    auto it = outer_names_.find(captured);
    return it == outer_names_.end() ? captured : it->second;
  }

  const std::string& name_of(const Node* v, const Node* user) const {
    auto it = names_.find(v);
    if (it == names_.end())
      throw Error(ErrorKind::Graph,
                  "node '" + user->name() + "' uses '" + v->name() + "', which has no ONNX value",
                  user->name());
    return it->second;
  }

  void export_call(const GraphModule& gm, Node* n, ::onnx::GraphProto* out) {
    const Function& f = n->target().function();
    const std::string& q = f.qualname();
    if (q == "operator.getitem") {
      const auto& a = n->args();
      if (a.size() != 2 || !a[0].is_node() || a[1].kind() != Argument::Kind::Int)
        throw Error(ErrorKind::Unsupported, "node '" + n->name() + "': getitem needs (node, int)",
                    n->name());
      const Node* src = a[0].to_node();
      auto it = multi_.find(src);
      if (it == multi_.end())
        throw Error(ErrorKind::Unsupported,
                    "node '" + n->name() + "' takes an item of '" + src->name() +
                        "', which is not a multi-output ONNX node",
                    n->name());
      const int64_t k = a[1].to_int();
      if (k < 0 || k >= it->second.proto->output_size())
        throw Error(ErrorKind::Unsupported,
                    "node '" + n->name() + "': output " + std::to_string(k) + " of '" +
                        src->name() + "' does not exist",
                    n->name());
      std::string& slot = *it->second.proto->mutable_output(static_cast<int>(k));
      if (!slot.empty()) {
        // A second getitem of the same output: alias it.
        names_[n] = slot;
      } else {
        slot = claim(n, preferred_name(src, static_cast<size_t>(k)));
      }
      return;
    }
    if (q.rfind("onnx.", 0) != 0)
      throw Error(ErrorKind::Unsupported,
                  "node '" + n->name() + "' (" + q +
                      ") has no ONNX form: only onnx.* call_function nodes export",
                  n->name());
    std::string rest = q.substr(5);
    const size_t dot = rest.rfind('.');
    std::string domain = dot == std::string::npos ? std::string() : rest.substr(0, dot);
    if (domain.empty() && !meta_string(n->meta(), kDomain) && write_newer_op(n, rest, out)) return;
    auto* p = out->add_node();
    p->set_op_type(dot == std::string::npos ? rest : rest.substr(dot + 1));
    if (const std::string* d = meta_string(n->meta(), kDomain)) domain = *d;
    if (!domain.empty()) p->set_domain(domain);
    domains_used.insert(domain);
    if (const std::string* s = meta_string(n->meta(), kName)) p->set_name(*s);
    if (const std::string* s = meta_string(n->meta(), kDoc)) p->set_doc_string(*s);

    size_t num_inputs = n->args().size();
    if (const Argument* k = n->meta().find(kNumInputs); k && k->kind() == Argument::Kind::Int)
      num_inputs = std::min(num_inputs, static_cast<size_t>(k->to_int()));
    std::vector<std::string> captured_names;
    for (size_t i = 0; i < n->args().size(); ++i) {
      const Argument& a = n->args()[i];
      std::string name;
      if (a.is_node())
        name = name_of(a.to_node(), n);
      else if (!a.is_none())
        throw Error(ErrorKind::Unsupported,
                    "node '" + n->name() + "': input " + std::to_string(i) + " is a " +
                        Argument::kind_name(a.kind()) +
                        "; ONNX inputs are values (nodes) or None for an omitted optional input",
                    n->name());
      if (i < num_inputs)
        p->add_input(name);
      else
        captured_names.push_back(name);
    }

    const Argument* tensor_attrs = n->meta().find(kTensorAttrs);
    const Argument* attr_types = n->meta().find(kAttrTypes);
    size_t body = 0;
    for (const auto& [key, value] : n->kwargs()) {
      auto* a = p->add_attribute();
      a->set_name(key);
      set_attribute(gm, n, key, value, tensor_attrs, attr_types, captured_names, body, a);
    }

    if (p->op_type() == "RoiAlign" && p->domain().empty() && opset < 16)
      old_roi_aligns.push_back(p);

    // Outputs: names for the tuple's items are set by the getitem nodes (in graph order).
    const Argument* outs = n->meta().find(kOutputs);
    const size_t n_out = outs && outs->is_sequence() ? outs->elements().size() : 1;
    if (n_out == 1 && !has_getitem_user(n)) {
      p->add_output(claim(n, preferred_name(n, 0)));
    } else {
      size_t count = n_out;
      for (const Node* u : n->users())
        if (u->op() == Opcode::CallFunction &&
            u->target().function().qualname() == "operator.getitem" && u->args().size() == 2 &&
            u->args()[1].kind() == Argument::Kind::Int)
          count = std::max(count, static_cast<size_t>(u->args()[1].to_int() + 1));
      for (size_t i = 0; i < count; ++i) p->add_output("");
      multi_[n] = {p};
    }
  }

  // An op newer than the opset being written (made by a fusion pass): notes the opset it needs,
  // or writes it in older ops and returns true (ExportOptions::opset, ExportOptions::gelu).
  bool write_newer_op(const Node* n, const std::string& op, ::onnx::GraphProto* out) {
    if (op != "Gelu" && op != "LayerNormalization") return false;
    auto fail = [&](const std::string& why) {
      return Error(ErrorKind::Unsupported, "node '" + n->name() + "' (onnx." + op + "): " + why,
                   n->name());
    };
    auto str_attr = [&](const char* key, const char* fallback) {
      const Argument* a = n->kwargs().find(key);
      return a && a->kind() == Argument::Kind::String ? a->to_string() : std::string(fallback);
    };
    if (n->args().empty() || !n->args()[0].is_node()) throw fail("needs its input");
    NameFn fresh_name = [this](const std::string& base) { return fresh(base); };
    if (op == "Gelu") {
      if (opset >= min_opset(op)) return false;  // a model that has ONNX's Gelu keeps it
      const bool tanh_form = str_attr("approximate", "none") == "tanh";
      if (options_.gelu == GeluExport::Opset20) {
        if (pinned && opset < 20)
          throw fail("Gelu needs opset 20 and the export is pinned to opset " +
                     std::to_string(opset) + " (choose the decomposed or com.microsoft form)");
        required_opset = std::max<int64_t>(required_opset, 20);
        return false;
      }
      const std::string x = name_of(n->args()[0].to_node(), n);
      if (has_getitem_user(n)) throw fail("Gelu has one output");
      const std::string y = claim(n, preferred_name(n, 0));
      if (options_.gelu == GeluExport::Decomposed) {
        emit_gelu_decomposed(out, x, y, tanh_form, fresh_name);
      } else {
        auto* p = out->add_node();
        p->set_op_type(tanh_form ? "FastGelu" : "Gelu");
        p->set_domain("com.microsoft");
        if (const std::string* s = meta_string(n->meta(), kName)) p->set_name(*s);
        p->add_input(x);
        p->add_output(y);
        domains_used.insert("com.microsoft");
      }
      return true;
    }
    // LayerNormalization (opset 17).
    if (opset >= min_opset(op)) return false;
    if (!pinned) {
      required_opset = std::max(required_opset, min_opset(op));
      return false;
    }
    if (has_getitem_user(n))
      throw fail(
          "its Mean/InvStdDev outputs have no form below opset 17 (the export is pinned to " +
          std::to_string(opset) + ")");
    if (n->args().size() < 2 || !n->args()[1].is_node()) throw fail("needs a scale input");
    const Argument* axis = n->kwargs().find("axis");
    const Argument* eps = n->kwargs().find("epsilon");
    int64_t rank = -1;
    if (const Argument* t = n->args()[0].to_node()->meta().find(kType);
        t && t->kind() == Argument::Kind::Dict)
      for (const auto& kv : t->dict_items())
        if (kv.first.to_string() == "shape" && kv.second.is_sequence())
          rank = static_cast<int64_t>(kv.second.elements().size());
    const std::string bias = n->args().size() > 2 && n->args()[2].is_node()
                                 ? name_of(n->args()[2].to_node(), n)
                                 : std::string();
    emit_layer_norm_decomposed(
        out, name_of(n->args()[0].to_node(), n), name_of(n->args()[1].to_node(), n), bias,
        claim(n, preferred_name(n, 0)),
        axis && axis->kind() == Argument::Kind::Int ? axis->to_int() : -1, rank,
        eps && eps->kind() == Argument::Kind::Float ? static_cast<float>(eps->to_double()) : 1e-5f,
        fresh_name);
    return true;
  }

  static bool has_getitem_user(const Node* n) {
    for (const Node* u : n->users())
      if (u->op() == Opcode::CallFunction &&
          u->target().function().qualname() == "operator.getitem")
        return true;
    return false;
  }

  void set_attribute(const GraphModule& gm, Node* n, const std::string& key, const Argument& v,
                     const Argument* tensor_attrs, const Argument* attr_types,
                     const std::vector<std::string>& captured, size_t& body,
                     ::onnx::AttributeProto* a) {
    using A = ::onnx::AttributeProto;
    auto bad = [&](const std::string& why) {
      return Error(ErrorKind::Unsupported,
                   "node '" + n->name() + "': attribute '" + key + "' " + why, n->name());
    };
    if (const Argument* spec = dict_get(tensor_attrs, key.c_str())) {
      // A scalar that was a one-element tensor.
      Tensor t;
      const Argument* dt = dict_get(spec, "dtype");
      const Dtype* d = dt ? meta_dtype(*dt) : nullptr;
      t.dtype = d ? *d : Dtype::Float32;
      if (const Argument* sh = dict_get(spec, "shape"); sh && sh->is_sequence())
        for (const Argument& d : sh->elements()) t.shape.push_back(d.to_int());
      if (t.numel() != 1) throw bad("has a tensor spec with more than one element");
      auto bytes = std::make_shared<std::vector<uint8_t>>(dtype_size(t.dtype));
      switch (t.dtype) {
        case Dtype::Float32: {
          float f = static_cast<float>(v.to_double());
          std::memcpy(bytes->data(), &f, 4);
          break;
        }
        case Dtype::Float64: {
          double d = v.to_double();
          std::memcpy(bytes->data(), &d, 8);
          break;
        }
        case Dtype::Int64: {
          int64_t i = v.to_int();
          std::memcpy(bytes->data(), &i, 8);
          break;
        }
        case Dtype::Int32: {
          int32_t i = static_cast<int32_t>(v.to_int());
          std::memcpy(bytes->data(), &i, 4);
          break;
        }
        case Dtype::Bool:
          (*bytes)[0] = v.to_bool() ? 1 : 0;
          break;
        default:
          throw bad("has an unsupported tensor dtype");
      }
      t.data = std::move(bytes);
      const Argument* nm = dict_get(spec, "name");
      a->set_type(A::TENSOR);
      tensor_to_proto(t,
                      nm && nm->kind() == Argument::Kind::String ? nm->to_string() : std::string(),
                      a->mutable_t(), true);
      return;
    }
    switch (v.kind()) {
      case Argument::Kind::Int:
      case Argument::Kind::Bool:
        a->set_type(A::INT);
        a->set_i(v.kind() == Argument::Kind::Bool ? (v.to_bool() ? 1 : 0) : v.to_int());
        return;
      case Argument::Kind::Float:
        a->set_type(A::FLOAT);
        a->set_f(static_cast<float>(v.to_double()));
        return;
      case Argument::Kind::String:
        a->set_type(A::STRING);
        a->set_s(v.to_string());
        return;
      case Argument::Kind::Node:
        set_node_attribute(gm, n, key, v.to_node(), captured, body, a, false);
        return;
      case Argument::Kind::List:
      case Argument::Kind::Tuple: {
        const auto& items = v.elements();
        if (items.empty()) {
          const Argument* t = dict_get(attr_types, key.c_str());
          const std::string kind =
              t && t->kind() == Argument::Kind::String ? t->to_string() : "INTS";
          a->set_type(kind == "FLOATS" ? A::FLOATS : kind == "STRINGS" ? A::STRINGS : A::INTS);
          return;
        }
        bool all_int = true, all_num = true, all_str = true, all_node = true;
        for (const Argument& e : items) {
          const bool is_int = e.kind() == Argument::Kind::Int || e.kind() == Argument::Kind::Bool;
          all_int &= is_int;
          all_num &= is_int || e.kind() == Argument::Kind::Float;
          all_str &= e.kind() == Argument::Kind::String;
          all_node &= e.is_node();
        }
        if (all_int) {
          a->set_type(A::INTS);
          for (const Argument& e : items)
            a->add_ints(e.kind() == Argument::Kind::Bool ? e.to_bool() : e.to_int());
        } else if (all_num) {
          a->set_type(A::FLOATS);
          for (const Argument& e : items) a->add_floats(static_cast<float>(e.to_double()));
        } else if (all_str) {
          a->set_type(A::STRINGS);
          for (const Argument& e : items) a->add_strings(e.to_string());
        } else if (all_node) {
          for (const Argument& e : items)
            set_node_attribute(gm, n, key, e.to_node(), captured, body, a, true);
        } else {
          throw bad("mixes value kinds; ONNX lists hold ints, floats, strings, tensors or graphs");
        }
        return;
      }
      case Argument::Kind::Dict:  // a type (Optional's 'type'), as the importer reads it
        if (type_from_arg(&v, a->mutable_tp())) {
          a->set_type(A::TYPE_PROTO);
          return;
        }
        [[fallthrough]];
      default:
        throw bad(std::string("is a ") + Argument::kind_name(v.kind()) +
                  ", which ONNX attributes cannot hold");
    }
  }

  void set_node_attribute(const GraphModule& gm, Node* n, const std::string& key, const Node* v,
                          const std::vector<std::string>& captured, size_t& body,
                          ::onnx::AttributeProto* a, bool repeated) {
    using A = ::onnx::AttributeProto;
    if (v->op() != Opcode::GetAttr)
      throw Error(ErrorKind::Unsupported,
                  "node '" + n->name() + "': attribute '" + key + "' refers to '" + v->name() +
                      "', which is not a get_attr (attributes are constants)",
                  n->name());
    const std::string& target = v->target().str();
    if (const Tensor* t = gm.get_tensor(target)) {
      a->set_type(repeated ? A::TENSORS : A::TENSOR);
      tensor_to_proto(*t, std::string(), repeated ? a->add_tensors() : a->mutable_t(), true);
      return;
    }
    auto sub = std::dynamic_pointer_cast<GraphModule>(gm.get_submodule(target));
    if (!sub)
      throw Error(ErrorKind::Unsupported,
                  "node '" + n->name() + "': attribute '" + key + "' refers to '" + target +
                      "', which is neither a tensor nor a GraphModule",
                  n->name());
    a->set_type(repeated ? A::GRAPHS : A::GRAPH);
    // The body's captured placeholders take the names of the node's trailing args, in order.
    // The node's meta "onnx_captures" names them (one per trailing arg).
    std::unordered_map<std::string, std::string> saved = outer_names_;
    if (const Argument* names = n->meta().find(kCaptures); names && names->is_sequence())
      for (size_t k = 0; k < names->elements().size() && k < captured.size(); ++k)
        outer_names_[names->elements()[k].to_string()] = captured[k];
    Exporter inner(options_);
    inner.opset = opset;
    inner.pinned = pinned;
    inner.used_ = used_;
    inner.outer_names_ = outer_names_;
    inner.export_graph(*sub, repeated ? a->add_graphs() : a->mutable_g(),
                       key + std::to_string(body++));
    for (const auto& name : inner.used_) used_.insert(name);
    for (const auto& d : inner.domains_used) domains_used.insert(d);
    required_opset = std::max(required_opset, inner.required_opset);
    old_roi_aligns.insert(old_roi_aligns.end(), inner.old_roi_aligns.begin(),
                          inner.old_roi_aligns.end());
    outer_names_ = std::move(saved);
  }

  struct Multi {
    ::onnx::NodeProto* proto;
  };
  const ExportOptions& options_;
  std::unordered_set<std::string> used_;
  std::unordered_map<const Node*, std::string> names_;
  std::unordered_map<const Node*, Multi> multi_;
  std::unordered_map<std::string, std::string> outer_names_;
  std::unordered_map<const Node*, std::string> claims_;  // graph outputs: value -> name
};

}  // namespace

std::vector<uint8_t> export_model(const GraphModule& gm, const ExportOptions& options) {
  std::vector<uint8_t> out;
  size_t at = 0;
  export_model_to(gm,
                  ByteSink{[&](size_t total) { out.resize(total); },
                           [&](const uint8_t* p, size_t n) {
                             if (n > out.size() - at)
                               throw Error(ErrorKind::Internal,
                                           "export: more bytes than announced");
                             std::memcpy(out.data() + at, p, n);
                             at += n;
                           }},
                  options);
  return out;
}

void export_model_to(const GraphModule& gm, const ByteSink& sink, const ExportOptions& options) {
  ::onnx::ModelProto model;
  const Kwargs& meta = gm.meta();
  const Argument* ir = meta.find(kIrVersion);
  model.set_ir_version(ir && ir->kind() == Argument::Kind::Int ? ir->to_int() : 8);
  if (const std::string* s = meta_string(meta, kProducerName))
    model.set_producer_name(*s);
  else
    model.set_producer_name("fxwasm");
  if (const std::string* s = meta_string(meta, kProducerVersion)) model.set_producer_version(*s);
  if (const std::string* s = meta_string(meta, kDomain)) model.set_domain(*s);
  if (const Argument* v = meta.find(kModelVersion); v && v->kind() == Argument::Kind::Int)
    model.set_model_version(v->to_int());
  if (const std::string* s = meta_string(meta, kDoc)) model.set_doc_string(*s);
  if (const Argument* props = meta.find(kMetadataProps);
      props && props->kind() == Argument::Kind::Dict)
    for (const auto& kv : props->dict_items()) {
      auto* p = model.add_metadata_props();
      p->set_key(kv.first.to_string());
      p->set_value(kv.second.to_string());
    }
  if (const Argument* fns = meta.find(kFunctions); fns && fns->is_sequence())
    for (const Argument& f : fns->elements())
      if (!model.add_functions()->ParseFromString(f.to_string()))
        throw Error(ErrorKind::Value, "meta 'onnx_functions' holds a malformed FunctionProto");

  // The default domain's opset: the module's (or default_opset), pinned or raised below.
  const Argument* ops = meta.find(kOpsetImport);
  if (ops && ops->kind() != Argument::Kind::Dict) ops = nullptr;
  int64_t own = options.default_opset;
  if (ops)
    for (const auto& kv : ops->dict_items())
      if (kv.first.to_string().empty() || kv.first.to_string() == "ai.onnx")
        own = kv.second.to_int();
  Exporter exporter(options);
  exporter.opset = own;
  if (options.opset > 0) {
    if (options.opset < own)
      throw Error(ErrorKind::Value, "export at opset " + std::to_string(options.opset) +
                                        ": the model is opset " + std::to_string(own) +
                                        ", and ops are not converted to older opsets");
    exporter.opset = options.opset;
    exporter.pinned = true;
  }
  // What onnx.checker's schema checks would refuse is refused here, naming the node and rule.
  if (const std::vector<SchemaProblem> problems = check_schemas(gm, exporter.opset);
      !problems.empty()) {
    const SchemaProblem& p = problems.front();
    throw Error(ErrorKind::Schema,
                "node '" + p.node + "' (" + p.target + "): " + p.rule +
                    (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) +
                                               " more; check_schemas() lists them all)"
                                         : std::string()),
                p.node);
  }
  exporter.main_graph = model.mutable_graph();
  exporter.export_graph(gm, model.mutable_graph(), "main_graph");
  const int64_t opset = std::max(exporter.opset, exporter.required_opset);
  if (opset >= 16)
    for (::onnx::NodeProto* p : exporter.old_roi_aligns) {
      bool has = false;
      for (const auto& a : p->attribute())
        has = has || a.name() == "coordinate_transformation_mode";
      if (has) continue;
      auto* a = p->add_attribute();  // the default before opset 16
      a->set_name("coordinate_transformation_mode");
      a->set_type(::onnx::AttributeProto::STRING);
      a->set_s("output_half_pixel");
    }

  std::unordered_set<std::string> have;
  if (ops)
    for (const auto& kv : ops->dict_items()) {
      auto* o = model.add_opset_import();
      const std::string& d = kv.first.to_string();
      o->set_domain(d);
      o->set_version(d.empty() || d == "ai.onnx" ? opset : kv.second.to_int());
      have.insert(d);
    }
  for (const std::string& d : exporter.domains_used)
    if (!have.count(d)) {
      auto* o = model.add_opset_import();
      o->set_domain(d);
      o->set_version(d.empty() ? opset : 1);
      have.insert(d);
    }
  if (!have.count("") && !have.count("ai.onnx")) {
    auto* o = model.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
  }
  serialize_model(model, exporter.deferred, sink);
}

}  // namespace fx::onnx
