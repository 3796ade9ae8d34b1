// The etcd coordinator (coordinator.h): etcd 3.4's v3 API through its
// HTTP/JSON gateway (POST /v3/..., keys and values in base64), with
// libcurl and nlohmann-json; base64 by libcrypto.
//
// Keys, under /replaydb/CLUSTER/:
//   leader       {"name", "address"}, made under the winner's lease by a
//                transaction guarded on its absence (create_revision 0);
//                its create revision is the epoch
//   nodes/NAME   the node's NodeState as JSON, under its lease
//   epoch        the last epoch whose primary took writes (decimal; no
//                lease: it outlives every session)
#include "rdma/coord/etcd.h"

#include <curl/curl.h>
#include <openssl/evp.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <utility>

namespace replaydb::rdma::coord {
namespace {

using json = nlohmann::json;

std::string Base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// False when `in` is not base64.
bool Unbase64(const std::string& in, std::string* out) {
  if (in.size() % 4 != 0) return false;
  out->assign(3 * in.size() / 4 + 1, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out->data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  if (n < 0) return false;
  size_t size = static_cast<size_t>(n);
  // (EVP_DecodeBlock counts the padding's bytes as zeros.)
  for (size_t i = in.size(); i > 0 && in[i - 1] == '='; --i) --size;
  out->resize(size);
  return true;
}

// etcd writes 64-bit numbers as JSON strings; absent: 0.
uint64_t Number(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end()) return 0;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_string()) return std::stoull(it->get<std::string>());
  return 0;
}

size_t CollectBody(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

// A key-value's value as the JSON object it holds (`text`: its bytes);
// null where it is not base64 or not JSON.
json ValueJson(const json& kv, std::string* text) {
  return Unbase64(kv.value("value", ""), text)
             ? json::parse(*text, nullptr, /*allow_exceptions=*/false)
             : json();
}

// The key just past every key that starts with `prefix` (etcd's range_end).
std::string PrefixEnd(std::string prefix) {
  prefix.back() = static_cast<char>(prefix.back() + 1);
  return prefix;
}

json NodeJson(const NodeState& n) {
  return json{{"name", n.name},
              {"address", n.address},
              {"role", n.role},
              {"epoch", n.epoch},
              {"following", n.following},
              {"segment", n.position.segment},
              {"offset", n.position.offset},
              {"eligible", n.eligible}};
}

}  // namespace

EtcdCoordinator::EtcdCoordinator(std::string address, std::vector<std::string> endpoints,
                                 std::string cluster, const CoordinatorOptions& options)
    : address_(std::move(address)),
      endpoints_(std::move(endpoints)),
      prefix_("/replaydb/" + std::move(cluster) + "/"),
      options_(options) {}

EtcdCoordinator::~EtcdCoordinator() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Result<std::unique_ptr<EtcdCoordinator>> EtcdCoordinator::Open(const std::string& address,
                                                               const CoordinatorOptions& options) {
  constexpr std::string_view kScheme = "etcd://";
  const auto malformed = [&](const std::string& why) {
    return Status::InvalidArgument("coordinator address '" + address + "': " + why +
                                   " (etcd://HOST:PORT[,HOST:PORT...]/CLUSTER)");
  };
  if (address.rfind(kScheme, 0) != 0) return malformed("not etcd://");
  const std::string rest = address.substr(kScheme.size());
  const size_t slash = rest.find('/');
  if (slash == std::string::npos || slash + 1 >= rest.size()) return malformed("no cluster name");
  const std::string cluster = rest.substr(slash + 1);
  for (char c : cluster) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return malformed("the cluster name may hold letters, digits, '-', '_' and '.'");
    }
  }
  std::vector<std::string> endpoints;
  std::string hosts = rest.substr(0, slash);
  for (size_t at = 0; at <= hosts.size();) {
    size_t comma = hosts.find(',', at);
    if (comma == std::string::npos) comma = hosts.size();
    const std::string hp = hosts.substr(at, comma - at);
    const size_t colon = hp.rfind(':');
    if (hp.empty() || colon == std::string::npos || colon == 0 || colon + 1 == hp.size() ||
        hp.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
      return malformed("'" + hp + "' is not HOST:PORT");
    }
    endpoints.push_back("http://" + hp);
    at = comma + 1;
  }
  if (options.ttl < std::chrono::seconds(1) || options.ttl > std::chrono::seconds(60) ||
      options.ttl.count() % 1000 != 0) {
    return Status::InvalidArgument("coordinator " + address +
                                   ": the session's TTL must be whole seconds from 1 to 60 "
                                   "(etcd's leases count seconds), not " +
                                   std::to_string(options.ttl.count()) + " ms");
  }
  static std::once_flag curl_init;
  std::call_once(curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  return std::unique_ptr<EtcdCoordinator>(
      new EtcdCoordinator(address, std::move(endpoints), cluster, options));
}

