// Golden tests: every case of scripts/gen_goldens.py rebuilt through the C++ API and compared byte
// for byte with what the real torch.fx 1.13 printed (tests/golden/, regenerate with
// `/usr/bin/python3 scripts/gen_goldens.py`). Per case NAME:
//   NAME.graph.txt            g.str()
//   NAME.graph_num_users.txt  g.str(fx::UsersToken::NumUsers)
//   NAME.tabular.txt          g.tabular() + "\n" (print() adds it), addresses masked
//   NAME.code.py              GraphModule::code() / g.python_code().src
//   NAME.extra.txt            `-- key\nvalue\n` items the case records (errors, users, ...)
// Each GOLDEN_CASE below mirrors the Python function of the same name node by node.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fx/fx.h"

#ifndef FXWASM_GOLDEN_DIR
#define FXWASM_GOLDEN_DIR "tests/golden"
#endif

namespace {

using fx::Argument;
using fx::fn;
using fx::Kwargs;
using fx::Node;
using fx::Opcode;

const double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::numeric_limits<double>::quiet_NaN();

// ---------------------------------------------------------------------------------------------
// Harness.

struct Case {
  // Declared first so they are destroyed last: graphs whose nodes the case graph refers to.
  std::vector<std::unique_ptr<fx::Graph>> keep;
  std::unique_ptr<fx::Graph> graph;     // the case graph when there is no GraphModule
  std::unique_ptr<fx::GraphModule> gm;  // owns the case graph otherwise
  std::vector<std::pair<std::string, std::string>> extra;
  fx::CodegenOptions options;

  fx::Graph& g() { return gm ? gm->graph() : *graph; }
  void add(const std::string& key, const std::string& value) { extra.emplace_back(key, value); }
};
using Builder = void (*)(Case&);

std::map<std::string, Builder>& registry() {
  static std::map<std::string, Builder> r;
  return r;
}
struct Registrar {
  Registrar(const char* name, Builder b) { registry()[name] = b; }
};

std::string golden_path(const std::string& file) {
  return std::string(FXWASM_GOLDEN_DIR) + "/" + file;
}

bool read_file(const std::string& path, std::string& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  out = ss.str();
  return true;
}

bool is_hex_lower(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// Python: re.sub(r"0x[0-9a-f]+", "0x000000000000", text).
std::string mask_addresses(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '0' && i + 2 < s.size() && s[i + 1] == 'x' && is_hex_lower(s[i + 2])) {
      size_t j = i + 2;
      while (j < s.size() && is_hex_lower(s[j])) ++j;
      out += "0x000000000000";
      i = j;
    } else {
      out += s[i++];
    }
  }
  return out;
}

std::string visible(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else
      out += static_cast<char>(c);
  }
  return out;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (;;) {
    size_t nl = s.find('\n', start);
    if (nl == std::string::npos) {
      lines.push_back(s.substr(start));
      return lines;
    }
    lines.push_back(s.substr(start, nl - start));
    start = nl + 1;
  }
}

// Compares `actual` with the golden file; on mismatch reports the first differing line.
void expect_golden(const std::string& file, const std::string& actual) {
  std::string expected;
  if (!read_file(golden_path(file), expected)) {
    ADD_FAILURE() << "cannot read golden file " << golden_path(file)
                  << " (regenerate with /usr/bin/python3 scripts/gen_goldens.py)";
    return;
  }
  if (expected == actual) return;
  std::vector<std::string> e = split_lines(expected), a = split_lines(actual);
  size_t i = 0;
  while (i < e.size() && i < a.size() && e[i] == a[i]) ++i;
  std::ostringstream msg;
  msg << file << " differs from the golden (" << expected.size() << " bytes expected, "
      << actual.size() << " bytes actual); first difference at line " << (i + 1) << ":\n";
  if (i > 0) msg << "   context : " << visible(e[i - 1]) << "\n";
  msg << "   expected: "
      << (i < e.size() ? "\"" + visible(e[i]) + "\"" : std::string("<end of file>")) << "\n";
  msg << "   actual  : "
      << (i < a.size() ? "\"" + visible(a[i]) + "\"" : std::string("<end of output>")) << "\n";
  if (i < e.size() && i < a.size()) {
    size_t col = 0;
    while (col < e[i].size() && col < a[i].size() && e[i][col] == a[i][col]) ++col;
    msg << "   (column " << (col + 1) << ")\n";
  }
  msg << "--- full actual output ---\n" << actual << "\n--- end ---";
  ADD_FAILURE() << msg.str();
}

std::string format_extra(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::string out;
  for (const auto& kv : extra) out += "-- " + kv.first + "\n" + mask_addresses(kv.second) + "\n";
  return out;
}

