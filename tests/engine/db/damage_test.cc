// A damaged or mistreated database (issue 31): files deleted or damaged
// behind the engine's back, and openers racing to create one. Each case
// either opens with what its recovery mode promises, reporting what it
// dropped, or fails naming what is wrong. Never silent loss.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "engine/cold/cold_store.h"
#include "engine/cold/table_file_check.h"
#include "replaydb/db.h"
#include "replaydb/env.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::ManualCheckpoints;
using testing_util::TempDir;
using testing_util::TestSeed;

TableSpec Spec() {
  TableSpec spec;
  spec.name = "t";
  spec.columns = {{"obs", DType::kF32, Shape{8}}};
  spec.capacity_steps = 1 << 14;
  spec.block_steps = 16;
  return spec;
}

// Per trajectory id, each step's bytes.
using Model = std::map<uint64_t, std::vector<std::string>>;

void WriteTrajectories(Table& table, std::mt19937_64& rng, int n, Model* model) {
  for (int i = 0; i < n; ++i) {
    ASSERT_OK_AND_ASSIGN(auto writer, table.NewWriter());
    const int steps = 2 + static_cast<int>(rng() % 20);
    std::vector<std::string> bytes;
    for (int s = 0; s < steps; ++s) {
      testing_util::StepData step = testing_util::RandomStep(table.spec(), rng);
      ASSERT_OK(writer->Append(step.tensors));
      bytes.emplace_back(reinterpret_cast<const char*>(step.columns[0].data()),
                         step.columns[0].size());
    }
    const uint64_t id = writer->trajectory_id();
    ASSERT_OK(writer->End(EndReason::kTerminal));
    (*model)[id] = std::move(bytes);
  }
}

// Per trajectory of `model`, how many of its steps `table` holds: always a
// prefix (a trajectory cut by lost log records comes back truncated), each
// step byte-identical; anything else fails the test.
std::map<uint64_t, size_t> Held(Table& table, const Model& model) {
  std::map<uint64_t, size_t> held;
  for (const auto& [id, steps] : model) {
    size_t n = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
      const ItemKey key = MakeItemKey(id, static_cast<int64_t>(i));
      SampleBatch batch;
      const Status s = table.Lookup(std::span<const ItemKey>(&key, 1), &batch);
      const bool there = s.ok() && batch.mask[0] != 0;
      EXPECT_TRUE(s.ok() || s.code() == Status::Code::kNotFound) << s.ToString();
      EXPECT_TRUE(!there || n == i) << "trajectory " << id << " holds step " << i
                                    << " but not step " << n;
      if (!there) continue;
      ++n;
      const std::string got(reinterpret_cast<const char*>(batch.columns[0].data()),
                            batch.columns[0].size_bytes());
      EXPECT_EQ(got, steps[i]) << "trajectory " << id << " step " << i << " came back changed";
    }
    held[id] = n;
  }
  return held;
}

// How many of `model`'s trajectories `table` holds whole.
int CountIntact(Table& table, const Model& model) {
  int intact = 0;
  for (const auto& [id, n] : Held(table, model)) intact += n == model.at(id).size() ? 1 : 0;
  return intact;
}

// A database with trajectories in its checkpoint (`checkpointed`) and
// after it in the log only (`logged`, over several segments: 4 KiB each),
// closed as a crash would leave it (no checkpoint on close).
struct Fixture {
  TempDir dir;
  Model checkpointed;
  Model logged;
  uint64_t checkpoint_segment = 0;
  std::vector<uint64_t> segments;  // after the checkpoint, in order

  std::string path() const { return dir.path() + "/db"; }
  std::string wal() const { return path() + "/wal"; }
  std::string SegmentPath(uint64_t n) const {
    char name[32];
    std::snprintf(name, sizeof(name), "%020llu.log", static_cast<unsigned long long>(n));
    return wal() + "/" + name;
  }

  static DBOptions Options(RecoveryMode mode = RecoveryMode::kTolerateTornTail) {
    DBOptions o = ManualCheckpoints();
    o.create_if_missing = false;
    o.wal.segment_bytes = 4096;
    o.wal.recovery = mode;
    return o;
  }

