// The results of the at-scale simulation as one JSON line (for bench/scale/report.py) and as
// a short human summary.
#include <cstdio>
#include <sstream>
#include <string>

#include "tests/scale/scale_sim.h"

namespace thub::scale {

namespace {
std::string num(double x) {
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", x);
  return b;
}
std::string quoted(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      o += ' ';
      continue;
    }
    o += c;
  }
  return o + "\"";
}
uint64_t total_requests(const ScaleResult& r) {
  uint64_t n = 0;
  for (const auto& [k, v] : r.requests) n += v;
  return n;
}
}  // namespace

std::string to_json(const ScaleConfig& c, const ScaleResult& r) {
  std::ostringstream o;
  o << "{\"replicas\":" << c.replicas << ",\"shards\":" << c.shards << ",\"model_bytes\":" << num(c.model_bytes)
    << ",\"datacenters\":" << c.datacenters << ",\"gpus_per_host\":" << c.gpus_per_host
    << ",\"nics_per_host\":" << c.nics_per_host << ",\"nic_gbit\":" << num(c.nic_gbit)
    << ",\"wan_gbit\":" << num(c.wan_gbit) << ",\"ctl_latency_us\":" << num(c.ctl_latency_us)
    << ",\"wan_latency_us\":" << num(c.wan_latency_us) << ",\"data_rtt_us\":" << num(c.data_rtt_us)
    << ",\"registry_replicate_us\":" << num(c.registry_replicate_us)
    << ",\"registry_request_us\":" << num(c.registry_request_us)
    << ",\"registry_heartbeat_us\":" << num(c.registry_heartbeat_us) << ",\"max_readers\":" << c.max_readers_per_source
    << ",\"pipeline\":" << (c.pipeline ? "true" : "false") << ",\"seeding\":" << (c.seeding ? "true" : "false") << ",\"joins\":" << c.joins << ",\"deaths\":" << c.deaths
    << ",\"silent_deaths\":" << (c.silent_deaths ? "true" : "false") << ",\"seed\":" << c.seed;
  o << ",\"ok\":" << (r.ok ? "true" : "false") << ",\"error\":" << quoted(r.error)
    << ",\"ideal_s\":" << num(r.ideal_s) << ",\"completion_s\":" << num(r.completion_s)
    << ",\"ratio\":" << num(r.ratio) << ",\"p50_s\":" << num(r.p50_s) << ",\"p99_s\":" << num(r.p99_s)
    << ",\"joiner_worst_ratio\":" << num(r.joiner_worst_ratio) << ",\"replicas_done\":" << r.replicas_done
    << ",\"replicas_failed\":" << r.replicas_failed << ",\"replicas_killed\":" << r.replicas_killed
    << ",\"replicas_joined\":" << r.replicas_joined << ",\"wrong_version\":" << r.wrong_version
    << ",\"depth_max\":" << r.depth_max << ",\"depth_mean\":" << num(r.depth_mean) << ",\"fanout\":{";
  bool first = true;
  for (const auto& [k, v] : r.fanout) {
    o << (first ? "" : ",") << "\"" << k << "\":" << v;
    first = false;
  }
  o << "},\"grants\":" << r.grants << ",\"partial_grants\":" << r.partial_grants << ",\"cross_grants\":" << r.cross_grants << ",\"deferred\":" << r.deferred
    << ",\"source_failures\":" << r.source_failures << ",\"stall_timeouts\":" << r.stall_timeouts
    << ",\"retries\":" << r.retries << ",\"errors\":" << r.errors << ",\"requests\":{";
  first = true;
  for (const auto& [k, v] : r.requests) {
    o << (first ? "" : ",") << "\"" << k << "\":" << v;
    first = false;
  }
  o << "},\"requests_total\":" << total_requests(r) << ",\"replies\":" << r.replies
    << ",\"heartbeats\":" << r.heartbeats << ",\"registry_events\":" << r.registry_events
    << ",\"registry_busy_s\":" << num(r.registry_busy_s) << ",\"net_recomputes\":" << r.net_recomputes
    << ",\"sim_events\":" << r.sim_events << ",\"machine_chunk_bytes\":" << num(c.machine_chunk_bytes)
    << ",\"machine_gets\":" << r.machine_gets << ",\"machine_counter_reads\":" << r.machine_counter_reads
    << ",\"trace_hash\":\"" << std::hex << r.trace_hash << std::dec << "\"}";
  return o.str();
}

std::string to_text(const ScaleConfig& c, const ScaleResult& r) {
  std::ostringstream o;
  o << "fan-out of " << num(c.model_bytes / 1e12) << " TB in " << c.shards << " shards to " << c.replicas
    << " replicas (" << c.datacenters << " DC, " << c.gpus_per_host << " GPUs/" << c.nics_per_host << " NICs of "
    << num(c.nic_gbit) << " Gbit/s per host; max_readers " << c.max_readers_per_source
    << (c.pipeline ? ", pipeline" : ", no pipeline") << "; joins " << c.joins << ", deaths " << c.deaths
    << (c.silent_deaths ? " (silent)" : "") << "; seed " << c.seed << ")\n";
  if (!r.ok) o << "  FAILED: " << r.error << "\n";
  o << "  completion " << num(r.completion_s) << " s = " << num(r.ratio) << " x ideal " << num(r.ideal_s)
    << " s (p50 " << num(r.p50_s) << " s, p99 " << num(r.p99_s) << " s)";
  if (r.replicas_joined) o << "; joiners worst " << num(r.joiner_worst_ratio) << " x ideal after joining";
  o << "\n  replicas done " << r.replicas_done << ", failed " << r.replicas_failed << ", killed "
    << r.replicas_killed << ", joined " << r.replicas_joined << "\n";
  o << "  trees: depth max " << r.depth_max << ", mean " << num(r.depth_mean) << "; readers granted per member:";
  for (const auto& [k, v] : r.fanout) o << " " << k << ":" << v;
  o << "\n  registry: " << r.grants << " grants (" << r.partial_grants << " partial, " << r.cross_grants
    << " across datacenters), " << r.deferred
    << " deferred, " << r.errors << " errors, " << r.source_failures << " source failures ("
    << r.stall_timeouts << " by stall timeout), " << r.retries << " replicates retried; "
    << total_requests(r) << " requests (";
  bool first = true;
  for (const auto& [k, v] : r.requests) {
    o << (first ? "" : ", ") << k << " " << v;
    first = false;
  }
  o << "), " << r.replies << " replies, " << r.heartbeats << " heartbeats; " << r.registry_events
    << " events stepped, busy " << num(r.registry_busy_s) << " s (modelled)\n";
  o << "  transfer machines (chunk " << num(c.machine_chunk_bytes) << " B): " << r.machine_gets << " gets, "
    << r.machine_counter_reads << " counter reads\n";
  o << "  simulation: " << r.sim_events << " events, " << r.net_recomputes << " rate recomputations, trace "
    << std::hex << r.trace_hash << std::dec << "\n";
  return o.str();
}

}  // namespace thub::scale
