// D4rlReader: columns, values, trajectories and every kind of bad file, on
// files written with fresh random data by tests/utilities/d4rl/d4rl_test_file.h.
#include "utilities/d4rl/d4rl_hdf5.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "tests/utilities/d4rl/d4rl_test_file.h"
#include "tests/test_util.h"

namespace replaydb::engine {

void PrintTo(const D4rlTrajectory& t, std::ostream* os) {
  *os << "{" << t.first_step << ", " << t.length << ", " << EndReasonName(t.end_reason) << "}";
}

namespace {

using ::testing::HasSubstr;
using testing_util::BoolDataset;
using testing_util::D4rlTestDataset;
using testing_util::D4rlTestShape;
using testing_util::FindDataset;
using testing_util::H5TestType;
using testing_util::RandomD4rlDatasets;
using testing_util::RandomDataset;
using testing_util::RemoveDataset;
using testing_util::TempDir;
using testing_util::TestSeed;
using testing_util::WriteD4rlTestFile;

constexpr DType kSupported[] = {DType::kBool, DType::kU8,  DType::kI8,  DType::kI16, DType::kI32,
                                DType::kI64,  DType::kF16, DType::kF32, DType::kF64};

class D4rlReaderTest : public ::testing::Test {
 protected:
  D4rlReaderTest() : rng_(TestSeed()) {}

  // Writes `datasets` to a fresh file in the temporary directory; its path.
  std::string Write(const std::vector<D4rlTestDataset>& datasets) {
    const std::string path = dir_.Sub("data" + std::to_string(files_++) + ".h5");
    const Status s = WriteD4rlTestFile(path, datasets);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return path;
  }

  // Opens a file expected to be rejected; its Status.
  Status OpenError(const std::string& path) {
    auto reader = D4rlReader::Open(path);
    EXPECT_FALSE(reader.ok()) << "opened " << path;
    return reader.ok() ? Status::OK() : reader.status();
  }
  Status OpenError(const std::vector<D4rlTestDataset>& datasets) {
    return OpenError(Write(datasets));
  }

  int64_t Steps() { return std::uniform_int_distribution<int64_t>(1, 300)(rng_); }

