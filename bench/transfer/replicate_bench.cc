// thub_bench_replicate: 1:1 replicate bandwidth of TensorHub against its roofline, UCX's own
// `ucx_perftest -t ucp_get` (same transports, same size, same machine), and memcpy, with CPU
// seconds per GB moved on the source and on the reader, all measured in one run.
//
// The program forks into a "source" (parent: embedded registry, publishes version i) and a
// "reader" (child: replicates version i). They talk over a socketpair (channel.h). Each
// iteration, interleaved so that noise from other work on the machine hits every method:
//   1. reader: THUB_Unpublish of the previous version (timed apart, not in the bandwidth);
//   2. ucx_perftest pair (perftest.h) at the shard's size, then at TensorHub's chunk size;
//   3. diagnostic only: our raw ucp_get_nbx loop over the same tensors (4 MiB chunks, 16 in
//      flight, like TensorHub's executor), then one get per tensor;
//   4. memcpy of the same bytes inside the reader;
//   5. source: unpublish i-1, publish i (timed: THUB_Publish alone); reader:
//      THUB_Replicate(i) (timed), with both processes' CPU (getrusage) over it.
// Ratios are TensorHub / ucx_perftest; our raw loop is never a denominator (it can share our
// slowness and hide it). Results: medians over --iters after --warmup, a table and JSON lines.
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <tensorhub/tensorhub.h>

#include "bench/common/cpu_time.h"
#include "bench/common/json_line.h"
#include "bench/transfer/channel.h"
#include "bench/transfer/perftest.h"
#include "bench/transfer/shard.h"
#include "bench/transfer/ucx_get.h"

namespace thub::bench {
namespace {

struct Options {
  std::vector<uint64_t> sizes{64ull << 20, 256ull << 20, 1ull << 30};
  std::string layout = "100";  // shard layout (shard.h): T, NxS or 7b
  int iters = 5;
  int warmup = 1;
  std::string tls;          // UCX_TLS for every process ("" = as the environment has it)
  std::string net_devices;  // UCX_NET_DEVICES for every process
  std::string json;         // append JSON lines to this file
  uint64_t chunk = 4u << 20;  // TensorHub chunk_size, the raw loop's chunk, the 2nd perftest size
  int inflight = 16;          // TensorHub max_inflight and the raw loop's window
  bool verify = true;         // check each method's bytes at the end
  bool thub_verify = false;   // TensorHub's verify=true info key (checksums in publish)
  bool breakdown = false;     // time the phases of THUB_Ireplicate by polling bytes_held
  bool ucx_peer_errors = false;
  bool thub = true;
  bool raw = true;            // the diagnostic raw-get loop
  bool raw_ucx_alloc = false; // also the raw loop from a copy of the shard in UCX-allocated memory
  bool thub_alloc = false;    // the shards (both sides) in THUB_Alloc_mem memory, not aligned_alloc
  bool huge_pages = false;    // the aligned_alloc'd shards (both sides) in transparent huge pages
  std::string perftest = "ucx_perftest";  // "" = no roofline
  uint64_t perftest_bytes = 4ull << 30;   // bytes each perftest pair moves (sets -n)
  int perftest_window = 1;                // -O at the shard's size (ucx_perftest's default)
  int perftest_chunk_window = -1;         // -O at the chunk size (default: --inflight)
  double perftest_timeout = 120;
};

enum Cmd : uint64_t { kSize = 1, kPublish, kServe, kStop, kEndSize, kQuit, kCpu };

using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !(x >= 0); }), v.end());
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void thub_check(int st, THUB_Context ctx, const std::string& what) {
  if (st >= 0) return;
  char detail[1024] = "";
  (void)THUB_Last_error(ctx, detail, sizeof detail);
  throw std::runtime_error(what + ": " + THUB_Error_string(st) + " | " + detail);
}

std::string transport_name() {
  const char* t = std::getenv("UCX_TLS");
  std::string tls = t && *t ? t : "";
  if (tls.empty()) return "shm";  // UCX's choice between two processes of one host
  return tls.find("tcp") != std::string::npos && tls.find("sm") == std::string::npos &&
                 tls.find("posix") == std::string::npos && tls.find("cma") == std::string::npos
             ? "tcp"
             : tls;
}

