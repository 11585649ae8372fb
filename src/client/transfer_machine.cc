#include "src/client/transfer_machine.h"

#include <algorithm>

#include "src/client/progress_counter.h"

namespace thub::client {

TransferMachine::TransferMachine(TransferPlan plan) : p_(std::move(plan)) {
  if (p_.block == 0) p_.block = 1;
  if (p_.chunk_size == 0) p_.chunk_size = 1;
  if (p_.max_inflight < 1) p_.max_inflight = 1;
  std::sort(p_.cuts.begin(), p_.cuts.end());
  blocks_ = (p_.total + p_.block - 1) / p_.block;
  hashes_.assign(1 + blocks_, 0);
  // Resume at a block boundary: the integrity blocks are checked whole. (Set here, so that a
  // transfer failed before it starts reports what it holds.)
  uint64_t start = std::min(p_.start, p_.total);
  if (start < p_.total) start -= start % p_.block;
  prefix_ = issued_ = checked_ = held_ = start;
  next_verify_block_ = copied_hashes_ = blocks_within(start);
}

std::vector<TransferStep> TransferMachine::take() {
  std::vector<TransferStep> out;
  out.swap(out_);
  return out;
}

// The time of an event. While this process runs, the watchdog brings an event at least every
// few tens of ms; a gap of own_pause_us between two events is this process stopped (SIGSTOP, a
// debugger, a VM paused), not the source stalled: its stall clock does not count the gap.
void TransferMachine::clock(int64_t now_us) {
  if (p_.own_pause_us > 0 && now_ > 0 && now_us - now_ >= p_.own_pause_us) {
    last_progress_ += now_us - now_;
    paused_us_ += now_us - now_;
  }
  now_ = now_us;
}

std::vector<TransferStep> TransferMachine::start(int64_t now_us) {
  now_ = now_us;
  if (finished_) return take();  // failed before it began (the caller's own checks)
  last_progress_ = now_us;
  ready_ = p_.partial ? 0 : p_.total;
  if (p_.total == 0 || held_ == p_.total) {
    finish();
  } else if (p_.partial) {
    poll_counter();  // learn what is ready first
  } else {
    pump();
  }
  return take();
}

uint64_t TransferMachine::next_cut(uint64_t off) const {
  auto it = std::upper_bound(p_.cuts.begin(), p_.cuts.end(), off);
  return it == p_.cuts.end() ? p_.total : std::min(*it, p_.total);
}

void TransferMachine::pump() {
  if (fail_code_ != Code::kSuccess) {
    if (inflight_ == 0 && !counter_pending_) finish();
    return;
  }
  // Watched reads are asked for up to the end of the stream: the source parks those it does
  // not hold yet (not before its counter was seen at our fill: a source that may lag shows an
  // earlier one at first, and a read parked on it would be answered at once).
  const uint64_t limit = parking() ? p_.total : ready_;
  while (inflight_ < p_.max_inflight && issued_ < limit) {
    // A read stays inside one segment of either side (they may cut the same stream
    // differently: direct vs copy mode), and what the source is known to hold is asked for
    // apart from what it does not hold yet: a parked read holds back every byte it covers,
    // and a source that stops inside one would keep the bytes it does hold from us (under
    // verify, the whole integrity block).
    const uint64_t end = issued_ < ready_ ? ready_ : limit;
    const uint64_t len = std::min({p_.chunk_size, next_cut(issued_) - issued_, end - issued_});
    ReadChunk c{issued_, len};
    if (p_.watched) {
      c.park_lo = counter_value(p_.epoch, 0);
      c.park_hi = counter_value(p_.epoch, issued_ + len);
    }
    out_.emplace_back(c);
    inflight_++;
    gets_++;
    issued_ += len;
  }
  fetch_hashes();
  if (counter_pending_) return;
  if (parking()) {
    // The chunks bring their own vouch; only checksums read on the other lane need a read.
    // A source that stops is found by the watchdog (stall_timeout), as a polled one is.
    // (And a sample that vouched for less than had landed, from a source whose counter went
    // back within a fill, is read again once nothing is in flight, not waited on.)
    if (hash_landed_ > hash_checked_ || (flag_landed_ && !flag_checked_) || (inflight_ == 0 && prefix_ > checked_))
      poll_counter();
    return;
  }
  if (ready_ < p_.total) {
    // Follow a partial source's counter once everything it holds has been asked for (while
    // the window is full, a landing chunk brings us back here first). Read it at once, then
    // back off while starved, so that a waiting reader does not hammer the source over the
    // network. (Reading it every 100 us while data moved cost each hop of a chain of 8 over
    // TCP 10,000 round trips a second, on a box whose cores the whole chain shares.)
    if (issued_ < ready_) return;
    check_stall();
    if (fail_code_ != Code::kSuccess) return pump();
    counter_pending_ = true;
    out_.emplace_back(ReadCounterAfter{backoff_us_});
    backoff_us_ = std::min<int64_t>(backoff_us_ * 2, 2000);
  } else if (prefix_ - checked_ >= p_.vouch_bytes || (prefix_ == p_.total && prefix_ > checked_) ||
             hash_landed_ > hash_checked_ || (flag_landed_ && !flag_checked_)) {
    poll_counter();  // vouch for what has landed since the last read
  }
}

std::vector<TransferStep> TransferMachine::on_chunk(uint64_t off, uint64_t len, bool ok, const std::string& err,
                                                    int64_t now_us, const uint64_t* sample) {
  clock(now_us);
  inflight_--;
  if (finished_) return take();  // abandoned by the watchdog
  if (!ok) {
    record_fail(Code::kTransport, err, true);
    pump();
    return take();
  }
  bytes_ += len;
  last_progress_ = now_us;
  completed_[off] = off + len;
  while (!completed_.empty() && completed_.begin()->first == prefix_) {
    prefix_ = completed_.begin()->second;
    completed_.erase(completed_.begin());
  }
  if (sample) {
    // Read after this chunk's bytes, and after those of every chunk asked for before it.
    if (!take_counter(*sample, std::min(prefix_, off + len), 0, false, now_us)) {
      pump();
      return take();
    }
    if (held_ == p_.total) {
      finish();
      return take();
    }
  }
  pump();
  return take();
}

// The source's checksums of the blocks it holds are final (it writes a block's checksum
// before its counter passes the block): read those not read yet, with the flag word the
// first time.
void TransferMachine::fetch_hashes() {
  if (hash_pending_ || finished_ || fail_code_ != Code::kSuccess) return;
  if (flag_checked_ && hashes_[0] != 1) return;  // published without checksums: nothing more to read
  const uint64_t want = blocks_within(ready_);
  if (flag_landed_ && want <= hash_issued_) return;
  if (!flag_landed_ && ready_ == 0 && p_.partial) return;  // its region may not be set up yet
  const uint64_t first = flag_landed_ ? 1 + hash_issued_ : 0;  // word index
  hash_pending_ = true;
  hash_issued_ = want;
  inflight_++;
  // Watched, its sample vouches for the words it read and the bytes landed before it was
  // asked for, as a counter read issued then would.
  const bool watch = parking();
  if (watch) hash_probe_ = prefix_;
  out_.emplace_back(ReadHashes{first, 1 + want - first, want, watch});
}

std::vector<TransferStep> TransferMachine::on_hashes(uint64_t upto, bool ok, const std::string& err, int64_t now_us,
                                                     const uint64_t* sample) {
  clock(now_us);
  inflight_--;
  hash_pending_ = false;
  if (finished_) return take();
  if (!ok) {
    record_fail(Code::kTransport, "reading the source's checksums: " + err, true);
  } else {
    flag_landed_ = true;
    hash_landed_ = std::max(hash_landed_, std::min(upto, blocks_));
    if (sample) {
      if (!take_counter(*sample, std::min(hash_probe_, prefix_), hash_landed_, true, now_us)) {
        pump();
        return take();
      }
      if (held_ == p_.total) {
        finish();
        return take();
      }
    }
  }
  pump();
  return take();
}

// What a counter read vouched for becomes ours: checksums shown with our counter and
// (verify) compared, then our counter moved (data first, then the counter) for readers
// chained on us.
void TransferMachine::advance() {
  const bool has_hashes = flag_checked_ && hashes_[0] == 1;
  if (flag_checked_ && !has_hashes && p_.verify) {
    return record_fail(Code::kState,
                       "verify is on but the source published without checksums (set verify=true there too)", false);
  }
  if (!flag_checked_) return;  // nothing shows before the integrity flag is known
  const uint64_t hashes_from = copied_hashes_;
  if (has_hashes) copied_hashes_ = std::max(copied_hashes_, hash_checked_);
  // Our counter covers checked bytes whose blocks' checksums we serve (when the source has them).
  uint64_t upto = checked_;
  if (has_hashes) upto = std::min(upto, hash_checked_ >= blocks_ ? p_.total : hash_checked_ * p_.block);
  if (p_.verify) {
    for (; next_verify_block_ < blocks_within(upto); ++next_verify_block_) {
      const uint64_t b = next_verify_block_;
      if (!p_.local_hash || hashes_[1 + b] != p_.local_hash(b)) {
        const std::string what = p_.where ? p_.where(b * p_.block) : std::string("?");
        return record_fail(Code::kTransport,
                           "checksum mismatch in integrity block " + std::to_string(b) + " (" + what +
                               "): the received bytes differ from the publisher's",
                           false);
      }
    }
    upto = std::min(upto, next_verify_block_ >= blocks_ ? p_.total : next_verify_block_ * p_.block);
  }
  if (upto <= held_) {
    if (copied_hashes_ > hashes_from) out_.emplace_back(ShowHeld{hashes_[0], hashes_from, copied_hashes_, held_, false});
    return;
  }
  held_ = upto;
  out_.emplace_back(ShowHeld{hashes_[0], hashes_from, copied_hashes_, held_, true});
}

void TransferMachine::poll_counter() {
  if (finished_ || fail_code_ != Code::kSuccess || counter_pending_) return pump();
  counter_pending_ = true;
  // What this read can vouch for: only what landed before it.
  probe_ = prefix_;
  probe_hashes_ = flag_landed_ ? hash_landed_ : 0;
  probe_flag_ = flag_landed_;
  counter_reads_++;
  out_.emplace_back(ReadCounter{});
}

std::vector<TransferStep> TransferMachine::on_retry(int64_t now_us) {
  clock(now_us);
  counter_pending_ = false;
  if (!finished_) poll_counter();
  return take();
}

std::vector<TransferStep> TransferMachine::on_counter(bool ok, uint64_t value, const std::string& err,
                                                      int64_t now_us) {
  clock(now_us);
  counter_pending_ = false;
  if (finished_) return take();
  if (!ok) {
    record_fail(Code::kTransport, "reading the source's progress counter: " + err, true);
    pump();
    return take();
  }
  if (!take_counter(value, probe_, probe_hashes_, probe_flag_, now_us)) {
    pump();
    return take();
  }
  if (held_ == p_.total) {
    finish();
  } else {
    pump();
  }
  return take();
}

bool TransferMachine::take_counter(uint64_t value, uint64_t probe, uint64_t probe_hashes, bool probe_flag,
                                   int64_t now_us) {
  if (counter_epoch(value) == p_.epoch && p_.epoch != 0) {
    seen_fill_ = true;
    const uint64_t n = std::min(counter_bytes(value), p_.total);
    if (!p_.partial && n < p_.total) {
      record_fail(Code::kTransport,
                  "the source was granted as a complete holder but its progress counter shows " + std::to_string(n) +
                      " of " + std::to_string(p_.total) + " bytes",
                  true);
      return false;
    }
    if (p_.partial && n > ready_) {
      ready_ = n;
      backoff_us_ = 20;
      last_progress_ = now_us;
    }
    checked_ = std::max(checked_, std::min(probe, n));
    hash_checked_ = std::max(hash_checked_, std::min(probe_hashes, blocks_within(n)));
    flag_checked_ = flag_checked_ || probe_flag;
    advance();
    return fail_code_ == Code::kSuccess;
  }
  if (seen_fill_ || !p_.may_lag) {
    // The source's buffers were given up (unpublished, refilled) since the grant: nothing
    // read from them since the last good counter read is trusted. Resume elsewhere.
    record_fail(Code::kTransport,
                "the source's buffers changed during the transfer (its progress counter no longer shows the fill "
                "it was granted with); bytes up to " + std::to_string(held_) + " were checked before that",
                true);
    return false;
  }
  return true;  // a partial source granted before it reset its counter from an earlier fill
}

// Reads of a dead or stuck source may never complete (no peer failure handling over shared
// memory; a stopped process over TCP): give up on them and report the source, so that the
// transfer resumes elsewhere from the checked bytes.
std::vector<TransferStep> TransferMachine::on_watchdog(int64_t now_us, const std::string& gone) {
  clock(now_us);
  if (finished_) return take();
  if (!gone.empty()) {
    record_fail(Code::kTransport, gone, true);
  } else {
    check_stall();
  }
  if (fail_code_ != Code::kSuccess) finish();  // abandon what is in flight
  return take();
}

std::vector<TransferStep> TransferMachine::fail(Code code, const std::string& err, bool source_failed,
                                                int64_t now_us) {
  clock(now_us);
  if (!finished_) {
    record_fail(code, err, source_failed);
    pump();
  }
  return take();
}

void TransferMachine::check_stall() {
  if (now_ - last_progress_ > p_.stall_timeout_us) {
    record_fail(Code::kTransport,
                "source made no progress for " + std::to_string(p_.stall_timeout_us / 1000) + " ms (stalled or gone)",
                true);
  }
}

void TransferMachine::record_fail(Code code, const std::string& err, bool source_failed) {
  if (fail_code_ != Code::kSuccess) return;
  fail_code_ = code;
  fail_err_ = err;
  fail_source_ = source_failed;
  if (inflight_ == 0 && !counter_pending_) finish();
}

void TransferMachine::finish() {
  if (finished_) return;
  finished_ = true;
  out_.emplace_back(TransferFinish{fail_code_, fail_err_, fail_source_, held_, inflight_ > 0 || counter_pending_});
}

}  // namespace thub::client
