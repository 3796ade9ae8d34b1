#include "replaydb/status.h"

namespace replaydb {

std::string_view StatusCodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk: return "OK";
    case Status::Code::kInvalidArgument: return "InvalidArgument";
    case Status::Code::kNotFound: return "NotFound";
    case Status::Code::kAlreadyExists: return "AlreadyExists";
    case Status::Code::kResourceExhausted: return "ResourceExhausted";
    case Status::Code::kDeadlineExceeded: return "DeadlineExceeded";
    case Status::Code::kCancelled: return "Cancelled";
    case Status::Code::kFailedPrecondition: return "FailedPrecondition";
    case Status::Code::kBusy: return "Busy";
    case Status::Code::kIOError: return "IOError";
    case Status::Code::kCorruption: return "Corruption";
    case Status::Code::kNotSupported: return "NotSupported";
    case Status::Code::kInternal: return "Internal";
    case Status::Code::kUnavailable: return "Unavailable";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::WithContext(std::string_view prefix) const {
  if (ok()) return *this;
  std::string msg(prefix);
  msg += ": ";
  msg += message_;
  return Status(code_, std::move(msg));
}

}  // namespace replaydb
