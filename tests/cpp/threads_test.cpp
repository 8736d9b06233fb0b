// The kernels' thread pool: every zoo model gives the same bits with 1, 2 and 3 threads (threads
// split products by output columns or row tiles, each element keeps its reduction order);
// parallel_for's chunks, nesting and exceptions; and many runs of several modules from two caller
// threads at once, with modules destroyed in between, finish (no deadlock) with the one-thread
// results.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fx/exec.h"
#include "fx/onnx.h"
#include "kernels/conv.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/tensor_ops.h"
#include "kernels/thread_pool.h"
#include "zoo_util.h"

namespace {

std::unique_ptr<fx::GraphModule> load(const std::string& name) {
  std::ifstream in(std::string(FXWASM_MODELS_DIR) + "/" + name, std::ios::binary);
  if (!in) return nullptr;
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  return fx::onnx::import_model(bytes);
}

bool same_bits(const std::vector<fx::exec::Value>& a, const std::vector<fx::exec::Value>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].dtype() != b[i].dtype() || a[i].shape() != b[i].shape() ||
        a[i].nbytes() != b[i].nbytes())
      return false;
    if (a[i].nbytes() &&
        std::memcmp(a[i].data<uint8_t>(), b[i].data<uint8_t>(), a[i].nbytes()) != 0)
      return false;
  }
  return true;
}

// The wasm build has no threads: set_num_threads keeps one, and the results must not change.
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
constexpr bool kThreads = false;
#else
constexpr bool kThreads = true;
#endif

// Restores one thread when a test ends, whatever happens.
struct Threads {
  explicit Threads(int n) { fx::exec::set_num_threads(n); }
  ~Threads() { fx::exec::set_num_threads(1); }
};

const char* const kModels[] = {"zoo/resnet18.onnx",        "zoo/mobilenet_v2.onnx",
                               "zoo/squeezenet1_1.onnx",   "zoo/transformer_encoder.onnx",
                               "zoo/efficientnet_b0.onnx", "sample.onnx"};

TEST(Threads, EveryZooModelGivesTheSameBitsWithAnyThreadCount) {
  for (const char* name : kModels) {
    auto gm = load(name);
    ASSERT_TRUE(gm) << name << " is absent: run scripts/setup.sh (it generates the zoo)";
    const auto inputs = fxtest::seeded_inputs(*gm);
    fx::exec::set_num_threads(1);
    const auto one = fx::exec::run(*gm, inputs);
    for (int n : {2, 3}) {
      Threads t(n);
      EXPECT_EQ(fx::exec::num_threads(), kThreads ? n : 1);
      EXPECT_TRUE(same_bits(one, fx::exec::run(*gm, inputs)))
          << name << " with " << n << " threads";
    }
  }
}

TEST(Threads, SgemmSplitsByColumnsOrRowTilesBitIdentically) {
  // Shapes around the panel width and the split's thresholds, with and without a fused bias and
  // A packed ahead of time. Few column panels and many rows split by row tiles (MobileNet's 7x7
  // layers, 960 x 49; a partial last tile; K over one K block; the transposed product's shape).
  for (auto [M, N, K] : {std::array<int64_t, 3>{64, 3136, 147},
                         {7, 1000, 512},
                         {96, 130, 33},
                         {1, 4096, 256},
                         {512, 49, 4608},
                         {960, 49, 160},
                         {962, 49, 160},  // transposed, a last group of two rows
                         {97, 40, 64},
                         {1000, 13, 300},
                         {160, 96, 960}}) {
    std::vector<float> A(M * K), B(K * N), bias(M);
    for (size_t i = 0; i < A.size(); ++i) A[i] = static_cast<float>((i * 37 % 101) - 50) / 50.0f;
    for (size_t i = 0; i < B.size(); ++i) B[i] = static_cast<float>((i * 53 % 89) - 44) / 44.0f;
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.01f * static_cast<float>(i);
    fx::kernels::GemmEpilogue ep;
    ep.row_bias = bias.data();
    ep.lo = -2.0f;
    const fx::kernels::PackedOperand pa =
        fx::kernels::PackedOperand::left(false, M, K, A.data(), K, N);
    for (const bool packed : {false, true}) {
      std::vector<float> c1(M * N);
      fx::kernels::set_num_threads(1);
      fx::kernels::sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, c1.data(), N,
                         &ep, packed ? &pa : nullptr);
      for (int n : {2, 3, 4}) {
        std::vector<float> cn(M * N, -1.0f);
        Threads t(n);
        fx::kernels::sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, cn.data(),
                           N, &ep, packed ? &pa : nullptr);
        EXPECT_EQ(std::memcmp(c1.data(), cn.data(), c1.size() * sizeof(float)), 0)
            << M << "x" << N << "x" << K << (packed ? " packed" : "") << ", " << n << " threads";
      }
    }
  }
}

