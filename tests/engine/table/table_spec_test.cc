// TableSpec::Validate: every rejection names the table, field and values.
#include <limits>
#include <random>
#include <string>
#include <vector>

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

// Shapes whose byte size does not fit 64 bits once wrapped to a small (or
// zero) size; now each is rejected naming the column.
TEST(TableSpecTest, ShapesWhoseBytesOverflowNameTheColumn) {
  TableSpec spec = Good();
  spec.columns[0].shape = Shape{int64_t{1} << 62};  // f32: 2^64 bytes
  EXPECT_EQ(spec.columns[0].step_bytes(), std::numeric_limits<size_t>::max());
  ExpectInvalid(spec,
                "table 'good': column 'obs' has shape [4611686018427387904] of f32, whose bytes "
                "per step overflow 64 bits; a column's step holds at most 268435456 bytes");
  spec.columns[0].shape = Shape{int64_t{1} << 40, int64_t{1} << 40};  // 2^80 elements
  ExpectInvalid(spec, "column 'obs' has shape [1099511627776, 1099511627776] of f32, whose bytes "
                      "per step overflow 64 bits");
  spec.columns[0].shape = Shape{int64_t{1} << 31, int64_t{1} << 31, int64_t{1} << 2};  // 2^64
  ExpectInvalid(spec, "column 'obs' has shape [2147483648, 2147483648, 4] of f32, whose bytes");
  // Negative dims are refused before their product is taken.
  spec.columns[0].shape = Shape{-(int64_t{1} << 32), -(int64_t{1} << 32)};
  ExpectInvalid(spec, "column 'obs' has shape [-4294967296, -4294967296]");
  // The sum over columns overflows although every column fits.
  spec = Good();
  spec.columns.clear();
  for (int i = 0; i < 4096; ++i) {
    spec.columns.push_back({"c" + std::to_string(i), DType::kF32, {int64_t{1} << 26}});
  }
  spec.lanes = int64_t{1} << 24;  // 4096 x 2^28 bytes x 2^24 lanes = 2^64
  spec.block_steps = 1;
  ExpectInvalid(spec, "table 'good': a step of all columns (a vector step of 16777216 "
                      "environments) needs more than 2^64 bytes");
}

// Fresh random shapes: Validate accepts exactly those whose true byte size
// (computed in 128 bits) is within the limit, and a rejection never shows a
// size that wrapped.
TEST(TableSpecTest, RandomShapesAreAcceptedExactlyWhenTheirBytesFit) {
  std::mt19937_64 rng(testing_util::TestSeed());
  constexpr unsigned __int128 kLimit = unsigned{1} << 28;
  int accepted = 0, rejected = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    TableSpec spec = Good();
    spec.block_steps = 1;
    const int rank = 1 + static_cast<int>(rng() % Shape::kMaxRank);
    const DType dtype = static_cast<DType>(rng() % kNumDTypes);
    std::vector<int64_t> dims;
    unsigned __int128 bytes = DTypeSize(dtype);
    bool huge = false;
    for (int d = 0; d < rank; ++d) {
      // Mostly small dims, sometimes up to 2^62.
      const int bits = static_cast<int>(rng() % (rng() % 4 == 0 ? 63 : 12));
      const int64_t dim = 1 + static_cast<int64_t>(rng() % (uint64_t{1} << bits));
      dims.push_back(dim);
      bytes *= static_cast<unsigned __int128>(dim);
      if (bytes > (static_cast<unsigned __int128>(1) << 64)) huge = true;
      if (huge) bytes = static_cast<unsigned __int128>(1) << 65;  // keep it from wrapping
    }
    spec.columns = {{"obs", dtype, Shape::FromSpan(dims)}};
    const Status s = spec.Validate();
    SCOPED_TRACE(spec.columns[0].shape.ToString() + " of " + std::string(DTypeName(dtype)));
    if (bytes <= kLimit) {
      EXPECT_OK(s);
      EXPECT_EQ(spec.columns[0].step_bytes(), static_cast<size_t>(bytes));
      ++accepted;
    } else {
      EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
      EXPECT_THAT(s.message(), HasSubstr("column 'obs' "));
      if (bytes >= (static_cast<unsigned __int128>(1) << 64)) {
        EXPECT_THAT(s.message(), HasSubstr("overflow 64 bits"));
      } else {
        EXPECT_THAT(s.message(), HasSubstr("needs " + std::to_string(static_cast<uint64_t>(bytes)) +
                                           " bytes per step"));
      }
      ++rejected;
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, 0);
}

// Capacities near the top of int64 once wrapped to negative step counts.
TEST(TableSpecTest, HugeCapacitiesNameTheRealCause) {
  TableSpec spec = Good();
  spec.capacity_steps = std::numeric_limits<int64_t>::max();
  ExpectInvalid(spec,
                "table 'good': capacity_steps 9223372036854775807 needs 144115188075855872 blocks "
                "of 64 steps, more than the limit of 268435456 blocks; lower capacity_steps or "
                "raise block_steps");
  spec.capacity_steps = 0;
  spec.capacity_bytes = std::numeric_limits<int64_t>::max();  // blocks of 64 x 20 bytes
  ExpectInvalid(spec,
                "table 'good': capacity_bytes 9223372036854775807 makes 7205759403792793 blocks of "
                "1280 bytes, more than the limit of 268435456 blocks; lower capacity_bytes or "
                "raise block_steps");
  // Fresh random capacities: accepted exactly when the blocks fit, and no
  // message shows a negative number.
  std::mt19937_64 rng(testing_util::TestSeed());
  for (int trial = 0; trial < 1000; ++trial) {
    spec = Good();
    spec.block_steps = 1 + static_cast<int64_t>(rng() % 65536);
    spec.capacity_steps =
        static_cast<int64_t>(rng() >> (1 + rng() % 63));  // in [0, 2^63), any magnitude
    if (spec.capacity_steps == 0) spec.capacity_steps = 1;
    const int64_t blocks = spec.capacity_steps / spec.block_steps +
                           (spec.capacity_steps % spec.block_steps != 0 ? 1 : 0);
    const Status s = spec.Validate();
    SCOPED_TRACE("capacity_steps " + std::to_string(spec.capacity_steps) + ", block_steps " +
                 std::to_string(spec.block_steps));
    if (blocks <= (int64_t{1} << 28)) {
      EXPECT_OK(s);
    } else {
      EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
      EXPECT_THAT(s.message(), HasSubstr("needs " + std::to_string(blocks) + " blocks"));
      EXPECT_THAT(s.message(), ::testing::Not(HasSubstr("-")));
    }
  }
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
