// Helpers shared by the two-process benchmarks: a median, and line messages over pipes.
// Each program defines `[[noreturn]] void die(const std::string&)` (prints its name, exits).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

[[noreturn]] void die(const std::string& what);

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

inline void write_line(int fd, const std::string& s) {
  std::string l = s + "\n";
  if (write(fd, l.data(), l.size()) != static_cast<ssize_t>(l.size())) die("pipe write");
}

inline std::string read_line(FILE* f) {
  char buf[512];
  if (!std::fgets(buf, sizeof buf, f)) die("pipe read (the other process died?)");
  std::string s(buf);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}