void usage() {
  std::puts(
      "usage: thub_bench_replicate [options]\n"
      "  --layout L       shard layout: T (T equal tensors, default 100), NxS (N tensors of S\n"
      "                   bytes, e.g. 1000x1M, 8192x8K: the size is implied), 7b (a 7B-shaped list)\n"
      "  --sizes LIST     shard sizes, e.g. 64M,256M,1G (the default); ignored for NxS layouts\n"
      "  --iters N        timed iterations per size (default 5); medians are reported\n"
      "  --warmup W       untimed iterations first (default 1; the first replicate registers memory)\n"
      "  --tls TLS        UCX_TLS for every process, e.g. tcp,self (default: UCX's choice = shm)\n"
      "  --net-devices D  UCX_NET_DEVICES for every process\n"
      "  --chunk BYTES    TensorHub chunk_size, the raw loop's chunk, the 2nd perftest size (4M)\n"
      "  --inflight N     TensorHub max_inflight and the raw loop's window (default 16)\n"
      "  --json FILE      append one JSON line per size to FILE\n"
      "  --perftest PATH  the ucx_perftest binary (default: ucx_perftest on PATH)\n"
      "  --no-perftest    no ucx_perftest roofline (the ratios are then null)\n"
      "  --perftest-bytes B  bytes each ucx_perftest pair moves: -n = B / size, 3..2000 (4G)\n"
      "  --perftest-window W  its -O (gets in flight) at the shard's size (default 1)\n"
      "  --perftest-chunk-window W  its -O at the chunk size (default: --inflight, like TensorHub)\n"
      "  --no-raw         skip the diagnostic raw ucp_get loop\n"
      "  --thub-alloc     allocate both shards with THUB_Alloc_mem (UCX shared memory) instead\n"
      "                   of aligned_alloc: readers on this host then copy from them themselves\n"
      "  --huge-pages     aligned_alloc both shards on 2 MiB, advised MADV_HUGEPAGE before they\n"
      "                   are first written (transparent huge pages)\n"
      "  --raw-ucx-alloc  also run the raw loop from a copy of the shard in memory UCX allocates\n"
      "                   (UCP_MEM_MAP_ALLOCATE, like ucx_perftest's buffers): user memory vs UCX's\n"
      "  --thub-verify    TensorHub's verify=true (checksums computed in THUB_Publish)\n"
      "  --no-verify      skip the end-to-end checksum of each method\n"
      "  --no-thub        measure the baselines only\n"
      "  --breakdown      also time the phases of a replicate (polls THUB_Model_stat)\n"
      "  --ucx-err-mode M raw loop's endpoint error handling: none (default) or peer");
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--sizes") {
      o.sizes.clear();
      std::string list = val();
      size_t p = 0;
      while (p <= list.size()) {
        size_t q = list.find(',', p);
        if (q == std::string::npos) q = list.size();
        if (q > p) o.sizes.push_back(parse_size(list.substr(p, q - p)));
        p = q + 1;
      }
    } else if (a == "--layout" || a == "--tensors") o.layout = val();
    else if (a == "--iters") o.iters = std::atoi(val().c_str());
    else if (a == "--warmup") o.warmup = std::atoi(val().c_str());
    else if (a == "--tls") o.tls = val();
    else if (a == "--net-devices") o.net_devices = val();
    else if (a == "--chunk") o.chunk = parse_size(val());
    else if (a == "--inflight") o.inflight = std::atoi(val().c_str());
    else if (a == "--json") o.json = val();
    else if (a == "--perftest") o.perftest = val();
    else if (a == "--no-perftest") o.perftest.clear();
    else if (a == "--perftest-bytes") o.perftest_bytes = parse_size(val());
    else if (a == "--perftest-window") o.perftest_window = std::atoi(val().c_str());
    else if (a == "--perftest-chunk-window") o.perftest_chunk_window = std::atoi(val().c_str());
    else if (a == "--no-raw") o.raw = false;
    else if (a == "--raw-ucx-alloc") o.raw_ucx_alloc = true;
    else if (a == "--thub-alloc") o.thub_alloc = true;
    else if (a == "--huge-pages") o.huge_pages = true;
    else if (a == "--thub-verify") o.thub_verify = true;
    else if (a == "--no-verify") o.verify = false;
    else if (a == "--breakdown") o.breakdown = true;
    else if (a == "--no-thub") o.thub = false;
    else if (a == "--ucx-err-mode") {
      std::string m = val();
      if (m != "none" && m != "peer") throw std::runtime_error("--ucx-err-mode is none or peer");
      o.ucx_peer_errors = m == "peer";
    } else if (a == "--help" || a == "-h") {
      usage();
      std::exit(0);
    } else {
      throw std::runtime_error("unknown option " + a + " (see --help)");
    }
  }
  if (o.iters < 1 || o.warmup < 0 || o.inflight < 1 || o.sizes.empty()) {
    throw std::runtime_error("need --iters >= 1, --warmup >= 0, --inflight >= 1, some --sizes");
  }
  if (o.raw_ucx_alloc && !o.raw) throw std::runtime_error("--raw-ucx-alloc needs the raw loop (no --no-raw)");
  if (o.perftest_chunk_window < 1) o.perftest_chunk_window = o.inflight;
  if (o.perftest_window < 1) throw std::runtime_error("--perftest-window >= 1");
  if (layout_fixes_size(o.layout)) o.sizes = {make_layout(o.layout, 0).bytes()};
  for (uint64_t s : o.sizes) (void)make_layout(o.layout, s);  // throws on a bad spec or size
  return o;
}

// ---- source ------------------------------------------------------------------------------

