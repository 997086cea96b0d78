#include "bert_pre_tokenizer.hpp"

#include "bert_chars.hpp"

namespace vkformer::text {

std::vector<std::u32string_view> bert_pre_tokenize(std::u32string_view text) {
  std::vector<std::u32string_view> words;
  size_t start = 0;
  auto flush = [&](size_t end) {
    if (end > start) words.push_back(text.substr(start, end - start));
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char32_t c = text[i];
    if (is_bert_whitespace(c)) {
      flush(i);
      start = i + 1;
    } else if (is_bert_punctuation(c)) {
      flush(i);
      words.push_back(text.substr(i, 1));
      start = i + 1;
    }
  }
  flush(text.size());
  return words;
}

}  // namespace vkformer::text
