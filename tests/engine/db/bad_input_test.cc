// Bad input and recovery: what a validated call refuses never reaches the
// log or a checkpoint, so the database always opens again; an out-of-range
// value that does reach them (written by an older build, or damage) fails
// Open with Corruption naming the file and record, in every recovery mode.
// DBOptions' enums are checked before Open touches the directory.
#include <flatbuffers/flatbuffers.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/cold/cold_generated.h"
#include "engine/cold/cold_store.h"
#include "replaydb/db.h"
#include "replaydb/env.h"
#include "tests/test_util.h"
#include "wal/format.h"
#include "wal/log_reader.h"
#include "wal/log_writer.h"
#include "wal/records.h"

namespace replaydb {
namespace {

using ::testing::HasSubstr;
using testing_util::ManualCheckpoints;
using testing_util::RandomStep;
using testing_util::TempDir;

TableSpec Spec() {
  TableSpec spec;
  spec.name = "t";
  spec.columns = {{"obs", DType::kF32, Shape{3}}, {"act", DType::kU8, Shape{}}};
  spec.capacity_steps = 1024;
  spec.block_steps = 16;
  return spec;
}

class BadInputTest : public ::testing::Test {
 protected:
  EndReason UnknownReason() { return static_cast<EndReason>(2 + rng_() % 254); }

  TempDir dir_;
  std::mt19937_64 rng_{testing_util::TestSeed()};
};

// End with an unknown reason used to return OK, log the value, and leave a
// database that no Open accepted again (from the log or the checkpoint).
TEST_F(BadInputTest, RefusedEndReasonNeverReachesTheLogOrACheckpoint) {
  for (const bool checkpoint_on_close : {false, true}) {
    SCOPED_TRACE(checkpoint_on_close ? "restored from the checkpoint" : "replayed from the log");
    TempDir dir;
    DBOptions options = ManualCheckpoints();
    options.checkpoint.on_close = checkpoint_on_close;
    const TableSpec spec = Spec();
    const int64_t n = 1 + static_cast<int64_t>(rng_() % 20);
    {
      auto db = DB::Open(options, dir.path());
      ASSERT_OK(db.status());
      ASSERT_OK_AND_ASSIGN(auto table, (*db)->CreateTable(spec));
      ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
      for (int64_t i = 0; i < n; ++i) ASSERT_OK(writer->Append(RandomStep(spec, rng_).tensors));
      const Status s = writer->End(UnknownReason());
      EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
      ASSERT_OK(writer->End(EndReason::kTerminal));
    }
    auto db = DB::Open(options, dir.path());
    ASSERT_OK(db.status());
    ASSERT_OK_AND_ASSIGN(auto table, (*db)->GetTable("t"));
    const std::vector<TrajectoryInfo> listed = table->ListTrajectories();
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0].length, n);
    EXPECT_TRUE(listed[0].ended);
    EXPECT_EQ(listed[0].end_reason, EndReason::kTerminal);
  }
}

// A logged end of an unknown reason (an older build's, or damage that
// passes the checksum) fails Open with Corruption naming the segment, the
// record's offset, the table and the trajectory: never a crash, and the
// same in every recovery mode, since the record itself is intact.
TEST_F(BadInputTest, LoggedUnknownEndReasonIsCorruptionNamingSegmentAndRecord) {
  const TableSpec spec = Spec();
  uint64_t id = 0;
  {
    auto db = DB::Open(ManualCheckpoints(), dir_.path());
    ASSERT_OK(db.status());
    ASSERT_OK_AND_ASSIGN(auto table, (*db)->CreateTable(spec));
    ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
    for (int i = 0; i < 5; ++i) ASSERT_OK(writer->Append(RandomStep(spec, rng_).tensors));
    id = writer->trajectory_id();
    // The writer outlives its database, as in a crash: the trajectory
    // stays open in the log.
    db->reset();
  }
  const std::string wal_dir = dir_.path() + "/wal";
  std::vector<uint64_t> segments;
  ASSERT_OK(wal::ListSegments(Env::Default(), wal_dir, &segments));
  ASSERT_FALSE(segments.empty());
  const uint64_t segment = segments.back() + 1;
  const uint8_t reason = static_cast<uint8_t>(UnknownReason());
  {
    WalOptions o;
    o.sync = WalSyncMode::kAlways;
    ASSERT_OK_AND_ASSIGN(auto log, wal::LogWriter::Open(Env::Default(), wal_dir, o, segment));
    wal::RecordBuilder b;
    b.EndTrajectory({.table_id = 1, .trajectory_id = id, .reason = reason});
    ASSERT_OK_AND_ASSIGN(const uint64_t seq, log->Append(wal::RecordType::kEndTrajectory,
                                                         b.payload()));
    ASSERT_OK(log->Sync(seq, /*wait=*/true));
  }
  for (const RecoveryMode mode : {RecoveryMode::kTolerateTornTail,
                                  RecoveryMode::kAbsoluteConsistency,
                                  RecoveryMode::kPointInTime}) {
    SCOPED_TRACE(std::string(RecoveryModeName(mode)));
    DBOptions options = ManualCheckpoints();
    options.wal.recovery = mode;
    auto db = DB::Open(options, dir_.path());
    ASSERT_FALSE(db.ok());
    EXPECT_EQ(db.status().code(), Status::Code::kCorruption) << db.status().ToString();
    EXPECT_THAT(db.status().message(),
                HasSubstr(wal_dir + "/" + wal::SegmentFileName(segment) + ": offset "));
    EXPECT_THAT(db.status().message(),
                HasSubstr("table 't': logged end of trajectory " + std::to_string(id) +
                          " has unknown reason " + std::to_string(reason)));
  }
}

