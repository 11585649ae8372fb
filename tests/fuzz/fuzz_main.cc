// thub_fuzz: the control-plane fuzzers as a soak (docs/security.md, "Fuzzing").
//   thub_fuzz [--seed S] [--decoder N] [--sessions N] [--token-sessions N] [--socket N] [--hostile-registry N]
//             [--transport-codecs N] [--read-server N] [--read-client N]
// Runs each target for its count (defaults: 1,000,000 decoder inputs, 1,000,000 sessions with
// and 1,000,000 without a token, 4,000 socket sessions, 1,000 against a hostile registry, 1,000,000 transport codec inputs, 50,000
// socket-read sessions against the server and 50,000 against the reader), prints inputs, refusals, the largest allocation
// and the time, and exits 1 if any invariant was violated (each finding names its seed and input).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/fuzz/fuzz_targets.h"

using namespace thub::fuzz;

int main(int argc, char** argv) {
  uint64_t seed = 1, decoder = 1000000, sessions = 1000000, token_sessions = 1000000, socket = 4000, hostile = 1000,
           codecs = 1000000, read_server = 50000, read_client = 50000;
  for (int i = 1; i < argc; ++i) {
    auto next = [&]() -> uint64_t {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", argv[i]);
        std::exit(2);
      }
      return std::strtoull(argv[++i], nullptr, 10);
    };
    std::string a = argv[i];
    if (a == "--seed") seed = next();
    else if (a == "--decoder") decoder = next();
    else if (a == "--sessions") sessions = next();
    else if (a == "--token-sessions") token_sessions = next();
    else if (a == "--socket") socket = next();
    else if (a == "--hostile-registry") hostile = next();
    else if (a == "--transport-codecs") codecs = next();
    else if (a == "--read-server") read_server = next();
    else if (a == "--read-client") read_client = next();
    else {
      std::fprintf(stderr, "usage: %s [--seed S] [--decoder N] [--sessions N] [--token-sessions N] [--socket N] [--hostile-registry N]\n"
                   "       [--transport-codecs N] [--read-server N] [--read-client N]\n",
                   argv[0]);
      return 2;
    }
  }
  int findings = 0;
  uint64_t total = 0;
  double total_s = 0;
  auto run = [&](const char* name, uint64_t n, auto&& fuzz) {
    if (n == 0) return;
    Outcome o;
    auto t0 = std::chrono::steady_clock::now();
    fuzz(n, &o);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%-24s %10llu inputs %10llu frames %10llu refused  largest alloc %9llu B  %8.1f s  %9.0f/s  findings %zu\n",
                name, static_cast<unsigned long long>(o.inputs), static_cast<unsigned long long>(o.frames),
                static_cast<unsigned long long>(o.refused), static_cast<unsigned long long>(o.largest_allocation), s,
                o.inputs / (s > 0 ? s : 1), o.findings.size());
    std::fflush(stdout);
    if (!o.answers.empty()) {
      std::printf("  answers (request status: count):");
      for (const auto& [k, v] : o.answers) std::printf(" %s: %llu,", k.c_str(), static_cast<unsigned long long>(v));
      std::printf("\n");
    }
    for (const auto& f : o.findings) std::printf("  FINDING %s\n", f.c_str());
    findings += static_cast<int>(o.findings.size());
    total += o.inputs;
    total_s += s;
  };
  std::printf("thub_fuzz seed %llu\n", static_cast<unsigned long long>(seed));
  run("decoders", decoder, [&](uint64_t n, Outcome* o) { DecoderFuzzer(seed).run(n, o); });
  run("sessions", sessions, [&](uint64_t n, Outcome* o) { SessionFuzzer(seed, false).run(n, o); });
  run("sessions with a token", token_sessions, [&](uint64_t n, Outcome* o) { SessionFuzzer(seed, true).run(n, o); });
  run("socket sessions", socket / 2, [&](uint64_t n, Outcome* o) { SocketFuzzer(seed, false).run(n, o); });
  run("socket with a token", socket - socket / 2, [&](uint64_t n, Outcome* o) { SocketFuzzer(seed, true).run(n, o); });
  run("client vs hostile registry", hostile, [&](uint64_t n, Outcome* o) { HostileRegistryFuzzer(seed).run(n, o); });
  run("transport codecs", codecs, [&](uint64_t n, Outcome* o) { TransportCodecFuzzer(seed).run(n, o); });
  run("socket-read server", read_server, [&](uint64_t n, Outcome* o) { ReadServerFuzzer(seed).run(n, o); });
  run("socket reader", read_client, [&](uint64_t n, Outcome* o) { ReadClientFuzzer(seed).run(n, o); });
  std::printf("total %llu inputs in %.1f s, %d findings\n", static_cast<unsigned long long>(total), total_s, findings);
  return findings ? 1 : 0;
}