// Depthwise convolutions split by blocks of the channels their kernel takes at once (16 or 8 for
// the interleaved kernels, else single channels): every path (3x3 at strides 1 and 2 on small,
// large and over-128-wide planes, 5x5, 7x7 with padding, a partial last block, a Relu6 clamp)
// gives the bits of one thread at 2, 3 and 4 threads (odd block counts included), and matches the
// reference loops.
TEST(Threads, DepthwiseSplitsByChannelBlocksBitIdentically) {
  struct Case {
    int64_t C, H, K, stride, pad;
  };
  for (const Case& k : {Case{144, 56, 3, 1, 1}, Case{144, 56, 3, 2, 1}, Case{144, 28, 3, 1, 1},
                        Case{48, 112, 3, 2, 1}, Case{40, 29, 3, 1, 1}, Case{144, 14, 5, 1, 2},
                        Case{48, 56, 7, 1, 3}, Case{80, 9, 3, 1, 0}, Case{960, 7, 3, 1, 1},
                        Case{39, 130, 3, 1, 1}}) {
    fx::kernels::Conv2dParams p;
    p.C = p.M = p.group = k.C;
    p.H = p.W = k.H;
    p.KH = p.KW = k.K;
    p.stride_h = p.stride_w = k.stride;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = k.pad;
    p.clamp_lo = 0.0f;
    p.clamp_hi = 6.0f;
    std::vector<float> in(p.C * p.H * p.W), w(p.C * k.K * k.K), b(p.C);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i * 37 % 101) - 50) / 10.0f;
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 53 % 89) - 44) / 44.0f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = 0.01f * static_cast<float>(i);
    const size_t n = static_cast<size_t>(p.M * p.out_h() * p.out_w());
    std::vector<float> one(n), ref(n);
    std::vector<float> scratch(static_cast<size_t>(fx::kernels::conv2d_scratch_size(p)) + 1);
    fx::kernels::set_num_threads(1);
    fx::kernels::conv2d(p, in.data(), w.data(), b.data(), one.data(), scratch.data());
    fx::kernels::conv2d_reference(p, in.data(), w.data(), b.data(), ref.data());
    for (size_t i = 0; i < n; ++i)
      ASSERT_NEAR(one[i], ref[i], 1e-4f) << k.C << " " << k.H << " " << i;
    for (int t : {2, 3, 4}) {
      Threads threads(t);
      std::vector<float> many(n);
      fx::kernels::conv2d(p, in.data(), w.data(), b.data(), many.data(), scratch.data());
      EXPECT_EQ(std::memcmp(one.data(), many.data(), n * sizeof(float)), 0)
          << "C " << k.C << " H " << k.H << " K " << k.K << " stride " << k.stride << " threads "
          << t;
    }
  }
}

