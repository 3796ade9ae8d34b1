// The C API (include/replaydb/c.h) over the public C++ API only: every handle
// wraps the C++ object it names, and nothing here reaches into engine/.
//
// No exception crosses into C: every entry point catches std::exception (and
// anything else) and reports Internal with the function's name and what();
// std::bad_alloc is ResourceExhausted ("function: out of memory").
// Error messages are the C++ Status messages unchanged; checks that only the
// C layer can make (NULL pointers, counts, enum names) name the function and
// the argument.
#include "replaydb/c.h"

#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <exception>
#include <map>
#include <new>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "replaydb/db.h"
#include "replaydb/device.h"
#include "replaydb/interrupt.h"
#include "replaydb/options.h"
#include "replaydb/status.h"
#include "replaydb/table.h"
#include "replaydb/types.h"

#ifndef REPLAYDB_VERSION_STRING
#error "REPLAYDB_VERSION_STRING must be defined (CMakeLists.txt passes the project's version)"
#endif

using replaydb::ColumnSpec;
using replaydb::ConnectOptions;
using replaydb::ConstTensor;
using replaydb::DBOptions;
using replaydb::DeviceBatch;
using replaydb::DeviceBuffer;
using replaydb::DeviceSampleOutput;
using replaydb::DeviceSampler;
using replaydb::DeviceSamplerOptions;
using replaydb::DType;
using replaydb::EndReason;
using replaydb::ItemKey;
using replaydb::RateLimiterSpec;
using replaydb::Result;
using replaydb::SampleBatch;
using replaydb::SampleOptions;
using replaydb::Shape;
using replaydb::Status;
using replaydb::Table;
using replaydb::TableInfo;
using replaydb::TableSpec;
using replaydb::TrajectoryWriter;
using replaydb::VectorWriter;
using replaydb::WeightNormalization;

// The C enums are the C++ values: codes and dtypes pass through as ints.
static_assert(REPLAYDB_OK == static_cast<int>(Status::Code::kOk));
static_assert(REPLAYDB_WEIGHTS_BUFFER == static_cast<int>(WeightNormalization::kBuffer));
static_assert(REPLAYDB_WEIGHTS_BATCH == static_cast<int>(WeightNormalization::kBatch));
static_assert(REPLAYDB_INVALID_ARGUMENT == static_cast<int>(Status::Code::kInvalidArgument));
static_assert(REPLAYDB_NOT_FOUND == static_cast<int>(Status::Code::kNotFound));
static_assert(REPLAYDB_ALREADY_EXISTS == static_cast<int>(Status::Code::kAlreadyExists));
static_assert(REPLAYDB_RESOURCE_EXHAUSTED == static_cast<int>(Status::Code::kResourceExhausted));
static_assert(REPLAYDB_DEADLINE_EXCEEDED == static_cast<int>(Status::Code::kDeadlineExceeded));
static_assert(REPLAYDB_CANCELLED == static_cast<int>(Status::Code::kCancelled));
static_assert(REPLAYDB_FAILED_PRECONDITION == static_cast<int>(Status::Code::kFailedPrecondition));
static_assert(REPLAYDB_BUSY == static_cast<int>(Status::Code::kBusy));
static_assert(REPLAYDB_IO_ERROR == static_cast<int>(Status::Code::kIOError));
static_assert(REPLAYDB_CORRUPTION == static_cast<int>(Status::Code::kCorruption));
static_assert(REPLAYDB_NOT_SUPPORTED == static_cast<int>(Status::Code::kNotSupported));
static_assert(REPLAYDB_INTERNAL == static_cast<int>(Status::Code::kInternal));
static_assert(REPLAYDB_UNAVAILABLE == static_cast<int>(Status::Code::kUnavailable));
static_assert(REPLAYDB_BOOL == static_cast<int>(DType::kBool));
static_assert(REPLAYDB_U8 == static_cast<int>(DType::kU8));
static_assert(REPLAYDB_I8 == static_cast<int>(DType::kI8));
static_assert(REPLAYDB_I16 == static_cast<int>(DType::kI16));
static_assert(REPLAYDB_I32 == static_cast<int>(DType::kI32));
static_assert(REPLAYDB_I64 == static_cast<int>(DType::kI64));
static_assert(REPLAYDB_F16 == static_cast<int>(DType::kF16));
static_assert(REPLAYDB_BF16 == static_cast<int>(DType::kBF16));
static_assert(REPLAYDB_F32 == static_cast<int>(DType::kF32));
static_assert(REPLAYDB_F64 == static_cast<int>(DType::kF64));
static_assert(replaydb::kNumDTypes == REPLAYDB_F64 + 1);
static_assert(REPLAYDB_TERMINAL == static_cast<int>(EndReason::kTerminal));
static_assert(REPLAYDB_TRUNCATED == static_cast<int>(EndReason::kTruncated));
static_assert(REPLAYDB_MAX_DIMS == Shape::kMaxRank);
static_assert(REPLAYDB_ITEM_KEY_START_BITS == replaydb::kItemKeyStartBits);

namespace {

constexpr int kNumCodes = REPLAYDB_UNAVAILABLE + 1;
// A column's dims in a batch field follow [B, L].
constexpr int kMaxColumnDims = REPLAYDB_MAX_DIMS - 2;
// The arrays of a batch besides its columns, in the order fields list them.
constexpr std::array<std::string_view, 6> kBatchArrayNames = {
    "keys", "probabilities", "weights", "mask", "priorities", "times_sampled"};

// ------------------------------------------------------------ errors

// A malloc'ed copy of `s` (NULL when out of memory): strings the caller frees
// with replaydb_free.
char* MallocString(std::string_view s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) return nullptr;
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

void SetError(char** errptr, std::string_view message) {
  if (errptr == nullptr) return;
  std::free(*errptr);
  *errptr = MallocString(message);
}

int Report(const Status& s, char** errptr) {
  if (s.ok()) return REPLAYDB_OK;
  SetError(errptr, s.message());
  return static_cast<int>(s.code());
}

// `code` with "function: what", for an exception caught at the boundary;
// nothing here throws.
int ReportException(const char* function, const char* what, char** errptr,
                    int code = REPLAYDB_INTERNAL) {
  if (errptr != nullptr) {
    const size_t f = std::strlen(function), w = std::strlen(what);
    char* message = static_cast<char*>(std::malloc(f + 2 + w + 1));
    if (message != nullptr) {
      std::memcpy(message, function, f);
      std::memcpy(message + f, ": ", 2);
      std::memcpy(message + f + 2, what, w + 1);
    }
    std::free(*errptr);
    *errptr = message;
  }
  return code;
}

// Runs `body` (returning a Status) as the entry point `function`.
template <typename Body>
int Guard(const char* function, char** errptr, Body&& body) noexcept {
  try {
    return Report(body(), errptr);
  } catch (const std::bad_alloc&) {
    // Memory ran out: a resource, not a bug (the C++ API sizes what a
    // caller's arguments ask for before allocating it, and names the size).
    return ReportException(function, "out of memory (std::bad_alloc)", errptr,
                           REPLAYDB_RESOURCE_EXHAUSTED);
  } catch (const std::exception& e) {
    return ReportException(function, e.what(), errptr);
  } catch (...) {
    return ReportException(function, "unknown exception", errptr);
  }
}

// For entry points without a status: `fallback` when `body` throws.
template <typename T, typename Body>
T GuardValue(T fallback, Body&& body) noexcept {
  try {
    return body();
  } catch (...) {
    return fallback;
  }
}

template <typename Body>
void GuardVoid(Body&& body) noexcept {
  try {
    body();
  } catch (...) {
  }
}

std::string Quoted(std::string_view s) {
  return "'" + std::string(s) + "'";
}

Status NullArgument(const char* function, const char* argument) {
  return Status::InvalidArgument(std::string(function) + ": " + argument + " is NULL");
}

std::chrono::milliseconds Millis(int64_t ms) {
  return ms < 0 ? replaydb::kWaitForever : std::chrono::milliseconds(ms);
}

// ------------------------------------------------------------- names

// Names with static storage, NUL-terminated, from the C++ name functions.
const std::array<std::string, kNumCodes>& CodeNames() {
  static const auto* names = [] {
    auto* n = new std::array<std::string, kNumCodes>;
    for (int i = 0; i < kNumCodes; ++i) {
      (*n)[i] = std::string(replaydb::StatusCodeName(static_cast<Status::Code>(i)));
    }
    return n;
  }();
  return *names;
}

const std::array<std::string, replaydb::kNumDTypes>& DTypeNames() {
  static const auto* names = [] {
    auto* n = new std::array<std::string, replaydb::kNumDTypes>;
    for (int i = 0; i < replaydb::kNumDTypes; ++i) {
      (*n)[i] = std::string(replaydb::DTypeName(static_cast<DType>(i)));
    }
    return n;
  }();
  return *names;
}

bool IsColumnDType(int dtype) {
  return dtype >= 0 && dtype < replaydb::kNumDTypes;
}

// The values of an enum whose name function (PaddingName, ...) answers
// "invalid" past the last one.
template <typename Enum>
std::vector<Enum> EnumValues(std::string_view (*name)(Enum)) {
  std::vector<Enum> values;
  for (int i = 0; i < 256 && name(static_cast<Enum>(i)) != "invalid"; ++i) {
    values.push_back(static_cast<Enum>(i));
  }
  return values;
}

// The enum value named `text`, or InvalidArgument naming the function, what
// it is and the names it could be.
template <typename Enum>
Status ParseEnum(const char* function, const char* what, const char* text,
                 std::string_view (*name)(Enum), Enum* out) {
  if (text == nullptr) return NullArgument(function, what);
  std::string names;
  for (Enum e : EnumValues(name)) {
    if (name(e) == text) {
      *out = e;
      return Status::OK();
    }
    names += (names.empty() ? "" : ", ") + std::string(name(e));
  }
  return Status::InvalidArgument(std::string(function) + ": " + what + " " + Quoted(text) +
                                 " is not one of " + names);
}

Status ToEndReason(const char* function, int reason, EndReason* out) {
  if (reason != REPLAYDB_TERMINAL && reason != REPLAYDB_TRUNCATED) {
    return Status::InvalidArgument(std::string(function) + ": reason " + std::to_string(reason) +
                                   " is not REPLAYDB_TERMINAL (0) or REPLAYDB_TRUNCATED (1)");
  }
  *out = static_cast<EndReason>(reason);
  return Status::OK();
}

// ------------------------------------------------------------ tables

// What argument checks and batches need of a table; fixed for the table's
// life (of its spec only the rate limiter changes).
struct TableLayout {
  std::string name;
  std::vector<ColumnSpec> columns;
  int64_t sequence_length = 1;
  int device = -1;  // TableInfo::device: the GPU its kernels run on; -1: none

