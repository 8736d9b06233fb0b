// The model zoo of the LibTorch layer: each module is written once against fx::torch::Value and
// is the C++ twin of the Python class of the same name in scripts/gen_torch_goldens.py.
//
// C++ evaluates the operands of `a + b` and the arguments of a call in an unspecified order,
// Python left to right; expressions with two traced sub-expressions are therefore split into
// statements so that nodes are recorded in Python's order.
#pragma once

#include <torch/nn.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "fx/torch/torch.h"

namespace zoo {

namespace ft = fx::torch;
namespace nn = torch::nn;
using ft::call;
using ft::kw;
using ft::Param;
using ft::Value;

struct MyModule : ft::Module {
  MyModule() : Module("MyModule") {
    param = register_parameter("param", torch::rand({3, 4}));
    linear = register_module("linear", nn::Linear(4, 5));
  }
  Value forward(Value x) override {
    return call(linear, x + param).clamp(kw("min", 0.0), kw("max", 1.0));
  }
  torch::Tensor param;
  nn::Linear linear{nullptr};
};

struct TopkModule : ft::Module {
  TopkModule() : Module("TopkModule") {
    param = register_parameter("param", torch::rand({3, 4}));
    linear = register_module("linear", nn::Linear(4, 5));
  }
  Value forward(Value x) override {
    return ft::topk(ft::sum(call(linear, x + linear->weight).relu(), kw("dim", -1)), 3);
  }
  torch::Tensor param;
  nn::Linear linear{nullptr};
};

struct MLP : ft::Module {
  MLP() : Module("MLP") {
    fc1 = register_module("fc1", nn::Linear(16, 32));
    drop = register_module("drop", nn::Dropout(0.1));
    fc2 = register_module("fc2", nn::Linear(32, 32));
    fc3 = register_module("fc3", nn::Linear(32, 4));
  }
  Value forward(Value x) override {
    x = ft::F::relu(call(fc1, x));
    x = call(drop, x);
    x = ft::relu(call(fc2, x));
    x = ft::F::dropout(x, 0.2, is_training());
    return call(fc3, x).softmax(kw("dim", -1));
  }
  nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
  nn::Dropout drop{nullptr};
};

struct CNN : ft::Module {
  CNN() : Module("CNN") {
    features = register_module(
        "features",
        nn::Sequential(nn::Conv2d(nn::Conv2dOptions(3, 8, 3).padding(1)), nn::BatchNorm2d(8),
                       nn::ReLU(nn::ReLUOptions(true)), nn::MaxPool2d(2)));
    conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(8, 16, 3).stride(2).bias(false)));
    bn2 = register_module("bn2", nn::BatchNorm2d(16));
    drop = register_module("drop", nn::Dropout(0.5));
    fc = register_module("fc", nn::Linear(16, 10));
  }
  Value forward(Value x) override {
    x = call(features, x);
    x = ft::F::relu(call(bn2, call(conv2, x)));
    x = ft::F::adaptive_avg_pool2d(x, Value::tuple({1, 1}));
    x = ft::flatten(x, 1);
    x = call(drop, x);
    return ft::F::log_softmax(call(fc, x), 1);
  }
  nn::Sequential features{nullptr};
  nn::Conv2d conv2{nullptr};
  nn::BatchNorm2d bn2{nullptr};
  nn::Dropout drop{nullptr};
  nn::Linear fc{nullptr};
};