// Runs the builder and compares all outputs; returns false if the builder threw.
void run_case(const std::string& name, Builder build) {
  Case c;
  try {
    build(c);
  } catch (const std::exception& e) {
    FAIL() << "building case " << name << " threw: " << e.what();
  }
  fx::Graph& g = c.g();
  std::string code;
  try {
    if (c.gm) {
      c.gm->codegen_options() = c.options;
      c.gm->recompile();
      code = c.gm->code();
      EXPECT_EQ(code, g.python_code("self", c.options).src)
          << "GraphModule::code() != python_code()";
    } else {
      code = g.python_code("self", c.options).src;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "codegen of case " << name << " threw: " << e.what();
  }
  expect_golden(name + ".graph.txt", g.str());
  expect_golden(name + ".graph_num_users.txt", g.str(fx::UsersToken::NumUsers));
  expect_golden(name + ".tabular.txt", mask_addresses(g.tabular() + "\n"));
  expect_golden(name + ".code.py", code);
  if (!c.extra.empty()) expect_golden(name + ".extra.txt", format_extra(c.extra));
}

#define GOLDEN_CASE(name)                                 \
  void build_##name(Case& c);                             \
  const Registrar registrar_##name(#name, &build_##name); \
  TEST(Golden, name) { run_case(#name, &build_##name); }  \
  void build_##name(Case& c)

// ---- small helpers ----

std::string names(const std::vector<Node*>& nodes) {
  std::string out = "[";
  for (size_t i = 0; i < nodes.size(); ++i) out += (i ? ", " : "") + nodes[i]->name();
  return out + "]";
}
std::string names(const fx::UserSet& users) { return names(users.list()); }
std::string names(const fx::Graph& g) { return names(g.nodes().to_vector()); }
std::string py_bool(bool b) { return b ? "True" : "False"; }

std::string error_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const fx::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an fx::Error";
  return "<no error>";
}

Argument T(Argument::Items items) { return Argument::tuple(std::move(items)); }
Argument L(Argument::Items items) { return Argument::list(std::move(items)); }
Argument D(Argument::DictItems items) { return Argument::dict(std::move(items)); }
Argument S(Argument start, Argument stop, Argument step = {}) {
  return Argument::slice(std::move(start), std::move(stop), std::move(step));
}
Argument Cx(double re, double im) { return Argument(std::complex<double>(re, im)); }
fx::Device dev(const std::string& type, int index = -1) {
  fx::Device d;
  d.type = type;
  d.index = index;
  return d;
}
const std::optional<std::string> kNoType = std::nullopt;

fx::Tensor tensor(std::vector<int64_t> shape, bool param = true) {
  fx::Tensor t;
  t.dtype = fx::Dtype::Float32;
  t.shape = std::move(shape);
  t.requires_grad = param;
  return t;
}

std::shared_ptr<fx::Module> module(const std::string& type, const std::string& extra_repr = {}) {
  return std::make_shared<fx::Module>(type, extra_repr);
}
std::shared_ptr<fx::Module> linear(int in, int out, bool bias = true) {
  auto m = module("Linear", "in_features=" + std::to_string(in) + ", out_features=" +
                                std::to_string(out) + ", bias=" + (bias ? "True" : "False"));
  m->register_parameter("weight", tensor({out, in}));
  if (bias) m->register_parameter("bias", tensor({out}));
  return m;
}
std::shared_ptr<fx::Module> conv2d(int in, int out, const std::string& extra, bool bias) {
  auto m = module("Conv2d", extra);
  m->register_parameter("weight", tensor({out, in, 3, 3}));
  if (bias) m->register_parameter("bias", tensor({out}));
  return m;
}
std::shared_ptr<fx::Module> batchnorm2d(int n) {
  auto m =
      module("BatchNorm2d", std::to_string(n) +
                                ", eps=1e-05, momentum=0.1, affine=True, track_running_stats=True");
  m->register_parameter("weight", tensor({n}));
  m->register_parameter("bias", tensor({n}));
  m->register_buffer("running_mean", tensor({n}, false));
  m->register_buffer("running_var", tensor({n}, false));
  fx::Tensor nb;
  nb.dtype = fx::Dtype::Int64;
  m->register_buffer("num_batches_tracked", nb);
  return m;
}

void module_extras(Case& c) {
  c.add("module_repr", c.gm->repr());
  c.add("str", c.gm->str());
  c.add("print_readable", c.gm->print_readable());
}

// ---------------------------------------------------------------------------------------------
// The five reference modules (traced in Python; built node by node here).

GOLDEN_CASE(ref_my_module) {
  fx::Module root("MyModule");
  root.register_parameter("param", tensor({3, 4}));
  root.add_module("linear", linear(4, 5));
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* param = g->get_attr("param");
  Node* add = g->call_function(fn("operator.add"), {x, param});
  Node* lin = g->call_module("linear", {add});
  Node* clamp = g->call_method("clamp", {lin}, {{"min", 0.0}, {"max", 1.0}});
  g->output(clamp);
  c.gm = std::make_unique<fx::GraphModule>(&root, std::move(g), "MyModule");
  module_extras(c);
}

GOLDEN_CASE(ref_topk_module) {
  fx::Module root("TopkModule");
  root.register_parameter("param", tensor({3, 4}));
  root.add_module("linear", linear(4, 5));
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("linear.weight");
  Node* add = g->call_function(fn("operator.add"), {x, w});
  Node* lin = g->call_module("linear", {add});
  Node* relu = g->call_method("relu", {lin});
  Node* sum = g->call_function(fn("torch.sum"), {relu}, {{"dim", -1}});
  Node* topk = g->call_function(fn("torch.topk"), {sum, 3});
  g->output(topk);
  c.gm = std::make_unique<fx::GraphModule>(&root, std::move(g), "TopkModule");
  module_extras(c);
}

GOLDEN_CASE(ref_cnn) {
  fx::Module root("CNN");
  auto features = module("Sequential");
  features->add_module(
      "0", conv2d(3, 8, "3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1)", true));
  features->add_module("1", batchnorm2d(8));
  features->add_module("2", module("ReLU", "inplace=True"));
  features->add_module(
      "3", module("MaxPool2d", "kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False"));
  root.add_module("features", features);
  root.add_module("conv2",
                  conv2d(8, 16, "8, 16, kernel_size=(3, 3), stride=(2, 2), bias=False", false));
  root.add_module("bn2", batchnorm2d(16));
  root.add_module("drop", module("Dropout", "p=0.5, inplace=False"));
  root.add_module("fc", linear(16, 10));
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* f0 = g->call_module("features.0", {x});
  Node* f1 = g->call_module("features.1", {f0});
  Node* f2 = g->call_module("features.2", {f1});
  Node* f3 = g->call_module("features.3", {f2});
  Node* conv2 = g->call_module("conv2", {f3});
  Node* bn2 = g->call_module("bn2", {conv2});
  Node* relu = g->call_function(fn("torch.nn.functional.relu"), {bn2}, {{"inplace", false}});
  Node* pool = g->call_function(fn("torch.nn.functional.adaptive_avg_pool2d"), {relu, T({1, 1})});
  Node* flat = g->call_function(fn("torch.flatten"), {pool, 1});
  Node* drop = g->call_module("drop", {flat});
  Node* fc = g->call_module("fc", {drop});
  Node* ls = g->call_function(fn("torch.nn.functional.log_softmax"), {fc},
                              {{"dim", 1}, {"_stacklevel", 3}, {"dtype", Argument()}});
  g->output(ls);
  c.gm = std::make_unique<fx::GraphModule>(&root, std::move(g), "CNN");
  module_extras(c);
}

GOLDEN_CASE(ref_dict_out) {
  fx::Module root("DictOut");
  root.register_buffer("scale", tensor({4}, false));
  root.register_buffer("_tensor_constant0", tensor({2, 4}, false));
  root.register_buffer("_tensor_constant1", tensor({2}, false));
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  g->placeholder("y", kNoType, Argument());
  Node* alpha = g->placeholder("alpha", std::string("float"), Argument(2.0));
  Node* mul = g->call_function(fn("operator.mul"), {x, alpha});
  Node* cat = g->call_function(fn("torch.cat"), {L({x, mul})}, {{"dim", 0}});
  Node* to = g->call_method("to", {cat, fx::Dtype::Float64});
  Node* clamp = g->call_function(fn("torch.clamp"), {x}, {{"min", -kInf}, {"max", kInf}});
  Node* scale = g->get_attr("scale");
  Node* mul1 = g->call_function(fn("operator.mul"), {x, scale});
  Node* c0 = g->get_attr("_tensor_constant0");
  Node* c1 = g->get_attr("_tensor_constant1");
  g->output(D({{"cat", cat},
               {"zeros", c0},
               {"tup", T({to, clamp})},
               {"lst", L({mul1, c1, Argument()})},
               {"n", 3}}));
  c.gm = std::make_unique<fx::GraphModule>(&root, std::move(g), "DictOut");
  module_extras(c);
}

GOLDEN_CASE(ref_get_item) {
  fx::Module root("GetItem");
  auto g = std::make_unique<fx::Graph>();
  fx::Function getitem = fn("operator.getitem");
  Node* x = g->placeholder("x");
  Node* size = g->call_method("size", {x, 0});
  Node* ga = g->call_function(fn("builtins.getattr"), {x, "shape"});
  Node* gi = g->call_function(getitem, {ga, 1});
  Node* view = g->call_method("view", {x, size, -1});
  Node* gi1 = g->call_function(getitem, {x, T({S({}, {}, {}), S(1, 3)})});
  Node* gi2 = g->call_function(getitem, {x, T({Argument::ellipsis(), Argument(), 0})});
  Node* gi3 = g->call_function(getitem, {view, 0});
  Node* size1 = g->call_method("size", {x});
  Node* gi4 = g->call_function(getitem, {size1, -1});
  Node* reshape = g->call_method("reshape", {view, size, gi, -1});
  Node* sum = g->call_method("sum", {gi1});
  Node* add = g->call_function(fn("operator.add"), {reshape, sum});
  Node* mean = g->call_method("mean", {gi2});
  Node* add1 = g->call_function(fn("operator.add"), {add, mean});
  Node* max = g->call_method("max", {gi3});
  Node* mul = g->call_function(fn("operator.mul"), {max, gi4});
  Node* add2 = g->call_function(fn("operator.add"), {add1, mul});
  Node* dim = g->call_method("dim", {x});
  g->output(T({add2, dim}));
  c.gm = std::make_unique<fx::GraphModule>(&root, std::move(g), "GetItem");
  module_extras(c);
}

// ---------------------------------------------------------------------------------------------
// Graph-building API (inventory section 2.7).

struct Manual {
  Node *x, *y, *w, *a, *b, *c, *d, *e;
};
Manual manual_graph(fx::Graph& g) {
  Manual m;
  m.x = g.placeholder("x");
  m.y = g.placeholder("y", kNoType, Argument(3));
  m.w = g.get_attr("lin.weight");
  m.a = g.call_function(fn("torch.add"), {m.x, m.y}, {{"alpha", 2}});
  m.b = g.call_method("relu", {m.a});
  m.c = g.call_module("lin", {m.b});
  m.d = g.call_function(fn("operator.getitem"), {m.c, S({}, 2)});
  m.e = g.call_function(fn("torch.cat"), {L({m.d, m.d})}, {{"dim", -1}});
  g.output(T({m.e, D({{"w", m.w}})}));
  return m;
}

GOLDEN_CASE(manual_construction) {
  c.graph = std::make_unique<fx::Graph>();
  manual_graph(*c.graph);
}

GOLDEN_CASE(manual_edits) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Manual m = manual_graph(g);
  Node* s;
  {
    auto guard = g.inserting_after(m.a);
    s = g.call_function(fn("torch.sigmoid"), {m.a});
  }
  std::vector<Node*> changed = m.a->replace_all_uses_with(s, [&](Node* u) { return u != s; });
  Node* n1;
  {
    auto guard = g.inserting_before(m.e);
    n1 = g.call_function(fn("torch.neg"), {m.d});
  }
  m.e->replace_input_with(m.d, n1);
  c.add("replace_all_uses_with", names(changed));
  c.add("users(add)", names(m.a->users()));
  c.add("users(sigmoid)", names(s->users()));
  c.add("users(getitem)", names(m.d->users()));
  c.add("all_input_nodes(cat)", names(m.e->all_input_nodes()));
  c.add("len(nodes)", std::to_string(g.nodes().size()));
}

GOLDEN_CASE(manual_update_arg) {
  c.graph = std::make_unique<fx::Graph>();
  Manual m = manual_graph(*c.graph);
  m.a->update_arg(1, 5);
  m.a->update_kwarg("alpha", 1);
  m.a->update_kwarg("out", Argument());
  c.add("format_node(add)", m.a->format_node());
  c.add("users(y)", names(m.y->users()));
  c.add("all_input_nodes(add)", names(m.a->all_input_nodes()));
}

GOLDEN_CASE(all_opcodes) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* w = g.get_attr("w");
  Node* r = g.call_function(fn("torch.relu"), {x});
  Node* s = g.call_module("sub", {r}, {{"scale", w}});
  Node* v = g.call_method("view", {s, -1});
  Node* o = g.output(v);
  std::string lines;
  for (Node* n : {x, w, r, s, v, o}) lines += (lines.empty() ? "" : "\n") + n->format_node();
  c.add("format_node", lines);
}