void set_common_info(THUB_Info info, const Options& o) {
  THUB_Info_set(info, "chunk_size", std::to_string(o.chunk).c_str());
  THUB_Info_set(info, "max_inflight", std::to_string(o.inflight).c_str());
  if (o.thub_verify) THUB_Info_set(info, "verify", "true");
}

void run_source(Channel& ch, const Options& o) {
  THUB_Info info = THUB_INFO_NULL;
  THUB_Info_create(&info);
  THUB_Info_set(info, "registry_listen", "127.0.0.1:0");
  set_common_info(info, o);
  THUB_Context ctx = THUB_CONTEXT_NULL;
  int st = THUB_Init(info, &ctx);
  THUB_Info_free(&info);
  thub_check(st, ctx, "source THUB_Init");
  char reg[256] = "";
  thub_check(THUB_Registry_address(ctx, reg, sizeof reg), ctx, "THUB_Registry_address");
  UcxGetBaseline ucx;
  ch.send(MessageWriter().bytes(reg).bytes(ucx.address()).data());

  std::unique_ptr<Shard> shard;
  THUB_Model m = THUB_MODEL_NULL;
  bool published = false;
  double cpu_mark = self_cpu_s();
  for (;;) {
    MessageReader msg(ch.recv());
    uint64_t cmd = msg.u64();
    if (cmd == kSize) {
      uint64_t bytes = msg.u64();
      shard = std::make_unique<Shard>(make_layout(o.layout, bytes), o.thub_alloc ? ctx : THUB_CONTEXT_NULL, o.huge_pages);
      shard->fill(bytes);
      std::string name = "bench-" + std::to_string(bytes);
      thub_check(THUB_Open(ctx, name.c_str(), "source", 0, 1, THUB_INFO_NULL, &m), ctx, "source THUB_Open");
      MessageWriter w;
      w.u64(shard->checksum()).u64(static_cast<uint64_t>(shard->tensors()));
      for (int i = 0; i < shard->tensors(); ++i) {
        std::string t = "t" + std::to_string(i);
        thub_check(THUB_Register(m, t.c_str(), shard->tensor(i), shard->tensor_bytes(i), THUB_MEM_HOST), ctx,
                   "source THUB_Register");
        w.u64(reinterpret_cast<uint64_t>(shard->tensor(i))).u64(shard->tensor_bytes(i));
        w.bytes(o.raw ? ucx.map(shard->tensor(i), shard->tensor_bytes(i)) : std::string());
      }
      // The same bytes in memory UCX allocates, tensors at the same offsets from its start.
      std::string arkey;
      char* copy = nullptr;
      if (o.raw_ucx_alloc) {
        size_t span = static_cast<size_t>(shard->tensor(shard->tensors() - 1) - shard->data()) +
                      shard->tensor_bytes(shard->tensors() - 1);
        copy = static_cast<char*>(ucx.alloc(span, &arkey));
        std::memcpy(copy, shard->data(), span);
      }
      w.u64(reinterpret_cast<uint64_t>(copy)).bytes(arkey);
      ch.send(w.data());
    } else if (cmd == kPublish) {
      auto version = static_cast<int64_t>(msg.u64());
      auto t0 = Clock::now();
      if (published) thub_check(THUB_Unpublish(m), ctx, "source THUB_Unpublish");
      auto t1 = Clock::now();
      thub_check(THUB_Publish(m, version), ctx, "source THUB_Publish");
      auto t2 = Clock::now();
      published = true;
      int64_t pack_us = 0;
      (void)THUB_Model_stat(m, "pack_us", &pack_us);
      cpu_mark = self_cpu_s();  // the replicate's CPU window starts after the publish
      ch.send(MessageWriter()
                  .u64(static_cast<uint64_t>(secs(t0, t1) * 1e9))
                  .u64(static_cast<uint64_t>(secs(t1, t2) * 1e9))
                  .u64(static_cast<uint64_t>(pack_us))
                  .data());
    } else if (cmd == kCpu) {
      double now = self_cpu_s();
      ch.send(MessageWriter().u64(static_cast<uint64_t>((now - cpu_mark) * 1e9)).data());
      cpu_mark = now;
    } else if (cmd == kServe) {
      // Progress our worker (UCX 1.13 emulates gets with messages the source must answer)
      // until the reader says stop; look at the channel when UCX is idle or every 256 rounds.
      double c0 = self_cpu_s();
      ch.send(MessageWriter().u64(kServe).data());
      for (unsigned n = 0;; ++n) {
        unsigned k = ucx.progress();
        if ((k == 0 || (n & 255) == 0) && ch.readable()) break;
      }
      MessageReader stop(ch.recv());
      if (stop.u64() != kStop) throw std::runtime_error("source: expected stop");
      ch.send(MessageWriter().u64(kStop).u64(static_cast<uint64_t>((self_cpu_s() - c0) * 1e9)).data());
    } else if (cmd == kEndSize) {
      thub_check(THUB_Close(&m), ctx, "source THUB_Close");
      published = false;
      ucx.unmap_all();
      shard.reset();
      ch.send(MessageWriter().u64(kEndSize).data());
    } else if (cmd == kQuit) {
      break;
    } else {
      throw std::runtime_error("source: unknown command");
    }
  }
  thub_check(THUB_Finalize(&ctx), ctx, "source THUB_Finalize");
}

