// Reads of a same-host source's memory with process_vm_readv (src/transport/process_reads.h):
// byte-exact through the Worker with no UCX endpoint; a read outside the region the rkey names
// is refused, and so is one outside what the source itself lists (a forged rkey: another
// process's memory, the reader's own, UCX's mapped segment), having copied nothing; an address whose identity word does not check out (wrong nonce, pid gone) falls
// back to UCX; a stopped source is still read to the end; a killed one fails the read at once.
#include "src/transport/process_reads.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "src/transport/served_regions.h"
#include "src/transport/wire_format.h"
#include "src/transport/worker.h"

namespace thub::transport {
namespace {

constexpr size_t kChildBytes = 64u << 20;
unsigned char pattern(size_t i) { return static_cast<unsigned char>(i * 29 + 3); }

std::string hex(const std::string& s) {
  std::string out;
  char b[3];
  for (unsigned char c : s) std::snprintf(b, sizeof b, "%02x", c), out += b;
  return out;
}
std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

// The source process: this test binary run again with THUB_PRT_SOURCE=1 (exec'd, not only
// forked: a forked copy of a process with UCX threads is not a fair source). It serves 64 MiB
// of malloc'd memory, prints its worker address and rkey, and waits to be killed.
struct SourceMode {
  SourceMode() {
    if (!std::getenv("THUB_PRT_SOURCE")) return;
    auto w = Worker::create(WorkerOptions{});
    auto* mem = static_cast<unsigned char*>(std::malloc(kChildBytes));
    for (size_t i = 0; i < kChildBytes; ++i) mem[i] = pattern(i);
    auto region = w->map(mem, kChildBytes);
    // Memory it never registered: no reader may copy it, whatever a descriptor says.
    static char secret[4096];
    std::memset(secret, 'S', sizeof secret);
    std::printf("%s %s %llu %llu\n", hex(w->address()).c_str(), hex(region->packed_rkey()).c_str(),
                static_cast<unsigned long long>(region->address()), static_cast<unsigned long long>(
                    reinterpret_cast<uintptr_t>(secret)));
    std::fflush(stdout);
    for (;;) ::pause();
  }
} source_mode;

struct Child {
  pid_t pid = -1;
  std::string address, rkey;
  uint64_t addr = 0, secret = 0;
  Child() {
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid = ::fork();
    if (pid == 0) {
      ::dup2(fds[1], 1);
      ::setenv("THUB_PRT_SOURCE", "1", 1);
      char* argv[] = {const_cast<char*>("/proc/self/exe"), nullptr};
      ::execv("/proc/self/exe", argv);
      ::_exit(127);
    }
    ::close(fds[1]);
    std::string line;
    char c;
    while (::read(fds[0], &c, 1) == 1 && c != '\n') line += c;
    ::close(fds[0]);
    std::istringstream in(line);
    std::string a, k;
    unsigned long long x = 0, y = 0;
    in >> a >> k >> x >> y;
    address = unhex(a);
    rkey = unhex(k);
    addr = x;
    secret = y;
  }
  ~Child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

struct Outcome {
  int failures = 0;
  std::string error;
  double seconds = 0;
};

// Reads [remote, remote + len) of the source at `address` into `dst` in `chunk`-byte gets
// issued at once; `check` runs on the progress thread with the peer.
Outcome read_all(Worker& reader, const std::string& address, const std::string& rkey, void* dst, uint64_t remote,
                 uint64_t len, uint64_t chunk, const std::function<void(const std::shared_ptr<Peer>&)>& check = {}) {
  auto out = std::make_shared<Outcome>();
  auto left = std::make_shared<uint64_t>(0);
  for (uint64_t off = 0; off < len; off += std::min(chunk, len - off)) ++*left;
  std::promise<void> finished;
  auto f = finished.get_future();
  auto t0 = std::chrono::steady_clock::now();
  reader.call([&] {
    auto peer = reader.peer(address, false);
    if (check) check(peer);
    auto key = reader.remote_key(peer, rkey);
    for (uint64_t off = 0; off < len; off += std::min(chunk, len - off)) {
      reader.get(peer, static_cast<char*>(dst) + off, std::min(chunk, len - off), remote + off, *key,
                 [out, left, &finished](bool ok, const std::string& e) {
                   if (!ok && out->error.empty()) out->error = e;
                   out->failures += !ok;
                   if (--*left == 0) finished.set_value();
                 });
    }
  });
  EXPECT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  out->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return *out;
}

TEST(ProcessReadsTest, ReadsLandByteExactWithoutAUcxEndpoint) {
  auto source = Worker::create(WorkerOptions{});
  auto reader = Worker::create(WorkerOptions{});
  std::vector<unsigned char> src(24u << 20), dst(src.size(), 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = pattern(i);
  auto region = source->map(src.data(), src.size());
  // Odd sizes: slices of the 1 MiB cap and a tail.
  Outcome o = read_all(*reader, source->address(), region->packed_rkey(), dst.data(), region->address(), src.size(),
                       (3u << 20) + 12345, [&](const std::shared_ptr<Peer>& p) {
                         EXPECT_TRUE(reader->reads_cancel_cleanly(p)) << "not on the process-read path";
                       });
  EXPECT_EQ(o.failures, 0) << o.error;
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), src.size()), 0);
  reader.reset();
  region.reset();
}

TEST(ProcessReadsTest, ReadOutsideTheRegionIsRefused) {
  auto source = Worker::create(WorkerOptions{});
  auto reader = Worker::create(WorkerOptions{});
  std::vector<char> mem(3 * 4096, 'x'), dst(8192, 0);
  // Only the middle page is registered: its neighbours are readable memory of the source.
  auto region = source->map(mem.data() + 4096, 4096);
  const uint64_t base = region->address();
  EXPECT_GT(read_all(*reader, source->address(), region->packed_rkey(), dst.data(), base + 1, 4096, 4096).failures, 0);
  EXPECT_GT(read_all(*reader, source->address(), region->packed_rkey(), dst.data(), base - 1, 8, 8).failures, 0);
  EXPECT_GT(read_all(*reader, source->address(), region->packed_rkey(), dst.data(), base + 8, UINT64_MAX - 4, UINT64_MAX)
                .failures, 0);
  // A hostile rkey: its region wraps around the address space.
  std::string ucx = ucx_rkey(region->packed_rkey());
  EXPECT_THROW(reader->call([&] {
    auto p = reader->peer(source->address(), false);
    reader->remote_key(p, encode_rkey(ucx, 0, UINT64_MAX - 10, 100));
  }), std::exception);
  Outcome good = read_all(*reader, source->address(), region->packed_rkey(), dst.data(), base, 4096, 4096);
  EXPECT_EQ(good.failures, 0) << good.error;
  EXPECT_EQ(std::string(dst.data(), 4096), std::string(4096, 'x'));
  reader.reset();
  region.reset();
}

// The address says pid P has nonce N at A: when that does not check out, UCX's path is used.
TEST(ProcessReadsTest, IdentityThatDoesNotCheckOutFallsBackToUcx) {
  auto source = Worker::create(WorkerOptions{});
  auto reader = Worker::create(WorkerOptions{});
  std::vector<unsigned char> src(1u << 20), dst(src.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = pattern(i);
  auto region = source->map(src.data(), src.size());
  DecodedAddress a = decode_address(source->address());
  ASSERT_NE(a.proc.pid, 0u);
  ProcessIdentity wrong_nonce = a.proc, gone = a.proc;
  wrong_nonce.nonce ^= 1;  // a reused pid, or another pid namespace
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  gone.pid = static_cast<uint32_t>(dead);  // ESRCH
  for (const ProcessIdentity& id : {wrong_nonce, gone}) {
    std::fill(dst.begin(), dst.end(), 0);
    Outcome o = read_all(*reader, encode_address(a.ucx, a.sock, id), region->packed_rkey(), dst.data(),
                         region->address(), src.size(), 256u << 10, [&](const std::shared_ptr<Peer>& p) {
                           EXPECT_FALSE(reader->reads_cancel_cleanly(p)) << "process reads despite the identity";
                         });
    EXPECT_EQ(o.failures, 0) << o.error;
    EXPECT_EQ(std::memcmp(src.data(), dst.data(), src.size()), 0);
  }
  reader.reset();
  region.reset();
}

TEST(ProcessReadsTest, StoppedSourceIsStillReadAndAKilledOneFailsAtOnce) {
  Child child;
  ASSERT_GT(child.pid, 0);
  ASSERT_FALSE(child.address.empty()) << "the source process did not start";
  auto reader = Worker::create(WorkerOptions{});
  std::vector<unsigned char> dst(kChildBytes);
  auto check = [&](const std::shared_ptr<Peer>& p) { EXPECT_TRUE(reader->reads_cancel_cleanly(p)); };
  ASSERT_EQ(::kill(child.pid, SIGSTOP), 0);
  Outcome o = read_all(*reader, child.address, child.rkey, dst.data(), child.addr, kChildBytes, 4u << 20, check);
  EXPECT_EQ(o.failures, 0) << o.error;
  bool same = true;
  for (size_t i = 0; i < kChildBytes && same; ++i) same = dst[i] == pattern(i);
  EXPECT_TRUE(same) << "bytes from the stopped source differ";
  ASSERT_EQ(::kill(child.pid, SIGKILL), 0);
  ::waitpid(child.pid, nullptr, 0);
  child.pid = -1;
  o = read_all(*reader, child.address, child.rkey, dst.data(), child.addr, kChildBytes, 4u << 20);
  EXPECT_GT(o.failures, 0);
  EXPECT_LT(o.seconds, 2.0) << "a killed source should fail the read at once";
  std::printf("killed source: %d failures in %.3f s: %s\n", o.failures, o.seconds, o.error.c_str());
}

// Memory UCX allocated (THUB_Alloc_mem) is read over UCX's mapped segment, a memcpy here and
// about 3x a process read; THUB_PROCESS_READS=all reads it with process reads too.
TEST(ProcessReadsTest, UcxAllocatedRegionIsReadOverItsMappedSegmentUnlessAll) {
  auto source = Worker::create(WorkerOptions{});
  auto region = source->allocate(8u << 20);
  for (size_t i = 0; i < region->length(); ++i) region->data()[i] = static_cast<char>(pattern(i));
  for (const char* mode : {"1", "all"}) {
    ::setenv("THUB_PROCESS_READS", mode, 1);
    auto reader = Worker::create(WorkerOptions{});
    ::unsetenv("THUB_PROCESS_READS");
    std::vector<char> dst(region->length(), 0);
    Outcome o = read_all(*reader, source->address(), region->packed_rkey(), dst.data(), region->address(),
                         region->length(), 1u << 20);
    EXPECT_EQ(o.failures, 0) << mode << ": " << o.error;
    EXPECT_EQ(std::memcmp(dst.data(), region->data(), dst.size()), 0) << mode;
    bool clean = false;
    reader->call([&] { clean = reader->reads_cancel_cleanly(reader->peer(source->address(), false)); });
    EXPECT_EQ(clean, std::string(mode) == "all") << mode << ": a UCX endpoint for the mapped segment or not";
  }
  region.reset();
}

// A rkey forged from a real one (issue 19: any client of the registry learns a source's
// descriptors): the same slot and key with another address, or a wider region, or another
// key. A process read copies only what the source lists, so each read fails and leaves the
// reader's buffer as it was; the real rkey still reads.
std::string forge(const std::string& packed, uint64_t addr, uint64_t len, uint64_t key_xor = 0, uint32_t slot_add = 0) {
  DecodedRkey d = decode_rkey(packed);
  EXPECT_TRUE(d.has_slot);
  return encode_rkey(d.ucx, d.token, addr, len, d.ucx_mapped, {true, d.slot + slot_add, d.slot_key ^ key_xor});
}

TEST(ProcessReadsTest, ForgedRkeyCannotReadAnotherProcesssUnregisteredMemory) {
  Child child;
  ASSERT_GT(child.pid, 0);
  ASSERT_NE(child.secret, 0u);
  auto reader = Worker::create(WorkerOptions{});
  std::vector<char> dst(4096, 0);
  const uint64_t past_end = child.addr + kChildBytes;
  for (const auto& [rkey, at] : std::vector<std::pair<std::string, uint64_t>>{
           {forge(child.rkey, child.secret, 4096), child.secret},                    // another address
           {forge(child.rkey, child.addr, kChildBytes + 4096), past_end},            // wider, read past its end
           {forge(child.rkey, child.addr, 4096, 0x5a5a), child.addr},                // another key
           {forge(child.rkey, child.addr, 4096, 0, 1u << 20), child.addr}}) {       // a slot beyond the table
    Outcome o = read_all(*reader, child.address, rkey, dst.data(), at, 4096, 4096);
    EXPECT_EQ(o.failures, 1);
    EXPECT_FALSE(o.error.empty());
    EXPECT_EQ(std::string(dst.data(), dst.size()), std::string(4096, '\0')) << "bytes were copied: " << o.error;
  }
  // The peer is still readable with its real rkey.
  Outcome good = read_all(*reader, child.address, child.rkey, dst.data(), child.addr, 4096, 4096);
  EXPECT_EQ(good.failures, 0) << good.error;
  for (size_t i = 0; i < dst.size(); ++i) ASSERT_EQ(static_cast<unsigned char>(dst[i]), pattern(i)) << i;
  reader.reset();
}

// The same with the reader's own pid in the forged address: it must not copy its own memory.
TEST(ProcessReadsTest, ForgedRkeyCannotMakeAReaderCopyItsOwnMemory) {
  auto self = Worker::create(WorkerOptions{});  // serves one page of this process
  auto reader = Worker::create(WorkerOptions{});
  std::vector<char> mem(3 * 4096, 'x');
  std::vector<char> secret(4096, 'S');
  auto region = self->map(mem.data() + 4096, 4096);
  std::vector<char> dst(4096, 0);
  const auto secret_at = reinterpret_cast<uint64_t>(secret.data());
  for (const auto& [rkey, at] : std::vector<std::pair<std::string, uint64_t>>{
           {forge(region->packed_rkey(), secret_at, 4096), secret_at},
           {forge(region->packed_rkey(), region->address() - 4096, 3 * 4096), region->address() - 4096}}) {
    Outcome o = read_all(*reader, self->address(), rkey, dst.data(), at, 4096, 4096);
    EXPECT_EQ(o.failures, 1);
    EXPECT_NE(o.error.find("serves"), std::string::npos) << o.error;
    EXPECT_EQ(std::string(dst.data(), dst.size()), std::string(4096, '\0')) << "bytes were copied";
  }
  Outcome good = read_all(*reader, self->address(), region->packed_rkey(), dst.data(), region->address(), 4096, 4096);
  EXPECT_EQ(good.failures, 0) << good.error;
  EXPECT_EQ(std::string(dst.data(), dst.size()), std::string(4096, 'x'));
  // Withdrawn (the region unmapped): its rkey reads nothing any more.
  const std::string old = region->packed_rkey();
  const uint64_t old_at = region->address();
  region.reset();
  std::fill(dst.begin(), dst.end(), 0);
  auto fresh = Worker::create(WorkerOptions{});  // no cached rkey
  Outcome gone = read_all(*fresh, self->address(), old, dst.data(), old_at, 4096, 4096);
  EXPECT_EQ(gone.failures, 1);
  EXPECT_NE(gone.error.find("does not serve"), std::string::npos) << gone.error;
  EXPECT_EQ(std::string(dst.data(), dst.size()), std::string(4096, '\0'));
  fresh.reset();
  reader.reset();
}

// UCX's mapped segment is copied from without asking the source: a rkey whose region is
// longer than what the source lists is refused when it is unpacked.
TEST(ProcessReadsTest, ForgedRegionOverTheMappedSegmentIsRefused) {
  auto source = Worker::create(WorkerOptions{});
  auto region = source->allocate(1u << 20);
  auto reader = Worker::create(WorkerOptions{});
  const std::string longer = forge(region->packed_rkey(), region->address(), region->length() + 1);
  bool threw = false;
  std::string why;
  reader->call([&] {
    try {
      reader->remote_key(reader->peer(source->address(), false), longer);
    } catch (const std::exception& e) {
      threw = true;
      why = e.what();
    }
  });
  EXPECT_TRUE(threw);
  EXPECT_NE(why.find("outside the region"), std::string::npos) << why;
  // A read one byte past the real region's end is refused as well.
  std::vector<char> dst(region->length() + 1, 0);
  Outcome o = read_all(*reader, source->address(), region->packed_rkey(), dst.data(), region->address(),
                       region->length() + 1, region->length() + 1);
  EXPECT_EQ(o.failures, 1);
  reader.reset();
  region.reset();
}

// Addresses and rkeys come from peers: older forms still decode, truncated ones are errors.
TEST(ProcessReadsTest, WireFormatsDecodeOlderFormsAndRefuseTruncatedOnes) {
  SocketEndpoint ep{4242, {0x0100007f}};
  ProcessIdentity id{77, 0x1000, 0xabcdef};
  std::string a = encode_address("ucx-bytes", ep, id);
  DecodedAddress d = decode_address(a);
  EXPECT_EQ(d.ucx, "ucx-bytes");
  EXPECT_EQ(d.sock.port, 4242);
  ASSERT_EQ(d.sock.ipv4.size(), 1u);
  EXPECT_EQ(d.proc.pid, 77u);
  EXPECT_EQ(d.proc.nonce_addr, 0x1000u);
  EXPECT_EQ(d.proc.nonce, 0xabcdefu);
  for (size_t n = 4; n < a.size(); ++n) EXPECT_THROW(decode_address(a.substr(0, n)), std::exception) << n;
  // "THW1" (socket endpoint only, before process reads): no process identity.
  std::string v1 = "THW1";
  uint32_t len = 3;
  v1.append(reinterpret_cast<const char*>(&len), 4).append("abc");
  v1.append(reinterpret_cast<const char*>(&ep.port), 2).push_back(0);
  d = decode_address(v1);
  EXPECT_EQ(d.ucx, "abc");
  EXPECT_EQ(d.sock.port, 4242);
  EXPECT_EQ(d.proc.pid, 0u);
  EXPECT_EQ(decode_address("bare ucx").ucx, "bare ucx");
  std::string k = encode_rkey("ucx-rkey", 5, 0x2000, 100, true);
  DecodedRkey r = decode_rkey(k);
  EXPECT_EQ(r.ucx, "ucx-rkey");
  EXPECT_TRUE(r.has_region && r.ucx_mapped);
  EXPECT_EQ(r.addr, 0x2000u);
  EXPECT_EQ(r.len, 100u);
  for (size_t n = 4; n < k.size() - 8; ++n) EXPECT_THROW(decode_rkey(k.substr(0, n)), std::exception) << n;
  std::string k1 = "THK1";
  uint64_t token = 9;
  k1.append(reinterpret_cast<const char*>(&token), 8).append("old");
  r = decode_rkey(k1);
  EXPECT_EQ(r.token, 9u);
  EXPECT_EQ(r.ucx, "old");
  EXPECT_FALSE(r.has_region);
}

// Reads of several slices are copied by helper threads beside the progress thread (three
// threads a read here, whatever the cores: set before the first read makes the helpers).
struct ThreeThreadsARead {
  ThreeThreadsARead() { ::setenv("THUB_PROCESS_READ_THREADS", "3", 0); }
} three_threads_a_read;

// This process read as a source by a ProcessReader of its own (process_vm_readv of itself):
// a region listed in its table of served regions, and the completions of progress().
struct SelfRead {
  ProcessIdentityWord word;
  ProcessReader reader{word.identity()};
  std::vector<unsigned char> src, dst;
  uint32_t slot = 0;
  uint64_t key = 0;
  ProcessReader::Completions done;
  explicit SelfRead(size_t bytes) : src(bytes), dst(bytes, 0) {
    for (size_t i = 0; i < bytes; ++i) src[i] = pattern(i);
    EXPECT_TRUE(ServedRegions::instance().serve(remote(0), bytes, &slot, &key));  // makes the table
    EXPECT_EQ(reader.probe(), "");
  }
  ~SelfRead() {
    if (key) ServedRegions::instance().withdraw(slot, key);
  }
  uint64_t remote(size_t off) const { return reinterpret_cast<uint64_t>(src.data()) + off; }
  void read(size_t off, size_t len, std::string* err) {
    reader.read(dst.data() + off, len, remote(off), slot, key, [err](bool ok, const std::string& e) { *err = ok ? "ok" : e; });
  }
  void drain() {
    for (int i = 0; i < 100000 && reader.outstanding() > 0; ++i) reader.progress(ProcessReader::kSlice, &done);
    for (auto& [cb, e] : done) cb(e.empty(), e);
    done.clear();
  }
};

// Three reads queued at once, the middle one outside the region: the first and the last are
// copied in steps shared with helper threads, each slice vouched for by its own key word, and
// land byte-exact; the middle one fails alone, having copied nothing.
TEST(ProcessReadsTest, QueuedReadsAreCopiedBesideByHelperThreadsAndARefusedOneFailsAlone) {
  ASSERT_EQ(ProcessReader::helper_threads(), 2u) << "THUB_PROCESS_READ_THREADS=3 was not seen";
  const size_t n = 16u << 20, a = (5u << 20) + 12345, b = 4096;
  SelfRead r(n);
  std::string first, middle, last;
  r.read(0, a, &first);
  r.reader.read(r.dst.data() + a, b, r.remote(n - 10), r.slot, r.key,
                [&middle](bool ok, const std::string& e) { middle = ok ? "ok" : e; });
  r.read(a, n - a, &last);
  r.drain();
  EXPECT_EQ(first, "ok");
  EXPECT_EQ(last, "ok");
  EXPECT_NE(middle.find("outside the region"), std::string::npos) << middle;
  EXPECT_EQ(std::memcmp(r.src.data(), r.dst.data(), n), 0);
  // Two thirds of 16 MiB can only have been copied beside when the helpers took part.
  EXPECT_GE(r.reader.bytes_beside(), 8u << 20);
}

// A region withdrawn in the middle of a read: what was read before (vouched for by its key
// word) stays, nothing read after the withdrawal is kept, neither by this thread nor by a
// helper (their slices are wiped), and the read fails.
TEST(ProcessReadsTest, RegionWithdrawnMidReadKeepsNoUnvouchedByteFromAnyThread) {
  const size_t n = 16u << 20;
  SelfRead r(n);
  std::string result;
  r.read(0, n, &result);
  const uint64_t first = r.reader.progress(ProcessReader::kSlice, &r.done);  // one step
  ASSERT_GT(first, 0u);
  ASSERT_LT(first, n);
  ServedRegions::instance().withdraw(r.slot, r.key);
  r.drain();
  EXPECT_NE(result.find("withdrew the region"), std::string::npos) << result;
  EXPECT_EQ(std::memcmp(r.src.data(), r.dst.data(), first), 0);
  size_t kept = 0;
  for (size_t i = first; i < n; ++i) kept += r.dst[i] != 0;
  EXPECT_EQ(kept, 0u) << "bytes read after the withdrawal were kept";
  r.key = 0;  // withdrawn already
}

TEST(ProcessReadsTest, OffWhenAskedOrWhenUcxTlsLeavesOutSharedMemory) {
  EXPECT_TRUE(process_reads_wanted(""));
  EXPECT_TRUE(process_reads_wanted("sm,self"));
  EXPECT_TRUE(process_reads_wanted("tcp,posix"));
  EXPECT_TRUE(process_reads_wanted("^ib"));
  EXPECT_FALSE(process_reads_wanted("tcp"));
  EXPECT_FALSE(process_reads_wanted("tcp,self"));
  ::setenv("THUB_PROCESS_READS", "0", 1);
  EXPECT_FALSE(process_reads_wanted(""));
  ::unsetenv("THUB_PROCESS_READS");
}

}  // namespace
}  // namespace thub::transport
