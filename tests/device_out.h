// Test helpers for calls that write device memory: Take (a Result that must
// be OK) and DeviceOut, the device arrays of a sample of `batch` items of a
// table (columns, keys, probabilities, weights, mask), poisoned first; and
// ExpectSameOnDevice, such arrays against a host batch.
// GPU tests only (allocations need a GPU).
#ifndef REPLAYDB_TESTS_DEVICE_OUT_H_
#define REPLAYDB_TESTS_DEVICE_OUT_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "replaydb/device.h"
#include "replaydb/options.h"
#include "replaydb/table.h"

namespace replaydb::testing_util {

// The value of a Result that must be OK; a failure ends the test binary.
template <typename T>
T Take(Result<T> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) std::abort();
  return std::move(r).value();
}

inline constexpr uint8_t kPoison = 0xAB;

struct DeviceOut {
  std::vector<DeviceBuffer> columns;
  DeviceBuffer keys, probabilities, weights, mask;
  DeviceSampleOutput view;
};

inline DeviceOut AllocateOut(const TableSpec& spec, int64_t batch) {
  DeviceOut out;
  const int64_t L = spec.sequence_length;
  for (const ColumnSpec& c : spec.columns) {
    out.columns.push_back(Take(DeviceBuffer::Allocate(0, batch * L * c.step_bytes())));
    out.view.columns.push_back(out.columns.back().data());
  }
  out.keys = Take(DeviceBuffer::Allocate(0, batch * 8));
  out.probabilities = Take(DeviceBuffer::Allocate(0, batch * 4));
  out.weights = Take(DeviceBuffer::Allocate(0, batch * 4));
  out.mask = Take(DeviceBuffer::Allocate(0, batch * L));
  out.view.keys = out.keys.as<uint64_t>();
  out.view.probabilities = out.probabilities.as<float>();
  out.view.weights = out.weights.as<float>();
  out.view.mask = out.mask.as<uint8_t>();
  for (auto* b : {&out.keys, &out.probabilities, &out.weights, &out.mask}) {
    EXPECT_TRUE(b->Fill(kPoison).ok());
  }
  for (auto& b : out.columns) EXPECT_TRUE(b.Fill(kPoison).ok());
  return out;
}

// Device arrays `o` (keys, probabilities, weights where `weights`, mask and
// columns of B x L steps) against a host batch `want`.
inline void ExpectSameOnDevice(const DeviceSampleOutput& o, const SampleBatch& want, int64_t L,
                               bool weights) {
  const size_t n = want.keys.size();
  std::vector<uint64_t> keys(n);
  ASSERT_TRUE(CopyDeviceToHost(keys.data(), o.keys, n * 8).ok());
  EXPECT_EQ(keys, want.keys);
  std::vector<float> p(n), w(n);
  ASSERT_TRUE(CopyDeviceToHost(p.data(), o.probabilities, n * 4).ok());
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(p[i], static_cast<float>(want.probabilities[i]));
  if (weights) {
    ASSERT_TRUE(CopyDeviceToHost(w.data(), o.weights, n * 4).ok());
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(w[i], static_cast<float>(want.weights[i]));
  }
  std::vector<uint8_t> mask(n * static_cast<size_t>(L));
  ASSERT_TRUE(CopyDeviceToHost(mask.data(), o.mask, mask.size()).ok());
  EXPECT_EQ(mask, want.mask);
  for (size_t c = 0; c < want.columns.size(); ++c) {
    std::vector<std::byte> bytes(want.columns[c].size_bytes());
    ASSERT_TRUE(CopyDeviceToHost(bytes.data(), o.columns[c], bytes.size()).ok());
    EXPECT_EQ(std::memcmp(bytes.data(), want.columns[c].data(), bytes.size()), 0) << "column " << c;
  }
}

}  // namespace replaydb::testing_util

#endif  // REPLAYDB_TESTS_DEVICE_OUT_H_
