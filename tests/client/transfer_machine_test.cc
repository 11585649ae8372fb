// The transfer machine alone (no UCX, no clocks): what it reads and when, what the seqlock
// accepts, what our counter may show, and when it gives up. Each test drives it by hand as
// transfer.cc (and the simulation) do: steps out, completions in, the time given.
#include "src/client/transfer_machine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <variant>
#include <vector>

#include "src/client/progress_counter.h"

namespace thub::client {
namespace {

constexpr uint32_t kFill = 7;

class TransferMachineTest : public ::testing::Test {
 protected:
  std::optional<TransferMachine> m;
  std::vector<TransferStep> out;  // every step since the last clear()
  int64_t now = 1000;

  void make(TransferPlan p) {
    if (p.epoch == 0) p.epoch = kFill;
    m.emplace(std::move(p));
    chunks.clear();
  }
  std::vector<ReadChunk> chunks;  // chunk reads asked for and not landed yet
  void add(std::vector<TransferStep> s) {
    for (const auto& t : s)
      if (auto* c = std::get_if<ReadChunk>(&t)) chunks.push_back(*c);
    out.insert(out.end(), s.begin(), s.end());
  }
  void clear() { out.clear(); }
  template <class T>
  std::vector<T> all() const {
    std::vector<T> r;
    for (const auto& s : out)
      if (auto* t = std::get_if<T>(&s)) r.push_back(*t);
    return r;
  }
  template <class T>
  int count() const { return static_cast<int>(all<T>().size()); }
  std::optional<TransferFinish> finished() const {
    auto f = all<TransferFinish>();
    if (f.empty()) return std::nullopt;
    return f.back();
  }
  uint64_t shown() const {
    auto s = all<ShowHeld>();
    return s.empty() ? 0 : s.back().held;
  }
  // Lands every chunk read asked for and not landed yet, in order.
  void land_chunks() {
    auto c = std::move(chunks);
    chunks.clear();
    for (const auto& r : c) add(m->on_chunk(r.off, r.len, true, "", now));
  }
  // Answers the integrity-region read asked for (flag word `flag`, checksums `h`).
  void land_hashes(uint64_t flag, uint64_t h = 0) {
    auto r = all<ReadHashes>();
    ASSERT_FALSE(r.empty());
    for (uint64_t w = r.back().first; w < r.back().first + r.back().words; ++w) m->hash_words()[w] = w == 0 ? flag : h;
    add(m->on_hashes(r.back().upto, true, "", now));
  }
  void counter(uint32_t epoch, uint64_t bytes) { add(m->on_counter(true, counter_value(epoch, bytes), "", now)); }
};

TransferPlan complete(uint64_t total, uint64_t chunk = 4, int inflight = 16) {
  TransferPlan p;
  p.total = total;
  p.block = 8;
  p.chunk_size = chunk;
  p.max_inflight = inflight;
  p.vouch_bytes = 8;
  p.stall_timeout_us = 1'000'000;
  return p;
}

// A complete source: chunks within the window, never across a segment cut; the bytes count
// once a counter read issued after they landed shows the fill; then the end.
TEST_F(TransferMachineTest, CompleteSourceIsReadInChunksAndVouchedForByTheCounter) {
  TransferPlan p = complete(32, 4, 3);
  p.cuts = {6};  // one side's segment ends at byte 6
  make(p);
  add(m->start(now));
  auto reads = all<ReadChunk>();
  ASSERT_EQ(reads.size(), 3u);  // the window
  EXPECT_EQ(reads[0].off, 0u);
  EXPECT_EQ(reads[0].len, 4u);
  EXPECT_EQ(reads[1].off, 4u);
  EXPECT_EQ(reads[1].len, 2u);  // stops at the cut
  EXPECT_EQ(reads[2].off, 6u);
  EXPECT_EQ(count<ReadHashes>(), 1);  // the flag word and every block's checksum
  EXPECT_EQ(count<ReadCounter>(), 0);
  land_hashes(0);  // published without checksums
  // The flag landed: a counter read to vouch for it.
  EXPECT_EQ(count<ReadCounter>(), 1);
  // Chunks land while that read is in flight: it cannot vouch for them.
  while (!finished()) {
    bool counter_asked = count<ReadCounter>() > 0;
    land_chunks();
    if (counter_asked || count<ReadCounter>() > 0) counter(kFill, 32);
    ASSERT_LE(shown(), 32u);
  }
  EXPECT_EQ(finished()->code, Code::kSuccess);
  EXPECT_EQ(finished()->held, 32u);
  EXPECT_EQ(shown(), 32u);
  EXPECT_EQ(m->bytes(), 32u);
}

// The seqlock: only what landed before a counter read was issued counts.
TEST_F(TransferMachineTest, BytesLandedAfterTheCounterReadWasIssuedDoNotCount) {
  make(complete(16, 8, 1));
  add(m->start(now));
  land_hashes(0);
  ASSERT_EQ(count<ReadCounter>(), 1);  // issued when nothing had landed yet
  clear();
  land_chunks();  // bytes 0-7 land after it
  counter(kFill, 16);
  EXPECT_EQ(shown(), 0u) << "the first read vouched for nothing";
  // Its answer brings a new read, issued after the landing: that one vouches for 0-7.
  ASSERT_EQ(count<ReadCounter>(), 1);
  counter(kFill, 16);
  EXPECT_EQ(shown(), 8u);
}

// The source's buffers changed since the grant (another fill, or given up): nothing read
// after the last good counter read is trusted; the source is at fault.
TEST_F(TransferMachineTest, AnotherFillInTheCounterFailsTheSourceKeepingWhatWasChecked) {
  make(complete(16, 8, 1));
  add(m->start(now));
  land_hashes(0);
  land_chunks();
  counter(kFill, 16);
  land_chunks();
  counter(kFill, 16);  // vouches for 0-7
  ASSERT_EQ(shown(), 8u);
  land_chunks();       // 8-15 land
  clear();
  counter(kFill + 1, 16);  // ... but the source refilled
  ASSERT_TRUE(finished());
  EXPECT_EQ(finished()->code, Code::kTransport);
  EXPECT_TRUE(finished()->source_failed);
  EXPECT_EQ(finished()->held, 8u);
  EXPECT_EQ(count<ShowHeld>(), 0);
}

// A complete source whose counter shows less than everything lied (or is being refilled).
TEST_F(TransferMachineTest, CompleteSourceShowingLessHasFailed) {
  make(complete(16));
  add(m->start(now));
  land_hashes(0);
  counter(kFill, 8);
  land_chunks();
  ASSERT_TRUE(finished());
  EXPECT_TRUE(finished()->source_failed);
  EXPECT_EQ(finished()->held, 0u);
}

// A partial source: its counter first, then only what it holds; starved, the counter again
// with back-off (doubling to 2 ms), reset once it shows more.
TEST_F(TransferMachineTest, PartialSourceIsFollowedThroughItsCounterWithBackoff) {
  TransferPlan p = complete(32, 4);
  p.partial = true;
  make(p);
  add(m->start(now));
  EXPECT_EQ(count<ReadCounter>(), 1);
  EXPECT_EQ(count<ReadChunk>(), 0);
  EXPECT_EQ(count<ReadHashes>(), 0) << "its region may not be set up before it holds anything";
  clear();
  counter(kFill, 10);
  auto reads = all<ReadChunk>();
  uint64_t asked = 0;
  for (auto& r : reads) asked = std::max(asked, r.off + r.len);
  EXPECT_EQ(asked, 10u);
  EXPECT_EQ(count<ReadHashes>(), 1);
  land_hashes(0);
  land_chunks();
  std::vector<int64_t> delays;
  for (int k = 0; k < 10; ++k) {
    auto later = all<ReadCounterAfter>();
    ASSERT_EQ(later.size(), 1u) << "starved: one read of the counter, later";
    delays.push_back(later[0].delay_us);
    clear();
    add(m->on_retry(now));
    ASSERT_EQ(count<ReadCounter>(), 1);
    clear();
    counter(kFill, 10);
    if (k == 0) {
      EXPECT_EQ(shown(), 10u) << "vouched for by the first read after the landing";
    }
  }
  EXPECT_EQ(delays[0], 20);
  EXPECT_EQ(delays[1], 40);
  EXPECT_EQ(delays.back(), 2000);
  clear();
  add(m->on_retry(now));
  counter(kFill, 20);  // it moved on
  EXPECT_EQ(count<ReadChunk>(), 3);  // 10-14, 14-18, 18-20
  ASSERT_EQ(count<ReadCounterAfter>(), 1);
  EXPECT_EQ(all<ReadCounterAfter>()[0].delay_us, 20) << "back-off reset once it moved";
  land_chunks();
  clear();
  add(m->on_retry(now));
  counter(kFill, 20);
  EXPECT_EQ(shown(), 20u);
}

// Watched reads (plan.watched: the sockets' parked reads). Once the partial source's counter
// has shown the fill, chunks are asked for past what it holds, each parked at the source until
// its counter passes the chunk's end; the sample each one brings vouches for it and tells what
// the source holds: no counter read but the one the flag word needs, no polling.
TEST_F(TransferMachineTest, WatchedReadsParkPastWhatTheSourceHoldsAndVouchOnLanding) {
  TransferPlan p = complete(32, 4, 4);
  p.partial = true;
  p.watched = true;
  make(p);
  add(m->start(now));
  ASSERT_EQ(count<ReadCounter>(), 1) << "its fill first (a lagging counter would release parked reads at once)";
  EXPECT_EQ(count<ReadChunk>(), 0);
  clear();
  counter(kFill, 0);  // it holds nothing yet
  auto reads = all<ReadChunk>();
  ASSERT_EQ(reads.size(), 4u) << "the window, parked past what it holds";
  for (const auto& r : reads) {
    EXPECT_EQ(r.park_lo, counter_value(kFill, 0));
    EXPECT_EQ(r.park_hi, counter_value(kFill, r.off + r.len));
  }
  EXPECT_EQ(count<ReadCounterAfter>(), 0) << "no polling while reads are parked";
  clear();
  chunks.erase(chunks.begin());
  uint64_t s = counter_value(kFill, 6);  // released: the source holds 6 bytes now
  add(m->on_chunk(0, 4, true, "", now, &s));
  EXPECT_EQ(count<ReadChunk>(), 1) << "the window refilled, past what it holds";
  ASSERT_EQ(count<ReadHashes>(), 1) << "the flag word, now that it holds something";
  ASSERT_TRUE(all<ReadHashes>()[0].watch) << "the checksum read brings the counter too";
  EXPECT_EQ(shown(), 0u) << "nothing shows before the flag word is vouched for";
  m->hash_words()[0] = 0;  // published without checksums
  add(m->on_hashes(all<ReadHashes>()[0].upto, true, "", now, &s));
  EXPECT_EQ(count<ReadCounter>(), 0) << "the flag word came with its own vouch";
  EXPECT_EQ(shown(), 4u) << "the sample vouched for the chunk it came with";
  clear();
  while (!finished()) {
    ASSERT_FALSE(chunks.empty());
    const ReadChunk c = chunks.front();
    chunks.erase(chunks.begin());
    uint64_t v = counter_value(kFill, c.off + c.len);
    add(m->on_chunk(c.off, c.len, true, "", now, &v));
    EXPECT_EQ(shown(), c.off + c.len) << "shown as it lands";
  }
  EXPECT_EQ(count<ReadCounter>(), 0);
  EXPECT_EQ(count<ReadHashes>(), 0) << "published without checksums: nothing more to read";
  EXPECT_EQ(finished()->code, Code::kSuccess);
  EXPECT_EQ(finished()->held, 32u);
  EXPECT_FALSE(finished()->abandoned);
}

// What a source is known to hold is asked for apart from what it does not hold yet: a parked
// read holds back every byte it covers. Here the source stops at the end of its first
// integrity block, and a chunk across that end (the stream's segments are cut at 2) would
// park for good and hold the block back: under verify nothing would ever show.
TEST_F(TransferMachineTest, WatchedReadsAreCutWhereTheSourcesCounterStands) {
  TransferPlan p = complete(32, 4, 4);
  p.partial = true;
  p.watched = true;
  p.verify = true;
  p.cuts = {2};
  p.local_hash = [](uint64_t) { return 5; };
  make(p);
  add(m->start(now));
  counter(kFill, 8);  // one block, and no more while this test runs
  auto reads = all<ReadChunk>();
  ASSERT_EQ(reads.size(), 4u);
  EXPECT_EQ(reads[0].off, 0u);
  EXPECT_EQ(reads[0].len, 2u);
  EXPECT_EQ(reads[1].len, 4u);
  EXPECT_EQ(reads[2].off, 6u);
  EXPECT_EQ(reads[2].len, 2u) << "cut where its counter stands";
  EXPECT_EQ(reads[3].off, 8u);
  EXPECT_EQ(reads[3].len, 4u) << "past it, whole chunks (parked)";
  auto hs = all<ReadHashes>();
  ASSERT_EQ(hs.size(), 1u);
  uint64_t s = counter_value(kFill, 8);
  for (uint64_t w = hs[0].first; w < hs[0].first + hs[0].words; ++w) m->hash_words()[w] = w == 0 ? 1 : 5;
  add(m->on_hashes(hs[0].upto, true, "", now, &s));
  for (int i = 0; i < 3; ++i) {
    const ReadChunk c = chunks.front();
    chunks.erase(chunks.begin());
    add(m->on_chunk(c.off, c.len, true, "", now, &s));
  }
  EXPECT_EQ(shown(), 8u) << "the block the source holds is ours, its checksum compared";
  EXPECT_FALSE(finished());
}

// watch_reads(chunk) caps the chunk of every read from then on (parked reads inside a
// datacenter read a complete source in the hops' chunks); 0 keeps plan.chunk_size.
TEST_F(TransferMachineTest, WatchReadsCapsTheChunk) {
  make(complete(32, 8, 16));
  m->watch_reads(2);
  add(m->start(now));
  auto reads = all<ReadChunk>();
  ASSERT_EQ(reads.size(), 16u);
  for (const auto& r : reads) {
    EXPECT_EQ(r.len, 2u);
    EXPECT_EQ(r.park_hi, counter_value(kFill, r.off + r.len)) << "every read watches";
  }
  make(complete(32, 8, 16));
  clear();
  m->watch_reads(0);
  add(m->start(now));
  EXPECT_EQ(all<ReadChunk>().front().len, 8u);
}

// A sample is a counter read: one showing another fill fails the source, keeping what earlier
// samples vouched for; from a complete source, one showing less than everything fails it.
TEST_F(TransferMachineTest, WatchedReadsSampleOfAnotherFillOrShortFailsTheSource) {
  TransferPlan p = complete(16, 4, 1);  // one read at a time: a failure ends it at once
  p.watched = true;
  make(p);
  add(m->start(now));
  land_hashes(0);
  counter(kFill, 16);
  uint64_t good = counter_value(kFill, 16), other = counter_value(kFill + 1, 16);
  add(m->on_chunk(0, 4, true, "", now, &good));
  EXPECT_EQ(shown(), 4u);
  clear();
  add(m->on_chunk(4, 4, true, "", now, &other));
  ASSERT_TRUE(finished());
  EXPECT_EQ(finished()->code, Code::kTransport);
  EXPECT_TRUE(finished()->source_failed);
  EXPECT_EQ(finished()->held, 4u);
  EXPECT_EQ(count<ShowHeld>(), 0);

  make(p);
  clear();
  add(m->start(now));
  land_hashes(0);
  counter(kFill, 16);
  uint64_t short_of = counter_value(kFill, 12);
  add(m->on_chunk(0, 4, true, "", now, &short_of));
  ASSERT_TRUE(finished());
  EXPECT_TRUE(finished()->source_failed);
  EXPECT_EQ(finished()->held, 0u);
}

// Parked reads of a source that stops moving are given up by the stall watchdog, as polling
// would: the source failed, what is parked abandoned.
TEST_F(TransferMachineTest, WatchedReadsParkedOnAStalledSourceAreGivenUp) {
  TransferPlan p = complete(32, 4, 4);
  p.partial = true;
  p.watched = true;
  make(p);
  add(m->start(now));
  counter(kFill, 0);
  ASSERT_EQ(count<ReadChunk>(), 4);
  now += 500'000;
  add(m->on_watchdog(now, ""));
  EXPECT_FALSE(finished()) << "within the stall timeout";
  now += 600'000;
  add(m->on_watchdog(now, ""));
  ASSERT_TRUE(finished());
  EXPECT_TRUE(finished()->source_failed);
  EXPECT_TRUE(finished()->abandoned);
  EXPECT_NE(finished()->error.find("no progress"), std::string::npos) << finished()->error;
}

// A partial source granted before it reset its counter from an earlier fill (may_lag) is
// waited for; once it has shown the fill, another one fails it.
TEST_F(TransferMachineTest, LaggingPartialSourceIsWaitedForUntilItShowsTheFill) {
  TransferPlan p = complete(16, 8);
  p.partial = p.may_lag = true;
  make(p);
  add(m->start(now));
  counter(kFill - 1, 16);  // still the earlier fill
  EXPECT_FALSE(finished());
  add(m->on_retry(now));
  counter(kFill, 8);
  EXPECT_FALSE(finished());
  land_hashes(0);
  land_chunks();
  counter(kFill - 1, 16);
  ASSERT_TRUE(finished());
  EXPECT_TRUE(finished()->source_failed);

  TransferPlan q = complete(16, 8);
  q.partial = true;  // not lagging: an earlier fill is a failure at once
  make(q);
  clear();
  add(m->start(now));
  counter(kFill - 1, 16);
  ASSERT_TRUE(finished());
  EXPECT_TRUE(finished()->source_failed);
}

// A resume starts at the block boundary below what was held.
TEST_F(TransferMachineTest, ResumeStartsAtTheBlockBelowWhatWasHeld) {
  TransferPlan p = complete(32, 16);
  p.start = 13;  // blocks of 8: resume at 8
  make(p);
  EXPECT_EQ(m->held(), 8u);
  add(m->start(now));
  auto reads = all<ReadChunk>();
  ASSERT_FALSE(reads.empty());
  EXPECT_EQ(reads[0].off, 8u);
  auto h = all<ReadHashes>();
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].first, 0u);
  EXPECT_EQ(h[0].upto, 4u);
}

