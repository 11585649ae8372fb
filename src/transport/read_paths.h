// The read paths behind one interface (issue 21 item 1), in the manner of UCT's interface
// operations or NCCL's transport table. Each entry says which sources it can reach (open: its
// set-up per source), which memory of a source it reads (reads: per remote key), how it reads
// a range, and how it is torn down (what is in flight fails; nothing lands later). The choice
// is made in one place each: Worker::peer() offers a new source to the entries in
// kSourceOrder and the first that takes it is the source's path (UCX's endpoint last, which
// takes any), logged once per source (THUB_DEBUG); Worker::get() and Worker::read_path() take
// the first entry in kReadOrder that reads the key. A new path is a new entry. Inside
// src/transport only; progress thread only.
#pragma once

#include <array>
#include <memory>
#include <string>

#include "src/transport/worker_impl.h"

namespace thub::transport {

struct ReadPathOps {
  ReadPath kind;
  const char* name;  // as in the stat keys bytes_<name>
  // Takes the source `p` (address decoded) when this path can reach it, setting up what it
  // reads through; false, with *why when it could have and the source refused, otherwise.
  // nullptr: never a source's path (set up per key instead: UCX's mapped segment).
  bool (*open)(Worker::Impl& w, Peer& p, const DecodedAddress& a, std::string* why);
  // Reads memory named by `key` at `p` (set up by open(), or by Worker::remote_key()).
  bool (*reads)(const Peer& p, const RemoteKey& key);
  // One read of [remote, remote + len) into `local`; `cb` runs on the progress thread, never
  // before this returns.
  void (*read)(Worker::Impl& w, const std::shared_ptr<Peer>& p, void* local, size_t len, uint64_t remote,
               const RemoteKey& key, GetCallback cb);
  // The same read, watching a word of the source (Worker::get_watched); nullptr: this path
  // cannot (only the sockets' server reads the word between the data and its reply).
  void (*read_watched)(Worker::Impl& w, const std::shared_ptr<Peer>& p, void* local, size_t len, uint64_t remote,
                       const RemoteKey& key, const Worker::Watch& watch, GetCallback cb);
  // Tears down what open() set up: reads in flight fail into *done (the caller runs them);
  // none lands later. nullptr: UCX's endpoints, which Worker::Impl::retire() closes.
  void (*close)(Peer& p, const std::string& why, Worker::Impl::SocketDone* done);
};

// The entries, in the order a new source is offered to them, and a read's key.
extern const std::array<const ReadPathOps*, 3> kSourceOrder;  // process, socket, UCX endpoint
extern const std::array<const ReadPathOps*, kReadPathCount> kReadOrder;
const ReadPathOps& read_path_ops(ReadPath k);
// The entry that reads `key` at `p` (the first in kReadOrder).
const ReadPathOps& read_path_for(const Peer& p, const RemoteKey& key);

}  // namespace thub::transport