Result<std::string> EtcdCoordinator::Post(const std::string& path, const std::string& body) {
  if (curl_ == nullptr) {
    curl_ = curl_easy_init();
    if (curl_ == nullptr) return Status::Internal("libcurl: curl_easy_init failed");
  }
  CURL* curl = static_cast<CURL*>(curl_);
  std::string errors;
  for (size_t tried = 0; tried < endpoints_.size(); ++tried) {
    const std::string& endpoint = endpoints_[(current_ + tried) % endpoints_.size()];
    const std::string url = endpoint + path;
    std::string reply;
    curl_easy_reset(curl);
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_timeout.count()));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options_.request_timeout.count()));
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, CollectBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply);
    const CURLcode code = curl_easy_perform(curl);
    if (code != CURLE_OK) {
      errors += (errors.empty() ? "" : "; ") + endpoint + ": " + curl_easy_strerror(code);
      continue;
    }
    current_ = (current_ + tried) % endpoints_.size();
    long http = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http);
    if (http != 200) {
      std::string message = reply;
      const json j = json::parse(reply, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.contains("message") && j["message"].is_string()) {
        message = j["message"].get<std::string>();
      }
      const std::string what =
          "etcd " + endpoint + path + " answered HTTP " + std::to_string(http) + ": " + message;
      if (message.find("lease not found") != std::string::npos) {
        return Status::FailedPrecondition(what);
      }
      return Status::Unavailable(what);
    }
    return reply;
  }
  return Status::Unavailable("etcd cannot be reached (" + errors + ")");
}

Result<nlohmann::json> EtcdCoordinator::Call(const std::string& path, const nlohmann::json& body) {
  REPLAYDB_ASSIGN_OR_RETURN(const std::string reply, Post(path, body.dump()));
  json j = json::parse(reply, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return Status::Corruption("etcd's answer to " + path +
                              " is not a JSON object: " + reply.substr(0, 200));
  }
  return j;
}

Result<std::optional<LeaderState>> EtcdCoordinator::Leader() {
  REPLAYDB_ASSIGN_OR_RETURN(const json j,
                            Call("/v3/kv/range", json{{"key", Base64(prefix_ + "leader")}}));
  auto kvs = j.find("kvs");
  if (kvs == j.end() || !kvs->is_array() || kvs->empty()) return std::optional<LeaderState>();
  REPLAYDB_ASSIGN_OR_RETURN(LeaderState leader, ParseLeader((*kvs)[0]));
  return std::optional<LeaderState>(std::move(leader));
}

Result<LeaderState> EtcdCoordinator::ParseLeader(const nlohmann::json& kv) const {
  std::string value;
  const json v = ValueJson(kv, &value);
  if (!v.is_object() || !v.contains("name") || !v.contains("address")) {
    return Status::Corruption("etcd key " + prefix_ + "leader does not hold a replaydb leader: '" +
                              value.substr(0, 200) + "'");
  }
  LeaderState l;
  l.name = v["name"].get<std::string>();
  l.address = v["address"].get<std::string>();
  l.epoch = Number(kv, "create_revision");
  l.this_session = !lease_.empty() && std::to_string(Number(kv, "lease")) == lease_;
  return l;
}