// ---- reader ------------------------------------------------------------------------------

struct Breakdown {  // seconds from the call: first byte held, all bytes held, call returned
  double first = 0, data = 0, done = 0;
};

// THUB_Ireplicate, then poll bytes_held to see when the data started and ended.
Breakdown replicate_with_breakdown(THUB_Context ctx, THUB_Model m, int64_t version, uint64_t total) {
  Breakdown b;
  THUB_Request req = THUB_REQUEST_NULL;
  auto t0 = Clock::now();
  thub_check(THUB_Ireplicate(m, version, &req), ctx, "THUB_Ireplicate");
  bool seen_first = false, seen_all = false;
  for (;;) {
    int done = 0;
    int64_t got = -1;
    int st = THUB_Test(&req, &done, &got);
    auto now = Clock::now();
    if (done) {
      thub_check(st, ctx, "THUB_Test");
      b.done = secs(t0, now);
      if (!seen_all) b.data = b.done;
      if (!seen_first) b.first = b.data;
      return b;
    }
    int64_t held = 0;
    thub_check(THUB_Model_stat(m, "bytes_held", &held), ctx, "THUB_Model_stat");
    if (!seen_first && held > 0) {
      seen_first = true;
      b.first = secs(t0, now);
    }
    if (!seen_all && static_cast<uint64_t>(held) >= total) {
      seen_all = true;
      b.data = secs(t0, now);
    }
    timespec ts{0, 20000};  // leave the cores to the progress threads, but look often
    nanosleep(&ts, nullptr);
  }
}

// Samples of one method: seconds per iteration, CPU seconds of the source and the reader.
struct Method {
  std::vector<double> s, src_cpu, rdr_cpu;
  int failures = 0;
  std::string error;
  void add(double t, double src, double rdr) {
    s.push_back(t);
    src_cpu.push_back(src);
    rdr_cpu.push_back(rdr);
  }
};

struct SizeResult {
  uint64_t bytes = 0;
  int tensors = 0;
  Method thub, perftest, perftest_chunk, raw, raw_tensor, raw_alloc, memcpy_m;
  std::vector<double> perftest_p50, unpub_reader, unpub_source, publish_source, pack;
  std::vector<double> bd_first, bd_data, bd_done;
  int perftest_iters = 0, perftest_chunk_iters = 0;
  double first_replicate = 0, first_publish = 0;
  int64_t thub_gets = 0;
  uint64_t raw_gets = 0, raw_tensor_gets = 0;
  std::string verified = "skipped";
};

// Source: serve raw gets until stop; returns the source's CPU seconds meanwhile.
void serve_on(Channel& ch) {
  ch.send(MessageWriter().u64(kServe).data());
  MessageReader r(ch.recv());
  if (r.u64() != kServe) throw std::runtime_error("reader: unexpected reply to serve");
}
double serve_off(Channel& ch) {
  ch.send(MessageWriter().u64(kStop).data());
  MessageReader r(ch.recv());
  if (r.u64() != kStop) throw std::runtime_error("reader: unexpected reply to stop");
  return r.u64() / 1e9;
}

double source_cpu_since_mark(Channel& ch) {
  ch.send(MessageWriter().u64(kCpu).data());
  MessageReader r(ch.recv());
  return r.u64() / 1e9;
}

// Source: unpublish the previous version, publish `version`; the source times each step.
void source_publish(Channel& ch, int64_t version, SizeResult* res, bool first) {
  ch.send(MessageWriter().u64(kPublish).u64(static_cast<uint64_t>(version)).data());
  MessageReader r(ch.recv());
  double unpub = r.u64() / 1e9, pub = r.u64() / 1e9, pack_ms = r.u64() / 1e3;
  if (first && res) res->first_publish = pub;
  if (res && !first) {
    if (version > 0) res->unpub_source.push_back(unpub);
    res->publish_source.push_back(pub);
    res->pack.push_back(pack_ms);
  }
}

// -n for a perftest pair: about `budget` bytes, at least 3 and at most 2000 gets.
int perftest_iters(uint64_t budget, uint64_t size) {
  return static_cast<int>(std::clamp<uint64_t>(budget / std::max<uint64_t>(1, size), 3, 2000));
}

