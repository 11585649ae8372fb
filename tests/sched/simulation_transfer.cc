// Transfers in the simulation: the real transfer machine (src/client/transfer_machine.h, the
// decisions of src/client/transfer.cc), with this world as its I/O. Its reads land after a
// link delay and see the source's memory as it is when they land; its counter reads see the
// source's counter then (what the seqlock accepts is the machine's rule, not ours). A source
// whose memory is gone (crash, new registration, dropped host copy) fails its reads; one that
// changed fill shows another epoch; a link that stops moving never answers, and the machine's
// stall watchdog gives up on it. Links are fast, slow across datacenters, or slow as a fault.
// Readers also fail on their own side while the source is healthy (2% of the reads of a
// complete source; a partial source followed for longer than kPartialPatience): the registry
// must judge such reports, not hide the source on one word. Bytes are chunks here (a chunk
// is one byte of the machine's stream, one integrity block); the simulated sources publish
// without checksums (their flag word reads 0).
#include <algorithm>
#include <deque>
#include <iterator>
#include <variant>
#include <cstdio>
#include <string>

#include "src/client/progress_counter.h"
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
    return end_transfer(i, s, Code::kTransport, false, 0, "cannot decode the source's descriptor");
  }
  client::TransferPlan plan;
  plan.total = static_cast<uint64_t>(total);
  plan.block = 1;
  plan.start = a.start;
  plan.epoch = j.src.epoch;
  plan.partial = a.source_partial || j.src.staged;  // a staged publisher's counter leads
  plan.may_lag = j.may_lag = a.source_partial;
  plan.chunk_size = 1;
  plan.vouch_bytes = 1;
  plan.stall_timeout_us = kStallTimeout;
  // Half the transfers read as over the sockets' parked reads (no draw: the seed's other
  // choices stay as they were).
  j.watched = plan.watched = parked_ < 0 ? j.serial % 2 == 1 : parked_ == 1;
  // Watched reads span 1 to 3 chunks (again from the serial), so that a source's counter may
  // stand inside one: what the source is known to hold is read apart from what it is not
  // (TransferMachine::pump), and a parked read covers several of its chunks.
  if (j.watched) plan.chunk_size = 1 + (j.serial / 2) % 3;
  j.m = std::make_shared<client::TransferMachine>(std::move(plan));
  j.per_chunk = (1 + static_cast<Time>(r(3))) * kMs;
  if (actors_[j.src.actor].dc != me.dc) j.per_chunk = (5 + static_cast<Time>(r(10))) * kMs;  // the slow link
  if (!calm() && chance(50)) j.per_chunk = (20 + static_cast<Time>(r(60))) * kMs;             // a slow read
  if (!calm() && chance(20)) j.stall_at = now_ + static_cast<Time>(r(static_cast<uint64_t>(j.per_chunk * total + 1)));
  j.started = j.link_free = now_;
  const int held = static_cast<int>(j.m->held());
  // Reader-side failures of a healthy source: 2% of the reads of a complete source break on
  // the reader's own side (its link, its process) and are reported as the source's failure.
  if (!calm() && !a.source_partial && held < total && chance(20))
    j.false_report = held + static_cast<int>(r(static_cast<uint64_t>(total - held)));
  sh.job = j;
  trace(me.replica + "/" + std::to_string(s) + " transfer " + std::to_string(a.transfer) + " of v" +
        std::to_string(a.version) + " begins from " + a.source_descriptor + (a.source_partial ? " (partial)" : "") +
        " at " + std::to_string(a.start) + " fill " + std::to_string(a.fill));
  const uint64_t serial = j.serial;
  // The transfer runs on the progress thread: it starts a little later.
  at(0, [=] {
    Job* k = job(i, s, serial);
    if (!k) return;
    std::shared_ptr<client::TransferMachine> m = k->m;
    run_transfer(i, s, serial, m->start(now_));
    if (job(i, s, serial)) at(50 * kMs, [=] { watchdog(i, s, serial); });
  });
}

