// The transfer's decisions as a pure machine, beside MemberMachine: what to read next and
// where in the source's stream, when to read the source's progress counter, the seqlock's
// acceptance rule, what our own counter may show (and, under verify, the checksum check),
// the resume point, and when to give up on the source. No I/O, no clocks, no threads: the
// caller issues the reads it asks for, feeds back what came of them and the time, and shows
// what it is told to show. transfer.cc runs it over UCX, sockets and process reads; the
// deterministic simulation (tests/sched/) runs the same machine against its world of
// sources that die, stall, refill and lie about being complete.
//
// A source's stream is read in chunks (max_inflight at a time) that stay inside one segment
// of either side. What has landed counts only once a counter read *issued after it landed*
// still shows the fill the source was granted with (the seqlock, progress_counter.h); a
// partial source is followed through that counter (read at once when starved, then with
// back-off). The source's integrity region (flag word, one checksum per block) is read as its
// blocks become ready and vouched for by the same counter reads.
//
// Where the path can (plan.watched: the transport's own sockets), every chunk read watches the
// source's counter (socket_reads.h): the source holds it back until the counter passes the
// chunk's end (so chunks of a partial source are asked for before they are ready: *parked*,
// no counter polling while data moves) and sends the counter's value read after the data
// with it. That sample is a counter read issued after the bytes were read, as the seqlock asks
// (the reads of one connection are answered in order: it vouches for every chunk asked before
// it too), so what lands is checked on landing and shown to the next hop at once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "src/common/status.h"

namespace thub::client {

struct TransferPlan {
  uint64_t total = 0;            // bytes of the shard's stream
  uint64_t block = 1u << 20;     // integrity block (the source's checksums cover one each)
  std::vector<uint64_t> cuts;    // stream offsets no read crosses (segment ends, either side)
  uint64_t start = 0;            // resume point: bytes held and checked (rounded down to a block)
  uint32_t epoch = 0;            // the source's fill, as its descriptor names it
  bool partial = false;          // follow the source's counter for what is ready
  bool may_lag = false;          // its counter may still show an earlier fill at first
  bool verify = false;           // compare the source's checksums with ours, block by block
  bool watched = false;          // chunk reads park at the source and bring its counter (above)
  uint64_t chunk_size = 4u << 20;
  int max_inflight = 16;
  uint64_t vouch_bytes = 1u << 20;  // from a complete source, read its counter once this much landed
  int64_t stall_timeout_us = 10'000'000;  // no progress this long: the source failed
  // A gap this long between two events of the transfer (the watchdog brings one far more
  // often) is a stop of this process, not counted against the source (0: every gap counts).
  int64_t own_pause_us = 0;
  std::function<uint64_t(uint64_t)> local_hash;   // verify: the checksum of our block b
  std::function<std::string(uint64_t)> where;     // names the tensor at a stream offset
};

// ---- what the caller does (out) ---------------------------------------------------------
// Stream bytes [off, off+len) into ours; under plan.watched the read waits at the source while
// its counter lies in [park_lo, park_hi) (this fill, fewer bytes than off+len) and brings a
// sample of it (on_chunk's `sample`).
struct ReadChunk { uint64_t off, len, park_lo = 0, park_hi = 0; };
// Words [first, first+words) of the source's integrity region into hash_words()+first;
// `watch`: the read brings the source's counter as read after the words (never parked).
struct ReadHashes { uint64_t first, words, upto; bool watch = false; };
struct ReadCounter {};                                   // the source's 8-byte progress counter
struct ReadCounterAfter { int64_t delay_us; };           // on_retry() after this long
// Our counter and checksums: show words [hashes_from, hashes_to) of hash_words()+1 with the
// flag word, and `held` bytes (FillWriter::show); `advanced`: held grew (copy-out may follow).
struct ShowHeld { uint64_t flag, hashes_from, hashes_to, held; bool advanced; };
// The end, once. `abandoned`: reads are still in flight (cancel them or let them land late).
struct TransferFinish {
  Code code = Code::kSuccess;
  std::string error;
  bool source_failed = false;  // the source (not our data) is at fault: ask for another
  uint64_t held = 0;
  bool abandoned = false;
};
using TransferStep = std::variant<ReadChunk, ReadHashes, ReadCounter, ReadCounterAfter, ShowHeld, TransferFinish>;

class TransferMachine {
 public:
  explicit TransferMachine(TransferPlan plan);

  // Before start(): the path turned out able to watch the source's counter (plan.watched);
  // `chunk` (0: keep plan.chunk_size) caps the chunk size from then on.
  void watch_reads(uint64_t chunk = 0) {
    p_.watched = true;
    if (chunk > 0) p_.chunk_size = std::min(p_.chunk_size, chunk);
  }