/// torchvision.models.resnet.BasicBlock (same attribute names and registration order).
struct BasicBlock : ft::Module {
  BasicBlock(int64_t inplanes, int64_t planes, int64_t stride) : Module("BasicBlock") {
    conv1 = register_module(
        "conv1",
        nn::Conv2d(nn::Conv2dOptions(inplanes, planes, 3).stride(stride).padding(1).bias(false)));
    bn1 = register_module("bn1", nn::BatchNorm2d(planes));
    relu = register_module("relu", nn::ReLU(nn::ReLUOptions(true)));
    conv2 = register_module(
        "conv2", nn::Conv2d(nn::Conv2dOptions(planes, planes, 3).stride(1).padding(1).bias(false)));
    bn2 = register_module("bn2", nn::BatchNorm2d(planes));
    if (stride != 1 || inplanes != planes)
      downsample = register_module(
          "downsample",
          nn::Sequential(
              nn::Conv2d(nn::Conv2dOptions(inplanes, planes, 1).stride(stride).bias(false)),
              nn::BatchNorm2d(planes)));
  }
  Value forward(Value x) override {
    Value out = call(conv1, x);
    out = call(bn1, out);
    out = call(relu, out);
    out = call(conv2, out);
    out = call(bn2, out);
    Value identity = downsample ? call(downsample, x) : x;
    out = out + identity;  // Python's `out += identity` (1.13's Proxy has no __iadd__)
    return call(relu, out);
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  nn::ReLU relu{nullptr};
  nn::Sequential downsample{nullptr};
};

/// torchvision.models.resnet18().
struct ResNet18 : ft::Module {
  explicit ResNet18(int64_t num_classes = 1000) : Module("ResNet") {
    conv1 = register_module(
        "conv1", nn::Conv2d(nn::Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false)));
    bn1 = register_module("bn1", nn::BatchNorm2d(64));
    relu = register_module("relu", nn::ReLU(nn::ReLUOptions(true)));
    maxpool =
        register_module("maxpool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
    layer1 = register_module("layer1", make_layer(64, 64, 1));
    layer2 = register_module("layer2", make_layer(64, 128, 2));
    layer3 = register_module("layer3", make_layer(128, 256, 2));
    layer4 = register_module("layer4", make_layer(256, 512, 2));
    avgpool =
        register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions({1, 1})));
    fc = register_module("fc", nn::Linear(512, num_classes));
  }
  static nn::Sequential make_layer(int64_t inplanes, int64_t planes, int64_t stride) {
    nn::Sequential seq;
    seq->push_back(std::make_shared<BasicBlock>(inplanes, planes, stride));
    seq->push_back(std::make_shared<BasicBlock>(planes, planes, 1));
    return seq;
  }
  std::vector<Param> signature() const override {
    return {Param("x", std::nullopt, "torch.Tensor")};
  }
  std::optional<std::string> return_type() const override { return "torch.Tensor"; }
  Value forward(Value x) override {
    x = call(conv1, x);
    x = call(bn1, x);
    x = call(relu, x);
    x = call(maxpool, x);
    x = call(layer1, x);
    x = call(layer2, x);
    x = call(layer3, x);
    x = call(layer4, x);
    x = call(avgpool, x);
    x = ft::flatten(x, 1);
    return call(fc, x);
  }
  nn::Conv2d conv1{nullptr};
  nn::BatchNorm2d bn1{nullptr};
  nn::ReLU relu{nullptr};
  nn::MaxPool2d maxpool{nullptr};
  nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};
  nn::AdaptiveAvgPool2d avgpool{nullptr};
  nn::Linear fc{nullptr};
};

/// Pre-norm transformer encoder block; attention written with matmul/softmax.
struct EncoderBlock : ft::Module {
  explicit EncoderBlock(int64_t d = 64, int64_t heads = 4, int64_t ff = 128)
      : Module("EncoderBlock"), heads(heads) {
    ln1 = register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({d})));
    qkv = register_module("qkv", nn::Linear(d, 3 * d));
    proj = register_module("proj", nn::Linear(d, d));
    drop = register_module("drop", nn::Dropout(0.1));
    ln2 = register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({d})));
    fc1 = register_module("fc1", nn::Linear(d, ff));
    act = register_module("act", nn::GELU());
    fc2 = register_module("fc2", nn::Linear(ff, d));
  }
  Value forward(Value x) override {
    Value b = x.size(0);
    Value t = x.size(1);
    Value c = x.size(2);
    Value hd = ft::floordiv_op(c, heads);
    Value h = call(qkv, call(ln1, x)).view(b, t, 3, heads, hd).permute(2, 0, 3, 1, 4);
    Value q = h[0];
    Value k = h[1];
    Value v = h[2];
    Value scores = ft::matmul(q, k.transpose(-2, -1));
    Value scale = 1.0 / ft::math_sqrt(hd);
    Value att = call(drop, (scores * scale).softmax(kw("dim", -1)));
    Value y = ft::matmul(att, v).transpose(1, 2).reshape(b, t, c);
    x = x + call(proj, y);
    return x + call(fc2, call(act, call(fc1, call(ln2, x))));
  }
  int64_t heads;
  nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  nn::Linear qkv{nullptr}, proj{nullptr}, fc1{nullptr}, fc2{nullptr};
  nn::Dropout drop{nullptr};
  nn::GELU act{nullptr};
};

