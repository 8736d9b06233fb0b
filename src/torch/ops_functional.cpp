// The LibTorch implementations of torch.nn.functional.* (and the torch.* / torch._C._nn.* names
// those functions are), registered into the op table of ops.cpp.
#include <string>
#include <vector>

#include "torch/ops_internal.h"

namespace fx {
namespace torch {
namespace detail {

#define FX_CALL(name) Call c(name, a, k)

void register_functional_ops(Table& t) {
  // torch.nn.functional.*
  t.functions[fx::fn("torch.nn.functional.relu").get()] = [](const Args& a, const ValueKwargs& k) {
    FX_CALL("relu");
    at::Tensor x = c.tensor(0, "input");
    return Value(c.flag(1, "inplace", false) ? at::relu_(x) : at::relu(x));
  };
  t.functions[fx::fn("torch.nn.functional.gelu").get()] = [](const Args& a, const ValueKwargs& k) {
    FX_CALL("gelu");
    const Value* ap = c.opt(1, "approximate");
    return Value(at::gelu(c.tensor(0, "input"), ap ? ap->constant().to_string() : "none"));
  };
  t.functions[fx::fn("torch.nn.functional.softmax").get()] = [](const Args& a,
                                                                const ValueKwargs& k) {
    FX_CALL("softmax");
    return Value(
        at::softmax(c.tensor(0, "input"), c.req(1, "dim").to_int(), opt_dtype(c, 3, "dtype")));
  };
  t.functions[fx::fn("torch.nn.functional.log_softmax").get()] = [](const Args& a,
                                                                    const ValueKwargs& k) {
    FX_CALL("log_softmax");
    return Value(
        at::log_softmax(c.tensor(0, "input"), c.req(1, "dim").to_int(), opt_dtype(c, 3, "dtype")));
  };
  t.functions[fx::fn("torch.nn.functional.adaptive_avg_pool2d").get()] = [](const Args& a,
                                                                            const ValueKwargs& k) {
    FX_CALL("adaptive_avg_pool2d");
    std::vector<int64_t> size = Call::ints(c.req(1, "output_size"));
    if (size.size() == 1) size.push_back(size[0]);
    return Value(at::adaptive_avg_pool2d(c.tensor(0, "input"), size));
  };
  t.functions[fx::fn("torch.nn.functional.dropout").get()] = [](const Args& a,
                                                                const ValueKwargs& k) {
    FX_CALL("dropout");
    return Value(
        at::dropout(c.tensor(0, "input"), c.f64(1, "p", 0.5), c.flag(2, "training", true)));
  };
  t.functions[fx::fn("torch._C._nn.linear").get()] = [](const Args& a, const ValueKwargs& k) {
    FX_CALL("linear");
    c10::optional<at::Tensor> bias;
    if (const Value* b = c.opt(2, "bias")) bias = b->tensor();
    return Value(at::linear(c.tensor(0, "input"), c.tensor(1, "weight"), bias));
  };
  t.functions[fx::fn("torch.nn.functional.layer_norm").get()] = [](const Args& a,
                                                                   const ValueKwargs& k) {
    FX_CALL("layer_norm");
    c10::optional<at::Tensor> w, b;
    if (const Value* v = c.opt(2, "weight")) w = v->tensor();
    if (const Value* v = c.opt(3, "bias")) b = v->tensor();
    return Value(at::layer_norm(c.tensor(0, "input"), Call::ints(c.req(1, "normalized_shape")), w,
                                b, c.f64(4, "eps", 1e-5)));
  };

  // The forms fx::torch_codegen::lower emits (the argument forms torch.fx records).
  for (int d = 1; d <= 3; ++d) {
    t.functions[fx::fn("torch.nn.functional.max_pool" + std::to_string(d) + "d").get()] =
        [d](const Args& a, const ValueKwargs& k) {
          FX_CALL("max_pool");
          const std::vector<int64_t> kernel = Call::ints(c.req(1, "kernel_size"));
          const Value* st = c.opt(2, "stride");
          const std::vector<int64_t> stride = st ? Call::ints(*st) : kernel;
          const std::vector<int64_t> pad = Call::ints(c.req(3, "padding"));
          const std::vector<int64_t> dil = Call::ints(c.req(4, "dilation"));
          const bool ceil = c.flag(5, "ceil_mode", false);
          if (c.flag(6, "return_indices", false))
            throw fx::Error(ErrorKind::Unsupported, "max_pool: return_indices=True");
          const at::Tensor x = c.tensor(0, "input");
          if (d == 1) return Value(at::max_pool1d(x, kernel, stride, pad, dil, ceil));
          if (d == 2) return Value(at::max_pool2d(x, kernel, stride, pad, dil, ceil));
          return Value(at::max_pool3d(x, kernel, stride, pad, dil, ceil));
        };
  }
  for (const char* name :
       {"torch.avg_pool1d", "torch._C._nn.avg_pool2d", "torch._C._nn.avg_pool3d"}) {
    const int d = name[std::string(name).size() - 2] - '0';
    t.functions[fx::fn(name).get()] = [d](const Args& a, const ValueKwargs& k) {
      FX_CALL("avg_pool");
      const std::vector<int64_t> kernel = Call::ints(c.req(1, "kernel_size"));
      const Value* st = c.opt(2, "stride");
      const std::vector<int64_t> stride = st ? Call::ints(*st) : kernel;
      const Value* p = c.opt(3, "padding");
      const std::vector<int64_t> pad = p ? Call::ints(*p) : std::vector<int64_t>(d, 0);
      const bool ceil = c.flag(4, "ceil_mode", false), count = c.flag(5, "count_include_pad", true);
      const at::Tensor x = c.tensor(0, "input");
      if (d == 1) return Value(at::avg_pool1d(x, kernel, stride, pad, ceil, count));
      if (d == 2) return Value(at::avg_pool2d(x, kernel, stride, pad, ceil, count));
      return Value(at::avg_pool3d(x, kernel, stride, pad, ceil, count));
    };
  }
  t.functions[fx::fn("torch.nn.functional.batch_norm").get()] = [](const Args& a,
                                                                   const ValueKwargs& k) {
    FX_CALL("batch_norm");
    auto opt = [&](size_t i, const char* key) {
      const Value* v = c.opt(i, key);
      return v ? c10::optional<at::Tensor>(v->tensor()) : c10::nullopt;
    };
    return Value(at::batch_norm(c.tensor(0, "input"), opt(3, "weight"), opt(4, "bias"),
                                opt(1, "running_mean"), opt(2, "running_var"),
                                c.flag(5, "training", false), c.f64(6, "momentum", 0.1),
                                c.f64(7, "eps", 1e-5), /*cudnn_enabled=*/false));
  };
  t.functions[fx::fn("torch.nn.functional.pad").get()] = [](const Args& a, const ValueKwargs& k) {
    FX_CALL("pad");
    const Value* mode = c.opt(2, "mode");
    const Value* value = c.opt(3, "value");
    const std::string m = mode ? mode->constant().to_string() : "constant";
    c10::optional<double> v;
    if (value) v = value->to_double();
    return Value(at::pad(c.tensor(0, "input"), Call::ints(c.req(1, "pad")), m, v));
  };
  for (const char* name : {"torch.functional.split", "torch.split"}) {
    t.functions[fx::fn(name).get()] = [](const Args& a, const ValueKwargs& k) {
      FX_CALL("split");
      const at::Tensor x = c.tensor(0, "tensor");
      const Value& s = c.req(1, "split_size_or_sections");
      const int64_t dim = c.i64(2, "dim", 0);
      if (s.is_sequence()) return tuple_of(x.split_with_sizes(Call::ints(s), dim));
      return tuple_of(x.split(s.to_int(), dim));
    };
  }
  t.functions[fx::fn("torch.nn.functional.leaky_relu").get()] = [](const Args& a,
                                                                   const ValueKwargs& k) {
    FX_CALL("leaky_relu");
    return Value(at::leaky_relu(c.tensor(0, "input"), c.f64(1, "negative_slope", 0.01)));
  };
  t.functions[fx::fn("torch.nn.functional.elu").get()] = [](const Args& a, const ValueKwargs& k) {
    FX_CALL("elu");
    return Value(at::elu(c.tensor(0, "input"), c.f64(1, "alpha", 1.0)));
  };
  t.functions[fx::fn("torch.nn.functional.hardswish").get()] = [](const Args& a,
                                                                  const ValueKwargs& k) {
    return Value(at::hardswish(Call("hardswish", a, k).tensor(0, "input")));
  };
  t.functions[fx::fn("torch._C._nn.gelu").get()] =
      t.functions[fx::fn("torch.nn.functional.gelu").get()];
}

#undef FX_CALL

}  // namespace detail
}  // namespace torch
}  // namespace fx