// ---------------------------------------------------------------------------------------------
// Argument kinds.

GOLDEN_CASE(args_none_bool_int) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* a = g.call_method("scalars",
                          {x, Argument(), true, false, 0, 1, -1, Argument(int64_t{1} << 62),
                           Argument(std::numeric_limits<int64_t>::min()),
                           Argument(std::numeric_limits<int64_t>::max())},
                          {{"a", Argument()}, {"b", true}, {"c", -7}});
  g.output(a);
}

GOLDEN_CASE(args_floats) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  std::vector<Argument> args = {x,
                                1e-05,
                                1e+20,
                                -0.0,
                                kInf,
                                -kInf,
                                kNan,
                                0.1,
                                1.0,
                                123456789.0,
                                1e16,
                                1e15,
                                1.5,
                                -2.5e-300,
                                5e-324,
                                1.7976931348623157e308,
                                1.0 / 3.0,
                                100.0,
                                -1000000000.0,
                                2.5e-05,
                                0.0001,
                                1e22,
                                12345678901234567.0};
  Node* a = g.call_method("floats", args, {{"eps", 1e-05}, {"neg", -0.5}});
  Node* cl = g.call_function(fn("torch.clamp"), {a}, {{"min", -kInf}, {"max", kInf}});
  Node* d = g.call_function(fn("operator.add"), {cl, kNan});
  g.output(d);
}

GOLDEN_CASE(args_complex) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* a = g.call_method(
      "cplx",
      {x, Cx(1, 2), Cx(0, 2), Cx(1.5, -2.5), Cx(0, -1), Cx(-0.0, 1.0), Cx(0, 1e20), Cx(kInf, kNan)},
      {{"z", Cx(1, 2)}});
  Node* m = g.call_function(fn("operator.mul"), {a, Cx(1, 2)});
  g.output(m);
}

GOLDEN_CASE(args_strings) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* a = g.call_method("strs",
                          {x, "hello", "it's", "say \"hi\"", "a'b\"c", "back\\slash",
                           "line1\nline2", "tab\there", "", "\x01\x7f", "caf\xc3\xa9", " padded "},
                          {{"msg", "it's \"quoted\"\n"}});
  g.output(a);
}

