// D4rlReader: opening and checking a D4RL-layout HDF5 file, cutting its
// trajectories, reading ranges of steps. Every libhdf5 call is made under an
// Hdf5Guard (utilities/d4rl/hdf5_util.h).
#include "utilities/d4rl/d4rl_hdf5.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <string_view>
#include <system_error>

#include "util/format.h"
#include "utilities/d4rl/hdf5_util.h"

namespace replaydb::engine {

using util::Quoted;
namespace {

constexpr std::array<std::string_view, 5> kRequired = {"observations", "actions", "rewards",
                                                       "terminals", "timeouts"};
constexpr std::string_view kRequiredList = "observations, actions, rewards, terminals, timeouts";
constexpr size_t kRewards = 2;
constexpr size_t kTerminals = 3;
constexpr size_t kTimeouts = 4;
// The group at the root whose contents are not columns.
constexpr std::string_view kMetadataPrefix = "metadata/";
// A dataset's rank: the steps dimension and at most Shape::kMaxRank per-step dims.
constexpr int kMaxDatasetRank = Shape::kMaxRank + 1;
// Steps of terminals/timeouts read at a time while cutting trajectories.
constexpr int64_t kCutBatchSteps = int64_t{1} << 20;
// Bounds of a dataset's chunk cache (libhdf5's default is 1 MiB).
constexpr size_t kMinChunkCacheBytes = size_t{1} << 20;
constexpr size_t kMaxChunkCacheBytes = size_t{512} << 20;

std::string DimsToString(const std::vector<hsize_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

// ": <libhdf5's error>", or "" when libhdf5 gave none.
std::string Hdf5Suffix() {
  const std::string text = Hdf5ErrorText();
  return text.empty() ? "" : ": " + text;
}

// A name libhdf5 allocated, as a string; the allocation is freed.
std::string TakeHdf5String(char* s) {
  if (s == nullptr) return "?";
  std::string out(s);
  H5free_memory(s);
  return out;
}

// The member names of a compound or enum type: "{a, b, c}".
std::string MemberNames(hid_t type) {
  const int n = H5Tget_nmembers(type);
  std::string s = "{";
  for (int i = 0; i < n && i < 8; ++i) {
    if (i > 0) s += ", ";
    s += TakeHdf5String(H5Tget_member_name(type, static_cast<unsigned>(i)));
  }
  if (n > 8) s += ", ...";
  return s + "}";
}

// Whether a 16-bit float type has IEEE binary16's layout.
bool IsIeeeHalf(hid_t type) {
  size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) return false;
  return H5Tget_size(type) == 2 && spos == 15 && epos == 10 && esize == 5 && mpos == 0 &&
         msize == 10 && H5Tget_ebias(type) == 15;
}

std::string DescribeInteger(hid_t type) {
  const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
  return (is_signed ? "i" : "u") + std::to_string(H5Tget_size(type) * 8);
}

// h5py's numpy bool: an enum over an 8-bit integer, FALSE = 0 and TRUE = 1.
bool IsBoolEnum(hid_t type) {
  if (H5Tget_nmembers(type) != 2) return false;
  Hid base(H5Tget_super(type), H5Tclose);
  if (!base.valid() || H5Tget_class(base.get()) != H5T_INTEGER || H5Tget_size(base.get()) != 1) {
    return false;
  }
  bool has_false = false, has_true = false;
  for (unsigned i = 0; i < 2; ++i) {
    const std::string name = TakeHdf5String(H5Tget_member_name(type, i));
    unsigned char value = 0xff;
    if (H5Tget_member_value(type, i, &value) < 0) return false;
    if (name == "FALSE" && value == 0) has_false = true;
    if (name == "TRUE" && value == 1) has_true = true;
  }
  return has_false && has_true;
}

// A human description of any HDF5 type, for messages: "f32", "u32",
// "string", "compound {a, b}", "enum {A, B} over i32".
std::string DescribeType(hid_t type) {
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      return DescribeInteger(type);
    case H5T_FLOAT:
      if (H5Tget_size(type) == 2 && !IsIeeeHalf(type)) {
        return "16-bit float not in IEEE binary16 layout (bfloat16?)";
      }
      return "f" + std::to_string(H5Tget_size(type) * 8);
    case H5T_STRING:
      if (H5Tis_variable_str(type) > 0) return "string (variable length)";
      return "string (" + std::to_string(H5Tget_size(type)) + " bytes)";
    case H5T_COMPOUND:
      return "compound " + MemberNames(type);
    case H5T_ENUM: {
      if (IsBoolEnum(type)) return "bool";
      Hid base(H5Tget_super(type), H5Tclose);
      return "enum " + MemberNames(type) + " over " +
             (base.valid() ? DescribeType(base.get()) : std::string("?"));
    }
    case H5T_VLEN:
      return "variable-length sequence";
    case H5T_ARRAY:
      return "array";
    case H5T_OPAQUE:
      return "opaque";
    case H5T_REFERENCE:
      return "reference";
    case H5T_BITFIELD:
      return "bitfield (" + std::to_string(H5Tget_size(type) * 8) + " bits)";
    case H5T_TIME:
      return "time";
    default:
      return "unknown type class " + std::to_string(H5Tget_class(type));
  }
}

// A native-order IEEE binary16 type (libhdf5 1.10 has no predefined one).
Hid NativeHalfType() {
  Hid t(H5Tcopy(H5T_NATIVE_FLOAT), H5Tclose);
  if (!t.valid()) return t;
  if (H5Tset_fields(t.get(), 15, 10, 5, 0, 10) < 0 || H5Tset_size(t.get(), 2) < 0 ||
      H5Tset_ebias(t.get(), 15) < 0) {
    return Hid();
  }
  return t;
}

// The column dtype of a file type and the memory type Read converts to; false
// when the type is not one a column can hold. Signed bool-ish bytes (an i8 or
// an enum over i8) set *signed_bool, for messages.
bool ClassifyType(hid_t type, DType* dtype, Hid* mem_type, bool* signed_bool) {
  *signed_bool = false;
  const size_t size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_FLOAT:
      if (size == 2 && IsIeeeHalf(type)) {
        *dtype = DType::kF16;
        *mem_type = NativeHalfType();
      } else if (size == 4) {
        *dtype = DType::kF32;
        *mem_type = Hid(H5Tcopy(H5T_NATIVE_FLOAT), H5Tclose);
      } else if (size == 8) {
        *dtype = DType::kF64;
        *mem_type = Hid(H5Tcopy(H5T_NATIVE_DOUBLE), H5Tclose);
      } else {
        return false;
      }
      return mem_type->valid();
    case H5T_INTEGER:
      if (H5Tget_sign(type) == H5T_SGN_NONE) {
        if (size != 1) return false;
        *dtype = DType::kU8;
        *mem_type = Hid(H5Tcopy(H5T_NATIVE_UINT8), H5Tclose);
      } else {
        switch (size) {
          case 1:
            *dtype = DType::kI8;
            *mem_type = Hid(H5Tcopy(H5T_NATIVE_INT8), H5Tclose);
            *signed_bool = true;
            break;
          case 2:
            *dtype = DType::kI16;
            *mem_type = Hid(H5Tcopy(H5T_NATIVE_INT16), H5Tclose);
            break;
          case 4:
            *dtype = DType::kI32;
            *mem_type = Hid(H5Tcopy(H5T_NATIVE_INT32), H5Tclose);
            break;
          case 8:
            *dtype = DType::kI64;
            *mem_type = Hid(H5Tcopy(H5T_NATIVE_INT64), H5Tclose);
            break;
          default:
            return false;
        }
      }
      return mem_type->valid();
    case H5T_ENUM: {
      if (!IsBoolEnum(type)) return false;
      *dtype = DType::kBool;
      // The enum's own native form: reading into it copies the raw bytes, so
      // a stray value (say 2) reaches the check in Read instead of being
      // mapped to an "exception" value by libhdf5's enum conversion.
      *mem_type = Hid(H5Tget_native_type(type, H5T_DIR_ASCEND), H5Tclose);
      Hid base(H5Tget_super(type), H5Tclose);
      *signed_bool = base.valid() && H5Tget_sign(base.get()) == H5T_SGN_2;
      return mem_type->valid();
    }
    default:
      return false;
  }
}

