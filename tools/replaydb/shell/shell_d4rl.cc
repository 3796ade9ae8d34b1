// import-d4rl's error in a build without libhdf5 (tools/replaydb/shell/shell_d4rl.h).
#include "tools/replaydb/shell/shell_d4rl.h"

namespace replaydb::tools {

Status D4rlNotBuilt() {
  return Status::NotSupported(
      "this build of replaydb has no HDF5 support (libhdf5 was not found when it was "
      "configured), so it cannot read D4RL files; install the Debian package libhdf5-dev "
      "and rebuild");
}

}  // namespace replaydb::tools
