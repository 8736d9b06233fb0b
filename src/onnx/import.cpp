// ModelProto -> fx::GraphModule (see include/fx/onnx.h for the mapping).
#include <algorithm>
#include <cctype>
#include <fstream>
#include <limits>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "fx/error.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "onnx/common.h"

namespace fx::onnx {
namespace {

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

bool is_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

// Python keywords and the attributes of nn.Module/GraphModule an attribute must not shadow.
bool is_reserved_atom(const std::string& s) {
  static const std::unordered_set<std::string> reserved = {
      "False",   "None",     "True",     "and",    "as",   "assert",  "async",    "await",
      "break",   "class",    "continue", "def",    "del",  "elif",    "else",     "except",
      "finally", "for",      "from",     "global", "if",   "import",  "in",       "is",
      "lambda",  "nonlocal", "not",      "or",     "pass", "raise",   "return",   "try",
      "while",   "with",     "yield",    "graph",  "code", "forward", "training", "meta"};
  return reserved.count(s) != 0;
}

// "onnx::Conv_193" -> "onnx__Conv_193"; "1x" -> "_1x".
std::string flatten_name(const std::string& name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "_" + out;
  if (is_reserved_atom(out)) out += "_";
  return out;
}

std::vector<std::string> split_dots(const std::string& s) {
  std::vector<std::string> atoms;
  size_t start = 0;
  for (;;) {
    size_t dot = s.find('.', start);
    atoms.push_back(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return atoms;
}

Argument type_to_arg(const ::onnx::TypeProto& t) {
  if (t.has_tensor_type()) {
    const auto& tt = t.tensor_type();
    Argument dtype;
    if (tt.elem_type() != 0) {
      try {
        dtype = dtype_from_onnx(tt.elem_type(), "type");
      } catch (const Error&) {
        dtype = Argument(static_cast<long long>(tt.elem_type()));  // kept as the raw number
      }
    }
    Argument shape;
    if (tt.has_shape()) {
      Argument::Items dims;
      for (const auto& d : tt.shape().dim()) {
        if (d.has_dim_value())
          dims.emplace_back(static_cast<long long>(d.dim_value()));
        else if (d.has_dim_param())
          dims.emplace_back(d.dim_param());
        else
          dims.emplace_back();
      }
      shape = Argument::tuple(std::move(dims));
    }
    return Argument::dict({{"dtype", dtype}, {"shape", shape}});
  }
  // Sequence, map, optional, sparse types: kept verbatim for export.
  return Argument::dict({{"proto", t.SerializeAsString()}});
}

// Names a graph uses but does not define (inputs of its nodes, its outputs and, recursively,
// what its subgraphs use), in first-use order: the values it captures from enclosing graphs.
std::vector<std::string> free_names(const ::onnx::GraphProto& g) {
  std::unordered_set<std::string> defined;
  for (const auto& v : g.input()) defined.insert(v.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) defined.insert(o);
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  auto use = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name) && seen.insert(name).second) out.push_back(name);
  };
  for (const auto& n : g.node()) {
    for (const auto& i : n.input()) use(i);
    for (const auto& a : n.attribute()) {
      if (a.has_g())
        for (const auto& f : free_names(a.g())) use(f);
      for (const auto& sg : a.graphs())
        for (const auto& f : free_names(sg)) use(f);
    }
  }
  for (const auto& o : g.output()) use(o.name());
  return out;
}

struct Scope {
  const Scope* parent = nullptr;
  std::unordered_map<std::string, Node*> values;
  Node* find(const std::string& name) const {
    auto it = values.find(name);
    return it == values.end() ? nullptr : it->second;
  }
};

class Importer {
 public:
  explicit Importer(const ImportOptions& options) : options_(options) {}

