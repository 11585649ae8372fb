// Transfers in the at-scale world: the real transfer machine (src/client/transfer_machine.h,
// the decisions of src/client/transfer.cc) with the fluid network as its I/O, as
// tests/sched/simulation_transfer.cc runs it in the fault-finding simulation. The machine
// decides what to read and where, when to read its source's counter, what the seqlock
// accepts, what our counter shows, where a transfer resumes and when it gives up on its source;
// the network only says when bytes have moved.
//
// Time: the fluid network moves a transfer's bytes as the real reads would (the pipeline gap of
// a partial source stands for its counter granularity and one counter read), and a read of the
// machine lands when the flow's position passes its end. The machine reads in
// machine_chunk_bytes (scale_config.h), so that a shard of 250 GB is a few hundred reads, not
// 60,000: its resume point is a chunk boundary, where the real one is within a 1 MiB block.
// Its counter and checksum reads are answered at once (their round trip is inside the gap and
// inside the data round trip before a transfer starts). A ReadCounterAfter waits for its time
// and for something it could see to change (the source's counter, a read of ours landing, the
// source's death): the polls in between, which the real machine makes and which could only
// read the same value, are not made. Its stall watchdog runs every 50 ms, as in transfer.cc:
// a source that vanished, or a chain stalled above it, is given up by the machine.
//
// Sources: a live source answers; one whose fill is not the one granted (unpublished,
// refilled) answers its reads at once with whatever its buffers hold, and its counter shows the
// other fill; a killed one fails every read detect_kill_ms after its death; a vanished one never
// answers. Sources publish without checksums (their flag word reads 0).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <iterator>
#include <string>
#include <utility>
#include <variant>

#include "src/client/progress_counter.h"
#include "tests/scale/scale_world.h"

