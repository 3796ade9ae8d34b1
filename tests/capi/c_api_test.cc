// The C API (include/replaydb/c.h) from a caller's side: databases and
// tables through handles; fresh random steps of every dtype and several
// shapes written (one step, many steps, vector steps) and read back (sample,
// lookup) byte for byte; batch fields and reference counts (a batch outlives
// its table handle and the database); priority updates; table info against
// the C++ API's TableInfo for the same operations; spec JSON; read-only
// opens; and every error a caller can cause, with its message. The GPU paths
// compare device batches with the host path byte for byte and skip, naming
// the reason, where no GPU can be used.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "replaydb/c.h"
#include "replaydb/db.h"
#include "replaydb/device.h"
#include "replaydb/server.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;
using testing_util::TempDir;

// ------------------------------------------------------------ helpers

// Owning wrappers, so that a failed assertion leaks no handle.
template <auto Destroy>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    Destroy(p);
  }
};
using DbPtr = std::unique_ptr<replaydb_db_t, Deleter<replaydb_close>>;
using OptionsPtr = std::unique_ptr<replaydb_options_t, Deleter<replaydb_options_destroy>>;
using SpecPtr = std::unique_ptr<replaydb_table_spec_t, Deleter<replaydb_table_spec_destroy>>;
using TablePtr = std::unique_ptr<replaydb_table_t, Deleter<replaydb_table_release>>;
using WriterPtr = std::unique_ptr<replaydb_writer_t, Deleter<replaydb_writer_destroy>>;
using VectorWriterPtr =
    std::unique_ptr<replaydb_vector_writer_t, Deleter<replaydb_vector_writer_destroy>>;
using BatchPtr = std::unique_ptr<replaydb_batch_t, Deleter<replaydb_batch_release>>;
using SamplerPtr = std::unique_ptr<replaydb_sampler_t, Deleter<replaydb_sampler_destroy>>;

// An errptr: holds the message of the last failure.
class Error {
 public:
  Error() = default;
  Error(const Error&) = delete;
  Error& operator=(const Error&) = delete;
  ~Error() { replaydb_free(message_); }
  char** ptr() { return &message_; }
  const char* get() const { return message_; }
  std::string str() const { return message_ != nullptr ? message_ : ""; }
  void Clear() {
    replaydb_free(message_);
    message_ = nullptr;
  }

 private:
  char* message_ = nullptr;
};

// Both expect an Error named err_ in scope.
#define C_ASSERT_OK(call)                                                                          \
  do {                                                                                             \
    const int _rc = (call);                                                                        \
    ASSERT_EQ(_rc, REPLAYDB_OK) << #call << ": " << replaydb_code_name(_rc) << ": " << err_.str(); \
  } while (0)
// The call fails with `code` and a message that contains `text`.
#define C_EXPECT_ERROR(call, code, text)                                                      \
  do {                                                                                        \
    err_.Clear();                                                                             \
    const int _rc = (call);                                                                   \
    EXPECT_EQ(_rc, code) << #call << " -> " << replaydb_code_name(_rc) << ": " << err_.str(); \
    EXPECT_THAT(err_.str(), HasSubstr(text)) << #call;                                        \
  } while (0)

// C tensors over C++ ones (which own nothing either): dims copied, data
// shared.
struct CTensors {
  std::vector<std::vector<int64_t>> dims;
  std::vector<replaydb_tensor_t> tensors;
};

CTensors ToC(std::span<const ConstTensor> tensors) {
  CTensors c;
  for (const ConstTensor& t : tensors) {
    c.dims.emplace_back(t.shape.dims().begin(), t.shape.dims().end());
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ConstTensor& t = tensors[i];
    c.tensors.push_back(
        {static_cast<int>(t.dtype), t.shape.rank(), c.dims[i].data(), t.data, t.size_bytes});
  }
  return c;
}

// A C spec with every field of `spec` that the tests vary.
SpecPtr ToCSpec(const TableSpec& spec) {
  SpecPtr s(replaydb_table_spec_create(spec.name.c_str()));
  for (const ColumnSpec& col : spec.columns) {
    const std::vector<int64_t> dims(col.shape.dims().begin(), col.shape.dims().end());
    EXPECT_EQ(replaydb_table_spec_add_column(s.get(), col.name.c_str(), static_cast<int>(col.dtype),
                                             col.shape.rank(), dims.data(), nullptr),
              REPLAYDB_OK)
        << col.name;
  }
  replaydb_table_spec_set_capacity_steps(s.get(), spec.capacity_steps);
  replaydb_table_spec_set_capacity_bytes(s.get(), spec.capacity_bytes);
  replaydb_table_spec_set_block_steps(s.get(), spec.block_steps);
  replaydb_table_spec_set_sequence_length(s.get(), spec.sequence_length);
  replaydb_table_spec_set_priority_exponent(s.get(), spec.priority_exponent);
  replaydb_table_spec_set_priority_device(s.get(), spec.priority_device);
  replaydb_table_spec_set_max_times_sampled(s.get(), spec.max_times_sampled);
  replaydb_table_spec_set_spill(s.get(), spec.spill ? 1 : 0);
  replaydb_table_spec_set_rotation(s.get(), spec.rotation_fraction, spec.rotation_every_samples);
  replaydb_table_spec_set_lanes(s.get(), spec.lanes);
  const RateLimiterSpec& r = spec.rate_limiter;
  replaydb_table_spec_set_rate_limiter(s.get(), r.samples_per_insert, r.min_size_to_sample,
                                       r.min_diff, r.max_diff);
  EXPECT_EQ(replaydb_table_spec_set_padding(s.get(), std::string(PaddingName(spec.padding)).c_str(),
                                            nullptr),
            REPLAYDB_OK);
  EXPECT_EQ(replaydb_table_spec_set_selector(
                s.get(), std::string(SelectorKindName(spec.selector)).c_str(), nullptr),
            REPLAYDB_OK);
  EXPECT_EQ(replaydb_table_spec_set_eviction(
                s.get(), std::string(EvictionPolicyName(spec.eviction)).c_str(), nullptr),
            REPLAYDB_OK);
  EXPECT_EQ(replaydb_table_spec_set_step_priority(
                s.get(), std::string(StepPriorityName(spec.step_priority)).c_str(), nullptr),
            REPLAYDB_OK);
  EXPECT_EQ(replaydb_table_spec_set_placement(s.get(), spec.placement.ToString().c_str(), nullptr),
            REPLAYDB_OK);
  EXPECT_EQ(replaydb_table_spec_set_logging(
                s.get(), std::string(TableLoggingName(spec.logging)).c_str(), nullptr),
            REPLAYDB_OK);
  return s;
}

// A table of 1 to 4 columns of random dtypes (every dtype can come up) and
// shapes of rank 0 to 3, random block size, window length and padding.
TableSpec RandomSpec(const std::string& name, std::mt19937_64& rng) {
  TableSpec spec;
  spec.name = name;
  const int num_columns = 1 + static_cast<int>(rng() % 4);
  for (int c = 0; c < num_columns; ++c) {
    const auto dtype = static_cast<DType>(rng() % kNumDTypes);
    std::vector<int64_t> dims(rng() % 4);
    for (auto& d : dims) d = 1 + static_cast<int64_t>(rng() % 5);
    spec.columns.push_back({"c" + std::to_string(c) + "_" + std::string(DTypeName(dtype)), dtype,
                            Shape::FromSpan(dims)});
  }
  spec.capacity_steps = 4096;
  spec.block_steps = 1 + static_cast<int64_t>(rng() % 8);
  spec.sequence_length = 1 + static_cast<int64_t>(rng() % 4);
  spec.padding = rng() % 2 ? Padding::kTail : Padding::kNone;
  return spec;
}

// The steps written, by trajectory id.
using Written = std::map<uint64_t, std::vector<testing_util::StepData>>;

// Every live item of `written` (all trajectories ended).
std::vector<ItemKey> AllItems(const TableSpec& spec, const Written& written) {
  std::vector<ItemKey> keys;
  for (const auto& [id, steps] : written) {
    const auto length = static_cast<int64_t>(steps.size());
    const int64_t items = spec.padding == Padding::kTail
                              ? length
                              : std::max<int64_t>(0, length - spec.sequence_length + 1);
    for (int64_t s = 0; s < items; ++s) keys.push_back(MakeItemKey(id, s));
  }
  return keys;
}

std::string Describe(const replaydb_array_t& a) {
  std::string s = std::string(replaydb_dtype_name(a.dtype)) + "[";
  for (int d = 0; d < a.ndim; ++d) s += (d ? ", " : "") + std::to_string(a.dims[d]);
  return s + "] " + std::to_string(a.nbytes) + " bytes on " + std::to_string(a.device);
}

// The field `name` of `batch`, which must exist, with the dtype and dims
// given and nbytes to match.
replaydb_array_t Field(const replaydb_batch_t* batch, const std::string& name, int dtype,
                       const std::vector<int64_t>& dims, int device = -1) {
  Error err_;
  replaydb_array_t a;
  std::memset(&a, 0xCD, sizeof a);
  const int rc = replaydb_batch_field(batch, name.c_str(), &a, err_.ptr());
  EXPECT_EQ(rc, REPLAYDB_OK) << name << ": " << err_.str();
  if (rc != REPLAYDB_OK) return {};
  const std::vector<int64_t> got(a.dims, a.dims + std::clamp(a.ndim, 0, REPLAYDB_MAX_DIMS));
  EXPECT_EQ(a.dtype, dtype) << name << ": " << Describe(a);
  EXPECT_EQ(got, dims) << name << ": " << Describe(a);
  size_t elements = 1;
  for (int64_t d : dims) elements *= static_cast<size_t>(d);
  EXPECT_EQ(a.nbytes, elements * replaydb_dtype_size(dtype)) << name;
  EXPECT_EQ(a.device, device) << name;
  EXPECT_TRUE(a.data != nullptr) << name;
  return a;
}

std::vector<std::string> FieldNames(const replaydb_batch_t* batch) {
  char** names = nullptr;
  size_t count = 0;
  Error err_;
  EXPECT_EQ(replaydb_batch_field_names(batch, &names, &count, err_.ptr()), REPLAYDB_OK)
      << err_.str();
  std::vector<std::string> out(names, names + count);
  replaydb_free_strings(names, count);
  return out;
}

std::vector<int64_t> Dims(int64_t b, int64_t l, const Shape& shape) {
  std::vector<int64_t> dims = {b, l};
  dims.insert(dims.end(), shape.dims().begin(), shape.dims().end());
  return dims;
}

// Column `c` of item `key`'s window as written: L steps, zeros past the end
// of its trajectory; `mask` gets 1 for a real step.
std::vector<std::byte> ExpectedWindow(const TableSpec& spec, const Written& written, ItemKey key,
                                      size_t c, std::vector<uint8_t>* mask) {
  const size_t step_bytes = spec.columns[c].step_bytes();
  const int64_t L = spec.sequence_length;
  std::vector<std::byte> bytes(step_bytes * L, std::byte{0});
  mask->assign(L, 0);
  auto it = written.find(ItemKeyTrajectory(key));
  if (it == written.end()) {
    ADD_FAILURE() << "key " << key << " names no trajectory that was written";
    return bytes;
  }
  for (int64_t l = 0; l < L; ++l) {
    const auto step = static_cast<size_t>(ItemKeyStart(key) + l);
    if (step >= it->second.size()) break;
    std::memcpy(bytes.data() + l * step_bytes, it->second[step].columns[c].data(), step_bytes);
    (*mask)[l] = 1;
  }
  return bytes;
}

// Host batch `batch` holds, for its keys, exactly the windows written: every
// column byte for byte (host or device copies given as `columns`), and the
// mask.
void ExpectWindows(const TableSpec& spec, const Written& written, const std::vector<ItemKey>& keys,
                   const std::vector<std::vector<std::byte>>& columns,
                   const std::vector<uint8_t>& mask, const std::string& what) {
  const int64_t L = spec.sequence_length;
  ASSERT_EQ(columns.size(), spec.columns.size());
  ASSERT_EQ(mask.size(), keys.size() * L) << what;
  for (size_t b = 0; b < keys.size(); ++b) {
    for (size_t c = 0; c < spec.columns.size(); ++c) {
      std::vector<uint8_t> want_mask;
      const std::vector<std::byte> want = ExpectedWindow(spec, written, keys[b], c, &want_mask);
      ASSERT_EQ(columns[c].size(), keys.size() * want.size()) << what;
      ASSERT_EQ(std::memcmp(columns[c].data() + b * want.size(), want.data(), want.size()), 0)
          << what << ": item " << b << " (key " << keys[b] << ") column " << spec.columns[c].name
          << " differs from what was written";
      ASSERT_EQ(std::vector<uint8_t>(mask.begin() + b * L, mask.begin() + (b + 1) * L), want_mask)
          << what << ": mask of item " << b;
    }
  }
}

// The columns, keys and mask of a host batch, checking their fields' dtypes
// and dims on the way.
struct HostCopy {
  std::vector<std::vector<std::byte>> columns;
  std::vector<ItemKey> keys;
  std::vector<uint8_t> mask;
};

HostCopy ReadHostBatch(const replaydb_batch_t* batch, const TableSpec& spec) {
  HostCopy copy;
  const int64_t B = replaydb_batch_size(batch);
  const int64_t L = replaydb_batch_sequence_length(batch);
  EXPECT_EQ(L, spec.sequence_length);
  EXPECT_EQ(replaydb_batch_device(batch), -1);
  for (const ColumnSpec& col : spec.columns) {
    const replaydb_array_t a =
        Field(batch, col.name, static_cast<int>(col.dtype), Dims(B, L, col.shape));
    const auto* p = static_cast<const std::byte*>(a.data);
    copy.columns.emplace_back(p, p + a.nbytes);
  }
  const replaydb_array_t keys = Field(batch, "keys", REPLAYDB_U64, {B});
  copy.keys.assign(static_cast<const uint64_t*>(keys.data),
                   static_cast<const uint64_t*>(keys.data) + B);
  const replaydb_array_t mask = Field(batch, "mask", REPLAYDB_U8, {B, L});
  copy.mask.assign(static_cast<const uint8_t*>(mask.data),
                   static_cast<const uint8_t*>(mask.data) + B * L);
  return copy;
}

// ---------------------------------------------------------------- JSON

// replaydb_table_spec_json's text ("" for NULL, which fails the test).
std::string SpecText(const replaydb_table_spec_t* spec) {
  std::unique_ptr<char, Deleter<replaydb_free>> text(replaydb_table_spec_json(spec));
  EXPECT_TRUE(text != nullptr);
  return text == nullptr ? std::string() : std::string(text.get());
}

// The spec's JSON, parsed strictly (RFC 8259; malformed text fails the test
// and gives null). Members keep the order of the text.
Json SpecJson(const replaydb_table_spec_t* spec) {
  const std::string text = SpecText(spec);
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "malformed JSON: " << text;
  return j.is_discarded() ? Json() : j;
}

std::vector<std::string> Keys(const Json& object) {
  std::vector<std::string> keys;
  for (const auto& member : object.items()) keys.push_back(member.key());
  return keys;
}

// The text std::to_chars writes for `v`: the shortest that reads back.
std::string ShortestText(double v) {
  char text[64];
  return std::string(text, std::to_chars(text, text + sizeof text, v).ptr);
}

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---------------------------------------------------------------- fixture

class CApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    live_at_start_ = replaydb_live_batches();
    replaydb_db_t* db = nullptr;
    C_ASSERT_OK(replaydb_open(nullptr, dir_.path().c_str(), &db, err_.ptr()));
    db_.reset(db);
  }
  void TearDown() override {
    db_.reset();
    EXPECT_EQ(replaydb_live_batches(), live_at_start_) << "a batch was not released";
  }

  TablePtr CreateTable(const TableSpec& spec, replaydb_db_t* db = nullptr) {
    SpecPtr s = ToCSpec(spec);
    replaydb_table_t* table = nullptr;
    const int rc = replaydb_create_table(db ? db : db_.get(), s.get(), &table, err_.ptr());
    EXPECT_EQ(rc, REPLAYDB_OK) << spec.name << ": " << err_.str();
    return TablePtr(table);
  }

  // `trajectories` trajectories of 1 to max_length random steps through one
  // writer, each ended terminal, recorded in `written`. The last one is made
  // long enough for a window when none before it was (so that there is an
  // item to read whatever the spec's sequence length and padding).
  void WriteRandom(replaydb_table_t* table, const TableSpec& spec, int trajectories, int max_length,
                   Written* written) {
    replaydb_writer_t* w = nullptr;
    C_ASSERT_OK(replaydb_table_new_writer(table, 10000, 0, &w, err_.ptr()));
    WriterPtr writer(w);
    EXPECT_EQ(replaydb_writer_trajectory_id(writer.get()), 0u);
    for (int t = 0; t < trajectories; ++t) {
      int length = 1 + static_cast<int>(rng_() % max_length);
      if (t == trajectories - 1 && AllItems(spec, *written).empty()) {
        length = std::max(length, static_cast<int>(spec.sequence_length));
      }
      for (int i = 0; i < length; ++i) {
        testing_util::StepData step = testing_util::RandomStep(spec, rng_);
        const CTensors c = ToC(step.tensors);
        C_ASSERT_OK(replaydb_writer_append(writer.get(), c.tensors.data(), c.tensors.size(),
                                           nullptr, err_.ptr()));
        (*written)[replaydb_writer_trajectory_id(writer.get())].push_back(std::move(step));
      }
      EXPECT_EQ(replaydb_writer_num_steps(writer.get()), length);
      C_ASSERT_OK(replaydb_writer_end(writer.get(), REPLAYDB_TERMINAL, err_.ptr()));
    }
  }

  TempDir dir_;
  Error err_;
  DbPtr db_;
  int64_t live_at_start_ = 0;
  std::mt19937_64 rng_{testing_util::TestSeed()};
};

// ------------------------------------------------------------------ tests

TEST_F(CApiTest, VersionNamesAndDTypes) {
  EXPECT_STREQ(replaydb_version(), REPLAYDB_PROJECT_VERSION);
  for (int code = 0; code <= REPLAYDB_UNAVAILABLE; ++code) {
    EXPECT_EQ(replaydb_code_name(code), StatusCodeName(static_cast<Status::Code>(code)));
  }
  EXPECT_STREQ(replaydb_code_name(REPLAYDB_NOT_FOUND), "NotFound");
  EXPECT_STREQ(replaydb_code_name(-1), "invalid");
  EXPECT_STREQ(replaydb_code_name(REPLAYDB_UNAVAILABLE), "Unavailable");
  EXPECT_STREQ(replaydb_code_name(REPLAYDB_UNAVAILABLE + 1), "invalid");
  for (int d = 0; d < kNumDTypes; ++d) {
    EXPECT_EQ(replaydb_dtype_name(d), DTypeName(static_cast<DType>(d)));
    EXPECT_EQ(replaydb_dtype_size(d), DTypeSize(static_cast<DType>(d)));
    EXPECT_EQ(replaydb_dtype_from_name(replaydb_dtype_name(d)), d);
  }
  EXPECT_STREQ(replaydb_dtype_name(REPLAYDB_F32), "f32");
  EXPECT_STREQ(replaydb_dtype_name(REPLAYDB_U32), "u32");
  EXPECT_STREQ(replaydb_dtype_name(REPLAYDB_U64), "u64");
  EXPECT_EQ(replaydb_dtype_size(REPLAYDB_U32), 4u);
  EXPECT_EQ(replaydb_dtype_size(REPLAYDB_U64), 8u);
  EXPECT_EQ(replaydb_dtype_from_name("u32"), REPLAYDB_U32);
  EXPECT_EQ(replaydb_dtype_from_name("u64"), REPLAYDB_U64);
  for (int bad : {-1, kNumDTypes, 99, 102}) {
    EXPECT_STREQ(replaydb_dtype_name(bad), "invalid") << bad;
    EXPECT_EQ(replaydb_dtype_size(bad), 0u) << bad;
  }
  EXPECT_EQ(replaydb_dtype_from_name("f128"), -1);
  EXPECT_EQ(replaydb_dtype_from_name(""), -1);
  EXPECT_EQ(replaydb_dtype_from_name(nullptr), -1);
  EXPECT_EQ(replaydb_cuda_device_count(), CudaDeviceCount());
  EXPECT_EQ(MakeItemKey(3, 5) >> REPLAYDB_ITEM_KEY_START_BITS, 3u);
}

