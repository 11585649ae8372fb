#include "src/client/transfer.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "src/client/progress_counter.h"
#include "src/client/transfer_machine.h"
#include "src/common/host.h"
#include "src/transport/worker.h"

namespace thub::client {

using transport::Peer;
using transport::RemoteKey;
using transport::Worker;

namespace {

constexpr int64_t kWatchdogUs = 50'000;
// Twenty watchdog periods without any event of the transfer: this process was stopped (the
// source's stall clock does not count it; a thread starved that long is rare and only delays
// the verdict by the gap).
constexpr int64_t kOwnPauseUs = 20 * kWatchdogUs;
// From a complete source the counter is read to vouch for what landed once this much has
// landed since the last read (one integrity block: what our own counter moves by under
// verify), and at the end: with small chunks a read per chunk would double the round trips.
constexpr uint64_t kVouchBytes = kHashBlock;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One transfer, on the progress thread: the I/O of a TransferMachine. Three kinds of reads go
// to the source: data chunks, its integrity region (the flag word and one checksum per 1 MiB
// block) and its progress counter; the machine decides which, when, and what they vouch
// for. Its steps are carried out in order: a completion that arrives while steps are being
// carried out queues its own behind them (the machine is never asked twice at once).
class Job : public std::enable_shared_from_this<Job> {
 public:
  Job(Worker& w, TransferSpec s, AdvanceFn on_advance, std::function<void(TransferResult)> on_done)
      : w_(w), s_(std::move(s)), on_advance_(std::move(on_advance)), on_done_(std::move(on_done)) {}
  void start();
  // Ended, and none of its reads can land any more: none in flight, or the rest were canceled
  // (a source elsewhere: its endpoint or socket is closed; one read with process reads: the
  // reads still queued were dropped) or their source on this host exited.
  [[nodiscard]] bool settled() const {
    return finished_ && (!m_ || m_->inflight() == 0 || !local_ || clean_cancel_ || !process_alive(s_.source.pid));
  }

 private:
  void run(std::vector<TransferStep> steps);
  void carry_out(const TransferStep& step);
  void issue(const ReadChunk& c);
  size_t remote_segment(uint64_t off) const;
  void finish(const TransferFinish& f);
  void watchdog();

  Worker& w_;
  TransferSpec s_;
  AdvanceFn on_advance_;
  transport::ReadPath last_path_ = transport::ReadPath::kUcxGet;  // of the latest read issued
  std::function<void(TransferResult)> on_done_;
  std::unique_ptr<TransferMachine> m_;
  std::deque<TransferStep> steps_;
  bool running_ = false;
  bool finished_ = false;
  bool local_ = false;  // the source runs on this host: watch its pid
  bool clean_cancel_ = false;  // its reads cannot land once cancelled (Worker::reads_cancel_cleanly)