  // Builds the GraphModule of `g`. `captured` names, in order, become extra placeholders after
  // the graph's own inputs (a subgraph's outer-scope values).
  std::shared_ptr<GraphModule> import_graph(const ::onnx::GraphProto& g,
                                            const std::vector<std::string>& captured,
                                            const std::string& class_name, int depth) {
    if (depth > 64) throw Error(ErrorKind::Parse, "subgraphs are nested more than 64 deep");
    auto root = std::make_shared<Module>();
    auto graph = std::make_unique<Graph>();
    Scope scope;
    std::unordered_set<std::string> initializer_names;
    for (const auto& t : g.initializer()) initializer_names.insert(t.name());

    auto define = [&](const std::string& name, Node* n, const char* what) {
      if (name.empty()) return;
      if (!scope.values.emplace(name, n).second)
        throw Error(ErrorKind::Parse, std::string(what) + " '" + name +
                                          "' is defined twice in graph '" + g.name() +
                                          "' (ONNX values are assigned once)");
    };
    auto keep_name = [](Node* n, const std::string& onnx_name) {
      if (n->name() != onnx_name) n->meta().set(kName, onnx_name);
    };

    // Graph inputs (initializers listed as inputs too, as IR < 4 models do, stay initializers).
    Argument::Items initializer_inputs;
    for (const auto& v : g.input()) {
      if (initializer_names.count(v.name())) {
        initializer_inputs.emplace_back(v.name());
        continue;
      }
      if (v.name().empty()) throw Error(ErrorKind::Parse, "a graph input has no name");
      // The target is the forward() parameter name: it must be an identifier.
      Node* p = graph->placeholder(flatten_name(v.name()));
      keep_name(p, v.name());
      if (v.has_type()) p->meta().set(kType, type_to_arg(v.type()));
      if (!v.doc_string().empty()) p->meta().set(kDoc, v.doc_string());
      define(v.name(), p, "graph input");
    }
    for (const auto& name : captured) {
      Node* p = graph->placeholder(flatten_name(name));
      p->meta().set(kOuterScope, name);
      define(name, p, "captured value");
    }

    // Initializers: attributes of the module tree + one get_attr node each.
    for (const auto& t : g.initializer()) {
      if (t.name().empty()) throw Error(ErrorKind::Parse, "an initializer has no name");
      Tensor tensor =
          tensor_from_proto(t, "initializer '" + t.name() + "'", options_.external_data);
      // The bytes now live in `tensor`: free the parsed copy at once, so that importing holds
      // about one copy of the weights at a time. The ModelProto is import_model's own object.
      std::string().swap(*const_cast<::onnx::TensorProto&>(t).mutable_raw_data());
      const std::string path = attribute_path(*root, t.name());
      register_tensor(*root, path, std::move(tensor), /*parameter=*/true);
      Node* n = graph->get_attr(path);
      keep_name(n, t.name());
      if (!t.doc_string().empty()) n->meta().set(kDoc, t.doc_string());
      define(t.name(), n, "initializer");
    }
    for (const auto& t : g.sparse_initializer())
      throw Error(ErrorKind::Unsupported,
                  "sparse initializer '" + t.values().name() + "' is not supported");

    // Nodes in a topological order (the file's order when it already is one).
    for (int idx : topological_order(g, scope))
      import_node(g.node(idx), g, *root, *graph, scope, depth);

    // value_info: types of intermediate values.
    for (const auto& v : g.value_info())
      if (Node* n = scope.find(v.name()); n && v.has_type())
        n->meta().set(kType, type_to_arg(v.type()));

    // Outputs.
    Argument::Items outs, names, types, sources;
    for (const auto& v : g.output()) {
      Node* n = scope.find(v.name());
      if (!n)
        throw Error(ErrorKind::Parse, "graph output '" + v.name() +
                                          "' is not produced by any node, input or initializer");
      outs.emplace_back(n);
      names.emplace_back(v.name());
      sources.emplace_back(n->name());
      types.push_back(v.has_type() ? type_to_arg(v.type()) : Argument());
    }
    Node* out = graph->output(outs.size() == 1 ? outs[0] : Argument::tuple(std::move(outs)));
    out->meta().set(kOutputs, Argument::list(std::move(names)));
    out->meta().set(kOutputTypes, Argument::list(std::move(types)));
    out->meta().set(kOutputSources, Argument::list(std::move(sources)));

    auto gm = std::make_shared<GraphModule>(root.get(), std::move(graph), class_name);
    if (!g.name().empty()) gm->meta().set(kGraphName, g.name());
    if (!g.doc_string().empty()) gm->meta().set(kGraphDoc, g.doc_string());
    if (!initializer_inputs.empty())
      gm->meta().set(kInitializerInputs, Argument::list(std::move(initializer_inputs)));
    return gm;
  }