void run_perftest(const Perftest& pt, const Options& o, uint64_t size, int window, Method* m,
                  std::vector<double>* p50, int* iters_out) {
  int n = perftest_iters(o.perftest_bytes, size);
  int w = std::clamp(n / 4, 1, 200);
  PerftestResult r = pt.run(size, n, w, window, o.perftest_timeout);
  if (!r.ok) {
    m->failures++;
    m->error = r.error;
    std::fprintf(stderr, "thub_bench_replicate: ucx_perftest -s %llu failed: %s\n", (unsigned long long)size,
                 r.error.c_str());
    return;
  }
  // Seconds per `size` bytes, CPU per get: comparable with a replicate of the same bytes.
  m->add(r.seconds / r.iters, r.source_cpu_s / r.iters, r.reader_cpu_s / r.iters);
  if (p50) p50->push_back(static_cast<double>(size) / (r.p50_gbps * 1e9));
  *iters_out = r.iters;
}

SizeResult measure_size(Channel& ch, THUB_Context ctx, UcxGetBaseline& ucx, const Perftest* pt, const Options& o,
                        uint64_t bytes) {
  SizeResult res;
  Layout layout = make_layout(o.layout, bytes);
  res.bytes = layout.bytes();
  ch.send(MessageWriter().u64(kSize).u64(bytes).data());
  MessageReader src(ch.recv());
  uint64_t want_sum = src.u64();
  auto ntensors = static_cast<int>(src.u64());
  Shard shard(layout, o.thub_alloc ? ctx : THUB_CONTEXT_NULL, o.huge_pages);
  Shard scratch(layout);
  scratch.fill(bytes + 1);
  res.tensors = ntensors;
  if (ntensors != shard.tensors()) throw std::runtime_error("reader: the source has another tensor count");

  THUB_Model m = THUB_MODEL_NULL;
  std::string name = "bench-" + std::to_string(bytes);
  thub_check(THUB_Open(ctx, name.c_str(), "reader", 0, 1, THUB_INFO_NULL, &m), ctx, "reader THUB_Open");
  std::vector<GetRegion> regions(static_cast<size_t>(ntensors));
  for (int i = 0; i < ntensors; ++i) {
    std::string t = "t" + std::to_string(i);
    thub_check(THUB_Register(m, t.c_str(), shard.tensor(i), shard.tensor_bytes(i), THUB_MEM_HOST), ctx,
               "reader THUB_Register");
    GetRegion& g = regions[static_cast<size_t>(i)];
    g.remote = src.u64();
    g.len = src.u64();
    std::string rkey = src.bytes();
    if (g.len != shard.tensor_bytes(i)) throw std::runtime_error("reader: tensor sizes differ from the source's");
    g.local = shard.tensor(i);
    if (o.raw) {
      g.rkey = ucx.unpack(rkey);
      (void)ucx.map(shard.tensor(i), shard.tensor_bytes(i));  // registered like TensorHub's tensors
    }
  }
  std::vector<GetRegion> alloc_regions;
  const uint64_t alloc_base = src.u64();
  const std::string alloc_rkey = src.bytes();
  if (o.raw_ucx_alloc) {
    ucp_rkey_h rk = ucx.unpack(alloc_rkey);
    for (int i = 0; i < ntensors; ++i) {
      GetRegion g = regions[static_cast<size_t>(i)];
      g.remote = alloc_base + static_cast<uint64_t>(shard.tensor(i) - shard.data());
      g.rkey = rk;
      alloc_regions.push_back(g);
    }
  }

  bool held = false;
  const int total = o.warmup + o.iters;
  for (int it = 0; it < total; ++it) {
    const bool timed = it >= o.warmup;
    // 1. Withdraw our copy of the previous version before anything writes our buffers.
    if (held) {
      auto t0 = Clock::now();
      thub_check(THUB_Unpublish(m), ctx, "reader THUB_Unpublish");
      if (timed) res.unpub_reader.push_back(secs(t0, Clock::now()));
      held = false;
    }
    // 2. The roofline: UCX's own tool at the shard's size and at our chunk size.
    if (pt && timed) {
      // Its 50th percentile is a per-get latency only with one get in flight.
      run_perftest(*pt, o, res.bytes, o.perftest_window, &res.perftest,
                   o.perftest_window == 1 ? &res.perftest_p50 : nullptr, &res.perftest_iters);
      if (o.chunk < res.bytes) {
        run_perftest(*pt, o, o.chunk, o.perftest_chunk_window, &res.perftest_chunk, nullptr,
                     &res.perftest_chunk_iters);
      }
    }
    // 3. Diagnostic: our raw get loop, chunked like TensorHub, then one get per tensor.
    if (o.raw) {
      serve_on(ch);
      double c0 = self_cpu_s();
      auto t0 = Clock::now();
      res.raw_gets = ucx.get_all(regions, o.chunk, o.inflight);
      auto t1 = Clock::now();
      double c1 = self_cpu_s();
      double sc = serve_off(ch);
      serve_on(ch);
      auto t2 = Clock::now();
      res.raw_tensor_gets = ucx.get_all(regions, 0, o.inflight);
      auto t3 = Clock::now();
      double c2 = self_cpu_s();
      double sc2 = serve_off(ch);
      if (timed) {
        res.raw.add(secs(t0, t1), sc, c1 - c0);
        res.raw_tensor.add(secs(t2, t3), sc2, c2 - c1);
      }
      if (o.raw_ucx_alloc) {  // the same loop from UCX-allocated memory
        serve_on(ch);
        double a0 = self_cpu_s();
        auto u0 = Clock::now();
        (void)ucx.get_all(alloc_regions, o.chunk, o.inflight);
        auto u1 = Clock::now();
        double a1 = self_cpu_s();
        double asc = serve_off(ch);
        if (timed) res.raw_alloc.add(secs(u0, u1), asc, a1 - a0);
      }
    }
    // 4. memcpy of the same tensors inside this process.
    double c0 = self_cpu_s();
    auto t3 = Clock::now();
    for (int i = 0; i < ntensors; ++i) std::memcpy(shard.tensor(i), scratch.tensor(i), shard.tensor_bytes(i));
    auto t4 = Clock::now();
    if (timed) res.memcpy_m.add(secs(t3, t4), -1, self_cpu_s() - c0);
    // 5. TensorHub: the source publishes version `it`, we replicate it.
    source_publish(ch, it, &res, it == 0);
    int64_t got = it;
    double rc0 = self_cpu_s();
    auto t5 = Clock::now();
    if (o.thub) thub_check(THUB_Replicate(m, it, &got), ctx, "reader THUB_Replicate");
    auto t6 = Clock::now();
    double rc1 = self_cpu_s();
    double sc = source_cpu_since_mark(ch);
    held = o.thub;
    if (got != it) throw std::runtime_error("reader: replicated another version than asked");
    if (it == 0) res.first_replicate = secs(t5, t6);
    if (timed && o.thub) res.thub.add(secs(t5, t6), sc, rc1 - rc0);
  }
  thub_check(THUB_Model_stat(m, "gets", &res.thub_gets), ctx, "THUB_Model_stat");

  if (o.breakdown && o.thub) {
    for (int k = 0; k < o.iters; ++k) {
      int64_t v = total + k;
      thub_check(THUB_Unpublish(m), ctx, "reader THUB_Unpublish");
      source_publish(ch, v, nullptr, false);
      Breakdown b = replicate_with_breakdown(ctx, m, v, res.bytes);
      res.bd_first.push_back(b.first);
      res.bd_data.push_back(b.data);
      res.bd_done.push_back(b.done);
    }
  }

  if (o.verify) {
    // Each method once more into zeroed buffers (untimed), then compare with the source.
    std::string bad;
    if (held) thub_check(THUB_Unpublish(m), ctx, "reader THUB_Unpublish");
    if (o.raw) {
      shard.zero();
      serve_on(ch);
      (void)ucx.get_all(regions, o.chunk, o.inflight);
      (void)serve_off(ch);
      if (shard.checksum() != want_sum) bad += " raw-get";
    }
    if (o.thub) {
      shard.zero();
      int64_t v = total + (o.breakdown ? o.iters : 0);
      source_publish(ch, v, nullptr, false);
      thub_check(THUB_Replicate(m, v, nullptr), ctx, "reader THUB_Replicate (verify)");
      if (shard.checksum() != want_sum) bad += " thub";
    }
    if (!bad.empty()) throw std::runtime_error("reader: checksum mismatch after" + bad);
    res.verified = "ok";
  }

  thub_check(THUB_Close(&m), ctx, "reader THUB_Close");
  ucx.destroy_rkeys();
  ucx.unmap_all();
  ch.send(MessageWriter().u64(kEndSize).data());
  (void)ch.recv();
  return res;
}

