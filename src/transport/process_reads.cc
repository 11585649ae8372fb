#include "src/transport/process_reads.h"

#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "src/transport/served_regions.h"

namespace thub::transport {

namespace {
// Threads that copy slices beside a progress thread (ProcessReader::step). One set per
// process, made on first use and never freed (made again in a forked child: threads do not
// survive fork). A reader claims idle helpers and never waits for a busy one; THUB_PROCESS_
// READ_THREADS counts the threads of one read, the progress thread included (default: the
// cores, at most 4; 1: no helper).
class SliceHelpers {
 public:
  struct Helper {
    // 0: idle, 1: a job is posted, 2: its job is done. The job is handed over through it
    // (release/acquire); mu and cv only put an idle helper to sleep and wake it.
    std::atomic<int> state{0};
    std::function<void()> job;
    std::mutex mu;
    std::condition_variable cv;
    bool sleeping = false;  // under mu
    bool claimed = false;   // under SliceHelpers::mu_
  };
  static SliceHelpers& instance() {
    static std::mutex made_mu;
    static SliceHelpers* made = nullptr;
    static std::vector<SliceHelpers*> parents;  // kept reachable: never freed, never a leak
    std::lock_guard<std::mutex> lock(made_mu);
    if (made && made->pid_ != ::getpid()) {  // a forked child: the parent's helpers are not ours
      parents.push_back(made);
      made = nullptr;
    }
    if (!made) made = new SliceHelpers();
    return *made;
  }
  [[nodiscard]] size_t size() const { return helpers_.size(); }
  // Up to `want` idle helpers, now the caller's until finish(); returns how many.
  size_t claim(size_t want, std::vector<void*>* out) {
    std::lock_guard<std::mutex> lock(mu_);
    out->clear();
    for (auto& h : helpers_) {
      if (out->size() == want) break;
      if (!h->claimed) {
        h->claimed = true;
        out->push_back(h.get());
      }
    }
    return out->size();
  }
  static void start(void* helper, std::function<void()> job) {
    auto* h = static_cast<Helper*>(helper);
    h->job = std::move(job);
    h->state.store(1, std::memory_order_release);
    std::lock_guard<std::mutex> lock(h->mu);
    if (h->sleeping) h->cv.notify_one();
  }
  // Waits for the helper's job to end (it is short: one slice) and gives the helper back.
  void finish(void* helper) {
    auto* h = static_cast<Helper*>(helper);
    while (h->state.load(std::memory_order_acquire) != 2) std::this_thread::yield();
    h->state.store(0, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mu_);
    h->claimed = false;
  }

 private:
  SliceHelpers() : pid_(::getpid()) {
    size_t threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), 4);
    if (const char* env = std::getenv("THUB_PROCESS_READ_THREADS")) {
      const long v = std::strtol(env, nullptr, 10);
      if (v >= 1) threads = std::min<size_t>(static_cast<size_t>(v), 64);
    }
    for (size_t i = 1; i < threads; ++i) {
      helpers_.push_back(std::make_unique<Helper>());
      std::thread([h = helpers_.back().get()] { run(h); }).detach();
    }
  }
  // A helper waits for its next job spinning for a while (a bulk read's steps come back to
  // back, and waking a sleeping thread cost ~80 us a step here), then asleep.
  [[noreturn]] static void run(Helper* h) {
    using Clock = std::chrono::steady_clock;
    for (;;) {
      const auto until = Clock::now() + std::chrono::microseconds(kSpinUs);
      while (h->state.load(std::memory_order_acquire) != 1 && Clock::now() < until) {
      }
      if (h->state.load(std::memory_order_acquire) != 1) {
        std::unique_lock<std::mutex> lock(h->mu);
        h->sleeping = true;
        h->cv.wait(lock, [h] { return h->state.load(std::memory_order_acquire) == 1; });
        h->sleeping = false;
      }
      h->job();
      h->job = nullptr;
      h->state.store(2, std::memory_order_release);
    }
  }
  static constexpr int64_t kSpinUs = 200;
  pid_t pid_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Helper>> helpers_;
};
}  // namespace

