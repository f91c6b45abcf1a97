// A fast 64-bit content hash, computed while a file is copied up from the folder so a layer
// remembers what it copied (Base::hash). Not cryptographic: it tells "the folder's file still
// has the bytes the agent started from" apart from "it changed", together with size and times.
// Streaming: update() may be called with any split of the input; digest() is the same for
// every split.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace shadowfs {

class ContentHash {
 public:
  void update(const char* p, size_t n) {
    total_ += n;
    if (pending_) {
      size_t take = n < 8 - pending_ ? n : 8 - pending_;
      std::memcpy(buf_ + pending_, p, take);
      pending_ += take;
      p += take;
      n -= take;
      if (pending_ < 8) return;
      mix(load(buf_));
      pending_ = 0;
    }
    for (; n >= 8; p += 8, n -= 8) mix(load(p));
    std::memcpy(buf_, p, n);
    pending_ = n;
  }

  uint64_t digest() const {
    uint64_t h = h_;
    if (pending_) {
      unsigned char tail[8] = {0};
      std::memcpy(tail, buf_, pending_);
      h = step(h, load(reinterpret_cast<const char*>(tail)) ^ (uint64_t{pending_} << 56));
    }
    h ^= total_ * kMulB;
    // Final avalanche so that every input bit reaches every output bit.
    h ^= h >> 31;
    h *= kMulA;
    h ^= h >> 29;
    h *= kMulB;
    h ^= h >> 32;
    return h;
  }

 private:
  static constexpr uint64_t kMulA = 0xd6e8feb86659fd93ull;
  static constexpr uint64_t kMulB = 0xa0761d6478bd642full;
  static uint64_t load(const char* p) {
    uint64_t w = 0;
    for (int i = 7; i >= 0; --i) w = (w << 8) | static_cast<unsigned char>(p[i]);  // little-endian
    return w;
  }
  static uint64_t step(uint64_t h, uint64_t w) {
    w *= kMulA;
    w ^= w >> 32;
    h ^= w;
    h = (h << 27) | (h >> 37);
    return h * kMulB + 0x9e3779b97f4a7c15ull;
  }
  void mix(uint64_t w) { h_ = step(h_, w); }

  uint64_t h_ = 0x243f6a8885a308d3ull;
  uint64_t total_ = 0;
  char buf_[8] = {0};
  size_t pending_ = 0;
};

}  // namespace shadowfs