TEST_F(CApiTest, CreateGetListAndDropTables) {
  EXPECT_STREQ(replaydb_db_path(db_.get()), dir_.path().c_str());
  EXPECT_EQ(replaydb_db_read_only(db_.get()), 0);
  char** names = nullptr;
  size_t count = 99;
  C_ASSERT_OK(replaydb_list_tables(db_.get(), &names, &count, err_.ptr()));
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(names, nullptr);

  std::vector<std::string> made;
  for (int i = 0; i < 4; ++i)
    made.push_back("t" + std::to_string(rng_() % 1000000) + "_" + std::to_string(i));
  for (const std::string& name : made) {
    TablePtr table = CreateTable(RandomSpec(name, rng_));
    ASSERT_TRUE(table != nullptr);
    EXPECT_STREQ(replaydb_table_name(table.get()), name.c_str());
  }
  C_ASSERT_OK(replaydb_list_tables(db_.get(), &names, &count, err_.ptr()));
  std::vector<std::string> listed(names, names + count);
  replaydb_free_strings(names, count);
  std::sort(made.begin(), made.end());
  EXPECT_EQ(listed, made);

  replaydb_table_t* got = nullptr;
  C_ASSERT_OK(replaydb_get_table(db_.get(), made[2].c_str(), &got, err_.ptr()));
  TablePtr table(got);
  EXPECT_STREQ(replaydb_table_name(table.get()), made[2].c_str());
  SpecPtr duplicate = ToCSpec(RandomSpec(made[2], rng_));
  C_EXPECT_ERROR(replaydb_create_table(db_.get(), duplicate.get(), &got, err_.ptr()),
                 REPLAYDB_ALREADY_EXISTS,
                 "table '" + made[2] + "' already exists in " + dir_.path());
  EXPECT_EQ(got, nullptr) << "a failed call sets its handle to NULL";

  C_ASSERT_OK(replaydb_drop_table(db_.get(), made[0].c_str(), err_.ptr()));
  C_EXPECT_ERROR(replaydb_get_table(db_.get(), made[0].c_str(), &got, err_.ptr()),
                 REPLAYDB_NOT_FOUND, "no table named '" + made[0] + "' in " + dir_.path());
  C_EXPECT_ERROR(replaydb_drop_table(db_.get(), made[0].c_str(), err_.ptr()), REPLAYDB_NOT_FOUND,
                 "no table named '" + made[0] + "'");
  C_ASSERT_OK(replaydb_list_tables(db_.get(), &names, &count, err_.ptr()));
  EXPECT_EQ(count, made.size() - 1);
  replaydb_free_strings(names, count);
  // The handle of a dropped table fails, naming why.
  C_ASSERT_OK(replaydb_drop_table(db_.get(), made[2].c_str(), err_.ptr()));
  replaydb_writer_t* w = nullptr;
  C_EXPECT_ERROR(replaydb_table_new_writer(table.get(), 0, 0, &w, err_.ptr()),
                 REPLAYDB_FAILED_PRECONDITION, "table '" + made[2] + "' is dropped");
}

TEST_F(CApiTest, WritesReadBackByteForByteAcrossDTypesAndShapes) {
  for (int round = 0; round < 6; ++round) {
    const TableSpec spec = RandomSpec("r" + std::to_string(round), rng_);
    TablePtr table = CreateTable(spec);
    ASSERT_TRUE(table != nullptr);
    Written written;
    ASSERT_NO_FATAL_FAILURE(WriteRandom(table.get(), spec, 5, 12, &written));
    std::vector<ItemKey> all = AllItems(spec, written);
    ASSERT_FALSE(all.empty()) << "round " << round;
    std::string what = "round " + std::to_string(round) + " (L " +
                       std::to_string(spec.sequence_length) + ", " +
                       std::to_string(spec.columns.size()) + " columns)";

    // Lookup: every item, shuffled, some twice.
    std::vector<ItemKey> keys = all;
    keys.push_back(all[rng_() % all.size()]);
    std::shuffle(keys.begin(), keys.end(), rng_);
    replaydb_batch_t* b = nullptr;
    C_ASSERT_OK(replaydb_table_lookup(table.get(), keys.data(), keys.size(), &b, err_.ptr()));
    BatchPtr looked_up(b);
    EXPECT_EQ(replaydb_batch_size(looked_up.get()), static_cast<int64_t>(keys.size()));
    HostCopy copy = ReadHostBatch(looked_up.get(), spec);
    EXPECT_EQ(copy.keys, keys);
    ASSERT_NO_FATAL_FAILURE(
        ExpectWindows(spec, written, keys, copy.columns, copy.mask, what + " lookup"));

    // Sample: the keys drawn, read as written.
    const int64_t B = 1 + static_cast<int64_t>(rng_() % 40);
    replaydb_sample_options_t options;
    replaydb_sample_options_init(&options);
    options.timeout_ms = 5000;
    C_ASSERT_OK(replaydb_table_sample(table.get(), B, &options, &b, err_.ptr()));
    BatchPtr sampled(b);
    EXPECT_EQ(replaydb_batch_size(sampled.get()), B);
    copy = ReadHostBatch(sampled.get(), spec);
    for (ItemKey k : copy.keys) {
      EXPECT_TRUE(std::find(all.begin(), all.end(), k) != all.end()) << "drew key " << k;
    }
    ASSERT_NO_FATAL_FAILURE(
        ExpectWindows(spec, written, copy.keys, copy.columns, copy.mask, what + " sample"));
  }
}

