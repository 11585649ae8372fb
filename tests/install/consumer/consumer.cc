// An outside C++17 program against an installed TensorHub, through tensorhub.hpp: the C
// consumer's checks (publish, replicate in the same process, compare, nothing newer), and a
// failure that arrives as tensorhub::Error with its code.
//   consumer_cxx PREFIX
#include <tensorhub/tensorhub.hpp>

#include <cstdio>
#include <vector>

#include "where.h"

int main(int argc, char** argv) {
  if (argc != 2 || !library_is_under(argv[1])) return 1;
  try {
    tensorhub::Context ctx;
    std::vector<double> tw(200000), rw(tw.size());
    for (size_t i = 0; i < tw.size(); ++i) tw[i] = static_cast<double>(i) * 0.25;
    tensorhub::Model trainer = ctx.open("consumer-cxx", "trainer");
    trainer.register_tensor("w", tw.data(), tw.size() * sizeof(double));
    trainer.publish(3);
    tensorhub::Model rollout = ctx.open("consumer-cxx", "rollout");
    rollout.register_tensor("w", rw.data(), rw.size() * sizeof(double));
    if (rollout.replicate() != 3 || rw != tw || rollout.update()) {
      std::fprintf(stderr, "replicate/update gave the wrong outcome\n");
      return 1;
    }
    try {
      rollout.publish(-1);
      std::fprintf(stderr, "publish(-1) succeeded\n");
      return 1;
    } catch (const tensorhub::Error& e) {
      if (e.code() != THUB_ERR_ARG) throw;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer_cxx: %s\n", e.what());
    return 1;
  }
  std::printf("C++ consumer: version 3 replicated byte-exact against the installed library\n");
  return 0;
}