GOLDEN_CASE(args_tuples) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_method("tuples",
                          {x, T({}), T({1}), T({1, 2, 3}), T({T({1, 2}), T({3, T({4})})}), T({y}),
                           T({x, T({y, 1})}), T({"a", "b"})},
                          {{"t", T({x})}, {"e", T({})}});
  g.output(a);
}

GOLDEN_CASE(args_lists) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function(fn("torch.cat"), {L({x, y})});
  Node* b = g.call_method(
      "lists", {a, L({}), L({1}), L({x, L({y, 2})}), L({L({}), L({T({})})}), L({"s", Argument()})},
      {{"l", L({a})}});
  g.output(b);
}

GOLDEN_CASE(args_dicts) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_method("dicts",
                          {x, D({}), D({{"a", 1}, {"b", x}}), D({{1, "one"}, {2, x}}),
                           D({{"k", L({x, D({{"j", T({y})}})})}}), D({{"a", 1}, {2, "b"}})},
                          {{"d", D({{"key", y}, {"s", "v"}})}});
  g.output(a);
}

GOLDEN_CASE(args_slices) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  fx::Function getitem = fn("operator.getitem");
  Node* x = g.placeholder("x");
  Node* n = g.placeholder("n");
  Node* a = g.call_function(getitem, {x, S({}, 2, {})});
  Node* b = g.call_function(getitem, {a, S(1, -1, 2)});
  Node* cc = g.call_function(getitem, {b, S({}, {}, {})});
  Node* d = g.call_function(getitem, {cc, S(n, {})});
  Node* e = g.call_function(getitem, {d, T({Argument(), Argument::ellipsis(), S(1, -1, 2)})});
  Node* f = g.call_function(getitem, {e, Argument::ellipsis()});
  Node* h = g.call_function(getitem, {f, T({S({}, {}, {}), S(1, 3, {})})});
  Node* i = g.call_method("sl", {h, S("a", "b"), Argument::ellipsis()}, {{"s", S(n, n, n)}});
  g.output(i);
  c.add("users(n)", names(n->users()));
}

GOLDEN_CASE(args_dtypes) {
  using fx::Dtype;
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* a = g.call_method("to", {x, Dtype::Float16});
  Node* b = g.call_method(
      "dtypes",
      {a, Dtype::Float32, Dtype::Float64, Dtype::Float16, Dtype::BFloat16, Dtype::Int8,
       Dtype::Int16, Dtype::Int32, Dtype::Int64, Dtype::UInt8, Dtype::Bool, Dtype::Complex32,
       Dtype::Complex64, Dtype::Complex128, Dtype::QInt8, Dtype::QUInt8, Dtype::QInt32},
      {{"dtype", Dtype::Int64}});
  g.output(b);
}

GOLDEN_CASE(args_devices) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* a = g.call_method("to", {x, dev("cpu")});
  Node* b = g.call_method("to", {a}, {{"device", dev("cuda", 0)}});
  Node* d = g.call_method("devices", {b, dev("cuda"), dev("cpu", 1)});
  g.output(d);
}

GOLDEN_CASE(args_memory_format_layout) {
  using fx::Layout;
  using fx::MemoryFormat;
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* a = g.call_method("to", {x},
                          {{"device", dev("cpu")},
                           {"dtype", fx::Dtype::Float16},
                           {"memory_format", MemoryFormat::Contiguous}});
  Node* b = g.call_method("formats", {a, MemoryFormat::Contiguous, MemoryFormat::ChannelsLast,
                                      MemoryFormat::ChannelsLast3d, MemoryFormat::Preserve});
  Node* d = g.call_method("layouts", {b, Layout::Strided, Layout::SparseCoo, Layout::SparseCsr},
                          {{"layout", Layout::Strided}});
  g.output(d);
}

// ---------------------------------------------------------------------------------------------
// Operators.

const char* const kBinary[] = {
    "add", "sub", "mul",     "floordiv", "truediv", "mod", "pow", "lshift", "rshift", "and_",
    "or_", "xor", "getitem", "matmul",   "eq",      "ne",  "lt",  "gt",     "le",     "ge"};
const char* const kInplace[] = {"iadd", "iand",     "ifloordiv", "ilshift", "imod",
                                "imul", "imatmul",  "ior",       "ipow",    "irshift",
                                "isub", "itruediv", "ixor"};

GOLDEN_CASE(magic_binary) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Argument::Items outs;
  for (const char* name : kBinary)  // operator.div does not exist in Python 3
    outs.push_back(g.call_function(fn(std::string("operator.") + name), {x, y}));
  g.output(T(outs));
}

GOLDEN_CASE(magic_reflected) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(fn("operator.add"), {1, x});
  Node* b = g.call_function(fn("operator.mul"), {2, a});
  Node* cc = g.call_function(fn("operator.pow"), {3, b});
  Node* d = g.call_function(fn("operator.rshift"), {1, cc});
  Node* e = g.call_function(fn("operator.truediv"), {d, 3});
  Node* f = g.call_function(fn("operator.getitem"), {e, 0});
  Node* h = g.call_function(fn("operator.getitem"), {f, "k"});
  Node* i = g.call_function(fn("operator.getitem"), {h, T({0, 0})});
  Node* j = g.call_function(fn("operator.sub"), {2.5, i});
  Node* k = g.call_function(fn("operator.eq"), {j, Argument()});
  g.output(k);
}

GOLDEN_CASE(magic_unary) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* gt = g.call_function(fn("operator.gt"), {x, y});
  Node* inv = g.call_function(fn("operator.invert"), {gt});
  Node* p = g.call_function(fn("operator.pos"), {x});
  Node* n = g.call_function(fn("operator.neg"), {p});
  g.output(T({inv, n}));
}

GOLDEN_CASE(inplace_ops) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* cur = x;
  for (const char* name : kInplace)
    cur = g.call_function(fn(std::string("operator.") + name), {cur, y});
  Node* s = g.call_function(fn("operator.setitem"), {cur, 0, y});
  g.output(s);
}

GOLDEN_CASE(operator_misc) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function(fn("operator.abs"), {x});
  Node* b = g.call_function(fn("operator.not_"), {a});
  Node* cc = g.call_function(fn("operator.truth"), {b});
  Node* d = g.call_function(fn("operator.contains"), {y, cc});
  Node* e = g.call_function(fn("operator.concat"), {y, L({d})});
  Node* f = g.call_function(fn("operator.index"), {e});
  Node* h = g.call_function(fn("operator.getitem"), {y, f});
  g.output(h);
}

GOLDEN_CASE(getattr_calls) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  fx::Function ga = fn("builtins.getattr");
  Node* x = g.placeholder("x");
  Node* a = g.call_function(ga, {x, "shape"});
  Node* b = g.call_function(ga, {x, "my attr"});
  Node* cc = g.call_function(ga, {x, "shape", Argument()});
  Node* d = g.call_function(ga, {x, "0"});
  Node* e = g.call_function(ga, {a, "T"});
  Node* f = g.call_function(ga, {x, b});
  g.output(T({a, b, cc, d, e, f}));
}