// Checksums: our counter shows only bytes whose blocks' checksums were vouched for; verify
// compares them with ours, names the tensor of a mismatch, and the data (not the source) is
// at fault; a source without checksums under verify is a state error.
TEST_F(TransferMachineTest, VerifyComparesEveryBlockAndNamesAMismatch) {
  TransferPlan p = complete(16, 8);
  p.verify = true;
  p.local_hash = [](uint64_t b) { return b == 1 ? 99 : 5; };
  p.where = [](uint64_t off) { return "tensor at " + std::to_string(off); };
  make(p);
  add(m->start(now));
  land_hashes(1, 5);  // the source's checksums: 5 for both blocks; ours differ in block 1
  land_chunks();
  counter(kFill, 16);
  counter(kFill, 16);
  ASSERT_TRUE(finished());
  EXPECT_EQ(finished()->code, Code::kTransport);
  EXPECT_FALSE(finished()->source_failed);
  EXPECT_NE(finished()->error.find("integrity block 1 (tensor at 8)"), std::string::npos) << finished()->error;
  EXPECT_EQ(finished()->held, 0u) << "nothing that counter read vouched for is shown";

  TransferPlan q = complete(16, 8);
  q.verify = true;
  make(q);
  clear();
  add(m->start(now));
  land_hashes(0);
  counter(kFill, 16);
  EXPECT_FALSE(finished()) << "its chunks are still in flight";
  land_chunks();
  ASSERT_TRUE(finished());
  EXPECT_EQ(finished()->code, Code::kState);
  EXPECT_EQ(finished()->held, 0u);
}

