#pragma once
// Added (special) tokens are found in the raw text before anything else and kept whole, so
// "a [MASK] b" keeps [MASK] while "[mask]" is ordinary text. At each position the leftmost
// match wins, and of those the longest (tokenizers' AddedVocabulary, LeftmostLongest).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vkformer::text {

struct AddedToken {
  std::string content;  // never empty
  int32_t id = 0;
};

// A piece of the raw text: either an added token (id >= 0) or text to normalize (id < 0).
struct TextSegment {
  std::string_view text;
  int32_t added_id = -1;
};

std::vector<TextSegment> split_added_tokens(std::string_view text,
                                            const std::vector<AddedToken>& tokens);

}  // namespace vkformer::text
