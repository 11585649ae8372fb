// thub_bench_publish: how long THUB_Publish blocks the trainer, by tensor count, with and
// without verify=true (issue 11's target: <= 1 ms for 1 GiB in 1,000 tensors, either way),
// and the CPU a published source burns with no reader (target: < 1% of a core).
//
// One process: the embedded registry (as a trainer usually runs it) and one model of
// --bytes in the layouts of --layouts (shard.h: T equal tensors, NxS, 7b). Per layout and
// verify setting: the first publish (it also registers the tensors with UCX), then --iters
// publish/unpublish pairs, each timed alone; the library's own pack time (stat pack_us)
// beside it. --idle-s S: then publish once more and read this process's CPU (getrusage, all
// threads: progress thread, registry) over S idle seconds.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include <tensorhub/tensorhub.h>

#include "bench/common/cpu_time.h"
#include "bench/common/json_line.h"
#include "bench/transfer/shard.h"

namespace {

using thub::bench::JsonLine;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void check(int st, THUB_Context ctx, const std::string& what) {
  if (st >= 0) return;
  char detail[1024] = "";
  (void)THUB_Last_error(ctx, detail, sizeof detail);
  throw std::runtime_error(what + ": " + THUB_Error_string(st) + " | " + detail);
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= list.size()) {
    size_t q = list.find(',', p);
    if (q == std::string::npos) q = list.size();
    if (q > p) out.push_back(list.substr(p, q - p));
    p = q + 1;
  }
  return out;
}

struct Options {
  uint64_t bytes = 1ull << 30;
  std::vector<std::string> layouts{"1", "10", "100", "1000", "8192"};
  std::vector<bool> verify{false, true};
  int iters = 5;
  double idle_s = 0;
  std::string json;
  std::vector<std::string> info;  // KEY=VALUE for THUB_Init
};

void usage() {
  std::puts(
      "usage: thub_bench_publish [--bytes 1G] [--layouts 1,10,100,1000,8192] [--verify off|on|both]\n"
      "                          [--iters 5] [--idle-s S] [--json FILE] [--info KEY=VALUE]...\n"
      "  layouts: T (T equal tensors of --bytes), NxS (N tensors of S bytes), 7b (7B-shaped list)");
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--bytes") o.bytes = thub::bench::parse_size(val());
    else if (a == "--layouts") o.layouts = split(val());
    else if (a == "--verify") {
      std::string v = val();
      if (v == "off") o.verify = {false};
      else if (v == "on") o.verify = {true};
      else if (v == "both") o.verify = {false, true};
      else throw std::runtime_error("--verify is off, on or both");
    } else if (a == "--iters") o.iters = std::max(1, std::atoi(val().c_str()));
    else if (a == "--idle-s") o.idle_s = std::atof(val().c_str());
    else if (a == "--json") o.json = val();
    else if (a == "--info") {
      std::string kv = val();
      if (kv.find('=') == std::string::npos) throw std::runtime_error("--info KEY=VALUE");
      o.info.push_back(kv);
    } else if (a == "--help" || a == "-h") {
      usage();
      std::exit(0);
    } else {
      throw std::runtime_error("unknown option " + a + " (see --help)");
    }
  }
  if (o.layouts.empty()) throw std::runtime_error("no --layouts");
  return o;
}

THUB_Context init(const Options& o, bool verify) {
  THUB_Info info = THUB_INFO_NULL;
  THUB_Info_create(&info);
  THUB_Info_set(info, "registry_listen", "127.0.0.1:0");
  THUB_Info_set(info, "verify", verify ? "true" : "false");
  for (const auto& kv : o.info) {
    size_t eq = kv.find('=');
    THUB_Info_set(info, kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str());
  }
  THUB_Context ctx = THUB_CONTEXT_NULL;
  int st = THUB_Init(info, &ctx);
  THUB_Info_free(&info);
  check(st, ctx, "THUB_Init");
  return ctx;
}