// replaydb_connect: a database served by replaydb::Server (over UCX on
// 127.0.0.1) through the same calls, written and read back byte for byte.
TEST_F(CApiTest, AConnectedDatabaseWritesAndReadsAsALocalOne) {
  auto served = testing_util::OpenDB(dir_.Sub("served"));
  ServerOptions so;
  so.listen = "ucx://127.0.0.1:0";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Server> server, Server::Start(served.get(), so));
  replaydb_db_t* d = nullptr;
  C_ASSERT_OK(replaydb_connect(server->address().c_str(), "c api test", nullptr, 10000, &d,
                               err_.ptr()));
  DbPtr remote(d);
  EXPECT_EQ(std::string(replaydb_db_path(remote.get())), server->address());
  const TableSpec spec = RandomSpec("remote", rng_);
  TablePtr table = CreateTable(spec, remote.get());
  ASSERT_TRUE(table != nullptr);
  EXPECT_EQ(served->ListTables(), std::vector<std::string>{"remote"});
  Written written;
  ASSERT_NO_FATAL_FAILURE(WriteRandom(table.get(), spec, 4, 10, &written));
  std::vector<ItemKey> keys = AllItems(spec, written);
  ASSERT_FALSE(keys.empty());
  std::shuffle(keys.begin(), keys.end(), rng_);
  replaydb_batch_t* b = nullptr;
  C_ASSERT_OK(replaydb_table_lookup(table.get(), keys.data(), keys.size(), &b, err_.ptr()));
  BatchPtr looked_up(b);
  HostCopy copy = ReadHostBatch(looked_up.get(), spec);
  EXPECT_EQ(copy.keys, keys);
  ASSERT_NO_FATAL_FAILURE(
      ExpectWindows(spec, written, keys, copy.columns, copy.mask, "remote lookup"));
  replaydb_sample_options_t options;
  replaydb_sample_options_init(&options);
  options.timeout_ms = 5000;
  C_ASSERT_OK(replaydb_table_sample(table.get(), 8, &options, &b, err_.ptr()));
  BatchPtr sampled(b);
  copy = ReadHostBatch(sampled.get(), spec);
  ASSERT_NO_FATAL_FAILURE(
      ExpectWindows(spec, written, copy.keys, copy.columns, copy.mask, "remote sample"));
  replaydb_table_info_t info;
  C_ASSERT_OK(replaydb_table_info(table.get(), &info, err_.ptr()));
  ASSERT_OK_AND_ASSIGN(auto there, served->GetTable("remote"));
  EXPECT_EQ(info.num_steps, there->Info().num_steps);
  EXPECT_EQ(info.items_sampled, 8);
  double mass_total = 0;
  int64_t mass_items = 0;
  // Served (GetMass): what the server's table says.
  C_ASSERT_OK(replaydb_table_mass(table.get(), &mass_total, &mass_items, err_.ptr()));
  ASSERT_OK_AND_ASSIGN(const SamplingMass there_mass, there->Mass());
  EXPECT_EQ(mass_total, there_mass.total);
  EXPECT_EQ(mass_items, there_mass.items);
  EXPECT_GT(mass_items, 0);
  C_EXPECT_ERROR(replaydb_connect("ucx://127.0.0.1", nullptr, nullptr, 0, &d, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "is not ucx://HOST:PORT");
  C_EXPECT_ERROR(replaydb_connect(nullptr, nullptr, nullptr, 0, &d, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_connect: address is NULL");
  // A stopped server: every call says Unavailable, naming it.
  const std::string address = server->address();
  server.reset();
  C_EXPECT_ERROR(replaydb_table_sample(table.get(), 1, &options, &b, err_.ptr()),
                 REPLAYDB_UNAVAILABLE, address.substr(address.rfind(':')));
}

// replaydb_connect_with_options: every ConnectOptions field from C; the
// server sees the client's name, a heartbeat of the server's own interval
// keeps the connection, and out-of-range values are refused naming them.
TEST_F(CApiTest, ConnectOptionsFromCReachTheServerAndBadOnesAreNamed) {
  auto served = testing_util::OpenDB(dir_.Sub("served"));
  std::mutex mu;
  std::vector<std::string> lines;
  ServerOptions so;
  so.listen = "ucx://127.0.0.1:0";
  so.heartbeat = std::chrono::milliseconds(50 + static_cast<int64_t>(rng_() % 100));
  so.log = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(line);
  };
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Server> server, Server::Start(served.get(), so));
  const std::string name = "c options " + std::to_string(rng_() % 1000);
  std::unique_ptr<replaydb_connect_options_t, decltype(&replaydb_connect_options_destroy)> o(
      replaydb_connect_options_create(), &replaydb_connect_options_destroy);
  ASSERT_NE(o, nullptr);
  replaydb_connect_options_set_client_name(o.get(), name.c_str());
  replaydb_connect_options_set_connect_timeout_ms(o.get(), 10000);
  replaydb_connect_options_set_call_timeout_ms(o.get(), 20000);
  replaydb_connect_options_set_heartbeat_ms(o.get(), so.heartbeat.count());
  replaydb_connect_options_set_read_in_place(o.get(), 0, 0);
  replaydb_connect_options_set_skip_unavailable_shards(o.get(), 1);  // one server: no shards
  replaydb_connect_options_set_skip_unavailable_shards(nullptr, 1);  // a no-op
  replaydb_db_t* d = nullptr;
  C_ASSERT_OK(replaydb_connect_with_options(server->address().c_str(), o.get(), &d, err_.ptr()));
  DbPtr remote(d);
  const TableSpec spec = RandomSpec("opts", rng_);
  TablePtr table = CreateTable(spec, remote.get());
  ASSERT_TRUE(table != nullptr);
  // Well past the silence the server allows (ten intervals): still connected.
  std::this_thread::sleep_for(so.heartbeat * 15);
  replaydb_table_info_t info;
  C_ASSERT_OK(replaydb_table_info(table.get(), &info, err_.ptr()));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
      return l.find("'" + name + "'") != std::string::npos;
    })) << "the server never logged the client's name";
  }
  const auto silent_ends = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
      return l.find("nothing heard for") != std::string::npos;
    });
  };
  EXPECT_EQ(silent_ends(), 0);
  // A client without heartbeats (0) falls silent: the server ends it.
  replaydb_connect_options_set_heartbeat_ms(o.get(), 0);
  C_ASSERT_OK(replaydb_connect_with_options(server->address().c_str(), o.get(), &d, err_.ptr()));
  DbPtr quiet(d);
  const auto until = std::chrono::steady_clock::now() + so.heartbeat * 50;
  while (silent_ends() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(so.heartbeat);
  }
  EXPECT_EQ(silent_ends(), 1);
  quiet.reset();
  // NULL options: the defaults.
  C_ASSERT_OK(replaydb_connect_with_options(server->address().c_str(), nullptr, &d, err_.ptr()));
  DbPtr(d).reset();
  const struct {
    void (*set)(replaydb_connect_options_t*, int64_t);
    int64_t value;
    const char* message;
  } bad[] = {
      {replaydb_connect_options_set_connect_timeout_ms, 0,
       "ConnectOptions::connect_timeout is 0 ms; it must be more than 0"},
      {replaydb_connect_options_set_call_timeout_ms, -1 - static_cast<int64_t>(rng_() % 1000),
       "ConnectOptions::call_timeout is -"},
      {replaydb_connect_options_set_heartbeat_ms, -1 - static_cast<int64_t>(rng_() % 1000),
       "; it must be 0 (none) or more"},
  };
  for (const auto& b : bad) {
    std::unique_ptr<replaydb_connect_options_t, decltype(&replaydb_connect_options_destroy)> w(
        replaydb_connect_options_create(), &replaydb_connect_options_destroy);
    b.set(w.get(), b.value);
    C_EXPECT_ERROR(replaydb_connect_with_options(server->address().c_str(), w.get(), &d,
                                                 err_.ptr()),
                   REPLAYDB_INVALID_ARGUMENT, b.message);
    EXPECT_EQ(d, nullptr);
  }
  C_EXPECT_ERROR(replaydb_connect_with_options(nullptr, o.get(), &d, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_connect_with_options: address is NULL");
  C_EXPECT_ERROR(replaydb_connect_with_options(server->address().c_str(), o.get(), nullptr,
                                               err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_connect_with_options: db is NULL");
}

TEST_F(CApiTest, AppendManyAndVectorWritersReadBackAsWritten) {
  const TableSpec spec = RandomSpec("many", rng_);
  TablePtr table = CreateTable(spec);
  ASSERT_TRUE(table != nullptr);
  Written written;

  // AppendMany: n steps in one call, with priorities.
  replaydb_writer_t* w = nullptr;
  C_ASSERT_OK(replaydb_table_new_writer(table.get(), REPLAYDB_WAIT_FOREVER, 1, &w, err_.ptr()));
  WriterPtr writer(w);
  // At least sequence_length (<= 4) steps: one item even without padding
  // (the vector writer below may give none: one environment, ended every
  // third step).
  const int64_t n = 4 + static_cast<int64_t>(rng_() % 10);
  std::vector<testing_util::StepData> steps;
  for (int64_t i = 0; i < n; ++i) steps.push_back(testing_util::RandomStep(spec, rng_));
  std::vector<std::vector<std::byte>> stacked(spec.columns.size());
  std::vector<ConstTensor> many;
  for (size_t c = 0; c < spec.columns.size(); ++c) {
    for (const auto& s : steps)
      stacked[c].insert(stacked[c].end(), s.columns[c].begin(), s.columns[c].end());
    many.push_back({spec.columns[c].dtype, spec.columns[c].shape.Prepend(n), stacked[c].data(),
                    stacked[c].size()});
  }
  std::vector<double> priorities(n);
  for (auto& p : priorities) p = std::uniform_real_distribution<double>(0.5, 2)(rng_);
  const CTensors c_many = ToC(many);
  C_ASSERT_OK(replaydb_writer_append_many(writer.get(), c_many.tensors.data(),
                                          c_many.tensors.size(), priorities.data(),
                                          priorities.size(), err_.ptr()));
  EXPECT_EQ(replaydb_writer_num_steps(writer.get()), n);
  const uint64_t id = replaydb_writer_trajectory_id(writer.get());
  EXPECT_GT(id, 0u);
  C_ASSERT_OK(replaydb_writer_end(writer.get(), REPLAYDB_TRUNCATED, err_.ptr()));
  written[id] = std::move(steps);

  // A vector writer: N environments, one step each per call; environment 0
  // ends every third step.
  const size_t N = 1 + rng_() % 5;
  replaydb_vector_writer_t* vw = nullptr;
  C_ASSERT_OK(replaydb_table_new_vector_writer(table.get(), N, 10000, 0, 0, &vw, err_.ptr()));
  VectorWriterPtr vector_writer(vw);
  EXPECT_EQ(replaydb_vector_writer_num_envs(vector_writer.get()), N);
  EXPECT_EQ(replaydb_vector_writer_trajectory_id(vector_writer.get(), 0), 0u);
  EXPECT_EQ(replaydb_vector_writer_trajectory_id(vector_writer.get(), N), 0u);
  for (int t = 0; t < 7; ++t) {
    std::vector<testing_util::StepData> env_steps;
    std::vector<std::vector<std::byte>> columns(spec.columns.size());
    std::vector<ConstTensor> tensors;
    for (size_t e = 0; e < N; ++e) env_steps.push_back(testing_util::RandomStep(spec, rng_));
    for (size_t c = 0; c < spec.columns.size(); ++c) {
      for (const auto& s : env_steps)
        columns[c].insert(columns[c].end(), s.columns[c].begin(), s.columns[c].end());
      tensors.push_back({spec.columns[c].dtype,
                         spec.columns[c].shape.Prepend(static_cast<int64_t>(N)), columns[c].data(),
                         columns[c].size()});
    }
    const CTensors c = ToC(tensors);
    C_ASSERT_OK(replaydb_vector_writer_append(vector_writer.get(), c.tensors.data(),
                                              c.tensors.size(), nullptr, 0, err_.ptr()));
    for (size_t e = 0; e < N; ++e) {
      written[replaydb_vector_writer_trajectory_id(vector_writer.get(), e)].push_back(
          std::move(env_steps[e]));
    }
    if (t % 3 == 2) {
      C_ASSERT_OK(
          replaydb_vector_writer_end(vector_writer.get(), 0, REPLAYDB_TERMINAL, err_.ptr()));
    }
  }
  // The even environments one at a time, the odd ones (and a repeat) at once.
  std::vector<size_t> odd;
  for (size_t e = 0; e < N; ++e) {
    if (e % 2 == 0) {
      C_ASSERT_OK(
          replaydb_vector_writer_end(vector_writer.get(), e, REPLAYDB_TRUNCATED, err_.ptr()));
    } else {
      odd.push_back(e);
    }
  }
  if (!odd.empty()) odd.push_back(odd.front());
  C_ASSERT_OK(replaydb_vector_writer_end_many(vector_writer.get(), odd.data(), odd.size(),
                                              REPLAYDB_TRUNCATED, err_.ptr()));
  const std::vector<ItemKey> keys = AllItems(spec, written);
  ASSERT_FALSE(keys.empty());
  replaydb_batch_t* b = nullptr;
  C_ASSERT_OK(replaydb_table_lookup(table.get(), keys.data(), keys.size(), &b, err_.ptr()));
  BatchPtr batch(b);
  const HostCopy copy = ReadHostBatch(batch.get(), spec);
  ASSERT_NO_FATAL_FAILURE(ExpectWindows(spec, written, keys, copy.columns, copy.mask, "many"));
  // AppendMany's priorities became the priorities of the items starting there.
  const replaydb_array_t p =
      Field(batch.get(), "priorities", REPLAYDB_F64, {static_cast<int64_t>(keys.size())});
  for (size_t i = 0; i < keys.size(); ++i) {
    if (ItemKeyTrajectory(keys[i]) == id) {
      EXPECT_EQ(static_cast<const double*>(p.data)[i], priorities[ItemKeyStart(keys[i])]);
    }
  }
  replaydb_table_info_t info;
  C_ASSERT_OK(replaydb_table_info(table.get(), &info, err_.ptr()));
  int64_t total = 0;
  for (const auto& [tid, s] : written) total += static_cast<int64_t>(s.size());
  EXPECT_EQ(info.steps_inserted, total);
  EXPECT_EQ(info.num_trajectories, static_cast<int64_t>(written.size()));
  EXPECT_EQ(info.num_open_trajectories, 0);
}

TEST_F(CApiTest, BatchFieldsAndReferenceCounts) {
  TableSpec spec;
  spec.name = "fields";
  spec.columns = {{"obs", DType::kF32, Shape({3, 2})}, {"act", DType::kI64, Shape()}};
  spec.sequence_length = 2;
  spec.padding = Padding::kTail;
  spec.capacity_steps = 256;
  TablePtr table = CreateTable(spec);
  ASSERT_TRUE(table != nullptr);
  Written written;
  ASSERT_NO_FATAL_FAILURE(WriteRandom(table.get(), spec, 3, 6, &written));

  const int64_t start = replaydb_live_batches();
  replaydb_sample_options_t options;
  replaydb_sample_options_init(&options);
  EXPECT_EQ(options.timeout_ms, REPLAYDB_WAIT_FOREVER);
  EXPECT_EQ(options.importance_beta, -1);
  EXPECT_EQ(options.stratified, 0);
  EXPECT_EQ(options.gather, 1);
  EXPECT_EQ(options.peek, 0);
  EXPECT_EQ(options.weight_normalization, REPLAYDB_WEIGHTS_BUFFER);
  options.importance_beta = 0.4;
  const int64_t B = 5;
  {
    replaydb_sample_options_t bad = options;
    bad.weight_normalization = -1;
    replaydb_batch_t* none = nullptr;
    C_EXPECT_ERROR(replaydb_table_sample(table.get(), B, &bad, &none, err_.ptr()),
                   REPLAYDB_INVALID_ARGUMENT,
                   "replaydb_table_sample: options->weight_normalization is -1; use "
                   "REPLAYDB_WEIGHTS_BUFFER (0) or REPLAYDB_WEIGHTS_BATCH (1)");
    EXPECT_EQ(none, nullptr);
    bad.weight_normalization = REPLAYDB_WEIGHTS_BATCH;
    C_ASSERT_OK(replaydb_table_sample(table.get(), B, &bad, &none, err_.ptr()));
    replaydb_batch_release(none);
  }
  replaydb_batch_t* b = nullptr;
  C_ASSERT_OK(replaydb_table_sample(table.get(), B, &options, &b, err_.ptr()));
  EXPECT_EQ(replaydb_live_batches(), start + 1);
  EXPECT_EQ(FieldNames(b),
            (std::vector<std::string>{"obs", "act", "keys", "probabilities", "weights", "mask",
                                      "priorities", "times_sampled"}));
  Field(b, "obs", REPLAYDB_F32, {B, 2, 3, 2});
  Field(b, "act", REPLAYDB_I64, {B, 2});
  Field(b, "probabilities", REPLAYDB_F64, {B});
  const replaydb_array_t weights = Field(b, "weights", REPLAYDB_F64, {B});
  for (int64_t i = 0; i < B; ++i) {
    const double w = static_cast<const double*>(weights.data)[i];
    EXPECT_TRUE(w > 0 && w <= 1) << w;
  }
  Field(b, "priorities", REPLAYDB_F64, {B});
  const replaydb_array_t times = Field(b, "times_sampled", REPLAYDB_U32, {B});
  for (int64_t i = 0; i < B; ++i) EXPECT_GE(static_cast<const uint32_t*>(times.data)[i], 1u);
  replaydb_array_t a;
  C_EXPECT_ERROR(replaydb_batch_field(b, "reward", &a, err_.ptr()), REPLAYDB_NOT_FOUND,
                 "replaydb_batch_field: the batch has no field 'reward' (it has obs, act, keys, "
                 "probabilities, weights, mask, priorities, times_sampled)");

  // Retained twice, released three times: gone only after the last.
  replaydb_batch_retain(b);
  replaydb_batch_retain(b);
  replaydb_batch_release(b);
  replaydb_batch_release(b);
  EXPECT_EQ(replaydb_live_batches(), start + 1);
  const HostCopy copy = ReadHostBatch(b, spec);  // still readable (ASan checks)
  ASSERT_NO_FATAL_FAILURE(ExpectWindows(spec, written, copy.keys, copy.columns, copy.mask, "kept"));
  replaydb_batch_release(b);
  EXPECT_EQ(replaydb_live_batches(), start);

  // Without gather or weights: no columns, no weights.
  options.gather = 0;
  options.importance_beta = -1;
  C_ASSERT_OK(replaydb_table_sample(table.get(), B, &options, &b, err_.ptr()));
  BatchPtr keys_only(b);
  EXPECT_EQ(FieldNames(b), (std::vector<std::string>{"keys", "probabilities", "mask", "priorities",
                                                     "times_sampled"}));
  C_EXPECT_ERROR(replaydb_batch_field(b, "obs", &a, err_.ptr()), REPLAYDB_NOT_FOUND,
                 "the batch has no field 'obs'");
  C_EXPECT_ERROR(replaydb_batch_field(b, "weights", &a, err_.ptr()), REPLAYDB_NOT_FOUND,
                 "the batch has no field 'weights'");
  keys_only.reset();

  // Peek draws without counting.
  replaydb_table_info_t before, after;
  C_ASSERT_OK(replaydb_table_info(table.get(), &before, err_.ptr()));
  options.gather = 1;
  options.peek = 1;
  C_ASSERT_OK(replaydb_table_sample(table.get(), B, &options, &b, err_.ptr()));
  replaydb_batch_release(b);
  C_ASSERT_OK(replaydb_table_info(table.get(), &after, err_.ptr()));
  EXPECT_EQ(after.items_sampled, before.items_sampled);
  EXPECT_EQ(replaydb_live_batches(), start);

  // NULL handles: no-ops and neutral answers.
  replaydb_batch_retain(nullptr);
  replaydb_batch_release(nullptr);
  EXPECT_EQ(replaydb_batch_size(nullptr), 0);
  EXPECT_EQ(replaydb_batch_sequence_length(nullptr), 0);
  EXPECT_EQ(replaydb_batch_device(nullptr), -1);
}

// dlpack.h's unversioned layout, written out from the specification here so
// that the test checks the library's against it.
struct TestDLTensor {
  void* data;
  int32_t device_type;
  int32_t device_id;
  int32_t ndim;
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct TestDLManagedTensor {
  TestDLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(TestDLManagedTensor*);
};

TEST_F(CApiTest, DLPackTensorsHoldTheBatchUntilTheirDeleter) {
  TableSpec spec;
  spec.name = "dl";
  spec.columns = {{"obs", DType::kF32, Shape({2, 3})}, {"done", DType::kBool, Shape()}};
  spec.sequence_length = 1 + static_cast<int64_t>(rng_() % 3);
  spec.capacity_steps = 256;
  TablePtr table = CreateTable(spec);
  ASSERT_TRUE(table != nullptr);
  Written written;
  ASSERT_NO_FATAL_FAILURE(WriteRandom(table.get(), spec, 3, 6, &written));
  const int64_t start = replaydb_live_batches();
  const int64_t B = 1 + static_cast<int64_t>(rng_() % 16);
  replaydb_batch_t* b = nullptr;
  C_ASSERT_OK(replaydb_table_sample(table.get(), B, nullptr, &b, err_.ptr()));
  const struct {
    const char* name;
    uint8_t code, bits;
    std::vector<int64_t> dims;
  } cases[] = {{"obs", 2, 32, {B, spec.sequence_length, 2, 3}},
               {"done", 6, 8, {B, spec.sequence_length}},
               {"keys", 1, 64, {B}},
               {"probabilities", 2, 64, {B}},
               {"times_sampled", 1, 32, {B}}};
  std::vector<TestDLManagedTensor*> tensors;
  for (const auto& c : cases) {
    void* out = nullptr;
    C_ASSERT_OK(replaydb_batch_dlpack(b, c.name, &out, err_.ptr()));
    auto* t = static_cast<TestDLManagedTensor*>(out);
    replaydb_array_t a;
    C_ASSERT_OK(replaydb_batch_field(b, c.name, &a, err_.ptr()));
    EXPECT_EQ(t->dl_tensor.data, a.data) << c.name << ": the batch's memory, no copy";
    EXPECT_EQ(t->dl_tensor.device_type, 1) << c.name;  // kDLCPU
    EXPECT_EQ(t->dl_tensor.code, c.code) << c.name;
    EXPECT_EQ(t->dl_tensor.bits, c.bits) << c.name;
    EXPECT_EQ(t->dl_tensor.lanes, 1) << c.name;
    EXPECT_EQ(t->dl_tensor.strides, nullptr) << c.name;
    EXPECT_EQ(t->dl_tensor.byte_offset, 0u) << c.name;
    ASSERT_EQ(t->dl_tensor.ndim, static_cast<int32_t>(c.dims.size())) << c.name;
    EXPECT_EQ(std::vector<int64_t>(t->dl_tensor.shape, t->dl_tensor.shape + t->dl_tensor.ndim),
              c.dims)
        << c.name;
    tensors.push_back(t);
  }
  // The batch's own reference goes; the tensors keep its memory.
  const HostCopy copy = ReadHostBatch(b, spec);
  replaydb_batch_release(b);
  EXPECT_EQ(replaydb_live_batches(), start + 1);
  const float* obs = static_cast<const float*>(tensors[0]->dl_tensor.data);
  EXPECT_EQ(std::memcmp(obs, copy.columns[0].data(), copy.columns[0].size()), 0);
  // Each deleter gives one reference back; the last frees the batch.
  for (TestDLManagedTensor* t : tensors) {
    EXPECT_EQ(replaydb_live_batches(), start + 1);
    t->deleter(t);
  }
  EXPECT_EQ(replaydb_live_batches(), start);

  C_ASSERT_OK(replaydb_table_sample(table.get(), 1, nullptr, &b, err_.ptr()));
  BatchPtr batch(b);
  void* out = &out;
  C_EXPECT_ERROR(replaydb_batch_dlpack(b, "reward", &out, err_.ptr()), REPLAYDB_NOT_FOUND,
                 "replaydb_batch_dlpack: the batch has no field 'reward' (it has obs, done, keys");
  EXPECT_EQ(out, nullptr) << "set to NULL on failure";
  C_EXPECT_ERROR(replaydb_batch_dlpack(nullptr, "obs", &out, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_batch_dlpack: batch is NULL");
  C_EXPECT_ERROR(replaydb_batch_dlpack(b, nullptr, &out, err_.ptr()), REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_batch_dlpack: name is NULL");
  C_EXPECT_ERROR(replaydb_batch_dlpack(b, "obs", nullptr, err_.ptr()), REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_batch_dlpack: managed_tensor is NULL");
  // Outside a Python process the capsule destructor has no capsules to read:
  // it does nothing (and must not crash).
  int not_a_capsule = 0;
  replaydb_dlpack_capsule_destructor(&not_a_capsule);
  replaydb_dlpack_capsule_destructor(nullptr);
  EXPECT_EQ(replaydb_live_batches(), start + 1);
}

// A batch keeps its memory: it outlives its table handle, the table and the
// database, and batches released from other threads are counted right.
TEST_F(CApiTest, BatchOutlivesTableHandleAndClose) {
  TableSpec spec = RandomSpec("outlive", rng_);
  spec.padding = Padding::kTail;  // an item per step: short trajectories still give some
  TablePtr table = CreateTable(spec);
  ASSERT_TRUE(table != nullptr);
  Written written;
  ASSERT_NO_FATAL_FAILURE(WriteRandom(table.get(), spec, 4, 10, &written));
  const int64_t start = replaydb_live_batches();
  std::vector<replaydb_batch_t*> batches;
  for (int i = 0; i < 6; ++i) {
    replaydb_batch_t* b = nullptr;
    C_ASSERT_OK(replaydb_table_sample(table.get(), 8, nullptr, &b, err_.ptr()));
    batches.push_back(b);
  }
  EXPECT_EQ(replaydb_live_batches(), start + 6);
  table.reset();
  db_.reset();  // replaydb_close
  for (replaydb_batch_t* b : batches) {
    const HostCopy copy = ReadHostBatch(b, spec);
    ASSERT_NO_FATAL_FAILURE(
        ExpectWindows(spec, written, copy.keys, copy.columns, copy.mask, "after close"));
  }
  std::vector<std::thread> releasers;
  for (replaydb_batch_t* b : batches) {
    replaydb_batch_retain(b);
    releasers.emplace_back([b] { replaydb_batch_release(b); });
    replaydb_batch_release(b);
  }
  for (auto& t : releasers) t.join();
  EXPECT_EQ(replaydb_live_batches(), start);
}

TEST_F(CApiTest, PriorityUpdatesCountUpdatedAndSkipped) {
  TableSpec spec;
  spec.name = "prio";
  spec.columns = {{"x", DType::kU8, Shape({2})}};
  spec.selector = SelectorKind::kPrioritized;
  spec.capacity_steps = 1024;
  TablePtr table = CreateTable(spec);
  ASSERT_TRUE(table != nullptr);
  Written written;
  ASSERT_NO_FATAL_FAILURE(WriteRandom(table.get(), spec, 4, 20, &written));
  const std::vector<ItemKey> live = AllItems(spec, written);
  std::vector<ItemKey> keys = live;
  std::vector<double> priorities(keys.size());
  for (auto& p : priorities) p = std::uniform_real_distribution<double>(0.1, 10)(rng_);
  // Keys that are not items: skipped, counted.
  const size_t stale = 1 + rng_() % 4;
  for (size_t i = 0; i < stale; ++i) {
    keys.push_back(MakeItemKey(1000 + i, 0));
    priorities.push_back(1);
  }
  // A repeated key: the last one wins.
  keys.push_back(live[0]);
  priorities.push_back(42.5);
  int64_t updated = -1, skipped = -1;
  C_ASSERT_OK(replaydb_table_update_priorities(table.get(), keys.data(), priorities.data(),
                                               keys.size(), &updated, &skipped, err_.ptr()));
  EXPECT_EQ(updated, static_cast<int64_t>(live.size()) + 1);
  EXPECT_EQ(skipped, static_cast<int64_t>(stale));
  C_ASSERT_OK(replaydb_table_update_priorities(table.get(), keys.data(), priorities.data(),
                                               keys.size(), nullptr, nullptr, err_.ptr()));
  replaydb_table_info_t info;
  C_ASSERT_OK(replaydb_table_info(table.get(), &info, err_.ptr()));
  EXPECT_EQ(info.priority_updates, 2 * (static_cast<int64_t>(live.size()) + 1));
  EXPECT_EQ(info.priority_updates_skipped, 2 * static_cast<int64_t>(stale));
  EXPECT_EQ(info.max_priority_seen, *std::max_element(priorities.begin(), priorities.end()));

  replaydb_batch_t* b = nullptr;
  C_ASSERT_OK(replaydb_table_lookup(table.get(), live.data(), live.size(), &b, err_.ptr()));
  BatchPtr batch(b);
  const replaydb_array_t got =
      Field(batch.get(), "priorities", REPLAYDB_F64, {static_cast<int64_t>(live.size())});
  EXPECT_EQ(static_cast<const double*>(got.data)[0], 42.5);
  for (size_t i = 1; i < live.size(); ++i) {
    EXPECT_EQ(static_cast<const double*>(got.data)[i], priorities[i]) << "item " << i;
  }

  // Only one item with a priority above 0: every draw is that item.
  std::vector<double> zeros(live.size(), 0.0);
  const size_t chosen = rng_() % live.size();
  zeros[chosen] = 3;
  C_ASSERT_OK(replaydb_table_update_priorities(table.get(), live.data(), zeros.data(), live.size(),
                                               nullptr, nullptr, err_.ptr()));
  C_ASSERT_OK(replaydb_table_sample(table.get(), 32, nullptr, &b, err_.ptr()));
  batch.reset(b);
  const replaydb_array_t drawn = Field(batch.get(), "keys", REPLAYDB_U64, {32});
  for (int i = 0; i < 32; ++i) EXPECT_EQ(static_cast<const uint64_t*>(drawn.data)[i], live[chosen]);

  // A bad priority: nothing is applied.
  const double bad = -1;
  C_EXPECT_ERROR(replaydb_table_update_priorities(table.get(), live.data(), &bad, 1, &updated,
                                                  &skipped, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "table 'prio': UpdatePriorities priority -1.000000 for key " +
                     std::to_string(live[0]) + " (index 0) is invalid");
  C_EXPECT_ERROR(replaydb_table_update_priorities(table.get(), nullptr, zeros.data(), 1, nullptr,
                                                  nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_update_priorities: keys is NULL");
  C_EXPECT_ERROR(replaydb_table_update_priorities(table.get(), live.data(), nullptr, 1, nullptr,
                                                  nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_update_priorities: priorities is NULL");
  double mass_total = -1;
  int64_t mass_items = -1;
  C_ASSERT_OK(replaydb_table_mass(table.get(), &mass_total, &mass_items, err_.ptr()));
  EXPECT_EQ(mass_items, static_cast<int64_t>(live.size()));
  EXPECT_GT(mass_total, 0);
  C_EXPECT_ERROR(replaydb_table_mass(table.get(), nullptr, &mass_items, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_mass: total is NULL");
  C_EXPECT_ERROR(replaydb_table_mass(table.get(), &mass_total, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_mass: items is NULL");
  C_ASSERT_OK(replaydb_table_update_priorities(table.get(), nullptr, nullptr, 0, &updated, &skipped,
                                               err_.ptr()));
  EXPECT_EQ(updated, 0);
  EXPECT_EQ(skipped, 0);
}

// The same operations through the C API and the C++ API, on twin tables in
// two databases, give the same TableInfo field for field.
TEST_F(CApiTest, TableInfoMatchesTheCppApi) {
  TableSpec spec = RandomSpec("info", rng_);
  spec.selector = SelectorKind::kPrioritized;
  spec.capacity_steps = 64;  // small: trajectories get evicted
  spec.block_steps = 4;
  TablePtr table = CreateTable(spec);
  ASSERT_TRUE(table != nullptr);
  TempDir twin_dir;
  std::unique_ptr<DB> twin_db = testing_util::OpenDB(twin_dir.path());
  ASSERT_TRUE(twin_db != nullptr);
  auto twin_made = twin_db->CreateTable(spec);
  ASSERT_TRUE(twin_made.ok()) << twin_made.status().ToString();
  std::shared_ptr<Table> twin = *twin_made;

  replaydb_writer_t* w = nullptr;
  C_ASSERT_OK(replaydb_table_new_writer(table.get(), 10000, 0, &w, err_.ptr()));
  WriterPtr writer(w);
  auto twin_writer = twin->NewWriter();
  ASSERT_TRUE(twin_writer.ok());
  std::vector<ItemKey> keys;
  for (int t = 0; t < 12; ++t) {
    // At least 5 steps (2 blocks) each: 12 of them overflow the 16 blocks,
    // so some are evicted whatever the draw.
    const int length = 5 + static_cast<int>(rng_() % 15);
    for (int i = 0; i < length; ++i) {
      const testing_util::StepData step = testing_util::RandomStep(spec, rng_);
      const double priority = std::uniform_real_distribution<double>(0, 5)(rng_);
      const CTensors c = ToC(step.tensors);
      C_ASSERT_OK(replaydb_writer_append(writer.get(), c.tensors.data(), c.tensors.size(),
                                         &priority, err_.ptr()));
      ASSERT_OK((*twin_writer)->Append(step.tensors, priority));
      keys.push_back(MakeItemKey(replaydb_writer_trajectory_id(writer.get()), i));
    }
    if (t < 11) {  // the last one stays open
      C_ASSERT_OK(replaydb_writer_end(writer.get(), REPLAYDB_TERMINAL, err_.ptr()));
      ASSERT_OK((*twin_writer)->End(EndReason::kTerminal));
    }
  }
  for (int i = 0; i < 3; ++i) {
    replaydb_batch_t* b = nullptr;
    C_ASSERT_OK(replaydb_table_sample(table.get(), 7, nullptr, &b, err_.ptr()));
    replaydb_batch_release(b);
    ASSERT_TRUE(twin->Sample(7).ok());
  }
  std::vector<double> priorities(keys.size(), 0.5);
  C_ASSERT_OK(replaydb_table_update_priorities(table.get(), keys.data(), priorities.data(),
                                               keys.size(), nullptr, nullptr, err_.ptr()));
  ASSERT_OK(twin->UpdatePriorities(keys, priorities));

  replaydb_table_info_t c;
  C_ASSERT_OK(replaydb_table_info(table.get(), &c, err_.ptr()));
  const TableInfo cpp = twin->Info();
  EXPECT_GT(cpp.evicted_trajectories, 0) << "the test meant to evict";
  EXPECT_EQ(c.num_steps, cpp.num_steps);
  EXPECT_EQ(c.num_items, cpp.num_items);
  EXPECT_EQ(c.num_trajectories, cpp.num_trajectories);
  EXPECT_EQ(c.num_open_trajectories, cpp.num_open_trajectories);
  EXPECT_EQ(c.num_open_trajectories, 1);
  EXPECT_STREQ(c.placement, cpp.placement.c_str());
  EXPECT_EQ(c.device, cpp.device);
  EXPECT_EQ(c.bytes_used, cpp.bytes_used);
  EXPECT_EQ(c.bytes_reserved, cpp.bytes_reserved);
  EXPECT_EQ(c.bytes_capacity, cpp.bytes_capacity);
  EXPECT_EQ(c.blocks_used, cpp.blocks_used);
  EXPECT_EQ(c.blocks_capacity, cpp.blocks_capacity);
  EXPECT_EQ(c.steps_inserted, cpp.steps_inserted);
  EXPECT_EQ(c.items_inserted, cpp.items_inserted);
  EXPECT_EQ(c.items_sampled, cpp.items_sampled);
  EXPECT_EQ(c.items_sampled, 21);
  EXPECT_EQ(c.items_removed, cpp.items_removed);
  EXPECT_EQ(c.evicted_trajectories, cpp.evicted_trajectories);
  EXPECT_EQ(c.evicted_items, cpp.evicted_items);
  EXPECT_EQ(c.priority_updates, cpp.priority_updates);
  EXPECT_EQ(c.priority_updates_skipped, cpp.priority_updates_skipped);
  EXPECT_GT(c.priority_updates_skipped, 0) << "evicted items' keys are skipped";
  EXPECT_EQ(c.max_priority_seen, cpp.max_priority_seen);
  EXPECT_EQ(c.rate_limiter_inserts, cpp.rate_limiter.inserts);
  EXPECT_EQ(c.rate_limiter_samples, cpp.rate_limiter.samples);
  EXPECT_EQ(c.rate_limiter_deletes, cpp.rate_limiter.deletes);
  EXPECT_EQ(c.rate_limiter_blocked_inserts, cpp.rate_limiter.blocked_inserts);
  EXPECT_EQ(c.rate_limiter_blocked_samples, cpp.rate_limiter.blocked_samples);
  EXPECT_EQ(c.cold_trajectories, cpp.cold_trajectories);
  EXPECT_EQ(c.cold_steps, cpp.cold_steps);
  EXPECT_EQ(c.cold_bytes, cpp.cold_bytes);
  EXPECT_EQ(c.spilled_trajectories, cpp.spilled_trajectories);
  EXPECT_EQ(c.spilled_bytes, cpp.spilled_bytes);
  EXPECT_EQ(c.loaded_trajectories, cpp.loaded_trajectories);
  EXPECT_EQ(c.rotations, cpp.rotations);
  EXPECT_EQ(c.spill_queue, cpp.spill_queue);

  // replaydb_table_clear is Table::Clear: the same counts after it, and the
  // writer goes on (once told).
  C_ASSERT_OK(replaydb_table_clear(table.get(), err_.ptr()));
  ASSERT_OK(twin->Clear());
  C_ASSERT_OK(replaydb_table_info(table.get(), &c, err_.ptr()));
  EXPECT_EQ(c.num_items, 0);
  EXPECT_EQ(c.num_trajectories, twin->Info().num_trajectories);
  EXPECT_EQ(c.rate_limiter_inserts, twin->Info().rate_limiter.inserts);
  const testing_util::StepData step = testing_util::RandomStep(spec, rng_);
  const CTensors after = ToC(step.tensors);
  C_EXPECT_ERROR(replaydb_writer_append(writer.get(), after.tensors.data(), after.tensors.size(),
                                        nullptr, err_.ptr()),
                 REPLAYDB_FAILED_PRECONDITION, "by a Clear of the table");
  C_ASSERT_OK(replaydb_writer_append(writer.get(), after.tensors.data(), after.tensors.size(),
                                     nullptr, err_.ptr()));
  C_EXPECT_ERROR(replaydb_table_clear(nullptr, err_.ptr()), REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_table_clear: table is NULL");
}

TEST_F(CApiTest, SpecJsonAndAccessors) {
  SpecPtr spec(replaydb_table_spec_create("json_spec"));
  const int64_t a_dims[] = {3, 2};
  const int64_t c_dims[] = {7};
  C_ASSERT_OK(replaydb_table_spec_add_column(spec.get(), "a", REPLAYDB_U8, 2, a_dims, err_.ptr()));
  C_ASSERT_OK(
      replaydb_table_spec_add_column(spec.get(), "b", REPLAYDB_F64, 0, nullptr, err_.ptr()));
  C_ASSERT_OK(
      replaydb_table_spec_add_column(spec.get(), "c", REPLAYDB_BF16, 1, c_dims, err_.ptr()));

  // Defaults: the C++ TableSpec's.
  const TableSpec defaults;
  Json j = SpecJson(spec.get());
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(Keys(j), (std::vector<std::string>{"name",
                                               "columns",
                                               "capacity_steps",
                                               "capacity_bytes",
                                               "block_steps",
                                               "sequence_length",
                                               "padding",
                                               "selector",
                                               "eviction",
                                               "step_priority",
                                               "priority_exponent",
                                               "priority_device",
                                               "placement",
                                               "logging",
                                               "acks",
                                               "max_lag_ms",
                                               "max_times_sampled",
                                               "spill",
                                               "rotation_fraction",
                                               "rotation_every_samples",
                                               "lanes",
                                               "rate_limiter"}))
      << "a field was added, lost or moved";
  EXPECT_EQ(Keys(j.at("rate_limiter")),
            (std::vector<std::string>{"samples_per_insert", "min_size_to_sample", "min_diff",
                                      "max_diff"}));
  EXPECT_EQ(j.at("name").get<std::string>(), "json_spec");
  EXPECT_EQ(j.at("capacity_steps").get<int64_t>(), defaults.capacity_steps);
  EXPECT_EQ(j.at("capacity_bytes").get<int64_t>(), defaults.capacity_bytes);
  EXPECT_EQ(j.at("block_steps").get<int64_t>(), defaults.block_steps);
  EXPECT_EQ(j.at("selector").get<std::string>(), "uniform");
  EXPECT_EQ(j.at("placement").get<std::string>(), "host");
  EXPECT_EQ(j.at("acks").get<std::string>(), "leader");
  EXPECT_EQ(j.at("max_lag_ms").get<int64_t>(), defaults.max_lag_ms);
  EXPECT_TRUE(j.at("priority_device").is_number_integer());
  EXPECT_EQ(j.at("priority_device").get<int64_t>(), -1);
  EXPECT_TRUE(j.at("spill").is_boolean());
  EXPECT_FALSE(j.at("spill").get<bool>());
  EXPECT_EQ(j.at("rate_limiter").at("min_diff").get<double>(), defaults.rate_limiter.min_diff);
  EXPECT_EQ(j.at("rate_limiter").at("max_diff").get<double>(), defaults.rate_limiter.max_diff);
  // Compact, and doubles as the shortest text that reads back: integral ones
  // without ".0" (Python's json reads them as int).
  const std::string text = SpecText(spec.get());
  EXPECT_EQ(text.find_first_of(" \n"), std::string::npos) << text;
  EXPECT_THAT(text,
              HasSubstr("{\"name\":\"json_spec\",\"columns\":[{\"name\":\"a\",\"dtype\":\"u8\","
                        "\"shape\":[3,2]},"));
  EXPECT_THAT(text, HasSubstr(",\"priority_exponent\":1,"));
  EXPECT_THAT(text, HasSubstr(",\"rotation_fraction\":0,"));
  EXPECT_THAT(text, HasSubstr("\"rate_limiter\":{\"samples_per_insert\":1,\"min_size_to_sample\":1,"
                              "\"min_diff\":-1.7976931348623157e+308,"
                              "\"max_diff\":1.7976931348623157e+308}}"));

  // Every setter, with values drawn fresh.
  const int64_t capacity_steps = 100 + static_cast<int64_t>(rng_() % 10000);
  const int64_t capacity_bytes = 1 + static_cast<int64_t>(rng_() % (int64_t{1} << 40));
  const int64_t block_steps = 1 + static_cast<int64_t>(rng_() % 512);
  const int64_t sequence_length = 1 + static_cast<int64_t>(rng_() % 50);
  const double exponent = std::uniform_real_distribution<double>(0, 2)(rng_);
  const int64_t max_times = static_cast<int64_t>(rng_() % 100);
  const double fraction = std::uniform_real_distribution<double>(0.01, 1)(rng_);
  const int64_t every = 1 + static_cast<int64_t>(rng_() % 1000);
  const double spi = std::uniform_real_distribution<double>(0.1, 8)(rng_);
  const int64_t min_size = 1 + static_cast<int64_t>(rng_() % 1000);
  const double min_diff = -std::uniform_real_distribution<double>(0, 100)(rng_);
  const double max_diff = std::uniform_real_distribution<double>(0, 100)(rng_);
  const int32_t device = static_cast<int32_t>(rng_() % 8);
  replaydb_table_spec_set_capacity_steps(spec.get(), capacity_steps);
  replaydb_table_spec_set_capacity_bytes(spec.get(), capacity_bytes);
  replaydb_table_spec_set_block_steps(spec.get(), block_steps);
  replaydb_table_spec_set_sequence_length(spec.get(), sequence_length);
  replaydb_table_spec_set_priority_exponent(spec.get(), exponent);
  replaydb_table_spec_set_priority_device(spec.get(), device);
  replaydb_table_spec_set_max_times_sampled(spec.get(), max_times);
  replaydb_table_spec_set_spill(spec.get(), 1);
  replaydb_table_spec_set_rotation(spec.get(), fraction, every);
  const int64_t lanes = 1 + static_cast<int64_t>(rng_() % 4096);
  replaydb_table_spec_set_lanes(spec.get(), lanes);
  replaydb_table_spec_set_rate_limiter(spec.get(), spi, min_size, min_diff, max_diff);
  C_ASSERT_OK(replaydb_table_spec_set_padding(spec.get(), "tail", err_.ptr()));
  C_ASSERT_OK(replaydb_table_spec_set_selector(spec.get(), "max_heap", err_.ptr()));
  C_ASSERT_OK(replaydb_table_spec_set_eviction(spec.get(), "lowest_priority", err_.ptr()));
  C_ASSERT_OK(replaydb_table_spec_set_step_priority(spec.get(), "window_mean", err_.ptr()));
  C_ASSERT_OK(replaydb_table_spec_set_placement(spec.get(), "device:5", err_.ptr()));
  C_ASSERT_OK(replaydb_table_spec_set_logging(spec.get(), "off", err_.ptr()));
  const int acks_k = 1 + static_cast<int>(rng_() % 16);
  const std::string acks = "replicated(" + std::to_string(acks_k) + ")";
  C_ASSERT_OK(replaydb_table_spec_set_acks(spec.get(), acks.c_str(), err_.ptr()));
  const int64_t max_lag = 1 + static_cast<int64_t>(rng_() % 100000);
  replaydb_table_spec_set_max_lag_ms(spec.get(), max_lag);
  j = SpecJson(spec.get());
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.size(), 22u) << "a field was added or lost";
  EXPECT_EQ(j.at("acks").get<std::string>(), acks);
  EXPECT_EQ(j.at("max_lag_ms").get<int64_t>(), max_lag);
  EXPECT_EQ(j.at("name").get<std::string>(), "json_spec");
  const Json& columns = j.at("columns");
  ASSERT_TRUE(columns.is_array());
  ASSERT_EQ(columns.size(), 3u);
  EXPECT_EQ(Keys(columns[0]), (std::vector<std::string>{"name", "dtype", "shape"}));
  EXPECT_EQ(columns[0].at("name").get<std::string>(), "a");
  EXPECT_EQ(columns[0].at("dtype").get<std::string>(), "u8");
  EXPECT_EQ(columns[0].at("shape").get<std::vector<int64_t>>(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(columns[1].at("dtype").get<std::string>(), "f64");
  EXPECT_TRUE(columns[1].at("shape").is_array());
  EXPECT_TRUE(columns[1].at("shape").empty());
  EXPECT_EQ(columns[2].at("dtype").get<std::string>(), "bf16");
  EXPECT_EQ(columns[2].at("shape").get<std::vector<int64_t>>(), (std::vector<int64_t>{7}));
  EXPECT_EQ(j.at("capacity_steps").get<int64_t>(), capacity_steps);
  EXPECT_EQ(j.at("capacity_bytes").get<int64_t>(), capacity_bytes);
  EXPECT_EQ(j.at("block_steps").get<int64_t>(), block_steps);
  EXPECT_EQ(j.at("sequence_length").get<int64_t>(), sequence_length);
  EXPECT_EQ(j.at("padding").get<std::string>(), "tail");
  EXPECT_EQ(j.at("selector").get<std::string>(), "max_heap");
  EXPECT_EQ(j.at("eviction").get<std::string>(), "lowest_priority");
  EXPECT_EQ(j.at("step_priority").get<std::string>(), "window_mean");
  EXPECT_EQ(j.at("priority_exponent").get<double>(), exponent) << "numbers round-trip exactly";
  EXPECT_EQ(j.at("priority_device").get<int64_t>(), device);
  EXPECT_EQ(j.at("placement").get<std::string>(), "device:5");
  EXPECT_EQ(j.at("logging").get<std::string>(), "off");
  EXPECT_EQ(j.at("max_times_sampled").get<int64_t>(), max_times);
  EXPECT_TRUE(j.at("spill").get<bool>());
  EXPECT_EQ(j.at("rotation_fraction").get<double>(), fraction);
  EXPECT_EQ(j.at("rotation_every_samples").get<int64_t>(), every);
  EXPECT_EQ(j.at("lanes").get<int64_t>(), lanes);
  const Json& limiter = j.at("rate_limiter");
  EXPECT_EQ(limiter.size(), 4u);
  EXPECT_EQ(limiter.at("samples_per_insert").get<double>(), spi);
  EXPECT_EQ(limiter.at("min_size_to_sample").get<int64_t>(), min_size);
  EXPECT_EQ(limiter.at("min_diff").get<double>(), min_diff);
  EXPECT_EQ(limiter.at("max_diff").get<double>(), max_diff);
  // Each double as the shortest text that reads back, not merely one that does.
  const std::string drawn = SpecText(spec.get());
  EXPECT_THAT(drawn, HasSubstr("\"priority_exponent\":" + ShortestText(exponent) + ","));
  EXPECT_THAT(drawn, HasSubstr("\"rotation_fraction\":" + ShortestText(fraction) + ","));
  EXPECT_THAT(drawn, HasSubstr("{\"samples_per_insert\":" + ShortestText(spi) + ","));
  EXPECT_THAT(drawn, HasSubstr("\"min_diff\":" + ShortestText(min_diff) + ","));
  EXPECT_THAT(drawn, HasSubstr("\"max_diff\":" + ShortestText(max_diff) + "}}"));
  // Not finite: null.
  replaydb_table_spec_set_rate_limiter(spec.get(), spi, min_size,
                                       -std::numeric_limits<double>::infinity(),
                                       std::numeric_limits<double>::quiet_NaN());
  EXPECT_TRUE(SpecJson(spec.get()).at("rate_limiter").at("min_diff").is_null());
  EXPECT_TRUE(SpecJson(spec.get()).at("rate_limiter").at("max_diff").is_null());
  // Names that need escaping are escaped: quotes, backslashes and control
  // characters; other UTF-8 is kept as it is, and bytes that are not UTF-8
  // become U+FFFD.
  const std::string odd_name = "quote\"back\\slash\ttab\x01 caf\xc3\xa9";
  SpecPtr odd(replaydb_table_spec_create(odd_name.c_str()));
  EXPECT_EQ(SpecJson(odd.get()).at("name").get<std::string>(), odd_name);
  EXPECT_THAT(SpecText(odd.get()),
              HasSubstr("\"name\":\"quote\\\"back\\\\slash\\ttab\\u0001 caf\xc3\xa9\","));
  SpecPtr bad(replaydb_table_spec_create("bad\xff"));
  EXPECT_EQ(SpecJson(bad.get()).at("name").get<std::string>(), "bad\xef\xbf\xbd");
  EXPECT_EQ(replaydb_table_spec_json(nullptr), nullptr);

  // Accessors.
  EXPECT_EQ(replaydb_table_spec_num_columns(spec.get()), 3u);
  EXPECT_STREQ(replaydb_table_spec_column_name(spec.get(), 2), "c");
  EXPECT_EQ(replaydb_table_spec_column_dtype(spec.get(), 0), REPLAYDB_U8);
  EXPECT_EQ(replaydb_table_spec_column_ndim(spec.get(), 0), 2);
  EXPECT_EQ(replaydb_table_spec_column_ndim(spec.get(), 1), 0);
  EXPECT_EQ(replaydb_table_spec_column_dims(spec.get(), 0)[1], 2);
  EXPECT_EQ(replaydb_table_spec_sequence_length(spec.get()), sequence_length);
  EXPECT_EQ(replaydb_table_spec_column_name(spec.get(), 3), nullptr);
  EXPECT_EQ(replaydb_table_spec_column_dtype(spec.get(), 3), -1);
  EXPECT_EQ(replaydb_table_spec_column_ndim(spec.get(), 3), -1);
  EXPECT_EQ(replaydb_table_spec_column_dims(spec.get(), 3), nullptr);
  EXPECT_EQ(replaydb_table_spec_num_columns(nullptr), 0u);
  EXPECT_EQ(replaydb_table_spec_column_name(nullptr, 0), nullptr);

  // A valid spec survives creation and a reopen: the same JSON back.
  TableSpec valid = RandomSpec("valid", rng_);
  valid.selector = SelectorKind::kPrioritized;
  valid.eviction = EvictionPolicy::kLowestPriority;
  valid.step_priority = StepPriority::kWindowMax;
  valid.priority_exponent = exponent;
  valid.max_times_sampled = max_times;
  valid.rate_limiter = RateLimiterSpec::SampleToInsertRatio(2, 3, 5.5);
  valid.logging = TableLogging::kOn;
  const SpecPtr valid_c = ToCSpec(valid);
  std::unique_ptr<char, Deleter<replaydb_free>> want(replaydb_table_spec_json(valid_c.get()));
  TablePtr table = CreateTable(valid);
  ASSERT_TRUE(table != nullptr);
  for (int reopen = 0; reopen < 2; ++reopen) {
    SpecPtr got(replaydb_table_get_spec(table.get()));
    std::unique_ptr<char, Deleter<replaydb_free>> text(replaydb_table_spec_json(got.get()));
    EXPECT_STREQ(text.get(), want.get()) << (reopen ? "after reopen" : "after create");
    table.reset();
    db_.reset();
    replaydb_db_t* db = nullptr;
    C_ASSERT_OK(replaydb_open(nullptr, dir_.path().c_str(), &db, err_.ptr()));
    db_.reset(db);
    replaydb_table_t* t = nullptr;
    C_ASSERT_OK(replaydb_get_table(db_.get(), "valid", &t, err_.ptr()));
    table.reset(t);
  }
}

TEST_F(CApiTest, DatabaseOptions) {
  OptionsPtr options(replaydb_options_create());
  replaydb_options_set_create_if_missing(options.get(), 0);
  replaydb_db_t* db = nullptr;
  const std::string fresh = dir_.Sub("fresh");
  C_EXPECT_ERROR(replaydb_open(options.get(), fresh.c_str(), &db, err_.ptr()), REPLAYDB_NOT_FOUND,
                 "no database at " + fresh);
  EXPECT_EQ(db, nullptr);
  replaydb_options_set_create_if_missing(options.get(), 1);
  replaydb_options_set_wal_enabled(options.get(), 0);
  replaydb_options_set_checkpoint(options.get(), 0, 0, 1);
  C_ASSERT_OK(replaydb_options_set_wal_sync(options.get(), "always", err_.ptr()));
  C_EXPECT_ERROR(replaydb_options_set_wal_sync(options.get(), "sometimes", err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_options_set_wal_sync: mode 'sometimes' is not one of none, batch, "
                 "always");
  C_EXPECT_ERROR(replaydb_options_set_wal_sync(nullptr, "none", err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_options_set_wal_sync: options is NULL");
  C_EXPECT_ERROR(replaydb_options_set_wal_sync(options.get(), nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_options_set_wal_sync: mode is NULL");
  const TableSpec spec = RandomSpec("opts", rng_);
  Written written;
  {
    C_ASSERT_OK(replaydb_open(options.get(), fresh.c_str(), &db, err_.ptr()));
    DbPtr opened(db);
    TablePtr table = CreateTable(spec, opened.get());
    ASSERT_TRUE(table != nullptr);
    ASSERT_NO_FATAL_FAILURE(WriteRandom(table.get(), spec, 3, 8, &written));
    // Without the log, only the checkpoint on close keeps the steps.
    EXPECT_FALSE(std::filesystem::exists(fresh + "/wal") &&
                 !std::filesystem::is_empty(fresh + "/wal"));
  }
  replaydb_options_set_error_if_exists(options.get(), 1);
  C_EXPECT_ERROR(replaydb_open(options.get(), fresh.c_str(), &db, err_.ptr()),
                 REPLAYDB_ALREADY_EXISTS, "database " + fresh + " already exists");
  replaydb_options_set_error_if_exists(options.get(), 0);
  C_ASSERT_OK(replaydb_open(options.get(), fresh.c_str(), &db, err_.ptr()));
  DbPtr reopened(db);
  replaydb_table_t* t = nullptr;
  C_ASSERT_OK(replaydb_get_table(reopened.get(), "opts", &t, err_.ptr()));
  TablePtr table(t);
  const std::vector<ItemKey> keys = AllItems(spec, written);
  replaydb_batch_t* b = nullptr;
  C_ASSERT_OK(replaydb_table_lookup(table.get(), keys.data(), keys.size(), &b, err_.ptr()));
  BatchPtr batch(b);
  const HostCopy copy = ReadHostBatch(batch.get(), spec);
  ASSERT_NO_FATAL_FAILURE(ExpectWindows(spec, written, keys, copy.columns, copy.mask, "reopened"));
  // NULL options: the defaults.
  replaydb_options_set_create_if_missing(nullptr, 1);
  replaydb_options_destroy(nullptr);
}

TEST_F(CApiTest, ReadOnlyOpen) {
  const TableSpec spec = RandomSpec("ro", rng_);
  TablePtr table = CreateTable(spec);
  ASSERT_TRUE(table != nullptr);
  Written written;
  ASSERT_NO_FATAL_FAILURE(WriteRandom(table.get(), spec, 3, 8, &written));
  C_ASSERT_OK(replaydb_checkpoint(db_.get(), err_.ptr()));

  replaydb_db_t* db = nullptr;
  C_EXPECT_ERROR(replaydb_open(nullptr, dir_.path().c_str(), &db, err_.ptr()), REPLAYDB_BUSY,
                 "database lock " + dir_.path() + "/LOCK is held by another read-write opener");
  C_ASSERT_OK(replaydb_open_read_only(dir_.path().c_str(), &db, err_.ptr()));
  DbPtr reader(db);
  EXPECT_EQ(replaydb_db_read_only(reader.get()), 1);
  replaydb_table_t* t = nullptr;
  C_ASSERT_OK(replaydb_get_table(reader.get(), "ro", &t, err_.ptr()));
  TablePtr read_table(t);
  const std::vector<ItemKey> keys = AllItems(spec, written);
  replaydb_batch_t* b = nullptr;
  C_ASSERT_OK(replaydb_table_lookup(read_table.get(), keys.data(), keys.size(), &b, err_.ptr()));
  BatchPtr batch(b);
  const HostCopy copy = ReadHostBatch(batch.get(), spec);
  ASSERT_NO_FATAL_FAILURE(ExpectWindows(spec, written, keys, copy.columns, copy.mask, "read-only"));
  C_ASSERT_OK(replaydb_table_sample(read_table.get(), 4, nullptr, &b, err_.ptr()));
  replaydb_batch_release(b);

  replaydb_writer_t* w = nullptr;
  C_EXPECT_ERROR(replaydb_table_new_writer(read_table.get(), 0, 0, &w, err_.ptr()),
                 REPLAYDB_FAILED_PRECONDITION,
                 "table 'ro': NewWriter needs a read-write database; this one was opened "
                 "read-only");
  const double p = 1;
  C_EXPECT_ERROR(replaydb_table_update_priorities(read_table.get(), keys.data(), &p, 1, nullptr,
                                                  nullptr, err_.ptr()),
                 REPLAYDB_FAILED_PRECONDITION, "UpdatePriorities needs a read-write database");
  SpecPtr other = ToCSpec(RandomSpec("other", rng_));
  C_EXPECT_ERROR(replaydb_create_table(reader.get(), other.get(), &t, err_.ptr()),
                 REPLAYDB_FAILED_PRECONDITION, "was opened read-only");
  C_EXPECT_ERROR(replaydb_drop_table(reader.get(), "ro", err_.ptr()), REPLAYDB_FAILED_PRECONDITION,
                 "was opened read-only");
  C_EXPECT_ERROR(replaydb_checkpoint(reader.get(), err_.ptr()), REPLAYDB_FAILED_PRECONDITION,
                 "was opened read-only");
  C_EXPECT_ERROR(replaydb_open_read_only(dir_.Sub("none").c_str(), &db, err_.ptr()),
                 REPLAYDB_NOT_FOUND, "no database at " + dir_.Sub("none"));
}

// replaydb_close while handles live: writers, tables and samples then fail
// with FailedPrecondition naming the table; info, name and spec still
// answer.
TEST_F(CApiTest, UsingATableAfterClose) {
  const TableSpec spec = RandomSpec("closing", rng_);
  TablePtr table = CreateTable(spec);
  ASSERT_TRUE(table != nullptr);
  Written written;
  ASSERT_NO_FATAL_FAILURE(WriteRandom(table.get(), spec, 2, 8, &written));
  replaydb_writer_t* w = nullptr;
  C_ASSERT_OK(replaydb_table_new_writer(table.get(), 1000, 0, &w, err_.ptr()));
  WriterPtr writer(w);
  replaydb_table_info_t before;
  C_ASSERT_OK(replaydb_table_info(table.get(), &before, err_.ptr()));

  db_.reset();  // replaydb_close
  const std::string closed = "table 'closing' is closed (its database was closed)";
  C_EXPECT_ERROR(replaydb_table_new_writer(table.get(), 0, 0, &w, err_.ptr()),
                 REPLAYDB_FAILED_PRECONDITION, closed);
  EXPECT_EQ(w, nullptr);
  const testing_util::StepData step = testing_util::RandomStep(spec, rng_);
  const CTensors c = ToC(step.tensors);
  C_EXPECT_ERROR(
      replaydb_writer_append(writer.get(), c.tensors.data(), c.tensors.size(), nullptr, err_.ptr()),
      REPLAYDB_FAILED_PRECONDITION, closed);
  replaydb_batch_t* b = nullptr;
  replaydb_sample_options_t options;
  replaydb_sample_options_init(&options);
  options.timeout_ms = 100;
  C_EXPECT_ERROR(replaydb_table_sample(table.get(), 2, &options, &b, err_.ptr()),
                 REPLAYDB_FAILED_PRECONDITION, closed);
  EXPECT_EQ(b, nullptr);
  const uint64_t key = MakeItemKey(written.begin()->first, 0);
  C_EXPECT_ERROR(replaydb_table_lookup(table.get(), &key, 1, &b, err_.ptr()),
                 REPLAYDB_FAILED_PRECONDITION, closed);
  const double p = 1;
  C_EXPECT_ERROR(
      replaydb_table_update_priorities(table.get(), &key, &p, 1, nullptr, nullptr, err_.ptr()),
      REPLAYDB_FAILED_PRECONDITION, closed);
  C_EXPECT_ERROR(replaydb_table_set_rate_limiter(table.get(), 1, 1, -1, 1, err_.ptr()),
                 REPLAYDB_FAILED_PRECONDITION, "closing");
  replaydb_table_info_t after;
  C_ASSERT_OK(replaydb_table_info(table.get(), &after, err_.ptr()));
  EXPECT_EQ(after.steps_inserted, before.steps_inserted);
  EXPECT_STREQ(replaydb_table_name(table.get()), "closing");
  SpecPtr got(replaydb_table_get_spec(table.get()));
  EXPECT_EQ(replaydb_table_spec_num_columns(got.get()), spec.columns.size());
  writer.reset();  // ends nothing: its table is gone
}

// replaydb_table_close wakes a blocked sampler with Cancelled.
TEST_F(CApiTest, TableCloseCancelsWaiters) {
  TableSpec spec = RandomSpec("waiting", rng_);
  spec.rate_limiter = RateLimiterSpec::MinSize(1000);
  TablePtr table = CreateTable(spec);
  ASSERT_TRUE(table != nullptr);
  std::atomic<int> rc{-1};
  std::string message;
  std::thread sampler([&] {
    replaydb_batch_t* b = nullptr;
    char* err = nullptr;
    rc = replaydb_table_sample(table.get(), 1, nullptr, &b, &err);  // waits forever
    message = err != nullptr ? err : "";
    replaydb_free(err);
    replaydb_batch_release(b);
  });
  // Close once the sampler waits (the rate limiter counts it blocked).
  replaydb_table_info_t info;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (replaydb_table_info(table.get(), &info, err_.ptr()) != REPLAYDB_OK) break;
  } while (info.rate_limiter_blocked_samples == 0 && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(info.rate_limiter_blocked_samples, 1);
  replaydb_table_close(table.get());
  sampler.join();
  EXPECT_EQ(rc.load(), REPLAYDB_CANCELLED) << message;
  EXPECT_THAT(message, HasSubstr("waiting"));
  replaydb_writer_t* w = nullptr;
  C_EXPECT_ERROR(replaydb_table_new_writer(table.get(), 0, 0, &w, err_.ptr()),
                 REPLAYDB_FAILED_PRECONDITION, "table 'waiting' is closed");
  replaydb_table_close(nullptr);
}

TEST_F(CApiTest, RateLimiterAndTimeouts) {
  TableSpec spec = RandomSpec("limited", rng_);
  // Every step an item: short trajectories without padding could leave the
  // table empty, and then even a limiter that allows samples times out.
  spec.sequence_length = 1;
  spec.rate_limiter = RateLimiterSpec::MinSize(1000);
  TablePtr table = CreateTable(spec);
  ASSERT_TRUE(table != nullptr);
  Written written;
  ASSERT_NO_FATAL_FAILURE(WriteRandom(table.get(), spec, 2, 6, &written));
  replaydb_sample_options_t options;
  replaydb_sample_options_init(&options);
  options.timeout_ms = 30;
  replaydb_batch_t* b = nullptr;
  C_EXPECT_ERROR(replaydb_table_sample(table.get(), 1, &options, &b, err_.ptr()),
                 REPLAYDB_DEADLINE_EXCEEDED, "limited");
  C_EXPECT_ERROR(replaydb_table_set_rate_limiter(table.get(), -1, 1, 0, 1, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "samples_per_insert");
  C_ASSERT_OK(replaydb_table_set_rate_limiter(table.get(), 1, 1, -1e300, 1e300, err_.ptr()));
  C_ASSERT_OK(replaydb_table_sample(table.get(), 1, &options, &b, err_.ptr()));
  replaydb_batch_release(b);
  SpecPtr got(replaydb_table_get_spec(table.get()));
  const Json j = SpecJson(got.get());
  EXPECT_EQ(j.at("rate_limiter").at("min_size_to_sample").get<int64_t>(), 1);
  EXPECT_EQ(j.at("rate_limiter").at("min_diff").get<double>(), -1e300);
}

TEST_F(CApiTest, SpilledTrajectoriesLoadBackAsWritten) {
  TableSpec spec = RandomSpec("spill", rng_);
  spec.capacity_steps = 32;
  spec.block_steps = 4;
  spec.spill = true;
  TablePtr table = CreateTable(spec);
  ASSERT_TRUE(table != nullptr);
  Written written;
  // About 90 steps into a hot tier of 32.
  ASSERT_NO_FATAL_FAILURE(WriteRandom(table.get(), spec, 20, 8, &written));
  replaydb_table_info_t info;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  do {
    C_ASSERT_OK(replaydb_table_info(table.get(), &info, err_.ptr()));
    if (info.spill_queue == 0 && info.cold_trajectories > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (std::chrono::steady_clock::now() < deadline);
  ASSERT_GT(info.cold_trajectories, 0);
  EXPECT_EQ(info.spill_queue, 0);
  // The oldest trajectory left first; it comes back byte for byte.
  const uint64_t first = written.begin()->first;
  C_ASSERT_OK(replaydb_table_load(table.get(), &first, 1, err_.ptr()));
  C_ASSERT_OK(replaydb_table_info(table.get(), &info, err_.ptr()));
  EXPECT_EQ(info.loaded_trajectories, 1);
  Written one;
  one[first] = std::move(written.begin()->second);
  const std::vector<ItemKey> keys = AllItems(spec, one);
  if (!keys.empty()) {
    replaydb_batch_t* b = nullptr;
    C_ASSERT_OK(replaydb_table_lookup(table.get(), keys.data(), keys.size(), &b, err_.ptr()));
    BatchPtr batch(b);
    const HostCopy copy = ReadHostBatch(batch.get(), spec);
    ASSERT_NO_FATAL_FAILURE(ExpectWindows(spec, one, keys, copy.columns, copy.mask, "loaded"));
  }
  const uint64_t unknown = 999999;
  C_EXPECT_ERROR(replaydb_table_load(table.get(), &unknown, 1, err_.ptr()), REPLAYDB_NOT_FOUND,
                 "table 'spill': trajectory 999999 is neither in the hot nor in the cold tier");
  C_EXPECT_ERROR(replaydb_table_load(table.get(), nullptr, 2, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_load: ids is NULL");
  C_ASSERT_OK(replaydb_table_load(table.get(), nullptr, 0, err_.ptr()));
}

// Writers and samplers on several threads at once, batches handed between
// threads (for ThreadSanitizer).
TEST_F(CApiTest, ConcurrentWritersAndSamplers) {
  TableSpec spec = RandomSpec("busy", rng_);
  spec.capacity_steps = 512;
  TablePtr table = CreateTable(spec);
  ASSERT_TRUE(table != nullptr);
  const int64_t start = replaydb_live_batches();
  constexpr int kWriters = 2, kSamplers = 2, kSteps = 150;
  std::atomic<int> failures{0};
  std::atomic<bool> writing{true};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWriters; ++i) {
    threads.emplace_back([&, seed = rng_()] {
      std::mt19937_64 rng(seed);
      replaydb_writer_t* w = nullptr;
      if (replaydb_table_new_writer(table.get(), 5000, 0, &w, nullptr) != REPLAYDB_OK) {
        ++failures;
        return;
      }
      for (int s = 0; s < kSteps; ++s) {
        const testing_util::StepData step = testing_util::RandomStep(spec, rng);
        const CTensors c = ToC(step.tensors);
        if (replaydb_writer_append(w, c.tensors.data(), c.tensors.size(), nullptr, nullptr) != 0) {
          ++failures;
        }
        if (s % 10 == 9 && replaydb_writer_end(w, REPLAYDB_TERMINAL, nullptr) != 0) ++failures;
      }
      replaydb_writer_destroy(w);
    });
  }
  std::vector<replaydb_batch_t*> handed(kSamplers, nullptr);
  std::mutex handed_mu;
  for (int i = 0; i < kSamplers; ++i) {
    threads.emplace_back([&, i] {
      replaydb_sample_options_t options;
      replaydb_sample_options_init(&options);
      options.timeout_ms = 5000;
      while (writing) {
        replaydb_batch_t* b = nullptr;
        if (replaydb_table_sample(table.get(), 4, &options, &b, nullptr) != REPLAYDB_OK) {
          ++failures;
          return;
        }
        replaydb_array_t keys;
        if (replaydb_batch_field(b, "keys", &keys, nullptr) != REPLAYDB_OK) ++failures;
        // Hand the batch to the other sampler thread, which releases it.
        std::lock_guard<std::mutex> lock(handed_mu);
        replaydb_batch_release(handed[i]);
        handed[i] = handed[(i + 1) % kSamplers];
        handed[(i + 1) % kSamplers] = b;
      }
    });
  }
  for (int i = 0; i < kWriters; ++i) threads[i].join();
  writing = false;
  for (size_t i = kWriters; i < threads.size(); ++i) threads[i].join();
  for (replaydb_batch_t* b : handed) replaydb_batch_release(b);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(replaydb_live_batches(), start);
  replaydb_table_info_t info;
  C_ASSERT_OK(replaydb_table_info(table.get(), &info, err_.ptr()));
  EXPECT_EQ(info.steps_inserted, kWriters * kSteps);
}

// Every check the C layer makes, with its message; and the C++ messages for
// what C++ checks, passed through unchanged.
TEST_F(CApiTest, ErrorsNameTheFunctionAndArgument) {
  TableSpec spec;
  spec.name = "errs";
  spec.columns = {{"obs", DType::kF32, Shape({4})}, {"act", DType::kI32, Shape()}};
  spec.capacity_steps = 64;
  spec.block_steps = 16;  // blocks for the vector writer's environments
  TablePtr table = CreateTable(spec);
  ASSERT_TRUE(table != nullptr);
  replaydb_writer_t* w = nullptr;
  C_ASSERT_OK(replaydb_table_new_writer(table.get(), 1000, 0, &w, err_.ptr()));
  WriterPtr writer(w);
  float obs[4] = {1, 2, 3, 4};
  int32_t act = 7;
  const int64_t obs_dims[] = {4};
  replaydb_tensor_t step[2] = {{REPLAYDB_F32, 1, obs_dims, obs, sizeof obs},
                               {REPLAYDB_I32, 0, nullptr, &act, sizeof act}};
  C_ASSERT_OK(replaydb_writer_append(writer.get(), step, 2, nullptr, err_.ptr()));

  // errptr: NULL is allowed; a message there is freed and replaced; success
  // leaves it alone.
  EXPECT_EQ(replaydb_writer_append(writer.get(), nullptr, 2, nullptr, nullptr),
            REPLAYDB_INVALID_ARGUMENT);
  err_.Clear();
  *err_.ptr() = static_cast<char*>(std::malloc(8));
  std::strcpy(*err_.ptr(), "before");
  C_ASSERT_OK(replaydb_writer_append(writer.get(), step, 2, nullptr, err_.ptr()));
  EXPECT_EQ(err_.str(), "before");
  C_EXPECT_ERROR(replaydb_writer_append(writer.get(), step, 1, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_writer_append: num_columns is 1 but table 'errs' has 2 columns (obs, "
                 "act)");

  // Tensors.
  C_EXPECT_ERROR(replaydb_writer_append(writer.get(), nullptr, 2, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_writer_append: step is NULL");
  C_EXPECT_ERROR(replaydb_writer_append(nullptr, step, 2, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_writer_append: writer is NULL");
  replaydb_tensor_t bad[2] = {step[0], step[1]};
  bad[0].dtype = REPLAYDB_U64;
  C_EXPECT_ERROR(replaydb_writer_append(writer.get(), bad, 2, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_writer_append: step[0] (column 'obs') has dtype 101 (u64); columns "
                 "hold REPLAYDB_BOOL (0) to REPLAYDB_F64 (9)");
  bad[0] = step[0];
  bad[0].dtype = 42;
  C_EXPECT_ERROR(replaydb_writer_append(writer.get(), bad, 2, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "step[0] (column 'obs') has dtype 42 (invalid)");
  bad[0] = step[0];
  bad[0].ndim = REPLAYDB_MAX_DIMS + 1;
  C_EXPECT_ERROR(replaydb_writer_append(writer.get(), bad, 2, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_writer_append: step[0] (column 'obs') has ndim 9; it must be between 0 "
                 "and REPLAYDB_MAX_DIMS (8)");
  bad[0].ndim = -1;
  C_EXPECT_ERROR(replaydb_writer_append(writer.get(), bad, 2, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "step[0] (column 'obs') has ndim -1");
  bad[0] = step[0];
  bad[0].dims = nullptr;
  C_EXPECT_ERROR(replaydb_writer_append(writer.get(), bad, 2, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_writer_append: step[0] (column 'obs') has ndim 1 but dims is NULL");
  const int64_t negative[] = {-4};
  bad[0] = step[0];
  bad[0].dims = negative;
  C_EXPECT_ERROR(replaydb_writer_append(writer.get(), bad, 2, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_writer_append: step[0] (column 'obs') has dims[0] = -4; dims must be "
                 ">= 0");
  // What C++ checks: dtype, shape, byte count, data.
  bad[0] = step[0];
  bad[0].dtype = REPLAYDB_I32;
  C_EXPECT_ERROR(replaydb_writer_append(writer.get(), bad, 2, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "table 'errs': step, column 'obs' expects dtype f32, got i32");
  const int64_t three[] = {3};
  bad[0] = step[0];
  bad[0].dims = three;
  C_EXPECT_ERROR(replaydb_writer_append(writer.get(), bad, 2, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "table 'errs': step, column 'obs' expects shape [4], got [3]");
  bad[0] = step[0];
  bad[0].nbytes = 15;
  C_EXPECT_ERROR(replaydb_writer_append(writer.get(), bad, 2, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "table 'errs': step, column 'obs' has size_bytes 15 but dtype f32 and shape [4] "
                 "need 16");
  bad[0] = step[0];
  bad[0].data = nullptr;
  C_EXPECT_ERROR(replaydb_writer_append(writer.get(), bad, 2, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "column 'obs' has a null data pointer");
  const double bad_priority = std::nan("");
  C_EXPECT_ERROR(replaydb_writer_append(writer.get(), step, 2, &bad_priority, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "table 'errs'");
  replaydb_table_info_t info;
  C_ASSERT_OK(replaydb_table_info(table.get(), &info, err_.ptr()));
  EXPECT_EQ(info.steps_inserted, 2) << "a failed append stored something";

  // AppendMany and vector writers.
  C_EXPECT_ERROR(replaydb_writer_append_many(writer.get(), nullptr, 2, nullptr, 0, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_writer_append_many: steps is NULL");
  C_EXPECT_ERROR(replaydb_writer_append_many(writer.get(), step, 2, nullptr, 3, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_writer_append_many: priorities is NULL but num_priorities is 3");
  C_EXPECT_ERROR(replaydb_writer_append_many(writer.get(), step, 2, nullptr, 0, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "table 'errs': AppendMany");
  C_EXPECT_ERROR(replaydb_writer_end(writer.get(), 2, err_.ptr()), REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_writer_end: reason 2 is not REPLAYDB_TERMINAL (0) or "
                 "REPLAYDB_TRUNCATED (1)");
  C_EXPECT_ERROR(replaydb_writer_end(nullptr, REPLAYDB_TERMINAL, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_writer_end: writer is NULL");
  EXPECT_EQ(replaydb_writer_trajectory_id(nullptr), 0u);
  EXPECT_EQ(replaydb_writer_num_steps(nullptr), 0);
  replaydb_vector_writer_t* vw = nullptr;
  C_EXPECT_ERROR(replaydb_table_new_vector_writer(table.get(), 0, 0, 0, 0, &vw, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "table 'errs': a vector writer needs num_envs >= 1");
  C_EXPECT_ERROR(replaydb_table_new_vector_writer(table.get(), 2, 0, 0, 65, &vw, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "table 'errs': WriterOptions::threads 65 is outside [0, 64] (0: automatic)");
  EXPECT_EQ(vw, nullptr);
  C_ASSERT_OK(replaydb_table_new_vector_writer(table.get(), 2, 1000, 0, 0, &vw, err_.ptr()));
  VectorWriterPtr vector_writer(vw);
  C_EXPECT_ERROR(
      replaydb_vector_writer_append(vector_writer.get(), step, 3, nullptr, 0, err_.ptr()),
      REPLAYDB_INVALID_ARGUMENT,
      "replaydb_vector_writer_append: num_columns is 3 but table 'errs' has 2 columns");
  C_EXPECT_ERROR(
      replaydb_vector_writer_append(vector_writer.get(), step, 2, nullptr, 0, err_.ptr()),
      REPLAYDB_INVALID_ARGUMENT,
      "table 'errs': vector step, column 'obs' expects shape [2, 4], got [4]");
  C_EXPECT_ERROR(
      replaydb_vector_writer_append(vector_writer.get(), step, 2, nullptr, 2, err_.ptr()),
      REPLAYDB_INVALID_ARGUMENT,
      "replaydb_vector_writer_append: priorities is NULL but num_priorities is 2");
  C_EXPECT_ERROR(replaydb_vector_writer_append(nullptr, step, 2, nullptr, 0, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_vector_writer_append: writer is NULL");
  C_EXPECT_ERROR(replaydb_vector_writer_end(vector_writer.get(), 0, 9, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_vector_writer_end: reason 9");
  const size_t end_envs[] = {1, 2};
  C_EXPECT_ERROR(replaydb_vector_writer_end_many(vector_writer.get(), end_envs, 2,
                                                 REPLAYDB_TERMINAL, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "EndMany: table 'errs': environment 2 is out of range; the vector writer has 2 "
                 "environments");
  C_EXPECT_ERROR(replaydb_vector_writer_end_many(vector_writer.get(), nullptr, 1, REPLAYDB_TERMINAL,
                                                 err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_vector_writer_end_many: envs is NULL");
  C_EXPECT_ERROR(replaydb_vector_writer_end_many(vector_writer.get(), end_envs, 1, 9, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_vector_writer_end_many: reason 9");
  C_EXPECT_ERROR(
      replaydb_vector_writer_end_many(nullptr, end_envs, 1, REPLAYDB_TERMINAL, err_.ptr()),
      REPLAYDB_INVALID_ARGUMENT, "replaydb_vector_writer_end_many: writer is NULL");
  C_ASSERT_OK(replaydb_vector_writer_end_many(vector_writer.get(), nullptr, 0, REPLAYDB_TERMINAL,
                                              err_.ptr()));
  C_EXPECT_ERROR(replaydb_vector_writer_append_from_device(vector_writer.get(), nullptr, 2, nullptr,
                                                           nullptr, 0, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_vector_writer_append_from_device: steps is NULL");
  EXPECT_EQ(replaydb_vector_writer_num_envs(nullptr), 0u);
  EXPECT_EQ(replaydb_vector_writer_trajectory_id(nullptr, 0), 0u);

  // Specs.
  SpecPtr s(replaydb_table_spec_create("s"));
  const int64_t dims[] = {2, 2, 2, 2, 2, 2, 2};
  C_EXPECT_ERROR(replaydb_table_spec_add_column(s.get(), "x", REPLAYDB_U32, 0, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_table_spec_add_column: column 'x' has dtype 100 (u32); columns hold "
                 "REPLAYDB_BOOL (0) to REPLAYDB_F64 (9)");
  C_EXPECT_ERROR(replaydb_table_spec_add_column(s.get(), "x", REPLAYDB_U8, 7, dims, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_table_spec_add_column: column 'x' has ndim 7; it must be between 0 "
                 "and 6");
  C_EXPECT_ERROR(replaydb_table_spec_add_column(s.get(), "x", REPLAYDB_U8, -1, dims, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "column 'x' has ndim -1");
  C_EXPECT_ERROR(replaydb_table_spec_add_column(s.get(), "x", REPLAYDB_U8, 2, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_table_spec_add_column: column 'x' has ndim 2 but dims is NULL");
  C_EXPECT_ERROR(replaydb_table_spec_add_column(s.get(), "x", REPLAYDB_U8, 1, negative, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "column 'x' has dims[0] = -4");
  for (const char* reserved :
       {"keys", "probabilities", "weights", "mask", "priorities", "times_sampled"}) {
    C_EXPECT_ERROR(
        replaydb_table_spec_add_column(s.get(), reserved, REPLAYDB_U8, 0, nullptr, err_.ptr()),
        REPLAYDB_INVALID_ARGUMENT,
        "replaydb_table_spec_add_column: column '" + std::string(reserved) +
            "' is named like a batch's own array");
  }
  C_EXPECT_ERROR(replaydb_table_spec_add_column(nullptr, "x", REPLAYDB_U8, 0, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_spec_add_column: spec is NULL");
  C_EXPECT_ERROR(
      replaydb_table_spec_add_column(s.get(), nullptr, REPLAYDB_U8, 0, nullptr, err_.ptr()),
      REPLAYDB_INVALID_ARGUMENT, "replaydb_table_spec_add_column: name is NULL");
  EXPECT_EQ(replaydb_table_spec_num_columns(s.get()), 0u) << "a failed add_column added";
  C_EXPECT_ERROR(replaydb_table_spec_set_padding(s.get(), "head", err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_table_spec_set_padding: padding 'head' is not one of none, tail");
  C_EXPECT_ERROR(replaydb_table_spec_set_selector(s.get(), "random", err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_table_spec_set_selector: selector 'random' is not one of uniform, "
                 "fifo, lifo, prioritized, min_heap, max_heap");
  C_EXPECT_ERROR(replaydb_table_spec_set_eviction(s.get(), "newest_first", err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_table_spec_set_eviction: eviction 'newest_first' is not one of "
                 "oldest_first, lowest_priority");
  C_EXPECT_ERROR(replaydb_table_spec_set_step_priority(s.get(), "window_min", err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_table_spec_set_step_priority: step_priority 'window_min' is not one "
                 "of item, window_max, window_mean");
  C_EXPECT_ERROR(replaydb_table_spec_set_logging(s.get(), "maybe", err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_table_spec_set_logging: logging 'maybe' is not one of default, on, "
                 "off");
  C_EXPECT_ERROR(replaydb_table_spec_set_acks(s.get(), "all", err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "acks 'all' is not one of table, none, leader, leader_durable, replicated(K) "
                 "with K from 1 to 16");
  C_EXPECT_ERROR(replaydb_table_spec_set_acks(s.get(), nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_spec_set_acks: acks is NULL");
  C_EXPECT_ERROR(replaydb_table_spec_set_placement(s.get(), "gpu", err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "placement 'gpu' is not one of host, device:N (N a device index), auto");
  C_EXPECT_ERROR(replaydb_table_spec_set_placement(s.get(), nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_spec_set_placement: placement is NULL");
  C_EXPECT_ERROR(replaydb_table_spec_set_selector(s.get(), nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_spec_set_selector: selector is NULL");
  C_EXPECT_ERROR(replaydb_table_spec_set_padding(nullptr, "none", err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_spec_set_padding: spec is NULL");
  // The spec as a whole: checked by create_table, in C++'s words.
  replaydb_table_t* t = nullptr;
  C_EXPECT_ERROR(replaydb_create_table(db_.get(), s.get(), &t, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "table 's' has no columns");
  SpecPtr unnamed(replaydb_table_spec_create(nullptr));
  C_EXPECT_ERROR(replaydb_create_table(db_.get(), unnamed.get(), &t, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "table name '' is invalid");
  const int64_t zero[] = {0};
  C_ASSERT_OK(replaydb_table_spec_add_column(s.get(), "z", REPLAYDB_U8, 1, zero, err_.ptr()));
  C_EXPECT_ERROR(replaydb_create_table(db_.get(), s.get(), &t, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "table 's': column 'z' has shape [0]");
  C_EXPECT_ERROR(replaydb_create_table(db_.get(), nullptr, &t, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_create_table: spec is NULL");
  C_EXPECT_ERROR(replaydb_create_table(nullptr, s.get(), &t, err_.ptr()), REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_create_table: db is NULL");
  C_EXPECT_ERROR(replaydb_create_table(db_.get(), s.get(), nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_create_table: table is NULL");
  C_EXPECT_ERROR(replaydb_get_table(db_.get(), nullptr, &t, err_.ptr()), REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_get_table: name is NULL");
  C_EXPECT_ERROR(replaydb_get_table(db_.get(), "nope", &t, err_.ptr()), REPLAYDB_NOT_FOUND,
                 "no table named 'nope'");

  // Databases.
  replaydb_db_t* db = nullptr;
  C_EXPECT_ERROR(replaydb_open(nullptr, nullptr, &db, err_.ptr()), REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_open: path is NULL");
  C_EXPECT_ERROR(replaydb_open(nullptr, dir_.path().c_str(), nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_open: db is NULL");
  C_EXPECT_ERROR(replaydb_open(nullptr, "", &db, err_.ptr()), REPLAYDB_INVALID_ARGUMENT,
                 "DB::Open: the database path is empty");
  C_EXPECT_ERROR(replaydb_open_read_only(nullptr, &db, err_.ptr()), REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_open_read_only: path is NULL");
  char** names = nullptr;
  size_t count = 0;
  C_EXPECT_ERROR(replaydb_list_tables(db_.get(), nullptr, &count, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_list_tables: names is NULL");
  C_EXPECT_ERROR(replaydb_list_tables(db_.get(), &names, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_list_tables: count is NULL");
  C_EXPECT_ERROR(replaydb_list_tables(nullptr, &names, &count, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_list_tables: db is NULL");
  C_EXPECT_ERROR(replaydb_drop_table(db_.get(), nullptr, err_.ptr()), REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_drop_table: name is NULL");
  C_EXPECT_ERROR(replaydb_checkpoint(nullptr, err_.ptr()), REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_checkpoint: db is NULL");
  EXPECT_EQ(replaydb_db_path(nullptr), nullptr);
  EXPECT_EQ(replaydb_db_read_only(nullptr), 0);
  replaydb_close(nullptr);

  // Tables.
  C_EXPECT_ERROR(replaydb_table_info(table.get(), nullptr, err_.ptr()), REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_table_info: info is NULL");
  C_EXPECT_ERROR(replaydb_table_info(nullptr, &info, err_.ptr()), REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_table_info: table is NULL");
  C_EXPECT_ERROR(replaydb_table_new_writer(nullptr, 0, 0, &w, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_new_writer: table is NULL");
  C_EXPECT_ERROR(replaydb_table_new_writer(table.get(), 0, 0, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_new_writer: writer is NULL");
  C_EXPECT_ERROR(replaydb_table_set_rate_limiter(nullptr, 1, 1, 0, 1, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_set_rate_limiter: table is NULL");
  EXPECT_EQ(replaydb_table_get_spec(nullptr), nullptr);
  EXPECT_EQ(replaydb_table_name(nullptr), nullptr);
  replaydb_table_release(nullptr);

  // Samples and batches.
  replaydb_batch_t* b = nullptr;
  C_EXPECT_ERROR(replaydb_table_sample(table.get(), 0, nullptr, &b, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "table 'errs': batch_size is 0; it must be between 1");
  C_EXPECT_ERROR(replaydb_table_sample(table.get(), 1, nullptr, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_sample: batch is NULL");
  C_EXPECT_ERROR(replaydb_table_sample(nullptr, 1, nullptr, &b, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_sample: table is NULL");
  C_EXPECT_ERROR(replaydb_table_lookup(table.get(), nullptr, 3, &b, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_lookup: keys is NULL");
  C_EXPECT_ERROR(replaydb_table_lookup(table.get(), nullptr, 0, &b, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "Lookup got 0 keys");
  const uint64_t missing = MakeItemKey(77, 3);
  C_EXPECT_ERROR(replaydb_table_lookup(table.get(), &missing, 1, &b, err_.ptr()),
                 REPLAYDB_NOT_FOUND,
                 "table 'errs': key " + std::to_string(missing) +
                     " (trajectory 77, step 3, index 0) is not a live item");
  C_EXPECT_ERROR(
      replaydb_table_sample_to_device(table.get(), 1, nullptr, nullptr, nullptr, err_.ptr()),
      REPLAYDB_INVALID_ARGUMENT, "replaydb_table_sample_to_device: batch is NULL");
  uint64_t keys[1];
  float probabilities[1];
  C_EXPECT_ERROR(replaydb_table_sample_into(table.get(), 1, nullptr, nullptr, 0, nullptr,
                                            probabilities, nullptr, nullptr, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_sample_into: keys is NULL");
  C_EXPECT_ERROR(replaydb_table_sample_into(table.get(), 1, nullptr, nullptr, 0, keys, nullptr,
                                            nullptr, nullptr, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_sample_into: probabilities is NULL");
  C_EXPECT_ERROR(replaydb_table_sample_into(table.get(), 1, nullptr, nullptr, 2, keys,
                                            probabilities, nullptr, nullptr, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_table_sample_into: columns is NULL but num_columns is 2");
  void* columns[1] = {keys};
  C_EXPECT_ERROR(replaydb_table_sample_into(table.get(), 1, nullptr, columns, 1, keys,
                                            probabilities, nullptr, nullptr, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_table_sample_into: num_columns is 1 but table 'errs' has 2 columns");
  replaydb_sample_run_t runs[2] = {{1, nullptr, keys, probabilities, nullptr},
                                   {1, nullptr, keys, probabilities, nullptr}};
  C_EXPECT_ERROR(
      replaydb_table_sample_runs(nullptr, runs, 2, nullptr, 0, nullptr, nullptr, err_.ptr()),
      REPLAYDB_INVALID_ARGUMENT, "replaydb_table_sample_runs: table is NULL");
  C_EXPECT_ERROR(
      replaydb_table_sample_runs(table.get(), nullptr, 1, nullptr, 0, nullptr, nullptr,
                                 err_.ptr()),
      REPLAYDB_INVALID_ARGUMENT, "replaydb_table_sample_runs: runs is NULL");
  C_EXPECT_ERROR(replaydb_table_sample_runs(table.get(), runs, 2, nullptr, 1, nullptr, nullptr,
                                            err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_table_sample_runs: num_columns is 1 but table 'errs' has 2 columns");
  runs[1].keys = nullptr;
  C_EXPECT_ERROR(replaydb_table_sample_runs(table.get(), runs, 2, nullptr, 0, nullptr, nullptr,
                                            err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_sample_runs: run 1's keys is NULL");
  runs[1].rows = 0;  // skipped: its buffers are never read
  runs[0].probabilities = nullptr;
  C_EXPECT_ERROR(replaydb_table_sample_runs(table.get(), runs, 2, nullptr, 0, nullptr, nullptr,
                                            err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_table_sample_runs: run 0's probabilities is NULL");
  runs[0].probabilities = probabilities;
  runs[0].columns = columns;
  C_EXPECT_ERROR(replaydb_table_sample_runs(table.get(), runs, 2, nullptr, 0, nullptr, nullptr,
                                            err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_table_sample_runs: run 0's columns is given but num_columns is 0");
  const int64_t run_rows[2] = {2, -1};
  const int64_t run_shards[2] = {0, 1};
  const double shares[2] = {0.25, std::nan("")};
  double global[2];
  int64_t shard_ids[2];
  C_EXPECT_ERROR(replaydb_label_batch_runs(0, 2, nullptr, run_shards, shares, probabilities,
                                           global, shard_ids, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_label_batch_runs: rows is NULL");
  C_EXPECT_ERROR(replaydb_label_batch_runs(0, 65, run_rows, run_shards, shares, probabilities,
                                           global, shard_ids, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_label_batch_runs: num_runs is 65; at most 64");
  C_EXPECT_ERROR(replaydb_label_batch_runs(0, 2, run_rows, run_shards, shares, probabilities,
                                           global, shard_ids, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "LabelBatchRuns: run 1 has -1 rows");
  const int64_t good_rows[2] = {2, 1};
  C_EXPECT_ERROR(replaydb_label_batch_runs(0, 2, good_rows, run_shards, shares, probabilities,
                                           global, shard_ids, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "LabelBatchRuns: run 1's share is nan; it must be finite and >= 0");
  C_EXPECT_ERROR(replaydb_label_batch_runs(0, 1, good_rows, run_shards, shares, nullptr, global,
                                           shard_ids, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "LabelBatchRuns: local is null");
  C_ASSERT_OK(replaydb_label_batch_runs(0, 0, nullptr, nullptr, nullptr, nullptr, nullptr,
                                        nullptr, nullptr, err_.ptr()));
  C_EXPECT_ERROR(replaydb_copy_regions(nullptr, 1, nullptr, 0, nullptr, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_copy_regions: copies is NULL");
  C_EXPECT_ERROR(replaydb_copy_regions(nullptr, 0, nullptr, 2, nullptr, nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_copy_regions: wait_events is NULL");
  C_ASSERT_OK(replaydb_copy_regions(nullptr, 0, nullptr, 0, nullptr, nullptr, err_.ptr()));
  // A NULL record event records nothing; a NULL wait event is refused, naming it
  // (with a GPU; without one the call is refused before).
  void* const no_event[1] = {nullptr};
  std::string why;
  if (CudaDeviceCount(&why) > 0) {
    C_EXPECT_ERROR(replaydb_copy_regions(nullptr, 0, no_event, 1, nullptr, nullptr, err_.ptr()),
                   REPLAYDB_INVALID_ARGUMENT,
                   "replaydb_copy_regions: wait event 0: StreamWaitEvent: null event");
    const replaydb_copy_region_t bad = {nullptr, keys, 8};
    C_EXPECT_ERROR(replaydb_copy_regions(&bad, 1, nullptr, 0, nullptr, nullptr, err_.ptr()),
                   REPLAYDB_INVALID_ARGUMENT,
                   "replaydb_copy_regions: copy 0: CopyDeviceToDeviceAsync: null destination "
                   "for 8 bytes");
  }
  replaydb_sampler_t* sampler = nullptr;
  C_EXPECT_ERROR(replaydb_table_new_sampler(nullptr, 1, 1, nullptr, &sampler, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_table_new_sampler: table is NULL");
  C_EXPECT_ERROR(replaydb_sampler_next(nullptr, nullptr, 0, &b, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_sampler_next: sampler is NULL");
  replaydb_sampler_destroy(nullptr);
  C_EXPECT_ERROR(replaydb_table_update_priorities_from_device(table.get(), nullptr, nullptr, 4,
                                                              nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_table_update_priorities_from_device: device_keys is NULL");
  C_ASSERT_OK(replaydb_table_sample(table.get(), 2, nullptr, &b, err_.ptr()));
  BatchPtr batch(b);
  replaydb_array_t a;
  C_EXPECT_ERROR(replaydb_batch_field(batch.get(), nullptr, &a, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_batch_field: name is NULL");
  C_EXPECT_ERROR(replaydb_batch_field(batch.get(), "obs", nullptr, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_batch_field: out is NULL");
  C_EXPECT_ERROR(replaydb_batch_field(nullptr, "obs", &a, err_.ptr()), REPLAYDB_INVALID_ARGUMENT,
                 "replaydb_batch_field: batch is NULL");
  C_EXPECT_ERROR(replaydb_batch_field_names(batch.get(), nullptr, &count, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_batch_field_names: names is NULL");
  C_EXPECT_ERROR(replaydb_batch_field_names(nullptr, &names, &count, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "replaydb_batch_field_names: batch is NULL");
}

// Sizes that overflowed: a column of f32[2^62] (2^64 bytes, wrapped to 0)
// was accepted and then blamed on sequence_length ("larger than the hot-tier
// capacity of 0 steps"), capacity_steps near 2^63 gave a negative capacity,
// and a vector writer of 2^40 environments threw std::bad_alloc (Internal).
// Each now fails with InvalidArgument naming the real cause.
TEST_F(CApiTest, OversizedShapesCapacitiesAndWriterCountsNameTheRealCause) {
  const auto create = [&](const std::vector<int64_t>& dims, int64_t capacity_steps) {
    SpecPtr spec(replaydb_table_spec_create("big"));
    EXPECT_EQ(replaydb_table_spec_add_column(spec.get(), "obs", REPLAYDB_F32,
                                             static_cast<int>(dims.size()), dims.data(),
                                             err_.ptr()),
              REPLAYDB_OK)
        << err_.str();
    replaydb_table_spec_set_capacity_steps(spec.get(), capacity_steps);
    replaydb_table_t* table = nullptr;
    err_.Clear();
    const int rc = replaydb_create_table(db_.get(), spec.get(), &table, err_.ptr());
    EXPECT_EQ(table, nullptr);
    return rc;
  };
  const int64_t huge = (int64_t{1} << 62) + static_cast<int64_t>(rng_() % (uint64_t{1} << 61));
  EXPECT_EQ(create({huge}, 64), REPLAYDB_INVALID_ARGUMENT);
  EXPECT_EQ(err_.str(), "table 'big': column 'obs' has shape [" + std::to_string(huge) +
                            "] of f32, whose bytes per step overflow 64 bits; a column's step "
                            "holds at most 268435456 bytes (kMaxStepBytes)");
  EXPECT_EQ(create({int64_t{1} << 40, int64_t{1} << 40}, 64), REPLAYDB_INVALID_ARGUMENT);
  EXPECT_THAT(err_.str(), HasSubstr("column 'obs' has shape [1099511627776, 1099511627776] of "
                                    "f32, whose bytes per step overflow 64 bits"));
  EXPECT_THAT(err_.str(), ::testing::Not(HasSubstr("sequence_length")));
  EXPECT_EQ(create({4}, std::numeric_limits<int64_t>::max()), REPLAYDB_INVALID_ARGUMENT);
  EXPECT_EQ(err_.str(),
            "table 'big': capacity_steps 9223372036854775807 needs 144115188075855872 blocks of "
            "64 steps, more than the limit of 268435456 blocks; lower capacity_steps or raise "
            "block_steps");

  TableSpec spec;
  spec.name = "envs";
  spec.columns = {{"obs", DType::kF32, Shape({4})}};
  spec.capacity_steps = 64;
  TablePtr table = CreateTable(spec);
  ASSERT_TRUE(table != nullptr);
  for (const size_t envs : {size_t{1} << 40, (size_t{1} << 24) + 1 + rng_() % 1000,
                            std::numeric_limits<size_t>::max()}) {
    replaydb_vector_writer_t* vw = nullptr;
    C_EXPECT_ERROR(replaydb_table_new_vector_writer(table.get(), envs, 0, 0, 0, &vw, err_.ptr()),
                   REPLAYDB_INVALID_ARGUMENT,
                   "table 'envs': a vector writer of " + std::to_string(envs) +
                       " environments is more than the limit of 16777216 "
                       "(kMaxVectorWriterEnvs)");
    EXPECT_EQ(vw, nullptr);
  }
}

// Tables made through the C++ API may have what the C API refuses: a column
// named like a batch array (it hides that array) or of 7 or 8 dims (its
// field cannot be expressed).
TEST_F(CApiTest, CppTablesWithColumnsTheCApiRefuses) {
  db_.reset();
  {
    std::unique_ptr<DB> db = testing_util::OpenDB(dir_.path());
    ASSERT_TRUE(db != nullptr);
    TableSpec spec;
    spec.name = "cpp";
    spec.columns = {{"mask", DType::kI16, Shape({3})},
                    {"deep", DType::kU8, Shape({1, 2, 1, 2, 1, 2, 1})}};
    spec.capacity_steps = 64;
    auto table = db->CreateTable(spec);
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    auto writer = (*table)->NewWriter();
    ASSERT_TRUE(writer.ok());
    for (int i = 0; i < 3; ++i) {
      ASSERT_OK((*writer)->Append(testing_util::RandomStep(spec, rng_).tensors));
    }
    ASSERT_OK((*writer)->End(EndReason::kTerminal));
  }
  replaydb_db_t* db = nullptr;
  C_ASSERT_OK(replaydb_open(nullptr, dir_.path().c_str(), &db, err_.ptr()));
  db_.reset(db);
  replaydb_table_t* t = nullptr;
  C_ASSERT_OK(replaydb_get_table(db_.get(), "cpp", &t, err_.ptr()));
  TablePtr table(t);
  replaydb_batch_t* b = nullptr;
  C_ASSERT_OK(replaydb_table_sample(table.get(), 2, nullptr, &b, err_.ptr()));
  BatchPtr batch(b);
  EXPECT_EQ(FieldNames(batch.get()), (std::vector<std::string>{"mask", "keys", "probabilities",
                                                               "priorities", "times_sampled"}));
  Field(batch.get(), "mask", REPLAYDB_I16, {2, 1, 3});  // the column
  replaydb_array_t a;
  C_EXPECT_ERROR(replaydb_batch_field(batch.get(), "deep", &a, err_.ptr()), REPLAYDB_NOT_SUPPORTED,
                 "replaydb_batch_field: column 'deep' has 7 dims; a batch field holds at most 6 "
                 "after [B, L] (REPLAYDB_MAX_DIMS)");
}

// Where no GPU can be used, the device calls fail in the C++ API's words.
TEST_F(CApiTest, DeviceCallsWithoutAGpu) {
  std::string why;
  if (CudaDeviceCount(&why) > 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_EQ(replaydb_cuda_device_count(), 0);
  int not_a_stream = 0;
  C_EXPECT_ERROR(replaydb_stream_wait(&not_a_stream, nullptr, err_.ptr()), REPLAYDB_NOT_SUPPORTED,
                 "StreamWait: ");
  EXPECT_EQ(replaydb_stream_wait(nullptr, nullptr, err_.ptr()), REPLAYDB_OK) << "the same stream";
  TableSpec spec = RandomSpec("dev", rng_);
  spec.placement = Placement::Device(0);
  SpecPtr s = ToCSpec(spec);
  replaydb_table_t* t = nullptr;
  C_EXPECT_ERROR(replaydb_create_table(db_.get(), s.get(), &t, err_.ptr()), REPLAYDB_NOT_SUPPORTED,
                 "table 'dev': placement device:0 needs CUDA device 0, but no GPU can be used (");
  spec.placement = Placement::Host();
  spec.priority_device = 0;
  s = ToCSpec(spec);
  C_EXPECT_ERROR(replaydb_create_table(db_.get(), s.get(), &t, err_.ptr()), REPLAYDB_NOT_SUPPORTED,
                 "table 'dev': uniform draws on CUDA device 0");
  spec.selector = SelectorKind::kPrioritized;
  s = ToCSpec(spec);
  C_EXPECT_ERROR(replaydb_create_table(db_.get(), s.get(), &t, err_.ptr()), REPLAYDB_NOT_SUPPORTED,
                 "table 'dev': priorities on CUDA device 0");

  spec.priority_device = -1;
  TablePtr table = CreateTable(spec);
  ASSERT_TRUE(table != nullptr);
  Written written;
  ASSERT_NO_FATAL_FAILURE(WriteRandom(table.get(), spec, 2, 6, &written));
  replaydb_table_info_t info;
  C_ASSERT_OK(replaydb_table_info(table.get(), &info, err_.ptr()));
  EXPECT_STREQ(info.placement, "host");
  EXPECT_EQ(info.device, -1);
  const int64_t start = replaydb_live_batches();
  replaydb_batch_t* b = nullptr;
  C_EXPECT_ERROR(replaydb_table_sample_to_device(table.get(), 4, nullptr, nullptr, &b, err_.ptr()),
                 REPLAYDB_FAILED_PRECONDITION,
                 "table 'dev': SampleToDevice needs a GPU that can address the hot tier, but it "
                 "is in plain host memory");
  EXPECT_EQ(b, nullptr);
  C_EXPECT_ERROR(replaydb_table_sample_to_device(table.get(), 0, nullptr, nullptr, &b, err_.ptr()),
                 REPLAYDB_INVALID_ARGUMENT, "table 'dev': batch_size is 0");
  uint64_t keys[4];
  float probabilities[4];
  C_EXPECT_ERROR(replaydb_table_sample_into(table.get(), 4, nullptr, nullptr, 0, keys,
                                            probabilities, nullptr, nullptr, nullptr, err_.ptr()),
                 REPLAYDB_FAILED_PRECONDITION, "SampleToDevice needs a GPU");
  const replaydb_sample_run_t runs[2] = {{0, nullptr, nullptr, nullptr, nullptr},
                                         {4, nullptr, keys, probabilities, nullptr}};
  C_EXPECT_ERROR(replaydb_table_sample_runs(table.get(), runs, 2, nullptr, 0, nullptr, nullptr,
                                            err_.ptr()),
                 REPLAYDB_FAILED_PRECONDITION, "run 1: table 'dev': SampleToDevice needs a GPU");
  const replaydb_copy_region_t copy = {probabilities, keys, 8};
  C_EXPECT_ERROR(replaydb_copy_regions(&copy, 1, nullptr, 0, nullptr, nullptr, err_.ptr()),
                 REPLAYDB_NOT_SUPPORTED, "replaydb_copy_regions: no GPU can be used (");
  const int64_t run_rows[1] = {4};
  const int64_t run_shards[1] = {3};
  const double shares[1] = {0.5};
  double global[4];
  int64_t shard_ids[4];
  C_EXPECT_ERROR(replaydb_label_batch_runs(0, 1, run_rows, run_shards, shares, probabilities,
                                           global, shard_ids, nullptr, err_.ptr()),
                 REPLAYDB_NOT_SUPPORTED, "LabelBatchRuns: ");
  replaydb_sampler_t* sampler = nullptr;
  C_EXPECT_ERROR(replaydb_table_new_sampler(table.get(), 4, 2, nullptr, &sampler, err_.ptr()),
                 REPLAYDB_FAILED_PRECONDITION, "NewDeviceSampler needs a GPU");
  EXPECT_EQ(sampler, nullptr);
  replaydb_vector_writer_t* vw = nullptr;
  C_ASSERT_OK(replaydb_table_new_vector_writer(table.get(), 1, 0, 0, 0, &vw, err_.ptr()));
  VectorWriterPtr vector_writer(vw);
  std::vector<testing_util::StepData> one = {testing_util::RandomStep(spec, rng_)};
  std::vector<ConstTensor> tensors;
  for (size_t c = 0; c < spec.columns.size(); ++c) {
    tensors.push_back({spec.columns[c].dtype, spec.columns[c].shape.Prepend(1),
                       one[0].columns[c].data(), one[0].columns[c].size()});
  }
  const CTensors c = ToC(tensors);
  C_EXPECT_ERROR(
      replaydb_vector_writer_append_from_device(vector_writer.get(), c.tensors.data(),
                                                c.tensors.size(), nullptr, nullptr, 0, err_.ptr()),
      REPLAYDB_FAILED_PRECONDITION, "AppendFromDevice needs a GPU");
  const float p = 1;
  C_EXPECT_ERROR(
      replaydb_table_update_priorities_from_device(table.get(), keys, &p, 1, nullptr, err_.ptr()),
      REPLAYDB_FAILED_PRECONDITION,
      "table 'dev' keeps its priorities on the host (priority_device = -1)");
  EXPECT_EQ(replaydb_live_batches(), start);
}

// docs/c_api.md shows examples/c_quickstart.c, which the build compiles and
// ctest runs: the copy must not drift.
TEST(CApiDocTest, ExampleMatchesTheSource) {
  const std::filesystem::path root = REPLAYDB_SOURCE_DIR;
  const std::string doc = ReadFile(root / "docs/c_api.md");
  const std::string source = ReadFile(root / "examples/c_quickstart.c");
  ASSERT_FALSE(source.empty());
  const std::string open = "```c\n";
  const size_t begin = doc.find(open);
  ASSERT_NE(begin, std::string::npos) << "docs/c_api.md has no ```c block";
  const size_t end = doc.find("```", begin + open.size());
  ASSERT_NE(end, std::string::npos);
  EXPECT_EQ(doc.substr(begin + open.size(), end - begin - open.size()), source)
      << "docs/c_api.md's example differs from examples/c_quickstart.c";
}

// ------------------------------------------------------------------- GPU

// Device batches compared byte for byte with the host path (a lookup of the
// same keys), on tables in device and in pinned host memory.
class CApiGpuTest : public CApiTest {
 protected:
  void SetUp() override {
    std::string why;
    if (CudaDeviceCount(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
    CApiTest::SetUp();
  }

  // *spec = RandomSpec(name) placed on device 0, created as *table and
  // given WriteRandom(trajectories, max_length) recorded in *written.
  void DeviceTableWithData(const std::string& name, int trajectories, int max_length,
                           TableSpec* spec, TablePtr* table, Written* written) {
    *spec = RandomSpec(name, rng_);
    spec->placement = Placement::Device(0);
    *table = CreateTable(*spec);
    ASSERT_TRUE(*table != nullptr);
    ASSERT_NO_FATAL_FAILURE(WriteRandom(table->get(), *spec, trajectories, max_length, written));
  }

  // A copy of device array `a` on the host.
  std::vector<std::byte> ToHost(const replaydb_array_t& a, void* stream) {
    std::vector<std::byte> host(a.nbytes);
    EXPECT_OK(CopyDeviceToHost(host.data(), a.data, a.nbytes, stream));
    return host;
  }

  // Reads device batch `batch` (fields checked for device, dtype, dims) and
  // checks it against a host lookup of its keys and against what was
  // written.
  void ExpectDeviceBatch(const replaydb_batch_t* batch, replaydb_table_t* table,
                         const TableSpec& spec, const Written& written, bool weights, void* stream,
                         const std::string& what, HostCopy* out = nullptr) {
    const int64_t B = replaydb_batch_size(batch);
    const int64_t L = spec.sequence_length;
    ASSERT_EQ(replaydb_batch_device(batch), 0) << what;
    ASSERT_EQ(replaydb_batch_sequence_length(batch), L) << what;
    std::vector<std::string> names;
    for (const ColumnSpec& col : spec.columns) names.push_back(col.name);
    names.insert(names.end(), {"keys", "probabilities"});
    if (weights) names.push_back("weights");
    names.push_back("mask");
    EXPECT_EQ(FieldNames(batch), names) << what;
    HostCopy got;
    for (const ColumnSpec& col : spec.columns) {
      got.columns.push_back(ToHost(
          Field(batch, col.name, static_cast<int>(col.dtype), Dims(B, L, col.shape), 0), stream));
    }
    const std::vector<std::byte> keys = ToHost(Field(batch, "keys", REPLAYDB_U64, {B}, 0), stream);
    got.keys.resize(B);
    std::memcpy(got.keys.data(), keys.data(), keys.size());
    const std::vector<std::byte> mask =
        ToHost(Field(batch, "mask", REPLAYDB_U8, {B, L}, 0), stream);
    got.mask.assign(reinterpret_cast<const uint8_t*>(mask.data()),
                    reinterpret_cast<const uint8_t*>(mask.data()) + mask.size());
    const std::vector<std::byte> p =
        ToHost(Field(batch, "probabilities", REPLAYDB_F32, {B}, 0), stream);
    for (int64_t i = 0; i < B; ++i) {
      float prob;
      std::memcpy(&prob, p.data() + i * sizeof(float), sizeof prob);
      EXPECT_TRUE(prob > 0 && prob <= 1) << what << ": probability " << prob;
    }
    if (weights) Field(batch, "weights", REPLAYDB_F32, {B}, 0);
    ASSERT_NO_FATAL_FAILURE(ExpectWindows(spec, written, got.keys, got.columns, got.mask, what));
    // The host path for the same keys: byte for byte the same.
    replaydb_batch_t* h = nullptr;
    C_ASSERT_OK(replaydb_table_lookup(table, got.keys.data(), got.keys.size(), &h, err_.ptr()));
    BatchPtr host(h);
    const HostCopy want = ReadHostBatch(host.get(), spec);
    for (size_t c = 0; c < spec.columns.size(); ++c) {
      ASSERT_EQ(got.columns[c], want.columns[c]) << what << ": column " << c << " differs from "
                                                 << "the host path";
    }
    ASSERT_EQ(got.mask, want.mask) << what;
    if (out != nullptr) *out = std::move(got);
  }
};

TEST_F(CApiGpuTest, SampleToDeviceMatchesTheHostPathAndReusesBuffersPerStream) {
  for (const char* placement : {"host", "device:0"}) {
    for (bool device_draws : {false, true}) {
      TableSpec spec = RandomSpec(
          std::string("s") + (device_draws ? "d" : "h") + (placement[0] == 'h' ? "host" : "dev"),
          rng_);
      spec.placement = Placement::Parse(placement).value();
      if (device_draws) {
        spec.selector = rng_() % 2 ? SelectorKind::kPrioritized : SelectorKind::kUniform;
        spec.priority_device = 0;
      }
      const std::string what =
          spec.name + " (" + std::string(SelectorKindName(spec.selector)) + ")";
      TablePtr table = CreateTable(spec);
      ASSERT_TRUE(table != nullptr) << what;
      Written written;
      ASSERT_NO_FATAL_FAILURE(WriteRandom(table.get(), spec, 10, 30, &written));
      auto stream = DeviceStream::Create(0);
      auto other = DeviceStream::Create(0);
      ASSERT_TRUE(stream.ok() && other.ok());
      const int64_t B = 1 + static_cast<int64_t>(rng_() % 64);
      replaydb_sample_options_t options;
      replaydb_sample_options_init(&options);
      options.importance_beta = 0.5;
      options.timeout_ms = 5000;
      replaydb_batch_t* b = nullptr;
      C_ASSERT_OK(replaydb_table_sample_to_device(table.get(), B, &options, stream->handle(), &b,
                                                  err_.ptr()));
      BatchPtr first(b);
      ASSERT_NO_FATAL_FAILURE(
          ExpectDeviceBatch(first.get(), table.get(), spec, written, true, stream->handle(), what));
      replaydb_array_t first_keys, second_keys;
      C_ASSERT_OK(replaydb_batch_field(first.get(), "keys", &first_keys, err_.ptr()));
      // A second batch alive at once gets its own buffers.
      C_ASSERT_OK(replaydb_table_sample_to_device(table.get(), B, &options, stream->handle(), &b,
                                                  err_.ptr()));
      BatchPtr second(b);
      C_ASSERT_OK(replaydb_batch_field(second.get(), "keys", &second_keys, err_.ptr()));
      EXPECT_NE(first_keys.data, second_keys.data);
      ASSERT_NO_FATAL_FAILURE(ExpectDeviceBatch(second.get(), table.get(), spec, written, true,
                                                stream->handle(), what + " second"));
      // Released: its buffers serve the next sample on the same stream, not
      // one on another stream.
      const void* reused = first_keys.data;
      first.reset();
      C_ASSERT_OK(replaydb_table_sample_to_device(table.get(), B, &options, other->handle(), &b,
                                                  err_.ptr()));
      BatchPtr on_other(b);
      replaydb_array_t keys;
      C_ASSERT_OK(replaydb_batch_field(on_other.get(), "keys", &keys, err_.ptr()));
      EXPECT_NE(keys.data, reused) << "buffers released on one stream went to another";
      ASSERT_NO_FATAL_FAILURE(ExpectDeviceBatch(on_other.get(), table.get(), spec, written, true,
                                                other->handle(), what + " other stream"));
      options.importance_beta = -1;
      C_ASSERT_OK(replaydb_table_sample_to_device(table.get(), B, &options, stream->handle(), &b,
                                                  err_.ptr()));
      BatchPtr third(b);
      C_ASSERT_OK(replaydb_batch_field(third.get(), "keys", &keys, err_.ptr()));
      EXPECT_EQ(keys.data, reused) << "the pool did not reuse the released buffers";
      ASSERT_NO_FATAL_FAILURE(ExpectDeviceBatch(third.get(), table.get(), spec, written, false,
                                                stream->handle(), what + " reused"));
      // Keys only.
      options.gather = 0;
      C_ASSERT_OK(replaydb_table_sample_to_device(table.get(), B, &options, stream->handle(), &b,
                                                  err_.ptr()));
      BatchPtr keys_only(b);
      EXPECT_EQ(FieldNames(keys_only.get()),
                (std::vector<std::string>{"keys", "probabilities", "mask"}));
      // A batch outlives its table handle.
      table.reset();
      ASSERT_OK(stream->Synchronize());
      const std::vector<std::byte> still =
          ToHost(Field(second.get(), "keys", REPLAYDB_U64, {B}, 0), stream->handle());
      EXPECT_EQ(
          std::memcmp(still.data(), ToHost(second_keys, stream->handle()).data(), still.size()), 0);
      C_ASSERT_OK(replaydb_drop_table(db_.get(), spec.name.c_str(), err_.ptr()));
    }
  }
}

// A batch sampled on one stream, read on another after replaydb_stream_wait,
// without a host synchronisation in between.
TEST_F(CApiGpuTest, StreamWaitHandsABatchToAnotherStream) {
  TableSpec spec;
  TablePtr table;
  Written written;
  ASSERT_NO_FATAL_FAILURE(DeviceTableWithData("wait", 10, 30, &spec, &table, &written));
  auto producer = DeviceStream::Create(0);
  auto consumer = DeviceStream::Create(0);
  ASSERT_TRUE(producer.ok() && consumer.ok());
  replaydb_sample_options_t options;
  replaydb_sample_options_init(&options);
  for (int round = 0; round < 8; ++round) {
    replaydb_batch_t* b = nullptr;
    C_ASSERT_OK(replaydb_table_sample_to_device(table.get(), 256, &options, producer->handle(), &b,
                                                err_.ptr()));
    BatchPtr batch(b);
    C_ASSERT_OK(replaydb_stream_wait(consumer->handle(), producer->handle(), err_.ptr()));
    // Read on the consumer's stream only: it must see the finished batch.
    ASSERT_NO_FATAL_FAILURE(ExpectDeviceBatch(batch.get(), table.get(), spec, written, false,
                                              consumer->handle(), "round " + std::to_string(round)));
  }
}

TEST_F(CApiGpuTest, SampleIntoCallerBuffersMatchesTheHostPath) {
  TableSpec spec;
  TablePtr table;
  Written written;
  ASSERT_NO_FATAL_FAILURE(DeviceTableWithData("into", 8, 25, &spec, &table, &written));
  const int64_t B = 1 + static_cast<int64_t>(rng_() % 50);
  const int64_t L = spec.sequence_length;
  std::vector<DeviceBuffer> columns;
  std::vector<void*> pointers;
  for (const ColumnSpec& col : spec.columns) {
    auto buffer = DeviceBuffer::Allocate(0, B * L * col.step_bytes());
    ASSERT_TRUE(buffer.ok());
    ASSERT_OK(buffer->Fill(0xAB));
    pointers.push_back(buffer->data());
    columns.push_back(std::move(buffer).value());
  }
  auto keys = DeviceBuffer::Allocate(0, B * 8);
  auto probabilities = DeviceBuffer::Allocate(0, B * 4);
  auto mask = DeviceBuffer::Allocate(0, B * L);
  ASSERT_TRUE(keys.ok() && probabilities.ok() && mask.ok());
  C_ASSERT_OK(replaydb_table_sample_into(table.get(), B, nullptr, pointers.data(), pointers.size(),
                                         keys->as<uint64_t>(), probabilities->as<float>(), nullptr,
                                         mask->as<uint8_t>(), nullptr, err_.ptr()));
  HostCopy got;
  got.keys.resize(B);
  ASSERT_OK(keys->CopyToHost(got.keys.data(), B * 8));
  got.mask.resize(B * L);
  ASSERT_OK(mask->CopyToHost(got.mask.data(), B * L));
  for (size_t c = 0; c < columns.size(); ++c) {
    got.columns.emplace_back(columns[c].size());
    ASSERT_OK(columns[c].CopyToHost(got.columns.back().data(), columns[c].size()));
  }
  ASSERT_NO_FATAL_FAILURE(ExpectWindows(spec, written, got.keys, got.columns, got.mask, "into"));
  replaydb_sample_options_t options;
  replaydb_sample_options_init(&options);
  options.importance_beta = 1;
  C_EXPECT_ERROR(
      replaydb_table_sample_into(table.get(), B, &options, nullptr, 0, keys->as<uint64_t>(),
                                 probabilities->as<float>(), nullptr, nullptr, nullptr, err_.ptr()),
      REPLAYDB_INVALID_ARGUMENT,
      "table 'into': a device sample needs device pointers for keys and probabilities "
      "(and weights when importance_beta >= 0)");
}

// Several destinations in one call: each run's windows are the table's, as
// with one call a run; then each row's global probability and shard.
TEST_F(CApiGpuTest, SampleRunsFillEveryRunAndLabelsScaleThem) {
  TableSpec spec;
  TablePtr table;
  Written written;
  ASSERT_NO_FATAL_FAILURE(DeviceTableWithData("runs", 8, 25, &spec, &table, &written));
  const int64_t L = spec.sequence_length;
  const size_t R = 1 + rng_() % 4;
  std::vector<int64_t> rows(R);
  std::vector<std::vector<DeviceBuffer>> columns(R);
  std::vector<std::vector<void*>> pointers(R);
  std::vector<DeviceBuffer> keys, probabilities, masks;
  std::vector<replaydb_sample_run_t> runs(R);
  for (size_t r = 0; r < R; ++r) {
    rows[r] = r == 1 ? 0 : 1 + static_cast<int64_t>(rng_() % 40);  // run 1 (if any) empty
    const int64_t n = std::max<int64_t>(rows[r], 1);
    for (const ColumnSpec& col : spec.columns) {
      auto buffer = DeviceBuffer::Allocate(0, n * L * col.step_bytes());
      ASSERT_TRUE(buffer.ok());
      ASSERT_OK(buffer->Fill(0xAB));
      pointers[r].push_back(buffer->data());
      columns[r].push_back(std::move(buffer).value());
    }
    auto k = DeviceBuffer::Allocate(0, n * 8);
    auto p = DeviceBuffer::Allocate(0, n * 4);
    auto m = DeviceBuffer::Allocate(0, n * L);
    ASSERT_TRUE(k.ok() && p.ok() && m.ok());
    runs[r] = {rows[r], pointers[r].data(), k->as<uint64_t>(), p->as<float>(), m->as<uint8_t>(),
               nullptr};
    keys.push_back(std::move(k).value());
    probabilities.push_back(std::move(p).value());
    masks.push_back(std::move(m).value());
  }
  C_ASSERT_OK(replaydb_table_sample_runs(table.get(), runs.data(), R, nullptr,
                                         spec.columns.size(), nullptr, nullptr, err_.ptr()));
  std::vector<float> local;
  for (size_t r = 0; r < R; ++r) {
    if (rows[r] == 0) continue;
    const int64_t n = rows[r];
    HostCopy got;
    got.keys.resize(n);
    ASSERT_OK(keys[r].CopyToHost(got.keys.data(), n * 8));
    got.mask.resize(n * L);
    ASSERT_OK(masks[r].CopyToHost(got.mask.data(), n * L));
    for (DeviceBuffer& c : columns[r]) {
      got.columns.emplace_back(n * L * (c.size() / (n * L)));
      ASSERT_OK(c.CopyToHost(got.columns.back().data(), got.columns.back().size()));
    }
    ASSERT_NO_FATAL_FAILURE(
        ExpectWindows(spec, written, got.keys, got.columns, got.mask, "run " + std::to_string(r)));
    std::vector<float> p(n);
    ASSERT_OK(probabilities[r].CopyToHost(p.data(), n * 4));
    for (float v : p) EXPECT_GT(v, 0.0f) << "run " << r;
    local.insert(local.end(), p.begin(), p.end());
  }
  // The labels, over the runs' probabilities laid end to end.
  const int64_t total = static_cast<int64_t>(local.size());
  std::vector<int64_t> shard_of(R);
  std::vector<double> share(R);
  for (size_t r = 0; r < R; ++r) {
    shard_of[r] = static_cast<int64_t>(rng_() % 8);
    share[r] = std::uniform_real_distribution<double>(0.01, 1.0)(rng_);
  }
  auto d_local = DeviceBuffer::Allocate(0, total * 4);
  auto d_global = DeviceBuffer::Allocate(0, total * 8);
  auto d_shards = DeviceBuffer::Allocate(0, total * 8);
  ASSERT_TRUE(d_local.ok() && d_global.ok() && d_shards.ok());
  ASSERT_OK(d_local->CopyFromHost(local.data(), total * 4));
  C_ASSERT_OK(replaydb_label_batch_runs(0, R, rows.data(), shard_of.data(), share.data(),
                                        d_local->as<float>(), d_global->as<double>(),
                                        d_shards->as<int64_t>(), nullptr, err_.ptr()));
  std::vector<double> global(total);
  std::vector<int64_t> shards(total);
  ASSERT_OK(d_global->CopyToHost(global.data(), total * 8));
  ASSERT_OK(d_shards->CopyToHost(shards.data(), total * 8));
  int64_t b = 0;
  for (size_t r = 0; r < R; ++r) {
    for (int64_t i = 0; i < rows[r]; ++i, ++b) {
      EXPECT_EQ(global[b], static_cast<double>(local[b]) * share[r]) << "row " << b;
      EXPECT_EQ(shards[b], shard_of[r]) << "row " << b;
    }
  }
  EXPECT_EQ(b, total);
  // The batch's inbound rows are copied by one call: regions of random bytes.
  auto stream = DeviceStream::Create(0);
  ASSERT_TRUE(stream.ok());
  std::vector<std::vector<uint8_t>> sent(2);
  std::vector<DeviceBuffer> from, to;
  std::vector<replaydb_copy_region_t> copies;
  for (size_t c = 0; c < sent.size(); ++c) {
    sent[c].resize(1 + rng_() % 5000);
    for (uint8_t& v : sent[c]) v = static_cast<uint8_t>(rng_());
    auto src = DeviceBuffer::Allocate(0, sent[c].size());
    auto dst = DeviceBuffer::Allocate(0, sent[c].size());
    ASSERT_TRUE(src.ok() && dst.ok());
    ASSERT_OK(src->CopyFromHost(sent[c].data(), sent[c].size()));
    copies.push_back({dst->data(), src->data(), sent[c].size()});
    from.push_back(std::move(src).value());
    to.push_back(std::move(dst).value());
  }
  C_ASSERT_OK(replaydb_copy_regions(copies.data(), copies.size(), nullptr, 0, nullptr,
                                    stream->handle(), err_.ptr()));
  ASSERT_OK(stream->Synchronize());
  for (size_t c = 0; c < sent.size(); ++c) {
    std::vector<uint8_t> got(sent[c].size());
    ASSERT_OK(to[c].CopyToHost(got.data(), got.size()));
    EXPECT_EQ(got, sent[c]) << "copy " << c;
  }
}

TEST_F(CApiGpuTest, SamplerBatchesOutliveTheSampler) {
  TableSpec spec;
  TablePtr table;
  Written written;
  ASSERT_NO_FATAL_FAILURE(DeviceTableWithData("sampler", 8, 25, &spec, &table, &written));
  auto stream = DeviceStream::Create(0);
  ASSERT_TRUE(stream.ok());
  const int64_t start = replaydb_live_batches();
  replaydb_sample_options_t options;
  replaydb_sample_options_init(&options);
  options.importance_beta = 0.4;
  options.timeout_ms = 5000;
  const int64_t B = 1 + static_cast<int64_t>(rng_() % 40);
  replaydb_sampler_t* s = nullptr;
  C_ASSERT_OK(replaydb_table_new_sampler(table.get(), B, 2, &options, &s, err_.ptr()));
  SamplerPtr sampler(s);
  for (int i = 0; i < 5; ++i) {
    replaydb_batch_t* b = nullptr;
    C_ASSERT_OK(replaydb_sampler_next(sampler.get(), stream->handle(), 5000, &b, err_.ptr()));
    BatchPtr batch(b);
    EXPECT_EQ(replaydb_batch_size(batch.get()), B);
    ASSERT_NO_FATAL_FAILURE(ExpectDeviceBatch(batch.get(), table.get(), spec, written, true,
                                              stream->handle(), "next " + std::to_string(i)));
  }
  replaydb_batch_t* a = nullptr;
  replaydb_batch_t* b = nullptr;
  C_ASSERT_OK(replaydb_sampler_next(sampler.get(), stream->handle(), 5000, &a, err_.ptr()));
  C_ASSERT_OK(replaydb_sampler_next(sampler.get(), stream->handle(), 5000, &b, err_.ptr()));
  BatchPtr kept(a), second(b);
  replaydb_batch_t* c = nullptr;
  C_EXPECT_ERROR(replaydb_sampler_next(sampler.get(), stream->handle(), 100, &c, err_.ptr()),
                 REPLAYDB_RESOURCE_EXHAUSTED, "all 2 batches are lent out");
  second.reset();
  HostCopy before;
  ASSERT_NO_FATAL_FAILURE(ExpectDeviceBatch(kept.get(), table.get(), spec, written, true,
                                            stream->handle(), "kept", &before));
  // The sampler handle goes; the batch (and so the sampler) stays.
  sampler.reset();
  table.reset();
  HostCopy after;
  replaydb_table_t* t = nullptr;
  C_ASSERT_OK(replaydb_get_table(db_.get(), "sampler", &t, err_.ptr()));
  TablePtr again(t);
  ASSERT_NO_FATAL_FAILURE(ExpectDeviceBatch(kept.get(), again.get(), spec, written, true,
                                            stream->handle(), "after destroy", &after));
  EXPECT_EQ(after.keys, before.keys);
  EXPECT_EQ(after.columns, before.columns);
  EXPECT_EQ(replaydb_live_batches(), start + 1);
  kept.reset();
  EXPECT_EQ(replaydb_live_batches(), start);
}

TEST_F(CApiGpuTest, AppendFromDeviceMatchesHostAppend) {
  for (const char* placement : {"host", "device:0"}) {
    TableSpec spec = RandomSpec(std::string("v") + placement[0], rng_);
    spec.placement = Placement::Parse(placement).value();
    spec.padding = Padding::kTail;
    TableSpec ref_spec = spec;
    ref_spec.name += "_ref";
    ref_spec.placement = Placement::Host();
    TablePtr table = CreateTable(spec);
    TablePtr ref = CreateTable(ref_spec);
    ASSERT_TRUE(table != nullptr && ref != nullptr);
    const size_t N = 1 + rng_() % 6;
    replaydb_vector_writer_t* w = nullptr;
    C_ASSERT_OK(replaydb_table_new_vector_writer(table.get(), N, 5000, 0, 0, &w, err_.ptr()));
    VectorWriterPtr writer(w);
    C_ASSERT_OK(replaydb_table_new_vector_writer(ref.get(), N, 5000, 0, 0, &w, err_.ptr()));
    VectorWriterPtr ref_writer(w);
    auto stream = DeviceStream::Create(0);
    ASSERT_TRUE(stream.ok());
    Written written;
    for (int t = 0; t < 12; ++t) {
      std::vector<std::vector<std::byte>> host(spec.columns.size());
      std::vector<DeviceBuffer> device;
      std::vector<ConstTensor> host_t, device_t;
      std::vector<testing_util::StepData> steps;
      for (size_t e = 0; e < N; ++e) steps.push_back(testing_util::RandomStep(spec, rng_));
      for (size_t c = 0; c < spec.columns.size(); ++c) {
        for (const auto& s : steps)
          host[c].insert(host[c].end(), s.columns[c].begin(), s.columns[c].end());
        auto buffer = DeviceBuffer::Allocate(0, host[c].size());
        ASSERT_TRUE(buffer.ok());
        ASSERT_OK(buffer->CopyFromHost(host[c].data(), host[c].size(), 0, stream->handle()));
        const Shape shape = spec.columns[c].shape.Prepend(static_cast<int64_t>(N));
        host_t.push_back({spec.columns[c].dtype, shape, host[c].data(), host[c].size()});
        device_t.push_back({spec.columns[c].dtype, shape, buffer->data(), host[c].size()});
        device.push_back(std::move(buffer).value());
      }
      const CTensors on_device = ToC(device_t), on_host = ToC(host_t);
      C_ASSERT_OK(replaydb_vector_writer_append_from_device(
          writer.get(), on_device.tensors.data(), on_device.tensors.size(), stream->handle(),
          nullptr, 0, err_.ptr()));
      C_ASSERT_OK(replaydb_vector_writer_append(ref_writer.get(), on_host.tensors.data(),
                                                on_host.tensors.size(), nullptr, 0, err_.ptr()));
      ASSERT_OK(stream->Synchronize());  // before the inputs are freed
      for (size_t e = 0; e < N; ++e) {
        EXPECT_EQ(replaydb_vector_writer_trajectory_id(writer.get(), e),
                  replaydb_vector_writer_trajectory_id(ref_writer.get(), e));
        written[replaydb_vector_writer_trajectory_id(writer.get(), e)].push_back(
            std::move(steps[e]));
      }
    }
    for (size_t e = 0; e < N; ++e) {
      C_ASSERT_OK(replaydb_vector_writer_end(writer.get(), e, REPLAYDB_TERMINAL, err_.ptr()));
      C_ASSERT_OK(replaydb_vector_writer_end(ref_writer.get(), e, REPLAYDB_TERMINAL, err_.ptr()));
    }
    const std::vector<ItemKey> keys = AllItems(spec, written);
    replaydb_batch_t* b = nullptr;
    C_ASSERT_OK(replaydb_table_lookup(table.get(), keys.data(), keys.size(), &b, err_.ptr()));
    BatchPtr got(b);
    C_ASSERT_OK(replaydb_table_lookup(ref.get(), keys.data(), keys.size(), &b, err_.ptr()));
    BatchPtr want(b);
    const HostCopy g = ReadHostBatch(got.get(), spec);
    ASSERT_NO_FATAL_FAILURE(ExpectWindows(spec, written, keys, g.columns, g.mask, spec.name));
    const HostCopy r = ReadHostBatch(want.get(), ref_spec);
    EXPECT_EQ(g.columns, r.columns) << spec.name;
  }
}

TEST_F(CApiGpuTest, UpdatePrioritiesFromDevice) {
  TableSpec spec = RandomSpec("devprio", rng_);
  spec.selector = SelectorKind::kPrioritized;
  spec.priority_device = 0;
  spec.placement = Placement::Device(0);
  TablePtr table = CreateTable(spec);
  ASSERT_TRUE(table != nullptr);
  Written written;
  ASSERT_NO_FATAL_FAILURE(WriteRandom(table.get(), spec, 6, 20, &written));
  const std::vector<ItemKey> keys = AllItems(spec, written);
  ASSERT_GT(keys.size(), 1u);
  // Every item to 0 but one; and a stale key.
  std::vector<uint64_t> update_keys = keys;
  std::vector<float> priorities(keys.size(), 0.0f);
  const size_t chosen = rng_() % keys.size();
  priorities[chosen] = 2.5f;
  update_keys.push_back(MakeItemKey(999999, 0));
  priorities.push_back(1.0f);
  auto d_keys = DeviceBuffer::Allocate(0, update_keys.size() * 8);
  auto d_priorities = DeviceBuffer::Allocate(0, priorities.size() * 4);
  ASSERT_TRUE(d_keys.ok() && d_priorities.ok());
  ASSERT_OK(d_keys->CopyFromHost(update_keys.data(), update_keys.size() * 8));
  ASSERT_OK(d_priorities->CopyFromHost(priorities.data(), priorities.size() * 4));
  C_ASSERT_OK(replaydb_table_update_priorities_from_device(
      table.get(), d_keys->as<uint64_t>(), d_priorities->as<float>(),
      static_cast<int64_t>(update_keys.size()), nullptr, err_.ptr()));
  replaydb_batch_t* b = nullptr;
  C_ASSERT_OK(replaydb_table_sample_to_device(table.get(), 64, nullptr, nullptr, &b, err_.ptr()));
  BatchPtr batch(b);
  std::vector<uint64_t> drawn(64);
  const replaydb_array_t k = Field(batch.get(), "keys", REPLAYDB_U64, {64}, 0);
  ASSERT_OK(CopyDeviceToHost(drawn.data(), k.data, k.nbytes));
  for (uint64_t key : drawn) EXPECT_EQ(key, keys[chosen]);
  replaydb_table_info_t info;
  C_ASSERT_OK(replaydb_table_info(table.get(), &info, err_.ptr()));
  EXPECT_EQ(info.priority_updates_skipped, 1);
  EXPECT_EQ(info.priority_updates, static_cast<int64_t>(keys.size()));
}

}  // namespace
}  // namespace replaydb
