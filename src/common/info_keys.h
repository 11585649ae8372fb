// Every info key TensorHub reads, in one table: its name, type, default, range, where it
// applies and its documentation line. The table drives parsing (InfoMap::get<>), the check
// that refuses keys a call does not know (a misspelt `auth_token` must not mean "no
// authentication"), tensorhub-registry's flags, and the lists in the public header, the
// README and docs/info-keys.md (generated: tools/vocabulary/). A default that does not parse
// or lies outside its range does not compile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace thub {

class InfoMap;

// Where a key is read (a key may have several).
enum class InfoScope : unsigned {
  kContext = 1,       // THUB_Init: the context
  kRegistry = 2,      // the registry: THUB_Init for the embedded one, tensorhub-registry --key-name
  kModel = 4,         // THUB_Open
  kEnvironment = 8,   // only read from TENSORHUB_<KEY> (no info key)
  kMemory = 16,       // THUB_Alloc_mem (no keys yet)
};

enum class InfoType : uint8_t {
  kString,
  kBool,    // true/false, 1/0, yes/no, on/off
  kInt,     // decimal, within [min, max]
  kSize,    // bytes with an optional K/M/G/T suffix (powers of two), within [min, max]
  kChoice,  // one of `choices`
};

struct InfoKeySpec {
  const char* name;
  unsigned scopes;           // InfoScope bits
  InfoType type;
  const char* dflt;          // the default, as text: what the docs show and the parser reads
  int64_t min = 0;           // kInt, kSize
  int64_t max = 0;
  const char* doc = "";      // one line
  const char* choices = "";  // kChoice: "a|b|c"
  const char* flag = "";     // tensorhub-registry's older spelling of --key-name, kept working
  const char* daemon_dflt = nullptr;  // tensorhub-registry's default where it differs
};

namespace info_keys_detail {
constexpr unsigned kCtx = static_cast<unsigned>(InfoScope::kContext);
constexpr unsigned kReg = static_cast<unsigned>(InfoScope::kRegistry);
constexpr unsigned kMod = static_cast<unsigned>(InfoScope::kModel);
constexpr unsigned kEnv = static_cast<unsigned>(InfoScope::kEnvironment);
constexpr int64_t kDay = 86400000;  // ms
constexpr int64_t kHour = 3600000;  // ms
constexpr int64_t kTiB = int64_t{1} << 40;
}  // namespace info_keys_detail

