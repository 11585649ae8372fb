#include "src/common/info_keys.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "src/common/info.h"
#include "src/common/status.h"

extern char** environ;

namespace thub {

const std::vector<InfoKeySpec>& info_keys() {
  using S = InfoScope;
  static const std::vector<InfoKeySpec> keys = {
      {"registry", S::kContext, "string", "", "host:port[,host:port...]: the registry and its backups; unset: an embedded registry"},
      {"datacenter", S::kContext, "string", "default", "a label; sources in the same datacenter are preferred"},
      {"auth_token", S::kContext, "string", "", "shared secret: proven to (or required by the embedded) registry, never sent"},
      {"auth_token_file", S::kContext, "string", "", "a file holding auth_token (owner-only permissions, chmod 600; a trailing newline is stripped)"},
      {"auth_mutual", S::kContext, "bool", "true", "with a token: the registry must prove it knows it too (else THUB_ERR_AUTH)"},
      {"verify", S::kContext, "bool", "false", "hash every 1 MiB block (XXH3) at publish and check it on receipt"},
      {"chunk_size", S::kContext, "size", "4M", "transfer unit in bytes (4K to 1G)"},
      {"pipeline_chunk_size", S::kContext, "size", "256K", "transfer unit when the source is itself still receiving"},
      {"max_inflight", S::kContext, "int", "16", "gets in flight per transfer (1 to 1024)"},
      {"timeout_ms", S::kContext, "int", "0", "deadline of a blocking call in ms (0: none)"},
      {"heartbeat_ms", S::kContext, "int", "1000", "client heartbeat period in ms"},
      {"reconnect_ms", S::kContext, "int", "10000", "after losing the registry, try the address list this long"},
      {"registry_timeout_ms", S::kContext, "int", "5000", "a registry that sends nothing this long is lost: fail over (0: never)"},
      {"registry_connect_timeout_ms", S::kContext, "int", "5000", "per registry address: connect and the HELLO answer"},
      {"registry_request_timeout_ms", S::kContext, "int", "30000", "deadline of requests the registry answers at once, when timeout_ms is 0 (0: none)"},
      {"stall_timeout_ms", S::kContext, "int", "10000", "a source that makes no progress this long has failed"},
      {"net_devices", S::kContext, "string", "", "UCX_NET_DEVICES (default: the NIC nearest to host memory, from hwloc)"},
      {"tls", S::kContext, "string", "", "UCX_TLS (default: UCX's choice)"},
      {"progress_spin_us", S::kContext, "int", "20", "how long the progress thread spins after a UCX event before it sleeps"},
      {"compaction_threshold", S::kContext, "size", "64K", "tensors below it travel packed into one buffer (0: never)"},
      {"transfer_mode", S::kContext, "auto|direct|copy|tcp", "auto", "zero-copy gets, a registered staging copy, or UCX's tcp transport only"},
      {"registry_listen", S::kEmbeddedRegistry, "string", "ADVERTISED:0", "host:port the embedded registry listens on (default: the interface it advertises; 0.0.0.0 for all)"},
      {"heartbeat_timeout_ms", S::kEmbeddedRegistry, "int", "5000", "the embedded registry drops clients silent this long"},
      {"pipeline", S::kEmbeddedRegistry, "bool", "true", "the embedded registry hands out partial sources (pipeline replication)"},
      {"max_readers", S::kEmbeddedRegistry, "int", "1", "readers per source at a time (embedded registry)"},
      {"retain", S::kModel, "int", "0", "keep the latest k versions available (retention copies in host memory)"},
      {"spot", S::kModel, "bool", "false", "this replica may vanish at any time; it never counts for retention"},
      {"topology_xml", S::kEnvironment, "string", "", "an hwloc XML topology to plan NIC choice on instead of this machine's"},
  };
  return keys;
}

void check_info_text(const std::string& key, const std::string& value) {
  if (key.size() > kMaxInfoKeyBytes) {
    throw Error(Code::kArg, "info key of " + std::to_string(key.size()) + " bytes is longer than " +
                                std::to_string(kMaxInfoKeyBytes));
  }
  if (value.size() > kMaxInfoValueBytes) {
    throw Error(Code::kArg, "the value of info key '" + key + "' (" + std::to_string(value.size()) +
                                " bytes) is longer than " + std::to_string(kMaxInfoValueBytes));
  }
}

namespace {
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

bool applies(const InfoKeySpec& k, InfoScope scope) {
  if (k.scope == InfoScope::kEnvironment || scope == InfoScope::kMemory) return false;
  if (scope == InfoScope::kModel) return k.scope == InfoScope::kModel;
  return k.scope == InfoScope::kContext || k.scope == InfoScope::kEmbeddedRegistry;
}

const char* scope_call(InfoScope s) {
  return s == InfoScope::kModel ? "THUB_Open" : s == InfoScope::kMemory ? "THUB_Alloc_mem" : "THUB_Init";
}

void warn_unknown_environment() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (char** e = environ; e && *e; ++e) {
      const char* kv = *e;
      if (std::strncmp(kv, "TENSORHUB_", 10) != 0) continue;
      const char* eq = std::strchr(kv, '=');
      std::string name(kv + 10, eq ? static_cast<size_t>(eq - kv - 10) : std::strlen(kv + 10));
      std::string key;
      for (char c : name) key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      bool known = false;
      for (const auto& k : info_keys()) known = known || key == k.name;
      if (known) continue;
      std::string hint;
      if (std::string near = nearest_info_key(key); !near.empty()) {
        hint = " (did you mean TENSORHUB_";
        for (char c : near) hint += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        hint += "?)";
      }
      std::fprintf(stderr, "tensorhub: warning: TENSORHUB_%s names no setting and is ignored%s\n", name.c_str(),
                   hint.c_str());
    }
  });
}
}  // namespace

std::string nearest_info_key(const std::string& name) {
  std::string best;
  size_t best_d = 4;
  for (const auto& k : info_keys()) {
    size_t d = edit_distance(name, k.name);
    if (d < best_d) {
      best_d = d;
      best = k.name;
    }
  }
  return best;
}

void check_info_keys(const InfoMap& info, InfoScope scope, const char* call) {
  warn_unknown_environment();
  for (const auto& [key, value] : info.entries()) {
    const InfoKeySpec* spec = nullptr;
    for (const auto& k : info_keys()) {
      if (key == k.name) spec = &k;
    }
    if (spec && applies(*spec, scope)) continue;
    std::string why = std::string(call) + ": unknown info key '" + key + "'";
    if (spec && spec->scope == InfoScope::kEnvironment) {
      why += " (it is read from the environment only, as TENSORHUB_" + std::string(key) + ")";
    } else if (spec) {
      why += " (it is a key of " + std::string(scope_call(spec->scope)) + ")";
    } else if (std::string near = nearest_info_key(key); !near.empty()) {
      why += " (did you mean '" + near + "'?)";
    }
    throw Error(Code::kArg, why);
  }
}

}  // namespace thub