struct DictTuple : ft::Module {
  DictTuple() : Module("DictTuple") {
    scale = register_buffer("scale", torch::ones({4}));
    lin = register_module("lin", nn::Linear(4, 4));
  }
  std::vector<Param> signature() const override {
    return {Param("x"), Param("y", fx::Argument()), Param("alpha", fx::Argument(2.0), "float")};
  }
  Value forward_args(std::vector<Value> args) override {
    const Value& x = args[0];
    const Value& alpha = args[2];
    const double inf = std::numeric_limits<double>::infinity();
    Value scaled = x * alpha;
    Value a = ft::cat(Value::list({x, scaled}), kw("dim", 0));
    Value b = ft::zeros(2, 4);
    Value c = a.to(fx::Dtype::Float64);
    Value d = ft::clamp(x, kw("min", -inf), kw("max", inf));
    Value e0 = x * scale;
    Value e1 = call(lin, x);
    Value e = Value::tuple({e0, e1});
    Value out = Value::dict({{"cat", a},
                             {"zeros", b},
                             {"tup", Value::tuple({c, d})},
                             {"lst", Value::list({e[0], e[1], Value()})},
                             {"n", 3}});
    return Value::tuple({out, Value::tuple({a, e[1]})});
  }
  torch::Tensor scale;
  nn::Linear lin{nullptr};
};

struct GetItem : ft::Module {
  GetItem() : Module("GetItem") {}
  Value forward(Value x) override {
    Value b = x.size(0);
    Value c = x.shape()[1];
    Value y = x.view(b, -1);
    Value z = x[Value::tuple({ft::slice(), ft::slice(1, 3)})];
    Value w = x[Value::tuple({ft::ellipsis(), Value(), 0})];
    Value s = y[0];
    Value n = x.size()[-1];
    Value r = y.reshape(b, c, -1);
    Value zs = z.sum();
    Value a1 = r + zs;
    Value wm = w.mean();
    Value a2 = a1 + wm;
    Value sm = s.max();
    Value mm = sm * n;
    Value a3 = a2 + mm;
    return Value::tuple({a3, x.dim()});
  }
};

struct Ops : ft::Module {
  Ops() : Module("Ops") {
    w = register_parameter("w", torch::rand({4, 4}));
    b = register_buffer("b", torch::ones({4}));
  }
  Value forward(Value x) override {
    Value c = ft::ones(4);
    Value a = 1 + x;
    Value m1 = 2.0 * a;
    Value m2 = 1 / x;
    Value m = m1 - m2;
    Value n = -m;
    Value p1 = ft::pow_op(n, 2);
    Value p2 = ft::pow_op(2, x);
    Value p = p1 + p2;
    Value q = c + p;
    Value r = b * q;
    Value s = w * r;
    Value t = ft::matmul_op(s, w).transpose(0, 1);
    Value u1 = t > 0;
    Value u2 = t < -1;
    Value u = u1 | u2;
    Value md = x % 3;
    Value fd = ft::floordiv_op(md, 2);
    Value wh = ft::where(u, t, fd);
    return Value::tuple({wh, t.sum(kw("dim", 0), kw("keepdim", true))});
  }
  torch::Tensor w, b;
};

/// The other LibTorch layers: Embedding, Conv1d/3d, BatchNorm1d/3d, ModuleList, AvgPool2d,
/// Flatten, GELU, LayerNorm.
struct Layers : ft::Module {
  Layers() : Module("Layers") {
    emb = register_module("emb", nn::Embedding(10, 8));
    conv1d = register_module("conv1d", nn::Conv1d(nn::Conv1dOptions(8, 8, 3).padding(1)));
    bn1d = register_module("bn1d", nn::BatchNorm1d(8));
    blocks = register_module("blocks", nn::ModuleList(nn::Linear(8, 8), nn::GELU(),
                                                      nn::LayerNorm(nn::LayerNormOptions({8}))));
    conv3d = register_module("conv3d", nn::Conv3d(nn::Conv3dOptions(1, 2, 3).padding(1)));
    bn3d = register_module("bn3d", nn::BatchNorm3d(2));
    pool = register_module("pool", nn::AvgPool2d(2));
    flat = register_module("flat", nn::Flatten());
  }
  std::vector<Param> signature() const override { return {"idx", "vol"}; }
  Value forward_args(std::vector<Value> args) override {
    Value h = call(emb, args[0]);
    h = call(bn1d, call(conv1d, h.transpose(1, 2))).transpose(1, 2);
    for (const auto& blk : *blocks) h = call(blk, h);
    Value v = call(bn3d, call(conv3d, args[1]));
    v = call(pool, v.sum(kw("dim", 2)));
    Value mean = h.mean(kw("dim", 1));
    return Value::tuple({mean, call(flat, v)});
  }
  nn::Embedding emb{nullptr};
  nn::Conv1d conv1d{nullptr};
  nn::BatchNorm1d bn1d{nullptr};
  nn::ModuleList blocks{nullptr};
  nn::Conv3d conv3d{nullptr};
  nn::BatchNorm3d bn3d{nullptr};
  nn::AvgPool2d pool{nullptr};
  nn::Flatten flat{nullptr};
};

