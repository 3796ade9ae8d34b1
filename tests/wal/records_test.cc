// RecordBuilder and Decode: round trips, and Corruption for payloads that do
// not verify or whose fields disagree.
#include "wal/records.h"

#include <flatbuffers/flatbuffers.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tests/test_util.h"
#include "wal/wal_generated.h"

namespace replaydb::wal {
namespace {

using ::replaydb::testing_util::TestSeed;
using ::testing::HasSubstr;

// A 16-byte aligned copy of a payload (as Replay hands them out).
struct Aligned {
  explicit Aligned(std::span<const std::byte> p) : words((p.size() + 15) / 16 + 1) {
    std::memcpy(words.data(), p.data(), p.size());
    span = {reinterpret_cast<const std::byte*>(words.data()), p.size()};
  }
  struct alignas(16) W { char b[16]; };
  std::vector<W> words;
  std::span<const std::byte> span;
};

TEST(RecordsTest, EveryTypeRoundTrips) {
  RecordBuilder b;
  b.CreateTable({.table_id = 4, .spec = std::string("spec\0bytes", 10)});
  CreateTableRecord ct;
  ASSERT_OK(Decode(Aligned(b.payload()).span, &ct));
  EXPECT_EQ(ct.table_id, 4u);
  EXPECT_EQ(ct.spec, std::string("spec\0bytes", 10));

  b.DropTable({.table_id = 9});
  DropTableRecord dt;
  ASSERT_OK(Decode(b.payload(), &dt));  // the builder's own buffer is aligned
  EXPECT_EQ(dt.table_id, 9u);

  const std::vector<uint64_t> ids = {1, 1, 2};
  const std::vector<int64_t> steps = {0, 1, 0};
  const std::vector<double> prios = {0.5, std::numeric_limits<double>::quiet_NaN(), 3};
  std::byte* data = b.AppendSteps(2, 5, ids, steps, prios);
  for (int i = 0; i < 15; ++i) data[i] = static_cast<std::byte>(i * 3);
  Aligned steps_payload(b.payload());
  AppendStepsRecord as;
  ASSERT_OK(Decode(steps_payload.span, &as));
  EXPECT_EQ(as.table_id, 2u);
  EXPECT_EQ(as.step_bytes, 5u);
  EXPECT_EQ(as.trajectory_ids, ids);
  EXPECT_EQ(as.steps, steps);
  ASSERT_EQ(as.priorities.size(), 3u);
  EXPECT_EQ(as.priorities[0], 0.5);
  EXPECT_TRUE(std::isnan(as.priorities[1]));
  ASSERT_EQ(as.data.size(), 15u);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(as.data[i], static_cast<std::byte>(i * 3));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(as.data.data()) % 16, 0u);  // force_align: 16
  EXPECT_GE(as.data.data(), steps_payload.span.data());
  EXPECT_LE(as.data.data() + as.data.size(), steps_payload.span.data() + steps_payload.span.size());

  EXPECT_TRUE(as.writer_keys.empty());
  EXPECT_EQ(as.KeyOf(2), 0u);

  // A remote vector writer's keys, one per entry; a trajectory writer's one.
  const std::vector<uint64_t> writer_keys = {7, 1ull << 63, 9};
  b.AppendSteps(1, 5, ids, steps, {}, 0, writer_keys);
  ASSERT_OK(Decode(b.payload(), &as));
  EXPECT_EQ(as.writer_keys, writer_keys);
  EXPECT_EQ(as.KeyOf(1), 1ull << 63);
  b.AppendSteps(1, 5, ids, steps, {}, 42);
  ASSERT_OK(Decode(b.payload(), &as));
  EXPECT_TRUE(as.writer_keys.empty());
  EXPECT_EQ(as.KeyOf(2), 42u);

  b.AppendSteps(2, 8, {}, {}, {});  // no entries
  ASSERT_OK(Decode(b.payload(), &as));
  EXPECT_TRUE(as.trajectory_ids.empty());
  EXPECT_TRUE(as.data.empty());

  b.EndTrajectory({.table_id = 3, .trajectory_id = 1ull << 40, .reason = 2});
  EndTrajectoryRecord et;
  ASSERT_OK(Decode(b.payload(), &et));
  EXPECT_EQ(et.table_id, 3u);
  EXPECT_EQ(et.trajectory_id, 1ull << 40);
  EXPECT_EQ(et.reason, 2);

