// Which host (kernel and pid namespace) this process runs on, and whether a process on the
// same host is alive: a same-host source is watched through its pid, since UCX 1.13's
// shared-memory transports report no peer failures.
#pragma once

#include <cstdint>
#include <string>

namespace thub {

// "<boot id>/<pid namespace>": equal for two processes that can see each other's pids.
const std::string& host_identity();
// False once the process is gone (or is a zombie).
bool process_alive(int64_t pid);

}  // namespace thub
