// The rate limiter as writers and samplers meet it through a table.
#include <atomic>
#include <chrono>
#include <thread>

#include "replaydb/db.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using testing_util::RandomStep;
using testing_util::TempDir;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

std::vector<ColumnSpec> Columns() { return {{"x", DType::kI32, {2}}}; }

class TableRateLimitTest : public ::testing::Test {
 protected:
  void SetUp() override { db_ = testing_util::OpenDB(dir_.path()); }
  std::shared_ptr<Table> Create(TableSpec spec) {
    if (spec.capacity_steps == 0) spec.capacity_steps = 4096;
    auto t = db_->CreateTable(spec);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : nullptr;
  }
  // Waits (at most 30 s) until `table`'s rate limiter has counted at least
  // this many writer and sample calls that wait: then they are waiting.
  static void AwaitBlocked(Table& table, int64_t inserts, int64_t samples) {
    const auto until = std::chrono::steady_clock::now() + 30s;
    RateLimiterInfo info = table.Info().rate_limiter;
    while ((info.blocked_inserts < inserts || info.blocked_samples < samples) &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(2ms);
      info = table.Info().rate_limiter;
    }
    ASSERT_GE(info.blocked_inserts, inserts);
    ASSERT_GE(info.blocked_samples, samples);
  }
  TempDir dir_;
  std::unique_ptr<DB> db_;
  std::mt19937_64 rng_{testing_util::TestSeed()};
};

TEST_F(TableRateLimitTest, QueueEleventhInsertBlocksUntilASample) {
  TableSpec spec = TableSpec::Queue("queue", Columns(), 10);
  auto table = Create(spec);
  auto writer = table->NewWriter();
  ASSERT_TRUE(writer.ok());
  auto step = RandomStep(spec, rng_);
  for (int i = 0; i < 10; ++i) ASSERT_OK((*writer)->Append(step.tensors));

  std::atomic<bool> inserted{false};
  std::thread producer([&] {
    EXPECT_OK((*writer)->Append(step.tensors));
    inserted = true;
  });
  ASSERT_NO_FATAL_FAILURE(AwaitBlocked(*table, 1, 0));
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(inserted.load()) << "the 11th insert did not block";
  EXPECT_EQ(table->Info().num_items, 10);
  auto batch = table->Sample(1);
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(ItemKeyStart(batch->keys[0]), 0);  // FIFO
  producer.join();
  EXPECT_TRUE(inserted.load());
  EXPECT_EQ(table->Info().num_items, 10);
  EXPECT_GE(table->Info().rate_limiter.blocked_inserts, 1);
  // Items come out in order, each once.
  for (int i = 1; i <= 10; ++i) {
    auto b = table->Sample(1);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(ItemKeyStart(b->keys[0]), i);
  }
}

TEST_F(TableRateLimitTest, InsertTimeoutStoresNothing) {
  TableSpec spec = TableSpec::Queue("q2", Columns(), 2);
  auto table = Create(spec);
  auto writer = table->NewWriter({.timeout = 30ms});
  ASSERT_TRUE(writer.ok());
  auto step = RandomStep(spec, rng_);
  ASSERT_OK((*writer)->Append(step.tensors));
  ASSERT_OK((*writer)->Append(step.tensors));
  Status s = (*writer)->Append(step.tensors);
  EXPECT_EQ(s.code(), Status::Code::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("q2"));
  EXPECT_EQ(table->Info().num_steps, 2);
  EXPECT_EQ((*writer)->num_steps(), 2);
  // After a sample, the same writer continues the same trajectory.
  ASSERT_TRUE(table->Sample(1).ok());
  ASSERT_OK((*writer)->Append(step.tensors));
  EXPECT_EQ((*writer)->num_steps(), 3);
}

TEST_F(TableRateLimitTest, SamplesBlockBelowMinSize) {
  TableSpec spec;
  spec.name = "minsize";
  spec.columns = Columns();
  spec.rate_limiter = RateLimiterSpec::MinSize(5);
  auto table = Create(spec);
  auto writer = table->NewWriter();
  auto step = RandomStep(spec, rng_);
  for (int i = 0; i < 4; ++i) ASSERT_OK((*writer)->Append(step.tensors));
  auto early = table->Sample(1, {.timeout = 30ms});
  EXPECT_EQ(early.status().code(), Status::Code::kDeadlineExceeded);
  std::thread sampler([&] { EXPECT_TRUE(table->Sample(2).ok()); });
  std::this_thread::sleep_for(30ms);
  ASSERT_OK((*writer)->Append(step.tensors));
  sampler.join();
  EXPECT_EQ(table->Info().items_sampled, 2);
}