  std::string ColumnNames() const {
    std::string names;
    for (const ColumnSpec& c : columns) names += (names.empty() ? "" : ", ") + c.name;
    return names;
  }
};

Status CountMismatch(const char* function, size_t num_columns, const TableLayout& layout) {
  return Status::InvalidArgument(std::string(function) + ": num_columns is " +
                                 std::to_string(num_columns) + " but table " + Quoted(layout.name) +
                                 " has " + std::to_string(layout.columns.size()) + " columns (" +
                                 layout.ColumnNames() + ")");
}

// Views of the caller's `tensors` (argument `argument`, one per column) for
// the C++ calls, which check dtypes, shapes and byte counts against the
// schema; here only what C can get wrong and C++ cannot see.
Status ToConstTensors(const char* function, const char* argument, const replaydb_tensor_t* tensors,
                      size_t num_columns, const TableLayout& layout,
                      std::vector<ConstTensor>* out) {
  if (tensors == nullptr) return NullArgument(function, argument);
  if (num_columns != layout.columns.size()) return CountMismatch(function, num_columns, layout);
  out->clear();
  out->reserve(num_columns);
  for (size_t i = 0; i < num_columns; ++i) {
    const replaydb_tensor_t& t = tensors[i];
    const std::string where = std::string(function) + ": " + argument + "[" + std::to_string(i) +
                              "] (column " + Quoted(layout.columns[i].name) + ")";
    if (!IsColumnDType(t.dtype)) {
      return Status::InvalidArgument(where + " has dtype " + std::to_string(t.dtype) + " (" +
                                     replaydb_dtype_name(t.dtype) +
                                     "); columns hold REPLAYDB_BOOL (0) to REPLAYDB_F64 (9)");
    }
    if (t.ndim < 0 || t.ndim > REPLAYDB_MAX_DIMS) {
      return Status::InvalidArgument(where + " has ndim " + std::to_string(t.ndim) +
                                     "; it must be between 0 and REPLAYDB_MAX_DIMS (" +
                                     std::to_string(REPLAYDB_MAX_DIMS) + ")");
    }
    if (t.ndim > 0 && t.dims == nullptr) {
      return Status::InvalidArgument(where + " has ndim " + std::to_string(t.ndim) +
                                     " but dims is NULL");
    }
    for (int d = 0; d < t.ndim; ++d) {
      if (t.dims[d] < 0) {
        return Status::InvalidArgument(where + " has dims[" + std::to_string(d) +
                                       "] = " + std::to_string(t.dims[d]) + "; dims must be >= 0");
      }
    }
    const std::span<const int64_t> dims(t.dims, static_cast<size_t>(t.ndim));
    out->push_back({static_cast<DType>(t.dtype), Shape::FromSpan(dims), t.data, t.nbytes});
  }
  return Status::OK();
}

// Priorities given as a pointer and a count: NULL means none.
Status ToPriorities(const char* function, const double* priorities, size_t num_priorities,
                    std::span<const double>* out) {
  if (priorities == nullptr && num_priorities > 0) {
    return Status::InvalidArgument(std::string(function) + ": priorities is NULL but " +
                                   "num_priorities is " + std::to_string(num_priorities));
  }
  *out = priorities == nullptr ? std::span<const double>()
                               : std::span<const double>(priorities, num_priorities);
  return Status::OK();
}

// replaydb_sample_options_t as SampleOptions; InvalidArgument naming `fn`
// for a weight_normalization outside REPLAYDB_WEIGHTS_*.
Result<SampleOptions> ToSampleOptions(const char* fn, const replaydb_sample_options_t* options) {
  replaydb_sample_options_t defaults;
  replaydb_sample_options_init(&defaults);
  const replaydb_sample_options_t& o = options != nullptr ? *options : defaults;
  if (o.weight_normalization != REPLAYDB_WEIGHTS_BUFFER &&
      o.weight_normalization != REPLAYDB_WEIGHTS_BATCH) {
    return Status::InvalidArgument(std::string(fn) + ": options->weight_normalization is " +
                                   std::to_string(o.weight_normalization) +
                                   "; use REPLAYDB_WEIGHTS_BUFFER (0) or REPLAYDB_WEIGHTS_BATCH (1)");
  }
  SampleOptions out;
  out.timeout = Millis(o.timeout_ms);
  out.importance_beta = o.importance_beta;
  out.stratified = o.stratified != 0;
  out.gather = o.gather != 0;
  out.peek = o.peek != 0;
  out.weight_normalization = static_cast<WeightNormalization>(o.weight_normalization);
  return out;
}

// `a * b * c` bytes, or nullopt when that does not fit in size_t.
std::optional<size_t> ProductBytes(uint64_t a, uint64_t b, uint64_t c) {
  unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  p *= c;
  if (p > static_cast<unsigned __int128>(SIZE_MAX)) return std::nullopt;
  return static_cast<size_t>(p);
}

// ----------------------------------------------------------- batches

// What a batch's arrays point into; destroyed with the batch's last
// reference.
class BatchMemory {
 public:
  virtual ~BatchMemory() = default;
};

struct Field {
  std::string name;
  replaydb_array_t array;
};

std::atomic<int64_t> g_live_batches{0};

}  // namespace

// ---------------------------------------------------------------- handles

struct replaydb_options_t {
  DBOptions options;
};

struct replaydb_connect_options_t {
  replaydb::ConnectOptions options;
};

struct replaydb_db_t {
  std::unique_ptr<replaydb::DB> db;
};

struct replaydb_table_spec_t {
  TableSpec spec;
};

namespace {

// Device buffers of one batch of replaydb_table_sample_to_device.
struct DeviceBufferSet {
  std::vector<DeviceBuffer> columns;  // allocated by the first sample that gathers
  DeviceBuffer keys, probabilities, weights, mask;
};

// The buffers of replaydb_table_sample_to_device, one pool per table handle,
// kept by (stream, batch size). A released batch's set is handed out again
// only to a sample on the same stream, because of stream order: the release
// does not wait for the GPU, so work the caller queued on that stream may
// still be reading the buffers; a gather queued later on the same stream runs
// after that work, while one on another stream could overwrite them under it.
// The pool keeps at most as many sets per key as were in use at once. Its
// buffers are freed (cudaFree, which waits for the device's work in flight)
// when the table handle and the pool's last batch are gone.
//
// Thread-safe.
class DeviceBufferPool {
 public:
  explicit DeviceBufferPool(std::shared_ptr<const TableLayout> layout)
      : layout_(std::move(layout)) {}

  // A set for `batch_size` items on `stream`, with column buffers when
  // `gather`. REQUIRES: batch_size >= 1 and a table with a GPU.
  Result<std::unique_ptr<DeviceBufferSet>> Take(void* stream, int64_t batch_size, bool gather) {
    std::unique_ptr<DeviceBufferSet> set;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find({stream, batch_size});
      if (it != free_.end() && !it->second.empty()) {
        set = std::move(it->second.back());
        it->second.pop_back();
      }
    }
    const int device = layout_->device;
    const uint64_t B = static_cast<uint64_t>(batch_size);
    const uint64_t L = static_cast<uint64_t>(layout_->sequence_length);
    const auto allocate = [&](uint64_t count, uint64_t bytes, DeviceBuffer* buffer) -> Status {
      const std::optional<size_t> total = ProductBytes(B, count, bytes);
      if (!total) {
        return Status::ResourceExhausted("table " + Quoted(layout_->name) + ": a batch of " +
                                         std::to_string(batch_size) +
                                         " items does not fit in memory");
      }
      REPLAYDB_ASSIGN_OR_RETURN(*buffer, DeviceBuffer::Allocate(device, *total));
      return Status::OK();
    };
    if (set == nullptr) {
      set = std::make_unique<DeviceBufferSet>();
      REPLAYDB_RETURN_IF_ERROR(allocate(1, sizeof(uint64_t), &set->keys));
      REPLAYDB_RETURN_IF_ERROR(allocate(1, sizeof(float), &set->probabilities));
      REPLAYDB_RETURN_IF_ERROR(allocate(1, sizeof(float), &set->weights));
      REPLAYDB_RETURN_IF_ERROR(allocate(L, 1, &set->mask));
    }
    if (gather && set->columns.empty()) {
      std::vector<DeviceBuffer> columns(layout_->columns.size());
      for (size_t c = 0; c < columns.size(); ++c) {
        REPLAYDB_RETURN_IF_ERROR(allocate(L, layout_->columns[c].step_bytes(), &columns[c]));
      }
      set->columns = std::move(columns);
    }
    return set;
  }

  void GiveBack(void* stream, int64_t batch_size, std::unique_ptr<DeviceBufferSet> set) {
    std::lock_guard<std::mutex> lock(mu_);
    free_[{stream, batch_size}].push_back(std::move(set));
  }

 private:
  const std::shared_ptr<const TableLayout> layout_;
  std::mutex mu_;
  std::map<std::pair<void*, int64_t>, std::vector<std::unique_ptr<DeviceBufferSet>>> free_;
};

}  // namespace

struct replaydb_table_t {
  std::shared_ptr<Table> table;
  std::shared_ptr<const TableLayout> layout;
  std::shared_ptr<DeviceBufferPool> pool;
};

struct replaydb_writer_t {
  std::unique_ptr<TrajectoryWriter> writer;
  std::shared_ptr<const TableLayout> layout;
};

struct replaydb_vector_writer_t {
  std::unique_ptr<VectorWriter> writer;
  std::shared_ptr<const TableLayout> layout;
};

namespace {

// A DeviceSampler and the lock that keeps it to one thread at a time: the
// learner's Next and batch releases, which may come from any thread.
// Shared by the sampler handle and its batches; the last one destroys it.
struct SamplerState {
  std::mutex mu;
  std::unique_ptr<DeviceSampler> sampler;
  std::shared_ptr<const TableLayout> layout;
  bool weights = false;  // importance_beta >= 0
};

}  // namespace

struct replaydb_sampler_t {
  std::shared_ptr<SamplerState> state;
};

struct replaydb_batch_t {
  replaydb_batch_t() { g_live_batches.fetch_add(1, std::memory_order_relaxed); }
  ~replaydb_batch_t() {
    fields.clear();
    memory.reset();  // gives device buffers back before the count drops
    g_live_batches.fetch_sub(1, std::memory_order_relaxed);
  }
  replaydb_batch_t(const replaydb_batch_t&) = delete;
  replaydb_batch_t& operator=(const replaydb_batch_t&) = delete;

  std::atomic<int64_t> references{1};
  int64_t batch_size = 0;
  int64_t sequence_length = 0;
  int device = -1;
  std::vector<Field> fields;
  // Columns that a replaydb_array_t cannot hold (more than kMaxColumnDims
  // dims; tables made through the C++ API): name and why.
  std::vector<std::pair<std::string, std::string>> inexpressible;
  std::unique_ptr<BatchMemory> memory;

  const Field* Find(std::string_view name) const {
    for (const Field& f : fields) {
      if (f.name == name) return &f;
    }
    return nullptr;
  }

  // Adds field `name`: [leading..., shape...] values of `dtype` at `data`.
  // A name already taken (a table column named like one of the batch's own
  // arrays) keeps its first field: columns come first.
  void Add(std::string name, void* data, int dtype, std::initializer_list<int64_t> leading,
           const Shape& shape = Shape()) {
    if (Find(name) != nullptr) return;
    const int ndim = static_cast<int>(leading.size()) + shape.rank();
    if (ndim > REPLAYDB_MAX_DIMS) {
      inexpressible.emplace_back(
          name, "column " + Quoted(name) + " has " + std::to_string(shape.rank()) +
                    " dims; a batch field holds at most " + std::to_string(kMaxColumnDims) +
                    " after [B, L] (REPLAYDB_MAX_DIMS)");
      return;
    }
    Field f;
    f.name = std::move(name);
    f.array = {};
    f.array.data = data;
    f.array.dtype = dtype;
    f.array.ndim = ndim;
    size_t elements = 1;
    int d = 0;
    for (int64_t n : leading) f.array.dims[d++] = n;
    for (int64_t n : shape.dims()) f.array.dims[d++] = n;
    for (int i = 0; i < ndim; ++i) elements *= static_cast<size_t>(f.array.dims[i]);
    f.array.nbytes = elements * replaydb_dtype_size(dtype);
    f.array.device = device;
    fields.push_back(std::move(f));
  }
};

