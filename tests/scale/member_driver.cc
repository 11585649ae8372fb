// Carrying out a MemberMachine's actions in the at-scale world, as src/client/model_core.cc does
// with UCX: descriptors name the member and the fill it promises, a transfer is run by the
// real transfer machine (transfer_driver.cc) one data round trip after the grant, and what
// its source's counter shows (fill and bytes) is what the members' own machines made it show.
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
            m.shown = static_cast<uint64_t>(shard_bytes_);
            net_.set_held(m.node, shard_bytes_);
            source_changed(mi);
            feed(mi, client::Prepared{a.op, kLayout, descriptor(mi, m.fill), m.fill});
          },
          [&](const client::PrepareFill& a) {
            const uint32_t fill = next_fill_++;
            feed(mi, client::Prepared{a.op, kLayout, descriptor(mi, fill), fill});
          },
          // Readers of what we held see the counter change at their next read.
          [&](const client::InvalidateHolding&) {
            drop_transfer(mi);
            m.fill = 0;
            m.shown = 0;
            net_.set_held(m.node, 0);
            source_changed(mi);
          },
          [&](const client::BeginFill& a) {
            m.fill = a.fill;
            m.shown = 0;
            net_.set_held(m.node, 0);
            source_changed(mi);
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
  if (m.x) return fail("member " + std::to_string(mi) + ": a transfer began while another fills the buffers");
  SimMember& s = *members_[static_cast<size_t>(src)];
  auto x = std::make_unique<SimTransfer>();
  x->id = a.transfer;
  x->serial = next_serial_++;
  x->src = src;
  x->src_fill = src_fill;
  // As src/client/model_core.cc and transfer.cc plan it, in machine_chunk_bytes (scale_config.h). The
  // sources publish without checksums (their flag word reads 0): the block only rounds the
  // resume point down, as the real one does to its 1 MiB.
  client::TransferPlan plan;
  plan.total = static_cast<uint64_t>(shard_bytes_);
  plan.block = plan.chunk_size = static_cast<uint64_t>(cfg_.machine_chunk_bytes);
  plan.start = a.start;
  plan.epoch = src_fill;
  plan.partial = plan.may_lag = a.source_partial;
  plan.max_inflight = cfg_.max_inflight;
  plan.vouch_bytes = 1;  // vouch for every chunk that lands (the real one: every 1 MiB)
  plan.stall_timeout_us = static_cast<int64_t>(std::llround(cfg_.stall_timeout_ms * 1000));
  x->m = std::make_unique<client::TransferMachine>(std::move(plan));
  const uint64_t serial = x->serial;
  m.x = std::move(x);
  s.readers.insert(mi);
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
  at(now_ + topo_.data_rtt(s.place.dc, m.place.dc), [this, mi, serial] { activate(mi, serial); });
}

// The counter of `src` changed (fill or bytes): its readers' machines may see it.
void World::source_changed(int src) {
  for (int r : members_[static_cast<size_t>(src)]->readers) note_change(r);
}

// Member `src` is killed or vanishes: the bytes its readers were moving stop now. Their
// machines learn it from their reads: they fail detect_kill_ms after a kill (the kernel closes
// the connections), and never come back from a host that vanished (the machines' stall
// watchdogs give up).
void World::source_died(int src) {
  SimMember& s = *members_[static_cast<size_t>(src)];
  s.died = now_;
  for (int r : s.readers) {
    SimMember& rm = *members_[static_cast<size_t>(r)];
    if (rm.flow) {
      flow_member_.erase(rm.flow);
      (void)net_.stop_flow(rm.flow, now_);
      rm.flow = 0;
    }
    if (!cfg_.silent_deaths) {
      rm.x->failing = true;
      rm.x->fails_at = now_ + static_cast<Ns>(std::llround(cfg_.detect_kill_ms * 1e6));
    }
    note_change(r);
  }
}

// Flows whose bytes have all moved: the member holds the whole shard (its machine lands its
// last reads and finishes).
void World::network_due() {
  for (FlowId f : net_.completed(now_)) {
    const int mi = flow_member_.at(f);
    SimMember& m = *members_[static_cast<size_t>(mi)];
    flow_member_.erase(f);
    (void)net_.stop_flow(f, now_);
    net_.set_held(m.node, shard_bytes_);
    m.flow = 0;
    note_change(mi);
  }
}

void World::settle_network() {
  if (!net_.dirty()) return;
  net_.settle(now_);
  for (FlowId f : net_.take_rate_changed()) schedule(flow_member_.at(f));
  const uint64_t gen = ++net_gen_;
  if (auto due = net_.next_due()) at(*due, [this, gen] {
      if (gen == net_gen_) network_due();
    });
}

}  // namespace thub::scale::detail