ProcessIdentityWord::ProcessIdentityWord() {
  uint64_t v = 0;
  while (v == 0) {
    if (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) v = 0;
  }
  word_ = v;
}

ProcessIdentity ProcessIdentityWord::identity() const {
  ProcessIdentity id;
  id.pid = static_cast<uint32_t>(::getpid());
  id.nonce_addr = reinterpret_cast<uint64_t>(&word_);
  id.nonce = word_;
  return id;
}

bool process_reads_wanted(const std::string& tls) {
  const char* env = std::getenv("THUB_PROCESS_READS");
  if (env && std::string(env) == "0") return false;
  if (tls.empty()) return true;
  size_t start = 0;
  for (;;) {
    size_t comma = tls.find(',', start);
    std::string t = tls.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!t.empty() && t[0] == '^') return true;  // "everything but": shared memory included
    for (const char* sm : {"all", "sm", "shm", "mm", "posix", "sysv", "cma", "xpmem", "knem"}) {
      if (t == sm) return true;
    }
    if (comma == std::string::npos) return false;
    start = comma + 1;
  }
}

int64_t ProcessReader::read_slice(char* dst, uint64_t remote, uint64_t len, void* extra, uint64_t extra_remote,
                                  uint64_t extra_bytes, bool* complete, std::string* err) const {
  *complete = false;
  uint64_t seen = 0;
  iovec local[3], far[3];
  int n = 0;
  if (len > 0) {
    local[n] = {dst, len};
    far[n] = {reinterpret_cast<void*>(remote), len};
    ++n;
  }
  if (extra_bytes > 0) {  // after the data: what it shows was true when the data was read
    local[n] = {extra, extra_bytes};
    far[n] = {reinterpret_cast<void*>(extra_remote), extra_bytes};
    ++n;
  }
  // The nonce in the same call as the data: both come from the one address space the pid
  // named during this call, so a nonce that matches vouches for the data read with it.
  local[n] = {&seen, sizeof seen};
  far[n] = {reinterpret_cast<void*>(id_.nonce_addr), sizeof seen};
  ++n;
  ssize_t got = ::process_vm_readv(static_cast<pid_t>(id_.pid), local, n, far, n, 0);
  const std::string pid = std::to_string(id_.pid);
  if (got < 0) {
    const int e = errno;
    switch (e) {
      case ESRCH: *err = "the source process (pid " + pid + ") is gone"; break;
      case EPERM: *err = "not permitted to read pid " + pid + " (ptrace access: Yama ptrace_scope, seccomp or another user)"; break;
      case EFAULT: *err = "address outside pid " + pid + "'s mapped memory"; break;
      case ENOSYS: *err = "process_vm_readv is not available"; break;
      default: *err = "process_vm_readv from pid " + pid + ": " + std::strerror(e);
    }
    return -1;
  }
  const auto all = static_cast<size_t>(got);
  if (all == len + extra_bytes + sizeof seen) {
    if (seen != id_.nonce) {
      *err = "pid " + pid + " is no longer the source process (its identity word differs)";
      return -1;
    }
    *complete = true;
    return static_cast<int64_t>(len);
  }
  if (all == 0) {  // not expected (a failure is -1), but it would loop for ever
    *err = "process_vm_readv from pid " + pid + " read nothing";
    return -1;
  }
  // A partial read (the kernel stops at the first page it cannot read): the data read counts
  // once a later call, which reads the key word and the nonce again, completes the read.
  return static_cast<int64_t>(std::min<uint64_t>(all, len));
}

uint64_t ProcessReader::slot_address(uint32_t slot) const {
  return table_ + kServedHeaderBytes + uint64_t{slot} * kServedSlotBytes;
}