namespace {

class HostBatchMemory final : public BatchMemory {
 public:
  SampleBatch batch;
};

// The pool's set goes back to it when the batch's last reference does.
class PooledDeviceMemory final : public BatchMemory {
 public:
  PooledDeviceMemory(std::shared_ptr<DeviceBufferPool> pool, void* stream, int64_t batch_size,
                     std::unique_ptr<DeviceBufferSet> set)
      : pool_(std::move(pool)), stream_(stream), batch_size_(batch_size), set_(std::move(set)) {}
  ~PooledDeviceMemory() override {
    GuardVoid([&] { pool_->GiveBack(stream_, batch_size_, std::move(set_)); });
  }
  const DeviceBufferSet& set() const { return *set_; }

 private:
  const std::shared_ptr<DeviceBufferPool> pool_;
  void* const stream_;
  const int64_t batch_size_;
  std::unique_ptr<DeviceBufferSet> set_;
};

// A batch lent by a DeviceSampler, handed back (DeviceSampler::Release on
// the consumer's stream) when the batch's last reference goes. Holds the
// sampler, which therefore outlives replaydb_sampler_destroy while batches
// are alive.
class SamplerBatchMemory final : public BatchMemory {
 public:
  SamplerBatchMemory(std::shared_ptr<SamplerState> state, void* stream)
      : state_(std::move(state)), stream_(stream) {}
  ~SamplerBatchMemory() override {
    if (lent_.id < 0) return;  // Next gave nothing
    GuardVoid([&] {
      std::lock_guard<std::mutex> lock(state_->mu);
      // Nothing to report it to: a failed release only costs the sampler a
      // buffer.
      (void)state_->sampler->Release(lent_, stream_);
    });
  }
  DeviceBatch* lent() { return &lent_; }

 private:
  const std::shared_ptr<SamplerState> state_;
  void* const stream_;
  DeviceBatch lent_;
};

replaydb_batch_t* NewHostBatch(const TableLayout& layout, std::unique_ptr<HostBatchMemory> memory) {
  auto batch = std::make_unique<replaydb_batch_t>();
  SampleBatch& s = memory->batch;
  const int64_t B = s.batch_size;
  const int64_t L = s.sequence_length;
  batch->batch_size = B;
  batch->sequence_length = L;
  batch->device = -1;
  for (size_t c = 0; c < s.columns.size(); ++c) {
    batch->Add(layout.columns[c].name, s.columns[c].data(), static_cast<int>(s.columns[c].dtype()),
               {B, L}, layout.columns[c].shape);
  }
  batch->Add("keys", s.keys.data(), REPLAYDB_U64, {B});
  batch->Add("probabilities", s.probabilities.data(), REPLAYDB_F64, {B});
  if (!s.weights.empty()) batch->Add("weights", s.weights.data(), REPLAYDB_F64, {B});
  batch->Add("mask", s.mask.data(), REPLAYDB_U8, {B, L});
  batch->Add("priorities", s.priorities.data(), REPLAYDB_F64, {B});
  batch->Add("times_sampled", s.times_sampled.data(), REPLAYDB_U32, {B});
  batch->memory = std::move(memory);
  return batch.release();
}

// The fields of a batch in device memory: columns (when gathered), keys,
// probabilities, weights (when drawn with importance_beta) and mask.
void AddDeviceFields(replaydb_batch_t* batch, const TableLayout& layout,
                     const std::vector<void*>& columns, uint64_t* keys, float* probabilities,
                     float* weights, uint8_t* mask) {
  const int64_t B = batch->batch_size;
  const int64_t L = batch->sequence_length;
  for (size_t c = 0; c < columns.size(); ++c) {
    batch->Add(layout.columns[c].name, columns[c], static_cast<int>(layout.columns[c].dtype),
               {B, L}, layout.columns[c].shape);
  }
  batch->Add("keys", keys, REPLAYDB_U64, {B});
  batch->Add("probabilities", probabilities, REPLAYDB_F32, {B});
  if (weights != nullptr) batch->Add("weights", weights, REPLAYDB_F32, {B});
  batch->Add("mask", mask, REPLAYDB_U8, {B, L});
}

replaydb_table_t* NewTableHandle(std::shared_ptr<Table> table) {
  auto layout = std::make_shared<TableLayout>();
  const TableSpec spec = table->spec();
  layout->name = table->name();
  layout->columns = spec.columns;
  layout->sequence_length = spec.sequence_length;
  layout->device = table->Info().device;
  auto handle = std::make_unique<replaydb_table_t>();
  handle->table = std::move(table);
  handle->pool = std::make_shared<DeviceBufferPool>(layout);
  handle->layout = std::move(layout);
  return handle.release();
}

// ----------------------------------------------------------------- JSON

// Keys stay in the order they are written.
using OrderedJson = nlohmann::ordered_json;

// `j` as compact JSON text. nlohmann writes the strings (escaped; bytes that
// are not UTF-8 become U+FFFD), integers, booleans and null; the doubles are
// written here, as the shortest text that reads back (std::to_chars: 1 for
// 1.0, 0.1 for 0.1), or null when not finite (JSON has no infinity or NaN).
// nlohmann's dump has no option for that and would change the text: it
// writes 1.0 (which Python's json reads as a float, not an int), and its
// Grisu2 digits are at times one longer than the shortest
// (0.38822186639999817 for 0.3882218663999982).
void DumpJson(const OrderedJson& j, std::string* out) {
  constexpr auto kReplace = OrderedJson::error_handler_t::replace;
  switch (j.type()) {
    case OrderedJson::value_t::object: {
      out->push_back('{');
      bool first = true;
      for (const auto& member : j.items()) {
        if (!first) out->push_back(',');
        first = false;
        *out += OrderedJson(member.key()).dump(-1, ' ', false, kReplace);
        out->push_back(':');
        DumpJson(member.value(), out);
      }
      out->push_back('}');
      return;
    }
    case OrderedJson::value_t::array: {
      out->push_back('[');
      for (size_t i = 0; i < j.size(); ++i) {
        if (i > 0) out->push_back(',');
        DumpJson(j[i], out);
      }
      out->push_back(']');
      return;
    }
    case OrderedJson::value_t::number_float: {
      const double v = j.get<double>();
      if (!std::isfinite(v)) {
        out->append("null");
        return;
      }
      char text[64];
      const auto r = std::to_chars(text, text + sizeof text, v);
      out->append(text, r.ptr);
      return;
    }
    default:
      *out += j.dump(-1, ' ', false, kReplace);
  }
}

std::string SpecJson(const TableSpec& spec) {
  OrderedJson columns = OrderedJson::array();
  for (const ColumnSpec& col : spec.columns) {
    OrderedJson shape = OrderedJson::array();
    for (int d = 0; d < col.shape.rank(); ++d) shape.push_back(col.shape.dim(d));
    columns.push_back(OrderedJson{
        {"name", col.name}, {"dtype", replaydb::DTypeName(col.dtype)}, {"shape", shape}});
  }
  const RateLimiterSpec& r = spec.rate_limiter;
  const OrderedJson j = {
      {"name", spec.name},
      {"columns", columns},
      {"capacity_steps", spec.capacity_steps},
      {"capacity_bytes", spec.capacity_bytes},
      {"block_steps", spec.block_steps},
      {"sequence_length", spec.sequence_length},
      {"padding", replaydb::PaddingName(spec.padding)},
      {"selector", replaydb::SelectorKindName(spec.selector)},
      {"eviction", replaydb::EvictionPolicyName(spec.eviction)},
      {"step_priority", replaydb::StepPriorityName(spec.step_priority)},
      {"priority_exponent", spec.priority_exponent},
      {"priority_device", spec.priority_device},
      {"placement", spec.placement.ToString()},
      {"logging", replaydb::TableLoggingName(spec.logging)},
      {"acks", replaydb::AcksName(spec.acks)},
      {"max_lag_ms", spec.max_lag_ms},
      {"max_times_sampled", spec.max_times_sampled},
      {"spill", spec.spill},
      {"rotation_fraction", spec.rotation_fraction},
      {"rotation_every_samples", spec.rotation_every_samples},
      {"lanes", spec.lanes},
      {"rate_limiter",
       {{"samples_per_insert", r.samples_per_insert},
        {"min_size_to_sample", r.min_size_to_sample},
        {"min_diff", r.min_diff},
        {"max_diff", r.max_diff}}},
  };
  std::string text;
  DumpJson(j, &text);
  return text;
}

// `strings` as a malloc'ed array of malloc'ed strings (NULL when empty), for
// replaydb_free_strings.
Status MallocStrings(const char* function, const std::vector<std::string>& strings, char*** out,
                     size_t* count) {
  *out = nullptr;
  *count = 0;
  if (strings.empty()) return Status::OK();
  char** array = static_cast<char**>(std::calloc(strings.size(), sizeof(char*)));
  bool ok = array != nullptr;
  for (size_t i = 0; ok && i < strings.size(); ++i) {
    array[i] = MallocString(strings[i]);
    ok = array[i] != nullptr;
  }
  if (!ok) {
    replaydb_free_strings(array, array == nullptr ? 0 : strings.size());
    return Status::ResourceExhausted(std::string(function) + ": out of memory for " +
                                     std::to_string(strings.size()) + " strings");
  }
  *out = array;
  *count = strings.size();
  return Status::OK();
}

// A replaydb_table_spec_set_* of an enum field: `text` named as `what`,
// parsed into spec->spec.*field.
template <typename Enum>
int SetSpecEnum(const char* function, replaydb_table_spec_t* spec, const char* what,
                const char* text, std::string_view (*name)(Enum), Enum TableSpec::*field,
                char** errptr) noexcept {
  return Guard(function, errptr, [&]() -> Status {
    if (spec == nullptr) return NullArgument(function, "spec");
    return ParseEnum(function, what, text, name, &(spec->spec.*field));
  });
}

}  // namespace