GOLDEN_CASE(builtins_calls) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function(fn("builtins.len"), {x});
  Node* b = g.call_function(fn("builtins.max"), {a, y});
  Node* cc = g.call_function(fn("builtins.min"), {b, 3});
  Node* d = g.call_function(fn("builtins.abs"), {cc});
  Node* e = g.call_function(fn("builtins.hasattr"), {x, "shape"});
  Node* p = g.call_function(fn("builtins.print"), {d, e}, {{"sep", ", "}});
  g.output(T({d, p}));
}

GOLDEN_CASE(math_calls) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(fn("math.sqrt"), {x});
  Node* b = g.call_function(fn("math.pow"), {a, 2});
  Node* cc = g.call_function(fn("math.floor"), {b});
  Node* d = g.call_function(fn("math.exp"), {cc});
  Node* e = g.call_function(fn("math.sqrt"), {d});
  Node* f = g.call_function(fn("math.log"), {e, 10});
  g.output(f);
}

GOLDEN_CASE(torch_calls) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* w = g.placeholder("w");
  Node* b = g.placeholder("b");
  Node* a = g.call_function(fn("torch.relu"), {x});
  Node* s = g.call_function(fn("torch.sum"), {a}, {{"dim", -1}, {"keepdim", true}});
  Node* r = g.call_function(fn("torch.nn.functional.relu"), {s}, {{"inplace", false}});
  Node* lin = g.call_function(fn("torch._C._nn.linear"), {r, w, b});
  Node* ge = g.call_function(fn("torch._C._nn.gelu"), {lin});
  Node* sp = g.call_function(fn("torch.functional.split"), {ge, 2});
  Node* sp0 = g.call_function(fn("operator.getitem"), {sp, 0});
  Node* ln = g.call_function(fn("torch.nn.functional.layer_norm"), {sp0, T({4})});
  Node* t = g.call_function(fn("torch.topk"), {ln, 3});
  Node* t0 = g.call_function(fn("operator.getitem"), {t, 0});
  Node* cc = g.call_function(fn("torch.cat"), {L({t0, t0})}, {{"dim", 0}});
  Node* sm = g.call_function(fn("torch.nn.functional.softmax"), {cc}, {{"dim", -1}});
  Node* mm = g.call_function(fn("torch.matmul"), {sm, w});
  g.output(mm);
}

// ---------------------------------------------------------------------------------------------
// Naming.

GOLDEN_CASE(naming_collisions) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  const char* hints[] = {"add",   "add",     "add_1",         "add",    "x_1",     "x",   "x",
                         "1abc",  "foo.bar", "linear.weight", "input",  "list",    "sum", "class",
                         "torch", "inf",     "a-b c",         "add_01", "getattr", "Foo", "MyLayer",
                         "nan",   "device",  "print",         "self",   "_"};
  Node* cur = x;
  for (const char* h : hints)
    cur = g.create_node(Opcode::CallFunction, fn("torch.relu"), {cur}, {}, std::string(h));
  g.output(cur);
  c.add("names", names(g));
}

GOLDEN_CASE(naming_targets) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* inp = g.placeholder("input");
  Node* lst = g.placeholder("list");
  Node* slf = g.placeholder("self_");
  Node* a = g.call_method("__add__", {inp, lst});
  Node* m = g.call_module("MyLayer", {a});
  Node* cc = g.call_module("ALL_CAPS", {m});
  Node* d = g.call_module("Conv2D", {cc});
  Node* e = g.call_module("layer1Block", {d});
  Node* f = g.call_module("fooBar.BazQux", {e});
  Node* w = g.get_attr("linear.weight");
  Node* s = g.call_function(fn("torch.sum"), {f});
  Node* mx = g.call_method("max", {s});
  Node* ga = g.call_function(fn("builtins.getattr"), {mx, "shape"});
  Node* p = g.call_function(fn("operator.pow"), {mx, 2});
  Node* an = g.call_function(fn("operator.and_"), {p, slf});
  Node* th = g.call_function(fn("torch.nn.functional._threshold"), {an, 0.5, 0.0});
  g.output(T({ga, th, w}));
  c.add("names", names(g));
}

GOLDEN_CASE(naming_star_args) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* a = g.placeholder("*args");
  Node* k = g.placeholder("**kwargs");
  Node* r = g.call_function(fn("torch.add"), {x, a}, {{"k", k}});
  g.output(r);
  c.add("names", names(g));
}

GOLDEN_CASE(naming_erased_names) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(fn("operator.add"), {x, 1});
  g.erase_node(a);
  Node* b = g.call_function(fn("operator.add"), {x, 2});
  Node* cc =
      g.create_node(Opcode::CallFunction, fn("operator.add"), {b, 3}, {}, std::string("add"));
  g.output(cc);
  c.add("names", names(g));
  c.add("erased", a->name());
}

GOLDEN_CASE(naming_global_collision) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* a =
      g.create_node(Opcode::CallFunction, fn("torch.relu"), {x}, {}, std::string("math_sqrt"));
  Node* b = g.call_function(fn("math.sqrt"), {a});
  Node* cc =
      g.create_node(Opcode::CallFunction, fn("torch.neg"), {b}, {}, std::string("math_floor_1"));
  Node* d = g.call_function(fn("math.floor"), {cc});
  g.output(d);
}

GOLDEN_CASE(wrapped_functions) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(fn("math.sqrt"), {x});
  a->meta().set("is_wrapped", true);
  Node* b = g.call_function(fn("builtins.len"), {a});
  b->meta().set("is_wrapped", true);
  Node* cc = g.call_function(fn("math.sqrt"), {b});
  cc->meta().set("is_wrapped", true);
  Node* d = g.call_function(fn("torch.relu"), {cc});
  g.output(d);
}

// ---------------------------------------------------------------------------------------------
// Placeholders and outputs.

GOLDEN_CASE(placeholder_defaults) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y", kNoType, Argument());
  Node* alpha = g.placeholder("alpha", kNoType, Argument(2.0));
  Node* s = g.placeholder("s", kNoType, Argument("abc"));
  Node* t = g.placeholder("t", kNoType, T({1, "a"}));
  Node* n = g.placeholder("n", kNoType, Argument(-3));
  Node* flag = g.placeholder("flag", kNoType, Argument(true));
  Node* out = g.call_method("f", {x, y, alpha, s, t, n, flag});
  g.output(out);
}

