// The wire protocol's headers (rdma/wire.h): round trips, the checked-in
// samples of tests/data/wire_v6/ (the format may not drift), and damaged or
// truncated bytes, which must fail naming the peer and never crash.
#include "rdma/wire.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "tests/test_util.h"

namespace replaydb::rdma {
namespace {

using ::testing::HasSubstr;
namespace fb = wire::fb;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

HeaderFields RandomFields(std::mt19937_64& rng) {
  HeaderFields f;
  f.request_id = rng();
  f.timeout_ms = static_cast<int64_t>(rng() % 100000) - 1;
  f.table_id = static_cast<uint32_t>(rng());
  return f;
}

void ExpectFields(const fb::Header& h, const HeaderFields& f) {
  EXPECT_EQ(h.request_id(), f.request_id);
  EXPECT_EQ(h.timeout_ms(), f.timeout_ms);
  EXPECT_EQ(h.table_id(), f.table_id);
}

TEST(WireTest, EveryBodyRoundTrips) {
  std::mt19937_64 rng(testing_util::TestSeed());
  for (int i = 0; i < 50; ++i) {
    const HeaderFields f = RandomFields(rng);
    const std::string name = "actor " + std::to_string(rng() % 1000);
    {
      const std::string bytes = EncodeHello(f, name);
      ASSERT_OK_AND_ASSIGN(const fb::Header* h, DecodeHeader(bytes, "test"));
      ExpectFields(*h, f);
      ASSERT_EQ(h->body_type(), fb::Body::Hello);
      EXPECT_EQ(h->body_as_Hello()->protocol_version(), kProtocolVersion);
      EXPECT_EQ(h->body_as_Hello()->client_name()->str(), name);
    }
    {
      const std::string bytes = EncodeWelcome(f, name);
      ASSERT_OK_AND_ASSIGN(const fb::Header* h, DecodeHeader(bytes, "test"));
      ExpectFields(*h, f);
      ASSERT_EQ(h->body_type(), fb::Body::Welcome);
      EXPECT_EQ(h->body_as_Welcome()->server_name()->str(), name);
    }
  }
}

TEST(WireTest, FailuresCarryEveryStatusCode) {
  for (int code = 1; code <= static_cast<int>(Status::Code::kUnavailable); ++code) {
    flatbuffers::FlatBufferBuilder b;
    b.Finish(fb::CreateFailure(b, static_cast<uint8_t>(code), b.CreateString("why")));
    const Status s = FailureStatus(*flatbuffers::GetRoot<fb::Failure>(b.GetBufferPointer()));
    EXPECT_EQ(static_cast<int>(s.code()), code);
    EXPECT_EQ(s.message(), "why");
    // And through a whole header.
    const std::string bytes = EncodeFailure({}, s);
    ASSERT_OK_AND_ASSIGN(const fb::Header* h, DecodeHeader(bytes, "test"));
    EXPECT_EQ(FailureStatus(*h->body_as_Failure()), s);
  }
  const std::string bytes = EncodeFailure({9, 10, 11}, Status::NotFound("no table named 'x'"));
  ASSERT_OK_AND_ASSIGN(const fb::Header* h, DecodeHeader(bytes, "test"));
  ASSERT_EQ(h->body_type(), fb::Body::Failure);
  const Status back = FailureStatus(*h->body_as_Failure());
  EXPECT_EQ(back, Status::NotFound("no table named 'x'"));
  flatbuffers::FlatBufferBuilder b;
  b.Finish(fb::CreateFailure(b, 200, b.CreateString("from the future")));
  const Status unknown =
      FailureStatus(*flatbuffers::GetRoot<fb::Failure>(b.GetBufferPointer()));
  EXPECT_EQ(unknown.code(), Status::Code::kInternal);
  EXPECT_THAT(unknown.message(), HasSubstr("error code 200 this build does not know"));
}

// The checked-in samples decode, and today's encoder writes them byte for
// byte: the format has not drifted. REPLAYDB_WRITE_WIRE_SAMPLES=1 writes
// them anew (only with a deliberate format change, and a new version).
TEST(WireTest, CheckedInSamplesAreWhatTheEncoderWrites) {
  const std::string dir = std::string(REPLAYDB_SOURCE_DIR) + "/tests/data/wire_v6/";
  const std::string hello = EncodeHello({7, 1500, 3}, "actor 3");
  const std::string failure =
      EncodeFailure({7, -1, 3}, Status::DeadlineExceeded("table 't': timed out"));
  if (std::getenv("REPLAYDB_WRITE_WIRE_SAMPLES") != nullptr) {
    std::ofstream(dir + "hello.bin", std::ios::binary) << hello;
    std::ofstream(dir + "failure.bin", std::ios::binary) << failure;
  }
  EXPECT_EQ(ReadFile(dir + "hello.bin"), hello);
  EXPECT_EQ(ReadFile(dir + "failure.bin"), failure);
  const std::string sample = ReadFile(dir + "hello.bin");
  ASSERT_OK_AND_ASSIGN(const fb::Header* h, DecodeHeader(sample, "sample"));
  EXPECT_EQ(h->request_id(), 7u);
  EXPECT_EQ(h->body_as_Hello()->client_name()->str(), "actor 3");
}

TEST(WireTest, DamagedOrTruncatedHeadersFailNamingThePeer) {
  std::mt19937_64 rng(testing_util::TestSeed());
  const Status empty = DecodeHeader("", "127.0.0.1:5000").status();
  EXPECT_EQ(empty.code(), Status::Code::kCorruption);
  EXPECT_THAT(empty.message(), HasSubstr("message from 127.0.0.1:5000 (0 header bytes): not a "
                                         "replaydb wire header"));
  int refused = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string bytes = EncodeHello(RandomFields(rng), "actor");
    if (i % 2 == 0) {
      bytes.resize(rng() % bytes.size());
    } else {
      for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) {
        bytes[rng() % bytes.size()] = static_cast<char>(rng());
      }
    }
    auto h = DecodeHeader(bytes, "peer");
    if (h.ok()) {
      // Whatever verified reads safely.
      (void)(*h)->request_id();
      if ((*h)->body_type() == fb::Body::Hello && (*h)->body_as_Hello()->client_name()) {
        (void)(*h)->body_as_Hello()->client_name()->str();
      }
      continue;
    }
    ++refused;
    EXPECT_EQ(h.status().code(), Status::Code::kCorruption);
    EXPECT_THAT(h.status().message(), HasSubstr("message from peer ("));
  }
  EXPECT_GT(refused, 1000);
  // A body kind from a later version is refused, naming it.
  flatbuffers::FlatBufferBuilder b;
  fb::HeaderBuilder hb(b);
  hb.add_body_type(static_cast<fb::Body>(99));
  b.Finish(hb.Finish(), fb::HeaderIdentifier());
  const std::string future(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
  const Status later = DecodeHeader(future, "peer").status();
  EXPECT_EQ(later.code(), Status::Code::kCorruption);
  EXPECT_THAT(later.message(), HasSubstr("a body of kind 99 this build does not know"));
}

}  // namespace
}  // namespace replaydb::rdma