extern "C" {

// ------------------------------------------------- memory, version, GPUs

void replaydb_free(void* p) {
  std::free(p);
}

namespace {
struct CInterruptCheck {
  int (*check)(void*) = nullptr;
  void* arg = nullptr;
};
thread_local CInterruptCheck c_interrupt_check;
bool RunCInterruptCheck(void*) { return c_interrupt_check.check(c_interrupt_check.arg) != 0; }
}  // namespace

void replaydb_set_interrupt_check(int (*check)(void* arg), void* arg) {
  c_interrupt_check = CInterruptCheck{check, arg};
  replaydb::SetThreadInterruptCheck(check == nullptr ? nullptr : &RunCInterruptCheck, nullptr);
}

void replaydb_free_strings(char** strings, size_t n) {
  if (strings == nullptr) return;
  for (size_t i = 0; i < n; ++i) std::free(strings[i]);
  std::free(strings);
}

const char* replaydb_version(void) {
  return REPLAYDB_VERSION_STRING;
}

const char* replaydb_code_name(int code) {
  return GuardValue<const char*>("invalid", [&] {
    return code >= 0 && code < kNumCodes ? CodeNames()[code].c_str() : "invalid";
  });
}

const char* replaydb_dtype_name(int dtype) {
  return GuardValue<const char*>("invalid", [&]() -> const char* {
    if (IsColumnDType(dtype)) return DTypeNames()[dtype].c_str();
    if (dtype == REPLAYDB_U32) return "u32";
    if (dtype == REPLAYDB_U64) return "u64";
    return "invalid";
  });
}

size_t replaydb_dtype_size(int dtype) {
  if (IsColumnDType(dtype)) return replaydb::DTypeSize(static_cast<DType>(dtype));
  if (dtype == REPLAYDB_U32) return 4;
  if (dtype == REPLAYDB_U64) return 8;
  return 0;
}

int replaydb_dtype_from_name(const char* name) {
  if (name == nullptr) return -1;
  return GuardValue(-1, [&] {
    if (std::optional<DType> d = replaydb::ParseDType(name)) return static_cast<int>(*d);
    if (std::strcmp(name, "u32") == 0) return static_cast<int>(REPLAYDB_U32);
    if (std::strcmp(name, "u64") == 0) return static_cast<int>(REPLAYDB_U64);
    return -1;
  });
}

int replaydb_cuda_device_count(void) {
  return GuardValue(0, [] { return replaydb::CudaDeviceCount(); });
}

int replaydb_stream_wait(void* waiting, void* on, char** errptr) {
  return Guard("replaydb_stream_wait", errptr,
               [&]() -> Status { return replaydb::StreamWait(waiting, on); });
}

// ------------------------------------------------------ database options

replaydb_options_t* replaydb_options_create(void) {
  return GuardValue<replaydb_options_t*>(nullptr, [] { return new replaydb_options_t; });
}

void replaydb_options_destroy(replaydb_options_t* options) {
  delete options;
}

void replaydb_options_set_create_if_missing(replaydb_options_t* o, int v) {
  if (o != nullptr) o->options.create_if_missing = v != 0;
}

void replaydb_options_set_error_if_exists(replaydb_options_t* o, int v) {
  if (o != nullptr) o->options.error_if_exists = v != 0;
}

void replaydb_options_set_wal_enabled(replaydb_options_t* o, int v) {
  if (o != nullptr) o->options.wal.enabled = v != 0;
}

int replaydb_options_set_wal_sync(replaydb_options_t* options, const char* mode, char** errptr) {
  constexpr char kFn[] = "replaydb_options_set_wal_sync";
  return Guard(kFn, errptr, [&]() -> Status {
    if (options == nullptr) return NullArgument(kFn, "options");
    return ParseEnum(kFn, "mode", mode, replaydb::WalSyncModeName, &options->options.wal.sync);
  });
}

void replaydb_options_set_checkpoint(replaydb_options_t* o, int64_t seconds, uint64_t wal_bytes,
                                     int on_close) {
  if (o == nullptr) return;
  o->options.checkpoint.every = std::chrono::seconds(seconds < 0 ? 0 : seconds);
  o->options.checkpoint.every_wal_bytes = wal_bytes;
  o->options.checkpoint.on_close = on_close != 0;
}

// ------------------------------------------------------------- databases

int replaydb_open(const replaydb_options_t* options, const char* path, replaydb_db_t** db,
                  char** errptr) {
  constexpr char kFn[] = "replaydb_open";
  return Guard(kFn, errptr, [&]() -> Status {
    if (db == nullptr) return NullArgument(kFn, "db");
    *db = nullptr;
    if (path == nullptr) return NullArgument(kFn, "path");
    auto opened = replaydb::DB::Open(options != nullptr ? options->options : DBOptions(), path);
    if (!opened.ok()) return opened.status();
    *db = new replaydb_db_t{std::move(opened).value()};
    return Status::OK();
  });
}

int replaydb_open_read_only(const char* path, replaydb_db_t** db, char** errptr) {
  constexpr char kFn[] = "replaydb_open_read_only";
  return Guard(kFn, errptr, [&]() -> Status {
    if (db == nullptr) return NullArgument(kFn, "db");
    *db = nullptr;
    if (path == nullptr) return NullArgument(kFn, "path");
    auto opened = replaydb::DB::OpenReadOnly(DBOptions(), path);
    if (!opened.ok()) return opened.status();
    *db = new replaydb_db_t{std::move(opened).value()};
    return Status::OK();
  });
}

replaydb_connect_options_t* replaydb_connect_options_create(void) {
  return GuardValue<replaydb_connect_options_t*>(nullptr,
                                                 [] { return new replaydb_connect_options_t; });
}

void replaydb_connect_options_destroy(replaydb_connect_options_t* options) {
  delete options;
}

void replaydb_connect_options_set_client_name(replaydb_connect_options_t* o, const char* name) {
  GuardVoid([&] {
    if (o != nullptr) o->options.client_name = name != nullptr ? name : ConnectOptions{}.client_name;
  });
}

void replaydb_connect_options_set_token_file(replaydb_connect_options_t* o, const char* path) {
  GuardVoid([&] {
    if (o != nullptr) o->options.token_file = path != nullptr ? path : "";
  });
}

void replaydb_connect_options_set_connect_timeout_ms(replaydb_connect_options_t* o, int64_t ms) {
  if (o != nullptr) o->options.connect_timeout = std::chrono::milliseconds(ms);
}

void replaydb_connect_options_set_call_timeout_ms(replaydb_connect_options_t* o, int64_t ms) {
  if (o != nullptr) o->options.call_timeout = std::chrono::milliseconds(ms);
}

void replaydb_connect_options_set_heartbeat_ms(replaydb_connect_options_t* o, int64_t ms) {
  if (o != nullptr) o->options.heartbeat = std::chrono::milliseconds(ms);
}

void replaydb_connect_options_set_read_in_place(replaydb_connect_options_t* o, int v,
                                                uint64_t min_bytes) {
  if (o == nullptr) return;
  o->options.read_in_place = v != 0;
  o->options.read_in_place_min_bytes = min_bytes;
}

void replaydb_connect_options_set_skip_unavailable_shards(replaydb_connect_options_t* o, int v) {
  if (o != nullptr) o->options.skip_unavailable_shards = v != 0;
}

namespace {

// replaydb_connect and replaydb_connect_with_options, as `fn`.
int ConnectAs(const char* fn, const char* address, const ConnectOptions& options,
              replaydb_db_t** db, char** errptr) {
  return Guard(fn, errptr, [&]() -> Status {
    if (db == nullptr) return NullArgument(fn, "db");
    *db = nullptr;
    if (address == nullptr) return NullArgument(fn, "address");
    auto connected = replaydb::DB::Connect(address, options);
    if (!connected.ok()) return connected.status();
    *db = new replaydb_db_t{std::move(connected).value()};
    return Status::OK();
  });
}

}  // namespace

int replaydb_connect_with_options(const char* address, const replaydb_connect_options_t* options,
                                  replaydb_db_t** db, char** errptr) {
  return ConnectAs("replaydb_connect_with_options", address,
                   options != nullptr ? options->options : ConnectOptions{}, db, errptr);
}

int replaydb_connect(const char* address, const char* client_name, const char* token_file,
                     int64_t connect_timeout_ms, replaydb_db_t** db, char** errptr) {
  ConnectOptions o;
  if (client_name != nullptr) o.client_name = client_name;
  if (token_file != nullptr) o.token_file = token_file;
  if (connect_timeout_ms > 0) o.connect_timeout = std::chrono::milliseconds(connect_timeout_ms);
  return ConnectAs("replaydb_connect", address, o, db, errptr);
}

void replaydb_close(replaydb_db_t* db) {
  GuardVoid([&] { delete db; });
}

int replaydb_checkpoint(replaydb_db_t* db, char** errptr) {
  constexpr char kFn[] = "replaydb_checkpoint";
  return Guard(kFn, errptr, [&]() -> Status {
    if (db == nullptr) return NullArgument(kFn, "db");
    return db->db->Checkpoint();
  });
}

int replaydb_list_tables(replaydb_db_t* db, char*** names, size_t* count, char** errptr) {
  constexpr char kFn[] = "replaydb_list_tables";
  return Guard(kFn, errptr, [&]() -> Status {
    if (db == nullptr) return NullArgument(kFn, "db");
    if (names == nullptr) return NullArgument(kFn, "names");
    if (count == nullptr) return NullArgument(kFn, "count");
    return MallocStrings(kFn, db->db->ListTables(), names, count);
  });
}

int replaydb_drop_table(replaydb_db_t* db, const char* name, char** errptr) {
  constexpr char kFn[] = "replaydb_drop_table";
  return Guard(kFn, errptr, [&]() -> Status {
    if (db == nullptr) return NullArgument(kFn, "db");
    if (name == nullptr) return NullArgument(kFn, "name");
    return db->db->DropTable(name);
  });
}

int replaydb_export_table(replaydb_db_t* db, const char* name, const char* dir,
                          char** errptr) {
  constexpr char kFn[] = "replaydb_export_table";
  return Guard(kFn, errptr, [&]() -> Status {
    if (db == nullptr) return NullArgument(kFn, "db");
    if (name == nullptr) return NullArgument(kFn, "name");
    if (dir == nullptr) return NullArgument(kFn, "dir");
    return db->db->ExportTable(name, dir);
  });
}

int replaydb_import_table(replaydb_db_t* db, const char* source_dir, const char* source_table,
                          const char* name, replaydb_table_t** table, char** errptr) {
  constexpr char kFn[] = "replaydb_import_table";
  return Guard(kFn, errptr, [&]() -> Status {
    if (db == nullptr) return NullArgument(kFn, "db");
    if (source_dir == nullptr) return NullArgument(kFn, "source_dir");
    if (source_table == nullptr) return NullArgument(kFn, "source_table");
    if (table == nullptr) return NullArgument(kFn, "table");
    *table = nullptr;
    auto made = db->db->ImportTable(source_dir, source_table, name == nullptr ? "" : name);
    if (!made.ok()) return made.status();
    *table = NewTableHandle(std::move(made).value());
    return Status::OK();
  });
}

const char* replaydb_db_path(const replaydb_db_t* db) {
  return db == nullptr ? nullptr : db->db->path().c_str();
}

int replaydb_db_read_only(const replaydb_db_t* db) {
  return db != nullptr && db->db->read_only() ? 1 : 0;
}

// ------------------------------------------------------------ table specs

replaydb_table_spec_t* replaydb_table_spec_create(const char* name) {
  return GuardValue<replaydb_table_spec_t*>(nullptr, [&] {
    auto* spec = new replaydb_table_spec_t;
    spec->spec.name = name != nullptr ? name : "";
    return spec;
  });
}

void replaydb_table_spec_destroy(replaydb_table_spec_t* spec) {
  delete spec;
}

int replaydb_table_spec_add_column(replaydb_table_spec_t* spec, const char* name, int dtype,
                                   int ndim, const int64_t* dims, char** errptr) {
  constexpr char kFn[] = "replaydb_table_spec_add_column";
  return Guard(kFn, errptr, [&]() -> Status {
    if (spec == nullptr) return NullArgument(kFn, "spec");
    if (name == nullptr) return NullArgument(kFn, "name");
    const std::string where = std::string(kFn) + ": column " + Quoted(name);
    for (std::string_view reserved : kBatchArrayNames) {
      if (reserved == name) {
        return Status::InvalidArgument(
            where +
            " is named like a batch's own array (keys, probabilities, weights, mask, "
            "priorities, times_sampled); choose another name");
      }
    }
    if (!IsColumnDType(dtype)) {
      return Status::InvalidArgument(where + " has dtype " + std::to_string(dtype) + " (" +
                                     replaydb_dtype_name(dtype) +
                                     "); columns hold REPLAYDB_BOOL (0) to REPLAYDB_F64 (9)");
    }
    if (ndim < 0 || ndim > kMaxColumnDims) {
      return Status::InvalidArgument(
          where + " has ndim " + std::to_string(ndim) + "; it must be between 0 and " +
          std::to_string(kMaxColumnDims) + " (batch fields add [B, L] within REPLAYDB_MAX_DIMS)");
    }
    if (ndim > 0 && dims == nullptr) {
      return Status::InvalidArgument(where + " has ndim " + std::to_string(ndim) +
                                     " but dims is NULL");
    }
    for (int d = 0; d < ndim; ++d) {
      if (dims[d] < 0) {
        return Status::InvalidArgument(where + " has dims[" + std::to_string(d) +
                                       "] = " + std::to_string(dims[d]) + "; dims must be >= 1");
      }
    }
    spec->spec.columns.push_back(
        {name, static_cast<DType>(dtype),
         Shape::FromSpan(std::span<const int64_t>(dims, static_cast<size_t>(ndim)))});
    return Status::OK();
  });
}

void replaydb_table_spec_set_capacity_steps(replaydb_table_spec_t* s, int64_t v) {
  if (s != nullptr) s->spec.capacity_steps = v;
}

void replaydb_table_spec_set_capacity_bytes(replaydb_table_spec_t* s, int64_t v) {
  if (s != nullptr) s->spec.capacity_bytes = v;
}

void replaydb_table_spec_set_block_steps(replaydb_table_spec_t* s, int64_t v) {
  if (s != nullptr) s->spec.block_steps = v;
}

void replaydb_table_spec_set_sequence_length(replaydb_table_spec_t* s, int64_t v) {
  if (s != nullptr) s->spec.sequence_length = v;
}

int replaydb_table_spec_set_padding(replaydb_table_spec_t* spec, const char* padding,
                                    char** errptr) {
  return SetSpecEnum("replaydb_table_spec_set_padding", spec, "padding", padding,
                     replaydb::PaddingName, &TableSpec::padding, errptr);
}

int replaydb_table_spec_set_selector(replaydb_table_spec_t* spec, const char* selector,
                                     char** errptr) {
  return SetSpecEnum("replaydb_table_spec_set_selector", spec, "selector", selector,
                     replaydb::SelectorKindName, &TableSpec::selector, errptr);
}

int replaydb_table_spec_set_eviction(replaydb_table_spec_t* spec, const char* eviction,
                                     char** errptr) {
  return SetSpecEnum("replaydb_table_spec_set_eviction", spec, "eviction", eviction,
                     replaydb::EvictionPolicyName, &TableSpec::eviction, errptr);
}

int replaydb_table_spec_set_step_priority(replaydb_table_spec_t* spec, const char* step_priority,
                                          char** errptr) {
  return SetSpecEnum("replaydb_table_spec_set_step_priority", spec, "step_priority", step_priority,
                     replaydb::StepPriorityName, &TableSpec::step_priority, errptr);
}

void replaydb_table_spec_set_priority_exponent(replaydb_table_spec_t* s, double v) {
  if (s != nullptr) s->spec.priority_exponent = v;
}

void replaydb_table_spec_set_priority_device(replaydb_table_spec_t* s, int32_t device) {
  if (s != nullptr) s->spec.priority_device = device;
}

int replaydb_table_spec_set_placement(replaydb_table_spec_t* spec, const char* placement,
                                      char** errptr) {
  constexpr char kFn[] = "replaydb_table_spec_set_placement";
  return Guard(kFn, errptr, [&]() -> Status {
    if (spec == nullptr) return NullArgument(kFn, "spec");
    if (placement == nullptr) return NullArgument(kFn, "placement");
    REPLAYDB_ASSIGN_OR_RETURN(spec->spec.placement, replaydb::Placement::Parse(placement));
    return Status::OK();
  });
}

int replaydb_table_spec_set_logging(replaydb_table_spec_t* spec, const char* logging,
                                    char** errptr) {
  return SetSpecEnum("replaydb_table_spec_set_logging", spec, "logging", logging,
                     replaydb::TableLoggingName, &TableSpec::logging, errptr);
}

int replaydb_table_spec_set_acks(replaydb_table_spec_t* spec, const char* acks, char** errptr) {
  constexpr char kFn[] = "replaydb_table_spec_set_acks";
  return Guard(kFn, errptr, [&]() -> Status {
    if (spec == nullptr) return NullArgument(kFn, "spec");
    if (acks == nullptr) return NullArgument(kFn, "acks");
    REPLAYDB_ASSIGN_OR_RETURN(spec->spec.acks, replaydb::ParseAcks(acks));
    return Status::OK();
  });
}

void replaydb_table_spec_set_max_lag_ms(replaydb_table_spec_t* s, int64_t max_lag_ms) {
  if (s != nullptr) s->spec.max_lag_ms = max_lag_ms;
}

void replaydb_table_spec_set_max_times_sampled(replaydb_table_spec_t* s, int64_t v) {
  if (s != nullptr) s->spec.max_times_sampled = v;
}

void replaydb_table_spec_set_spill(replaydb_table_spec_t* s, int v) {
  if (s != nullptr) s->spec.spill = v != 0;
}

void replaydb_table_spec_set_rotation(replaydb_table_spec_t* s, double fraction,
                                      int64_t every_samples) {
  if (s == nullptr) return;
  s->spec.rotation_fraction = fraction;
  s->spec.rotation_every_samples = every_samples;
}

void replaydb_table_spec_set_lanes(replaydb_table_spec_t* s, int64_t lanes) {
  if (s != nullptr) s->spec.lanes = lanes;
}

void replaydb_table_spec_set_rate_limiter(replaydb_table_spec_t* s, double samples_per_insert,
                                          int64_t min_size_to_sample, double min_diff,
                                          double max_diff) {
  if (s == nullptr) return;
  s->spec.rate_limiter = {samples_per_insert, min_size_to_sample, min_diff, max_diff};
}

char* replaydb_table_spec_json(const replaydb_table_spec_t* s) {
  if (s == nullptr) return nullptr;
  return GuardValue<char*>(nullptr, [&] { return MallocString(SpecJson(s->spec)); });
}

// ------------------------------------------------------------------ tables

int replaydb_create_table(replaydb_db_t* db, const replaydb_table_spec_t* spec,
                          replaydb_table_t** table, char** errptr) {
  constexpr char kFn[] = "replaydb_create_table";
  return Guard(kFn, errptr, [&]() -> Status {
    if (table == nullptr) return NullArgument(kFn, "table");
    *table = nullptr;
    if (db == nullptr) return NullArgument(kFn, "db");
    if (spec == nullptr) return NullArgument(kFn, "spec");
    auto created = db->db->CreateTable(spec->spec);
    if (!created.ok()) return created.status();
    *table = NewTableHandle(std::move(created).value());
    return Status::OK();
  });
}

int replaydb_get_table(replaydb_db_t* db, const char* name, replaydb_table_t** table,
                       char** errptr) {
  constexpr char kFn[] = "replaydb_get_table";
  return Guard(kFn, errptr, [&]() -> Status {
    if (table == nullptr) return NullArgument(kFn, "table");
    *table = nullptr;
    if (db == nullptr) return NullArgument(kFn, "db");
    if (name == nullptr) return NullArgument(kFn, "name");
    auto found = db->db->GetTable(name);
    if (!found.ok()) return found.status();
    *table = NewTableHandle(std::move(found).value());
    return Status::OK();
  });
}

void replaydb_table_release(replaydb_table_t* table) {
  GuardVoid([&] { delete table; });
}

replaydb_table_spec_t* replaydb_table_get_spec(replaydb_table_t* table) {
  if (table == nullptr) return nullptr;
  return GuardValue<replaydb_table_spec_t*>(
      nullptr, [&] { return new replaydb_table_spec_t{table->table->spec()}; });
}

const char* replaydb_table_name(const replaydb_table_t* table) {
  return table == nullptr ? nullptr : table->layout->name.c_str();
}

size_t replaydb_table_spec_num_columns(const replaydb_table_spec_t* s) {
  return s == nullptr ? 0 : s->spec.columns.size();
}

const char* replaydb_table_spec_column_name(const replaydb_table_spec_t* s, size_t i) {
  if (s == nullptr || i >= s->spec.columns.size()) return nullptr;
  return s->spec.columns[i].name.c_str();
}

int replaydb_table_spec_column_dtype(const replaydb_table_spec_t* s, size_t i) {
  if (s == nullptr || i >= s->spec.columns.size()) return -1;
  return static_cast<int>(s->spec.columns[i].dtype);
}

int replaydb_table_spec_column_ndim(const replaydb_table_spec_t* s, size_t i) {
  if (s == nullptr || i >= s->spec.columns.size()) return -1;
  return s->spec.columns[i].shape.rank();
}

const int64_t* replaydb_table_spec_column_dims(const replaydb_table_spec_t* s, size_t i) {
  if (s == nullptr || i >= s->spec.columns.size()) return nullptr;
  return s->spec.columns[i].shape.dims().data();
}

int64_t replaydb_table_spec_sequence_length(const replaydb_table_spec_t* s) {
  return s == nullptr ? 0 : s->spec.sequence_length;
}

int replaydb_table_mass(replaydb_table_t* table, double* total, int64_t* items, char** errptr) {
  constexpr char kFn[] = "replaydb_table_mass";
  return Guard(kFn, errptr, [&]() -> Status {
    if (table == nullptr) return NullArgument(kFn, "table");
    if (total == nullptr) return NullArgument(kFn, "total");
    if (items == nullptr) return NullArgument(kFn, "items");
    Result<replaydb::SamplingMass> mass = table->table->Mass();
    if (!mass.ok()) return mass.status();
    *total = mass->total;
    *items = mass->items;
    return Status::OK();
  });
}

int replaydb_table_info(replaydb_table_t* table, replaydb_table_info_t* info, char** errptr) {
  constexpr char kFn[] = "replaydb_table_info";
  return Guard(kFn, errptr, [&]() -> Status {
    if (table == nullptr) return NullArgument(kFn, "table");
    if (info == nullptr) return NullArgument(kFn, "info");
    const TableInfo t = table->table->Info();
    replaydb_table_info_t out = {};
    out.num_steps = t.num_steps;
    out.num_items = t.num_items;
    out.num_trajectories = t.num_trajectories;
    out.num_open_trajectories = t.num_open_trajectories;
    std::snprintf(out.placement, sizeof out.placement, "%s", t.placement.c_str());
    out.device = t.device;
    out.bytes_used = t.bytes_used;
    out.bytes_reserved = t.bytes_reserved;
    out.bytes_capacity = t.bytes_capacity;
    out.blocks_used = t.blocks_used;
    out.blocks_capacity = t.blocks_capacity;
    out.steps_inserted = t.steps_inserted;
    out.items_inserted = t.items_inserted;
    out.items_sampled = t.items_sampled;
    out.items_removed = t.items_removed;
    out.evicted_trajectories = t.evicted_trajectories;
    out.evicted_items = t.evicted_items;
    out.priority_updates = t.priority_updates;
    out.priority_updates_skipped = t.priority_updates_skipped;
    out.max_priority_seen = t.max_priority_seen;
    out.rate_limiter_inserts = t.rate_limiter.inserts;
    out.rate_limiter_samples = t.rate_limiter.samples;
    out.rate_limiter_deletes = t.rate_limiter.deletes;
    out.rate_limiter_blocked_inserts = t.rate_limiter.blocked_inserts;
    out.rate_limiter_blocked_samples = t.rate_limiter.blocked_samples;
    out.cold_trajectories = t.cold_trajectories;
    out.cold_steps = t.cold_steps;
    out.cold_bytes = t.cold_bytes;
    out.spilled_trajectories = t.spilled_trajectories;
    out.spilled_bytes = t.spilled_bytes;
    out.loaded_trajectories = t.loaded_trajectories;
    out.rotations = t.rotations;
    out.spill_queue = t.spill_queue;
    *info = out;
    return Status::OK();
  });
}

int replaydb_table_delete_items(replaydb_table_t* table, const uint64_t* keys, size_t n,
                                int64_t* deleted, char** errptr) {
  constexpr char kFn[] = "replaydb_table_delete_items";
  if (deleted != nullptr) *deleted = 0;
  return Guard(kFn, errptr, [&]() -> Status {
    if (table == nullptr) return NullArgument(kFn, "table");
    if (keys == nullptr && n > 0) return NullArgument(kFn, "keys");
    return table->table->DeleteItems(std::span<const ItemKey>(keys, n), deleted);
  });
}

int replaydb_table_clear(replaydb_table_t* table, char** errptr) {
  constexpr char kFn[] = "replaydb_table_clear";
  return Guard(kFn, errptr, [&]() -> Status {
    if (table == nullptr) return NullArgument(kFn, "table");
    return table->table->Clear();
  });
}

int replaydb_table_seed(replaydb_table_t* table, uint64_t seed, char** errptr) {
  constexpr char kFn[] = "replaydb_table_seed";
  return Guard(kFn, errptr, [&]() -> Status {
    if (table == nullptr) return NullArgument(kFn, "table");
    return table->table->Seed(seed);
  });
}

int replaydb_table_set_rate_limiter(replaydb_table_t* table, double samples_per_insert,
                                    int64_t min_size_to_sample, double min_diff, double max_diff,
                                    char** errptr) {
  constexpr char kFn[] = "replaydb_table_set_rate_limiter";
  return Guard(kFn, errptr, [&]() -> Status {
    if (table == nullptr) return NullArgument(kFn, "table");
    return table->table->SetRateLimiter(
        RateLimiterSpec{samples_per_insert, min_size_to_sample, min_diff, max_diff});
  });
}

int replaydb_table_load(replaydb_table_t* table, const uint64_t* ids, size_t n, char** errptr) {
  constexpr char kFn[] = "replaydb_table_load";
  return Guard(kFn, errptr, [&]() -> Status {
    if (table == nullptr) return NullArgument(kFn, "table");
    if (ids == nullptr && n > 0) return NullArgument(kFn, "ids");
    return table->table->Load(std::span<const uint64_t>(ids, n));
  });
}

int replaydb_table_update_priorities(replaydb_table_t* table, const uint64_t* keys,
                                     const double* priorities, size_t n, int64_t* updated,
                                     int64_t* skipped, char** errptr) {
  constexpr char kFn[] = "replaydb_table_update_priorities";
  return Guard(kFn, errptr, [&]() -> Status {
    if (table == nullptr) return NullArgument(kFn, "table");
    if (keys == nullptr && n > 0) return NullArgument(kFn, "keys");
    if (priorities == nullptr && n > 0) return NullArgument(kFn, "priorities");
    replaydb::PriorityUpdateResult result;
    REPLAYDB_RETURN_IF_ERROR(table->table->UpdatePriorities(
        std::span<const ItemKey>(keys, n), std::span<const double>(priorities, n), &result));
    if (updated != nullptr) *updated = result.updated;
    if (skipped != nullptr) *skipped = result.skipped;
    return Status::OK();
  });
}

int replaydb_table_update_priorities_from_device(replaydb_table_t* table,
                                                 const uint64_t* device_keys,
                                                 const float* device_priorities, int64_t n,
                                                 void* stream, char** errptr) {
  constexpr char kFn[] = "replaydb_table_update_priorities_from_device";
  return Guard(kFn, errptr, [&]() -> Status {
    if (table == nullptr) return NullArgument(kFn, "table");
    if (device_keys == nullptr && n > 0) return NullArgument(kFn, "device_keys");
    if (device_priorities == nullptr && n > 0) return NullArgument(kFn, "device_priorities");
    return table->table->UpdatePrioritiesFromDevice(device_keys, device_priorities, n, stream);
  });
}

void replaydb_table_close(replaydb_table_t* table) {
  if (table != nullptr) GuardVoid([&] { table->table->Close(); });
}

// ----------------------------------------------------------------- writers

int replaydb_table_new_writer(replaydb_table_t* table, int64_t timeout_ms, int sync,
                              replaydb_writer_t** writer, char** errptr) {
  return replaydb_table_new_writer_with_acks(table, timeout_ms, sync, nullptr, writer, errptr);
}

int replaydb_table_new_writer_with_acks(replaydb_table_t* table, int64_t timeout_ms, int sync,
                                        const char* acks, replaydb_writer_t** writer,
                                        char** errptr) {
  constexpr char kFn[] = "replaydb_table_new_writer";
  return Guard(kFn, errptr, [&]() -> Status {
    if (writer == nullptr) return NullArgument(kFn, "writer");
    *writer = nullptr;
    if (table == nullptr) return NullArgument(kFn, "table");
    replaydb::WriterOptions options;
    options.timeout = Millis(timeout_ms);
    options.sync = sync != 0;
    if (acks != nullptr) {
      REPLAYDB_ASSIGN_OR_RETURN(options.acks, replaydb::ParseAcks(acks));
    }
    auto made = table->table->NewWriter(options);
    if (!made.ok()) return made.status();
    *writer = new replaydb_writer_t{std::move(made).value(), table->layout};
    return Status::OK();
  });
}

void replaydb_writer_destroy(replaydb_writer_t* writer) {
  GuardVoid([&] { delete writer; });
}

int replaydb_writer_append(replaydb_writer_t* writer, const replaydb_tensor_t* step,
                           size_t num_columns, const double* priority, char** errptr) {
  constexpr char kFn[] = "replaydb_writer_append";
  return Guard(kFn, errptr, [&]() -> Status {
    if (writer == nullptr) return NullArgument(kFn, "writer");
    std::vector<ConstTensor> tensors;
    REPLAYDB_RETURN_IF_ERROR(
        ToConstTensors(kFn, "step", step, num_columns, *writer->layout, &tensors));
    std::optional<double> p;
    if (priority != nullptr) p = *priority;
    return writer->writer->Append(tensors, p);
  });
}

int replaydb_writer_append_many(replaydb_writer_t* writer, const replaydb_tensor_t* steps,
                                size_t num_columns, const double* priorities, size_t num_priorities,
                                char** errptr) {
  constexpr char kFn[] = "replaydb_writer_append_many";
  return Guard(kFn, errptr, [&]() -> Status {
    if (writer == nullptr) return NullArgument(kFn, "writer");
    std::vector<ConstTensor> tensors;
    REPLAYDB_RETURN_IF_ERROR(
        ToConstTensors(kFn, "steps", steps, num_columns, *writer->layout, &tensors));
    std::span<const double> p;
    REPLAYDB_RETURN_IF_ERROR(ToPriorities(kFn, priorities, num_priorities, &p));
    return writer->writer->AppendMany(tensors, p);
  });
}

int replaydb_writer_end(replaydb_writer_t* writer, int reason, char** errptr) {
  constexpr char kFn[] = "replaydb_writer_end";
  return Guard(kFn, errptr, [&]() -> Status {
    if (writer == nullptr) return NullArgument(kFn, "writer");
    EndReason r;
    REPLAYDB_RETURN_IF_ERROR(ToEndReason(kFn, reason, &r));
    return writer->writer->End(r);
  });
}

uint64_t replaydb_writer_trajectory_id(const replaydb_writer_t* writer) {
  return writer == nullptr ? 0 : writer->writer->trajectory_id();
}

int64_t replaydb_writer_num_steps(const replaydb_writer_t* writer) {
  return writer == nullptr ? 0 : writer->writer->num_steps();
}

int replaydb_table_new_vector_writer(replaydb_table_t* table, size_t num_envs, int64_t timeout_ms,
                                     int sync, int threads, replaydb_vector_writer_t** writer,
                                     char** errptr) {
  constexpr char kFn[] = "replaydb_table_new_vector_writer";
  return Guard(kFn, errptr, [&]() -> Status {
    if (writer == nullptr) return NullArgument(kFn, "writer");
    *writer = nullptr;
    if (table == nullptr) return NullArgument(kFn, "table");
    replaydb::WriterOptions options;
    options.timeout = Millis(timeout_ms);
    options.sync = sync != 0;
    options.threads = threads;
    auto made = table->table->NewVectorWriter(num_envs, options);
    if (!made.ok()) return made.status();
    *writer = new replaydb_vector_writer_t{std::move(made).value(), table->layout};
    return Status::OK();
  });
}

void replaydb_vector_writer_destroy(replaydb_vector_writer_t* writer) {
  GuardVoid([&] { delete writer; });
}

int replaydb_vector_writer_append(replaydb_vector_writer_t* writer, const replaydb_tensor_t* steps,
                                  size_t num_columns, const double* priorities,
                                  size_t num_priorities, char** errptr) {
  constexpr char kFn[] = "replaydb_vector_writer_append";
  return Guard(kFn, errptr, [&]() -> Status {
    if (writer == nullptr) return NullArgument(kFn, "writer");
    std::vector<ConstTensor> tensors;
    REPLAYDB_RETURN_IF_ERROR(
        ToConstTensors(kFn, "steps", steps, num_columns, *writer->layout, &tensors));
    std::span<const double> p;
    REPLAYDB_RETURN_IF_ERROR(ToPriorities(kFn, priorities, num_priorities, &p));
    return writer->writer->Append(tensors, p);
  });
}

int replaydb_vector_writer_append_from_device(replaydb_vector_writer_t* writer,
                                              const replaydb_tensor_t* steps, size_t num_columns,
                                              void* stream, const double* priorities,
                                              size_t num_priorities, char** errptr) {
  constexpr char kFn[] = "replaydb_vector_writer_append_from_device";
  return Guard(kFn, errptr, [&]() -> Status {
    if (writer == nullptr) return NullArgument(kFn, "writer");
    std::vector<ConstTensor> tensors;
    REPLAYDB_RETURN_IF_ERROR(
        ToConstTensors(kFn, "steps", steps, num_columns, *writer->layout, &tensors));
    std::span<const double> p;
    REPLAYDB_RETURN_IF_ERROR(ToPriorities(kFn, priorities, num_priorities, &p));
    return writer->writer->AppendFromDevice(tensors, stream, p);
  });
}

int replaydb_vector_writer_end(replaydb_vector_writer_t* writer, size_t env, int reason,
                               char** errptr) {
  constexpr char kFn[] = "replaydb_vector_writer_end";
  return Guard(kFn, errptr, [&]() -> Status {
    if (writer == nullptr) return NullArgument(kFn, "writer");
    EndReason r;
    REPLAYDB_RETURN_IF_ERROR(ToEndReason(kFn, reason, &r));
    return writer->writer->End(env, r);
  });
}

int replaydb_vector_writer_end_many(replaydb_vector_writer_t* writer, const size_t* envs,
                                    size_t num_envs_given, int reason, char** errptr) {
  constexpr char kFn[] = "replaydb_vector_writer_end_many";
  return Guard(kFn, errptr, [&]() -> Status {
    if (writer == nullptr) return NullArgument(kFn, "writer");
    if (envs == nullptr && num_envs_given > 0) return NullArgument(kFn, "envs");
    EndReason r;
    REPLAYDB_RETURN_IF_ERROR(ToEndReason(kFn, reason, &r));
    return writer->writer->EndMany(std::span<const size_t>(envs, num_envs_given), r);
  });
}

size_t replaydb_vector_writer_num_envs(const replaydb_vector_writer_t* writer) {
  return writer == nullptr ? 0 : writer->writer->num_envs();
}

uint64_t replaydb_vector_writer_trajectory_id(const replaydb_vector_writer_t* writer, size_t env) {
  if (writer == nullptr || env >= writer->writer->num_envs()) return 0;
  return writer->writer->trajectory_id(env);
}

// ----------------------------------------------------------------- samples

void replaydb_sample_options_init(replaydb_sample_options_t* options) {
  if (options == nullptr) return;
  options->timeout_ms = REPLAYDB_WAIT_FOREVER;
  options->importance_beta = -1;
  options->stratified = 0;
  options->gather = 1;
  options->peek = 0;
  options->weight_normalization = REPLAYDB_WEIGHTS_BUFFER;
}

int replaydb_table_sample(replaydb_table_t* table, int64_t batch_size,
                          const replaydb_sample_options_t* options, replaydb_batch_t** batch,
                          char** errptr) {
  constexpr char kFn[] = "replaydb_table_sample";
  return Guard(kFn, errptr, [&]() -> Status {
    if (batch == nullptr) return NullArgument(kFn, "batch");
    *batch = nullptr;
    if (table == nullptr) return NullArgument(kFn, "table");
    REPLAYDB_ASSIGN_OR_RETURN(const SampleOptions sample_options, ToSampleOptions(kFn, options));
    auto memory = std::make_unique<HostBatchMemory>();
    REPLAYDB_RETURN_IF_ERROR(table->table->Sample(batch_size, sample_options, &memory->batch));
    *batch = NewHostBatch(*table->layout, std::move(memory));
    return Status::OK();
  });
}

int replaydb_table_lookup(replaydb_table_t* table, const uint64_t* keys, size_t n,
                          replaydb_batch_t** batch, char** errptr) {
  constexpr char kFn[] = "replaydb_table_lookup";
  return Guard(kFn, errptr, [&]() -> Status {
    if (batch == nullptr) return NullArgument(kFn, "batch");
    *batch = nullptr;
    if (table == nullptr) return NullArgument(kFn, "table");
    if (keys == nullptr && n > 0) return NullArgument(kFn, "keys");
    auto memory = std::make_unique<HostBatchMemory>();
    REPLAYDB_RETURN_IF_ERROR(
        table->table->Lookup(std::span<const ItemKey>(keys, n), &memory->batch));
    *batch = NewHostBatch(*table->layout, std::move(memory));
    return Status::OK();
  });
}

int replaydb_table_sample_to_device(replaydb_table_t* table, int64_t batch_size,
                                    const replaydb_sample_options_t* options, void* stream,
                                    replaydb_batch_t** batch, char** errptr) {
  constexpr char kFn[] = "replaydb_table_sample_to_device";
  return Guard(kFn, errptr, [&]() -> Status {
    if (batch == nullptr) return NullArgument(kFn, "batch");
    *batch = nullptr;
    if (table == nullptr) return NullArgument(kFn, "table");
    REPLAYDB_ASSIGN_OR_RETURN(const SampleOptions o, ToSampleOptions(kFn, options));
    const TableLayout& layout = *table->layout;
    if (layout.device < 0 || batch_size < 1) {
      // No GPU memory to allocate on, or no size to allocate: the C++ call
      // reports it (FailedPrecondition naming the table and why it has no
      // GPU, or the batch size) in its own words. It refuses such calls
      // before writing anything; these stand-ins only pass its pointer
      // checks.
      uint64_t no_key = 0;
      float no_value[2] = {};
      const DeviceSampleOutput none{&no_key, &no_value[0], &no_value[1], {}, nullptr};
      REPLAYDB_RETURN_IF_ERROR(table->table->SampleToDevice(batch_size, o, none, stream));
      return Status::Internal(std::string(kFn) + ": table " + Quoted(layout.name) +
                              " sampled into device memory without a GPU");
    }
    REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<DeviceBufferSet> set,
                              table->pool->Take(stream, batch_size, o.gather));
    DeviceSampleOutput out;
    out.keys = set->keys.as<uint64_t>();
    out.probabilities = set->probabilities.as<float>();
    out.weights = o.importance_beta >= 0 ? set->weights.as<float>() : nullptr;
    out.mask = set->mask.as<uint8_t>();
    if (o.gather) {
      for (const DeviceBuffer& column : set->columns) out.columns.push_back(column.data());
    }
    const Status sampled = table->table->SampleToDevice(batch_size, o, out, stream);
    // Even a failed call may have queued work on `stream`; the pool hands
    // the set out again only behind it on that stream.
    auto memory =
        std::make_unique<PooledDeviceMemory>(table->pool, stream, batch_size, std::move(set));
    REPLAYDB_RETURN_IF_ERROR(sampled);
    auto made = std::make_unique<replaydb_batch_t>();
    made->batch_size = batch_size;
    made->sequence_length = layout.sequence_length;
    made->device = layout.device;
    AddDeviceFields(made.get(), layout, out.columns, out.keys, out.probabilities, out.weights,
                    out.mask);
    made->memory = std::move(memory);
    *batch = made.release();
    return Status::OK();
  });
}

