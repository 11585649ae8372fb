// A small driver for unit tests: one Registry, virtual time, request ids chosen here, and
// helpers that return the reply to the request just sent (if it was not deferred).
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "sched/registry.h"

namespace thub::sched::testing {

class Harness {
 public:
  explicit Harness(Config cfg = {}) : reg_(cfg) {}

  std::vector<Action> send(const Event& ev) {
    last_ = reg_.step(ev, now_);
    EXPECT_EQ(reg_.check_invariants(), "");
    return last_;
  }
  void advance(Time dt) { now_ += dt; }
  Time now() const { return now_; }

  // The reply to (client, req) among the last actions, if any.
  std::optional<Reply> reply_to(ClientId c, RequestId req) const {
    for (const Action& a : last_)
      if (auto* r = std::get_if<Reply>(&a); r && r->client == c && r->req == req) return *r;
    return std::nullopt;
  }
  template <class T>
  std::vector<T> all() const {
    std::vector<T> v;
    for (const Action& a : last_)
      if (auto* x = std::get_if<T>(&a)) v.push_back(*x);
    return v;
  }

  void connect(ClientId c, std::string dc = "dc0") { send(Connect{c, std::move(dc)}); }
  MemberId open(ClientId c, std::string model, std::string replica, int shard = 0,
                int num_shards = 1, int retain = 0, bool spot = false) {
    RequestId q = ++req_;
    Open o{c, q, std::move(model), std::move(replica), shard, num_shards, retain, spot};
    send(o);
    auto r = reply_to(c, q);
    EXPECT_TRUE(r && r->status == Status::kOk);
    return r ? r->member : 0;
  }
  std::optional<Reply> open_raw(const Open& o) {
    send(o);
    return reply_to(o.client, o.req);
  }
  Status publish(ClientId c, MemberId m, Version v, uint64_t layout = 7) {
    RequestId q = ++req_;
    send(Publish{c, q, m, v, layout, "desc-" + std::to_string(m) + "-v" + std::to_string(v)});
    auto r = reply_to(c, q);
    EXPECT_TRUE(r);
    return r ? r->status : Status::kInternal;
  }
  // Sends Replicate; returns the request id (check reply_to for an immediate answer).
  RequestId replicate(ClientId c, MemberId m, Version spec, Version newer_than = -1,
                      uint64_t layout = 7) {
    RequestId q = ++req_;
    send(Replicate{c, q, m, spec, newer_than, layout, "rdesc-" + std::to_string(m)});
    return q;
  }
  std::optional<Reply> replicate_now(ClientId c, MemberId m, Version spec, Version newer_than = -1,
                                     uint64_t layout = 7) {
    RequestId q = replicate(c, m, spec, newer_than, layout);
    return reply_to(c, q);
  }
  RequestId done(ClientId c, MemberId m, LeaseId l) {
    RequestId q = ++req_;
    send(TransferDone{c, q, m, l});
    return q;
  }
  RequestId failed(ClientId c, MemberId m, LeaseId l, uint64_t chunks = 0) {
    RequestId q = ++req_;
    send(SourceFailed{c, q, m, l, chunks});
    return q;
  }
  RequestId unpublish(ClientId c, MemberId m) {
    RequestId q = ++req_;
    send(Unpublish{c, q, m});
    return q;
  }
  RequestId close(ClientId c, MemberId m) {
    RequestId q = ++req_;
    send(Close{c, q, m});
    return q;
  }
  RequestId offload_done(ClientId c, MemberId m, Version v, std::string desc) {
    RequestId q = ++req_;
    send(OffloadDone{c, q, m, v, std::move(desc)});
    return q;
  }
  RequestId next_req() { return ++req_; }

  Registry& reg() { return reg_; }

 private:
  Registry reg_;
  Time now_ = 0;
  RequestId req_ = 0;
  std::vector<Action> last_;
};

}  // namespace thub::sched::testing
