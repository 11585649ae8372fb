#include "tests/scale/fluid_network.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace thub::scale {

namespace {
// Positions within this many bytes count as equal (a nanosecond at 400 Gbit/s is 50 bytes;
// event times are rounded up to whole nanoseconds).
constexpr double kEps = 4096;
// A resource with less than this share of its capacity left is saturated.
constexpr double kSaturated = 1e-9;
}  // namespace

int FluidNetwork::add_resource(double bytes_per_ns) {
  if (!(bytes_per_ns > 0)) throw std::invalid_argument("resource capacity must be > 0");
  res_.push_back(Resource{bytes_per_ns});
  return static_cast<int>(res_.size()) - 1;
}

int FluidNetwork::add_node(double total) {
  nodes_.push_back(Node{total, 0, 0});
  return static_cast<int>(nodes_.size()) - 1;
}

void FluidNetwork::set_held(int node, double bytes) {
  Node& n = nodes_.at(node);
  if (n.fill) throw std::logic_error("set_held on a node being filled");
  n.held = bytes;
  dirty_ = true;
}

FlowId FluidNetwork::start_flow(int src, int dst, double from, double gap, std::vector<int> resources, Ns now) {
  Node& d = nodes_.at(dst);
  if (d.fill) throw std::logic_error("start_flow: the reader is already being filled");
  FlowId id = next_flow_++;
  Flow f;
  f.src = src;
  f.dst = dst;
  f.res = std::move(resources);
  f.pos = from;
  f.t0 = now;
  f.gap = gap;
  d.filler = &flows_.emplace(id, std::move(f)).first->second;
  d.fill = id;
  readers_[src].push_back(id);
  dirty_ = true;
  return id;
}

double FluidNetwork::stop_flow(FlowId id, Ns now) {
  auto it = flows_.find(id);
  if (it == flows_.end()) throw std::logic_error("stop_flow: no such flow");
  const Flow& f = it->second;
  double pos = std::min(pos_at(f, now), nodes_[f.dst].total);
  Node& d = nodes_[f.dst];
  d.fill = 0;
  d.filler = nullptr;
  d.held = pos;
  auto& rs = readers_[f.src];
  rs.erase(std::find(rs.begin(), rs.end(), id));
  if (rs.empty()) readers_.erase(f.src);
  flows_.erase(it);
  dirty_ = true;
  return pos;
}

double FluidNetwork::pos_at(const Flow& f, Ns now) const {
  return f.pos + f.rate * static_cast<double>(now - f.t0);
}

double FluidNetwork::node_bytes(int node, Ns now) const {
  const Node& n = nodes_.at(node);
  return n.fill ? std::min(pos_at(*n.filler, now), n.total) : n.held;
}

bool FluidNetwork::node_complete(int node) const {
  const Node& n = nodes_.at(node);
  return !n.fill && n.held >= n.total;
}

std::vector<FlowId> FluidNetwork::readers_of(int node) const {
  auto it = readers_.find(node);
  return it == readers_.end() ? std::vector<FlowId>{} : it->second;
}

double FluidNetwork::limit(const Flow& f, Ns now) const {
  const Node& s = nodes_[f.src];
  if (!s.fill) return s.held >= s.total ? s.total : s.held - f.gap;
  return pos_at(*s.filler, now) - f.gap;
}

void FluidNetwork::settle(Ns now) {
  if (!dirty_) return;
  recompute(now);
  due_ = compute_due(now);
  dirty_ = false;
}