int replaydb_table_sample_into(replaydb_table_t* table, int64_t batch_size,
                               const replaydb_sample_options_t* options, void* const* columns,
                               size_t num_columns, uint64_t* keys, float* probabilities,
                               float* weights, uint8_t* mask, void* stream, char** errptr) {
  constexpr char kFn[] = "replaydb_table_sample_into";
  return Guard(kFn, errptr, [&]() -> Status {
    if (table == nullptr) return NullArgument(kFn, "table");
    if (keys == nullptr) return NullArgument(kFn, "keys");
    if (probabilities == nullptr) return NullArgument(kFn, "probabilities");
    DeviceSampleOutput out{keys, probabilities, weights, {}, mask};
    if (columns == nullptr && num_columns > 0) {
      return Status::InvalidArgument(std::string(kFn) + ": columns is NULL but num_columns is " +
                                     std::to_string(num_columns));
    }
    if (columns != nullptr) {
      if (num_columns != table->layout->columns.size()) {
        return CountMismatch(kFn, num_columns, *table->layout);
      }
      out.columns.assign(columns, columns + num_columns);
    }
    REPLAYDB_ASSIGN_OR_RETURN(const SampleOptions sample_options, ToSampleOptions(kFn, options));
    return table->table->SampleToDevice(batch_size, sample_options, out, stream);
  });
}

