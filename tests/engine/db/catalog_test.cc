// The catalog file: round trips, the checked-in sample, corruption, and
// decoding arbitrary bytes without crashing.
#include "engine/db/catalog.h"

#include <flatbuffers/flatbuffers.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "engine/db/catalog_generated.h"
#include "replaydb/env.h"
#include "util/crc32c.h"

namespace replaydb::engine {
namespace {

constexpr double kMaxDouble = std::numeric_limits<double>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();
const std::string kSource = "/db/CATALOG";
constexpr size_t kHeaderSize = 16;

std::filesystem::path SourceRoot() { return REPLAYDB_SOURCE_DIR; }

ColumnSpec Col(std::string name, DType dtype, Shape shape) {
  ColumnSpec c;
  c.name = std::move(name);
  c.dtype = dtype;
  c.shape = shape;
  return c;
}

// The rate limiter TableSpec starts with (MinSize(1)), spelled out.
RateLimiterSpec DefaultRateLimiter() {
  RateLimiterSpec r;
  r.samples_per_insert = 1.0;
  r.min_size_to_sample = 1;
  r.min_diff = -kMaxDouble;
  r.max_diff = kMaxDouble;
  return r;
}

// Every field of a spec, for readable failure messages.
std::string Describe(const TableSpec& t) {
  std::ostringstream os;
  os.precision(17);
  os << "{name='" << t.name << "' columns=[";
  for (const ColumnSpec& c : t.columns) {
    os << "{'" << c.name << "' dtype=" << static_cast<int>(c.dtype)
       << " shape=" << c.shape.ToString() << "}";
  }
  os << "] capacity_steps=" << t.capacity_steps << " capacity_bytes=" << t.capacity_bytes
     << " block_steps=" << t.block_steps << " sequence_length=" << t.sequence_length
     << " padding=" << static_cast<int>(t.padding) << " selector=" << static_cast<int>(t.selector)
     << " eviction=" << static_cast<int>(t.eviction) << " max_times_sampled=" << t.max_times_sampled
     << " lanes=" << t.lanes << " acks=" << AcksName(t.acks) << " max_lag_ms=" << t.max_lag_ms
     << " rate_limiter={" << t.rate_limiter.samples_per_insert << ", "
     << t.rate_limiter.min_size_to_sample << ", " << t.rate_limiter.min_diff << ", "
     << t.rate_limiter.max_diff << "}}";
  return os.str();
}

std::string Describe(const std::vector<TableSpec>& tables) {
  std::string out;
  for (const TableSpec& t : tables) out += Describe(t) + "\n";
  return out;
}

void ExpectSameTables(const std::vector<TableSpec>& actual,
                      const std::vector<TableSpec>& expected) {
  EXPECT_EQ(Describe(actual), Describe(expected));
  EXPECT_TRUE(actual == expected);
}

// What tests/data/catalog_v1.bin holds (see engine/db/CATALOG.md).
std::vector<TableSpec> SampleTables() {
  std::vector<TableSpec> tables(3);

  TableSpec& cartpole = tables[0];
  cartpole.name = "cartpole";
  cartpole.columns = {Col("obs", DType::kF32, {4}), Col("action", DType::kI64, {}),
                      Col("reward", DType::kF32, {}), Col("done", DType::kBool, {})};
  cartpole.capacity_steps = 0;
  cartpole.capacity_bytes = int64_t{1} << 30;
  cartpole.block_steps = 64;
  cartpole.sequence_length = 1;
  cartpole.padding = Padding::kNone;
  cartpole.selector = SelectorKind::kUniform;
  cartpole.eviction = EvictionPolicy::kOldestFirst;
  cartpole.max_times_sampled = 0;
  cartpole.rate_limiter = DefaultRateLimiter();

  TableSpec& atari = tables[1];
  atari.name = "atari.seq-v2";
  atari.columns = {Col("obs", DType::kU8, {84, 84, 4}),
                   Col("action", DType::kI32, {}),
                   Col("reward", DType::kF16, {}),
                   Col("discount", DType::kBF16, {}),
                   Col("logits", DType::kF64, {18}),
                   Col("hidden", DType::kI16, {2, 256}),
                   Col("mask", DType::kI8, {3, 1, 2, 1, 1, 1, 1, 5})};
  atari.capacity_steps = 1000000;
  atari.capacity_bytes = 123456789;
  atari.block_steps = 128;
  atari.sequence_length = 80;
  atari.padding = Padding::kTail;
  atari.selector = SelectorKind::kLifo;
  atari.eviction = EvictionPolicy::kOldestFirst;
  atari.max_times_sampled = 3;
  atari.rate_limiter.samples_per_insert = 4.5;
  atari.rate_limiter.min_size_to_sample = 1000;
  atari.rate_limiter.min_diff = -250.5;
  atari.rate_limiter.max_diff = 750.25;

  TableSpec& queue = tables[2];
  queue.name = "queue_1";
  queue.columns = {Col("x", DType::kF32, {2})};
  queue.capacity_steps = 100;
  queue.capacity_bytes = int64_t{1} << 30;
  queue.block_steps = 1;
  queue.sequence_length = 1;
  queue.padding = Padding::kNone;
  queue.selector = SelectorKind::kFifo;
  queue.eviction = EvictionPolicy::kOldestFirst;
  queue.max_times_sampled = 1;
  queue.rate_limiter.samples_per_insert = 1.0;
  queue.rate_limiter.min_size_to_sample = 1;
  queue.rate_limiter.min_diff = 0.0;
  queue.rate_limiter.max_diff = 100.0;
  return tables;
}

// The one-table catalog of the worked example in engine/db/CATALOG.md.
TableSpec WorkedExampleTable() {
  TableSpec t;
  t.name = "cartpole";
  t.columns = {Col("obs", DType::kF32, {4})};
  t.capacity_steps = 0;
  t.capacity_bytes = int64_t{1} << 30;
  t.block_steps = 64;
  t.sequence_length = 1;
  t.padding = Padding::kNone;
  t.selector = SelectorKind::kUniform;
  t.eviction = EvictionPolicy::kOldestFirst;
  t.max_times_sampled = 0;
  t.rate_limiter = DefaultRateLimiter();
  return t;
}

std::string ReadSourceFile(const std::filesystem::path& path) {
  std::string bytes;
  const Status s = Env::Default()->ReadFileToString(path.string(), &bytes);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return bytes;
}

std::string SampleBytes() {
  return ReadSourceFile(SourceRoot() / "tests/data/catalog_v1.bin");
}

uint32_t Fixed32At(const std::string& bytes, size_t offset) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[offset + i]);
  return v;
}

