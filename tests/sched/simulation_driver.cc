// The simulated driver: what src/client/model_core.cc does with the machines' actions, on a model
// of the shard's memory. The buffers are chunks tagged with what they hold (model and
// version), the progress counter is the seqlock's (fill epoch, chunks), publish may stage
// behind (its counter leads), host copies are snapshots of the buffers. Nothing here decides
// what the client does: the machine does.
#include <cstdio>
#include <string>
#include <type_traits>
#include <variant>

#include "tests/sched/simulation_world.h"

namespace thub::sched::sim::detail {

void World::feed(int i, int s, const MachineEvent& ev) {
  if (!res_.ok) return;
  Actor& a = actors_[i];
  if (!a.alive || s >= static_cast<int>(a.sh.size()) || !a.sh[s].m) return;
  const uint64_t moved_on = a.sh[s].m->counters().moved_on;
  std::vector<MachineAction> actions = a.sh[s].m->step(ev);
  res_.moved_on += a.sh[s].m->counters().moved_on - moved_on;
  execute(i, s, std::move(actions));
}

void World::execute(int i, int s, std::vector<MachineAction> actions) {
  const uint64_t reg = actors_[i].sh[s].reg;
  for (const MachineAction& a : actions) {
    if (!res_.ok || !actors_[i].alive || actors_[i].sh[s].reg != reg) return;
    mix("A" + std::to_string(a.index()));
    act(i, s, a);
  }
}

std::string World::describe(int i, int s, uint32_t epoch, bool staged) const {
  return "live/" + std::to_string(i) + "/" + std::to_string(actors_[i].sh[s].reg) + "/" + std::to_string(s) + "/" +
         std::to_string(epoch) + "/" + (staged ? "1" : "0");
}

// A new model handle (or process) registers the buffers anew: readers of the old
// registration fail (their rkeys are gone), its counter starts invalid.
void World::new_registration(int i, int s) {
  Shard& sh = actors_[i].sh[s];
  sh.reg = ++serial_;
  sh.counter = Counter{};
  sh.staged = false;
  sh.host.clear();
  sh.job.reset();
}

void World::act(int i, int s, const MachineAction& action) {
  Actor& a = actors_[i];
  Shard& sh = a.sh[s];
  const int chunks = static_cast<int>(sh.chunks.size());
  const uint64_t layout = 7 + static_cast<uint64_t>(s);
  auto next_epoch = [&a] { return ++a.next_epoch; };  // per process, never 0
  std::visit(
      [&](const auto& x) {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, client::SendRequest>) {
          send(i, s, x);
        } else if constexpr (std::is_same_v<X, client::PrepareHolding>) {
          // A new fill of what the user wrote; staging behind publish (packing, checksums)
          // keeps the counter behind until done.
          uint32_t e = next_epoch();
          sh.staged = chance(300);
          sh.counter = Counter{e, sh.staged ? 0 : chunks};
          feed(i, s, client::Prepared{x.op, layout, describe(i, s, e, sh.staged), e});
        } else if constexpr (std::is_same_v<X, client::PrepareFill>) {
          uint32_t e = next_epoch();
          feed(i, s, client::Prepared{x.op, layout, describe(i, s, e, false), e});
        } else if constexpr (std::is_same_v<X, client::InvalidateHolding>) {
          sh.counter = Counter{};
        } else if constexpr (std::is_same_v<X, client::BeginFill>) {
          sh.staged = false;
          sh.counter = Counter{x.fill, 0};
        } else if constexpr (std::is_same_v<X, client::BeginTransfer>) {
          begin_transfer(i, s, x);
        } else if constexpr (std::is_same_v<X, client::MakeHostCopy>) {
          // On the copy engine: a snapshot of the buffers, which still hold the version (the
          // registry asked while our unpublish or update waits).
          const uint64_t reg = sh.reg;
          const Version v = x.version;
          at((1 + static_cast<Time>(r(20))) * kMs, [=] {
            Actor& b = actors_[i];
            if (!b.alive || s >= static_cast<int>(b.sh.size()) || b.sh[s].reg != reg) return;
            Shard& t = b.sh[s];
            // While the machine holds v, its buffers are v. (If it has let them go meanwhile,
            // the copy may hold anything: it must then never be served, which readers' own
            // end-to-end checks would show.)
            for (Tag c : t.chunks)
              if (t.m->held() == v && c != tag_of(b.model, v))
                return fail(b.replica + "/" + std::to_string(s) + " was told to copy version " + std::to_string(v) +
                            " to host memory, but its buffers hold something else (phase " +
                            std::to_string(static_cast<int>(t.m->phase())) + ")");
            if (!faultless_ && chance(20)) {  // 2% of host copies fail (e.g. host memory exhausted)
              ++res_.copy_failures;
              feed(i, s, client::HostCopyMade{v, false, "", "no host memory"});
              return;
            }
            HostCopy copy{t.chunks, ++b.next_epoch};
            t.host[v] = copy;
            std::string d = "host/" + std::to_string(i) + "/" + std::to_string(reg) + "/" + std::to_string(s) + "/" +
                            std::to_string(copy.epoch) + "/" + std::to_string(v);
            feed(i, s, client::HostCopyMade{v, true, d, ""});
          });
        } else if constexpr (std::is_same_v<X, client::DropHostCopy>) {
          if (x.version < 0) {
            sh.host.clear();
          } else {
            sh.host.erase(x.version);
          }
        } else if constexpr (std::is_same_v<X, client::CompleteOp>) {
          on_complete(i, s, x);
        }
      },
      action);
}

// Staging behind publish, a slice at a time: the counter advances only while it still shows
// this fill (an unpublish or a new fill stops it).
void World::stage(int i, int s, uint64_t reg, uint32_t epoch, int upto) {
  at((1 + static_cast<Time>(r(3))) * kMs, [=] {
    Actor& a = actors_[i];
    if (!a.alive || s >= static_cast<int>(a.sh.size()) || a.sh[s].reg != reg) return;
    Shard& sh = a.sh[s];
    if (sh.counter.epoch != epoch) return;
    sh.counter.chunks = upto + 1;
    if (upto + 1 < static_cast<int>(sh.chunks.size())) stage(i, s, reg, epoch, upto + 1);
  });
}

}  // namespace thub::sched::sim::detail
