// Reads of registered host memory over plain TCP sockets: the data path to peers that UCX
// would reach over its tcp transport. UCX 1.13 serves a get over TCP in software, from the
// source's worker, and three of its paths abort the *source* when a reader dies at the wrong
// moment (docs/pipeline.md, "A reader's death never kills its source"). Here the source
// answers a read by writing the bytes from its memory into the socket (one kernel copy) and
// the reader receives them straight into its buffer; a dead or cancelled peer is a closed
// socket on both sides, nothing more. Progress thread only; no UCX type, no thread.
//
// A read may *watch* an 8-byte word of the source (its progress counter, in a region it
// serves): the source then holds the reply back while the word lies in [lo, hi) (the bytes
// asked for are not there yet: a *parked* read), and after the last byte of the data has gone
// into the socket it reads the word again and sends it behind the data (the *sample*). The
// reader thus learns that bytes are ready, gets them, and gets the seqlock's vouch for them
// (progress_counter.h: a counter read after the data read) in one message, with no round trip
// of its own: a chain of readers forwards a chunk as soon as it has it, as a broadcast would.
#pragma once

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace thub::transport {

// Where a ReadServer listens: its port and the IPv4 addresses (network order) to try.
struct SocketEndpoint {
  uint16_t port = 0;
  std::vector<uint32_t> ipv4;
};

// The IPv4 addresses of the named interfaces ("eth0,ib0:1" -> eth0's; names with a ':' are
// RDMA ports and skipped); with none named or found, of every interface that is up and not
// loopback; with none of those, 127.0.0.1.
std::vector<uint32_t> local_ipv4(const std::string& devices);

// What one ReadServer lets its peers hold (issue 19: 1,100 idle connections, no greeting, no
// token, once took a trainer's file descriptors to their limit and its progress thread then
// spun on a listening socket it could not accept from). A connection is *pending* until it
// has presented a valid token (the greeting is no credential); pending ones are few per peer
// address and have a deadline; every connection counts against a total below the process's
// descriptor limit; replies a reader does not take for write_deadline close its connection;
// a connection idle for idle_deadline is closed (the reader's next transfer opens another).
// Out of descriptors (EMFILE, ENFILE), accepting pauses for accept_pause.
struct ReadServerLimits {
  size_t max_connections = 1024;         // and at most half the soft RLIMIT_NOFILE
  size_t max_per_peer = 256;             // connections from one IPv4 address
  size_t max_pending = 256;              // connections not yet authenticated, in all
  size_t max_pending_per_peer = 64;      // ... from one address
  std::chrono::milliseconds pending_deadline{10'000};
  std::chrono::milliseconds idle_deadline{120'000};
  std::chrono::milliseconds write_deadline{30'000};
  std::chrono::milliseconds accept_pause{100};
};

// What a read watches (see the top of this file): the word at `addr` of the region served
// under `token`; the reply waits while it lies in [lo, hi), and its value after the data is
// written to *sample before the read completes.
struct ReadWatch {
  uint64_t addr = 0;
  uint64_t token = 0;
  uint64_t lo = 0, hi = 0;
  uint64_t* sample = nullptr;
};

// Serves reads of the regions it was told about to every reader that connects.
class ReadServer {
 public:
  using Clock = std::chrono::steady_clock;
  // Listens on each address of `advertise` (and nowhere else), on one free port. Throws
  // Error(kTransport) when it cannot, Error(kArg) for an empty list.
  explicit ReadServer(std::vector<uint32_t> advertise, ReadServerLimits limits = {});
  ~ReadServer();
  ReadServer(const ReadServer&) = delete;
  ReadServer& operator=(const ReadServer&) = delete;

  [[nodiscard]] SocketEndpoint endpoint() const { return {port_, advertise_}; }
  // Readers presenting `token` (unique per region) may read [addr, addr + len).
  void serve(uint64_t addr, uint64_t len, uint64_t token);
  // No more reads of that region: connections with a reply from it still queued are closed
  // (its bytes are never read after this returns).
  void withdraw(uint64_t token);

  // Adds its descriptors with the events wanted; progress() then handles what poll() saw in
  // them (the same vector, before anything else changes it).
  void add_fds(std::vector<pollfd>* fds);
  // Accepts, reads requests, writes replies, without blocking; returns the events handled.
  int progress(const std::vector<pollfd>& fds);
  // Closes connections past their deadlines (also when poll() saw nothing); cheap to call often.
  void expire(Clock::time_point now);
  [[nodiscard]] size_t connections() const { return conns_.size(); }
  [[nodiscard]] size_t pending() const;
  [[nodiscard]] bool accepting() const { return Clock::now() >= paused_until_; }
  [[nodiscard]] size_t connection_limit() const { return max_conns_; }
  [[nodiscard]] uint64_t refused() const { return refused_; }  // connections closed at accept (caps)
  // Some reply waits for its watched word (parked): the word may be moved by another thread,
  // so the caller must not sleep long (the worker polls again within a millisecond).
  [[nodiscard]] bool parked() const;

 private:
  struct Reply {
    char header[24];
    const char* data;
    uint64_t len;
    uint64_t sent = 0;  // of header + data (+ trailer)
    const uint64_t* watch = nullptr;  // the watched word (nullptr: no watch, no trailer)
    uint64_t lo = 0, hi = 0;
    char trailer[8];
    bool sampled = false;  // trailer holds the word as it was after the data went out
    [[nodiscard]] uint64_t total() const { return 24 + len + (watch ? 8 : 0); }
  };
  static bool waiting(const Reply& r);  // parked: nothing sent yet and the word in [lo, hi)
  struct Conn {
    int fd = -1;
    uint32_t ip = 0;
    bool greeted = false;
    bool authed = false;  // has presented a valid token
    Clock::time_point since, last_active, write_stuck;  // write_stuck: replies queued, none sent since
    std::string in;
    std::deque<Reply> out;
  };
  void accept_all(int listen_fd);
  bool read_requests(Conn& c);   // false: close it
  void parse_requests(Conn& c);
  bool write_replies(Conn& c);   // false: close it
  void close_conn(Conn& c);

  ReadServerLimits limits_;
  size_t max_conns_ = 0;
  Clock::time_point paused_until_{};
  Clock::time_point next_expiry_{};
  uint64_t refused_ = 0;
  std::map<uint32_t, size_t> per_peer_, pending_per_peer_;
  size_t pending_ = 0;
  void count(const Conn& c, int d);
  std::vector<int> listen_fds_;  // one per advertised address
  uint16_t port_ = 0;
  std::vector<uint32_t> advertise_;
  struct Region {
    uint64_t addr;
    uint64_t len;
  };
  std::map<uint64_t, Region> regions_;  // by token
  std::vector<std::unique_ptr<Conn>> conns_;
  size_t fd_base_ = 0, fd_count_ = 0;  // its slice of the vector add_fds filled
};

// A reader's connection to one ReadServer: reads are answered in the order asked.
class ReadConnection {
 public:
  using Done = std::function<void(bool ok, const std::string& err)>;
  // Starts connecting (non-blocking) to the first address of `to`; the next on failure.
  explicit ReadConnection(SocketEndpoint to);
  ~ReadConnection();
  ReadConnection(const ReadConnection&) = delete;
  ReadConnection& operator=(const ReadConnection&) = delete;

  // Queues a read of `len` bytes at `remote` into `local`. `done` is returned by a later
  // progress() or close(), never called from here.
  // With `watch`, the source parks the reply while the watched word is in [lo, hi) and sends
  // the word's value after the data (written to *watch->sample before `done`).
  void read(void* local, uint64_t len, uint64_t remote, uint64_t token, Done done, const ReadWatch* watch = nullptr);
  [[nodiscard]] bool failed() const { return fd_ < 0; }
  [[nodiscard]] const std::string& error() const { return error_; }
  [[nodiscard]] size_t outstanding() const { return ops_.size(); }

  void add_fds(std::vector<pollfd>* fds);
  // Connects, writes requests, receives replies; the completions due are appended to `done`
  // (an empty text: the read succeeded).
  int progress(const std::vector<pollfd>& fds, std::vector<std::pair<Done, std::string>>* done);
  // Closes the socket: every outstanding read completes with `why` (appended to `done`).
  void close(const std::string& why, std::vector<std::pair<Done, std::string>>* done);

 private:
  struct Op {
    uint64_t id;
    char* dst;
    uint64_t len;
    Done done;
    uint64_t* sample = nullptr;  // a trailer follows the data (the read watched a word)
  };
  bool start_connect();  // to addresses_[next_]; false when none is left
  bool flush();
  bool receive(std::vector<std::pair<Done, std::string>>* done);

  SocketEndpoint to_;
  size_t next_ = 0;
  int fd_ = -1;
  bool connected_ = false;
  std::string error_;
  std::string out_;
  size_t out_sent_ = 0;
  std::deque<Op> ops_;
  uint64_t next_id_ = 1;
  char hdr_[24];
  size_t hdr_got_ = 0;
  uint64_t data_got_ = 0;
  char trailer_[8];
  size_t trailer_got_ = 0;
  long fd_index_ = -1;  // its entry in the vector add_fds filled
};

}  // namespace thub::transport
