// Test helpers for calls that write device memory: Take (a Result that must
// be OK) and DeviceOut, the device arrays of a sample of `batch` items of a
// table (columns, keys, probabilities, weights, mask), poisoned first.
// GPU tests only (allocations need a GPU).
#ifndef REPLAYDB_TESTS_DEVICE_OUT_H_
#define REPLAYDB_TESTS_DEVICE_OUT_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
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

}  // namespace replaydb::testing_util

#endif  // REPLAYDB_TESTS_DEVICE_OUT_H_
