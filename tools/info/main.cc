// tensorhub-info: what TensorHub sees on this machine, and what it understands. One section
// per flag; with no section flag, every machine section this build has. Add a section by
// adding a row to kSections.
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "src/common/info.h"
#include "tools/info/print_topology.h"
#include "tools/info/print_ucx.h"
#include "tools/vocabulary/render.h"
#include "topo/topology.h"

namespace {

struct Options {
  std::string xml;              // --xml FILE: a recorded hwloc topology instead of this machine
  std::string format = "text";  // --format: how the vocabulary sections print
  std::string scope;            // --scope: which info keys (init, open, registry, env; all)
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

struct Section {
  const char* flag;
  const char* help;
  int (*run)(const Options&);
  bool by_default;  // printed when no section is asked for
};

// Later: {"--registry", "the registry's models and versions", registry_section}.
const Section kSections[] = {
    {"--topology", "NUMA nodes, GPUs, NICs and the NIC chosen per GPU / NUMA node", topology_section, true},
    {"--ucx", "UCX version, transports and devices, memory types, CUDA staging", ucx_section, true},
    {"--info-keys", "every info key: type, default, range, who reads it (--scope init|open|registry|env)",
     info_keys_section, false},
    {"--registry-flags", "tensorhub-registry's flags (the registry's info keys)", registry_flags_section, false},
    {"--stat-keys", "the keys of THUB_Model_stat", stat_keys_section, false},
    {"--status-codes", "the status codes: number, meaning, hint", status_codes_section, false},
};

void usage(std::ostream& out) {
  out << "usage: tensorhub-info [SECTION...] [--xml FILE] [--format=F] [--scope=S]\n"
         "With no SECTION, prints this machine's sections (topology, UCX).\n";
  for (const Section& s : kSections) out << "  " << s.flag << "\t" << s.help << "\n";
  out << "  --xml FILE\tuse this hwloc XML topology (default: $TENSORHUB_TOPOLOGY_XML, else\n"
         "\t\tthis machine)\n"
         "  --format=F\thow lists print: text (default), markdown, c-comment; status codes also\n"
         "\t\tc-defines and fortran\n"
         "  --scope=S\twith --info-keys: init, open, registry or env (default: all)\n"
         "  --help\tthis text\n";
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  std::vector<const Section*> chosen;
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
      if (i + 1 >= argc) {
        std::cerr << "tensorhub-info: --xml needs a file\n";
        return 2;
      }
      opt.xml = argv[++i];
      continue;
    }
    const Section* found = nullptr;
    for (const Section& s : kSections) {
      if (arg == s.flag) found = &s;
    }
    if (found == nullptr) {
      std::cerr << "tensorhub-info: unknown argument '" << arg << "'\n";
      usage(std::cerr);
      return 2;
    }
    chosen.push_back(found);
  }
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
