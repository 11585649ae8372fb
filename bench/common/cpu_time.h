// CPU time of processes, for "CPU seconds per GB moved" beside every bandwidth
// (speed bought by spinning a trainer's core is not speed).
#pragma once

#include <dirent.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace thub::bench {

// User + system CPU seconds of this process, all its threads (UCX progress threads too).
inline double self_cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// Context switches of this process, all its threads: the voluntary ones (a thread that sleeps,
// then wakes) and the others. Where a wake-up costs more than the work it wakes for (a VM
// whose vCPU halts between them), an idle process's CPU follows these.
inline long self_context_switches() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_nvcsw + ru.ru_nivcsw;
}

// CPU seconds another process has run so far: the sum over its threads of
// /proc/PID/task/TID/schedstat's first field (nanoseconds; /proc/PID/stat counts 10 ms
// ticks, too coarse for a window of a few hundred ms). Negative when the process is gone.
inline double pid_cpu_s(pid_t pid) {
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return -1;
  double sum = 0;
  int seen = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string f = dir + "/" + e->d_name + "/schedstat";
    if (FILE* fp = std::fopen(f.c_str(), "r")) {
      unsigned long long ns = 0;
      if (std::fscanf(fp, "%llu", &ns) == 1) {
        sum += static_cast<double>(ns) * 1e-9;
        seen++;
      }
      std::fclose(fp);
    }
  }
  closedir(d);
  return seen ? sum : -1;
}

}  // namespace thub::bench
