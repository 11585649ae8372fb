// The fluid network alone: max-min fair rates, and readers of a partial source held to that
// source's progress (tests/scale/fluid_network.h).
#include "tests/scale/fluid_network.h"

#include <gtest/gtest.h>

namespace thub::scale {
namespace {

constexpr double kTotal = 1e9;  // bytes per node
constexpr Ns kSec = 1'000'000'000;

// Runs the network until nothing is due, stopping flows as they complete; returns each
// node's completion time (-1: never).
std::vector<Ns> run(FluidNetwork& net, int nodes, Ns now = 0) {
  std::vector<Ns> done(static_cast<size_t>(nodes), -1);
  for (int guard = 0; guard < 10000; ++guard) {
    net.settle(now);
    auto due = net.next_due();
    if (!due) break;
    now = *due;
    for (FlowId f : net.completed(now)) {
      int d = net.dst_of(f);
      (void)net.stop_flow(f, now);
      net.set_held(d, kTotal);
      done[static_cast<size_t>(d)] = now;
    }
  }
  return done;
}

TEST(FluidNetworkTest, TwoFlowsShareASenderNic) {
  FluidNetwork net;
  int tx = net.add_resource(1.0);  // 1 byte/ns = 1 GB/s
  int rx1 = net.add_resource(1.0), rx2 = net.add_resource(1.0);
  int src = net.add_node(kTotal), a = net.add_node(kTotal), b = net.add_node(kTotal);
  net.set_held(src, kTotal);
  net.start_flow(src, a, 0, 0, {tx, rx1}, 0);
  net.start_flow(src, b, 0, 0, {tx, rx2}, 0);
  auto done = run(net, 3);
  EXPECT_NEAR(static_cast<double>(done[1]), 2.0 * kSec, 1e3);
  EXPECT_NEAR(static_cast<double>(done[2]), 2.0 * kSec, 1e3);
}

TEST(FluidNetworkTest, MaxMinGivesTheUnconstrainedFlowTheRest) {
  FluidNetwork net;
  int shared = net.add_resource(1.0), narrow = net.add_resource(0.25), wide = net.add_resource(10.0);
  int src = net.add_node(kTotal), a = net.add_node(kTotal), b = net.add_node(kTotal);
  net.set_held(src, kTotal);
  FlowId fa = net.start_flow(src, a, 0, 0, {shared, wide}, 0);
  FlowId fb = net.start_flow(src, b, 0, 0, {shared, narrow}, 0);
  net.settle(0);
  EXPECT_NEAR(net.rate(fb), 0.25, 1e-9);
  EXPECT_NEAR(net.rate(fa), 0.75, 1e-9);
}

// trainer -> a (complete source) -> b (partial source): b follows a one gap behind and ends
// gap / rate after it, not a whole transfer later.
TEST(FluidNetworkTest, ReaderOfAPartialSourceFollowsItsProgress) {
  FluidNetwork net;
  std::vector<int> tx, rx;
  for (int i = 0; i < 3; ++i) {
    tx.push_back(net.add_resource(1.0));
    rx.push_back(net.add_resource(1.0));
  }
  int t = net.add_node(kTotal), a = net.add_node(kTotal), b = net.add_node(kTotal);
  net.set_held(t, kTotal);
  const double gap = 4e6;
  net.start_flow(t, a, 0, 0, {tx[0], rx[1]}, 0);
  FlowId fb = net.start_flow(a, b, 0, gap, {tx[1], rx[2]}, 0);
  net.settle(0);
  EXPECT_EQ(net.rate(fb), 0.0);  // a holds less than the gap: b waits
  auto done = run(net, 3);
  EXPECT_NEAR(static_cast<double>(done[1]), 1.0 * kSec, 1e3);
  EXPECT_NEAR(static_cast<double>(done[2]), 1.0 * kSec + gap, 1e4);
}

// A partial source whose own transfer stops holds its readers once they catch up.
TEST(FluidNetworkTest, ReaderStallsWhenItsSourceStops) {
  FluidNetwork net;
  std::vector<int> tx, rx;
  for (int i = 0; i < 3; ++i) {
    tx.push_back(net.add_resource(1.0));
    rx.push_back(net.add_resource(1.0));
  }
  int t = net.add_node(kTotal), a = net.add_node(kTotal), b = net.add_node(kTotal);
  net.set_held(t, kTotal);
  FlowId fa = net.start_flow(t, a, 0, 0, {tx[0], rx[1]}, 0);
  FlowId fb = net.start_flow(a, b, 0, 1e6, {tx[1], rx[2]}, 0);
  net.settle(0);
  EXPECT_EQ(net.rate(fb), 0.0);  // until a holds the gap
  auto due = net.next_due();
  ASSERT_TRUE(due);
  EXPECT_TRUE(net.completed(*due).empty());
  net.settle(*due);
  EXPECT_NEAR(net.rate(fb), 1.0, 1e-9);
  const Ns half = kSec / 2;
  (void)net.stop_flow(fa, half);  // a holds half the shard and gets nothing more
  net.settle(half);
  EXPECT_EQ(net.rate(fb), 0.0);
  EXPECT_NEAR(net.node_bytes(b, half), kTotal / 2 - 1e6, 1e4);
  EXPECT_FALSE(net.next_due());
}

// A slow link upstream slows the whole chain behind it (rates are tied, not just capped
// per link).
TEST(FluidNetworkTest, ChainRunsAtItsSlowestLink) {
  FluidNetwork net;
  int slow = net.add_resource(0.5);
  std::vector<int> tx, rx;
  for (int i = 0; i < 4; ++i) {
    tx.push_back(net.add_resource(1.0));
    rx.push_back(net.add_resource(1.0));
  }
  std::vector<int> n;
  for (int i = 0; i < 4; ++i) n.push_back(net.add_node(kTotal));
  net.set_held(n[0], kTotal);
  net.start_flow(n[0], n[1], 0, 0, {tx[0], slow, rx[1]}, 0);
  net.start_flow(n[1], n[2], 0, 1e6, {tx[1], rx[2]}, 0);
  net.start_flow(n[2], n[3], 0, 1e6, {tx[2], rx[3]}, 0);
  auto done = run(net, 4);
  EXPECT_NEAR(static_cast<double>(done[1]), 2.0 * kSec, 1e3);
  EXPECT_GT(done[3], done[2]);
  EXPECT_LT(static_cast<double>(done[3]), 2.0 * kSec + 3e6);  // then at 1 byte/ns: gaps only
}

}  // namespace
}  // namespace thub::scale