  TempDir dir_;
  std::mt19937_64 rng_;
  int files_ = 0;
};

// The index of the column named `name`, or columns().size().
size_t ColumnIndex(const D4rlReader& reader, const std::string& name) {
  size_t c = 0;
  while (c < reader.columns().size() && reader.columns()[c].name != name) ++c;
  return c;
}

// Reads steps [first, first + count) of `column` and checks them, element by
// element, against the same steps of `expected`'s data.
void ExpectSteps(const D4rlReader& reader, size_t column, const D4rlTestDataset& expected,
                 int64_t first, int64_t count) {
  ASSERT_LT(column, reader.columns().size()) << expected.path;
  const size_t step_bytes = reader.step_bytes(column);
  const size_t element = DTypeSize(reader.columns()[column].dtype);
  std::vector<std::byte> got(static_cast<size_t>(count) * step_bytes + 1, std::byte{0xAB});
  ASSERT_OK(reader.Read(column, first, count, got.data()));
  EXPECT_EQ(got.back(), std::byte{0xAB}) << expected.path << ": Read wrote past its range";
  const std::byte* want = expected.data.data() + static_cast<size_t>(first) * step_bytes;
  const size_t elements = static_cast<size_t>(count) * step_bytes / element;
  int mismatches = 0;
  for (size_t i = 0; i < elements && mismatches < 5; ++i) {
    if (std::memcmp(got.data() + i * element, want + i * element, element) != 0) {
      ++mismatches;
      ADD_FAILURE() << expected.path << " (" << DTypeName(reader.columns()[column].dtype)
                    << "): element " << i << " of steps [" << first << ", " << first + count
                    << ") differs";
    }
  }
}

// The trajectories D4RL's rules give for these terminals and timeouts.
std::vector<D4rlTrajectory> ReferenceCut(const std::vector<uint8_t>& terminals,
                                         const std::vector<uint8_t>& timeouts) {
  std::vector<D4rlTrajectory> out;
  int64_t start = 0;
  const auto n = static_cast<int64_t>(terminals.size());
  for (int64_t i = 0; i < n; ++i) {
    if (terminals[i] != 0) {
      out.push_back({start, i + 1 - start, EndReason::kTerminal});
      start = i + 1;
    } else if (timeouts[i] != 0) {
      out.push_back({start, i + 1 - start, EndReason::kTruncated});
      start = i + 1;
    }
  }
  if (start < n) out.push_back({start, n - start, EndReason::kTruncated});
  return out;
}

std::vector<uint8_t> Values(const D4rlTestDataset& d) {
  std::vector<uint8_t> v(d.data.size());
  std::memcpy(v.data(), d.data.data(), v.size());
  return v;
}

// ------------------------------------------------------------------ values

TEST_F(D4rlReaderTest, ColumnsOfAPlainFile) {
  const int64_t n = Steps();
  auto datasets = RandomD4rlDatasets({.steps = n, .obs_dim = 11, .action_dim = 3}, rng_);
  ASSERT_OK_AND_ASSIGN(auto reader, D4rlReader::Open(Write(datasets)));
  EXPECT_EQ(reader->num_steps(), n);
  const auto& cols = reader->columns();
  ASSERT_EQ(cols.size(), 5u);
  const char* names[] = {"observations", "actions", "rewards", "terminals", "timeouts"};
  const DType dtypes[] = {DType::kF32, DType::kF32, DType::kF32, DType::kBool, DType::kBool};
  const Shape shapes[] = {Shape{11}, Shape{3}, Shape{}, Shape{}, Shape{}};
  for (size_t c = 0; c < 5; ++c) {
    EXPECT_EQ(cols[c].name, names[c]);
    EXPECT_EQ(cols[c].dataset, names[c]);
    EXPECT_EQ(cols[c].dtype, dtypes[c]) << names[c];
    EXPECT_EQ(cols[c].shape, shapes[c]) << names[c] << " " << cols[c].shape.ToString();
    EXPECT_EQ(reader->step_bytes(c), DTypeSize(dtypes[c]) * shapes[c].num_elements());
    ExpectSteps(*reader, c, datasets[c], 0, n);
  }
}

// Every supported dtype, stored little- and big-endian, contiguous and
// chunked with deflate, read back value by value.
TEST_F(D4rlReaderTest, EveryDtypeRoundTrips) {
  const int64_t n = Steps();
  const auto un = static_cast<uint64_t>(n);
  auto datasets = RandomD4rlDatasets({.steps = n}, rng_);
  std::vector<std::string> paths;
  for (DType dtype : kSupported) {
    for (bool big_endian : {false, true}) {
      for (bool deflate : {false, true}) {
        const std::string path = std::string("x/") + std::string(DTypeName(dtype)) +
                                 (big_endian ? "_be" : "_le") + (deflate ? "_z" : "");
        D4rlTestDataset d = RandomDataset(path, dtype, {un, 3, 2}, rng_);
        d.big_endian = big_endian;
        d.deflate = deflate;
        d.chunk_steps = deflate ? 7 : 0;
        datasets.push_back(std::move(d));
        D4rlTestDataset scalar = RandomDataset(path + "_scalar", dtype, {un}, rng_);
        scalar.big_endian = big_endian;
        datasets.push_back(std::move(scalar));
      }
    }
  }
  ASSERT_OK_AND_ASSIGN(auto reader, D4rlReader::Open(Write(datasets)));
  ASSERT_EQ(reader->columns().size(), datasets.size());
  for (const D4rlTestDataset& d : datasets) {
    std::string name = d.path;
    std::replace(name.begin(), name.end(), '/', '.');
    const size_t c = ColumnIndex(*reader, name);
    ASSERT_LT(c, reader->columns().size()) << name;
    const D4rlColumn& col = reader->columns()[c];
    EXPECT_EQ(col.dataset, d.path);
    EXPECT_EQ(col.dtype, d.dtype) << d.path;
    EXPECT_EQ(col.shape, Shape::FromSpan(std::vector<int64_t>(d.dims.begin() + 1, d.dims.end())))
        << d.path;
    ExpectSteps(*reader, c, d, 0, n);
  }
}

TEST_F(D4rlReaderTest, ImageObservationsAndIntegerActions) {
  const int64_t n = Steps();
  const auto un = static_cast<uint64_t>(n);
  auto datasets = RandomD4rlDatasets({.steps = n}, rng_);
  FindDataset(datasets, "observations") =
      RandomDataset("observations", DType::kU8, {un, 8, 8, 3}, rng_);
  FindDataset(datasets, "actions") = RandomDataset("actions", DType::kI64, {un}, rng_);
  FindDataset(datasets, "rewards") = RandomDataset("rewards", DType::kF64, {un, 1}, rng_);
  ASSERT_OK_AND_ASSIGN(auto reader, D4rlReader::Open(Write(datasets)));
  EXPECT_EQ(reader->columns()[0].shape, (Shape{8, 8, 3}));
  EXPECT_EQ(reader->columns()[0].dtype, DType::kU8);
  EXPECT_EQ(reader->columns()[1].dtype, DType::kI64);
  EXPECT_EQ(reader->columns()[2].dtype, DType::kF64);
  for (size_t c = 0; c < 5; ++c) ExpectSteps(*reader, c, datasets[c], 0, n);
}

// rewards, terminals and timeouts may be [N] (shape {}) or [N, 1] (shape
// {1}); the values and trajectories are the same.
TEST_F(D4rlReaderTest, ScalarsAsNOrNBy1) {
  const int64_t n = Steps();
  for (bool column : {false, true}) {
    SCOPED_TRACE(column ? "[N, 1]" : "[N]");
    auto datasets = RandomD4rlDatasets({.steps = n, .terminal_probability = 0.1}, rng_);
    D4rlTestDataset& rewards = FindDataset(datasets, "rewards");
    if (column) rewards.dims.push_back(1);
    const auto terminals = Values(FindDataset(datasets, "terminals"));
    const auto timeouts = Values(FindDataset(datasets, "timeouts"));
    FindDataset(datasets, "terminals") = BoolDataset("terminals", terminals, DType::kBool, column);
    FindDataset(datasets, "timeouts") = BoolDataset("timeouts", timeouts, DType::kBool, column);
    ASSERT_OK_AND_ASSIGN(auto reader, D4rlReader::Open(Write(datasets)));
    const Shape want = column ? Shape{1} : Shape{};
    for (size_t c = 2; c < 5; ++c) {
      EXPECT_EQ(reader->columns()[c].shape, want) << reader->columns()[c].name;
      EXPECT_EQ(reader->step_bytes(c), DTypeSize(reader->columns()[c].dtype));
      ExpectSteps(*reader, c, datasets[c], 0, n);
    }
    EXPECT_EQ(reader->trajectories(), ReferenceCut(terminals, timeouts));
  }
}

// Extras anywhere in the file are columns named by path, after the required
// ones, in path order; everything under /metadata is skipped, whatever it
// holds.
TEST_F(D4rlReaderTest, ExtrasInGroupsAndMetadataSkipped) {
  const int64_t n = Steps();
  const auto un = static_cast<uint64_t>(n);
  auto datasets = RandomD4rlDatasets({.steps = n}, rng_);
  datasets.push_back(RandomDataset("zeta", DType::kF32, {un}, rng_));
  datasets.push_back(RandomDataset("infos/qvel", DType::kF64, {un, 6}, rng_));
  datasets.push_back(RandomDataset("infos/qpos", DType::kF64, {un, 7}, rng_));
  datasets.push_back(RandomDataset("infos/action_log_probs", DType::kF32, {un}, rng_));
  datasets.push_back(RandomDataset("a/b/c", DType::kI32, {un, 2}, rng_));
  datasets.push_back(RandomDataset("infos/goal_reached", DType::kBool, {un}, rng_));
  // What D4RL and others keep in /metadata: strings, scalars, weights of
  // another length, types no column can hold.
  D4rlTestDataset algorithm;
  algorithm.path = "metadata/algorithm";
  algorithm.type = H5TestType::kVarString;
  algorithm.strings = {"SAC"};
  datasets.push_back(algorithm);
  D4rlTestDataset name;
  name.path = "metadata/name";
  name.type = H5TestType::kFixedString;
  name.string_size = 16;
  name.dims = {1};
  datasets.push_back(name);
  datasets.push_back(RandomDataset("metadata/policy/fc0/weight", DType::kF32, {un + 3, 4}, rng_));
  datasets.push_back(RandomDataset("metadata/iteration", DType::kI64, {}, rng_));
  D4rlTestDataset compound;
  compound.path = "metadata/deep/er/compound";
  compound.type = H5TestType::kCompound;
  compound.dims = {2};
  datasets.push_back(compound);

  ASSERT_OK_AND_ASSIGN(auto reader, D4rlReader::Open(Write(datasets)));
  std::vector<std::string> names;
  for (const D4rlColumn& c : reader->columns()) names.push_back(c.name);
  EXPECT_THAT(names,
              ::testing::ElementsAre("observations", "actions", "rewards", "terminals", "timeouts",
                                     "a.b.c", "infos.action_log_probs", "infos.goal_reached",
                                     "infos.qpos", "infos.qvel", "zeta"));
  for (size_t c = 5; c < reader->columns().size(); ++c) {
    const D4rlColumn& col = reader->columns()[c];
    const D4rlTestDataset& d = FindDataset(datasets, col.dataset);
    EXPECT_EQ(col.dtype, d.dtype) << col.name;
    ExpectSteps(*reader, c, d, 0, n);
  }
  EXPECT_EQ(reader->columns()[ColumnIndex(*reader, "infos.qpos")].shape, Shape{7});
}

// Random terminal and timeout patterns (both on one step included), stored
// as h5py's bool, u8 or i8, [N] or [N, 1].
TEST_F(D4rlReaderTest, TrajectoriesFollowTerminalsAndTimeouts) {
  for (int round = 0; round < 40; ++round) {
    const int64_t n = round == 0 ? 1 : Steps();
    const double p = std::uniform_real_distribution<double>(0, 0.5)(rng_);
    auto datasets =
        RandomD4rlDatasets({.steps = n, .terminal_probability = p, .timeout_probability = p}, rng_);
    const DType stored[] = {DType::kBool, DType::kU8, DType::kI8};
    const DType terminal_type = stored[rng_() % 3], timeout_type = stored[rng_() % 3];
    const bool column = rng_() % 2 == 0;
    std::vector<uint8_t> terminals = Values(FindDataset(datasets, "terminals"));
    std::vector<uint8_t> timeouts = Values(FindDataset(datasets, "timeouts"));
    if (rng_() % 2 == 0) terminals.back() = 1;  // sometimes the file ends on an end
    FindDataset(datasets, "terminals") = BoolDataset("terminals", terminals, terminal_type, column);
    FindDataset(datasets, "timeouts") = BoolDataset("timeouts", timeouts, timeout_type, column);
    SCOPED_TRACE("round " + std::to_string(round) + ": N " + std::to_string(n) + ", terminals " +
                 std::string(DTypeName(terminal_type)) + ", timeouts " +
                 std::string(DTypeName(timeout_type)) + (column ? ", [N, 1]" : ", [N]"));
    ASSERT_OK_AND_ASSIGN(auto reader, D4rlReader::Open(Write(datasets)));
    const auto& got = reader->trajectories();
    EXPECT_EQ(got, ReferenceCut(terminals, timeouts));
    int64_t next = 0;
    for (const D4rlTrajectory& t : got) {
      EXPECT_EQ(t.first_step, next);
      EXPECT_GT(t.length, 0);
      next += t.length;
    }
    EXPECT_EQ(next, n);
    EXPECT_EQ(reader->columns()[3].dtype, DType::kBool);
    EXPECT_EQ(reader->columns()[4].dtype, DType::kBool);
    ExpectSteps(*reader, 3, FindDataset(datasets, "terminals"), 0, n);
  }
}

TEST_F(D4rlReaderTest, TrajectoryEdgeCases) {
  struct Case {
    std::vector<uint8_t> terminals, timeouts;
    std::vector<D4rlTrajectory> want;
  };
  const EndReason kT = EndReason::kTerminal, kX = EndReason::kTruncated;
  const std::vector<Case> cases = {
      {{0}, {0}, {{0, 1, kX}}},
      {{1}, {0}, {{0, 1, kT}}},
      {{0}, {1}, {{0, 1, kX}}},
      {{1}, {1}, {{0, 1, kT}}},  // terminal wins
      {{0, 0, 0}, {0, 0, 0}, {{0, 3, kX}}},
      {{1, 1, 1}, {0, 0, 0}, {{0, 1, kT}, {1, 1, kT}, {2, 1, kT}}},
      {{0, 1, 0, 0}, {0, 0, 1, 0}, {{0, 2, kT}, {2, 1, kX}, {3, 1, kX}}},
      {{0, 0, 1}, {1, 0, 0}, {{0, 1, kX}, {1, 2, kT}}},
  };
  for (const Case& c : cases) {
    auto datasets = RandomD4rlDatasets({.steps = static_cast<int64_t>(c.terminals.size())}, rng_);
    FindDataset(datasets, "terminals") = BoolDataset("terminals", c.terminals);
    FindDataset(datasets, "timeouts") = BoolDataset("timeouts", c.timeouts);
    ASSERT_OK_AND_ASSIGN(auto reader, D4rlReader::Open(Write(datasets)));
    EXPECT_EQ(reader->trajectories(), c.want);
  }
}

// More steps than Open reads at a time while cutting (2^20), with ends on
// both sides of the boundary.
TEST_F(D4rlReaderTest, TrajectoriesAcrossReadBatches) {
  const int64_t n = (int64_t{1} << 20) + 1000;
  const auto un = static_cast<uint64_t>(n);
  std::vector<uint8_t> terminals(un), timeouts(un);
  const int64_t boundary = int64_t{1} << 20;
  for (int64_t at : {int64_t{5}, boundary - 1, boundary, boundary + 7}) terminals[at] = 1;
  for (int64_t at : {int64_t{1000}, boundary - 2, boundary + 7}) timeouts[at] = 1;
  std::vector<D4rlTestDataset> datasets = {
      RandomDataset("observations", DType::kF32, {un}, rng_),
      RandomDataset("actions", DType::kI8, {un}, rng_),
      RandomDataset("rewards", DType::kF32, {un}, rng_),
      BoolDataset("terminals", terminals, DType::kU8),
      BoolDataset("timeouts", timeouts, DType::kBool, /*column=*/true)};
  datasets[4].chunk_steps = 4096;
  datasets[4].deflate = true;
  ASSERT_OK_AND_ASSIGN(auto reader, D4rlReader::Open(Write(datasets)));
  EXPECT_EQ(reader->trajectories(), ReferenceCut(terminals, timeouts));
  ExpectSteps(*reader, 4, datasets[4], boundary - 10, 20);
}

// ------------------------------------------------------------------- Read

TEST_F(D4rlReaderTest, ReadSubRanges) {
  const int64_t n = std::uniform_int_distribution<int64_t>(50, 300)(rng_);
  const auto un = static_cast<uint64_t>(n);
  auto datasets = RandomD4rlDatasets({.steps = n, .obs_dim = 5}, rng_);
  D4rlTestDataset chunked = RandomDataset("infos/chunked", DType::kF16, {un, 2, 3}, rng_);
  chunked.chunk_steps = 9;
  chunked.deflate = true;
  chunked.big_endian = true;
  datasets.push_back(std::move(chunked));
  ASSERT_OK_AND_ASSIGN(auto reader, D4rlReader::Open(Write(datasets)));
  for (int i = 0; i < 200; ++i) {
    const size_t c = rng_() % datasets.size();
    const int64_t first = std::uniform_int_distribution<int64_t>(0, n)(rng_);
    const int64_t count = std::uniform_int_distribution<int64_t>(0, n - first)(rng_);
    ExpectSteps(*reader, c, FindDataset(datasets, reader->columns()[c].dataset), first, count);
  }
  // Whole file in steps of one, as a slow import would.
  for (int64_t s = 0; s < n; ++s) ExpectSteps(*reader, 5, datasets[5], s, 1);
  ExpectSteps(*reader, 0, datasets[0], n - 1, 1);
  ExpectSteps(*reader, 0, datasets[0], 0, 0);
  ExpectSteps(*reader, 0, datasets[0], n, 0);
}

TEST_F(D4rlReaderTest, ConcurrentReads) {
  const int64_t n = 2000;
  auto datasets = RandomD4rlDatasets({.steps = n, .obs_dim = 17}, rng_);
  datasets[0].chunk_steps = 64;
  datasets[0].deflate = true;
  ASSERT_OK_AND_ASSIGN(auto reader, D4rlReader::Open(Write(datasets)));
  ASSERT_OK_AND_ASSIGN(auto second, D4rlReader::Open(Write(datasets)));
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const D4rlReader& r = t % 2 == 0 ? *reader : *second;
      const size_t c = static_cast<size_t>(t % 2);
      std::vector<std::byte> buf(r.step_bytes(c) * 100);
      for (int64_t first = 0; first < n; first += 100) {
        if (!r.Read(c, first, 100, buf.data()).ok() ||
            std::memcmp(buf.data(), datasets[c].data.data() + first * r.step_bytes(c),
                        buf.size()) != 0) {
          ++failures[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

TEST_F(D4rlReaderTest, ReadOutOfRange) {
  const int64_t n = 40;
  const std::string path = Write(RandomD4rlDatasets({.steps = n}, rng_));
  ASSERT_OK_AND_ASSIGN(auto reader, D4rlReader::Open(path));
  std::vector<std::byte> buf(4096);
  struct Bad {
    size_t column;
    int64_t first, count;
  };
  const std::vector<Bad> bads = {{0, 30, 11},
                                 {1, 41, 0},
                                 {0, -1, 1},
                                 {0, 0, -1},
                                 {0, 1, std::numeric_limits<int64_t>::max()},
                                 {0, std::numeric_limits<int64_t>::max(), 1}};
  for (const Bad& b : bads) {
    const Status s = reader->Read(b.column, b.first, b.count, buf.data());
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("'" + path + "'"));
    EXPECT_THAT(s.message(), HasSubstr("from step " + std::to_string(b.first)));
    EXPECT_THAT(s.message(), HasSubstr("out of range; the file has 40 steps"));
  }
  const Status s = reader->Read(5, 0, 1, buf.data());
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("column 5, but the file has 5 columns"));
}

// A bool extra is checked as it is read, not at Open.
TEST_F(D4rlReaderTest, BadBoolExtraFailsTheRead) {
  const int64_t n = 50;
  auto datasets = RandomD4rlDatasets({.steps = n}, rng_);
  std::vector<uint8_t> flags(n, 0);
  flags[33] = 7;
  datasets.push_back(BoolDataset("infos/flag", flags));
  const std::string path = Write(datasets);
  ASSERT_OK_AND_ASSIGN(auto reader, D4rlReader::Open(path));
  const size_t c = ColumnIndex(*reader, "infos.flag");
  ASSERT_EQ(reader->columns()[c].dtype, DType::kBool);
  std::vector<uint8_t> buf(n);
  EXPECT_OK(reader->Read(c, 0, 33, buf.data()));
  const Status s = reader->Read(c, 30, 10, buf.data());
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'" + path + "': dataset 'infos/flag' holds 7 at step 33"));
}

// ------------------------------------------------------------- bad files

TEST_F(D4rlReaderTest, MissingFile) {
  const std::string path = dir_.Sub("nope.h5");
  const Status s = OpenError(path);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("'" + path + "'"));
}

TEST_F(D4rlReaderTest, DirectoryIsNotAFile) {
  const Status s = OpenError(dir_.path());
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'" + dir_.path() + "': is a directory"));
}

TEST_F(D4rlReaderTest, NotAnHdf5File) {
  for (const std::string& contents :
       {std::string(), std::string("obs,act\n1,2\n"), std::string(4096, '\x89')}) {
    const std::string path = dir_.Sub("text" + std::to_string(files_++) + ".h5");
    std::ofstream(path, std::ios::binary) << contents;
    const Status s = OpenError(path);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("'" + path + "': not an HDF5 file"));
  }
}

TEST_F(D4rlReaderTest, TruncatedFile) {
  const std::string path = Write(RandomD4rlDatasets({.steps = 2000, .obs_dim = 20}, rng_));
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size / 2);
  const Status s = OpenError(path);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("'" + path + "': libhdf5 cannot open it: "));
  EXPECT_THAT(s.message(), HasSubstr("truncated"));
}