struct Concrete : ft::Module {
  Concrete() : Module("Concrete") {}
  std::vector<Param> signature() const override { return {"x", "flag", "y"}; }
  Value forward_args(std::vector<Value> args) override {
    const Value& x = args[0];
    Value out = args[1] ? x + 1 : x * 2;
    if (args[2].is_none()) return out;
    return out + args[2];
  }
};

struct Leafy : ft::Module {
  Leafy() : Module("Leafy") {
    block = register_module("block", nn::Sequential(nn::Linear(4, 4), nn::ReLU()));
    head = register_module("head", nn::Linear(4, 2));
  }
  Value forward(Value x) override { return call(head, call(block, x)); }
  nn::Sequential block{nullptr};
  nn::Linear head{nullptr};
};

/// Keeps `block` a leaf too (LeafTracer of the Python script).
struct LeafTracer : ft::Tracer {
  bool is_leaf_module(const torch::nn::Module& m, const std::string& qualname) const override {
    return qualname == "block" || ft::Tracer::is_leaf_module(m, qualname);
  }
};

// ---- the zoo as test cases (fx_torch_tests: torch_test.cpp, passes_test.cpp) ----

struct ZooCase {
  std::string name;
  std::function<std::shared_ptr<ft::Module>()> make;
  // Inputs (ShapeProp and execution); a leading -N makes an int64 input of shape [N, ...]
  // holding indices in [0, 10).
  std::vector<std::vector<int64_t>> shapes;
  ft::ConcreteArgs concrete = {};
  bool leaf_tracer = false;
  bool check_repr = true;
};

inline void PrintTo(const ZooCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<ZooCase> zoo_cases() {
  return {
      {"my_module", [] { return std::make_shared<MyModule>(); }, {{3, 4}}},
      {"topk", [] { return std::make_shared<TopkModule>(); }, {{5, 4}}},
      {"mlp", [] { return std::make_shared<MLP>(); }, {{8, 16}}},
      {"cnn", [] { return std::make_shared<CNN>(); }, {{2, 3, 16, 16}}},
      {"resnet18", [] { return std::make_shared<ResNet18>(); }, {{1, 3, 64, 64}}},
      {"encoder_block", [] { return std::make_shared<EncoderBlock>(); }, {{2, 10, 64}}},
      {"dict_tuple", [] { return std::make_shared<DictTuple>(); }, {{2, 4}}},
      {"getitem", [] { return std::make_shared<GetItem>(); }, {{2, 4, 6}}},
      {"ops", [] { return std::make_shared<Ops>(); }, {{4, 4}}},
      {"layers", [] { return std::make_shared<Layers>(); }, {{-2, 5}, {2, 1, 4, 6, 6}}},
      {"concrete",
       [] { return std::make_shared<Concrete>(); },
       {},
       {{"flag", Value(true)}, {"y", Value()}}},
      {"leafy", [] { return std::make_shared<Leafy>(); }, {{3, 4}}, {}, true},
  };
}

inline torch::Tensor make_input(std::vector<int64_t> shape, bool random) {
  if (!shape.empty() && shape[0] < 0) {
    shape[0] = -shape[0];
    return random ? torch::randint(10, shape, torch::kLong) : torch::zeros(shape, torch::kLong);
  }
  return random ? torch::randn(shape) : torch::zeros(shape);
}

inline std::unique_ptr<fx::GraphModule> trace_case(const ZooCase& c,
                                                   const std::shared_ptr<ft::Module>& m) {
  if (c.leaf_tracer) {
    LeafTracer tracer;
    return ft::symbolic_trace(tracer, m, c.concrete);
  }
  return ft::symbolic_trace(m, c.concrete);
}

}  // namespace zoo
