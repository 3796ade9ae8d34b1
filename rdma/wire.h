// Building and reading the wire protocol's message headers (rdma/wire.fbs,
// byte format and rules in rdma/WIRE.md).
//
// Thread safety: free functions over their arguments.
#ifndef REPLAYDB_RDMA_WIRE_H_
#define REPLAYDB_RDMA_WIRE_H_

#include <flatbuffers/flatbuffers.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "rdma/wire_generated.h"
#include "replaydb/status.h"

namespace replaydb::rdma {

// The protocol this build speaks (Hello and Welcome carry it).
inline constexpr uint32_t kProtocolVersion = 6;

// What every header carries besides its body.
struct HeaderFields {
  uint64_t request_id = 0;
  int64_t timeout_ms = -1;  // -1: no limit
  uint32_t table_id = 0;
};

// Finishes a header around `body` (built in `b` already, with
// b.ForceDefaults(true)): the encoder of every message kind.
template <typename Body>
std::string EncodeHeader(flatbuffers::FlatBufferBuilder& b, const HeaderFields& f,
                         wire::fb::Body kind, flatbuffers::Offset<Body> body) {
  wire::fb::HeaderBuilder h(b);
  h.add_request_id(f.request_id);
  h.add_timeout_ms(f.timeout_ms);
  h.add_table_id(f.table_id);
  h.add_body_type(kind);
  h.add_body(body.Union());
  b.Finish(h.Finish(), wire::fb::HeaderIdentifier());
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

// (`protocol_version`: another only in tests of the refusal.)
std::string EncodeHello(const HeaderFields& fields, std::string_view client_name,
                        uint32_t protocol_version = kProtocolVersion);
// (`read_only`: what the client's token grants.)
std::string EncodeWelcome(const HeaderFields& fields, std::string_view server_name,
                          bool read_only = false);
std::string EncodePing(const HeaderFields& fields);
std::string EncodePong(const HeaderFields& fields);
// A Failure carrying `status` (not OK).
std::string EncodeFailure(const HeaderFields& fields, const Status& status);

// The header in `bytes`, verified (sizes, offsets, the identifier, a known
// body kind), pointing into `bytes`. Corruption naming `from` (the peer)
// and what is wrong otherwise: nothing a peer sends can crash the reader.
Result<const wire::fb::Header*> DecodeHeader(std::string_view bytes, std::string_view from);
// The same, `from` called only to name the peer in an error (a message
// read well then builds no string).
Result<const wire::fb::Header*> DecodeHeader(std::string_view bytes,
                                             const std::function<std::string()>& from);

// The Status a Failure carries; a code this build does not know is
// Internal, naming the code.
Status FailureStatus(const wire::fb::Failure& failure);

}  // namespace replaydb::rdma

#endif  // REPLAYDB_RDMA_WIRE_H_
