// Parameters of the at-scale simulation (tests/scale/): the model, the fleet, the hosts and
// their NICs, the datacenters, latencies, the registry's policy and the faults injected.
// Plain values only: no clocks, no I/O. Units are in the names.
#pragma once

#include <cstdint>

namespace thub::scale {

struct ScaleConfig {
  // ---- the model: one trainer replica publishes one version, `shards` members
  double model_bytes = 2e12;        // 2 TB
  int shards = 8;                   // model-parallel shards per replica (8-way)

  // ---- the fleet
  int replicas = 100;               // rollout replicas asking for the version at t0
  int datacenters = 1;              // rollout replica r lives in DC r % datacenters; trainer in DC 0

  // ---- hosts: a replica fills shards / gpus_per_host hosts; the GPU g of a host uses NIC
  // g * nics_per_host / gpus_per_host (NICs shared evenly when there are fewer NICs than GPUs)
  int gpus_per_host = 8;
  int nics_per_host = 8;
  double nic_gbit = 400;            // per NIC, each direction (full duplex)
  double wan_gbit = 3200;           // per datacenter uplink, each direction (only with > 1 DC)
  // Inside a datacenter the fabric is non-blocking: only NICs and the DC uplinks are shared.

  // ---- latencies
  double ctl_latency_us = 50;       // one way, client <-> registry in the registry's DC (DC 0)
  double wan_latency_us = 1000;     // one way, added across datacenters (control and data)
  double data_rtt_us = 10;          // a get's / counter read's round trip inside a DC
  // The registry is one server: every event it steps holds it for this long (virtual time):
  // a source choice (Replicate, SourceFailed), any other request, or a heartbeat or tick
  // (touch and check deadlines only). Its real CPU per event is measured by
  // bench/sched/fanout_replay_bench.cc; bench/scale/run.sh feeds those figures back here.
  double registry_replicate_us = 2;
  double registry_request_us = 2;
  double registry_heartbeat_us = 0.5;

  // ---- the client (info keys of the same names)
  double chunk_bytes = 4 << 20;          // chunk_size: the unit read from a complete source
  double pipeline_chunk_bytes = 256 << 10;  // pipeline_chunk_size: from a partial source
  // (These two set the fluid network's pipeline gap: the real reads, moved as a fluid. The
  // transfer machine itself reads in machine_chunk_bytes, far coarser, so that a fan-out of
  // terabytes stays a few events per member per chunk: its chunk_size and integrity block.)
  double machine_chunk_bytes = 1 << 30;
  int max_inflight = 16;                 // max_inflight
  double heartbeat_ms = 1000;            // heartbeat_ms
  double stall_timeout_ms = 10000;       // stall_timeout_ms: a silent source is noticed after it

  // ---- the registry (sched::Config)
  int max_readers_per_source = 1;
  bool pipeline = true;
  bool seeding = true;              // a version's shard crosses into a datacenter once
  double heartbeat_timeout_ms = 5000;
  double tick_ms = 100;             // src/registry/server.h: how often deadlines are checked

  // ---- the start: rollouts issue THUB_Replicate(latest) at t0 + U[0, start_spread_us)
  double start_spread_us = 1000;

  // ---- faults, at uniform times in a fraction of ideal after t0
  int joins = 0;                    // replicas that connect, open and replicate during the fan-out
  double join_from = 0.0, join_to = 0.8;
  int deaths = 0;                   // rollout replicas (of those at t0) that die mid-transfer
  double death_from = 0.1, death_to = 0.9;
  bool silent_deaths = false;       // false: killed (the kernel closes its connections: readers
                                    // see a peer error, the registry a disconnect); true: the
                                    // host vanishes (readers: stall_timeout; registry: heartbeat)
  double detect_kill_ms = 1;        // a reader's gets to a killed source fail after this
  double disconnect_ms = 1;         // the registry sees a killed client's connection close

  uint64_t seed = 1;
  bool record_registry_trace = false;
  bool trace = false;               // print every grant carried out (stderr)  // keep every (event, time) stepped (for the replay bench)
};

}  // namespace thub::scale
