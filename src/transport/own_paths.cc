// The reads that bypass UCX, as the worker drives them: over sockets to peers UCX would reach
// over its tcp transport (socket_reads.h), with process_vm_readv from sources on this host
// (process_reads.h); their entries, and the choice of a path, are in read_paths.cc. Progress
// thread only.
#include <poll.h>

#include <cstdio>
#include <cstdlib>

#include "src/transport/worker_impl.h"

namespace thub::transport {

void Worker::Impl::add_socket_fds() {
  socket_fds.clear();
  if (server) server->add_fds(&socket_fds);
  for (auto& [key, p] : peers) {
    if (p->sock) p->sock->add_fds(&socket_fds);
  }
}

// Serves and receives socket reads without blocking; completions run here, in the loop.
int Worker::Impl::progress_sockets() {
  if (!server) return 0;  // no server, no socket peers either (Worker::peer)
  add_socket_fds();
  if (::poll(socket_fds.data(), socket_fds.size(), 0) <= 0) {
    server->expire(ReadServer::Clock::now());  // deadlines pass without events too
    return 0;
  }
  int n = server->progress(socket_fds);
  SocketDone done;
  for (auto& [key, p] : peers) {
    if (!p->sock) continue;
    n += p->sock->progress(socket_fds, &done);
    if (p->sock->failed() && !p->failed) {
      p->failed = true;
      p->error = p->sock->error();
    }
  }
  for (auto& [cb, err] : done) cb(err.empty(), err);
  return n;
}

// Completions of socket reads closed from inside a caller's operation run later, from the
// loop (the caller is often the job those reads belong to; see Worker::cancel_peer).
void Worker::Impl::finish_socket_reads(SocketDone& done) {
  for (auto& [cb, err] : done) post([cb = std::move(cb), err = std::move(err)] { cb(false, err); });
  done.clear();
}

// Process reads: a slice per peer per pass, round robin, so that a big read neither starves
// UCX and the sockets nor holds lane 1's counter reads behind lane 0's chunks. Completions run
// here, in the loop, after the walk (a callback may create or drop peers).
int Worker::Impl::progress_process_reads() {
  if (!process_reads || outstanding == 0) return 0;
  SocketDone done;
  int n = 0;
  for (auto& [key, p] : peers) {
    if (!p->proc || p->proc->outstanding() == 0) continue;
    n += p->proc->progress(ProcessReader::kSlice, &done) > 0;
    if (p->proc->failed() && !p->failed) {
      p->failed = true;
      p->error = p->proc->error();
    }
  }
  for (auto& [cb, err] : done) cb(err.empty(), err);
  return n + static_cast<int>(done.size());
}

}  // namespace thub::transport
