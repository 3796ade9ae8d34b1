// The replaydb command (tools/replaydb/), the C API (capi/) and the examples
// are built on the public API alone, as a user's program is: the only
// project headers they include are include/replaydb/'s (and the command's
// own). A test rather than include paths, since the command's own headers
// are named from the repository root as the engine's are.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace replaydb {
namespace {

namespace fs = std::filesystem;

// "path:line: #include "x"" for each project include under `dir` (.cc, .h,
// .c) whose name starts with none of `allowed`.
std::vector<std::string> ForeignIncludes(const fs::path& dir,
                                         const std::vector<std::string>& allowed) {
  const fs::path root = REPLAYDB_SOURCE_DIR;
  const std::regex include(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<std::string> found;
  for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h" && ext != ".c")) continue;
    std::ifstream in(entry.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      std::smatch m;
      if (!std::regex_search(line, m, include)) continue;
      const std::string name = m[1];
      bool ok = false;
      for (const std::string& prefix : allowed) ok = ok || name.rfind(prefix, 0) == 0;
      if (!ok) {
        found.push_back(fs::relative(entry.path(), root).string() + ":" + std::to_string(n) +
                        ": #include \"" + name + "\"");
      }
    }
  }
  return found;
}

std::string Lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += "\n  " + l;
  return out;
}

TEST(PublicApiTest, TheCommandIncludesOnlyThePublicHeadersAndItsOwn) {
  const std::vector<std::string> found =
      ForeignIncludes("tools/replaydb", {"replaydb/", "tools/replaydb/"});
  EXPECT_TRUE(found.empty()) << "tools/replaydb/ includes engine internals:" << Lines(found);
}

TEST(PublicApiTest, TheCApiAndTheExamplesIncludeOnlyThePublicHeaders) {
  for (const char* dir : {"capi", "examples"}) {
    const std::vector<std::string> found = ForeignIncludes(dir, {"replaydb/"});
    EXPECT_TRUE(found.empty()) << dir << " includes engine internals:" << Lines(found);
  }
}

TEST(PublicApiTest, AForeignIncludeIsFound) {
  // The check itself: the engine's own sources include internals.
  EXPECT_FALSE(ForeignIncludes("engine/table", {"replaydb/"}).empty());
}

}  // namespace
}  // namespace replaydb
