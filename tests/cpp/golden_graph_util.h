// Reading the pass goldens written by scripts/fx_golden_util.py: sections ("-- name"), graphs
// in the line format (op \t name \t target \t args \t kwargs [\t type]) and attribute trees
// (modules: path \t class \t extra_repr; tensors: path \t p|b \t dtype \t shape \t values).
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "fx/fx.h"

namespace fxtest {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

inline std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  for (std::string& l : split(s, '\n'))
    if (!l.empty()) out.push_back(std::move(l));
  return out;
}

// Parses the Python-literal notation of the golden lines (%name refers to a node).
class LiteralParser {
 public:
  LiteralParser(const std::string& s, const std::unordered_map<std::string, fx::Node*>& nodes)
      : s_(s), nodes_(nodes) {}

  fx::Argument parse() {
    fx::Argument a = value();
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
  std::vector<fx::Argument> items(char close) {
    std::vector<fx::Argument> out;
    while (!eat(close)) {
      out.push_back(value());
      eat(',');
    }
    return out;
  }
  fx::Argument value() {
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
      return fx::Argument::tuple(items(')'));
    }
    if (c == '[') {
      ++i_;
      return fx::Argument::list(items(']'));
    }
    if (c == '{') {
      ++i_;
      fx::Argument::DictItems d;
      while (!eat('}')) {
        fx::Argument k = value();
        eat(':');
        d.emplace_back(std::move(k), value());
        eat(',');
      }
      return fx::Argument::dict(std::move(d));
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
    if (eat_word("None")) return fx::Argument();
    if (eat_word("True")) return true;
    if (eat_word("False")) return false;
    if (eat_word("Ellipsis")) return fx::Argument::ellipsis();
    if (eat_word("slice(")) {
      std::vector<fx::Argument> p = items(')');
      return fx::Argument::slice(p.at(0), p.at(1), p.at(2));
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
  const std::unordered_map<std::string, fx::Node*>& nodes_;
  size_t i_ = 0;
};

// Builds a graph from golden lines.
inline std::unique_ptr<fx::Graph> build_graph(const std::string& text) {
  auto g = std::make_unique<fx::Graph>();
  std::unordered_map<std::string, fx::Node*> nodes;
  for (const std::string& line : lines(text)) {
    std::vector<std::string> f = split(line, '\t');
    if (f.size() < 5) throw std::runtime_error("bad graph line: " + line);
    const fx::Opcode op = fx::opcode_from_name(f[0]);
    fx::Argument args = LiteralParser(f[3], nodes).parse();
    fx::Argument kw = LiteralParser(f[4], nodes).parse();
    fx::Kwargs kwargs;
    for (const auto& kv : kw.dict_items()) kwargs.set(kv.first.to_string(), kv.second);
    std::optional<std::string> type;
    if (f.size() > 5 && !f[5].empty()) type = f[5];
    fx::Target target =
        op == fx::Opcode::CallFunction ? fx::Target(fx::fn(f[2])) : fx::Target(f[2]);
    fx::Node* n = op == fx::Opcode::Output
                      ? g->output(args.elements().at(0), type)
                      : g->create_node(op, target, args.elements(), kwargs, f[1], type);
    EXPECT_EQ(n->name(), f[1]);
    nodes[f[1]] = n;
  }
  return g;
}

// The sections of a golden ("-- name\n...").
inline std::map<std::string, std::string> sections(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t pos = 0;
  while ((pos = text.find("-- ", pos)) != std::string::npos) {
    const size_t nl = text.find('\n', pos);
    const std::string name = text.substr(pos + 3, nl - pos - 3);
    const size_t end = text.find("\n-- ", nl);  // == nl for an empty section
    if (end == std::string::npos) {
      out[name] = text.substr(nl + 1, text.size() - nl - 2);
      break;
    }
    out[name] = end == nl ? std::string() : text.substr(nl + 1, end - nl - 1);
    pos = end + 1;
  }
  return out;
}

inline fx::Tensor float_tensor(const std::vector<int64_t>& shape, const std::vector<float>& v) {
  fx::Tensor t;
  t.dtype = fx::Dtype::Float32;
  t.shape = shape;
  auto bytes = std::make_shared<std::vector<uint8_t>>(v.size() * sizeof(float));
  std::memcpy(bytes->data(), v.data(), bytes->size());
  t.data = bytes;
  return t;
}

inline std::vector<float> floats_of(const fx::Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  fx::Bytes b = t.bytes();
  if (b) std::memcpy(v.data(), b->data(), v.size() * sizeof(float));
  return v;
}

// The attribute tree of the "modules" and "tensors" sections (values of float32 tensors only).
inline std::shared_ptr<fx::Module> build_modules(const std::string& modules,
                                                 const std::string& tensors) {
  auto root = std::make_shared<fx::Module>();
  for (const std::string& line : lines(modules)) {
    std::vector<std::string> f = split(line, '\t');
    std::string extra = f.size() > 2 ? f[2] : "";
    for (size_t p; (p = extra.find("\\n")) != std::string::npos;) extra.replace(p, 2, "\n");
    const size_t dot = f[0].rfind('.');
    fx::Module& parent =
        dot == std::string::npos ? *root : *root->get_submodule(f[0].substr(0, dot));
    parent.add_module(f[0].substr(dot == std::string::npos ? 0 : dot + 1),
                      std::make_shared<fx::Module>(f[1], extra));
  }
  for (const std::string& line : lines(tensors)) {
    std::vector<std::string> f = split(line, '\t');
    std::vector<int64_t> shape;
    if (!f[3].empty())
      for (const std::string& d : split(f[3], ',')) shape.push_back(std::stoll(d));
    std::vector<float> v;
    std::istringstream in(f.at(4));
    for (std::string x; in >> x;) v.push_back(std::stof(x));
    fx::Tensor t = float_tensor(shape, v);
    if (f.at(2) != "float32") {  // other dtypes: metadata only
      t.dtype = fx::dtype_from_name(f[2]);
      t.data = nullptr;
    }
    const size_t dot = f[0].rfind('.');
    fx::Module& parent =
        dot == std::string::npos ? *root : *root->get_submodule(f[0].substr(0, dot));
    const std::string name = f[0].substr(dot == std::string::npos ? 0 : dot + 1);
    if (f[1] == "p") {
      parent.register_parameter(name, t);
    } else {
      parent.register_buffer(name, t);
    }
  }
  return root;
}

inline std::vector<std::string> golden_index(const std::string& dir) {
  return lines(read_file(std::string(FXWASM_GOLDEN_DIR) + "/" + dir + "/INDEX.txt"));
}

}  // namespace fxtest