// The whole table, in documentation order.
inline constexpr InfoKeySpec kInfoKeys[] = {
    // clang-format off
    {"registry", info_keys_detail::kCtx, InfoType::kString, "", 0, 0,
     "`host:port[,host:port...]`: the registry and its backups, in order of preference; "
     "`etcd://host:port[,host:port]/prefix`: the registry that leads in etcd; unset: an embedded registry in "
     "this process"},
    {"datacenter", info_keys_detail::kCtx, InfoType::kString, "default", 0, 0,
     "a label; sources in the same datacenter are preferred"},
    {"auth_token", info_keys_detail::kCtx | info_keys_detail::kReg, InfoType::kString, "", 0, 0,
     "shared secret that clients prove to the registry (HMAC challenge-response; it never travels); "
     "prefer auth_token_file"},
    {"auth_token_file", info_keys_detail::kCtx | info_keys_detail::kReg, InfoType::kString, "", 0, 0,
     "a file holding auth_token: owner-only permissions (chmod 600, as ssh keys), one trailing newline "
     "stripped; not together with auth_token"},
    {"auth_mutual", info_keys_detail::kCtx, InfoType::kBool, "true", 0, 0,
     "with a token, the registry must prove it knows it too (else THUB_ERR_AUTH); false also accepts a "
     "registry that asks for none"},
    {"verify", info_keys_detail::kCtx, InfoType::kBool, "false", 0, 0,
     "hash every 1 MiB block (XXH3) at publish and check it on receipt"},
    {"chunk_size", info_keys_detail::kCtx, InfoType::kSize, "4M", 4096, int64_t{1} << 30,
     "transfer unit in bytes"},
    {"pipeline_chunk_size", info_keys_detail::kCtx, InfoType::kSize, "256K", 4096, int64_t{1} << 30,
     "transfer unit when the source is itself still receiving (a chain hop)"},
    {"parked_reads", info_keys_detail::kCtx, InfoType::kBool, "true", 0, 0,
     "over the transport's own sockets, a chunk read waits at the source until its bytes are there and "
     "brings the source's counter with it (no counter polling, no round trip per hop); false: poll the counter"},
    {"max_inflight", info_keys_detail::kCtx, InfoType::kInt, "16", 1, 1024,
     "gets in flight per transfer"},
    {"timeout_ms", info_keys_detail::kCtx, InfoType::kInt, "0", 0, info_keys_detail::kTiB,
     "deadline of a blocking call in ms (0: none); a replicate still waiting at the registry is then "
     "withdrawn (THUB_ERR_TIMEOUT), a transfer under way, an unpublish or an update in place completes"},
    {"heartbeat_ms", info_keys_detail::kCtx, InfoType::kInt, "1000", 10, info_keys_detail::kHour,
     "client heartbeat period in ms"},
    {"reconnect_ms", info_keys_detail::kCtx, InfoType::kInt, "10000", 0, info_keys_detail::kHour,
     "after losing the registry, try the address list this long (ms); then calls fail at once while "
     "the list is still tried every second in the background"},
    {"registry_probe_ms", info_keys_detail::kCtx, InfoType::kInt, "2000", 0, info_keys_detail::kHour,
     "connected to a backup, ask the earlier registry addresses this often (ms) and move back to the "
     "first that answers (0: never)"},
    {"registry_timeout_ms", info_keys_detail::kCtx, InfoType::kInt, "5000", 0, info_keys_detail::kDay,
     "a registry that sends nothing this long (ms) is lost: fail over (0: never)"},
    {"registry_connect_timeout_ms", info_keys_detail::kCtx, InfoType::kInt, "5000", 1, info_keys_detail::kHour,
     "per registry address: connect and the HELLO answer (ms)"},
    {"registry_request_timeout_ms", info_keys_detail::kCtx, InfoType::kInt, "30000", 0, info_keys_detail::kDay,
     "deadline (ms) of requests the registry answers at once (open, publish, close, offload done), when "
     "timeout_ms is 0 (0: none)"},
    {"stall_timeout_ms", info_keys_detail::kCtx, InfoType::kInt, "10000", 10, info_keys_detail::kDay,
     "a source that makes no progress this long (ms) has failed"},
    {"progress_report_ms", info_keys_detail::kCtx, InfoType::kInt, "2000", 10, info_keys_detail::kHour,
     "a reader tells the registry its progress on a read at most this often (ms), when it made "
     "some (the registry's lease_progress_timeout_ms ends reads that make none)"},
    {"net_devices", info_keys_detail::kCtx, InfoType::kString, "", 0, 0,
     "UCX_NET_DEVICES (default: the NICs nearest to `device`, from hwloc, up ports only)"},
    {"device", info_keys_detail::kCtx, InfoType::kString, "auto", 0, 0,
     "where this context's tensors live, for the NIC choice: `cuda:N` (CUDA device N), "
     "`numa:N` (host memory on NUMA node N), `host` (any), `auto` (the NUMA node of the "
     "thread calling THUB_Init)"},
    {"tls", info_keys_detail::kCtx, InfoType::kString, "", 0, 0,
     "UCX_TLS (default: UCX's choice)"},
    {"progress_spin_us", info_keys_detail::kCtx, InfoType::kInt, "20", 0, 1000000,
     "how long (us) the progress thread spins after a UCX event before it sleeps"},
    {"compaction_threshold", info_keys_detail::kCtx, InfoType::kSize, "64K", 0, info_keys_detail::kTiB,
     "tensors below it travel packed into one buffer (0: never); part of the layout: "
     "every replica of a model must use the same"},
    {"transfer_mode", info_keys_detail::kCtx, InfoType::kChoice, "auto", 0, 0,
     "zero-copy gets, a registered staging copy, or TCP only", "auto|direct|copy|tcp"},
    {"offload_seeding", info_keys_detail::kCtx, InfoType::kSize, "0", 0, info_keys_detail::kTiB,
     "host memory a shard may take to seed new versions into its datacenter in the background (offload "
     "seeding: a relative THUB_Update then returns THUB_NOT_UPDATED at once while the version crosses); 0: off"},
    {"wan_transport", info_keys_detail::kCtx, InfoType::kChoice, "socket", 0, 0,
     "how sources in another datacenter are read: the transport's own TCP sockets, UCX gets, or the same path "
     "as a source inside",
     "socket|ucx|same"},
    {"registry_listen", info_keys_detail::kReg, InfoType::kString, "", 0, 0,
     "`host:port` the registry listens on (port 0: any free one; `0.0.0.0:port` for every interface); "
     "unset: the embedded registry's advertised address, port 0; tensorhub-registry requires it", "", "--listen"},
    {"heartbeat_timeout_ms", info_keys_detail::kReg, InfoType::kInt, "5000", 20, info_keys_detail::kDay,
     "the registry drops clients silent this long (ms), with their replicas"},
    {"pipeline", info_keys_detail::kReg, InfoType::kBool, "true", 0, 0,
     "the registry hands out partial sources (pipeline replication)"},
    {"seeding", info_keys_detail::kReg, InfoType::kBool, "true", 0, 0,
     "a version crosses into a datacenter once: a replica reads from another datacenter only "
     "while no replica of its own holds or receives that version (the first is the seeder, the "
     "others read behind it); false: the nearest free holder, wherever it is"},
    {"smart_skipping", info_keys_detail::kReg, InfoType::kBool, "true", 0, 0,
     "with seeding: while a replica of a datacenter receives a version, a latest request there "
     "does not fetch a newer one across (a replicate takes the version on its way; an update "
     "takes the newest version whole in the datacenter, or returns THUB_NOT_UPDATED while one is "
     "on its way); absolute versions are always served as asked"},
    {"seed_takes_slot", info_keys_detail::kReg, InfoType::kBool, "true", 0, 0,
     "with seeding: a read across datacenters takes a reader slot of its source like any read; "
     "false: it takes none, so that the source's own datacenter does not wait for a read paced "
     "by a slow WAN (where the WAN is as fast as the source's NIC, the two then share it)"},
    {"max_readers", info_keys_detail::kReg, InfoType::kInt, "1", 1, 1 << 20,
     "readers per source at a time"},
    {"round_hold_ms", info_keys_detail::kReg, InfoType::kInt, "1000", 0, info_keys_detail::kDay,
     "how long (ms) a round of a replica of several shards waits for all its shards: it keeps "
     "its source's buffers for a shard that has not asked yet (a trainer's unpublish waits "
     "that long at most), answers a shard's finished transfer once every shard has one, and "
     "holds a round's request while a shard of the replica is not open at the registry (after "
     "a failover: its round report comes with its open) (0: shards are answered alone)"},
    {"takeover_grace_ms", info_keys_detail::kReg, InfoType::kInt, "0", 0, info_keys_detail::kDay,
     "for this long (ms) after its first open, the registry holds a replicate it would answer "
     "not found or version lost until a holder publishes (then answers it so): set on a backup "
     "registry, whose holders come back one by one after a failover (0: answered at once)"},
    {"lease_progress_timeout_ms", info_keys_detail::kReg, InfoType::kInt, "60000", 0, info_keys_detail::kDay,
     "a reader whose granted read reports no progress this long (ms) is dropped like a silent "
     "client, its reads ended, so that a trainer's unpublish waits for it this long at most; "
     "keep it above the readers' stall_timeout_ms (0: no bound)"},
    {"primary", info_keys_detail::kReg, InfoType::kString, "", 0, 0,
     "`host:port` of the primary registry: this one is its backup, which serves only while the "
     "primary does not answer (asked every primary_probe_ms) and otherwise refuses clients, naming it"},
    {"primary_probe_ms", info_keys_detail::kReg, InfoType::kInt, "500", 50, info_keys_detail::kHour,
     "how often (ms) a backup asks its primary whether it answers (a whole handshake)"},
    {"election", info_keys_detail::kReg, InfoType::kString, "", 0, 0,
     "`etcd://host:port[,host:port]/prefix`: the registry serves only while it holds PREFIX/leader in "
     "etcd (leader election; clients use registry=etcd://... to follow the leader)"},
    {"election_ttl_s", info_keys_detail::kReg, InfoType::kInt, "5", 2, 3600,
     "the etcd lease's TTL (s): a leader that cannot renew it stops serving within this, and a "
     "standby takes over after it"},
    {"max_connections", info_keys_detail::kReg, InfoType::kInt, "8192", 1, 1 << 20,
     "connections the registry accepts in all; more are refused"},
    {"max_connections_per_host", info_keys_detail::kReg, InfoType::kInt, "1024", 1, 1 << 20,
     "connections the registry accepts from one peer address"},
    {"hello_timeout_ms", info_keys_detail::kReg, InfoType::kInt, "10000", 1, info_keys_detail::kDay,
     "a new connection must complete its HELLO within this (ms)"},
    {"frame_timeout_ms", info_keys_detail::kReg, InfoType::kInt, "30000", 1, info_keys_detail::kDay,
     "a partial frame or unread replies that make no progress this long (ms) close the connection"},
    {"output_pause_bytes", info_keys_detail::kReg, InfoType::kSize, "4M", 1, info_keys_detail::kTiB,
     "replies queued for one client beyond this pause reading its requests"},
    {"max_output_bytes", info_keys_detail::kReg, InfoType::kSize, "128M", 1, info_keys_detail::kTiB,
     "replies queued for one client beyond this close its connection"},
    {"max_descriptor_bytes_per_client", info_keys_detail::kReg, InfoType::kSize, "256M", 0, info_keys_detail::kTiB,
     "descriptors the registry stores for one client (its holdings, reads and host copies); a publish, "
     "replicate or update beyond it is refused with THUB_ERR_ARG (0: no bound)"},
    {"max_descriptor_bytes", info_keys_detail::kReg, InfoType::kSize, "4G", 0, info_keys_detail::kTiB,
     "descriptors the registry stores for all its clients together; beyond it as above (0: no bound)"},
    {"retain", info_keys_detail::kMod, InfoType::kInt, "0", 0, 1 << 20,
     "keep the latest k versions available (retention copies in host memory)"},
    {"spot", info_keys_detail::kMod, InfoType::kBool, "false", 0, 0,
     "this replica may vanish at any time; it never counts for retention"},
    {"topology_xml", info_keys_detail::kEnv, InfoType::kString, "", 0, 0,
     "an hwloc XML topology to plan NIC choice on instead of this machine's"},
    // clang-format on
};
inline constexpr size_t kInfoKeyCount = sizeof kInfoKeys / sizeof kInfoKeys[0];