  void Build() {
    std::mt19937_64 rng(TestSeed());
    DBOptions o = Options();
    o.create_if_missing = true;
    auto opened = DB::Open(o, path());
    ASSERT_OK(opened.status());
    std::unique_ptr<DB> db = std::move(opened).value();
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec()));
    WriteTrajectories(*table, rng, 12, &checkpointed);
    ASSERT_OK(db->Checkpoint());
    ASSERT_OK_AND_ASSIGN(WalInfo info, db->Wal());
    checkpoint_segment = info.checkpoint_segment;
    WriteTrajectories(*table, rng, 40, &logged);
    ASSERT_EQ(checkpointed.size(), 12u);
    ASSERT_EQ(logged.size(), 40u);
    ASSERT_OK_AND_ASSIGN(info, db->Wal());
    for (uint64_t n = info.first_segment; n <= info.last_segment; ++n) segments.push_back(n);
    ASSERT_GE(segments.size(), 4u) << "the log should span several segments";
    ASSERT_EQ(segments.front(), checkpoint_segment);
  }

  // Build, then everything into cold/: a checkpoint of all, closed cleanly.
  void BuildCheckpointed() {
    ASSERT_NO_FATAL_FAILURE(Build());
    auto db = DB::Open(Options(), path());
    ASSERT_OK(db.status());
    ASSERT_OK((*db)->Checkpoint());
  }

  // The paths of cold/'s table files.
  std::vector<std::string> ColdSsts() const {
    std::vector<std::string> ssts;
    for (const auto& e : fs::directory_iterator(path() + "/cold")) {
      if (e.path().extension() == ".sst") ssts.push_back(e.path().string());
    }
    return ssts;
  }

  // What of the logged trajectories a replay that stops before `segment`
  // keeps, found by reopening a copy with the segments from `segment` on
  // removed.
  std::map<uint64_t, size_t> LoggedBefore(uint64_t segment) const {
    TempDir copy;
    fs::copy(path(), copy.path() + "/db", fs::copy_options::recursive);
    for (uint64_t n : segments) {
      if (n >= segment) fs::remove(copy.path() + "/db/wal/" + fs::path(SegmentPath(n)).filename().string());
    }
    auto db = DB::Open(Options(RecoveryMode::kAbsoluteConsistency), copy.path() + "/db");
    EXPECT_TRUE(db.ok()) << db.status().ToString();
    if (!db.ok()) return {};
    auto table = (*db)->GetTable("t");
    return Held(**table, logged);
  }
};

class DamagedDatabaseTest : public ::testing::TestWithParam<RecoveryMode> {};

// ----------------------------------------------------------------- the log

TEST_P(DamagedDatabaseTest, FirstLogSegmentMissingWithLaterOnes) {
  Fixture f;
  f.Build();
  const std::string missing = f.SegmentPath(f.segments.front());
  fs::remove(missing);
  auto db = DB::Open(Fixture::Options(GetParam()), f.path());
  if (GetParam() != RecoveryMode::kPointInTime) {
    // Not a torn tail: later segments exist. Corruption naming the file.
    ASSERT_FALSE(db.ok());
    EXPECT_EQ(db.status().code(), Status::Code::kCorruption) << db.status().ToString();
    EXPECT_THAT(db.status().message(), HasSubstr(missing));
    EXPECT_THAT(db.status().message(), HasSubstr("missing"));
    // Nothing was changed: the later segments are all still there.
    for (size_t i = 1; i < f.segments.size(); ++i) EXPECT_TRUE(fs::exists(f.SegmentPath(f.segments[i])));
    return;
  }
  // Point in time: opens as of the checkpoint, reporting the gap.
  ASSERT_OK(db.status());
  const RecoveryInfo info = (*db)->recovery_info();
  EXPECT_EQ(info.dropped_file, missing);
  EXPECT_THAT(info.dropped_reason, HasSubstr("missing"));
  EXPECT_GT(info.dropped_bytes, 0u);
  EXPECT_EQ(info.wal_records, 0u);
  ASSERT_OK_AND_ASSIGN(auto table, (*db)->GetTable("t"));
  EXPECT_EQ(CountIntact(*table, f.checkpointed), static_cast<int>(f.checkpointed.size()));
  EXPECT_EQ(CountIntact(*table, f.logged), 0);
}

