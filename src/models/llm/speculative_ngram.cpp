// Prompt lookup decoding's proposer (speculative.hpp): what followed the latest earlier
// occurrence of the context's last n tokens, the longest n first.
#include <algorithm>

#include "llm/speculative.hpp"

namespace vkformer::models::llm {

std::vector<int32_t> propose_ngram(std::span<const int32_t> context, int64_t max_tokens, int64_t ngram_max,
                                   int64_t ngram_min) {
  const int64_t size = static_cast<int64_t>(context.size());
  if (max_tokens <= 0) return {};
  for (int64_t n = std::min(ngram_max, size - 1); n >= std::max<int64_t>(ngram_min, 1); --n) {
    const auto suffix = context.last(static_cast<size_t>(n));
    // Latest start first: recent text is the likeliest to be copied on (the reply's own lines).
    for (int64_t start = size - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), context.begin() + start)) continue;
      const int64_t from = start + n, count = std::min(max_tokens, size - from);
      return {context.begin() + from, context.begin() + from + count};
    }
  }
  return {};
}

}  // namespace vkformer::models::llm
