// The --registry section of tensorhub-info: connects like a client (the same connection, so
// the same handshake and authentication), asks the registry for its state with the read-only
// INFO request, prints it, and with --watch asks again until interrupted or counted out.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace thub::info {

struct RegistryOptions {
  std::string address;     // host:port[,host:port...]
  bool json = false;       // one JSON document per snapshot (one per line)
  double watch_s = 0;      // > 0: refresh every watch_s seconds
  int64_t count = 0;       // with watch: stop after this many snapshots (0: until SIGINT/SIGTERM)
  uint32_t max_entries = 0;  // at most this many models, holders, transfers each (0: the registry's caps)
};

// Returns the exit status: 0, or 1 with the reason on `err` (registry unreachable, refused,
// lost, or an answer that does not decode). The auth token and the registry timeouts are the
// client's info keys from the environment (TENSORHUB_AUTH_TOKEN, ...).
int registry_section(const RegistryOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace thub::info
