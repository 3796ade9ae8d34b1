#include "rdma/token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace replaydb::rdma {
namespace {

constexpr std::string_view kProofContext = "replaydb token proof v1";

}  // namespace

Result<std::vector<Token>> ReadTokenFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::InvalidArgument("token file " + path + " cannot be read: " +
                                   std::string(std::strerror(errno)));
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::InvalidArgument("token file " + path + " is open to group or others (mode " +
                                   mode + "): chmod 600 " + path);
  }
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument("token file " + path + " cannot be read");
  std::vector<Token> tokens;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::istringstream words(line);
    std::string access;
    std::string secret;
    std::string extra;
    if (!(words >> access) || access[0] == '#') continue;
    const std::string where = "token file " + path + ", line " + std::to_string(number);
    if (access != "read-write" && access != "read-only") {
      return Status::InvalidArgument(where + ": starts with '" + access +
                                     "', not read-write or read-only");
    }
    if (!(words >> secret) || (words >> extra)) {
      return Status::InvalidArgument(where + ": want '" + access + " SECRET' (one secret, no "
                                     "spaces in it)");
    }
    if (secret.size() < kMinTokenLength) {
      return Status::InvalidArgument(where + ": the secret has " +
                                     std::to_string(secret.size()) + " characters, fewer than " +
                                     std::to_string(kMinTokenLength));
    }
    tokens.push_back({secret, access == "read-only"});
  }
  if (tokens.empty()) {
    return Status::InvalidArgument("token file " + path + " holds no token (lines of "
                                   "'read-write SECRET' or 'read-only SECRET')");
  }
  return tokens;
}

Result<std::string> NewChallenge() {
  std::string challenge(32, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(challenge.data()),
                 static_cast<int>(challenge.size())) != 1) {
    return Status::Internal("OpenSSL's RAND_bytes gave no random bytes for a token challenge");
  }
  return challenge;
}

std::string TokenProof(std::string_view secret, std::string_view challenge) {
  std::string message(kProofContext);
  message.append(challenge);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &size);
  return std::string(reinterpret_cast<const char*>(mac), size);
}

bool CheckProof(const std::vector<Token>& tokens, std::string_view challenge,
                std::string_view proof, bool* read_only) {
  bool found = false;
  for (const Token& t : tokens) {
    const std::string want = TokenProof(t.secret, challenge);
    // Every token is compared, whatever matched before (no early exit).
    if (want.size() == proof.size() && CRYPTO_memcmp(want.data(), proof.data(), want.size()) == 0 &&
        !found) {
      found = true;
      *read_only = t.read_only;
    }
  }
  return found;
}

}  // namespace replaydb::rdma
