#include "tools/info/print_registry.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>
#include <vector>

namespace thub::info {
namespace {

using sched::Holding;
using sched::Snapshot;
using sched::Time;
using sched::Version;

// Names are bytes chosen by clients: control characters are shown escaped, never sent to the
// terminal as they are.
std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f || c == '\\') {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// A JSON string: valid UTF-8 passes, every invalid byte becomes U+FFFD (python3 -m json.tool
// and every strict parser accept the result).
std::string json_str(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else {
      // The length of a well-formed sequence starting here (0: ill-formed).
      size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
      bool ok = n > 0 && i + n <= s.size();
      for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
      if (ok && n >= 3) {
        auto c1 = static_cast<unsigned char>(s[i + 1]);
        if (c == 0xe0) ok = c1 >= 0xa0;                 // overlong
        if (c == 0xed) ok = c1 < 0xa0;                  // surrogates
        if (c == 0xf0) ok = c1 >= 0x90;                 // overlong
        if (c == 0xf4) ok = c1 < 0x90;                  // beyond U+10FFFF
      }
      if (ok) {
        out.append(s.substr(i, n));
        i += n;
      } else {
        out += "\\ufffd";
        ++i;
      }
    }
  }
  return out + "\"";
}

double age_s(Time now, Time t) { return now > t ? static_cast<double>(now - t) / 1e6 : 0.0; }

std::string seconds(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f s", s);
  return b;
}

std::string bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char b[48];
  if (u == 0) std::snprintf(b, sizeof b, "%llu B", static_cast<unsigned long long>(n));
  else std::snprintf(b, sizeof b, "%.1f %s", v, units[u]);
  return b;
}

// What the registry knows of a partial holder's bytes: a report, never a live figure.
std::string reported(const Snapshot& s, uint64_t held, Time at) {
  return ">= " + bytes(held) + ", last report " + seconds(age_s(s.now, at)) + " ago (not live)";
}

std::string version(Version v) { return "v" + std::to_string(v); }