std::string SupportedTypes() {
  return "supported: f16, f32, f64, i8, i16, i32, i64, u8, bool (h5py's bool enum)";
}

// Collects the paths of every dataset below the root (H5Ovisit2 callback).
herr_t CollectDataset(hid_t /*obj*/, const char* name, const H5O_info_t* info, void* data) {
  if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

// Chunk-cache bytes for a dataset: two of its chunks, within bounds; 0 when
// the default (1 MiB) is enough or the dataset is not chunked.
size_t ChunkCacheBytes(hid_t dataset, hid_t file_type) {
  Hid dcpl(H5Dget_create_plist(dataset), H5Pclose);
  if (!dcpl.valid() || H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return 0;
  std::array<hsize_t, H5S_MAX_RANK> chunk{};
  const int rank = H5Pget_chunk(dcpl.get(), H5S_MAX_RANK, chunk.data());
  if (rank <= 0) return 0;
  size_t bytes = H5Tget_size(file_type);
  for (int i = 0; i < rank; ++i) bytes *= static_cast<size_t>(chunk[i]);
  const size_t want = std::min(2 * bytes, kMaxChunkCacheBytes);
  return want > kMinChunkCacheBytes ? want : 0;
}

// NotSupported when a mandatory filter of the dataset's pipeline is missing
// from this libhdf5 (reads would fail chunk by chunk).
Status CheckFilters(const std::string& prefix, const std::string& dataset_path, hid_t dataset) {
  Hid dcpl(H5Dget_create_plist(dataset), H5Pclose);
  if (!dcpl.valid()) return Status::OK();
  const int n = H5Pget_nfilters(dcpl.get());
  for (int i = 0; i < n; ++i) {
    unsigned flags = 0, config = 0;
    size_t cd_nelmts = 0;
    char name[64] = {};
    const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &cd_nelmts,
                                           nullptr, sizeof(name), name, &config);
    if (id < 0 || (flags & H5Z_FLAG_OPTIONAL) != 0) continue;
    if (H5Zfilter_avail(id) <= 0) {
      return Status::NotSupported(prefix + "dataset " + Quoted(dataset_path) +
                                  " is compressed with HDF5 filter " + std::to_string(id) +
                                  (name[0] != '\0' ? " (" + Quoted(name) + ")" : std::string()) +
                                  ", which this build of libhdf5 does not have");
    }
  }
  return Status::OK();
}

}  // namespace