TEST_F(D4rlReaderTest, MissingRequiredDataset) {
  for (const char* name : {"observations", "actions", "rewards", "terminals", "timeouts"}) {
    auto datasets = RandomD4rlDatasets({.steps = Steps()}, rng_);
    RemoveDataset(datasets, name);
    const std::string path = Write(datasets);
    const Status s = OpenError(path);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("'" + path + "': no dataset '" + std::string(name) +
                                       "' at the root; a D4RL file needs observations, "
                                       "actions, rewards, terminals, timeouts"));
  }
  auto datasets = RandomD4rlDatasets({.steps = Steps()}, rng_);
  RemoveDataset(datasets, "rewards");
  RemoveDataset(datasets, "timeouts");
  EXPECT_THAT(OpenError(datasets).message(), HasSubstr("no datasets 'rewards', 'timeouts'"));
}

TEST_F(D4rlReaderTest, RequiredNameIsAGroup) {
  const int64_t n = Steps();
  auto datasets = RandomD4rlDatasets({.steps = n}, rng_);
  RemoveDataset(datasets, "observations");
  datasets.push_back(RandomDataset("observations/pixels", DType::kU8, {uint64_t(n), 4}, rng_));
  const std::string path = Write(datasets);
  const Status s = OpenError(path);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'" + path + "': 'observations' is a group"));
}

