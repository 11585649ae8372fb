// thub_soak: the fault soak. A trainer publishes a new version every step (its content a
// function of the version), N rollouts update to it, two registry daemons serve as primary
// and backup, verify=true everywhere; a seeded schedule SIGKILLs or SIGSTOPs (then SIGCONTs)
// readers, sources, the trainer and the registry, and restarts what it killed. After every
// operation the process compares every byte it holds with the version it reports. Exit 0 when
// no byte was wrong, no process died that the soak did not kill, nothing hung, and after the
// faults every rollout reached the last version. docs/integrity.md, "Fault soak".
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "tools/soak/soak.h"

namespace thub::soak {
namespace {

const char* status_name(int st) {
  switch (st) {
    case -1: return "THUB_ERR_ARG";
    case -2: return "THUB_ERR_STATE";
    case -3: return "THUB_ERR_NOT_FOUND";
    case -4: return "THUB_ERR_LAYOUT";
    case -5: return "THUB_ERR_TRANSPORT";
    case -6: return "THUB_ERR_REGISTRY";
    case -7: return "THUB_ERR_TIMEOUT";
    case -8: return "THUB_ERR_NO_MEMORY";
    case -10: return "THUB_ERR_AUTH";
    case -11: return "THUB_ERR_VERSION_LOST";
    case -12: return "THUB_ERR_CANCELED";
    case -99: return "THUB_ERR_INTERNAL";
    default: return "?";
  }
}

uint64_t parse_size(const char* s) {
  char* end = nullptr;
  uint64_t v = std::strtoull(s, &end, 10);
  switch (end && *end ? *end : ' ') {
    case 'K': case 'k': return v << 10;
    case 'M': case 'm': return v << 20;
    case 'G': case 'g': return v << 30;
    default: return v;
  }
}

int usage(const char* argv0, int rc) {
  std::fprintf(rc ? stderr : stdout,
               "usage: %s [--steps N] [--kills N] [--max-seconds S] [--seed S] [--rollouts N]\n"
               "       [--bytes N[K|M|G]] [--tensors N] [--transfer-mode auto|tcp|direct|copy]\n"
               "       [--fault-rate P] [--stop-share P] [--weights R,S,T,G] [--hang-bound-s S]\n"
               "       [--heartbeat-timeout-ms MS] [--log-dir DIR] [--json FILE] [--verbose]\n"
               "       [--hot-standby] [--worker PATH] [--registry PATH]\n"
               "  --steps       versions to publish (default 40); --kills N instead runs until N faults\n"
               "  --fault-rate  chance of a fault in a step (default 0.8); --stop-share: SIGSTOP vs SIGKILL (0.35)\n"
               "  --weights     relative odds of reader, source, trainer, registry faults (default 5,2,1,1)\n"
               "  --hot-standby   keep both registries up (a killed one restarts at once) instead of a cold standby\n"
               "  --hang-bound-s  an operation that runs this long, not counting stops, is a hang (45)\n"
               "Exit 0: no corrupted byte, no death the soak did not cause, no hang, all rollouts converged.\n",
               argv0);
  return rc;
}

}  // namespace

void print_report(const Options& o, const Report& r) {
  std::printf("\nfault soak: seed %llu, %d rollouts, %llu bytes in %d tensors, transfer_mode %s, %.1f s\n",
              static_cast<unsigned long long>(o.seed), o.rollouts, static_cast<unsigned long long>(o.bytes),
              o.tensors, o.transfer_mode.c_str(), r.seconds);
  std::printf("  steps              %d (+ settle), versions published %d, last %lld\n", r.steps, r.published,
              static_cast<long long>(r.last_version));
  std::printf("  updates            %lld: %lld moved, %lld not updated, %lld failed\n",
              static_cast<long long>(r.updates), static_cast<long long>(r.moved),
              static_cast<long long>(r.not_updated), static_cast<long long>(r.update_errors));
  std::printf("  faults             %d (%d found no target)\n", r.faults, r.faults_skipped);
  for (int k = 0; k < kFaultKinds; ++k) {
    std::printf("    %-9s KILL %4d   STOP %4d\n", fault_kind_name(static_cast<FaultKind>(k)), r.kills[k][0],
                r.kills[k][1]);
  }
  std::printf("  reader kills mid-transfer  %d\n", r.reader_kills_in_transfer);
  std::printf("  recoveries         %d restarted processes back in service, %d back after an error\n",
              r.recoveries, r.error_recoveries);
  std::printf("  errors by code    ");
  if (r.errors.empty()) std::printf(" none");
  for (const auto& [st, n] : r.errors) std::printf(" %s(%d) %lld;", status_name(st), st, static_cast<long long>(n));
  std::printf("\n  checksum errors    %lld\n", static_cast<long long>(r.checksum_errors));
  std::printf("  corrupted bytes    %llu (%lld checks, %.2f GB compared)%s\n",
              static_cast<unsigned long long>(r.corrupted_bytes), static_cast<long long>(r.checks),
              r.bytes_checked / 1e9, r.impossible_versions ? " AND versions never published" : "");
  std::printf("  longest stall      %.0f ms: %s\n", r.longest_stall_ms, r.longest_stall_what.c_str());
  std::printf("  hangs (> %d s)     %d\n", o.hang_bound_s, r.hangs);
  std::printf("  source aborts      %d (deaths the soak did not cause)\n", r.aborts);
  std::printf("  start-up failures  %d\n", r.startup_failures);
  std::printf("  converged          %d of %d rollouts hold version %lld after the faults\n", r.converged,
              r.converge_of, static_cast<long long>(r.last_version));
  for (const auto& i : r.incidents) {
    std::printf("\n--- %s: %s: %s\n%s\n", i.what.c_str(), i.who.c_str(), i.detail.c_str(), i.log_tail.c_str());
  }
  std::printf("RESULT: %s (logs in %s)\n", r.passed() ? "PASS" : "FAIL", o.log_dir.c_str());
}

std::string report_json(const Options& o, const Report& r) {
  std::ostringstream j;
  j << "{\"seed\":" << o.seed << ",\"rollouts\":" << o.rollouts << ",\"bytes\":" << o.bytes
    << ",\"transfer_mode\":\"" << o.transfer_mode << "\",\"seconds\":" << r.seconds << ",\"steps\":" << r.steps
    << ",\"published\":" << r.published << ",\"updates\":" << r.updates << ",\"moved\":" << r.moved
    << ",\"not_updated\":" << r.not_updated << ",\"update_errors\":" << r.update_errors << ",\"faults\":" << r.faults
    << ",\"kills\":{";
  for (int k = 0; k < kFaultKinds; ++k) {
    j << (k ? "," : "") << "\"" << fault_kind_name(static_cast<FaultKind>(k)) << "\":{\"KILL\":" << r.kills[k][0]
      << ",\"STOP\":" << r.kills[k][1] << "}";
  }
  j << "},\"reader_kills_in_transfer\":" << r.reader_kills_in_transfer << ",\"recoveries\":" << r.recoveries
    << ",\"error_recoveries\":" << r.error_recoveries << ",\"errors\":{";
  bool first = true;
  for (const auto& [st, n] : r.errors) {
    j << (first ? "" : ",") << "\"" << st << "\":" << n;
    first = false;
  }
  j << "},\"checksum_errors\":" << r.checksum_errors << ",\"corrupted_bytes\":" << r.corrupted_bytes
    << ",\"impossible_versions\":" << r.impossible_versions << ",\"longest_stall_ms\":" << r.longest_stall_ms
    << ",\"hangs\":" << r.hangs << ",\"source_aborts\":" << r.aborts << ",\"startup_failures\":" << r.startup_failures
    << ",\"converged\":" << r.converged << ",\"converge_of\":" << r.converge_of
    << ",\"passed\":" << (r.passed() ? "true" : "false") << "}";
  return j.str();
}

}  // namespace thub::soak

