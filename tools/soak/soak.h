// The fault soak's driver: a trainer, N rollouts and two registry daemons as real processes,
// stepped version by version while a seeded schedule SIGKILLs or SIGSTOPs them; what it
// counts, and the report. No UCX, no library code: only processes, pipes and signals.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace thub::soak {

struct Options {
  int steps = 40;              // versions published (0 with kills > 0: until `kills` faults)
  int kills = 0;               // run until this many faults were injected (0: by steps)
  int max_seconds = 0;         // stop after this long whatever the counts (0: no limit)
  uint64_t seed = 1;
  int rollouts = 4;
  uint64_t bytes = 16ull << 20;
  int tensors = 6;
  std::string transfer_mode = "auto";  // the workers' transfer_mode info key
  double fault_rate = 0.8;     // faults per step (a step has at most one)
  double stop_share = 0.35;    // share of faults that are SIGSTOP (then SIGCONT), the rest SIGKILL
  std::vector<double> weights = {5, 2, 1, 1};  // reader, source, trainer, registry
  int hang_bound_s = 45;       // an operation running this long (not counting stops) hangs
  int heartbeat_timeout_ms = 1000;
  bool hot_standby = false;    // both registries always up, a killed one restarted at once
  std::string worker;          // thub_soak_worker
  std::string registry;        // tensorhub-registry
  std::string log_dir;         // children's stderr; kept on failure
  std::string json;            // append the report as one JSON line here
  bool verbose = false;
};

enum class FaultKind { kReader, kSource, kTrainer, kRegistry };
constexpr int kFaultKinds = 4;
const char* fault_kind_name(FaultKind k);

struct Incident {
  std::string what;  // "abort", "hang", "corrupt", "startup"
  std::string who;
  std::string detail;
  std::string log_tail;
};

struct Report {
  double seconds = 0;
  int steps = 0, published = 0;
  int64_t updates = 0, moved = 0, not_updated = 0, update_errors = 0;
  int64_t checks = 0;
  uint64_t bytes_checked = 0, corrupted_bytes = 0;
  int64_t impossible_versions = 0;  // a held version that was never published
  int kills[kFaultKinds][2] = {};  // [kind][0: KILL, 1: STOP]
  int faults = 0, faults_skipped = 0;
  int reader_kills_in_transfer = 0;  // reader SIGKILLs whose update had run >= 1/4 of the median
  int recoveries = 0;        // processes restarted after a SIGKILL that completed an operation
  int error_recoveries = 0;  // processes whose next operation after an error succeeded
  std::map<int, int64_t> errors;  // status -> count, over every operation
  int64_t checksum_errors = 0;
  double longest_stall_ms = 0;
  std::string longest_stall_what;
  int aborts = 0;  // deaths the driver did not cause
  int hangs = 0;
  int startup_failures = 0;
  int converged = 0, converge_of = 0;  // rollouts holding the last version after the settle
  int64_t last_version = -1;
  std::vector<Incident> incidents;
  bool passed() const {
    return corrupted_bytes == 0 && impossible_versions == 0 && aborts == 0 && hangs == 0 && converged == converge_of;
  }
};

// Runs the soak; progress lines go to stdout when `verbose`.
Report run_soak(const Options& o);
void print_report(const Options& o, const Report& r);
std::string report_json(const Options& o, const Report& r);

}  // namespace thub::soak
