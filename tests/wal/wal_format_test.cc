// The WAL's byte format against checked-in bytes: the sample log in
// tests/data/wal_v1/ (every field decoded), and the worked example in
// wal/FORMAT.md (byte for byte what the writer produces).
//
// To regenerate the sample after a deliberate format change (which also
// needs a new format version), run this test with
// REPLAYDB_WRITE_WAL_SAMPLE=1; the FORMAT.md example's expected dump is
// printed when it fails.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "tests/test_util.h"
#include "wal/log_reader.h"
#include "wal/log_writer.h"
#include "wal/records.h"

namespace replaydb::wal {
namespace {

using ::replaydb::testing_util::TempDir;

const std::string kSampleDir = std::string(REPLAYDB_SOURCE_DIR) + "/tests/data/wal_v1";

std::string ReadFile(const std::string& path) {
  std::string bytes;
  Status s = Env::Default()->ReadFileToString(path, &bytes);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return bytes;
}

Status Append(LogWriter* log, RecordType type, std::span<const std::byte> payload) {
  return log->Append(type, payload).status();
}

// The sample's fixed content: one record of every type.
Status WriteSample(const std::string& dir) {
  WalOptions o;
  o.sync = WalSyncMode::kNone;
  REPLAYDB_ASSIGN_OR_RETURN(auto log, LogWriter::Open(Env::Default(), dir, o, 1));
  RecordBuilder b;
  b.CreateTable({.table_id = 1, .spec = "opaque table spec"});
  REPLAYDB_RETURN_IF_ERROR(Append(log.get(), RecordType::kCreateTable, b.payload()));
  const uint64_t ids[] = {7, 7, 8};
  const int64_t steps[] = {0, 1, 0};
  const double prios[] = {1.5, std::nan(""), 2.0};
  std::byte* data = b.AppendSteps(1, 4, ids, steps, prios);
  for (int i = 0; i < 12; ++i) data[i] = static_cast<std::byte>(i);
  REPLAYDB_RETURN_IF_ERROR(Append(log.get(), RecordType::kAppendSteps, b.payload()));
  const uint64_t keys[] = {100, 101};
  const double new_prios[] = {0.25, 4.0};
  b.UpdatePriorities(1, keys, new_prios);
  REPLAYDB_RETURN_IF_ERROR(Append(log.get(), RecordType::kUpdatePriorities, b.payload()));
  b.EndTrajectory({.table_id = 1, .trajectory_id = 7, .reason = 1});
  REPLAYDB_RETURN_IF_ERROR(Append(log.get(), RecordType::kEndTrajectory, b.payload()));
  b.RemoveItems(1, std::span<const uint64_t>(keys, 1));
  REPLAYDB_RETURN_IF_ERROR(Append(log.get(), RecordType::kRemoveItems, b.payload()));
  b.RemoveTrajectory({.table_id = 1, .trajectory_id = 8, .evicted = true});
  REPLAYDB_RETURN_IF_ERROR(Append(log.get(), RecordType::kRemoveTrajectory, b.payload()));
  b.ClearTable({.table_id = 1, .below_trajectory_id = 9});
  REPLAYDB_RETURN_IF_ERROR(Append(log.get(), RecordType::kClearTable, b.payload()));
  b.DropTable({.table_id = 1});
  return Append(log.get(), RecordType::kDropTable, b.payload());
}

TEST(WalFormatTest, SampleLogDecodesFieldByField) {
  // Replay a copy: recovery may cut files, the checked-in one must stay.
  TempDir dir;
  const std::string name = SegmentFileName(1);
  {
    const std::string bytes = ReadFile(kSampleDir + "/" + name);
    std::ofstream(dir.Sub(name), std::ios::binary).write(bytes.data(), bytes.size());
  }
  std::vector<RecordType> types;
  auto fn = [&](RecordType type, std::span<const std::byte> p) -> Status {
    types.push_back(type);
    switch (type) {
      case RecordType::kCreateTable: {
        CreateTableRecord r;
        REPLAYDB_RETURN_IF_ERROR(Decode(p, &r));
        EXPECT_EQ(r.table_id, 1u);
        EXPECT_EQ(r.spec, "opaque table spec");
        break;
      }
      case RecordType::kAppendSteps: {
        AppendStepsRecord r;
        REPLAYDB_RETURN_IF_ERROR(Decode(p, &r));
        EXPECT_EQ(r.table_id, 1u);
        EXPECT_EQ(r.step_bytes, 4u);
        EXPECT_EQ(r.trajectory_ids, (std::vector<uint64_t>{7, 7, 8}));
        EXPECT_EQ(r.steps, (std::vector<int64_t>{0, 1, 0}));
        EXPECT_EQ(r.priorities.size(), 3u);
        if (r.priorities.size() == 3) {
          EXPECT_EQ(r.priorities[0], 1.5);
          EXPECT_TRUE(std::isnan(r.priorities[1]));
          EXPECT_EQ(r.priorities[2], 2.0);
        }
        EXPECT_EQ(r.data.size(), 12u);
        for (size_t i = 0; i < r.data.size(); ++i) EXPECT_EQ(r.data[i], static_cast<std::byte>(i));
        break;
      }
      case RecordType::kUpdatePriorities: {
        UpdatePrioritiesRecord r;
        REPLAYDB_RETURN_IF_ERROR(Decode(p, &r));
        EXPECT_EQ(r.table_id, 1u);
        EXPECT_EQ(r.keys, (std::vector<uint64_t>{100, 101}));
        EXPECT_EQ(r.priorities, (std::vector<double>{0.25, 4.0}));
        break;
      }
      case RecordType::kEndTrajectory: {
        EndTrajectoryRecord r;
        REPLAYDB_RETURN_IF_ERROR(Decode(p, &r));
        EXPECT_EQ(r.table_id, 1u);
        EXPECT_EQ(r.trajectory_id, 7u);
        EXPECT_EQ(r.reason, 1);
        break;
      }
      case RecordType::kRemoveItems: {
        RemoveItemsRecord r;
        REPLAYDB_RETURN_IF_ERROR(Decode(p, &r));
        EXPECT_EQ(r.table_id, 1u);
        EXPECT_EQ(r.keys, (std::vector<uint64_t>{100}));
        break;
      }
      case RecordType::kRemoveTrajectory: {
        RemoveTrajectoryRecord r;
        REPLAYDB_RETURN_IF_ERROR(Decode(p, &r));
        EXPECT_EQ(r.table_id, 1u);
        EXPECT_EQ(r.trajectory_id, 8u);
        EXPECT_TRUE(r.evicted);
        break;
      }
      case RecordType::kClearTable: {
        ClearTableRecord r;
        REPLAYDB_RETURN_IF_ERROR(Decode(p, &r));
        EXPECT_EQ(r.table_id, 1u);
        EXPECT_EQ(r.below_trajectory_id, 9u);
        break;
      }
      case RecordType::kDropTable: {
        DropTableRecord r;
        REPLAYDB_RETURN_IF_ERROR(Decode(p, &r));
        EXPECT_EQ(r.table_id, 1u);
        break;
      }
      case RecordType::kTableSpec:  // (not in the sample)
      case RecordType::kItemClock:
        ADD_FAILURE() << "a record of type " << static_cast<int>(type) << " in the sample";
        break;
    }
    return Status::OK();
  };
  ReplayReport report;
  ASSERT_OK(Replay(Env::Default(), dir.path(), 0, RecoveryMode::kAbsoluteConsistency, fn, &report));
  EXPECT_EQ(types, (std::vector<RecordType>{RecordType::kCreateTable, RecordType::kAppendSteps,
                                            RecordType::kUpdatePriorities, RecordType::kEndTrajectory,
                                            RecordType::kRemoveItems, RecordType::kRemoveTrajectory,
                                            RecordType::kClearTable, RecordType::kDropTable}));
  EXPECT_EQ(report.segments, 1u);
  EXPECT_EQ(report.last_segment, 1u);
}

TEST(WalFormatTest, WriterStillProducesTheSampleBytes) {
  TempDir dir;
  ASSERT_OK(WriteSample(dir.path()));
  const std::string produced = ReadFile(dir.Sub(SegmentFileName(1)));
  if (std::getenv("REPLAYDB_WRITE_WAL_SAMPLE") != nullptr) {
    std::ofstream(kSampleDir + "/" + SegmentFileName(1), std::ios::binary | std::ios::trunc)
        .write(produced.data(), produced.size());
  }
  EXPECT_EQ(produced, ReadFile(kSampleDir + "/" + SegmentFileName(1)))
      << "the writer's bytes changed: a format change needs a new kFormatVersion";
}

// "00000000  52 44 ...  |RDBWAL..|" lines, as in FORMAT.md.
std::string HexDump(const std::string& bytes) {
  std::ostringstream out;
  for (size_t row = 0; row < bytes.size(); row += 16) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%08zx ", row);
    out << buf;
    std::string ascii;
    for (size_t i = row; i < row + 16; ++i) {
      if (i % 8 == 0) out << ' ';
      if (i < bytes.size()) {
        const auto c = static_cast<unsigned char>(bytes[i]);
        std::snprintf(buf, sizeof(buf), "%02x ", c);
        out << buf;
        ascii += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '.';
      } else {
        out << "   ";
      }
    }
    out << " |" << ascii << "|\n";
  }
  return out.str();
}

// The bytes of the ```text wal-example block of FORMAT.md.
std::string ExampleFromDoc() {
  std::istringstream doc(ReadFile(std::string(REPLAYDB_SOURCE_DIR) + "/wal/FORMAT.md"));
  std::string line, bytes;
  bool in = false;
  while (std::getline(doc, line)) {
    if (line == "```text wal-example") {
      in = true;
      continue;
    }
    if (!in) continue;
    if (line == "```") break;
    std::istringstream words(line);
    std::string word;
    words >> word;  // the offset
    while (words >> word && word[0] != '|') {
      bytes += static_cast<char>(std::stoi(word, nullptr, 16));
    }
  }
  return bytes;
}

TEST(WalFormatTest, FormatDocExampleIsWhatTheWriterProduces) {
  TempDir dir;
  {
    WalOptions o;
    o.sync = WalSyncMode::kNone;
    ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(Env::Default(), dir.path(), o, 1));
    RecordBuilder b;
    b.DropTable({.table_id = 3});
    ASSERT_OK(log->Append(RecordType::kDropTable, b.payload()).status());
    b.EndTrajectory({.table_id = 3, .trajectory_id = 9, .reason = 1});
    ASSERT_OK(log->Append(RecordType::kEndTrajectory, b.payload()).status());
  }
  const std::string produced = ReadFile(dir.Sub(SegmentFileName(1)));
  const std::string documented = ExampleFromDoc();
  EXPECT_FALSE(documented.empty()) << "no ```text wal-example block in wal/FORMAT.md";
  EXPECT_EQ(HexDump(documented), HexDump(produced))
      << "wal/FORMAT.md's example is stale; the writer produces:\n" << HexDump(produced);
}

}  // namespace
}  // namespace replaydb::wal
