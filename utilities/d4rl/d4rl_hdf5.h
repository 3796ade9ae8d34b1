// D4rlReader: streams the steps of an HDF5 file in the D4RL layout (the
// offline-RL datasets of https://github.com/Farama-Foundation/D4RL, as h5py
// writes them), column by column and range by range, for an import.
//
// The layout, as this reader accepts it:
//   /observations   [N, ...]       required
//   /actions        [N, ...]       required
//   /rewards        [N] or [N, 1]  required
//   /terminals      [N] or [N, 1]  required, values 0 or 1
//   /timeouts       [N] or [N, 1]  required, values 0 or 1
//   /metadata/...   skipped, whatever it holds (D4RL keeps strings there)
//   any other dataset, in any group: an extra column, [N, ...]
// N >= 1 is the number of steps, the same for every dataset. A column's
// shape is its dataset's dims without N: {} for [N], {1} for [N, 1]. An extra
// is named by its path with '/' replaced by '.': "infos/qpos" is column
// "infos.qpos". Only objects reachable through hard links are seen (soft and
// external links are not followed).
//
// Element types: IEEE floats of 16 (binary16 layout only), 32 and 64 bits
// (f16, f32, f64); signed integers of 8 to 64 bits (i8 ... i64); unsigned
// 8-bit integers (u8); h5py's bool (an enum over an 8-bit integer with
// members FALSE = 0 and TRUE = 1) as bool. terminals and timeouts must be
// bool, u8 or i8, and are bool columns. Anything else (strings, compounds,
// unsigned integers wider than 8 bits, other enums, variable-length or array
// types) fails Open naming the dataset and its type. Either byte order is
// accepted; Read returns native (little-endian on the machines replaydb runs
// on) bytes, in the layout DType describes.
//
// Trajectories: a trajectory ends after every step i with terminals[i] != 0
// (EndReason::kTerminal) or timeouts[i] != 0 (kTruncated; kTerminal when
// both); the steps after the last such step form a last trajectory that ends
// kTruncated. No trajectory is empty.
//
// Errors name the file path, the dataset and the offending values:
// - NotFound: no file at the path.
// - InvalidArgument: a directory; a file that is not HDF5; a missing
//   required dataset, a group in its place; a dataset of rank 0, of more
//   than 1 + Shape::kMaxRank dims, with a per-step dim of 0, of an
//   unsupported type or of a length other than N; N == 0; two datasets that
//   map to one column name; a terminals/timeouts value other than 0/1 (with
//   its step); a Read out of range.
// - Corruption: an HDF5 file libhdf5 cannot open or read (e.g. truncated).
// - IOError: a file that cannot be read at all (e.g. no permission).
// - Busy: a writer holds the file open (libhdf5's file lock).
// - NotSupported: a dataset compressed with a filter this libhdf5 lacks
//   (h5py's "lzf", for one).
// A bool extra is checked for values other than 0/1 only when Read reaches
// them (InvalidArgument).
//
// Thread safety: libhdf5 is not guaranteed thread-safe, so every libhdf5 call
// made here, the closing of every handle included, holds the one
// process-wide std::mutex Hdf5Mutex() of utilities/d4rl/hdf5_util.h: concurrent
// Reads, on one reader or several, are safe and run one at a time. The const
// accessors need no lock. libhdf5 never prints to stderr for this module.
//
// Files are read through libhdf5's own I/O, not replaydb's Env.
#ifndef REPLAYDB_UTILITIES_D4RL_D4RL_HDF5_H_
#define REPLAYDB_UTILITIES_D4RL_D4RL_HDF5_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "replaydb/status.h"
#include "replaydb/table.h"
#include "replaydb/types.h"

namespace replaydb::engine {

// Steps [first_step, first_step + length) of the file are one trajectory.
struct D4rlTrajectory {
  int64_t first_step = 0;
  int64_t length = 0;
  EndReason end_reason = EndReason::kTruncated;

  bool operator==(const D4rlTrajectory&) const = default;
};

struct D4rlColumn {
  std::string name;     // "observations", "infos.qpos"
  std::string dataset;  // path in the file without the leading '/': "infos/qpos"
  DType dtype = DType::kF32;
  Shape shape;  // per step, without the leading N; {} for an [N] dataset
};

class D4rlReader {
 public:
  // Opens `path` read-only, checks every dataset (types, shapes, lengths) and
  // reads terminals and timeouts in full to cut the trajectories. Errors as
  // described at the top of this file.
  static Result<std::unique_ptr<D4rlReader>> Open(const std::string& path);

  ~D4rlReader();
  D4rlReader(const D4rlReader&) = delete;
  D4rlReader& operator=(const D4rlReader&) = delete;

  const std::string& path() const { return path_; }
  // N, the steps in the file; >= 1.
  int64_t num_steps() const { return num_steps_; }
  // observations, actions, rewards, terminals, timeouts, then the extras in
  // order of their dataset paths (byte-wise).
  const std::vector<D4rlColumn>& columns() const { return columns_; }
  // In step order; together they cover steps [0, N) exactly once.
  const std::vector<D4rlTrajectory>& trajectories() const { return trajectories_; }
  // Bytes of one step of `column`: DTypeSize(dtype) * shape.num_elements().
  // REQUIRES: column < columns().size()
  size_t step_bytes(size_t column) const { return step_bytes_[column]; }

  // Reads steps [first_step, first_step + count) of column `column` into
  // `dst`, count * step_bytes(column) bytes, step after step, each in the
  // column's dtype in native byte order. count == 0 reads nothing.
  // InvalidArgument when `column` or the range is out of bounds (nothing is
  // read); Corruption (naming the dataset and steps) when libhdf5 fails to
  // read; InvalidArgument naming the step and value when a bool column holds
  // a value other than 0 or 1 (`dst` then holds the raw bytes). Reading in
  // step order at any granularity is cheap: each dataset's chunk cache holds
  // at least two chunks.
  // REQUIRES: dst has room for count * step_bytes(column) bytes.
  Status Read(size_t column, int64_t first_step, int64_t count, void* dst) const;

 private:
  struct Handles;  // libhdf5 ids, kept out of this header

  D4rlReader();
  Status ReadLocked(size_t column, int64_t first_step, int64_t count, void* dst) const;
  Status CutTrajectories();

  std::string path_;
  int64_t num_steps_ = 0;
  std::vector<D4rlColumn> columns_;
  std::vector<D4rlTrajectory> trajectories_;
  std::vector<size_t> step_bytes_;
  std::unique_ptr<Handles> handles_;
};

}  // namespace replaydb::engine

#endif  // REPLAYDB_UTILITIES_D4RL_D4RL_HDF5_H_