Result<std::vector<NodeState>> EtcdCoordinator::Nodes() {
  const std::string prefix = prefix_ + "nodes/";
  REPLAYDB_ASSIGN_OR_RETURN(
      const json j, Call("/v3/kv/range",
                         json{{"key", Base64(prefix)}, {"range_end", Base64(PrefixEnd(prefix))}}));
  std::vector<NodeState> nodes;
  auto kvs = j.find("kvs");
  if (kvs == j.end() || !kvs->is_array()) return nodes;
  for (const json& kv : *kvs) {
    std::string value;
    const json v = ValueJson(kv, &value);
    if (!v.is_object()) continue;  // (not one of ours: skipped)
    NodeState n;
    n.name = v.value("name", "");
    n.address = v.value("address", "");
    n.role = v.value("role", "");
    n.epoch = v.value("epoch", uint64_t{0});
    n.following = v.value("following", "");
    n.position.segment = v.value("segment", uint64_t{0});
    n.position.offset = v.value("offset", uint64_t{0});
    n.eligible = v.value("eligible", false);
    nodes.push_back(std::move(n));
  }
  return nodes;
}

Status EtcdCoordinator::Publish(const NodeState& me) {
  if (lease_.empty()) {
    REPLAYDB_ASSIGN_OR_RETURN(
        const json j,
        Call(
            "/v3/lease/grant",
            json{{"TTL", std::chrono::duration_cast<std::chrono::seconds>(options_.ttl).count()}}));
    if (Number(j, "ID") == 0) {
      return Status::Unavailable("etcd granted no lease: " + j.dump().substr(0, 200));
    }
    lease_ = std::to_string(Number(j, "ID"));
  }
  return Call("/v3/kv/put", json{{"key", Base64(prefix_ + "nodes/" + me.name)},
                                 {"value", Base64(NodeJson(me).dump())},
                                 {"lease", lease_}})
      .status();
}

Status EtcdCoordinator::KeepAlive() {
  if (lease_.empty()) return Status::FailedPrecondition("no session with etcd: publish first");
  Result<json> j = Call("/v3/lease/keepalive", json{{"ID", lease_}});
  if (!j.ok()) {
    if (j.status().code() == Status::Code::kFailedPrecondition) lease_.clear();
    return j.status();
  }
  const json result = j->value("result", json::object());
  if (Number(result, "TTL") == 0) {
    const std::string lease = lease_;
    lease_.clear();
    return Status::FailedPrecondition("this node's session with etcd (lease " + lease +
                                      ") expired");
  }
  return Status::OK();
}

Result<LeaderState> EtcdCoordinator::Campaign(const NodeState& me) {
  if (lease_.empty()) return Status::FailedPrecondition("no session with etcd: publish first");
  const std::string key = Base64(prefix_ + "leader");
  const json value{{"name", me.name}, {"address", me.address}};
  const json txn{
      {"compare", json::array({{{"key", key}, {"target", "CREATE"}, {"create_revision", "0"}}})},
      {"success",
       json::array({{{"request_put",
                      {{"key", key}, {"value", Base64(value.dump())}, {"lease", lease_}}}}})},
      {"failure", json::array({{{"request_range", {{"key", key}}}}})}};
  REPLAYDB_ASSIGN_OR_RETURN(const json j, Call("/v3/kv/txn", txn));
  if (j.value("succeeded", false)) {
    LeaderState won;
    won.name = me.name;
    won.address = me.address;
    won.epoch = Number(j.value("header", json::object()), "revision");
    won.this_session = true;
    return won;
  }
  // Lost: the leader that holds the key (this node's, when it held it
  // already: the epoch it won then).
  const json responses = j.value("responses", json::array());
  if (responses.empty())
    return Status::Corruption("etcd's failed campaign has no range: " + j.dump());
  const json kvs = responses[0].value("response_range", json::object()).value("kvs", json::array());
  if (kvs.empty()) {
    // (The leader's session ended between the compare and the range.)
    return Status::Unavailable("the leader key went while campaigning; campaign again");
  }
  return ParseLeader(kvs[0]);
}

