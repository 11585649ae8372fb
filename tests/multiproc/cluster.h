// Shared set-up of the multi-process tests: a trainer that publishes and rollouts that
// replicate, each a real thub_peer process.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/multiproc/peer_process.h"

namespace thub::test {

// Layout with a 0-byte tensor, tiny ones and large ones that span several chunks.
inline const char* kLayout = "4194304,0,100,1,9000000,65536,3000001";

struct Cluster {
  std::map<std::string, std::string> env;
  std::unique_ptr<PeerProcess> trainer;
  std::string registry;
  std::vector<std::unique_ptr<PeerProcess>> rollouts;

  // Where the peers' tensors live ("memory" of peer.c: "cuda" in thub_peer_cuda; "" leaves the
  // peer's default, host memory).
  std::string memory;

  explicit Cluster(std::map<std::string, std::string> e = {}) : env(std::move(e)) {
    env.emplace("TENSORHUB_VERIFY", "1");
  }

  // Registers `layout` as tensors t0, t1, ... of `p`, where `memory` says.
  void add_tensors(PeerProcess& p, const std::string& layout) {
    if (!memory.empty()) {
      std::string r = p.cmd("memory " + memory);
      ASSERT_TRUE(ok(r)) << r;
    }
    std::string r = p.cmd("tensors " + layout);
    ASSERT_TRUE(ok(r)) << r;
  }

  // Starts the trainer (embedded registry), registers `layout`, fills with `seed`, publishes `version`.
  void start_trainer(const std::string& layout, int seed, int version, const std::string& init_args = "") {
    trainer = std::make_unique<PeerProcess>(env);
    std::string r = trainer->cmd("init " + init_args);
    ASSERT_TRUE(ok(r)) << r;
    registry = word(r, 1);
    ASSERT_FALSE(registry.empty());
    ASSERT_TRUE(ok(trainer->cmd("open policy trainer 0 1"))) << "open";
    ASSERT_NO_FATAL_FAILURE(add_tensors(*trainer, layout));
    ASSERT_TRUE(ok(trainer->cmd("fill " + std::to_string(seed))));
    r = trainer->cmd("publish " + std::to_string(version));
    ASSERT_TRUE(ok(r)) << r;
  }

  // Starts a rollout connected to the trainer's registry, opened and registered.
  PeerProcess& add_rollout(const std::string& name, const std::string& layout, const std::string& open_args = "",
                           const std::string& init_args = "") {
    auto e = env;
    e["TENSORHUB_REGISTRY"] = registry;
    rollouts.push_back(std::make_unique<PeerProcess>(e));
    PeerProcess& p = *rollouts.back();
    std::string r = p.cmd("init " + init_args);
    EXPECT_TRUE(ok(r)) << r;
    r = p.cmd("open policy " + name + " 0 1 " + open_args);
    EXPECT_TRUE(ok(r)) << r;
    add_tensors(p, layout);
    return p;
  }
};

// One of a peer's counters (THUB_Model_stat); -1 (and a test failure) if it cannot be read.
inline int64_t stat(PeerProcess& p, const std::string& key) {
  std::string r = p.cmd("stat " + key);
  EXPECT_TRUE(ok(r)) << r;
  return ok(r) ? std::stoll(word(r, 1)) : -1;
}

// Polls a peer's counter until `pred` holds (a state condition, not a speed limit: gives up
// only after `limit_s`, so that a broken build fails instead of hanging).
template <typename Pred>
bool wait_for_stat(PeerProcess& p, const std::string& key, Pred pred, int limit_s = 60) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
  while (std::chrono::steady_clock::now() < deadline) {
    std::string r = p.cmd("stat " + key);
    if (ok(r) && pred(std::stoll(word(r, 1)))) return true;
  }
  return false;
}

inline int64_t ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t).count();
}

// Asks `line` until the reply's version (third word) is `want`, at most `limit_s`; every
// other answer is kept, in order, for the failure message.
inline bool until_version(PeerProcess& p, const std::string& line, const std::string& want, std::string* seen,
                          int limit_s = 30) {
  auto t0 = std::chrono::steady_clock::now();
  while (ms_since(t0) < limit_s * 1000) {
    std::string r = p.cmd(line);
    if (ok(r) && word(r, 2) == want) return true;
    if (seen->size() < 2000) *seen += "[" + r + "] ";
    ::poll(nullptr, 0, 100);
  }
  return false;
}

}  // namespace thub::test
