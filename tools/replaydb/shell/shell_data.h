// The shell's commands that read experience: trajectories, show, sample and
// priorities (tools/replaydb/shell/shell_data.cc), and how they print step values.
#ifndef REPLAYDB_TOOLS_REPLAYDB_SHELL_SHELL_DATA_H_
#define REPLAYDB_TOOLS_REPLAYDB_SHELL_SHELL_DATA_H_

#include <cstddef>
#include <string>

#include "replaydb/types.h"
#include "tools/replaydb/shell/shell.h"

namespace replaydb::tools {

Status TrajectoriesCommand(Shell& shell, const ParsedCommand& c, CommandOutput* out);
Status ShowCommand(Shell& shell, const ParsedCommand& c, CommandOutput* out);
Status SampleCommand(Shell& shell, const ParsedCommand& c, CommandOutput* out);
Status PrioritiesCommand(Shell& shell, const ParsedCommand& c, CommandOutput* out);

// One element of `dtype` at `p` (any alignment) as a double: bool 0 or 1,
// f16 and bf16 widened exactly.
double ElementValue(DType dtype, const std::byte* p);
// The element as JSON: a bool, an integer, for f64 the shortest decimal that
// reads back as the same double, for f16, bf16 and f32 the shortest that
// reads back as the same float (which f16 and bf16 values are exactly).
Json ElementJson(DType dtype, const std::byte* p);

}  // namespace replaydb::tools

#endif  // REPLAYDB_TOOLS_REPLAYDB_SHELL_SHELL_DATA_H_