// Winograd convolutions whose transformed weights are small take blocks of tile rows through all
// three phases on each thread: the bits of one thread (the phase schedule) at 2-4 threads, with
// partial last blocks (55 and 23 rows), a batch of two, a residual and a clamp, F(4x4) and
// F(2x2). Where the blocks would be too thin (four threads on 7 tile rows) the phases split.
TEST(Threads, WinogradBlocksOfTileRowsGiveThePhaseScheduleBits) {
  struct Case {
    int64_t N, C, M, H, W;
    bool residual;
  };
  for (const Case& k : {Case{1, 16, 64, 55, 55, false}, Case{2, 64, 64, 56, 56, true},
                        Case{1, 48, 192, 13, 13, false}, Case{1, 24, 40, 23, 41, true}}) {
    fx::kernels::Conv2dParams p;
    p.N = k.N, p.C = k.C, p.M = k.M, p.H = k.H, p.W = k.W, p.KH = p.KW = 3;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
    p.clamp_lo = -2.0f;
    p.clamp_hi = 2.5f;
    ASSERT_TRUE(fx::kernels::conv2d_uses_winograd(p));
    const size_t in_size = static_cast<size_t>(k.N * k.C * k.H * k.W);
    const size_t out_size = static_cast<size_t>(k.N * k.M * p.out_h() * p.out_w());
    std::vector<float> x(in_size), w(static_cast<size_t>(k.M * k.C * 9)), b(k.M), res(out_size);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 29 % 113)) / 56.0f - 1.0f;
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 17 % 71)) / 350.0f - 0.1f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = 0.01f * static_cast<float>(i % 7);
    for (size_t i = 0; i < res.size(); ++i) res[i] = static_cast<float>((i * 13 % 37)) / 18.0f - 1;
    if (k.residual) p.residual = res.data();
    const auto packed = fx::kernels::conv2d_pack_weights(p, w.data());
    std::vector<float> scratch(static_cast<size_t>(fx::kernels::conv2d_scratch_size(p)) + 1);
    std::vector<float> one(out_size), ref(out_size);
    fx::kernels::set_num_threads(1);
    EXPECT_EQ(fx::kernels::winograd_block_rows(p), 0);
    fx::kernels::conv2d(p, x.data(), w.data(), b.data(), one.data(), scratch.data(), &packed);
    fx::kernels::conv2d_reference(p, x.data(), w.data(), b.data(), ref.data());
    for (size_t i = 0; i < out_size; ++i) ASSERT_NEAR(one[i], ref[i], 1e-3f) << k.C << " " << i;
    const int64_t tile = fx::kernels::winograd_output_tile(p);
    const int64_t tile_rows = (p.out_h() + tile - 1) / tile;
    for (int t : {2, 3, 4}) {
      Threads threads(t);
      if (!kThreads) continue;
      // Blocks of at least two tile rows, and not where they split unevenly into fewer than
      // four a thread (55x55 by F(4x4): 14 rows, blocks of 7 at 2 threads and 5 at 3, the phase
      // schedule at 4; 13x13 by F(2x2): 7 rows, the phases at 2 and 3).
      const bool blocks = tile_rows >= 2 * t && (tile_rows % t == 0 || tile_rows >= 4 * t);
      EXPECT_EQ(fx::kernels::winograd_block_rows(p), blocks ? (tile_rows + t - 1) / t : 0)
          << k.C << " -> " << k.M << " at " << k.H << "x" << k.W << ", " << t << " threads";
      std::vector<float> got(out_size, -7.0f);
      fx::kernels::conv2d(p, x.data(), w.data(), b.data(), got.data(), scratch.data(), &packed);
      EXPECT_EQ(std::memcmp(one.data(), got.data(), out_size * sizeof(float)), 0)
          << k.C << " -> " << k.M << " at " << k.H << "x" << k.W << ", " << t << " threads";
    }
  }
}

// An im2col convolution with a single band (small outputs: 6x6, too few tiles for Winograd, and
// 14x14) unfolds by channels on all threads, then runs a threaded GEMM: the bits of one thread at
// 2-4 threads, padded and strided.
TEST(Threads, SingleBandConvolutionUnfoldsOnAllThreadsBitIdentically) {
  for (const auto& [C, H, stride] : {std::array<int64_t, 3>{128, 6, 1}, {33, 28, 2}}) {
    fx::kernels::Conv2dParams p;
    p.C = C, p.H = p.W = H, p.M = 40, p.KH = p.KW = 3, p.stride_h = p.stride_w = stride;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
    ASSERT_FALSE(fx::kernels::conv2d_uses_winograd(p));
    std::vector<float> x(static_cast<size_t>(C * H * H)), w(static_cast<size_t>(40 * C * 9));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 29 % 113)) / 56.0f - 1.0f;
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 17 % 71)) / 35.0f - 1.0f;
    const size_t out_size = static_cast<size_t>(40 * p.out_h() * p.out_w());
    std::vector<float> scratch(static_cast<size_t>(fx::kernels::conv2d_scratch_size(p)) + 1);
    std::vector<float> one(out_size);
    fx::kernels::set_num_threads(1);
    fx::kernels::conv2d(p, x.data(), w.data(), nullptr, one.data(), scratch.data());
    for (int n : {2, 3, 4}) {
      std::vector<float> got(out_size, -1.0f);
      Threads t(n);
      fx::kernels::conv2d(p, x.data(), w.data(), nullptr, got.data(), scratch.data());
      EXPECT_EQ(std::memcmp(one.data(), got.data(), out_size * sizeof(float)), 0)
          << C << "x" << H << "x" << H << "/" << stride << ", " << n << " threads";
    }
  }
}

