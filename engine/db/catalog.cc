// Reads and writes the catalog file. Byte format: engine/db/CATALOG.md; schema:
// engine/db/catalog.fbs.
#include "engine/db/catalog.h"

#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/db/catalog_generated.h"
#include "replaydb/types.h"
#include "util/crc32c.h"

namespace replaydb::engine {
namespace {

// File header: magic, payload length (u32 LE), CRC32C of the payload (u32 LE).
constexpr char kMagic[8] = {'R', 'D', 'B', 'C', 'A', 'T', '\x00', '\x01'};
constexpr size_t kMagicSize = sizeof(kMagic);
constexpr size_t kHeaderSize = kMagicSize + 4 + 4;
// The FlatBuffers layout this build writes and reads (Catalog.format_version).
constexpr uint32_t kFormatVersion = 1;

void PutFixed32(std::string* dst, uint32_t v) {
  const char b[4] = {static_cast<char>(v & 0xFFu), static_cast<char>((v >> 8) & 0xFFu),
                     static_cast<char>((v >> 16) & 0xFFu), static_cast<char>((v >> 24) & 0xFFu)};
  dst->append(b, sizeof(b));
}

uint32_t GetFixed32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint32_t>(u[0]) | (static_cast<uint32_t>(u[1]) << 8) |
         (static_cast<uint32_t>(u[2]) << 16) | (static_cast<uint32_t>(u[3]) << 24);
}

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

// Bytes as space-separated hex pairs, for the bad-magic message.
std::string HexBytes(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    char buf[4];
    std::snprintf(buf, sizeof(buf), "%02x", c);
    if (!out.empty()) out += ' ';
    out += buf;
  }
  return out;
}