  const std::vector<uint64_t> keys = {10, 11};
  b.UpdatePriorities(5, keys, std::vector<double>{1.0, 0.0});
  UpdatePrioritiesRecord up;
  ASSERT_OK(Decode(b.payload(), &up));
  EXPECT_EQ(up.table_id, 5u);
  EXPECT_EQ(up.keys, keys);
  EXPECT_EQ(up.priorities, (std::vector<double>{1.0, 0.0}));

  b.RemoveItems(6, keys);
  RemoveItemsRecord ri;
  ASSERT_OK(Decode(b.payload(), &ri));
  EXPECT_EQ(ri.table_id, 6u);
  EXPECT_EQ(ri.keys, keys);

  b.RemoveTrajectory({.table_id = 7, .trajectory_id = 99, .evicted = true});
  RemoveTrajectoryRecord rt;
  ASSERT_OK(Decode(b.payload(), &rt));
  EXPECT_EQ(rt.table_id, 7u);
  EXPECT_EQ(rt.trajectory_id, 99u);
  EXPECT_TRUE(rt.evicted);

  b.ClearTable({.table_id = 8, .below_trajectory_id = 12345});
  ClearTableRecord cl;
  ASSERT_OK(Decode(b.payload(), &cl));
  EXPECT_EQ(cl.table_id, 8u);
  EXPECT_EQ(cl.below_trajectory_id, 12345u);

  const uint64_t now_ns = 1795000000123456789u;
  b.ItemClock({.table_id = 9, .time_ns = now_ns});
  ItemClockRecord ic;
  ASSERT_OK(Decode(b.payload(), &ic));
  EXPECT_EQ(ic.table_id, 9u);
  EXPECT_EQ(ic.time_ns, now_ns);
}

TEST(RecordsTest, InconsistentAppendStepsIsCorruption) {
  auto build = [](std::vector<uint64_t> ids, std::vector<int64_t> steps,
                  std::vector<double> prios, size_t data_bytes, uint32_t step_bytes) {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<uint8_t> data(data_bytes);
    fbb.Finish(fb::CreateAppendStepsDirect(fbb, 1, step_bytes, &ids, &steps, &prios, &data));
    return std::vector<std::byte>(reinterpret_cast<const std::byte*>(fbb.GetBufferPointer()),
                                  reinterpret_cast<const std::byte*>(fbb.GetBufferPointer()) + fbb.GetSize());
  };
  AppendStepsRecord r;
  struct Case {
    std::vector<std::byte> payload;
    const char* want;
  };
  const Case cases[] = {
      {build({1, 2}, {0}, {}, 8, 4), "2 trajectory ids but 1 steps"},
      {build({1, 2}, {0, 1}, {1.0}, 8, 4), "1 priorities for 2 entries"},
      {build({1, 2}, {0, 1}, {}, 7, 4), "data holds 7 bytes, expected 2 entries x 4 step bytes = 8"},
      {build({1}, {0}, {}, 0, 0xffffffffu), "expected 1 entries x 4294967295"},
  };
  for (const Case& c : cases) {
    Status s = Decode(Aligned(c.payload).span, &r);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << c.want;
    EXPECT_THAT(s.message(), HasSubstr("AppendSteps record: "));
    EXPECT_THAT(s.message(), HasSubstr(c.want));
  }
  {
    RecordBuilder b;
    const std::vector<uint64_t> ids = {1, 2, 3};
    const std::vector<int64_t> steps = {0, 0, 0};
    b.AppendSteps(1, 4, ids, steps, {}, 0, std::vector<uint64_t>{5, 6});
    const Status s = Decode(b.payload(), &r);
    EXPECT_EQ(s.code(), Status::Code::kCorruption);
    EXPECT_THAT(s.message(), HasSubstr("AppendSteps record: 2 writer keys for 3 entries"));
  }
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<uint64_t> keys = {1, 2};
  std::vector<double> prios = {1};
  fbb.Finish(fb::CreateUpdatePrioritiesDirect(fbb, 1, &keys, &prios));
  UpdatePrioritiesRecord up;
  Status s = Decode(Aligned({reinterpret_cast<const std::byte*>(fbb.GetBufferPointer()), fbb.GetSize()}).span, &up);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_THAT(s.message(), HasSubstr("UpdatePriorities record: 2 keys but 1 priorities"));
}

TEST(RecordsTest, GarbageNeverDecodes) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("REPLAYDB_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  RecordBuilder b;
  const std::vector<uint64_t> ids = {1, 2};
  const std::vector<int64_t> steps = {3, 4};
  b.AppendSteps(1, 2, ids, steps, {});
  const std::vector<std::byte> good(b.payload().begin(), b.payload().end());
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::byte> p = good;
    if (i % 3 == 0) p.resize(rng() % (p.size() + 1));
    for (int e = 0; e < 1 + static_cast<int>(rng() % 4); ++e) {
      if (!p.empty()) p[rng() % p.size()] = static_cast<std::byte>(rng());
    }
    Aligned a(p);
    AppendStepsRecord as;
    CreateTableRecord ct;
    DropTableRecord dt;
    EndTrajectoryRecord et;
    UpdatePrioritiesRecord up;
    RemoveItemsRecord ri;
    RemoveTrajectoryRecord rt;
    for (Status s : {Decode(a.span, &as), Decode(a.span, &ct), Decode(a.span, &dt),
                     Decode(a.span, &et), Decode(a.span, &up), Decode(a.span, &ri),
                     Decode(a.span, &rt)}) {
      if (!s.ok()) {
        EXPECT_EQ(s.code(), Status::Code::kCorruption);
        EXPECT_THAT(s.message(), HasSubstr(" record: "));
      }
    }
    if (Decode(a.span, &as).ok()) {
      EXPECT_EQ(as.data.size(), as.trajectory_ids.size() * as.step_bytes);
    }
  }
  DropTableRecord dt;
  Status s = Decode(std::span<const std::byte>(), &dt);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_THAT(s.message(), HasSubstr("DropTable record: payload of 0 bytes"));
}