TEST_P(DamagedDatabaseTest, LogEmptied) {
  Fixture f;
  f.Build();
  for (uint64_t n : f.segments) fs::remove(f.SegmentPath(n));
  auto db = DB::Open(Fixture::Options(GetParam()), f.path());
  const std::string missing = f.SegmentPath(f.checkpoint_segment);
  if (GetParam() == RecoveryMode::kAbsoluteConsistency) {
    ASSERT_FALSE(db.ok());
    EXPECT_EQ(db.status().code(), Status::Code::kCorruption) << db.status().ToString();
    EXPECT_THAT(db.status().message(), HasSubstr(missing));
    return;
  }
  // The rest open as of the checkpoint and say what is missing.
  ASSERT_OK(db.status());
  const RecoveryInfo info = (*db)->recovery_info();
  EXPECT_EQ(info.dropped_file, missing);
  EXPECT_THAT(info.dropped_reason, HasSubstr("missing"));
  ASSERT_OK_AND_ASSIGN(auto table, (*db)->GetTable("t"));
  EXPECT_EQ(CountIntact(*table, f.checkpointed), static_cast<int>(f.checkpointed.size()));
}

TEST_P(DamagedDatabaseTest, MiddleLogSegmentMissing) {
  Fixture f;
  f.Build();
  const uint64_t gap = f.segments[f.segments.size() / 2];
  const std::map<uint64_t, size_t> kept = f.LoggedBefore(gap);
  const std::string missing = f.SegmentPath(gap);
  fs::remove(missing);
  auto db = DB::Open(Fixture::Options(GetParam()), f.path());
  if (GetParam() != RecoveryMode::kPointInTime) {
    ASSERT_FALSE(db.ok());
    EXPECT_EQ(db.status().code(), Status::Code::kCorruption) << db.status().ToString();
    EXPECT_THAT(db.status().message(), HasSubstr(missing));
    return;
  }
  // Point in time: the last good record before the gap.
  ASSERT_OK(db.status());
  const RecoveryInfo info = (*db)->recovery_info();
  EXPECT_EQ(info.dropped_file, missing);
  EXPECT_THAT(info.dropped_reason, HasSubstr("missing"));
  EXPECT_GT(info.dropped_bytes, 0u);
  ASSERT_OK_AND_ASSIGN(auto table, (*db)->GetTable("t"));
  EXPECT_EQ(CountIntact(*table, f.checkpointed), static_cast<int>(f.checkpointed.size()));
  EXPECT_EQ(Held(*table, f.logged), kept);
  const int kept_whole = static_cast<int>(std::count_if(
      kept.begin(), kept.end(), [&](const auto& e) { return e.second == f.logged.at(e.first).size(); }));
  EXPECT_GT(kept_whole, 0);
  EXPECT_LT(kept_whole, static_cast<int>(f.logged.size()));
}

// ------------------------------------------------ the catalog and the cold store

TEST_P(DamagedDatabaseTest, CatalogDeleted) {
  Fixture f;
  f.Build();
  fs::remove(f.path() + "/CATALOG");
  DBOptions o = Fixture::Options(GetParam());
  o.create_if_missing = true;
  auto db = DB::Open(o, f.path());
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), Status::Code::kCorruption) << db.status().ToString();
  EXPECT_THAT(db.status().message(), HasSubstr(f.path() + "/CATALOG"));
  EXPECT_THAT(db.status().message(), HasSubstr("wal/"));
  // Nothing was created or removed.
  EXPECT_FALSE(fs::exists(f.path() + "/CATALOG"));
  for (uint64_t n : f.segments) EXPECT_TRUE(fs::exists(f.SegmentPath(n)));
  auto ro = DB::OpenReadOnly({}, f.path());
  ASSERT_FALSE(ro.ok());
  EXPECT_EQ(ro.status().code(), Status::Code::kCorruption) << ro.status().ToString();
  EXPECT_THAT(ro.status().message(), HasSubstr("CATALOG"));
}

