// Writes HDF5 files in the D4RL layout (see utilities/d4rl/d4rl_hdf5.h), valid or
// broken on purpose, for the tests of D4rlReader and of imports. Files are
// described as a list of datasets, each with its HDF5 type, dims and bytes.
#ifndef REPLAYDB_TESTS_UTILITIES_D4RL_D4RL_TEST_FILE_H_
#define REPLAYDB_TESTS_UTILITIES_D4RL_D4RL_TEST_FILE_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "replaydb/status.h"
#include "replaydb/types.h"

namespace replaydb::testing_util {

// The HDF5 type a test dataset is stored with.
enum class H5TestType {
  // `dtype`, stored as h5py stores a numpy array of it: IEEE floats (f16 as
  // h5py's custom 16-bit float), integers, and for kBool h5py's enum
  // {FALSE = 0, TRUE = 1} over int8. kBF16 gets a 16-bit float type with
  // bfloat16's layout (h5py has none; the reader rejects it).
  kNumeric,
  kU16,  // unsigned integers wider than 8 bits
  kU32,
  kU64,
  kFixedString,  // fixed-length strings of string_size bytes (numpy "S<n>")
  kVarString,    // variable-length UTF-8 strings (h5py's str)
  kCompound,     // {int32 a at 0; float32 b at 4}: 8 bytes per element
  kEnum,         // enum {RED = 0, GREEN = 1, BLUE = 2} over int8: not a bool
};

struct D4rlTestDataset {
  // "observations", "infos/qpos", "metadata/algorithm": groups are made as
  // needed.
  std::string path;
  H5TestType type = H5TestType::kNumeric;
  DType dtype = DType::kF32;  // for kNumeric
  // Store numbers big-endian (libhdf5 converts on read).
  bool big_endian = false;
  // {} is a scalar dataspace (rank 0).
  std::vector<uint64_t> dims;
  // The elements in memory layout, ElementSize() bytes each: the dtype's
  // native layout for kNumeric (one raw int8 per element for kBool, so 2 or
  // -1 can be stored), native u16/u32/u64, the bytes of fixed strings,
  // {int32, float} structs. Empty: nothing is written (reads give zeros).
  std::vector<std::byte> data;
  // kVarString's elements; empty: nothing is written.
  std::vector<std::string> strings;
  size_t string_size = 8;  // kFixedString
  // Chunked, `chunk_steps` steps per chunk (at most N; 0: contiguous,
  // unless a filter needs chunks: then one chunk), deflate-compressed with
  // `deflate` (as D4RL's own files are). A dataset with a dim of 0 is never
  // chunked.
  int64_t chunk_steps = 0;
  bool deflate = false;
  // Nonzero: a pass-through filter with this id and name is registered for
  // the write and unregistered after it, so that a reader sees a filter its
  // libhdf5 lacks, as with h5py's "lzf" (32000) in a file from h5py.
  int unavailable_filter = 0;
  std::string unavailable_filter_name = "lzf";

  // Product of dims (1 for a scalar).
  uint64_t num_elements() const;
  // Bytes per element in `data`.
  size_t element_size() const;
};

// Writes `datasets`, in order, into a new HDF5 file at `path` (replacing
// it). Not thread-safe against itself; holds replaydb's libhdf5 lock
// (utilities/d4rl/hdf5_util.h) while it calls libhdf5.
[[nodiscard]] Status WriteD4rlTestFile(const std::string& path,
                                       const std::vector<D4rlTestDataset>& datasets);

// A kNumeric dataset of `dtype` and `dims` holding fresh random values:
// floats are finite (any bit pattern but inf and NaN), bools 0 or 1.
D4rlTestDataset RandomDataset(std::string path, DType dtype, std::vector<uint64_t> dims,
                              std::mt19937_64& rng);
// A bool dataset of the given values, stored as `stored` (kBool: h5py's
// enum, kU8 or kI8), shape [N] or, with `column`, [N, 1].
D4rlTestDataset BoolDataset(std::string path, const std::vector<uint8_t>& values,
                            DType stored = DType::kBool, bool column = false);

// What RandomD4rlFile makes.
struct D4rlTestShape {
  int64_t steps = 100;
  uint64_t obs_dim = 3;
  uint64_t action_dim = 2;
  // Chance that a step is terminal, and independently a timeout.
  double terminal_probability = 0.03;
  double timeout_probability = 0.03;
};

// The five required datasets, valid, in D4RL's types: observations f32
// [N, obs_dim], actions f32 [N, action_dim], rewards f32 [N], terminals and
// timeouts bool [N] with random ends.
std::vector<D4rlTestDataset> RandomD4rlDatasets(const D4rlTestShape& shape, std::mt19937_64& rng);

// The dataset at `path`; aborts the test program if there is none.
D4rlTestDataset& FindDataset(std::vector<D4rlTestDataset>& datasets, const std::string& path);

// Removes the dataset at `path`, if any.
void RemoveDataset(std::vector<D4rlTestDataset>& datasets, const std::string& path);

}  // namespace replaydb::testing_util

#endif  // REPLAYDB_TESTS_UTILITIES_D4RL_D4RL_TEST_FILE_H_
