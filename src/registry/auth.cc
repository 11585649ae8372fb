#include "src/registry/auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "src/common/codec.h"
#include "src/common/crypto.h"
#include "src/common/status.h"
#include "src/registry/protocol.h"

namespace thub::registry {

namespace {
// Length-prefixed fields (the codec's str), so that no two transcripts hash alike.
std::string proof(std::string_view token, const char* label, const Transcript& t) {
  Writer w;
  w.str(label).str(t.client_nonce).str(t.registry_nonce).str(t.datacenter);
  Sha256::Digest d = hmac_sha256(token, w.data());
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}
}  // namespace

std::string client_proof(std::string_view token, const Transcript& t) {
  return proof(token, "TensorHub control plane v2: client proof", t);
}

std::string registry_proof(std::string_view token, const Transcript& t) {
  return proof(token, "TensorHub control plane v2: registry proof", t);
}

std::string frame_key(std::string_view token, const Transcript& t, bool client_to_registry) {
  return proof(token,
               client_to_registry ? "TensorHub control plane v4: frames client to registry"
                                  : "TensorHub control plane v4: frames registry to client",
               t);
}

std::string FrameMac::tag(std::string_view header, std::string_view body) const {
  HmacSha256 h(key_);
  uint8_t seq[8];
  for (int i = 0; i < 8; ++i) seq[i] = static_cast<uint8_t>(seq_ >> (8 * i));
  h.update(seq, sizeof seq);
  h.update(header);
  h.update(body);
  Sha256::Digest d = h.finish();
  return std::string(reinterpret_cast<const char*>(d.data()), kMacBytes);
}

void FrameMac::seal(std::string& frame) {
  if (!on()) return;
  if (frame.size() < kHeaderBytes) throw CodecError("not a frame");
  const uint64_t length = frame.size() - kHeaderBytes + kMacBytes;
  if (length > kMaxPayload) throw CodecError("payload with its MAC exceeds the frame limit");
  for (int i = 0; i < 4; ++i) frame[kHeaderBytes - 4 + i] = static_cast<char>((length >> (8 * i)) & 0xff);
  std::string_view f(frame);
  std::string t = tag(f.substr(0, kHeaderBytes), f.substr(kHeaderBytes));
  frame += t;
  ++seq_;
}

std::string_view FrameMac::open(std::string_view header, std::string_view payload) {
  if (!on()) return payload;
  if (payload.size() < kMacBytes) {
    throw CodecError("frame " + std::to_string(seq_) + " carries no MAC (" + std::to_string(payload.size()) +
                     " bytes): every frame after the handshake must");
  }
  std::string_view body = payload.substr(0, payload.size() - kMacBytes);
  if (!constant_time_equal(payload.substr(body.size()), tag(header, body))) {
    throw CodecError("frame " + std::to_string(seq_) +
                     " failed its MAC: changed, replayed, reordered or forged by someone without the token");
  }
  ++seq_;
  return body;
}

bool RecentNonces::seen_before(const std::string& nonce) {
  if (set_.count(nonce)) return true;
  if (capacity_ == 0) return false;
  if (order_.size() >= capacity_) {
    set_.erase(order_.front());
    order_.pop_front();
  }
  set_.insert(nonce);
  order_.push_back(nonce);
  return false;
}

std::string token_from(const std::string& token, const std::string& file) {
  if (file.empty()) return token;
  if (!token.empty()) throw Error(Code::kArg, "give auth_token or auth_token_file, not both");
  return read_token_file(file);
}

std::string read_token_file(const std::string& path) {
  auto refuse = [&](const std::string& why) { return Error(Code::kArg, "auth token file '" + path + "': " + why); };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw refuse(std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw refuse(std::strerror(errno));  // the file opened, not the path again
  if (!S_ISREG(st.st_mode)) throw refuse("not a regular file");
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw refuse(std::string("permissions ") + mode +
                 " are too open: group or others may access it; the token must be readable by its owner only "
                 "(chmod 600)");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxTokenFileBytes) {
    throw refuse("larger than " + std::to_string(kMaxTokenFileBytes) + " bytes: not a token");
  }
  std::string token;
  char buf[4096];
  for (;;) {
    ssize_t k = ::read(fd, buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) throw refuse(std::strerror(errno));
    if (k == 0) break;
    token.append(buf, static_cast<size_t>(k));
    if (token.size() > kMaxTokenFileBytes) throw refuse("larger than " + std::to_string(kMaxTokenFileBytes) + " bytes");
  }
  if (!token.empty() && token.back() == '\n') {
    token.pop_back();
    if (!token.empty() && token.back() == '\r') token.pop_back();
  }
  if (token.empty()) throw refuse("empty: an empty token would mean no authentication");
  return token;
}

}  // namespace thub::registry