// copy_pieces (Concat's blocks) splits into 64 KB chunks across the threads: uneven pieces, an
// empty one and one under a chunk all land whole.
TEST(Threads, CopyPiecesLandWholeOnAnyThreadCount) {
  const std::vector<size_t> sizes = {300000, 0, 65536 * 3 + 7, 1000, 65535};
  size_t total = 0;
  for (size_t n : sizes) total += n;
  std::vector<uint8_t> src(total), dst(total + 1);
  for (size_t i = 0; i < total; ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  for (int n : {1, 2, 3, 4}) {
    Threads t(n);
    std::fill(dst.begin(), dst.end(), 0xAB);
    std::vector<fx::kernels::CopyPiece> pieces;
    size_t at = total;  // the pieces land in reverse order, from the end
    for (size_t k = 0, from = 0; k < sizes.size(); from += sizes[k], ++k) {
      at -= sizes[k];
      pieces.push_back({dst.data() + at, src.data() + from, sizes[k]});
    }
    fx::kernels::copy_pieces(pieces);
    for (size_t k = 0, from = 0, to = total; k < sizes.size(); from += sizes[k], ++k) {
      to -= sizes[k];
      ASSERT_EQ(std::memcmp(dst.data() + to, src.data() + from, sizes[k]), 0)
          << "piece " << k << ", " << n << " threads";
    }
    EXPECT_EQ(dst[total], 0xAB) << n << " threads";
  }
}

// Max pooling splits by planes: SqueezeNet's 3x3/2 ceil-mode windows and ResNet's padded ones,
// with NaNs in some planes (those take the exact path on whichever thread gets them), give the
// bits of one thread at 2-4 threads.
TEST(Threads, MaxPoolSplitsByPlanesBitIdentically) {
  for (const auto& [C, H, pad, ceil] :
       {std::array<int64_t, 4>{64, 111, 0, 1}, {128, 27, 0, 1}, {67, 56, 1, 0}, {3, 200, 1, 0}}) {
    fx::kernels::Pool2dParams p;
    p.C = C, p.H = p.W = H, p.KH = p.KW = 3, p.stride_h = p.stride_w = 2;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = pad;
    p.ceil_mode = ceil != 0;
    std::vector<float> x(static_cast<size_t>(C * H * H));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 41 % 211)) - 100.0f;
    for (int64_t c = 0; c < C; c += 5)
      x[static_cast<size_t>(c * H * H + (c % H) * H + c % 7)] = NAN;
    const size_t out_size = static_cast<size_t>(C * p.out_h() * p.out_w());
    std::vector<float> one(out_size);
    fx::kernels::set_num_threads(1);
    fx::kernels::max_pool2d(p, x.data(), one.data());
    for (int n : {2, 3, 4}) {
      std::vector<float> got(out_size, -1.0f);
      Threads t(n);
      fx::kernels::max_pool2d(p, x.data(), got.data());
      EXPECT_EQ(std::memcmp(one.data(), got.data(), out_size * sizeof(float)), 0)
          << C << "x" << H << "x" << H << ", " << n << " threads";
    }
  }
}