// A name from the file, quoted, with anything but printable ASCII escaped
// (the bytes passed verification, not validation).
std::string Quoted(const flatbuffers::String* s) {
  std::string out = "'";
  for (unsigned char c : s->string_view()) {
    if (c >= 0x20 && c < 0x7F && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  out += "'";
  return out;
}

// Enum bytes from the file are checked by the enums' name functions
// (replaydb/options.h), whose switches -Wswitch keeps complete: "invalid"
// means a value this build does not know.
bool KnownDType(uint8_t v) { return v < kNumDTypes; }
bool KnownPadding(uint8_t v) { return PaddingName(static_cast<Padding>(v)) != "invalid"; }
bool KnownSelector(uint8_t v) {
  return SelectorKindName(static_cast<SelectorKind>(v)) != "invalid";
}
bool KnownEviction(uint8_t v) {
  return EvictionPolicyName(static_cast<EvictionPolicy>(v)) != "invalid";
}
bool KnownStepPriority(uint8_t v) {
  return StepPriorityName(static_cast<StepPriority>(v)) != "invalid";
}

flatbuffers::Offset<fb::TableDef> BuildTableDef(flatbuffers::FlatBufferBuilder& fbb,
                                                const TableSpec& spec, uint32_t id) {
  std::vector<flatbuffers::Offset<fb::Column>> columns;
  columns.reserve(spec.columns.size());
  for (const ColumnSpec& column : spec.columns) {
    const auto dims = column.shape.dims();
    columns.push_back(fb::CreateColumn(fbb, fbb.CreateString(column.name),
                                       static_cast<uint8_t>(column.dtype),
                                       fbb.CreateVector(dims.data(), dims.size())));
  }
  const RateLimiterSpec& rl = spec.rate_limiter;
  const auto rate_limiter = fb::CreateRateLimiter(fbb, rl.samples_per_insert, rl.min_size_to_sample,
                                                  rl.min_diff, rl.max_diff);
  const auto name = fbb.CreateString(spec.name);
  const auto column_vector = fbb.CreateVector(columns);
  return fb::CreateTableDef(
      fbb, name, column_vector, spec.capacity_steps, spec.capacity_bytes, spec.block_steps,
      spec.sequence_length, static_cast<uint8_t>(spec.padding), static_cast<uint8_t>(spec.selector),
      static_cast<uint8_t>(spec.eviction), spec.max_times_sampled, rate_limiter,
      spec.priority_exponent, static_cast<uint8_t>(spec.step_priority), spec.priority_device,
      static_cast<uint8_t>(spec.placement.kind), spec.placement.device, id,
      static_cast<uint8_t>(spec.logging), spec.spill, spec.rotation_fraction,
      spec.rotation_every_samples, spec.lanes, static_cast<uint8_t>(spec.acks.mode),
      spec.acks.replicas, spec.max_lag_ms);
}

// Converts one verified TableDef, checking what the verifier cannot: enum
// values and shape ranks. `prefix` is "catalog <source>: ".
Status ParseTableDef(const fb::TableDef& def, size_t index, const std::string& prefix,
                     TableSpec* spec) {
  const std::string where = prefix + "table " + std::to_string(index) + " " + Quoted(def.name());
  spec->name = def.name()->str();
  if (def.columns() != nullptr) {
    spec->columns.reserve(def.columns()->size());
    for (const fb::Column* col : *def.columns()) {
      const std::string column_where = where + " column " + Quoted(col->name());
      if (!KnownDType(col->dtype())) {
        return Status::Corruption(column_where + " has unknown dtype " +
                                  std::to_string(col->dtype()));
      }
      const size_t rank = col->shape() == nullptr ? 0 : col->shape()->size();
      if (rank > static_cast<size_t>(Shape::kMaxRank)) {
        return Status::Corruption(column_where + " has shape rank " + std::to_string(rank) +
                                  ", more than " + std::to_string(Shape::kMaxRank));
      }
      ColumnSpec column;
      column.name = col->name()->str();
      column.dtype = static_cast<DType>(col->dtype());
      if (rank > 0) {
        // The verifier checks the alignment of a vector's length, not of its
        // 8-byte elements, so copy them out rather than load them in place.
        int64_t dims[Shape::kMaxRank];
        const uint8_t* data = col->shape()->Data();
        for (size_t i = 0; i < rank; ++i) {
          int64_t dim;
          std::memcpy(&dim, data + i * sizeof(int64_t), sizeof(dim));
          dims[i] = flatbuffers::EndianScalar(dim);
        }
        column.shape = Shape::FromSpan(std::span<const int64_t>(dims, rank));
      }
      spec->columns.push_back(std::move(column));
    }
  }
  if (!KnownPadding(def.padding())) {
    return Status::Corruption(where + " has unknown padding " + std::to_string(def.padding()));
  }
  if (!KnownSelector(def.selector())) {
    return Status::Corruption(where + " has unknown selector " + std::to_string(def.selector()));
  }
  if (!KnownEviction(def.eviction())) {
    return Status::Corruption(where + " has unknown eviction policy " +
                              std::to_string(def.eviction()));
  }
  if (!KnownStepPriority(def.step_priority())) {
    return Status::Corruption(where + " has unknown step_priority " +
                              std::to_string(def.step_priority()));
  }
  if (def.placement_kind() > static_cast<uint8_t>(Placement::Kind::kAuto)) {
    return Status::Corruption(where + " has unknown placement kind " +
                              std::to_string(def.placement_kind()));
  }
  spec->placement.kind = static_cast<Placement::Kind>(def.placement_kind());
  spec->placement.device = def.placement_device();
  if (def.logging() > static_cast<uint8_t>(TableLogging::kOff)) {
    return Status::Corruption(where + " has unknown logging " + std::to_string(def.logging()));
  }
  spec->logging = static_cast<TableLogging>(def.logging());
  spec->spill = def.spill();
  spec->rotation_fraction = def.rotation_fraction();
  spec->rotation_every_samples = def.rotation_every_samples();
  spec->lanes = def.lanes();
  if (def.acks() > static_cast<uint8_t>(AckMode::kReplicated)) {
    return Status::Corruption(where + " has unknown acks " + std::to_string(def.acks()));
  }
  if (def.acks() != 0) {
    spec->acks = Acks{static_cast<AckMode>(def.acks()), def.ack_replicas()};
  }
  if (def.max_lag_ms() != 0) spec->max_lag_ms = def.max_lag_ms();
  spec->capacity_steps = def.capacity_steps();
  spec->capacity_bytes = def.capacity_bytes();
  spec->block_steps = def.block_steps();
  spec->sequence_length = def.sequence_length();
  spec->padding = static_cast<Padding>(def.padding());
  spec->selector = static_cast<SelectorKind>(def.selector());
  spec->eviction = static_cast<EvictionPolicy>(def.eviction());
  spec->max_times_sampled = def.max_times_sampled();
  spec->priority_exponent = def.priority_exponent();
  spec->step_priority = static_cast<StepPriority>(def.step_priority());
  spec->priority_device = def.priority_device();
  RateLimiterSpec& rl = spec->rate_limiter;
  if (const fb::RateLimiter* stored = def.rate_limiter(); stored != nullptr) {
    rl.samples_per_insert = stored->samples_per_insert();
    rl.min_size_to_sample = stored->min_size_to_sample();
    rl.min_diff = stored->min_diff();
    rl.max_diff = stored->max_diff();
  } else {
    // The schema defaults (RateLimiterSpec::MinSize(1) of format version 1).
    rl.samples_per_insert = 1.0;
    rl.min_size_to_sample = 1;
    rl.min_diff = -std::numeric_limits<double>::max();
    rl.max_diff = std::numeric_limits<double>::max();
  }
  return Status::OK();
}

}  // namespace

std::string EncodeCatalog(const std::vector<TableSpec>& tables) {
  CatalogContents catalog;
  for (const TableSpec& spec : tables) catalog.tables.push_back({catalog.next_table_id++, spec});
  return EncodeCatalog(catalog);
}

std::string EncodeCatalog(const CatalogContents& catalog) {
  flatbuffers::FlatBufferBuilder fbb(1024);
  // Store every scalar, so that files never depend on the schema defaults.
  fbb.ForceDefaults(true);
  std::vector<flatbuffers::Offset<fb::TableDef>> defs;
  defs.reserve(catalog.tables.size());
  for (const CatalogEntry& e : catalog.tables) defs.push_back(BuildTableDef(fbb, e.spec, e.id));
  const auto def_vector = fbb.CreateVector(defs);
  fb::FinishCatalogBuffer(
      fbb, fb::CreateCatalog(fbb, kFormatVersion, def_vector, catalog.next_table_id,
                             catalog.checkpointed));

  const auto* payload = fbb.GetBufferPointer();
  const size_t size = fbb.GetSize();
  std::string out;
  out.reserve(kHeaderSize + size);
  out.append(kMagic, kMagicSize);
  PutFixed32(&out, static_cast<uint32_t>(size));
  PutFixed32(&out, util::Crc32c(payload, size));
  out.append(reinterpret_cast<const char*>(payload), size);
  return out;
}

Status DecodeCatalog(std::string_view bytes, const std::string& source,
                     std::vector<TableSpec>* tables) {
  CatalogContents catalog;
  REPLAYDB_RETURN_IF_ERROR(DecodeCatalog(bytes, source, &catalog));
  tables->clear();
  for (CatalogEntry& e : catalog.tables) tables->push_back(std::move(e.spec));
  return Status::OK();
}

Status DecodeCatalog(std::string_view bytes, const std::string& source,
                     CatalogContents* contents) {
  const std::string prefix = "catalog " + source + ": ";
  if (bytes.size() < kHeaderSize) {
    return Status::Corruption(prefix + "file is " + std::to_string(bytes.size()) +
                              " bytes, shorter than the " + std::to_string(kHeaderSize) +
                              "-byte header");
  }
  if (std::memcmp(bytes.data(), kMagic, kMagicSize) != 0) {
    return Status::Corruption(prefix + "bad magic at offset 0 (found " +
                              HexBytes(bytes.substr(0, kMagicSize)) + ", expected " +
                              HexBytes(std::string_view(kMagic, kMagicSize)) + ")");
  }
  const uint32_t length = GetFixed32(bytes.data() + kMagicSize);
  const uint32_t stored_crc = GetFixed32(bytes.data() + kMagicSize + 4);
  const size_t available = bytes.size() - kHeaderSize;
  if (length != available) {
    return Status::Corruption(prefix + "header at offset 8 gives a payload of " +
                              std::to_string(length) + " bytes, but " + std::to_string(available) +
                              " bytes follow the header" +
                              (length > available ? " (truncated)" : " (trailing bytes)"));
  }
  if (length >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return Status::Corruption(prefix + "payload of " + std::to_string(length) +
                              " bytes exceeds the FlatBuffers limit of " +
                              std::to_string(FLATBUFFERS_MAX_BUFFER_SIZE - 1));
  }
  const std::string_view payload = bytes.substr(kHeaderSize);
  const uint32_t computed_crc = util::Crc32c(payload.data(), payload.size());
  if (computed_crc != stored_crc) {
    return Status::Corruption(prefix + "checksum mismatch (stored " + Hex32(stored_crc) +
                              ", computed " + Hex32(computed_crc) + ")");
  }
  // FlatBuffers reads scalars in place, so give it 8-byte aligned memory
  // whatever alignment the caller's bytes have.
  std::vector<uint64_t> aligned((payload.size() + 7) / 8);
  if (!payload.empty()) std::memcpy(aligned.data(), payload.data(), payload.size());
  const auto* buf = reinterpret_cast<const uint8_t*>(aligned.data());
  if (payload.size() < flatbuffers::kFileIdentifierLength + sizeof(flatbuffers::uoffset_t) ||
      !fb::CatalogBufferHasIdentifier(buf)) {
    return Status::Corruption(prefix + "payload at offset " + std::to_string(kHeaderSize) +
                              " lacks the FlatBuffers file identifier '" + fb::CatalogIdentifier() +
                              "'");
  }
  flatbuffers::Verifier verifier(buf, payload.size());
  if (!fb::VerifyCatalogBuffer(verifier)) {
    return Status::Corruption(prefix + "payload at offset " + std::to_string(kHeaderSize) +
                              " fails FlatBuffers verification");
  }
  const fb::Catalog* catalog = fb::GetCatalog(buf);
  if (catalog->format_version() == 0) {
    return Status::Corruption(prefix + "format_version is missing or 0");
  }
  if (catalog->format_version() > kFormatVersion) {
    return Status::NotSupported(prefix + "format version " +
                                std::to_string(catalog->format_version()) +
                                " was written by a newer replaydb; this build reads up to " +
                                std::to_string(kFormatVersion));
  }
  CatalogContents parsed;
  uint32_t max_id = 0;
  bool any_id = false, any_missing = false;
  if (catalog->tables() != nullptr) {
    parsed.tables.resize(catalog->tables()->size());
    for (uint32_t i = 0; i < catalog->tables()->size(); ++i) {
      const fb::TableDef& def = *catalog->tables()->Get(i);
      REPLAYDB_RETURN_IF_ERROR(ParseTableDef(def, i, prefix, &parsed.tables[i].spec));
      parsed.tables[i].id = def.id();
      (def.id() == 0 ? any_missing : any_id) = true;
      max_id = std::max(max_id, def.id());
    }
  }
  if (any_id && any_missing) {
    return Status::Corruption(prefix + "some tables have ids and some do not");
  }
  if (any_missing) {
    // Written before tables had ids.
    for (size_t i = 0; i < parsed.tables.size(); ++i) {
      parsed.tables[i].id = static_cast<uint32_t>(i + 1);
    }
    max_id = static_cast<uint32_t>(parsed.tables.size());
  }
  for (size_t i = 0; i < parsed.tables.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (parsed.tables[i].id == parsed.tables[j].id) {
        return Status::Corruption(prefix + "tables " + std::to_string(j) + " and " +
                                  std::to_string(i) + " share id " +
                                  std::to_string(parsed.tables[i].id));
      }
    }
  }
  if (max_id == std::numeric_limits<uint32_t>::max()) {
    return Status::Corruption(prefix + "table id " + std::to_string(max_id) + " leaves no room");
  }
  parsed.next_table_id = std::max(catalog->next_table_id(), max_id + 1);
  parsed.checkpointed = catalog->checkpointed();
  *contents = std::move(parsed);
  return Status::OK();
}

Status LoadCatalog(Env* env, const std::string& path, std::vector<TableSpec>* tables) {
  std::string bytes;
  REPLAYDB_RETURN_IF_ERROR(env->ReadFileToString(path, &bytes));
  return DecodeCatalog(bytes, path, tables);
}

Status SaveCatalog(Env* env, const std::string& path, const std::vector<TableSpec>& tables) {
  return env->WriteFileAtomic(path, EncodeCatalog(tables));
}

Status LoadCatalog(Env* env, const std::string& path, CatalogContents* catalog) {
  std::string bytes;
  REPLAYDB_RETURN_IF_ERROR(env->ReadFileToString(path, &bytes));
  return DecodeCatalog(bytes, path, catalog);
}

Status SaveCatalog(Env* env, const std::string& path, const CatalogContents& catalog) {
  return env->WriteFileAtomic(path, EncodeCatalog(catalog));
}

}  // namespace replaydb::engine
