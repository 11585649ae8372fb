// Tiny-tensor compaction on a 7B-transformer-shaped shard: effective replicate bandwidth
// with compaction vs without vs one contiguous buffer of the same total size, host memory,
// two processes over UCX shared memory. Medians of several versions; JSON lines + a table.
//
//   thub_compaction_bench [--layers 32] [--hidden 4096] [--ffn 11008] [--vocab 32000]
//                         [--target 1G] [--iters 7] [--no-bias]
//
// Shapes follow a Llama-style config (bf16): per layer q,k,v,o (hidden x hidden), gate, up
// (ffn x hidden), down (hidden x ffn), q/k/v biases and the input / post-attention norms
// (hidden elements: 8 KiB each); embeddings, lm_head, final norm. The big matrices' row
// counts are divided so that the shard is about --target bytes; every tiny tensor keeps
// its real size and the tensor count is the real one.
#include <sys/wait.h>
#include <tensorhub/tensorhub.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/common/llama_layout.h"
#include "bench/common/pipe_lines.h"

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "thub_compaction_bench: %s\n", what.c_str());
  std::exit(1);
}

namespace {

struct Config : thub::bench::LlamaConfig {
  uint64_t target = 1ull << 30;
  int iters = 7;
};

using Tensor = thub::bench::NamedTensor;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void ok(int st, const char* what, THUB_Context c) {
  if (st >= 0) return;
  char d[1024] = "";
  THUB_Last_error(c, d, sizeof d);
  die(std::string(what) + ": " + THUB_Error_string(st) + " | " + d);
}

uint64_t parse_size(const std::string& s) {
  char* end = nullptr;
  uint64_t v = std::strtoull(s.c_str(), &end, 10);
  switch (end && *end ? *end : ' ') {
    case 'K': case 'k': return v << 10;
    case 'M': case 'm': return v << 20;
    case 'G': case 'g': return v << 30;
    default: return v;
  }
}

using thub::bench::LlamaConfig;
using thub::bench::llama_layout;
using thub::bench::total_bytes;

uint64_t total(const std::vector<Tensor>& t) { return total_bytes(t); }

THUB_Context init(const std::string& registry, const std::string& threshold) {
  THUB_Info info = THUB_INFO_NULL;
  THUB_Info_create(&info);
  if (!registry.empty()) THUB_Info_set(info, "registry", registry.c_str());
  THUB_Info_set(info, "compaction_threshold", threshold.c_str());
  THUB_Context c = THUB_CONTEXT_NULL;
  ok(THUB_Init(info, &c), "THUB_Init", c);
  THUB_Info_free(&info);
  return c;
}

std::vector<char*> alloc_register(THUB_Context c, THUB_Model m, const std::vector<Tensor>& lay, int fill) {
  std::vector<char*> bufs;
  for (const auto& t : lay) {
    char* p = static_cast<char*>(std::malloc(t.bytes));
    if (!p) die("malloc");
    std::memset(p, fill, t.bytes);  // touch every page before timing
    bufs.push_back(p);
    ok(THUB_Register(m, t.name.c_str(), p, t.bytes, THUB_MEM_HOST), "THUB_Register", c);
  }
  return bufs;
}

int64_t stat(THUB_Model m, const char* key) {
  int64_t v = -1;
  THUB_Model_stat(m, key, &v);
  return v;
}

struct Case {
  const char* name;
  const char* threshold;
  bool contiguous;
};

const Case kCases[] = {
    {"compaction", "2M", false},
    {"no_compaction", "0", false},
    {"contiguous", "0", true},
};

// Child: per case, "REGISTRY" -> init, open, register -> "ready"; then per version
// "go" -> THUB_Update -> "t SECONDS"; "end" -> close, finalize.
void child(FILE* in, int out, const Config& cfg, const std::vector<Tensor>& lay) {
  for (const Case& k : kCases) {
    std::string registry = read_line(in);
    THUB_Context c = init(registry, k.threshold);
    THUB_Model m = THUB_MODEL_NULL;
    ok(THUB_Open(c, k.name, "rollout", 0, 1, THUB_INFO_NULL, &m), "THUB_Open", c);
    std::vector<Tensor> mine = k.contiguous ? std::vector<Tensor>{{"all", total(lay)}} : lay;
    auto bufs = alloc_register(c, m, mine, 0);
    write_line(out, "ready");
    for (;;) {
      std::string cmd = read_line(in);
      if (cmd == "end") break;
      int64_t got = -1;
      double t0 = now_s();
      ok(THUB_Update(m, THUB_LATEST, &got), "THUB_Update", c);
      double t = now_s() - t0;
      bool good = true;  // every tensor carries the version's fill byte at both ends
      for (size_t i = 0; i < mine.size(); ++i) {
        good = good && bufs[i][0] == static_cast<char>(got) && bufs[i][mine[i].bytes - 1] == static_cast<char>(got);
      }
      char line[128];
      std::snprintf(line, sizeof line, "%s %.6f %lld", good ? "t" : "bad", t, static_cast<long long>(stat(m, "unpack_us")));
      write_line(out, line);
    }
    ok(THUB_Close(&m), "THUB_Close", c);
    THUB_Finalize(&c);
    for (char* p : bufs) std::free(p);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--layers") cfg.layers = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--hidden") cfg.hidden = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--ffn") cfg.ffn = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--vocab") cfg.vocab = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--target") cfg.target = parse_size(next());
    else if (a == "--iters") cfg.iters = std::max(1, std::atoi(next().c_str()));
    else if (a == "--no-bias") cfg.bias = false;
    else die("unknown argument " + a);
  }
  const uint64_t div = thub::bench::llama_divisor(cfg, cfg.target);
  const auto lay = llama_layout(cfg, div);
  size_t tiny = 0;
  uint64_t tiny_bytes = 0;
  for (const auto& t : lay) {
    if (t.bytes < (2u << 20)) {
      tiny++;
      tiny_bytes += t.bytes;
    }
  }

  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) die("pipe");
  pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    close(to_child[1]);
    close(from_child[0]);
    child(fdopen(to_child[0], "r"), from_child[1], cfg, lay);
    _exit(0);
  }
  close(to_child[0]);
  close(from_child[1]);
  FILE* in = fdopen(from_child[0], "r");
  int out = to_child[1];

  struct Row {
    const char* name;
    double median_s, gbs, pack_ms, unpack_ms;
  };
  std::vector<Row> rows;
  int64_t version = 0;
  for (const Case& k : kCases) {
    THUB_Context c = init("", k.threshold);
    char reg[256] = "";
    THUB_Registry_address(c, reg, sizeof reg);
    THUB_Model m = THUB_MODEL_NULL;
    ok(THUB_Open(c, k.name, "trainer", 0, 1, THUB_INFO_NULL, &m), "THUB_Open", c);
    std::vector<Tensor> mine = k.contiguous ? std::vector<Tensor>{{"all", total(lay)}} : lay;
    auto bufs = alloc_register(c, m, mine, 0);
    write_line(out, reg);
    if (read_line(in) != "ready") die("child not ready");
    std::vector<double> times, packs, unpacks;
    for (int it = 0; it <= cfg.iters; ++it) {  // iteration 0 warms up (first registration, page faults)
      ++version;
      for (size_t i = 0; i < mine.size(); ++i) {
        bufs[i][0] = static_cast<char>(version);
        bufs[i][mine[i].bytes - 1] = static_cast<char>(version);
      }
      ok(THUB_Publish(m, version), "THUB_Publish", c);
      double pack = stat(m, "pack_us") / 1e3;
      write_line(out, "go");
      std::string r = read_line(in);
      if (r.rfind("t ", 0) != 0) die("the replica's bytes are wrong (" + r + ")");
      double t = 0;
      long long unpack_us = 0;
      std::sscanf(r.c_str() + 2, "%lf %lld", &t, &unpack_us);
      if (it > 0) {
        times.push_back(t);
        packs.push_back(pack);
        unpacks.push_back(unpack_us / 1e3);
      }
      ok(THUB_Unpublish(m), "THUB_Unpublish", c);
    }
    write_line(out, "end");
    double med = median(times);
    rows.push_back({k.name, med, total(lay) / med / 1e9, median(packs), median(unpacks)});
    std::printf(
        "{\"bench\":\"compaction\",\"case\":\"%s\",\"tensors\":%zu,\"tiny_tensors\":%zu,\"tiny_bytes\":%llu,"
        "\"bytes\":%llu,\"row_divisor\":%llu,\"iters\":%d,\"median_s\":%.5f,\"gbs\":%.3f,\"pack_ms\":%.3f,"
        "\"unpack_ms\":%.3f}\n",
        k.name, mine.size(), k.contiguous ? 0 : tiny, static_cast<unsigned long long>(k.contiguous ? 0 : tiny_bytes),
        static_cast<unsigned long long>(total(lay)), static_cast<unsigned long long>(div), cfg.iters, med,
        total(lay) / med / 1e9, median(packs), median(unpacks));
    std::fflush(stdout);
    ok(THUB_Close(&m), "THUB_Close", c);
    THUB_Finalize(&c);
    for (char* p : bufs) std::free(p);
  }
  const double base = rows.back().gbs;
  std::printf("\n%zu tensors (%zu below 2 MiB, %llu bytes), %.3f GiB, matrix rows / %llu, medians of %d\n", lay.size(),
              tiny, static_cast<unsigned long long>(tiny_bytes), total(lay) / double(1ull << 30),
              static_cast<unsigned long long>(div), cfg.iters);
  std::printf("%-14s %10s %8s %12s %10s %11s\n", "case", "median s", "GB/s", "x contiguous", "pack ms", "unpack ms");
  for (const Row& r : rows) {
    std::printf("%-14s %10.4f %8.2f %12.3f %10.3f %11.3f\n", r.name, r.median_s, r.gbs, r.gbs / base, r.pack_ms,
                r.unpack_ms);
  }
  close(out);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