namespace thub::scale::detail {

namespace {
// A read lands when its flow's position is this close to its end (the fluid network counts
// positions this close as equal).
constexpr double kLandSlack = 4096;
constexpr Ns kWatchdogNs = 50'000'000;  // src/client/transfer.cc: kWatchdogUs
// The start of the machine's own message when its stall watchdog gives up (check_stall).
constexpr const char* kStallMessage = "source made no progress";
int64_t us_of(Ns t) { return t / 1000; }
}  // namespace

SimTransfer* World::transfer_of(int mi, uint64_t serial) {
  SimMember& m = *members_[static_cast<size_t>(mi)];
  return m.alive && m.x && m.x->serial == serial ? m.x.get() : nullptr;
}

uint64_t World::counter_of(const SimMember& s) const {
  return s.fill == 0 ? client::kCounterInvalid : client::counter_value(s.fill, s.shown);
}

// One data round trip after the grant: the bytes start to move (from the resume point the
// machine chose) if the source holds the fill granted, and the machine starts.
void World::activate(int mi, uint64_t serial) {
  SimTransfer* x = transfer_of(mi, serial);
  if (!x) return;
  SimMember& m = *members_[static_cast<size_t>(mi)];
  const SimMember& s = *members_[static_cast<size_t>(x->src)];
  x->active = true;
  x->started = x->last_landed = now_;
  if (s.alive && s.fill == x->src_fill) {
    // How far behind its source a reader that caught up stays: the source's counter moves a
    // (real) chunk at a time, and it is read one round trip late.
    const double gap = (net_.fill_of(s.node) ? s.chunk : 0) +
                       static_cast<double>(topo_.data_rtt(s.place.dc, m.place.dc)) * topo_.member_rate();
    m.flow = net_.start_flow(s.node, m.node, static_cast<double>(x->m->held()), gap, topo_.route(s.place, m.place),
                             now_);
    flow_member_[m.flow] = mi;
  } else if (!s.alive && !cfg_.silent_deaths) {
    x->failing = true;
    x->fails_at = std::max(now_, s.died + static_cast<Ns>(std::llround(cfg_.detect_kill_ms * 1e6)));
  }
  drive(mi, x->m->start(us_of(now_)));
  if (transfer_of(mi, serial)) at(now_ + kWatchdogNs, [this, mi, serial] { watchdog(mi, serial); });
}

// Carries out the machine's steps in order, then answers what the world answers now (which
// brings more steps), until the machine waits; then schedules what it waits for.
void World::drive(int mi, std::vector<client::TransferStep> steps) {
  SimMember& m = *members_[static_cast<size_t>(mi)];
  if (!m.alive || !m.x) return;
  SimTransfer* x = m.x.get();
  const uint64_t serial = x->serial;
  std::deque<client::TransferStep> todo(std::make_move_iterator(steps.begin()), std::make_move_iterator(steps.end()));
  do {
    while (!todo.empty()) {
      if (transfer_of(mi, serial) != x) return;
      const client::TransferStep step = std::move(todo.front());
      todo.pop_front();
      if (const auto* c = std::get_if<client::ReadChunk>(&step)) {
        x->reads.push_back(*c);
      } else if (const auto* h = std::get_if<client::ReadHashes>(&step)) {
        x->hashes_asked = true;
        x->hashes_upto = h->upto;
      } else if (std::holds_alternative<client::ReadCounter>(step)) {
        x->counter_asked = true;
      } else if (const auto* r = std::get_if<client::ReadCounterAfter>(&step)) {
        x->parked = true;
        x->due = now_ + r->delay_us * 1000;
        x->changed = false;
      } else if (const auto* show = std::get_if<client::ShowHeld>(&step)) {
        m.shown = show->held;  // our counter, for readers chained on us
        source_changed(mi);
      } else if (const auto* f = std::get_if<client::TransferFinish>(&step)) {
        return end_transfer(mi, *f);
      }
    }
  } while (answer(mi, todo));
  schedule(mi);
}

// What the world answers now, one kind at a time; false when the machine must wait.
bool World::answer(int mi, std::deque<client::TransferStep>& todo) {
  SimMember& m = *members_[static_cast<size_t>(mi)];
  SimTransfer& x = *m.x;
  client::TransferMachine& tm = *x.m;
  const SimMember& s = *members_[static_cast<size_t>(x.src)];
  const int64_t t = us_of(now_);
  auto add = [&](std::vector<client::TransferStep> v) {
    for (auto& step : v) todo.push_back(std::move(step));
    return true;
  };
  if (x.failing && now_ >= x.fails_at) {
    // Killed: its connections are closed, every read fails.
    const std::string err = "a get failed: the source's process was killed";
    x.changed = true;
    if (!x.reads.empty()) {
      const client::ReadChunk c = x.reads.front();
      x.reads.pop_front();
      return add(tm.on_chunk(c.off, c.len, false, err, t));
    }
    if (x.hashes_asked) {
      x.hashes_asked = false;
      return add(tm.on_hashes(x.hashes_upto, false, err, t));
    }
    if (x.counter_asked) {
      x.counter_asked = false;
      return add(tm.on_counter(false, 0, err, t));
    }
  } else if (s.alive) {
    const bool other_fill = s.fill != x.src_fill;
    if (x.hashes_asked) {
      x.hashes_asked = false;  // the flag word and checksums read 0: published without checksums
      return add(tm.on_hashes(x.hashes_upto, true, "", t));
    }
    if (x.counter_asked) {
      x.counter_asked = false;
      return add(tm.on_counter(true, counter_of(s), "", t));
    }
    const double pos = net_.node_bytes(m.node, now_);
    if (!x.reads.empty() &&
        (other_fill || pos + kLandSlack >= static_cast<double>(x.reads.front().off + x.reads.front().len))) {
      const client::ReadChunk c = x.reads.front();
      x.reads.pop_front();
      x.changed = true;
      x.last_landed = now_;
      return add(tm.on_chunk(c.off, c.len, true, "", t));
    }
  }  // (else: a killed source not noticed yet, or a vanished one: nothing comes back)
  if (x.parked && x.changed && now_ >= x.due) {
    x.parked = false;
    return add(tm.on_retry(t));
  }
  return false;
}

// Something a waiting machine could see changed: it looks at once.
void World::note_change(int mi) {
  SimMember& m = *members_[static_cast<size_t>(mi)];
  if (!m.alive || !m.x || !m.x->active) return;
  SimTransfer& x = *m.x;
  x.changed = true;
  if (x.soon) return;
  x.soon = true;
  const uint64_t serial = x.serial;
  at(now_, [this, mi, serial] {
    if (SimTransfer* y = transfer_of(mi, serial)) {
      y->soon = false;
      drive(mi, {});
    }
  });
}

// The events a waiting machine needs: its ReadCounterAfter's time (once something changed), a
// killed source's failures showing, and the landing of its first read in flight.
void World::schedule(int mi) {
  SimMember& m = *members_[static_cast<size_t>(mi)];
  if (!m.alive || !m.x || !m.x->active) return;
  SimTransfer& x = *m.x;
  const uint64_t serial = x.serial;
  Ns wake = -1;
  if (x.parked && x.changed && x.due > now_) wake = x.due;
  if (x.failing && x.fails_at > now_) wake = wake < 0 ? x.fails_at : std::min(wake, x.fails_at);
  if (wake >= 0 && wake != x.wake_at) {
    x.wake_at = wake;
    const uint64_t gen = ++x.wake_gen;
    at(wake, [this, mi, serial, gen] {
      if (SimTransfer* y = transfer_of(mi, serial); y && y->wake_gen == gen) {
        y->wake_at = -1;
        drive(mi, {});
      }
    });
  }
  if (x.reads.empty() || !m.flow) return;
  const double rate = net_.rate(m.flow);
  const uint64_t end = x.reads.front().off + x.reads.front().len;
  if (m.flow == x.land_flow && end == x.land_end && rate == x.land_rate) return;  // already due
  x.land_flow = m.flow;
  x.land_end = end;
  x.land_rate = rate;
  const uint64_t gen = ++x.land_gen;
  if (!(rate > 0)) return;  // it lands once the flow moves again (a new rate comes here)
  const double left = static_cast<double>(end) - kLandSlack - net_.node_bytes(m.node, now_);
  const Ns dt = std::max<Ns>(1, static_cast<Ns>(std::ceil(left / rate)));
  at(now_ + dt, [this, mi, serial, gen] {
    if (SimTransfer* y = transfer_of(mi, serial); y && y->land_gen == gen) {
      y->land_flow = 0;
      drive(mi, {});
    }
  });
}

// The machine's stall watchdog ticks every 50 ms from the start, as in transfer.cc (no source
// here dies as a local process whose pid it could see gone). A tick can end the transfer only
// once stall_timeout has passed since the machine last saw progress, which is no earlier than
// the last read that landed: the ticks before are not brought.
void World::watchdog(int mi, uint64_t serial) {
  SimTransfer* x = transfer_of(mi, serial);
  if (!x) return;
  const Ns quiet_until = x->last_landed + static_cast<Ns>(std::llround(cfg_.stall_timeout_ms * 1e6));
  if (now_ <= quiet_until) {
    const Ns ticks = (quiet_until - x->started) / kWatchdogNs + 1;
    const Ns next = x->started + ticks * kWatchdogNs;
    at(next, [this, mi, serial] { watchdog(mi, serial); });
    return;
  }
  std::vector<client::TransferStep> steps = x->m->on_watchdog(us_of(now_), "");
  for (const auto& step : steps)
    if (const auto* f = std::get_if<client::TransferFinish>(&step);
        f && f->source_failed && f->error.rfind(kStallMessage, 0) == 0) {
      res_.stall_timeouts++;
      hash(0x57a11000u + static_cast<uint64_t>(mi));
    }
  drive(mi, std::move(steps));
  if (transfer_of(mi, serial)) at(now_ + kWatchdogNs, [this, mi, serial] { watchdog(mi, serial); });
}

// The machine's end: what it checked is what the member holds (what is in flight is
// abandoned), and the member machine hears of it.
void World::end_transfer(int mi, const client::TransferFinish& f) {
  SimMember& m = *members_[static_cast<size_t>(mi)];
  const uint64_t id = m.x->id;
  drop_transfer(mi);
  const bool ok = f.code == Code::kSuccess;
  net_.set_held(m.node, ok ? shard_bytes_ : static_cast<double>(f.held));
  hash((ok ? 0xd0000000u : 0xfa000000u) + static_cast<uint64_t>(mi));
  hash(static_cast<uint64_t>(now_));
  hash(f.held);
  if (cfg_.trace && !ok)
    std::fprintf(stderr, "t=%.6f transfer of member %d (replica %d) failed%s: %s; holds %llu\n",
                 static_cast<double>(now_) * 1e-9, mi, m.replica, f.source_failed ? " (source)" : "", f.error.c_str(),
                 static_cast<unsigned long long>(f.held));
  feed(mi, client::TransferEnded{id, f.code, f.source_failed, f.held, f.error});
}

// The transfer stops here (ended, or its member killed or its buffers given up): its bytes stop
// moving, what it has in flight is dropped.
void World::drop_transfer(int mi) {
  SimMember& m = *members_[static_cast<size_t>(mi)];
  if (m.flow) {
    flow_member_.erase(m.flow);
    (void)net_.stop_flow(m.flow, now_);
    m.flow = 0;
  }
  if (!m.x) return;
  res_.machine_gets += m.x->m->gets();
  res_.machine_counter_reads += m.x->m->counter_reads();
  members_[static_cast<size_t>(m.x->src)]->readers.erase(mi);
  m.x.reset();
}

}  // namespace thub::scale::detail