TEST_F(D4rlReaderTest, InconsistentLengths) {
  const std::string shorter[] = {"actions", "rewards", "terminals", "timeouts", "infos/qpos"};
  for (const std::string& name : shorter) {
    auto datasets = RandomD4rlDatasets({.steps = 1000}, rng_);
    datasets.push_back(RandomDataset("infos/qpos", DType::kF64, {1000, 3}, rng_));
    D4rlTestDataset& d = FindDataset(datasets, name);
    std::vector<uint64_t> dims = d.dims;
    dims[0] = 999;
    d = name == "terminals" || name == "timeouts" ? BoolDataset(name, std::vector<uint8_t>(999))
                                                  : RandomDataset(name, d.dtype, dims, rng_);
    const std::string path = Write(datasets);
    const Status s = OpenError(path);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("'" + path + "': dataset '" + name +
                                       "' has 999 steps, 'observations' has 1000"));
  }
}

TEST_F(D4rlReaderTest, NoSteps) {
  std::vector<D4rlTestDataset> datasets = {RandomDataset("observations", DType::kF32, {0, 3}, rng_),
                                           RandomDataset("actions", DType::kF32, {0, 2}, rng_),
                                           RandomDataset("rewards", DType::kF32, {0}, rng_),
                                           BoolDataset("terminals", {}),
                                           BoolDataset("timeouts", {})};
  const std::string path = Write(datasets);
  const Status s = OpenError(path);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'" + path + "': dataset 'observations' has no steps"));
}

