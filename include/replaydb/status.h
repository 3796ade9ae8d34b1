// Status and Result<T>: how every fallible replaydb call reports failure.
//
// replaydb never throws across its API. A Status is either OK or carries a code
// and a message that names what failed and where ("table 'atari': column 'obs'
// expects dtype u8, got f32"). Result<T> is a T or a non-OK Status.
//
// Thread safety: Status and Result are values; distinct objects may be used
// from distinct threads without synchronisation.
#ifndef REPLAYDB_STATUS_H_
#define REPLAYDB_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace replaydb {

class [[nodiscard]] Status {
 public:
  enum class Code : unsigned char {
    kOk = 0,
    kInvalidArgument,    // the caller passed something malformed
    kNotFound,           // unknown table, trajectory, file
    kAlreadyExists,      // duplicate table name, existing database
    kResourceExhausted,  // does not fit (hot tier full, oversized value)
    kDeadlineExceeded,   // a blocking call's timeout passed
    kCancelled,          // the table or database was closed while waiting
    kFailedPrecondition, // the object is in the wrong state for the call
    kBusy,               // another opener holds the database
    kIOError,            // the operating system refused a file operation
    kCorruption,         // stored bytes fail their checks
    kNotSupported,       // valid request this build or machine cannot serve
    kInternal,           // a replaydb bug
    kUnavailable,        // a server or peer cannot be reached (refused, gone, timed out)
  };

  // An OK status.
  Status() = default;

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status AlreadyExists(std::string msg) { return Status(Code::kAlreadyExists, std::move(msg)); }
  static Status ResourceExhausted(std::string msg) { return Status(Code::kResourceExhausted, std::move(msg)); }
  static Status DeadlineExceeded(std::string msg) { return Status(Code::kDeadlineExceeded, std::move(msg)); }
  static Status Cancelled(std::string msg) { return Status(Code::kCancelled, std::move(msg)); }
  static Status FailedPrecondition(std::string msg) { return Status(Code::kFailedPrecondition, std::move(msg)); }
  static Status Busy(std::string msg) { return Status(Code::kBusy, std::move(msg)); }
  static Status IOError(std::string msg) { return Status(Code::kIOError, std::move(msg)); }
  static Status Corruption(std::string msg) { return Status(Code::kCorruption, std::move(msg)); }
  static Status NotSupported(std::string msg) { return Status(Code::kNotSupported, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }
  static Status Unavailable(std::string msg) { return Status(Code::kUnavailable, std::move(msg)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "OK", or "<CodeName>: <message>", e.g. "NotFound: no table named 'x'".
  std::string ToString() const;

  // A copy whose message is "<prefix>: <message>"; OK stays OK.
  Status WithContext(std::string_view prefix) const;

  bool operator==(const Status& other) const = default;

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}

  Code code_ = Code::kOk;
  std::string message_;
};

// Name of a code as ToString() prints it, e.g. "InvalidArgument".
std::string_view StatusCodeName(Status::Code code);

// A T, or the Status saying why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  // REQUIRES: !status.ok()
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "Result constructed from an OK Status without a value");
    if (status_.ok()) status_ = Status::Internal("Result constructed from an OK Status");
  }
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok()
  T& value() & { assert(ok()); return *value_; }
  const T& value() const& { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace replaydb

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define REPLAYDB_RETURN_IF_ERROR(expr)                 \
  do {                                                 \
    ::replaydb::Status _replaydb_status = (expr);      \
    if (!_replaydb_status.ok()) return _replaydb_status; \
  } while (0)

#define REPLAYDB_CONCAT_INNER_(a, b) a##b
#define REPLAYDB_CONCAT_(a, b) REPLAYDB_CONCAT_INNER_(a, b)

// `lhs = value of rexpr` (a Result<T>), or returns its Status from the
// enclosing function.
#define REPLAYDB_ASSIGN_OR_RETURN(lhs, rexpr) \
  REPLAYDB_ASSIGN_OR_RETURN_IMPL_(REPLAYDB_CONCAT_(_replaydb_result_, __LINE__), lhs, rexpr)
#define REPLAYDB_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                    \
  if (!tmp.ok()) return tmp.status();                    \
  lhs = std::move(tmp).value()

#endif  // REPLAYDB_STATUS_H_