// Carries out the machine's steps in order; what a step itself makes the machine do (a
// reader-side failure found as our counter moves) follows behind them.
void World::run_transfer(int i, int s, uint64_t serial, std::vector<client::TransferStep> steps) {
  std::deque<client::TransferStep> todo(std::make_move_iterator(steps.begin()), std::make_move_iterator(steps.end()));
  while (!todo.empty()) {
    Job* j = job(i, s, serial);
    if (!j) return;
    const client::TransferStep step = std::move(todo.front());
    todo.pop_front();
    const Time latency = std::max<Time>(kMs, j->per_chunk / 2);  // counter and checksum reads: their own lane
    if (const auto* c = std::get_if<client::ReadChunk>(&step)) {
      // What the source is known to hold is never asked for in one read with what it is not:
      // parked, such a read would keep the known bytes back for as long as the source takes
      // (for good, from a source that stopped).
      const uint64_t ready = j->m->ready();
      if (c->off < ready && c->off + c->len > ready) {
        return fail(actors_[i].replica + "/" + std::to_string(s) + ": a read of [" + std::to_string(c->off) + ", " +
                    std::to_string(c->off + c->len) + ") crosses what its source is known to hold (" +
                    std::to_string(ready) + ")");
      }
      j->link_free = std::max(j->link_free, now_) + j->per_chunk * static_cast<Time>(c->len);
      const client::ReadChunk chunk = *c;
      if (j->watched) j->order.push_back(chunk.off);
      at(j->link_free - now_, [=] { land(i, s, serial, chunk); });
    } else if (const auto* h = std::get_if<client::ReadHashes>(&step)) {
      const uint64_t upto = h->upto;
      const bool watch = h->watch;
      at(latency, [=] { land_hashes(i, s, serial, upto, watch); });
    } else if (std::holds_alternative<client::ReadCounter>(step)) {
      at(latency, [=] { land_counter(i, s, serial); });
    } else if (const auto* later = std::get_if<client::ReadCounterAfter>(&step)) {
      at(later->delay_us, [=] {
        if (Job* k = job(i, s, serial)) {
          std::shared_ptr<client::TransferMachine> m = k->m;
          run_transfer(i, s, serial, m->on_retry(now_));
        }
      });
    } else if (const auto* show = std::get_if<client::ShowHeld>(&step)) {
      Shard& sh = actors_[i].sh[s];
      const int total = static_cast<int>(sh.chunks.size());
      const int held = static_cast<int>(show->held);
      sh.counter = Counter{j->fill, held};  // data first, then our counter (chained readers)
      if (j->false_report >= 0 && held >= j->false_report && held < total) {
        j->false_report = -1;
        for (auto& more : j->m->fail(Code::kTransport, "the reader's own link broke (its source is healthy)", true, now_))
          todo.push_back(std::move(more));
      }
    } else if (const auto* f = std::get_if<client::TransferFinish>(&step)) {
      end_transfer(i, s, f->code, f->source_failed, f->held, f->error);
    }
  }
}

// A counter as a reader reads it (8 bytes: the fill and what it holds).
static uint64_t counter_word(const Counter& c) {
  return c.epoch == 0 ? client::kCounterInvalid
                      : client::counter_value(c.epoch, static_cast<uint64_t>(std::max(c.chunks, 0)));
}