 private:
  // Kahn's algorithm with the file order as priority: a sorted graph keeps its order.
  std::vector<int> topological_order(const ::onnx::GraphProto& g, const Scope& scope) {
    const int n = g.node_size();
    std::unordered_map<std::string, int> producer;
    for (int i = 0; i < n; ++i)
      for (const auto& o : g.node(i).output())
        if (!o.empty() && !producer.emplace(o, i).second)
          throw Error(ErrorKind::Parse, "value '" + o + "' is produced by two nodes ('" +
                                            g.node(producer[o]).name() + "' and '" +
                                            g.node(i).name() + "')");
    std::vector<std::vector<int>> users(n);
    std::vector<int> pending(n, 0);
    auto needs = [&](int i, const std::string& name, bool from_body = false) {
      if (name.empty()) return;
      auto it = producer.find(name);
      if (it != producer.end()) {
        users[it->second].push_back(i);
        ++pending[i];
        return;
      }
      if (scope.find(name)) return;
      for (const Scope* s = scope.parent; s; s = s->parent)
        if (s->find(name)) return;
      throw Error(ErrorKind::Parse,
                  describe(g.node(i)) +
                      (from_body ? ": a body uses '" + name + "', which no enclosing graph defines"
                                 : ": input '" + name +
                                       "' is not produced by any node, graph input or initializer"),
                  g.node(i).name());
    };
    for (int i = 0; i < n; ++i) {
      for (const auto& in : g.node(i).input()) needs(i, in);
      for (const auto& a : g.node(i).attribute()) {
        if (a.has_g())
          for (const auto& f : free_names(a.g())) needs(i, f, true);
        for (const auto& sg : a.graphs())
          for (const auto& f : free_names(sg)) needs(i, f, true);
      }
    }
    std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
    for (int i = 0; i < n; ++i)
      if (pending[i] == 0) ready.push(i);
    std::vector<int> order;
    order.reserve(n);
    while (!ready.empty()) {
      int i = ready.top();
      ready.pop();
      order.push_back(i);
      for (int u : users[i])
        if (--pending[u] == 0) ready.push(u);
    }
    if (static_cast<int>(order.size()) != n) {
      for (int i = 0; i < n; ++i)
        if (pending[i] > 0)
          throw Error(ErrorKind::Parse,
                      "the graph has a cycle: " + describe(g.node(i)) +
                          " depends (through its inputs) on its own output",
                      g.node(i).name());
    }
    return order;
  }

  static std::string describe(const ::onnx::NodeProto& n) {
    return "node '" +
           (n.name().empty() ? (n.output_size() ? n.output(0) : std::string("?")) : n.name()) +
           "' (" + n.op_type() + ")";
  }

  // The attribute path for an initializer/constant named `name`: its dotted form when every
  // atom can be a Python attribute and nothing is in the way, else one sanitised name.
  std::string attribute_path(const Module& root, const std::string& name) {
    std::vector<std::string> atoms = split_dots(name);
    bool ok = !atoms.empty() && is_identifier(atoms[0]) && !is_reserved_atom(atoms[0]);
    for (size_t i = 1; ok && i < atoms.size(); ++i)
      ok = (is_identifier(atoms[i]) || is_digits(atoms[i])) && !is_reserved_atom(atoms[i]);
    if (ok) {
      const Module* m = &root;
      for (size_t i = 0; ok && i + 1 < atoms.size(); ++i) {
        if (m->parameter(atoms[i]) || m->buffer(atoms[i]))
          ok = false;
        else if (auto c = m->child(atoms[i]))
          m = c.get();
        else
          m = nullptr;
        if (!m) break;
      }
      if (ok && m &&
          (m->parameter(atoms.back()) || m->buffer(atoms.back()) || m->child(atoms.back())))
        ok = false;
      if (ok) return name;
    }
    const std::string base = flatten_name(name);
    std::string cand = base;
    for (int k = 1; root.attr_kind(cand) != 0; ++k) cand = base + "_" + std::to_string(k);
    return cand;
  }