TEST_F(D4rlReaderTest, UnsupportedTypes) {
  struct Case {
    H5TestType type;
    DType dtype;
    std::string described;
  };
  const std::vector<Case> cases = {
      {H5TestType::kU16, DType::kF32, "u16"},
      {H5TestType::kU32, DType::kF32, "u32"},
      {H5TestType::kU64, DType::kF32, "u64"},
      {H5TestType::kFixedString, DType::kF32, "string (8 bytes)"},
      {H5TestType::kVarString, DType::kF32, "string (variable length)"},
      {H5TestType::kCompound, DType::kF32, "compound {a, b}"},
      {H5TestType::kEnum, DType::kF32, "enum {RED, GREEN, BLUE} over i8"},
      {H5TestType::kNumeric, DType::kBF16, "16-bit float not in IEEE binary16 layout"},
  };
  for (const std::string where : {"infos/bad", "actions"}) {
    for (const Case& c : cases) {
      const int64_t n = Steps();
      auto datasets = RandomD4rlDatasets({.steps = n}, rng_);
      RemoveDataset(datasets, where);
      D4rlTestDataset bad;
      bad.path = where;
      bad.type = c.type;
      bad.dtype = c.dtype;
      bad.dims = {static_cast<uint64_t>(n), 2};
      datasets.push_back(bad);
      const std::string path = Write(datasets);
      const Status s = OpenError(path);
      EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
      EXPECT_THAT(s.message(), HasSubstr("'" + path + "': dataset '" + where +
                                         "' has unsupported type " + c.described));
      EXPECT_THAT(s.message(), HasSubstr("supported: f16, f32"));
    }
  }
}

