// The little of etcd's v3 API that leader election needs, spoken as JSON over HTTP/1.1 to
// etcd's gateway (POST /v3/..., keys and values in base64): leases (grant, keep alive,
// revoke), a campaign (a transaction that creates PREFIX/leader with our lease only if the
// key does not exist) and a read of the leader's value. One short connection per request,
// with a deadline; the endpoints are tried in order. Plain HTTP: etcd belongs on the same
// private network as the registry (docs/security.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/registry/socket.h"

namespace thub::registry {

// "etcd://host:port[,host:port...]/prefix": the endpoints and the key prefix (at least one
// character after the slash; the leader's key is PREFIX/leader).
struct EtcdTarget {
  std::vector<HostPort> endpoints;
  std::string prefix;
  [[nodiscard]] std::string leader_key() const { return prefix + "/leader"; }
  [[nodiscard]] std::string text() const;  // as given, for messages
};
[[nodiscard]] bool is_etcd_spec(const std::string& s);
// Throws Error(kArg) saying what is wrong.
EtcdTarget parse_etcd_target(const std::string& spec);

class EtcdClient {
 public:
  EtcdClient(EtcdTarget target, int timeout_ms);

  // A lease of `ttl_s` seconds: its id and the TTL etcd granted. Throws Error(kRegistry).
  struct Lease {
    int64_t id = 0;
    int64_t ttl_s = 0;
  };
  Lease grant(int64_t ttl_s);
  // Renews a lease: the TTL it has again, 0 when etcd no longer knows it (expired, revoked).
  int64_t keepalive(int64_t lease);
  void revoke(int64_t lease);  // best effort: errors are ignored
  // Creates PREFIX/leader = value, attached to `lease`, unless the key exists. Either way
  // the value the key holds afterwards (ours when we won).
  struct Campaign {
    bool won = false;
    std::string leader;
  };
  Campaign campaign(const std::string& value, int64_t lease);
  // PREFIX/leader's value; nullopt when no registry leads.
  std::optional<std::string> leader();

  [[nodiscard]] const EtcdTarget& target() const { return target_; }

 private:
  // POSTs `json` to `path` at the first endpoint that answers; the response body. Throws
  // Error(kRegistry) naming every endpoint tried.
  std::string post(const std::string& path, const std::string& json);
  EtcdTarget target_;
  int timeout_ms_;
};

// base64 (RFC 4648, with padding): etcd's encoding of keys and values in JSON.
std::string base64_encode(const std::string& s);
// Throws CodecError on a character or length that is not base64.
std::string base64_decode(const std::string& s);

}  // namespace thub::registry
