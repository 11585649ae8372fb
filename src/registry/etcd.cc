#include "src/registry/etcd.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "src/common/codec.h"
#include "src/common/status.h"
#include "src/registry/socket.h"

namespace thub::registry {

namespace {

using nlohmann::json;

constexpr size_t kMaxResponseBytes = 1u << 20;  // etcd's answers here are a few hundred bytes

// etcd's gateway writes int64 fields as JSON strings, and leaves out those that are 0.
int64_t number(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    try {
      size_t used = 0;
      long long v = std::stoll(s, &used);
      if (used == s.size()) return v;
    } catch (const std::exception&) {
    }
  }
  throw Error(Code::kRegistry, std::string("etcd answered a field ") + key + " that is not a number");
}

// The body of an HTTP/1.1 response (Content-Length, chunked, or up to the close).
std::string http_body(const std::string& raw, const std::string& where) {
  size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos) throw Error(Code::kRegistry, "etcd " + where + " sent no whole HTTP response");
  std::string head = raw.substr(0, end);
  std::string body = raw.substr(end + 4);
  int status = 0;
  if (std::sscanf(head.c_str(), "HTTP/%*d.%*d %d", &status) != 1) {
    throw Error(Code::kRegistry, "etcd " + where + " sent no HTTP status line");
  }
  std::string lower = head;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("transfer-encoding: chunked") != std::string::npos) {
    std::string out;
    size_t at = 0;
    for (;;) {
      size_t eol = body.find("\r\n", at);
      if (eol == std::string::npos) throw Error(Code::kRegistry, "etcd " + where + " sent a cut chunk");
      size_t n = 0;
      try {
        n = std::stoul(body.substr(at, eol - at), nullptr, 16);
      } catch (const std::exception&) {
        throw Error(Code::kRegistry, "etcd " + where + " sent a bad chunk size");
      }
      at = eol + 2;
      if (n == 0) break;
      if (n > body.size() - at) throw Error(Code::kRegistry, "etcd " + where + " sent a cut chunk");
      out.append(body, at, n);
      at += n + 2;
      if (at > body.size()) break;
    }
    body = std::move(out);
  } else if (size_t cl = lower.find("content-length:"); cl != std::string::npos) {
    size_t n = std::strtoul(lower.c_str() + cl + 15, nullptr, 10);
    if (n < body.size()) body.resize(n);
  }
  if (status != 200) {
    std::string msg = body;
    try {
      json j = json::parse(body);
      if (j.contains("message") && j["message"].is_string()) msg = j["message"].get<std::string>();
    } catch (const json::exception&) {
    }
    throw Error(Code::kRegistry, "etcd " + where + " answered HTTP " + std::to_string(status) + ": " + msg);
  }
  return body;
}

json parse(const std::string& body, const std::string& what) {
  try {
    json j = json::parse(body);
    if (!j.is_object()) throw Error(Code::kRegistry, "etcd's answer to " + what + " is not a JSON object");
    // A stream's message (lease keepalive) comes wrapped: {"result": {...}} or {"error": {...}}.
    if (j.contains("error")) {
      std::string m = j["error"].is_object() && j["error"].contains("message") ? j["error"]["message"].dump()
                                                                                : j["error"].dump();
      throw Error(Code::kRegistry, "etcd refused " + what + ": " + m);
    }
    if (j.contains("result") && j["result"].is_object()) return j["result"];
    return j;
  } catch (const json::exception& e) {
    throw Error(Code::kRegistry, "etcd's answer to " + what + " is not JSON: " + e.what());
  }
}

}  // namespace