TEST_F(D4rlReaderTest, TerminalsMustBeBoolish) {
  for (const char* name : {"terminals", "timeouts"}) {
    for (DType dtype : {DType::kF32, DType::kI32, DType::kF64}) {
      const int64_t n = Steps();
      auto datasets = RandomD4rlDatasets({.steps = n}, rng_);
      FindDataset(datasets, name) = RandomDataset(name, dtype, {static_cast<uint64_t>(n)}, rng_);
      const std::string path = Write(datasets);
      const Status s = OpenError(path);
      EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
      EXPECT_THAT(s.message(), HasSubstr("'" + path + "': dataset '" + std::string(name) +
                                         "' has type " + std::string(DTypeName(dtype)) +
                                         "; terminals and timeouts must be bool"));
    }
  }
}

TEST_F(D4rlReaderTest, BadTerminalValues) {
  struct Case {
    const char* name;
    DType stored;
    bool column;
    int64_t step;
    uint8_t raw;
    std::string shown;
  };
  const std::vector<Case> cases = {
      {"terminals", DType::kBool, false, 17, 2, "2"},
      {"terminals", DType::kU8, true, 0, 255, "255"},
      {"timeouts", DType::kI8, false, 99, 0xff, "-1"},
      {"timeouts", DType::kBool, true, 42, 0x80, "-128"},
  };
  for (const Case& c : cases) {
    auto datasets = RandomD4rlDatasets({.steps = 100}, rng_);
    std::vector<uint8_t> values = Values(FindDataset(datasets, c.name));
    values[c.step] = c.raw;
    FindDataset(datasets, c.name) = BoolDataset(c.name, values, c.stored, c.column);
    const std::string path = Write(datasets);
    const Status s = OpenError(path);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(s.message(),
                HasSubstr("'" + path + "': dataset '" + std::string(c.name) + "' holds " + c.shown +
                          " at step " + std::to_string(c.step) + "; a bool must be 0 or 1"));
  }
}

