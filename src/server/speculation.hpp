#pragma once
// Speculative decoding for one sequence of the scheduler (serve --spec ngram or --model-draft):
// prompt lookup proposes what followed the latest earlier occurrence of the text's last few
// tokens (the prompt and the reply so far), or a draft model does (DraftSlots, for all sequences
// together), the scheduler runs the sequence's next token and the proposals as rows
// of its step (BatchedLanguageModel::Piece::every_logit), and each row chooses a token as
// generate() does: greedy takes the sampler's own choice (a proposal is kept when they agree, so
// the text is plain decoding's), with temperature the speculative sampling rule against a
// deterministic proposer (min(1, p/q), the residual otherwise), which keeps the sampler's
// distribution. The proposals up to the first one not kept stay in the slot's cache; the
// scheduler truncates the rest.
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "vkformer/generate.hpp"
#include "vkformer/sampling.hpp"

namespace vkformer::server {

class Speculation {
 public:
  Speculation(const SpeculativeOptions& options, std::span<const int32_t> prompt, uint64_t seed);

  // Prompt lookup's proposals after the text, limit()ed.
  std::vector<int32_t> propose(int64_t most) const;
  // At most min(most, --draft-max) of `drafts`; none when fewer than --draft-min.
  std::vector<int32_t> limit(std::vector<int32_t> drafts, int64_t most) const;
  const std::vector<int32_t>& text() const { return text_; }
  // A token of the reply, in order (every chosen token, kept proposals included).
  void push(int32_t token) { text_.push_back(token); }

  struct Choice {
    int32_t token;
    bool accepted;  // token == draft: the proposal is kept
  };
  // The token after a row with logits `row`, given the proposal `draft` for it (-1: none). Does
  // not accept the token into the sampler (the scheduler does, as for any token).
  Choice choose(Sampler& sampler, std::span<const float> row, int32_t draft);

 private:
  SpeculativeOptions options_;
  std::vector<int32_t> text_;  // prompt and reply so far
  std::mt19937_64 rng_;        // the acceptance draws, apart from the sampler's
};

}  // namespace vkformer::server
