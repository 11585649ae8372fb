// Staged GPU->GPU replicate between two processes on one GPU (copy mode: device -> pinned
// host -> UCX shared memory -> pinned host -> device, pipelined), against the pinned
// host<->device copy bandwidth measured in the same run. JSON lines, then a table.
//
//   thub_gpu_replicate_bench [--sizes 1G,2G,4G,8G] [--iters 3] [--tensor 256M]
//
// The parent publishes (embedded registry); a forked child (forked before any CUDA call)
// replicates with THUB_Update; they step in lock-step over pipes. Time per version: from
// the start of THUB_Publish to the end of the child's THUB_Update (staging included).
#include <cuda_runtime_api.h>
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

#include "bench/common/pipe_lines.h"

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "thub_gpu_replicate_bench: %s\n", what.c_str());
  std::exit(1);
}

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(e));
}

void thub_ok(int st, const char* what, THUB_Context c) {
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

THUB_Context init(const std::string& registry) {
  THUB_Info info = THUB_INFO_NULL;
  THUB_Info_create(&info);
  if (!registry.empty()) THUB_Info_set(info, "registry", registry.c_str());
  THUB_Info_set(info, "transfer_mode", "copy");
  THUB_Context c = THUB_CONTEXT_NULL;
  thub_ok(THUB_Init(info, &c), "THUB_Init", c);
  THUB_Info_free(&info);
  return c;
}

// Tensors of `tensor` bytes (the last one smaller) plus 64 norm-like tiny ones of 8 KiB.
std::vector<size_t> layout_of(uint64_t bytes, uint64_t tensor) {
  std::vector<size_t> v(64, 8192);
  for (uint64_t left = bytes - 64 * 8192; left > 0;) {
    uint64_t n = std::min(left, tensor);
    v.push_back(n);
    left -= n;
  }
  return v;
}

std::vector<void*> alloc_register(THUB_Context c, THUB_Model m, const std::vector<size_t>& sizes) {
  std::vector<void*> ptrs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    void* p = nullptr;
    cuda_ok(cudaMalloc(&p, sizes[i]), "cudaMalloc");
    ptrs.push_back(p);
    std::string name = "t" + std::to_string(i);
    thub_ok(THUB_Register(m, name.c_str(), p, sizes[i], THUB_MEM_CUDA), "THUB_Register", c);
  }
  return ptrs;
}

// Pinned host<->device bandwidth (GB/s) over `bytes` (in pieces of at most 1 GiB).
void copy_bandwidth(uint64_t bytes, double* d2h, double* h2d) {
  uint64_t piece = std::min<uint64_t>(bytes, 1ull << 30);
  void *dev = nullptr, *host = nullptr;
  cuda_ok(cudaMalloc(&dev, piece), "cudaMalloc");
  cuda_ok(cudaHostAlloc(&host, piece, cudaHostAllocPortable), "cudaHostAlloc");
  cudaStream_t s;
  cuda_ok(cudaStreamCreate(&s), "cudaStreamCreate");
  auto run = [&](cudaMemcpyKind k) {
    std::vector<double> t;
    for (int it = 0; it < 3; ++it) {
      double t0 = now_s();
      for (uint64_t off = 0; off < bytes; off += piece) {
        uint64_t n = std::min(piece, bytes - off);
        if (k == cudaMemcpyDeviceToHost) cuda_ok(cudaMemcpyAsync(host, dev, n, k, s), "D2H");
        else cuda_ok(cudaMemcpyAsync(dev, host, n, k, s), "H2D");
      }
      cuda_ok(cudaStreamSynchronize(s), "sync");
      t.push_back(now_s() - t0);
    }
    return bytes / median(t) / 1e9;
  };
  *d2h = run(cudaMemcpyDeviceToHost);
  *h2d = run(cudaMemcpyHostToDevice);
  cudaStreamDestroy(s);
  cudaFreeHost(host);
  cudaFree(dev);
}

