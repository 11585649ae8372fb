// The registry's pure state machine: the events that go in and the actions that come out.
// No sockets, threads or clocks: time is an argument (microseconds, any epoch).
// src/registry/ turns wire messages into Events and Actions into wire messages.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace thub::sched {

using Time = int64_t;       // microseconds, supplied by the caller (virtual in simulation)
using ClientId = uint64_t;  // one connected client session (a THUB_Context)
using RequestId = uint64_t; // chosen by the client, echoed in the reply
using MemberId = uint64_t;  // one opened (model, replica, shard), assigned by the registry
using LeaseId = uint64_t;   // one granted read of a source, assigned by the registry
using Version = int64_t;    // >= 0 absolute; -1 latest; -1-k latest minus k

// Same numbers as the THUB_* codes of the public API (sched/ must not include it).
enum class Status : int {
  kOk = 0,
  kNotUpdated = 2,
  kArg = -1,
  kState = -2,
  kNotFound = -3,
  kLayout = -4,
  kTransport = -5,
  kAuth = -10,
  kVersionLost = -11,
  kCanceled = -12,
  kInternal = -99,
};

struct Config {
  Time heartbeat_timeout = 5'000'000; // a client silent this long is removed with its replicas
  int max_readers_per_source = 1;     // pipeline policy: concurrent readers of one source replica
  bool pipeline = true;               // hand out partial sources (replicas still receiving)
  // A source reported failed (SourceFailed) is hidden from everybody only once confirmed:
  // reported by this many distinct reader clients, or its client silent for longer than
  // failure_silence (0: heartbeat_timeout / 2), or gone. The reporter alone avoids it at once.
  int failure_reports = 2;
  Time failure_silence = 0;
  // A replica's round reserves a slot on each source shard for the shards that have not asked
  // yet; while one is reserved, that source's buffers are not freed (its Unpublish or update
  // in place waits) for at most this long after the round opened (0: not at all), so that a
  // sibling asking a little later still finds the version its round was given.
  Time round_hold = 1'000'000;
  // Descriptors the registry stores (a holding's, a reader's, a host copy's) are bounded per
  // client and in all: a publish, replicate or update whose descriptor would pass a budget is
  // refused (kArg), a host copy's is taken as a failed offload (0: no bound).
  uint64_t max_descriptor_bytes_per_client = uint64_t{256} << 20;
  uint64_t max_descriptor_bytes = uint64_t{4} << 30;
  // A registry taking over from another (a backup when the primary died) learns the job's
  // holdings only as their clients come back and publish again. For this long after its
  // first Open, a replicate that would be answered "not found" or "version lost" waits for a
  // holder to publish instead (answered so once the time is up): a reader that came back
  // before its trainer is served, not refused (0: answered at once).
  Time takeover_grace = 0;
  // A read granted to a reader that then reports no progress (TransferProgress with more bytes
  // than before) for this long ends with its reader's client, dropped as a silent one is (its
  // leases end at once: it was heard, it chose not to read), so that a reader that takes a
  // lease and never reads holds a trainer's unpublish for this long at most (0: no bound).
  Time lease_progress_timeout = 60'000'000;
  // Seeding across datacenters (docs/sched.md, "Seeding"): a version's shard crosses into a
  // datacenter once. A holder in another datacenter is not chosen for a requester while a
  // member of the requester's own datacenter (of another replica) holds that shard of the
  // version or will: the first to ask is the datacenter's seeder, the others read inside
  // the datacenter, pipelined behind it. false: the nearest free holder, wherever it is.
  bool seeding = true;
  // Smart skipping (with seeding): a relative request does not fetch across a version newer
  // than one its datacenter is receiving. While a replica there receives v (seeds it, or
  // reads behind the seeder), a replicate takes v; an update in place takes the newest
  // version its datacenter holds whole (newer than its own), THUB_NOT_UPDATED while there is
  // none and v is on its way, and crosses (as the seeder) only when nothing is. Absolute
  // versions are always what was asked.
  bool skipping = true;
  // A seed (a read whose reader is in another datacenter than its source) takes a reader slot
  // of its source like any read. false: it takes none, so that the source's own datacenter
  // does not wait for a read paced by a slow WAN; where the WAN is as fast as the source's
  // NIC, the seed then shares that NIC with another reader (the scale world, 2 TB at 3,200
  // Gbit/s per datacenter: 2.0 x ideal instead of 1.05 x).
  bool seed_takes_slot = true;
};

// ---- events (in) ----------------------------------------------------------------------

struct Connect {      // a client session starts
  ClientId client;
  std::string datacenter;
};
struct Disconnect {   // connection closed or client crashed: remove everything it held
  ClientId client;
};
struct Heartbeat {
  ClientId client;
};
struct Tick {};       // time passed; check deadlines

