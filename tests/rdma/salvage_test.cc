// A returning primary's salvage (rdma/salvage.h), in one process: an old
// primary's directory, written past a handover place, and a served
// database as the cluster's primary. The trajectories the log gave steps to
// from that place on are copied whole and once, with their priorities,
// tables made where missing; progress is kept in DIR/SALVAGE, and a
// salvage stopped or cut off goes on from there (of a fenced directory,
// as a deposed primary's is).
#include "rdma/salvage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/db/db_impl.h"
#include "engine/table/writers.h"
#include "rdma/remote_db.h"
#include "replaydb/db.h"
#include "replaydb/server.h"
#include "tests/rdma/etcd_process.h"
#include "tests/test_util.h"
#include "wal/records.h"

namespace replaydb::rdma {
namespace {

using ::testing::HasSubstr;

TableSpec Spec(const std::string& name, std::mt19937_64& rng) {
  TableSpec spec;
  spec.name = name;
  spec.columns = {{"obs", DType::kF32, Shape{static_cast<int64_t>(1 + rng() % 8)}},
                  {"raw", DType::kU8, Shape{static_cast<int64_t>(1 + rng() % 100)}}};
  spec.capacity_steps = 1 << 14;  // (nothing evicted)
  spec.block_steps = 16;
  spec.sequence_length = 1;
  return spec;
}

// A trajectory as the salvage must copy it: each column's bytes and each
// step's priority.
std::string Content(Table& table, const TrajectoryInfo& info) {
  TrajectorySteps steps;
  if (!table.ReadTrajectory(info.id, 0, info.length, &steps).ok()) return "unreadable";
  std::string out = std::to_string(info.length) +
                    (info.ended ? " ended " + std::to_string(static_cast<int>(info.end_reason))
                                : std::string(" open")) +
                    ":";
  for (const Tensor& c : steps.columns) {
    out.append(reinterpret_cast<const char*>(c.data()), c.size_bytes());
  }
  for (const double p : steps.step_priorities) out += " " + std::to_string(p);
  return out;
}

// Every trajectory of `table` by content.
std::multiset<std::string> Contents(Table& table) {
  std::multiset<std::string> out;
  for (const TrajectoryInfo& info : table.ListTrajectories()) out.insert(Content(table, info));
  return out;
}

// Appends `steps` random steps with random priorities.
void Append(TrajectoryWriter& w, const TableSpec& spec, int steps, std::mt19937_64& rng) {
  for (int s = 0; s < steps; ++s) {
    ASSERT_OK(w.Append(testing_util::RandomStep(spec, rng).tensors,
                       0.25 + static_cast<double>(rng() % 100)));
  }
}

// The old primary's directory: trajectories before the handover place and
// after it (one straddling it), in table "t" and in table "u", made after
// it. `at` gets the place, `after` the contents of what follows it.
// `fenced`: then fenced, as a deposed primary is (its log sealed).
void WriteOldPrimary(const std::string& dir, std::mt19937_64& rng, wal::LogPosition* at,
                     std::map<std::string, std::multiset<std::string>>* after,
                     std::map<std::string, TableSpec>* specs, bool fenced = false) {
  ASSERT_OK_AND_ASSIGN(auto db, DB::Open(testing_util::ManualCheckpoints(), dir));
  (*specs)["t"] = Spec("t", rng);
  (*specs)["u"] = Spec("u", rng);
  auto t = db->CreateTable((*specs)["t"]).value();
  for (int i = 0; i < 3; ++i) {
    auto w = t->NewWriter().value();
    Append(*w, (*specs)["t"], 1 + static_cast<int>(rng() % 20), rng);
    EXPECT_OK(w->End(EndReason::kTerminal));
  }
  const std::multiset<std::string> before = Contents(*t);
  auto straddling = t->NewWriter().value();
  Append(*straddling, (*specs)["t"], 2, rng);
  *at = dynamic_cast<engine::DBImpl&>(*db).LogEnd();
  Append(*straddling, (*specs)["t"], 3, rng);
  EXPECT_OK(straddling->End(EndReason::kTruncated));
  for (int i = 0; i < 4; ++i) {
    auto w = t->NewWriter().value();
    Append(*w, (*specs)["t"], 1 + static_cast<int>(rng() % 1500), rng);  // (chunks of 1024)
    EXPECT_OK(w->End(EndReason::kTerminal));
  }
  // (A replicated(1) table's trajectory after the place is left: whatever
  // it acknowledged is on the successor.)
  TableSpec replicated = Spec("r", rng);
  replicated.acks = Acks::Replicated(1);
  auto r = db->CreateTable(replicated).value();
  {
    WriterOptions leader;
    leader.acks = Acks{AckMode::kLeader, 0};
    auto w = r->NewWriter(leader).value();
    Append(*w, replicated, 3, rng);
    EXPECT_OK(w->End(EndReason::kTerminal));
  }
  auto u = db->CreateTable((*specs)["u"]).value();
  for (int i = 0; i < 2; ++i) {
    auto w = u->NewWriter().value();
    Append(*w, (*specs)["u"], 1 + static_cast<int>(rng() % 20), rng);
    EXPECT_OK(w->End(EndReason::kTerminal));
  }
  // (The three trajectories before the place are not salvaged.)
  std::multiset<std::string> all_t = Contents(*t);
  for (const std::string& c : before) all_t.erase(all_t.find(c));
  (*after)["t"] = all_t;
  (*after)["u"] = Contents(*u);
  if (fenced) EXPECT_OK(dynamic_cast<engine::DBImpl&>(*db).Fence(7, "ucx://127.0.0.1:9").status());
}

// Appends `steps` random steps to `w`'s trajectory as a remote writer of
// key `key` does: in a log record that carries the key (the server's
// engine writer takes the record, rdma/db_service.cc).
void AppendKeyed(TrajectoryWriter& w, const TableSpec& spec, uint64_t key, int steps,
                 std::mt19937_64& rng) {
  auto* appender = dynamic_cast<engine::RecordAppender*>(&w);
  ASSERT_NE(appender, nullptr);
  wal::RecordBuilder b;
  const std::vector<uint64_t> ids(static_cast<size_t>(steps), 0);
  const std::vector<int64_t> at(static_cast<size_t>(steps), 0);
  std::byte* data = b.AppendSteps(appender->table_id(), static_cast<uint32_t>(spec.step_bytes()),
                                  ids, at, {}, key);
  for (int s = 0; s < steps; ++s) {
    for (const auto& column : testing_util::RandomStep(spec, rng).columns) {
      std::memcpy(data, column.data(), column.size());
      data += column.size();
    }
  }
  // (Decoded in place: 8-byte aligned, as a server's receive buffer is.)
  const std::span<const std::byte> payload = b.payload();
  std::vector<uint64_t> aligned((payload.size() + 7) / 8);
  std::memcpy(aligned.data(), payload.data(), payload.size());
  int64_t appended = 0;
  ASSERT_OK(appender->AppendRecord({reinterpret_cast<std::byte*>(aligned.data()), payload.size()},
                                   0, &appended));
  ASSERT_EQ(appended, steps);
}

ServerOptions Loopback() {
  ServerOptions o;
  o.listen = "ucx://127.0.0.1:0";
  o.workers = 1;
  return o;
}

TEST(SalvageTest, CopiesWhatTheLogGaveStepsToFromThePlaceOnWholeAndOnce) {
  std::mt19937_64 rng(testing_util::TestSeed());
  testing_util::TempDir dir;
  std::map<std::string, std::multiset<std::string>> after;
  std::map<std::string, TableSpec> specs;
  wal::LogPosition at;
  WriteOldPrimary(dir.Sub("old"), rng, &at, &after, &specs);
  ASSERT_EQ(after["t"].size(), 5u);
  ASSERT_OK(WriteSalvageFile(Env::Default(), dir.Sub("old"), SalvageState{at, 0, false}));
  // The successor holds table "t" (and a trajectory of its own), not "u".
  ASSERT_OK_AND_ASSIGN(auto server,
                       Server::Open(dir.Sub("new"), testing_util::ManualCheckpoints(), Loopback()));
  ASSERT_OK_AND_ASSIGN(auto t, server->db()->CreateTable(specs["t"]));
  {
    auto w = t->NewWriter().value();
    Append(*w, specs["t"], 4, rng);
    ASSERT_OK(w->End(EndReason::kTerminal));
  }
  std::multiset<std::string> want_t = Contents(*t);
  want_t.insert(after["t"].begin(), after["t"].end());

  std::atomic<bool> stop{false};
  std::vector<std::string> lines;
  ASSERT_OK_AND_ASSIGN(const SalvageReport report,
                       Salvage(dir.Sub("old"), testing_util::ManualCheckpoints(), server->address(),
                               {}, stop, [&](const std::string& line) { lines.push_back(line); }));
  EXPECT_EQ(report.trajectories, 7);
  EXPECT_EQ(report.skipped, 0);
  EXPECT_EQ(report.replicated, 1);
  EXPECT_FALSE(server->db()->GetTable("r").ok());
  EXPECT_EQ(Contents(*t), want_t);
  ASSERT_OK_AND_ASSIGN(auto u, server->db()->GetTable("u"));
  EXPECT_EQ(Contents(*u), after["u"]);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0], HasSubstr("salvage: copying 8 trajectories that " + dir.Sub("old") +
                                  "'s log wrote after segment " + std::to_string(at.segment) +
                                  ", offset " + std::to_string(at.offset)));
  EXPECT_THAT(lines[1], HasSubstr("salvage of " + dir.Sub("old") + " finished: 7 trajectories"));
  EXPECT_THAT(lines[1], HasSubstr("1 of replicated(k) tables left (none was acknowledged)"));
  SalvageState state;
  ASSERT_OK(ReadSalvageFile(Env::Default(), dir.Sub("old"), &state));
  EXPECT_TRUE(state.finished);
  EXPECT_EQ(state.copied, 8u);
  EXPECT_EQ(state.from, at);
  // Once: again, it copies nothing.
  ASSERT_OK_AND_ASSIGN(const SalvageReport again,
                       Salvage(dir.Sub("old"), testing_util::ManualCheckpoints(), server->address(),
                               {}, stop, nullptr));
  EXPECT_EQ(again.trajectories, 0);
  EXPECT_EQ(Contents(*t), want_t);
}

