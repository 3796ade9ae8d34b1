// A new replica's snapshot (docs/replication.md, "Snapshots"), in one
// process: a primary served by Server::Open, asked through the wire
// (GetSnapshot, ReadSnapshot) and by a replica server, whose progress is
// reported in bytes to the last one. The copy's files are the primary's
// bytes; asking for a snapshot or file that is not there is refused naming
// it; the copy goes once its replica reads the log. (Replicas as processes
// of their own: tests/tools/replication_test.cc.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "rdma/rpc.h"
#include "rdma/wire.h"
#include "replaydb/db.h"
#include "replaydb/server.h"
#include "tests/test_util.h"
#include "wal/format.h"

namespace replaydb::rdma {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
namespace fb = wire::fb;
namespace fs = std::filesystem;

TableSpec Spec(std::mt19937_64& rng) {
  TableSpec spec;
  spec.name = "t";
  spec.columns = {{"obs", DType::kF32, Shape{static_cast<int64_t>(1 + rng() % 8)}},
                  {"raw", DType::kU8, Shape{static_cast<int64_t>(1 + rng() % 200)}}};
  spec.capacity_steps = 1 << 12;
  spec.block_steps = 16;
  spec.sequence_length = 2;
  return spec;
}

// `n` trajectories of random steps and priorities, ended.
void Fill(Table& table, std::mt19937_64& rng, int n) {
  for (int t = 0; t < n; ++t) {
    ASSERT_OK_AND_ASSIGN(auto writer, table.NewWriter());
    const int steps = 2 + static_cast<int>(rng() % 30);
    for (int s = 0; s < steps; ++s) {
      ASSERT_OK(writer->Append(testing_util::RandomStep(table.spec(), rng).tensors,
                               0.5 + static_cast<double>(rng() % 100)));
    }
    ASSERT_OK(writer->End(EndReason::kTerminal));
  }
}

uint16_t Port(const std::string& address) {
  return static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

ServerOptions Loopback() {
  ServerOptions o;
  o.listen = "ucx://127.0.0.1:0";
  o.workers = 1;
  return o;
}

Result<Message> GetSnapshot(RpcClient& client, const std::string& replica) {
  return client.Call(
      [&](const HeaderFields& f) {
        flatbuffers::FlatBufferBuilder b(64);
        b.ForceDefaults(true);
        const auto name = b.CreateString(replica);
        return EncodeHeader(b, f, fb::Body::GetSnapshot, fb::CreateGetSnapshot(b, name));
      },
      "", 60s);
}

Result<Message> ReadSnapshot(RpcClient& client, uint64_t id, const std::string& file,
                             uint64_t offset, uint64_t max_bytes) {
  return client.Call(
      [&](const HeaderFields& f) {
        flatbuffers::FlatBufferBuilder b(64);
        b.ForceDefaults(true);
        const auto name = b.CreateString(file);
        return EncodeHeader(b, f, fb::Body::ReadSnapshot,
                            fb::CreateReadSnapshot(b, id, name, offset, max_bytes));
      },
      "", 60s);
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(SnapshotTest, TheCopysFilesAreTheDatabasesAsOfACheckpointAndGoOnceTheReplicaReadsTheLog) {
  std::mt19937_64 rng(testing_util::TestSeed());
  testing_util::TempDir dir;
  ASSERT_OK_AND_ASSIGN(
      auto server, Server::Open(dir.Sub("primary"), testing_util::ManualCheckpoints(), Loopback()));
  ASSERT_OK_AND_ASSIGN(auto table, server->db()->CreateTable(Spec(rng)));
  Fill(*table, rng, 20);
  RpcClientOptions co;
  ASSERT_OK_AND_ASSIGN(auto client, RpcClient::Connect("127.0.0.1", Port(server->address()), co));
  ASSERT_OK_AND_ASSIGN(Message made, GetSnapshot(*client, "test replica"));
  const fb::SnapshotMade* m = made.header()->body_as_SnapshotMade();
  ASSERT_NE(m, nullptr);
  ASSERT_NE(m->files(), nullptr);
  const std::string copy = dir.Sub("primary") + "/snapshots/" + std::to_string(m->id());
  std::map<std::string, uint64_t> files;
  for (const fb::SnapshotFile* f : *m->files()) files[f->name()->str()] = f->size();
  ASSERT_EQ(files.count("CATALOG"), 1u);
  EXPECT_EQ(FileBytes(copy + "/CATALOG"), FileBytes(dir.Sub("primary") + "/CATALOG"));
  EXPECT_EQ(files.count("cold/CURRENT"), 1u);
  // The log from the snapshot's segment stays: its checkpoint's.
  EXPECT_TRUE(fs::exists(dir.Sub("primary") + "/wal/" + wal::SegmentFileName(m->segment())));
  // Each file read back in chunks of a random size is the copy's bytes.
  const uint64_t chunk = 1 + rng() % 5000;
  for (const auto& [name, size] : files) {
    std::string got;
    while (got.size() < size) {
      ASSERT_OK_AND_ASSIGN(Message part, ReadSnapshot(*client, m->id(), name, got.size(), chunk));
      ASSERT_FALSE(part.payload.empty()) << name;
      ASSERT_LE(part.payload.size(), chunk);
      got += part.payload;
    }
    EXPECT_EQ(got, FileBytes(copy + "/" + name)) << name;
  }
  // Refusals name what is not there.
  Result<Message> bad = ReadSnapshot(*client, m->id() + 7, "CATALOG", 0, 100);
  EXPECT_EQ(bad.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(bad.status().message(), HasSubstr("snapshot " + std::to_string(m->id() + 7) + " of " +
                                                dir.Sub("primary") + " is gone"));
  bad = ReadSnapshot(*client, m->id(), "../CATALOG", 0, 100);
  EXPECT_EQ(bad.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(bad.status().message(), HasSubstr("has no file '../CATALOG'"));
  // The replica's first read of the log removes its copy.
  ASSERT_TRUE(fs::exists(copy));
  ASSERT_OK(client
                ->Call(
                    [&](const HeaderFields& f) {
                      flatbuffers::FlatBufferBuilder b(64);
                      b.ForceDefaults(true);
                      const auto name = b.CreateString("test replica");
                      return EncodeHeader(b, f, fb::Body::FetchLog,
                                          fb::CreateFetchLog(b, name, m->segment(), m->offset(),
                                                             1 << 20, 0, m->segment()));
                    },
                    "", 10s)
                .status());
  EXPECT_FALSE(fs::exists(copy));
  client.reset();
  EXPECT_OK(server->Close());
}

TEST(SnapshotTest, ANewReplicaServerCopiesItReportingEachByteAndHoldsThePrimarysTables) {
  std::mt19937_64 rng(testing_util::TestSeed());
  testing_util::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto primary, Server::Open(dir.Sub("primary"),
                                                  testing_util::ManualCheckpoints(), Loopback()));
  ASSERT_OK_AND_ASSIGN(auto table, primary->db()->CreateTable(Spec(rng)));
  Fill(*table, rng, 10 + static_cast<int>(rng() % 20));
  ASSERT_OK(primary->db()->Checkpoint());  // the log's first segment goes
  Fill(*table, rng, 5);
  std::mutex mu;
  std::vector<ProgressUpdate> updates;
  std::vector<std::string> operations;
  ServerOptions o = Loopback();
  o.replica_of = primary->address();
  o.progress = [&](const ProgressUpdate& u) {
    std::lock_guard<std::mutex> lock(mu);
    updates.push_back(u);
    operations.emplace_back(u.operation);
  };
  ASSERT_OK_AND_ASSIGN(auto replica,
                       Server::Open(dir.Sub("replica"), testing_util::ManualCheckpoints(), o));
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_GE(updates.size(), 2u);
    EXPECT_EQ(updates.front().done, 0);
    EXPECT_FALSE(updates.front().finished);
    EXPECT_TRUE(updates.back().finished);
    EXPECT_GT(updates.back().total, 0);
    EXPECT_EQ(updates.back().done, updates.back().total);
    for (size_t i = 1; i < updates.size(); ++i) EXPECT_GE(updates[i].done, updates[i - 1].done);
    EXPECT_EQ(operations.front(), "snapshot of " + primary->address());
    EXPECT_EQ(std::string(updates.back().unit), "bytes");
  }
  // What the snapshot held and what the log brought after it.
  ASSERT_OK_AND_ASSIGN(auto copy, replica->db()->GetTable("t"));
  const std::string want = testing_util::TableContents(*table);
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < until && testing_util::TableContents(*copy) != want) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(testing_util::TableContents(*copy), want);
  EXPECT_FALSE(fs::exists(dir.Sub("replica") + "/snapshot.partial"));
  EXPECT_OK(replica->Close());
  EXPECT_OK(primary->Close());
}

}  // namespace
}  // namespace replaydb::rdma
