#pragma once
// Choosing the next token from a language model's logits, as llama.cpp's common sampler chain
// does (common/sampling.cpp with its default order), so the same options mean the same thing:
//
//   1. repetition penalty  over the last `repeat_last_n` accepted tokens (each distinct token
//                          once): a positive logit is divided by `repeat_penalty`, a negative
//                          one multiplied by it (llama.cpp's rule). 1 = off.
//   2. top-k               keep the k largest logits. 0 = off.
//   3. top-p (nucleus)     softmax over what is left; keep the most likely tokens until their
//                          probabilities sum to >= top_p (the one crossing it included). 1 = off.
//   4. min-p               keep tokens whose probability is >= min_p x the largest one's
//                          (logit >= max + log(min_p)). 0 = off.
//   5. temperature         divide the logits by it; then softmax and draw one token.
//                          0 = greedy: the largest logit after step 1 (steps 2-4 never remove it).
//
// Ranking ties are broken by the lower token id. A NaN logit counts as -inf (never chosen); +inf
// logits share all the probability equally. Logits that are all NaN or -inf are invalid_argument.
//
// Draws are deterministic across runs and platforms: std::mt19937_64 seeded with `seed`, and
// this file's own uniform-to-index code (53 random bits to a double in [0, 1), then the first
// token whose running probability sum exceeds u x the total), never std::*_distribution, whose
// output the standard leaves to each library.
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace vkformer {

struct SamplingOptions {
  float temperature = 0.0f;    // >= 0; 0 = greedy
  int32_t top_k = 0;           // >= 0; 0 = off
  float top_p = 1.0f;          // in (0, 1]; 1 = off
  float min_p = 0.0f;          // in [0, 1]; 0 = off
  float repeat_penalty = 1.0f; // > 0; 1 = off
  int32_t repeat_last_n = 64;  // >= 0: how many of the latest accepted tokens it looks at
  uint64_t seed = 0;
};

// Throws ErrorCode::invalid_argument naming the option, its range and the value given (NaN
// included) unless every option is in its range.
void validate(const SamplingOptions& options);

// One candidate of the distribution a draw is made from.
struct TokenProbability {
  int32_t token;
  double probability;
};

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options = {});  // validates

  // The next token for these logits (one per vocabulary entry). Does not accept it: call
  // accept() with whatever token is actually appended (the prompt's tokens too, as llama.cpp's
  // tools do, so the repetition penalty sees them).
  int32_t sample(std::span<const float> logits);
  void accept(int32_t token);
  void accept(std::span<const int32_t> tokens);

  // Steps 1-5 without the draw: the candidates left, most likely first (ties: lower id), with
  // probabilities summing to 1. Greedy gives the one token with probability 1.
  std::vector<TokenProbability> distribution(std::span<const float> logits) const;

  // Forgets the accepted tokens and starts the random sequence again from the seed.
  void reset();

  const SamplingOptions& options() const { return options_; }
  const std::vector<int32_t>& history() const { return history_; }

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
  std::vector<int32_t> history_;  // accepted tokens, the latest repeat_last_n of them
};

}  // namespace vkformer
