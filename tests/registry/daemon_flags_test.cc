// tensorhub-registry takes its settings from the info key table: every registry key is a
// --key-name flag listed by --help, older spellings keep working, values are checked like
// THUB_Init's, and a misspelt flag names the nearest one.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "src/common/info_keys.h"
#include "tests/registry/daemon.h"

namespace thub::registry::test {
namespace {

struct Exit {
  int rc = -1;
  std::string out;  // stdout and stderr
};

// Runs the daemon with `args` (for options that make it exit at once) and collects its output.
Exit run(const std::string& args, const std::string& env = "") {
  Exit r;
  std::string cmd = env + " " THUB_REGISTRY_PATH " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(DaemonFlagsTest, HelpListsEveryRegistryKey) {
  Exit r = run("--help");
  EXPECT_EQ(r.rc, 0) << r.out;
  for (const auto& k : kInfoKeys) {
    if (!has_scope(k, InfoScope::kRegistry)) continue;
    EXPECT_NE(r.out.find(registry_flag(k) + " "), std::string::npos) << k.name << " missing from:\n" << r.out;
    EXPECT_NE(r.out.find(environment_name(k.name)), std::string::npos) << k.name;
  }
  EXPECT_NE(r.out.find("--listen"), std::string::npos);
  EXPECT_NE(r.out.find("--no-pipeline"), std::string::npos);
}

TEST(DaemonFlagsTest, MisspeltFlagNamesTheNearestOne) {
  Exit r = run("--max-conections 3");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("did you mean --max-connections?"), std::string::npos) << r.out;
}

TEST(DaemonFlagsTest, ValuesAreCheckedAgainstTheTable) {
  Exit r = run("--listen 127.0.0.1:0 --max-readers 0");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("'max_readers'"), std::string::npos) << r.out;
  // The environment overlays the same keys, in the same one place.
  r = run("--listen 127.0.0.1:0", "TENSORHUB_HELLO_TIMEOUT_MS=never");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("'hello_timeout_ms'"), std::string::npos) << r.out;
  r = run("--listen 127.0.0.1:0 --max-readers");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("needs a value"), std::string::npos) << r.out;
}

TEST(DaemonFlagsTest, OldAndNewSpellingsServe) {
  Daemon old_style({"--max-connections", "16", "--no-pipeline", "--heartbeat-timeout-ms", "3000",
                    "--output-pause-bytes", "1048576"});
  EXPECT_FALSE(old_style.address.empty());
  Daemon new_style({"--registry-listen", "127.0.0.1:0", "--pipeline", "false", "--max-output-bytes", "64M"});
  EXPECT_FALSE(new_style.address.empty());
}

}  // namespace
}  // namespace thub::registry::test