TEST_P(DamagedDatabaseTest, ColdStoreDeleted) {
  Fixture f;
  f.Build();
  fs::remove_all(f.path() + "/cold");
  auto db = DB::Open(Fixture::Options(GetParam()), f.path());
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), Status::Code::kCorruption) << db.status().ToString();
  EXPECT_THAT(db.status().message(), HasSubstr(f.path() + "/cold"));
  EXPECT_FALSE(fs::exists(f.path() + "/cold")) << "Open must not create an empty cold store";
  auto ro = DB::OpenReadOnly({}, f.path());
  ASSERT_FALSE(ro.ok());
  EXPECT_EQ(ro.status().code(), Status::Code::kCorruption) << ro.status().ToString();
  EXPECT_THAT(ro.status().message(), HasSubstr("cold"));
}

INSTANTIATE_TEST_SUITE_P(Modes, DamagedDatabaseTest,
                         ::testing::Values(RecoveryMode::kTolerateTornTail,
                                           RecoveryMode::kAbsoluteConsistency,
                                           RecoveryMode::kPointInTime),
                         [](const auto& info) { return std::string(RecoveryModeName(info.param)); });

// ------------------------------------------------- the cold store's files

// RocksDB sometimes reports a damaged table file against the MANIFEST that
// lists it ("properties unsorted in file .../MANIFEST-000013": seen under
// ThreadSanitizer's timing); the open's error then names the damaged files
// too. Errors that name a table file, or are no Corruption, pass unchanged.
TEST(DamagedColdStoreTest, ACorruptionThatNamesNoTableFileGetsTheDamagedOnesNamed) {
  Fixture f;
  ASSERT_NO_FATAL_FAILURE(f.BuildCheckpointed());
  const std::string cold = f.path() + "/cold";
  const Status manifest = Status::Corruption("cold store " + cold +
                                             ": open: Corruption: properties unsorted in file " +
                                             cold + "/MANIFEST-000013");
  // Nothing damaged: unchanged.
  EXPECT_EQ(engine::NameDamagedTableFiles(manifest, cold).message(), manifest.message());
  std::vector<std::string> ssts;
  for (const auto& e : fs::directory_iterator(cold)) {
    if (e.path().extension() == ".sst") ssts.push_back(e.path().filename().string());
  }
  ASSERT_FALSE(ssts.empty());
  std::mt19937_64 rng(TestSeed());
  const std::string victim = ssts[rng() % ssts.size()];
  {
    std::fstream io(cold + "/" + victim, std::ios::in | std::ios::out | std::ios::binary);
    const auto size = static_cast<int64_t>(fs::file_size(cold + "/" + victim));
    for (int i = 0; i < 64; ++i) {
      io.seekp(static_cast<std::streamoff>(rng() % static_cast<uint64_t>(size)));
      io.put(static_cast<char>(rng()));
    }
  }
  const Status named = engine::NameDamagedTableFiles(manifest, cold);
  EXPECT_EQ(named.code(), Status::Code::kCorruption);
  EXPECT_THAT(named.message(), HasSubstr(manifest.message() + "; damaged table file"));
  EXPECT_THAT(named.message(), HasSubstr(victim + " ("));
  for (const std::string& sst : ssts) {
    if (sst != victim) {
      EXPECT_THAT(named.message(), Not(HasSubstr(sst))) << sst;
    }
  }
  const Status io = Status::IOError("cold store: open: IO error: no space");
  EXPECT_EQ(engine::NameDamagedTableFiles(io, cold).message(), io.message());
  const Status has_sst = Status::Corruption("block checksum mismatch in " + victim);
  EXPECT_EQ(engine::NameDamagedTableFiles(has_sst, cold).message(), has_sst.message());
}