// A source that stops answering: the watchdog gives up after the stall timeout, at once,
// abandoning what is in flight; a source known gone (its process exited) at the next tick.
TEST_F(TransferMachineTest, StalledSourceIsGivenUpByTheWatchdog) {
  make(complete(16, 8));
  add(m->start(now));
  now += 500'000;
  add(m->on_watchdog(now, ""));
  EXPECT_FALSE(finished());
  now += 600'000;
  add(m->on_watchdog(now, ""));
  ASSERT_TRUE(finished());
  EXPECT_TRUE(finished()->source_failed);
  EXPECT_TRUE(finished()->abandoned);
  EXPECT_NE(finished()->error.find("no progress for 1000 ms"), std::string::npos);
  // Late completions are taken (the count of reads in flight falls) and change nothing.
  const int before = m->inflight();
  clear();
  add(m->on_chunk(0, 8, true, "", now));
  EXPECT_EQ(m->inflight(), before - 1);
  EXPECT_TRUE(out.empty());

  make(complete(16, 8));
  clear();
  add(m->start(now));
  add(m->on_watchdog(now + 1, "the source process (pid 4) is gone"));
  ASSERT_TRUE(finished());
  EXPECT_EQ(finished()->error, "the source process (pid 4) is gone");
}

// Issue 19 item 4: a reader stopped (SIGSTOP) longer than the stall timeout does not blame its
// healthy source when it resumes: the gap between two of its own events is its own stop. The
// stall clock then counts only time it ran; without own_pause_us every gap counts.
TEST_F(TransferMachineTest, TheReadersOwnStopIsNotTheSourcesStall) {
  TransferPlan p = complete(16, 8);
  p.own_pause_us = 300'000;
  make(p);
  add(m->start(now));
  for (int i = 0; i < 8; ++i) {  // 400 ms running, the watchdog every 50 ms
    now += 50'000;
    add(m->on_watchdog(now, ""));
  }
  now += 5'000'000;  // stopped 5 s
  add(m->on_watchdog(now, ""));
  EXPECT_FALSE(finished()) << "the reader's own stop was taken for the source's stall";
  EXPECT_EQ(m->paused_us(), 5'000'000);
  // Running again, the source still answering nothing: the stall timeout counts from here on
  // what was left of it (1 s - 400 ms).
  for (int i = 0; i < 11; ++i) {
    now += 50'000;
    add(m->on_watchdog(now, ""));
  }
  EXPECT_FALSE(finished());
  for (int i = 0; i < 2 && !finished(); ++i) {
    now += 50'000;
    add(m->on_watchdog(now, ""));
  }
  ASSERT_TRUE(finished()) << "a source that answers nothing while the reader runs is stalled";
  EXPECT_TRUE(finished()->source_failed);

  // Without it, the first tick after the stop gives the source up.
  make(complete(16, 8));
  clear();
  add(m->start(now));
  now += 5'000'000;
  add(m->on_watchdog(now, ""));
  ASSERT_TRUE(finished());
  EXPECT_TRUE(finished()->source_failed);
}

