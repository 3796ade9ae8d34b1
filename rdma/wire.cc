#include "rdma/wire.h"

#include <flatbuffers/flatbuffers.h>

namespace replaydb::rdma {

namespace fb = wire::fb;

std::string EncodeHello(const HeaderFields& fields, std::string_view client_name,
                        uint32_t protocol_version) {
  flatbuffers::FlatBufferBuilder b(128);
  b.ForceDefaults(true);
  const auto name = b.CreateString(client_name.data(), client_name.size());
  return EncodeHeader(b, fields, fb::Body::Hello, fb::CreateHello(b, protocol_version, name));
}

std::string EncodeWelcome(const HeaderFields& fields, std::string_view server_name,
                          bool read_only) {
  flatbuffers::FlatBufferBuilder b(128);
  b.ForceDefaults(true);
  const auto name = b.CreateString(server_name.data(), server_name.size());
  return EncodeHeader(b, fields, fb::Body::Welcome,
                      fb::CreateWelcome(b, kProtocolVersion, name, read_only));
}

std::string EncodePing(const HeaderFields& fields) {
  flatbuffers::FlatBufferBuilder b(64);
  b.ForceDefaults(true);
  return EncodeHeader(b, fields, fb::Body::Ping, fb::CreatePing(b));
}

std::string EncodePong(const HeaderFields& fields) {
  flatbuffers::FlatBufferBuilder b(64);
  b.ForceDefaults(true);
  return EncodeHeader(b, fields, fb::Body::Pong, fb::CreatePong(b));
}

std::string EncodeFailure(const HeaderFields& fields, const Status& status) {
  flatbuffers::FlatBufferBuilder b(128 + status.message().size());
  b.ForceDefaults(true);
  const auto message = b.CreateString(status.message());
  return EncodeHeader(b, fields, fb::Body::Failure,
                fb::CreateFailure(b, static_cast<uint8_t>(status.code()), message));
}

Result<const fb::Header*> DecodeHeader(std::string_view bytes,
                                       const std::function<std::string()>& from) {
  // Said only when something is wrong: a message read well costs no string.
  const auto where = [&] {
    return "message from " + from() + " (" + std::to_string(bytes.size()) + " header bytes)";
  };
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() < 8 || !fb::HeaderBufferHasIdentifier(data)) {
    return Status::Corruption(where() + ": not a replaydb wire header (identifier RDW1 missing)");
  }
  flatbuffers::Verifier verifier(data, bytes.size());
  if (!fb::VerifyHeaderBuffer(verifier)) {
    return Status::Corruption(where() +
                              ": the header does not verify (sizes or offsets out of "
                              "range)");
  }
  const fb::Header* header = fb::GetHeader(data);
  if (header->body_type() == fb::Body::NONE || header->body() == nullptr ||
      static_cast<uint8_t>(header->body_type()) > static_cast<uint8_t>(fb::Body::MAX)) {
    return Status::Corruption(where() + ": no body, or a body of kind " +
                              std::to_string(static_cast<unsigned>(header->body_type())) +
                              " this build does not know (protocol version " +
                              std::to_string(kProtocolVersion) + ")");
  }
  return header;
}

Result<const fb::Header*> DecodeHeader(std::string_view bytes, std::string_view from) {
  return DecodeHeader(bytes, [from] { return std::string(from); });
}

Status FailureStatus(const fb::Failure& failure) {
  const std::string message = failure.message() != nullptr ? failure.message()->str() : "";
  using Code = Status::Code;
  switch (static_cast<Code>(failure.code())) {
    case Code::kOk:
      return Status::Internal("a Failure without an error code: " + message);
    case Code::kInvalidArgument: return Status::InvalidArgument(message);
    case Code::kNotFound: return Status::NotFound(message);
    case Code::kAlreadyExists: return Status::AlreadyExists(message);
    case Code::kResourceExhausted: return Status::ResourceExhausted(message);
    case Code::kDeadlineExceeded: return Status::DeadlineExceeded(message);
    case Code::kCancelled: return Status::Cancelled(message);
    case Code::kFailedPrecondition: return Status::FailedPrecondition(message);
    case Code::kBusy: return Status::Busy(message);
    case Code::kIOError: return Status::IOError(message);
    case Code::kCorruption: return Status::Corruption(message);
    case Code::kNotSupported: return Status::NotSupported(message);
    case Code::kInternal: return Status::Internal(message);
    case Code::kUnavailable: return Status::Unavailable(message);
  }
  return Status::Internal("a Failure with error code " + std::to_string(failure.code()) +
                          " this build does not know: " + message);
}

}  // namespace replaydb::rdma
