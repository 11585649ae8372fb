// The control-plane wire format (docs/protocol.md): length-prefixed, versioned frames over
// TCP. Every frame is a 20-byte header followed by a payload encoded with src/common/codec.
//
//   u32 magic 'THUB' | u16 protocol version | u16 message type | u64 request id | u32 length
//
// Requests map one-to-one onto sched/ events; the registry answers with Reply frames
// (echoing the request id, possibly much later: drains and busy sources defer replies).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sched/snapshot.h"
#include "sched/types.h"
#include "src/common/codec.h"

namespace thub::registry {

constexpr uint32_t kMagic = 0x42554854;  // "THUB" little-endian
// 2: HELLO carries a nonce instead of the token; CHALLENGE, AUTH and AUTH_OK (docs/protocol.md).
// 3: REPLICATE carries a round (the user's n-th replicate of the model handle), CANCEL a round and a
// version (docs/sched.md "Transactions").
// 4: after a handshake with a token every frame either way carries a MAC (src/registry/auth.h).
// 5: TRANSFER_PROGRESS, a reader's progress on a granted read (sched::Config::lease_progress_timeout).
// 6: NOT_LEADER, a registry that does not lead (a backup whose primary answers, or one that has no
// etcd lease) answering HELLO, or telling its clients before it closes them (src/registry/leadership.h).
// 7: OPEN carries the shard's round report (a re-open after a failover: its latest round, whether
// it is still in it, the answer it had), CANCEL a status beside its version, REPLICATE a `whole` flag (a resume of a version the shard
// already holds whole): a round has one outcome on every shard across a failover (docs/sched.md).
// 8: REPLICATE's seed_only; 9: TRANSFER_PROGRESS's path (docs/protocol.md).
// 10: REPLY's `released`: a failed update in place of a round no longer holds its version.
constexpr uint16_t kProtocolVersion = 10;
constexpr size_t kHeaderBytes = 20;
constexpr uint32_t kMaxPayload = 64u << 20;

// What one client may store in the registry is bounded so that every reply that carries it
// fits one frame (docs/protocol.md, "Limits"). A request beyond these is refused with
// status -1 and a message; its connection stays open.
constexpr size_t kMaxPathBytes = 64;              // TRANSFER_PROGRESS's read path
constexpr size_t kMaxNameBytes = 4096;            // model, replica; HELLO's datacenter
constexpr uint32_t kMaxHelloPayload = 16u << 10;  // before authentication, no frame may announce more
// The handshake's values, none of them secret (src/registry/auth.h): each side's fresh nonce, each
// side's HMAC-SHA256 proof. A HELLO, CHALLENGE, AUTH or AUTH_OK of another size is malformed.
constexpr size_t kNonceBytes = 32;
constexpr size_t kProofBytes = 32;
constexpr size_t kMaxDetailBytes = 64u << 10;     // a reply's detail text (longer is truncated)
constexpr size_t kMaxDescribeBytes = 4u << 20;    // DESCRIBE's text (longer is truncated)
constexpr size_t kReplyFixedBytes = 4 + 4 + 8 + 8 + 8 + 8 + 4 + 1;  // a REPLY less its two texts
constexpr size_t kMaxDescriptorBytes = kMaxPayload - (1u << 20);    // 63 MiB
static_assert(kMaxDescriptorBytes + kMaxDetailBytes + kReplyFixedBytes <= kMaxPayload,
              "a grant carrying the largest descriptor must fit one frame");
static_assert(kMaxDescribeBytes + kReplyFixedBytes <= kMaxPayload, "DESCRIBE's reply must fit one frame");
constexpr size_t kMaxSnapshotBytes = 4u << 20;    // INFO's answer (beyond: cut, marked truncated)
static_assert(kMaxSnapshotBytes <= kMaxPayload, "INFO's answer must fit one frame");

enum class MsgType : uint16_t {
  kHello = 1,         // client nonce, datacenter
  kHeartbeat = 2,     // (empty) both ways: the registry answers each one
  kOpen = 3,
  kClose = 4,
  kPublish = 5,
  kReplicate = 6,
  kTransferDone = 7,
  kSourceFailed = 8,
  kUnpublish = 9,
  kOffloadDone = 10,
  kDescribe = 11,     // reply detail: the registry's state as text
  kCancel = 12,       // THUB_Cancel of a member's deferred REPLICATE
  kInfo = 13,         // read-only: the registry's state as values, answered by SNAPSHOT
  kAuth = 14,         // the client's proof, answering CHALLENGE
  kTransferProgress = 15,  // a reader's checked bytes of a granted read (lease_progress_timeout)
  kReply = 100,
  kOffload = 101,     // registry -> client: retention offload order
  kDiscard = 102,     // registry -> client: a retention copy may be freed
  kChallenge = 103,   // registry -> client: its nonce; answers HELLO when it has a token
  kAuthOk = 104,      // registry -> client: its own proof; answers a correct AUTH
  kSnapshot = 105,    // registry -> client: the answer to INFO
  kNotLeader = 106,   // registry -> client: it does not lead (who does, why); it closes the connection
};

// A request that decodes but asks the registry to store more than the limits above: refused
// with status -1 (THUB_ERR_ARG); unlike other CodecErrors the stream is intact, so the
// connection stays open.
class LimitError : public thub::CodecError {
 public:
  using CodecError::CodecError;
};

struct FrameHeader {
  uint16_t version = kProtocolVersion;
  MsgType type = MsgType::kReply;
  uint64_t req = 0;
  uint32_t length = 0;
};

std::string encode_frame(MsgType type, uint64_t req, std::string_view payload);
// The same into `out`, whose capacity is used again.
void encode_frame(MsgType type, uint64_t req, std::string_view payload, std::string* out);
// Decodes a header from exactly kHeaderBytes; throws CodecError on a bad magic, an unknown
// protocol version or a payload longer than kMaxPayload.
FrameHeader decode_header(std::string_view bytes);

struct Hello {
  std::string nonce;  // kNonceBytes, fresh per connection
  std::string datacenter;
};
std::string encode_hello(const Hello& h);
Hello decode_hello(std::string_view payload);
// CHALLENGE: the registry's nonce (kNonceBytes). AUTH (the client's) and AUTH_OK (the
// registry's): a proof of kProofBytes. Another size is a CodecError.
std::string encode_challenge(std::string_view nonce);
std::string decode_challenge(std::string_view payload);
std::string encode_auth(std::string_view proof);
std::string decode_auth(std::string_view payload);
std::string encode_auth_ok(std::string_view proof);
std::string decode_auth_ok(std::string_view payload);

// NOT_LEADER: the registry that leads instead ("host:port"; "" when it does not know) and why
// this one does not. Either text longer than kMaxNameBytes is malformed.
struct NotLeader {
  std::string leader;
  std::string detail;
};
std::string encode_not_leader(const NotLeader& n);
NotLeader decode_not_leader(std::string_view payload);

// Client side: the payload of each request (the client id and request id come from the
// connection and the frame header).
std::string encode_event(const sched::Event& ev);
// The same into `out`, whose capacity is used again (a sender's buffer kept across frames).
void encode_event(const sched::Event& ev, std::string* out);
// Client side: throws LimitError if the request would be refused for its size.
void check_limits(const sched::Event& ev);
// Registry side: the event for a request frame from `client`. Throws CodecError, or
// LimitError for names and descriptors beyond the limits.
sched::Event decode_event(MsgType type, uint64_t req, sched::ClientId client, std::string_view payload);

// `detail` beyond `max_detail` bytes is cut, with a note saying so: a reply always fits.
std::string encode_reply(const sched::Reply& r, size_t max_detail = kMaxDetailBytes);
sched::Reply decode_reply(std::string_view payload);
// OFFLOAD and DISCARD carry the same payload: u64 member, i64 version.
std::string encode_order(sched::MemberId member, sched::Version version);
void decode_order(std::string_view payload, sched::MemberId* member, sched::Version* version);

// INFO: u32 max_entries, the most models, holders and transfers each to list (0: the
// registry's own caps).
std::string encode_info_request(uint32_t max_entries);
uint32_t decode_info_request(std::string_view payload);
// SNAPSHOT: at most `max_bytes` of payload. The room goes to the models first, then the
// transfers, then the holders; what does not fit is left out (holders of a model left out go
// with it) and the snapshot is marked truncated.
std::string encode_snapshot(const sched::Snapshot& s, size_t max_bytes = kMaxSnapshotBytes);
// Checks every count, index and enum against the payload; throws CodecError.
sched::Snapshot decode_snapshot(std::string_view payload);

MsgType type_of(const sched::Event& ev);
const char* type_name(MsgType t);  // "UNKNOWN" for a number no message has
// A request the registry may answer much later (REPLICATE, SOURCE_FAILED, UNPUBLISH: drains
// and busy sources last as long as transfers).
bool may_defer(MsgType t);
// The frame that answers a request when it succeeds (REPLY; HEARTBEAT's is a HEARTBEAT, INFO's
// a SNAPSHOT); a refusal is always a REPLY.
MsgType answer_to(MsgType t);

}  // namespace thub::registry
