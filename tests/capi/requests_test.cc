// Nonblocking requests (MPI semantics): many outstanding at once on different models of one
// context without a thread each, THUB_Waitall / THUB_Testany / THUB_Cancel /
// THUB_Request_free, THUB_Iupdate and THUB_Iunpublish. A replicate is made to wait at the
// registry deterministically: the source replica has two shards and publishes the second
// one only when the test says so (a replica serves every shard of a transaction).
#include <gtest/gtest.h>
#include <poll.h>
#include <tensorhub/tensorhub.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <functional>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kBytes = 96u << 10;

int threads_now() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

int64_t stat(THUB_Model m, const char* key) {
  int64_t v = -2;
  EXPECT_EQ(THUB_Model_stat(m, key, &v), THUB_SUCCESS);
  return v;
}

// A trainer context (with the embedded registry) and a reader context. The tests drive one
// shard of a two-shard replica alone from one thread, on purpose; the registry's round hold
// (round_hold_ms, docs/sched.md) would make every such round wait a second for the sibling
// that does not ask (64 models: 70 s), so it is off here: the replica's transaction, which
// the tests rely on, stays.
struct Pair {
  THUB_Context tc = THUB_CONTEXT_NULL, rc = THUB_CONTEXT_NULL;
  Pair() {
    THUB_Info tinfo;
    EXPECT_EQ(THUB_Info_create(&tinfo), THUB_SUCCESS);
    EXPECT_EQ(THUB_Info_set(tinfo, "round_hold_ms", "0"), THUB_SUCCESS);
    EXPECT_EQ(THUB_Init(tinfo, &tc), THUB_SUCCESS);
    THUB_Info_free(&tinfo);
    char addr[128];
    EXPECT_EQ(THUB_Registry_address(tc, addr, sizeof addr), THUB_SUCCESS);
    THUB_Info info;
    EXPECT_EQ(THUB_Info_create(&info), THUB_SUCCESS);
    EXPECT_EQ(THUB_Info_set(info, "registry", addr), THUB_SUCCESS);
    EXPECT_EQ(THUB_Init(info, &rc), THUB_SUCCESS);
    THUB_Info_free(&info);
  }
  ~Pair() {
    EXPECT_EQ(THUB_Finalize(&rc), THUB_SUCCESS);
    EXPECT_EQ(THUB_Finalize(&tc), THUB_SUCCESS);
  }
};

// One model: the trainer's two shards hold v1; the reader's shard 0 has taken part in its
// replica's transaction once and holds nothing now, so that its next replicate waits for
// shard 1 (unblock()). With reader_bytes != kBytes the reader's layout differs and nothing
// is set up.
struct TwoShardModel {
  std::string name;
  THUB_Model t0 = THUB_MODEL_NULL, t1 = THUB_MODEL_NULL, r = THUB_MODEL_NULL, r1 = THUB_MODEL_NULL;
  std::vector<char> a = std::vector<char>(kBytes), b = std::vector<char>(kBytes), got = std::vector<char>(kBytes),
                    got1 = std::vector<char>(kBytes);
  TwoShardModel(const Pair& p, const std::string& n, size_t reader_bytes = kBytes) : name(n) {
    for (size_t i = 0; i < kBytes; ++i) a[i] = static_cast<char>(i * 13 + n.size() + n.back());
    EXPECT_EQ(THUB_Open(p.tc, n.c_str(), "trainer", 0, 2, THUB_INFO_NULL, &t0), THUB_SUCCESS);
    EXPECT_EQ(THUB_Open(p.tc, n.c_str(), "trainer", 1, 2, THUB_INFO_NULL, &t1), THUB_SUCCESS);
    EXPECT_EQ(THUB_Open(p.rc, n.c_str(), "rollout", 0, 2, THUB_INFO_NULL, &r), THUB_SUCCESS);
    EXPECT_EQ(THUB_Open(p.rc, n.c_str(), "rollout", 1, 2, THUB_INFO_NULL, &r1), THUB_SUCCESS);
    EXPECT_EQ(THUB_Register(t0, "w", a.data(), kBytes, THUB_MEM_HOST), THUB_SUCCESS);
    EXPECT_EQ(THUB_Register(t1, "w", b.data(), kBytes, THUB_MEM_HOST), THUB_SUCCESS);
    EXPECT_EQ(THUB_Register(r, "w", got.data(), reader_bytes, THUB_MEM_HOST), THUB_SUCCESS);
    EXPECT_EQ(THUB_Register(r1, "w", got1.data(), kBytes, THUB_MEM_HOST), THUB_SUCCESS);
    EXPECT_EQ(THUB_Publish(t0, 1), THUB_SUCCESS);
    EXPECT_EQ(THUB_Publish(t1, 1), THUB_SUCCESS);
    if (reader_bytes != kBytes) return;
    int64_t v = -1;
    EXPECT_EQ(THUB_Replicate(r, 1, &v), THUB_SUCCESS);
    EXPECT_EQ(THUB_Unpublish(r), THUB_SUCCESS);
    std::fill(got.begin(), got.end(), 0);
  }
  void unblock() {
    int64_t v = -1;
    EXPECT_EQ(THUB_Replicate(r1, 1, &v), THUB_SUCCESS);
  }
  bool holds_v1() const { return std::memcmp(a.data(), got.data(), kBytes) == 0; }
};

