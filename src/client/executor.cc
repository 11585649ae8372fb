#include "src/client/executor.h"

#include <cstdio>
#include <exception>
#include <future>

namespace thub::client {

Executor::Executor(std::string name) : name_(std::move(name)) { thread_ = std::thread([this] { run(); }); }

Executor::~Executor() { shutdown(); }

void Executor::shutdown() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && !on_thread()) thread_.join();
}

void Executor::post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_ && !thread_.joinable()) return;  // stopped: dropped
    queue_.push_back(std::move(fn));
  }
  cv_.notify_one();
}

void Executor::call(const std::function<void()>& fn) {
  if (on_thread()) return fn();
  std::promise<void> done;
  auto f = done.get_future();
  // The exception travels as an exception_ptr the caller owns, set before the signal: this
  // thread drops its last reference to it before the caller can run, and the caller frees
  // it. (Passed with set_exception, which copies it, this thread dropped a reference after
  // the caller was woken, and the free could come from here after the caller had read it:
  // correct through the C++ runtime's atomic reference count, which ThreadSanitizer does
  // not see, so it reported a race.)
  std::exception_ptr failed;
  post([&] {
    try {
      fn();
    } catch (...) {
      failed = std::current_exception();
    }
    done.set_value();
  });
  f.get();
  if (failed) std::rethrow_exception(failed);
}

void Executor::run() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      fn();
    } catch (const std::exception& e) {
      // Work items report their own errors; one that throws is a bug, not a reason to stop.
      std::fprintf(stderr, "tensorhub: %s: unexpected exception: %s\n", name_.c_str(), e.what());
    }
  }
}

}  // namespace thub::client
