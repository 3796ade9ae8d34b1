// Value types of the replaydb API: dtypes, shapes, tensor views, item keys.
#ifndef REPLAYDB_TYPES_H_
#define REPLAYDB_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace replaydb {

// Element types a column may hold. The numeric values are stored in the
// catalog: never renumber, only append.
enum class DType : uint8_t {
  kBool = 0,  // one byte per element, 0 or 1
  kU8 = 1,
  kI8 = 2,
  kI16 = 3,
  kI32 = 4,
  kI64 = 5,
  kF16 = 6,   // IEEE 754 binary16, stored as raw bits
  kBF16 = 7,  // bfloat16, stored as raw bits
  kF32 = 8,
  kF64 = 9,
};
inline constexpr int kNumDTypes = 10;

// Bytes per element, e.g. 4 for kF32.
size_t DTypeSize(DType dtype);
// Lower-case name as written in specs and printed in messages: "u8", "bf16".
std::string_view DTypeName(DType dtype);
// Inverse of DTypeName; nullopt for an unknown name.
std::optional<DType> ParseDType(std::string_view name);

// A fixed-rank shape held inline (no heap allocation), at most kMaxRank dims.
class Shape {
 public:
  static constexpr int kMaxRank = 8;

  Shape() = default;
  // REQUIRES: dims.size() <= kMaxRank (extra dims are dropped and the shape
  // is marked invalid; ValidShape() then reports it).
  Shape(std::initializer_list<int64_t> dims);
  static Shape FromSpan(std::span<const int64_t> dims);

  int rank() const { return rank_; }
  int64_t dim(int i) const { return dims_[i]; }
  std::span<const int64_t> dims() const { return {dims_, static_cast<size_t>(rank_)}; }
  // Product of dims; 1 for a scalar (rank 0); INT64_MAX when the product
  // overflows int64.
  int64_t num_elements() const;
  // False if built with more than kMaxRank dims or any dim < 0.
  bool valid() const;
  // A shape with `leading` prepended, e.g. {3}.Prepend(5) == {5, 3}.
  // REQUIRES: rank() < kMaxRank
  Shape Prepend(int64_t leading) const;
  // The shape without its first dim. REQUIRES: rank() >= 1
  Shape DropFirst() const;
  // "[84, 84, 3]"; "[]" for a scalar.
  std::string ToString() const;

  bool operator==(const Shape& other) const;

 private:
  int64_t dims_[kMaxRank] = {};
  int8_t rank_ = 0;
  bool overflow_ = false;
};

// A read-only view of caller memory: dtype, shape and bytes. Does not own
// `data`, which must stay valid for the duration of the call it is passed to.
struct ConstTensor {
  DType dtype = DType::kU8;
  Shape shape;
  const void* data = nullptr;
  // Must equal shape.num_elements() * DTypeSize(dtype); checked on append.
  size_t size_bytes = 0;
};

// An owning host buffer with a dtype and shape. Not zero-filled on
// allocation. Movable, not copyable.
class Tensor {
 public:
  Tensor() = default;
  // Allocates shape.num_elements() * DTypeSize(dtype) bytes, reusing the
  // current allocation when it is already exactly that large. Like any
  // allocation, throws std::bad_alloc when that much memory cannot be had
  // (the engine sizes its tensors before it calls this, and returns
  // ResourceExhausted instead).
  void Reset(DType dtype, const Shape& shape);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  size_t size_bytes() const { return size_bytes_; }
  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  template <typename T> T* data_as() { return reinterpret_cast<T*>(data_.get()); }
  template <typename T> const T* data_as() const { return reinterpret_cast<const T*>(data_.get()); }
  ConstTensor view() const { return {dtype_, shape_, data_.get(), size_bytes_}; }

 private:
  DType dtype_ = DType::kU8;
  Shape shape_;
  size_t size_bytes_ = 0;
  // Large buffers are kept for reuse when freed (util/host_buffers.h), so a
  // batch made per call reuses mapped (and, for copies from a GPU,
  // page-locked) memory.
  struct Deleter {
    size_t bytes;  // no initializer: default-constructible inside Tensor
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte[], Deleter> data_;
};

// Item keys. An item is the window of a trajectory that starts at one step.
// Its key is (trajectory_id << kItemKeyStartBits) | start_step: stable for the
// item's whole life (eviction, spill and recovery keep it), unique in a table,
// and decodable without a lookup.
using ItemKey = uint64_t;
inline constexpr int kItemKeyStartBits = 24;
// Longest trajectory a table accepts: 16,777,216 steps.
inline constexpr int64_t kMaxTrajectorySteps = int64_t{1} << kItemKeyStartBits;
// Largest trajectory id: 2^40 - 1.
inline constexpr uint64_t kMaxTrajectoryId = (uint64_t{1} << (64 - kItemKeyStartBits)) - 1;

inline constexpr ItemKey MakeItemKey(uint64_t trajectory_id, int64_t start_step) {
  return (trajectory_id << kItemKeyStartBits) | static_cast<uint64_t>(start_step);
}
inline constexpr uint64_t ItemKeyTrajectory(ItemKey key) { return key >> kItemKeyStartBits; }
inline constexpr int64_t ItemKeyStart(ItemKey key) {
  return static_cast<int64_t>(key & ((uint64_t{1} << kItemKeyStartBits) - 1));
}

}  // namespace replaydb

#endif  // REPLAYDB_TYPES_H_
