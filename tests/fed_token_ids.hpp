// Deterministic token ids in [1, vocab), fed rather than sampled, so that two runs compared with
// each other (alone vs batched, shifted vs rebuilt) see the same ids whatever the logits' near-ties.
#pragma once

#include <cstdint>
#include <vector>

inline std::vector<int32_t> ids(int64_t n, int64_t vocab, uint32_t seed) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761u + 12345u;
  for (auto& t : v) {
    x = x * 1664525u + 1013904223u;
    t = static_cast<int32_t>(1 + (x >> 8) % static_cast<uint32_t>(vocab - 1));
  }
  return v;
}