TEST_F(D4rlReaderTest, ScalarDatasets) {
  for (const std::string name : {"rewards", "observations", "infos/scalar"}) {
    auto datasets = RandomD4rlDatasets({.steps = Steps()}, rng_);
    RemoveDataset(datasets, name);
    datasets.push_back(RandomDataset(name, DType::kF32, {}, rng_));
    const std::string path = Write(datasets);
    const Status s = OpenError(path);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(s.message(),
                HasSubstr("'" + path + "': dataset '" + name + "' is a scalar (rank 0)"));
  }
}

TEST_F(D4rlReaderTest, BadShapes) {
  const int64_t n = 30;
  struct Case {
    std::string name;
    std::vector<uint64_t> dims;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"rewards", {30, 2}, "dataset 'rewards' has shape [30, 2]; expected [N] or [N, 1]"},
      {"rewards", {30, 1, 1}, "dataset 'rewards' has shape [30, 1, 1]; expected [N] or [N, 1]"},
      {"observations", {30, 0}, "dataset 'observations' has shape [30, 0]; every per-step dim"},
      {"infos/deep", {30, 1, 1, 1, 1, 1, 1, 1, 1, 1}, "dataset 'infos/deep' has rank 10"},
  };
  for (const Case& c : cases) {
    auto datasets = RandomD4rlDatasets({.steps = n}, rng_);
    RemoveDataset(datasets, c.name);
    datasets.push_back(RandomDataset(c.name, DType::kF32, c.dims, rng_));
    const std::string path = Write(datasets);
    const Status s = OpenError(path);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("'" + path + "': " + c.message));
  }
  // Nine dims (steps and eight per step) are fine.
  auto datasets = RandomD4rlDatasets({.steps = n}, rng_);
  datasets.push_back(RandomDataset("infos/deep", DType::kF32, {30, 1, 2, 1, 2, 1, 2, 1, 2}, rng_));
  ASSERT_OK_AND_ASSIGN(auto reader, D4rlReader::Open(Write(datasets)));
  EXPECT_EQ(reader->columns()[5].shape, (Shape{1, 2, 1, 2, 1, 2, 1, 2}));
  ExpectSteps(*reader, 5, datasets[5], 3, 20);
}

