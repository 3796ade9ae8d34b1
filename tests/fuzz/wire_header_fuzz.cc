// libFuzzer target: the input is a message header as a peer could send it,
// read by rdma::DecodeHeader (and, where it verifies, its body read as the
// server will), and a batch of messages (rdma::ForEachInBatch, each header
// decoded). Nothing may crash; Corruption is fine.
#include <cstdint>
#include <string>
#include <string_view>

#include "rdma/transport.h"
#include "rdma/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);  // aligned, as received
  (void)replaydb::rdma::ForEachInBatch(
      bytes, "fuzz-input", [](std::string_view h, std::string_view) {
        (void)replaydb::rdma::DecodeHeader(std::string(h), "fuzz-input");
        return true;
      });
  auto header = replaydb::rdma::DecodeHeader(bytes, "fuzz-input");
  if (!header.ok()) return 0;
  const auto* h = *header;
  namespace fb = replaydb::wire::fb;
  switch (h->body_type()) {
    case fb::Body::Hello:
      if (h->body_as_Hello()->client_name() != nullptr) (void)h->body_as_Hello()->client_name()->str();
      break;
    case fb::Body::Welcome:
      if (h->body_as_Welcome()->server_name() != nullptr) (void)h->body_as_Welcome()->server_name()->str();
      break;
    case fb::Body::Failure:
      (void)replaydb::rdma::FailureStatus(*h->body_as_Failure());
      break;
    default:
      break;
  }
  return 0;
}