// One flipped bit, the top one of a table file's properties block restart
// count, aborted every opener inside RocksDB (an assertion: RocksDB parses
// that block before checking its checksum). Now each opener fails naming
// the file, and with the bit restored everything is there again.
TEST(DamagedColdStoreTest, TheBitThatAbortedRocksdbIsReportedNamingTheFile) {
  Fixture f;
  ASSERT_NO_FATAL_FAILURE(f.BuildCheckpointed());
  const std::string cold = f.path() + "/cold";
  const std::vector<std::string> ssts = f.ColdSsts();
  ASSERT_FALSE(ssts.empty());
  for (const std::string& sst : ssts) {
    // The block found is the properties block: it names RocksDB's properties.
    ASSERT_OK_AND_ASSIGN(const engine::PropertiesBlock block, engine::FindPropertiesBlock(sst));
    std::ifstream in(sst, std::ios::binary);
    std::string bytes(block.size, '\0');
    in.seekg(static_cast<std::streamoff>(block.offset));
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(in) << sst;
    // (its first key, whole: later keys share its prefix)
    EXPECT_THAT(bytes, HasSubstr("rocksdb.block.based.table.index.type")) << sst;
    EXPECT_EQ(static_cast<uint8_t>(bytes.back()) & 0x80, 0) << sst;
    EXPECT_OK(engine::CheckTableFileBeforeRocksdb(sst));
  }
  std::mt19937_64 rng(TestSeed());
  const std::string victim = ssts[rng() % ssts.size()];
  ASSERT_OK_AND_ASSIGN(const engine::PropertiesBlock block, engine::FindPropertiesBlock(victim));
  const auto at = static_cast<std::streamoff>(block.offset + block.size - 1);
  char original = 0;
  {
    std::fstream io(victim, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(at);
    io.get(original);
    io.seekp(at);
    io.put(static_cast<char>(original | 0x80));
  }
  auto db = DB::Open(Fixture::Options(), f.path());
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), Status::Code::kCorruption) << db.status().ToString();
  EXPECT_THAT(db.status().message(),
              HasSubstr("table file " + victim + ": its properties block"));
  auto ro = DB::OpenReadOnly({}, f.path());
  ASSERT_FALSE(ro.ok());
  EXPECT_EQ(ro.status().code(), Status::Code::kCorruption) << ro.status().ToString();
  EXPECT_THAT(ro.status().message(), HasSubstr(victim));
  const Status named =
      engine::NameDamagedTableFiles(Status::Corruption("cold store " + cold + ": open"), cold);
  EXPECT_THAT(named.message(),
              HasSubstr("damaged table file: " + fs::path(victim).filename().string() + " ("));
  {
    std::fstream io(victim, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(at);
    io.put(original);
  }
  auto again = DB::Open(Fixture::Options(), f.path());
  ASSERT_OK(again.status());
  ASSERT_OK_AND_ASSIGN(auto table, (*again)->GetTable("t"));
  EXPECT_EQ(CountIntact(*table, f.checkpointed), static_cast<int>(f.checkpointed.size()));
  EXPECT_EQ(CountIntact(*table, f.logged), static_cast<int>(f.logged.size()));
}

