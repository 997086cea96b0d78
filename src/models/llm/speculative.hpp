#pragma once
// The parts of speculative decoding (vkformer/generate.hpp's SpeculativeOptions) that the
// generation loop (llm_generate.cpp) puts together: the proposers, the acceptance rule and the
// adaptive draft length. No Vulkan here except through a draft LanguageModel.
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "vkformer/generate.hpp"
#include "vkformer/llm.hpp"
#include "vkformer/sampling.hpp"

namespace vkformer::models::llm {

// Prompt lookup: for n from ngram_max down to ngram_min, the last n tokens of `context` looked up at an
// earlier place in it (the latest such place); the first match proposes up to `max_tokens` of the
// tokens that followed it. Empty when no suffix recurs.
// (One token recurring says little: a 2-gram at least, by default.)
std::vector<int32_t> propose_ngram(std::span<const int32_t> context, int64_t max_tokens, int64_t ngram_max = 4,
                                   int64_t ngram_min = 2);

// check_draft_model's test (vkformer/generate.hpp) on what it compares: the tokenizers (size,
// every token's text, BOS/EOS) and the output heads' rows; for a BatchedLanguageModel too.
void check_draft_vocabulary(const GgufTokenizer& target, int64_t target_rows, const GgufTokenizer& draft,
                            int64_t draft_rows);

// A draft model run greedily on its own cache, kept in step with the context by rolling back to
// the longest common prefix of what it holds and the context, then appending the rest.
class DraftModelProposer {
 public:
  explicit DraftModelProposer(LanguageModel& draft) : draft_(&draft) {}
  LanguageModel* model() const { return draft_; }
  // Up to max_tokens proposals after `context`, stopping where the draft's top token has a
  // probability (softmax at temperature 1) below p_min or its cache is full.
  std::vector<int32_t> propose(std::span<const int32_t> context, int64_t max_tokens, float p_min);
  // Brings the draft's cache to `context` (rollback to the common prefix, the rest run: a few
  // tokens through a verification graph, not a whole prompt chunk); false when it does not fit.
  // generate() calls it with the prompt, so the draft's prompt pass counts as prompt time. A
  // proposer kept across generate() calls (a chat's turns) runs only what is new; if something
  // else moved the draft's cache meanwhile, it starts again from the context.
  bool sync(std::span<const int32_t> context);

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

// The next token after a row of logits given the proposal `draft` (-1: none), for generate() and
// serve's slots alike: greedy takes the sampler's choice (the proposal kept when they agree); with a
// temperature, judge_proposal against a deterministic proposer (q is 1 on its token), its two
// draws from `rng` (apart from the sampler's own).
Verdict choose_after_proposal(Sampler& sampler, std::span<const float> row, int32_t draft, std::mt19937_64& rng);

// How many of the proposals at hand to verify: the number k (0 = a plain one-token pass) with
// the most expected tokens per second. A pass with k proposals yields (1 - a^(k+1)) / (1 - a)
// tokens when each proposal is kept with probability a (given the ones before it were), and
// costs c0 + c1 · rows of its graph (LanguageModel::verify_graph_rows; a decoder on a CPU such
// as lavapipe pays for every row, a GPU barely), c0 and c1 fitted by least squares to every
// pass's measured time, older passes weighing less (one slow pass on a loaded machine moves the
// line a little, and every pass keeps correcting it). a is estimated from the passes so far
// (kept proposals against first rejections, decayed the same way), starting from an even prior; proposals are verified only where they promise 10% more than a plain pass.
// Where proposing does not pay, a one-proposal probe every 16 plain passes
// keeps the estimate up to date.
class DraftBudget {
 public:
  explicit DraftBudget(int64_t draft_max) : max_(draft_max) {}
  int64_t choose(int64_t available);
  void on_plain_step(double seconds);
  void on_verified(int64_t proposed, int64_t accepted, double seconds);
  double acceptance() const { return (kept_ + 1.0) / (kept_ + rejected_ + 2.0); }

 private:
  double seconds_for(int64_t rows) const;
  void record(int64_t rows, double seconds);
  int64_t max_;
  double kept_ = 0, rejected_ = 0;  // decayed counts
  // Decayed sums of the passes' (rows, seconds) for the line's fit.
  double n_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
  int64_t plain_streak_ = 0;
};

// generate() (vkformer/generate.hpp) continuing a cache that holds `history` (the tokens before
// `prompt`, which the proposers look at too), with a draft proposer the caller keeps (its cache
// carries over between calls: a Conversation's turns; null: one of its own for this call, as
// generate() makes). drafter->model() must be speculative.draft_model.
TextGenerationResult generate_continued(LanguageModel& model, std::span<const int32_t> history,
                                        std::span<const int32_t> prompt, Sampler& sampler, int64_t max_tokens,
                                        const TokenCallback& on_token, const SpeculativeOptions& speculative,
                                        DraftModelProposer* drafter);

}  // namespace vkformer::models::llm