  static void register_tensor(Module& root, const std::string& path, Tensor t, bool parameter) {
    std::vector<std::string> atoms = split_dots(path);
    Module* m = &root;
    for (size_t i = 0; i + 1 < atoms.size(); ++i) {
      std::shared_ptr<Module> c = m->child(atoms[i]);
      if (!c) {
        c = std::make_shared<Module>();
        m->add_module(atoms[i], c);
      }
      m = c.get();
    }
    const bool floating = t.dtype == Dtype::Float32 || t.dtype == Dtype::Float64 ||
                          t.dtype == Dtype::Float16 || t.dtype == Dtype::BFloat16;
    if (parameter && floating)
      m->register_parameter(atoms.back(), std::move(t));
    else
      m->register_buffer(atoms.back(), std::move(t));
  }

  std::string unique_child(const Module& root, const std::string& hint) {
    const std::string base = flatten_name(hint);
    std::string cand = base;
    for (int k = 1; root.attr_kind(cand) != 0; ++k) cand = base + "_" + std::to_string(k);
    return cand;
  }

  // One attribute as a kwarg value; tensors and graphs become get_attr nodes.
  Argument attribute_value(const ::onnx::AttributeProto& a, const ::onnx::NodeProto& n,
                           const ::onnx::GraphProto& g, Module& root, Graph& graph,
                           const Scope& scope, int depth, Node*& subgraph_anchor,
                           Kwargs& tensor_attrs, Kwargs& attr_types) {
    using A = ::onnx::AttributeProto;
    const std::string what = describe(n) + ": attribute '" + a.name() + "'";
    int type = a.type();
    if (type == A::UNDEFINED) {  // old models: infer from the field that is set
      if (a.has_f())
        type = A::FLOAT;
      else if (a.has_i())
        type = A::INT;
      else if (a.has_s())
        type = A::STRING;
      else if (a.has_t())
        type = A::TENSOR;
      else if (a.has_g())
        type = A::GRAPH;
      else if (a.floats_size())
        type = A::FLOATS;
      else if (a.ints_size())
        type = A::INTS;
      else if (a.strings_size())
        type = A::STRINGS;
      else
        throw Error(ErrorKind::Parse, what + " has no type and no value", n.name());
    }
    switch (type) {
      case A::FLOAT:
        return Argument(static_cast<double>(a.f()));
      case A::INT:
        return Argument(static_cast<long long>(a.i()));
      case A::STRING:
        return Argument(a.s());
      case A::FLOATS:
      case A::INTS:
      case A::STRINGS: {
        Argument::Items items;
        if (type == A::FLOATS)
          for (float f : a.floats()) items.emplace_back(static_cast<double>(f));
        if (type == A::INTS)
          for (int64_t i : a.ints()) items.emplace_back(static_cast<long long>(i));
        if (type == A::STRINGS)
          for (const auto& s : a.strings()) items.emplace_back(s);
        if (items.empty())
          attr_types.set(a.name(), type == A::FLOATS ? "FLOATS"
                                   : type == A::INTS ? "INTS"
                                                     : "STRINGS");
        return Argument::list(std::move(items));
      }
      case A::TENSOR: {
        Tensor t = tensor_from_proto(a.t(), what, options_.external_data);
        // One-element tensors of common types read better as scalars (ConstantOfShape value).
        if (t.data && t.numel() == 1 &&
            (t.dtype == Dtype::Float32 || t.dtype == Dtype::Int64 || t.dtype == Dtype::Bool ||
             t.dtype == Dtype::Float64 || t.dtype == Dtype::Int32)) {
          Argument::Items dims;
          for (int64_t d : t.shape) dims.emplace_back(static_cast<long long>(d));
          tensor_attrs.set(a.name(), Argument::dict({{"dtype", t.dtype},
                                                     {"shape", Argument::tuple(std::move(dims))},
                                                     {"name", a.t().name()}}));
          const uint8_t* p = t.data->data();
          switch (t.dtype) {
            case Dtype::Float32:
              return Argument(static_cast<double>(*reinterpret_cast<const float*>(p)));
            case Dtype::Float64:
              return Argument(*reinterpret_cast<const double*>(p));
            case Dtype::Int64:
              return Argument(static_cast<long long>(*reinterpret_cast<const int64_t*>(p)));
            case Dtype::Int32:
              return Argument(static_cast<long long>(*reinterpret_cast<const int32_t*>(p)));
            default:
              return Argument(*p != 0);
          }
        }
        return tensor_node(std::move(t), n, a.name(), root, graph);
      }
      case A::TENSORS: {
        Argument::Items items;
        for (int i = 0; i < a.tensors_size(); ++i)
          items.push_back(tensor_node(tensor_from_proto(a.tensors(i), what, options_.external_data),
                                      n, a.name() + "_" + std::to_string(i), root, graph));
        return Argument::list(std::move(items));
      }
      case A::GRAPH:
        return graph_node(a.g(), n, a.name(), root, graph, scope, depth, subgraph_anchor);
      case A::GRAPHS: {
        Argument::Items items;
        for (int i = 0; i < a.graphs_size(); ++i)
          items.push_back(graph_node(a.graphs(i), n, a.name() + "_" + std::to_string(i), root,
                                     graph, scope, depth, subgraph_anchor));
        return Argument::list(std::move(items));
      }
      case A::TYPE_PROTO:  // Optional's 'type': the same form as a value's type
        return type_to_arg(a.tp());
      default:
        throw Error(ErrorKind::Unsupported,
                    what + " has type " + std::to_string(type) +
                        " (sparse tensors and type protos are not supported)",
                    n.name());
    }
    (void)g;
  }