// Left-aligned columns, two spaces apart.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream& out, const std::string& indent) const {
    std::vector<size_t> w;
    for (const auto& r : rows_)
      for (size_t i = 0; i < r.size(); ++i) {
        if (w.size() <= i) w.push_back(0);
        w[i] = std::max(w[i], r[i].size());
      }
    for (const auto& r : rows_) {
      std::string line = indent;
      for (size_t i = 0; i < r.size(); ++i) {
        line += r[i];
        if (i + 1 < r.size()) line += std::string(w[i] - r[i].size() + 2, ' ');
      }
      out << line << "\n";
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

bool whole(Holding h) { return h != Holding::kPartial; }

std::string model_name(const Snapshot& s, uint32_t i) {
  return i < s.models.size() ? printable(s.models[i].name) : "?";
}

// The versions of model `i` to show, newest first: those held by someone and those retained.
std::vector<Version> versions_of(const Snapshot& s, uint32_t i) {
  std::set<Version, std::greater<Version>> vs(s.models[i].retained.begin(), s.models[i].retained.end());
  for (const auto& h : s.holders)
    if (h.model == i) vs.insert(h.version);
  return {vs.begin(), vs.end()};
}

bool is_retained(const sched::ModelView& m, Version v) {
  return std::find(m.retained.begin(), m.retained.end(), v) != m.retained.end();
}

std::string plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

void print_registry(std::ostream& out, const std::string& address, const Snapshot& s) {
  out << "registry " << address << ": " << plural(s.clients, "client", "clients") << " (this tool included), "
      << plural(s.members, "member", "members") << ", " << plural(s.leases, "transfer", "transfers")
      << " in flight, " << plural(s.waiting, "request", "requests") << " waiting\n";
  if (s.truncated) {
    out << "TRUNCATED (the registry's size cap, or --max-entries): showing " << s.models.size() << " of "
        << s.models_total << " models, " << s.holders.size() << " of " << s.holders_total << " holders, "
        << s.transfers.size() << " of " << s.transfers_total << " transfers\n";
  }
  bool any_partial = false;
  for (uint32_t i = 0; i < s.models.size(); ++i) {
    const sched::ModelView& m = s.models[i];
    out << "\nmodel " << printable(m.name) << ": ";
    if (m.latest >= 0) {
      out << "latest " << version(m.latest) << " (" << plural(m.versions_published, "version", "versions")
          << " published)";
    } else {
      out << "nothing published";
    }
    out << ", retain " << m.retain;
    if (!m.retained.empty()) {
      out << " (retained:";
      for (Version v : m.retained) out << " " << version(v);
      out << ")";
    }
    out << ", " << plural(m.members, "member", "members") << "\n";
    std::vector<Version> vs = versions_of(s, i);
    if (vs.empty()) {
      out << "  no version is held\n";
      continue;
    }
    Table t({"VERSION", "SHARD", "REPLICA", "MEMBER", "CLIENT", "HOLDS", "LOAD", "BYTES HELD"});
    for (Version v : vs) {
      std::string vname = version(v) + (is_retained(m, v) ? " (retained)" : "");
      bool held = false;
      for (const auto& h : s.holders) {
        if (h.model != i || h.version != v) continue;
        any_partial = any_partial || !whole(h.state);
        t.add({held ? "" : vname, std::to_string(h.shard) + "/" + std::to_string(h.num_shards), printable(h.replica),
               std::to_string(h.member), std::to_string(h.client),
               std::string(sched::holding_name(h.state)) + (h.spot ? ", spot" : ""), std::to_string(h.load),
               whole(h.state) ? "all" : reported(s, h.bytes_reported, h.reported_at)});
        held = true;
      }
      if (!held) t.add({vname, "-", "(no holder)", "", "", "", "", ""});
    }
    t.print(out, "  ");
  }
  if (s.models.empty()) out << "\nno model is open\n";

  out << "\ntransfers in flight (source -> reader): " << s.transfers.size();
  if (s.transfers.size() < s.transfers_total) out << " of " << s.transfers_total;
  out << "\n";
  if (!s.transfers.empty()) {
    Table t({"LEASE", "MODEL", "VERSION", "SOURCE", "", "READER", "PATH", "AGE", "READER HOLDS"});
    for (const auto& x : s.transfers) {
      std::string src = x.source_shard < 0 ? "member " + std::to_string(x.source) + " (gone)"
                                           : printable(x.source_replica) + " shard " + std::to_string(x.source_shard) +
                                                 " (member " + std::to_string(x.source) + ")";
      if (x.from_host_copy) src += ", host copy";
      if (x.source_partial) src += ", partial";
      std::string rd = x.reader_shard < 0 ? "member " + std::to_string(x.reader) + " (gone)"
                                          : printable(x.reader_replica) + " shard " + std::to_string(x.reader_shard) +
                                                " (member " + std::to_string(x.reader) + ")";
      if (x.orphan) rd += ", dropped for silence";
      any_partial = any_partial || x.reader_shard >= 0;
      t.add({std::to_string(x.lease), model_name(s, x.model), version(x.version), src, "->", rd,
             x.path.empty() ? "-" : printable(x.path), seconds(age_s(s.now, x.granted_at)),
             x.reader_shard < 0 ? "-" : reported(s, x.bytes_reported, x.reported_at)});
    }
    t.print(out, "  ");
  }
  if (any_partial) {
    out << "\nBytes of partial holders are the registry's last report (0 at the grant, a reader's resume point\n"
           "since a SOURCE_FAILED), a lower bound: the bytes move between peers, and the live figure is in\n"
           "each holder's progress counter. Ages are from the registry's clock.\n";
  }
}

void print_registry_json(std::ostream& out, const std::string& address, const Snapshot& s) {
  auto num = [](double d) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6f", d);
    return std::string(b);
  };
  auto bytes_held = [&](bool partial, uint64_t held, Time at) -> std::string {
    if (!partial) return "null";
    return "{\"at_least\":" + std::to_string(held) + ",\"reported_age_s\":" + num(age_s(s.now, at)) +
           ",\"live\":false}";
  };
  std::string o = "{\"registry\":" + json_str(address) + ",\"clock_s\":" + num(static_cast<double>(s.now) / 1e6) +
                  ",\"clients\":" + std::to_string(s.clients) + ",\"members\":" + std::to_string(s.members) +
                  ",\"transfers_in_flight\":" + std::to_string(s.leases) + ",\"waiting\":" + std::to_string(s.waiting) +
                  ",\"truncated\":" + (s.truncated ? "true" : "false") + ",\"totals\":{\"models\":" +
                  std::to_string(s.models_total) + ",\"holders\":" + std::to_string(s.holders_total) +
                  ",\"transfers\":" + std::to_string(s.transfers_total) + "},\"models\":[";
  for (uint32_t i = 0; i < s.models.size(); ++i) {
    const sched::ModelView& m = s.models[i];
    o += std::string(i ? "," : "") + "{\"name\":" + json_str(m.name) + ",\"latest\":" +
         (m.latest >= 0 ? std::to_string(m.latest) : "null") + ",\"versions_published\":" +
         std::to_string(m.versions_published) + ",\"retain\":" + std::to_string(m.retain) + ",\"retained\":[";
    for (size_t k = 0; k < m.retained.size(); ++k) o += (k ? "," : "") + std::to_string(m.retained[k]);
    o += "],\"members\":" + std::to_string(m.members) + ",\"versions\":[";
    std::vector<Version> vs = versions_of(s, i);
    for (size_t k = 0; k < vs.size(); ++k) {
      o += std::string(k ? "," : "") + "{\"version\":" + std::to_string(vs[k]) +
           ",\"retained\":" + (is_retained(m, vs[k]) ? "true" : "false") + ",\"holders\":[";
      bool first = true;
      for (const auto& h : s.holders) {
        if (h.model != i || h.version != vs[k]) continue;
        o += std::string(first ? "" : ",") + "{\"shard\":" + std::to_string(h.shard) +
             ",\"num_shards\":" + std::to_string(h.num_shards) + ",\"replica\":" + json_str(h.replica) +
             ",\"member\":" + std::to_string(h.member) + ",\"client\":" + std::to_string(h.client) +
             ",\"state\":" + json_str(sched::holding_name(h.state)) + ",\"complete\":" +
             (whole(h.state) ? "true" : "false") + ",\"spot\":" + (h.spot ? "true" : "false") +
             ",\"load\":" + std::to_string(h.load) +
             ",\"bytes_held\":" + bytes_held(!whole(h.state), h.bytes_reported, h.reported_at) + "}";
        first = false;
      }
      o += "]}";
    }
    o += "]}";
  }
  o += "],\"transfers\":[";
  for (size_t k = 0; k < s.transfers.size(); ++k) {
    const auto& x = s.transfers[k];
    auto end = [&](sched::MemberId id, const std::string& replica, int shard) {
      return "{\"member\":" + std::to_string(id) + ",\"gone\":" + (shard < 0 ? "true" : "false") +
             ",\"replica\":" + (shard < 0 ? "null" : json_str(replica)) +
             ",\"shard\":" + (shard < 0 ? "null" : std::to_string(shard));
    };
    o += std::string(k ? "," : "") + "{\"lease\":" + std::to_string(x.lease) + ",\"model\":" +
         (x.model < s.models.size() ? json_str(s.models[x.model].name) : "null") +
         ",\"version\":" + std::to_string(x.version) + ",\"source\":" +
         end(x.source, x.source_replica, x.source_shard) + ",\"partial\":" + (x.source_partial ? "true" : "false") +
         ",\"host_copy\":" + (x.from_host_copy ? "true" : "false") + "},\"reader\":" +
         end(x.reader, x.reader_replica, x.reader_shard) + ",\"orphan\":" + (x.orphan ? "true" : "false") +
         ",\"path\":" + (x.path.empty() ? "null" : json_str(x.path)) +
         ",\"bytes_held\":" + bytes_held(x.reader_shard >= 0, x.bytes_reported, x.reported_at) +
         "},\"age_s\":" + num(age_s(s.now, x.granted_at)) + "}";
  }
  o += "]}";
  out << o << "\n";
}

}  // namespace thub::info