// The file envelope around `payload`, built here independently of the
// encoder: magic, u32 LE length, u32 LE CRC32C, payload.
std::string Envelope(std::string_view payload) {
  std::string out("RDBCAT\x00\x01", 8);
  const uint32_t fields[2] = {static_cast<uint32_t>(payload.size()),
                              util::Crc32c(payload.data(), payload.size())};
  for (uint32_t v : fields) {
    for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
  }
  out.append(payload);
  return out;
}

// Recomputes the header CRC after the payload of `file` was changed.
void FixChecksum(std::string* file) {
  const uint32_t crc = util::Crc32c(file->data() + kHeaderSize, file->size() - kHeaderSize);
  for (int i = 0; i < 4; ++i) (*file)[12 + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
}

// A hand-built catalog, for the values EncodeCatalog never writes.
struct RawTable {
  bool with_name = true;
  std::string name = "t";
  std::string column_name = "obs";
  uint8_t dtype = static_cast<uint8_t>(DType::kF32);
  std::vector<int64_t> shape = {4};
  uint8_t padding = 0;
  uint8_t selector = 0;
  uint8_t eviction = 0;
  uint8_t step_priority = 0;
  uint8_t placement_kind = 0;
  uint8_t logging = 0;
  uint8_t acks = 0;
  bool with_columns = true;
  bool with_rate_limiter = true;
  // A field from a future writer, appended after the last known one.
  bool with_future_field = false;
};

std::string RawCatalogFile(const std::vector<RawTable>& tables, uint32_t format_version = 1,
                           bool with_identifier = true) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fb::TableDef>> defs;
  for (const RawTable& raw : tables) {
    const auto column = fb::CreateColumn(fbb, fbb.CreateString(raw.column_name), raw.dtype,
                                         fbb.CreateVector(raw.shape));
    const auto columns = fbb.CreateVector(&column, 1);
    const auto name = fbb.CreateString(raw.name);
    const auto rate_limiter = fb::CreateRateLimiter(fbb, 2.0, 5, -1.0, 1.0);
    // The generic builder calls, so that a required field can be left out.
    const auto start = fbb.StartTable();
    if (raw.with_name) fbb.AddOffset(fb::TableDef::VT_NAME, name);
    if (raw.with_columns) fbb.AddOffset(fb::TableDef::VT_COLUMNS, columns);
    fbb.AddElement<int64_t>(fb::TableDef::VT_BLOCK_STEPS, 16, 64);
    fbb.AddElement<uint8_t>(fb::TableDef::VT_PADDING, raw.padding, 0);
    fbb.AddElement<uint8_t>(fb::TableDef::VT_SELECTOR, raw.selector, 0);
    fbb.AddElement<uint8_t>(fb::TableDef::VT_EVICTION, raw.eviction, 0);
    fbb.AddElement<uint8_t>(fb::TableDef::VT_STEP_PRIORITY, raw.step_priority, 0);
    fbb.AddElement<uint8_t>(fb::TableDef::VT_PLACEMENT_KIND, raw.placement_kind, 0);
    fbb.AddElement<uint8_t>(fb::TableDef::VT_LOGGING, raw.logging, 0);
    fbb.AddElement<uint8_t>(fb::TableDef::VT_ACKS, raw.acks, 0);
    if (raw.with_rate_limiter) fbb.AddOffset(fb::TableDef::VT_RATE_LIMITER, rate_limiter);
    if (raw.with_future_field) {
      fbb.AddElement<int64_t>(fb::TableDef::VT_MAX_LAG_MS + 2, 123456789, 0);
    }
    defs.push_back(flatbuffers::Offset<fb::TableDef>(fbb.EndTable(start)));
  }
  const auto catalog = fb::CreateCatalog(fbb, format_version, fbb.CreateVector(defs));
  if (with_identifier) {
    fb::FinishCatalogBuffer(fbb, catalog);
  } else {
    fbb.Finish(catalog);
  }
  return Envelope(
      std::string_view(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize()));
}