void World::land(int i, int s, uint64_t serial, client::ReadChunk rc) {
  Job* j = job(i, s, serial);
  if (!j || stalled(*j)) return;  // stalled: never lands
  const uint64_t off = rc.off, len = rc.len;
  std::shared_ptr<client::TransferMachine> m = j->m;
  Counter c;
  const std::vector<Tag>* src = source_now(j->src, &c);
  const uint64_t word = src ? counter_word(c) : 0;
  if (j->watched) {
    // Answered in order, and parked while the source's counter shows fewer bytes of the fill
    // than the read's end: look again a millisecond later (the source's counter moves wake
    // its server at once; the link then takes as long as it takes).
    if (!j->order.empty() && j->order.front() != off) {
      j->behind[off] = rc;  // landed when the one before it has
      return;
    }
    if (src && word >= rc.park_lo && word < rc.park_hi) {
      at(kMs, [=] { land(i, s, serial, rc); });
      return;
    }
    if (!j->order.empty()) j->order.pop_front();
    if (!j->order.empty()) {
      auto next = j->behind.find(j->order.front());
      if (next != j->behind.end()) {
        const client::ReadChunk n = next->second;
        j->behind.erase(next);
        at(0, [=] { land(i, s, serial, n); });
      }
    }
  }
  if (!src) return run_transfer(i, s, serial, m->on_chunk(off, len, false, "a get failed: the source's memory is gone", now_));
  Shard& sh = actors_[i].sh[s];
  for (uint64_t k = off; k < off + len && k < sh.chunks.size() && k < src->size(); ++k)
    sh.chunks[k] = (*src)[k];  // our buffers change as bytes land; the counter says what counts
  // A watched read's sample: the counter as it is after the bytes were read.
  run_transfer(i, s, serial, m->on_chunk(off, len, true, "", now_, j->watched ? &word : nullptr));
  if (job(i, s, serial) && !calm() && chance(2))
    run_transfer(i, s, serial, m->fail(Code::kTransport, "copying out to the tensors failed", false, now_));
}

void World::land_hashes(int i, int s, uint64_t serial, uint64_t upto, bool watch) {
  Job* j = job(i, s, serial);
  if (!j || stalled(*j)) return;
  std::shared_ptr<client::TransferMachine> m = j->m;
  Counter c;
  if (!source_now(j->src, &c))
    return run_transfer(i, s, serial, m->on_hashes(upto, false, "the source's memory is gone", now_));
  m->hash_words()[0] = 0;  // published without checksums
  const uint64_t word = counter_word(c);  // a watched read: the counter after the words
  run_transfer(i, s, serial, m->on_hashes(upto, true, "", now_, watch ? &word : nullptr));
}

void World::land_counter(int i, int s, uint64_t serial) {
  Job* j = job(i, s, serial);
  if (!j || stalled(*j)) return;
  std::shared_ptr<client::TransferMachine> m = j->m;
  Counter c;
  if (!source_now(j->src, &c))
    return run_transfer(i, s, serial, m->on_counter(false, 0, "the source's memory is gone", now_));
  run_transfer(i, s, serial, m->on_counter(true, counter_word(c), "", now_));
}

// The machine's stall watchdog, every 50 ms; and a reader whose patience with a partial
// source is shorter than the chain it follows reports a healthy source (docs/sched.md:
// failures are judged).
void World::watchdog(int i, int s, uint64_t serial) {
  Job* j = job(i, s, serial);
  if (!j) return;
  std::shared_ptr<client::TransferMachine> m = j->m;
  const std::string impatient = j->may_lag && now_ - j->started > kPartialPatience
                                    ? "the partial source kept us waiting too long" : "";
  run_transfer(i, s, serial, m->on_watchdog(now_, impatient));
  if (job(i, s, serial)) at(50 * kMs, [=] { watchdog(i, s, serial); });
}

void World::end_transfer(int i, int s, Code code, bool source_failed, uint64_t held, const std::string& why) {
  Shard& sh = actors_[i].sh[s];
  Job j = *sh.job;
  sh.job.reset();  // what is still in flight is abandoned (cancelled with the endpoint)
  ++res_.transfers;
  if (source_failed) ++res_.source_failures;
  mix("T" + std::to_string(static_cast<int>(code)) + (source_failed ? "f" : "") + std::to_string(held));
  trace(actors_[i].replica + "/" + std::to_string(s) + " transfer " + std::to_string(j.id) + " of v" +
        std::to_string(j.v) + " ends: " + std::to_string(static_cast<int>(code)) + (source_failed ? " (source) " : " ") +
        why + ", held " + std::to_string(held));
  const uint64_t reg = sh.reg;
  // Reported from the progress thread to the engine: a later event.
  at(0, [=] {
    Actor& a = actors_[i];
    if (!a.alive || s >= static_cast<int>(a.sh.size()) || a.sh[s].reg != reg) return;
    feed(i, s, client::TransferEnded{j.id, code, source_failed, held, why});
  });
}

}  // namespace thub::sched::sim::detail
