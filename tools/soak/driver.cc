// run_soak: the event loop of the fault soak (see soak.h). One thread; every child's stdout is
// polled; faults, SIGCONTs and restarts are timers. Steps are ordered by replies, never by
// sleeps; the only clocks are the fault schedule and the hang bound.
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>

#include "tools/soak/child.h"
#include "tools/soak/soak.h"

namespace thub::soak {

using Clock = std::chrono::steady_clock;

const char* fault_kind_name(FaultKind k) {
  switch (k) {
    case FaultKind::kReader: return "reader";
    case FaultKind::kSource: return "source";
    case FaultKind::kTrainer: return "trainer";
    case FaultKind::kRegistry: return "registry";
  }
  return "?";
}

namespace {

enum class Role { kTrainer, kRollout, kRegistry };

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct Proc {
  Role role;
  int slot = 0;
  int gen = 0;
  std::string name;
  std::unique_ptr<Child> child;
  bool ready = false;
  Clock::time_point spawned;
  bool stopped = false;
  Clock::time_point stopped_at;
  Clock::duration stopped_total{};  // during the current operation (or start-up)
  bool busy = false;
  std::string op;
  int op_step = 0;
  Clock::time_point op_start;
  bool after_kill = false;   // restarted after a SIGKILL: its first success is a recovery
  bool after_error = false;  // its last operation failed
  int64_t held = -1;
  std::string address;  // registry: host:port once listening
  int port = 0;         // registry: kept across restarts
  bool retiring = false;  // registry: asked to exit after a long stop (a replaced registry)
};

struct Timer {
  Clock::time_point at;
  std::function<void()> fn;
};

class Driver {
 public:
  explicit Driver(const Options& o) : o_(o), rng_(o.seed) {}
  Report run();

 private:
  // processes
  void spawn(Proc& p);
  void spawn_registry(Proc& p);
  std::map<std::string, std::string> worker_env() const;
  void on_line(Proc& p, const std::string& line);
  void on_done(Proc& p, const std::string& line);
  void on_death(Proc& p, int status);
  void kill_and_restart(Proc& p);
  void stop_for(Proc& p, Clock::duration d);
  void registry_fault(Proc& p, bool stop, Clock::duration d);
  void complete_registry_fault();
  void begin_op(Proc& p, const std::string& cmd, const std::string& op);
  // the loop
  void pump(Clock::duration max_wait);
  void check_hangs();
  bool wait_until(const std::function<bool()>& cond, Clock::duration limit);
  // faults
  void schedule_fault();
  void fire_fault(FaultKind kind, bool stop, Clock::time_point give_up);
  Clock::duration stop_duration(FaultKind kind);
  std::vector<Proc*> workers();
  int active_registry() const { return active_; }
  void log(const std::string& s) {
    if (o_.verbose) std::printf("[%8.3f] %s\n", ms_between(t0_, Clock::now()) / 1e3, s.c_str());
  }
  void incident(const std::string& what, Proc& p, const std::string& detail) {
    Incident i{what, p.name, detail, p.child ? file_tail(p.child->log_path(), 4000) : ""};
    r_.incidents.push_back(std::move(i));
    std::printf("soak: %s: %s: %s\n", what.c_str(), p.name.c_str(), detail.c_str());
    std::fflush(stdout);
  }

