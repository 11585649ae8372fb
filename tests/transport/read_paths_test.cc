// The read paths' table (src/transport/read_paths.h): every path has one entry, read in the
// order get() always took them, each named as its stat key bytes_<name>; a new source is
// offered to the paths of our own first and UCX's endpoint last, which takes any.
#include "src/transport/read_paths.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "src/common/stat_keys.h"

namespace thub::transport {
namespace {

TEST(ReadPathTableTest, EveryPathHasOneEntryNamedAsItsStatKey) {
  std::set<ReadPath> kinds;
  for (const ReadPathOps* o : kReadOrder) {
    EXPECT_TRUE(kinds.insert(o->kind).second) << o->name << " twice";
    EXPECT_EQ(&read_path_ops(o->kind), o);
    EXPECT_NO_THROW((void)find_stat_key(std::string("bytes_") + o->name)) << o->name;
    EXPECT_NE(o->reads, nullptr);
    EXPECT_NE(o->read, nullptr);
  }
  EXPECT_EQ(kinds.size(), kReadPathCount);
}

TEST(ReadPathTableTest, ReadsAndSourcesAreOfferedInTheOrderTheWorkerAlwaysTookThem) {
  EXPECT_EQ(kReadOrder[0]->kind, ReadPath::kProcess);
  EXPECT_EQ(kReadOrder[1]->kind, ReadPath::kSocket);
  EXPECT_EQ(kReadOrder[2]->kind, ReadPath::kUcxMapped);
  EXPECT_EQ(kReadOrder[3]->kind, ReadPath::kUcxGet);
  EXPECT_EQ(kSourceOrder.front()->kind, ReadPath::kProcess);
  EXPECT_EQ(kSourceOrder.back()->kind, ReadPath::kUcxGet) << "UCX's endpoint, which takes any source, is last";
  for (const ReadPathOps* o : kSourceOrder) EXPECT_NE(o->open, nullptr) << o->name;
  EXPECT_EQ(read_path_ops(ReadPath::kUcxMapped).open, nullptr) << "set up per key, never a source's path";
}

// A worker's description lists the table (tensorhub-info prints it).
TEST(ReadPathTableTest, TheWorkerDescribesItsPaths) {
  auto w = Worker::create(WorkerOptions{});
  const std::string d = w->describe();
  EXPECT_NE(d.find("# read paths, in the order a source is offered to them: process_vm_readv socket ucx_get"),
            std::string::npos)
      << d;
}

}  // namespace
}  // namespace thub::transport
