// thub-update-lists [--check] FILE...: rewrites (or, with --check, compares) every list a
// file keeps between a line holding
//     BEGIN GENERATED <what> <format>
// and the next line holding END GENERATED, from the tables (render.h). With --check it
// changes nothing and fails, naming the file and line, where a list differs: the CTest
// GeneratedListsAreCurrent runs it on the header, the README, docs/info-keys.md and the
// Fortran module. The target update-generated-lists rewrites them.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/vocabulary/render.h"

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> v;
  std::istringstream is(text);
  std::string l;
  while (std::getline(is, l)) v.push_back(l);
  return v;
}

// The file with every generated list as the tables say; `err` for a malformed marker.
std::string regenerate(const std::string& path, const std::vector<std::string>& in, std::string* err) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    out += in[i] + "\n";
    size_t at = in[i].find("BEGIN GENERATED ");
    if (at == std::string::npos) continue;
    std::istringstream spec(in[i].substr(at + 16));
    std::string what, format;
    spec >> what >> format;
    size_t end = i + 1;
    while (end < in.size() && in[end].find("END GENERATED") == std::string::npos) ++end;
    if (end == in.size()) {
      *err = path + ":" + std::to_string(i + 1) + ": BEGIN GENERATED without END GENERATED";
      return {};
    }
    try {
      out += thub::vocabulary::render(what, format);
    } catch (const std::exception& e) {
      *err = path + ":" + std::to_string(i + 1) + ": " + e.what();
      return {};
    }
    out += in[end] + "\n";
    i = end;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  bool check = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--check") check = true;
    else files.push_back(a);
  }
  if (files.empty()) {
    std::cerr << "usage: thub-update-lists [--check] FILE...\n";
    return 2;
  }
  int rc = 0;
  for (const auto& path : files) {
    std::ifstream f(path);
    if (!f) {
      std::cerr << path << ": cannot read\n";
      return 2;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string before = ss.str();
    std::string err;
    const std::string after = regenerate(path, lines_of(before), &err);
    if (!err.empty()) {
      std::cerr << err << "\n";
      return 2;
    }
    if (after == before) continue;
    if (check) {
      std::vector<std::string> a = lines_of(before), b = lines_of(after);
      size_t n = 0;
      while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
      std::cerr << path << ":" << n + 1 << ": differs from the tables\n  file:   "
                << (n < a.size() ? a[n] : "(end)") << "\n  tables: " << (n < b.size() ? b[n] : "(end)")
                << "\nRegenerate with: cmake --build <build> --target update-generated-lists\n";
      rc = 1;
    } else {
      std::ofstream o(path, std::ios::trunc);
      o << after;
      if (!o) {
        std::cerr << path << ": cannot write\n";
        return 2;
      }
      std::cout << "updated " << path << "\n";
    }
  }
  return rc;
}
