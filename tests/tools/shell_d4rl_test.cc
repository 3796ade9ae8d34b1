// import-d4rl in a build without libhdf5 (tools/replaydb/shell/shell_d4rl.h):
// the error itself, in every build, and from the tool where it was built
// without the D4RL library. With it, tests/utilities/d4rl/d4rl_import_test.cc
// runs the command.
#include "tools/replaydb/shell/shell_d4rl.h"

#include <string>
#include <vector>

#include "tests/test_util.h"
#include "tests/tools/tool_runner.h"

namespace replaydb {
namespace {

constexpr char kNoHdf5[] =
    "this build of replaydb has no HDF5 support (libhdf5 was not found when it was "
    "configured), so it cannot read D4RL files; install the Debian package libhdf5-dev "
    "and rebuild";

TEST(ShellD4rlTest, WithoutHdf5ImportD4rlIsNotSupportedAndNamesThePackage) {
  const Status s = tools::D4rlNotBuilt();
  EXPECT_EQ(s.code(), Status::Code::kNotSupported);
  EXPECT_EQ(s.message(), kNoHdf5);
}

class ShellD4rlToolTest : public testing_util::ToolDirTest {};

TEST_F(ShellD4rlToolTest, ImportD4rlSaysWhyItCannotRun) {
#ifdef REPLAYDB_HAVE_D4RL
  GTEST_SKIP() << "this build has the D4RL import (tests/utilities/d4rl/ runs it)";
#else
  const std::string db_path = (dir_ / "db").string();
  { auto db = testing_util::OpenDB(db_path); }
  const testing_util::ToolRun run =
      Run({db_path, "-c", "import-d4rl " + (dir_ / "data.h5").string() + " hopper"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.err, "error: import-d4rl: " + std::string(kNoHdf5) + "\n");
  const testing_util::ToolRun json =
      Run({db_path, "--json", "-c", "import-d4rl " + (dir_ / "data.h5").string() + " hopper"});
  EXPECT_EQ(json.exit_code, 1);
  const std::vector<testing_util::JsonValue> out = testing_util::JsonLines(json);
  ASSERT_EQ(out.size(), 1u) << json.out;
  EXPECT_EQ(out[0].Find("code")->string, "NotSupported");
  EXPECT_EQ(out[0].Find("error")->string, "import-d4rl: " + std::string(kNoHdf5));
#endif
}

}  // namespace
}  // namespace replaydb
