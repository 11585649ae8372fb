// One registry leads at a time (docs/guide.md, "Failover lists" and "Leader election"):
// whether this registry may serve clients now. Three ways:
//  - alone (no `primary`, no `election`): it always leads (no Leadership object at all);
//  - a backup (`primary=host:port`): it leads while its primary does not answer a whole
//    handshake, asked every `primary_probe_ms`; while the primary answers, the backup
//    refuses clients and sends them there;
//  - an election (`election=etcd://host:port/prefix`): it leads while it holds PREFIX/leader
//    in etcd under a lease of `election_ttl_s`, renewed every third of it. Its leadership
//    ends by its own clock at the last renewal it sent plus the TTL (less a tenth), which is
//    never later than etcd lets the lease expire: an old leader has stopped serving before a
//    standby can win. A registry that is not leading campaigns again every third of the TTL.
// The server asks leading() every turn of its loop; when it turns false the server tells its
// clients (NOT_LEADER, naming the leader) and closes them, and answers every HELLO so.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "src/registry/protocol.h"

namespace thub::registry {

struct ServerOptions;

class Leadership {
 public:
  virtual ~Leadership() = default;
  // May this registry serve clients at steady time now_ms? Thread-safe and cheap.
  [[nodiscard]] virtual bool leading(int64_t now_ms) const = 0;
  // Who leads instead ("" when unknown) and why this registry does not: NOT_LEADER's texts.
  [[nodiscard]] virtual NotLeader elsewhere() const = 0;
  // One line for the registry's log and DESCRIBE ("backup of ...", "etcd ... leader").
  [[nodiscard]] virtual std::string describe() const = 0;
};

// The leadership `opts` asks for, for a registry that clients reach at `own_address`;
// nullptr when it leads alone. A backup has probed its primary, and a candidate has made its
// first campaign, before this returns (so that no client is served before it is known whether
// this registry leads). Throws Error(kArg) for a bad primary or election.
std::unique_ptr<Leadership> start_leadership(const ServerOptions& opts, const std::string& own_address);

}  // namespace thub::registry
