// Reads of a same-host peer's registered memory with process_vm_readv(2) ("process reads"):
// the data path to sources on this host. UCX 1.13 reaches them over its shared-memory
// transports, where a reader stopped or killed in the middle of a send leaves a slot of the
// source's receive FIFO reserved and never written, and the source then takes nothing more
// over shared memory, from any reader (docs/faults.md, "Shared memory"); and memory it did
// not allocate itself is served by the source's progress thread, one active message at a
// time. Here the reader copies the bytes itself (one kernel copy, what UCX's cma transport
// does): nothing is ever sent to the source, its CPU is not used, a stopped source can still
// be read, a dead one is ESRCH at once, and a read is synchronous, so nothing can land after
// the reader gave up on it. Progress thread only; no UCX type. A read of several slices is
// copied by the progress thread and up to THUB_PROCESS_READ_THREADS - 1 helper threads at
// once (one kernel copy is bound by one core: ~7.5 GB/s of 4 KiB pages on the 2-core machine
// of docs/benchmarks.md), each slice vouched for by its own key word and nonce; the call
// returns only when every helper has finished, so a read is still synchronous.
//
// process_vm_readv can read any memory of the peer, so what may be read is what the *source*
// lists in its table of served regions (served_regions.h), found through /proc/PID/maps at
// the probe: a read is checked against its slot (the bounds read from the source's table,
// never from the descriptor) before anything is copied, and the slot's key word is read
// again in the same system call as the data (a region withdrawn meanwhile fails the read and
// what was copied is wiped). Every call also reads the source's nonce word: a pid reused
// after the source's death (or a pid of another namespace) fails that check, so foreign
// bytes are never delivered.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace thub::transport {

// What a source advertises (in its worker address) for process reads: pid 0 means none.
struct ProcessIdentity {
  uint32_t pid = 0;
  uint64_t nonce_addr = 0;  // a word in its memory that holds `nonce`
  uint64_t nonce = 0;
};

// The source side: one random nonce word per worker, at a fixed address for its lifetime.
class ProcessIdentityWord {
 public:
  ProcessIdentityWord();
  [[nodiscard]] ProcessIdentity identity() const;

 private:
  // Volatile so that the compiler keeps the store: only other processes ever read it.
  volatile uint64_t word_ = 0;
};

// Off with THUB_PROCESS_READS=0, and where UCX_TLS (`tls`, the effective list) names no
// shared-memory transport: the user asked for UCX's other transports only (e.g. tcp).
bool process_reads_wanted(const std::string& tls);

// A reader's path to one source process: reads are done in the order asked, a slice at a time.
class ProcessReader {
 public:
  using Done = std::function<void(bool ok, const std::string& err)>;
  using Completions = std::vector<std::pair<Done, std::string>>;  // an empty text: success
  // Largest single process_vm_readv: other peers' reads (and UCX) progress between slices.
  static constexpr uint64_t kSlice = 1u << 20;

  explicit ProcessReader(ProcessIdentity id) : id_(id) {}
  ProcessReader(const ProcessReader&) = delete;
  ProcessReader& operator=(const ProcessReader&) = delete;

  // Finds the source's table of served regions and reads its nonce word: "" when this process
  // may read the source's memory, it is the process that advertised the word and it lists
  // what it serves; else why not (EPERM: ptrace_scope, seccomp, another uid; ESRCH; ENOSYS; a
  // mismatch: another pid namespace or a reused pid; no table).
  std::string probe();
  // Queues a read of `len` bytes at `remote` into `local`, of the region the source lists in
  // `slot` with `key` (the rkey's). `done` is returned by a later progress() or close(), never
  // called from here. A read outside what the slot lists fails alone, having copied nothing.
  void read(void* local, uint64_t len, uint64_t remote, uint32_t slot, uint64_t key, Done done);
  // Checks now that the source lists [remote, remote + len) under `slot` with `key`: "" or why not.
  std::string check_served(uint32_t slot, uint64_t key, uint64_t remote, uint64_t len);
  // Reads up to `budget` bytes (at least one slice; up to one slice per thread, helpers
  // included, at each step) of the queued reads; the completions due
  // are appended to `done`. A failure fails the reader and every read queued. Returns bytes read.
  uint64_t progress(uint64_t budget, Completions* done);
  // Every queued read completes with `why`; nothing is read after this.
  void close(const std::string& why, Completions* done);
  [[nodiscard]] bool failed() const { return failed_; }
  [[nodiscard]] const std::string& error() const { return error_; }
  [[nodiscard]] size_t outstanding() const { return ops_.size(); }
  [[nodiscard]] uint32_t pid() const { return id_.pid; }
  // Bytes that helper threads copied and that counted (vouched for by their key word).
  [[nodiscard]] uint64_t bytes_beside() const { return bytes_beside_; }
  // The helper threads of this process (THUB_PROCESS_READ_THREADS - 1; made on first use).
  static size_t helper_threads();

 private:
  struct Op {
    char* unchecked;  // where the bytes not yet vouched for by a key word begin
    char* dst;
    uint64_t remote;
    uint64_t left;
    uint32_t slot;
    uint64_t key;
    bool served = false;  // its whole range checked against the slot
    bool finished = false;  // completed in this step (removed at its end)
    Done done;
  };
  // A slice of a step (step()): ops_[op]'s bytes [off, off + len) from where it stands, and
  // what its one system call brought (read()).
  struct Slice {
    size_t op = 0;
    uint64_t off = 0, len = 0, key_now = 0;
    int64_t got = 0;
    bool complete = false;
    std::string err;
  };
  uint64_t step(Completions* done);
  void read(Slice& sl) const;
  struct Slot {
    uint64_t key = 0, addr = 0, len = 0;
  };
  // One system call: up to `len` bytes at `remote` into `dst`, then `extra` (8 bytes at
  // `extra_remote` into `*extra`, when extra_bytes > 0), then the nonce word. Returns the data
  // bytes read (the rest was read and the nonce checked only when all `len` were), or -1 with
  // *err set. Const: helper threads call it beside the progress thread.
  int64_t read_slice(char* dst, uint64_t remote, uint64_t len, void* extra, uint64_t extra_remote,
                     uint64_t extra_bytes, bool* complete, std::string* err) const;
  int64_t read_slice(char* dst, uint64_t remote, uint64_t len, void* extra, uint64_t extra_remote,
                     uint64_t extra_bytes, bool* complete) {
    return read_slice(dst, remote, len, extra, extra_remote, extra_bytes, complete, &error_);
  }

  [[nodiscard]] uint64_t slot_address(uint32_t slot) const;
  // The slot as the source lists it now (read with the nonce); false with error_ set.
  bool read_slot(uint32_t slot, Slot* out);
  // check_served's test; *fatal when the source could not be read at all.
  std::string check_slot(uint32_t slot, uint64_t key, uint64_t remote, uint64_t len, bool* fatal);
  void fail(const std::string& why, Completions* done);

  ProcessIdentity id_;
  uint64_t table_ = 0, table_slots_ = 0;  // the source's table of served regions
  std::map<uint32_t, Slot> slots_;        // slots read (a slot's bounds never change under one key)
  std::deque<Op> ops_;
  std::vector<Slice> plan_;       // step()'s slices (kept: no allocation per step)
  std::vector<void*> claimed_;    // the helper threads step() claimed
  uint64_t bytes_beside_ = 0;
  bool failed_ = false;
  std::string error_;
};

}  // namespace thub::transport
