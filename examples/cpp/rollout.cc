// rollout: the standalone rollout loop in C++ (tensorhub.hpp): replicate the latest version,
// then generate with update(latest) between batches until it holds version STEPS. Prints
// "holding V" for every version it gets, so that trainer_rollout.c's trainer can drive it:
//
//   trainer_rollout trainer STEPS MIB ./rollout_cpp      (starts `rollout_cpp STEPS MIB`)
//   TENSORHUB_REGISTRY=host:port rollout_cpp [STEPS [MIB]]
//
// TensorHub lines this integration adds (lines that name tensorhub or call a Model's method):
// 7: the include, the context, open, register, replicate, update, and the catch of
// tensorhub::Error.
#include <tensorhub/tensorhub.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "policy.h"

int main(int argc, char** argv) {
  const int64_t steps = argc > 1 ? std::atoll(argv[1]) : 3;
  const long mib = argc > 2 ? std::atol(argv[2]) : 8;
  if (steps < 1 || mib < 1) {
    std::fprintf(stderr, "usage: TENSORHUB_REGISTRY=host:port rollout_cpp [STEPS [MIB]]\n");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    Policy w(mib);
    tensorhub::Context ctx;  // the registry comes from TENSORHUB_REGISTRY
    tensorhub::Model m = ctx.open("policy", "rollout-cpp-" + std::to_string(getpid()));
    for (size_t t = 0; t < w.names.size(); ++t)
      m.register_tensor(w.names[t], w.data[t].data(), w.data[t].size() * sizeof(int32_t));

    int64_t v = m.replicate(tensorhub::latest);
    std::printf("holding %lld\n", static_cast<long long>(v));
    while (v < steps) {
      if (!w.generate(v)) return 1;
      if (auto newer = m.update(tensorhub::latest)) {  // std::nullopt: keep generating with v
        v = *newer;
        std::printf("holding %lld\n", static_cast<long long>(v));
      }
    }
    if (!w.generate(v)) return 1;
  } catch (const tensorhub::Error& e) {
    std::fprintf(stderr, "rollout_cpp: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "rollout_cpp: done, held versions up to %lld and checked every element\n",
               static_cast<long long>(steps));
  return 0;
}
