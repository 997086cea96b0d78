#pragma once
// Byte-level BPE merges over one pre-tokenized word, as llama.cpp applies them: start from the
// word's characters, repeatedly merge the adjacent pair with the lowest merge rank (the leftmost
// of equal ranks), then look each symbol up in the vocabulary.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace vkformer::text::bpe {

struct MergeTable {
  // (left id, right id) -> rank (the merge's line in tokenizer.ggml.merges) and merged id.
  struct Merge {
    int32_t rank;
    int32_t merged;
  };
  std::unordered_map<uint64_t, Merge> pairs;

  static uint64_t key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  const Merge* find(int32_t left, int32_t right) const {
    auto it = pairs.find(key(left, right));
    return it == pairs.end() ? nullptr : &it->second;
  }
};

using TokenIndex = std::unordered_map<std::string, int32_t>;

// Appends the ids of `word` (already byte-mapped, so valid UTF-8) to `out`. A character that is
// no token (a vocabulary without some byte's character) falls back, as in llama.cpp, to its
// single bytes that are tokens, and is dropped when none is. With byte_tokens (SentencePiece-
// style BPE, whose words are not byte-mapped) the fallback is each byte's <0xNN> token instead.
void merge_word(std::string_view word, const TokenIndex& index, const MergeTable& merges,
                bool ignore_merges, std::vector<int32_t>& out,
                const int32_t* byte_tokens = nullptr);

}  // namespace vkformer::text::bpe