GOLDEN_CASE(placeholder_types) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x", std::string("torch.Tensor"));
  Node* n = g.placeholder("n", std::string("int"));
  Node* f = g.placeholder("f", std::string("float"), Argument(1.5));
  Node* ys = g.placeholder("ys", std::string("typing.List[torch.Tensor]"));
  Node* tup = g.placeholder("tup", std::string("typing.Tuple[torch.Tensor, int]"));
  Node* d = g.placeholder("d", std::string("typing.Dict[str, torch.Tensor]"));
  Node* w = g.get_attr("w", std::string("torch.Tensor"));
  Node* a = g.call_function(fn("operator.add"), {x, n}, {}, std::string("torch.Tensor"));
  Node* b = g.call_method("mul", {a, f});
  Node* cc = g.call_function(fn("operator.getitem"), {ys, 0});
  Node* e = g.call_function(fn("operator.getitem"), {tup, 1});
  Node* h = g.call_function(fn("operator.getitem"), {d, "k"});
  g.output(T({b, cc, e, h, w}), std::string("typing.Tuple[torch.Tensor, int]"));
}

GOLDEN_CASE(unused_placeholders) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  g.placeholder("y");
  Node* z = g.placeholder("z");
  Node* a = g.call_function(fn("operator.mul"), {x, 2});
  g.output(T({a, z}));
}

GOLDEN_CASE(output_nested) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  g.output(T({x, L({y, "str", Argument()}), D({{"k", T({x, "v"})}, {"n", Argument()}, {3, y}}),
              "str'q", "a\"b", 1.5, T({})}));
}

GOLDEN_CASE(output_string) {
  c.graph = std::make_unique<fx::Graph>();
  c.graph->placeholder("x");
  c.graph->output("hello");
}

GOLDEN_CASE(output_list_dict) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(fn("torch.relu"), {x});
  g.output(L({D({{"relu", r}, {"x", x}}), r}));
}

GOLDEN_CASE(output_only) {
  c.graph = std::make_unique<fx::Graph>();
  c.graph->output(Argument());
}

GOLDEN_CASE(no_output_node) {
  c.graph = std::make_unique<fx::Graph>();
  c.graph->placeholder("x");
  c.graph->placeholder("y", kNoType, Argument(1));
}

GOLDEN_CASE(no_nodes) { c.graph = std::make_unique<fx::Graph>(); }

// ---------------------------------------------------------------------------------------------
// Attribute targets.

GOLDEN_CASE(module_targets) {
  fx::Module root("_Root");
  auto features = module("Sequential");
  features->add_module("0", module("ReLU"));
  root.add_module("features", features);
  auto seq = module("Sequential");
  seq->add_module("0", module("Identity"));
  seq->add_module("1", module("Identity"));
  auto inner = module("Sequential");
  inner->add_module("0", module("Tanh"));
  seq->add_module("2", inner);
  root.add_module("seq", seq);
  auto layers = module("Sequential");
  layers->add_module("0", linear(2, 2));
  layers->add_module("1", linear(2, 2));
  root.add_module("layers", layers);
  root.add_module("unused", linear(3, 3));

  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* f0 = g->call_module("features.0", {x});
  Node* s = g->call_module("seq.2.0", {f0});
  Node* w = g->get_attr("layers.1.weight");
  Node* gi = g->call_function(fn("operator.getitem"), {w, T({0, 0})});
  Node* m = g->call_function(fn("operator.mul"), {s, gi});
  g->output(m);
  c.gm = std::make_unique<fx::GraphModule>(&root, std::move(g));
  c.add("module_repr", c.gm->repr());
  std::string mods = "[";
  for (const auto& kv : c.gm->named_modules())
    mods += (mods.size() > 1 ? ", " : "") + fx::py_str_repr(kv.first);
  c.add("named_modules", mods + "]");
  std::string params = "[";
  for (const auto& kv : c.gm->named_parameters())
    params += (params.size() > 1 ? ", " : "") + fx::py_str_repr(kv.first);
  c.add("named_parameters", params + "]");
}

GOLDEN_CASE(verbose_stack_trace) {
  fx::Module root("Module");
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* a = g->call_function(fn("torch.relu"), {x});
  const std::string trace1 =
      "File \"model.py\", line 12, in forward\n    return torch.relu(x) + 1\n";
  a->set_stack_trace(trace1);
  Node* b = g->call_function(fn("operator.add"), {a, 1});
  b->set_stack_trace(trace1);
  Node* cc = g->call_function(fn("torch.neg"), {b});
  Node* d = g->call_function(fn("torch.sigmoid"), {cc});
  d->set_stack_trace(
      std::string("File \"model.py\", line 14, in forward\n    return torch.sigmoid(y)\n"));
  g->output(d);
  fx::CodegenOptions verbose;
  verbose.verbose = true;
  c.add("verbose_code", g->python_code("self", verbose).src);
  c.gm = std::make_unique<fx::GraphModule>(&root, std::move(g));
  c.add("print_readable", c.gm->print_readable());
}

// ---------------------------------------------------------------------------------------------
// Graph manipulation.

GOLDEN_CASE(erase_node) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(fn("operator.add"), {x, 1});
  Node* s = g.call_function(fn("torch.sigmoid"), {a});
  Node* dead = g.call_function(fn("torch.neg"), {x});
  g.output(s);
  size_t before = g.nodes().size();
  g.erase_node(dead);
  std::string err = error_text([&] { g.erase_node(a); });
  c.add("len_before", std::to_string(before));
  c.add("len_after", std::to_string(g.nodes().size()));
  c.add("erase_error", err);
  c.add("users(x)", names(x->users()));
}

GOLDEN_CASE(replace_all_uses) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* d = g.call_function(fn("torch.tanh"), {x});
  Node* a = g.call_function(fn("torch.relu"), {x});
  Node* b = g.call_function(fn("torch.neg"), {a});
  Node* cc = g.call_function(fn("operator.add"), {a, b}, {{"k", a}});
  std::vector<Node*> r1 = a->replace_all_uses_with(d, [](Node* u) { return u->name() != "neg"; });
  Node* e = g.call_function(fn("torch.exp"), {cc});
  std::vector<Node*> r2 = cc->replace_all_uses_with(b);
  g.output(T({e, a}));
  c.add("rauw_1", names(r1));
  c.add("rauw_2", names(r2));
  c.add("users(relu)", names(a->users()));
  c.add("users(tanh)", names(d->users()));
  c.add("users(neg)", names(b->users()));
  c.add("users(add)", names(cc->users()));
}

GOLDEN_CASE(node_updates) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* b = g.call_function(fn("torch.relu"), {y});
  Node* a = g.call_function(fn("operator.add"), {x, x}, {{"alpha", x}});
  a->replace_input_with(x, b);
  Node* cc = g.call_function(fn("torch.mul"), {a, y}, {{"out", Argument()}});
  cc->update_arg(0, x);
  cc->update_kwarg("out", a);
  cc->update_kwarg("new", L({y, b}));
  g.output(cc);
  c.add("users(x)", names(x->users()));
  c.add("users(y)", names(y->users()));
  c.add("users(relu)", names(b->users()));
  c.add("all_input_nodes(mul)", names(cc->all_input_nodes()));
  c.add("format_node(mul)", cc->format_node());
}