struct D4rlReader::Handles {
  Hid file;  // declared first: closed last
  std::vector<Hid> datasets;
  std::vector<Hid> mem_types;
  std::vector<std::vector<hsize_t>> dims;  // full dataset dims, N first
  std::vector<bool> signed_bool;
};

D4rlReader::D4rlReader() : handles_(std::make_unique<Handles>()) {}

D4rlReader::~D4rlReader() {
  Hdf5Guard guard;
  handles_.reset();
}

Result<std::unique_ptr<D4rlReader>> D4rlReader::Open(const std::string& path) {
  const std::string prefix = Quoted(path) + ": ";
  std::error_code ec;
  const auto file_status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(file_status)) return Status::NotFound(prefix + "no such file");
  if (std::filesystem::is_directory(file_status)) {
    return Status::InvalidArgument(prefix + "is a directory, not an HDF5 file");
  }

  std::unique_ptr<D4rlReader> reader(new D4rlReader);
  reader->path_ = path;
  Handles& h = *reader->handles_;
  Status status;
  {
    Hdf5Guard guard;
    status = [&]() -> Status {
      const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
      if (is_hdf5 < 0) return Status::IOError(prefix + "cannot read it" + Hdf5Suffix());
      if (is_hdf5 == 0) {
        return Status::InvalidArgument(prefix + "not an HDF5 file (no HDF5 signature)");
      }
      Hid fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
      if (!fapl.valid()) return Status::Internal(prefix + "H5Pcreate failed" + Hdf5Suffix());
#if H5_VERSION_GE(1, 10, 7)
      // Keep libhdf5's file locks, but open anyway on a file system that
      // does not support them (some NFS and Lustre mounts).
      H5Pset_file_locking(fapl.get(), true, true);
#endif
      h.file = Hid(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
      if (!h.file.valid()) {
        if (Hdf5ErrorHas(H5E_CANTLOCKFILE)) {
          return Status::Busy(prefix +
                              "a writer holds it open (libhdf5's file lock; "
                              "HDF5_USE_FILE_LOCKING=FALSE skips the lock)" +
                              Hdf5Suffix());
        }
        return Status::Corruption(prefix + "libhdf5 cannot open it" + Hdf5Suffix());
      }

      // The required datasets, then every other dataset in path order.
      std::vector<std::string> missing;
      for (std::string_view name : kRequired) {
        if (H5Lexists(h.file.get(), std::string(name).c_str(), H5P_DEFAULT) <= 0) {
          missing.push_back(Quoted(name));
        }
      }
      if (!missing.empty()) {
        std::string names;
        for (const std::string& m : missing) names += (names.empty() ? "" : ", ") + m;
        return Status::InvalidArgument(prefix + "no dataset" + (missing.size() > 1 ? "s " : " ") +
                                       names + " at the root; a D4RL file needs " +
                                       std::string(kRequiredList));
      }
      std::vector<std::string> extras;
      if (H5Ovisit2(h.file.get(), H5_INDEX_NAME, H5_ITER_INC, CollectDataset, &extras,
                    H5O_INFO_BASIC) < 0) {
        return Status::Corruption(prefix + "cannot list its datasets" + Hdf5Suffix());
      }
      std::erase_if(extras, [](const std::string& p) {
        if (p.starts_with(kMetadataPrefix)) return true;
        return std::find(kRequired.begin(), kRequired.end(), p) != kRequired.end();
      });
      std::sort(extras.begin(), extras.end());
      std::vector<std::string> paths(kRequired.begin(), kRequired.end());
      paths.insert(paths.end(), extras.begin(), extras.end());

      std::map<std::string, std::string> dataset_of_column;
      for (size_t c = 0; c < paths.size(); ++c) {
        const std::string& p = paths[c];
        const std::string ds_name = Quoted(p);
        D4rlColumn column;
        column.dataset = p;
        column.name = p;
        std::replace(column.name.begin(), column.name.end(), '/', '.');
        const auto [it, inserted] = dataset_of_column.emplace(column.name, p);
        if (!inserted) {
          return Status::InvalidArgument(prefix + "datasets " + Quoted(it->second) + " and " +
                                         ds_name + " both map to column " + Quoted(column.name));
        }

        // Required names are links at the root that may not be datasets.
        Hid object(H5Oopen(h.file.get(), p.c_str(), H5P_DEFAULT), H5Oclose);
        if (!object.valid()) {
          return Status::Corruption(prefix + "cannot open " + ds_name + Hdf5Suffix());
        }
        if (const H5I_type_t type = H5Iget_type(object.get()); type != H5I_DATASET) {
          return Status::InvalidArgument(
              prefix + ds_name + (type == H5I_GROUP ? " is a group" : " is not a dataset") +
              "; a D4RL file needs datasets " + std::string(kRequiredList) + " at the root");
        }
        object.Reset();
        Hid dataset(H5Dopen2(h.file.get(), p.c_str(), H5P_DEFAULT), H5Dclose);
        if (!dataset.valid()) {
          return Status::Corruption(prefix + "cannot open dataset " + ds_name + Hdf5Suffix());
        }

        // Rank and dims.
        Hid space(H5Dget_space(dataset.get()), H5Sclose);
        if (!space.valid()) {
          return Status::Corruption(prefix + "cannot read the dataspace of dataset " + ds_name +
                                    Hdf5Suffix());
        }
        const H5S_class_t space_class = H5Sget_simple_extent_type(space.get());
        if (space_class == H5S_NULL) {
          return Status::InvalidArgument(prefix + "dataset " + ds_name +
                                         " is empty (null dataspace); every dataset needs a "
                                         "leading steps dimension");
        }
        const int rank = H5Sget_simple_extent_ndims(space.get());
        if (space_class == H5S_SCALAR || rank == 0) {
          return Status::InvalidArgument(prefix + "dataset " + ds_name +
                                         " is a scalar (rank 0); every dataset needs a leading "
                                         "steps dimension");
        }
        if (rank < 0 || rank > kMaxDatasetRank) {
          return Status::InvalidArgument(
              prefix + "dataset " + ds_name + " has rank " + std::to_string(rank) + "; at most " +
              std::to_string(kMaxDatasetRank) + " (steps and 8 per-step dims) is supported");
        }
        std::vector<hsize_t> dims(static_cast<size_t>(rank));
        H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);

        // Element type.
        Hid file_type(H5Dget_type(dataset.get()), H5Tclose);
        if (!file_type.valid()) {
          return Status::Corruption(prefix + "cannot read the type of dataset " + ds_name +
                                    Hdf5Suffix());
        }
        Hid mem_type;
        bool signed_bool = false;
        if (!ClassifyType(file_type.get(), &column.dtype, &mem_type, &signed_bool)) {
          return Status::InvalidArgument(prefix + "dataset " + ds_name + " has unsupported type " +
                                         DescribeType(file_type.get()) + "; " + SupportedTypes());
        }
        if (c == kTerminals || c == kTimeouts) {
          if (column.dtype != DType::kBool && column.dtype != DType::kU8 &&
              column.dtype != DType::kI8) {
            return Status::InvalidArgument(prefix + "dataset " + ds_name + " has type " +
                                           DescribeType(file_type.get()) +
                                           "; terminals and timeouts must be bool (h5py's bool "
                                           "enum), u8 or i8");
          }
          column.dtype = DType::kBool;
        }

        // Shape.
        if ((c == kRewards || c == kTerminals || c == kTimeouts) &&
            !(rank == 1 || (rank == 2 && dims[1] == 1))) {
          return Status::InvalidArgument(prefix + "dataset " + ds_name + " has shape " +
                                         DimsToString(dims) + "; expected [N] or [N, 1]");
        }
        for (int i = 1; i < rank; ++i) {
          if (dims[i] == 0) {
            return Status::InvalidArgument(prefix + "dataset " + ds_name + " has shape " +
                                           DimsToString(dims) +
                                           "; every per-step dim must be at least 1");
          }
        }
        std::array<int64_t, Shape::kMaxRank> step_dims{};
        for (int i = 1; i < rank; ++i) step_dims[i - 1] = static_cast<int64_t>(dims[i]);
        column.shape = Shape::FromSpan({step_dims.data(), static_cast<size_t>(rank - 1)});

        // Steps.
        const auto steps = static_cast<int64_t>(dims[0]);
        if (c == 0) {
          if (steps == 0) {
            return Status::InvalidArgument(prefix + "dataset " + ds_name + " has no steps");
          }
          reader->num_steps_ = steps;
        } else if (steps != reader->num_steps_) {
          return Status::InvalidArgument(prefix + "dataset " + ds_name + " has " +
                                         std::to_string(steps) + " steps, 'observations' has " +
                                         std::to_string(reader->num_steps_));
        }

        REPLAYDB_RETURN_IF_ERROR(CheckFilters(prefix, p, dataset.get()));
        // Reopen with a chunk cache that holds two chunks, if the default
        // (1 MiB) does not: otherwise reading a large chunk in small
        // ranges would decompress it once per range.
        if (const size_t cache = ChunkCacheBytes(dataset.get(), file_type.get()); cache > 0) {
          Hid dapl(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
          if (dapl.valid() &&
              H5Pset_chunk_cache(dapl.get(), H5D_CHUNK_CACHE_NSLOTS_DEFAULT, cache, 1.0) >= 0) {
            Hid reopened(H5Dopen2(h.file.get(), p.c_str(), dapl.get()), H5Dclose);
            if (reopened.valid()) dataset = std::move(reopened);
          }
        }

        reader->step_bytes_.push_back(DTypeSize(column.dtype) *
                                      static_cast<size_t>(column.shape.num_elements()));
        reader->columns_.push_back(std::move(column));
        h.datasets.push_back(std::move(dataset));
        h.mem_types.push_back(std::move(mem_type));
        h.dims.push_back(std::move(dims));
        h.signed_bool.push_back(signed_bool);
      }
      return reader->CutTrajectories();
    }();
  }
  if (!status.ok()) return status;
  return reader;
}

