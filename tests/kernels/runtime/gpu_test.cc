#include "kernels/runtime/gpu.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace replaydb::kernels