bool ProcessReader::read_slot(uint32_t slot, Slot* out) {
  if (slot >= table_slots_) {
    error_ = "slot " + std::to_string(slot) + " is outside pid " + std::to_string(id_.pid) + "'s table of served regions";
    return false;
  }
  uint64_t w[3] = {0, 0, 0};
  bool complete = false;
  if (read_slice(nullptr, 0, 0, w, slot_address(slot), sizeof w, &complete) < 0) return false;
  if (!complete) {
    error_ = "pid " + std::to_string(id_.pid) + "'s table of served regions could not be read";
    return false;
  }
  *out = Slot{w[0], w[1], w[2]};
  return true;
}

std::string ProcessReader::probe() {
  const ServedTable t = find_served_table(id_.pid);
  if (t.bytes == 0) return t.error;
  uint64_t head[2] = {0, 0};
  bool complete = false;
  if (read_slice(nullptr, 0, 0, head, t.addr, sizeof head, &complete) < 0) return error_;
  if (!complete) return "the source's identity word could not be read";
  if (head[0] != kServedMagic || head[1] == 0 || head[1] > (t.bytes - kServedHeaderBytes) / kServedSlotBytes)
    return "pid " + std::to_string(id_.pid) + "'s table of served regions is not one this library made";
  table_ = t.addr;
  table_slots_ = head[1];
  return std::string();
}

std::string ProcessReader::check_served(uint32_t slot, uint64_t key, uint64_t remote, uint64_t len) {
  bool fatal = false;
  return check_slot(slot, key, remote, len, &fatal);
}

std::string ProcessReader::check_slot(uint32_t slot, uint64_t key, uint64_t remote, uint64_t len, bool* fatal) {
  *fatal = false;
  auto it = slots_.find(slot);
  if (it == slots_.end() || it->second.key != key) {
    Slot sl;
    if (!read_slot(slot, &sl)) {
      *fatal = slot < table_slots_;  // the source cannot be read at all (a bad slot is the rkey's)
      return error_;
    }
    if (sl.key == 0 || sl.key != key) {
      slots_.erase(slot);
      return "pid " + std::to_string(id_.pid) + " does not serve this region (its slot " + std::to_string(slot) +
             (sl.key == 0 ? " is free)" : " lists another region)");
    }
    if (slots_.size() >= 4096) slots_.clear();  // bounded; slots are read again when needed
    it = slots_.insert_or_assign(slot, sl).first;
  }
  const Slot& sl = it->second;
  if (remote < sl.addr || len > sl.len || remote - sl.addr > sl.len - len)
    return "read outside the region pid " + std::to_string(id_.pid) + " serves";
  return std::string();
}

void ProcessReader::read(void* local, uint64_t len, uint64_t remote, uint32_t slot, uint64_t key, Done done) {
  ops_.push_back({static_cast<char*>(local), static_cast<char*>(local), remote, len, slot, key, false, false, std::move(done)});
}

uint64_t ProcessReader::progress(uint64_t budget, Completions* done) {
  uint64_t moved = 0;
  while (!ops_.empty() && !failed_ && (moved == 0 || moved < budget)) moved += step(done);
  return moved;
}

