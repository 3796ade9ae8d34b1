#include "tools/replaydb/shell/shell_json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace replaydb::tools {

void Json::SetUnsigned(uint64_t v) {
  if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    v_ = static_cast<int64_t>(v);
  }
}

Json& Json::Set(std::string key, Json value) {
  std::get<Object>(v_).emplace_back(std::move(key), std::move(value));
  return *this;
}

Json& Json::Push(Json value) {
  std::get<Array>(v_).push_back(std::move(value));
  return *this;
}

const Json* Json::Find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const auto& [k, v] : object()) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (u < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", u);
          out += buf;
        } else {
          out += c;  // UTF-8 passes through
        }
    }
  }
  out += '"';
  return out;
}

namespace {

std::string NumberText(double d) {
  if (!std::isfinite(d)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", d);
  // The shortest text that reads back as the same double.
  for (int digits = 6; digits < 17; ++digits) {
    char shorter[32];
    std::snprintf(shorter, sizeof(shorter), "%.*g", digits, d);
    if (std::strtod(shorter, nullptr) == d) return shorter;
  }
  return buf;
}

}  // namespace

void Json::DumpTo(std::string* out) const {
  struct Visitor {
    std::string* out;
    void operator()(std::monostate) const { *out += "null"; }
    void operator()(bool b) const { *out += b ? "true" : "false"; }
    void operator()(int64_t v) const { *out += std::to_string(v); }
    void operator()(double d) const { *out += NumberText(d); }
    void operator()(const std::string& s) const { *out += JsonQuote(s); }
    void operator()(const Array& a) const {
      *out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i > 0) *out += ',';
        a[i].DumpTo(out);
      }
      *out += ']';
    }
    void operator()(const Object& o) const {
      *out += '{';
      for (size_t i = 0; i < o.size(); ++i) {
        if (i > 0) *out += ',';
        *out += JsonQuote(o[i].first);
        *out += ':';
        o[i].second.DumpTo(out);
      }
      *out += '}';
    }
  };
  std::visit(Visitor{out}, v_);
}

std::string Json::Dump() const {
  std::string out;
  DumpTo(&out);
  return out;
}

std::string Json::Text() const {
  if (is_string()) return string();
  if (is_null()) return "-";
  if (const double* d = std::get_if<double>(&v_); d != nullptr && !std::isfinite(*d)) {
    return std::isnan(*d) ? "nan" : (*d > 0 ? "inf" : "-inf");
  }
  return Dump();
}

}  // namespace replaydb::tools