// Global average pooling splits by planes (SqueezeNet's 1000 x 13 x 13 in two chunks, three
// chunks of 101-102 planes at 3 threads; 512 x 7 x 7 stays on one thread).
TEST(Threads, GlobalAveragePoolSplitsByPlanesBitIdentically) {
  for (const auto& [C, HW] : {std::array<int64_t, 2>{1000, 169}, {305, 3025}, {512, 49}}) {
    std::vector<float> x(static_cast<size_t>(2 * C * HW));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 41 % 211)) * 0.37f - 30.0f;
    std::vector<float> one(static_cast<size_t>(2 * C));
    fx::kernels::set_num_threads(1);
    fx::kernels::global_avg_pool(2, C, HW, x.data(), one.data());
    for (int n : {2, 3}) {
      std::vector<float> got(one.size(), -1.0f);
      Threads t(n);
      fx::kernels::global_avg_pool(2, C, HW, x.data(), got.data());
      EXPECT_EQ(std::memcmp(one.data(), got.data(), one.size() * sizeof(float)), 0)
          << C << " x " << HW << ", " << n << " threads";
    }
  }
}

TEST(Threads, ElementwiseOpsSplitBitIdentically) {
  // Sizes past the split thresholds (64K elements for cheap ops, 8K for transcendental ones and
  // rows of Softmax/LayerNorm), not multiples of the chunks: ViT's GELU input (197 x 3072), an
  // odd length, broadcasting binary ops (by runs of the last dimension), its attention rows
  // (12 x 197 rows of 197) and LayerNorm rows (197 x 768).
  namespace k = fx::kernels;
  const int64_t n = 197 * 3072 + 5;
  std::vector<float> x(static_cast<size_t>(n)), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = 4.0f * std::sin(0.013f * static_cast<float>(i)) + static_cast<float>(i % 7) - 3.0f;
    y[i] = std::cos(0.007f * static_cast<float>(i));
  }
  x[1000] = NAN;
  x[n - 1] = INFINITY;
  std::vector<float> scale(768), bias(768);
  for (size_t i = 0; i < 768; ++i) scale[i] = 1.0f + 0.001f * i, bias[i] = 0.01f * (i % 13);
  auto run_all = [&] {
    std::vector<std::vector<float>> out;
    auto fresh = [&] { return std::vector<float>(x.size(), -7.0f); };
    for (auto op : {k::UnaryOp::Gelu, k::UnaryOp::Erf, k::UnaryOp::Exp, k::UnaryOp::Sigmoid,
                    k::UnaryOp::Silu, k::UnaryOp::Relu, k::UnaryOp::Tanh}) {
      out.push_back(fresh());
      k::unary_f32(op, x.data(), out.back().data(), n, 0.0f, 0.0f);
    }
    out.push_back(fresh());
    k::unary_f32(k::UnaryOp::Clip, x.data(), out.back().data(), n, -1.0f, 2.0f);
    out.push_back(fresh());
    k::binary_f32(k::BinaryOp::Add, {n}, x.data(), {n}, y.data(), out.back().data());
    // Broadcasting: ConvNeXt's layer scale ([1, 56, 56, 96] * [96]), a bias row ([197, 768] +
    // [768]) and a per-channel scalar over 4-D runs ([2, 3, 300, 100] - [3, 1, 1]).
    out.push_back(fresh());
    k::binary_f32(k::BinaryOp::Mul, {1, 56, 56, 96}, x.data(), {96}, y.data(), out.back().data());
    out.push_back(fresh());
    k::binary_f32(k::BinaryOp::Add, {197, 768}, x.data(), {768}, y.data(), out.back().data());
    out.push_back(fresh());
    k::binary_f32(k::BinaryOp::Sub, {2, 3, 300, 100}, x.data(), {3, 1, 1}, y.data(),
                  out.back().data());
    out.push_back(fresh());  // (bool results in its first quarter)
    k::binary_f32(k::BinaryOp::Less, {600, 300}, x.data(), {300}, y.data(), out.back().data());
    out.push_back(fresh());
    k::softmax_f32(x.data(), out.back().data(), 12 * 197, 197);
    out.push_back(fresh());
    k::softmax_f32(x.data(), out.back().data(), 12 * 197, 197, true);
    out.push_back(fresh());
    k::layer_norm_f32(x.data() + 2000, scale.data(), bias.data(), out.back().data(), 197, 768,
                      1e-6f);
    return out;
  };
  fx::kernels::set_num_threads(1);
  const std::vector<std::vector<float>> one = run_all();
  for (int t : {2, 3}) {
    Threads threads(t);
    const std::vector<std::vector<float>> got = run_all();
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_EQ(std::memcmp(one[i].data(), got[i].data(), one[i].size() * sizeof(float)), 0)
          << "op " << i << ", " << t << " threads";
  }
}

