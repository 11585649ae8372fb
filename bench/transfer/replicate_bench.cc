// thub_bench_replicate: 1:1 replicate bandwidth of TensorHub against its roofline (raw UCX
// ucp_get_nbx of the same regions) and the physical limit (memcpy), measured in one run
// between the same two processes.
//
// The program forks into a "source" (parent: embedded registry, publishes version i) and a
// "reader" (child: replicates version i). They talk over a socketpair (channel.h). Each
// iteration, interleaved so that noise from other work on the machine hits every method:
//   1. reader: THUB_Unpublish of the previous version (timed apart, not in the bandwidth);
//   2. raw UCX: gets in 4 MiB chunks, 16 in flight (TensorHub's defaults); then one get per
//      tensor, 16 in flight (the source progresses its worker meanwhile, as TCP needs);
//   3. memcpy of the same bytes inside the reader;
//   4. source: unpublish i-1, publish i; reader: THUB_Replicate(i) (timed).
// Results: medians over --iters after --warmup, as a table and JSON lines.
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <tensorhub/tensorhub.h>

#include "bench/transfer/channel.h"
#include "bench/transfer/shard.h"
#include "bench/transfer/ucx_get.h"

namespace thub::bench {
namespace {

struct Options {
  std::vector<uint64_t> sizes{64ull << 20, 128ull << 20, 256ull << 20, 512ull << 20, 1ull << 30};
  int tensors = 100;
  int iters = 5;
  int warmup = 1;
  std::string tls;          // UCX_TLS for both processes ("" = as the environment has it)
  std::string net_devices;  // UCX_NET_DEVICES for both processes
  std::string json;         // append JSON lines to this file
  uint64_t chunk = 4u << 20;  // TensorHub chunk_size and the raw baseline's chunk
  int inflight = 16;          // TensorHub max_inflight and the raw baseline's window
  bool verify = true;
  bool breakdown = false;     // time the phases of THUB_Ireplicate by polling bytes_held
  bool ucx_peer_errors = false;  // raw endpoint with UCP_ERR_HANDLING_MODE_PEER, like TensorHub's
  bool thub = true;              // --no-thub: baselines only (to study a UCX_TLS TensorHub refuses)
};

enum Cmd : uint64_t { kSize = 1, kPublish, kServe, kStop, kEndSize, kQuit };

using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
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

uint64_t parse_size(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string unit = end ? end : "";
  uint64_t mul = 1;
  if (unit == "K" || unit == "KiB") mul = 1ull << 10;
  else if (unit == "M" || unit == "MiB") mul = 1ull << 20;
  else if (unit == "G" || unit == "GiB") mul = 1ull << 30;
  else if (!unit.empty()) throw std::runtime_error("bad size '" + s + "' (use e.g. 64M, 1G, 1048576)");
  if (v <= 0) throw std::runtime_error("bad size '" + s + "'");
  return static_cast<uint64_t>(v * static_cast<double>(mul));
}

std::string size_text(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) std::snprintf(buf, sizeof buf, "%lluG", (unsigned long long)(b >> 30));
  else if (b >= (1ull << 20) && b % (1ull << 20) == 0) std::snprintf(buf, sizeof buf, "%lluM", (unsigned long long)(b >> 20));
  else std::snprintf(buf, sizeof buf, "%llu", (unsigned long long)b);
  return buf;
}

void usage() {
  std::puts(
      "usage: thub_bench_replicate [options]\n"
      "  --sizes LIST     shard sizes, e.g. 64M,128M,256M,512M,1G (the default)\n"
      "  --tensors T      tensors per shard (default 100)\n"
      "  --iters N        timed iterations per size (default 5); medians are reported\n"
      "  --warmup W       untimed iterations first (default 1; the first replicate registers memory)\n"
      "  --tls TLS        UCX_TLS for both processes, e.g. tcp, sm, posix,cma (default: UCX's choice)\n"
      "  --net-devices D  UCX_NET_DEVICES for both processes\n"
      "  --chunk BYTES    TensorHub chunk_size and the raw gets' chunk (default 4M)\n"
      "  --inflight N     TensorHub max_inflight and the raw gets' window (default 16)\n"
      "  --json FILE      append one JSON line per size to FILE\n"
      "  --no-verify      skip the end-to-end checksum of each method\n"
      "  --no-thub        measure the baselines only\n"
      "  --breakdown      also time the phases of a replicate (polls THUB_Model_stat)\n"
      "  --ucx-err-mode M raw endpoint error handling: none (default, UCX's fastest path) or\n"
      "                   peer (as TensorHub's endpoints: UCX 1.13 then drops posix/sysv)");
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
    } else if (a == "--tensors") o.tensors = std::atoi(val().c_str());
    else if (a == "--iters") o.iters = std::atoi(val().c_str());
    else if (a == "--warmup") o.warmup = std::atoi(val().c_str());
    else if (a == "--tls") o.tls = val();
    else if (a == "--net-devices") o.net_devices = val();
    else if (a == "--chunk") o.chunk = parse_size(val());
    else if (a == "--inflight") o.inflight = std::atoi(val().c_str());
    else if (a == "--json") o.json = val();
    else if (a == "--no-verify") o.verify = false;
    else if (a == "--breakdown") o.breakdown = true;
    else if (a == "--no-thub") o.thub = false;
    else if (a == "--ucx-err-mode") {
      std::string m = val();
      if (m != "none" && m != "peer") throw std::runtime_error("--ucx-err-mode is none or peer");
      o.ucx_peer_errors = m == "peer";
    }
    else if (a == "--help" || a == "-h") {
      usage();
      std::exit(0);
    } else {
      throw std::runtime_error("unknown option " + a + " (see --help)");
    }
  }
  if (o.tensors < 1 || o.iters < 1 || o.warmup < 0 || o.inflight < 1 || o.sizes.empty()) {
    throw std::runtime_error("need --tensors >= 1, --iters >= 1, --warmup >= 0, --inflight >= 1, some --sizes");
  }
  for (uint64_t s : o.sizes) {
    if (s < static_cast<uint64_t>(o.tensors)) throw std::runtime_error("a size is smaller than --tensors bytes");
  }
  return o;
}

