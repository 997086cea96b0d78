#pragma once
// The draw from a weighted list of tokens, one definition for the two places that must draw
// alike: the Sampler (sampling.cpp) and the speculative rule's residual draw
// (llm/speculative_acceptance.cpp), whose distribution test compares the two.
#include <cstdint>
#include <span>

#include "vkformer/sampling.hpp"

namespace vkformer::models {

// The first token whose running weight sum exceeds u x the total (u in [0, 1)); the weights
// need not sum to 1. `weights` must not be empty.
inline int32_t draw_token(std::span<const TokenProbability> weights, double u) {
  double total = 0;
  for (const TokenProbability& w : weights) total += w.probability;
  const double target = u * total;
  double cum = 0;
  for (const TokenProbability& w : weights) {
    cum += w.probability;
    if (target < cum) return w.token;
  }
  return weights.back().token;  // rounding left the target at the very end
}

}  // namespace vkformer::models
