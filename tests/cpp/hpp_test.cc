// tensorhub.hpp, the C++ header over the C API: every class and method in one process with
// the embedded registry. A trainer Model publishes, a rollout Model of another replica in the
// same context replicates and updates, byte-exact; failures arrive as tensorhub::Error with
// the code and the context's detail; moved-from objects are inert; requests wait and test.
// Built as C++20 so that the std::span overloads are compiled and run too (the examples use
// the header as C++17).
#include <gtest/gtest.h>
#include <tensorhub/tensorhub.hpp>

#include <cstring>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

namespace th = tensorhub;

namespace {

static_assert(!std::is_copy_constructible_v<th::Context> && std::is_nothrow_move_constructible_v<th::Context>);
static_assert(!std::is_copy_constructible_v<th::Model> && std::is_nothrow_move_constructible_v<th::Model>);
static_assert(!std::is_copy_constructible_v<th::Request> && std::is_nothrow_move_constructible_v<th::Request>);
static_assert(!std::is_copy_constructible_v<th::Info> && std::is_nothrow_move_constructible_v<th::Info>);
static_assert(std::is_nothrow_destructible_v<th::Context> && std::is_nothrow_destructible_v<th::Model>);
static_assert(std::is_base_of_v<std::runtime_error, th::Error>);
static_assert(th::latest == THUB_LATEST && th::latest_minus(2) == THUB_LATEST_MINUS(2));

// The code of the tensorhub::Error that f throws, or THUB_SUCCESS when it throws none.
template <class F>
int code_of(F&& f) {
  try {
    f();
  } catch (const th::Error& e) {
    return e.code();
  }
  return THUB_SUCCESS;
}

// One model's two tensors: the trainer fills them per version, the rollout receives them.
struct Weights {
  std::vector<float> w = std::vector<float>(50000);
  std::vector<int32_t> b = std::vector<int32_t>(17);
  void fill(int64_t v) {
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(v * 1000 + static_cast<int64_t>(i % 977));
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<int32_t>(v * 7 + static_cast<int64_t>(i));
  }
  bool operator==(const Weights& o) const { return w == o.w && b == o.b; }
  void register_in(th::Model& m) {
    m.register_tensor("w", w.data(), w.size() * sizeof(float));
#if defined(__cpp_lib_span)
    m.register_tensor("b", std::span<int32_t>(b));
#else
    m.register_tensor("b", b.data(), b.size() * sizeof(int32_t), th::Memory::host);
#endif
  }
};

TEST(HppTest, PublishReplicateUpdate) {
  th::Context ctx;
  const std::string addr = ctx.registry_address();
  EXPECT_NE(addr.find(':'), std::string::npos) << addr;

  Weights tw, rw;
  th::Model trainer = ctx.open("hpp-policy", "trainer");
  tw.register_in(trainer);
  tw.fill(1);
  trainer.publish(1);

  th::Model rollout = ctx.open("hpp-policy", "rollout", 0, 1, th::Info{{"spot", "true"}});
  rw.register_in(rollout);
  EXPECT_EQ(rollout.replicate(), 1);
  EXPECT_TRUE(rw == tw);
  EXPECT_EQ(rollout.stat("held_version"), 1);
  EXPECT_EQ(rollout.stat("total_bytes"), static_cast<int64_t>(tw.w.size() * sizeof(float) + tw.b.size() * 4));
  EXPECT_EQ(rollout.update(), std::nullopt);  // nothing newer than 1

  trainer.unpublish();
  tw.fill(2);
  trainer.publish(2);
  EXPECT_EQ(rollout.update(th::latest), std::optional<int64_t>(2));
  EXPECT_TRUE(rw == tw);
  EXPECT_EQ(rollout.stat("replications"), 2);

  rollout.close();
  EXPECT_FALSE(rollout);
  trainer.close();
  ctx.finalize();
  EXPECT_FALSE(ctx);
}

TEST(HppTest, ErrorsCarryCodeAndDetail) {
  th::Context ctx;
  std::vector<char> buf(4096);
  th::Model m = ctx.open("hpp-errors", "rollout");
  m.register_tensor("x", buf.data(), buf.size());
  try {
    m.replicate(3);  // never published
    ADD_FAILURE() << "replicate of a version nobody published succeeded";
  } catch (const th::Error& e) {
    EXPECT_EQ(e.code(), THUB_ERR_NOT_FOUND);
    EXPECT_NE(std::string(e.what()).find("THUB_Replicate"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(THUB_Error_string(THUB_ERR_NOT_FOUND)), std::string::npos) << e.what();
  }
  try {
    (void)m.stat("held_versoin");
    ADD_FAILURE() << "an unknown stat key was accepted";
  } catch (const th::Error& e) {
    EXPECT_EQ(e.code(), THUB_ERR_ARG);
    EXPECT_NE(e.detail().find("held_version"), std::string::npos) << "detail: " << e.detail();
  }
  EXPECT_EQ(code_of([&] { m.publish(-4); }), THUB_ERR_ARG);
  EXPECT_EQ(code_of([&] { m.unpublish(); }), THUB_ERR_STATE);  // nothing published
  EXPECT_EQ(code_of([&] { ctx.open("", "r"); }), THUB_ERR_ARG);
  EXPECT_EQ(code_of([&] { ctx.free_mem(buf.data()); }), THUB_ERR_ARG);  // not from alloc_mem
  try {
    th::Context bad(th::Info{{"registy", "127.0.0.1:1"}});
    ADD_FAILURE() << "THUB_Init accepted an unknown key";
  } catch (const th::Error& e) {
    EXPECT_EQ(e.code(), THUB_ERR_ARG);
    EXPECT_NE(e.detail().find("registry"), std::string::npos) << "detail: " << e.detail();
  }
}

TEST(HppTest, InfoKeys) {
  th::Info info{{"retain", "2"}, {"datacenter", "dc-1"}};
  EXPECT_EQ(info.size(), 2);
  EXPECT_EQ(info.key(0), "datacenter");  // lexicographic
  EXPECT_EQ(info.key(1), "retain");
  EXPECT_EQ(info.get("retain"), std::optional<std::string>("2"));
  EXPECT_EQ(info.get("spot"), std::nullopt);
  info.set("retain", "3").set("spot", "true");
  EXPECT_EQ(info.get("retain"), std::optional<std::string>("3"));
  th::Info copy = info.dup();
  info.erase("retain");
  EXPECT_EQ(code_of([&] { info.erase("retain"); }), THUB_ERR_NOT_FOUND);
  EXPECT_EQ(info.size(), 2);
  EXPECT_EQ(copy.size(), 3);
  EXPECT_EQ(copy.get("retain"), std::optional<std::string>("3"));
  EXPECT_EQ(code_of([&] { info.set("", "x"); }), THUB_ERR_ARG);
  EXPECT_EQ(code_of([&] { (void)info.key(7); }), THUB_ERR_ARG);
  EXPECT_NE(info.get(), THUB_INFO_NULL);
}

TEST(HppTest, MovedFromObjectsAreInert) {
  th::Context a;
  th::Context b = std::move(a);
  EXPECT_FALSE(a);
  EXPECT_TRUE(b);
  EXPECT_EQ(code_of([&] { (void)a.registry_address(); }), THUB_ERR_ARG);
  EXPECT_FALSE(b.registry_address().empty());

  std::vector<char> buf(1024, 'q');
  th::Model m1 = b.open("hpp-moves", "trainer");
  th::Model m2(std::move(m1));
  EXPECT_FALSE(m1);
  EXPECT_EQ(code_of([&] { m1.register_tensor("x", buf.data(), buf.size()); }), THUB_ERR_ARG);
  EXPECT_EQ(code_of([&] { m1.publish(1); }), THUB_ERR_ARG);
  m2.register_tensor("x", buf.data(), buf.size());
  m2.publish(1);
  th::Model m3;
  m3 = std::move(m2);  // the target held nothing; now it holds the published model
  EXPECT_FALSE(m2);
  EXPECT_EQ(m3.stat("held_version"), 1);

  th::Info i1{{"k", "v"}};
  th::Info i2 = std::move(i1);
  EXPECT_EQ(i1.get(), THUB_INFO_NULL);
  EXPECT_EQ(code_of([&] { i1.set("k", "w"); }), THUB_ERR_ARG);
  EXPECT_EQ(i2.get("k"), std::optional<std::string>("v"));

  th::Request r;
  EXPECT_FALSE(r.active());
  EXPECT_EQ(code_of([&] { r.wait(); }), THUB_ERR_ARG);
  EXPECT_EQ(code_of([&] { r.test(); }), THUB_ERR_ARG);
  th::Context c = std::move(b);  // models opened through b keep working: the handle moved
  EXPECT_EQ(m3.stat("held_version"), 1);
}

TEST(HppTest, RequestsWaitAndTest) {
  th::Context ctx;
  Weights tw, r1w, r2w, r3w;
  th::Model trainer = ctx.open("hpp-requests", "trainer");
  tw.register_in(trainer);
  tw.fill(5);
  trainer.publish(5);
  th::Model r1 = ctx.open("hpp-requests", "r1"), r2 = ctx.open("hpp-requests", "r2"), r3 = ctx.open("hpp-requests", "r3");
  r1w.register_in(r1);
  r2w.register_in(r2);
  r3w.register_in(r3);

  th::Request q = r1.ireplicate(th::latest);
  EXPECT_TRUE(q.active());
  EXPECT_EQ(q.wait(), std::optional<int64_t>(5));
  EXPECT_FALSE(q.active());
  EXPECT_EQ(q.wait(), std::optional<int64_t>(5));  // again: the same result
  EXPECT_TRUE(r1w == tw);

  th::Request t = r2.ireplicate(5);
  while (!t.test()) {
  }
  EXPECT_EQ(t.version(), std::optional<int64_t>(5));
  EXPECT_TRUE(r2w == tw);

  th::Request u = r1.iupdate();
  EXPECT_EQ(u.wait(), std::nullopt);  // nothing newer than 5

  // A replicate that cannot succeed fails at its completion, with the code.
  th::Request missing = r3.ireplicate(99);
  EXPECT_EQ(code_of([&] { missing.wait(); }), THUB_ERR_NOT_FOUND);
  EXPECT_EQ(code_of([&] { missing.wait(); }), THUB_ERR_NOT_FOUND);  // again: the same failure
  EXPECT_EQ(code_of([&] { missing.test(); }), THUB_ERR_NOT_FOUND);
  EXPECT_FALSE(missing.active());

  std::vector<th::Request> reqs;
  reqs.push_back(r1.iunpublish());
  reqs.push_back(r2.iunpublish());
  reqs.push_back(th::Request());
  std::vector<std::optional<int64_t>> got = th::wait_all(reqs);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_FALSE(reqs[0].active() || reqs[1].active());
  EXPECT_EQ(got[2], std::nullopt);
  EXPECT_EQ(r1.stat("held_version"), -1);

  // wait_all completes every request and then throws the first failure.
  reqs.clear();
  reqs.push_back(r1.ireplicate(98));
  reqs.push_back(r2.ireplicate(5));
  EXPECT_EQ(code_of([&] { th::wait_all(reqs); }), THUB_ERR_NOT_FOUND);
  EXPECT_FALSE(reqs[0].active() || reqs[1].active());
  EXPECT_EQ(code_of([&] { reqs[0].wait(); }), THUB_ERR_NOT_FOUND);
  EXPECT_EQ(reqs[1].wait(), std::optional<int64_t>(5));
  EXPECT_EQ(r2.stat("held_version"), 5);
  r2.unpublish();

  // cancel: the request still completes, canceled or as it would have.
  th::Request c = r3.ireplicate(5);
  c.cancel();
  int code = code_of([&] { c.wait(); });
  EXPECT_TRUE(code == THUB_SUCCESS || code == THUB_ERR_CANCELED) << code;
  if (code == THUB_SUCCESS) {
    EXPECT_TRUE(r3w == tw);
  }

  // detach: the operation goes on unobserved; the model takes the next one once it is done.
  th::Request d = r2.ireplicate(5);
  d.detach();
  EXPECT_FALSE(d.active());
  int st = THUB_ERR_STATE;
  while (st == THUB_ERR_STATE) st = code_of([&] { (void)r2.update(); });  // THUB_ERR_STATE while it runs
  EXPECT_EQ(st, THUB_SUCCESS);
  EXPECT_EQ(r2.stat("held_version"), 5);

  // A request destroyed while running is waited for: afterwards the model is free again.
  trainer.unpublish();
  tw.fill(6);
  trainer.publish(6);
  { th::Request dropped = r1.ireplicate(6); }
  EXPECT_EQ(r1.stat("held_version"), 6);
  EXPECT_TRUE(r1w == tw);
}

TEST(HppTest, VersionAndAllocMem) {
  th::Version v = th::version();
  EXPECT_EQ(v.major, THUB_VERSION_MAJOR);
  EXPECT_EQ(v.minor, THUB_VERSION_MINOR);
  EXPECT_EQ(v.patch, THUB_VERSION_PATCH);
  EXPECT_NE(th::library_version().find("UCX"), std::string::npos) << th::library_version();

  th::Context ctx;
  void* mem = ctx.alloc_mem(1 << 16);
  ASSERT_NE(mem, nullptr);
  std::memset(mem, 0x5a, 1 << 16);
  {
    th::Model m = ctx.open("hpp-alloc", "trainer");
    m.register_tensor("x", mem, 1 << 16);
    m.publish(1);
    th::Model r = ctx.open("hpp-alloc", "rollout");
    std::vector<unsigned char> got(1 << 16);
    r.register_tensor("x", got.data(), got.size());
    EXPECT_EQ(r.replicate(), 1);
    EXPECT_EQ(got[12345], 0x5a);
    try {
      ctx.free_mem(mem);
      ADD_FAILURE() << "free_mem of memory a model still registers succeeded";
    } catch (const th::Error& e) {
      EXPECT_EQ(e.code(), THUB_ERR_STATE);
      EXPECT_FALSE(e.detail().empty());
      EXPECT_EQ(ctx.last_error(), e.detail());
    }
  }
  ctx.free_mem(mem);
  ctx.open("hpp-alloc", "late").close();
}

}  // namespace
