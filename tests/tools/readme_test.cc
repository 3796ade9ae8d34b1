// The README's example is examples/quickstart.cc, which the build compiles
// and ctest runs: the copy in the README must not drift from it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ReadmeTest, ExampleMatchesQuickstartSource) {
  const auto root = std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
  const std::string readme = ReadFile(root / "README.md");
  const std::string source = ReadFile(root / "examples/quickstart.cc");
  ASSERT_FALSE(source.empty());
  const std::string open = "```cpp\n";
  const size_t begin = readme.find(open);
  ASSERT_NE(begin, std::string::npos) << "README.md has no ```cpp block";
  const size_t end = readme.find("```", begin + open.size());
  ASSERT_NE(end, std::string::npos);
  EXPECT_EQ(readme.substr(begin + open.size(), end - begin - open.size()), source)
      << "README.md's example differs from examples/quickstart.cc";
}

TEST(ReadmeTest, NamesBothSetupCommands) {
  const auto root = std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
  const std::string readme = ReadFile(root / "README.md");
  EXPECT_NE(readme.find("bash tools/scripts/run-demo.sh"), std::string::npos);
  EXPECT_NE(readme.find("bash tools/scripts/run-tests.sh"), std::string::npos);
  EXPECT_NE(ReadFile(root / ".ci/run").find("bash tools/scripts/run-tests.sh"), std::string::npos)
      << ".ci/run must run the README's test command";
}

}  // namespace
