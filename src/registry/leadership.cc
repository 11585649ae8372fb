#include "src/registry/leadership.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "src/common/status.h"
#include "src/registry/connection.h"
#include "src/registry/etcd.h"
#include "src/registry/server.h"
#include "src/registry/socket.h"

namespace thub::registry {

namespace {

// A thread that runs `step` every period until destroyed; `step` returns the next period.
class Ticker {
 public:
  template <class Step>
  explicit Ticker(Step step) : thread_([this, step]() mutable {
      std::unique_lock<std::mutex> lk(mu_);
      while (!stop_) {
        lk.unlock();
        int64_t wait = step();
        lk.lock();
        cv_.wait_for(lk, std::chrono::milliseconds(wait), [&] { return stop_; });
      }
    }) {}
  ~Ticker() { halt(); }
  void halt() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest is constructed
};

// A backup: leads while its primary does not answer.
class PrimaryWatch final : public Leadership {
 public:
  PrimaryWatch(const ServerOptions& o) : primary_(o.primary) {
    (void)parse_host_port(primary_);  // kArg for a malformed address
    co_.addresses = {primary_};
    co_.auth_token = o.auth_token;
    co_.auth_mutual = !o.auth_token.empty();
    co_.datacenter = "tensorhub-backup";
    budget_ms_ = std::clamp(o.primary_probe_ms, 50, 2000);
    period_ms_ = o.primary_probe_ms;
    probe();
    ticker_ = std::make_unique<Ticker>([this] {
      probe();
      return period_ms_;
    });
  }
  ~PrimaryWatch() override { ticker_.reset(); }
  bool leading(int64_t) const override { return !primary_answers_; }
  NotLeader elsewhere() const override {
    return {primary_, "this registry is a backup of " + primary_ + ", which answers"};
  }
  std::string describe() const override {
    return "backup of " + primary_ + (primary_answers_ ? " (which answers: not serving)" : " (which does not answer: serving)");
  }

 private:
  void probe() {
    std::string why;
    primary_answers_ = registry_answers(co_, primary_, budget_ms_, &why);
  }
  std::string primary_;
  ConnectionOptions co_;
  int budget_ms_ = 500;
  int64_t period_ms_ = 500;
  std::atomic<bool> primary_answers_{true};
  std::unique_ptr<Ticker> ticker_;
};

// A candidate in an etcd election.
class EtcdElection final : public Leadership {
 public:
  EtcdElection(const ServerOptions& o, std::string own)
      : own_(std::move(own)), etcd_(parse_etcd_target(o.election), std::max(500, o.election_ttl_s * 1000 / 3)),
        ttl_s_(o.election_ttl_s) {
    round();
    ticker_ = std::make_unique<Ticker>([this] { return round(); });
  }
  ~EtcdElection() override {
    ticker_.reset();
    // Resign: a standby need not wait for the lease to run out.
    if (lease_ != 0) etcd_.revoke(lease_);
  }
  bool leading(int64_t now_ms) const override { return now_ms < valid_until_ms_.load(); }
  NotLeader elsewhere() const override {
    std::lock_guard<std::mutex> lk(mu_);
    std::string why = "this registry does not hold the leader's lease in " + etcd_.target().text();
    if (!error_.empty()) why += " (" + error_ + ")";
    return {leader_ == own_ ? std::string() : leader_, why};
  }
  std::string describe() const override {
    std::lock_guard<std::mutex> lk(mu_);
    return std::string(leading(steady_ms()) ? "leader" : "standby") + " in " + etcd_.target().text() +
           (leader_.empty() || leader_ == own_ ? "" : " (the leader is " + leader_ + ")") +
           (error_.empty() ? "" : "; last etcd error: " + error_);
  }

 private:
  // Renews (or takes) a lease, then campaigns if not leading; the next round's delay.
  int64_t round() {
    const int64_t period = std::max<int64_t>(200, ttl_s_ * 1000 / 3);
    try {
      const int64_t sent = steady_ms();
      int64_t ttl = 0;
      if (lease_ != 0) ttl = etcd_.keepalive(lease_);
      if (ttl <= 0) {  // none yet, or etcd forgot it (expired while we were stopped, revoked)
        won_ = false;
        valid_until_ms_ = 0;
        auto l = etcd_.grant(ttl_s_);
        lease_ = l.id;
        ttl = l.ttl_s;
      }
      const int64_t until = sent + ttl * 1000 - ttl * 100;  // a tenth of margin for clock rates
      std::string leader;
      if (won_) {  // still ours? (the key goes with the lease, or by hand)
        auto v = etcd_.leader();
        won_ = v && *v == own_;
        leader = v.value_or("");
      }
      if (!won_) {
        auto c = etcd_.campaign(own_, lease_);
        won_ = c.won;
        leader = c.leader;
      }
      valid_until_ms_ = won_ ? until : 0;
      std::lock_guard<std::mutex> lk(mu_);
      leader_ = leader;
      error_.clear();
    } catch (const std::exception& e) {
      // The deadline stands: leadership lapses by itself if etcd stays away (or answers
      // something this does not read: nothing etcd sends may end the registry).
      std::lock_guard<std::mutex> lk(mu_);
      error_ = e.what();
    }
    return period;
  }
  const std::string own_;
  EtcdClient etcd_;
  const int64_t ttl_s_;
  int64_t lease_ = 0;  // the ticker's thread only (and the destructor, after it)
  bool won_ = false;
  std::atomic<int64_t> valid_until_ms_{0};
  mutable std::mutex mu_;
  std::string leader_;  // under mu_
  std::string error_;
  std::unique_ptr<Ticker> ticker_;
};

}  // namespace

std::unique_ptr<Leadership> start_leadership(const ServerOptions& opts, const std::string& own_address) {
  if (!opts.primary.empty() && !opts.election.empty()) {
    throw Error(Code::kArg, "a registry is either a backup (primary) or a candidate (election), not both");
  }
  if (!opts.primary.empty()) return std::make_unique<PrimaryWatch>(opts);
  if (!opts.election.empty()) return std::make_unique<EtcdElection>(opts, own_address);
  return nullptr;
}

}  // namespace thub::registry
