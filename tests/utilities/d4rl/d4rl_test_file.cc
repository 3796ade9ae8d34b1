// Writing D4RL-layout test files through libhdf5's C API.
#include "tests/utilities/d4rl/d4rl_test_file.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "utilities/d4rl/hdf5_util.h"

namespace replaydb::testing_util {
namespace {

using engine::Hdf5ErrorText;
using engine::Hid;

Hid Copy(hid_t type) {
  return Hid(H5Tcopy(type), H5Tclose);
}

// A 16-bit float type in native order: IEEE binary16, or bfloat16's layout.
Hid Float16Type(bool bfloat) {
  Hid t = Copy(H5T_NATIVE_FLOAT);
  if (!t.valid()) return t;
  const herr_t fields =
      bfloat ? H5Tset_fields(t.get(), 15, 7, 8, 0, 7) : H5Tset_fields(t.get(), 15, 10, 5, 0, 10);
  if (fields < 0 || H5Tset_size(t.get(), 2) < 0 || H5Tset_ebias(t.get(), bfloat ? 127 : 15) < 0) {
    return Hid();
  }
  return t;
}

// An enum over native int8 with the given members, valued 0, 1, ...
Hid Int8Enum(const std::vector<const char*>& names) {
  Hid t(H5Tenum_create(H5T_NATIVE_INT8), H5Tclose);
  for (size_t i = 0; i < names.size() && t.valid(); ++i) {
    const auto value = static_cast<int8_t>(i);
    if (H5Tenum_insert(t.get(), names[i], &value) < 0) return Hid();
  }
  return t;
}

// The memory type of a dataset's elements.
Hid MemoryType(const D4rlTestDataset& d) {
  switch (d.type) {
    case H5TestType::kNumeric:
      switch (d.dtype) {
        case DType::kBool:
          return Int8Enum({"FALSE", "TRUE"});
        case DType::kU8:
          return Copy(H5T_NATIVE_UINT8);
        case DType::kI8:
          return Copy(H5T_NATIVE_INT8);
        case DType::kI16:
          return Copy(H5T_NATIVE_INT16);
        case DType::kI32:
          return Copy(H5T_NATIVE_INT32);
        case DType::kI64:
          return Copy(H5T_NATIVE_INT64);
        case DType::kF16:
          return Float16Type(/*bfloat=*/false);
        case DType::kBF16:
          return Float16Type(/*bfloat=*/true);
        case DType::kF32:
          return Copy(H5T_NATIVE_FLOAT);
        case DType::kF64:
          return Copy(H5T_NATIVE_DOUBLE);
      }
      return Hid();
    case H5TestType::kU16:
      return Copy(H5T_NATIVE_UINT16);
    case H5TestType::kU32:
      return Copy(H5T_NATIVE_UINT32);
    case H5TestType::kU64:
      return Copy(H5T_NATIVE_UINT64);
    case H5TestType::kFixedString: {
      Hid t = Copy(H5T_C_S1);
      if (t.valid() && H5Tset_size(t.get(), d.string_size) < 0) return Hid();
      return t;
    }
    case H5TestType::kVarString: {
      Hid t = Copy(H5T_C_S1);
      if (t.valid() &&
          (H5Tset_size(t.get(), H5T_VARIABLE) < 0 || H5Tset_cset(t.get(), H5T_CSET_UTF8) < 0)) {
        return Hid();
      }
      return t;
    }
    case H5TestType::kCompound: {
      Hid t(H5Tcreate(H5T_COMPOUND, 8), H5Tclose);
      if (t.valid() && (H5Tinsert(t.get(), "a", 0, H5T_NATIVE_INT32) < 0 ||
                        H5Tinsert(t.get(), "b", 4, H5T_NATIVE_FLOAT) < 0)) {
        return Hid();
      }
      return t;
    }
    case H5TestType::kEnum:
      return Int8Enum({"RED", "GREEN", "BLUE"});
  }
  return Hid();
}

// The file type: the memory type, big-endian when asked (numbers only).
Hid FileType(const D4rlTestDataset& d, hid_t mem_type) {
  Hid t = Copy(mem_type);
  const H5T_class_t cls = H5Tget_class(mem_type);
  if (t.valid() && d.big_endian && (cls == H5T_INTEGER || cls == H5T_FLOAT) &&
      H5Tset_order(t.get(), H5T_ORDER_BE) < 0) {
    return Hid();
  }
  return t;
}

size_t PassThrough(unsigned /*flags*/, size_t /*cd_nelmts*/, const unsigned* /*cd_values*/,
                   size_t nbytes, size_t* /*buf_size*/, void** /*buf*/) {
  return nbytes;
}

// Writes one dataset into `file`. REQUIRES: the libhdf5 lock held.
Status WriteDataset(const std::string& file_path, hid_t file, const D4rlTestDataset& d) {
  const std::string where = "writing '" + file_path + "', dataset '" + d.path + "': ";
  auto failed = [&](const char* call) {
    return Status::Internal(where + call + " failed: " + Hdf5ErrorText());
  };
  const size_t expected = d.num_elements() * d.element_size();
  if (d.type != H5TestType::kVarString && !d.data.empty() && d.data.size() != expected) {
    return Status::InvalidArgument(where + "has " + std::to_string(d.data.size()) +
                                   " bytes of data, its dims and type need " +
                                   std::to_string(expected));
  }
  if (d.type == H5TestType::kVarString && !d.strings.empty() &&
      d.strings.size() != d.num_elements()) {
    return Status::InvalidArgument(where + "has " + std::to_string(d.strings.size()) +
                                   " strings for " + std::to_string(d.num_elements()) +
                                   " elements");
  }

  Hid mem_type = MemoryType(d);
  if (!mem_type.valid()) return failed("making the memory type");
  Hid file_type = FileType(d, mem_type.get());
  if (!file_type.valid()) return failed("making the file type");

  std::vector<hsize_t> dims(d.dims.begin(), d.dims.end());
  Hid space(dims.empty() ? H5Screate(H5S_SCALAR)
                         : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
            H5Sclose);
  if (!space.valid()) return failed("H5Screate");

  Hid lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  if (!lcpl.valid() || H5Pset_create_intermediate_group(lcpl.get(), 1) < 0) {
    return failed("H5Pset_create_intermediate_group");
  }
  Hid dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (!dcpl.valid()) return failed("H5Pcreate(H5P_DATASET_CREATE)");
  int64_t chunk_steps = d.chunk_steps;
  if (chunk_steps == 0 && (d.deflate || d.unavailable_filter != 0) && !dims.empty()) {
    chunk_steps = static_cast<int64_t>(std::max<hsize_t>(dims[0], 1));
  }
  // libhdf5 wants chunks no larger than the dims (and none when a dim is 0).
  const bool empty = std::find(dims.begin(), dims.end(), 0) != dims.end();
  if (chunk_steps > 0 && !dims.empty() && !empty) {
    std::vector<hsize_t> chunk = dims;
    chunk[0] = std::min(static_cast<hsize_t>(chunk_steps), dims[0]);
    if (H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()) < 0) {
      return failed("H5Pset_chunk");
    }
    if (d.deflate && H5Pset_deflate(dcpl.get(), 4) < 0) return failed("H5Pset_deflate");
    if (d.unavailable_filter != 0) {
      H5Z_class2_t filter = {};
      filter.version = H5Z_CLASS_T_VERS;
      filter.id = static_cast<H5Z_filter_t>(d.unavailable_filter);
      filter.encoder_present = 1;
      filter.decoder_present = 1;
      filter.name = d.unavailable_filter_name.c_str();
      filter.filter = PassThrough;
      if (H5Zregister(&filter) < 0) return failed("H5Zregister");
      if (H5Pset_filter(dcpl.get(), filter.id, H5Z_FLAG_MANDATORY, 0, nullptr) < 0) {
        return failed("H5Pset_filter");
      }
    }
  }