// What RawTable{} (with the given enum values) decodes to.
TableSpec RawTableSpec(const RawTable& raw) {
  TableSpec t;
  t.name = raw.name;
  if (raw.with_columns) t.columns = {Col(raw.column_name, static_cast<DType>(raw.dtype), {4})};
  t.capacity_steps = 0;
  t.capacity_bytes = int64_t{1} << 30;
  t.block_steps = 16;
  t.sequence_length = 1;
  t.padding = static_cast<Padding>(raw.padding);
  t.selector = static_cast<SelectorKind>(raw.selector);
  t.eviction = static_cast<EvictionPolicy>(raw.eviction);
  t.step_priority = static_cast<StepPriority>(raw.step_priority);
  t.placement.kind = static_cast<Placement::Kind>(raw.placement_kind);
  t.logging = static_cast<TableLogging>(raw.logging);
  if (raw.acks != 0) t.acks = Acks{static_cast<AckMode>(raw.acks), 0};
  t.max_times_sampled = 0;
  if (raw.with_rate_limiter) {
    t.rate_limiter.samples_per_insert = 2.0;
    t.rate_limiter.min_size_to_sample = 5;
    t.rate_limiter.min_diff = -1.0;
    t.rate_limiter.max_diff = 1.0;
  } else {
    t.rate_limiter = DefaultRateLimiter();
  }
  return t;
}

// Decodes `bytes`, which must fail with `code`, and returns the message.
std::string DecodeError(std::string_view bytes, Status::Code code = Status::Code::kCorruption) {
  std::vector<TableSpec> tables;
  const Status s = DecodeCatalog(bytes, kSource, &tables);
  EXPECT_EQ(s.code(), code) << s.ToString();
  return s.message();
}

// ------------------------------------------------------------ round trips

class SpecGenerator {
 public:
  explicit SpecGenerator(uint64_t seed) : rng_(seed) {}

  TableSpec Table() {
    TableSpec t;
    t.name = Name();
    const int num_columns = Int(1, 8);
    for (int i = 0; i < num_columns; ++i) {
      ColumnSpec c;
      c.name = Name();
      c.dtype = static_cast<DType>(Int(0, kNumDTypes - 1));
      const int rank = Int(0, Shape::kMaxRank);
      std::vector<int64_t> dims;
      for (int d = 0; d < rank; ++d) {
        dims.push_back(Int(0, 9) == 0 ? std::numeric_limits<int64_t>::max() : Int(1, 1 << 20));
      }
      c.shape = Shape::FromSpan(dims);
      t.columns.push_back(std::move(c));
    }
    t.capacity_steps = Int64();
    t.capacity_bytes = Int64();
    t.block_steps = Int64();
    t.sequence_length = Int64();
    t.padding = static_cast<Padding>(Int(0, 1));
    t.selector = static_cast<SelectorKind>(Int(0, 5));
    t.eviction = static_cast<EvictionPolicy>(Int(0, 1));
    t.priority_exponent = Double();
    t.step_priority = static_cast<StepPriority>(Int(0, 2));
    t.priority_device = Int(-1, 7);
    t.placement.kind = static_cast<Placement::Kind>(Int(0, 2));
    t.placement.device = Int(0, 7);
    t.logging = static_cast<TableLogging>(Int(0, 2));
    t.spill = Int(0, 1) == 1;
    t.rotation_fraction = Double();
    t.rotation_every_samples = Int64();
    t.lanes = Int64();
    t.acks = Int(0, 1) == 1 ? Acks::Replicated(Int(1, kMaxAckReplicas))
                            : Acks{static_cast<AckMode>(Int(1, 3)), 0};
    t.max_lag_ms = Int64() | 1;  // (0 is an older file's: the default)
    t.max_times_sampled = Int64();
    t.rate_limiter.samples_per_insert = Double();
    t.rate_limiter.min_size_to_sample = Int64();
    t.rate_limiter.min_diff = Double();
    t.rate_limiter.max_diff = Double();
    return t;
  }

