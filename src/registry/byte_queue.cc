#include "src/registry/byte_queue.h"

namespace thub::registry {

void ByteQueue::consume(size_t n) {
  off_ += n < size() ? n : size();
  if (off_ == buf_.size()) {
    clear();
  } else if (off_ >= kCompactAt && off_ >= buf_.size() - off_) {
    // What remains is no longer than what was consumed since the last compaction.
    moved_ += buf_.size() - off_;
    buf_.erase(0, off_);
    off_ = 0;
  }
}

void ByteQueue::clear() {
  buf_.clear();
  off_ = 0;
  if (buf_.capacity() > (1u << 20)) buf_.shrink_to_fit();  // a large frame's memory goes back
}

}  // namespace thub::registry
