// Speculative decoding for a scheduler's sequence (speculation.hpp), on the library's proposer
// and acceptance rule (src/models/llm/speculative.hpp), as generate() uses them.
#include "speculation.hpp"

#include <algorithm>

#include "llm/speculative.hpp"

namespace vkformer::server {

Speculation::Speculation(const SpeculativeOptions& options, std::span<const int32_t> prompt, uint64_t seed)
    : options_(options), text_(prompt.begin(), prompt.end()), rng_(seed ^ 0x5bd1e995u) {}

std::vector<int32_t> Speculation::propose(int64_t most) const {
  const int64_t want = std::min<int64_t>(most, options_.draft_max);
  if (want <= 0 || options_.mode != SpeculativeMode::ngram) return {};
  return limit(models::llm::propose_ngram(text_, want), most);
}

std::vector<int32_t> Speculation::limit(std::vector<int32_t> drafts, int64_t most) const {
  const int64_t want = std::max<int64_t>(0, std::min<int64_t>(most, options_.draft_max));
  if (static_cast<int64_t>(drafts.size()) > want) drafts.resize(static_cast<size_t>(want));
  if (static_cast<int64_t>(drafts.size()) < std::max<int32_t>(options_.draft_min, 1)) drafts.clear();
  return drafts;
}

Speculation::Choice Speculation::choose(Sampler& sampler, std::span<const float> row, int32_t draft) {
  const models::llm::Verdict v = models::llm::choose_after_proposal(sampler, row, draft, rng_);
  return {v.token, v.accepted};
}

}  // namespace vkformer::server
