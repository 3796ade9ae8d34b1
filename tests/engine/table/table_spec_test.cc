// TableSpec::Validate: every rejection names the table, field and values.
#include "replaydb/options.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using ::testing::HasSubstr;

TableSpec Good() {
  TableSpec spec;
  spec.name = "good";
  spec.columns = {{"obs", DType::kF32, {4}}, {"act", DType::kI32, {}}};
  spec.capacity_steps = 1024;
  return spec;
}

void ExpectInvalid(const TableSpec& spec, const std::string& fragment) {
  Status s = spec.Validate();
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr(fragment));
}

TEST(TableSpecTest, GoodSpecAndSizes) {
  const TableSpec spec = Good();
  EXPECT_OK(spec.Validate());
  EXPECT_EQ(spec.step_bytes(), 20u);
  EXPECT_EQ(spec.columns[0].step_bytes(), 16u);
  TableSpec q = TableSpec::Queue("q", Good().columns, 10);
  EXPECT_OK(q.Validate());
  EXPECT_EQ(q.selector, SelectorKind::kFifo);
  EXPECT_EQ(q.max_times_sampled, 1);
  EXPECT_EQ(q.rate_limiter, RateLimiterSpec::Queue(10));
  TableSpec s = TableSpec::Stack("s", Good().columns, 10);
  EXPECT_EQ(s.selector, SelectorKind::kLifo);
  EXPECT_EQ(s.rate_limiter, RateLimiterSpec::Stack(10));
}

TEST(TableSpecTest, Names) {
  TableSpec spec = Good();
  spec.name = "";
  ExpectInvalid(spec, "table name '' is invalid");
  spec.name = "has space";
  ExpectInvalid(spec, "table name 'has space' is invalid");
  spec.name = std::string(129, 'a');
  ExpectInvalid(spec, "1 to 128 characters");
  spec = Good();
  spec.columns[1].name = "a/b";
  ExpectInvalid(spec, "table 'good': column 1 name 'a/b' is invalid");
  spec.columns[1].name = "obs";
  ExpectInvalid(spec, "table 'good': duplicate column name 'obs'");
  spec.columns.clear();
  ExpectInvalid(spec, "table 'good' has no columns");
}

TEST(TableSpecTest, ColumnTypesAndShapes) {
  TableSpec spec = Good();
  spec.columns[0].dtype = static_cast<DType>(42);
  ExpectInvalid(spec, "column 'obs' has unknown dtype 42");
  spec = Good();
  spec.columns[0].shape = Shape{4, 0};
  ExpectInvalid(spec, "column 'obs' has shape [4, 0]: every dim must be >= 1");
  spec.columns[0].shape = Shape{-1};
  ExpectInvalid(spec, "column 'obs' has shape [-1]");
  spec.columns[0].shape = Shape{1, 1, 1, 1, 1, 1, 1, 1, 1};
  ExpectInvalid(spec, "at most 8 dims");
  spec = Good();
  spec.columns[0].shape = Shape{1 << 20, 1 << 10};  // 4 GiB per step
  ExpectInvalid(spec, "column 'obs' needs 4294967296 bytes per step, more than the limit");
}

TEST(TableSpecTest, CapacityAndBlocks) {
  TableSpec spec = Good();
  spec.capacity_steps = -5;
  ExpectInvalid(spec, "capacity_steps is -5; it must be >= 0");
  spec.capacity_steps = 0;
  spec.capacity_bytes = 0;
  ExpectInvalid(spec, "capacity_bytes is 0; set capacity_steps or a positive capacity_bytes");
  spec.capacity_bytes = 100;  // one block is 64 * 20 bytes
  ExpectInvalid(spec, "capacity_bytes 100 is smaller than one block (64 steps x 20 bytes = 1280 bytes)");
  spec.capacity_bytes = 1 << 20;
  EXPECT_OK(spec.Validate());
  spec = Good();
  spec.block_steps = 0;
  ExpectInvalid(spec, "block_steps is 0; it must be between 1 and 65536");
  spec.block_steps = 65537;
  ExpectInvalid(spec, "block_steps is 65537");
  spec = Good();
  spec.columns[0].shape = Shape{1 << 24};  // 64 MiB per step
  spec.block_steps = 64;
  ExpectInvalid(spec, "more than the limit of 1073741824; lower block_steps");
}

TEST(TableSpecTest, SequenceLengthAndOptions) {
  TableSpec spec = Good();
  spec.sequence_length = 0;
  ExpectInvalid(spec, "sequence_length is 0; it must be >= 1");
  spec.sequence_length = 1025;
  ExpectInvalid(spec, "sequence_length 1025 is larger than the hot-tier capacity of 1024 steps");
  spec.sequence_length = 1024;
  EXPECT_OK(spec.Validate());
  spec = Good();
  spec.padding = static_cast<Padding>(9);
  ExpectInvalid(spec, "unknown padding 9");
  spec = Good();
  spec.selector = static_cast<SelectorKind>(9);
  ExpectInvalid(spec, "unknown selector 9");
  spec = Good();
  spec.eviction = static_cast<EvictionPolicy>(9);
  ExpectInvalid(spec, "unknown eviction policy 9");
  spec = Good();
  spec.max_times_sampled = -1;
  ExpectInvalid(spec, "max_times_sampled is -1");
  spec = Good();
  spec.rate_limiter.samples_per_insert = -2;
  ExpectInvalid(spec, "table 'good': ");
  ExpectInvalid(spec, "samples_per_insert");
}

TEST(TableSpecTest, NamesOfEnums) {
  EXPECT_EQ(PaddingName(Padding::kTail), "tail");
  EXPECT_EQ(SelectorKindName(SelectorKind::kLifo), "lifo");
  EXPECT_EQ(EvictionPolicyName(EvictionPolicy::kOldestFirst), "oldest_first");
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType d = static_cast<DType>(i);
    EXPECT_EQ(ParseDType(DTypeName(d)), d);
  }
  EXPECT_EQ(ParseDType("float"), std::nullopt);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kF64), 8u);
}

}  // namespace
}  // namespace replaydb
