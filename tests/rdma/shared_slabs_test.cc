// A hot tier's blocks in a transport's shared memory (rdma/shared_slabs.h):
// a BlockPool whose slabs SharedSlabs maps, read by a client transport
// over 127.0.0.1 with each slab's key, byte for byte.
#include "rdma/shared_slabs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tests/rdma/read_and_wait.h"
#include "tests/test_util.h"

namespace replaydb::rdma {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

using testing_read::ReadAndWait;

using testing_read::SharedMemoryOn;

TEST(SharedSlabsTest, APoolsBlocksAreReadByAPeerThroughTheirSlabsKeys) {
  SharedMemoryOn shared_memory;
  std::mt19937_64 rng(testing_util::TestSeed());
  TransportOptions so;
  so.listen_host = "127.0.0.1";
  ASSERT_OK_AND_ASSIGN(auto server, Transport::Start(so));
  auto slabs = std::make_shared<SharedSlabs>(server.get());
  const size_t block_bytes = 1 + rng() % (size_t{4} << 20);
  const int64_t capacity = 1 + static_cast<int64_t>(rng() % 48);
  std::map<int64_t, std::string> written;
  {
    engine::BlockPool pool(block_bytes, capacity, engine::BlockMemory::kHost, 0, slabs);
    for (int64_t i = 0; i < capacity; ++i) {
      ASSERT_OK_AND_ASSIGN(const int64_t b, pool.Allocate());
      // A random stretch of each block, so reads of the wrong place fail.
      std::string bytes(std::min<size_t>(block_bytes, 1 + rng() % 65536), '\0');
      for (char& c : bytes) c = static_cast<char>(rng());
      std::memcpy(pool.address(b), bytes.data(), bytes.size());
      written[b] = std::move(bytes);
    }
    EXPECT_EQ(slabs->size(), static_cast<size_t>(pool.slabs()));

    ASSERT_OK_AND_ASSIGN(auto client, Transport::Start(TransportOptions{}));
    ASSERT_OK_AND_ASSIGN(const ConnectionId to, client->Connect("127.0.0.1", server->port(), 10s));
    ASSERT_OK_AND_ASSIGN(const bool one_sided, client->OneSided(to));
    if (!one_sided) GTEST_SKIP() << "no shared memory between the transports here (UCX_TLS)";
    std::map<int64_t, uint64_t> keys;  // by slab
    for (const auto& [b, bytes] : written) {
      const engine::BlockPool::SlabPlace p = pool.place(b);
      if (keys.count(p.slab) == 0) {
        ASSERT_OK_AND_ASSIGN(const std::string key, slabs->Key(pool.slab(p.slab)));
        ASSERT_OK_AND_ASSIGN(keys[p.slab], client->ImportKey(to, key));
      }
      std::string got(bytes.size(), '\0');
      ASSERT_OK(ReadAndWait(*client, to, keys[p.slab],
                            reinterpret_cast<uint64_t>(pool.slab(p.slab)) + p.offset,
                            std::as_writable_bytes(std::span(got.data(), got.size()))));
      ASSERT_TRUE(got == bytes) << "block " << b << " (slab " << p.slab << ", offset "
                                << p.offset << ")";
    }
    const Result<std::string> none = slabs->Key(pool.slab(0) + 1);
    EXPECT_EQ(none.status().code(), Status::Code::kNotFound);
    EXPECT_THAT(none.status().message(), HasSubstr("no slab starts at"));
  }
  EXPECT_EQ(slabs->size(), 0u) << "the pool did not give its slabs back";
}

}  // namespace
}  // namespace replaydb::rdma