GOLDEN_CASE(node_copy) {
  fx::Graph src;
  Node* x = src.placeholder("x");
  Node* a = src.call_function(fn("torch.relu"), {x});
  Node* b = src.call_method("sum", {a}, {{"dim", 0}});
  src.output(b);
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* y = g.placeholder("x");
  Node* r = g.call_function(fn("torch.relu"), {y});
  std::map<const Node*, Node*> env{{x, r}};
  for (Node* n : {a, b}) env[n] = g.node_copy(n, [&](Node* m) -> Argument { return env.at(m); });
  g.output(env.at(b));
  c.add("names", names(g));
}

GOLDEN_CASE(graph_copy_val_map) {
  fx::Graph src;
  Node* x = src.placeholder("x");
  Node* a = src.call_function(fn("torch.relu"), {x});
  Node* b = src.call_function(fn("operator.add"), {a, x});
  src.output(b);
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* inp = g.placeholder("inp");
  fx::ValueMap val_map;
  val_map[x] = inp;
  std::optional<Argument> out = g.graph_copy(src, val_map);
  ASSERT_TRUE(out.has_value());
  g.output(*out);
  c.add("names", names(g));
  c.add("output", out->str());
  std::string vm;
  for (Node* n : src.nodes()) {
    auto it = val_map.find(n);
    if (it == val_map.end()) continue;
    vm += (vm.empty() ? "" : ", ") + n->name() + "->" + it->second.to_node()->name();
  }
  c.add("val_map", vm);
}

GOLDEN_CASE(deepcopy_graph) {
  fx::Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(fn("operator.add"), {x, 1});
  g.erase_node(a);
  Node* b = g.call_function(fn("operator.add"), {x, 2});
  Node* r = g.call_function(fn("torch.relu"), {b});
  g.output(r, std::string("torch.Tensor"));
  c.graph = g.clone();
  fx::Graph& g2 = *c.graph;
  Node* orig_new = g.call_function(fn("operator.add"), {x, 3});
  std::vector<Node*> nodes2 = g2.nodes().to_vector();
  Node* x2 = nodes2.front();
  Node* out2 = nodes2.back();
  Node* copy_new;
  {
    auto guard = g2.inserting_before(out2);
    copy_new = g2.call_function(fn("operator.add"), {x2, 3});
  }
  c.add("names(original)", names(g));
  c.add("new_in_original", orig_new->name());
  c.add("new_in_copy", copy_new->name());
  c.add("output_type", out2->type().value_or("None"));
}

GOLDEN_CASE(inserting_context) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(fn("torch.relu"), {x});
  Node* o = g.output(a);
  Node *b1, *b2, *c1, *c2, *d1, *d2;
  {
    auto guard = g.inserting_after(x);
    b1 = g.call_function(fn("torch.neg"), {x});
    b2 = g.call_function(fn("torch.tanh"), {x});
  }
  {
    auto guard = g.inserting_before(a);
    c1 = g.call_function(fn("torch.exp"), {x});
    c2 = g.call_function(fn("torch.log"), {x});
  }
  {
    auto guard = g.inserting_before(nullptr);
    d1 = g.placeholder("first");
    d2 = g.placeholder("second");
  }
  Node* e = g.call_function(fn("torch.sigmoid"), {a});  // insert point restored: after the output
  Node* f;
  {
    auto guard = g.inserting_before(o);
    f = g.call_function(fn("operator.add"), {a, b1});
  }
  c.add("names", names(g));
  c.add("unused", names(std::vector<Node*>{b2, c1, c2, d1, d2, e, f}));
}

GOLDEN_CASE(inserting_permanent) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(fn("torch.relu"), {x});
  g.output(a);
  g.inserting_before(a).keep();
  Node* b = g.call_function(fn("torch.neg"), {x});
  Node* cc = g.call_function(fn("torch.tanh"), {b});
  g.inserting_after(x).keep();
  Node* d = g.call_function(fn("torch.exp"), {x});
  Node* e = g.call_function(fn("torch.log"), {x});
  g.inserting_after(nullptr).keep();
  Node* f = g.call_function(fn("torch.sigmoid"), {cc});
  c.add("names", names(g));
  c.add("unused", names(std::vector<Node*>{d, e, f}));
}

GOLDEN_CASE(prepend_append_moves) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(fn("torch.relu"), {x});
  Node* b = g.call_function(fn("torch.neg"), {x});
  Node* cc = g.call_function(fn("torch.tanh"), {x});
  Node* d = g.call_function(fn("torch.exp"), {x});
  g.output(T({a, b, cc, d}));
  a->prepend(d);
  cc->append(a);
  b->prepend(cc);
  x->append(b);
  d->append(d->next());
  c.add("names", names(g));
}

GOLDEN_CASE(dead_code_elimination) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  g.placeholder("y");
  Node* dead1 = g.call_function(fn("torch.relu"), {x});
  g.call_function(fn("torch.neg"), {dead1});
  Node* gt = g.call_function(fn("operator.gt"), {x, 0});
  g.call_function(fn("torch._assert"), {gt, "x must be positive"});
  Node* a = g.call_function(fn("operator.add"), {x, 1});
  g.output(a);
  std::string before = g.str();
  bool r1 = g.eliminate_dead_code();
  bool r2 = g.eliminate_dead_code();
  c.add("before", before);
  c.add("first", py_bool(r1));
  c.add("second", py_bool(r2));
  c.add("names", names(g));
}

GOLDEN_CASE(lint_out_of_order) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(fn("torch.relu"), {x});
  Node* b = g.call_function(fn("torch.neg"), {a});
  g.output(b);
  a->prepend(b);
  c.add("lint_error", error_text([&] { g.lint(); }));
}

GOLDEN_CASE(lint_foreign_node) {
  c.keep.push_back(std::make_unique<fx::Graph>());
  fx::Graph& other = *c.keep.back();
  Node* p = other.placeholder("p");
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(fn("torch.relu"), {p});
  Node* a = g.call_function(fn("operator.add"), {r, x});
  g.output(a);
  c.add("lint_error", error_text([&] { g.lint(); }));
  c.add("users(p)", names(p->users()));
}

