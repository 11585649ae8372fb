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
// From a complete source the counter is read to vouch for what landed once this much has
// landed since the last read (one integrity block: what our own counter moves by under
// verify), and at the end: with small chunks a read per chunk would double the round trips.
constexpr uint64_t kVouchBytes = kHashBlock;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One transfer, on the progress thread. Three kinds of reads go to the source: data chunks,
// its integrity region (the flag word and one hash per 1 MiB block, fetched as the blocks
// become ready, since a publisher may still be hashing behind publish), and its progress
// counter (what is ready, and the seqlock's check). What has landed counts only once a later
// counter read vouches for it; what is vouched for is verified (verify=true), its hashes are
// copied into our own region, and only then does our counter show it.
class Job : public std::enable_shared_from_this<Job> {
 public:
  Job(Worker& w, TransferSpec s, std::function<void(uint64_t)> on_advance, std::function<void(TransferResult)> on_done)
      : w_(w), s_(std::move(s)), on_advance_(std::move(on_advance)), on_done_(std::move(on_done)) {}
  void start();
  // Ended, and none of its reads can land any more: none in flight, or the rest were canceled
  // (a source elsewhere: its endpoint or socket is closed; one read with process reads: the
  // reads still queued were dropped) or their source on this host exited.
  [[nodiscard]] bool settled() const {
    return finished_ && (inflight_ == 0 || !local_ || clean_cancel_ || !process_alive(s_.source.pid));
  }

 private:
  void pump();
  void issue(uint64_t off, uint64_t len);
  void on_chunk(uint64_t off, uint64_t len, size_t path, bool ok, const std::string& err);
  void fetch_hashes();
  void on_hashes(uint64_t upto, bool ok, const std::string& err);
  void poll_counter();
  void on_counter(bool ok, const std::string& err);
  void advance();
  void fail(Code code, const std::string& err, bool source_failed);
  size_t remote_segment(uint64_t off) const;
  void finish();
  void check_stall();
  void watchdog();
  // Integrity blocks whose bytes lie within the first `bytes` of the stream.
  uint64_t blocks_within(uint64_t bytes) const { return bytes >= total_ ? blocks_ : bytes / kHashBlock; }

  Worker& w_;
  TransferSpec s_;
  std::function<void(uint64_t)> on_advance_;
  std::function<void(TransferResult)> on_done_;
  bool finished_ = false;
  bool local_ = false;  // the source runs on this host: watch its pid
  bool clean_cancel_ = false;  // its reads cannot land once cancelled (Worker::reads_cancel_cleanly)

  std::shared_ptr<Peer> peer_;
  std::shared_ptr<Peer> counter_peer_;  // lane 1: progress counter reads
  std::vector<std::shared_ptr<RemoteKey>> keys_;  // per remote segment
  std::vector<uint64_t> remote_off_;              // stream offset of each remote segment
  std::shared_ptr<RemoteKey> counter_key_;
  std::shared_ptr<RemoteKey> hash_key_;
  // The source's integrity region is read here first and copied to ours once vouched for:
  // a read abandoned by the watchdog that completes late lands in the job, not in our region.
  std::vector<uint64_t> hash_buf_;