bool eventually(const std::function<bool()>& f) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return f();
}

TEST(RequestTest, SixtyFourReplicatesOnDifferentModelsAreOutstandingAtOnce) {
  Pair p;
  constexpr int kN = 64;
  std::vector<std::unique_ptr<TwoShardModel>> ms;
  for (int i = 0; i < kN; ++i) ms.push_back(std::make_unique<TwoShardModel>(p, "m" + std::to_string(i)));
  const int before = threads_now();
  std::vector<THUB_Request> reqs(kN, THUB_REQUEST_NULL);
  for (int i = 0; i < kN; ++i) ASSERT_EQ(THUB_Ireplicate(ms[i]->r, 1, &reqs[i]), THUB_SUCCESS);
  // Every one waits at the registry, none with a thread.
  EXPECT_LE(threads_now() - before, 2) << "a thread per request?";
  int index = -2, done = -1;
  EXPECT_EQ(THUB_Testany(kN, reqs.data(), &index, &done, nullptr), THUB_SUCCESS);
  EXPECT_EQ(done, 0);
  EXPECT_EQ(index, -1);
  for (auto& m : ms) m->unblock();
  std::vector<int64_t> gots(kN, -7);
  std::vector<int> statuses(kN, -7);
  ASSERT_EQ(THUB_Waitall(kN, reqs.data(), gots.data(), statuses.data()), THUB_SUCCESS);
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(reqs[i], THUB_REQUEST_NULL);
    EXPECT_EQ(statuses[i], THUB_SUCCESS) << i;
    EXPECT_EQ(gots[i], 1) << i;
    EXPECT_TRUE(ms[i]->holds_v1()) << i;
  }
}

TEST(RequestTest, TestanyReportsEachRequestOnceThenNoneActive) {
  Pair p;
  constexpr int kN = 8;
  std::vector<std::unique_ptr<TwoShardModel>> ms;
  std::vector<THUB_Request> reqs(kN, THUB_REQUEST_NULL);
  for (int i = 0; i < kN; ++i) {
    ms.push_back(std::make_unique<TwoShardModel>(p, "t" + std::to_string(i)));
    ASSERT_EQ(THUB_Ireplicate(ms[i]->r, 1, &reqs[i]), THUB_SUCCESS);
  }
  for (auto& m : ms) m->unblock();
  std::vector<int> seen(kN, 0);
  int finished = 0;
  ASSERT_TRUE(eventually([&] {
    int index = -1, done = 0;
    int64_t got = -1;
    EXPECT_EQ(THUB_Testany(kN, reqs.data(), &index, &done, &got), THUB_SUCCESS);
    if (done && index >= 0) {
      EXPECT_EQ(reqs[index], THUB_REQUEST_NULL);
      EXPECT_EQ(got, 1);
      ++seen[index];
      ++finished;
    }
    return finished == kN;
  }));
  for (int i = 0; i < kN; ++i) EXPECT_EQ(seen[i], 1) << i;
  int index = -2, done = 0;
  EXPECT_EQ(THUB_Testany(kN, reqs.data(), &index, &done, nullptr), THUB_SUCCESS);
  EXPECT_EQ(done, 1);  // none active (MPI_Testany: flag true, index MPI_UNDEFINED)
  EXPECT_EQ(index, -1);
}