// The replicating child: for each size, open, register, then "go V" -> update -> "done".
void child(FILE* in, int out, const std::vector<uint64_t>& sizes, uint64_t tensor, int iters) {
  std::string registry = read_line(in);
  THUB_Context c = init(registry);
  for (uint64_t bytes : sizes) {
    auto lay = layout_of(bytes, tensor);
    THUB_Model m = THUB_MODEL_NULL;
    std::string model = "bench-" + std::to_string(bytes);
    thub_ok(THUB_Open(c, model.c_str(), "rollout", 0, 1, THUB_INFO_NULL, &m), "THUB_Open", c);
    auto ptrs = alloc_register(c, m, lay);
    write_line(out, "ready");
    for (int it = 0; it < iters; ++it) {
      std::string go = read_line(in);
      int64_t got = -1;
      thub_ok(THUB_Update(m, THUB_LATEST, &got), "THUB_Update", c);
      // Spot check: first and last byte of every tensor carry the version's fill value.
      bool good = true;
      for (size_t i = 0; i < lay.size(); ++i) {
        unsigned char a = 0, b = 0;
        cuda_ok(cudaMemcpy(&a, ptrs[i], 1, cudaMemcpyDeviceToHost), "check");
        cuda_ok(cudaMemcpy(&b, static_cast<char*>(ptrs[i]) + lay[i] - 1, 1, cudaMemcpyDeviceToHost), "check");
        good = good && a == static_cast<unsigned char>(got) && b == static_cast<unsigned char>(got);
      }
      write_line(out, good ? "done" : "bad");
    }
    thub_ok(THUB_Close(&m), "THUB_Close", c);
    for (void* p : ptrs) cudaFree(p);
  }
  THUB_Finalize(&c);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint64_t> sizes = {1ull << 30, 2ull << 30, 4ull << 30, 8ull << 30};
  uint64_t tensor = 256ull << 20;
  int iters = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--sizes") {
      sizes.clear();
      size_t p = 0;
      while (p <= v.size()) {
        size_t q = v.find(',', p);
        if (q == std::string::npos) q = v.size();
        sizes.push_back(parse_size(v.substr(p, q - p)));
        p = q + 1;
      }
    } else if (a == "--iters") {
      iters = std::max(1, std::atoi(v.c_str()));
    } else if (a == "--tensor") {
      tensor = parse_size(v);
    } else {
      die("unknown argument " + a);
    }
  }
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) die("pipe");
  pid_t pid = fork();  // before any CUDA call: a forked CUDA context is unusable
  if (pid < 0) die("fork");
  if (pid == 0) {
    close(to_child[1]);
    close(from_child[0]);
    child(fdopen(to_child[0], "r"), from_child[1], sizes, tensor, iters);
    _exit(0);
  }
  close(to_child[0]);
  close(from_child[1]);
  FILE* in = fdopen(from_child[0], "r");
  int out = to_child[1];

  int dev = 0;
  cudaDeviceProp prop{};
  cuda_ok(cudaGetDevice(&dev), "cudaGetDevice");
  cuda_ok(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  THUB_Context c = init("");
  char reg[256] = "";
  THUB_Registry_address(c, reg, sizeof reg);
  write_line(out, reg);

  struct Row {
    uint64_t bytes;
    double staged_gbs, d2h_gbs, h2d_gbs;
  };
  std::vector<Row> rows;
  int64_t version = 0;
  for (uint64_t bytes : sizes) {
    double d2h = 0, h2d = 0;
    copy_bandwidth(bytes, &d2h, &h2d);
    auto lay = layout_of(bytes, tensor);
    THUB_Model m = THUB_MODEL_NULL;
    std::string model = "bench-" + std::to_string(bytes);
    thub_ok(THUB_Open(c, model.c_str(), "trainer", 0, 1, THUB_INFO_NULL, &m), "THUB_Open", c);
    auto ptrs = alloc_register(c, m, lay);
    if (read_line(in) != "ready") die("child not ready");
    std::vector<double> times;
    for (int it = 0; it < iters; ++it) {
      ++version;
      for (size_t i = 0; i < lay.size(); ++i) {
        cuda_ok(cudaMemset(ptrs[i], static_cast<int>(version & 0xff), lay[i]), "cudaMemset");
      }
      cuda_ok(cudaDeviceSynchronize(), "sync");
      double t0 = now_s();
      thub_ok(THUB_Publish(m, version), "THUB_Publish", c);
      write_line(out, "go " + std::to_string(version));
      std::string r = read_line(in);
      double t = now_s() - t0;
      if (r != "done") die("the replica's bytes are wrong (" + r + ")");
      times.push_back(t);
      thub_ok(THUB_Unpublish(m), "THUB_Unpublish", c);
    }
    double staged = bytes / median(times) / 1e9;
    rows.push_back({bytes, staged, d2h, h2d});
    std::printf(
        "{\"bench\":\"gpu_staged_replicate\",\"gpu\":\"%s\",\"bytes\":%llu,\"tensors\":%zu,\"iters\":%d,"
        "\"median_s\":%.4f,\"staged_gbs\":%.2f,\"pinned_d2h_gbs\":%.2f,\"pinned_h2d_gbs\":%.2f,"
        "\"ratio_vs_slower_copy\":%.3f}\n",
        prop.name, static_cast<unsigned long long>(bytes), lay.size(), iters, median(times), staged, d2h, h2d,
        staged / std::min(d2h, h2d));
    std::fflush(stdout);
    thub_ok(THUB_Close(&m), "THUB_Close", c);
    for (void* p : ptrs) cudaFree(p);
  }
  std::printf("\n%-10s %12s %12s %12s %10s\n", "size", "staged GB/s", "D2H GB/s", "H2D GB/s", "ratio");
  for (const Row& r : rows) {
    std::printf("%-10s %12.2f %12.2f %12.2f %10.3f\n", (std::to_string(r.bytes >> 30) + " GiB").c_str(), r.staged_gbs,
                r.d2h_gbs, r.h2d_gbs, r.staged_gbs / std::min(r.d2h_gbs, r.h2d_gbs));
  }
  THUB_Finalize(&c);
  close(out);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