int main(int argc, char** argv) {
  using namespace thub::soak;
  Options o;
#ifdef THUB_SOAK_WORKER_PATH
  o.worker = THUB_SOAK_WORKER_PATH;
#endif
#ifdef THUB_REGISTRY_PATH
  o.registry = THUB_REGISTRY_PATH;
#endif
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--steps") o.steps = std::atoi(next());
    else if (a == "--kills") o.kills = std::atoi(next());
    else if (a == "--max-seconds") o.max_seconds = std::atoi(next());
    else if (a == "--seed") o.seed = std::strtoull(next(), nullptr, 10);
    else if (a == "--rollouts") o.rollouts = std::atoi(next());
    else if (a == "--bytes") o.bytes = parse_size(next());
    else if (a == "--tensors") o.tensors = std::atoi(next());
    else if (a == "--transfer-mode") o.transfer_mode = next();
    else if (a == "--fault-rate") o.fault_rate = std::atof(next());
    else if (a == "--stop-share") o.stop_share = std::atof(next());
    else if (a == "--weights") {
      o.weights.clear();
      std::istringstream in(next());
      for (std::string w; std::getline(in, w, ',');) o.weights.push_back(std::atof(w.c_str()));
      if (o.weights.size() != kFaultKinds) return usage(argv[0], 2);
    } else if (a == "--hang-bound-s") o.hang_bound_s = std::atoi(next());
    else if (a == "--heartbeat-timeout-ms") o.heartbeat_timeout_ms = std::atoi(next());
    else if (a == "--log-dir") o.log_dir = next();
    else if (a == "--json") o.json = next();
    else if (a == "--worker") o.worker = next();
    else if (a == "--registry") o.registry = next();
    else if (a == "--hot-standby") o.hot_standby = true;
    else if (a == "--verbose" || a == "-v") o.verbose = true;
    else if (a == "--help" || a == "-h") return usage(argv[0], 0);
    else {
      std::fprintf(stderr, "unknown argument '%s'\n", a.c_str());
      return usage(argv[0], 2);
    }
  }
  if (o.worker.empty() || o.registry.empty() || o.rollouts < 2 || o.bytes == 0) return usage(argv[0], 2);
  if (o.log_dir.empty()) o.log_dir = "soak-logs-" + std::to_string(getpid());
  Report r = run_soak(o);
  print_report(o, r);
  if (!o.json.empty()) {
    std::ofstream(o.json, std::ios::app) << report_json(o, r) << "\n";
  }
  return r.passed() ? 0 : 1;
}