TEST(RequestTest, CancelWithdrawsAReplicateWaitingAtTheRegistry) {
  Pair p;
  TwoShardModel m(p, "c");
  THUB_Request req = THUB_REQUEST_NULL;
  ASSERT_EQ(THUB_Ireplicate(m.r, 1, &req), THUB_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let it reach the registry (either way works)
  ASSERT_EQ(THUB_Cancel(&req), THUB_SUCCESS);
  EXPECT_NE(req, THUB_REQUEST_NULL);  // still to be completed
  int64_t got = 7;
  EXPECT_EQ(THUB_Wait(&req, &got), THUB_ERR_CANCELED);
  EXPECT_EQ(req, THUB_REQUEST_NULL);
  EXPECT_EQ(stat(m.r, "held_version"), -1);
  // The registry forgot it: a new replicate is not "in progress" there, and is granted.
  m.unblock();
  ASSERT_EQ(THUB_Replicate(m.r, 1, &got), THUB_SUCCESS);
  EXPECT_EQ(got, 1);
  EXPECT_TRUE(m.holds_v1());
}

TEST(RequestTest, CancelOfAFinishedReplicateChangesNothing) {
  Pair p;
  TwoShardModel m(p, "f");
  m.unblock();
  THUB_Request req = THUB_REQUEST_NULL;
  ASSERT_EQ(THUB_Ireplicate(m.r, 1, &req), THUB_SUCCESS);
  ASSERT_TRUE(eventually([&] { return stat(m.r, "held_version") == 1; }));
  ASSERT_EQ(THUB_Cancel(&req), THUB_SUCCESS);
  int64_t got = -1;
  EXPECT_EQ(THUB_Wait(&req, &got), THUB_SUCCESS);
  EXPECT_EQ(got, 1);
  EXPECT_TRUE(m.holds_v1());
}

TEST(RequestTest, BusyModelRefusesASecondOperationAndCloseWaitsForAFreedRequest) {
  Pair p;
  TwoShardModel m(p, "b");
  THUB_Request req = THUB_REQUEST_NULL, other = THUB_REQUEST_NULL;
  ASSERT_EQ(THUB_Ireplicate(m.r, 1, &req), THUB_SUCCESS);
  int64_t got = -1;
  EXPECT_EQ(THUB_Replicate(m.r, 1, &got), THUB_ERR_STATE);
  EXPECT_EQ(THUB_Ireplicate(m.r, 1, &other), THUB_ERR_STATE);
  EXPECT_EQ(other, THUB_REQUEST_NULL);
  ASSERT_EQ(THUB_Request_free(&req), THUB_SUCCESS);
  EXPECT_EQ(req, THUB_REQUEST_NULL);
  EXPECT_EQ(THUB_Close(&m.r), THUB_ERR_STATE);  // the freed operation still runs
  m.unblock();
  ASSERT_TRUE(eventually([&] { return stat(m.r, "held_version") == 1; }));
  EXPECT_TRUE(m.holds_v1());
  EXPECT_TRUE(eventually([&] { return THUB_Close(&m.r) == THUB_SUCCESS; }));
}

TEST(RequestTest, WaitallReportsEachStatusAndTheFirstError) {
  Pair p;
  TwoShardModel good(p, "g"), bad(p, "l", kBytes / 2);  // bad: a layout of its own
  good.unblock();
  bad.unblock();
  THUB_Request reqs[3] = {THUB_REQUEST_NULL, THUB_REQUEST_NULL, THUB_REQUEST_NULL};
  ASSERT_EQ(THUB_Ireplicate(good.r, 1, &reqs[0]), THUB_SUCCESS);
  ASSERT_EQ(THUB_Ireplicate(bad.r, 1, &reqs[2]), THUB_SUCCESS);  // reqs[1] stays null: skipped
  int64_t gots[3] = {-7, -7, -7};
  int statuses[3] = {-7, -7, -7};
  EXPECT_EQ(THUB_Waitall(3, reqs, gots, statuses), THUB_ERR_LAYOUT);
  EXPECT_EQ(statuses[0], THUB_SUCCESS);
  EXPECT_EQ(gots[0], 1);
  EXPECT_EQ(statuses[2], THUB_ERR_LAYOUT);
  EXPECT_EQ(gots[2], -1);
  for (auto r : reqs) EXPECT_EQ(r, THUB_REQUEST_NULL);
  EXPECT_TRUE(good.holds_v1());
}

// Issue 19 item 6: the same request twice in a THUB_Waitall is an argument error with nothing
// waited for (it used to wait for the first entry, free it, then fail on the second).
TEST(RequestTest, WaitallWithTheSameRequestTwiceWaitsForNothing) {
  Pair p;
  TwoShardModel m(p, "d");
  THUB_Request q = THUB_REQUEST_NULL;
  ASSERT_EQ(THUB_Ireplicate(m.r, 1, &q), THUB_SUCCESS);  // blocked until unblock(): not done
  THUB_Request reqs[3] = {q, THUB_REQUEST_NULL, q};
  int statuses[3] = {-7, -7, -7};
  EXPECT_EQ(THUB_Waitall(3, reqs, nullptr, statuses), THUB_ERR_ARG);
  char why[256] = "";
  ASSERT_EQ(THUB_Last_error(THUB_CONTEXT_NULL, why, sizeof why), THUB_SUCCESS);
  EXPECT_NE(std::string(why).find("requests 0 and 2 are the same request"), std::string::npos) << why;
  EXPECT_EQ(reqs[0], q);  // untouched: still valid, still to be completed
  EXPECT_EQ(reqs[2], q);
  EXPECT_EQ(statuses[0], -7);
  int done = 1;
  ASSERT_EQ(THUB_Test(&q, &done, nullptr), THUB_SUCCESS);
  EXPECT_EQ(done, 0);
  m.unblock();
  int64_t got = -1;
  EXPECT_EQ(THUB_Wait(&q, &got), THUB_SUCCESS);
  EXPECT_EQ(got, 1);
}

// Issue 19 item 6: THUB_Finalize with a replicate still waiting at the registry (for another
// client: here the sibling shard that never asks) cancels it instead of waiting on that
// client (it blocked until the other client's lease ended: unbounded in general).
TEST(RequestTest, FinalizeCancelsARequestStillWaitingAtTheRegistry) {
  Pair p;
  TwoShardModel m(p, "f");
  THUB_Request q = THUB_REQUEST_NULL;
  ASSERT_EQ(THUB_Ireplicate(m.r, 1, &q), THUB_SUCCESS);
  ::poll(nullptr, 0, 100);
  int done = 1;
  ASSERT_EQ(THUB_Test(&q, &done, nullptr), THUB_SUCCESS);
  ASSERT_EQ(done, 0) << "the replicate did not wait at the registry: nothing tested";
  auto t0 = std::chrono::steady_clock::now();
  auto fin = std::async(std::launch::async, [&] { return THUB_Finalize(&p.rc); });
  if (fin.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "THUB_Finalize waits for the request's sibling";
    m.unblock();
  }
  EXPECT_EQ(fin.get(), THUB_SUCCESS);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  int64_t got = 7;
  EXPECT_EQ(THUB_Wait(&q, &got), THUB_ERR_CANCELED);
  EXPECT_EQ(q, THUB_REQUEST_NULL);
  // The pair's reader context again, for its destructor.
  char addr[128];
  ASSERT_EQ(THUB_Registry_address(p.tc, addr, sizeof addr), THUB_SUCCESS);
  THUB_Info info;
  ASSERT_EQ(THUB_Info_create(&info), THUB_SUCCESS);
  ASSERT_EQ(THUB_Info_set(info, "registry", addr), THUB_SUCCESS);
  ASSERT_EQ(THUB_Init(info, &p.rc), THUB_SUCCESS);
  THUB_Info_free(&info);
}

TEST(RequestTest, IupdateMovesToTheNewestAndIunpublishDrains) {
  Pair p;
  std::vector<char> w(kBytes, 1), got(kBytes, 0);
  THUB_Model t = THUB_MODEL_NULL, r = THUB_MODEL_NULL;
  ASSERT_EQ(THUB_Open(p.tc, "u", "trainer", 0, 1, THUB_INFO_NULL, &t), THUB_SUCCESS);
  ASSERT_EQ(THUB_Open(p.rc, "u", "rollout", 0, 1, THUB_INFO_NULL, &r), THUB_SUCCESS);
  ASSERT_EQ(THUB_Register(t, "w", w.data(), kBytes, THUB_MEM_HOST), THUB_SUCCESS);
  ASSERT_EQ(THUB_Register(r, "w", got.data(), kBytes, THUB_MEM_HOST), THUB_SUCCESS);
  ASSERT_EQ(THUB_Publish(t, 1), THUB_SUCCESS);
  auto update = [&](int64_t* v) {
    THUB_Request q = THUB_REQUEST_NULL;
    EXPECT_EQ(THUB_Iupdate(r, THUB_LATEST, &q), THUB_SUCCESS);
    return THUB_Wait(&q, v);
  };
  int64_t v = -1;
  EXPECT_EQ(update(&v), THUB_SUCCESS);  // holding nothing: a plain replicate
  EXPECT_EQ(v, 1);
  EXPECT_EQ(got, w);
  EXPECT_EQ(update(&v), THUB_NOT_UPDATED);
  EXPECT_EQ(v, 1);
  ASSERT_EQ(THUB_Unpublish(t), THUB_SUCCESS);
  std::fill(w.begin(), w.end(), 2);
  ASSERT_EQ(THUB_Publish(t, 2), THUB_SUCCESS);
  EXPECT_EQ(update(&v), THUB_SUCCESS);
  EXPECT_EQ(v, 2);
  EXPECT_EQ(got, w);
  THUB_Request q = THUB_REQUEST_NULL;
  ASSERT_EQ(THUB_Iunpublish(r, &q), THUB_SUCCESS);
  EXPECT_EQ(THUB_Wait(&q, nullptr), THUB_SUCCESS);
  EXPECT_EQ(stat(r, "held_version"), -1);
  ASSERT_EQ(THUB_Iunpublish(r, &q), THUB_SUCCESS);  // nothing held now: the operation's error
  EXPECT_EQ(THUB_Wait(&q, nullptr), THUB_ERR_STATE);
}

}  // namespace
