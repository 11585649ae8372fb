// Simulated transfers (what src/client/transfer.cc does): chunks are read from the source's
// memory as it is when they land, and count only once a later read of the source's counter
// still shows the fill of the descriptor the reader was granted with (the seqlock). A partial
// source is followed by its counter; a complete one showing less fails; a source whose
// memory is gone (crash, new registration, dropped host copy) or that changed fill fails
// (source_failed, resume elsewhere from what was checked); a link that stops moving is given
// up after kStallTimeout. Links are fast, slow across datacenters, or slow as a fault.
// Readers also fail on their own side while the source is healthy (2% of the reads of a
// complete source; a partial source followed for longer than kPartialPatience): the registry
// must judge such reports, not hide the source on one word.
#include <algorithm>
#include <cstdio>
#include <string>

#include "tests/sched/simulation_world.h"

namespace thub::sched::sim::detail {

bool World::parse(const std::string& d, Source* src) const {
  char kind[8] = {0};
  int actor = 0, shard = 0;
  unsigned long long reg = 0, epoch = 0;
  long long last = 0;
  if (std::sscanf(d.c_str(), "%4[a-z]/%d/%llu/%d/%llu/%lld", kind, &actor, &reg, &shard, &epoch, &last) != 6) return false;
  if (actor < 0 || actor >= static_cast<int>(actors_.size())) return false;
  src->host = std::string(kind) == "host";
  src->actor = actor;
  src->reg = reg;
  src->shard = shard;
  src->epoch = static_cast<uint32_t>(epoch);
  src->staged = !src->host && last != 0;
  src->v = src->host ? last : -1;
  return true;
}

const std::vector<Tag>* World::source_now(const Source& src, Counter* c) const {
  const Actor& b = actors_[src.actor];
  if (!b.alive || src.shard >= static_cast<int>(b.sh.size())) return nullptr;
  const Shard& t = b.sh[src.shard];
  if (t.reg != src.reg) return nullptr;
  if (!src.host) {
    *c = t.counter;
    return &t.chunks;
  }
  auto it = t.host.find(src.v);
  if (it == t.host.end() || it->second.epoch != src.epoch) return nullptr;
  *c = Counter{it->second.epoch, static_cast<int>(it->second.chunks.size())};
  return &it->second.chunks;
}

Job* World::job(int i, int s, uint64_t serial) {
  Actor& a = actors_[i];
  if (!res_.ok || !a.alive || s >= static_cast<int>(a.sh.size())) return nullptr;
  auto& j = a.sh[s].job;
  return j && j->serial == serial ? &*j : nullptr;
}

void World::begin_transfer(int i, int s, const client::BeginTransfer& a) {
  Actor& me = actors_[i];
  Shard& sh = me.sh[s];
  const int total = static_cast<int>(sh.chunks.size());
  if (sh.job) return fail(me.replica + "/" + std::to_string(s) + ": a transfer began while another fills the buffers");
  Job j;
  j.id = a.transfer;
  j.serial = ++serial_;
  j.v = a.version;
  j.fill = a.fill;
  if (!parse(a.source_descriptor, &j.src)) {
    sh.job = j;
    return end_transfer(i, s, Code::kTransport, false, "cannot decode the source's descriptor");
  }
  j.partial = a.source_partial || j.src.staged;  // a staged publisher's counter leads
  j.may_lag = a.source_partial;
  j.issued = j.landed = j.checked = j.held = std::min<int>(static_cast<int>(a.start), total);
  j.ready = j.partial ? 0 : total;
  j.last_progress = now_;
  j.per_chunk = (1 + static_cast<Time>(r(3))) * kMs;
  if (actors_[j.src.actor].dc != me.dc) j.per_chunk = (5 + static_cast<Time>(r(10))) * kMs;  // the slow link
  if (!calm() && chance(50)) j.per_chunk = (20 + static_cast<Time>(r(60))) * kMs;             // a slow read
  if (!calm() && chance(20)) j.stall_at = now_ + static_cast<Time>(r(static_cast<uint64_t>(j.per_chunk * total + 1)));
  j.started = now_;
  // Reader-side failures of a healthy source: 2% of the reads of a complete source break on
  // the reader's own side (its link, its process) and are reported as the source's failure.
  if (!calm() && !a.source_partial && j.held < total && chance(20))
    j.false_report = j.held + static_cast<int>(r(static_cast<uint64_t>(total - j.held)));
  sh.job = j;
  trace(me.replica + "/" + std::to_string(s) + " transfer " + std::to_string(a.transfer) + " of v" +
        std::to_string(a.version) + " begins from " + a.source_descriptor + (a.source_partial ? " (partial)" : "") +
        " at " + std::to_string(a.start) + " fill " + std::to_string(a.fill));
  const uint64_t serial = j.serial;
  // The transfer runs on the progress thread: what it reports comes back later.
  at(0, [=] {
    Job* k = job(i, s, serial);
    if (!k) return;
    if (k->held >= total) return end_transfer(i, s, Code::kSuccess, false, "");
    watchdog(i, s, serial);
    if (k->partial) {
      read_counter(i, s, serial);  // learn what is ready first
    } else {
      read_chunks(i, s, serial);
    }
  });
}

void World::read_chunks(int i, int s, uint64_t serial) {
  Job* j = job(i, s, serial);
  if (!j) return;
  for (int k = j->issued; k < j->ready; ++k) at((k - j->landed + 1) * j->per_chunk, [=] { land(i, s, serial, k); });
  j->issued = std::max(j->issued, j->ready);
}

void World::land(int i, int s, uint64_t serial, int k) {
  Job* j = job(i, s, serial);
  if (!j || (j->stall_at >= 0 && now_ >= j->stall_at)) return;  // stalled: never lands
  Counter c;
  const std::vector<Tag>* src = source_now(j->src, &c);
  if (!src) return end_transfer(i, s, Code::kTransport, true, "a get failed: the source's memory is gone");
  if (!calm() && chance(2)) return end_transfer(i, s, Code::kTransport, false, "copying out to the tensors failed");
  Shard& sh = actors_[i].sh[s];
  sh.chunks[k] = (*src)[k];  // our buffers change as bytes land; the counter says what counts
  j->landed = std::max(j->landed, k + 1);
  j->last_progress = now_;
  if (j->landed >= j->issued) read_counter(i, s, serial);  // vouch for what landed
}

void World::read_counter(int i, int s, uint64_t serial) {
  Job* j = job(i, s, serial);
  if (!j || j->counter_read) return;
  j->counter_read = true;
  const int probe = j->landed;  // what this read can vouch for: only what landed before it
  at(std::max<Time>(kMs, j->per_chunk / 2), [=] { on_counter(i, s, serial, probe); });
}

void World::on_counter(int i, int s, uint64_t serial, int probe) {
  Job* j = job(i, s, serial);
  if (!j) return;
  j->counter_read = false;
  if (j->stall_at >= 0 && now_ >= j->stall_at) return;
  Shard& sh = actors_[i].sh[s];
  const int total = static_cast<int>(sh.chunks.size());
  Counter c;
  const std::vector<Tag>* src = source_now(j->src, &c);
  if (!src) return end_transfer(i, s, Code::kTransport, true, "reading the source's counter failed: its memory is gone");
  if (c.epoch == j->src.epoch) {
    j->seen_fill = true;
    const int n = std::min(c.chunks, total);
    if (!j->partial && n < total)
      return end_transfer(i, s, Code::kTransport, true, "a complete source's counter shows less than everything");
    if (j->partial && n > j->ready) {
      j->ready = n;
      j->last_progress = now_;
    }
    j->checked = std::max(j->checked, std::min(probe, n));
    if (j->checked > j->held) {
      j->held = j->checked;
      sh.counter = Counter{j->fill, j->held};  // data first, then our counter (chained readers)
    }
    if (j->false_report >= 0 && j->held >= j->false_report && j->held < total)
      return end_transfer(i, s, Code::kTransport, true, "the reader's own link broke (its source is healthy)");
  } else if (j->seen_fill || !j->may_lag) {
    // The source's buffers were given up or refilled since the grant: nothing read since the
    // last good counter read is trusted.
    return end_transfer(i, s, Code::kTransport, true, "the source's buffers changed during the transfer");
  }
  if (j->held >= total) return end_transfer(i, s, Code::kSuccess, false, "");
  if (j->issued < j->ready) return read_chunks(i, s, serial);
  if (j->landed < j->issued) return;  // the last landing reads the counter again
  if (j->landed > j->checked) return read_counter(i, s, serial);
  // Starved on a partial source: read its counter again a little later.
  at((2 + static_cast<Time>(r(4))) * kMs, [=] { read_counter(i, s, serial); });
}

// A source that makes no progress for kStallTimeout has failed (stopped, or the link died).
void World::watchdog(int i, int s, uint64_t serial) {
  Job* j = job(i, s, serial);
  if (!j) return;
  if (now_ - j->last_progress > kStallTimeout)
    return end_transfer(i, s, Code::kTransport, true, "the source made no progress (stalled or gone)");
  // A reader whose patience with a partial source is shorter than the chain it follows
  // reports a healthy source (its own stall watchdog, docs/sched.md: failures are judged).
  if (j->may_lag && now_ - j->started > kPartialPatience)
    return end_transfer(i, s, Code::kTransport, true, "the partial source kept us waiting too long");
  at(50 * kMs, [=] { watchdog(i, s, serial); });
}

void World::end_transfer(int i, int s, Code code, bool source_failed, const std::string& why) {
  Shard& sh = actors_[i].sh[s];
  Job j = *sh.job;
  sh.job.reset();  // what is still in flight is abandoned (cancelled with the endpoint)
  ++res_.transfers;
  if (source_failed) ++res_.source_failures;
  mix("T" + std::to_string(static_cast<int>(code)) + (source_failed ? "f" : "") + std::to_string(j.held));
  trace(actors_[i].replica + "/" + std::to_string(s) + " transfer " + std::to_string(j.id) + " of v" +
        std::to_string(j.v) + " ends: " + std::to_string(static_cast<int>(code)) + (source_failed ? " (source) " : " ") +
        why + ", held " + std::to_string(j.held));
  const uint64_t reg = sh.reg;
  // Reported from the progress thread to the engine: a later event.
  at(0, [=] {
    Actor& a = actors_[i];
    if (!a.alive || s >= static_cast<int>(a.sh.size()) || a.sh[s].reg != reg) return;
    feed(i, s, client::TransferEnded{j.id, code, source_failed, static_cast<uint64_t>(j.held), why});
  });
}

}  // namespace thub::sched::sim::detail