TEST(SalvageTest, StoppedOrCutOffItKeepsItsPlaceAndGoesOnFromThere) {
  std::mt19937_64 rng(testing_util::TestSeed());
  testing_util::TempDir dir;
  std::map<std::string, std::multiset<std::string>> after;
  std::map<std::string, TableSpec> specs;
  wal::LogPosition at;
  WriteOldPrimary(dir.Sub("old"), rng, &at, &after, &specs, /*fenced=*/true);
  ASSERT_OK(WriteSalvageFile(Env::Default(), dir.Sub("old"), SalvageState{at, 0, false}));
  std::atomic<bool> stop{true};
  // A primary out of reach: an error, nothing recorded as done.
  ConnectOptions quick;
  quick.connect_timeout = std::chrono::milliseconds(500);
  const Result<SalvageReport> unreachable =
      Salvage(dir.Sub("old"), testing_util::ManualCheckpoints(),
              "ucx://127.0.0.1:" + std::to_string(testing_util::FreePort()), quick, stop, nullptr);
  EXPECT_EQ(unreachable.status().code(), Status::Code::kUnavailable)
      << unreachable.status().ToString();
  ASSERT_OK_AND_ASSIGN(auto server,
                       Server::Open(dir.Sub("new"), testing_util::ManualCheckpoints(), Loopback()));
  const Result<SalvageReport> stopped = Salvage(dir.Sub("old"), testing_util::ManualCheckpoints(),
                                                server->address(), {}, stop, nullptr);
  EXPECT_EQ(stopped.status().code(), Status::Code::kCancelled);
  EXPECT_THAT(stopped.status().message(), HasSubstr("salvage of " + dir.Sub("old") + " stopped"));
  // It listed what to copy (before its recovery's checkpoint removed the
  // log it read them from), and copied none.
  SalvageState state;
  ASSERT_OK(ReadSalvageFile(Env::Default(), dir.Sub("old"), &state));
  EXPECT_EQ(state.copied, 0u);
  EXPECT_FALSE(state.finished);
  EXPECT_TRUE(state.listed);
  EXPECT_EQ(state.trajectories.size(), 8u);
  // As a node restarted after copying a random number of them: it copies
  // the rest (of the 7 it copies, the replicated table's left).
  const uint64_t done = rng() % 9;
  state.copied = done;
  ASSERT_OK(WriteSalvageFile(Env::Default(), dir.Sub("old"), state));
  stop = false;
  ASSERT_OK_AND_ASSIGN(const SalvageReport report,
                       Salvage(dir.Sub("old"), testing_util::ManualCheckpoints(), server->address(),
                               {}, stop, nullptr));
  EXPECT_EQ(report.trajectories + report.replicated, static_cast<int64_t>(8 - done));
  int64_t held = 0;
  for (const std::string& name : server->db()->ListTables()) {
    held += static_cast<int64_t>(server->db()->GetTable(name).value()->ListTrajectories().size());
  }
  EXPECT_EQ(held, report.trajectories);
}