  Node* tensor_node(Tensor t, const ::onnx::NodeProto& n, const std::string& attr, Module& root,
                    Graph& graph) {
    const std::string path =
        unique_child(root, (n.name().empty() ? n.op_type() : n.name()) + "_" + attr);
    register_tensor(root, path, std::move(t), false);
    return graph.get_attr(path);
  }

  Argument graph_node(const ::onnx::GraphProto& body, const ::onnx::NodeProto& n,
                      const std::string& attr, Module& root, Graph& graph, const Scope& scope,
                      int depth, Node*& anchor) {
    (void)anchor;
    std::vector<std::string> captured = free_names(body);
    // Every captured name must resolve somewhere outside.
    for (const auto& c : captured) {
      bool found = scope.find(c) != nullptr;
      for (const Scope* s = scope.parent; !found && s; s = s->parent) found = s->find(c) != nullptr;
      if (!found)
        throw Error(ErrorKind::Parse,
                    describe(n) + ": its '" + attr + "' body uses '" + c +
                        "', which no enclosing graph defines",
                    n.name());
    }
    std::shared_ptr<GraphModule> sub = import_graph(body, captured, "OnnxSubgraph", depth + 1);
    const std::string path =
        unique_child(root, (n.name().empty() ? n.op_type() : n.name()) + "_" + attr);
    root.add_module(path, sub);
    captures_.push_back(std::move(captured));
    return Argument(graph.get_attr(path));
  }