// The same in a checkpoint: Corruption naming the cold store, the table
// and the trajectory, for read-write and read-only opens.
TEST_F(BadInputTest, CheckpointedUnknownEndReasonIsCorruptionNamingTheTrajectory) {
  const TableSpec spec = Spec();
  uint64_t id = 0;
  {
    auto db = DB::Open(ManualCheckpoints(), dir_.path());
    ASSERT_OK(db.status());
    ASSERT_OK_AND_ASSIGN(auto table, (*db)->CreateTable(spec));
    ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
    for (int i = 0; i < 3; ++i) ASSERT_OK(writer->Append(RandomStep(spec, rng_).tensors));
    id = writer->trajectory_id();
    ASSERT_OK(writer->End(EndReason::kTerminal));
    ASSERT_OK((*db)->Checkpoint());
  }
  const uint8_t reason = static_cast<uint8_t>(UnknownReason());
  {
    ASSERT_OK_AND_ASSIGN(auto store,
                         engine::ColdStore::Open(dir_.path() + "/cold", Env::Default()));
    std::string value;
    ASSERT_OK(store->GetTrajectory(1, id, &value));
    std::string aligned(value);  // FlatBuffers reads in place: keep it aligned
    const auto* meta = flatbuffers::GetRoot<fb::TrajectoryMeta>(aligned.data());
    ASSERT_EQ(meta->id(), id);
    ASSERT_TRUE(meta->ended());
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<double> priorities(meta->step_priorities()->begin(),
                                   meta->step_priorities()->end());
    std::vector<fb::ColdItem> items;
    for (const fb::ColdItem* item : *meta->items()) items.push_back(*item);
    fbb.Finish(fb::CreateTrajectoryMeta(fbb, meta->id(), meta->length(), true, reason,
                                        fbb.CreateVector(priorities),
                                        fbb.CreateVectorOfStructs(items), meta->cold()));
    engine::ColdStore::Batch batch;
    batch.PutTrajectory(1, id, std::string_view(reinterpret_cast<const char*>(fbb.GetBufferPointer()),
                                                fbb.GetSize()));
    ASSERT_OK(store->Write(batch));
  }
  const std::string where = "cold store " + dir_.path() + "/cold: table 't' (id 1) trajectory " +
                            std::to_string(id) + ": unknown end reason " + std::to_string(reason);
  auto db = DB::Open(ManualCheckpoints(), dir_.path());
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), Status::Code::kCorruption) << db.status().ToString();
  EXPECT_THAT(db.status().message(), HasSubstr(where));
  auto ro = DB::OpenReadOnly({}, dir_.path());
  ASSERT_FALSE(ro.ok());
  EXPECT_EQ(ro.status().code(), Status::Code::kCorruption) << ro.status().ToString();
  EXPECT_THAT(ro.status().message(), HasSubstr(where));
}

// DBOptions' enums used to pass unchecked: an unknown sync mode synced like
// kAlways, an unknown recovery mode dropped damage like kPointInTime.
TEST_F(BadInputTest, UnknownDBOptionEnumsAreRefusedBeforeOpenTouchesTheDirectory) {
  struct Case {
    std::function<void(DBOptions*, int)> set;
    std::string message;  // the value follows
  };
  const std::vector<Case> cases = {
      {[](DBOptions* o, int v) { o->wal.sync = static_cast<WalSyncMode>(v); },
       "DB::Open: DBOptions::wal.sync is "},
      {[](DBOptions* o, int v) { o->wal.recovery = static_cast<RecoveryMode>(v); },
       "DB::Open: DBOptions::wal.recovery is "},
      {[](DBOptions* o, int v) { o->cold_compression = static_cast<ColdCompression>(v); },
       "DB::Open: DBOptions::cold_compression is "},
  };
  const std::vector<std::string> known = {
      "; it must be one of none (0), batch (1), always (2)",
      "; it must be one of tolerate_torn_tail (0), absolute_consistency (1), point_in_time (2)",
      "; it must be one of none (0), zstd (1), lz4 (2)"};
  for (size_t i = 0; i < cases.size(); ++i) {
    const int value = 3 + static_cast<int>(rng_() % 253);
    DBOptions options;
    cases[i].set(&options, value);
    const std::string path = dir_.Sub("db" + std::to_string(i));
    auto db = DB::Open(options, path);
    ASSERT_FALSE(db.ok());
    EXPECT_EQ(db.status().code(), Status::Code::kInvalidArgument) << db.status().ToString();
    EXPECT_EQ(db.status().message(), cases[i].message + std::to_string(value) + known[i]);
    EXPECT_FALSE(std::filesystem::exists(path)) << "Open created " << path;
  }
  DBOptions options;
  const int64_t window = -1 - static_cast<int64_t>(rng_() % 1000);
  options.writer_resume_window = std::chrono::milliseconds(window);
  const std::string path = dir_.Sub("window");
  auto db = DB::Open(options, path);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), Status::Code::kInvalidArgument) << db.status().ToString();
  EXPECT_EQ(db.status().message(), "DB::Open: DBOptions::writer_resume_window is " +
                                       std::to_string(window) + " ms; it must be >= 0");
  EXPECT_FALSE(std::filesystem::exists(path)) << "Open created " << path;
}

}  // namespace
}  // namespace replaydb