// A remote writer's trajectory (its records carry its key) that the writer
// resumed on the successor, which holds at least its steps, is left; one
// whose key the successor holds fewer steps of (its writer did not go on
// there), or none, is copied whole.
TEST(SalvageTest, TrajectoriesTheirWritersResumedOnTheSuccessorAreLeft) {
  std::mt19937_64 rng(testing_util::TestSeed());
  testing_util::TempDir dir;
  const TableSpec spec = Spec("t", rng);
  const uint64_t resumed = rng() | 1, behind = (rng() | 1) ^ 2, unknown = (rng() | 1) ^ 4;
  wal::LogPosition at;
  std::multiset<std::string> copied;  // what the salvage is to copy
  {
    ASSERT_OK_AND_ASSIGN(auto db, DB::Open(testing_util::ManualCheckpoints(), dir.Sub("old")));
    ASSERT_OK_AND_ASSIGN(auto t, db->CreateTable(spec));
    ASSERT_OK_AND_ASSIGN(auto straddling, t->NewWriter());
    ASSERT_NO_FATAL_FAILURE(AppendKeyed(*straddling, spec, resumed, 2, rng));
    at = dynamic_cast<engine::DBImpl&>(*db).LogEnd();
    ASSERT_NO_FATAL_FAILURE(AppendKeyed(*straddling, spec, resumed, 3, rng));
    ASSERT_OK(straddling->End(EndReason::kTerminal));
    for (const uint64_t key : {behind, unknown}) {
      ASSERT_OK_AND_ASSIGN(auto w, t->NewWriter());
      ASSERT_NO_FATAL_FAILURE(AppendKeyed(*w, spec, key, 3 + static_cast<int>(rng() % 5), rng));
      ASSERT_OK(w->End(EndReason::kTerminal));
      copied.insert(Content(*t, t->ListTrajectories().back()));
    }
  }
  ASSERT_OK(WriteSalvageFile(Env::Default(), dir.Sub("old"), SalvageState{at, 0, false}));
  // The successor: the resumed writer's trajectory of 5 steps or more, and
  // 2 steps of the one whose writer did not go on.
  ASSERT_OK_AND_ASSIGN(auto server,
                       Server::Open(dir.Sub("new"), testing_util::ManualCheckpoints(), Loopback()));
  ASSERT_OK_AND_ASSIGN(auto t, server->db()->CreateTable(spec));
  for (const auto& [key, steps] : std::vector<std::pair<uint64_t, int>>{
           {resumed, 5 + static_cast<int>(rng() % 3)}, {behind, 2}}) {
    ASSERT_OK_AND_ASSIGN(auto w, t->NewWriter());
    ASSERT_NO_FATAL_FAILURE(AppendKeyed(*w, spec, key, steps, rng));
    ASSERT_OK(w->End(EndReason::kTruncated));
  }
  std::multiset<std::string> want = Contents(*t);
  want.insert(copied.begin(), copied.end());
  std::atomic<bool> stop{false};
  std::vector<std::string> lines;
  ASSERT_OK_AND_ASSIGN(const SalvageReport report,
                       Salvage(dir.Sub("old"), testing_util::ManualCheckpoints(), server->address(),
                               {}, stop, [&](const std::string& line) { lines.push_back(line); }));
  EXPECT_EQ(report.resumed, 1);
  EXPECT_EQ(report.trajectories, 2);
  EXPECT_EQ(Contents(*t), want);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[1], HasSubstr("finished: 2 trajectories"));
  EXPECT_THAT(lines[1], HasSubstr("1 left that their writers resumed there (holding them whole)"));
}

