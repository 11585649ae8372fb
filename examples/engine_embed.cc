// engine_embed: TensorHub inside an inference engine, through tensorhub.hpp.
//
// The engine runs generation batches on its own thread. A WeightSync object owns the
// TensorHub objects (RAII) and a background thread that polls update() between batches. It keeps
// two weight slots, each its own replica: the engine reads the active slot during a batch
// while the poller updates the spare one; at the start of the next batch the engine switches
// to the spare if it holds a newer version. So the engine never waits for a transfer and
// never reads a buffer that is being overwritten.
//
// main() plays both sides in one process: a trainer thread with its own context (and the
// embedded registry) publishes versions 1..N; the engine generates until it has run a batch
// with version N. Every batch checks the weights it reads.
//
//   engine_embed [VERSIONS [MIB]]
//
// TensorHub lines this integration adds (lines that name tensorhub:: or THUB_, or call a
// Model's method): 16, of which 5 tell "nothing published yet" apart from a failure.
#include <tensorhub/tensorhub.hpp>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

struct TensorSpec {
  std::string name;
  size_t elements;
};

float expected(int64_t version, size_t t, size_t i) {
  return static_cast<float>((version * 131 + static_cast<int64_t>(t) * 17 + static_cast<int64_t>(i)) % 4096);
}

// A context on the given registry; an empty address starts an embedded registry.
tensorhub::Context connect(const std::string& registry) {
  return registry.empty() ? tensorhub::Context() : tensorhub::Context(tensorhub::Info{{"registry", registry}});
}

// Owns one replica of a model: its host buffers and its model handle.
class Replica {
 public:
  Replica(const tensorhub::Context& ctx, const std::string& model, const std::string& replica,
          const std::vector<TensorSpec>& layout)
      : m_(ctx.open(model, replica)) {
    for (const auto& t : layout) {
      tensors_.emplace_back(t.elements, 0.0f);
      m_.register_tensor(t.name, tensors_.back().data(), t.elements * sizeof(float));
    }
  }

  tensorhub::Model& model() { return m_; }
  std::vector<std::vector<float>>& tensors() { return tensors_; }
  int64_t version = -1;  // the version the buffers hold, -1 for none

 private:
  tensorhub::Model m_;
  std::vector<std::vector<float>> tensors_;  // never resized after registration
};

// What the engine reads during one batch.
struct WeightsView {
  int64_t version;
  const std::vector<std::vector<float>>* tensors;
};

class WeightSync {
 public:
  WeightSync(const std::string& registry, const std::string& model, const std::string& engine,
             const std::vector<TensorSpec>& layout, std::chrono::milliseconds poll_period)
      : ctx_(connect(registry)), poll_period_(poll_period) {
    slots_[0] = std::make_unique<Replica>(ctx_, model, engine + "-a", layout);
    slots_[1] = std::make_unique<Replica>(ctx_, model, engine + "-b", layout);
    poller_ = std::thread([this] { poll(); });
  }
  ~WeightSync() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    poller_.join();  // then the replicas close, then the context finalizes (member order)
  }
  WeightSync(const WeightSync&) = delete;
  WeightSync& operator=(const WeightSync&) = delete;

  // Make begin_batch throw (e.g. when the trainer is gone). Any thread.
  void cancel(const std::string& why) {
    std::lock_guard<std::mutex> lk(mu_);
    if (error_.empty()) error_ = "cancelled: " + why;
    cv_.notify_all();
  }

  // Between batches (engine thread): switch to newer weights if the poller has them; blocks
  // only before the very first version arrives.
  WeightsView begin_batch() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [this] { return active_ >= 0 || ready_ >= 0 || !error_.empty(); });
    if (!error_.empty()) throw std::runtime_error(error_);
    if (ready_ >= 0) {
      active_ = ready_;  // the old active slot becomes the spare: the poller may overwrite it
      ready_ = -1;
      cv_.notify_all();
    }
    return {slots_[active_]->version, &slots_[active_]->tensors()};
  }

 private:
  void poll() {
    std::unique_lock<std::mutex> lk(mu_);
    while (!stop_ && error_.empty()) {
      int spare = active_ < 0 ? 0 : 1 - active_;
      int64_t newest = active_ < 0 ? -1 : slots_[active_]->version;
      if (ready_ >= 0) {  // a newer version waits for the engine: nothing to do until it switches
        cv_.wait(lk);
        continue;
      }
      Replica& r = *slots_[spare];
      lk.unlock();
      // The engine does not read the spare slot, so it may be overwritten now. A slot that
      // holds nothing yet replicates; THUB_ERR_NOT_FOUND then means "nothing published yet".
      // After a switch the spare may first fetch the version the engine already has (one
      // extra copy, and one more source for other rollouts); later polls are cheap no-ops.
      std::optional<int64_t> got;
      int st = THUB_SUCCESS;
      std::string failure;
      try {
        got = r.model().update(tensorhub::latest);  // std::nullopt: nothing newer
      } catch (const tensorhub::Error& e) {
        st = e.code();
        failure = e.what();
      }
      lk.lock();
      if (st != THUB_SUCCESS && st != THUB_ERR_NOT_FOUND) {
        error_ = failure;
        cv_.notify_all();
        return;
      }
      if (got) r.version = *got;
      if (got && *got > newest) {
        ready_ = spare;
        cv_.notify_all();
      } else {
        cv_.wait_for(lk, poll_period_);  // a poll interval; woken early on stop or switch
      }
    }
  }

  tensorhub::Context ctx_;
  std::array<std::unique_ptr<Replica>, 2> slots_;
  std::chrono::milliseconds poll_period_;
  std::mutex mu_;
  std::condition_variable cv_;
  int active_ = -1;  // the slot the engine reads
  int ready_ = -1;   // the spare, once it holds a newer version than the active slot
  bool stop_ = false;
  std::string error_;
  std::thread poller_;
};

