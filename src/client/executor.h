// One thread and a queue of work: the context's engine (every decision of every model of the
// context, registry messages and orders, request completions: the client's progress engine)
// and its copy engine (packing, checksums, copy-out to the tensors, retention copies). A
// context has one of each, whatever the number of models and requests: no thread per request.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace thub::client {

class Executor {
 public:
  explicit Executor(std::string name);
  ~Executor();  // shutdown()
  // Runs what is queued, then stops the thread; later posts are dropped.
  void shutdown();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs `fn` on the executor's thread, after what was posted before it (any thread).
  void post(std::function<void()> fn);
  // Runs `fn` there and waits for it (not from the executor's own thread).
  void call(const std::function<void()>& fn);
  [[nodiscard]] bool on_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void run();
  std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace thub::client