// Files that are no table file, or truncated ones, of random bytes and
// sizes: the check reads them without crashing and leaves them to RocksDB.
TEST(DamagedColdStoreTest, TheCheckBeforeRocksdbReadsAnyBytesSafely) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  Fixture f;
  ASSERT_NO_FATAL_FAILURE(f.BuildCheckpointed());
  const std::vector<std::string> ssts = f.ColdSsts();
  ASSERT_FALSE(ssts.empty());
  const std::string table_file = ssts.back();
  std::ifstream in(table_file, std::ios::binary);
  const std::string real((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = dir.path() + "/000001.sst";
  for (int i = 0; i < 300; ++i) {
    std::string bytes;
    switch (i % 3) {
      case 0:  // random bytes
        bytes.resize(rng() % 200);
        for (char& c : bytes) c = static_cast<char>(rng());
        break;
      case 1:  // a real file's tail, cut anywhere
        bytes = real.substr(rng() % real.size());
        break;
      default:  // a real file with its footer and metaindex bytes scrambled
        bytes = real;
        for (int k = 0; k < 4; ++k) {
          bytes[bytes.size() - 1 - rng() % std::min<size_t>(bytes.size(), 400)] =
              static_cast<char>(rng());
        }
    }
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    const Status s = engine::CheckTableFileBeforeRocksdb(path);
    EXPECT_TRUE(s.ok() || s.code() == Status::Code::kCorruption) << s.ToString();
  }
  fs::remove(path);
  const Status missing = engine::CheckTableFileBeforeRocksdb(path);
  EXPECT_EQ(missing.code(), Status::Code::kIOError) << missing.ToString();
  EXPECT_THAT(missing.message(), HasSubstr(path));
}

// Every SST of cold/ in turn deleted, or damaged in its middle: the
// read-write and the read-only opener each fail naming a file, or open and
// Verify reports problems; neither shows the table emptied without a word.
TEST(DamagedColdStoreTest, MissingOrDamagedSstFailsOrIsReportedByEveryOpener) {
  Fixture f;
  ASSERT_NO_FATAL_FAILURE(f.BuildCheckpointed());
  std::vector<std::string> ssts;
  for (const std::string& p : f.ColdSsts()) ssts.push_back(fs::path(p).filename().string());
  ASSERT_FALSE(ssts.empty());
  std::mt19937_64 rng(TestSeed());
  int cases = 0;
  for (const std::string& sst : ssts) {
    for (const bool remove : {true, false}) {
      SCOPED_TRACE(sst + (remove ? " deleted" : " damaged"));
      TempDir copy;
      const std::string db_path = copy.path() + "/db";
      fs::copy(f.path(), db_path, fs::copy_options::recursive);
      const std::string file = db_path + "/cold/" + sst;
      if (remove) {
        fs::remove(file);
      } else {
        std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
        const auto size = static_cast<int64_t>(fs::file_size(file));
        // Bytes in the data blocks' part of the file (its first half).
        for (int i = 0; i < 16; ++i) {
          io.seekp(static_cast<std::streamoff>(rng() % static_cast<uint64_t>(size / 2)));
          io.put(static_cast<char>(rng()));
        }
      }
      ++cases;
      for (const bool read_only : {true, false}) {
        SCOPED_TRACE(read_only ? "read-only" : "read-write");
        auto db = read_only ? DB::OpenReadOnly(Fixture::Options(), db_path)
                            : DB::Open(Fixture::Options(), db_path);
        if (!db.ok()) {
          // Named by its number (RocksDB names a missing one NNNNNN.ldb).
          EXPECT_THAT(db.status().message(), HasSubstr(fs::path(sst).stem().string()))
              << db.status().ToString();
          continue;
        }
        auto report = (*db)->Verify();
        if (!report.ok() || !report->problems.empty()) continue;  // reported
        // Opened and nothing reported: then everything must be there.
        ASSERT_OK_AND_ASSIGN(auto table, (*db)->GetTable("t"));
        EXPECT_EQ(CountIntact(*table, f.checkpointed), static_cast<int>(f.checkpointed.size()));
        EXPECT_EQ(CountIntact(*table, f.logged), static_cast<int>(f.logged.size()));
      }
    }
  }
  EXPECT_GT(cases, 0);
}

// ----------------------------------------------------- the corruption matrix

// Damage to one file x every recovery mode x read-write and read-only: each
// case fails naming the damaged file, or opens with what its mode promises:
// the checkpoint whole, logged trajectories each a byte-identical prefix,
// and anything logged that did not come back reported in recovery_info()
// (a read-only opener reads no log: it promises the checkpoint).
enum class Damage {
  kTruncateLastSegment,   // a torn tail
  kTruncateMiddleSegment,
  kFlipBitsInMiddleSegment,
  kZeroPageOfMiddleSegment,
  kFlipBitsInLastSegment,
  kFlipBitsInCatalog,
  kTruncateCatalog,
};

std::string DamageName(Damage d) {
  switch (d) {
    case Damage::kTruncateLastSegment: return "truncate_last_segment";
    case Damage::kTruncateMiddleSegment: return "truncate_middle_segment";
    case Damage::kFlipBitsInMiddleSegment: return "flip_bits_in_middle_segment";
    case Damage::kZeroPageOfMiddleSegment: return "zero_page_of_middle_segment";
    case Damage::kFlipBitsInLastSegment: return "flip_bits_in_last_segment";
    case Damage::kFlipBitsInCatalog: return "flip_bits_in_catalog";
    case Damage::kTruncateCatalog: return "truncate_catalog";
  }
  return "?";
}

using MatrixParam = std::tuple<Damage, RecoveryMode, bool>;

class CorruptionMatrixTest : public ::testing::TestWithParam<MatrixParam> {};

TEST_P(CorruptionMatrixTest, FailsNamingTheFileOrOpensWithWhatTheModePromises) {
  const auto [damage, mode, read_only] = GetParam();
  Fixture f;
  f.Build();
  std::mt19937_64 rng(TestSeed());
  const std::string middle = f.SegmentPath(f.segments[f.segments.size() / 2]);
  const std::string last = f.SegmentPath(f.segments.back());
  const std::string catalog = f.path() + "/CATALOG";
  auto size_of = [](const std::string& p) { return static_cast<uint64_t>(fs::file_size(p)); };
  auto flip = [&](const std::string& p, uint64_t from) {
    std::fstream io(p, std::ios::in | std::ios::out | std::ios::binary);
    for (int i = 0; i < 4; ++i) {
      io.seekp(static_cast<std::streamoff>(from + rng() % (size_of(p) - from)));
      io.put(static_cast<char>(1 + rng() % 255));
    }
  };
  // An offset inside a random record of segment `p` (never on a record's
  // first byte: a cut exactly between two records leaves a shorter but
  // valid segment, which nothing can tell from one whose writer stopped
  // there; see docs/durability.md).
  auto inside_a_record = [&](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::vector<std::pair<uint64_t, uint64_t>> records;  // offset, total size
    for (uint64_t off = 20; off + 9 <= bytes.size();) {
      uint32_t len = 0;
      std::memcpy(&len, bytes.data() + off + 4, 4);
      if (len == 0 && bytes[off + 8] == 0) break;  // a zero tail
      records.emplace_back(off, 9 + uint64_t{len});
      off += 9 + len;
    }
    EXPECT_FALSE(records.empty());
    const auto [off, size] = records[rng() % records.size()];
    return off + 1 + rng() % (size - 1);
  };
  std::string file;  // the damaged one
  switch (damage) {
    case Damage::kTruncateLastSegment:
      file = last;
      fs::resize_file(last, inside_a_record(last));
      break;
    case Damage::kTruncateMiddleSegment:
      file = middle;
      fs::resize_file(middle, inside_a_record(middle));
      break;
    case Damage::kFlipBitsInMiddleSegment:
      file = middle;
      flip(middle, 20);
      break;
    case Damage::kZeroPageOfMiddleSegment: {
      file = middle;
      const std::string zeros(512, '\0');
      std::fstream io(middle, std::ios::in | std::ios::out | std::ios::binary);
      io.seekp(static_cast<std::streamoff>(512 + rng() % (size_of(middle) - 1024)));
      io.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
      break;
    }
    case Damage::kFlipBitsInLastSegment:
      file = last;
      flip(last, 20);
      break;
    case Damage::kFlipBitsInCatalog:
      file = catalog;
      flip(catalog, 0);
      break;
    case Damage::kTruncateCatalog:
      file = catalog;
      fs::resize_file(catalog, rng() % size_of(catalog));
      break;
  }
  const bool log_damage = file != catalog;
  auto db = read_only ? DB::OpenReadOnly(Fixture::Options(mode), f.path())
                      : DB::Open(Fixture::Options(mode), f.path());
  if (!db.ok()) {
    EXPECT_THAT(db.status().message(), HasSubstr(file)) << db.status().ToString();
    EXPECT_EQ(db.status().code(), Status::Code::kCorruption) << db.status().ToString();
    // Damage in the log fails only where the mode says so.
    if (log_damage && !read_only) {
      EXPECT_NE(mode, RecoveryMode::kPointInTime) << db.status().ToString();
      if (mode == RecoveryMode::kTolerateTornTail) {
        EXPECT_NE(damage, Damage::kTruncateLastSegment) << "a torn tail is tolerated";
      }
    }
    return;
  }
  EXPECT_TRUE(log_damage) << "a damaged catalog opened";
  if (!read_only) {
    EXPECT_NE(mode, RecoveryMode::kAbsoluteConsistency) << "damage in the log opened";
  }
  ASSERT_OK_AND_ASSIGN(auto table, (*db)->GetTable("t"));
  EXPECT_EQ(CountIntact(*table, f.checkpointed), static_cast<int>(f.checkpointed.size()));
  if (read_only) return;
  const int whole = CountIntact(*table, f.logged);
  if (whole < static_cast<int>(f.logged.size())) {
    const RecoveryInfo info = (*db)->recovery_info();
    EXPECT_EQ(info.dropped_file, file) << "steps are missing and nothing was reported";
    EXPECT_FALSE(info.dropped_reason.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, CorruptionMatrixTest,
    ::testing::Combine(::testing::Values(Damage::kTruncateLastSegment,
                                         Damage::kTruncateMiddleSegment,
                                         Damage::kFlipBitsInMiddleSegment,
                                         Damage::kZeroPageOfMiddleSegment,
                                         Damage::kFlipBitsInLastSegment,
                                         Damage::kFlipBitsInCatalog, Damage::kTruncateCatalog),
                       ::testing::Values(RecoveryMode::kTolerateTornTail,
                                         RecoveryMode::kAbsoluteConsistency,
                                         RecoveryMode::kPointInTime),
                       ::testing::Bool()),
    [](const auto& info) {
      return DamageName(std::get<0>(info.param)) + "_" +
             std::string(RecoveryModeName(std::get<1>(info.param))) +
             (std::get<2>(info.param) ? "_read_only" : "_read_write");
    });

// A brand-new database is no damaged one: creating it still works, and a
// fresh directory holding only an empty wal/ (a creation that stopped
// early) is no database yet.
TEST(DamagedDatabaseCreateTest, NewDatabasesStillCreate) {
  TempDir dir;
  auto db = DB::Open({}, dir.path() + "/new");
  ASSERT_OK(db.status());
  db->reset();
  fs::create_directories(dir.path() + "/half/wal");
  auto half = DB::Open({}, dir.path() + "/half");
  ASSERT_OK(half.status());
}

// ---------------------------------------------- two openers creating one database

// Forwards to Env::Default(), calling `before_lock` once just before the
// first LockFile: the moment the other opener runs its whole course.
class PausingEnv : public Env {
 public:
  explicit PausingEnv(std::function<void()> before_lock) : before_lock_(std::move(before_lock)) {}
  Status CreateDirIfMissing(const std::string& d) override { return base_->CreateDirIfMissing(d); }
  bool FileExists(const std::string& p) override { return base_->FileExists(p); }
  Status ReadFileToString(const std::string& p, std::string* out) override {
    return base_->ReadFileToString(p, out);
  }
  Status WriteFileAtomic(const std::string& p, std::string_view d) override {
    return base_->WriteFileAtomic(p, d);
  }
  Status RemoveFile(const std::string& p) override { return base_->RemoveFile(p); }
  Status GetChildren(const std::string& d, std::vector<std::string>* n) override {
    return base_->GetChildren(d, n);
  }
  Status LockFile(const std::string& p, std::unique_ptr<FileLock>* lock) override {
    if (before_lock_) std::exchange(before_lock_, nullptr)();
    return base_->LockFile(p, lock);
  }
  Status NewWritableFile(const std::string& p, bool truncate,
                         std::unique_ptr<WritableFile>* f) override {
    return base_->NewWritableFile(p, truncate, f);
  }
  Status NewMappedWritableFile(const std::string& p, std::unique_ptr<WritableFile>* f) override {
    return base_->NewMappedWritableFile(p, f);
  }
  Status NewSequentialFile(const std::string& p, std::unique_ptr<SequentialFile>* f) override {
    return base_->NewSequentialFile(p, f);
  }
  Status GetFileSize(const std::string& p, uint64_t* size) override {
    return base_->GetFileSize(p, size);
  }
  Status TruncateFile(const std::string& p, uint64_t size) override {
    return base_->TruncateFile(p, size);
  }
  Status SyncDir(const std::string& d) override { return base_->SyncDir(d); }

 private:
  Env* base_ = Env::Default();
  std::function<void()> before_lock_;
};

TEST(DamagedDatabaseCreateTest, TwoOpenersCreatingOneDatabaseLoseNoTable) {
  TempDir dir;
  const std::string path = dir.path() + "/db";
  // The second opener is paused just before it takes the lock; meanwhile
  // the first creates the database, a table, and closes.
  PausingEnv env([&] {
    auto first = DB::Open({}, path);
    ASSERT_OK(first.status());
    ASSERT_OK((*first)->CreateTable(Spec()).status());
  });
  DBOptions o;
  o.env = &env;
  auto second = DB::Open(o, path);
  ASSERT_OK(second.status());
  EXPECT_EQ((*second)->ListTables(), std::vector<std::string>{"t"});
}

}  // namespace
}  // namespace replaydb