// Max-min fairness by progressive filling: every unfrozen flow's rate rises together; a flow
// freezes when one of its resources is full, and so does every flow that tracks it (a reader
// that has caught up with a partial source cannot go faster than that source is filled).
// Flows waiting for their source to get ahead, or tracking a source nobody fills, get 0.
void FluidNetwork::recompute(Ns now) {
  ++recomputes_;
  const size_t n = flows_.size();
  std::vector<Flow*> fl;
  fl.reserve(n);
  for (auto& [id, f] : flows_) {
    f.pos = std::min(pos_at(f, now), nodes_[f.dst].total);
    f.t0 = now;
    f.prev_rate = f.rate;
    f.ix = fl.size();
    fl.push_back(&f);
  }
  // Modes, and the flow each tracking flow follows (its source's fill).
  std::vector<long> up(n, -1);
  for (size_t i = 0; i < n; ++i) {
    Flow& f = *fl[i];
    const Node& s = nodes_[f.src];
    if (!s.fill && s.held >= s.total) {
      f.mode = Mode::kBehind;
      continue;
    }
    double lim = limit(f, now);
    f.mode = f.pos < lim - kEps ? Mode::kBehind : f.pos > lim + kEps ? Mode::kWaiting : Mode::kTracking;
    if (f.mode == Mode::kTracking && s.fill) up[i] = static_cast<long>(s.filler->ix);
  }
  // Zero rate: waiting, tracking an unfilled source, or tracking a flow at zero (chains).
  std::vector<char> state(n, 0);  // 0 unknown, 1 zero, 2 free
  std::vector<size_t> path;
  for (size_t i = 0; i < n; ++i) {
    size_t cur = i;
    path.clear();
    while (state[cur] == 0) {
      const Flow& f = *fl[cur];
      if (f.mode == Mode::kWaiting || (f.mode == Mode::kTracking && up[cur] < 0)) {
        state[cur] = 1;
        break;
      }
      if (f.mode == Mode::kBehind) {
        state[cur] = 2;
        break;
      }
      path.push_back(cur);
      cur = static_cast<size_t>(up[cur]);
      if (path.size() > n) throw std::logic_error("fluid network: a cycle of partial sources");
    }
    for (size_t p : path) state[p] = state[cur];
  }
  // Progressive filling. Scratch arrays indexed by resource are kept between calls and
  // touched only where a flow passes (a fleet has far more NICs than one change involves).
  rem_.resize(res_.size());
  cnt_.resize(res_.size(), 0);
  full_.resize(res_.size(), 0);
  std::vector<long> child(n, -1), sibling(n, -1);  // tracking flows of each flow, as a list
  std::vector<size_t> live;
  std::vector<int> used;
  std::vector<char> frozen(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (state[i] == 1) {
      fl[i]->rate = 0;
      frozen[i] = 1;
      continue;
    }
    live.push_back(i);
    for (int r : fl[i]->res)
      if (cnt_[r]++ == 0) {
        used.push_back(r);
        rem_[r] = res_[r].cap;
        full_[r] = 0;
      }
    if (up[i] >= 0) {
      sibling[i] = child[static_cast<size_t>(up[i])];
      child[static_cast<size_t>(up[i])] = static_cast<long>(i);
    }
  }
  std::vector<size_t> stack;
  double level = 0;
  while (!live.empty()) {
    double delta = std::numeric_limits<double>::infinity();
    for (int r : used)
      if (cnt_[r] > 0) delta = std::min(delta, rem_[r] / cnt_[r]);
    if (!std::isfinite(delta)) throw std::logic_error("fluid network: a flow without resources");
    level += delta;
    for (int r : used)
      if (cnt_[r] > 0) {
        rem_[r] -= delta * cnt_[r];
        if (rem_[r] <= kSaturated * res_[r].cap) full_[r] = 1;
      }
    for (size_t i : live)
      for (int r : fl[i]->res)
        if (full_[r]) {
          stack.push_back(i);
          break;
        }
    while (!stack.empty()) {
      size_t i = stack.back();
      stack.pop_back();
      if (frozen[i]) continue;
      frozen[i] = 1;
      fl[i]->rate = level;
      for (int r : fl[i]->res) --cnt_[r];
      for (long d = child[i]; d >= 0; d = sibling[static_cast<size_t>(d)])
        if (!frozen[static_cast<size_t>(d)]) stack.push_back(static_cast<size_t>(d));
    }
    live.erase(std::remove_if(live.begin(), live.end(), [&](size_t i) { return frozen[i] != 0; }), live.end());
    used.erase(std::remove_if(used.begin(), used.end(), [&](int r) { return cnt_[r] == 0; }), used.end());
  }
  for (int r : used) cnt_[r] = 0;
  for (auto& [id, f] : flows_)
    if (f.rate != f.prev_rate) rate_changed_.push_back(id);
}

std::optional<Ns> FluidNetwork::compute_due(Ns now) const {
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [id, f] : flows_) {
    const Node& s = nodes_[f.src];
    const double pos = pos_at(f, now);
    double t = std::numeric_limits<double>::infinity();
    if (!s.fill && s.held >= s.total) {
      if (f.rate > 0) t = (s.total - pos) / f.rate;
    } else {
      const double rs = s.fill ? s.filler->rate : 0;
      const double lim = limit(f, now);
      if (f.mode == Mode::kBehind && f.rate > rs) t = (lim - pos) / (f.rate - rs);
      if (f.mode == Mode::kWaiting && rs > 0) t = (pos - lim) / rs;
    }
    best = std::min(best, t);
  }
  if (!std::isfinite(best)) return std::nullopt;
  return now + std::max<Ns>(1, static_cast<Ns>(std::ceil(best)));
}

std::vector<FlowId> FluidNetwork::completed(Ns now) {
  std::vector<FlowId> done;
  for (const auto& [id, f] : flows_) {
    const Node& s = nodes_[f.src];
    if (!s.fill && s.held >= s.total && pos_at(f, now) >= s.total - kEps) done.push_back(id);
  }
  dirty_ = true;  // flows whose mode changed now need their new rates
  return done;
}

}  // namespace thub::scale
