// libFuzzer target: the input is one shell command line, split and parsed
// by tools/replaydb/shell/shell_parser.h. Nothing may crash; a parse that succeeds must
// respect the command's argument counts and known flags.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tools/replaydb/shell/shell_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace replaydb::tools;
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> words;
  (void)SplitWords(line, &words);
  ParsedCommand c;
  const replaydb::Status s = ParseCommandLine(line, &c);
  if (!s.ok()) {
    if (s.message().empty()) std::abort();  // every error says what is wrong
    return 0;
  }
  if (c.spec == nullptr) return 0;  // empty line or comment
  const int n = static_cast<int>(c.args.size());
  if (n < c.spec->min_args || (c.spec->max_args >= 0 && n > c.spec->max_args)) std::abort();
  for (const auto& [name, value] : c.flags) {
    bool known = false;
    for (std::string_view f : c.spec->flags) known = known || f == name;
    if (!known) std::abort();
  }
  int64_t v = 0;
  for (const std::string& a : c.args) (void)ParseInteger(*c.spec, "arg", a, -5, 5, &v);
  return 0;
}