  void import_node(const ::onnx::NodeProto& n, const ::onnx::GraphProto& g, Module& root,
                   Graph& graph, Scope& scope, int depth) {
    if (n.op_type().empty())
      throw Error(ErrorKind::Parse, describe(n) + " has no op_type", n.name());
    for (const auto& o : n.output())
      if (!o.empty() && scope.find(o))
        throw Error(
            ErrorKind::Parse,
            describe(n) + ": output '" + o + "' is already defined (ONNX values are assigned once)",
            n.name());
    auto lookup = [&](const std::string& name) -> Argument {
      if (name.empty()) return Argument();
      if (Node* v = scope.find(name)) return Argument(v);
      throw Error(ErrorKind::Parse, describe(n) + ": input '" + name + "' is not defined",
                  n.name());
    };

    // Constant -> a buffer + get_attr (exported again as a Constant node).
    const bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
    if (default_domain && n.op_type() == "Constant" && n.output_size() == 1 &&
        n.input_size() == 0 && n.attribute_size() == 1) {
      if (Node* c = import_constant(n, root, graph)) {
        scope.values.emplace(n.output(0), c);
        return;
      }
    }

    std::vector<Argument> args;
    for (const auto& in : n.input()) args.push_back(lookup(in));
    Kwargs kwargs, tensor_attrs, attr_types;
    // Bodies imported below run import_node recursively: keep the enclosing node's list aside.
    std::vector<std::vector<std::string>> enclosing;
    std::swap(enclosing, captures_);
    Node* anchor = nullptr;
    for (const auto& a : n.attribute()) {
      if (a.name().empty())
        throw Error(ErrorKind::Parse, describe(n) + ": an attribute has no name", n.name());
      if (!a.ref_attr_name().empty())
        throw Error(ErrorKind::Unsupported,
                    describe(n) + ": attribute '" + a.name() + "' refers to a function attribute",
                    n.name());
      kwargs.set(a.name(), attribute_value(a, n, g, root, graph, scope, depth, anchor, tensor_attrs,
                                           attr_types));
    }
    // Values the bodies capture become extra trailing args (in first-use order, once each).
    std::vector<std::string> captured;
    for (const auto& list : captures_)
      for (const auto& c : list)
        if (std::find(captured.begin(), captured.end(), c) == captured.end()) captured.push_back(c);
    for (const auto& c : captured) args.push_back(lookup(c));
    std::swap(enclosing, captures_);

    const std::string target =
        default_domain ? "onnx." + n.op_type() : "onnx." + n.domain() + "." + n.op_type();
    Node* node;
    try {
      node = graph.call_function(Function(target), std::move(args), std::move(kwargs));
    } catch (const Error& e) {
      throw Error(ErrorKind::Parse, describe(n) + ": " + e.what(), n.name());
    }
    if (!n.name().empty()) node->meta().set(kName, n.name());
    Argument::Items outs;
    for (const auto& o : n.output()) outs.emplace_back(o);
    node->meta().set(kOutputs, Argument::list(std::move(outs)));
    if (!default_domain) node->meta().set(kDomain, n.domain());
    if (!n.doc_string().empty()) node->meta().set(kDoc, n.doc_string());
    if (!captured.empty()) {
      node->meta().set(kNumInputs, static_cast<long long>(n.input_size()));
      Argument::Items names;
      for (const auto& c : captured) names.emplace_back(c);
      node->meta().set(kCaptures, Argument::list(std::move(names)));
    }
    if (!tensor_attrs.empty())
      node->meta().set(kTensorAttrs, Argument::dict(to_dict(tensor_attrs)));
    if (!attr_types.empty()) node->meta().set(kAttrTypes, Argument::dict(to_dict(attr_types)));

    if (n.output_size() == 1) {
      if (!n.output(0).empty()) scope.values.emplace(n.output(0), node);
      return;
    }
    for (int i = 0; i < n.output_size(); ++i) {
      if (n.output(i).empty()) continue;
      Node* item = graph.call_function(Function("operator.getitem"), {node, i});
      scope.values.emplace(n.output(i), item);
    }
  }

  static Argument::DictItems to_dict(const Kwargs& k) {
    Argument::DictItems items;
    for (const auto& kv : k) items.emplace_back(kv.first, kv.second);
    return items;
  }

  Node* import_constant(const ::onnx::NodeProto& n, Module& root, Graph& graph) {
    const auto& a = n.attribute(0);
    Tensor t;
    const std::string what = describe(n);
    if (a.name() == "value" && a.has_t()) {
      t = tensor_from_proto(a.t(), what, options_.external_data);
    } else {
      return nullptr;  // value_float/value_ints/...: an ordinary onnx.Constant node
    }
    const std::string path = attribute_path(root, n.output(0));
    register_tensor(root, path, std::move(t), false);
    Node* c = graph.get_attr(path);
    c->meta().set(kConstant, true);
    if (c->name() != n.output(0)) c->meta().set(kName, n.output(0));
    if (!n.name().empty()) c->meta().set(kNodeName, n.name());
    if (!a.t().name().empty()) c->meta().set(kTensorName, a.t().name());
    return c;
  }

