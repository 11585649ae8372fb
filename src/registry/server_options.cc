// The registry's settings from info keys: one reading for the embedded registry (THUB_Init)
// and the daemon (tensorhub-registry turns its flags into the same keys).
#include "src/common/info.h"
#include "src/registry/auth.h"
#include "src/registry/etcd.h"
#include "src/registry/server.h"
#include "src/registry/socket.h"

namespace thub::registry {

ServerOptions ServerOptions::from_info(const InfoMap& info) {
  ServerOptions o;
  o.listen = info.get<info_key("registry_listen")>();
  if (!o.listen.empty()) (void)parse_host_port(o.listen);  // validate early ("": the advertised address)
  o.auth_token = token_from(info.get<info_key("auth_token")>(), info.get<info_key("auth_token_file")>());
  o.sched.heartbeat_timeout = info.get<info_key("heartbeat_timeout_ms")>() * 1000;
  o.sched.pipeline = info.get<info_key("pipeline")>();
  o.sched.seeding = info.get<info_key("seeding")>();
  o.sched.skipping = info.get<info_key("smart_skipping")>();
  o.sched.seed_takes_slot = info.get<info_key("seed_takes_slot")>();
  o.sched.max_readers_per_source = static_cast<int>(info.get<info_key("max_readers")>());
  o.sched.round_hold = info.get<info_key("round_hold_ms")>() * 1000;
  o.sched.takeover_grace = info.get<info_key("takeover_grace_ms")>() * 1000;
  o.sched.lease_progress_timeout = info.get<info_key("lease_progress_timeout_ms")>() * 1000;
  o.max_connections = static_cast<int>(info.get<info_key("max_connections")>());
  o.max_connections_per_host = static_cast<int>(info.get<info_key("max_connections_per_host")>());
  o.hello_timeout_ms = static_cast<int>(info.get<info_key("hello_timeout_ms")>());
  o.frame_timeout_ms = static_cast<int>(info.get<info_key("frame_timeout_ms")>());
  o.output_pause_bytes = static_cast<size_t>(info.get<info_key("output_pause_bytes")>());
  o.max_output_bytes = static_cast<size_t>(info.get<info_key("max_output_bytes")>());
  o.sched.max_descriptor_bytes_per_client =
      static_cast<uint64_t>(info.get<info_key("max_descriptor_bytes_per_client")>());
  o.sched.max_descriptor_bytes = static_cast<uint64_t>(info.get<info_key("max_descriptor_bytes")>());
  o.primary = info.get<info_key("primary")>();
  if (!o.primary.empty()) (void)parse_host_port(o.primary);
  o.primary_probe_ms = static_cast<int>(info.get<info_key("primary_probe_ms")>());
  o.election = info.get<info_key("election")>();
  if (!o.election.empty()) (void)parse_etcd_target(o.election);
  o.election_ttl_s = static_cast<int>(info.get<info_key("election_ttl_s")>());
  return o;
}

}  // namespace thub::registry
