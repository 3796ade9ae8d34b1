// A check of the cold store's table files (*.sst) that runs before RocksDB
// reads them.
//
// RocksDB (7.8, built as Debian builds it, with assertions on) parses a
// table file's properties block before it checks that block's checksum (the
// checksum is taken with an ingested file's sequence number blanked, so it
// can only be checked once parsed). When the top bit of the block's restart
// count is flipped, the parse takes the block for one with a hash index and
// an assertion aborts the process: every opener of a database with such a
// file, and every read that opens it later, died without a word. One flipped
// bit of a whole file did it (tests/engine/db/damage_test.cc).
#ifndef REPLAYDB_ENGINE_COLD_TABLE_FILE_CHECK_H_
#define REPLAYDB_ENGINE_COLD_TABLE_FILE_CHECK_H_

#include <cstdint>
#include <string>

#include "replaydb/status.h"

namespace replaydb::engine {

// Where a block-based table file's properties block lies (without its
// five-byte trailer), as the file's footer and metaindex block say.
struct PropertiesBlock {
  uint64_t offset = 0;
  uint64_t size = 0;
};

// The properties block of the table file at `path`, or NotFound when the
// file is no block-based table of a format this reads (format versions 1 to
// 5), its footer or metaindex block does not parse, or it has no properties
// block: RocksDB's own checks report those. IOError when it cannot be read.
Result<PropertiesBlock> FindPropertiesBlock(const std::string& path);

// OK, or Corruption naming the file at `path` when its properties block
// would abort RocksDB's parse (above). Files this cannot parse are OK here:
// RocksDB reports their damage itself, without aborting.
Status CheckTableFileBeforeRocksdb(const std::string& path);

// CheckTableFileBeforeRocksdb for every *.sst of `dir`, naming every damaged
// one (with `dir`) in one Corruption.
Status CheckTableFilesBeforeRocksdb(const std::string& dir);

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_COLD_TABLE_FILE_CHECK_H_
