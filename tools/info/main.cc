// tensorhub-info: what TensorHub sees on this machine, what it understands, and what a live
// registry holds. One section per flag; with no section flag, every machine section this
// build has. Add a section by adding a row to kSections.
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "src/common/info.h"
#include "tools/info/print_topology.h"
#include "tools/info/print_ucx.h"
#include "tools/info/registry_section.h"
#include "tools/vocabulary/render.h"
#include "topo/topology.h"

namespace {

struct Options {
  std::string xml;              // --xml FILE: a recorded hwloc topology instead of this machine
  std::string format = "text";  // --format: how the vocabulary sections print
  std::string scope;            // --scope: which info keys (init, open, registry, env; all)
  thub::info::RegistryOptions registry;
};

int topology_section(const Options& opt) {
  std::string err;
  // The info keys' environment overlay (TENSORHUB_TOPOLOGY_XML), as THUB_Init reads it.
  const thub::InfoMap env;
  const std::string xml = opt.xml.empty() ? env.get<thub::info_key("topology_xml")>() : opt.xml;
  auto topology = thub::topo::Topology::load_default(xml, &err);
  if (!err.empty()) {
    std::cerr << "tensorhub-info: " << err << "\n";
    return 1;
  }
  thub::info::print_topology(std::cout, *topology);
  return 0;
}

int ucx_section(const Options&) {
  // The same transport restriction THUB_Init would apply (info key `tls` via its variable).
  const thub::InfoMap env;
  return thub::info::print_ucx(std::cout, std::cerr, env.get<thub::info_key("tls")>()) ? 0 : 1;
}

int vocabulary(const std::string& what, const Options& opt) {
  try {
    std::cout << thub::vocabulary::render(what, opt.format);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tensorhub-info: " << e.what() << "\n";
    return 2;
  }
}
int info_keys_section(const Options& o) {
  return vocabulary(o.scope.empty() ? "info-keys" : "info-keys:" + o.scope, o);
}
int registry_flags_section(const Options& o) { return vocabulary("registry-flags", o); }
int stat_keys_section(const Options& o) { return vocabulary("stat-keys", o); }
int status_codes_section(const Options& o) { return vocabulary("status-codes", o); }

int registry_section(const Options& opt) { return thub::info::registry_section(opt.registry, std::cout, std::cerr); }

struct Section {
  const char* flag;
  const char* arg;  // the flag's value, if it takes one
  const char* help;
  int (*run)(const Options&);
  bool by_default;  // printed when no section is named
};

const Section kSections[] = {
    {"--topology", nullptr, "NUMA nodes, GPUs, NICs and the NIC chosen per GPU / NUMA node",
     topology_section, true},
    {"--ucx", nullptr, "UCX version, transports and devices, memory types, CUDA staging", ucx_section, true},
    {"--registry", "HOST:PORT[,...]",
     "a live registry's models, versions, holders per shard, transfers in flight and\n"
     "\t\tretention (the read-only INFO request; connects as a client: TENSORHUB_AUTH_TOKEN\n"
     "\t\tand the registry_* info keys from the environment apply)",
     registry_section, false},
    {"--info-keys", nullptr, "every info key: type, default, range, who reads it (--scope init|open|registry|env)",
     info_keys_section, false},
    {"--registry-flags", nullptr, "tensorhub-registry's flags (the registry's info keys)", registry_flags_section,
     false},
    {"--stat-keys", nullptr, "the keys of THUB_Model_stat", stat_keys_section, false},
    {"--status-codes", nullptr, "the status codes: number, meaning, hint", status_codes_section, false},
};

void usage(std::ostream& out) {
  out << "usage: tensorhub-info [SECTION...] [--xml FILE] [--format=F] [--scope=S] [--json]\n"
         "                      [--watch [SECONDS]] [--count N] [--max-entries N]\n"
         "With no SECTION, prints this machine's sections (topology, UCX).\n";
  for (const Section& s : kSections) {
    out << "  " << s.flag << (s.arg ? std::string(" ") + s.arg : "") << "\t" << s.help << "\n";
  }
  out << "  --xml FILE\tuse this hwloc XML topology (default: $TENSORHUB_TOPOLOGY_XML, else\n"
         "\t\tthis machine)\n"
         "  --format=F\thow lists print: text (default), markdown, c-comment; status codes also\n"
         "\t\tc-defines and fortran\n"
         "  --scope=S\twith --info-keys: init, open, registry or env (default: all)\n"
         "  --json\t(--registry) one JSON document per snapshot, one per line\n"
         "  --watch [SECONDS]\t(--registry) refresh every SECONDS (default 2) until Ctrl-C\n"
         "  --count N\t(--watch) stop after N snapshots\n"
         "  --max-entries N\t(--registry) list at most N models, holders and transfers each\n"
         "  --help\tthis text\n"
         "Exit status: 0; 1 when a section fails (e.g. the registry is unreachable); 2 for bad usage.\n";
}

bool parse_number(const std::string& s, double* out) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end == nullptr || *end != '\0' || !(v >= 0)) return false;
  *out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  std::vector<const Section*> chosen;
  bool registry_flags = false;  // --json, --watch, --count, --max-entries
  auto bad = [](const std::string& why) {
    std::cerr << "tensorhub-info: " << why << "\n";
    usage(std::cerr);
    return 2;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage(std::cout);
      return 0;
    }
    if (arg.rfind("--format=", 0) == 0) {
      opt.format = arg.substr(9);
      continue;
    }
    if (arg.rfind("--scope=", 0) == 0) {
      opt.scope = arg.substr(8);
      continue;
    }
    if (arg == "--xml") {
      if (i + 1 >= argc) return bad("--xml needs a file");
      opt.xml = argv[++i];
      continue;
    }
    if (arg == "--json") {
      opt.registry.json = registry_flags = true;
      continue;
    }
    if (arg == "--watch") {
      registry_flags = true;
      opt.registry.watch_s = 2;
      double v = 0;
      if (i + 1 < argc && parse_number(argv[i + 1], &v)) {
        if (v <= 0) return bad("--watch needs a positive number of seconds");
        opt.registry.watch_s = v;
        ++i;
      }
      continue;
    }
    if (arg == "--count" || arg == "--max-entries") {
      double v = 0;
      if (i + 1 >= argc || !parse_number(argv[i + 1], &v) || v < 1 || v > 4e9 || v != static_cast<uint32_t>(v)) {
        return bad(arg + " needs a whole number >= 1");
      }
      ++i;
      registry_flags = true;
      if (arg == "--count") opt.registry.count = static_cast<int64_t>(v);
      else opt.registry.max_entries = static_cast<uint32_t>(v);
      continue;
    }
    const Section* found = nullptr;
    for (const Section& s : kSections) {
      if (arg == s.flag) found = &s;
    }
    if (found == nullptr) return bad("unknown argument '" + arg + "'");
    if (found->arg != nullptr) {
      if (i + 1 >= argc) return bad(arg + " needs " + found->arg);
      opt.registry.address = argv[++i];
    }
    chosen.push_back(found);
  }
  if (registry_flags && opt.registry.address.empty()) {
    return bad("--json, --watch, --count and --max-entries need --registry");
  }
  if (opt.registry.count > 0 && opt.registry.watch_s <= 0) return bad("--count needs --watch");
  if (registry_flags && chosen.size() > 1) return bad("--json and --watch show the --registry section alone");
  if (chosen.empty()) {
    for (const Section& s : kSections) {
      if (s.by_default) chosen.push_back(&s);
    }
  }
  int rc = 0;
  for (const Section* s : chosen) {
    if (s->run(opt) != 0) rc = 1;
  }
  return rc;
}