// A failed read fails the source, but the end waits until nothing else is in flight (the
// buffers must be quiet before the next transfer fills them).
TEST_F(TransferMachineTest, AFailedReadEndsOnceNothingElseIsInFlight) {
  make(complete(16, 8));
  add(m->start(now));
  land_hashes(0);
  clear();
  add(m->on_chunk(0, 8, false, "peer failed", now));
  EXPECT_FALSE(finished()) << "chunk 8-15 and the counter read are still in flight";
  add(m->on_chunk(8, 8, true, "", now));
  EXPECT_FALSE(finished());
  counter(kFill, 16);
  ASSERT_TRUE(finished());
  EXPECT_EQ(finished()->error, "peer failed");
  EXPECT_TRUE(finished()->source_failed);
  EXPECT_EQ(finished()->held, 0u);
  EXPECT_EQ(count<ReadChunk>(), 0) << "nothing more is asked for after a failure";
}

// An outside failure (copy-out) fails the data, not the source.
TEST_F(TransferMachineTest, OutsideFailureIsTheReadersOwn) {
  make(complete(16, 16));
  add(m->start(now));
  land_hashes(0);
  counter(kFill, 16);
  land_chunks();
  add(m->fail(Code::kTransport, "copying out failed", false, now));
  EXPECT_FALSE(finished());  // the counter read is still in flight
  counter(kFill, 16);
  ASSERT_TRUE(finished());
  EXPECT_FALSE(finished()->source_failed);
  EXPECT_EQ(finished()->error, "copying out failed");
}

// Nothing to read: an empty stream, or a resume at the end, ends at once with success.
TEST_F(TransferMachineTest, NothingToReadEndsAtOnce) {
  make(complete(0));
  add(m->start(now));
  ASSERT_TRUE(finished());
  EXPECT_EQ(finished()->code, Code::kSuccess);
  TransferPlan p = complete(16);
  p.start = 16;
  make(p);
  clear();
  add(m->start(now));
  ASSERT_TRUE(finished());
  EXPECT_EQ(finished()->held, 16u);
  EXPECT_EQ(count<ReadChunk>(), 0);
}

}  // namespace
}  // namespace thub::client
