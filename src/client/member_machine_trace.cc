// One line per event and per action of a member machine (member_machine.h): what the client
// decided and why, for a user's report of a failover or a round that went wrong
// (THUB_DEBUG_MACHINE=1, docs/guide.md "Environment variables"). Plain text, no I/O here.
#include <string>
#include <type_traits>
#include <variant>

#include "src/client/member_machine.h"

namespace thub::client {

namespace {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

std::string num(int64_t v) { return std::to_string(v); }
std::string unum(uint64_t v) { return std::to_string(v); }

std::string request(const sched::Event& ev) {
  return std::visit(
      Overloaded{
          [](const sched::Open& e) {
            return "OPEN shard " + num(e.shard) + "/" + num(e.num_shards) + " round " + unum(e.round) +
                   (e.round_open ? " open v" + num(e.round_version) : " status " + num(static_cast<int>(e.round_status)) +
                                                                          " v" + num(e.round_version));
          },
          [](const sched::Close& e) { return "CLOSE member " + unum(e.member); },
          [](const sched::Publish& e) { return "PUBLISH member " + unum(e.member) + " v" + num(e.version); },
          [](const sched::Replicate& e) {
            return "REPLICATE member " + unum(e.member) + " spec " + num(e.spec) + " newer_than " + num(e.newer_than) +
                   " round " + unum(e.round) + (e.whole ? " whole" : "") + (e.seed_only ? " seed" : "");
          },
          [](const sched::TransferDone& e) {
            return "TRANSFER_DONE member " + unum(e.member) + " lease " + unum(e.lease);
          },
          [](const sched::SourceFailed& e) {
            return "SOURCE_FAILED member " + unum(e.member) + " lease " + unum(e.lease) + " held " + unum(e.chunks_done);
          },
          [](const sched::Unpublish& e) { return "UNPUBLISH member " + unum(e.member); },
          [](const sched::OffloadDone& e) { return "OFFLOAD_DONE member " + unum(e.member) + " v" + num(e.version); },
          [](const sched::Cancel& e) {
            return "CANCEL member " + unum(e.member) + " round " + unum(e.round) + " v" + num(e.version);
          },
          [](const sched::TransferProgress& e) {
            return "TRANSFER_PROGRESS member " + unum(e.member) + " lease " + unum(e.lease) + " held " + unum(e.bytes);
          },
          [](const auto&) { return std::string("(a registry-side event)"); },
      },
      ev);
}

}  // namespace

std::string describe(const MachineEvent& ev) {
  return std::visit(
      Overloaded{
          [](const OpOpen& e) { return "op " + unum(e.op) + " open (generation " + unum(e.generation) + ")"; },
          [](const OpPublish& e) { return "op " + unum(e.op) + " publish v" + num(e.version); },
          [](const OpReplicate& e) {
            return "op " + unum(e.op) + (e.update ? " update spec " : " replicate spec ") + num(e.spec);
          },
          [](const Prepared& e) { return "op " + unum(e.op) + " prepared fill " + unum(e.fill); },
          [](const PrepareFailed& e) { return "op " + unum(e.op) + " prepare failed: " + e.detail; },
          [](const OpUnpublish& e) { return "op " + unum(e.op) + " unpublish"; },
          [](const OpClose& e) { return "op " + unum(e.op) + " close"; },
          [](const OpCancel& e) { return "op " + unum(e.op) + " cancel"; },
          [](const RegistryReply& e) {
            const sched::Reply& r = e.reply;
            return "reply to req " + unum(e.req) + ": status " + num(static_cast<int>(r.status)) + " v" +
                   num(r.version) + " lease " + unum(r.lease) + " member " + unum(r.member) + (r.released ? " released" : "") +
                   (r.detail.empty() ? "" : " (" + r.detail + ")");
          },
          [](const RegistryNoReply& e) {
            return "no reply to req " + unum(e.req) + ": code " + num(static_cast<int>(e.code)) + " (" + e.detail + ")";
          },
          [](const RegistryLost&) { return std::string("registry lost"); },
          [](const RegistryBack& e) { return "registry back, generation " + unum(e.generation); },
          [](const RegistryGone& e) { return "registry gone (" + e.detail + ")"; },
          [](const TransferEnded& e) {
            return "transfer " + unum(e.transfer) + " ended: code " + num(static_cast<int>(e.code)) +
                   (e.source_failed ? " source failed" : "") + " held " + unum(e.held) +
                   (e.error.empty() ? "" : " (" + e.error + ")");
          },
          [](const TransferProgressed& e) { return "transfer " + unum(e.transfer) + " holds " + unum(e.held); },
          [](const OffloadOrdered& e) { return "offload ordered v" + num(e.version); },
          [](const DiscardOrdered& e) { return "discard ordered v" + num(e.version); },
          [](const HostCopyMade& e) { return "host copy of v" + num(e.version) + (e.ok ? " made" : " failed"); },
      },
      ev);
}

std::string describe(const MachineAction& a) {
  return std::visit(
      Overloaded{
          [](const SendRequest& s) {
            return "send req " + unum(s.req) + " (generation " + unum(s.generation) + "): " + request(s.event);
          },
          [](const PrepareHolding& p) { return "prepare holding v" + num(p.version); },
          [](const PrepareFill&) { return std::string("prepare fill"); },
          [](const InvalidateHolding&) { return std::string("invalidate holding"); },
          [](const BeginFill& b) { return "begin fill " + unum(b.fill); },
          [](const BeginTransfer& b) {
            return "begin transfer " + unum(b.transfer) + " of v" + num(b.version) + " at " + unum(b.start) +
                   (b.source_partial ? " (partial source)" : "");
          },
          [](const MakeHostCopy& m) { return "make host copy v" + num(m.version); },
          [](const DropHostCopy& d) { return "drop host copy v" + num(d.version); },
          [](const CompleteOp& c) {
            return "complete op " + unum(c.op) + ": code " + num(static_cast<int>(c.code)) + " holding v" +
                   num(c.version) + (c.detail.empty() ? "" : " (" + c.detail + ")");
          },
      },
      a);
}

}  // namespace thub::client