TEST_F(TableRateLimitTest, SampleToInsertRatioOneAndAHalf) {
  TableSpec spec;
  spec.name = "spi";
  spec.columns = Columns();
  // min size 2, spi 1.5: error range [3 - 1.5, 3 + 1.5].
  spec.rate_limiter = RateLimiterSpec::SampleToInsertRatio(1.5, 2, 1.5);
  auto table = Create(spec);
  auto writer = table->NewWriter({.timeout = 20ms});
  auto step = RandomStep(spec, rng_);
  // Inserts run free to min size, then until error would pass 4.5: the
  // third insert makes error 4.5, the fourth would make 6.
  ASSERT_OK((*writer)->Append(step.tensors));
  ASSERT_OK((*writer)->Append(step.tensors));
  ASSERT_OK((*writer)->Append(step.tensors));
  EXPECT_EQ((*writer)->Append(step.tensors).code(), Status::Code::kDeadlineExceeded);
  // error 4.5: samples are allowed while error - n >= 1.5, so three now,
  // though at most two per call: a learner sampling three at a time could
  // wait forever at error 3.5, where inserts wait for samples.
  EXPECT_EQ(table->Sample(3, {.timeout = 20ms}).status().code(),
            Status::Code::kInvalidArgument);
  ASSERT_TRUE(table->Sample(2, {.timeout = 20ms}).ok());
  ASSERT_TRUE(table->Sample(1, {.timeout = 20ms}).ok());
  EXPECT_EQ(table->Sample(1, {.timeout = 20ms}).status().code(),
            Status::Code::kDeadlineExceeded);
  // error 1.5: one insert brings it to 3, a second to 4.5, a third is refused.
  ASSERT_OK((*writer)->Append(step.tensors));
  ASSERT_OK((*writer)->Append(step.tensors));
  EXPECT_EQ((*writer)->Append(step.tensors).code(), Status::Code::kDeadlineExceeded);
  const RateLimiterInfo info = table->Info().rate_limiter;
  EXPECT_EQ(info.inserts, 5);
  EXPECT_EQ(info.samples, 3);
}

TEST_F(TableRateLimitTest, CloseWakesBlockedWritersAndSamplers) {
  TableSpec spec = TableSpec::Queue("close", Columns(), 1);
  auto table = Create(spec);
  TableSpec empty_spec;
  empty_spec.name = "empty";
  empty_spec.columns = Columns();
  auto empty = Create(empty_spec);
  auto writer = table->NewWriter();
  auto step = RandomStep(spec, rng_);
  ASSERT_OK((*writer)->Append(step.tensors));
  std::thread blocked_writer([&] {
    Status s = (*writer)->Append(step.tensors);
    EXPECT_EQ(s.code(), Status::Code::kCancelled) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("'close'"));
  });
  std::thread blocked_sampler([&] {
    auto b = empty->Sample(4);
    EXPECT_EQ(b.status().code(), Status::Code::kCancelled) << b.status().ToString();
    EXPECT_THAT(b.status().message(), HasSubstr("'empty'"));
  });
  ASSERT_NO_FATAL_FAILURE(AwaitBlocked(*table, 1, 0));
  ASSERT_NO_FATAL_FAILURE(AwaitBlocked(*empty, 0, 1));
  table->Close();
  empty->Close();
  blocked_writer.join();
  blocked_sampler.join();
  EXPECT_THAT(table->Sample(1).status().message(), HasSubstr("table 'close' is closed"));
}

TEST_F(TableRateLimitTest, ChangingTheLimiterWakesWaiters) {
  TableSpec spec;
  spec.name = "change";
  spec.columns = Columns();
  spec.rate_limiter = RateLimiterSpec::MinSize(100);
  auto table = Create(spec);
  auto writer = table->NewWriter();
  auto step = RandomStep(spec, rng_);
  ASSERT_OK((*writer)->Append(step.tensors));
  std::thread sampler([&] { EXPECT_TRUE(table->Sample(1).ok()); });
  std::this_thread::sleep_for(30ms);
  ASSERT_OK(table->SetRateLimiter(RateLimiterSpec::MinSize(1)));
  sampler.join();
  EXPECT_EQ(table->Info().rate_limiter.spec.min_size_to_sample, 1);
}