GOLDEN_CASE(lint_missing_target) {
  fx::Module root("_LintRoot");
  root.add_module("linear", linear(2, 2));
  auto graph = std::make_unique<fx::Graph>();
  Node* x = graph->placeholder("x");
  Node* a = graph->call_module("linear", {x});
  Node* o = graph->output(a);
  c.gm = std::make_unique<fx::GraphModule>(&root, std::move(graph));
  fx::Graph& g = c.gm->graph();
  g.lint();
  Node* n;
  {
    auto guard = g.inserting_before(o);
    n = g.get_attr("nonexistent");
  }
  std::string err1 = error_text([&] { g.lint(); });
  g.erase_node(n);
  Node* m;
  {
    auto guard = g.inserting_before(o);
    m = g.create_node(Opcode::CallModule, "linear.weight", {x});
  }
  std::string err2 = error_text([&] { g.lint(); });
  g.erase_node(m);
  Node* k;
  {
    auto guard = g.inserting_before(o);
    k = g.get_attr("linear.nope");
  }
  std::string err3 = error_text([&] { g.lint(); });
  g.erase_node(k);
  g.lint();
  c.add("lint_error_get_attr", err1);
  c.add("lint_error_call_module", err2);
  c.add("lint_error_nested", err3);
}

// ---------------------------------------------------------------------------------------------
// Freeing of dead values.

GOLDEN_CASE(freeing_order) {
  c.graph = std::make_unique<fx::Graph>();
  fx::Graph& g = *c.graph;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* z = g.placeholder("z");
  Node* a = g.call_function(fn("operator.add"), {x, y});
  Node* b = g.call_function(fn("operator.mul"), {y, z});
  Node* cc = g.call_function(fn("torch.cat"), {L({b, a, z})}, {{"extra", x}});
  Node* d = g.call_function(fn("torch.relu"), {cc});
  Node* e = g.call_function(fn("torch.neg"), {d});
  g.output(T({d, e}));
}

// ---------------------------------------------------------------------------------------------
// torch 1.13 codegen bugs: the goldens hold 1.13's output, reproduced with torch113_bugs; the
// default codegen fixes them (BugFixes tests below).

void build_pow_neg(fx::Graph& g) {
  Node* x = g.placeholder("x");
  Node* p = g.call_function(fn("operator.pow"), {-2, x});
  g.output(p);
}
void build_keyword_attr(fx::Graph& g) {
  Node* x = g.placeholder("x");
  Node* m = g.call_module("lambda", {x});
  g.output(m);
}

GOLDEN_CASE(bug_pow_neg) {
  c.graph = std::make_unique<fx::Graph>();
  build_pow_neg(*c.graph);
  c.options.torch113_bugs = true;
}

GOLDEN_CASE(bug_keyword_attr) {
  c.graph = std::make_unique<fx::Graph>();
  build_keyword_attr(*c.graph);
  c.options.torch113_bugs = true;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
  return s;
}

TEST(BugFixes, PowOfNegativeLiteralIsParenthesised) {
  fx::Graph g;
  build_pow_neg(g);
  const std::string code = g.python_code().src;
  EXPECT_NE(code.find("    pow_1 = (-2) ** x;  x = None\n"), std::string::npos) << code;
  std::string golden;
  ASSERT_TRUE(read_file(golden_path("bug_pow_neg.code.py"), golden));
  EXPECT_EQ(code, replace_all(golden, "-2 ** x", "(-2) ** x"));
}

TEST(BugFixes, KeywordAttributeUsesGetattr) {
  fx::Graph g;
  build_keyword_attr(g);
  const std::string code = g.python_code().src;
  EXPECT_NE(code.find("getattr(self, \"lambda\")"), std::string::npos) << code;
  EXPECT_EQ(code.find("self.lambda"), std::string::npos) << code;
  std::string golden;
  ASSERT_TRUE(read_file(golden_path("bug_keyword_attr.code.py"), golden));
  EXPECT_EQ(code, replace_all(golden, "self.lambda(x)", "getattr(self, \"lambda\")(x)"));
  // The graph text does not depend on the codegen option.
  expect_golden("bug_keyword_attr.graph.txt", g.str());
}

// ---------------------------------------------------------------------------------------------
// Every golden file is consumed: each INDEX.txt case has a builder here, each builder is in the
// index, and the file list of each case is exactly what run_case() compares.

struct IndexEntry {
  std::string name;
  std::set<std::string> files;
};

std::vector<IndexEntry> read_index() {
  std::string text;
  EXPECT_TRUE(read_file(golden_path("INDEX.txt"), text)) << "missing " << golden_path("INDEX.txt");
  std::vector<IndexEntry> out;
  for (const std::string& line : split_lines(text)) {
    if (line.empty() || line[0] == '#') continue;
    size_t t1 = line.find('\t');
    size_t t2 = line.find('\t', t1 + 1);
    EXPECT_NE(t1, std::string::npos) << "bad INDEX.txt line: " << line;
    if (t1 == std::string::npos) continue;
    IndexEntry e;
    e.name = line.substr(0, t1);
    std::istringstream files(
        line.substr(t1 + 1, t2 == std::string::npos ? std::string::npos : t2 - t1 - 1));
    std::string f;
    while (files >> f) e.files.insert(f);
    out.push_back(std::move(e));
  }
  return out;
}

TEST(GoldenIndex, EveryGoldenFileIsConsumed) {
  std::vector<IndexEntry> index = read_index();
  EXPECT_GE(index.size(), 45u);
  std::set<std::string> in_index;
  for (const IndexEntry& e : index) {
    in_index.insert(e.name);
    auto it = registry().find(e.name);
    if (it == registry().end()) {
      ADD_FAILURE() << "golden case " << e.name << " has no GOLDEN_CASE in golden_test.cpp";
      continue;
    }
    for (const char* suffix : {"graph.txt", "graph_num_users.txt", "tabular.txt", "code.py"}) {
      std::string content;
      EXPECT_TRUE(e.files.count(suffix)) << e.name << ": INDEX.txt does not list " << suffix;
      EXPECT_TRUE(read_file(golden_path(e.name + "." + suffix), content))
          << "missing " << e.name << "." << suffix;
    }
    for (const std::string& f : e.files) {
      EXPECT_TRUE(f == "graph.txt" || f == "graph_num_users.txt" || f == "tabular.txt" ||
                  f == "code.py" || f == "extra.txt")
          << e.name << ": golden file kind ." << f << " is not compared by any test";
    }
    // extra.txt is compared exactly when the builder records extras.
    Case c;
    bool has_extra = false;
    try {
      it->second(c);
      has_extra = !c.extra.empty();
    } catch (const std::exception& ex) {
      ADD_FAILURE() << e.name << ": builder threw " << ex.what();
      continue;
    }
    EXPECT_EQ(has_extra, e.files.count("extra.txt") == 1)
        << e.name
        << (has_extra ? ": builder records extras but there is no extra.txt golden"
                      : ": extra.txt golden is not consumed (builder records no extras)");
  }
  for (const auto& kv : registry())
    EXPECT_TRUE(in_index.count(kv.first)) << "GOLDEN_CASE " << kv.first << " is not in INDEX.txt";
}

}  // namespace
