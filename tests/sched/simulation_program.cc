// The simulated user program of each replica (all its shards in lockstep, like the ranks of
// one model-parallel group): trainers write a new version into their buffers and publish it,
// then unpublish; rollouts replicate (latest, latest-1, absolute), update in place, or
// unpublish; now and then an operation is cancelled, or the model handles are closed and
// opened anew. The program only calls operations and reads their results: every decision
// about the registry, transfers and failures is the machine's.
#include <algorithm>
#include <string>

#include "tests/sched/simulation_world.h"

namespace thub::sched::sim::detail {

void World::add_actor() {
  Actor a;
  int k = static_cast<int>(actors_.size());
  a.trainer = k < 2 || chance(150);
  a.model = k % 2;
  a.name = "m" + std::to_string(a.model);
  a.seed = !a.trainer && chance(120);
  a.replica = (a.trainer ? "train-" : a.seed ? "seed-" : "roll-") + std::to_string(k);
  a.dc = chance(300) ? "dc1" : "dc0";
  a.n = model_shards(a.model);  // replicas of one model must agree on num_shards
  a.spot = !a.trainer && chance(400);
  a.retain = a.trainer ? static_cast<int>(r(3)) : 0;
  if (!chunks_.count(a.model)) chunks_[a.model] = 2 + static_cast<int>(r(kMaxChunks - 1));
  // THUB_Info timeout_ms: a replicate still asked past it is withdrawn (docs/client.md).
  if (timeouts_ && chance(200)) a.timeout = (150 + static_cast<Time>(r(350))) * kMs;
  // Faultless worlds: half the trainers take long steps (a version stays published 300-800
  // ms, as a real trainer's does for a step), so that latest requests meet versions that stay.
  if (faultless_ && a.trainer) a.long_steps = chance(500);
  a.unsync = a.trainer && chance(400);
  actors_.push_back(std::move(a));
}

int World::model_shards(int model) {
  auto it = shards_.find(model);
  if (it != shards_.end()) return it->second;
  // Half the models have one shard; of the others, one in five has 5-16 (faults in rounds of
  // many shards), the rest 2-4. Faultless worlds: 1-16.
  int n = faultless_ ? 1 + static_cast<int>(r(16))
          : chance(500) ? 1
          : chance(200) ? 5 + static_cast<int>(r(12))
                        : 2 + static_cast<int>(r(3));
  shards_[model] = n;
  return n;
}

// A new process of the replica: it connects, then its program starts.
void World::join(int i) {
  Actor& a = actors_[i];
  a.alive = true;
  a.proc = ++serial_;
  a.next_epoch = 0;
  a.sh.clear();
  a.conn = Conn{};
  a.conn.serial = ++serial_;
  a.thinking = false;
  a.cut_until = 0;
  trace(a.replica + " starts a process");
  connect(i, a.proc);
}

// The context is up: one model handle (machine) per shard, over buffers of garbage.
void World::start_process(int i) {
  Actor& a = actors_[i];
  a.sh.clear();
  a.sh.resize(a.n);
  a.unsync_versions.clear();  // a new process publishes new versions
  for (int s = 0; s < a.n; ++s) {
    Shard& sh = a.sh[s];
    sh.m = std::make_unique<MemberMachine>(client::MemberIdentity{a.name, a.replica, s, a.n, a.retain, a.spot, a.seed});
    sh.chunks.assign(chunks_.at(a.model), kGarbage);
    new_registration(i, s);
  }
  progress(i);
}

bool World::idle(const Actor& a) const {
  for (const Shard& s : a.sh)
    if (!s.ops.empty() || s.starting) return false;
  return true;
}

namespace {
// Every model handle of the process is open (an unsynchronised trainer's shards step alone then).
bool all_open(const Actor& a) {
  for (const Shard& s : a.sh)
    if (s.m->phase() == MemberMachine::Phase::kNew || s.m->phase() == MemberMachine::Phase::kClosed) return false;
  return !a.sh.empty();
}
}  // namespace

// When no operation is under way, the program decides what to do next after a while.
void World::progress(int i) {
  Actor& a = actors_[i];
  if (a.unsync && a.alive && !quiet_ && all_open(a) && a.conn.st != Conn::St::kGone) {
    for (int s = 0; s < a.n; ++s) progress_shard(i, s);
    return;
  }
  if (!a.alive || a.thinking || quiet_ || a.sh.empty() || !idle(a)) return;
  a.thinking = true;
  uint64_t proc = a.proc;
  Time think = (5 + static_cast<Time>(r(100))) * kMs;
  if (a.long_steps && a.sh[0].user_held >= 0) think = (300 + static_cast<Time>(r(500))) * kMs;
  at(think, [=] {
    Actor& b = actors_[i];
    if (b.proc != proc || !b.alive) return;
    b.thinking = false;
    if (!idle(b) || quiet_) return;
    next_phase(i);
  });
}

// An unsynchronised trainer's shard: 0-3 ms after its last step (300-800 ms holding a version
// in a faultless world's long steps), it unpublishes what it holds, else publishes the replica's
// next version (the first shard to get there draws it), whatever its siblings are doing.
void World::progress_shard(int i, int s) {
  Actor& a = actors_[i];
  if (!a.alive || quiet_ || s >= static_cast<int>(a.sh.size())) return;
  Shard& sh = a.sh[s];
  if (!sh.ops.empty() || sh.starting || sh.thinking) return;
  sh.thinking = true;
  const uint64_t proc = a.proc, reg = sh.reg;
  Time think = static_cast<Time>(r(4)) * kMs;
  if (a.long_steps && sh.user_held >= 0) think = (300 + static_cast<Time>(r(500))) * kMs;
  at(think, [=] {
    Actor& b = actors_[i];
    if (b.proc != proc || !b.alive || s >= static_cast<int>(b.sh.size()) || b.sh[s].reg != reg) return;
    Shard& t = b.sh[s];
    t.thinking = false;
    if (!t.ops.empty() || t.starting || quiet_) return;
    if (b.conn.st == Conn::St::kGone || !all_open(b)) {  // a new context, or handles to open
      if (idle(b)) progress(i);
      return;
    }
    if (t.user_held >= 0) return start_op(i, s, OpRecord::Kind::kUnpublish, -1, false, 0, false);
    if (t.next_pub >= b.unsync_versions.size()) b.unsync_versions.push_back(next_version_[b.model]++);
    start_op(i, s, OpRecord::Kind::kPublish, b.unsync_versions[t.next_pub++], false, 0, false);
  });
}

void World::next_phase(int i) {
  Actor& a = actors_[i];
  if (a.conn.st == Conn::St::kGone) {
    // Every registry is gone for this context: the program starts over with a new one
    // (new registrations; the registry drops the old session for its silence).
    trace(a.replica + " starts a new context");
    return join(i);
  }
  // Model handles to (re)open: a failed open, or new handles after a close.
  bool opening = false;
  for (int s = 0; s < a.n; ++s) {
    Shard& sh = a.sh[s];
    if (sh.m->phase() == MemberMachine::Phase::kClosed) {
      sh.m = std::make_unique<MemberMachine>(client::MemberIdentity{a.name, a.replica, s, a.n, a.retain, a.spot, a.seed});
      new_registration(i, s);
      sh.user_held = -1;
    }
    if (sh.m->phase() == MemberMachine::Phase::kNew) {
      start_op(i, s, OpRecord::Kind::kOpen, -1, false, static_cast<Time>(r(20)) * kMs, false);
      opening = true;
    }
  }
  if (opening) return;
  if (chance(20)) {
    for (int s = 0; s < a.n; ++s) start_op(i, s, OpRecord::Kind::kClose, -1, false, static_cast<Time>(r(20)) * kMs, false);
    return;
  }
  bool any_hold = false, all_hold = true;
  for (const Shard& s : a.sh) {
    any_hold = any_hold || s.user_held >= 0;
    all_hold = all_hold && s.user_held >= 0 && s.user_held == a.sh[0].user_held;
  }
  if (a.seed) {  // a seed buffer: seed-only updates of the latest, now and then a fresh start
    ++a.round;
    if (any_hold && chance(100)) {
      for (int s = 0; s < a.n; ++s)
        if (a.sh[s].user_held >= 0) start_op(i, s, OpRecord::Kind::kUnpublish, -1, false, static_cast<Time>(r(20)) * kMs, false);
      return;
    }
    // (Holding nothing, or shards holding different versions after a failed round: the
    // machine asks a plain seed-only replicate, or its update in place, per shard.)
    // Never canceled, as model.cc's seed buffer (it cancels only in Seed::stop, right before
    // it closes the member): a shard's own cancel is its outcome alone, and the shards of a
    // seed buffer, which no program steers, would go on from different holdings (seeds
    // 29822, 38513 of a longer soak: NOT_UPDATED on one shard, success on its sibling).
    for (int s = 0; s < a.n; ++s)
      start_op(i, s, OpRecord::Kind::kUpdate, -1, true, static_cast<Time>(r(20)) * kMs, false);
    return;
  }
  if (!a.trainer && all_hold && chance(300)) {  // THUB_Update in place
    ++a.round;
    Version spec = chance(200) ? -2 : -1;
    for (int s = 0; s < a.n; ++s)
      start_op(i, s, OpRecord::Kind::kUpdate, spec, true, static_cast<Time>(r(20)) * kMs, !faultless_ && chance(30));
    return;
  }
  if (any_hold) {
    for (int s = 0; s < a.n; ++s)
      if (a.sh[s].user_held >= 0) start_op(i, s, OpRecord::Kind::kUnpublish, -1, false, static_cast<Time>(r(20)) * kMs, false);
    return;
  }
  if (a.trainer) {
    Version v = next_version_[a.model]++;
    for (int s = 0; s < a.n; ++s) start_op(i, s, OpRecord::Kind::kPublish, v, false, static_cast<Time>(r(20)) * kMs, false);
    return;
  }
  ++a.round;
  Version spec = -1;
  if (chance(200)) {
    spec = -2;
  } else if (chance(200) && next_version_[a.model] > 0) {
    spec = std::max<Version>(0, next_version_[a.model] - 1 - static_cast<Version>(r(3)));
  }
  bool update = chance(200);  // THUB_Update holding nothing: a plain replicate
  for (int s = 0; s < a.n; ++s)
    start_op(i, s, OpRecord::Kind::kReplicate, spec, update, static_cast<Time>(r(20)) * kMs, !faultless_ && chance(30));
}

// Buffers the program was told it holds nothing in are its own: it may write them at any
// time before its next operation (a trainer's next step, an application reusing the memory).
// Readers the registry still lets read them must see the counter invalid, not these bytes.
void World::scribble_later(int i, int s) {
  const uint64_t reg = actors_[i].sh[s].reg;
  at(static_cast<Time>(r(40)) * kMs, [=] {
    Actor& a = actors_[i];
    if (!a.alive || s >= static_cast<int>(a.sh.size()) || a.sh[s].reg != reg) return;
    Shard& sh = a.sh[s];
    if (!sh.ops.empty() || sh.starting || sh.user_held >= 0) return;
    if (sh.m->held() >= 0 || sh.m->receiving() >= 0)
      return fail(a.replica + "/" + std::to_string(s) + ": the program was told it holds nothing, but the machine " +
                  (sh.m->held() >= 0 ? "holds " : "receives ") + std::to_string(std::max(sh.m->held(), sh.m->receiving())));
    for (size_t k = 0; k < sh.chunks.size(); ++k)
      if (chance(500)) sh.chunks[k] = kScribble;
  });
}

void World::start_op(int i, int s, OpRecord::Kind k, Version arg, bool update, Time delay, bool cancel) {
  Actor& a = actors_[i];
  a.sh[s].starting = true;
  const uint64_t reg = a.sh[s].reg;
  at(delay, [=] {
    Actor& b = actors_[i];
    if (!b.alive || s >= static_cast<int>(b.sh.size()) || b.sh[s].reg != reg) return;
    Shard& sh = b.sh[s];
    sh.starting = false;
    const uint64_t op = b.next_op++;
    OpRecord rec;
    rec.kind = k;
    rec.started = now_;
    rec.arg = arg;
    rec.before = sh.user_held;
    rec.round = b.round;
    rec.cancel = cancel;
    rec.gen = b.conn.gen;
    sh.ops[op] = rec;
    if (faultless_ && b.trainer && (k == OpRecord::Kind::kUnpublish || k == OpRecord::Kind::kClose)) {
      for (Publication& p : publications_)  // its versions are published until now at most
        if (p.actor == i && p.proc == b.proc && p.to < 0) p.to = now_;
    }
    MachineEvent ev = client::OpOpen{op, b.conn.gen};
    switch (k) {
      case OpRecord::Kind::kOpen: break;
      case OpRecord::Kind::kPublish:
        // The user overwrites the buffers it was told are its own, then publishes them.
        if (sh.m->held() >= 0 || sh.m->receiving() >= 0)
          return fail(b.replica + "/" + std::to_string(s) + ": the program was told it holds nothing, but the machine " +
                      (sh.m->held() >= 0 ? "holds " : "receives ") + std::to_string(std::max(sh.m->held(), sh.m->receiving())));
        sh.chunks.assign(sh.chunks.size(), tag_of(b.model, arg));
        ev = client::OpPublish{op, arg};
        break;
      case OpRecord::Kind::kReplicate: ev = client::OpReplicate{op, arg, update}; break;
      case OpRecord::Kind::kUpdate: ev = client::OpReplicate{op, arg, true}; break;
      case OpRecord::Kind::kUnpublish: ev = client::OpUnpublish{op}; break;
      case OpRecord::Kind::kClose: ev = client::OpClose{op}; break;
    }
    feed(i, s, ev);
    if (cancel) {
      ++res_.cancels;
      at(static_cast<Time>(r(60)) * kMs, [=] {
        Actor& c = actors_[i];
        if (c.alive && s < static_cast<int>(c.sh.size()) && c.sh[s].reg == reg) feed(i, s, client::OpCancel{op});
      });
    }
  });
}

}  // namespace thub::sched::sim::detail
