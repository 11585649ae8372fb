// A fluid model of the data plane, for fan-outs too large to simulate per chunk (8,000
// members x 250 GB): flows move bytes at rates, not packets. Rates are max-min fair over the
// shared resources (NIC directions, datacenter uplinks), recomputed whenever a flow starts,
// ends or changes mode. Pipeline replication is modelled by tying a reader of a partial
// source to that source's own progress: it may hold at most (source's bytes - gap), where
// the gap is the source's counter granularity (the chunk it fills with) plus what moves
// during one counter read; a reader that has caught up runs at its source's fill rate.
// Deterministic: ordered containers, no clocks; time is an argument (nanoseconds).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace thub::scale {

using Ns = int64_t;
using FlowId = uint64_t;  // 0: none

class FluidNetwork {
 public:
  // A shared resource of `bytes_per_ns` (one direction of a NIC or of a DC uplink).
  int add_resource(double bytes_per_ns);
  // A member's buffers of `total` bytes, holding nothing.
  int add_node(double total);
  // The node holds a prefix of `bytes` and is not being filled (complete when bytes == total).
  void set_held(int node, double bytes);

  // Starts a transfer src -> dst from byte `from`, over `resources`. `gap`: see above.
  FlowId start_flow(int src, int dst, double from, double gap, std::vector<int> resources, Ns now);
  // Ends it; the reader keeps the bytes it has (returned), no longer filling.
  double stop_flow(FlowId f, Ns now);

  [[nodiscard]] double node_bytes(int node, Ns now) const;
  [[nodiscard]] bool node_complete(int node) const;
  [[nodiscard]] FlowId fill_of(int node) const { return nodes_[node].fill; }
  [[nodiscard]] std::vector<FlowId> readers_of(int node) const;  // flows whose source is node
  [[nodiscard]] double rate(FlowId f) const { return flows_.at(f).rate; }
  [[nodiscard]] int dst_of(FlowId f) const { return flows_.at(f).dst; }
  [[nodiscard]] bool has_flow(FlowId f) const { return flows_.count(f) > 0; }
  [[nodiscard]] size_t flow_count() const { return flows_.size(); }

  // Recomputes every rate at `now` if anything changed since the last time.
  void settle(Ns now);
  [[nodiscard]] bool dirty() const { return dirty_; }
  // The earliest time at which a flow completes or changes mode (as of the last settle()).
  [[nodiscard]] std::optional<Ns> next_due() const { return due_; }
  // Flows that have reached their end at `now` (the caller stops them); marks the network
  // dirty so that flows whose mode changed at `now` get their new rates.
  [[nodiscard]] std::vector<FlowId> completed(Ns now);

  // Flows whose rate the last settle() changed (started ones included), handed out once: the
  // times at which their bytes reach a given position moved.
  [[nodiscard]] std::vector<FlowId> take_rate_changed() { return std::move(rate_changed_); }

  [[nodiscard]] uint64_t recomputes() const { return recomputes_; }

 private:
  enum class Mode { kBehind, kTracking, kWaiting };
  struct Flow {
    int src = 0, dst = 0;
    size_t ix = 0;       // its place in recompute()'s arrays
    std::vector<int> res;
    double pos = 0;      // bytes the reader holds at t0
    Ns t0 = 0;
    double rate = 0;     // bytes per ns
    double gap = 0;
    Mode mode = Mode::kBehind;
    double prev_rate = -1;  // before the recompute running
  };
  struct Node {
    double total = 0;
    double held = 0;     // when not filling
    FlowId fill = 0;     // the flow filling it, if any
    Flow* filler = nullptr;  // that flow (std::map nodes do not move)
  };
  struct Resource {
    double cap = 0;      // bytes per ns
  };

  [[nodiscard]] double pos_at(const Flow& f, Ns now) const;
  // The most a reader of `src` may hold now (its limit); total when src is complete.
  [[nodiscard]] double limit(const Flow& f, Ns now) const;
  void recompute(Ns now);
  [[nodiscard]] std::optional<Ns> compute_due(Ns now) const;

  std::vector<Resource> res_;
  std::vector<Node> nodes_;
  std::map<FlowId, Flow> flows_;
  std::map<int, std::vector<FlowId>> readers_;  // src node -> flows reading it (ids ascending)
  FlowId next_flow_ = 1;
  std::vector<FlowId> rate_changed_;
  std::vector<double> rem_;  // recompute()'s scratch, per resource
  std::vector<int> cnt_;
  std::vector<char> full_;
  bool dirty_ = false;
  std::optional<Ns> due_;  // next_due() as of the last recompute
  uint64_t recomputes_ = 0;
};

}  // namespace thub::scale