  std::shared_ptr<Peer> peer_;
  std::shared_ptr<Peer> counter_peer_;  // lane 1: progress counter reads
  std::vector<std::shared_ptr<RemoteKey>> keys_;  // per remote segment
  std::vector<uint64_t> remote_off_;              // stream offset of each remote segment
  std::shared_ptr<RemoteKey> counter_key_;
  std::shared_ptr<RemoteKey> hash_key_;
  uint64_t remote_counter_ = 0;  // where counter reads land
  uint64_t path_bytes_[transport::kReadPathCount] = {};
};

}  // namespace

struct LateReads {
  std::vector<std::weak_ptr<Job>> jobs;  // transfers into these buffers not yet settled
};

namespace {

void Job::start() {
  const auto& rsegs = s_.source.segments;
  const uint64_t total = s_.local->total_bytes();
  TransferPlan plan;
  plan.total = total;
  plan.block = kHashBlock;
  plan.start = s_.start;
  plan.epoch = s_.source.epoch;
  plan.partial = s_.source_partial;
  plan.may_lag = s_.source_may_lag;
  plan.verify = s_.verify;
  plan.chunk_size = s_.chunk_size;
  plan.max_inflight = s_.max_inflight;
  plan.vouch_bytes = kVouchBytes;
  plan.stall_timeout_us = s_.stall_timeout_us;
  plan.own_pause_us = kOwnPauseUs;
  plan.where = s_.where;
  const Stream* local = s_.local;
  plan.local_hash = [local](uint64_t b) { return local->hash_block(b); };
  for (const auto& l : s_.local->segments()) plan.cuts.push_back(l.offset + l.bytes);
  uint64_t off = 0;
  for (const auto& r : rsegs) {
    remote_off_.push_back(off);
    off += r.bytes;
    plan.cuts.push_back(off);
  }
  m_ = std::make_unique<TransferMachine>(std::move(plan));
  try {
    // The caller checked the descriptor against our plan (Holding::mismatch); these are the
    // executor's own bounds, so that nothing a peer sent can make it write outside our memory.
    uint64_t sum = 0;
    for (const auto& r : rsegs) {
      if (r.bytes == 0 || r.bytes > total - sum) throw Error(Code::kLayout, "the source's stream does not match ours");
      sum += r.bytes;
    }
    if (sum != total || s_.source.hashes.bytes != s_.fill.hash_region_bytes() ||
        s_.fill.hash_region_bytes() != (1 + s_.local->hash_blocks()) * sizeof(uint64_t) ||
        s_.source.counter.bytes != sizeof(uint64_t)) {
      throw Error(Code::kLayout, "the source's descriptor does not match this replica's stream");
    }
  } catch (const Error& e) {
    return run(m_->fail(e.code(), e.what(), false, now_us()));
  }
  try {
    local_ = s_.source.host == host_identity();
    bool error_handling = !local_ || w_.detects_local_peer_failure();
    peer_ = w_.peer(s_.source.worker_address, error_handling);
    for (const auto& r : rsegs) keys_.push_back(w_.remote_key(peer_, r.rkey));
    // The counter is read on its own endpoint: on the data endpoint its reply would wait
    // behind every chunk already asked for, and the reader would learn of new bytes only
    // after its link had gone idle.
    counter_peer_ = w_.peer(s_.source.worker_address, error_handling, 1);
    counter_key_ = w_.remote_key(counter_peer_, s_.source.counter.rkey);
    hash_key_ = w_.remote_key(counter_peer_, s_.source.hashes.rkey);
    clean_cancel_ = w_.reads_cancel_cleanly(peer_) && w_.reads_cancel_cleanly(counter_peer_);
    // Chunk reads that park at the source and bring its counter, where the path can
    // (info key parked_reads).
    bool watch = s_.parked_reads;
    for (const auto& k : keys_) watch = watch && Worker::watches(*peer_, *k, *counter_key_);
    watch = watch && Worker::watches(*counter_peer_, *hash_key_, *counter_key_);
    if (watch) m_->watch_reads(Worker::across(*peer_) ? 0 : s_.parked_chunk_size);
  } catch (const Error& e) {
    return run(m_->fail(Code::kTransport, e.what(), true, now_us()));
  }
  run(m_->start(now_us()));
  if (!finished_) {
    auto self = shared_from_this();
    w_.post_after(kWatchdogUs, [self] { self->watchdog(); });
  }
}

void Job::run(std::vector<TransferStep> steps) {
  for (auto& st : steps) steps_.push_back(std::move(st));
  if (running_) return;
  running_ = true;
  while (!steps_.empty()) {
    TransferStep st = std::move(steps_.front());
    steps_.pop_front();
    carry_out(st);
  }
  running_ = false;
}

void Job::carry_out(const TransferStep& step) {
  auto self = shared_from_this();
  if (const auto* c = std::get_if<ReadChunk>(&step)) {
    issue(*c);
  } else if (const auto* h = std::get_if<ReadHashes>(&step)) {
    const uint64_t upto = h->upto;
    if (h->watch) {
      // An empty range: never parked; the counter comes back behind the words.
      auto sample = std::make_shared<uint64_t>(0);
      Worker::Watch watch{s_.source.counter.addr, counter_key_.get(), 0, 0, sample.get()};
      w_.get_watched(counter_peer_, m_->hash_words() + h->first, h->words * sizeof(uint64_t),
                     s_.source.hashes.addr + h->first * sizeof(uint64_t), *hash_key_, watch,
                     [self, upto, sample](bool ok, const std::string& err) {
                       self->run(self->m_->on_hashes(upto, ok, err, now_us(), ok ? sample.get() : nullptr));
                     });
      return;
    }
    w_.get(counter_peer_, m_->hash_words() + h->first, h->words * sizeof(uint64_t),
           s_.source.hashes.addr + h->first * sizeof(uint64_t), *hash_key_,
           [self, upto](bool ok, const std::string& err) { self->run(self->m_->on_hashes(upto, ok, err, now_us())); });
  } else if (std::holds_alternative<ReadCounter>(step)) {
    w_.get(counter_peer_, &remote_counter_, sizeof remote_counter_, s_.source.counter.addr, *counter_key_,
           [self](bool ok, const std::string& err) {
             self->run(self->m_->on_counter(ok, self->remote_counter_, err, now_us()));
           });
  } else if (const auto* r = std::get_if<ReadCounterAfter>(&step)) {
    w_.post_after(r->delay_us, [self] { self->run(self->m_->on_retry(now_us())); });
  } else if (const auto* sh = std::get_if<ShowHeld>(&step)) {
    // Checksums first, then our counter (FillWriter::show), for readers chained on us.
    s_.fill.show(sh->flag, m_->hash_words() + 1, sh->hashes_from, sh->hashes_to, sh->held);
    if (sh->advanced && on_advance_) on_advance_(sh->held, last_path_);
  } else if (const auto* f = std::get_if<TransferFinish>(&step)) {
    finish(*f);
  }
}

size_t Job::remote_segment(uint64_t off) const {
  auto it = std::upper_bound(remote_off_.begin(), remote_off_.end(), off);
  return static_cast<size_t>(it - remote_off_.begin()) - 1;
}

void Job::issue(const ReadChunk& c) {
  const uint64_t off = c.off, len = c.len;
  const Segment& l = s_.local->segments()[s_.local->find(off)];
  size_t ri = remote_segment(off);
  auto self = shared_from_this();
  last_path_ = transport::Worker::read_path(*peer_, *keys_[ri]);
  const auto path = static_cast<size_t>(last_path_);
  void* dst = l.addr + (off - l.offset);
  const uint64_t remote = s_.source.segments[ri].addr + (off - remote_off_[ri]);
  if (c.park_hi != 0) {
    auto sample = std::make_shared<uint64_t>(0);
    Worker::Watch watch{s_.source.counter.addr, counter_key_.get(), c.park_lo, c.park_hi, sample.get()};
    w_.get_watched(peer_, dst, len, remote, *keys_[ri], watch,
                   [self, off, len, path, sample](bool ok, const std::string& err) {
                     if (ok && !self->finished_) self->path_bytes_[path] += len;
                     self->run(self->m_->on_chunk(off, len, ok, err, now_us(), ok ? sample.get() : nullptr));
                   });
    return;
  }
  w_.get(peer_, dst, len, remote, *keys_[ri], [self, off, len, path](bool ok, const std::string& err) {
    if (ok && !self->finished_) self->path_bytes_[path] += len;
    self->run(self->m_->on_chunk(off, len, ok, err, now_us()));
  });
}

// Gets to a dead or stuck source may never complete (no peer failure handling over shared
// memory; a stopped process over TCP): the machine gives up on them and reports the source.
// Endpoints with error handling are closed, which cancels what is in flight; the rest may
// still complete into memory we resume into, but only with bytes read from a source that had
// not been told to give them up (it was stuck).
void Job::watchdog() {
  if (finished_) return;
  const bool dead = local_ && !process_alive(s_.source.pid);
  std::string gone = dead ? "the source process (pid " + std::to_string(s_.source.pid) + ") is gone" : "";
  std::vector<TransferStep> steps = m_->on_watchdog(now_us(), gone);
  if (m_->finished()) {
    if (peer_ && dead) {
      w_.forget_peer(peer_);
    } else if (peer_ && (m_->inflight() > 0 || m_->counter_pending())) {
      w_.cancel_peer(peer_);
    }
  }
  run(std::move(steps));
  if (finished_) return;
  auto self = shared_from_this();
  w_.post_after(kWatchdogUs, [self] { self->watchdog(); });
}

void Job::finish(const TransferFinish& f) {
  if (finished_) return;
  finished_ = true;
  TransferResult r;
  r.code = f.code;
  r.error = f.error;
  r.source_failed = f.source_failed;
  r.held = f.held;
  r.stats.counter_reads = m_->counter_reads();
  r.stats.gets = m_->gets();
  r.stats.bytes = m_->bytes();
  for (size_t p = 0; p < transport::kReadPathCount; ++p) r.stats.path_bytes[p] = path_bytes_[p];
  r.stats.across = peer_ && transport::Worker::across(*peer_);
  if (!f.abandoned) {
    // Nothing can touch the keys any more. (Abandoned gets keep them until they complete.)
    keys_.clear();
    counter_key_.reset();
    hash_key_.reset();
    peer_.reset();
    counter_peer_.reset();
  }
  auto done = std::move(on_done_);
  on_advance_ = nullptr;
  if (done) done(std::move(r));
}

// A transfer into buffers that reads given up may still land in starts once none may: their
// source resumed and answered them (each completion counts), or exited (a sender on this host
// writes into our one receive queue in order, so what it sent before it died is taken before
// any later reply). Checked every millisecond, without the stall watchdog: the wait is for
// the stopped source, not for the one just granted.
void start_when_clear(Worker& worker, const std::shared_ptr<Job>& job, const std::shared_ptr<LateReads>& late) {
  if (late) {
    auto& jobs = late->jobs;
    jobs.erase(std::remove_if(jobs.begin(), jobs.end(),
                              [](const std::weak_ptr<Job>& w) {
                                auto j = w.lock();
                                return !j || j->settled();
                              }),
               jobs.end());
    if (!jobs.empty()) {
      worker.post_after(1000, [&worker, job, late] { start_when_clear(worker, job, late); });
      return;
    }
    late->jobs.push_back(job);  // until it ends, its own reads may be given up too
  }
  job->start();
}

}  // namespace

std::shared_ptr<LateReads> make_late_reads() { return std::make_shared<LateReads>(); }

void start_transfer(Worker& worker, TransferSpec spec, AdvanceFn on_advance,
                    std::function<void(TransferResult)> on_done) {
  std::shared_ptr<LateReads> late = spec.late;
  auto job = std::make_shared<Job>(worker, std::move(spec), std::move(on_advance), std::move(on_done));
  worker.post([&worker, job, late] { start_when_clear(worker, job, late); });
}

}  // namespace thub::client