std::string base64_encode(const std::string& s) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((s.size() + 2) / 3 * 4);
  for (size_t i = 0; i < s.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(s[i]) << 16;
    if (i + 1 < s.size()) v |= static_cast<uint8_t>(s[i + 1]) << 8;
    if (i + 2 < s.size()) v |= static_cast<uint8_t>(s[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < s.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < s.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

std::string base64_decode(const std::string& s) {
  if (s.size() % 4 != 0) throw CodecError("base64 of " + std::to_string(s.size()) + " characters");
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); i += 4) {
    const bool last = i + 4 == s.size();
    int pad = last ? (s[i + 3] == '=') + (s[i + 2] == '=' && s[i + 3] == '=') : 0;
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      int d = k >= 4 - pad ? 0 : value(s[i + k]);
      if (d < 0) throw CodecError("not base64");
      v = v << 6 | static_cast<uint32_t>(d);
    }
    out += static_cast<char>(v >> 16);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

bool is_etcd_spec(const std::string& s) { return s.rfind("etcd://", 0) == 0; }

std::string EtcdTarget::text() const {
  std::string s = "etcd://";
  for (size_t i = 0; i < endpoints.size(); ++i) {
    s += (i ? "," : "") + endpoints[i].host + ":" + std::to_string(endpoints[i].port);
  }
  return s + prefix;
}

EtcdTarget parse_etcd_target(const std::string& spec) {
  if (!is_etcd_spec(spec)) throw Error(Code::kArg, "'" + spec + "' is not etcd://host:port[,host:port]/prefix");
  std::string rest = spec.substr(7);
  size_t slash = rest.find('/');
  if (slash == std::string::npos || slash + 1 >= rest.size()) {
    throw Error(Code::kArg, "'" + spec + "' names no key prefix (etcd://host:port/prefix)");
  }
  EtcdTarget t;
  t.endpoints = parse_address_list(rest.substr(0, slash));
  if (t.endpoints.empty()) throw Error(Code::kArg, "'" + spec + "' names no etcd endpoint");
  for (const HostPort& hp : t.endpoints) {
    if (hp.host.empty() || hp.port == 0) throw Error(Code::kArg, "'" + spec + "': an endpoint needs a host and a port");
  }
  t.prefix = rest.substr(slash);
  while (t.prefix.size() > 1 && t.prefix.back() == '/') t.prefix.pop_back();
  return t;
}

EtcdClient::EtcdClient(EtcdTarget target, int timeout_ms) : target_(std::move(target)), timeout_ms_(timeout_ms) {}

std::string EtcdClient::post(const std::string& path, const std::string& body) {
  std::string errors;
  for (const HostPort& hp : target_.endpoints) {
    const std::string where = hp.host + ":" + std::to_string(hp.port);
    try {
      const int64_t deadline = steady_ms() + timeout_ms_;
      Fd fd = connect_tcp(hp, timeout_ms_);
      std::string req = "POST " + path + " HTTP/1.1\r\nHost: " + where +
                        "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body;
      if (!write_all(fd.get(), req.data(), req.size())) throw Error(Code::kRegistry, "etcd " + where + ": send failed");
      std::string raw;
      char buf[16384];
      for (;;) {
        int64_t left = deadline - steady_ms();
        if (left <= 0) {
          throw Error(Code::kRegistry, "etcd " + where + " did not answer " + path + " within " +
                                           std::to_string(timeout_ms_) + " ms");
        }
        pollfd p{fd.get(), POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
        ssize_t k = ::recv(fd.get(), buf, sizeof buf, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;  // the answer ends with the connection (Connection: close)
        raw.append(buf, static_cast<size_t>(k));
        if (raw.size() > kMaxResponseBytes) throw Error(Code::kRegistry, "etcd " + where + " answered too much");
      }
      return http_body(raw, where);
    } catch (const Error& e) {
      errors += std::string(errors.empty() ? "" : "; ") + e.what();
    }
  }
  throw Error(Code::kRegistry, "no etcd endpoint of " + target_.text() + " answered: " + errors);
}

EtcdClient::Lease EtcdClient::grant(int64_t ttl_s) {
  json j = parse(post("/v3/lease/grant", json{{"TTL", ttl_s}}.dump()), "a lease grant");
  Lease l{number(j, "ID"), number(j, "TTL")};
  if (l.id == 0 || l.ttl_s <= 0) throw Error(Code::kRegistry, "etcd granted no lease: " + j.dump());
  return l;
}

int64_t EtcdClient::keepalive(int64_t lease) {
  json j = parse(post("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}.dump()), "a lease keepalive");
  return number(j, "TTL");
}

void EtcdClient::revoke(int64_t lease) {
  try {
    post("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}.dump());
  } catch (const Error&) {
  }
}

EtcdClient::Campaign EtcdClient::campaign(const std::string& value, int64_t lease) {
  const std::string key = base64_encode(target_.leader_key());
  json txn = {
      {"compare", json::array({{{"key", key}, {"result", "EQUAL"}, {"target", "CREATE"}, {"create_revision", "0"}}})},
      {"success",
       json::array({{{"request_put", {{"key", key}, {"value", base64_encode(value)}, {"lease", std::to_string(lease)}}}}})},
      {"failure", json::array({{{"request_range", {{"key", key}}}}})}};
  json j = parse(post("/v3/kv/txn", txn.dump()), "a campaign");
  Campaign c;
  auto succeeded = j.find("succeeded");  // absent when false; anything but a boolean is no win
  c.won = succeeded != j.end() && succeeded->is_boolean() && succeeded->get<bool>();
  if (c.won) {
    c.leader = value;
    return c;
  }
  try {
    const json& kvs = j.at("responses").at(0).at("response_range").at("kvs");
    if (kvs.is_array() && !kvs.empty()) c.leader = base64_decode(kvs.at(0).value("value", std::string()));
  } catch (const json::exception&) {
  } catch (const CodecError&) {
  }
  return c;
}

std::optional<std::string> EtcdClient::leader() {
  json j = parse(post("/v3/kv/range", json{{"key", base64_encode(target_.leader_key())}}.dump()), "a leader read");
  auto it = j.find("kvs");
  if (it == j.end() || !it->is_array() || it->empty()) return std::nullopt;
  try {
    std::string v = base64_decode((*it)[0].value("value", std::string()));
    if (v.empty()) return std::nullopt;
    return v;
  } catch (const CodecError& e) {
    throw Error(Code::kRegistry, std::string("etcd holds a leader value that is not base64: ") + e.what());
  } catch (const json::exception& e) {
    throw Error(Code::kRegistry, std::string("etcd's leader entry does not read: ") + e.what());
  }
}

}  // namespace thub::registry
