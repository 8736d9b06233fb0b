// fx::split_module — torch.fx.passes.split_module.split_module (torch 1.13), step by step.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "fx/passes.h"
#include "passes/internal.h"

namespace fx {

namespace detail {

AttrValue get_attr_value(const Module& m, const std::string& target, const std::string& node,
                         const std::string& message) {
  AttrValue v;
  switch (m.attr_kind(target)) {
    case 'm':
      v.module = m.get_submodule(target);
      return v;
    case 'p':
      v.tensor = m.get_tensor(target);
      v.is_parameter = true;
      return v;
    case 'b':
      v.tensor = m.get_tensor(target);
      return v;
    default:
      throw Error(ErrorKind::Attribute, message + " (node '" + node + "')", node);
  }
}

void assign_attr(Module& to, const std::string& target, const AttrValue& value) {
  Module* cur = &to;
  size_t start = 0;
  for (size_t dot; (dot = target.find('.', start)) != std::string::npos; start = dot + 1) {
    const std::string atom = target.substr(start, dot - start);
    std::shared_ptr<Module> c = cur->child(atom);
    if (!c) {
      c = std::make_shared<Module>();
      cur->add_module(atom, c);
    }
    cur = c.get();
  }
  const std::string field = target.substr(start);
  if (value.module) {
    cur->add_module(field, value.module);
  } else if (value.is_parameter) {
    cur->register_parameter(field, *value.tensor);
  } else {
    cur->register_buffer(field, *value.tensor);
  }
}

size_t count_dots(const std::string& s) { return std::count(s.begin(), s.end(), '.'); }

}  // namespace detail

namespace {

// A Python dict used as an ordered set of names.
struct NameSet {
  std::vector<std::string> items;
  std::unordered_set<std::string> seen;
  void add(const std::string& s) {
    if (seen.insert(s).second) items.push_back(s);
  }
  void erase(const std::string& s) {
    if (seen.erase(s)) items.erase(std::find(items.begin(), items.end(), s));
  }
  bool empty() const { return items.empty(); }
  size_t size() const { return items.size(); }
};

struct Partition {
  std::string name;  // str(split_callback(node))
  std::string submod_name;
  NameSet inputs, outputs, dependent_on, dependents;
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
  std::unordered_map<const Node*, Node*> env;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> targets;  // dict: joined -> module
};

std::string join_atoms(const std::string& target) {
  std::string s = target;
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
}

}  // namespace

std::unique_ptr<GraphModule> split_module(const GraphModule& gm, const Module* /*root*/,
                                          const SplitCallback& split_callback,
                                          QualnameMap* qualname_map, bool keep_original_order) {
  if (!split_callback) throw Error(ErrorKind::Value, "split_module: split_callback is null");
  const Graph& g = gm.graph();
  std::vector<Partition> parts;
  std::unordered_map<std::string, size_t> part_index;
  std::unordered_map<const Node*, size_t> part_of;
  std::unordered_map<std::string, Node*> orig_nodes;

  auto record = [&](const Node* def, const Node* use) {
    auto d = part_of.find(def);
    auto u = use ? part_of.find(use) : part_of.end();
    const size_t dp = d == part_of.end() ? SIZE_MAX : d->second;
    const size_t up = u == part_of.end() ? SIZE_MAX : u->second;
    if (dp == up) return;
    if (dp != SIZE_MAX) {
      parts[dp].outputs.add(def->name());
      if (up != SIZE_MAX) parts[dp].dependents.add(parts[up].name);
    }
    if (up != SIZE_MAX) {
      parts[up].inputs.add(def->name());
      if (dp != SIZE_MAX) parts[up].dependent_on.add(parts[dp].name);
    }
  };

  // Split the nodes into partitions (placeholders and get_attr stay outside).
  for (Node* node : g.nodes()) {
    orig_nodes[node->name()] = node;
    if (node->op() == Opcode::Placeholder || node->op() == Opcode::GetAttr) continue;
    if (node->op() == Opcode::Output) {
      if (!node->args().empty())
        node->args()[0].for_each_node([&](Node* n) { record(n, nullptr); });
      continue;
    }
    const std::string name = std::to_string(split_callback(node));
    auto it = part_index.find(name);
    if (it == part_index.end()) {
      it = part_index.emplace(name, parts.size()).first;
      parts.emplace_back();
      parts.back().name = name;
      parts.back().submod_name = "submod_" + name;
    }
    part_of[node] = it->second;
    for (const Argument& a : node->args()) a.for_each_node([&](Node* d) { record(d, node); });
    for (const auto& kv : node->kwargs())
      kv.second.for_each_node([&](Node* d) { record(d, node); });
  }

  // Topological order of partitions (a stack of roots, as torch pops the last one first).
  std::vector<size_t> roots, sorted;
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i].dependent_on.empty()) roots.push_back(i);
  while (!roots.empty()) {
    const size_t r = roots.back();
    roots.pop_back();
    sorted.push_back(r);
    for (const std::string& dep : parts[r].dependents.items) {
      Partition& d = parts[part_index.at(dep)];
      d.dependent_on.erase(parts[r].name);
      if (d.dependent_on.empty()) roots.push_back(part_index.at(dep));
    }
  }
  if (sorted.size() != parts.size())
    throw Error(ErrorKind::Runtime, "cycle exists between partitions!");

  // Placeholders of each partition.
  for (size_t pi : sorted) {
    Partition& p = parts[pi];
    for (const std::string& in : p.inputs.items) {
      Node* ph = p.graph->placeholder(in);
      const Node* orig = orig_nodes.at(in);
      ph->meta() = orig->meta();
      p.env[orig] = ph;
    }
  }

  // Copy the nodes into their partitions.
  for (Node* node : g.nodes()) {
    auto pit = part_of.find(node);
    if (pit == part_of.end()) continue;
    Partition& p = parts[pit->second];
    auto lookup = [&](Node* n) -> Argument {
      auto e = p.env.find(n);
      FX_CHECK(e != p.env.end(), "split_module: no value for " + n->name());
      return e->second;
    };
    std::vector<Argument> args;
    args.reserve(node->args().size());
    for (const Argument& a : node->args()) args.push_back(a.map_nodes(lookup));
    Kwargs kwargs;
    for (const auto& kv : node->kwargs()) kwargs.set(kv.first, kv.second.map_nodes(lookup));
    Target target = node->target();
    if (node->op() == Opcode::CallModule) {
      const std::string& old = node->target().str();
      detail::AttrValue v =
          detail::get_attr_value(gm, old, node->name(), "Operator target " + old + " not found!");
      if (!v.module)
        throw Error(ErrorKind::Value,
                    "split_module: call_module node '" + node->name() + "' targets '" + old +
                        "', which is a tensor, not a module",
                    node->name());
      const std::string joined = join_atoms(old);
      target = joined;
      bool found = false;
      for (auto& kv : p.targets)
        if (kv.first == joined) {
          kv.second = v.module;
          found = true;
        }
      if (!found) p.targets.emplace_back(joined, v.module);
      if (qualname_map) {
        const std::string q = p.submod_name + "." + joined;
        bool set = false;
        for (auto& kv : *qualname_map)
          if (kv.first == q) {
            kv.second = old;
            set = true;
          }
        if (!set) qualname_map->emplace_back(q, old);
      }
    }
    Node* nn = p.graph->create_node(node->op(), target, std::move(args), std::move(kwargs));
    nn->meta() = node->meta();
    p.env[node] = nn;
  }

  // The base module: placeholders and get_attr nodes in their original order.
  auto base = std::make_unique<Graph>();
  std::unordered_map<std::string, Node*> base_env;
  std::vector<std::pair<std::string, detail::AttrValue>> base_attrs;
  for (Node* node : g.nodes()) {
    if (node->op() == Opcode::Placeholder) {
      std::optional<Argument> dflt;
      if (!node->args().empty()) dflt = node->args()[0];
      Node* ph = base->placeholder(node->target().str(), node->type(), dflt);
      ph->meta() = node->meta();
      base_env[node->name()] = ph;
    } else if (node->op() == Opcode::GetAttr) {
      const std::string& t = node->target().str();
      Node* ga = base->get_attr(t);
      ga->meta() = node->meta();
      base_env[node->name()] = ga;
      base_attrs.emplace_back(
          t, detail::get_attr_value(gm, t, node->name(), "Node target " + t + " not found!"));
    }
  }

  std::vector<size_t> order = sorted;
  if (keep_original_order) {
    order.clear();
    for (size_t i = 0; i < parts.size(); ++i) order.push_back(i);
  }
  std::vector<std::pair<std::string, std::unique_ptr<GraphModule>>> submods;
  for (size_t pi : order) {
    Partition& p = parts[pi];
    std::vector<Argument> outs;
    for (const std::string& name : p.outputs.items)
      outs.emplace_back(p.env.at(orig_nodes.at(name)));
    p.graph->output(outs.size() == 1 ? outs[0] : Argument::tuple(outs));
    Module holder;
    for (const auto& kv : p.targets) holder.add_module(kv.first, kv.second);
    auto sub = std::make_unique<GraphModule>(&holder, std::move(p.graph));

    std::vector<Argument> call_args;
    for (const std::string& in : p.inputs.items) {
      auto e = base_env.find(in);
      if (e == base_env.end())
        throw Error(ErrorKind::Graph,
                    "split_module: " + p.submod_name + " uses '" + in +
                        "' from a partition that comes later in the original order "
                        "(keep_original_order needs partitions in dependency order)",
                    in);
      call_args.emplace_back(e->second);
    }
    Node* call = base->call_module(p.submod_name, std::move(call_args));
    if (p.outputs.size() > 1) {
      for (size_t i = 0; i < p.outputs.size(); ++i)
        base_env[p.outputs.items[i]] =
            base->call_function(fn("operator.getitem"), {call, static_cast<int64_t>(i)});
    } else if (p.outputs.size() == 1) {
      base_env[p.outputs.items[0]] = call;
    }
    submods.emplace_back(p.submod_name, std::move(sub));
  }
  if (Node* out = g.output_node()) {
    Argument result = out->args().empty() ? Argument() : out->args()[0];
    base->output(result.map_nodes([&](Node* n) -> Argument { return base_env.at(n->name()); }));
  }

  // torch.fx.GraphModule(dict, graph): attributes in graph order, stable-sorted by depth.
  std::vector<std::pair<std::string, detail::AttrValue>> attrs = std::move(base_attrs);
  for (auto& kv : submods) {
    detail::AttrValue v;
    v.module = std::shared_ptr<Module>(std::move(kv.second));
    attrs.emplace_back(kv.first, std::move(v));
  }
  std::vector<std::pair<std::string, const detail::AttrValue*>> to_copy;
  for (Node* node : base->nodes()) {
    if (node->op() != Opcode::GetAttr && node->op() != Opcode::CallModule) continue;
    for (const auto& kv : attrs)
      if (kv.first == node->target().str()) to_copy.emplace_back(kv.first, &kv.second);
  }
  std::stable_sort(to_copy.begin(), to_copy.end(), [](const auto& a, const auto& b) {
    return detail::count_dots(a.first) < detail::count_dots(b.first);
  });
  auto result = std::make_unique<GraphModule>(nullptr, std::make_unique<Graph>());
  for (const auto& kv : to_copy) detail::assign_attr(*result, kv.first, *kv.second);
  result->set_graph(std::move(base));
  return result;
}

}  // namespace fx
