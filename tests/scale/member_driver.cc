// Carrying out a MemberMachine's actions in the at-scale world, as src/client/model.cc does
// with UCX: descriptors name the member and the fill they promise, a transfer is a flow of
// the fluid network that starts one data round trip after the grant, and its end (or its
// source's death, or a change of the source's fill) comes back as TransferEnded.
#include <cmath>
#include <cstdio>
#include <string>

#include "tests/scale/scale_world.h"

namespace thub::scale::detail {

namespace {
constexpr uint64_t kLayout = 0x5ca1e;  // every shard has the same layout in this model

std::string descriptor(int member, uint32_t fill) {
  return "sim:" + std::to_string(member) + ":" + std::to_string(fill);
}

bool parse(const std::string& d, int* member, uint32_t* fill) {
  unsigned m = 0, f = 0;
  if (std::sscanf(d.c_str(), "sim:%u:%u", &m, &f) != 2) return false;
  *member = static_cast<int>(m);
  *fill = f;
  return true;
}

template <class... F>
struct Overload : F... {
  using F::operator()...;
};
template <class... F>
Overload(F...) -> Overload<F...>;
}  // namespace

void World::feed(int mi, const client::MachineEvent& ev) {
  SimMember& m = *members_[static_cast<size_t>(mi)];
  if (!m.alive) return;
  for (const auto& a : m.m->step(ev)) {
    if (!m.alive || failed_) return;
    act(mi, a);
  }
}

void World::act(int mi, const client::MachineAction& action) {
  SimMember& m = *members_[static_cast<size_t>(mi)];
  std::visit(
      Overload{
          [&](const client::SendRequest& a) { to_registry(mi, a.event); },
          // Publish: the trainer's buffers hold the whole shard (no staging behind publish).
          [&](const client::PrepareHolding& a) {
            m.fill = next_fill_++;
            net_.set_held(m.node, shard_bytes_);
            feed(mi, client::Prepared{a.op, kLayout, descriptor(mi, m.fill), m.fill});
          },
          [&](const client::PrepareFill& a) {
            const uint32_t fill = next_fill_++;
            feed(mi, client::Prepared{a.op, kLayout, descriptor(mi, fill), fill});
          },
          // Readers of what we held see the counter change at their next read.
          [&](const client::InvalidateHolding&) {
            if (m.flow) {
              flow_member_.erase(m.flow);
              (void)net_.stop_flow(m.flow, now_);
              m.flow = 0;
            }
            fail_readers(mi, topo_.data_rtt(m.place.dc, m.place.dc));
            m.fill = 0;
            net_.set_held(m.node, 0);
          },
          [&](const client::BeginFill& a) {
            m.fill = a.fill;
            net_.set_held(m.node, 0);
          },
          [&](const client::BeginTransfer& a) { begin_transfer(mi, a); },
          [&](const client::MakeHostCopy&) { fail("retention offload is not modelled here"); },
          [&](const client::DropHostCopy&) {},
          [&](const client::CompleteOp& a) { on_complete(mi, a); },
      },
      action);
}

void World::begin_transfer(int mi, const client::BeginTransfer& a) {
  SimMember& m = *members_[static_cast<size_t>(mi)];
  int src = -1;
  uint32_t src_fill = 0;
  if (!parse(a.source_descriptor, &src, &src_fill) || src < 0 || src >= static_cast<int>(members_.size()))
    return fail("a grant with a descriptor this simulation did not make: " + a.source_descriptor);
  if (a.version != 1) return fail("granted version " + std::to_string(a.version));
  const SimMember& s = *members_[static_cast<size_t>(src)];
  m.transfer = a.transfer;
  m.source = src;
  m.chunk = a.source_partial ? cfg_.pipeline_chunk_bytes : cfg_.chunk_bytes;
  m.depth = s.depth + 1;
  if (t0_ >= 0) readers_granted_[src]++;
  if (cfg_.trace) {
    // One line per grant carried out: who reads whom, and where each stands (bytes).
    std::fprintf(stderr, "t=%.6f grant member %d (replica %d shard %d) <- member %d (replica %d)%s from %.0f; source holds %.0f\n",
                 static_cast<double>(now_) * 1e-9, mi, m.replica, m.shard, src, s.replica,
                 a.source_partial ? " partial" : "", static_cast<double>(a.start), net_.node_bytes(s.node, now_));
  }
  hash(0x7a000000u + static_cast<uint64_t>(mi));
  hash(static_cast<uint64_t>(src));
  // The first counter read or get reaches the source one round trip later.
  const uint64_t t = a.transfer, start = a.start;
  at(now_ + topo_.data_rtt(s.place.dc, m.place.dc), [this, mi, t, src, src_fill, start] {
    activate(mi, t, src, src_fill, start);
  });
}

void World::activate(int mi, uint64_t transfer, int src, uint32_t src_fill, uint64_t start) {
  SimMember& m = *members_[static_cast<size_t>(mi)];
  if (!m.alive || m.transfer != transfer) return;
  const SimMember& s = *members_[static_cast<size_t>(src)];
  if (!s.alive) {
    // Gets to a dead peer: an error soon (killed) or a stall (silent), minus the trip made.
    const Ns detect = cfg_.silent_deaths ? static_cast<Ns>(cfg_.stall_timeout_ms * 1e6)
                                         : static_cast<Ns>(cfg_.detect_kill_ms * 1e6);
    return fail_transfer(mi, detect, start);
  }
  if (s.fill != src_fill) return fail_transfer(mi, 0, start);  // its counter shows another fill
  // How far behind its source a reader that caught up stays: the source's counter moves a
  // chunk at a time, and it is read one round trip late.
  const double gap = (net_.fill_of(s.node) ? s.chunk : 0) +
                     static_cast<double>(topo_.data_rtt(s.place.dc, m.place.dc)) * topo_.member_rate();
  m.flow = net_.start_flow(s.node, m.node, static_cast<double>(start), gap, topo_.route(s.place, m.place), now_);
  flow_member_[m.flow] = mi;
}

void World::fail_transfer(int mi, Ns after, uint64_t held) {
  SimMember& m = *members_[static_cast<size_t>(mi)];
  const uint64_t t = m.transfer;
  at(now_ + after, [this, mi, t, held] {
    SimMember& r = *members_[static_cast<size_t>(mi)];
    if (!r.alive || r.transfer != t) return;
    hash(0xfa000000u + static_cast<uint64_t>(mi));
    if (cfg_.trace)
      std::fprintf(stderr, "t=%.6f source of member %d (replica %d) failed; holds %llu\n",
                   static_cast<double>(now_) * 1e-9, mi, r.replica, static_cast<unsigned long long>(held));
    feed(mi, client::TransferEnded{t, Code::kTransport, true, held, "source failed"});
  });
}

// The readers of member `src` lose it: their flows stop now; each keeps the chunks it has
// whole and learns of the failure `after` from now.
void World::fail_readers(int src, Ns after) {
  for (FlowId f : net_.readers_of(members_[static_cast<size_t>(src)]->node)) {
    const int ri = flow_member_.at(f);
    SimMember& r = *members_[static_cast<size_t>(ri)];
    flow_member_.erase(f);
    const double pos = net_.stop_flow(f, now_);
    const double held = std::floor(pos / r.chunk) * r.chunk;
    net_.set_held(r.node, held);
    r.flow = 0;
    fail_transfer(ri, after, static_cast<uint64_t>(held));
  }
}

void World::network_due() {
  for (FlowId f : net_.completed(now_)) {
    const int mi = flow_member_.at(f);
    SimMember& m = *members_[static_cast<size_t>(mi)];
    flow_member_.erase(f);
    (void)net_.stop_flow(f, now_);
    net_.set_held(m.node, shard_bytes_);
    m.flow = 0;
    hash(0xd0000000u + static_cast<uint64_t>(mi));
    hash(static_cast<uint64_t>(now_));
    feed(mi, client::TransferEnded{m.transfer, Code::kSuccess, false, static_cast<uint64_t>(shard_bytes_), ""});
  }
}

// The client's stall watchdog (src/client/transfer.cc, Job::check_stall): a transfer that
// sees no chunk land and its source's counter not move for stall_timeout_ms reports its
// source failed, whether the source is dead, or alive and waiting itself (a chain stalled
// upstream), or behind the reader (a regrant to a source with less than the reader holds).
void World::watch_stall(FlowId f) {
  const Ns since = net_.stalled_since(f);
  at(since + static_cast<Ns>(cfg_.stall_timeout_ms * 1e6), [this, f, since] {
    if (!net_.has_flow(f) || net_.stalled_since(f) != since) return;
    const int ri = flow_member_.at(f);
    SimMember& r = *members_[static_cast<size_t>(ri)];
    flow_member_.erase(f);
    const double held = std::floor(net_.stop_flow(f, now_) / r.chunk) * r.chunk;
    net_.set_held(r.node, held);
    r.flow = 0;
    res_.stall_timeouts++;
    hash(0x57a11000u + static_cast<uint64_t>(ri));
    feed(ri, client::TransferEnded{r.transfer, Code::kTransport, true, static_cast<uint64_t>(held),
                                   "source made no progress for stall_timeout_ms"});
  });
}

void World::settle_network() {
  if (!net_.dirty()) return;
  net_.settle(now_);
  for (FlowId f : net_.take_newly_stalled()) watch_stall(f);
  const uint64_t gen = ++net_gen_;
  if (auto due = net_.next_due()) at(*due, [this, gen] {
      if (gen == net_gen_) network_due();
    });
}

}  // namespace thub::scale::detail