TEST_F(D4rlReaderTest, ColumnNameCollision) {
  const int64_t n = Steps();
  auto datasets = RandomD4rlDatasets({.steps = n}, rng_);
  datasets.push_back(RandomDataset("a.b", DType::kF32, {static_cast<uint64_t>(n)}, rng_));
  datasets.push_back(RandomDataset("a/b", DType::kF32, {static_cast<uint64_t>(n)}, rng_));
  const std::string path = Write(datasets);
  EXPECT_THAT(OpenError(path).message(),
              HasSubstr("'" + path + "': datasets 'a.b' and 'a/b' both map to column 'a.b'"));
}

// h5py's lzf filter is not part of libhdf5: such a file fails at Open, not
// halfway through an import.
TEST_F(D4rlReaderTest, FilterThisLibhdf5Lacks) {
  const int64_t n = Steps();
  auto datasets = RandomD4rlDatasets({.steps = n}, rng_);
  D4rlTestDataset& actions = FindDataset(datasets, "actions");
  actions.unavailable_filter = 32000;
  actions.chunk_steps = 16;
  const std::string path = Write(datasets);
  const Status s = OpenError(path);
  EXPECT_EQ(s.code(), Status::Code::kNotSupported);
  EXPECT_THAT(s.message(), HasSubstr("'" + path +
                                     "': dataset 'actions' is compressed with HDF5 "
                                     "filter 32000 ('lzf'), which this build of libhdf5 does "
                                     "not have"));
}

// A writer (h5py, say) holds libhdf5's exclusive lock on the file while it
// is open; libhdf5 takes it with flock(), which this test takes in its place.
TEST_F(D4rlReaderTest, FileLockedByAWriter) {
  if (const char* env = std::getenv("HDF5_USE_FILE_LOCKING"); env && std::string(env) == "FALSE") {
    GTEST_SKIP() << "HDF5_USE_FILE_LOCKING=FALSE: libhdf5 takes no lock";
  }
  const std::string path = Write(RandomD4rlDatasets({.steps = Steps()}, rng_));
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const Status s = OpenError(path);
  EXPECT_EQ(s.code(), Status::Code::kBusy) << s.ToString();
  EXPECT_THAT(s.message(),
              HasSubstr("'" + path + "': a writer holds it open (libhdf5's file lock"));
  ::close(fd);
  EXPECT_TRUE(D4rlReader::Open(path).ok());
}

// libhdf5 prints its error stack to stderr by default; the reader must not.
TEST_F(D4rlReaderTest, NothingOnStderr) {
  const std::string text = dir_.Sub("text.h5");
  std::ofstream(text) << "not hdf5";
  const std::string truncated = Write(RandomD4rlDatasets({.steps = 500}, rng_));
  std::filesystem::resize_file(truncated, std::filesystem::file_size(truncated) / 2);
  auto datasets = RandomD4rlDatasets({.steps = 10}, rng_);
  RemoveDataset(datasets, "rewards");
  const std::string missing = Write(datasets);
  ::testing::internal::CaptureStderr();
  for (const std::string& path : {text, truncated, missing, dir_.Sub("absent.h5")}) {
    EXPECT_FALSE(D4rlReader::Open(path).ok()) << path;
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "");
}

}  // namespace
}  // namespace replaydb::engine
