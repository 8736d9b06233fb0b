// Lowering handlers of ops that lay data out anew: DepthToSpace, SpaceToDepth, Resize.
#include <cmath>
#include <cstring>

#include "fx/onnx.h"
#include "torch_codegen/lower_ops.h"

namespace fx::torch_codegen {

namespace {

using Kind = LVal::Kind;

// [N, C, H, W] of a 4-D input as shape arithmetic (literals where static).
std::vector<SymInt> nchw(Lowerer& L, const Node& n, const LVal& x) {
  if (L.rank(x) != 4) L.unsupported(n, "an input that is not 4-D");
  std::vector<SymInt> dims;
  for (int64_t d = 0; d < 4; ++d) dims.push_back(L.size(x, d));
  return dims;
}

void depth_to_space(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const int64_t b = L.attr_int(n, "blocksize", 0);
  if (b <= 0) L.unsupported(n, "blocksize " + std::to_string(b));
  Node* t = L.as_tensor(x);
  if (L.attr_string(n, "mode", "DCR") == "CRD") {  // torch's pixel shuffle order
    L.set(n, L.tensor(L.call("torch.pixel_shuffle", {t, static_cast<long long>(b)}), n));
    return;
  }
  const std::vector<SymInt> s = nchw(L, n, x);
  if (!s[1].value || *s[1].value % (b * b) != 0)
    L.unsupported(n, "a channel count that is not a static multiple of blocksize^2");
  const SymInt c{*s[1].value / (b * b), {}};
  const SymInt bb{b, {}};
  Node* y = L.method("reshape", {t, Lowerer::list_arg({s[0], bb, bb, c, s[2], s[3]})});
  y = L.method("permute", {y, int_list({0, 3, 4, 1, 5, 2})});
  y = L.method("reshape",
               {y, Lowerer::list_arg({s[0], c, sym_mul(L, s[2], b), sym_mul(L, s[3], b)})});
  L.set(n, L.tensor(y, n));
}

void space_to_depth(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const int64_t b = L.attr_int(n, "blocksize", 0);
  if (b <= 0) L.unsupported(n, "blocksize " + std::to_string(b));
  const std::vector<SymInt> s = nchw(L, n, x);
  const SymInt bb{b, {}};
  const SymInt h = sym_div(L, s[2], b), w = sym_div(L, s[3], b);
  Node* y = L.method("reshape", {L.as_tensor(x), Lowerer::list_arg({s[0], s[1], h, bb, w, bb})});
  y = L.method("permute", {y, int_list({0, 3, 5, 1, 2, 4})});
  y = L.method("reshape", {y, Lowerer::list_arg({s[0], sym_mul(L, s[1], b * b), h, w})});
  L.set(n, L.tensor(y, n));
}

// The float values of a constant 1-D input (Resize's scales), or false.
bool constant_floats(const LVal& v, std::vector<double>& out) {
  if (!v.constant || !v.constant->has_data() || v.constant->shape.size() != 1) return false;
  Bytes b = v.constant->bytes();
  out.clear();
  for (int64_t i = 0; i < v.constant->numel(); ++i) {
    if (v.constant->dtype == Dtype::Float32) {
      float f;
      std::memcpy(&f, b->data() + i * 4, 4);
      out.push_back(f);
    } else if (v.constant->dtype == Dtype::Float64) {
      double d;
      std::memcpy(&d, b->data() + i * 8, 8);
      out.push_back(d);
    } else {
      return false;
    }
  }
  return true;
}

// Resize as torch.nn.functional.interpolate, for the modes torch has: nearest with asymmetric
// coordinates and floor ('nearest'), nearest with half_pixel and round_prefer_ceil
// ('nearest-exact'), linear with half_pixel or align_corners, cubic with half_pixel and
// a = -0.75 ('bicubic', 4-D); sizes or spatial scales (batch and channel scales 1). Other
// modes and runtime scales/sizes: resize_explicit (lower_spatial.cpp).
void resize(Lowerer& L, const Node& n) {
  LVal x = L.in(n, 0);
  const int64_t r = L.rank(x);
  const int64_t spatial = r - 2;
  if (spatial < 1 || spatial > 3) return resize_explicit(L, n, false);
  if (L.attr_int(n, "antialias", 0)) L.unsupported(n, "antialias = 1");
  if (L.has_attr(n, "axes")) L.unsupported(n, "the axes attribute");
  const std::string mode = L.attr_string(n, "mode", "nearest");
  const std::string coord = L.attr_string(n, "coordinate_transformation_mode",
                                          L.opset() < 11 ? "asymmetric" : "half_pixel");
  const std::string nearest = L.attr_string(n, "nearest_mode", "round_prefer_floor");
  Kwargs kw;  // align_corners, where the mode has it
  std::string torch_mode;
  if (mode == "nearest" && coord == "asymmetric" && nearest == "floor") {
    torch_mode = "nearest";
  } else if (mode == "nearest" && coord == "half_pixel" && nearest == "round_prefer_ceil") {
    torch_mode = "nearest-exact";
  } else if (mode == "linear" &&
             (coord == "half_pixel" || coord == "pytorch_half_pixel" || coord == "align_corners")) {
    torch_mode = spatial == 1 ? "linear" : spatial == 2 ? "bilinear" : "trilinear";
    kw.set("align_corners", coord == "align_corners");
  } else if (mode == "cubic" && spatial == 2 &&
             (coord == "half_pixel" || coord == "pytorch_half_pixel" || coord == "align_corners") &&
             std::abs(L.attr_float(n, "cubic_coeff_a", -0.75) + 0.75) < 1e-6 &&
             !L.attr_int(n, "exclude_outside", 0)) {
    torch_mode = "bicubic";
    kw.set("align_corners", coord == "align_corners");
  } else {
    return resize_explicit(L, n, false);  // written out in torch ops
  }
  // Opset 10: (X, scales); from 11: (X, roi, scales, sizes).
  const LVal scales = L.opset() < 11 ? L.in(n, 1) : L.in(n, 2);
  const LVal sizes = L.opset() < 11 ? LVal{} : L.in(n, 3);
  std::vector<SymInt> size_ints;
  std::vector<double> scale_values;
  // The keyword form torch.fx records for F.interpolate (so a re-trace prints this graph).
  Argument size, scale_factor;
  if (sizes.kind != Kind::None && L.as_ints(sizes, size_ints) &&
      size_ints.size() == static_cast<size_t>(r)) {
    // pytorch_half_pixel maps an output of length 1 to 0, torch's interpolate does not.
    if (coord == "pytorch_half_pixel")
      for (size_t d = 2; d < size_ints.size(); ++d)
        if (!size_ints[d].value || *size_ints[d].value <= 1) return resize_explicit(L, n, false);
    size = Lowerer::list_arg(std::vector<SymInt>(size_ints.begin() + 2, size_ints.end()));
  } else if (scales.kind != Kind::None && constant_floats(scales, scale_values) &&
             scale_values.size() == static_cast<size_t>(r)) {
    if (scale_values[0] != 1.0 || scale_values[1] != 1.0)
      return resize_explicit(L, n, false);  // scaling the batch or channel dim
    if (coord == "pytorch_half_pixel")      // downscaling may reach the length-1 case (see above)
      for (int64_t d = 2; d < r; ++d)
        if (scale_values[d] < 1.0) return resize_explicit(L, n, false);
    Argument::Items f;
    for (int64_t d = 2; d < r; ++d) f.emplace_back(scale_values[d]);
    scale_factor = Argument::list(std::move(f));
  } else {  // runtime scales or sizes
    return resize_explicit(L, n, false);
  }
  const Argument align = kw.contains("align_corners") ? kw.at("align_corners") : Argument();
  Kwargs all{
      {"size", size},           {"scale_factor", scale_factor},         {"mode", torch_mode},
      {"align_corners", align}, {"recompute_scale_factor", Argument()}, {"antialias", false}};
  L.set(n,
        L.tensor(L.call("torch.nn.functional.interpolate", {L.as_tensor(x)}, std::move(all)), n));
}

}  // namespace

void add_layout_handlers(std::vector<HandlerEntry>& table) {
  table.insert(table.end(), {
                                {"DepthToSpace", 1, depth_to_space},
                                {"Resize", 10, resize},
                                {"SpaceToDepth", 1, space_to_depth},
                            });
}

}  // namespace fx::torch_codegen
