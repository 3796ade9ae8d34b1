// Json: the values the replaydb command prints, nlohmann::ordered_json
// (objects keep their keys in the order written). Each shell command builds
// one Json object; `--json` prints it (DumpJson), the table view renders it
// as text (tools/replaydb/shell/shell.cc, RenderText) with JsonText for each
// value. `replaydb bench --json` prints one object per result the same way.
//
// Thread safety: value types and pure functions; no shared state.
#ifndef REPLAYDB_TOOLS_REPLAYDB_JSON_H_
#define REPLAYDB_TOOLS_REPLAYDB_JSON_H_

#include <nlohmann/json.hpp>
#include <string>

namespace replaydb::tools {

using Json = nlohmann::ordered_json;

// Compact JSON text (no newlines). A double is printed with "%.Ng" for the
// smallest N from 6 up that reads back as the same double (1 for 1.0, 0.1
// for 0.1, 1e+06 for 1000000.0); non-finite ones become null, as JSON has no
// NaN or infinity. Bytes of strings that are not UTF-8 become U+FFFD.
std::string DumpJson(const Json& j);

// The value as one line of text for tables: strings unquoted, null as "-",
// non-finite doubles as nan, inf or -inf, everything else as DumpJson
// writes it.
std::string JsonText(const Json& j);

}  // namespace replaydb::tools

#endif  // REPLAYDB_TOOLS_REPLAYDB_JSON_H_
