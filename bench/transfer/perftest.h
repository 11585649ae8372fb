// The roofline of the transfer benchmarks: UCX's own tool, `ucx_perftest -t ucp_get`, run
// as a server/client pair on this host (same UCX_TLS and UCX_NET_DEVICES as the caller's
// environment, so the same transports as TensorHub's processes), not a loop of ours.
//
// The pair bootstraps over a TCP port (an ephemeral one, free when chosen); the server is
// the *source* (its memory is read), the client the *reader* (it issues the gets). The
// client's last output line (-f) carries the result: iterations, 50th percentile, average
// and overall latency (us), bandwidth (MiB/s, average and overall), message rates. The timed
// interval is the -n iterations after -w warm-ups; its length is iterations x overall
// latency and it ends when that line is printed, so the CPU of each process over it is read
// from /proc samples taken every few milliseconds (allocation, page faults and memory
// registration before the test are left out).
//
// Note: ucx_perftest reads the same buffer every iteration, so sizes that fit the
// last-level cache run from cache; and both processes poll their worker (the responder
// too, unless -o), so each burns a core while the test runs.
#pragma once

#include <cstdint>
#include <string>

namespace thub::bench {

struct PerftestResult {
  bool ok = false;
  std::string error;      // why not ok
  uint64_t size = 0;      // bytes per get
  int iters = 0, warmup = 0, window = 1;
  double seconds = 0;     // the timed interval: iters x overall latency
  double gbps = 0;        // size x iters / seconds / 1e9
  double p50_gbps = 0;    // size / median latency / 1e9
  double reader_cpu_s = -1, source_cpu_s = -1;  // client's and server's CPU over the interval
  std::string line;       // the client's final line, as printed
};

class Perftest {
 public:
  explicit Perftest(std::string binary = "ucx_perftest") : bin_(std::move(binary)) {}
  // Whether the binary runs at all (ucx_perftest -h).
  [[nodiscard]] bool available() const;
  // One pair: `iters` gets of `size` bytes after `warmup` ones. Never throws; a pair that
  // fails (or outlives timeout_s) is killed and reported with ok = false.
  // `window`: at most that many gets in flight (-O; ucx_perftest's own default is 1).
  PerftestResult run(uint64_t size, int iters, int warmup, int window, double timeout_s) const;

 private:
  PerftestResult run_once(uint64_t size, int iters, int warmup, int window, double timeout_s) const;
  std::string bin_;
};

}  // namespace thub::bench