int replaydb_table_sample_runs(replaydb_table_t* table, const replaydb_sample_run_t* runs,
                               size_t num_runs, const replaydb_sample_options_t* options,
                               size_t num_columns, void* record_event, void* stream,
                               char** errptr) {
  constexpr char kFn[] = "replaydb_table_sample_runs";
  return Guard(kFn, errptr, [&]() -> Status {
    Status s = [&]() -> Status {
      if (table == nullptr) return NullArgument(kFn, "table");
      if (runs == nullptr && num_runs > 0) return NullArgument(kFn, "runs");
      if (num_columns != 0 && num_columns != table->layout->columns.size()) {
        return CountMismatch(kFn, num_columns, *table->layout);
      }
      REPLAYDB_ASSIGN_OR_RETURN(const SampleOptions sample_options,
                                ToSampleOptions(kFn, options));
      // Every run's arguments are checked before the first draws.
      for (size_t r = 0; r < num_runs; ++r) {
        const replaydb_sample_run_t& run = runs[r];
        const std::string what = std::string(kFn) + ": run " + std::to_string(r) + "'s ";
        if (run.rows == 0) continue;
        if (run.keys == nullptr) return Status::InvalidArgument(what + "keys is NULL");
        if (run.probabilities == nullptr) {
          return Status::InvalidArgument(what + "probabilities is NULL");
        }
        if ((run.columns == nullptr) != (num_columns == 0)) {
          return Status::InvalidArgument(what + "columns is " +
                                         (run.columns == nullptr ? "NULL" : "given") +
                                         " but num_columns is " + std::to_string(num_columns));
        }
      }
      DeviceSampleOutput out;
      for (size_t r = 0; r < num_runs; ++r) {
        const replaydb_sample_run_t& run = runs[r];
        if (run.rows == 0) continue;
        const std::string which = "run " + std::to_string(r);
        if (run.wait_event != nullptr) {
          REPLAYDB_RETURN_IF_ERROR(
              replaydb::StreamWaitEvent(stream, run.wait_event).WithContext(which));
        }
        out.keys = run.keys;
        out.probabilities = run.probabilities;
        out.mask = run.mask;
        if (num_columns > 0) out.columns.assign(run.columns, run.columns + num_columns);
        REPLAYDB_RETURN_IF_ERROR(
            table->table->SampleToDevice(run.rows, sample_options, out, stream)
                .WithContext(which));
      }
      return Status::OK();
    }();
    if (record_event != nullptr) {
      const Status recorded = replaydb::RecordEvent(record_event, stream);
      if (s.ok()) s = recorded;
    }
    return s;
  });
}