void measure(const Options& o, const std::string& spec, FILE* json) {
  thub::bench::Layout layout = thub::bench::make_layout(spec, o.bytes);
  thub::bench::Shard shard(layout);
  shard.fill(1);
  for (bool verify : o.verify) {
    THUB_Context ctx = init(o, verify);
    THUB_Model m = THUB_MODEL_NULL;
    check(THUB_Open(ctx, "publish-bench", "trainer", 0, 1, THUB_INFO_NULL, &m), ctx, "THUB_Open");
    const auto r0 = Clock::now();
    for (int i = 0; i < shard.tensors(); ++i) {
      std::string name = "t" + std::to_string(i);
      check(THUB_Register(m, name.c_str(), shard.tensor(i), shard.tensor_bytes(i), THUB_MEM_HOST), ctx,
            "THUB_Register");
    }
    const double registering = since(r0);  // every THUB_Register of the layout
    int64_t v = 0;
    auto t0 = Clock::now();
    check(THUB_Publish(m, v++), ctx, "THUB_Publish");
    double first = since(t0);
    check(THUB_Unpublish(m), ctx, "THUB_Unpublish");
    std::vector<double> pub, unpub, pack;
    for (int it = 0; it < o.iters; ++it) {
      t0 = Clock::now();
      check(THUB_Publish(m, v++), ctx, "THUB_Publish");
      pub.push_back(since(t0));
      int64_t pack_us = 0;
      (void)THUB_Model_stat(m, "pack_us", &pack_us);
      pack.push_back(pack_us / 1e3);
      t0 = Clock::now();
      check(THUB_Unpublish(m), ctx, "THUB_Unpublish");
      unpub.push_back(since(t0));
    }
    double idle = -1, idle_wakeups = -1;
    if (o.idle_s > 0) {
      check(THUB_Publish(m, v++), ctx, "THUB_Publish");
      timespec settle{0, 200 * 1000 * 1000};  // let a background staging or hashing end
      nanosleep(&settle, nullptr);
      double c0 = thub::bench::self_cpu_s();
      long s0 = thub::bench::self_context_switches();
      auto w0 = Clock::now();
      timespec ts{static_cast<time_t>(o.idle_s), static_cast<long>((o.idle_s - static_cast<time_t>(o.idle_s)) * 1e9)};
      while (nanosleep(&ts, &ts) != 0) {
      }
      idle = (thub::bench::self_cpu_s() - c0) / since(w0);
      // less this thread's own sleep (one switch)
      idle_wakeups = static_cast<double>(thub::bench::self_context_switches() - s0 - 1) / since(w0);
      check(THUB_Unpublish(m), ctx, "THUB_Unpublish");
    }
    int64_t compacted = 0;
    (void)THUB_Model_stat(m, "compacted_tensors", &compacted);
    check(THUB_Close(&m), ctx, "THUB_Close");
    check(THUB_Finalize(&ctx), ctx, "THUB_Finalize");

    std::printf("%8s %7d %8s %8s %12.3f %12.3f %10.3f %10.3f %9s %9s\n", spec.c_str(), shard.tensors(),
                thub::bench::size_text(layout.bytes()).c_str(), verify ? "on" : "off", first * 1e3, median(pub) * 1e3,
                median(pack), median(unpub) * 1e3,
                idle >= 0 ? (std::to_string(idle * 100).substr(0, 5) + "%").c_str() : "-",
                idle_wakeups >= 0 ? std::to_string(idle_wakeups).substr(0, 5).c_str() : "-");
    JsonLine j;
    j.str("bench", "publish").str("layout", spec).integer("tensors", shard.tensors());
    j.integer("bytes", static_cast<long long>(layout.bytes())).boolean("verify", verify).integer("iters", o.iters);
    j.integer("compacted_tensors", compacted);
    j.num("register_all_s", registering).num("first_publish_s", first).num("publish_s", median(pub));
    j.num("publish_min_s", *std::min_element(pub.begin(), pub.end()));
    j.num("publish_max_s", *std::max_element(pub.begin(), pub.end()));
    j.num("pack_ms", median(pack)).num("unpublish_s", median(unpub)).num("target_publish_s", 0.001);
    j.num("ratio_publish_target", median(pub) / 0.001);
    if (o.idle_s > 0)
      j.num("idle_s", o.idle_s).num("idle_cpu_core_fraction", idle, "%.6f").num("idle_switches_per_s", idle_wakeups, "%.2f");
    std::string s = j.text();
    std::printf("%s\n", s.c_str());
    if (json) {
      std::fprintf(json, "%s\n", s.c_str());
      std::fflush(json);
    }
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options o = parse(argc, argv);
    FILE* json = nullptr;
    if (!o.json.empty() && !(json = std::fopen(o.json.c_str(), "a"))) throw std::runtime_error("cannot open " + o.json);
    std::printf("# thub_bench_publish: THUB_Publish alone (ms, medians of %d; first = the first publish, which\n"
                "# also registers the tensors); pack = the library's pack_us; idle = CPU of this published\n"
                "# process with no reader, in %% of one core, and its context switches per second (wake-ups)\n",
                o.iters);
    std::printf("%8s %7s %8s %8s %12s %12s %10s %10s %9s %9s\n", "layout", "tensors", "bytes", "verify", "first ms",
                "publish ms", "pack ms", "unpub ms", "idle cpu", "switch/s");
    for (const auto& spec : o.layouts) measure(o, spec, json);
    if (json) std::fclose(json);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "thub_bench_publish: %s\n", e.what());
    return 1;
  }
  return 0;
}