TEST(Threads, TransposesSplitBitIdentically) {
  // ViT's heads ([197, 12, 64] -> [12, 197, 64]: the odometer path), ConvNeXt's NCHW -> NHWC
  // (the tiled path), and 1- and 8-byte elements, all past the 256 KB threshold.
  struct Case {
    std::vector<int64_t> shape, perm;
    size_t elem;
  };
  for (const Case& c : {Case{{197, 12, 64}, {1, 0, 2}, 4}, Case{{1, 96, 56, 57}, {0, 2, 3, 1}, 4},
                        Case{{3, 41, 50, 45}, {3, 1, 0, 2}, 1}, Case{{37, 29, 31}, {2, 0, 1}, 8}}) {
    size_t n = c.elem;
    for (int64_t d : c.shape) n *= static_cast<size_t>(d);
    std::vector<uint8_t> in(n);
    for (size_t i = 0; i < n; ++i) in[i] = static_cast<uint8_t>(i * 131 + i / 251);
    std::vector<uint8_t> one(n, 0);
    fx::kernels::set_num_threads(1);
    fx::kernels::transpose(c.shape, in.data(), c.perm, c.elem, one.data());
    for (int t : {2, 3}) {
      Threads threads(t);
      std::vector<uint8_t> got(n, 0);
      fx::kernels::transpose(c.shape, in.data(), c.perm, c.elem, got.data());
      EXPECT_EQ(got, one) << c.shape.size() << "-d, " << c.elem << "-byte elements, " << t
                          << " threads";
    }
  }
}

TEST(Threads, BatchedMatMulSplitsItsHeadsBitIdentically) {
  // Attention's shapes: per-head products (ViT-B/16: 12 heads of 197x64 @ 64x197, and the small
  // zoo transformer's), a broadcast batch, and heads large enough to split on their own.
  struct Case {
    fx::kernels::Shape a, b;
  };
  for (const Case& k :
       {Case{{1, 12, 197, 64}, {1, 12, 64, 197}}, Case{{2, 4, 16, 16}, {2, 4, 16, 16}},
        Case{{3, 1, 40, 24}, {1, 5, 24, 33}}, Case{{2, 256, 512}, {2, 512, 384}}}) {
    fx::kernels::Shape os;
    ASSERT_TRUE(fx::kernels::matmul_shape(k.a, k.b, os));
    std::vector<float> A(fx::kernels::numel(k.a)), B(fx::kernels::numel(k.b));
    for (size_t i = 0; i < A.size(); ++i) A[i] = static_cast<float>((i * 37 % 101) - 50) / 50.0f;
    for (size_t i = 0; i < B.size(); ++i) B[i] = static_cast<float>((i * 53 % 89) - 44) / 44.0f;
    std::vector<float> c1(fx::kernels::numel(os)), c2(c1.size()), c3(c1.size());
    fx::kernels::set_num_threads(1);
    fx::kernels::matmul_f32(k.a, A.data(), k.b, B.data(), c1.data(), nullptr);
    {
      Threads t(2);
      fx::kernels::matmul_f32(k.a, A.data(), k.b, B.data(), c2.data(), nullptr);
    }
    {
      Threads t(3);
      fx::kernels::matmul_f32(k.a, A.data(), k.b, B.data(), c3.data(), nullptr);
    }
    EXPECT_EQ(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)), 0) << os.size();
    EXPECT_EQ(std::memcmp(c1.data(), c3.data(), c1.size() * sizeof(float)), 0) << os.size();
  }
}