// A remote writer's record is filled in by the server: every entry gets the
// trajectory id and consecutive step numbers; nothing else changes, and the
// result is the record the server would have built itself.
TEST(RecordsTest, FillAppendStepsWritesIdsAndStepsInPlace) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("REPLAYDB_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 20; ++round) {
    const size_t n = 1 + rng() % 40;
    const uint32_t step_bytes = 1 + static_cast<uint32_t>(rng() % 64);
    std::vector<double> prios;
    if (rng() % 2 == 0) {
      for (size_t i = 0; i < n; ++i) prios.push_back(static_cast<double>(rng() % 1000) / 7);
    }
    std::vector<std::byte> bytes(n * step_bytes);
    for (std::byte& b : bytes) b = static_cast<std::byte>(rng());
    const uint64_t id = rng();
    const int64_t first = static_cast<int64_t>(rng() % 100000);
    RecordBuilder sent;  // as the client builds it: ids and steps zero
    std::memcpy(sent.AppendSteps(3, step_bytes, std::vector<uint64_t>(n),
                                 std::vector<int64_t>(n), prios),
                bytes.data(), bytes.size());
    Aligned got(sent.payload());
    std::span<std::byte> mutable_payload(const_cast<std::byte*>(got.span.data()), got.span.size());
    ASSERT_OK(FillAppendSteps(mutable_payload, id, first));
    std::vector<uint64_t> ids(n, id);
    std::vector<int64_t> steps(n);
    for (size_t i = 0; i < n; ++i) steps[i] = first + static_cast<int64_t>(i);
    RecordBuilder want;
    std::memcpy(want.AppendSteps(3, step_bytes, ids, steps, prios), bytes.data(), bytes.size());
    ASSERT_EQ(got.span.size(), want.payload().size());
    EXPECT_EQ(std::memcmp(got.span.data(), want.payload().data(), got.span.size()), 0);
  }
  // A payload that does not decode is refused and left alone.
  std::vector<std::byte> junk(64, std::byte{0x5a});
  Aligned a(junk);
  std::span<std::byte> p(const_cast<std::byte*>(a.span.data()), a.span.size());
  Status s = FillAppendSteps(p, 1, 0);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_THAT(s.message(), HasSubstr("AppendSteps record: "));
  EXPECT_TRUE(std::all_of(p.begin(), p.end(), [](std::byte b) { return b == std::byte{0x5a}; }));
}

TEST(RecordsTest, MisalignedPayloadIsRejected) {
  RecordBuilder b;
  b.DropTable({.table_id = 1});
  std::vector<std::byte> buf(b.payload().size() + 1);
  Aligned a(buf);
  std::memcpy(const_cast<std::byte*>(a.span.data()) + 1, b.payload().data(), b.payload().size());
  DropTableRecord dt;
  Status s = Decode(a.span.subspan(1), &dt);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("aligned"));
}

}  // namespace
}  // namespace replaydb::wal
