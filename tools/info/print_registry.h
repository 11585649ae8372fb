// The --registry section of tensorhub-info: a registry's snapshot (sched/snapshot.h) as tables
// for people or as one JSON document for scripts. Pure formatting: no sockets here.
#pragma once

#include <ostream>
#include <string>

#include "sched/snapshot.h"

namespace thub::info {

// Tables: per model its versions and their holders per shard, then the transfers in flight
// (source -> reader). A partial holder's bytes are the registry's last report, and say so.
void print_registry(std::ostream& out, const std::string& address, const sched::Snapshot& s);

// One JSON document on one line (docs/protocol.md, "INFO", describes the fields).
void print_registry_json(std::ostream& out, const std::string& address, const sched::Snapshot& s);

}  // namespace thub::info