  Options o_;
  std::mt19937_64 rng_;
  Report r_;
  Clock::time_point t0_;
  std::vector<std::unique_ptr<Proc>> procs_;
  Proc* trainer_ = nullptr;
  std::vector<Proc*> rollouts_;
  Proc* registries_[2] = {nullptr, nullptr};
  int active_ = 0;  // the registry the clients are on (new workers list it first)
  Clock::time_point last_registry_fault_{};
  // Cold standby: a registry fault that waits for the standby to listen before it strikes.
  struct {
    bool on = false;
    bool stop = false;
    Clock::duration d{};
    Proc* victim = nullptr;
  } pending_registry_;
  bool fault_pending_ = false;  // one fault at a time
  std::vector<Timer> timers_;
  int step_ = 0;
  int64_t published_ = -1;  // the newest version the trainer said it published
  // The newest version the trainer was asked to publish: a rollout may hold it before the
  // trainer's answer is read (the step waits for that answer only so long), never a newer one.
  int64_t asked_ = -1;
  std::vector<double> update_ms_;  // of successful updates, for the fault window
  bool faults_on_ = true;
  bool finishing_ = false;  // quitting: exits are expected, nothing restarts
};

std::vector<Proc*> Driver::workers() {
  std::vector<Proc*> w{trainer_};
  w.insert(w.end(), rollouts_.begin(), rollouts_.end());
  return w;
}

std::map<std::string, std::string> Driver::worker_env() const {
  // The live registry first, the other as the backup (a new client starts at the first).
  std::string list = registries_[active_]->address + "," + registries_[1 - active_]->address;
  return {
      {"TENSORHUB_REGISTRY", list},
      {"TENSORHUB_VERIFY", "1"},
      {"TENSORHUB_TRANSFER_MODE", o_.transfer_mode},
      {"TENSORHUB_HEARTBEAT_MS", "200"},
      {"TENSORHUB_STALL_TIMEOUT_MS", "1000"},
      {"TENSORHUB_REGISTRY_TIMEOUT_MS", "1500"},
      {"TENSORHUB_REGISTRY_CONNECT_TIMEOUT_MS", "1000"},
      {"TENSORHUB_RECONNECT_MS", "30000"},
  };
}

void Driver::spawn(Proc& p) {
  if (p.role == Role::kRegistry) return spawn_registry(p);
  p.gen++;
  p.name = (p.role == Role::kTrainer ? std::string("trainer") : "r" + std::to_string(p.slot)) + "g" +
           std::to_string(p.gen);
  p.ready = p.busy = p.stopped = false;
  p.held = -1;
  p.stopped_total = {};
  p.spawned = Clock::now();
  std::string role = p.role == Role::kTrainer ? "trainer" : "rollout";
  p.child = std::make_unique<Child>(o_.worker,
                                    std::vector<std::string>{role, p.name, std::to_string(o_.bytes),
                                                             std::to_string(o_.tensors)},
                                    worker_env(), o_.log_dir + "/" + p.name + ".log");
}

void Driver::spawn_registry(Proc& p) {
  p.gen++;
  p.name = "registry" + std::to_string(p.slot) + "g" + std::to_string(p.gen);
  p.ready = p.busy = p.stopped = false;
  p.stopped_total = {};
  p.spawned = Clock::now();
  p.child = std::make_unique<Child>(
      o_.registry,
      std::vector<std::string>{"--listen", "127.0.0.1:" + std::to_string(p.port), "--heartbeat-timeout-ms",
                               std::to_string(o_.heartbeat_timeout_ms)},
      std::map<std::string, std::string>{}, o_.log_dir + "/" + p.name + ".log");
}

void Driver::begin_op(Proc& p, const std::string& cmd, const std::string& op) {
  p.busy = true;
  p.op = op;
  p.op_step = step_;
  if (p.role == Role::kTrainer && op == "step") asked_ = std::max<int64_t>(asked_, step_);
  p.op_start = Clock::now();
  p.stopped_total = {};
  if (p.stopped) p.stopped_at = p.op_start;
  p.child->send(cmd);
}

void Driver::on_line(Proc& p, const std::string& line) {
  std::istringstream in(line);
  std::string w;
  in >> w;
  if (p.role == Role::kRegistry) {
    if (w == "listening") {
      in >> p.address;
      p.port = std::stoi(p.address.substr(p.address.rfind(':') + 1));
      p.ready = true;
      log(p.name + " listening on " + p.address);
      if (pending_registry_.on && registries_[1 - active_] == &p) complete_registry_fault();
    }
    return;
  }
  if (w == "ready") {
    p.ready = true;
    log(p.name + " ready");
  } else if (w == "failed") {
    // Could not start (e.g. no registry answered): it exits; on_death restarts it.
    r_.startup_failures++;
    r_.errors[std::atoi(line.c_str() + 7)]++;
    log(p.name + " " + line);
  } else if (w == "done") {
    on_done(p, line);
  }
}

void Driver::on_done(Proc& p, const std::string& line) {
  std::istringstream in(line);
  std::string w, detail;
  int st = 0;
  int64_t held = -1;
  uint64_t bad = 0;
  double ms = 0;
  in >> w >> st >> held >> bad >> ms;
  std::getline(in, detail);
  auto now = Clock::now();
  double stall = ms_between(p.op_start, now) - std::chrono::duration<double, std::milli>(p.stopped_total).count();
  if (stall > r_.longest_stall_ms) {
    r_.longest_stall_ms = stall;
    r_.longest_stall_what = p.name + " " + p.op + " (step " + std::to_string(p.op_step) + ", status " +
                            std::to_string(st) + ")";
  }
  p.busy = false;
  p.held = held;
  if (st < 0) {
    r_.errors[st]++;
    if (detail.find("checksum") != std::string::npos) r_.checksum_errors++;
  }
  if (held >= 0) {
    r_.checks++;
    r_.bytes_checked += o_.bytes;
    r_.corrupted_bytes += bad;
    if (bad > 0) incident("corrupt", p, std::to_string(bad) + " bytes differ from version " + std::to_string(held));
    if (held > std::max(published_, asked_) && p.role == Role::kRollout) {
      r_.impossible_versions++;
      incident("corrupt", p, "holds version " + std::to_string(held) + ", newer than any the trainer was asked to publish");
    }
  }
  bool success = st >= 0 && held >= 0;
  if (p.role == Role::kTrainer) {
    if (st == 0) published_ = std::max<int64_t>(published_, held), r_.published++;
  } else if (p.op == "update") {
    r_.updates++;
    if (st == 0) {
      r_.moved++;
      update_ms_.push_back(stall);
    } else if (st == 2) {
      r_.not_updated++;
    } else if (st < 0) {
      r_.update_errors++;
    }
  }
  if (success && p.after_kill) r_.recoveries++;
  if (success && p.after_error) r_.error_recoveries++;
  if (success) p.after_kill = false;
  p.after_error = st < 0;
  log(p.name + " " + p.op + ": " + line.substr(5));
}

void Driver::on_death(Proc& p, int status) {
  // Not caused by the driver (it reaps what it kills itself), or a registry told to go.
  if (p.retiring) {
    bool clean = WIFEXITED(status) ? WEXITSTATUS(status) == 0 : WTERMSIG(status) == SIGTERM;
    if (!clean) {
      r_.aborts++;
      incident("abort", p, describe_wait_status(status) + " while exiting after a stop");
    }
    p.retiring = false;
    p.ready = false;
    p.child.reset();  // the cold standby now
    return;
  }
  if (finishing_) {
    bool clean = WIFEXITED(status) ? WEXITSTATUS(status) == 0 : WTERMSIG(status) == SIGTERM;
    if (!clean) {
      r_.aborts++;
      incident("abort", p, describe_wait_status(status) + " while quitting");
    }
    return;
  }
  bool startup_failure = p.role != Role::kRegistry && !p.ready && WIFEXITED(status) && WEXITSTATUS(status) == 3;
  if (!startup_failure) {
    r_.aborts++;
    incident("abort", p, describe_wait_status(status) + (p.busy ? " during " + p.op : ""));
  }
  p.after_kill = true;
  if (p.role == Role::kRegistry && registries_[active_] == &p) active_ = 1 - active_;
  // Restart it, a little later when it could not start (no registry yet).
  Proc* pp = &p;
  p.ready = p.busy = false;
  p.child.reset();
  timers_.push_back({Clock::now() + std::chrono::milliseconds(startup_failure ? 300 : 0), [this, pp] { spawn(*pp); }});
}

void Driver::kill_and_restart(Proc& p) {
  p.child->signal(SIGKILL);
  p.child->reap();
  p.child.reset();
  p.after_kill = true;
  p.after_error = false;
  if (p.role == Role::kRegistry && registries_[active_] == &p) active_ = 1 - active_;
  spawn(p);
}

void Driver::stop_for(Proc& p, Clock::duration d) {
  p.child->signal(SIGSTOP);
  p.stopped = true;
  p.stopped_at = Clock::now();
  Proc* pp = &p;
  Child* c = p.child.get();
  timers_.push_back({p.stopped_at + d, [this, pp, c] {
                       if (pp->child.get() != c || !pp->stopped) return;  // killed meanwhile
                       c->signal(SIGCONT);
                       pp->stopped = false;
                       pp->stopped_total += Clock::now() - pp->stopped_at;
                       log(pp->name + " continued");
                       if (pp->retiring) {
                         // A registry the clients left: it runs on for a second with what it
                         // knew, then goes (one registry serves the job; see registry_fault).
                         timers_.push_back({Clock::now() + std::chrono::seconds(1), [pp, c] {
                                              if (pp->child.get() == c) c->signal(SIGTERM);
                                            }});
                       }
                     }});
}

Clock::duration Driver::stop_duration(FaultKind kind) {
  std::uniform_int_distribution<int> coin(0, 1);
  bool long_stop = coin(rng_);
  if (kind == FaultKind::kRegistry) {
    // Short: no client notices (registry_timeout_ms 1500). Long: every client has moved to the
    // backup before it resumes, so that no two registries serve halves of the job.
    std::uniform_int_distribution<int> s(100, 500), l(4000, 5000);
    return std::chrono::milliseconds(long_stop ? l(rng_) : s(rng_));
  }
  // Short: within stall_timeout_ms (1000). Long: past the registry's heartbeat timeout.
  std::uniform_int_distribution<int> s(100, 900), l(o_.heartbeat_timeout_ms + 500, o_.heartbeat_timeout_ms * 3);
  return std::chrono::milliseconds(long_stop ? l(rng_) : s(rng_));
}

// A registry fault. Short stops: no client notices. A kill or a long stop moves every client
// to the other address. With a cold standby (the default) the other registry is started
// first and the old one does not come back (a stopped one resumes, then exits), so that one
// registry serves the job at a time; with --hot-standby both always run and a killed one is
// restarted at once, which lets a client that was itself paused move to a registry the
// others are not on (docs/integrity.md, "Fault soak").
void Driver::registry_fault(Proc& p, bool stop, Clock::duration d) {
  bool moves = !stop || d > std::chrono::milliseconds(1500);
  if (stop && !moves) return stop_for(p, d);
  if (o_.hot_standby) {
    active_ = 1 - active_;
    if (stop) return stop_for(p, d);
    return kill_and_restart(p);
  }
  pending_registry_ = {true, stop, d, &p};
  Proc& standby = *registries_[1 - active_];
  if (standby.ready && standby.child) return complete_registry_fault();
  if (!standby.child) spawn(standby);
}

void Driver::complete_registry_fault() {
  Proc& p = *pending_registry_.victim;
  pending_registry_.on = false;
  active_ = 1 - active_;
  if (!p.child) return;
  if (pending_registry_.stop) {
    p.retiring = true;
    stop_for(p, pending_registry_.d);
    return;
  }
  p.child->signal(SIGKILL);
  p.child->reap();
  p.child.reset();
  p.ready = false;
}

void Driver::schedule_fault() {
  std::uniform_real_distribution<double> u(0, 1);
  if (!faults_on_ || fault_pending_ || u(rng_) >= o_.fault_rate) return;
  fault_pending_ = true;
  std::discrete_distribution<int> pick(o_.weights.begin(), o_.weights.end());
  auto kind = static_cast<FaultKind>(pick(rng_));
  bool stop = u(rng_) < o_.stop_share;
  // Somewhere in a step's usual duration (publish + updates), so that readers die mid-transfer.
  double window = 100;
  if (!update_ms_.empty()) {
    std::vector<double> recent(update_ms_.end() - std::min<size_t>(update_ms_.size(), 20), update_ms_.end());
    std::nth_element(recent.begin(), recent.begin() + recent.size() / 2, recent.end());
    window = std::max(20.0, recent[recent.size() / 2]);
  }
  auto at = Clock::now() + std::chrono::microseconds(static_cast<int64_t>(u(rng_) * window * 1e3));
  auto give_up = at + std::chrono::milliseconds(static_cast<int64_t>(window * 2) + 200);
  timers_.push_back({at, [this, kind, stop, give_up] { fire_fault(kind, stop, give_up); }});
}

void Driver::fire_fault(FaultKind kind, bool stop, Clock::time_point give_up) {
  auto now = Clock::now();
  std::vector<Proc*> cands;
  switch (kind) {
    case FaultKind::kReader:  // a rollout in the middle of an update
      for (Proc* p : rollouts_) {
        if (p->ready && !p->stopped && p->busy) cands.push_back(p);
      }
      break;
    case FaultKind::kSource:  // a rollout that holds a version and may be serving it
      for (Proc* p : rollouts_) {
        if (p->ready && !p->stopped && !p->busy && p->held >= 0) cands.push_back(p);
      }
      break;
    case FaultKind::kTrainer:
      if (trainer_->ready && !trainer_->stopped) cands.push_back(trainer_);
      break;
    case FaultKind::kRegistry: {
      Proc* r = registries_[active_];
      Proc* other = registries_[1 - active_];
      bool quiet = now - last_registry_fault_ > std::chrono::seconds(8) && !pending_registry_.on;
      bool standby_ok = o_.hot_standby ? other->ready && !other->stopped : !other->child;
      if (quiet && r->ready && r->child && !r->stopped && standby_ok) cands.push_back(r);
      break;
    }
  }
  if (cands.empty()) {
    if (now < give_up && faults_on_) {
      timers_.push_back({now + std::chrono::milliseconds(10), [this, kind, stop, give_up] { fire_fault(kind, stop, give_up); }});
    } else {
      r_.faults_skipped++;
      fault_pending_ = false;
    }
    return;
  }
  fault_pending_ = false;
  Proc& p = *cands[std::uniform_int_distribution<size_t>(0, cands.size() - 1)(rng_)];
  r_.faults++;
  r_.kills[static_cast<int>(kind)][stop ? 1 : 0]++;
  if (kind == FaultKind::kRegistry) last_registry_fault_ = now;
  std::string what = std::string(fault_kind_name(kind)) + " " + (stop ? "STOP " : "KILL ") + p.name;
  if (kind == FaultKind::kReader && !stop && !update_ms_.empty()) {
    std::vector<double> v = update_ms_;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    if (ms_between(p.op_start, now) >= v[v.size() / 2] / 4) r_.reader_kills_in_transfer++;
  }
  if (kind == FaultKind::kRegistry) {
    auto d = stop ? stop_duration(kind) : Clock::duration{};
    log(what + (stop ? " for " + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms" : ""));
    registry_fault(p, stop, d);
  } else if (stop) {
    auto d = stop_duration(kind);
    log(what + " for " + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms");
    stop_for(p, d);
  } else {
    log(what + (p.busy ? " during " + p.op : ""));
    kill_and_restart(p);
  }
}

void Driver::pump(Clock::duration max_wait) {
  auto now = Clock::now();
  // Timers due.
  std::vector<Timer> due;
  for (size_t i = 0; i < timers_.size();) {
    if (timers_[i].at <= now) {
      due.push_back(std::move(timers_[i]));
      timers_[i] = std::move(timers_.back());
      timers_.pop_back();
    } else {
      ++i;
    }
  }
  for (auto& t : due) t.fn();
  // Wait for output (or the next timer).
  auto until = now + max_wait;
  for (const auto& t : timers_) until = std::min(until, t.at);
  std::vector<pollfd> fds;
  std::vector<Proc*> who;
  for (auto& p : procs_) {
    if (p->child && !p->child->eof()) {
      fds.push_back({p->child->out_fd(), POLLIN, 0});
      who.push_back(p.get());
    }
  }
  int wait_ms = static_cast<int>(std::max<int64_t>(
      0, std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count()));
  ::poll(fds.data(), fds.size(), std::min(wait_ms, 50));
  for (size_t i = 0; i < fds.size(); ++i) {
    Proc& p = *who[i];
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)) || !p.child) continue;
    Child* c = p.child.get();
    for (const auto& line : c->read_lines()) {
      if (p.child.get() != c) break;
      on_line(p, line);
    }
  }
  // Deaths the driver did not cause.
  for (auto& p : procs_) {
    if (!p->child) continue;
    if (auto st = p->child->try_reap()) on_death(*p, *st);
  }
  check_hangs();
}

void Driver::check_hangs() {
  auto now = Clock::now();
  auto bound = std::chrono::seconds(o_.hang_bound_s);
  for (auto& pp : procs_) {
    Proc& p = *pp;
    if (!p.child || p.stopped) continue;
    Clock::time_point since = p.busy ? p.op_start : p.spawned;
    if ((p.busy || !p.ready) && now - since - p.stopped_total > bound) {
      r_.hangs++;
      incident("hang", p, (p.busy ? p.op : std::string("start-up")) + " has run for " +
                              std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - since).count()) +
                              " s");
      kill_and_restart(p);
    }
  }
}