// A key, as an index into kInfoKeys; info_key("name") at compile time (a name that is not
// in the table does not compile where a constant is needed, e.g. InfoMap::get<>).
enum class InfoKey : uint16_t {};

constexpr const InfoKeySpec& spec(InfoKey k) { return kInfoKeys[static_cast<size_t>(k)]; }

constexpr InfoKey info_key(std::string_view name) {
  for (size_t i = 0; i < kInfoKeyCount; ++i) {
    if (name == kInfoKeys[i].name) return static_cast<InfoKey>(i);
  }
  throw "not an info key of the table (src/common/info_keys.h)";
}

// The key named `name` at run time, or null.
const InfoKeySpec* find_info_key(std::string_view name);

constexpr bool has_scope(const InfoKeySpec& k, InfoScope s) { return (k.scopes & static_cast<unsigned>(s)) != 0; }

// Parsing of values, shared by the table's compile-time check and InfoMap: ok is false for
// malformed text (then `value` is 0).
struct ParsedNumber {
  bool ok;
  int64_t value;
};
constexpr ParsedNumber parse_int_text(std::string_view v) {
  bool neg = !v.empty() && v[0] == '-';
  size_t i = neg ? 1 : 0;
  if (i == v.size()) return {false, 0};
  uint64_t x = 0;
  for (; i < v.size(); ++i) {
    if (v[i] < '0' || v[i] > '9') return {false, 0};
    x = x * 10 + static_cast<uint64_t>(v[i] - '0');
    if (x > (uint64_t{1} << 62)) return {false, 0};
  }
  return {true, neg ? -static_cast<int64_t>(x) : static_cast<int64_t>(x)};
}
constexpr ParsedNumber parse_size_text(std::string_view v) {
  size_t i = 0;
  uint64_t x = 0;
  for (; i < v.size() && v[i] >= '0' && v[i] <= '9'; ++i) {
    x = x * 10 + static_cast<uint64_t>(v[i] - '0');
    if (x > (uint64_t{1} << 62)) return {false, 0};
  }
  if (i == 0) return {false, 0};
  std::string_view suffix = v.substr(i);
  unsigned shift = 0;
  if (suffix == "" || suffix == "B" || suffix == "b") shift = 0;
  else if (suffix == "k" || suffix == "K" || suffix == "KiB") shift = 10;
  else if (suffix == "m" || suffix == "M" || suffix == "MiB") shift = 20;
  else if (suffix == "g" || suffix == "G" || suffix == "GiB") shift = 30;
  else if (suffix == "t" || suffix == "T" || suffix == "TiB") shift = 40;
  else return {false, 0};
  if (x > ((uint64_t{1} << 62) >> shift)) return {false, 0};
  return {true, static_cast<int64_t>(x << shift)};
}
// 1 true, 0 false, -1 malformed
constexpr int parse_bool_text(std::string_view v) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return 1;
  if (v == "0" || v == "false" || v == "no" || v == "off") return 0;
  return -1;
}
constexpr bool is_choice(std::string_view choices, std::string_view v) {
  while (true) {
    size_t bar = choices.find('|');
    if (choices.substr(0, bar) == v) return true;
    if (bar == std::string_view::npos) return false;
    choices.remove_prefix(bar + 1);
  }
}

