// The interactive shell through a pseudo-terminal: the test types commands
// and Tab keys into `replaydb DIR` and reads the screen, as a user would.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "replaydb/db.h"
#include "tests/test_util.h"
#include "tests/tools/tool_runner.h"

namespace replaydb {
namespace {

using ::testing::HasSubstr;

// A child process on the slave side of a pseudo-terminal.
class Terminal {
 public:
  Terminal(const std::vector<std::string>& args, const std::vector<std::string>& env) {
    std::vector<std::string> a = args;
    std::vector<std::string> e = env;
    // The sanitizers' settings (suppressions) reach the child as they reach
    // this test, and so does UCX's (its memory hooks are off under a
    // sanitizer: CMakeLists.txt says why).
    for (const char* name : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS", "LSAN_OPTIONS",
                             "UCX_MEM_MMAP_HOOK_MODE"}) {
      if (const char* value = std::getenv(name)) e.push_back(std::string(name) + "=" + value);
    }
    std::vector<char*> argv;
    for (std::string& s : a) argv.push_back(s.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (std::string& s : e) envp.push_back(s.data());
    envp.push_back(nullptr);
    struct winsize size = {};
    size.ws_row = 50;
    size.ws_col = 200;
    pid_ = forkpty(&master_, nullptr, nullptr, &size);
    if (pid_ == 0) {
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
  }
  ~Terminal() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) close(master_);
  }

  bool started() const { return pid_ > 0 && master_ >= 0; }

  void Type(std::string_view keys) {
    while (!keys.empty()) {
      const ssize_t n = write(master_, keys.data(), keys.size());
      if (n <= 0) return;
      keys.remove_prefix(static_cast<size_t>(n));
    }
  }

  // Reads until the screen since `from` holds `text` (true) or 10 s pass.
  bool WaitFor(const std::string& text, size_t from) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (screen_.find(text, from) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      struct pollfd p = {master_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = read(master_, buf, sizeof(buf));
      if (n <= 0) return screen_.find(text, from) != std::string::npos;
      screen_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }

  // Waits for the process to exit; its exit status, or -1.
  int Wait() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      char buf[4096];
      struct pollfd p = {master_, POLLIN, 0};
      if (poll(&p, 1, 50) > 0 && read(master_, buf, sizeof(buf)) > 0) continue;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
    }
    return -1;
  }

  const std::string& screen() const { return screen_; }

 private:
  int master_ = -1;
  pid_t pid_ = -1;
  std::string screen_;
};

class ShellPtyTest : public testing_util::ToolDirTest {};

TEST_F(ShellPtyTest, TypesCommandsCompletesNamesAndKeepsHistory) {
  std::mt19937_64 rng(testing_util::TestSeed());
  const std::string db_path = (dir_ / "db").string();
  const std::string column = "obs_" + std::to_string(rng() % 1000);
  {
    auto db = testing_util::OpenDB(db_path);
    TableSpec spec;
    spec.name = "experience";
    spec.columns = {{column, DType::kF32, Shape{2}}};
    spec.capacity_steps = 1024;
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
    ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
    for (int s = 0; s < 7; ++s) ASSERT_OK(writer->Append(testing_util::RandomStep(spec, rng).tensors));
    ASSERT_OK(writer->End(EndReason::kTerminal));
  }
  const std::string history = (dir_ / "history").string();
  Terminal term({REPLAYDB_TOOL_PATH, db_path},
                {"TERM=dumb", "HOME=" + dir_.string(), "REPLAYDB_HISTORY=" + history});
  ASSERT_TRUE(term.started());
  ASSERT_TRUE(term.WaitFor("replaydb> ", 0)) << term.screen();

  // A command name and a table name, each completed with Tab.
  size_t mark = term.screen().size();
  term.Type("sta\texp\t\n");
  ASSERT_TRUE(term.WaitFor("steps: 7", mark)) << term.screen();
  EXPECT_THAT(term.screen().substr(mark), HasSubstr("stats experience"));
  ASSERT_TRUE(term.WaitFor("replaydb> ", mark + 1)) << term.screen();

  // A flag and a column name.
  mark = term.screen().size();
  term.Type("help sh\t\n");
  ASSERT_TRUE(term.WaitFor("usage: show TABLE TRAJECTORY", mark)) << term.screen();
  mark = term.screen().size();
  term.Type("show experience 0 --col\t" + column.substr(0, 3) + "\t");
  ASSERT_TRUE(term.WaitFor("--column " + column, mark)) << term.screen();
  term.Type("\x15");  // Ctrl-U: drop the line

  // Ctrl-C at the prompt drops the line typed so far, also when the next
  // keys follow at once.
  mark = term.screen().size();
  term.Type("describe experienc");
  ASSERT_TRUE(term.WaitFor("describe experienc", mark)) << term.screen();
  mark = term.screen().size();
  term.Type("\x03tables\n");
  ASSERT_TRUE(term.WaitFor("experience  1", mark)) << term.screen();
  EXPECT_THAT(term.screen().substr(mark), ::testing::Not(HasSubstr("error")));

  // An error keeps the shell running.
  mark = term.screen().size();
  term.Type("frobnicate\n");
  ASSERT_TRUE(term.WaitFor("error: unknown command 'frobnicate'", mark)) << term.screen();

  // Keys typed while a command runs wait for the next prompt, Ctrl-D too:
  // it leaves after the command. The history file holds what was typed.
  mark = term.screen().size();
  term.Type("tables\n\x04");
  ASSERT_TRUE(term.WaitFor("experience", mark)) << term.screen();
  EXPECT_EQ(term.Wait(), 0) << term.screen();
  const std::string kept = testing_util::ReadFile(history);
  EXPECT_THAT(kept, HasSubstr("stats experience\n"));
  EXPECT_THAT(kept, HasSubstr("frobnicate\n"));
}

