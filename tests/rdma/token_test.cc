// Tokens (rdma/token.h): token files read strictly, proofs that only the
// holder of a token can give, and a served database (replaydb::Server over
// real UCP workers on 127.0.0.1) that lets in only clients proving a token,
// refuses a read-only token's writes, and logs each refusal.
#include "rdma/token.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "replaydb/db.h"
#include "replaydb/server.h"
#include "tests/test_util.h"

namespace replaydb::rdma {
namespace {

using ::testing::HasSubstr;

std::string RandomSecret(std::mt19937_64& rng) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 64; ++i) s.push_back(kHex[rng() % 16]);
  return s;
}

std::string WriteFile(const testing_util::TempDir& dir, const std::string& name,
                      const std::string& text, mode_t mode = 0600) {
  const std::string path = dir.Sub(name);
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
  return path;
}

TEST(TokenTest, TokenFilesAreReadStrictlyNamingFileAndLine) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  const std::string rw = RandomSecret(rng);
  const std::string ro = RandomSecret(rng);
  const std::string good = WriteFile(dir, "good", "# tokens\n\nread-write " + rw +
                                                      "\n  read-only\t" + ro + "  \n");
  ASSERT_OK_AND_ASSIGN(const std::vector<Token> tokens, ReadTokenFile(good));
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_EQ(tokens[0].secret, rw);
  EXPECT_FALSE(tokens[0].read_only);
  EXPECT_EQ(tokens[1].secret, ro);
  EXPECT_TRUE(tokens[1].read_only);

  const struct {
    std::string text;
    mode_t mode;
    std::string message;
  } bad[] = {
      {"read-write " + rw + "\n", 0644, "is open to group or others (mode 0644): chmod 600"},
      {"# nothing\n", 0600, "holds no token"},
      {"admin " + rw + "\n", 0600, "line 1: does not start with read-write or read-only"},
      {"\nread-only short\n", 0600, "line 2: the secret has 5 characters, fewer than 32"},
      {"read-write " + rw + " extra\n", 0600, "line 1: want 'read-write SECRET'"},
      {"read-only\n", 0600, "line 1: want 'read-only SECRET'"},
  };
  int i = 0;
  for (const auto& b : bad) {
    const std::string path = WriteFile(dir, "bad" + std::to_string(i++), b.text, b.mode);
    const auto read = ReadTokenFile(path);
    EXPECT_EQ(read.status().code(), Status::Code::kInvalidArgument) << b.text;
    EXPECT_THAT(read.status().message(), HasSubstr("token file " + path)) << b.text;
    EXPECT_THAT(read.status().message(), HasSubstr(b.message)) << b.text;
  }
  const auto missing = ReadTokenFile(dir.Sub("none"));
  EXPECT_THAT(missing.status().message(), HasSubstr("cannot be read"));
  // A secret where the access word belongs is not repeated in the message.
  const std::string swapped = WriteFile(dir, "swapped", rw + " read-write\n");
  const auto s = ReadTokenFile(swapped);
  EXPECT_THAT(s.status().message(), HasSubstr("does not start with read-write or read-only"));
  EXPECT_EQ(s.status().message().find(rw), std::string::npos) << "the secret was echoed";
  // Not a regular file.
  EXPECT_THAT(ReadTokenFile(dir.path()).status().message(), HasSubstr("not a regular file"));
}

TEST(TokenTest, OnlyTheHolderOfATokenCanProveIt) {
  std::mt19937_64 rng(testing_util::TestSeed());
  const std::vector<Token> tokens = {{RandomSecret(rng), false}, {RandomSecret(rng), true}};
  ASSERT_OK_AND_ASSIGN(const std::string challenge, NewChallenge());
  ASSERT_OK_AND_ASSIGN(const std::string other, NewChallenge());
  EXPECT_EQ(challenge.size(), 32u);
  EXPECT_NE(challenge, other);
  bool read_only = true;
  EXPECT_TRUE(CheckProof(tokens, challenge, TokenProof(tokens[0].secret, challenge), &read_only));
  EXPECT_FALSE(read_only);
  EXPECT_TRUE(CheckProof(tokens, challenge, TokenProof(tokens[1].secret, challenge), &read_only));
  EXPECT_TRUE(read_only);
  // Another secret, another challenge's proof, a cut or empty proof: refused.
  EXPECT_FALSE(CheckProof(tokens, challenge, TokenProof(RandomSecret(rng), challenge), &read_only));
  EXPECT_FALSE(CheckProof(tokens, challenge, TokenProof(tokens[0].secret, other), &read_only));
  const std::string proof = TokenProof(tokens[0].secret, challenge);
  EXPECT_EQ(proof.size(), 32u);  // SHA-256
  EXPECT_FALSE(CheckProof(tokens, challenge, proof.substr(0, 31), &read_only));
  EXPECT_FALSE(CheckProof(tokens, challenge, "", &read_only));
}