  uint64_t total_ = 0;
  uint64_t blocks_ = 0;     // integrity blocks of the stream
  uint64_t issued_ = 0;     // next stream offset to request
  uint64_t prefix_ = 0;     // contiguous bytes landed
  uint64_t checked_ = 0;    // of those, bytes a later read of the source's counter vouched for
  uint64_t held_ = 0;       // of those, what our counter shows (hashes copied, verified)
  uint64_t ready_ = 0;      // bytes the source holds (as last seen)
  uint64_t probe_ = 0;      // prefix_ when the counter read in flight was issued
  std::map<uint64_t, uint64_t> completed_;  // completed ranges beyond the prefix: start -> end
  int inflight_ = 0;
  bool counter_pending_ = false;  // a counter read in flight or scheduled
  // Integrity region: hash_buf_[0] is the flag, [1 + b] block b's hash.
  bool hash_pending_ = false;
  bool flag_landed_ = false;
  uint64_t hash_issued_ = 0;   // blocks asked for
  uint64_t hash_landed_ = 0;   // blocks landed
  uint64_t probe_hashes_ = 0;  // hash_landed_ when the counter read in flight was issued
  bool probe_flag_ = false;    // flag_landed_ then
  uint64_t hash_checked_ = 0;  // blocks vouched for
  bool flag_checked_ = false;  // the flag word vouched for
  bool seen_fill_ = false;  // the source's counter has shown the fill it was granted with
  uint64_t remote_counter_ = 0;
  int64_t backoff_us_ = 20;
  int64_t last_progress_ = 0;
  uint64_t next_verify_block_ = 0;
  uint64_t copied_hashes_ = 0;  // blocks whose hash is in our own region
  Code fail_code_ = Code::kSuccess;
  std::string fail_err_;
  bool fail_source_ = false;
  TransferStats stats_;
};

}  // namespace

struct LateReads {
  std::vector<std::weak_ptr<Job>> jobs;  // transfers into these buffers not yet settled
};

