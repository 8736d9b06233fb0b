// fx::torch_codegen: PyTorch's state_dict zip format and to_folder packages. The zip layout is
// checked here byte by byte; natively, tests/torch_codegen/check_package.py then has torch 1.13
// (/usr/bin/python3) load the state dicts, import and run the packages against independent
// formulas, and symbolic_trace them (skipped under Emscripten, which cannot run Python).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "fx/graph_module.h"
#include "fx/torch_codegen.h"
#include "torch_codegen/zip_writer.h"

namespace {

namespace tc = fx::torch_codegen;
namespace fs = std::filesystem;

// ---- tensors with known values

// Deterministic values in [-1, 1) (a 32-bit LCG), so every run writes the same bytes.
std::vector<float> values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return v;
}

template <typename T>
fx::Tensor make(fx::Dtype dtype, std::vector<int64_t> shape, const std::vector<T>& v) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(bytes->data(), v.data(), bytes->size());
  return fx::Tensor{dtype, std::move(shape), bytes, false, nullptr, nullptr};
}

fx::Tensor f32(std::vector<int64_t> shape, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return make(fx::Dtype::Float32, std::move(shape), values(static_cast<size_t>(n), seed));
}

// ---- the zip, read back

uint64_t rd(const std::vector<uint8_t>& b, size_t at, int n) {
  EXPECT_LE(at + n, b.size());
  if (at + n > b.size()) return 0;
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | b[at + i];
  return v;
}

struct ZipEntry {
  std::string name;
  uint64_t data_offset = 0, size = 0;
  uint32_t crc = 0;
};

// Reads the central directory (following zip64 records where the 32-bit fields say so) and
// each local header, checking that both agree, that data is 64-byte aligned, the CRCs, and
// that the entries tile the file up to the central directory.
std::vector<ZipEntry> read_zip(const std::vector<uint8_t>& z, bool expect_zip64) {
  std::vector<ZipEntry> out;
  EXPECT_GE(z.size(), 22u);
  if (z.size() < 22) return out;
  const size_t eocd = z.size() - 22;
  EXPECT_EQ(rd(z, eocd, 4), 0x06054b50u) << "no end of central directory (or a comment)";
  uint64_t count = rd(z, eocd + 10, 2), cd_size = rd(z, eocd + 12, 4),
           cd_offset = rd(z, eocd + 16, 4);
  if (expect_zip64) {
    EXPECT_EQ(count, 0xffffu);
    EXPECT_EQ(rd(z, eocd - 20, 4), 0x07064b50u) << "zip64 locator";
    const size_t end64 = static_cast<size_t>(rd(z, eocd - 20 + 8, 8));
    EXPECT_EQ(end64, eocd - 20 - 56);
    EXPECT_EQ(rd(z, end64, 4), 0x06064b50u) << "zip64 end of central directory";
    EXPECT_EQ(rd(z, end64 + 4, 8), 44u);
    count = rd(z, end64 + 32, 8);
    cd_size = rd(z, end64 + 40, 8);
    cd_offset = rd(z, end64 + 48, 8);
    EXPECT_EQ(cd_offset + cd_size, end64);
  } else {
    EXPECT_EQ(cd_offset + cd_size, eocd);
  }
  size_t at = static_cast<size_t>(cd_offset);
  uint64_t expected_local = 0;
  for (uint64_t i = 0; i < count; ++i) {
    EXPECT_EQ(rd(z, at, 4), 0x02014b50u) << "central header " << i;
    ZipEntry e;
    e.crc = static_cast<uint32_t>(rd(z, at + 16, 4));
    uint64_t csize = rd(z, at + 20, 4), usize = rd(z, at + 24, 4);
    const size_t name_len = rd(z, at + 28, 2), extra_len = rd(z, at + 30, 2);
    uint64_t local = rd(z, at + 42, 4);
    EXPECT_EQ(rd(z, at + 10, 2), 0u) << "STORED";
    e.name.assign(reinterpret_cast<const char*>(z.data() + at + 46), name_len);
    size_t x = at + 46 + name_len;
    if (expect_zip64) {
      EXPECT_EQ(csize, 0xffffffffu);
      EXPECT_EQ(local, 0xffffffffu);
      EXPECT_EQ(extra_len, 28u);
      EXPECT_EQ(rd(z, x, 2), 1u);
      usize = rd(z, x + 4, 8);
      csize = rd(z, x + 12, 8);
      local = rd(z, x + 20, 8);
    } else {
      EXPECT_EQ(extra_len, 0u);
    }
    EXPECT_EQ(csize, usize);
    e.size = usize;
    EXPECT_EQ(local, expected_local) << e.name << ": entries must follow each other";
    // The local header repeats the central one.
    const size_t l = static_cast<size_t>(local);
    EXPECT_EQ(rd(z, l, 4), 0x04034b50u) << e.name;
    EXPECT_EQ(rd(z, l + 8, 2), 0u) << e.name << " STORED";
    EXPECT_EQ(rd(z, l + 14, 4), e.crc) << e.name;
    EXPECT_EQ(rd(z, l + 26, 2), name_len);
    const size_t lextra = rd(z, l + 28, 2);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(z.data() + l + 30), name_len), e.name);
    size_t fb = l + 30 + name_len;
    if (expect_zip64) {
      EXPECT_EQ(rd(z, l + 18, 4), 0xffffffffu);
      EXPECT_EQ(rd(z, fb, 2), 1u);
      EXPECT_EQ(rd(z, fb + 4, 8), e.size);
      fb += 20;
    } else {
      EXPECT_EQ(rd(z, l + 22, 4), e.size);
    }
    // torch's alignment field: "FB", its length, 'Z' padding.
    EXPECT_EQ(z[fb], 'F');
    EXPECT_EQ(z[fb + 1], 'B');
    const size_t pad = rd(z, fb + 2, 2);
    EXPECT_EQ(fb + 4 + pad, l + 30 + name_len + lextra);
    for (size_t k = 0; k < pad; ++k) EXPECT_EQ(z[fb + 4 + k], 'Z');
    e.data_offset = l + 30 + name_len + lextra;
    EXPECT_EQ(e.data_offset % 64, 0u) << e.name << " data is not 64-byte aligned";
    EXPECT_LE(e.data_offset + e.size, cd_offset);
    if (e.data_offset + e.size <= z.size()) {
      EXPECT_EQ(tc::crc32(z.data() + e.data_offset, static_cast<size_t>(e.size)), e.crc) << e.name;
    }
    expected_local = e.data_offset + e.size;
    at = x + extra_len;
    out.push_back(e);
  }
  EXPECT_EQ(expected_local, cd_offset) << "no gap between the last entry and the directory";
  return out;
}

