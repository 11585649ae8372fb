// Which host (kernel and pid namespace) this process runs on, and whether a process on the
// same host is alive: a same-host source is watched through its pid, since UCX 1.13's
// shared-memory transports report no peer failures.
#pragma once

#include <cstdint>
#include <string>

namespace thub {

// "<boot id>/<pid namespace>/<net namespace>": equal for two processes of one host that see
// each other's pids and share its network (and so reach each other over shared memory).
const std::string& host_identity();
// False once the process is gone (or is a zombie).
bool process_alive(int64_t pid);

}  // namespace thub
