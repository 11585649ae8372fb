// Placeholder until the state machine lands (see sched/registry.h).
#include "sched/registry.h"

namespace thub::sched {
struct Registry::State {};
Registry::Registry(Config) : s_(std::make_unique<State>()) {}
Registry::~Registry() = default;
std::vector<Action> Registry::step(const Event&, Time) { return {}; }
std::string Registry::describe() const { return {}; }
}  // namespace thub::sched
