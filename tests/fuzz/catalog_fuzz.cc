// libFuzzer target: the input is a CATALOG file's bytes, parsed by
// engine::DecodeCatalog. Nothing may crash; Corruption is fine.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/db/catalog.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<replaydb::TableSpec> tables;
  (void)replaydb::engine::DecodeCatalog(
      std::string_view(reinterpret_cast<const char*>(data), size), "fuzz-input", &tables);
  return 0;
}
