#include "src/transport/process_reads.h"

#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "src/transport/served_regions.h"

namespace thub::transport {

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
                                  uint64_t extra_bytes, bool* complete) {
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
      case ESRCH: error_ = "the source process (pid " + pid + ") is gone"; break;
      case EPERM: error_ = "not permitted to read pid " + pid + " (ptrace access: Yama ptrace_scope, seccomp or another user)"; break;
      case EFAULT: error_ = "address outside pid " + pid + "'s mapped memory"; break;
      case ENOSYS: error_ = "process_vm_readv is not available"; break;
      default: error_ = "process_vm_readv from pid " + pid + ": " + std::strerror(e);
    }
    return -1;
  }
  const auto all = static_cast<size_t>(got);
  if (all == len + extra_bytes + sizeof seen) {
    if (seen != id_.nonce) {
      error_ = "pid " + pid + " is no longer the source process (its identity word differs)";
      return -1;
    }
    *complete = true;
    return static_cast<int64_t>(len);
  }
  if (all == 0) {  // not expected (a failure is -1), but it would loop for ever
    error_ = "process_vm_readv from pid " + pid + " read nothing";
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
  ops_.push_back({static_cast<char*>(local), static_cast<char*>(local), remote, len, slot, key, false, std::move(done)});
}

uint64_t ProcessReader::progress(uint64_t budget, Completions* done) {
  uint64_t moved = 0;
  while (!ops_.empty() && !failed_ && (moved == 0 || moved < budget)) {
    Op& op = ops_.front();
    if (!op.served) {
      // What the source lists, checked before anything is copied.
      bool fatal = false;
      std::string why = check_slot(op.slot, op.key, op.remote, op.left, &fatal);
      if (fatal) {
        fail(why, done);  // the source cannot be read at all
        break;
      }
      if (!why.empty()) {
        done->emplace_back(std::move(op.done), why);
        ops_.pop_front();
        continue;
      }
      op.served = true;
    }
    bool complete = false;
    uint64_t key_now = 0;
    const uint64_t want = std::min(op.left, kSlice);
    const int64_t got = read_slice(op.dst, op.remote, want, &key_now, slot_address(op.slot), sizeof key_now, &complete);
    if (got < 0) {
      fail(error_, done);
      break;
    }
    if (complete && key_now != op.key) {
      // Withdrawn while we read: nothing read since the last check is kept, not even in our
      // buffers (what earlier calls read was vouched for by their own key word).
      std::memset(op.unchecked, 0, static_cast<size_t>(op.dst + got - op.unchecked));
      slots_.erase(op.slot);
      done->emplace_back(std::move(op.done), "pid " + std::to_string(id_.pid) + " withdrew the region during the read");
      ops_.pop_front();
      continue;
    }
    op.dst += got;
    if (complete) op.unchecked = op.dst;
    op.remote += static_cast<uint64_t>(got);
    op.left -= static_cast<uint64_t>(got);
    moved += static_cast<uint64_t>(got);
    if (op.left == 0 && complete) {
      done->emplace_back(std::move(op.done), std::string());
      ops_.pop_front();
    }  // else partial: the next call reads the rest (or, all data in, the key word and nonce)
  }
  return moved;
}

void ProcessReader::fail(const std::string& why, Completions* done) {
  failed_ = true;
  error_ = why;
  for (auto& op : ops_) done->emplace_back(std::move(op.done), why);
  ops_.clear();
}

void ProcessReader::close(const std::string& why, Completions* done) {
  if (!failed_) error_ = why;
  failed_ = true;
  for (auto& op : ops_) done->emplace_back(std::move(op.done), why);
  ops_.clear();
}

}  // namespace thub::transport
