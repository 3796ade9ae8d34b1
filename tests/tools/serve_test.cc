// `replaydb serve` as a process of its own: a client in this process lists,
// opens and samples its tables over UCX on 127.0.0.1; SIGTERM ends the
// connections (the client sees Unavailable), checkpoints and exits 0, and
// the database opens afterwards with everything in it. Bounded waits only.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "replaydb/db.h"
#include "tests/test_util.h"
#include "tests/tools/serve_process.h"

namespace replaydb {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

using testing_util::ServeProcess;

TableSpec Spec() {
  TableSpec spec;
  spec.name = "experience";
  spec.columns = {{"obs", DType::kF32, Shape{4}}, {"reward", DType::kF32, Shape{}}};
  spec.capacity_steps = 4096;
  spec.block_steps = 16;
  spec.sequence_length = 2;
  return spec;
}

TEST(ServeTest, ServesSamplesAndStopsCleanlyOnSigterm) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  int64_t steps = 0;
  {
    auto db = testing_util::OpenDB(dir.path());
    auto table = db->CreateTable(Spec());
    ASSERT_OK(table.status());
    for (int t = 0; t < 10; ++t) {
      auto writer = (*table)->NewWriter();
      ASSERT_OK(writer.status());
      for (int s = 0; s < 5; ++s, ++steps) {
        ASSERT_OK((*writer)->Append(testing_util::RandomStep(Spec(), rng).tensors));
      }
      ASSERT_OK((*writer)->End(EndReason::kTerminal));
    }
  }
  ServeProcess serve({dir.path(), "--listen", "ucx://127.0.0.1:0", "--workers", "2"});
  const std::string address =
      serve.WaitFor(std::regex("listening on (ucx://127\\.0\\.0\\.1:[0-9]+)"), 30s);
  ASSERT_FALSE(address.empty()) << "no listening line; output:\n" << serve.output();
  EXPECT_THAT(serve.output(), HasSubstr("database " + dir.path() + " (1 tables)"));

  ConnectOptions o;
  o.client_name = "learner 1";
  ASSERT_OK_AND_ASSIGN(auto remote, DB::Connect(address, o));
  EXPECT_EQ(remote->ListTables(), std::vector<std::string>{"experience"});
  EXPECT_EQ(remote->path(), address);
  ASSERT_OK_AND_ASSIGN(auto table, remote->GetTable("experience"));
  SampleOptions so;
  so.timeout = 10s;
  SampleBatch batch;
  ASSERT_OK(table->Sample(8, so, &batch));
  EXPECT_EQ(batch.batch_size, 8);
  EXPECT_EQ(batch.sequence_length, 2);
  ASSERT_EQ(batch.columns.size(), 2u);
  EXPECT_EQ(batch.columns[0].size_bytes(), 8u * 2 * 4 * sizeof(float));
  EXPECT_FALSE(serve.WaitFor(std::regex("is 'learner 1'"), 10s).empty()) << serve.output();

  ASSERT_EQ(::kill(serve.pid(), SIGTERM), 0);
  EXPECT_EQ(serve.Exit(60s), 0) << serve.output();
  EXPECT_THAT(serve.output(), HasSubstr("stopping (SIGTERM)"));
  EXPECT_THAT(serve.output(), HasSubstr("stopped; database checkpointed and closed"));
  // The client was told: its connection ended.
  const Status after = table->Sample(1, so, &batch);
  EXPECT_EQ(after.code(), Status::Code::kUnavailable) << after.ToString();
  // Everything is there on reopening.
  auto db = testing_util::OpenDB(dir.path());
  ASSERT_OK_AND_ASSIGN(auto local, db->GetTable("experience"));
  EXPECT_EQ(local->Info().num_steps, steps);
}

