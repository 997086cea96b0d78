#pragma once
// The parts of speculative decoding (vkformer/generate.hpp's SpeculativeOptions) that the
// generation loop (llm_generate.cpp) puts together: the proposers, the acceptance rule and the
// adaptive draft length. No Vulkan here except through a draft LanguageModel.
#include <cstdint>
#include <span>
#include <vector>

#include "vkformer/generate.hpp"
#include "vkformer/llm.hpp"
#include "vkformer/sampling.hpp"

namespace vkformer::models::llm {

// Prompt lookup: for n from ngram_max down to 1, the last n tokens of `context` looked up at an
// earlier place in it (the latest such place); the first match proposes up to `max_tokens` of the
// tokens that followed it. Empty when no suffix recurs.
std::vector<int32_t> propose_ngram(std::span<const int32_t> context, int64_t max_tokens, int64_t ngram_max = 4);

// A draft model run greedily on its own cache, kept in step with the context by rolling back to
// the longest common prefix of what it holds and the context, then appending the rest.
class DraftModelProposer {
 public:
  explicit DraftModelProposer(LanguageModel& draft) : draft_(&draft) {}
  // Up to max_tokens proposals after `context`, stopping where the draft's top token has a
  // probability (softmax at temperature 1) below p_min or its cache is full.
  std::vector<int32_t> propose(std::span<const int32_t> context, int64_t max_tokens, float p_min);

 private:
  LanguageModel* draft_;
  std::vector<int32_t> cached_;  // the tokens in the draft's cache, from position 0
  std::vector<float> logits_;    // the draft's logits after cached_ (empty: unknown)
};

// Standard speculative sampling for one proposal: `draft` was drawn from q (the proposer's
// distribution; a deterministic proposer's q is 1 on its token), p is the target's (Sampler::
// distribution). The draft is kept with probability min(1, p(draft) / q(draft)) (u_accept < that);
// otherwise the token is drawn (by u_resample in [0, 1)) from max(0, p - q) normalized. The kept
// or drawn tokens are then distributed as p. A residual that is all zero (p = q) draws from p.
struct Verdict {
  int32_t token;
  bool accepted;  // token == draft, kept
};
Verdict judge_proposal(std::span<const TokenProbability> p, std::span<const TokenProbability> q, int32_t draft,
                       double u_accept, double u_resample);

// How many tokens to propose next: draft_max at first, doubled (up to draft_max) after a fully
// accepted proposal, halved after a fully rejected one; two fully rejected in a row pause
// proposing for 8 tokens, then 16, ... up to 256 (where proposals do not help, the cost of
// verifying them is not paid). Any accepted token ends a pause streak.
class DraftBudget {
 public:
  explicit DraftBudget(int64_t draft_max) : max_(draft_max), limit_(draft_max) {}
  int64_t allowed() const { return pause_ > 0 ? 0 : limit_; }
  void on_plain_step() { if (pause_ > 0) --pause_; }
  void on_verified(int64_t proposed, int64_t accepted);

 private:
  int64_t max_, limit_;
  int64_t misses_ = 0, pause_ = 0, pause_length_ = 8;
};

}  // namespace vkformer::models::llm