// ---- source ------------------------------------------------------------------------------

void run_source(Channel& ch, const Options& o) {
  THUB_Info info = THUB_INFO_NULL;
  THUB_Info_create(&info);
  THUB_Info_set(info, "registry_listen", "127.0.0.1:0");
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
  for (;;) {
    MessageReader msg(ch.recv());
    uint64_t cmd = msg.u64();
    if (cmd == kSize) {
      uint64_t bytes = msg.u64();
      shard = std::make_unique<Shard>(bytes, o.tensors);
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
        w.bytes(ucx.map(shard->tensor(i), shard->tensor_bytes(i)));
      }
      ch.send(w.data());
    } else if (cmd == kPublish) {
      auto version = static_cast<int64_t>(msg.u64());
      auto t0 = Clock::now();
      if (published) thub_check(THUB_Unpublish(m), ctx, "source THUB_Unpublish");
      auto t1 = Clock::now();
      thub_check(THUB_Publish(m, version), ctx, "source THUB_Publish");
      auto t2 = Clock::now();
      published = true;
      ch.send(MessageWriter()
                  .u64(static_cast<uint64_t>(secs(t0, t1) * 1e9))
                  .u64(static_cast<uint64_t>(secs(t1, t2) * 1e9))
                  .data());
    } else if (cmd == kServe) {
      // Progress our worker (TCP emulates gets with messages the source must answer) until
      // the reader says stop; look at the channel only when UCX is idle or every 256 rounds.
      ch.send(MessageWriter().u64(kServe).data());
      for (unsigned n = 0;; ++n) {
        unsigned k = ucx.progress();
        if ((k == 0 || (n & 255) == 0) && ch.readable()) break;
      }
      MessageReader stop(ch.recv());
      if (stop.u64() != kStop) throw std::runtime_error("source: expected stop");
      ch.send(MessageWriter().u64(kStop).data());
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
    // Leave the cores to the progress threads (2-core machines) but look often.
    timespec ts{0, 20000};
    nanosleep(&ts, nullptr);
  }
}

struct SizeResult {
  uint64_t bytes = 0;
  std::vector<double> thub, ucx, ucx_tensor, memcpy_s, unpub_reader, unpub_source, publish_source;
  std::vector<double> bd_first, bd_data, bd_done;
  double first_replicate = 0;
  int64_t thub_gets = 0;
  uint64_t ucx_gets = 0, ucx_tensor_gets = 0;
  std::string verified = "skipped";
};