// A long command on a terminal draws a progress bar (the shell's, from the
// engine's reports), and Ctrl-C stops it without damage: the export leaves
// nothing behind and the shell goes on.
TEST_F(ShellPtyTest, CtrlCStopsALongExportWithoutDamage) {
  std::mt19937_64 rng(testing_util::TestSeed());
  const std::string db_path = (dir_ / "db").string();
  {
    auto db = testing_util::OpenDB(db_path);
    TableSpec spec;
    spec.name = "big";
    spec.columns = {{"frame", DType::kU8, Shape{16384}}};
    spec.capacity_bytes = int64_t{128} << 20;
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
    ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
    // 64 MiB in 32 trajectories: the export takes long enough to be stopped.
    testing_util::StepData step = testing_util::RandomStep(spec, rng);
    for (int t = 0; t < 32; ++t) {
      for (int s = 0; s < 128; ++s) {
        step.columns[0][static_cast<size_t>(rng() % 16384)] = std::byte{1};
        ASSERT_OK(writer->Append(step.tensors));
      }
      ASSERT_OK(writer->End(EndReason::kTerminal));
    }
  }
  const std::string out = (dir_ / "exported").string();
  Terminal term({REPLAYDB_TOOL_PATH, db_path}, {"TERM=dumb", "HOME=" + dir_.string()});
  ASSERT_TRUE(term.started());
  ASSERT_TRUE(term.WaitFor("replaydb> ", 0)) << term.screen();
  size_t mark = term.screen().size();
  term.Type("export big " + out + "\n");
  ASSERT_TRUE(term.WaitFor("export big [", mark)) << term.screen();
  term.Type("\x03");
  ASSERT_TRUE(term.WaitFor("error: export: ", mark)) << term.screen();
  ASSERT_TRUE(term.WaitFor("replaydb> ", term.screen().find("error: export: ", mark)))
      << term.screen();
  EXPECT_THAT(term.screen().substr(mark), HasSubstr("interrupted after "));
  EXPECT_THAT(term.screen().substr(mark), HasSubstr("nothing was kept"));
  EXPECT_FALSE(std::filesystem::exists(out)) << "an interrupted export leaves nothing";
  // The shell goes on, and the database is whole.
  mark = term.screen().size();
  term.Type("verify\n");
  ASSERT_TRUE(term.WaitFor("problems: (none)", mark)) << term.screen();
  EXPECT_THAT(term.screen().substr(mark), HasSubstr("steps: 4096"));
  // verify and compact draw their bars too, ended before the output.
  EXPECT_THAT(term.screen().substr(mark), HasSubstr("\rverify " + db_path + " ["));
  EXPECT_THAT(term.screen().substr(mark), HasSubstr("4096/4096 steps"));
  mark = term.screen().size();
  term.Type("compact\n");
  ASSERT_TRUE(term.WaitFor("compacted: true", mark)) << term.screen();
  EXPECT_THAT(term.screen().substr(mark), HasSubstr("\rcompact " + db_path + "/cold "));
  term.Type("\x04");
  EXPECT_EQ(term.Wait(), 0) << term.screen();
}

}  // namespace
}  // namespace replaydb