  // ---- events (in); each returns what to do next, in order
  std::vector<TransferStep> start(int64_t now_us);
  // `sample`: the source's counter as read after this chunk's bytes (watched reads; nullptr
  // otherwise, and for every failed read).
  std::vector<TransferStep> on_chunk(uint64_t off, uint64_t len, bool ok, const std::string& err, int64_t now_us,
                                     const uint64_t* sample = nullptr);
  std::vector<TransferStep> on_hashes(uint64_t upto, bool ok, const std::string& err, int64_t now_us,
                                      const uint64_t* sample = nullptr);
  std::vector<TransferStep> on_counter(bool ok, uint64_t value, const std::string& err, int64_t now_us);
  std::vector<TransferStep> on_retry(int64_t now_us);  // a ReadCounterAfter's time came
  // Every ~50 ms while running: `gone` names why the source is known dead (its process
  // exited), or is empty; otherwise a source that made no progress for stall_timeout fails.
  // A failure found here ends the transfer at once (what is in flight is abandoned).
  std::vector<TransferStep> on_watchdog(int64_t now_us, const std::string& gone);
  // A failure found outside the machine (copy-out, a broken local resource).
  std::vector<TransferStep> fail(Code code, const std::string& err, bool source_failed, int64_t now_us);

  // Where the caller lands ReadHashes (1 + blocks words).
  [[nodiscard]] uint64_t* hash_words() { return hashes_.data(); }
  [[nodiscard]] bool finished() const { return finished_; }
  [[nodiscard]] int inflight() const { return inflight_; }
  [[nodiscard]] bool counter_pending() const { return counter_pending_; }
  [[nodiscard]] uint64_t held() const { return held_; }
  [[nodiscard]] uint64_t ready() const { return ready_; }  // what the source holds, as last seen
  [[nodiscard]] uint64_t total() const { return p_.total; }
  [[nodiscard]] uint64_t counter_reads() const { return counter_reads_; }
  [[nodiscard]] uint64_t gets() const { return gets_; }
  [[nodiscard]] uint64_t bytes() const { return bytes_; }
  [[nodiscard]] int64_t paused_us() const { return paused_us_; }  // this process's stops, as seen

 private:
  void pump();
  void poll_counter();
  // A counter value read after bytes [0, probe) of ours landed (and hash words [.., probe_hashes),
  // the flag word when probe_flag): what it vouches for, and what the source holds. False when
  // the transfer failed on it (the source's buffers changed, or a complete source is not).
  bool take_counter(uint64_t value, uint64_t probe, uint64_t probe_hashes, bool probe_flag, int64_t now_us);
  [[nodiscard]] bool parking() const { return p_.watched && (seen_fill_ || !p_.partial); }
  void fetch_hashes();
  void advance();
  void record_fail(Code code, const std::string& err, bool source_failed);
  void check_stall();
  void finish();
  uint64_t next_cut(uint64_t off) const;
  uint64_t blocks_within(uint64_t bytes) const { return bytes >= p_.total ? blocks_ : bytes / p_.block; }
  std::vector<TransferStep> take();

  TransferPlan p_;
  std::vector<TransferStep> out_;
  uint64_t blocks_ = 0;
  std::vector<uint64_t> hashes_;  // [0] the flag word, [1 + b] block b's checksum
  bool finished_ = false;
  uint64_t issued_ = 0;   // next stream offset to ask for
  uint64_t prefix_ = 0;   // contiguous bytes landed
  uint64_t checked_ = 0;  // of those, vouched for by a later counter read
  uint64_t held_ = 0;     // of those, what our counter shows
  uint64_t ready_ = 0;    // bytes the source holds, as last seen
  uint64_t probe_ = 0;    // prefix_ when the counter read in flight was issued
  std::map<uint64_t, uint64_t> completed_;  // landed beyond the prefix: start -> end
  int inflight_ = 0;
  bool counter_pending_ = false;  // a counter read in flight or scheduled
  bool hash_pending_ = false;
  bool flag_landed_ = false;
  uint64_t hash_issued_ = 0, hash_landed_ = 0, probe_hashes_ = 0, hash_checked_ = 0;
  uint64_t hash_probe_ = 0;  // prefix_ when the watched checksum read in flight was issued
  bool probe_flag_ = false, flag_checked_ = false;
  bool seen_fill_ = false;  // the source's counter has shown the fill it was granted with
  int64_t backoff_us_ = 20;
  int64_t last_progress_ = 0;
  int64_t now_ = 0;  // the time of the event being handled
  int64_t paused_us_ = 0;  // gaps taken for stops of this process (own_pause_us)
  void clock(int64_t now_us);
  uint64_t next_verify_block_ = 0;
  uint64_t copied_hashes_ = 0;
  Code fail_code_ = Code::kSuccess;
  std::string fail_err_;
  bool fail_source_ = false;
  uint64_t counter_reads_ = 0, gets_ = 0, bytes_ = 0;
};

}  // namespace thub::client
