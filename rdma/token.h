// Tokens: shared secrets that clients prove they hold, by challenge and
// response, without sending them (rdma/WIRE.md, "Tokens"). The server sends
// a fresh random challenge; the client answers with
// HMAC-SHA256(token, "replaydb token proof v1" || challenge) (OpenSSL's
// libcrypto); the server compares it, in constant time, with the proof of
// each token it holds.
//
// A token file holds one token per line, with what it grants:
//
//   # lines starting with '#' and empty lines are skipped
//   read-write 3f8e0c1d...   (at least 32 characters, no spaces)
//   read-only  a07c9b44...
//
// A server reads every token of its file; a client uses the file's first
// token (the server decides what it grants). The file must not be readable
// by group or others (chmod 600), as ssh insists for its keys.
//
// Thread safety: free functions over their arguments.
#ifndef REPLAYDB_RDMA_TOKEN_H_
#define REPLAYDB_RDMA_TOKEN_H_

#include <string>
#include <string_view>
#include <vector>

#include "replaydb/status.h"

namespace replaydb::rdma {

struct Token {
  std::string secret;
  bool read_only = false;
};

// A token's secret, at least.
inline constexpr size_t kMinTokenLength = 32;

// The tokens of file `path`. InvalidArgument naming the file (and line)
// when it is unreadable, readable by group or others, empty, or holds a line
// that is not "read-write|read-only SECRET" with a secret of at least
// kMinTokenLength characters.
Result<std::vector<Token>> ReadTokenFile(const std::string& path);

// A new challenge: 32 random bytes.
Result<std::string> NewChallenge();
// The proof of holding `secret` for `challenge` (32 bytes).
std::string TokenProof(std::string_view secret, std::string_view challenge);
// Whether `proof` is the proof of one of `tokens` for `challenge`; *read_only
// is what that token grants. Compares in constant time.
bool CheckProof(const std::vector<Token>& tokens, std::string_view challenge,
                std::string_view proof, bool* read_only);

}  // namespace replaydb::rdma

#endif  // REPLAYDB_RDMA_TOKEN_H_