// One step: the next slices of the queued reads, in order (the front read's first), one per
// thread that is free to copy (this one and the helpers it could claim); then each read
// advances over its slices that were read whole and vouched for by their own key word, in
// order. A read's first slice of the step is judged as a lone slice always was (a failure of
// the call fails the reader, a withdrawn region fails the read, a partial read counts its
// bytes); a later slice that did not come back whole is wiped and read again next step, where
// it is first.
uint64_t ProcessReader::step(Completions* done) {
  SliceHelpers& helpers = SliceHelpers::instance();
  const size_t cap = 1 + helpers.size();
  std::vector<Slice>& plan = plan_;
  plan.clear();
  for (size_t i = 0; i < ops_.size() && plan.size() < cap; ++i) {
    Op& op = ops_[i];
    if (!op.served) {
      // What the source lists, checked before anything is copied.
      bool fatal = false;
      std::string why = check_slot(op.slot, op.key, op.remote, op.left, &fatal);
      if (fatal) {
        fail(why, done);  // the source cannot be read at all
        return 0;
      }
      if (!why.empty()) {
        done->emplace_back(std::move(op.done), why);
        op.finished = true;
        continue;
      }
      op.served = true;
    }
    for (uint64_t off = 0; (off == 0 || off < op.left) && plan.size() < cap; off += kSlice) {
      Slice sl;
      sl.op = i;
      sl.off = off;
      sl.len = std::min(op.left - off, kSlice);
      plan.push_back(std::move(sl));
    }
  }
  if (!plan.empty()) {
    const size_t n = plan.size() > 1 ? helpers.claim(plan.size() - 1, &claimed_) : 0;
    plan.resize(1 + n);
    for (size_t h = 0; h < n; ++h) SliceHelpers::start(claimed_[h], [this, &sl = plan[h + 1]] { read(sl); });
    read(plan[0]);
    for (size_t h = 0; h < n; ++h) helpers.finish(claimed_[h]);
  }
  uint64_t moved = 0;
  for (size_t k = 0; k < plan.size();) {
    Op& op = ops_[plan[k].op];
    size_t end = k;
    while (end < plan.size() && plan[end].op == plan[k].op) ++end;
    // The read's first slice of the step.
    const Slice& first = plan[k];
    if (first.got < 0) {
      fail(first.err, done);
      return moved;
    }
    const int64_t got = first.got;
    bool whole = first.complete && first.key_now == op.key && got == static_cast<int64_t>(first.len);
    if (first.complete && first.key_now != op.key) {
      // Withdrawn while we read: nothing read since the last check is kept, not even in our
      // buffers (what earlier steps read was vouched for by their own key word).
      std::memset(op.unchecked, 0, static_cast<size_t>(op.dst + got - op.unchecked));
      for (size_t j = k + 1; j < end; ++j)
        if (plan[j].got > 0) std::memset(op.dst + plan[j].off, 0, static_cast<size_t>(plan[j].got));
      slots_.erase(op.slot);
      done->emplace_back(std::move(op.done), "pid " + std::to_string(id_.pid) + " withdrew the region during the read");
      op.finished = true;
    } else {
      uint64_t adv = static_cast<uint64_t>(got);
      for (size_t j = k + 1; j < end; ++j) {  // the later slices: counted while whole, in order
        const Slice& sl = plan[j];
        whole = whole && sl.complete && sl.key_now == op.key && sl.got == static_cast<int64_t>(sl.len);
        if (whole) {
          adv += sl.len;
          bytes_beside_ += sl.len;
        } else if (sl.got > 0) {
          std::memset(op.dst + sl.off, 0, static_cast<size_t>(sl.got));  // not vouched for
        }
      }
      op.dst += adv;
      if (first.complete) op.unchecked = op.dst;
      op.remote += adv;
      op.left -= adv;
      moved += adv;
      if (op.left == 0 && first.complete) {
        done->emplace_back(std::move(op.done), std::string());
        op.finished = true;
      }  // else partial: the next step reads the rest (or, all data in, the key word and nonce)
    }
    k = end;
  }
  ops_.erase(std::remove_if(ops_.begin(), ops_.end(), [](const Op& o) { return o.finished; }), ops_.end());
  return moved;
}

size_t ProcessReader::helper_threads() { return SliceHelpers::instance().size(); }

void ProcessReader::read(Slice& sl) const {
  const Op& op = ops_[sl.op];
  sl.got = read_slice(op.dst + sl.off, op.remote + sl.off, sl.len, &sl.key_now, slot_address(op.slot), sizeof sl.key_now,
                      &sl.complete, &sl.err);
}

void ProcessReader::fail(const std::string& why, Completions* done) {
  failed_ = true;
  error_ = why;
  for (auto& op : ops_)
    if (!op.finished) done->emplace_back(std::move(op.done), why);  // a finished one's is in *done already
  ops_.clear();
}

void ProcessReader::close(const std::string& why, Completions* done) {
  if (!failed_) error_ = why;
  failed_ = true;
  for (auto& op : ops_)
    if (!op.finished) done->emplace_back(std::move(op.done), why);  // a finished one's is in *done already
  ops_.clear();
}

}  // namespace thub::transport
