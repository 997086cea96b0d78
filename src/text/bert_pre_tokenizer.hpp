#pragma once
// BertPreTokenizer: words are split at whitespace (dropped) and around every punctuation
// character (each one a word of its own): "Hi, you!!" -> Hi , you ! !
#include <string_view>
#include <vector>

namespace vkformer::text {

std::vector<std::u32string_view> bert_pre_tokenize(std::u32string_view text);

}  // namespace vkformer::text
