// fx::Limits and the checked size arithmetic every allocation from input goes through.
#include "fx/limits.h"

#include <atomic>
#include <cstdio>
#include <limits>

#include "fx/error.h"

#if !defined(__EMSCRIPTEN__) && defined(__unix__)
#include <unistd.h>
#endif

namespace fx {

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

int64_t physical_memory() {
#if !defined(__EMSCRIPTEN__) && defined(__unix__)
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 && pages <= kMax / page) return int64_t{pages} * page;
#endif
  return int64_t{4} << 30;  // wasm32's address space (and a guess elsewhere)
}

// Zero: not set (the default applies). Atomics: set_limits may race with a run on another thread.
std::atomic<int64_t> g_tensor{0}, g_run{0}, g_elements{0}, g_loop{0};

}  // namespace

Limits default_limits() {
  Limits l;
  const int64_t mem = physical_memory();
  l.max_tensor_bytes = mem / 4;
  l.max_run_bytes = mem / 2;
#ifdef __EMSCRIPTEN__
  l.max_elements = int64_t{1} << 30;
#else
  l.max_elements = int64_t{1} << 40;
#endif
  // Sequence models loop over tokens or beams (thousands); a million steps of a cheap body
  // already take seconds.
  l.max_loop_iterations = int64_t{1} << 20;
  return l;
}

Limits limits() {
  static const Limits d = default_limits();
  Limits l;
  const int64_t t = g_tensor.load(std::memory_order_relaxed);
  const int64_t r = g_run.load(std::memory_order_relaxed);
  const int64_t e = g_elements.load(std::memory_order_relaxed);
  l.max_tensor_bytes = t > 0 ? t : d.max_tensor_bytes;
  l.max_run_bytes = r > 0 ? r : d.max_run_bytes;
  l.max_elements = e > 0 ? e : d.max_elements;
  const int64_t loop = g_loop.load(std::memory_order_relaxed);
  l.max_loop_iterations = loop > 0 ? loop : d.max_loop_iterations;
  return l;
}

void set_limits(const Limits& l) {
  g_tensor.store(l.max_tensor_bytes > 0 ? l.max_tensor_bytes : 0, std::memory_order_relaxed);
  g_run.store(l.max_run_bytes > 0 ? l.max_run_bytes : 0, std::memory_order_relaxed);
  g_elements.store(l.max_elements > 0 ? l.max_elements : 0, std::memory_order_relaxed);
  g_loop.store(l.max_loop_iterations > 0 ? l.max_loop_iterations : 0, std::memory_order_relaxed);
}

std::string format_bytes(int64_t bytes) {
  static const char* units[] = {"bytes", "KB", "MB", "GB", "TB", "PB", "EB"};
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

namespace {
std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}
}  // namespace

int64_t checked_numel(const std::vector<int64_t>& shape, const std::string& what) {
  const int64_t max_elements = limits().max_elements;
  int64_t n = 1;
  bool overflow = false;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] < 0)
      throw Error(ErrorKind::Value, what + ": dimension " + std::to_string(i) + " of shape " +
                                        shape_text(shape) + " is negative");
  for (int64_t d : shape) {
    if (d == 0) return 0;  // an empty tensor, however large its other dimensions
    if (n > kMax / d) overflow = true;
    if (!overflow) n *= d;
  }
  if (overflow)
    throw Error(ErrorKind::Resource,
                what + ": shape " + shape_text(shape) + " has more elements than int64 can count");
  if (n > max_elements)
    throw Error(ErrorKind::Resource, what + ": shape " + shape_text(shape) + " has " +
                                         std::to_string(n) + " elements, over the limit of " +
                                         std::to_string(max_elements) +
                                         " (fx::set_limits / init({limits}) / --max-memory)");
  return n;
}

int64_t checked_nbytes(Dtype dtype, int64_t numel, const std::string& what) {
  const int64_t size = static_cast<int64_t>(dtype_size(dtype));
  if (numel < 0) throw Error(ErrorKind::Value, what + ": negative element count");
  const int64_t max_elements = limits().max_elements;
  if (numel > max_elements)
    throw Error(ErrorKind::Resource, what + ": " + std::to_string(numel) +
                                         " elements, over the limit of " +
                                         std::to_string(max_elements));
  if (size != 0 && numel > kMax / size)
    throw Error(ErrorKind::Resource, what + ": " + std::to_string(numel) + " " + dtype_name(dtype) +
                                         " elements need more bytes than int64 can count");
  const int64_t bytes = numel * size;
  const int64_t max_bytes = limits().max_tensor_bytes;
  if (bytes > max_bytes)
    throw Error(ErrorKind::Resource,
                what + ": " + std::to_string(numel) + " " + dtype_name(dtype) + " elements need " +
                    format_bytes(bytes) + " (" + std::to_string(bytes) +
                    " bytes), over the per-tensor limit of " + format_bytes(max_bytes) +
                    " (fx::set_limits / init({limits}) / --max-memory)");
  if (static_cast<uint64_t>(bytes) > std::numeric_limits<size_t>::max())
    throw Error(ErrorKind::Resource, what + ": " + std::to_string(bytes) +
                                         " bytes do not fit this platform's address space");
  return bytes;
}

int64_t checked_nbytes(Dtype dtype, const std::vector<int64_t>& shape, const std::string& what) {
  if (int64_t bytes = 0; try_nbytes(dtype, shape, &bytes)) return bytes;
  const int64_t n = checked_numel(shape, what);
  return checked_nbytes(dtype, n, what + " " + shape_text(shape));
}

bool try_nbytes(Dtype dtype, const std::vector<int64_t>& shape, int64_t* nbytes) {
  const Limits l = limits();
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && n > kMax / d) {
      // Overflow, unless a later dimension is 0 (an empty tensor).
      for (int64_t e : shape)
        if (e < 0) return false;
      for (int64_t e : shape)
        if (e == 0) return (*nbytes = 0), true;
      return false;
    }
    n *= d;
  }
  if (n > l.max_elements) return false;
  const int64_t size = static_cast<int64_t>(dtype_size(dtype));
  if (size != 0 && n > kMax / size) return false;
  const int64_t bytes = n * size;
  if (bytes > l.max_tensor_bytes) return false;
  if (static_cast<uint64_t>(bytes) > std::numeric_limits<size_t>::max()) return false;
  *nbytes = bytes;
  return true;
}

int64_t checked_numel(const std::vector<int64_t>& shape, const char* what) {
  const int64_t max_elements = limits().max_elements;
  int64_t n = 1;
  bool fast = true;
  for (int64_t d : shape) {
    if (d <= 0 || n > kMax / d) {
      fast = false;
      break;
    }
    n *= d;
  }
  if (fast && n <= max_elements) return n;
  return checked_numel(shape, std::string(what));
}

int64_t checked_nbytes(Dtype dtype, const std::vector<int64_t>& shape, const char* what) {
  if (int64_t bytes = 0; try_nbytes(dtype, shape, &bytes)) return bytes;
  return checked_nbytes(dtype, shape, std::string(what));
}

}  // namespace fx
