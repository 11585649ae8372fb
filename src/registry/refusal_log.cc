#include "src/registry/refusal_log.h"

#include <cstdio>

namespace thub::registry {

void RefusalLog::add(const std::string& kind, const std::string& line, int64_t now_ms) {
  ++total_;
  Kind& k = kinds_[kind];
  if (k.written && now_ms - k.last_ms < interval_ms_) {
    ++k.left_out;
    return;
  }
  if (k.left_out > 0) {
    std::fprintf(stderr, "tensorhub-registry: %s (and %llu more like it left out of this log)\n", line.c_str(),
                 static_cast<unsigned long long>(k.left_out));
  } else {
    std::fprintf(stderr, "tensorhub-registry: %s\n", line.c_str());
  }
  std::fflush(stderr);
  k.written = true;
  k.last_ms = now_ms;
  k.left_out = 0;
}

}  // namespace thub::registry