namespace {

void Job::start() {
  const auto& rsegs = s_.source.segments;
  total_ = s_.local->total_bytes();
  blocks_ = s_.local->hash_blocks();
  // Resume at a block boundary: the integrity blocks are checked whole.
  uint64_t start = std::min(s_.start, total_);
  if (start < total_) start -= start % kHashBlock;
  prefix_ = issued_ = checked_ = held_ = start;
  next_verify_block_ = copied_hashes_ = blocks_within(start);
  last_progress_ = now_us();
  try {
    // The caller checked the descriptor against our plan (Holding::mismatch); these are the
    // executor's own bounds, so that nothing a peer sent can make it write outside our memory.
    uint64_t sum = 0;
    for (const auto& r : rsegs) {
      if (r.bytes == 0 || r.bytes > total_ - sum) throw Error(Code::kLayout, "the source's stream does not match ours");
      sum += r.bytes;
    }
    if (sum != total_ || s_.source.hashes.bytes != s_.fill.hash_region_bytes() ||
        s_.fill.hash_region_bytes() != (1 + blocks_) * sizeof(uint64_t) ||
        s_.source.counter.bytes != sizeof(uint64_t)) {
      throw Error(Code::kLayout, "the source's descriptor does not match this replica's stream");
    }
  } catch (const Error& e) {
    fail(e.code(), e.what(), false);
    return;
  }
  hash_buf_.assign(1 + blocks_, 0);
  try {
    local_ = s_.source.host == host_identity();
    bool error_handling = !local_ || w_.detects_local_peer_failure();
    peer_ = w_.peer(s_.source.worker_address, error_handling);
    uint64_t off = 0;
    for (const auto& r : rsegs) {
      remote_off_.push_back(off);
      off += r.bytes;
      keys_.push_back(w_.remote_key(peer_, r.rkey));
    }
    // The counter is read on its own endpoint: on the data endpoint its reply would wait
    // behind every chunk already asked for, and the reader would learn of new bytes only
    // after its link had gone idle.
    counter_peer_ = w_.peer(s_.source.worker_address, error_handling, 1);
    counter_key_ = w_.remote_key(counter_peer_, s_.source.counter.rkey);
    hash_key_ = w_.remote_key(counter_peer_, s_.source.hashes.rkey);
    clean_cancel_ = w_.reads_cancel_cleanly(peer_) && w_.reads_cancel_cleanly(counter_peer_);
  } catch (const Error& e) {
    fail(Code::kTransport, e.what(), true);
    return;
  }
  ready_ = s_.source_partial ? 0 : total_;
  if (total_ == 0 || held_ == total_) {
    finish();
    return;
  }
  watchdog();
  if (s_.source_partial) {
    poll_counter();  // learn what is ready first
  } else {
    pump();
  }
}

void Job::pump() {
  if (fail_code_ != Code::kSuccess) {
    if (inflight_ == 0 && !counter_pending_) finish();
    return;
  }
  const auto& lsegs = s_.local->segments();
  const auto& rsegs = s_.source.segments;
  while (inflight_ < s_.max_inflight && issued_ < ready_) {
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
  fetch_hashes();
  if (counter_pending_) return;
  if (ready_ < total_) {
    // Follow a partial source's counter once everything it holds has been asked for (while
    // the window is full, a landing chunk brings us back here first). Read it at once, then
    // back off while starved, so that a waiting reader does not hammer the source over the
    // network. (Reading it every 100 us while data moved cost each hop of a chain of 8 over
    // TCP 10,000 round trips a second, on a box whose cores the whole chain shares.)
    bool starved = issued_ >= ready_;
    if (!starved) return;
    check_stall();
    if (fail_code_ != Code::kSuccess) return pump();
    auto self = shared_from_this();
    counter_pending_ = true;
    w_.post_after(backoff_us_, [self] {
      self->counter_pending_ = false;
      if (!self->finished_) self->poll_counter();
    });
    backoff_us_ = std::min<int64_t>(backoff_us_ * 2, 2000);
  } else if (prefix_ - checked_ >= kVouchBytes || (prefix_ == total_ && prefix_ > checked_) ||
             hash_landed_ > hash_checked_ || (flag_landed_ && !flag_checked_)) {
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
  const auto path = static_cast<size_t>(transport::Worker::read_path(*peer_, *keys_[ri]));
  w_.get(peer_, l.addr + (off - l.offset), len, s_.source.segments[ri].addr + (off - remote_off_[ri]), *keys_[ri],
         [self, off, len, path](bool ok, const std::string& err) { self->on_chunk(off, len, path, ok, err); });
}

void Job::on_chunk(uint64_t off, uint64_t len, size_t path, bool ok, const std::string& err) {
  inflight_--;
  if (finished_) return;  // abandoned by the watchdog
  if (!ok) {
    fail(Code::kTransport, err, true);
    return pump();
  }
  stats_.bytes += len;
  stats_.path_bytes[path] += len;
  last_progress_ = now_us();
  completed_[off] = off + len;
  while (!completed_.empty() && completed_.begin()->first == prefix_) {
    prefix_ = completed_.begin()->second;
    completed_.erase(completed_.begin());
  }
  pump();
}

// The source's hashes of the blocks it holds are final (it writes a block's hash before its
// counter passes the block): read those not read yet, with the flag word the first time.
void Job::fetch_hashes() {
  if (hash_pending_ || finished_ || fail_code_ != Code::kSuccess) return;
  const uint64_t want = blocks_within(ready_);
  if (flag_landed_ && want <= hash_issued_) return;
  if (!flag_landed_ && ready_ == 0 && s_.source_partial) return;  // its region may not be set up yet
  const uint64_t first = flag_landed_ ? 1 + hash_issued_ : 0;  // word index
  const uint64_t words = 1 + want - first;
  hash_pending_ = true;
  hash_issued_ = want;
  auto self = shared_from_this();
  inflight_++;
  w_.get(counter_peer_, hash_buf_.data() + first, words * sizeof(uint64_t),
         s_.source.hashes.addr + first * sizeof(uint64_t), *hash_key_,
         [self, want](bool ok, const std::string& err) { self->on_hashes(want, ok, err); });
}

void Job::on_hashes(uint64_t upto, bool ok, const std::string& err) {
  inflight_--;
  hash_pending_ = false;
  if (finished_) return;
  if (!ok) {
    fail(Code::kTransport, "reading the source's checksums: " + err, true);
    return pump();
  }
  flag_landed_ = true;
  hash_landed_ = upto;
  pump();
}

// What a counter read vouched for becomes ours: checksums copied to our region and (verify)
// compared, then our counter moved (data first, then the counter) for readers chained on us.
void Job::advance() {
  const bool has_hashes = flag_checked_ && hash_buf_[0] == 1;
  if (flag_checked_ && !has_hashes && s_.verify) {
    return fail(Code::kState, "verify is on but the source published without checksums (set verify=true there too)",
                false);
  }
  if (!flag_checked_) return;  // nothing shows before the integrity flag is known
  // Checksums of the blocks checked so far are shown with the counter (FillWriter::show).
  const uint64_t hashes_from = copied_hashes_;
  if (has_hashes) copied_hashes_ = std::max(copied_hashes_, hash_checked_);
  // Our counter covers checked bytes whose blocks' hashes we serve (when the source has them).
  uint64_t upto = checked_;
  if (has_hashes) upto = std::min(upto, hash_checked_ >= blocks_ ? total_ : hash_checked_ * kHashBlock);
  if (s_.verify) {
    for (; next_verify_block_ < blocks_within(upto); ++next_verify_block_) {
      const uint64_t b = next_verify_block_;
      if (hash_buf_[1 + b] != s_.local->hash_block(b)) {
        std::string what = s_.where ? s_.where(b * kHashBlock) : std::string("?");
        return fail(Code::kTransport,
                    "checksum mismatch in integrity block " + std::to_string(b) + " (" + what +
                        "): the received bytes differ from the publisher's",
                    false);
      }
    }
    upto = std::min(upto, next_verify_block_ >= blocks_ ? total_ : next_verify_block_ * kHashBlock);
  }
  if (upto <= held_) {
    if (copied_hashes_ > hashes_from) s_.fill.show(hash_buf_[0], hash_buf_.data() + 1, hashes_from, copied_hashes_, held_);
    return;
  }
  held_ = upto;
  s_.fill.show(hash_buf_[0], hash_buf_.data() + 1, hashes_from, copied_hashes_, held_);
  if (on_advance_) on_advance_(held_);
}

void Job::poll_counter() {
  if (finished_ || fail_code_ != Code::kSuccess || counter_pending_) return pump();
  auto self = shared_from_this();
  counter_pending_ = true;
  // What this read can vouch for: only what landed before it.
  probe_ = prefix_;
  probe_hashes_ = flag_landed_ ? hash_landed_ : 0;
  probe_flag_ = flag_landed_;
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
    checked_ = std::max(checked_, std::min(probe_, n));
    hash_checked_ = std::max(hash_checked_, std::min(probe_hashes_, blocks_within(n)));
    flag_checked_ = flag_checked_ || probe_flag_;
    advance();
    if (fail_code_ != Code::kSuccess) return pump();
  } else {
    if (seen_fill_ || !s_.source_may_lag) {
      // The source's buffers were given up (unpublished, refilled) since the grant: nothing
      // read from them since the last good counter read is trusted. Resume elsewhere.
      fail(Code::kTransport,
           "the source's buffers changed during the transfer (its progress counter no longer shows the fill it "
           "was granted with); bytes up to " + std::to_string(held_) + " were checked before that",
           true);
      return pump();
    }
    // (else: a partial source granted before it reset its counter from an earlier fill)
  }
  if (held_ == total_) return finish();
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
  r.held = held_;
  r.stats = stats_;
  if (inflight_ == 0 && !counter_pending_) {
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

void start_transfer(Worker& worker, TransferSpec spec, std::function<void(uint64_t)> on_advance,
                    std::function<void(TransferResult)> on_done) {
  std::shared_ptr<LateReads> late = spec.late;
  auto job = std::make_shared<Job>(worker, std::move(spec), std::move(on_advance), std::move(on_done));
  worker.post([&worker, job, late] { start_when_clear(worker, job, late); });
}

}  // namespace thub::client
