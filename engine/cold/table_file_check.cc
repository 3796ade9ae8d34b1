#include "engine/cold/table_file_check.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <vector>

namespace replaydb::engine {
namespace {

// The block-based table format (RocksDB's table/format.h, documented in its
// wiki "Rocksdb BlockBasedTable Format"): a footer of 53 bytes at the end
// (format versions 1 to 5): checksum type (1 byte), the metaindex and index
// block handles (varint64 offset and size each) padded to 40 bytes, the
// format version (u32) and the magic number (u64), little-endian.
constexpr uint64_t kBlockBasedTableMagic = 0x88e241b785f4cff7ull;
constexpr size_t kFooterBytes = 53;
constexpr uint64_t kBlockTrailerBytes = 5;  // compression type and checksum
// The metaindex block names a few meta blocks; anything larger is damage.
constexpr uint64_t kMaxMetaindexBytes = 1 << 20;
// A block's last u32 packs its restart count with, in the top bit, the
// flag of a data block hash index (RocksDB's DataBlockFooter).
constexpr uint32_t kHashIndexFlag = 1u << 31;

uint32_t LoadLE32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
uint64_t LoadLE64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// Reads a varint of at most 64 bits from `*in`, advancing it; false when
// it runs past the end or past 10 bytes.
bool ReadVarint(std::string_view* in, uint64_t* out) {
  uint64_t v = 0;
  for (int shift = 0; shift <= 63 && !in->empty(); shift += 7) {
    const auto byte = static_cast<uint8_t>(in->front());
    in->remove_prefix(1);
    v |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) {
      *out = v;
      return true;
    }
  }
  return false;
}

Status ReadAt(std::ifstream& in, const std::string& path, uint64_t offset, uint64_t n,
              std::string* out) {
  out->resize(n);
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(out->data(), static_cast<std::streamsize>(n));
  if (!in) {
    return Status::IOError("table file " + path + ": cannot read " + std::to_string(n) +
                           " bytes at " + std::to_string(offset));
  }
  return Status::OK();
}

}  // namespace

Result<PropertiesBlock> FindPropertiesBlock(const std::string& path) {
  const Status unreadable = Status::NotFound("table file " + path + ": no properties block found");
  std::error_code ec;
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) return Status::IOError("table file " + path + ": " + ec.message());
  if (file_size < kFooterBytes) return unreadable;
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("table file " + path + ": " + std::strerror(errno));
  std::string footer;
  REPLAYDB_RETURN_IF_ERROR(ReadAt(in, path, file_size - kFooterBytes, kFooterBytes, &footer));
  const uint32_t version = LoadLE32(footer.data() + kFooterBytes - 12);
  if (LoadLE64(footer.data() + kFooterBytes - 8) != kBlockBasedTableMagic || version < 1 ||
      version > 5) {
    return unreadable;
  }
  std::string_view handles(footer.data() + 1, 40);
  uint64_t meta_offset = 0;
  uint64_t meta_size = 0;
  const uint64_t body = file_size - kFooterBytes;
  if (!ReadVarint(&handles, &meta_offset) || !ReadVarint(&handles, &meta_size) ||
      meta_size < 4 || meta_size > kMaxMetaindexBytes || meta_offset > body ||
      meta_size + kBlockTrailerBytes > body - meta_offset) {
    return unreadable;
  }
  std::string meta;
  REPLAYDB_RETURN_IF_ERROR(ReadAt(in, path, meta_offset, meta_size, &meta));
  // Entries (shared key bytes, unshared key bytes, value bytes as varints,
  // then the unshared key bytes and the value), then the restart array.
  const uint64_t restarts = LoadLE32(meta.data() + meta.size() - 4) & ~kHashIndexFlag;
  if ((restarts + 1) * 4 > meta.size()) return unreadable;
  std::string_view entries(meta.data(), meta.size() - (restarts + 1) * 4);
  std::string key;
  while (!entries.empty()) {
    uint64_t shared = 0;
    uint64_t unshared = 0;
    uint64_t value_bytes = 0;
    if (!ReadVarint(&entries, &shared) || !ReadVarint(&entries, &unshared) ||
        !ReadVarint(&entries, &value_bytes) || shared > key.size() ||
        unshared > entries.size() || value_bytes > entries.size() - unshared) {
      return unreadable;
    }
    key.resize(shared);
    key.append(entries.substr(0, unshared));
    std::string_view value = entries.substr(unshared, value_bytes);
    entries.remove_prefix(unshared + value_bytes);
    if (key != "rocksdb.properties") continue;
    PropertiesBlock block;
    if (!ReadVarint(&value, &block.offset) || !ReadVarint(&value, &block.size) ||
        block.size < 4 || block.offset > body ||
        block.size + kBlockTrailerBytes > body - block.offset) {
      return unreadable;
    }
    return block;
  }
  return unreadable;
}

Status CheckTableFileBeforeRocksdb(const std::string& path) {
  Result<PropertiesBlock> block = FindPropertiesBlock(path);
  if (!block.ok()) {
    return block.status().code() == Status::Code::kNotFound ? Status::OK() : block.status();
  }
  std::ifstream in(path, std::ios::binary);
  std::string last;
  REPLAYDB_RETURN_IF_ERROR(ReadAt(in, path, block->offset + block->size - 4, 4, &last));
  // Meta blocks never carry a hash index, and no block of any kind has 2^31
  // restarts: the bit is damage.
  if ((LoadLE32(last.data()) & kHashIndexFlag) != 0) {
    return Status::Corruption("table file " + path + ": its properties block (" +
                              std::to_string(block->size) + " bytes at " +
                              std::to_string(block->offset) +
                              ") is damaged: its restart count has the hash index bit set");
  }
  return Status::OK();
}

Status CheckTableFilesBeforeRocksdb(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".sst") paths.push_back(e.path().string());
  }
  // A missing directory is for the opener to report.
  std::sort(paths.begin(), paths.end());
  std::string damaged;
  for (const std::string& path : paths) {
    const Status s = CheckTableFileBeforeRocksdb(path);
    if (s.code() == Status::Code::kCorruption) {
      damaged += (damaged.empty() ? "" : "; ") + s.message();
    } else if (!s.ok() && std::filesystem::exists(path, ec)) {
      // (A file gone since the listing is no damage: a read-only opener runs
      // beside a writer whose compactions replace files. RocksDB's own open
      // reports a file its manifest names and the directory lacks.)
      return s.WithContext("cold store " + dir);
    }
  }
  if (damaged.empty()) return Status::OK();
  return Status::Corruption("cold store " + dir + ": " + damaged);
}

}  // namespace replaydb::engine