Status D4rlReader::CutTrajectories() {
  std::vector<uint8_t> terminals;
  std::vector<uint8_t> timeouts;
  int64_t start = 0;
  for (int64_t first = 0; first < num_steps_; first += kCutBatchSteps) {
    const int64_t count = std::min(kCutBatchSteps, num_steps_ - first);
    // rewards/terminals/timeouts hold one element per step ([N] or [N, 1]).
    terminals.resize(static_cast<size_t>(count));
    timeouts.resize(static_cast<size_t>(count));
    REPLAYDB_RETURN_IF_ERROR(ReadLocked(kTerminals, first, count, terminals.data()));
    REPLAYDB_RETURN_IF_ERROR(ReadLocked(kTimeouts, first, count, timeouts.data()));
    for (int64_t i = 0; i < count; ++i) {
      const bool terminal = terminals[static_cast<size_t>(i)] != 0;
      if (!terminal && timeouts[static_cast<size_t>(i)] == 0) continue;
      const int64_t step = first + i;
      trajectories_.push_back(
          {start, step + 1 - start, terminal ? EndReason::kTerminal : EndReason::kTruncated});
      start = step + 1;
    }
  }
  if (start < num_steps_) {
    trajectories_.push_back({start, num_steps_ - start, EndReason::kTruncated});
  }
  return Status::OK();
}