int replaydb_copy_regions(const replaydb_copy_region_t* copies, size_t num_copies,
                          void* const* wait_events, size_t num_wait_events, void* record_event,
                          void* stream, char** errptr) {
  constexpr char kFn[] = "replaydb_copy_regions";
  return Guard(kFn, errptr, [&]() -> Status {
    Status s = [&]() -> Status {
      if (copies == nullptr && num_copies > 0) return NullArgument(kFn, "copies");
      if (wait_events == nullptr && num_wait_events > 0) return NullArgument(kFn, "wait_events");
      if (num_copies + num_wait_events == 0) return Status::OK();
      std::string why;
      if (replaydb::CudaDeviceCount(&why) == 0) {
        return Status::NotSupported(std::string(kFn) + ": no GPU can be used (" + why + ")");
      }
      for (size_t e = 0; e < num_wait_events; ++e) {
        REPLAYDB_RETURN_IF_ERROR(replaydb::StreamWaitEvent(stream, wait_events[e])
                                     .WithContext(std::string(kFn) + ": wait event " +
                                                  std::to_string(e)));
      }
      for (size_t c = 0; c < num_copies; ++c) {
        REPLAYDB_RETURN_IF_ERROR(
            replaydb::CopyDeviceToDeviceAsync(copies[c].dst, copies[c].src, copies[c].bytes,
                                              stream)
                .WithContext(std::string(kFn) + ": copy " + std::to_string(c)));
      }
      return Status::OK();
    }();
    if (record_event != nullptr) {
      const Status recorded = replaydb::RecordEvent(record_event, stream);
      if (s.ok()) s = recorded;
    }
    return s;
  });
}