TEST(Threads, ParallelForCoversTheRangeOnceNestsInlineAndRethrows) {
  Threads t(3);
  std::vector<std::atomic<int>> hits(1000);
  fx::kernels::parallel_for(1000, 10, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i]++;
    // A nested loop runs inline on this thread.
    fx::kernels::parallel_for(4, 1, [&](int64_t, int64_t) {});
  });
  EXPECT_TRUE(
      std::all_of(hits.begin(), hits.end(), [](const std::atomic<int>& h) { return h == 1; }));
  // Fewer chunks than threads (a worker finds its own chunk missing and takes what is left), and
  // as many: each chunk still runs once, back to back.
  for (int64_t n : {2, 3}) {
    std::vector<std::atomic<int>> count(static_cast<size_t>(n));
    for (int rep = 0; rep < 2000; ++rep)
      fx::kernels::parallel_for(n, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) count[static_cast<size_t>(i)]++;
      });
    for (const std::atomic<int>& c : count) EXPECT_EQ(c, 2000) << n << " chunks";
  }
  // The chunk that reaches the end throws, whichever thread runs it (or the only chunk).
  EXPECT_THROW(fx::kernels::parallel_for(100, 1,
                                         [](int64_t, int64_t e) {
                                           if (e == 100) throw std::runtime_error("chunk failed");
                                         }),
               std::runtime_error);
  // The pool still works after a chunk threw.
  std::atomic<int64_t> sum{0};
  fx::kernels::parallel_for(100, 1, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum, 100);
}

// Back-to-back tiny jobs from two callers, and the pool under ThreadSanitizer, are
// tests/stress/pool_stress.cpp (fx_pool_stress: ctest runs it, and the test command builds and runs
// it with -fsanitize=thread).

// release_cached_memory() also frees the workers' scratch by restarting them: the count stays,
// the pool keeps working, and a caller running meanwhile is not disturbed.
TEST(Threads, ReleaseCachedMemoryRestartsTheWorkersAndKeepsTheirCount) {
  if (!kThreads) GTEST_SKIP() << "no threads in this build";
  Threads t(3);
  auto gm = load("zoo/squeezenet1_1.onnx");
  ASSERT_TRUE(gm);
  const auto inputs = fxtest::seeded_inputs(*gm);
  const auto expected = fx::exec::run(*gm, inputs);
  std::atomic<int> wrong{0};
  std::thread other([&] {
    for (int r = 0; r < 6; ++r)
      if (!same_bits(expected, fx::exec::run(*gm, inputs))) ++wrong;
  });
  for (int r = 0; r < 6; ++r) {
    fx::exec::release_cached_memory();
    EXPECT_EQ(fx::exec::num_threads(), 3);
  }
  other.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_TRUE(same_bits(expected, fx::exec::run(*gm, inputs)));
  std::atomic<int64_t> sum{0};
  fx::kernels::parallel_for(300, 1, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum, 300);
}

TEST(Threads, ManyRunsFromTwoCallersWithModulesDestroyedInBetween) {
  if (!kThreads) GTEST_SKIP() << "no threads in this build";
  Threads t(2);
  const char* const names[] = {"zoo/squeezenet1_1.onnx", "zoo/mobilenet_v2.onnx", "sample.onnx",
                               "zoo/mlp.onnx"};
  std::vector<std::vector<fx::exec::Value>> inputs, expected;
  {
    fx::exec::set_num_threads(1);
    for (const char* n : names) {
      auto gm = load(n);
      ASSERT_TRUE(gm) << n;
      inputs.push_back(fxtest::seeded_inputs(*gm));
      expected.push_back(fx::exec::run(*gm, inputs.back()));
    }
    fx::exec::set_num_threads(2);
  }
  std::atomic<int> wrong{0}, done{0};
  auto caller = [&](int id) {
    for (int round = 0; round < 10; ++round) {
      // Modules made and destroyed while the other caller runs its own.
      for (size_t m = 0; m < 4; ++m) {
        auto gm = load(names[(m + id) % 4]);
        for (int r = 0; r < 3; ++r)
          if (!same_bits(expected[(m + id) % 4], fx::exec::run(*gm, inputs[(m + id) % 4]))) ++wrong;
        ++done;
      }
    }
  };
  std::thread other(caller, 1);
  caller(0);
  other.join();
  EXPECT_EQ(done, 80);
  EXPECT_EQ(wrong, 0);
}

}  // namespace
