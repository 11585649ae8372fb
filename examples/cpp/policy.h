// The example model of trainer_rollout.c, for the C++ examples (no TensorHub in here): int32
// tensors embed.weight and head.weight (MIB MiB together, less 64 bytes) and head.bias (16
// elements); element i of tensor t at version v is (v*1000003 + t*7919 + i*31) mod 2147483647,
// so a rollout of any of the languages can check what a trainer of any other sent.
#ifndef THUB_EXAMPLES_CPP_POLICY_H
#define THUB_EXAMPLES_CPP_POLICY_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

struct Policy {
  std::vector<std::string> names{"embed.weight", "head.weight", "head.bias"};
  std::vector<std::vector<int32_t>> data;

  explicit Policy(long mib) {
    size_t half = static_cast<size_t>(mib) * 262144 / 2;  // 262144 int32 per MiB
    data = {std::vector<int32_t>(half), std::vector<int32_t>(half - 16), std::vector<int32_t>(16)};
  }
  static int32_t value(int64_t v, size_t t, size_t i) {
    return static_cast<int32_t>((v * 1000003 + static_cast<int64_t>(t) * 7919 + static_cast<int64_t>(i) * 31) %
                                2147483647);
  }
  // A training step: the weights of version v.
  void train(int64_t v) {
    for (size_t t = 0; t < data.size(); ++t)
      for (size_t i = 0; i < data[t].size(); ++i) data[t][i] = value(v, t, i);
  }
  // Stands in for a generation batch: reads every weight, checking it against version v.
  bool generate(int64_t v) const {
    for (size_t t = 0; t < data.size(); ++t) {
      for (size_t i = 0; i < data[t].size(); ++i) {
        if (data[t][i] != value(v, t, i)) {
          std::fprintf(stderr, "version %lld: %s[%zu] is %d, expected %d\n", static_cast<long long>(v),
                       names[t].c_str(), i, data[t][i], value(v, t, i));
          return false;
        }
      }
    }
    return true;
  }
};

#endif
