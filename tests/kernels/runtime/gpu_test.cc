#include "kernels/runtime/gpu.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "replaydb/device.h"
#include "tests/test_util.h"

namespace replaydb::kernels {
namespace {

TEST(GpuTest, SelfTestOnEveryDevice) {
  std::string why;
  const int count = CudaDeviceCount(&why);
  if (count == 0) GTEST_SKIP() << "no GPU: " << why;
  for (int d = 0; d < count; ++d) {
    Status s = GpuSelfTest(d, 1 << 20);
    EXPECT_TRUE(s.ok()) << "device " << d << ": " << s.ToString();
  }
}

TEST(GpuTest, NoDeviceHasAReason) {
  std::string why;
  if (CudaDeviceCount(&why) > 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_FALSE(why.empty());
}

TEST(GpuTest, DeviceMicrosPerCallNeedsACall) {
  const Result<double> none = replaydb::DeviceMicrosPerCall(0, nullptr, 0, [] {
    return Status::OK();
  });
  EXPECT_EQ(none.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(none.status().message(), "DeviceMicrosPerCall: calls must be >= 1");
}

TEST(GpuTest, DeviceMicrosPerCallTimesTheDevicesPartOfACall) {
  std::string why;
  if (CudaDeviceCount(&why) == 0) {
    // Without a GPU the call says why instead of a time.
    const Result<double> r = replaydb::DeviceMicrosPerCall(0, nullptr, 3, [] {
      return Status::OK();
    });
    EXPECT_FALSE(r.ok());
    GTEST_SKIP() << "no GPU: " << why;
  }
  ASSERT_OK_AND_ASSIGN(DeviceStream stream, DeviceStream::Create(0));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer a, DeviceBuffer::Allocate(0, 1 << 20));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer b, DeviceBuffer::Allocate(0, 1 << 20));
  int calls = 0;
  const auto copy = [&] {
    ++calls;
    return CopyDeviceToDeviceAsync(b.data(), a.data(), a.size(), stream.handle());
  };
  // Once before (the contract): the copy's kernel loads on first use.
  ASSERT_OK(copy());
  ASSERT_OK(stream.Synchronize());
  ASSERT_OK_AND_ASSIGN(const double micros,
                       replaydb::DeviceMicrosPerCall(0, stream.handle(), 10, copy));
  EXPECT_EQ(calls, 11);
  EXPECT_GT(micros, 0);
  EXPECT_LT(micros, 10'000) << "a 1 MiB device copy";
  // A call's error stops the measurement and comes back.
  const Result<double> failed = replaydb::DeviceMicrosPerCall(0, stream.handle(), 10, [] {
    return Status::Internal("the call failed");
  });
  EXPECT_EQ(failed.status().message(), "the call failed");
}

}  // namespace
}  // namespace replaydb::kernels
