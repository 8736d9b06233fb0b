// Shape inference without data (fx::exec::infer_shapes): the size polynomials, hand-built graphs
// (gaps, stale meta, absurd sizes, overrides), and every zoo model checked against runs at two
// sets of sizes for its named dims: each dim inference states, evaluated at those sizes, must
// equal the dim the run computed. (ONNX's backend suite checks the same on 900 cases at their
// concrete sizes: tests/onnx_backend/runner.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "exec/sym_dim.h"
#include "fx/exec.h"
#include "fx/exec/passes.h"
#include "fx/fx.h"
#include "fx/onnx.h"
#include "zoo_util.h"

namespace {

using fx::Argument;
using fx::fn;
using fx::Node;
using fx::exec::SymDim;
using fx::exec::Value;

const Argument* dict_get(const Argument* d, const char* key) {
  if (!d || d->kind() != Argument::Kind::Dict) return nullptr;
  for (const auto& kv : d->dict_items())
    if (kv.first.to_string() == key) return &kv.second;
  return nullptr;
}

std::string shape_of(const Node* n) {
  const Argument* shape = dict_get(n->meta().find("tensor_meta"), "shape");
  if (!shape) return "untyped";
  std::string s = "(";
  for (const Argument& d : shape->elements()) {
    if (s.size() > 1) s += ", ";
    s += d.kind() == Argument::Kind::Int      ? std::to_string(d.to_int())
         : d.kind() == Argument::Kind::String ? d.to_string()
                                              : "None";
  }
  return s + ")";
}

// Evaluates "2*batch*seq + 1" (what SymDim::str() writes) at named sizes.
int64_t evaluate(const std::string& expr, const std::map<std::string, int64_t>& sizes) {
  int64_t total = 0, sign = 1;
  std::istringstream in(expr);
  for (std::string tok; in >> tok;) {
    if (tok == "+" || tok == "-") {
      sign = tok == "+" ? 1 : -1;
      continue;
    }
    int64_t term = sign;
    if (tok[0] == '-') {
      term = -term;
      tok = tok.substr(1);
    }
    std::stringstream factors(tok);
    for (std::string f; std::getline(factors, f, '*');) {
      auto it = sizes.find(f);
      term *= it != sizes.end() ? it->second : std::stoll(f);
    }
    total += term;
  }
  return total;
}

TEST(SymDim, PolynomialArithmeticStaysExact) {
  const SymDim b = SymDim::symbol("batch"), s = SymDim::symbol("seq");
  EXPECT_EQ((b * s * SymDim(768)).str(), "768*batch*seq");
  EXPECT_EQ(floordiv(b * s * SymDim(768), SymDim(12) * SymDim(64)), b * s);
  EXPECT_EQ(floordiv(b * s * SymDim(768), b * SymDim(768)), s);
  EXPECT_EQ((s + SymDim(1)).str(), "seq + 1");
  EXPECT_EQ((SymDim(2) * s - SymDim(3)).str(), "2*seq - 3");
  EXPECT_EQ(s - s, SymDim(0));
  EXPECT_FALSE(floordiv(s, SymDim(2)).known()) << "seq // 2 is not a polynomial";
  EXPECT_FALSE(floordiv(s + SymDim(1), s).known());
  EXPECT_FALSE(floordiv(SymDim(4), SymDim(0)).known());
  EXPECT_EQ(floordiv(SymDim(-7), SymDim(2)), SymDim(-4));
  EXPECT_FALSE((SymDim() + s).known());
  EXPECT_NE(SymDim(), SymDim()) << "two unknown dims are not known to be equal";
  EXPECT_FALSE((SymDim(int64_t{1} << 62) * SymDim(8)).known()) << "overflow is unknown";
  EXPECT_EQ(SymDim::symbol("n").str(), "n");
}

fx::Tensor i64_tensor(std::vector<int64_t> shape, const std::vector<int64_t>& v) {
  fx::Tensor t;
  t.dtype = fx::Dtype::Int64;
  t.shape = std::move(shape);
  auto bytes = std::make_shared<std::vector<uint8_t>>(v.size() * 8);
  if (!v.empty()) std::memcpy(bytes->data(), v.data(), bytes->size());
  t.data = bytes;
  return t;
}

void set_input_type(Node* p, fx::Dtype dtype, Argument::Items dims) {
  p->meta().set(fx::onnx::kType,
                Argument::dict({{"dtype", dtype}, {"shape", Argument::tuple(std::move(dims))}}));
}

TEST(ShapeInfer, ShapeArithmeticKeepsNamedSizes) {
  // y = Reshape(x, Concat(Shape(x)[0:2], [12, -1])) -> (batch, seq, 12, 64); the batch-first
  // flatten Reshape(y, [0, 0, -1]) -> (batch, seq, 768); x + Slice(pos)[:, :seq] broadcasts.
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  set_input_type(x, fx::Dtype::Float32, {"batch", "seq", 768});
  Node* shape = g->call_function(fn("onnx.Shape"), {x}, {{"end", 2}});
  Node* heads = g->call_function(fn("onnx.Concat"), {shape, g->get_attr("heads")}, {{"axis", 0}});
  Node* y = g->call_function(fn("onnx.Reshape"), {x, heads});
  Node* flat = g->call_function(fn("onnx.Reshape"), {y, g->get_attr("flat")});
  Node* seq = g->call_function(fn("onnx.Gather"), {shape, g->get_attr("one")}, {{"axis", 0}});
  Node* seq1 = g->call_function(fn("onnx.Unsqueeze"), {seq, g->get_attr("zero")});
  Node* pos = g->call_function(fn("onnx.Slice"),
                               {g->get_attr("pos"), g->get_attr("zero"), seq1, g->get_attr("one")});
  Node* sum = g->call_function(fn("onnx.Add"), {flat, pos});
  Node* big = g->call_function(fn("onnx.ConstantOfShape"), {g->get_attr("huge")});
  g->output(Argument::tuple({sum, big}));
  fx::Module root;
  root.register_buffer("heads", i64_tensor({2}, {12, -1}));
  root.register_buffer("flat", i64_tensor({3}, {0, 0, -1}));
  root.register_buffer("zero", i64_tensor({1}, {0}));
  root.register_buffer("one", i64_tensor({}, {1}));
  root.register_buffer("huge", i64_tensor({3}, {int64_t{1} << 40, int64_t{1} << 40, 1 << 20}));
  fx::Tensor pos_t;
  pos_t.shape = {1, 512, 768};
  pos_t.data = std::make_shared<std::vector<uint8_t>>(512 * 768 * 4);
  root.register_parameter("pos", pos_t);
  fx::GraphModule gm(&root, std::move(g));

  const fx::exec::ShapeInferResult r = fx::exec::infer_shapes(gm);
  EXPECT_TRUE(r.gaps.empty()) << r.gaps.size() << " gaps, first: " << r.gaps[0].node << ": "
                              << r.gaps[0].reason;
  EXPECT_EQ(r.typed, r.total);
  EXPECT_EQ(shape_of(y), "(batch, seq, 12, 64)");
  EXPECT_EQ(shape_of(flat), "(batch, seq, 768)");
  EXPECT_EQ(shape_of(pos), "(1, None, 768)") << "min(seq, 512) is not a polynomial";
  EXPECT_EQ(shape_of(sum), "(batch, seq, 768)");
  // An absurd constant shape is typed, never allocated.
  EXPECT_EQ(shape_of(big), "(1099511627776, 1099511627776, 1048576)");

  // Given sizes instead of the declared ones.
  fx::exec::ShapeInferOptions o;
  o.input_shapes["x"] = {2, "tokens", 768};
  fx::exec::infer_shapes(gm, o);
  EXPECT_EQ(shape_of(sum), "(2, tokens, 768)");
  o.input_shapes["x"] = {2, 5, 768};
  fx::exec::infer_shapes(gm, o);
  EXPECT_EQ(shape_of(y), "(2, 5, 12, 64)");
}

TEST(ShapeInfer, UntypedNodesAreReportedAndLoseStaleMeta) {
  auto g = std::make_unique<fx::Graph>();
  Node* x = g->placeholder("x");
  set_input_type(x, fx::Dtype::Float32, {2, 3});
  Node* odd = g->call_function(fn("onnx.NoSuchOp"), {x});
  Node* after = g->call_function(fn("onnx.Relu"), {odd});
  Node* r1 = g->call_function(fn("onnx.Relu"), {x});
  Node* bad = g->call_function(fn("onnx.MatMul"), {x, r1});  // 2x3 @ 2x3
  g->output(Argument::tuple({after, bad}));
  odd->meta().set("tensor_meta", Argument::dict({{"shape", Argument::tuple({7})}}));
  fx::Module root;
  fx::GraphModule gm(&root, std::move(g));
  const fx::exec::ShapeInferResult r = fx::exec::infer_shapes(gm);
  ASSERT_EQ(r.gaps.size(), 3u);
  EXPECT_EQ(r.gaps[0].node, odd->name());
  EXPECT_EQ(r.gaps[0].target, "onnx.NoSuchOp");
  EXPECT_NE(r.gaps[0].reason.find("no shape rule for onnx.NoSuchOp"), std::string::npos);
  EXPECT_EQ(r.gaps[1].node, after->name());
  EXPECT_NE(r.gaps[1].reason.find("is not known"), std::string::npos);
  EXPECT_NE(r.gaps[2].reason.find("inner dims differ: 3 and 2"), std::string::npos);
  EXPECT_EQ(shape_of(odd), "untyped") << "the stale tensor_meta must go";
  EXPECT_EQ(shape_of(r1), "(2, 3)");
  EXPECT_EQ(r.typed, 2u);
}

std::vector<std::string> zoo_models() {
  std::vector<std::string> out = fxtest::onnx_files(std::string(FXWASM_MODELS_DIR) + "/zoo");
  for (const std::string& q : fxtest::onnx_files(std::string(FXWASM_MODELS_DIR) + "/zoo/quantized"))
    out.push_back(q);
  return out;
}

// Inputs of the declared types with named dims at `sizes` (zeros: the zoo's integer inputs are
// token ids, and 0 is a valid one).
std::vector<Value> inputs_at(const fx::GraphModule& gm,
                             const std::map<std::string, int64_t>& sizes) {
  std::vector<Value> out;
  for (const Node* n : gm.graph().nodes()) {
    if (n->op() != fx::Opcode::Placeholder) continue;
    const Argument* t = n->meta().find(fx::onnx::kType);
    std::vector<int64_t> shape;
    for (const Argument& d : dict_get(t, "shape")->elements())
      shape.push_back(d.kind() == Argument::Kind::Int ? d.to_int() : sizes.at(d.to_string()));
    out.push_back(Value::zeros(dict_get(t, "dtype")->to_dtype(), shape));
  }
  return out;
}

TEST(ShapeInfer, EveryZooModelIsTypedAndAgreesWithRunsAtTwoSizes) {
  const std::vector<std::string> models = zoo_models();
  ASSERT_FALSE(models.empty()) << "models/zoo is absent: run scripts/setup.sh";
  size_t named = 0;
  for (const std::string& path : models) {
#ifdef __EMSCRIPTEN__
    // As zoo_passes_test: the CNNs over 10 MB take minutes to import and run in wasm under node.
    if (std::ifstream(path, std::ios::binary | std::ios::ate).tellg() > (10 << 20)) continue;
#endif
    SCOPED_TRACE(path);
    std::unique_ptr<fx::GraphModule> gm = fx::onnx::load_model(path);
    const fx::exec::ShapeInferResult r = fx::exec::infer_shapes(*gm);
    for (const auto& gap : r.gaps)
      ADD_FAILURE() << gap.node << " (" << gap.target << "): " << gap.reason;
    std::map<std::string, Argument> inferred;
    fx::exec::RunOptions opts;
    for (Node* n : gm->graph().nodes())
      if (const Argument* tm = n->meta().find("tensor_meta")) {
        inferred[n->name()] = *dict_get(tm, "shape");
        opts.probe.push_back(n->name());
      }
    for (const auto& sizes : {std::map<std::string, int64_t>{{"batch", 2}, {"seq", 3}, {"N", 2}},
                              std::map<std::string, int64_t>{{"batch", 3}, {"seq", 7}, {"N", 1}}}) {
      const fx::exec::RunResult ran = fx::exec::run(*gm, inputs_at(*gm, sizes), opts);
      for (const auto& [node, v] : ran.probes) {
        const Argument& shape = inferred.at(node);
        ASSERT_EQ(shape.elements().size(), v.shape().size()) << node;
        for (size_t i = 0; i < v.shape().size(); ++i) {
          const Argument& d = shape.elements()[i];
          if (d.kind() == Argument::Kind::Int) {
            EXPECT_EQ(d.to_int(), v.shape()[i]) << node << " dim " << i;
          } else if (d.kind() == Argument::Kind::String) {
            ++named;
            EXPECT_EQ(evaluate(d.to_string(), sizes), v.shape()[i])
                << node << " dim " << i << " = " << d.to_string();
          } else {
            ADD_FAILURE() << node << " dim " << i << " is unknown";
          }
        }
      }
    }
  }
  EXPECT_GT(named, 100u) << "the dynamic models' named sizes must reach their nodes";
}

}  // namespace
