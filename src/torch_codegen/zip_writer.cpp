// The zip layout follows APPNOTE.TXT 6.3 (local headers, central directory, zip64 records) and
// torch's PyTorchStreamWriter (caffe2/serialize/inline_container.cc) for the alignment: the gap
// before each record's data is an extra field with id "FB" filled with 'Z', in the local header.
#include "torch_codegen/zip_writer.h"

#include <algorithm>
#include <array>
#include <limits>

#include "fx/error.h"

namespace fx::torch_codegen {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50, kZip64LocatorSig = 0x07064b50;
constexpr uint64_t kMax32 = 0xffffffffu;
constexpr uint16_t kMax16 = 0xffffu;
// 1980-01-01 00:00 in MS-DOS form: a fixed time keeps the output byte-for-byte deterministic.
constexpr uint16_t kDosTime = 0, kDosDate = (1 << 5) | 1;
constexpr size_t kLocalHeaderSize = 30, kCentralHeaderSize = 46;

// Slicing-by-8 tables: t[0] is the classic byte table, t[k][i] the CRC of byte i followed by k
// zero bytes, so eight input bytes fold in with eight lookups and no serial dependency between
// them (about 4x the byte-at-a-time speed; weights are hundreds of MB).
using CrcTables = std::array<std::array<uint32_t, 256>, 8>;
const CrcTables& crc_tables() {
  static const CrcTables tables = [] {
    CrcTables t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (size_t k = 1; k < 8; ++k) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
    return t;
  }();
  return tables;
}

// a + b, or an fx::Error naming `what` when it would pass `limit` (or wrap).
uint64_t checked_add(uint64_t a, uint64_t b, uint64_t limit, const std::string& what) {
  if (a > limit || b > limit - a)
    throw Error(ErrorKind::Value,
                "the zip archive is too large to build in memory at entry `" + what + "`");
  return a + b;
}

void put16(std::vector<uint8_t>& o, uint64_t v) {
  o.push_back(static_cast<uint8_t>(v));
  o.push_back(static_cast<uint8_t>(v >> 8));
}
void put32(std::vector<uint8_t>& o, uint64_t v) {
  for (int i = 0; i < 4; ++i) o.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put64(std::vector<uint8_t>& o, uint64_t v) {
  for (int i = 0; i < 8; ++i) o.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// Bit 11: the name is UTF-8. Set only when it matters, so ASCII names match torch's headers.
uint16_t flags_for(const std::string& name) {
  for (unsigned char c : name)
    if (c >= 0x80) return 1u << 11;
  return 0;
}

}  // namespace

uint32_t crc32(const uint8_t* data, size_t size, uint32_t crc) {
  const CrcTables& t = crc_tables();
  crc = ~crc;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    // Little-endian assembly byte by byte: no unaligned loads, same result on any host.
    const uint32_t lo = (uint32_t{data[i]} | uint32_t{data[i + 1]} << 8 |
                         uint32_t{data[i + 2]} << 16 | uint32_t{data[i + 3]} << 24) ^
                        crc;
    crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
          t[3][data[i + 4]] ^ t[2][data[i + 5]] ^ t[1][data[i + 6]] ^ t[0][data[i + 7]];
  }
  for (; i < size; ++i) crc = t[0][(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint64_t ZipWriter::bound(size_t name_size, uint64_t data_size) {
  // Local header + zip64 field + alignment field and padding, the data, central header + zip64
  // field. Saturates instead of wrapping; reserve() then refuses it.
  const uint64_t fixed = kLocalHeaderSize + 20 + 4 + (kAlignment - 1) + kCentralHeaderSize + 28 +
                         2 * uint64_t{name_size};
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  return data_size > kMax - fixed ? kMax : fixed + data_size;
}

void ZipWriter::reserve(uint64_t bytes) {
  const uint64_t limit = std::min<uint64_t>(out_.max_size(), std::numeric_limits<size_t>::max());
  if (bytes > limit - out_.size())
    throw Error(ErrorKind::Value, "the zip archive needs " + std::to_string(bytes) +
                                      " bytes, more than fit in memory here (" +
                                      std::to_string(limit) + ")");
  out_.reserve(out_.size() + static_cast<size_t>(bytes));
}

void ZipWriter::add(const std::string& name, const uint8_t* data, uint64_t size) {
  FX_CHECK(!finished_, "ZipWriter::add after finish()");
  if (name.empty() || name.size() > kMax16)
    throw Error(ErrorKind::Value, "a zip entry name must have 1 to 65535 bytes: `" + name + "`");
  const uint64_t limit = std::min<uint64_t>(out_.max_size(), std::numeric_limits<size_t>::max());
  const uint64_t offset = out_.size();
  // Zip64 fields are needed when the size or the header's offset does not fit 32 bits; the local
  // header then carries both sizes (APPNOTE 4.5.3).
  const bool zip64 = force_zip64_ || size >= kMax32 || offset >= kMax32;
  const uint64_t zip64_extra = zip64 ? 4 + 16 : 0;
  uint64_t start =
      checked_add(offset, kLocalHeaderSize + name.size() + zip64_extra + 4, limit, name);
  const uint64_t padding = (kAlignment - start % kAlignment) % kAlignment;
  const uint64_t end = checked_add(checked_add(start, padding, limit, name), size, limit, name);

  Entry e;
  e.name = name;
  e.crc = crc32(data, static_cast<size_t>(size));
  e.size = size;
  e.offset = offset;

  // Geometric growth when reserve() was not told enough: an exact reserve per entry would copy
  // the whole archive once per tensor.
  if (end > out_.capacity())
    out_.reserve(static_cast<size_t>(
        std::min<uint64_t>(std::max<uint64_t>(end, 2 * out_.capacity()), limit)));
  put32(out_, kLocalSig);
  put16(out_, zip64 ? 45 : 20);  // version needed: 4.5 for zip64, else 2.0
  put16(out_, flags_for(name));
  put16(out_, 0);  // method: STORED
  put16(out_, kDosTime);
  put16(out_, kDosDate);
  put32(out_, e.crc);
  put32(out_, zip64 ? kMax32 : size);  // compressed size
  put32(out_, zip64 ? kMax32 : size);  // uncompressed size
  put16(out_, name.size());
  put16(out_, zip64_extra + 4 + padding);
  out_.insert(out_.end(), name.begin(), name.end());
  if (zip64) {
    put16(out_, 0x0001);
    put16(out_, 16);
    put64(out_, size);  // uncompressed
    put64(out_, size);  // compressed
  }
  out_.push_back('F');
  out_.push_back('B');
  put16(out_, padding);
  out_.insert(out_.end(), static_cast<size_t>(padding), 'Z');
  FX_CHECK(out_.size() % kAlignment == 0, "zip record data is not aligned");
  out_.insert(out_.end(), data, data + size);
  entries_.push_back(std::move(e));
}

std::vector<uint8_t> ZipWriter::finish() {
  FX_CHECK(!finished_, "ZipWriter::finish called twice");
  finished_ = true;
  const uint64_t cd_offset = out_.size();
  for (const Entry& e : entries_) {
    const bool big_size = force_zip64_ || e.size >= kMax32;
    const bool big_offset = force_zip64_ || e.offset >= kMax32;
    // The central zip64 field holds only the values whose 32-bit field is 0xffffffff, in the
    // order uncompressed, compressed, offset (APPNOTE 4.5.3).
    const uint16_t zip64_len = (big_size ? 16 : 0) + (big_offset ? 8 : 0);
    put32(out_, kCentralSig);
    put16(out_, zip64_len ? 45 : 20);  // version made by (MS-DOS attributes)
    put16(out_, zip64_len ? 45 : 20);  // version needed
    put16(out_, flags_for(e.name));
    put16(out_, 0);
    put16(out_, kDosTime);
    put16(out_, kDosDate);
    put32(out_, e.crc);
    put32(out_, big_size ? kMax32 : e.size);
    put32(out_, big_size ? kMax32 : e.size);
    put16(out_, e.name.size());
    put16(out_, zip64_len ? zip64_len + 4 : 0);
    put16(out_, 0);  // comment length
    put16(out_, 0);  // disk number
    put16(out_, 0);  // internal attributes
    put32(out_, 0);  // external attributes
    put32(out_, big_offset ? kMax32 : e.offset);
    out_.insert(out_.end(), e.name.begin(), e.name.end());
    if (zip64_len) {
      put16(out_, 0x0001);
      put16(out_, zip64_len);
      if (big_size) {
        put64(out_, e.size);
        put64(out_, e.size);
      }
      if (big_offset) put64(out_, e.offset);
    }
  }
  const uint64_t cd_size = out_.size() - cd_offset;
  const uint64_t count = entries_.size();
  const bool zip64 = force_zip64_ || count >= kMax16 || cd_size >= kMax32 || cd_offset >= kMax32;
  if (zip64) {
    const uint64_t end64_offset = out_.size();
    put32(out_, kZip64EndSig);
    put64(out_, 44);  // size of the rest of this record
    put16(out_, 45);
    put16(out_, 45);
    put32(out_, 0);  // this disk
    put32(out_, 0);  // disk of the central directory
    put64(out_, count);
    put64(out_, count);
    put64(out_, cd_size);
    put64(out_, cd_offset);
    put32(out_, kZip64LocatorSig);
    put32(out_, 0);
    put64(out_, end64_offset);
    put32(out_, 1);  // total disks
  }
  put32(out_, kEndSig);
  put16(out_, 0);
  put16(out_, 0);
  put16(out_, zip64 ? kMax16 : count);
  put16(out_, zip64 ? kMax16 : count);
  put32(out_, zip64 ? kMax32 : cd_size);
  put32(out_, zip64 ? kMax32 : cd_offset);
  put16(out_, 0);  // comment length
  return std::move(out_);
}

}  // namespace fx::torch_codegen
