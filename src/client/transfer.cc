#include "src/client/transfer.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "src/client/progress_counter.h"
#include "src/common/host.h"
#include "src/transport/worker.h"

namespace thub::client {

using transport::Peer;
using transport::RemoteKey;
using transport::Worker;

namespace {

constexpr int64_t kWatchdogUs = 50'000;
constexpr int64_t kReadAheadUs = 100;  // counter re-read while data from a partial source moves

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class Job : public std::enable_shared_from_this<Job> {
 public:
  Job(Worker& w, TransferSpec s) : w_(w), s_(std::move(s)) {}
  std::future<TransferResult> future() { return done_.get_future(); }
  void start();

 private:
  void fetch_hashes();
  void pump();
  void issue(uint64_t off, uint64_t len);
  void on_chunk(uint64_t off, uint64_t len, bool ok, const std::string& err);
  void poll_counter();
  void on_counter(bool ok, const std::string& err);
  void accept(uint64_t upto);
  void fail(Code code, const std::string& err, bool source_failed);
  size_t remote_segment(uint64_t off) const;
  void finish();
  bool verify_upto(uint64_t prefix);
  void check_stall();
  void watchdog();

  Worker& w_;
  TransferSpec s_;
  std::promise<TransferResult> done_;
  bool finished_ = false;
  bool local_ = false;  // the source runs on this host: watch its pid

  std::shared_ptr<Peer> peer_;
  std::shared_ptr<Peer> counter_peer_;  // lane 1: progress counter reads
  std::vector<std::unique_ptr<RemoteKey>> keys_;  // per remote segment
  std::vector<uint64_t> remote_off_;              // stream offset of each remote segment
  std::unique_ptr<RemoteKey> counter_key_;
  std::unique_ptr<RemoteKey> hash_key_;
  // The source's integrity region is read here first and copied to ours on completion: a
  // read abandoned by the watchdog that completes late lands in the job, not in our region.
  std::vector<uint64_t> hash_buf_;

  uint64_t total_ = 0;
  uint64_t issued_ = 0;     // next stream offset to request
  uint64_t prefix_ = 0;     // contiguous bytes landed
  uint64_t checked_ = 0;    // of those, bytes a later read of the source's counter vouched for
  uint64_t ready_ = 0;      // bytes the source holds (as last seen)
  uint64_t probe_ = 0;      // prefix_ when the counter read in flight was issued
  std::map<uint64_t, uint64_t> completed_;  // completed ranges beyond the prefix: start -> end
  int inflight_ = 0;
  bool counter_pending_ = false;  // a counter read in flight or scheduled
  bool hashes_pending_ = false;
  bool hashes_ready_ = false;
  bool seen_fill_ = false;  // the source's counter has shown the fill it was granted with
  uint64_t remote_counter_ = 0;
  int64_t backoff_us_ = 20;
  int64_t last_progress_ = 0;
  uint64_t next_verify_block_ = 0;
  Code fail_code_ = Code::kSuccess;
  std::string fail_err_;
  bool fail_source_ = false;
  TransferStats stats_;
};

void Job::start() {
  const auto& rsegs = s_.source.segments;
  total_ = s_.local->total_bytes();
  prefix_ = issued_ = checked_ = std::min(s_.start, total_);
  next_verify_block_ = prefix_ / kHashBlock;
  last_progress_ = now_us();
  try {
    // The caller checked the descriptor against our plan (Holding::mismatch); these are the
    // executor's own bounds, so that nothing a peer sent can make it write outside our memory.
    uint64_t sum = 0;
    for (const auto& r : rsegs) {
      if (r.bytes == 0 || r.bytes > total_ - sum) throw Error(Code::kLayout, "the source's stream does not match ours");
      sum += r.bytes;
    }
    if (sum != total_ || s_.source.hashes.bytes != s_.hash_bytes || s_.source.counter.bytes != sizeof(uint64_t)) {
      throw Error(Code::kLayout, "the source's descriptor does not match this replica's stream");
    }
  } catch (const Error& e) {
    fail(e.code(), e.what(), false);
    return;
  }
  try {
    local_ = s_.source.host == host_identity();
    bool error_handling = !local_ || w_.detects_local_peer_failure();
    peer_ = w_.peer(s_.source.worker_address, error_handling);
    uint64_t off = 0;
    for (const auto& r : rsegs) {
      remote_off_.push_back(off);
      off += r.bytes;
      keys_.push_back(std::make_unique<RemoteKey>(peer_, r.rkey));
    }
    // The counter is read on its own endpoint: on the data endpoint its reply would wait
    // behind every chunk already asked for, and the reader would learn of new bytes only
    // after its link had gone idle.
    counter_peer_ = w_.peer(s_.source.worker_address, error_handling, 1);
    counter_key_ = std::make_unique<RemoteKey>(counter_peer_, s_.source.counter.rkey);
    hash_key_ = std::make_unique<RemoteKey>(peer_, s_.source.hashes.rkey);
  } catch (const Error& e) {
    fail(Code::kTransport, e.what(), true);
    return;
  }
  ready_ = s_.source_partial ? 0 : total_;
  if (total_ == 0 || checked_ == total_) {
    finish();
    return;
  }
  watchdog();
  if (s_.source_partial) {
    poll_counter();  // learn what is ready first; hashes follow once the source has data
  } else {
    fetch_hashes();
  }
}

void Job::fetch_hashes() {
  // Integrity hashes travel with the data, so that a replica serves them in turn. A source's
  // hash region is complete before its counter first advances.
  if (hashes_pending_ || hashes_ready_) return pump();
  hashes_pending_ = true;
  hash_buf_.assign(s_.hash_bytes / sizeof(uint64_t), 0);
  auto self = shared_from_this();
  inflight_++;
  w_.get(peer_, hash_buf_.data(), s_.hash_bytes, s_.source.hashes.addr, *hash_key_,
         [self](bool ok, const std::string& err) {
           self->inflight_--;
           self->hashes_pending_ = false;
           if (self->finished_) return;
           if (!ok) {
             self->fail(Code::kTransport, "reading the source's checksums: " + err, true);
             return self->pump();
           }
           if (self->s_.verify && self->hash_buf_[0] != 1) {
             self->fail(Code::kState,
                        "verify is on but the source published without checksums (set verify=true there too)", false);
             return self->pump();
           }
           std::copy(self->hash_buf_.begin(), self->hash_buf_.end(), self->s_.hashes);
           self->hashes_ready_ = true;
           self->pump();
         });
}

void Job::pump() {
  if (fail_code_ != Code::kSuccess) {
    if (inflight_ == 0 && !counter_pending_) finish();
    return;
  }
  const auto& lsegs = s_.local->segments();
  const auto& rsegs = s_.source.segments;
  while (hashes_ready_ && inflight_ < s_.max_inflight && issued_ < ready_) {
    // A get stays inside one local and one remote segment (the two sides may cut the
    // same stream differently: direct vs copy mode).
    const Segment& l = lsegs[s_.local->find(issued_)];
    size_t ri = remote_segment(issued_);
    uint64_t lleft = l.offset + l.bytes - issued_;
    uint64_t rleft = remote_off_[ri] + rsegs[ri].bytes - issued_;
    uint64_t len = std::min({s_.chunk_size, lleft, rleft, ready_ - issued_});
    issue(issued_, len);
    issued_ += len;
  }
  if (counter_pending_) return;
  if (ready_ < total_) {
    // Follow a partial source's counter. While data is still moving, read it again soon, so
    // that the next bytes can be asked for as soon as the last ones land (each hop of a chain
    // then lags its source by about one chunk); when starved, back off so that a waiting
    // reader does not hammer the source over the network.
    bool starved = issued_ >= ready_;
    if (starved) {
      check_stall();
      if (fail_code_ != Code::kSuccess) return pump();
    }
    auto self = shared_from_this();
    counter_pending_ = true;
    w_.post_after(starved ? backoff_us_ : kReadAheadUs, [self] {
      self->counter_pending_ = false;
      if (!self->finished_) self->poll_counter();
    });
    if (starved) backoff_us_ = std::min<int64_t>(backoff_us_ * 2, 2000);
  } else if (prefix_ > checked_ && hashes_ready_) {
    poll_counter();  // vouch for what has landed since the last read
  }
}

size_t Job::remote_segment(uint64_t off) const {
  auto it = std::upper_bound(remote_off_.begin(), remote_off_.end(), off);
  return static_cast<size_t>(it - remote_off_.begin()) - 1;
}

void Job::issue(uint64_t off, uint64_t len) {
  const Segment& l = s_.local->segments()[s_.local->find(off)];
  size_t ri = remote_segment(off);
  auto self = shared_from_this();
  inflight_++;
  stats_.gets++;
  w_.get(peer_, l.addr + (off - l.offset), len, s_.source.segments[ri].addr + (off - remote_off_[ri]), *keys_[ri],
         [self, off, len](bool ok, const std::string& err) { self->on_chunk(off, len, ok, err); });
}

void Job::on_chunk(uint64_t off, uint64_t len, bool ok, const std::string& err) {
  inflight_--;
  if (finished_) return;  // abandoned by the watchdog
  if (!ok) {
    fail(Code::kTransport, err, true);
    return pump();
  }
  stats_.bytes += len;
  last_progress_ = now_us();
  completed_[off] = off + len;
  while (!completed_.empty() && completed_.begin()->first == prefix_) {
    prefix_ = completed_.begin()->second;
    completed_.erase(completed_.begin());
  }
  pump();
}

// Bytes [checked_, upto) landed before a counter read that still showed the source's fill:
// they are the granted version's. Only now do they count, are verified, and show in our
// own counter (data first, then the counter) for the readers chained on us.
void Job::accept(uint64_t upto) {
  if (upto <= checked_) return;
  checked_ = upto;
  if (s_.verify && !verify_upto(checked_)) return;
  s_.counter->store(s_.epoch, checked_);
  if (s_.watch) s_.watch->advance(checked_);
}

bool Job::verify_upto(uint64_t prefix) {
  uint64_t blocks = s_.local->hash_blocks();
  while (next_verify_block_ < blocks) {
    uint64_t end = std::min(total_, (next_verify_block_ + 1) * kHashBlock);
    if (end > prefix) break;
    uint64_t want = s_.hashes[1 + next_verify_block_];
    uint64_t got = s_.local->hash_block(next_verify_block_);
    if (want != got) {
      std::string what = s_.where ? s_.where(next_verify_block_ * kHashBlock) : std::string("?");
      fail(Code::kTransport,
           "checksum mismatch in integrity block " + std::to_string(next_verify_block_) + " (" + what +
               "): the received bytes differ from the publisher's",
           false);
      return false;
    }
    next_verify_block_++;
  }
  return true;
}

void Job::poll_counter() {
  if (finished_ || fail_code_ != Code::kSuccess || counter_pending_) return pump();
  auto self = shared_from_this();
  counter_pending_ = true;
  probe_ = prefix_;  // what this read can vouch for: only bytes that landed before it
  stats_.counter_reads++;
  w_.get(counter_peer_, &remote_counter_, sizeof remote_counter_, s_.source.counter.addr, *counter_key_,
         [self](bool ok, const std::string& err) { self->on_counter(ok, err); });
}

void Job::on_counter(bool ok, const std::string& err) {
  counter_pending_ = false;
  if (finished_) return;
  if (!ok) {
    fail(Code::kTransport, "reading the source's progress counter: " + err, true);
    return pump();
  }
  if (counter_epoch(remote_counter_) == s_.source.epoch) {
    seen_fill_ = true;
    uint64_t n = std::min(counter_bytes(remote_counter_), total_);
    if (!s_.source_partial && n < total_) {
      fail(Code::kTransport,
           "the source was granted as a complete holder but its progress counter shows " + std::to_string(n) +
               " of " + std::to_string(total_) + " bytes",
           true);
      return pump();
    }
    if (s_.source_partial && n > ready_) {
      ready_ = n;
      backoff_us_ = 20;
      last_progress_ = now_us();
    }
    accept(std::min(probe_, n));
    if (fail_code_ != Code::kSuccess) return pump();
  } else if (seen_fill_ || !s_.source_may_lag) {
    // The source's buffers were given up (unpublished, refilled) since the grant: nothing
    // read from them since the last good counter read is trusted. Resume elsewhere.
    fail(Code::kTransport,
         "the source's buffers changed during the transfer (its progress counter no longer shows the fill it "
         "was granted with); bytes up to " + std::to_string(checked_) + " were checked before that",
         true);
    return pump();
  }
  // (else: a partial source granted before it reset its counter from an earlier fill)
  if (checked_ == total_) return finish();
  if (!hashes_ready_ && ready_ > 0) return fetch_hashes();
  pump();
}

// Gets to a dead or stuck source may never complete (no peer failure handling over shared
// memory; a stopped process over TCP): give up on them, report the source, and resume
// elsewhere from the checked bytes. Endpoints with error handling are closed, which cancels
// what is in flight; the rest may still complete into memory we resume into, but only with
// bytes read from a source that had not been told to give them up (it was stuck).
void Job::watchdog() {
  if (finished_) return;
  if (local_ && !process_alive(s_.source.pid)) {
    fail(Code::kTransport, "the source process (pid " + std::to_string(s_.source.pid) + ") is gone", true);
  } else {
    check_stall();  // gets, or a counter read, to a source that stopped answering
  }
  if (fail_code_ != Code::kSuccess) {
    if (peer_ && local_ && !process_alive(s_.source.pid)) {
      w_.forget_peer(peer_);
    } else if (peer_ && (inflight_ > 0 || counter_pending_)) {
      w_.cancel_peer(peer_);
    }
    finish();  // abandon what is in flight
    return;
  }
  auto self = shared_from_this();
  w_.post_after(kWatchdogUs, [self] { self->watchdog(); });
}

void Job::check_stall() {
  if (now_us() - last_progress_ > s_.stall_timeout_us) {
    fail(Code::kTransport,
         "source made no progress for " + std::to_string(s_.stall_timeout_us / 1000) + " ms (stalled or gone)", true);
  }
}

void Job::fail(Code code, const std::string& err, bool source_failed) {
  if (fail_code_ != Code::kSuccess) return;
  fail_code_ = code;
  fail_err_ = err;
  fail_source_ = source_failed;
  if (inflight_ == 0 && !counter_pending_) finish();
}

void Job::finish() {
  if (finished_) return;
  finished_ = true;
  TransferResult r;
  r.code = fail_code_;
  r.error = fail_err_;
  r.source_failed = fail_source_;
  r.held = checked_;
  r.stats = stats_;
  if (s_.watch) s_.watch->close(checked_);
  if (inflight_ == 0 && !counter_pending_) {
    // Nothing can touch the keys any more. (Abandoned gets keep them until they complete.)
    keys_.clear();
    counter_key_.reset();
    hash_key_.reset();
    peer_.reset();
    counter_peer_.reset();
  }
  done_.set_value(std::move(r));
}

}  // namespace

void PrefixWatch::advance(uint64_t prefix) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    prefix_ = prefix;
  }
  cv_.notify_all();
}

void PrefixWatch::close(uint64_t prefix) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    prefix_ = prefix;
    closed_ = true;
  }
  cv_.notify_all();
}

std::pair<uint64_t, bool> PrefixWatch::wait_beyond(uint64_t seen) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return closed_ || prefix_ > seen; });
  return {prefix_, closed_};
}

std::future<TransferResult> start_transfer(Worker& worker, TransferSpec spec) {
  auto job = std::make_shared<Job>(worker, std::move(spec));
  auto f = job->future();
  worker.post([job] { job->start(); });
  return f;
}

}  // namespace thub::client