  const ImportOptions& options_;
  std::vector<std::vector<std::string>> captures_;  // per graph attribute of the current node
};

}  // namespace

namespace {

void parse_model(const uint8_t* data, size_t size, ::onnx::ModelProto& model) {
  if (size == 0) throw Error(ErrorKind::Parse, "not an ONNX model: the input is empty");
  if (size > static_cast<size_t>(std::numeric_limits<int>::max()))
    throw Error(ErrorKind::Unsupported,
                "the model is larger than 2 GB: store its weights as external data");
  if (!model.ParseFromArray(data, static_cast<int>(size)))
    throw Error(ErrorKind::Parse,
                "not an ONNX model: protobuf cannot parse the " + std::to_string(size) +
                    " bytes as onnx.ModelProto (truncated, corrupted or another format)");
}

std::unique_ptr<GraphModule> import_parsed(::onnx::ModelProto& model, const ImportOptions& options);

}  // namespace

std::unique_ptr<GraphModule> import_model(const uint8_t* data, size_t size,
                                          const ImportOptions& options) {
  ::onnx::ModelProto model;
  parse_model(data, size, model);
  return import_parsed(model, options);
}

std::unique_ptr<GraphModule> import_model(std::vector<uint8_t>&& bytes,
                                          const ImportOptions& options) {
  ::onnx::ModelProto model;
  parse_model(bytes.data(), bytes.size(), model);
  std::vector<uint8_t>().swap(bytes);  // the file's bytes are no longer needed
  return import_parsed(model, options);
}

// protobuf's view of a ChunkReader.
namespace {

class ChunkStream : public google::protobuf::io::CopyingInputStream {
 public:
  explicit ChunkStream(const ChunkReader& read) : read_(read) {}
  int Read(void* buffer, int size) override {
    const size_t n = read_(static_cast<uint8_t*>(buffer), static_cast<size_t>(size));
    total_ += n;
    return static_cast<int>(n);
  }
  size_t total() const { return total_; }

 private:
  const ChunkReader& read_;
  size_t total_ = 0;
};

}  // namespace

std::unique_ptr<GraphModule> import_model_stream(const ChunkReader& read,
                                                 const ImportOptions& options) {
  ::onnx::ModelProto model;
  ChunkStream stream(read);
  bool ok;
  {
    google::protobuf::io::CopyingInputStreamAdaptor input(&stream, 1 << 20);
    ok = model.ParseFromZeroCopyStream(&input);
  }
  if (stream.total() == 0) throw Error(ErrorKind::Parse, "not an ONNX model: the input is empty");
  if (!ok)
    throw Error(ErrorKind::Parse,
                "not an ONNX model: protobuf cannot parse the " + std::to_string(stream.total()) +
                    " bytes as onnx.ModelProto (truncated, corrupted or another format)");
  return import_parsed(model, options);
}

