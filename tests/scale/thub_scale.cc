// thub_scale: one run of the at-scale simulation (tests/scale/scale_sim.h) from flags.
// Prints a summary, or with --json one JSON line (bench/scale/run.sh collects them). The
// wall time of the run goes to stderr: it is not part of the (deterministic) result.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>

#include "tests/scale/scale_sim.h"

namespace {

double size_arg(const char* s) {
  char* end = nullptr;
  double x = std::strtod(s, &end);
  switch (*end) {
    case 'K': x *= 1e3; break;
    case 'M': x *= 1e6; break;
    case 'G': x *= 1e9; break;
    case 'T': x *= 1e12; break;
    default: break;
  }
  return x;
}

void usage() {
  std::fprintf(stderr,
               "usage: thub_scale [--replicas N] [--shards S] [--model-bytes 2T] [--dcs D]\n"
               "  [--gpus-per-host G] [--nics-per-host K] [--nic-gbit X] [--wan-gbit X]\n"
               "  [--ctl-us X] [--wan-us X] [--rtt-us X]\n"
               "  [--registry-replicate-us X] [--registry-request-us X] [--registry-heartbeat-us X]\n"
               "  [--chunk B] [--pipeline-chunk B] [--machine-chunk B] [--max-inflight K]\n"
               "  [--max-readers R] [--no-pipeline] [--no-seeding]\n"
               "  [--joins J] [--deaths K] [--silent] [--spread-us X] [--seed S]\n"
               "  [--heartbeat-timeout-ms X] [--stall-timeout-ms X] [--trace] [--json]\n");
}

}  // namespace

int main(int argc, char** argv) {
  thub::scale::ScaleConfig c;
  bool json = false;
  std::map<std::string, std::function<void(const char*)>> flags = {
      {"--replicas", [&](const char* v) { c.replicas = std::atoi(v); }},
      {"--shards", [&](const char* v) { c.shards = std::atoi(v); }},
      {"--model-bytes", [&](const char* v) { c.model_bytes = size_arg(v); }},
      {"--dcs", [&](const char* v) { c.datacenters = std::atoi(v); }},
      {"--gpus-per-host", [&](const char* v) { c.gpus_per_host = std::atoi(v); }},
      {"--nics-per-host", [&](const char* v) { c.nics_per_host = std::atoi(v); }},
      {"--nic-gbit", [&](const char* v) { c.nic_gbit = std::atof(v); }},
      {"--wan-gbit", [&](const char* v) { c.wan_gbit = std::atof(v); }},
      {"--ctl-us", [&](const char* v) { c.ctl_latency_us = std::atof(v); }},
      {"--wan-us", [&](const char* v) { c.wan_latency_us = std::atof(v); }},
      {"--rtt-us", [&](const char* v) { c.data_rtt_us = std::atof(v); }},
      {"--registry-replicate-us", [&](const char* v) { c.registry_replicate_us = std::atof(v); }},
      {"--registry-request-us", [&](const char* v) { c.registry_request_us = std::atof(v); }},
      {"--registry-heartbeat-us", [&](const char* v) { c.registry_heartbeat_us = std::atof(v); }},
      {"--chunk", [&](const char* v) { c.chunk_bytes = size_arg(v); }},
      {"--pipeline-chunk", [&](const char* v) { c.pipeline_chunk_bytes = size_arg(v); }},
      {"--machine-chunk", [&](const char* v) { c.machine_chunk_bytes = size_arg(v); }},
      {"--max-inflight", [&](const char* v) { c.max_inflight = std::atoi(v); }},
      {"--max-readers", [&](const char* v) { c.max_readers_per_source = std::atoi(v); }},
      {"--joins", [&](const char* v) { c.joins = std::atoi(v); }},
      {"--deaths", [&](const char* v) { c.deaths = std::atoi(v); }},
      {"--spread-us", [&](const char* v) { c.start_spread_us = std::atof(v); }},
      {"--seed", [&](const char* v) { c.seed = std::strtoull(v, nullptr, 10); }},
      {"--heartbeat-timeout-ms", [&](const char* v) { c.heartbeat_timeout_ms = std::atof(v); }},
      {"--stall-timeout-ms", [&](const char* v) { c.stall_timeout_ms = std::atof(v); }},
  };
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json")) {
      json = true;
    } else if (!std::strcmp(argv[i], "--no-pipeline")) {
      c.pipeline = false;
    } else if (!std::strcmp(argv[i], "--no-seeding")) {
      c.seeding = false;
    } else if (!std::strcmp(argv[i], "--trace")) {
      c.trace = true;
    } else if (!std::strcmp(argv[i], "--silent")) {
      c.silent_deaths = true;
    } else if (auto it = flags.find(argv[i]); it != flags.end() && i + 1 < argc) {
      it->second(argv[++i]);
    } else {
      usage();
      return 2;
    }
  }
  auto w0 = std::chrono::steady_clock::now();
  thub::scale::ScaleResult r;
  try {
    r = thub::scale::run_scale(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "thub_scale: %s\n", e.what());
    return 2;
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  if (json) {
    std::printf("%s\n", thub::scale::to_json(c, r).c_str());
  } else {
    std::printf("%s", thub::scale::to_text(c, r).c_str());
  }
  std::fprintf(stderr, "thub_scale: N=%d simulated in %.2f s of wall time\n", c.replicas, wall);
  return r.ok ? 0 : 1;
}
