// The shell's import-d4rl command needs the optional D4RL library
// (replaydb_d4rl, include/replaydb/utilities/d4rl.h), which CMake builds
// only where it finds libhdf5; the tool is then compiled with
// REPLAYDB_HAVE_D4RL. Without it the command fails with the error below.
#ifndef REPLAYDB_TOOLS_REPLAYDB_SHELL_SHELL_D4RL_H_
#define REPLAYDB_TOOLS_REPLAYDB_SHELL_SHELL_D4RL_H_

#include "replaydb/status.h"

namespace replaydb::tools {

// NotSupported: this build has no HDF5 support, and which Debian package
// brings it. The shell prefixes the command's name.
Status D4rlNotBuilt();

}  // namespace replaydb::tools

#endif  // REPLAYDB_TOOLS_REPLAYDB_SHELL_SHELL_D4RL_H_
