// tools::ChildProcess, which the serve tests and the remote benches start
// servers with: the child's stdout and stderr come through its pipe; it
// holds none of this process's other descriptors (an inherited listener
// would hold its port); a program that cannot be started is an IOError
// naming it.
#include "tools/replaydb/child_process.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "tests/test_util.h"

namespace replaydb::tools {
namespace {

using ::testing::HasSubstr;

TEST(ChildProcessTest, ItsOutputComesThroughAndItHoldsNoneOfThisProcesssDescriptors) {
  // (Without close-on-exec, as UCX opens its sockets.)
  const int held = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(held, 3);
  const std::string fd = std::to_string(held);
  ASSERT_OK_AND_ASSIGN(
      auto child, ChildProcess::Start({"sh", "-c",
                                       "echo out; echo err >&2; if [ -e /proc/$$/fd/" + fd +
                                           " ]; then echo fd " + fd + " held; else echo fd " + fd +
                                           " closed; fi"}));
  EXPECT_EQ(child->Wait(std::chrono::seconds(30)), 0) << child->output();
  EXPECT_THAT(child->output(), HasSubstr("out\n"));
  EXPECT_THAT(child->output(), HasSubstr("err\n"));
  EXPECT_THAT(child->output(), HasSubstr("fd " + fd + " closed\n"));
  ::close(held);
  ASSERT_OK_AND_ASSIGN(auto failing, ChildProcess::Start({"sh", "-c", "exit 3"}));
  EXPECT_EQ(failing->Wait(std::chrono::seconds(30)), 3);
}

TEST(ChildProcessTest, AProgramThatCannotBeStartedIsNamed) {
  const Result<std::unique_ptr<ChildProcess>> missing =
      ChildProcess::Start({"replaydb-no-such-program", "--flag"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kIOError);
  EXPECT_EQ(missing.status().message(),
            "starting replaydb-no-such-program: No such file or directory");
}

}  // namespace
}  // namespace replaydb::tools