// ---- files

void write_file(const fs::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << p;
}

// The Python checks run natively only; under Emscripten these helpers and references are unused.
[[maybe_unused]] void write_text(const fs::path& p, const std::string& s) {
  write_file(p, std::vector<uint8_t>(s.begin(), s.end()));
}

// Golden outputs of fxwasm's own writers: native and wasm are held to the same bytes, a refactor
// cannot change the generated code unnoticed, and natively torch 1.13 loads the golden state
// dict. Regenerate (native): FXWASM_UPDATE_GOLDEN=1 build/tc-native/fx_tests
// --gtest_filter='TorchCodegen*Golden*', then review the diff.
const fs::path kGoldenDir = fs::path(FXWASM_SOURCE_DIR) / "tests" / "torch_codegen" / "golden";

void expect_golden(const std::string& name, const std::vector<uint8_t>& bytes) {
  const fs::path path = kGoldenDir / name;
  if (const char* update = std::getenv("FXWASM_UPDATE_GOLDEN"); update && *update == '1') {
    fs::create_directories(path.parent_path());
    write_file(path, bytes);
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "no golden file " << path << " (FXWASM_UPDATE_GOLDEN=1 writes it)";
  const std::vector<uint8_t> golden((std::istreambuf_iterator<char>(in)),
                                    std::istreambuf_iterator<char>());
  EXPECT_TRUE(golden == bytes) << name << " differs from " << path << " (" << bytes.size()
                               << " bytes, golden " << golden.size()
                               << "); if the change is intended, regenerate with "
                                  "FXWASM_UPDATE_GOLDEN=1 and review the diff";
}

// ---- running the oracle (native only)

#ifndef __EMSCRIPTEN__
#include <unistd.h>  // getpid

const char kPython[] = "/usr/bin/python3";

bool have_torch() {
  static const bool ok =
      std::system((std::string(kPython) + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
  return ok;
}

fs::path scratch(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("fxwasm_torch_codegen_" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Runs check_package.py on `spec` (a JSON object); returns its output if it failed, "" if not.
// On success the scratch folder `dir` is removed; on failure it stays for a look.
std::string run_check(const fs::path& dir, const std::string& spec) {
  const fs::path spec_path = dir / "spec.json";
  write_text(spec_path, spec);
  const std::string cmd = std::string(kPython) +
                          " " FXWASM_SOURCE_DIR "/tests/torch_codegen/check_package.py '" +
                          spec_path.string() + "' 2>&1";
  std::string output;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return "cannot run " + cmd;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
  const int status = ::pclose(p);
  if (status != 0) return output.empty() ? "failed: " + cmd : output;
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::remove(dir.parent_path(), ec);  // the per-process folder, once empty
  return {};
}
#endif

std::string hex(const uint8_t* data, size_t n) {
  static const char kHex[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += kHex[data[i] >> 4];
    s += kHex[data[i] & 15];
  }
  return s;
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

[[maybe_unused]] std::string tensor_json(const std::string& name, const fx::Tensor& t,
                                         bool param = false) {
  std::string shape = "[";
  for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape[i]);
  shape += "]";
  const fx::Bytes b = t.bytes();
  return "{\"name\": " + json_str(name) + ", \"dtype\": \"" + fx::dtype_name(t.dtype) +
         "\", \"shape\": " + shape + ", \"hex\": \"" + (b ? hex(b->data(), b->size()) : "") +
         "\", \"param\": " + (param ? "true" : "false") + "}";
}

// ---- state_dict

TEST(TorchCodegenZip, Crc32) {
  const std::string s = "123456789";
  EXPECT_EQ(tc::crc32(reinterpret_cast<const uint8_t*>(s.data()), s.size()), 0xcbf43926u);
  EXPECT_EQ(tc::crc32(nullptr, 0), 0u);
  // Continuing a CRC over a second piece is the CRC of the whole.
  const uint32_t head = tc::crc32(reinterpret_cast<const uint8_t*>(s.data()), 4);
  EXPECT_EQ(tc::crc32(reinterpret_cast<const uint8_t*>(s.data()) + 4, 5, head), 0xcbf43926u);
  // Longer and unaligned inputs through the 8-byte path; values from Python's zlib.crc32.
  std::vector<uint8_t> d(1000);
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>((i * 7 + 3) % 256);
  EXPECT_EQ(tc::crc32(d.data(), d.size()), 0x17bc2a46u);
  EXPECT_EQ(tc::crc32(d.data(), 13), 0xa97ad5c1u);
  EXPECT_EQ(tc::crc32(d.data() + 5, 995), 0xe19518d1u);
}

std::vector<std::pair<std::string, fx::Tensor>> every_dtype() {
  std::vector<std::pair<std::string, fx::Tensor>> t;
  t.emplace_back("conv.weight", f32({2, 3, 3, 3}, 1));
  t.emplace_back("f64", make<double>(fx::Dtype::Float64, {3}, {1.5, -2.25, 1e300}));
  t.emplace_back("f16", make<uint16_t>(fx::Dtype::Float16, {2, 2}, {0x3c00, 0xc000, 0x7bff, 1}));
  t.emplace_back("bf16", make<uint16_t>(fx::Dtype::BFloat16, {3}, {0x3f80, 0xbf80, 0x7f7f}));
  t.emplace_back("i8", make<int8_t>(fx::Dtype::Int8, {4}, {-128, -1, 0, 127}));
  t.emplace_back("i16", make<int16_t>(fx::Dtype::Int16, {2}, {-32768, 32767}));
  t.emplace_back("i32", make<int32_t>(fx::Dtype::Int32, {1, 2}, {-2147483647 - 1, 7}));
  t.emplace_back("i64", make<int64_t>(fx::Dtype::Int64, {2}, {-(int64_t{1} << 62), 1234567890123}));
  t.emplace_back("u8", make<uint8_t>(fx::Dtype::UInt8, {3}, {0, 128, 255}));
  t.emplace_back("mask", make<uint8_t>(fx::Dtype::Bool, {2, 2}, {1, 0, 0, 1}));
  t.emplace_back("c64", make<float>(fx::Dtype::Complex64, {2}, {1.f, -1.f, 0.5f, 2.f}));
  t.emplace_back("c128", make<double>(fx::Dtype::Complex128, {1}, {3.0, -4.0}));
  t.emplace_back("scalar", make<float>(fx::Dtype::Float32, {}, {42.5f}));
  t.emplace_back("empty", make<float>(fx::Dtype::Float32, {0, 3}, {}));
  // Integers of every pickle width: BININT2 (300 elements), BININT (a 70000 dim) and LONG1
  // (3e9 > 2^31) in numel, sizes and strides; the last two are empty so the file stays small.
  t.emplace_back("big", f32({3, 100}, 2));
  t.emplace_back("wide", make<float>(fx::Dtype::Float32, {70000, 0}, {}));
  t.emplace_back("huge_dims", make<int8_t>(fx::Dtype::Int8, {0, 3000000000}, {}));
  return t;
}

std::vector<std::pair<std::string, const fx::Tensor*>> refs(
    const std::vector<std::pair<std::string, fx::Tensor>>& t) {
  std::vector<std::pair<std::string, const fx::Tensor*>> r;
  for (const auto& [n, x] : t) r.emplace_back(n, &x);
  return r;
}

TEST(TorchCodegenStateDict, ZipStructure) {
  const auto tensors = every_dtype();
  const std::vector<uint8_t> z = tc::save_state_dict(refs(tensors));
  ASSERT_EQ(rd(z, 0, 4), 0x04034b50u) << "torch.load recognises a zip by its first 4 bytes";
  const std::vector<ZipEntry> entries = read_zip(z, false);
  ASSERT_EQ(entries.size(), tensors.size() + 2);
  EXPECT_EQ(entries.front().name, "archive/data.pkl");
  EXPECT_EQ(entries.back().name, "archive/version");
  EXPECT_EQ(std::string(z.begin() + entries.back().data_offset, z.end() - 0).substr(0, 2), "3\n");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ZipEntry& e = entries[i + 1];
    EXPECT_EQ(e.name, "archive/data/" + std::to_string(i));
    const fx::Bytes b = tensors[i].second.bytes();
    ASSERT_EQ(e.size, b->size()) << tensors[i].first;
    if (!b->empty()) {  // (memcmp of no bytes still needs valid pointers)
      EXPECT_EQ(std::memcmp(z.data() + e.data_offset, b->data(), b->size()), 0) << tensors[i].first;
    }
  }
  // The pickle: protocol 2, and it ends with SETITEMS, STOP.
  const ZipEntry& pkl = entries.front();
  EXPECT_EQ(z[pkl.data_offset], 0x80);
  EXPECT_EQ(z[pkl.data_offset + 1], 2);
  EXPECT_EQ(z[pkl.data_offset + pkl.size - 2], 'u');
  EXPECT_EQ(z[pkl.data_offset + pkl.size - 1], '.');
  // Deterministic: the same tensors give the same bytes.
  EXPECT_EQ(tc::save_state_dict(refs(tensors)), z);
  // An empty state dict is still a valid archive.
  EXPECT_EQ(read_zip(tc::save_state_dict({}), false).size(), 2u);
}

TEST(TorchCodegenStateDict, Zip64Structure) {
  tc::ZipWriter w(/*force_zip64=*/true);
  const std::vector<uint8_t> a = {1, 2, 3}, b(100, 7);
  w.add("archive/a", a.data(), a.size());
  w.add("archive/b", b.data(), b.size());
  const std::vector<uint8_t> z = w.finish();
  const std::vector<ZipEntry> entries = read_zip(z, true);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1].size, 100u);
#ifndef __EMSCRIPTEN__
  if (!have_torch()) GTEST_SKIP() << kPython << " has no torch";
  const fs::path dir = scratch("zip64");
  write_file(dir / "x.zip", z);
  EXPECT_EQ(run_check(dir, "{\"kind\": \"zip\", \"file\": " + json_str((dir / "x.zip").string()) +
                               ", \"entries\": {\"archive/a\": \"" + hex(a.data(), a.size()) +
                               "\", \"archive/b\": \"" + hex(b.data(), b.size()) + "\"}}"),
            "");
#endif
}

TEST(TorchCodegenStateDict, TorchLoadsEveryDtype) {
#ifdef __EMSCRIPTEN__
  GTEST_SKIP() << "needs /usr/bin/python3 with torch";
#else
  if (!have_torch()) GTEST_SKIP() << kPython << " has no torch";
  // The golden file, which TorchCodegenGolden.StateDict holds equal to what save_state_dict
  // writes natively and in wasm.
  const auto tensors = every_dtype();
  const fs::path dir = scratch("state_dict");
  std::string spec =
      "{\"kind\": \"state_dict\", \"file\": " + json_str((kGoldenDir / "every_dtype.pt").string()) +
      ", \"tensors\": [";
  for (size_t i = 0; i < tensors.size(); ++i)
    spec += (i ? ", " : "") + tensor_json(tensors[i].first, tensors[i].second);
  EXPECT_EQ(run_check(dir, spec + "]}"), "");
#endif
}

template <typename F>
void expect_error(F&& f, fx::ErrorKind kind, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no fx::Error (expected one mentioning `" << needle << "`)";
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(TorchCodegenStateDict, Errors) {
  const fx::Tensor ok = f32({2}, 3);
  fx::Tensor no_data{fx::Dtype::Float32, {2, 2}, nullptr, false, nullptr, nullptr};
  expect_error(
      [&] {
        tc::save_state_dict({{"a", &ok}, {"layer.w", &no_data}});
      },
      fx::ErrorKind::Value, "`layer.w` (float32[2, 2]) has no data");
  fx::Tensor external = no_data;
  auto ext = std::make_shared<fx::ExternalData>();
  ext->location = "weights.bin";
  external.external = ext;
  expect_error(
      [&] {
        tc::save_state_dict({{"ext", &external}});
      },
      fx::ErrorKind::Value, "external data `weights.bin` without a reader");
  fx::Tensor short_data = make<float>(fx::Dtype::Float32, {3}, {1.f, 2.f});
  expect_error(
      [&] {
        tc::save_state_dict({{"short", &short_data}});
      },
      fx::ErrorKind::Value, "holds 8 bytes instead of 12");
  fx::Tensor u16 = make<uint16_t>(fx::Dtype::UInt16, {1}, {1});
  expect_error(
      [&] {
        tc::save_state_dict({{"u16", &u16}});
      },
      fx::ErrorKind::Unsupported, "`u16` has dtype uint16");
  fx::Tensor huge{
      fx::Dtype::Float64, {int64_t{1} << 40, int64_t{1} << 30}, nullptr, false, nullptr, nullptr};
  expect_error(
      [&] {
        tc::save_state_dict({{"huge", &huge}});
      },
      fx::ErrorKind::Value, "`huge` is too large");
}

// ---- to_folder

std::shared_ptr<fx::Module> layer(const std::string& type, const std::string& extra_repr) {
  return std::make_shared<fx::Module>(type, extra_repr);
}

// conv2d + batchnorm + relu + reshape + linear through call_module on torch.nn-typed submodules
// under a container with non-identifier child names ("features.0"), torch.relu and operator
// add/mul, get_attr of a root parameter, of a buffer and of a parameter of nested modules.
std::unique_ptr<fx::GraphModule> conv_net() {
  auto root = std::make_shared<fx::Module>();
  auto features = std::make_shared<fx::Module>();
  auto conv = layer("Conv2d", "3, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1)");
  conv->register_parameter("weight", f32({4, 3, 3, 3}, 11));
  conv->register_parameter("bias", f32({4}, 12));
  auto bn = layer("BatchNorm2d",
                  "4, eps=1e-05, momentum=0.1, affine=True, "
                  "track_running_stats=True");
  bn->register_parameter("weight", f32({4}, 13));
  bn->register_parameter("bias", f32({4}, 14));
  bn->register_buffer("running_mean", f32({4}, 15));
  bn->register_buffer(
      "running_var", make<float>(fx::Dtype::Float32, {4}, std::vector<float>{0.5f, 1.f, 2.f, 3.f}));
  bn->register_buffer("num_batches_tracked",
                      make<int64_t>(fx::Dtype::Int64, {}, std::vector<int64_t>{7}));
  features->add_module("0", conv);
  features->add_module("1", bn);
  features->add_module("2", layer("ReLU", ""));
  root->add_module("features", features);
  auto fc = layer("Linear", "in_features=64, out_features=4, bias=True");
  fc->register_parameter("weight", f32({4, 64}, 16));
  fc->register_parameter("bias", f32({4}, 17));
  root->add_module("fc", fc);
  root->register_parameter("scale", f32({4}, 18));

  auto g = std::make_unique<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* h = g->call_module("features.0", {x});
  h = g->call_module("features.1", {h});
  h = g->call_module("features.2", {h});
  h = g->call_method("reshape", {h, -1, 64});
  h = g->call_module("fc", {h});
  h = g->call_function(fx::fn("torch.relu"), {h});
  h = g->call_function(fx::fn("operator.add"), {h, g->get_attr("scale")});
  // A buffer is traced (torch 1.13 does not proxy buffer reads) where an op uses it: right here.
  h = g->call_function(fx::fn("operator.add"), {h, g->get_attr("features.1.running_mean")});
  fx::Node* mean = g->call_method("mean", {g->get_attr("features.0.weight")});
  h = g->call_function(fx::fn("operator.mul"), {h, mean});
  g->output(h);
  return std::make_unique<fx::GraphModule>(root.get(), std::move(g), "ConvNet");
}

[[maybe_unused]] const char kConvNetReference[] =
    "((F.linear(F.batch_norm(F.conv2d(inputs[0], sd['features.0.weight'], "
    "sd['features.0.bias'], padding=1), sd['features.1.running_mean'], "
    "sd['features.1.running_var'], sd['features.1.weight'], sd['features.1.bias'], False, 0.1, "
    "1e-05).clamp(min=0).reshape(-1, 64), sd['fc.weight'], sd['fc.bias']).clamp(min=0) + "
    "sd['scale'] + sd['features.1.running_mean']) * sd['features.0.weight'].mean())";

// Buffers of float16, int64 and bool on the root, a parameter of a plain nested module
// ("blocks.0.w"), torch.where, indexing by an int64 buffer and math.sqrt; two outputs.
std::unique_ptr<fx::GraphModule> dtype_net() {
  auto root = std::make_shared<fx::Module>();
  root->register_buffer("half_buf",
                        make<uint16_t>(fx::Dtype::Float16, {4},
                                       std::vector<uint16_t>{0x3c00, 0xb800, 0x4200, 0x0001}));
  root->register_buffer("mask",
                        make<uint8_t>(fx::Dtype::Bool, {4}, std::vector<uint8_t>{1, 0, 1, 1}));
  root->register_buffer("idx", make<int64_t>(fx::Dtype::Int64, {3}, std::vector<int64_t>{3, 0, 2}));
  auto blocks = std::make_shared<fx::Module>();
  auto block = std::make_shared<fx::Module>();
  block->register_parameter("w", f32({4}, 21));
  blocks->add_module("0", block);
  root->add_module("blocks", blocks);

  auto g = std::make_unique<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* a = g->call_function(fx::fn("operator.add"), {x, g->get_attr("half_buf")});
  fx::Node* m = g->call_function(fx::fn("operator.mul"), {a, g->get_attr("blocks.0.w")});
  fx::Node* w = g->call_function(fx::fn("torch.where"), {g->get_attr("mask"), m, x});
  fx::Node* picked = g->call_function(fx::fn("operator.getitem"), {w, g->get_attr("idx")});
  // math.sqrt is a global the code names (`math_sqrt`): module.py must import it.
  fx::Node* root2 = g->call_function(fx::fn("math.sqrt"), {g->call_method("size", {x, 0})});
  g->output(fx::Argument::tuple({g->call_function(fx::fn("operator.mul"), {picked, root2}), w}));
  return std::make_unique<fx::GraphModule>(root.get(), std::move(g), "DtypeNet");
}

// Attribute names Python cannot write as `self.x`: a keyword ("lambda"), atoms that are digits
// at the root and below, and a container "a.0" next to an attribute "a_0" (its local's name).
std::unique_ptr<fx::GraphModule> odd_names_net(bool keyword) {
  auto root = std::make_shared<fx::Module>();
  if (keyword) {
    auto kw = std::make_shared<fx::Module>();
    kw->register_parameter("w", f32({2}, 41));
    root->add_module("lambda", kw);
  }
  auto zero = std::make_shared<fx::Module>();
  zero->register_buffer("b", f32({2}, 42));
  root->add_module("0", zero);
  auto a = std::make_shared<fx::Module>();
  auto a0 = std::make_shared<fx::Module>();
  a0->register_parameter("w", f32({2}, 43));
  a->add_module("0", a0);
  root->add_module("a", a);
  auto a_0 = std::make_shared<fx::Module>();
  a_0->register_parameter("w", f32({2}, 44));
  root->add_module("a_0", a_0);

  auto g = std::make_unique<fx::Graph>();
  fx::Node* h = g->placeholder("x");
  for (const char* t : {"lambda.w", "0.b", "a.0.w", "a_0.w"})
    if (keyword || std::strcmp(t, "lambda.w") != 0)
      h = g->call_function(fx::fn("operator.add"), {h, g->get_attr(t)});
  g->output(h);
  return std::make_unique<fx::GraphModule>(root.get(), std::move(g), "OddNames");
}

[[maybe_unused]] const char kOddNamesReference[] =
    "inputs[0] + sd['0.b'] + sd['a.0.w'] + sd['a_0.w']";
[[maybe_unused]] const char kKeywordReference[] =
    "inputs[0] + sd['lambda.w'] + sd['0.b'] + sd['a.0.w'] + sd['a_0.w']";

[[maybe_unused]] const char kDtypeNetReference[] =
    "(torch.where(sd['mask'], (inputs[0] + sd['half_buf']) * sd['blocks.0.w'], "
    "inputs[0])[sd['idx']] * 2.0, torch.where(sd['mask'], (inputs[0] + sd['half_buf']) * "
    "sd['blocks.0.w'], inputs[0]))";

std::string file_text(const std::vector<tc::PackageFile>& files, const std::string& name) {
  for (const tc::PackageFile& f : files)
    if (f.name == name) return std::string(f.bytes.begin(), f.bytes.end());
  ADD_FAILURE() << "no " << name;
  return {};
}

TEST(TorchCodegenToFolder, ModulePy) {
  const auto gm = conv_net();
  const std::vector<tc::PackageFile> files = tc::to_folder(*gm, "ConvNet");
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].name, "module.py");
  EXPECT_EQ(files[1].name, "__init__.py");
  EXPECT_EQ(files[2].name, "state_dict.pt");
  EXPECT_EQ(file_text(files, "__init__.py"), "from .module import *\n");
  const std::string py = file_text(files, "module.py");
  for (const char* want :
       {"import os\nimport torch\n", "\nclass ConvNet(torch.nn.Module):\n",
        "        self.features = torch.nn.Module()\n",
        "        self.features.add_module('0', torch.nn.Conv2d(3, 4, kernel_size=(3, 3), "
        "stride=(1, 1), padding=(1, 1)))\n",
        "        self.features.add_module('2', torch.nn.ReLU())\n",
        "        self.fc = torch.nn.Linear(in_features=64, out_features=4, bias=True)\n",
        "        self.scale = torch.nn.Parameter(torch.empty([4], dtype=torch.float32))\n",
        "os.path.dirname(os.path.abspath(__file__)), 'state_dict.pt')\n",
        "        self.load_state_dict(torch.load(state_dict), strict=True)\n",
        "\n    def forward(self, x):\n", "        relu = torch.relu(fc);  fc = None\n"})
    EXPECT_NE(py.find(want), std::string::npos) << "missing:\n" << want << "\nin:\n" << py;
  EXPECT_EQ(py.find("stacktrace"), std::string::npos) << py;
  EXPECT_EQ(py.find("\n\n\n\n"), std::string::npos) << py;
  EXPECT_EQ(py.substr(py.size() - 20), "\n        return mul\n") << "no trailing blank lines";
  for (size_t nl = py.find(" \n"); nl != std::string::npos; nl = std::string::npos)
    ADD_FAILURE() << "trailing whitespace at " << nl << " in:\n" << py;
  // Deterministic.
  const std::vector<tc::PackageFile> again = tc::to_folder(*gm, "ConvNet");
  for (size_t i = 0; i < files.size(); ++i) EXPECT_EQ(files[i].bytes, again[i].bytes) << i;
  // The state dict holds every tensor in torch's state_dict() order.
  const std::vector<ZipEntry> entries = read_zip(files[2].bytes, false);
  EXPECT_EQ(entries.size(), 2u + 10u);

  // extra_repr words torch prints unquoted become strings; a float16 layer gets its dtype.
  auto g = std::make_unique<fx::Graph>();
  g->output(g->call_module("conv", {g->placeholder("x")}));
  auto root = std::make_shared<fx::Module>();
  auto conv = layer("Conv1d",
                    "2, 2, kernel_size=(3,), stride=(1,), padding=same, "
                    "bias=False, padding_mode=reflect");
  conv->register_parameter(
      "weight", make<uint16_t>(fx::Dtype::Float16, {2, 2, 3}, std::vector<uint16_t>(12, 0x3c00)));
  root->add_module("conv", conv);
  fx::GraphModule half(root.get(), std::move(g));
  EXPECT_NE(file_text(tc::to_folder(half), "module.py")
                .find("self.conv = torch.nn.Conv1d(2, 2, kernel_size=(3,), stride=(1,), "
                      "padding='same', bias=False, padding_mode='reflect', "
                      "dtype=torch.float16)\n"),
            std::string::npos)
      << file_text(tc::to_folder(half), "module.py");
}

TEST(TorchCodegenToFolder, SharedModule) {
  // One Linear at two paths: built once, aliased, and saved under both paths as torch does.
  auto g = std::make_unique<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  g->output(g->call_module("b", {g->call_module("a", {x})}));
  auto root = std::make_shared<fx::Module>();
  auto fc = layer("Linear", "in_features=2, out_features=2, bias=True");
  fc->register_parameter("weight", f32({2, 2}, 1));
  fc->register_parameter("bias", f32({2}, 2));
  root->add_module("a", fc);
  root->add_module("b", fc);
  fx::GraphModule gm(root.get(), std::move(g));
  const std::vector<tc::PackageFile> files = tc::to_folder(gm);
  const std::string py = file_text(files, "module.py");
  EXPECT_NE(py.find("        self.a = torch.nn.Linear(in_features=2, out_features=2, bias=True)\n"
                    "        self.b = self.a\n"),
            std::string::npos)
      << py;
  const std::vector<ZipEntry> entries = read_zip(files[2].bytes, false);
  EXPECT_EQ(entries.size(), 2u + 4u);  // a.weight, a.bias, b.weight, b.bias
}

TEST(TorchCodegenGolden, StateDict) {
  expect_golden("every_dtype.pt", tc::save_state_dict(refs(every_dtype())));
}

TEST(TorchCodegenGolden, Packages) {
  for (const tc::PackageFile& f : tc::to_folder(*conv_net(), "ConvNet"))
    expect_golden("conv_net/" + f.name, f.bytes);
  for (const tc::PackageFile& f : tc::to_folder(*dtype_net(), "DtypeNet"))
    expect_golden("dtype_net/" + f.name, f.bytes);
  for (const tc::PackageFile& f : tc::to_folder(*odd_names_net(true), "OddNames"))
    expect_golden("odd_names/" + f.name, f.bytes);
}

std::vector<std::string> known() { return tc::known_module_types(); }

TEST(TorchCodegenToFolder, KnownTypesTable) {
  const std::vector<std::string> k = known();
  EXPECT_TRUE(std::is_sorted(k.begin(), k.end()));
  EXPECT_EQ(std::adjacent_find(k.begin(), k.end()), k.end()) << "a type listed twice";
  for (const char* t : {"Conv2d", "Linear", "BatchNorm2d", "LayerNorm", "ReLU", "MaxPool2d",
                        "Dropout", "Sequential"})
    EXPECT_TRUE(std::binary_search(k.begin(), k.end(), std::string(t))) << t;
}

TEST(TorchCodegenToFolder, Errors) {
  // onnx.* targets: lower first.
  {
    auto g = std::make_unique<fx::Graph>();
    g->output(g->call_function(fx::fn("onnx.Relu"), {g->placeholder("x")}));
    fx::GraphModule gm(nullptr, std::move(g));
    expect_error([&] { tc::to_folder(gm); }, fx::ErrorKind::Unsupported,
                 "onnx.* targets, which PyTorch cannot run: relu (onnx.Relu)");
  }
  // A called submodule of a type to_folder cannot build.
  {
    auto g = std::make_unique<fx::Graph>();
    g->output(g->call_module("blocks.attn", {g->placeholder("x")}));
    auto root = std::make_shared<fx::Module>();
    auto blocks = std::make_shared<fx::Module>();
    blocks->add_module("attn", layer("MyAttention", ""));
    root->add_module("blocks", blocks);
    fx::GraphModule gm(root.get(), std::move(g));
    expect_error([&] { tc::to_folder(gm); }, fx::ErrorKind::Unsupported,
                 "submodule `blocks.attn` of type MyAttention");
  }
  // A tensor the torch.nn class does not have.
  {
    auto g = std::make_unique<fx::Graph>();
    g->output(g->call_module("fc", {g->placeholder("x")}));
    auto root = std::make_shared<fx::Module>();
    auto fc = layer("Linear", "in_features=2, out_features=2, bias=True");
    fc->register_parameter("weight", f32({2, 2}, 1));
    fc->register_buffer("bias", f32({2}, 2));
    root->add_module("fc", fc);
    fx::GraphModule gm(root.get(), std::move(g));
    expect_error([&] { tc::to_folder(gm); }, fx::ErrorKind::Unsupported,
                 "`fc` of type torch.nn.Linear has buffer `bias`");
  }
  // A weight without data: save_state_dict's error, naming it.
  {
    auto g = std::make_unique<fx::Graph>();
    fx::Node* x = g->placeholder("x");
    g->output(g->call_function(fx::fn("operator.add"), {x, g->get_attr("w")}));
    auto root = std::make_shared<fx::Module>();
    root->register_parameter("w",
                             fx::Tensor{fx::Dtype::Float32, {2}, nullptr, false, nullptr, nullptr});
    fx::GraphModule gm(root.get(), std::move(g));
    expect_error([&] { tc::to_folder(gm); }, fx::ErrorKind::Value, "`w` (float32[2]) has no data");
  }
  const auto gm = conv_net();
  expect_error([&] { tc::to_folder(*gm, "my-net"); }, fx::ErrorKind::Value,
               "module_name `my-net` is not a Python identifier");
  expect_error([&] { tc::to_folder(*gm, "class"); }, fx::ErrorKind::Value, "`class`");
  expect_error([&] { tc::to_folder(*gm, "torch"); }, fx::ErrorKind::Value,
               "`torch` would hide a name module.py imports");
}

#ifndef __EMSCRIPTEN__
// Writes the package of `gm` and has torch import, check, run and trace it.
// `trace`: also compare print(symbolic_trace(m).graph) with the graph's text.
void check_in_torch(const fx::GraphModule& gm, const std::string& cls, const std::string& reference,
                    const std::vector<fx::Tensor>& inputs, bool trace = true) {
  const fs::path base = scratch("pkg_" + cls);
  const fs::path dir = base / ("pkg_" + cls);
  fs::create_directories(dir);
  for (const tc::PackageFile& f : tc::to_folder(gm, cls)) write_file(dir / f.name, f.bytes);
  write_text(base / "graph.txt", gm.graph().str());
  // The tensors in torch's state_dict() order: each module's parameters, its buffers, then
  // its children.
  std::string tensors;
  for (const auto& [prefix, m] : gm.named_modules()) {
    const std::string p = prefix.empty() ? "" : prefix + ".";
    for (const auto& [n, t] : m->parameters())
      tensors += (tensors.empty() ? "" : ", ") + tensor_json(p + n, t, true);
    for (const auto& [n, t] : m->buffers())
      tensors += (tensors.empty() ? "" : ", ") + tensor_json(p + n, t, false);
  }
  std::string ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins += (i ? ", " : "") + tensor_json("input" + std::to_string(i), inputs[i]);
  const std::string spec =
      "{\"kind\": \"package\", \"dir\": " + json_str(dir.string()) +
      ", \"class\": " + json_str(cls) +
      (trace ? ", \"graph\": " + json_str((base / "graph.txt").string()) : std::string()) +
      ", \"reference\": " + json_str(reference) + ", \"tensors\": [" + tensors +
      "], \"inputs\": [" + ins + "]}";
  EXPECT_EQ(run_check(base, spec), "");
}
#endif

TEST(TorchCodegenToFolder, RunsAndTracesInTorch) {
#ifdef __EMSCRIPTEN__
  GTEST_SKIP() << "needs /usr/bin/python3 with torch";
#else
  if (!have_torch()) GTEST_SKIP() << kPython << " has no torch";
  check_in_torch(*conv_net(), "ConvNet", kConvNetReference, {f32({1, 3, 4, 4}, 31)});
  check_in_torch(*dtype_net(), "DtypeNet", kDtypeNetReference, {f32({4}, 32)});
  check_in_torch(*odd_names_net(false), "OddNames", kOddNamesReference, {f32({2}, 33)});
  // Not traced: torch 1.13's own codegen writes `self.lambda.w` (a SyntaxError) when
  // symbolic_trace builds its GraphModule; fxwasm's codegen fixes that bug, torch's cannot.
  check_in_torch(*odd_names_net(true), "Keyword", kKeywordReference, {f32({2}, 34)},
                 /*trace=*/false);
#endif
}

}  // namespace