  Hid dataset(H5Dcreate2(file, d.path.c_str(), file_type.get(), space.get(), lcpl.get(), dcpl.get(),
                         H5P_DEFAULT),
              H5Dclose);
  if (!dataset.valid()) return failed("H5Dcreate2");
  if (d.type == H5TestType::kVarString) {
    if (!d.strings.empty()) {
      std::vector<const char*> ptrs;
      for (const std::string& s : d.strings) ptrs.push_back(s.c_str());
      if (H5Dwrite(dataset.get(), mem_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()) < 0) {
        return failed("H5Dwrite");
      }
    }
  } else if (!d.data.empty() && H5Dwrite(dataset.get(), mem_type.get(), H5S_ALL, H5S_ALL,
                                         H5P_DEFAULT, d.data.data()) < 0) {
    return failed("H5Dwrite");
  }
  return Status::OK();
}

}  // namespace

uint64_t D4rlTestDataset::num_elements() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  return n;
}

size_t D4rlTestDataset::element_size() const {
  switch (type) {
    case H5TestType::kNumeric:
      return DTypeSize(dtype);
    case H5TestType::kU16:
      return 2;
    case H5TestType::kU32:
      return 4;
    case H5TestType::kU64:
      return 8;
    case H5TestType::kFixedString:
      return string_size;
    case H5TestType::kVarString:
      return sizeof(char*);
    case H5TestType::kCompound:
      return 8;
    case H5TestType::kEnum:
      return 1;
  }
  return 0;
}