struct Open {         // reply: member id
  ClientId client;
  RequestId req;
  std::string model, replica;
  int shard = 0, num_shards = 1;
  int retain = 0;     // keep the latest `retain` versions available
  bool spot = false;  // does not count as a holder for retention
  // Its round report (a re-open at a new registry after a failover; 0: nothing to report).
  // Every shard of a replica of several shards tells what the registry before decided of
  // its latest round, in the same step as it opens, so that a round's outcome here is
  // rebuilt from every shard's before any shard asks a round afresh (docs/sched.md,
  // "Across a registry failover"). round: that round; round_open: the shard is still in it
  // (granted round_version there; it resumes the round here itself), else it is done with
  // it. round_status/round_version: the round's answer it had (kOk and a version >= 0: that
  // version; an error: the round's error; kOk and -1: none to share, e.g. its own cancel).
  // round_spec/round_newer_than: the round's request (what a move of it resolves again).
  uint64_t round = 0;
  bool round_open = false;
  Status round_status = Status::kOk;
  Version round_version = -1;
  Version round_spec = -1;
  Version round_newer_than = -1;
};
struct Close {        // implicit unpublish (no drain reply needed), forget the member
  ClientId client;
  RequestId req;
  MemberId member;
};
struct Publish {      // this member's buffers hold `version` completely; reply Ok or error
  ClientId client;
  RequestId req;
  MemberId member;
  Version version;            // absolute, >= 0
  uint64_t layout_hash;       // hash of (names, sizes, order) of the shard's tensors
  std::string descriptor;     // opaque: how to read this member (worker address, rkeys, ...)
};
struct Replicate {    // reply (maybe deferred): Grant, or NotFound / NotUpdated / VersionLost / Layout
  ClientId client;
  RequestId req;
  MemberId member;
  Version spec;               // absolute or relative
  Version newer_than = -1;    // THUB_Update: grant only a version > this, else NotUpdated
  uint64_t layout_hash;
  std::string descriptor;     // this member's own, so that it can serve as a partial source
  // The user's n-th replicate or update of this model handle (1, 2, ...): the shards of a
  // replica ask in lockstep, so equal rounds are one replica-level transaction. 0: no round
  // (a client that does not say): it joins whatever transaction of round 0 is open.
  uint64_t round = 0;
  // A resume of version `spec` in `round` at a new registry by a shard that already holds
  // it whole (its commit was lost with the registry before): no source is read; the
  // registry counts it as holding `spec` and answers with the round's commit (lease 0).
  bool whole = false;
  // Offload seeding (issue 22 item 3): the member is a host-memory seed buffer, and wants
  // the version only to carry it into its datacenter: answered THUB_NOT_UPDATED unless it
  // would be the datacenter's seeder (nothing there holds the version or will, nothing
  // older is on its way, and the registry seeds and skips: Core::nothing_to_seed).
  bool seed_only = false;
};
struct TransferDone { // the granted transfer finished; the member now holds the version fully
  ClientId client;
  RequestId req;
  MemberId member;
  LeaseId lease;
};
struct SourceFailed { // the granted source failed after `chunks_done` chunks; reply: a new Grant
  ClientId client;
  RequestId req;
  MemberId member;
  LeaseId lease;
  uint64_t chunks_done;
};
struct Unpublish {    // reply deferred until no lease on this member is active (drain)
  ClientId client;
  RequestId req;
  MemberId member;
};
struct OffloadDone {  // retention: the member now serves `version` from host memory (an empty
                      // descriptor: the copy could not be made; the drain goes on without it)
  ClientId client;
  RequestId req;
  MemberId member;
  Version version;
  std::string descriptor;
};

struct Cancel {       // THUB_Cancel: this member's deferred Replicate is answered kCanceled (and
  ClientId client;    // this request kOk); kState when none waits (granted or answered already,
  RequestId req;      // or an update in place, which is not canceled)
  MemberId member;
  // > 0: the shard is done with this round (and the earlier ones) whether or not its
  // Replicate of it waits: no transaction of it waits for this shard. Only a Replicate of this
  // round is canceled. Also sent with nothing to cancel: a round canceled before it was
  // asked, or, after a re-open at a new registry, the rounds the old one answered.
  uint64_t round = 0;
  // With a round and nothing to cancel: the version this shard ended that round with at a
  // registry before (-1: none), or with status != kOk the round's error it ended with. A shard
  // that asks the round afresh here gets the same (Open's round report, told later).
  Version version = -1;
  Status status = Status::kOk;
};

struct TransferProgress {  // the granted read now holds `bytes` checked bytes; reply Ok, or
  ClientId client;         // kState when the lease is not active (ended, or not this member's)
  RequestId req;
  MemberId member;
  LeaseId lease;
  uint64_t bytes;
  std::string path;        // what the reader reads the source over, as it names it ("": not said)
};

using Event = std::variant<Connect, Disconnect, Heartbeat, Tick, Open, Close, Publish,
                           Replicate, TransferDone, SourceFailed, Unpublish, OffloadDone, Cancel,
                           TransferProgress>;

// ---- actions (out) --------------------------------------------------------------------

struct Reply {        // the answer to request `req` of `client`
  ClientId client;
  RequestId req;
  Status status = Status::kOk;
  std::string detail;         // human-readable reason for errors
  MemberId member = 0;        // Open
  Version version = -1;       // Replicate: the resolved absolute version
  LeaseId lease = 0;          // Replicate: the read granted
  MemberId source = 0;        // Replicate: which member to read
  std::string source_descriptor;
  bool source_partial = false;  // the source is still receiving: read its progress counter
  // An error to an update in place of a round of several shards: the registry counts this
  // member as holding nothing any more (not "still holding h"): a sibling's grant in the
  // round overwrote its own h, so the shards give h up alike (protocol 10).
  bool released = false;
};
struct Offload {      // retention: before its unpublish completes, `member` must copy
  ClientId client;    // `version` to host memory and keep serving it (answer: OffloadDone)
  MemberId member;
  Version version;
};
struct Drop {         // the registry removed this client; close its session
  ClientId client;
  std::string why = "missed its heartbeat deadline";
};
struct Discard {      // retention: `member` may free its host copy of `version` (no reader
  ClientId client;    // left, and the version fell out of the retained window)
  MemberId member;
  Version version;
};

using Action = std::variant<Reply, Offload, Drop, Discard>;

}  // namespace thub::sched