void serve(Channel& ch, bool on) {
  ch.send(MessageWriter().u64(on ? kServe : kStop).data());
  MessageReader r(ch.recv());
  if (r.u64() != (on ? kServe : kStop)) throw std::runtime_error("reader: unexpected reply to serve/stop");
}

// Source: unpublish the previous version, publish `version`; we time each step there.
void source_publish(Channel& ch, int64_t version, SizeResult* res) {
  ch.send(MessageWriter().u64(kPublish).u64(static_cast<uint64_t>(version)).data());
  MessageReader r(ch.recv());
  double unpub = r.u64() / 1e9, pub = r.u64() / 1e9;
  if (res) {
    if (version > 0) res->unpub_source.push_back(unpub);
    res->publish_source.push_back(pub);
  }
}

SizeResult measure_size(Channel& ch, THUB_Context ctx, UcxGetBaseline& ucx, const Options& o, uint64_t bytes) {
  SizeResult res;
  res.bytes = bytes;
  ch.send(MessageWriter().u64(kSize).u64(bytes).data());
  MessageReader src(ch.recv());
  uint64_t want_sum = src.u64();
  auto ntensors = static_cast<int>(src.u64());
  Shard shard(bytes, o.tensors);
  Shard scratch(bytes, o.tensors);
  scratch.fill(bytes + 1);
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
    if (g.len != shard.tensor_bytes(i)) throw std::runtime_error("reader: tensor sizes differ from the source's");
    g.rkey = ucx.unpack(src.bytes());
    g.local = shard.tensor(i);
    (void)ucx.map(shard.tensor(i), shard.tensor_bytes(i));  // registered like TensorHub's tensors
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
    // 2. Raw UCX gets: chunked like TensorHub, then one get per tensor.
    serve(ch, true);
    auto t0 = Clock::now();
    res.ucx_gets = ucx.get_all(regions, o.chunk, o.inflight);
    auto t1 = Clock::now();
    res.ucx_tensor_gets = ucx.get_all(regions, 0, o.inflight);
    auto t2 = Clock::now();
    serve(ch, false);
    // 3. memcpy of the same tensors inside this process.
    auto t3 = Clock::now();
    for (int i = 0; i < ntensors; ++i) std::memcpy(shard.tensor(i), scratch.tensor(i), shard.tensor_bytes(i));
    auto t4 = Clock::now();
    // 4. TensorHub: the source publishes version `it`, we replicate it.
    source_publish(ch, it, timed ? &res : nullptr);
    int64_t got = it;
    auto t5 = Clock::now();
    if (o.thub) thub_check(THUB_Replicate(m, it, &got), ctx, "reader THUB_Replicate");
    auto t6 = Clock::now();
    held = o.thub;
    if (got != it) throw std::runtime_error("reader: replicated another version than asked");
    if (it == 0) res.first_replicate = secs(t5, t6);
    if (timed) {
      res.ucx.push_back(secs(t0, t1));
      res.ucx_tensor.push_back(secs(t1, t2));
      res.memcpy_s.push_back(secs(t3, t4));
      if (o.thub) res.thub.push_back(secs(t5, t6));
    }
  }
  thub_check(THUB_Model_stat(m, "gets", &res.thub_gets), ctx, "THUB_Model_stat");

  if (o.breakdown && o.thub) {
    for (int k = 0; k < o.iters; ++k) {
      int64_t v = total + k;
      thub_check(THUB_Unpublish(m), ctx, "reader THUB_Unpublish");
      source_publish(ch, v, nullptr);
      Breakdown b = replicate_with_breakdown(ctx, m, v, bytes);
      res.bd_first.push_back(b.first);
      res.bd_data.push_back(b.data);
      res.bd_done.push_back(b.done);
    }
  }

  if (o.verify) {
    // Each method once more into zeroed buffers (untimed), then compare with the source.
    std::string bad;
    if (held) thub_check(THUB_Unpublish(m), ctx, "reader THUB_Unpublish");
    shard.zero();
    serve(ch, true);
    (void)ucx.get_all(regions, o.chunk, o.inflight);
    serve(ch, false);
    if (shard.checksum() != want_sum) bad += " ucx";
    if (o.thub) {
      shard.zero();
      int64_t v = total + (o.breakdown ? o.iters : 0);
      source_publish(ch, v, nullptr);
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

void report(const Options& o, const std::string& tls, const SizeResult& r, FILE* json) {
  auto gbps = [&](const std::vector<double>& t) { return t.empty() ? 0.0 : r.bytes / median(t) / 1e9; };
  double thub = gbps(r.thub), ucx = gbps(r.ucx), ucxt = gbps(r.ucx_tensor), mc = gbps(r.memcpy_s);
  std::printf("%8s %9.2f %9.2f %11.2f %9.2f %9.3f %10.3f %9.2f %8.2f %8.2f\n", size_text(r.bytes).c_str(), thub,
              ucx, ucxt, mc, ucx > 0 ? thub / ucx : 0, mc > 0 ? ucx / mc : 0, r.first_replicate * 1e3,
              median(r.unpub_reader) * 1e3, median(r.unpub_source) * 1e3);
  if (o.breakdown) {
    std::printf("         breakdown (ms, median): first byte %.3f, all bytes %.3f, returned %.3f\n",
                median(r.bd_first) * 1e3, median(r.bd_data) * 1e3, median(r.bd_done) * 1e3);
  }
  std::fflush(stdout);
  char line[2048];
  int n = std::snprintf(
      line, sizeof line,
      "{\"bench\":\"replicate\",\"tls\":\"%s\",\"bytes\":%llu,\"tensors\":%d,\"iters\":%d,\"warmup\":%d,"
      "\"chunk\":%llu,\"inflight\":%d,\"thub_gbps\":%.4f,\"ucx_gbps\":%.4f,\"ucx_per_tensor_gbps\":%.4f,"
      "\"memcpy_gbps\":%.4f,\"ratio_thub_ucx\":%.4f,\"ratio_ucx_memcpy\":%.4f,\"thub_s\":%.6f,\"ucx_s\":%.6f,"
      "\"memcpy_s\":%.6f,\"thub_first_replicate_s\":%.6f,\"reader_unpublish_s\":%.6f,\"source_unpublish_s\":%.6f,"
      "\"source_publish_s\":%.6f,\"thub_gets\":%lld,\"ucx_gets\":%llu,\"ucx_per_tensor_gets\":%llu,"
      "\"verified\":\"%s\",\"ucx_err_mode\":\"%s\"",
      tls.c_str(), (unsigned long long)r.bytes, o.tensors, o.iters, o.warmup, (unsigned long long)o.chunk,
      o.inflight, thub, ucx, ucxt, mc, ucx > 0 ? thub / ucx : 0, mc > 0 ? ucx / mc : 0, median(r.thub),
      median(r.ucx), median(r.memcpy_s), r.first_replicate, median(r.unpub_reader), median(r.unpub_source),
      median(r.publish_source), (long long)r.thub_gets, (unsigned long long)r.ucx_gets,
      (unsigned long long)r.ucx_tensor_gets, r.verified.c_str(), o.ucx_peer_errors ? "peer" : "none");
  std::string s(line, static_cast<size_t>(std::min<int>(n, sizeof line - 1)));
  if (o.breakdown) {
    char bd[256];
    std::snprintf(bd, sizeof bd, ",\"thub_first_byte_s\":%.6f,\"thub_data_done_s\":%.6f,\"thub_returned_s\":%.6f",
                  median(r.bd_first), median(r.bd_data), median(r.bd_done));
    s += bd;
  }
  s += "}";
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
  THUB_Info_set(info, "chunk_size", std::to_string(o.chunk).c_str());
  THUB_Info_set(info, "max_inflight", std::to_string(o.inflight).c_str());
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
  {
    UcxGetBaseline ucx;
    ucx.connect(src_worker, o.ucx_peer_errors);
    std::printf("# thub_bench_replicate: UCX_TLS=%s, %d tensors, %d iters (+%d warmup), chunk %s, %d in flight,"
                " raw ucx err mode %s\n",
                tls.c_str(), o.tensors, o.iters, o.warmup, size_text(o.chunk).c_str(), o.inflight,
                o.ucx_peer_errors ? "peer" : "none");
    std::printf("# GB/s = 1e9 bytes/s, medians; ucx = raw ucp_get_nbx in chunks, ucx/t = one get per tensor\n");
    std::printf("%8s %9s %9s %11s %9s %9s %10s %9s %8s %8s\n", "size", "thub", "ucx", "ucx/t", "memcpy",
                "thub/ucx", "ucx/memcpy", "first ms", "unpubR", "unpubS");
    for (uint64_t s : o.sizes) report(o, tls, measure_size(ch, ctx, ucx, o, s), json);
    // ~UcxGetBaseline closes the endpoint while the source still runs.
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
