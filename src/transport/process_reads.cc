#include "src/transport/process_reads.h"

#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

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

int64_t ProcessReader::read_slice(char* dst, uint64_t remote, uint64_t len, bool* nonce_checked) {
  *nonce_checked = false;
  uint64_t seen = 0;
  iovec local[2], far[2];
  int n = 0;
  if (len > 0) {
    local[n] = {dst, len};
    far[n] = {reinterpret_cast<void*>(remote), len};
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
  if (all == len + sizeof seen) {
    if (seen != id_.nonce) {
      error_ = "pid " + pid + " is no longer the source process (its identity word differs)";
      return -1;
    }
    *nonce_checked = true;
    return static_cast<int64_t>(len);
  }
  if (all == 0) {  // not expected (a failure is -1), but it would loop for ever
    error_ = "process_vm_readv from pid " + pid + " read nothing";
    return -1;
  }
  // A partial read (the kernel stops at the first page it cannot read): the data read counts
  // once a later call, which reads the nonce again, completes the read.
  return static_cast<int64_t>(std::min<uint64_t>(all, len));
}

std::string ProcessReader::probe() {
  bool checked = false;
  if (read_slice(nullptr, 0, 0, &checked) < 0) return error_;
  return checked ? std::string() : "the source's identity word could not be read";
}

void ProcessReader::read(void* local, uint64_t len, uint64_t remote, Done done) {
  ops_.push_back({static_cast<char*>(local), remote, len, std::move(done)});
}

uint64_t ProcessReader::progress(uint64_t budget, Completions* done) {
  uint64_t moved = 0;
  while (!ops_.empty() && !failed_ && (moved == 0 || moved < budget)) {
    Op& op = ops_.front();
    bool checked = false;
    const int64_t got = read_slice(op.dst, op.remote, std::min(op.left, kSlice), &checked);
    if (got < 0) {
      fail(error_, done);
      break;
    }
    op.dst += got;
    op.remote += static_cast<uint64_t>(got);
    op.left -= static_cast<uint64_t>(got);
    moved += static_cast<uint64_t>(got);
    if (op.left == 0 && checked) {
      done->emplace_back(std::move(op.done), std::string());
      ops_.pop_front();
    }  // else partial: the next call reads the rest (or, all data in, the nonce alone)
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
