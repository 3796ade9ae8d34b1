#include "rdma/token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace replaydb::rdma {
namespace {

constexpr std::string_view kProofContext = "replaydb token proof v1";

}  // namespace

Result<std::vector<Token>> ReadTokenFile(const std::string& path) {
  // Opened once, then checked through the descriptor: no swap between the
  // check and the read, no link followed, no FIFO to block on.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    return Status::InvalidArgument("token file " + path + " cannot be read: " +
                                   std::string(std::strerror(errno)));
  }
  struct stat st {};
  std::string text;
  Status problem;
  if (::fstat(fd, &st) != 0) {
    problem = Status::InvalidArgument("token file " + path + " cannot be read: " +
                                      std::string(std::strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    problem = Status::InvalidArgument("token file " + path + " is not a regular file");
  } else if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    problem = Status::InvalidArgument("token file " + path +
                                      " is open to group or others (mode " + mode +
                                      "): chmod 600 " + path);
  } else if (st.st_size > (1 << 20)) {
    problem = Status::InvalidArgument("token file " + path + " is over 1 MiB");
  } else {
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
    if (n < 0) {
      problem = Status::InvalidArgument("token file " + path + " cannot be read: " +
                                        std::string(std::strerror(errno)));
    }
  }
  ::close(fd);
  REPLAYDB_RETURN_IF_ERROR(problem);
  std::istringstream in(text);
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
      // (What the line holds is not repeated: it may be a secret.)
      return Status::InvalidArgument(where + ": does not start with read-write or read-only");
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
