#pragma once
// BertNormalizer: clean text, split CJK ideographs, strip accents, lower-case, in that order
// (tokenizers/src/normalizers/bert.rs).
#include <string>
#include <string_view>

#include "vkformer/tokenizer.hpp"

namespace vkformer::text {

std::u32string bert_normalize(std::u32string_view text, const WordPieceConfig& config);

}  // namespace vkformer::text
