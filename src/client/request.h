// One operation of a model, like an MPI request: started by a THUB_ call, carried out by the
// context's engine (src/client/executor.h), completed exactly once. Blocking calls start
// one and wait for it; THUB_Test/THUB_Wait/THUB_Waitall/THUB_Testany look at it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "src/common/status.h"

namespace thub::client {

class Request {
 public:
  enum class Kind { kOpen, kPublish, kReplicate, kUpdate, kUnpublish, kClose };
  Request(Kind kind, uint64_t id) : kind_(kind), id_(id) {}
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  [[nodiscard]] Kind kind() const { return kind_; }
  [[nodiscard]] uint64_t id() const { return id_; }  // the operation's id in the model's machine
  [[nodiscard]] bool done() const {
    std::lock_guard<std::mutex> lk(mu_);
    return done_;
  }
  void wait() const {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return done_; });
  }
  // After done(): the outcome.
  [[nodiscard]] Code code() const {
    std::lock_guard<std::mutex> lk(mu_);
    return code_;
  }
  [[nodiscard]] int64_t version() const {
    std::lock_guard<std::mutex> lk(mu_);
    return version_;
  }
  [[nodiscard]] std::string detail() const {
    std::lock_guard<std::mutex> lk(mu_);
    return detail_;
  }
  // The engine: the operation ended (the first call wins).
  void complete(Code code, int64_t version, std::string detail) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (done_) return;
      done_ = true;
      code_ = code;
      version_ = version;
      detail_ = std::move(detail);
    }
    cv_.notify_all();
  }

 private:
  const Kind kind_;
  const uint64_t id_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  Code code_ = Code::kSuccess;
  int64_t version_ = -1;
  std::string detail_;
};

}  // namespace thub::client
