// A minimal zip writer for PyTorch's file format: STORED entries (no compression) whose data
// starts at a multiple of 64 bytes, like torch's PyTorchStreamWriter writes them, so a reader
// may map the tensors in place. Internal to fxtorchcodegen (and its tests).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fx::torch_codegen {

/// CRC-32 (ISO-HDLC, the zip one) of `size` bytes, continuing from `crc` (0 to start).
uint32_t crc32(const uint8_t* data, size_t size, uint32_t crc = 0);

/// Builds a zip archive in memory, one entry at a time.
class ZipWriter {
 public:
  /// Data records start at multiples of this, as in torch's writer (kFieldAlignment).
  static constexpr uint64_t kAlignment = 64;

  /// `force_zip64` writes zip64 records even where 32-bit fields would do (for tests: real
  /// zip64 needs a 4 GiB archive).
  explicit ZipWriter(bool force_zip64 = false) : force_zip64_(force_zip64) {}

  /// Makes room for `bytes` more bytes of output (entries, padding and directory), so that
  /// adding them does not reallocate; a hint. Throws fx::Error(Value) past size_t.
  void reserve(uint64_t bytes);
  /// An upper bound of what an entry adds to the archive, directory records included.
  static uint64_t bound(size_t name_size, uint64_t data_size);
  /// What the end records add at most.
  static constexpr uint64_t kEndBound = 22 + 56 + 20;

  /// Appends a STORED entry. Throws fx::Error(Value) if the archive would not fit in memory
  /// (size_t; 4 GiB in wasm32), and fx::Error(Internal) after finish().
  void add(const std::string& name, const uint8_t* data, uint64_t size);
  /// Writes the central directory and returns the archive; the writer is spent.
  std::vector<uint8_t> finish();

 private:
  struct Entry {
    std::string name;
    uint32_t crc = 0;
    uint64_t size = 0;
    uint64_t offset = 0;  // of the local header
  };
  bool force_zip64_;
  bool finished_ = false;
  std::vector<Entry> entries_;
  std::vector<uint8_t> out_;
};

}  // namespace fx::torch_codegen
