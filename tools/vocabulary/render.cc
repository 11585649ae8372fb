#include "tools/vocabulary/render.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "src/common/info_keys.h"
#include "src/common/stat_keys.h"
#include "src/common/status.h"

namespace thub::vocabulary {

namespace {

constexpr size_t kWidth = 100;  // the house's line length

// Words of `text` in lines of at most kWidth: the first starts with `first`, the others
// with `rest`.
std::string wrap(const std::string& first, const std::string& rest, const std::string& text) {
  std::istringstream is(text);
  std::string word, line = first, out;
  bool empty = true;
  while (is >> word) {
    if (!empty && line.size() + 1 + word.size() > kWidth) {
      out += line + "\n";
      line = rest + word;
    } else {
      line += (empty ? "" : " ") + word;
    }
    empty = false;
  }
  return out + line + "\n";
}

std::string size_text(int64_t b) {
  const char* units[] = {"T", "G", "M", "K"};
  const int shifts[] = {40, 30, 20, 10};
  for (int i = 0; i < 4; ++i) {
    if (b > 0 && b % (int64_t{1} << shifts[i]) == 0) return std::to_string(b >> shifts[i]) + units[i];
  }
  return std::to_string(b);
}

std::string type_text(const InfoKeySpec& k) {
  switch (k.type) {
    case InfoType::kString:
      return "string";
    case InfoType::kBool:
      return "bool";
    case InfoType::kInt:
      return "int";
    case InfoType::kSize:
      return "size";
    case InfoType::kChoice:
      return k.choices;
  }
  return "?";
}

std::string range_text(const InfoKeySpec& k) {
  if (k.type == InfoType::kInt) return std::to_string(k.min) + ".." + std::to_string(k.max);
  if (k.type == InfoType::kSize) return size_text(k.min) + ".." + size_text(k.max);
  return "";
}

std::string default_text(const char* d) { return *d ? std::string(d) : std::string("unset"); }

std::string scope_text(const InfoKeySpec& k) {
  std::vector<std::string> s;
  if (has_scope(k, InfoScope::kContext)) s.emplace_back("THUB_Init");
  if (has_scope(k, InfoScope::kRegistry)) s.emplace_back("registry");
  if (has_scope(k, InfoScope::kModel)) s.emplace_back("THUB_Open");
  if (has_scope(k, InfoScope::kEnvironment)) s.emplace_back("environment only");
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

// Does `k` belong to the list `which` (init, open, registry, env, all)?
bool listed(const InfoKeySpec& k, const std::string& which) {
  if (which == "all") return true;
  if (which == "init") return has_scope(k, InfoScope::kContext) || has_scope(k, InfoScope::kRegistry);
  if (which == "open") return has_scope(k, InfoScope::kModel);
  if (which == "registry") return has_scope(k, InfoScope::kRegistry);
  if (which == "env") return has_scope(k, InfoScope::kEnvironment);
  throw std::invalid_argument("info-keys:" + which + ": the lists are init, open, registry, env and all");
}

std::string md_cell(std::string s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string info_keys(const std::string& which, const std::string& format) {
  std::string out;
  if (format == "markdown") {
    out += "| key | type | default | range | read by | meaning |\n| --- | --- | --- | --- | --- | --- |\n";
  }
  for (const auto& k : kInfoKeys) {
    if (!listed(k, which)) continue;
    std::string range = range_text(k);
    std::string dflt = default_text(k.dflt);
    if (format == "markdown") {
      std::string d = *k.dflt ? "`" + std::string(k.dflt) + "`" : "unset";
      if (k.daemon_dflt) d += " (tensorhub-registry: `" + std::string(k.daemon_dflt) + "`)";
      out += "| `" + std::string(k.name) + "` | " + md_cell(type_text(k)) + " | " + d + " | " + range + " | " +
             scope_text(k) + " | " + md_cell(k.doc) + " |\n";
    } else if (format == "c-comment") {
      std::string head = "`" + std::string(k.name) + "` (" + type_text(k) + ", default " +
                         (*k.dflt ? "`" + std::string(k.dflt) + "`" : std::string("unset")) +
                         (range.empty() ? "" : ", " + range) +
                         (has_scope(k, InfoScope::kRegistry) ? "; registry" : "") + "): " + k.doc;
      out += wrap(" *  - ", " *    ", head);
    } else if (format == "text") {
      std::string head = std::string(k.name) + " (" + type_text(k) + ", default " + dflt +
                         (range.empty() ? "" : ", " + range) + "; " + scope_text(k) + "): " + k.doc;
      out += wrap("", "    ", head);
    } else {
      throw std::invalid_argument("info-keys: the formats are text, markdown and c-comment");
    }
  }
  return out;
}

std::string flag_value(const InfoKeySpec& k) {
  switch (k.type) {
    case InfoType::kBool:
      return "BOOL";
    case InfoType::kInt:
      return "N";
    case InfoType::kSize:
      return "SIZE";
    case InfoType::kChoice:
      return k.choices;
    case InfoType::kString:
      break;
  }
  return "TEXT";
}

std::string registry_flags(const std::string& format) {
  std::string out;
  if (format == "markdown") out += "| flag | default | range | meaning |\n| --- | --- | --- | --- |\n";
  for (const auto& k : kInfoKeys) {
    if (!has_scope(k, InfoScope::kRegistry)) continue;
    std::string flags = registry_flag(k) + " " + flag_value(k);
    if (*k.flag) flags += ", " + std::string(k.flag) + " " + flag_value(k);
    if (k.type == InfoType::kBool) flags += ", --no-" + registry_flag(k).substr(2);
    const char* d = k.daemon_dflt ? k.daemon_dflt : k.dflt;
    std::string range = range_text(k);
    if (format == "markdown") {
      out += "| `" + flags + "` | " + (*d ? "`" + std::string(d) + "`" : std::string("unset")) + " | " + range +
             " | " + md_cell(k.doc) + " (`" + environment_name(k.name) + "`) |\n";
    } else if (format == "text") {
      out += "  " + flags + "\n";
      out += wrap("      ", "      ", std::string(k.doc) + " (default " + default_text(d) +
                                         (range.empty() ? "" : ", " + range) + "; " + environment_name(k.name) + ")");
    } else {
      throw std::invalid_argument("registry-flags: the formats are text and markdown");
    }
  }
  return out;
}

std::string stat_keys(const std::string& format) {
  std::string out;
  if (format == "markdown") out += "| key | meaning |\n| --- | --- |\n";
  for (const auto& k : kStatKeys) {
    if (format == "markdown") {
      out += "| `" + std::string(k.name) + "` | " + md_cell(k.doc) + " |\n";
    } else if (format == "c-comment") {
      out += wrap(" *  - ", " *    ", "`" + std::string(k.name) + "`: " + k.doc);
    } else if (format == "text") {
      out += wrap("", "    ", std::string(k.name) + ": " + k.doc);
    } else {
      throw std::invalid_argument("stat-keys: the formats are text, markdown and c-comment");
    }
  }
  return out;
}

std::string status_codes(const std::string& format) {
  std::string out;
  if (format == "markdown") out += "| name | value | meaning | hint |\n| --- | --- | --- | --- |\n";
  size_t width = 0;
  for (const auto& c : kCodeTexts) width = std::max(width, std::string(c.name).size());
  for (const auto& c : kCodeTexts) {
    const int n = static_cast<int>(c.code);
    const std::string name = c.name;
    if (format == "markdown") {
      out += "| `" + name + "` | " + std::to_string(n) + " | " + md_cell(c.message) + " | " + md_cell(c.hint) + " |\n";
    } else if (format == "c-defines") {
      std::string v = n < 0 ? "(" + std::to_string(n) + ")" : std::to_string(n);
      std::string def = "#define " + name + std::string(width - name.size() + 1, ' ') + v;
      out += def + std::string(def.size() < 38 ? 38 - def.size() : 1, ' ') + "/**< " + c.message + " */\n";
    } else if (format == "fortran") {
      out += "  integer(c_int), parameter :: " + name + " = " + std::to_string(n) + "\n";
    } else if (format == "text") {
      out += name + " (" + std::to_string(n) + "): " + c.message + "; " + c.hint + "\n";
    } else {
      throw std::invalid_argument("status-codes: the formats are text, markdown, c-defines and fortran");
    }
  }
  return out;
}

}  // namespace

std::string render(const std::string& what, const std::string& format) {
  if (what == "info-keys") return info_keys("all", format);
  if (what.rfind("info-keys:", 0) == 0) return info_keys(what.substr(10), format);
  if (what == "registry-flags") return registry_flags(format);
  if (what == "stat-keys") return stat_keys(format);
  if (what == "status-codes") return status_codes(format);
  throw std::invalid_argument("'" + what + "': the lists are info-keys[:init|:open|:registry|:env], registry-flags, "
                              "stat-keys and status-codes");
}

std::string registry_flags_help() { return registry_flags("text"); }

}  // namespace thub::vocabulary