TEST_F(TableRateLimitTest, TailPaddingEndBlocksAndCanBeRetried) {
  TableSpec spec = TableSpec::Queue("tailq", Columns(), 3);
  spec.sequence_length = 2;
  spec.padding = Padding::kTail;
  auto table = Create(spec);
  auto writer = table->NewWriter({.timeout = 20ms});
  auto step = RandomStep(spec, rng_);
  for (int i = 0; i < 4; ++i) ASSERT_OK((*writer)->Append(step.tensors));  // 3 items
  // Ending adds the padded item of start 3, which the full queue refuses.
  Status end = (*writer)->End(EndReason::kTerminal);
  EXPECT_EQ(end.code(), Status::Code::kDeadlineExceeded);
  Status append = (*writer)->Append(step.tensors);
  EXPECT_EQ(append.code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(append.message(), HasSubstr("call End again"));
  ASSERT_TRUE(table->Sample(1).ok());
  ASSERT_OK((*writer)->End(EndReason::kTerminal));
  EXPECT_EQ(table->Info().num_items, 3);
  for (int i = 1; i <= 3; ++i) {
    auto b = table->Sample(1);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(ItemKeyStart(b->keys[0]), i);
    EXPECT_EQ(b->mask[1], i < 3 ? 1 : 0);
  }
  EXPECT_EQ(table->Info().num_trajectories, 0);
}

// Reverb's SampleToInsertRatio(1, 1000, buffer 100) with Sample(256): the
// batch needs an error of 1156 that inserts never reach (they stop at
// 1100), so the call fails at once instead of waiting forever.
TEST_F(TableRateLimitTest, SampleLargerThanTheLimitersRangeIsRefusedNotAHang) {
  TableSpec spec;
  spec.name = "ratio";
  spec.columns = Columns();
  spec.rate_limiter = RateLimiterSpec::SampleToInsertRatio(1.0, 1000, 100.0);
  auto table = Create(spec);
  auto writer = table->NewWriter({.timeout = 0ms});
  auto step = RandomStep(spec, rng_);
  for (int i = 0; i < 1100; ++i) ASSERT_OK((*writer)->Append(step.tensors));
  EXPECT_EQ((*writer)->Append(step.tensors).code(), Status::Code::kDeadlineExceeded);
  // (It waited forever before; the timeout makes that a failure here.)
  auto refused = table->Sample(256, {.timeout = 5s});
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("table 'ratio': a sample of 256 items"));
  EXPECT_THAT(refused.status().message(), HasSubstr("max_diff - min_diff = 200"));
  EXPECT_THAT(refused.status().message(), HasSubstr("sample at most 200 items per call"));
  EXPECT_EQ(table->Info().items_sampled, 0);
  ASSERT_OK(table->Sample(200).status());
  ASSERT_OK((*writer)->Append(step.tensors));
}

// A vector table's step inserts `lanes` items at once: a limiter whose
// range cannot hold them refuses the append (storing nothing) and cannot be
// set on the table.
TEST_F(TableRateLimitTest, VectorStepLargerThanTheLimitersRangeIsRefused) {
  TableSpec spec;
  spec.name = "vt";
  spec.columns = Columns();
  spec.lanes = 8;
  spec.block_steps = 4;
  const RateLimiterSpec narrow = RateLimiterSpec::SampleToInsertRatio(1.0, 8, -3.0, 3.0);
  auto table = Create(spec);  // MinSize(1)
  const Status set = table->SetRateLimiter(narrow);
  EXPECT_EQ(set.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(set.message(), HasSubstr("table 'vt': an insert of 8 items (one vector step of 8 "
                                       "environments) can never be admitted"));
  EXPECT_EQ(table->spec().rate_limiter, RateLimiterSpec::MinSize(1));

  // A table created with it (by an earlier version, or from a catalog)
  // refuses appends.
  spec.name = "vt2";
  spec.rate_limiter = narrow;
  auto narrow_table = Create(spec);
  ASSERT_NE(narrow_table, nullptr);
  ASSERT_OK_AND_ASSIGN(auto writer, narrow_table->NewVectorWriter(8));
  std::vector<int32_t> rows(8 * 2, 7);
  const ConstTensor t{DType::kI32, Shape{8, 2}, rows.data(), rows.size() * sizeof(int32_t)};
  const Status append = writer->Append({&t, 1});
  EXPECT_EQ(append.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(append.message(), HasSubstr("an insert of 8 items"));
  EXPECT_THAT(append.message(), HasSubstr("max_diff - min_diff = 6"));
  EXPECT_EQ(narrow_table->Info().num_steps, 0);
}

}  // namespace
}  // namespace replaydb
