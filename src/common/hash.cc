#include "src/common/hash.h"

#include <new>

#include <xxhash.h>

namespace thub {

uint64_t hash64(const void* p, size_t n, uint64_t seed) { return XXH3_64bits_withSeed(p, n, seed); }

BlockHasher::BlockHasher() : state_(XXH3_createState()) {
  if (!state_) throw std::bad_alloc();
  reset();
}
BlockHasher::~BlockHasher() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }
void BlockHasher::reset() { XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_)); }
void BlockHasher::update(const void* p, size_t n) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), p, n);
}
uint64_t BlockHasher::digest() const { return XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_)); }

}  // namespace thub