// Medians of a method: GB/s and CPU seconds per GB moved on each side (null: not measured).
struct Summary {
  double gbps = -1, src_cpu_gb = -1, rdr_cpu_gb = -1, s = -1;
};
Summary summarize(const Method& m, uint64_t bytes) {
  Summary out;
  const double gb = static_cast<double>(bytes) / 1e9;
  out.s = median(m.s);
  if (out.s > 0) out.gbps = gb / out.s;
  out.src_cpu_gb = median(m.src_cpu) >= 0 ? median(m.src_cpu) / gb : -1;
  out.rdr_cpu_gb = median(m.rdr_cpu) >= 0 ? median(m.rdr_cpu) / gb : -1;
  return out;
}

double ratio(double a, double b) { return a > 0 && b > 0 ? a / b : -1; }

void report(const Options& o, const std::string& tls, const SizeResult& r, FILE* json) {
  Summary th = summarize(r.thub, r.bytes), pf = summarize(r.perftest, r.bytes),
          pc = summarize(r.perftest_chunk, o.chunk), raw = summarize(r.raw, r.bytes),
          rawt = summarize(r.raw_tensor, r.bytes), rawa = summarize(r.raw_alloc, r.bytes),
          mc = summarize(r.memcpy_m, r.bytes);
  auto f = [](double v, const char* fmt) {
    char b[32];
    if (v < 0) return std::string("-");
    std::snprintf(b, sizeof b, fmt, v);
    return std::string(b);
  };
  std::printf("%8s %6d %8s %8s %8s %8s %8s %8s %8s %7s %7s %7s %7s %7s %8s %8s\n", size_text(r.bytes).c_str(),
              r.tensors, f(th.gbps, "%.2f").c_str(), f(pf.gbps, "%.2f").c_str(), f(pc.gbps, "%.2f").c_str(),
              f(raw.gbps, "%.2f").c_str(), f(mc.gbps, "%.2f").c_str(), f(ratio(th.gbps, pf.gbps), "%.3f").c_str(),
              f(ratio(th.gbps, pc.gbps), "%.3f").c_str(), f(th.src_cpu_gb, "%.3f").c_str(),
              f(th.rdr_cpu_gb, "%.3f").c_str(), f(pf.src_cpu_gb, "%.3f").c_str(), f(pf.rdr_cpu_gb, "%.3f").c_str(),
              f(mc.rdr_cpu_gb, "%.3f").c_str(), f(median(r.publish_source) * 1e3, "%.2f").c_str(),
              f(r.first_replicate * 1e3, "%.1f").c_str());
  if (o.raw_ucx_alloc) {
    std::printf("         raw loop from UCX-allocated memory: %s GB/s (user memory: %s), CPU s/GB src %s rdr %s\n",
                f(rawa.gbps, "%.2f").c_str(), f(raw.gbps, "%.2f").c_str(), f(rawa.src_cpu_gb, "%.3f").c_str(),
                f(rawa.rdr_cpu_gb, "%.3f").c_str());
  }
  if (o.breakdown) {
    std::printf("         breakdown (ms, median): first byte %.3f, all bytes %.3f, returned %.3f\n",
                median(r.bd_first) * 1e3, median(r.bd_data) * 1e3, median(r.bd_done) * 1e3);
  }
  std::fflush(stdout);
  const char* env_tls = std::getenv("UCX_TLS");
  JsonLine j;
  j.str("bench", "replicate").str("transport", transport_name()).str("tls", tls).str("layout", o.layout);
  j.str("alloc", o.thub_alloc ? "thub" : o.huge_pages ? "malloc-thp" : "malloc");
  j.integer("tensors", r.tensors).integer("bytes", static_cast<long long>(r.bytes));
  j.integer("iters", o.iters).integer("warmup", o.warmup).integer("chunk", static_cast<long long>(o.chunk));
  j.integer("inflight", o.inflight).boolean("thub_verify", o.thub_verify);
  j.str("ucx_tls_env", env_tls ? env_tls : "");
  j.num("thub_gbps", th.gbps).num("perftest_gbps", pf.gbps).num("perftest_p50_gbps", ratio(r.bytes / 1e9, median(r.perftest_p50)));
  j.num("perftest_chunk_gbps", pc.gbps).num("raw_get_gbps", raw.gbps).num("raw_get_per_tensor_gbps", rawt.gbps);
  j.num("memcpy_gbps", mc.gbps);
  j.num("ratio_thub_perftest", ratio(th.gbps, pf.gbps)).num("ratio_thub_perftest_chunk", ratio(th.gbps, pc.gbps));
  j.num("ratio_raw_get_perftest", ratio(raw.gbps, pf.gbps)).num("ratio_perftest_memcpy", ratio(pf.gbps, mc.gbps));
  j.num("thub_source_cpu_s_per_gb", th.src_cpu_gb).num("thub_reader_cpu_s_per_gb", th.rdr_cpu_gb);
  j.num("perftest_source_cpu_s_per_gb", pf.src_cpu_gb).num("perftest_reader_cpu_s_per_gb", pf.rdr_cpu_gb);
  j.num("perftest_chunk_source_cpu_s_per_gb", pc.src_cpu_gb).num("perftest_chunk_reader_cpu_s_per_gb", pc.rdr_cpu_gb);
  j.num("raw_get_source_cpu_s_per_gb", raw.src_cpu_gb).num("raw_get_reader_cpu_s_per_gb", raw.rdr_cpu_gb);
  j.num("memcpy_cpu_s_per_gb", mc.rdr_cpu_gb);
  if (o.raw_ucx_alloc) {
    j.num("raw_get_ucxmem_gbps", rawa.gbps).num("ratio_raw_get_ucxmem_perftest", ratio(rawa.gbps, pf.gbps));
    j.num("raw_get_ucxmem_source_cpu_s_per_gb", rawa.src_cpu_gb).num("raw_get_ucxmem_reader_cpu_s_per_gb", rawa.rdr_cpu_gb);
  }
  j.num("thub_s", th.s).num("perftest_s", pf.s).num("memcpy_s", mc.s);
  j.integer("perftest_window", o.perftest_window).integer("perftest_chunk_window", o.perftest_chunk_window);
  j.integer("perftest_iters", r.perftest_iters).integer("perftest_chunk_iters", r.perftest_chunk_iters);
  j.integer("perftest_samples", static_cast<long long>(r.perftest.s.size()));
  j.integer("perftest_failures", r.perftest.failures + r.perftest_chunk.failures);
  if (!r.perftest.error.empty()) j.str("perftest_error", r.perftest.error);
  j.num("thub_first_replicate_s", r.first_replicate).num("source_first_publish_s", r.first_publish);
  j.num("source_publish_s", median(r.publish_source)).num("source_pack_ms", median(r.pack));
  j.num("reader_unpublish_s", median(r.unpub_reader)).num("source_unpublish_s", median(r.unpub_source));
  j.integer("thub_gets", r.thub_gets).integer("raw_gets", static_cast<long long>(r.raw_gets));
  j.str("verified", r.verified).str("raw_err_mode", o.ucx_peer_errors ? "peer" : "none");
  if (o.breakdown) {
    j.num("thub_first_byte_s", median(r.bd_first)).num("thub_data_done_s", median(r.bd_data));
    j.num("thub_returned_s", median(r.bd_done));
  }
  std::string s = j.text();
  std::printf("%s\n", s.c_str());
  if (json) {
    std::fprintf(json, "%s\n", s.c_str());
    std::fflush(json);
  }
}

