// The client's promises, checked on the real machine's answers: every operation ends with
// exactly one CompleteOp, whose version is what the machine holds; a publish holds its
// version; a replicate or update that succeeds holds the version the registry granted, with
// every chunk of its buffers from a holder of that version and its counter showing all of
// it; a failed replicate leaves nothing half-received; an unpublish or close invalidates the
// counter before it returns (the user may overwrite then); and after the faults stop every
// operation ends (liveness).
#include <algorithm>
#include <string>
#include <variant>

#include <cstdio>
#include <cstdlib>

#include "tests/sched/simulation_world.h"

namespace thub::sched::sim::detail {

namespace {
const char* kind_name(OpRecord::Kind k) {
  switch (k) {
    case OpRecord::Kind::kOpen: return "open";
    case OpRecord::Kind::kPublish: return "publish";
    case OpRecord::Kind::kReplicate: return "replicate";
    case OpRecord::Kind::kUpdate: return "update";
    case OpRecord::Kind::kUnpublish: return "unpublish";
    case OpRecord::Kind::kClose: return "close";
  }
  return "?";
}
}  // namespace

// The version a grant to this shard's machine names, once the machine took it (its lease).
void World::on_grant_seen(int i, int s, const Reply& rep) {
  Shard& sh = actors_[i].sh[s];
  if (rep.status != Status::kOk || rep.lease == 0 || sh.m->lease() != rep.lease || sh.m->receiving() != rep.version) return;
  for (auto& [op, rec] : sh.ops)
    if (rec.kind == OpRecord::Kind::kReplicate || rec.kind == OpRecord::Kind::kUpdate) rec.granted = rep.version;
}

void World::on_complete(int i, int s, const client::CompleteOp& c) {
  Actor& a = actors_[i];
  Shard& sh = a.sh[s];
  const MemberMachine& m = *sh.m;
  mix("C" + std::to_string(i) + "/" + std::to_string(s) + ":" + std::to_string(static_cast<int>(c.code)) + "," +
      std::to_string(c.version));
  ++res_.ops;
  if (c.code == Code::kSuccess) ++res_.ops_ok;
  auto it = sh.ops.find(c.op);
  const std::string who = a.replica + "/" + std::to_string(s) + " op " + std::to_string(c.op);
  if (it == sh.ops.end()) return fail(who + " completed, but it is not under way (a second CompleteOp?)");
  const OpRecord o = it->second;
  sh.ops.erase(it);
  trace(who + " (" + kind_name(o.kind) + " " + std::to_string(o.arg) + ") -> " + std::to_string(static_cast<int>(c.code)) +
        " v" + std::to_string(c.version) + " " + c.detail);
  const std::string what = who + " (" + kind_name(o.kind) + " " + std::to_string(o.arg) + ", code " +
                           std::to_string(static_cast<int>(c.code)) + " " + c.detail + ")";
  if (c.version != m.held()) return fail(what + " reports version " + std::to_string(c.version) + ", the machine holds " + std::to_string(m.held()));
  if (m.busy()) return fail(what + " completed, but the machine still runs an operation");
  // The program asks only what it may: these mean the machine lost track of itself.
  if (c.code == Code::kInternal || c.code == Code::kArg)
    return fail(what + ": an error the program never causes");
  const bool ok = c.code == Code::kSuccess;
  const Tag want = tag_of(a.model, c.version);
  auto whole = [&] {
    for (Tag t : sh.chunks)
      if (t != want) return false;
    return sh.counter.epoch != 0 && sh.counter.chunks == static_cast<int>(sh.chunks.size());
  };
  switch (o.kind) {
    case OpRecord::Kind::kOpen:
      if (ok && (m.phase() == MemberMachine::Phase::kNew || m.member() == 0)) return fail(what + ": open but not a member");
      break;
    case OpRecord::Kind::kPublish:
      if (ok && c.version != o.arg) return fail(what + ": published, but holds " + std::to_string(c.version));
      break;
    case OpRecord::Kind::kReplicate:
    case OpRecord::Kind::kUpdate:
      if (m.receiving() >= 0) return fail(what + ": ended while still receiving " + std::to_string(m.receiving()));
      if (ok) {
        if (o.granted < 0 || c.version != o.granted)
          return fail(what + ": holds " + std::to_string(c.version) + ", the registry granted " + std::to_string(o.granted));
        if (o.arg >= 0 && c.version != o.arg)
          return fail(what + ": asked for version " + std::to_string(o.arg));
        if (o.kind == OpRecord::Kind::kUpdate && o.before >= 0 && c.version <= o.before)
          return fail(what + ": an update that is not newer than " + std::to_string(o.before));
        if (!whole()) {
          std::string got;
          for (Tag t : sh.chunks) got += " " + std::to_string(t >> 32) + ":" + std::to_string(t & 0xffffffff);
          return fail(what + ": its buffers do not hold exactly the granted version (chunks" + got + ", counter epoch " +
                      std::to_string(sh.counter.epoch) + " chunks " + std::to_string(sh.counter.chunks) + ")");
        }
      } else if (c.code == Code::kNotUpdated) {
        if (c.version != o.before) return fail(what + ": not updated, but holds another version than before");
      } else if (c.version >= 0 && (o.kind != OpRecord::Kind::kUpdate || c.version != o.before)) {
        return fail(what + ": failed, but holds a version it did not hold before");
      }
      break;
    case OpRecord::Kind::kUnpublish:
      if (ok && (c.version >= 0 || sh.counter.epoch != 0))
        return fail(what + ": unpublished, but the counter still vouches for the buffers");
      break;
    case OpRecord::Kind::kClose:
      if (ok && (m.phase() != MemberMachine::Phase::kClosed || sh.counter.epoch != 0 || !sh.host.empty()))
        return fail(what + ": closed, but the machine is not closed or the buffers are still served");
      break;
  }
  // Every version a succeeded publish or replicate holds is in the buffers (the user's own
  // writes for a publish).
  if (ok && c.version >= 0 && o.kind == OpRecord::Kind::kPublish) {
    for (Tag t : sh.chunks)
      if (t != want) return fail(what + ": published buffers that do not hold the version");
  }
  if ((o.kind == OpRecord::Kind::kReplicate || o.kind == OpRecord::Kind::kUpdate) && a.n > 1) record_round(i, s, o, c);
  if (faultless_ && ok && o.kind == OpRecord::Kind::kPublish && a.trainer) {
    auto p = std::find_if(publications_.begin(), publications_.end(), [&](const Publication& x) {
      return x.actor == i && x.proc == a.proc && x.v == c.version && x.to < 0;
    });
    if (p == publications_.end()) p = publications_.insert(publications_.end(), Publication{a.model, i, a.proc, c.version});
    if (++p->shards == a.n) p->from = now_;  // every shard of the replica has published it
  }
  if (faultless_ && !o.cancel && o.arg == -1 && (o.kind == OpRecord::Kind::kReplicate || o.kind == OpRecord::Kind::kUpdate))
    relative_ops_.push_back(RelativeOp{i, a.proc, o.round, a.model, s, o.kind == OpRecord::Kind::kUpdate, o.started,
                                       now_, c.code, o.before, skipped_.count({i, s}) > 0});
  skipped_.erase({i, s});
  sh.user_held = c.version;
  if (c.version < 0 && o.kind != OpRecord::Kind::kOpen && chance(500)) scribble_later(i, s);
  // A publish that the registry took starts the staging behind it.
  if (ok && o.kind == OpRecord::Kind::kPublish && sh.staged && sh.counter.epoch != 0)
    stage(i, s, sh.reg, sh.counter.epoch, 0);
  if (a.unsync && sh.m->phase() != MemberMachine::Phase::kNew && sh.m->phase() != MemberMachine::Phase::kClosed &&
      o.kind != OpRecord::Kind::kOpen) {
    progress_shard(i, s);  // its next step, whatever its siblings do
  } else if (idle(a)) {
    progress(i);
  }
}

// Every shard of a replica makes the same call in a round: they must end with the same
// outcome (the same code; on success, the same version), or the program, SPMD, diverges.
// A shard's own cancel or deadline is that shard's outcome alone (the round is excused).
void World::record_round(int i, int s, const OpRecord& o, const client::CompleteOp& c) {
  const Actor& a = actors_[i];
  auto key = std::make_tuple(i, a.proc, o.round);
  auto& shards = round_outcomes_[key];
  // So is the loss of every registry (THUB_ERR_REGISTRY: reconnecting gave up, the context is
  // gone; its siblings may have had the round's answer before it went).
  const bool excused = o.cancel || c.code == Code::kCanceled || c.code == Code::kTimeout || c.code == Code::kRegistry;
  shards[s] = RoundOutcome{c.code, c.code == Code::kSuccess ? c.version : -1, excused,
                           a.conn.gen != o.gen || a.conn.st != Conn::St::kUp};
  if (static_cast<int>(shards.size()) < a.n) return;
  bool any_excused = false, differ = false, failover = false, any_ok = false, any_failed = false;
  std::set<Version> versions;
  std::string outcomes;
  for (const auto& [k, out] : shards) {
    any_excused = any_excused || out.excused;
    failover = failover || out.failover;
    any_ok = any_ok || out.code == Code::kSuccess;
    any_failed = any_failed || out.code != Code::kSuccess;
    if (out.code == Code::kSuccess) versions.insert(out.version);
    differ = differ || out.code != shards.begin()->second.code || out.version != shards.begin()->second.version;
    outcomes += " " + std::to_string(k) + ":" + std::to_string(static_cast<int>(out.code)) + "/v" + std::to_string(out.version);
  }
  round_outcomes_.erase(key);
  round_opened_.erase(key);
  if (late_rounds_.erase(key)) any_excused = true;  // a shard asked after the round's hold
  if (any_excused) {
    ++res_.rounds_excused;
    return;
  }
  if (cfg_.round_hold == 0) {  // no round-level wait configured: shards are answered alone
    ++res_.rounds_unheld;
    if (differ) ++res_.rounds_unheld_disagreeing;
    return;
  }
  ++res_.rounds;
  if (failover) ++res_.rounds_failover;
  if (!differ) return;
  if (!(any_ok && any_failed) && versions.size() <= 1) {
    // Every shard failed, with different errors (one's own local failure while the round was
    // lost): the program sees the round fail on every shard.
    ++res_.rounds_failed_apart;
    return;
  }
  ++res_.rounds_disagreeing;
  if (failover) ++res_.rounds_disagreeing_failover;
  const std::string what = a.replica + " round " + std::to_string(o.round) + " (" + kind_name(o.kind) + " " +
                           std::to_string(o.arg) + "): shards disagree:" + outcomes + (failover ? " (across a failover)" : "");
  if (res_.first_disagreement.empty()) res_.first_disagreement = what;
  trace(what);
  if (std::getenv("THUB_SIM_AGREE_LOG")) std::fprintf(stderr, "seed %llu: %s\n", static_cast<unsigned long long>(seed_), what.c_str());
  // Checked on every seed: a round whose shards split between success and failure (or hold
  // different versions) is a failure, across a registry failover too (THUB_SIM_AGREE_FAILOVER=0
  // leaves those out), except with THUB_SIM_AGREE=0.
  if (agree_ && (!failover || agree_failover_)) fail(what);
}

void World::mark_skewed(ClientId c, const std::string& why) {
  auto ss = sessions_.find(c);
  if (ss == sessions_.end() || ss->second.skewed) return;
  ss->second.skewed = true;
  skewed_.insert(c);
  ++res_.skewed;
  trace(actors_[ss->second.actor].replica + " client " + std::to_string(c) + " is skewed: " + why);
}

// Liveness of relative requests (issue 18 item 3), in a world without faults: a THUB_LATEST
// replicate made while some version of its model was published, and stayed published
// kStaysPublished after it, ends with THUB_SUCCESS, within kServedWithin; an update, when that
// version is newer than what it held (else it may be NOT_UPDATED, or VERSION_LOST when the
// newer version it began to read into its own buffers went: docs/sched.md).
// A replica of several shards makes the request when its round's first shard asks: every
// shard of the round has the round's outcome (agreement), decided from then on.
void World::check_relative_liveness() {
  std::map<std::tuple<int, uint64_t, int>, Time> made;  // (actor, process, round): its first shard's start
  for (const RelativeOp& op : relative_ops_) {
    auto [it, fresh] = made.emplace(std::make_tuple(op.actor, op.proc, op.round), op.started);
    if (!fresh) it->second = std::min(it->second, op.started);
  }
  for (const RelativeOp& op : relative_ops_) {
    const Time asked = made.at(std::make_tuple(op.actor, op.proc, op.round));
    Version witness = -1;
    for (const Publication& p : publications_) {
      if (p.model != op.model || p.from < 0 || p.from > asked) continue;
      if ((p.to < 0 ? now_ : p.to) >= asked + kStaysPublished) witness = std::max(witness, p.v);
    }
    if (op.update && witness <= op.before) witness = -1;  // nothing newer than it held stayed
    if (witness < 0 || actors_[op.actor].seed) continue;  // (a seed buffer may have nothing to seed)
    ++res_.relative_checked;
    if (op.update && op.code == Code::kNotUpdated && op.skipped) {  // a newer one was on its way in
      ++res_.relative_skipped;
      continue;
    }
    res_.relative_longest_us = std::max<int64_t>(res_.relative_longest_us, op.ended - asked);
    const std::string who = actors_[op.actor].replica + "/" + std::to_string(op.shard) + " " +
                            (op.update ? "update" : "replicate") + " of latest started at " + std::to_string(op.started) +
                            " (version " + std::to_string(witness) + " stayed published)";
    if (op.code != Code::kSuccess) return fail(who + " ended with code " + std::to_string(static_cast<int>(op.code)) + " at " + std::to_string(op.ended));
    if (op.ended - asked > kServedWithin)
      return fail(who + " took " + std::to_string((op.ended - asked) / kMs) + " ms from its round's start, more than its bound");
  }
}

void World::client_liveness() {
  for (const Actor& a : actors_) {
    if (!a.alive) continue;
    for (size_t s = 0; s < a.sh.size(); ++s) {
      for (const auto& [op, o] : a.sh[s].ops) {
        return fail(a.replica + "/" + std::to_string(s) + " op " + std::to_string(op) + " (" + kind_name(o.kind) + " " +
                    std::to_string(o.arg) + ", started at " + std::to_string(o.started) +
                    ") never completed; faults stopped at " + std::to_string(quiet_since_) + " (machine phase " +
                    std::to_string(static_cast<int>(a.sh[s].m->phase())) + ", registry " +
                    (a.sh[s].m->registry_up() ? "up" : "down") + ")");
      }
    }
    for (const auto& [q, p] : a.conn.pending) {
      return fail(a.replica + " request " + std::to_string(q) + " of shard " + std::to_string(p.shard) +
                  " got neither an answer nor a failure");
    }
  }
}

}  // namespace thub::sched::sim::detail