// The served lookup by writer key: NotFound naming the key where the
// server knows none; a local table, or key 0, InvalidArgument.
TEST(SalvageTest, ATrajectoryIsReadByItsWritersKeyFromAServedTableOnly) {
  std::mt19937_64 rng(testing_util::TestSeed());
  testing_util::TempDir dir;
  const TableSpec spec = Spec("t", rng);
  const uint64_t key = rng() | 1;
  ASSERT_OK_AND_ASSIGN(auto server,
                       Server::Open(dir.Sub("new"), testing_util::ManualCheckpoints(), Loopback()));
  ASSERT_OK_AND_ASSIGN(auto local, server->db()->CreateTable(spec));
  const int steps = 1 + static_cast<int>(rng() % 9);
  ASSERT_OK_AND_ASSIGN(auto w, local->NewWriter());
  ASSERT_NO_FATAL_FAILURE(AppendKeyed(*w, spec, key, steps, rng));
  ASSERT_OK_AND_ASSIGN(auto db, DB::Connect(server->address()));
  ASSERT_OK_AND_ASSIGN(auto t, db->GetTable("t"));
  TrajectorySteps read;
  ASSERT_OK(ReadTrajectoryOfWriterKey(*t, key, 0, steps, &read));
  EXPECT_EQ(read.info.id, w->trajectory_id());
  EXPECT_EQ(read.info.length, steps);
  EXPECT_FALSE(read.info.ended);
  TrajectorySteps by_id;
  ASSERT_OK(t->ReadTrajectory(w->trajectory_id(), 0, steps, &by_id));
  ASSERT_EQ(read.columns.size(), by_id.columns.size());
  for (size_t c = 0; c < read.columns.size(); ++c) {
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(read.columns[c].data()),
                          read.columns[c].size_bytes()),
              std::string(reinterpret_cast<const char*>(by_id.columns[c].data()),
                          by_id.columns[c].size_bytes()));
  }
  const Status none = ReadTrajectoryOfWriterKey(*t, key ^ 8, 0, 0, &read);
  EXPECT_EQ(none.code(), Status::Code::kNotFound) << none.ToString();
  EXPECT_THAT(none.message(),
              HasSubstr("table 't': no trajectory of writer key " + std::to_string(key ^ 8)));
  const Status zero = ReadTrajectoryOfWriterKey(*t, 0, 0, 0, &read);
  EXPECT_EQ(zero.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(zero.message(), "table 't': writer key 0 names no writer");
  const Status not_served = ReadTrajectoryOfWriterKey(*local, key, 0, 0, &read);
  EXPECT_EQ(not_served.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(not_served.message(),
            "table 't' is not a served one: its trajectories are not found by writer key");
}

TEST(SalvageTest, AMissingOrDamagedSalvageFileIsNamed) {
  testing_util::TempDir dir;
  SalvageState state;
  const Status missing = ReadSalvageFile(Env::Default(), dir.path(), &state);
  EXPECT_EQ(missing.code(), Status::Code::kNotFound) << missing.ToString();
  std::mt19937_64 rng(testing_util::TestSeed());
  for (const bool listed : {false, true}) {
    SalvageState written{wal::LogPosition{rng() % 1000, rng()}, 0, (rng() & 1) != 0, listed, {}};
    for (uint64_t i = 0, n = listed ? rng() % 50 : 0; i < n; ++i) {
      written.trajectories.emplace_back(static_cast<uint32_t>(rng()), rng());
    }
    written.copied = rng() % (written.trajectories.size() + 1);
    ASSERT_OK(WriteSalvageFile(Env::Default(), dir.path(), written));
    ASSERT_OK(ReadSalvageFile(Env::Default(), dir.path(), &state));
    EXPECT_EQ(state.from, written.from);
    EXPECT_EQ(state.copied, written.copied);
    EXPECT_EQ(state.finished, written.finished);
    EXPECT_EQ(state.listed, written.listed);
    EXPECT_EQ(state.trajectories, written.trajectories);
  }
  for (const char* text :
       {"replaydb salvage 1\nsegment 3\noffset x\n",
        "replaydb salvage 1\nsegment 3\noffset 4\ncopied 0\nfinished 0\ntrajectories 2\n1 2\n",
        "replaydb salvage 1\nsegment 3\noffset 4\ncopied 2\nfinished 0\ntrajectories 1\n1 2\n"}) {
    ASSERT_OK(Env::Default()->WriteFileAtomic(dir.path() + "/SALVAGE", text));
    const Status damaged = ReadSalvageFile(Env::Default(), dir.path(), &state);
    EXPECT_EQ(damaged.code(), Status::Code::kCorruption) << text;
    EXPECT_THAT(damaged.message(), HasSubstr(dir.path() + "/SALVAGE does not parse as a salvage"));
  }
  std::atomic<bool> stop{false};
  const Result<SalvageReport> refused =
      Salvage(dir.path(), {}, "ucx://127.0.0.1:1", {}, stop, nullptr);
  EXPECT_EQ(refused.status().code(), Status::Code::kCorruption);
}

}  // namespace
}  // namespace replaydb::rdma