// Tells the trainer which version the engine has used (no sleeps: a condition variable).
class Progress {
 public:
  void served(int64_t v) {
    std::lock_guard<std::mutex> lk(mu_);
    if (v > served_) served_ = v;
    cv_.notify_all();
  }
  void wait_served(int64_t v) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return served_ >= v || failed_; });
  }
  void fail() {
    std::lock_guard<std::mutex> lk(mu_);
    failed_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t served_ = -1;
  bool failed_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  const int64_t versions = argc > 1 ? std::atoll(argv[1]) : 3;
  const size_t mib = argc > 2 ? static_cast<size_t>(std::atol(argv[2])) : 8;
  if (versions < 1 || mib < 1) {
    std::fprintf(stderr, "usage: engine_embed [VERSIONS [MIB]]\n");
    return 2;
  }
  const std::vector<TensorSpec> layout = {
      {"attn.qkv", mib * 262144 / 2}, {"mlp.up", mib * 262144 / 2 - 8}, {"norm.scale", 8}};
  try {
    // The trainer side: its own context, which starts the embedded registry.
    tensorhub::Context trainer_ctx;
    Replica trainer(trainer_ctx, "policy", "trainer", layout);
    WeightSync sync(trainer_ctx.registry_address(), "policy", "engine-0", layout, std::chrono::milliseconds(2));
    Progress progress;
    std::string trainer_error;
    std::thread trainer_thread([&] {
      try {
        for (int64_t v = 1; v <= versions; ++v) {
          auto& ts = trainer.tensors();
          for (size_t t = 0; t < ts.size(); ++t) {
            for (size_t i = 0; i < ts[t].size(); ++i) ts[t][i] = expected(v, t, i);
          }
          trainer.model().publish(v);
          progress.wait_served(v);  // the engine holds v: now it may be withdrawn
          trainer.model().unpublish();
        }
      } catch (const std::exception& e) {
        trainer_error = e.what();
        sync.cancel(trainer_error);
      }
    });

    int64_t batches = 0, last = -1;
    try {
      while (last < versions) {
        WeightsView w = sync.begin_batch();
        // A "generation batch": read every weight (and check it is the version we think).
        for (size_t t = 0; t < w.tensors->size(); ++t) {
          const auto& x = (*w.tensors)[t];
          for (size_t i = 0; i < x.size(); ++i) {
            if (x[i] != expected(w.version, t, i)) {
              throw std::runtime_error("batch on version " + std::to_string(w.version) + ": " + layout[t].name +
                                       "[" + std::to_string(i) + "] is wrong");
            }
          }
        }
        if (w.version != last) std::printf("engine: batch %lld uses version %lld\n", (long long)batches, (long long)w.version);
        last = w.version;
        ++batches;
        progress.served(last);
      }
    } catch (...) {
      progress.fail();
      trainer_thread.join();
      throw;
    }
    trainer_thread.join();
    if (!trainer_error.empty()) throw std::runtime_error("trainer: " + trainer_error);
    std::printf("engine: done, %lld batches, versions 1..%lld, every weight checked\n", (long long)batches,
                (long long)versions);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine_embed: %s\n", e.what());
    return 1;
  }
  return 0;
}
