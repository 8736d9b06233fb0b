// fx::replace_pattern against torch.fx 1.13's subgraph_rewriter (goldens written by
// scripts/gen_rewriter_goldens.py): each golden holds the original, pattern and replacement
// graphs in a line format this file parses, the matches, and the resulting code and graph text.
// Plus the matcher's semantics the goldens cannot show (cycles, filters, long chains, errors).
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "fx/fx.h"

namespace {

using fx::Argument;
using fx::fn;
using fx::Node;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Parses the Python-literal notation of the golden lines (%name refers to a node).
class LiteralParser {
 public:
  LiteralParser(const std::string& s, const std::unordered_map<std::string, Node*>& nodes)
      : s_(s), nodes_(nodes) {}

  Argument parse() {
    Argument a = value();
    skip();
    if (i_ != s_.size()) throw std::runtime_error("trailing text in '" + s_ + "'");
    return a;
  }

 private:
  void skip() {
    while (i_ < s_.size() && s_[i_] == ' ') ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool eat_word(const char* w) {
    skip();
    const size_t n = std::char_traits<char>::length(w);
    if (s_.compare(i_, n, w) == 0) {
      i_ += n;
      return true;
    }
    return false;
  }
  std::vector<Argument> items(char close, bool* trailing_comma = nullptr) {
    std::vector<Argument> out;
    bool comma = false;
    while (!eat(close)) {
      out.push_back(value());
      comma = eat(',');
    }
    if (trailing_comma) *trailing_comma = comma;
    return out;
  }
  Argument value() {
    skip();
    const char c = s_.at(i_);
    if (c == '%') {
      size_t j = ++i_;
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
        ++i_;
      return nodes_.at(s_.substr(j, i_ - j));
    }
    if (c == '(') {
      ++i_;
      return Argument::tuple(items(')'));
    }
    if (c == '[') {
      ++i_;
      return Argument::list(items(']'));
    }
    if (c == '{') {
      ++i_;
      Argument::DictItems d;
      while (!eat('}')) {
        Argument k = value();
        eat(':');
        d.emplace_back(std::move(k), value());
        eat(',');
      }
      return Argument::dict(std::move(d));
    }
    if (c == '\'' || c == '"') {
      std::string out;
      for (++i_; s_[i_] != c; ++i_) {
        if (s_[i_] == '\\') {
          ++i_;
          out += s_[i_] == 'n' ? '\n' : s_[i_] == 't' ? '\t' : s_[i_];
        } else {
          out += s_[i_];
        }
      }
      ++i_;
      return out;
    }
    if (eat_word("None")) return Argument();
    if (eat_word("True")) return true;
    if (eat_word("False")) return false;
    if (eat_word("Ellipsis")) return Argument::ellipsis();
    if (eat_word("slice(")) {
      std::vector<Argument> p = items(')');
      return Argument::slice(p.at(0), p.at(1), p.at(2));
    }
    if (eat_word("torch.")) {
      size_t j = i_;
      while (i_ < s_.size() && std::isalnum(static_cast<unsigned char>(s_[i_]))) ++i_;
      return fx::dtype_from_name(s_.substr(j, i_ - j));
    }
    size_t j = i_;
    while (i_ < s_.size() &&
           (std::isdigit(static_cast<unsigned char>(s_[i_])) || std::strchr("+-.eE", s_[i_])))
      ++i_;
    const std::string num = s_.substr(j, i_ - j);
    if (num.empty()) throw std::runtime_error("cannot parse '" + s_.substr(j) + "'");
    if (num.find_first_of(".eE") != std::string::npos) return std::stod(num);
    return static_cast<long long>(std::stoll(num));
  }

  const std::string& s_;
  const std::unordered_map<std::string, Node*>& nodes_;
  size_t i_ = 0;
};

// Builds a graph from golden lines: op \t name \t target \t args \t kwargs.
std::unique_ptr<fx::Graph> build(const std::string& text) {
  auto g = std::make_unique<fx::Graph>();
  std::unordered_map<std::string, Node*> nodes;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::istringstream cols(line);
    std::string col;
    while (std::getline(cols, col, '\t')) f.push_back(col);
    if (f.size() != 5) throw std::runtime_error("bad graph line: " + line);
    const fx::Opcode op = fx::opcode_from_name(f[0]);
    Argument args = LiteralParser(f[3], nodes).parse();
    Argument kw = LiteralParser(f[4], nodes).parse();
    fx::Kwargs kwargs;
    for (const auto& kv : kw.dict_items()) kwargs.set(kv.first.to_string(), kv.second);
    fx::Target target = op == fx::Opcode::CallFunction ? fx::Target(fn(f[2])) : fx::Target(f[2]);
    Node* n = op == fx::Opcode::Output ? g->output(args.elements().at(0))
                                       : g->create_node(op, target, args.elements(), kwargs, f[1]);
    EXPECT_EQ(n->name(), f[1]);
    nodes[f[1]] = n;
  }
  return g;
}

// The sections of a golden ("-- name\n...").
std::unordered_map<std::string, std::string> sections(const std::string& text) {
  std::unordered_map<std::string, std::string> out;
  size_t pos = 0;
  while ((pos = text.find("-- ", pos)) != std::string::npos) {
    const size_t nl = text.find('\n', pos);
    const std::string name = text.substr(pos + 3, nl - pos - 3);
    const size_t end = text.find("\n-- ", nl);  // == nl for an empty section
    if (end == std::string::npos) {
      out[name] = text.substr(nl + 1, text.size() - nl - 2);  // without the file's last newline
      break;
    }
    out[name] = end == nl ? std::string() : text.substr(nl + 1, end - nl - 1);
    pos = end + 1;
  }
  return out;
}

std::string describe(const std::vector<fx::Match>& matches) {
  std::string s;
  for (const fx::Match& m : matches) {
    s += "anchor " + m.anchor->name() + ": {";
    for (size_t i = 0; i < m.nodes_map.size(); ++i) {
      if (i) s += ", ";
      const Argument& v = m.nodes_map[i].second;
      s += m.nodes_map[i].first->name() + ": " + (v.is_node() ? v.to_node()->name() : v.repr());
    }
    s += "}\n";
  }
  return s;
}

class RewriterGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(RewriterGolden, MatchesTorch113) {
  const std::string text =
      read_file(std::string(FXWASM_GOLDEN_DIR) + "/rewriter/" + GetParam() + ".txt");
  auto sec = sections(text);
  auto original = build(sec.at("original"));
  auto pattern = build(sec.at("pattern"));
  auto replacement = build(sec.at("replacement"));
  fx::GraphModule gm(nullptr, std::move(original));
  const std::vector<fx::Match> matches = fx::replace_pattern(gm, *pattern, *replacement);
  std::string want_matches = sec.at("matches");
  if (want_matches.rfind("torch 1.13 raised", 0) == 0) want_matches.clear();  // fxwasm: no match
  if (!want_matches.empty()) want_matches += "\n";
  EXPECT_EQ(describe(matches), want_matches);
  EXPECT_EQ(gm.code(), sec.at("code"));
  EXPECT_EQ(gm.graph().str(), sec.at("graph"));
  gm.graph().lint();
}

std::vector<std::string> golden_cases() {
  std::vector<std::string> out;
  std::istringstream in(read_file(std::string(FXWASM_GOLDEN_DIR) + "/rewriter/INDEX.txt"));
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(line);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Goldens, RewriterGolden, ::testing::ValuesIn(golden_cases()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(Rewriter, AtLeastTwelveGoldenCases) { EXPECT_GE(golden_cases().size(), 12u); }

// pattern: y = relu(x); return y + 1    graph: a = relu(x); c = neg(a); b = a + 1 ...
TEST(Rewriter, MatchesThatWouldFormACycleAreRejected) {
  // Pattern returns two values: r = relu(x) and s = sigmoid(y). In the graph, the input of the
  // sigmoid depends on the relu through an outside node: fusing {relu, sigmoid} would make the
  // fused node feed itself.
  fx::Graph p;
  Node* px = p.placeholder("x");
  Node* py = p.placeholder("y");
  p.output(Argument::tuple(
      {p.call_function(fn("torch.relu"), {px}), p.call_function(fn("torch.sigmoid"), {py})}));
  fx::Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(fn("torch.relu"), {x});
  Node* n = g.call_function(fn("torch.neg"), {r});
  Node* s = g.call_function(fn("torch.sigmoid"), {n});
  g.output(Argument::tuple({r, s}));
  EXPECT_TRUE(fx::SubgraphMatcher(p).match(g).empty());
  // Without the dependency the same pattern matches.
  fx::Graph g2;
  Node* x2 = g2.placeholder("x");
  g2.output(Argument::tuple(
      {g2.call_function(fn("torch.relu"), {x2}), g2.call_function(fn("torch.sigmoid"), {x2})}));
  EXPECT_EQ(fx::SubgraphMatcher(p).match(g2).size(), 0u);  // x would bind both x and y: injective
}

TEST(Rewriter, FiltersAndErrors) {
  auto make = [] {
    auto g = std::make_unique<fx::Graph>();
    Node* x = g->placeholder("x");
    Node* a = g->call_function(fn("torch.relu"), {x});
    Node* b = g->call_function(fn("torch.relu"), {a});
    g->output(b);
    return g;
  };
  fx::Graph pattern;
  pattern.output(pattern.call_function(fn("torch.relu"), {pattern.placeholder("x")}));
  fx::Graph replacement;
  replacement.output(
      replacement.call_function(fn("torch.sigmoid"), {replacement.placeholder("x")}));
  {
    fx::GraphModule gm(nullptr, make());
    // Keep only matches whose input is a placeholder.
    auto only_first = [](const fx::InternalMatch& m, const fx::Graph&, const fx::Graph&) {
      return m.placeholder_nodes.at(0).to_node()->op() == fx::Opcode::Placeholder;
    };
    EXPECT_EQ(fx::replace_pattern_with_filters(gm, pattern, replacement, {only_first}).size(), 1u);
    EXPECT_NE(gm.code().find("sigmoid = torch.sigmoid(x)"), std::string::npos) << gm.code();
    EXPECT_NE(gm.code().find("relu_1 = torch.relu(sigmoid)"), std::string::npos) << gm.code();
  }
  {
    fx::GraphModule gm(nullptr, make());
    fx::Graph two_inputs;
    Node* i0 = two_inputs.placeholder("a");
    Node* i1 = two_inputs.placeholder("b");
    two_inputs.output(two_inputs.call_function(fn("operator.add"), {i0, i1}));
    try {
      fx::replace_pattern(gm, pattern, two_inputs);
      FAIL();
    } catch (const fx::Error& e) {
      EXPECT_EQ(e.kind(), fx::ErrorKind::Value);
    }
  }
  fx::Graph dead;
  dead.placeholder("unused");
  dead.output(dead.call_function(fn("torch.relu"), {dead.placeholder("x")}));
  EXPECT_THROW(fx::SubgraphMatcher{dead}, fx::Error);
  EXPECT_THROW(fx::SubgraphMatcher{fx::Graph()}, fx::Error);
}

TEST(Rewriter, FiftyThousandNodeChain) {
  // relu(x + 1) repeated: every (add, relu) pair is replaced, without recursion limits.
  auto g = std::make_unique<fx::Graph>();
  Node* prev = g->placeholder("x");
  for (int i = 0; i < 25000; ++i)
    prev = g->call_function(fn("torch.relu"), {g->call_function(fn("operator.add"), {prev, 1})});
  g->output(prev);
  fx::GraphModule gm(nullptr, std::move(g));
  fx::Graph pattern;
  pattern.output(pattern.call_function(
      fn("torch.relu"),
      {pattern.call_function(fn("operator.add"), {pattern.placeholder("x"), 1})}));
  fx::Graph replacement;
  replacement.output(
      replacement.call_function(fn("torch.nn.functional.gelu"), {replacement.placeholder("x")}));
  EXPECT_EQ(fx::replace_pattern(gm, pattern, replacement).size(), 25000u);
  EXPECT_EQ(gm.graph().size(), 25002u);
  gm.graph().lint();
}

}  // namespace
