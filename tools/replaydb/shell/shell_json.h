// Json: the values the shell's commands produce. Each command builds one
// Json object; `--json` prints it (Dump), the table view renders it as
// text (tools/replaydb/shell/shell.cc, Render). Objects keep their keys in insertion order.
//
// Thread safety: a value type; no shared state.
#ifndef REPLAYDB_TOOLS_REPLAYDB_SHELL_SHELL_JSON_H_
#define REPLAYDB_TOOLS_REPLAYDB_SHELL_SHELL_JSON_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace replaydb::tools {

class Json {
 public:
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() = default;  // null
  Json(bool b) : v_(b) {}                               // NOLINT: implicit by design
  Json(int v) : v_(static_cast<int64_t>(v)) {}          // NOLINT
  Json(int64_t v) : v_(v) {}                            // NOLINT
  Json(uint64_t v) : v_(static_cast<double>(v)) { SetUnsigned(v); }  // NOLINT
  Json(double v) : v_(v) {}                             // NOLINT
  Json(const char* s) : v_(std::string(s)) {}           // NOLINT
  Json(std::string s) : v_(std::move(s)) {}             // NOLINT
  Json(std::string_view s) : v_(std::string(s)) {}      // NOLINT
  Json(Array a) : v_(std::move(a)) {}                   // NOLINT
  Json(Object o) : v_(std::move(o)) {}                  // NOLINT

  static Json MakeArray() { return Json(Array{}); }
  static Json MakeObject() { return Json(Object{}); }

  bool is_null() const { return std::holds_alternative<std::monostate>(v_); }
  bool is_object() const { return std::holds_alternative<Object>(v_); }
  bool is_array() const { return std::holds_alternative<Array>(v_); }
  bool is_string() const { return std::holds_alternative<std::string>(v_); }

  // Appends `key` to an object (REQUIRES: is_object()); returns *this.
  Json& Set(std::string key, Json value);
  // Appends to an array (REQUIRES: is_array()); returns *this.
  Json& Push(Json value);

  const Object& object() const { return std::get<Object>(v_); }
  const Array& array() const { return std::get<Array>(v_); }
  const std::string& string() const { return std::get<std::string>(v_); }
  // The member `key` of an object, or null when absent.
  const Json* Find(std::string_view key) const;

  // Compact JSON text (no newlines). Non-finite doubles become null, as
  // JSON has no NaN or infinity.
  std::string Dump() const;
  // The value as one line of text for tables: strings unquoted, numbers as
  // Dump writes them, containers as JSON.
  std::string Text() const;

 private:
  void SetUnsigned(uint64_t v);
  void DumpTo(std::string* out) const;

  std::variant<std::monostate, bool, int64_t, double, std::string, Array, Object> v_;
};

// `s` as a JSON string literal, quotes included.
std::string JsonQuote(std::string_view s);

}  // namespace replaydb::tools

#endif  // REPLAYDB_TOOLS_REPLAYDB_SHELL_SHELL_JSON_H_