// The shell opens a server as it opens a directory (`replaydb ucx://...`),
// and a server started with --token-file lets in only clients that prove a
// token of it.
TEST(ServeTest, TheShellAndTokenHoldersReachAServerWithTokens) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  {
    auto db = testing_util::OpenDB(dir.Sub("db"));
    auto table = db->CreateTable(Spec());
    ASSERT_OK(table.status());
    auto writer = (*table)->NewWriter();
    ASSERT_OK(writer.status());
    for (int s = 0; s < 6; ++s) {
      ASSERT_OK((*writer)->Append(testing_util::RandomStep(Spec(), rng).tensors));
    }
    ASSERT_OK((*writer)->End(EndReason::kTerminal));
  }
  std::string secret;
  for (int i = 0; i < 48; ++i) secret.push_back("0123456789abcdef"[rng() % 16]);
  const std::string tokens = dir.Sub("tokens");
  {
    std::ofstream(tokens) << "read-write " << secret << "\n";
  }
  ::chmod(tokens.c_str(), 0600);
  ServeProcess serve({dir.Sub("db"), "--listen", "ucx://127.0.0.1:0", "--token-file", tokens});
  const std::string address =
      serve.WaitFor(std::regex("listening on (ucx://127\\.0\\.0\\.1:[0-9]+)"), 30s);
  ASSERT_FALSE(address.empty()) << "no listening line; output:\n" << serve.output();
  EXPECT_THAT(serve.output(), HasSubstr("tokens of " + tokens));
  const auto refused = DB::Connect(address);
  EXPECT_THAT(refused.status().message(), HasSubstr("requires a token"));
  ConnectOptions o;
  o.token_file = tokens;
  ASSERT_OK_AND_ASSIGN(auto remote, DB::Connect(address, o));
  ASSERT_OK_AND_ASSIGN(auto table, remote->GetTable("experience"));
  EXPECT_EQ(table->Info().num_steps, 6);
  EXPECT_FALSE(serve.WaitFor(std::regex("proved a read-write token"), 10s).empty())
      << serve.output();
  // The shell: the same commands against the server, with the token; none
  // without it.
  const std::string tool = REPLAYDB_TOOL_PATH;
  const std::string out = testing_util::ShellOutput(
      "timeout 60 " + tool + " " + address + " --token-file " + tokens + " -c tables --json 2>&1");
  std::string compact = out;
  std::erase_if(compact, [](char ch) { return ch == ' ' || ch == '\n'; });
  EXPECT_THAT(compact, HasSubstr("\"name\":\"experience\"")) << out;
  EXPECT_THAT(compact, HasSubstr("\"hot_steps\":6")) << out;
  EXPECT_FALSE(serve.WaitFor(std::regex("is 'replaydb shell'"), 10s).empty()) << serve.output();
  // The inspection commands read through the server too.
  const std::string listed =
      testing_util::ShellOutput("timeout 60 " + tool + " " + address + " --token-file " + tokens +
                                " --json -c 'trajectories experience' 2>&1");
  compact = listed;
  std::erase_if(compact, [](char ch) { return ch == ' ' || ch == '\n'; });
  EXPECT_THAT(compact, HasSubstr("\"length\":6")) << listed;
  EXPECT_THAT(compact, HasSubstr("\"end_reason\":\"terminal\"")) << listed;
  const std::string refused_shell =
      testing_util::ShellOutput("timeout 60 " + tool + " " + address + " -c tables 2>&1");
  EXPECT_THAT(refused_shell, HasSubstr("cannot open " + address));
  EXPECT_THAT(refused_shell, HasSubstr("requires a token"));
  ASSERT_EQ(::kill(serve.pid(), SIGTERM), 0);
  EXPECT_EQ(serve.Exit(60s), 0) << serve.output();
}

TEST(ServeTest, ADatabaseAnotherProcessHoldsIsRefusedNamingIt) {
  testing_util::TempDir dir;
  auto db = testing_util::OpenDB(dir.path());
  ServeProcess serve({dir.path(), "--listen", "ucx://127.0.0.1:0"});
  EXPECT_EQ(serve.Exit(30s), 1) << serve.output();
  EXPECT_THAT(serve.output(), HasSubstr("replaydb serve: Busy"));
  EXPECT_THAT(serve.output(), HasSubstr(dir.path()));
}

TEST(ServeTest, BadCommandLinesAreUsageErrors) {
  testing_util::TempDir dir;
  ServeProcess remote({dir.Sub("db"), "--listen", "ucx://10.1.2.3:7077"});
  EXPECT_EQ(remote.Exit(30s), 2) << remote.output();
  EXPECT_THAT(remote.output(), HasSubstr("an address other than loopback needs a token"));
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("db"))) << "nothing is created on a usage error";
  ServeProcess none({});
  EXPECT_EQ(none.Exit(30s), 2) << none.output();
  EXPECT_THAT(none.output(), HasSubstr("which database? give DIR"));
  const std::string open_tokens = dir.Sub("tokens");
  {
    std::ofstream(open_tokens) << "read-write " << std::string(40, 'a') << "\n";
  }
  ::chmod(open_tokens.c_str(), 0644);
  ServeProcess exposed({dir.Sub("db"), "--token-file", open_tokens});
  EXPECT_EQ(exposed.Exit(30s), 2) << exposed.output();
  EXPECT_THAT(exposed.output(), HasSubstr("is open to group or others (mode 0644): chmod 600"));
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("db")));
  ServeProcess bad_port({dir.Sub("db"), "--listen", "ucx://127.0.0.1:99999"});
  EXPECT_EQ(bad_port.Exit(30s), 2) << bad_port.output();
  EXPECT_THAT(bad_port.output(), HasSubstr("is not ucx://HOST:PORT"));
  ServeProcess bad_sync({dir.Sub("db"), "--wal-sync", "sometimes"});
  EXPECT_EQ(bad_sync.Exit(30s), 2) << bad_sync.output();
  EXPECT_THAT(bad_sync.output(),
              HasSubstr("--wal-sync must be none, batch or always, not 'sometimes'"));
  ServeProcess bad_window({dir.Sub("db"), "--resume-window-ms", "-5"});
  EXPECT_EQ(bad_window.Exit(30s), 2) << bad_window.output();
  EXPECT_THAT(bad_window.output(),
              HasSubstr("--resume-window-ms must be a number from 0 to 3600000, not '-5'"));
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("db")));
}

}  // namespace
}  // namespace replaydb