Status D4rlReader::Read(size_t column, int64_t first_step, int64_t count, void* dst) const {
  const std::string prefix = Quoted(path_) + ": ";
  if (column >= columns_.size()) {
    return Status::InvalidArgument(prefix + "Read of column " + std::to_string(column) +
                                   ", but the file has " + std::to_string(columns_.size()) +
                                   " columns");
  }
  if (first_step < 0 || count < 0 || first_step > num_steps_ || count > num_steps_ - first_step) {
    return Status::InvalidArgument(
        prefix + "Read of " + std::to_string(count) + " steps from step " +
        std::to_string(first_step) + " of column " + Quoted(columns_[column].name) +
        " is out of range; the file has " + std::to_string(num_steps_) + " steps");
  }
  if (count == 0) return Status::OK();
  Hdf5Guard guard;
  return ReadLocked(column, first_step, count, dst);
}

Status D4rlReader::ReadLocked(size_t column, int64_t first_step, int64_t count, void* dst) const {
  const D4rlColumn& col = columns_[column];
  const std::vector<hsize_t>& dims = handles_->dims[column];
  const hid_t dataset = handles_->datasets[column].get();
  const int rank = static_cast<int>(dims.size());
  std::array<hsize_t, kMaxDatasetRank> start{};
  std::array<hsize_t, kMaxDatasetRank> extent{};
  std::copy(dims.begin(), dims.end(), extent.begin());
  start[0] = static_cast<hsize_t>(first_step);
  extent[0] = static_cast<hsize_t>(count);
  const std::string where = Quoted(path_) + ": cannot read steps [" + std::to_string(first_step) +
                            ", " + std::to_string(first_step + count) + ") of dataset " +
                            Quoted(col.dataset);

  Hid file_space(H5Dget_space(dataset), H5Sclose);
  if (!file_space.valid() || H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(),
                                                 nullptr, extent.data(), nullptr) < 0) {
    return Status::Internal(where + ": selecting the range failed" + Hdf5Suffix());
  }
  Hid mem_space(H5Screate_simple(rank, extent.data(), nullptr), H5Sclose);
  if (!mem_space.valid()) {
    return Status::Internal(where + ": H5Screate_simple failed" + Hdf5Suffix());
  }
  if (H5Dread(dataset, handles_->mem_types[column].get(), mem_space.get(), file_space.get(),
              H5P_DEFAULT, dst) < 0) {
    return Status::Corruption(where + Hdf5Suffix());
  }

  if (col.dtype == DType::kBool) {
    const auto* bytes = static_cast<const uint8_t*>(dst);
    const auto per_step = static_cast<size_t>(col.shape.num_elements());
    const size_t n = static_cast<size_t>(count) * per_step;
    for (size_t i = 0; i < n; ++i) {
      if (bytes[i] <= 1) continue;
      const int value = handles_->signed_bool[column]
                            ? static_cast<int>(static_cast<int8_t>(bytes[i]))
                            : static_cast<int>(bytes[i]);
      return Status::InvalidArgument(
          Quoted(path_) + ": dataset " + Quoted(col.dataset) + " holds " + std::to_string(value) +
          " at step " + std::to_string(first_step + static_cast<int64_t>(i / per_step)) +
          (per_step > 1 ? " (element " + std::to_string(i % per_step) + ")" : std::string()) +
          "; a bool must be 0 or 1");
    }
  }
  return Status::OK();
}

}  // namespace replaydb::engine