 private:
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  int64_t Int64() {
    switch (Int(0, 3)) {
      case 0:
        return std::numeric_limits<int64_t>::min();
      case 1:
        return std::numeric_limits<int64_t>::max();
      default:
        return static_cast<int64_t>(rng_());
    }
  }
  // Any double but NaN (which would not compare equal to itself).
  double Double() {
    switch (Int(0, 5)) {
      case 0:
        return kInf;
      case 1:
        return -kMaxDouble;
      case 2:
        return std::numeric_limits<double>::denorm_min();
      default: {
        double d;
        do {
          const uint64_t bits = rng_();
          std::memcpy(&d, &bits, sizeof(d));
        } while (std::isnan(d));
        return d;
      }
    }
  }
  std::string Name() {
    static constexpr char kChars[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";
    std::string s(static_cast<size_t>(Int(1, 128)), ' ');
    for (char& c : s) c = kChars[Int(0, sizeof(kChars) - 2)];
    return s;
  }

  std::mt19937_64 rng_;
};

TEST(CatalogTest, RoundTripsEveryFieldSetToNonDefaultValues) {
  TableSpec t;
  t.name = "every-field";
  t.columns = {Col("obs", DType::kBF16, {3, 5, 7}), Col("flag", DType::kBool, {})};
  t.capacity_steps = 5000;
  t.capacity_bytes = 77777;
  t.block_steps = 32;
  t.sequence_length = 9;
  t.padding = Padding::kTail;
  t.selector = SelectorKind::kFifo;
  t.eviction = EvictionPolicy::kLowestPriority;
  t.priority_exponent = 0.6;
  t.step_priority = StepPriority::kWindowMean;
  t.priority_device = 3;
  t.placement = Placement::Device(3);
  t.max_times_sampled = 4;
  t.acks = Acks::Replicated(2);
  t.max_lag_ms = 1500;
  t.rate_limiter.samples_per_insert = 0.25;
  t.rate_limiter.min_size_to_sample = 64;
  t.rate_limiter.min_diff = -12.5;
  t.rate_limiter.max_diff = 99.75;
  // Guard: each field really differs from the default.
  const TableSpec d;
  EXPECT_NE(t.columns, d.columns);
  EXPECT_NE(t.capacity_steps, d.capacity_steps);
  EXPECT_NE(t.capacity_bytes, d.capacity_bytes);
  EXPECT_NE(t.block_steps, d.block_steps);
  EXPECT_NE(t.sequence_length, d.sequence_length);
  EXPECT_NE(t.padding, d.padding);
  EXPECT_NE(t.selector, d.selector);
  EXPECT_NE(t.eviction, d.eviction);
  EXPECT_NE(t.priority_exponent, d.priority_exponent);
  EXPECT_NE(t.step_priority, d.step_priority);
  EXPECT_NE(t.priority_device, d.priority_device);
  EXPECT_NE(t.placement, d.placement);
  EXPECT_NE(t.max_times_sampled, d.max_times_sampled);
  EXPECT_NE(t.acks, d.acks);
  EXPECT_NE(t.max_lag_ms, d.max_lag_ms);
  EXPECT_NE(t.rate_limiter.samples_per_insert, d.rate_limiter.samples_per_insert);
  EXPECT_NE(t.rate_limiter.min_size_to_sample, d.rate_limiter.min_size_to_sample);
  EXPECT_NE(t.rate_limiter.min_diff, d.rate_limiter.min_diff);
  EXPECT_NE(t.rate_limiter.max_diff, d.rate_limiter.max_diff);

  std::vector<TableSpec> decoded;
  ASSERT_TRUE(DecodeCatalog(EncodeCatalog({t}), kSource, &decoded).ok());
  ExpectSameTables(decoded, {t});
}

TEST(CatalogTest, RoundTripsRandomSpecs) {
  SpecGenerator gen(20261101);
  std::mt19937_64 rng(1);
  for (int iteration = 0; iteration < 300; ++iteration) {
    std::vector<TableSpec> tables(rng() % 6);
    for (TableSpec& t : tables) t = gen.Table();
    const std::string bytes = EncodeCatalog(tables);
    std::vector<TableSpec> decoded;
    const Status s = DecodeCatalog(bytes, kSource, &decoded);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(decoded == tables) << "iteration " << iteration << "\n"
                                   << Describe(decoded) << "vs\n"
                                   << Describe(tables);
  }
}

TEST(CatalogTest, EmptyCatalogRoundTrips) {
  std::vector<TableSpec> decoded = SampleTables();
  ASSERT_TRUE(DecodeCatalog(EncodeCatalog(std::vector<TableSpec>{}), kSource, &decoded).ok());
  EXPECT_TRUE(decoded.empty());
}

TEST(CatalogTest, DecodesFromUnalignedMemory) {
  const std::string bytes = EncodeCatalog(SampleTables());
  for (size_t shift = 1; shift < 8; ++shift) {
    const std::string buffer = std::string(shift, '\0') + bytes;
    std::vector<TableSpec> decoded;
    ASSERT_TRUE(DecodeCatalog(std::string_view(buffer).substr(shift), kSource, &decoded).ok());
    ExpectSameTables(decoded, SampleTables());
  }
}

// ------------------------------------------------- checked-in sample files

TEST(CatalogTest, DecodesCheckedInSample) {
  const std::string bytes = SampleBytes();
  ASSERT_EQ(bytes.size(), 1064u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("RDBCAT\x00\x01", 8));
  EXPECT_EQ(Fixed32At(bytes, 8), bytes.size() - kHeaderSize);
  EXPECT_EQ(Fixed32At(bytes, 12), util::Crc32c(bytes.data() + kHeaderSize, bytes.size() - kHeaderSize));
  EXPECT_EQ(bytes.substr(kHeaderSize + 4, 4), "RDBC");

  std::vector<TableSpec> decoded;
  const Status s = DecodeCatalog(bytes, kSource, &decoded);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectSameTables(decoded, SampleTables());
}

// The hex dump in CATALOG.md's worked example is a real file.
TEST(CatalogTest, WorkedExampleInCatalogMdDecodes) {
  const std::string doc = ReadSourceFile(SourceRoot() / "engine/db/CATALOG.md");
  const std::string begin_marker = "<!-- worked-example-hexdump -->";
  size_t pos = doc.find(begin_marker);
  ASSERT_NE(pos, std::string::npos) << "CATALOG.md lost its marker " << begin_marker;
  pos = doc.find("```\n", pos);
  ASSERT_NE(pos, std::string::npos);
  pos += 4;
  const size_t end = doc.find("```", pos);
  ASSERT_NE(end, std::string::npos);

  // xxd -g2 lines: "00000010: 1400 0000 ...  ascii"; the hex is columns 10-49.
  std::string bytes;
  std::istringstream lines(doc.substr(pos, end - pos));
  std::string line;
  while (std::getline(lines, line)) {
    ASSERT_GT(line.size(), 10u) << line;
    ASSERT_EQ(std::stoul(line.substr(0, 8), nullptr, 16), bytes.size()) << line;
    const std::string hex = line.substr(10, 40);
    std::string digits;
    for (char c : hex) {
      if (c != ' ') digits += c;
    }
    ASSERT_EQ(digits.size() % 2, 0u) << line;
    for (size_t i = 0; i < digits.size(); i += 2) {
      bytes += static_cast<char>(std::stoul(digits.substr(i, 2), nullptr, 16));
    }
  }
  ASSERT_EQ(bytes.size(), 264u);

  std::vector<TableSpec> decoded;
  const Status s = DecodeCatalog(bytes, kSource, &decoded);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectSameTables(decoded, {WorkedExampleTable()});
}

// --------------------------------------------------------------- evolution

TEST(CatalogTest, MissingOptionalPartsReadAsDefaults) {
  RawTable raw;
  raw.with_rate_limiter = false;
  raw.with_columns = false;
  std::vector<TableSpec> decoded;
  const Status s = DecodeCatalog(RawCatalogFile({raw}), kSource, &decoded);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectSameTables(decoded, {RawTableSpec(raw)});
}

TEST(CatalogTest, IgnoresFieldsFromANewerWriter) {
  RawTable raw;
  raw.with_future_field = true;
  std::vector<TableSpec> decoded;
  const Status s = DecodeCatalog(RawCatalogFile({raw, RawTable{}}), kSource, &decoded);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectSameTables(decoded, {RawTableSpec(raw), RawTableSpec(RawTable{})});
}

TEST(CatalogTest, NewerFormatVersionIsNotSupported) {
  EXPECT_EQ(DecodeError(RawCatalogFile({RawTable{}}, 2), Status::Code::kNotSupported),
            "catalog /db/CATALOG: format version 2 was written by a newer replaydb; this build "
            "reads up to 1");
}

// ------------------------------------------------------------- corruption

TEST(CatalogTest, ShorterThanHeader) {
  EXPECT_EQ(DecodeError(""),
            "catalog /db/CATALOG: file is 0 bytes, shorter than the 16-byte header");
  EXPECT_EQ(DecodeError(SampleBytes().substr(0, 15)),
            "catalog /db/CATALOG: file is 15 bytes, shorter than the 16-byte header");
}

TEST(CatalogTest, BadMagic) {
  std::string bytes = SampleBytes();
  bytes[0] = 'S';
  EXPECT_EQ(DecodeError(bytes),
            "catalog /db/CATALOG: bad magic at offset 0 (found 53 44 42 43 41 54 00 01, expected "
            "52 44 42 43 41 54 00 01)");
  bytes = SampleBytes();
  bytes[7] = '\x02';
  EXPECT_EQ(DecodeError(bytes),
            "catalog /db/CATALOG: bad magic at offset 0 (found 52 44 42 43 41 54 00 02, expected "
            "52 44 42 43 41 54 00 01)");
}

TEST(CatalogTest, TruncatedPayload) {
  const std::string bytes = SampleBytes();
  EXPECT_EQ(DecodeError(bytes.substr(0, bytes.size() - 1)),
            "catalog /db/CATALOG: header at offset 8 gives a payload of 1048 bytes, but 1047 "
            "bytes follow the header (truncated)");
}

TEST(CatalogTest, TrailingBytes) {
  EXPECT_EQ(DecodeError(SampleBytes() + "x"),
            "catalog /db/CATALOG: header at offset 8 gives a payload of 1048 bytes, but 1049 "
            "bytes follow the header (trailing bytes)");
}

TEST(CatalogTest, ChecksumMismatch) {
  std::string bytes = SampleBytes();
  bytes[500] = static_cast<char>(bytes[500] ^ 0x10);
  // The example in CATALOG.md.
  EXPECT_EQ(DecodeError(bytes),
            "catalog /db/CATALOG: checksum mismatch (stored 0x578967a1, computed 0x117cbb8b)");
}

TEST(CatalogTest, MissingFileIdentifier) {
  EXPECT_EQ(DecodeError(RawCatalogFile({RawTable{}}, 1, /*with_identifier=*/false)),
            "catalog /db/CATALOG: payload at offset 16 lacks the FlatBuffers file identifier "
            "'RDBC'");
  EXPECT_EQ(DecodeError(Envelope("RDBC")),
            "catalog /db/CATALOG: payload at offset 16 lacks the FlatBuffers file identifier "
            "'RDBC'");
}

TEST(CatalogTest, FailsVerification) {
  // Root offset far outside the buffer.
  const std::string wild_root("\x00\xff\xff\x7fRDBC\0\0\0\0\0\0\0\0", 16);
  EXPECT_EQ(DecodeError(Envelope(wild_root)),
            "catalog /db/CATALOG: payload at offset 16 fails FlatBuffers verification");
  // A required field (the table name) left out.
  RawTable raw;
  raw.with_name = false;
  EXPECT_EQ(DecodeError(RawCatalogFile({raw})),
            "catalog /db/CATALOG: payload at offset 16 fails FlatBuffers verification");
}

TEST(CatalogTest, MissingFormatVersion) {
  EXPECT_EQ(DecodeError(RawCatalogFile({RawTable{}}, 0)),
            "catalog /db/CATALOG: format_version is missing or 0");
}

TEST(CatalogTest, UnknownDType) {
  RawTable bad;
  bad.name = "c";
  bad.dtype = 42;
  EXPECT_EQ(DecodeError(RawCatalogFile({RawTable{}, RawTable{}, bad})),
            "catalog /db/CATALOG: table 2 'c' column 'obs' has unknown dtype 42");
  bad.dtype = kNumDTypes;
  EXPECT_EQ(DecodeError(RawCatalogFile({bad})),
            "catalog /db/CATALOG: table 0 'c' column 'obs' has unknown dtype 10");
}

TEST(CatalogTest, UnknownEnumValues) {
  RawTable bad;
  bad.padding = 2;
  EXPECT_EQ(DecodeError(RawCatalogFile({bad})),
            "catalog /db/CATALOG: table 0 't' has unknown padding 2");
  bad = RawTable{};
  bad.selector = 6;
  EXPECT_EQ(DecodeError(RawCatalogFile({RawTable{}, bad})),
            "catalog /db/CATALOG: table 1 't' has unknown selector 6");
  bad = RawTable{};
  bad.eviction = 2;
  EXPECT_EQ(DecodeError(RawCatalogFile({bad})),
            "catalog /db/CATALOG: table 0 't' has unknown eviction policy 2");
  bad = RawTable{};
  bad.step_priority = 3;
  EXPECT_EQ(DecodeError(RawCatalogFile({bad})),
            "catalog /db/CATALOG: table 0 't' has unknown step_priority 3");
  bad = RawTable{};
  bad.placement_kind = 3;
  EXPECT_EQ(DecodeError(RawCatalogFile({bad})),
            "catalog /db/CATALOG: table 0 't' has unknown placement kind 3");
  bad = RawTable{};
  bad.logging = 3;
  EXPECT_EQ(DecodeError(RawCatalogFile({bad})),
            "catalog /db/CATALOG: table 0 't' has unknown logging 3");
  bad = RawTable{};
  bad.acks = 5;
  EXPECT_EQ(DecodeError(RawCatalogFile({bad})),
            "catalog /db/CATALOG: table 0 't' has unknown acks 5");

  // The largest known values decode.
  RawTable last;
  last.dtype = kNumDTypes - 1;
  last.padding = static_cast<uint8_t>(Padding::kTail);
  last.selector = static_cast<uint8_t>(SelectorKind::kMaxHeap);
  last.eviction = static_cast<uint8_t>(EvictionPolicy::kLowestPriority);
  last.step_priority = static_cast<uint8_t>(StepPriority::kWindowMean);
  last.placement_kind = static_cast<uint8_t>(Placement::Kind::kAuto);
  last.logging = static_cast<uint8_t>(TableLogging::kOff);
  std::vector<TableSpec> decoded;
  ASSERT_TRUE(DecodeCatalog(RawCatalogFile({last}), kSource, &decoded).ok());
  ExpectSameTables(decoded, {RawTableSpec(last)});
}

TEST(CatalogTest, ShapeRankAboveMax) {
  RawTable bad;
  bad.shape = std::vector<int64_t>(Shape::kMaxRank + 1, 1);
  EXPECT_EQ(DecodeError(RawCatalogFile({bad})),
            "catalog /db/CATALOG: table 0 't' column 'obs' has shape rank 9, more than 8");
}

TEST(CatalogTest, OddBytesInNamesAreEscapedInMessages) {
  RawTable bad;
  bad.name = std::string("a\n'\xff", 4);
  bad.dtype = 200;
  EXPECT_EQ(DecodeError(RawCatalogFile({bad})),
            "catalog /db/CATALOG: table 0 'a\\x0a\\x27\\xff' column 'obs' has unknown dtype 200");
}

TEST(CatalogTest, FailedDecodeLeavesOutputUntouched) {
  std::vector<TableSpec> tables = SampleTables();
  RawTable bad;
  bad.dtype = 99;
  EXPECT_FALSE(DecodeCatalog(RawCatalogFile({RawTable{}, bad}), kSource, &tables).ok());
  ExpectSameTables(tables, SampleTables());
}

// ------------------------------------------------------------------- fuzz

// Decodes `bytes`; anything but OK, Corruption (or NotSupported, reachable
// only with a valid checksum) is a failure, as is a crash. Returns the code.
Status::Code DecodeAnything(std::string_view bytes) {
  std::vector<TableSpec> tables;
  const Status s = DecodeCatalog(bytes, "fuzz", &tables);
  EXPECT_TRUE(s.ok() || s.code() == Status::Code::kCorruption ||
              s.code() == Status::Code::kNotSupported)
      << s.ToString();
  if (!s.ok()) {
    EXPECT_EQ(s.message().rfind("catalog fuzz: ", 0), 0u) << s.message();
  } else {
    // Whatever decoded re-encodes to a file that decodes to the same bytes.
    const std::string again = EncodeCatalog(tables);
    std::vector<TableSpec> twice;
    EXPECT_TRUE(DecodeCatalog(again, "fuzz", &twice).ok());
    EXPECT_EQ(EncodeCatalog(twice), again);
  }
  return s.code();
}

TEST(CatalogFuzzTest, EveryTruncationIsCorruption) {
  const std::string bytes = SampleBytes();
  for (size_t n = 0; n < bytes.size(); ++n) {
    ASSERT_EQ(DecodeAnything(std::string_view(bytes).substr(0, n)), Status::Code::kCorruption) << n;
  }
}

TEST(CatalogFuzzTest, EverySingleBitFlipIsCorruption) {
  std::string bytes = SampleBytes();
  for (size_t bit = 0; bit < bytes.size() * 8; ++bit) {
    bytes[bit / 8] = static_cast<char>(bytes[bit / 8] ^ (1 << (bit % 8)));
    ASSERT_EQ(DecodeAnything(bytes), Status::Code::kCorruption) << "bit " << bit;
    bytes[bit / 8] = static_cast<char>(bytes[bit / 8] ^ (1 << (bit % 8)));
  }
}

// With the checksum recomputed, mutations reach the verifier and the field
// checks behind it.
TEST(CatalogFuzzTest, PayloadBitFlipsWithValidChecksumNeverCrash) {
  const std::string sample = SampleBytes();
  int ok = 0;
  int corrupt = 0;
  for (size_t bit = kHeaderSize * 8; bit < sample.size() * 8; ++bit) {
    std::string bytes = sample;
    bytes[bit / 8] = static_cast<char>(bytes[bit / 8] ^ (1 << (bit % 8)));
    FixChecksum(&bytes);
    const Status::Code code = DecodeAnything(bytes);
    ok += code == Status::Code::kOk;
    corrupt += code == Status::Code::kCorruption;
  }
  // Both outcomes happen, so the test exercises the checks behind the CRC.
  EXPECT_GT(ok, 0);
  EXPECT_GT(corrupt, 0);
}

TEST(CatalogFuzzTest, RandomPayloadMutationsWithValidChecksumNeverCrash) {
  const std::string sample = SampleBytes();
  std::mt19937_64 rng(12345);
  int ok = 0;
  for (int iteration = 0; iteration < 20000; ++iteration) {
    std::string bytes = sample;
    const int mutations = 1 + static_cast<int>(rng() % 8);
    for (int m = 0; m < mutations; ++m) {
      const size_t at = kHeaderSize + rng() % (bytes.size() - kHeaderSize);
      switch (rng() % 4) {
        case 0:
          bytes[at] = static_cast<char>(rng());
          break;
        case 1:
          bytes[at] = static_cast<char>(0xFF);
          break;
        case 2:
          bytes[at] = 0;
          break;
        default:
          bytes[at] = static_cast<char>(bytes[at] + 1);
          break;
      }
    }
    if (rng() % 8 == 0) {
      // Truncate, keeping the header consistent.
      bytes.resize(kHeaderSize + rng() % (bytes.size() - kHeaderSize));
      const uint32_t n = static_cast<uint32_t>(bytes.size() - kHeaderSize);
      for (int i = 0; i < 4; ++i) bytes[8 + i] = static_cast<char>((n >> (8 * i)) & 0xFF);
    }
    FixChecksum(&bytes);
    ok += DecodeAnything(bytes) == Status::Code::kOk;
  }
  EXPECT_GT(ok, 0);
}

TEST(CatalogFuzzTest, RandomBytesNeverCrash) {
  std::mt19937_64 rng(99);
  for (int iteration = 0; iteration < 5000; ++iteration) {
    std::string bytes(rng() % 600, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    if (iteration % 2 == 1 && bytes.size() >= 24) {
      // A well-formed envelope and identifier around random FlatBuffers bytes.
      std::memcpy(bytes.data() + kHeaderSize + 4, "RDBC", 4);
      bytes = Envelope(std::string_view(bytes).substr(kHeaderSize));
    }
    ASSERT_NE(DecodeAnything(bytes), Status::Code::kOk) << iteration;
  }
}

// ------------------------------------------------------ Load and Save

class CatalogFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "replaydb_catalog_test.XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  Env* const env_ = Env::Default();
  std::string dir_;
};

TEST_F(CatalogFileTest, LoadMissingIsNotFound) {
  std::vector<TableSpec> tables;
  const Status s = LoadCatalog(env_, dir_ + "/CATALOG", &tables);
  EXPECT_EQ(s.code(), Status::Code::kNotFound) << s.ToString();
  EXPECT_EQ(s.message(), "open " + dir_ + "/CATALOG: No such file or directory");
}

TEST_F(CatalogFileTest, SaveThenLoad) {
  const std::string path = dir_ + "/CATALOG";
  ASSERT_TRUE(SaveCatalog(env_, path, SampleTables()).ok());
  std::vector<TableSpec> loaded;
  ASSERT_TRUE(LoadCatalog(env_, path, &loaded).ok());
  ExpectSameTables(loaded, SampleTables());

  // Replaced as a whole.
  const std::vector<TableSpec> fewer = {SampleTables()[1]};
  ASSERT_TRUE(SaveCatalog(env_, path, fewer).ok());
  ASSERT_TRUE(LoadCatalog(env_, path, &loaded).ok());
  ExpectSameTables(loaded, fewer);
  EXPECT_FALSE(env_->FileExists(path + ".tmp"));
}

TEST_F(CatalogFileTest, LoadCorruptFileNamesThePath) {
  const std::string path = dir_ + "/CATALOG";
  ASSERT_TRUE(env_->WriteFileAtomic(path, "not a catalog at all").ok());
  std::vector<TableSpec> tables;
  const Status s = LoadCatalog(env_, path, &tables);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_EQ(s.message().rfind("catalog " + path + ": bad magic", 0), 0u) << s.message();
}

TEST_F(CatalogFileTest, SaveIntoMissingDirectoryIsIOError) {
  const Status s = SaveCatalog(env_, dir_ + "/absent/CATALOG", SampleTables());
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_EQ(s.message(), "open " + dir_ + "/absent/CATALOG.tmp: No such file or directory");
}

}  // namespace
}  // namespace replaydb::engine