Result<uint64_t> EtcdCoordinator::LastEpoch() {
  REPLAYDB_ASSIGN_OR_RETURN(const json j,
                            Call("/v3/kv/range", json{{"key", Base64(prefix_ + "epoch")}}));
  auto kvs = j.find("kvs");
  if (kvs == j.end() || !kvs->is_array() || kvs->empty()) return uint64_t{0};
  std::string value;
  if (!Unbase64((*kvs)[0].value("value", ""), &value) || value.empty() ||
      value.find_first_not_of("0123456789") != std::string::npos) {
    return Status::Corruption("etcd key " + prefix_ + "epoch does not hold an epoch: '" +
                              value.substr(0, 100) + "'");
  }
  return std::stoull(value);
}

Status EtcdCoordinator::MarkEpoch(uint64_t epoch, const std::optional<Handover>& from) {
  // Guarded on this node's leader key (its create revision is the epoch).
  const std::string leader = Base64(prefix_ + "leader");
  json puts = json::array(
      {{{"request_put",
         {{"key", Base64(prefix_ + "epoch")}, {"value", Base64(std::to_string(epoch))}}}}});
  if (from) {
    const json at{{"segment", from->position.segment}, {"offset", from->position.offset}};
    puts.push_back({{"request_put",
                     {{"key", Base64(prefix_ + "handovers/" + std::to_string(from->epoch))},
                      {"value", Base64(at.dump())}}}});
  }
  const json txn{
      {"compare",
       json::array(
           {{{"key", leader}, {"target", "CREATE"}, {"create_revision", std::to_string(epoch)}}})},
      {"success", std::move(puts)}};
  REPLAYDB_ASSIGN_OR_RETURN(const json j, Call("/v3/kv/txn", txn));
  if (!j.value("succeeded", false)) {
    return Status::FailedPrecondition("epoch " + std::to_string(epoch) +
                                      ": this node no longer holds the primary's place");
  }
  return Status::OK();
}

Result<std::optional<wal::LogPosition>> EtcdCoordinator::HandedOver(uint64_t epoch) {
  const std::string key = prefix_ + "handovers/" + std::to_string(epoch);
  REPLAYDB_ASSIGN_OR_RETURN(const json j, Call("/v3/kv/range", json{{"key", Base64(key)}}));
  auto kvs = j.find("kvs");
  if (kvs == j.end() || !kvs->is_array() || kvs->empty()) {
    return std::optional<wal::LogPosition>();
  }
  std::string value;
  const json at = Unbase64((*kvs)[0].value("value", ""), &value)
                      ? json::parse(value, nullptr, /*allow_exceptions=*/false)
                      : json();
  if (!at.is_object() || !at.contains("segment") || !at["segment"].is_number_unsigned() ||
      !at.contains("offset") || !at["offset"].is_number_unsigned()) {
    return Status::Corruption("etcd key " + key + " does not hold a log position: '" +
                              value.substr(0, 100) + "'");
  }
  return std::optional<wal::LogPosition>(
      wal::LogPosition{at["segment"].get<uint64_t>(), at["offset"].get<uint64_t>()});
}

Status EtcdCoordinator::Resign() {
  if (lease_.empty()) return Status::OK();
  const std::string lease = lease_;
  lease_.clear();
  // (The lease's keys, the leader's included, go with it.)
  return Call("/v3/lease/revoke", json{{"ID", lease}}).status();
}

}  // namespace replaydb::rdma::coord