bool Driver::wait_until(const std::function<bool()>& cond, Clock::duration limit) {
  auto deadline = Clock::now() + limit;
  while (!cond()) {
    if (Clock::now() > deadline) return false;
    pump(std::chrono::milliseconds(50));
  }
  return true;
}

Report Driver::run() {
  t0_ = Clock::now();
  mkdir(o_.log_dir.c_str(), 0755);
  ::signal(SIGPIPE, SIG_IGN);
  for (int i = 0; i < 2; ++i) {
    procs_.push_back(std::make_unique<Proc>());
    registries_[i] = procs_.back().get();
    registries_[i]->role = Role::kRegistry;
    registries_[i]->slot = i;
    spawn(*registries_[i]);
  }
  auto start_limit = std::chrono::seconds(o_.hang_bound_s);
  wait_until([&] { return registries_[0]->ready && registries_[1]->ready; }, start_limit);
  if (!o_.hot_standby) {
    // Both ports are known now; the standby stays down until a registry fault needs it.
    registries_[1]->retiring = true;
    registries_[1]->child->signal(SIGTERM);
    wait_until([&] { return !registries_[1]->child; }, start_limit);
  }
  procs_.push_back(std::make_unique<Proc>());
  trainer_ = procs_.back().get();
  trainer_->role = Role::kTrainer;
  spawn(*trainer_);
  for (int i = 0; i < o_.rollouts; ++i) {
    procs_.push_back(std::make_unique<Proc>());
    rollouts_.push_back(procs_.back().get());
    rollouts_.back()->role = Role::kRollout;
    rollouts_.back()->slot = i;
    spawn(*rollouts_.back());
  }
  wait_until([&] {
    for (Proc* p : workers()) {
      if (!p->ready) return false;
    }
    return true;
  }, start_limit);

  auto more = [&] {
    if (o_.max_seconds > 0 && Clock::now() - t0_ > std::chrono::seconds(o_.max_seconds)) return false;
    if (o_.kills > 0) return r_.faults < o_.kills;
    return step_ < o_.steps;
  };
  // One step: the trainer publishes the next version, then every idle rollout updates. A
  // rollout that is stopped keeps its operation and answers in a later step.
  auto do_step = [&](bool faults) {
    ++step_;
    faults_on_ = faults;
    schedule_fault();
    wait_until([&] { return (trainer_->ready && !trainer_->busy && !trainer_->stopped); }, start_limit * 2);
    if (trainer_->ready && !trainer_->busy) {
      begin_op(*trainer_, "step " + std::to_string(step_), "step");
      Proc* t = trainer_;
      int g = t->gen;
      wait_until([&] { return !t->busy || t->gen != g; }, start_limit * 2);
    }
    std::vector<std::pair<Proc*, int>> asked;
    for (Proc* p : rollouts_) {
      if (p->ready && !p->busy && !p->stopped) {
        begin_op(*p, "update", "update");
        asked.push_back({p, p->gen});
      }
    }
    wait_until([&] {
      for (auto [p, g] : asked) {
        if (p->gen == g && p->busy && !p->stopped) return false;
      }
      return true;
    }, start_limit * 2);
  };
  while (more()) do_step(true);
  r_.steps = step_;

  // Settle: no more faults; wait for every stopped process to resume and every operation to
  // end, then publish once more; every rollout must reach that version.
  faults_on_ = false;
  wait_until([&] {
    for (auto& p : procs_) {
      if (p->child && (p->stopped || p->busy || !p->ready || p->retiring)) return false;
    }
    return !pending_registry_.on;
  }, start_limit * 2);
  for (int attempt = 0; attempt < 3; ++attempt) {
    do_step(false);
    int ok = 0;
    for (Proc* p : rollouts_) ok += p->held == published_;
    r_.converged = ok;
    r_.converge_of = static_cast<int>(rollouts_.size());
    if (ok == r_.converge_of) break;
  }
  r_.last_version = published_;
  r_.seconds = ms_between(t0_, Clock::now()) / 1e3;
  finishing_ = true;
  timers_.clear();
  for (Proc* p : workers()) {
    if (p->child) p->child->send("quit");
  }
  for (auto& p : procs_) {
    if (p->child && p->role == Role::kRegistry) p->child->signal(SIGTERM);
  }
  // Let them finish cleanly (an exit in THUB_Finalize is still counted), then make sure.
  wait_until([&] {
    for (auto& p : procs_) {
      if (p->child && !p->child->reaped()) return false;
    }
    return true;
  }, std::chrono::seconds(10));
  for (auto& p : procs_) p->child.reset();
  return r_;
}

}  // namespace

Report run_soak(const Options& o) { return Driver(o).run(); }

}  // namespace thub::soak