Status WriteD4rlTestFile(const std::string& path, const std::vector<D4rlTestDataset>& datasets) {
  std::vector<int> filters;
  Status status;
  {
    engine::Hdf5Guard guard;
    status = [&]() -> Status {
      Hid file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
      if (!file.valid()) {
        return Status::IOError("creating '" + path + "': H5Fcreate failed: " + Hdf5ErrorText());
      }
      for (const D4rlTestDataset& d : datasets) {
        if (d.unavailable_filter != 0) filters.push_back(d.unavailable_filter);
        REPLAYDB_RETURN_IF_ERROR(WriteDataset(path, file.get(), d));
      }
      // Closed here rather than by `file`, to see a failure of its flush.
      if (H5Fclose(file.release()) < 0) {
        return Status::IOError("closing '" + path + "': H5Fclose failed: " + Hdf5ErrorText());
      }
      return Status::OK();
    }();
    // The file is closed: the filters can go (libhdf5 refuses while a
    // dataset using one is open).
    for (int id : filters) H5Zunregister(static_cast<H5Z_filter_t>(id));
  }
  return status;
}

D4rlTestDataset RandomDataset(std::string path, DType dtype, std::vector<uint64_t> dims,
                              std::mt19937_64& rng) {
  D4rlTestDataset d;
  d.path = std::move(path);
  d.dtype = dtype;
  d.dims = std::move(dims);
  const uint64_t n = d.num_elements();
  d.data.resize(n * DTypeSize(dtype));
  std::byte* out = d.data.data();
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t bits = rng();
    switch (dtype) {
      case DType::kBool:
        out[i] = static_cast<std::byte>(bits & 1);
        break;
      case DType::kF16:
      case DType::kBF16: {
        auto v = static_cast<uint16_t>(bits);
        // All-ones exponent (inf, NaN) -> clear its lowest bit.
        const uint16_t exp_mask = dtype == DType::kF16 ? 0x7c00 : 0x7f80;
        const uint16_t exp_low = dtype == DType::kF16 ? 0x0400 : 0x0080;
        if ((v & exp_mask) == exp_mask) v = static_cast<uint16_t>(v & ~exp_low);
        std::memcpy(out + i * 2, &v, 2);
        break;
      }
      case DType::kF32: {
        auto v = static_cast<uint32_t>(bits);
        if ((v & 0x7f800000u) == 0x7f800000u) v &= ~0x00800000u;
        std::memcpy(out + i * 4, &v, 4);
        break;
      }
      case DType::kF64: {
        uint64_t v = bits;
        if ((v & 0x7ff0000000000000ull) == 0x7ff0000000000000ull) v &= ~0x0010000000000000ull;
        std::memcpy(out + i * 8, &v, 8);
        break;
      }
      default: {
        const size_t size = DTypeSize(dtype);
        std::memcpy(out + i * size, &bits, size);
        break;
      }
    }
  }
  return d;
}

D4rlTestDataset BoolDataset(std::string path, const std::vector<uint8_t>& values, DType stored,
                            bool column) {
  D4rlTestDataset d;
  d.path = std::move(path);
  d.dtype = stored;
  d.dims = {values.size()};
  if (column) d.dims.push_back(1);
  d.data.resize(values.size());
  // Not memcpy: `values` may be empty, and its data() null.
  std::transform(values.begin(), values.end(), d.data.begin(),
                 [](uint8_t v) { return static_cast<std::byte>(v); });
  return d;
}

std::vector<D4rlTestDataset> RandomD4rlDatasets(const D4rlTestShape& shape, std::mt19937_64& rng) {
  const auto n = static_cast<uint64_t>(shape.steps);
  std::vector<D4rlTestDataset> out;
  out.push_back(RandomDataset("observations", DType::kF32, {n, shape.obs_dim}, rng));
  out.push_back(RandomDataset("actions", DType::kF32, {n, shape.action_dim}, rng));
  out.push_back(RandomDataset("rewards", DType::kF32, {n}, rng));
  std::bernoulli_distribution terminal(shape.terminal_probability);
  std::bernoulli_distribution timeout(shape.timeout_probability);
  std::vector<uint8_t> terminals(n), timeouts(n);
  for (uint64_t i = 0; i < n; ++i) {
    terminals[i] = terminal(rng) ? 1 : 0;
    timeouts[i] = timeout(rng) ? 1 : 0;
  }
  out.push_back(BoolDataset("terminals", terminals));
  out.push_back(BoolDataset("timeouts", timeouts));
  return out;
}

D4rlTestDataset& FindDataset(std::vector<D4rlTestDataset>& datasets, const std::string& path) {
  for (D4rlTestDataset& d : datasets) {
    if (d.path == path) return d;
  }
  std::fprintf(stderr, "FindDataset: no dataset '%s'\n", path.c_str());
  std::abort();
}

void RemoveDataset(std::vector<D4rlTestDataset>& datasets, const std::string& path) {
  std::erase_if(datasets, [&](const D4rlTestDataset& d) { return d.path == path; });
}

}  // namespace replaydb::testing_util