TEST(TokenTest, AServerWithTokensLetsInOnlyTheirHoldersAndReadOnlyOnesOnlyRead) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  const std::string rw = RandomSecret(rng);
  const std::string ro = RandomSecret(rng);
  const std::string server_tokens =
      WriteFile(dir, "server", "read-write " + rw + "\nread-only " + ro + "\n");
  const std::string rw_file = WriteFile(dir, "rw", "read-write " + rw + "\n");
  const std::string ro_file = WriteFile(dir, "ro", "read-only " + ro + "\n");
  const std::string wrong_file = WriteFile(dir, "wrong", "read-write " + RandomSecret(rng) + "\n");

  auto db = testing_util::OpenDB(dir.Sub("db"));
  TableSpec spec;
  spec.name = "t";
  spec.columns = {{"x", DType::kF32, Shape{2}}};
  spec.capacity_steps = 256;
  ASSERT_OK(db->CreateTable(spec).status());
  std::mutex mu;
  std::vector<std::string> log;
  ServerOptions so;
  so.listen = "ucx://127.0.0.1:0";
  so.token_file = server_tokens;
  so.log = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    log.push_back(line);
  };
  ASSERT_OK_AND_ASSIGN(auto server, Server::Start(db.get(), so));

  ConnectOptions none;
  const auto refused = DB::Connect(server->address(), none);
  EXPECT_EQ(refused.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("requires a token"));
  ConnectOptions wrong;
  wrong.token_file = wrong_file;
  const auto bad = DB::Connect(server->address(), wrong);
  EXPECT_EQ(bad.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(bad.status().message(), HasSubstr("refused the client's token"));

  ConnectOptions writer;
  writer.token_file = rw_file;
  ASSERT_OK_AND_ASSIGN(auto remote, DB::Connect(server->address(), writer));
  ASSERT_OK_AND_ASSIGN(auto table, remote->GetTable("t"));
  {
    ASSERT_OK_AND_ASSIGN(auto w, table->NewWriter());
    for (int i = 0; i < 4; ++i) ASSERT_OK(w->Append(testing_util::RandomStep(spec, rng).tensors));
    ASSERT_OK(w->End(EndReason::kTerminal));
  }
  ConnectOptions reader;
  reader.token_file = ro_file;
  ASSERT_OK_AND_ASSIGN(auto read_only, DB::Connect(server->address(), reader));
  ASSERT_OK_AND_ASSIGN(auto rt, read_only->GetTable("t"));
  SampleOptions o;
  o.timeout = std::chrono::milliseconds(5000);
  SampleBatch batch;
  ASSERT_OK(rt->Sample(3, o, &batch));
  EXPECT_EQ(rt->Info().num_steps, 4);
  const auto no_writer = rt->NewWriter();
  EXPECT_EQ(no_writer.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(no_writer.status().message(),
              HasSubstr("token is a read-only one: NewWriter refused"));
  const Status no_update = rt->UpdatePriorities(batch.keys, std::vector<double>(3, 1.0));
  EXPECT_THAT(no_update.message(), HasSubstr("UpdatePriorities refused"));
  EXPECT_THAT(read_only->DropTable("t").message(), HasSubstr("DropTable refused"));
  EXPECT_THAT(rt->Seed(1).message(), HasSubstr("SeedTable refused"));
  EXPECT_THAT(rt->Clear().message(), HasSubstr("ClearTable refused"));
  EXPECT_THAT(rt->DeleteItems(batch.keys).message(), HasSubstr("DeleteItems refused"));
  const uint64_t ids[] = {1};
  EXPECT_THAT(rt->Load(ids).message(), HasSubstr("LoadTrajectories refused"));
  EXPECT_THAT(rt->LoadRange(0, 10).message(), HasSubstr("LoadTrajectories refused"));
  // What only reads is served.
  std::vector<ItemKey> keys;
  std::vector<double> priorities;
  ASSERT_OK(rt->ItemPriorities(&keys, &priorities));
  EXPECT_EQ(keys.size(), 4u);
  std::vector<TrajectoryInfo> listed;
  ASSERT_OK(rt->ListTrajectories({}, &listed));
  ASSERT_EQ(listed.size(), 1u);
  TrajectorySteps steps;
  ASSERT_OK(rt->ReadTrajectory(listed[0].id, 0, 4, &steps));
  EXPECT_EQ(steps.step_priorities.size(), 4u);
  EXPECT_TRUE(read_only->read_only());
  EXPECT_FALSE(remote->read_only());
  EXPECT_OK(db->GetTable("t").status());

  std::lock_guard<std::mutex> lock(mu);
  int wrong_lines = 0;
  int proved = 0;
  for (const std::string& line : log) {
    wrong_lines += line.find("refused: wrong token") != std::string::npos;
    proved += line.find("proved a read-") != std::string::npos;
  }
  EXPECT_EQ(wrong_lines, 1) << ::testing::PrintToString(log);
  EXPECT_EQ(proved, 2) << ::testing::PrintToString(log);
}

TEST(TokenTest, AnAddressOtherThanLoopbackNeedsATokenFile) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  ServerOptions o;
  o.listen = "ucx://127.evil.example:7077";  // a name, not a loopback address
  EXPECT_THAT(o.Validate().message(), HasSubstr("needs a token file"));
  o.listen = "ucx://10.0.0.1:7077";
  const Status without = o.Validate();
  EXPECT_EQ(without.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(without.message(), HasSubstr("needs a token file (--token-file)"));
  o.token_file = WriteFile(dir, "tokens", "read-write " + RandomSecret(rng) + "\n");
  EXPECT_OK(o.Validate());  // checked only: nothing listens on it here
  o.token_file = WriteFile(dir, "open", "read-write " + RandomSecret(rng) + "\n", 0640);
  EXPECT_THAT(o.Validate().message(), HasSubstr("chmod 600"));
}

}  // namespace
}  // namespace replaydb::rdma