namespace {

// A missing opset_import is an error (ONNX requires one; which Reshape or Pad is meant would be
// a guess). An opset newer than the importer knows is a warning or an error (options).
std::vector<std::string> check_opsets(const ::onnx::ModelProto& model,
                                      const ImportOptions& options) {
  if (model.opset_import_size() == 0)
    throw Error(ErrorKind::Parse,
                "the ONNX model has no opset_import: ONNX requires one to say which operator "
                "versions the graph uses (add opset_import {domain: \"\", version: N})");
  std::vector<std::string> warnings;
  for (const auto& o : model.opset_import()) {
    const std::string& domain = o.domain();
    const bool is_default = domain.empty() || domain == "ai.onnx";
    if (o.version() < 1)
      throw Error(ErrorKind::Parse, "opset_import of domain '" + domain + "' has version " +
                                        std::to_string(o.version()) + " (must be >= 1)");
    const int64_t known = is_default               ? kMaxKnownOpset
                          : domain == "ai.onnx.ml" ? kMaxKnownMlOpset
                                                   : 0;  // custom domains: not checked
    if (known == 0 || o.version() <= known) continue;
    const std::string msg = "opset " + std::to_string(o.version()) + " of domain '" +
                            (is_default ? std::string("ai.onnx") : domain) +
                            "' is newer than fxwasm knows (" + std::to_string(known) +
                            "): operators may have changed meaning since";
    if (options.opset_check == ImportOptions::OpsetCheck::Error)
      throw Error(ErrorKind::Unsupported, msg + " (opset check 'error')");
    warnings.push_back(msg);
  }
  return warnings;
}

std::unique_ptr<GraphModule> import_parsed(::onnx::ModelProto& model,
                                           const ImportOptions& options) {
  if (!model.has_graph())
    throw Error(ErrorKind::Parse, "the ONNX model has no graph (ModelProto.graph is missing)");
  // Before the graph: which operator semantics apply depends on the opsets.
  const std::vector<std::string> warnings = check_opsets(model, options);

  Importer importer(options);
  std::shared_ptr<GraphModule> shared = importer.import_graph(model.graph(), {}, "OnnxModule", 0);
  // The root GraphModule is handed out as a unique_ptr: rebuild it from the shared one's parts.
  auto gm = std::make_unique<GraphModule>(shared.get(), shared->graph().clone(), "OnnxModule");
  gm->meta() = shared->meta();
  Kwargs& meta = gm->meta();
  meta.set(kIrVersion, static_cast<long long>(model.ir_version()));
  Argument::DictItems opsets;
  for (const auto& o : model.opset_import())
    opsets.emplace_back(o.domain(), static_cast<long long>(o.version()));
  const Argument opset_dict = Argument::dict(std::move(opsets));
  meta.set(kOpsetImport, opset_dict);
  if (!warnings.empty()) {
    Argument::Items items(warnings.begin(), warnings.end());
    meta.set(kImportWarnings, Argument::list(std::move(items)));
  }
  // Bodies run with the model's opsets too.
  for (const auto& [path, m] : gm->named_modules())
    if (!path.empty())
      if (auto* body = dynamic_cast<GraphModule*>(const_cast<Module*>(m)))
        body->meta().set(kOpsetImport, opset_dict);
  if (!model.producer_name().empty()) meta.set(kProducerName, model.producer_name());
  if (!model.producer_version().empty()) meta.set(kProducerVersion, model.producer_version());
  if (!model.domain().empty()) meta.set(kDomain, model.domain());
  if (model.has_model_version())
    meta.set(kModelVersion, static_cast<long long>(model.model_version()));
  if (!model.doc_string().empty()) meta.set(kDoc, model.doc_string());
  if (model.metadata_props_size()) {
    Argument::DictItems props;
    for (const auto& kv : model.metadata_props()) props.emplace_back(kv.key(), kv.value());
    meta.set(kMetadataProps, Argument::dict(std::move(props)));
  }
  if (model.functions_size()) {
    Argument::Items fns;
    for (const auto& f : model.functions()) fns.emplace_back(f.SerializeAsString());
    meta.set(kFunctions, Argument::list(std::move(fns)));
  }
  return gm;
}

}  // namespace

std::unique_ptr<GraphModule> load_model(const std::string& path, ImportOptions options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::Value, "cannot open '" + path + "'");
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
  if (!options.external_data) options.external_data = folder_reader(dir);
  // Streamed from the file, so its bytes are never all in memory beside the parsed model: the
  // peak is about one copy of the weights (a 346 MB ViT-B/16 peaked at 2x when read whole).
  return import_model_stream(
      [&](uint8_t* buffer, size_t size) -> size_t {
        in.read(reinterpret_cast<char*>(buffer), static_cast<std::streamsize>(size));
        if (in.bad()) throw Error(ErrorKind::Value, "cannot read '" + path + "'");
        return static_cast<size_t>(in.gcount());
      },
      options);
}

}  // namespace fx::onnx
