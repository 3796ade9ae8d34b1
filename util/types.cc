#include "replaydb/types.h"

#include <cstring>
#include <limits>
#include <new>

#include "util/checked_math.h"
#include "util/host_buffers.h"

namespace replaydb {
namespace {

struct DTypeInfo {
  std::string_view name;
  size_t size;
};

constexpr DTypeInfo kDTypes[kNumDTypes] = {
    {"bool", 1}, {"u8", 1},  {"i8", 1},   {"i16", 2}, {"i32", 4},
    {"i64", 8},  {"f16", 2}, {"bf16", 2}, {"f32", 4}, {"f64", 8},
};

}  // namespace

size_t DTypeSize(DType dtype) {
  const auto i = static_cast<size_t>(dtype);
  return i < kNumDTypes ? kDTypes[i].size : 0;
}

std::string_view DTypeName(DType dtype) {
  const auto i = static_cast<size_t>(dtype);
  return i < kNumDTypes ? kDTypes[i].name : std::string_view("invalid");
}

std::optional<DType> ParseDType(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (kDTypes[i].name == name) return static_cast<DType>(i);
  }
  return std::nullopt;
}

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) {
    if (rank_ == kMaxRank) {
      overflow_ = true;
      break;
    }
    dims_[rank_++] = d;
  }
}

Shape Shape::FromSpan(std::span<const int64_t> dims) {
  Shape s;
  for (int64_t d : dims) {
    if (s.rank_ == kMaxRank) {
      s.overflow_ = true;
      break;
    }
    s.dims_[s.rank_++] = d;
  }
  return s;
}

int64_t Shape::num_elements() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) {
    if (!util::CheckedMul(n, dims_[i], &n)) return std::numeric_limits<int64_t>::max();
  }
  return n;
}

bool Shape::valid() const {
  if (overflow_) return false;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] < 0) return false;
  }
  return true;
}

Shape Shape::Prepend(int64_t leading) const {
  Shape s;
  s.overflow_ = overflow_ || rank_ == kMaxRank;
  s.dims_[0] = leading;
  s.rank_ = 1;
  for (int i = 0; i < rank_ && s.rank_ < kMaxRank; ++i) s.dims_[s.rank_++] = dims_[i];
  return s;
}

Shape Shape::DropFirst() const {
  Shape s;
  s.overflow_ = overflow_;
  for (int i = 1; i < rank_; ++i) s.dims_[s.rank_++] = dims_[i];
  return s;
}

std::string Shape::ToString() const {
  std::string out = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(dims_[i]);
  }
  if (overflow_) out += ", ...";
  out += "]";
  return out;
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_ || overflow_ != other.overflow_) return false;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] != other.dims_[i]) return false;
  }
  return true;
}

void Tensor::Deleter::operator()(std::byte* p) const { util::FreeHostBuffer(p, bytes); }

void Tensor::Reset(DType dtype, const Shape& shape) {
  // An overflowing size saturates, and its allocation throws rather than
  // handing out a small buffer.
  const size_t bytes =
      util::SaturatingMul<size_t>(static_cast<uint64_t>(shape.num_elements()), DTypeSize(dtype));
  // Thrown here rather than by new[]: an allocator may abort on a size no
  // allocation can have (AddressSanitizer's does) instead of throwing.
  if (bytes == std::numeric_limits<size_t>::max()) throw std::bad_alloc();
  if (!data_ || bytes != size_bytes_) {
    data_.reset();  // back to the kept buffers before the next is taken
    size_bytes_ = 0;
    data_ = std::unique_ptr<std::byte[], Deleter>(util::AllocateHostBuffer(bytes), Deleter{bytes});
    size_bytes_ = bytes;
  }
  dtype_ = dtype;
  shape_ = shape;
}

}  // namespace replaydb