// The default of an int or size key (the table's text parsed; checked at compile time).
constexpr int64_t default_number(InfoKey k) {
  const InfoKeySpec& s = spec(k);
  return (s.type == InfoType::kSize ? parse_size_text(s.dflt) : parse_int_text(s.dflt)).value;
}

// Limits on what THUB_Info_set accepts (a key or value longer than this is THUB_ERR_ARG).
constexpr size_t kMaxInfoKeyBytes = 256;
constexpr size_t kMaxInfoValueBytes = 64 * 1024;
void check_info_text(const std::string& key, const std::string& value);  // throws Error(kArg)

// Throws Error(kArg) for a key of `info` that `call` (of `scope`; kContext also accepts the
// registry's keys, for the embedded registry) does not read, naming the nearest known key.
// Also reports, once per process on stderr, TENSORHUB_* environment variables that name no key.
void check_info_keys(const InfoMap& info, InfoScope scope, const char* call);

// The known key nearest to `name` (edit distance <= 3), or "" when none is close.
std::string nearest_info_key(const std::string& name);

// tensorhub-registry's flag of a registry key: --key-name (underscores become dashes).
std::string registry_flag(const InfoKeySpec& k);
// TENSORHUB_<KEY>
std::string environment_name(std::string_view key);

}  // namespace thub