int replaydb_label_batch_runs(int device, size_t num_runs, const int64_t* rows,
                              const int64_t* run_shards, const double* shares,
                              const float* local_probabilities, double* probabilities,
                              int64_t* shards, void* stream, char** errptr) {
  constexpr char kFn[] = "replaydb_label_batch_runs";
  return Guard(kFn, errptr, [&]() -> Status {
    if (num_runs > 0 && (rows == nullptr || run_shards == nullptr || shares == nullptr)) {
      return NullArgument(kFn, rows == nullptr ? "rows" : run_shards == nullptr ? "run_shards"
                                                                                : "shares");
    }
    if (num_runs > replaydb::kMaxBatchRuns) {
      return Status::InvalidArgument(std::string(kFn) + ": num_runs is " +
                                     std::to_string(num_runs) + "; at most " +
                                     std::to_string(replaydb::kMaxBatchRuns));
    }
    std::array<replaydb::BatchRun, replaydb::kMaxBatchRuns> batch_runs;
    for (size_t r = 0; r < num_runs; ++r) batch_runs[r] = {rows[r], run_shards[r], shares[r]};
    return replaydb::LabelBatchRuns(device, std::span(batch_runs.data(), num_runs),
                                   local_probabilities, probabilities, shards, stream);
  });
}

int replaydb_table_new_sampler(replaydb_table_t* table, int64_t batch_size, int in_flight,
                               const replaydb_sample_options_t* options,
                               replaydb_sampler_t** sampler, char** errptr) {
  constexpr char kFn[] = "replaydb_table_new_sampler";
  return Guard(kFn, errptr, [&]() -> Status {
    if (sampler == nullptr) return NullArgument(kFn, "sampler");
    *sampler = nullptr;
    if (table == nullptr) return NullArgument(kFn, "table");
    DeviceSamplerOptions o;
    o.batch_size = batch_size;
    o.in_flight = in_flight;
    REPLAYDB_ASSIGN_OR_RETURN(o.sample, ToSampleOptions(kFn, options));
    auto made = table->table->NewDeviceSampler(o);
    if (!made.ok()) return made.status();
    auto state = std::make_shared<SamplerState>();
    state->sampler = std::move(made).value();
    state->layout = table->layout;
    state->weights = o.sample.importance_beta >= 0;
    *sampler = new replaydb_sampler_t{std::move(state)};
    return Status::OK();
  });
}

void replaydb_sampler_destroy(replaydb_sampler_t* sampler) {
  GuardVoid([&] { delete sampler; });
}

int replaydb_sampler_next(replaydb_sampler_t* sampler, void* stream, int64_t timeout_ms,
                          replaydb_batch_t** batch, char** errptr) {
  constexpr char kFn[] = "replaydb_sampler_next";
  return Guard(kFn, errptr, [&]() -> Status {
    if (batch == nullptr) return NullArgument(kFn, "batch");
    *batch = nullptr;
    if (sampler == nullptr) return NullArgument(kFn, "sampler");
    SamplerState& state = *sampler->state;
    // Made first, so that whatever happens after Next the lent batch goes
    // back.
    auto memory = std::make_unique<SamplerBatchMemory>(sampler->state, stream);
    {
      std::lock_guard<std::mutex> lock(state.mu);
      REPLAYDB_RETURN_IF_ERROR(state.sampler->Next(stream, memory->lent(), Millis(timeout_ms)));
    }
    const DeviceBatch& lent = *memory->lent();
    auto made = std::make_unique<replaydb_batch_t>();
    made->batch_size = lent.batch_size;
    made->sequence_length = lent.sequence_length;
    made->device = state.layout->device;
    AddDeviceFields(made.get(), *state.layout, lent.columns, lent.keys, lent.probabilities,
                    state.weights ? lent.weights : nullptr, lent.mask);
    made->memory = std::move(memory);
    *batch = made.release();
    return Status::OK();
  });
}

// ----------------------------------------------------------------- batches

void replaydb_batch_retain(replaydb_batch_t* batch) {
  if (batch != nullptr) batch->references.fetch_add(1, std::memory_order_relaxed);
}

void replaydb_batch_release(replaydb_batch_t* batch) {
  if (batch == nullptr) return;
  if (batch->references.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    GuardVoid([&] { delete batch; });
  }
}

int64_t replaydb_batch_size(const replaydb_batch_t* batch) {
  return batch == nullptr ? 0 : batch->batch_size;
}

int64_t replaydb_batch_sequence_length(const replaydb_batch_t* batch) {
  return batch == nullptr ? 0 : batch->sequence_length;
}

int replaydb_batch_device(const replaydb_batch_t* batch) {
  return batch == nullptr ? -1 : batch->device;
}

}  // extern "C"

namespace {

// Field `name` of `batch` into *out; errors name `fn`.
Status FindField(const char* fn, const replaydb_batch_t* batch, const char* name,
                 replaydb_array_t* out) {
  if (batch == nullptr) return NullArgument(fn, "batch");
  if (name == nullptr) return NullArgument(fn, "name");
  if (const Field* f = batch->Find(name)) {
    *out = f->array;
    return Status::OK();
  }
  for (const auto& [column, why] : batch->inexpressible) {
    if (column == name) return Status::NotSupported(std::string(fn) + ": " + why);
  }
  std::string names;
  for (const Field& f : batch->fields) names += (names.empty() ? "" : ", ") + f.name;
  return Status::NotFound(std::string(fn) + ": the batch has no field " + Quoted(name) +
                          " (it has " + names + ")");
}

}  // namespace

extern "C" {

int replaydb_batch_field(const replaydb_batch_t* batch, const char* name, replaydb_array_t* out,
                         char** errptr) {
  constexpr char kFn[] = "replaydb_batch_field";
  return Guard(kFn, errptr, [&]() -> Status {
    if (out == nullptr) return NullArgument(kFn, "out");
    return FindField(kFn, batch, name, out);
  });
}

int replaydb_batch_field_names(const replaydb_batch_t* batch, char*** names, size_t* count,
                               char** errptr) {
  constexpr char kFn[] = "replaydb_batch_field_names";
  return Guard(kFn, errptr, [&]() -> Status {
    if (batch == nullptr) return NullArgument(kFn, "batch");
    if (names == nullptr) return NullArgument(kFn, "names");
    if (count == nullptr) return NullArgument(kFn, "count");
    std::vector<std::string> list;
    for (const Field& f : batch->fields) list.push_back(f.name);
    return MallocStrings(kFn, list, names, count);
  });
}

int64_t replaydb_live_batches(void) {
  return g_live_batches.load(std::memory_order_relaxed);
}

// ------------------------------------------------------ DLPack

}  // extern "C"

namespace {

// The DLPack ABI (dlpack.h, the unversioned DLManagedTensor that every
// consumer accepts), laid out as the specification fixes it.
struct DLDevice {
  int32_t device_type;  // 1 CPU, 2 CUDA
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat, 6 bool
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// One exported field: the tensor, its shape, and the batch reference that
// keeps the memory.
struct Exported {
  DLManagedTensor managed;
  int64_t shape[REPLAYDB_MAX_DIMS];
  replaydb_batch_t* batch;
};

void DeleteExported(DLManagedTensor* self) {
  if (self == nullptr) return;
  Exported* e = static_cast<Exported*>(self->manager_ctx);
  replaydb_batch_release(e->batch);
  delete e;
}

std::optional<DLDataType> DLTypeOf(int dtype) {
  switch (dtype) {
    case REPLAYDB_BOOL: return DLDataType{6, 8, 1};
    case REPLAYDB_U8: return DLDataType{1, 8, 1};
    case REPLAYDB_I8: return DLDataType{0, 8, 1};
    case REPLAYDB_I16: return DLDataType{0, 16, 1};
    case REPLAYDB_I32: return DLDataType{0, 32, 1};
    case REPLAYDB_I64: return DLDataType{0, 64, 1};
    case REPLAYDB_F16: return DLDataType{2, 16, 1};
    case REPLAYDB_BF16: return DLDataType{4, 16, 1};
    case REPLAYDB_F32: return DLDataType{2, 32, 1};
    case REPLAYDB_F64: return DLDataType{2, 64, 1};
    case REPLAYDB_U32: return DLDataType{1, 32, 1};
    case REPLAYDB_U64: return DLDataType{1, 64, 1};
  }
  return std::nullopt;
}

// CPython's capsule calls, found in the running process (the Python that
// loaded this library); null where there is none.
using CapsuleIsValidFn = int (*)(void*, const char*);
using CapsuleGetPointerFn = void* (*)(void*, const char*);
struct CapsuleApi {
  CapsuleIsValidFn is_valid = nullptr;
  CapsuleGetPointerFn get_pointer = nullptr;
};
const CapsuleApi& Capsules() {
  static const CapsuleApi api = [] {
    CapsuleApi a;
    a.is_valid = reinterpret_cast<CapsuleIsValidFn>(dlsym(RTLD_DEFAULT, "PyCapsule_IsValid"));
    a.get_pointer =
        reinterpret_cast<CapsuleGetPointerFn>(dlsym(RTLD_DEFAULT, "PyCapsule_GetPointer"));
    return a;
  }();
  return api;
}

}  // namespace

extern "C" {

int replaydb_batch_dlpack(replaydb_batch_t* batch, const char* name, void** managed_tensor,
                          char** errptr) {
  constexpr char kFn[] = "replaydb_batch_dlpack";
  if (managed_tensor != nullptr) *managed_tensor = nullptr;
  return Guard(kFn, errptr, [&]() -> Status {
    if (managed_tensor == nullptr) return NullArgument(kFn, "managed_tensor");
    replaydb_array_t a;
    REPLAYDB_RETURN_IF_ERROR(FindField(kFn, batch, name, &a));
    const std::optional<DLDataType> type = DLTypeOf(a.dtype);
    if (!type) return Status::Internal(std::string(kFn) + ": no DLPack type for dtype " +
                                       std::to_string(a.dtype));
    auto e = std::make_unique<Exported>();
    std::memcpy(e->shape, a.dims, sizeof(e->shape));
    DLTensor& t = e->managed.dl_tensor;
    t.data = a.data;
    t.device = a.device < 0 ? DLDevice{1, 0} : DLDevice{2, a.device};
    t.ndim = a.ndim;
    t.dtype = *type;
    t.shape = e->shape;
    t.strides = nullptr;  // compact, C order
    t.byte_offset = 0;
    e->managed.manager_ctx = e.get();
    e->managed.deleter = &DeleteExported;
    replaydb_batch_retain(batch);
    e->batch = batch;
    *managed_tensor = &e.release()->managed;
    return Status::OK();
  });
}

void replaydb_dlpack_capsule_destructor(void* capsule) {
  // A consumer renames the capsule ("used_dltensor") and calls the deleter
  // itself; only an unconsumed one is still valid under its first name.
  const CapsuleApi& api = Capsules();
  if (capsule == nullptr || api.is_valid == nullptr || api.get_pointer == nullptr) return;
  if (api.is_valid(capsule, "dltensor") == 0) return;
  auto* managed = static_cast<DLManagedTensor*>(api.get_pointer(capsule, "dltensor"));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
}

}  // extern "C"
