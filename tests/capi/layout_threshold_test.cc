// The compaction threshold decides how a shard's tensors are packed into the stream, so it
// is part of the layout the registry compares: a replica whose threshold differs from the
// published one's is refused (THUB_ERR_LAYOUT, naming the threshold) at its replicate
// request, before any grant or byte moves; the same threshold replicates. Three contexts in
// one process: the trainer's embedded registry and two rollouts.
#include <gtest/gtest.h>
#include <tensorhub/tensorhub.h>

#include <string>
#include <vector>

namespace {

std::string last_error(THUB_Context c) {
  char buf[1024];
  THUB_Last_error(c, buf, sizeof buf);
  return buf;
}

constexpr size_t kBig = 1 << 20;  // above every threshold here: served in place
constexpr size_t kTiny = 4096;    // below 64K and 2M: packed

// A context with `threshold` (and the registry at `registry`, or an embedded one) and one
// shard of "policy" with a big and a tiny tensor.
struct Replica {
  THUB_Context c = THUB_CONTEXT_NULL;
  THUB_Model m = THUB_MODEL_NULL;
  std::vector<char> big, tiny;
  Replica(const char* name, const char* threshold, const std::string& registry, char fill)
      : big(kBig, fill), tiny(kTiny, static_cast<char>(fill + 1)) {
    THUB_Info info;
    EXPECT_EQ(THUB_Info_create(&info), THUB_SUCCESS);
    EXPECT_EQ(THUB_Info_set(info, "compaction_threshold", threshold), THUB_SUCCESS);
    if (!registry.empty()) {
      EXPECT_EQ(THUB_Info_set(info, "registry", registry.c_str()), THUB_SUCCESS);
    }
    EXPECT_EQ(THUB_Init(info, &c), THUB_SUCCESS) << last_error(THUB_CONTEXT_NULL);
    THUB_Info_free(&info);
    EXPECT_EQ(THUB_Open(c, "policy", name, 0, 1, THUB_INFO_NULL, &m), THUB_SUCCESS) << last_error(c);
    EXPECT_EQ(THUB_Register(m, "big", big.data(), big.size(), THUB_MEM_HOST), THUB_SUCCESS);
    EXPECT_EQ(THUB_Register(m, "tiny", tiny.data(), tiny.size(), THUB_MEM_HOST), THUB_SUCCESS);
  }
  ~Replica() {
    if (m != THUB_MODEL_NULL) THUB_Close(&m);
    if (c != THUB_CONTEXT_NULL) THUB_Finalize(&c);
  }
  int64_t stat(const char* key) {
    int64_t v = -100;
    EXPECT_EQ(THUB_Model_stat(m, key, &v), THUB_SUCCESS) << key;
    return v;
  }
  std::string registry_address() {
    char a[256];
    EXPECT_EQ(THUB_Registry_address(c, a, sizeof a), THUB_SUCCESS);
    return a;
  }
};

// Refused by the registry, not by the reader after a grant: nothing was read, the message
// is the registry's layout refusal and names this replica's threshold.
void expect_refused_before_any_grant(Replica& r, const char* threshold_bytes) {
  int64_t got = -1;
  EXPECT_EQ(THUB_Replicate(r.m, THUB_LATEST, &got), THUB_ERR_LAYOUT);
  const std::string e = last_error(r.c);
  EXPECT_NE(e.find("THUB_ERR_LAYOUT"), std::string::npos) << e;
  EXPECT_NE(e.find("differs from model policy's"), std::string::npos) << e;  // the registry's words
  EXPECT_NE(e.find(std::string("compaction_threshold=") + threshold_bytes), std::string::npos) << e;
  EXPECT_EQ(e.find("the source packs"), std::string::npos) << "refused after a grant: " << e;
  EXPECT_EQ(r.stat("held_version"), -1);
  EXPECT_EQ(r.stat("gets"), 0);
  EXPECT_EQ(r.stat("counter_reads"), 0);
  EXPECT_EQ(r.stat("bytes_held"), 0);
  EXPECT_EQ(r.tiny[0], 'x' + 1);  // untouched
  EXPECT_EQ(r.big[0], 'x');
}

TEST(LayoutThresholdTest, AnotherThresholdIsRefusedBeforeAnyGrant) {
  Replica trainer("trainer", "64K", "", 'a');
  ASSERT_EQ(THUB_Publish(trainer.m, 1), THUB_SUCCESS) << last_error(trainer.c);
  const std::string registry = trainer.registry_address();

  // No threshold at all packs nothing: another stream.
  Replica none("none", "0", registry, 'x');
  expect_refused_before_any_grant(none, "0");
  // 2M packs the same two tensors as 64K here, but the threshold is the rule, not the
  // accident of which tensors this layout has.
  Replica bigger("bigger", "2M", registry, 'x');
  expect_refused_before_any_grant(bigger, std::to_string(2u << 20).c_str());

  // The same threshold replicates every byte.
  Replica same("same", "65536", registry, 'x');
  int64_t got = -1;
  ASSERT_EQ(THUB_Replicate(same.m, THUB_LATEST, &got), THUB_SUCCESS) << last_error(same.c);
  EXPECT_EQ(got, 1);
  EXPECT_EQ(same.big, trainer.big);
  EXPECT_EQ(same.tiny, trainer.tiny);
  EXPECT_EQ(same.stat("compacted_tensors"), 1);

  // A publish with another threshold is refused the same way: the model's layout is fixed
  // by its first publish.
  EXPECT_EQ(THUB_Publish(none.m, 2), THUB_ERR_LAYOUT);
  EXPECT_NE(last_error(none.c).find("compaction_threshold=0"), std::string::npos) << last_error(none.c);
}

}  // namespace
