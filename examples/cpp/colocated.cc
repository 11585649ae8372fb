// colocated: the co-located loop in C++ (tensorhub.hpp). Trainer and rollout share one
// process, as they share the GPUs when co-located: each step publishes the trainer's weights,
// the rollout takes them and generates, the trainer unpublishes (returns once nobody reads
// its buffers) and trains the next version in place.
//
//   colocated [STEPS [MIB]]
//
// TensorHub lines this integration adds (lines that name tensorhub or call a Model's method):
// 10: the include, the context, two opens, two registers, publish, replicate-or-update,
// unpublish, and the catch of tensorhub::Error.
#include <tensorhub/tensorhub.hpp>

#include <cstdio>
#include <cstdlib>

#include "policy.h"

int main(int argc, char** argv) {
  const int64_t steps = argc > 1 ? std::atoll(argv[1]) : 3;
  const long mib = argc > 2 ? std::atol(argv[2]) : 8;
  if (steps < 1 || mib < 1) {
    std::fprintf(stderr, "usage: colocated [STEPS [MIB]]\n");
    return 2;
  }
  try {
    Policy trained(mib), served(mib);  // the trainer's weights and the inference engine's
    tensorhub::Context ctx;            // no registry given: an embedded one in this process
    tensorhub::Model trainer = ctx.open("policy", "trainer");
    tensorhub::Model rollout = ctx.open("policy", "rollout-0");
    for (size_t t = 0; t < trained.names.size(); ++t) {
      trainer.register_tensor(trained.names[t], trained.data[t].data(), trained.data[t].size() * sizeof(int32_t));
      rollout.register_tensor(served.names[t], served.data[t].data(), served.data[t].size() * sizeof(int32_t));
    }
    trained.train(1);
    for (int64_t v = 1; v <= steps; ++v) {
      trainer.publish(v);  // no data moves
      int64_t got = v == 1 ? rollout.replicate(tensorhub::latest) : rollout.update(tensorhub::latest).value_or(-1);
      if (got != v || !served.generate(v)) {
        std::fprintf(stderr, "colocated: step %lld: the rollout holds %lld\n", static_cast<long long>(v),
                     static_cast<long long>(got));
        return 1;
      }
      std::printf("colocated: step %lld generated with version %lld\n", static_cast<long long>(v),
                  static_cast<long long>(got));
      trainer.unpublish();  // now the trainer may overwrite its weights
      if (v < steps) trained.train(v + 1);
    }
  } catch (const tensorhub::Error& e) {
    std::fprintf(stderr, "colocated: %s\n", e.what());
    return 1;
  }
  std::printf("colocated: done, %lld versions, every weight checked\n", static_cast<long long>(steps));
  return 0;
}