void run_reader(Channel& ch, const Options& o) {
  MessageReader hello(ch.recv());
  std::string reg = hello.bytes();
  std::string src_worker = hello.bytes();

  THUB_Info info = THUB_INFO_NULL;
  THUB_Info_create(&info);
  THUB_Info_set(info, "registry", reg.c_str());
  set_common_info(info, o);
  THUB_Context ctx = THUB_CONTEXT_NULL;
  int st = THUB_Init(info, &ctx);
  THUB_Info_free(&info);
  thub_check(st, ctx, "reader THUB_Init");
  FILE* json = nullptr;
  if (!o.json.empty()) {
    json = std::fopen(o.json.c_str(), "a");
    if (!json) throw std::runtime_error("cannot open " + o.json);
  }
  const char* env_tls = std::getenv("UCX_TLS");
  std::string tls = env_tls && *env_tls ? env_tls : "default";
  std::unique_ptr<Perftest> pt;
  if (!o.perftest.empty()) {
    pt = std::make_unique<Perftest>(o.perftest);
    if (!pt->available()) throw std::runtime_error(o.perftest + " does not run (apt-get install ucx-utils, or --no-perftest)");
  }
  {
    UcxGetBaseline ucx;
    if (o.raw) ucx.connect(src_worker, o.ucx_peer_errors);
    std::printf("# thub_bench_replicate: UCX_TLS=%s, layout %s, %d iters (+%d warmup), chunk %s, %d in flight%s\n",
                tls.c_str(), o.layout.c_str(), o.iters, o.warmup, size_text(o.chunk).c_str(), o.inflight,
                o.thub_verify ? ", verify=true" : "");
    std::printf("# GB/s = 1e9 bytes/s, medians. perftest = ucx_perftest -t ucp_get at the size, pf@chunk = at %s;\n"
                "# raw = our ucp_get loop (diagnostic); cpu = CPU s per GB moved (src = the process read, rdr = the reader)\n",
                size_text(o.chunk).c_str());
    std::printf("%8s %6s %8s %8s %8s %8s %8s %8s %8s %7s %7s %7s %7s %7s %8s %8s\n", "size", "tens", "thub", "perftest",
                "pf@chunk", "raw", "memcpy", "th/pf", "th/pf@c", "thSrc", "thRdr", "pfSrc", "pfRdr", "mcpy",
                "pub ms", "first ms");
    for (uint64_t s : o.sizes) report(o, tls, measure_size(ch, ctx, ucx, pt.get(), o, s), json);
  }
  ch.send(MessageWriter().u64(kQuit).data());
  if (json) std::fclose(json);
  thub_check(THUB_Finalize(&ctx), ctx, "reader THUB_Finalize");
}

}  // namespace
}  // namespace thub::bench

int main(int argc, char** argv) {
  using namespace thub::bench;
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "thub_bench_replicate: %s\n", e.what());
    return 2;
  }
  if (!o.tls.empty()) setenv("UCX_TLS", o.tls.c_str(), 1);
  if (!o.net_devices.empty()) setenv("UCX_NET_DEVICES", o.net_devices.c_str(), 1);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    std::perror("socketpair");
    return 1;
  }
  std::fflush(stdout);
  pid_t pid = fork();  // before any thread or UCX context exists
  if (pid < 0) {
    std::perror("fork");
    return 1;
  }
  const bool reader = pid == 0;
  close(reader ? sv[0] : sv[1]);
  int rc = 0;
  try {
    Channel ch(reader ? sv[1] : sv[0]);
    if (reader) run_reader(ch, o);
    else run_source(ch, o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "thub_bench_replicate (%s): %s\n", reader ? "reader" : "source", e.what());
    rc = 1;
  }
  if (reader) {
    std::fflush(stdout);
    _exit(rc);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  return rc;
}
