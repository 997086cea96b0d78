#pragma once
// The WordPiece model: a vocabulary and the greedy longest-match split of one word
// (tokenizers/src/models/wordpiece/mod.rs).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace vkformer::text {

class WordPieceModel {
 public:
  // Token i of `vocab` has id i; a token listed twice maps to its last id, as in transformers'
  // load_vocab. `unk_id` must be an id of the vocabulary (the caller checks, to name its source).
  WordPieceModel(std::vector<std::string> vocab, int32_t unk_id,
                 std::string continuing_subword_prefix, size_t max_input_chars_per_word);

  // Appends the ids of `word`'s pieces to `ids`: from the start, the longest vocabulary entry
  // (with the prefix after the first piece), again and again. A word that no sequence of entries
  // covers exactly, or longer than max_input_chars_per_word, is one unknown token.
  // Only candidates no longer than the vocabulary's longest entry are looked up, so a word of n
  // characters costs at most n * (that length in bytes) lookups, where trying every end of the
  // rest of the word (tokenizers' loop) cost O(n^2) lookups of O(n) bytes each. `lookups`, if
  // given, is increased by the number made (tests bound it).
  void tokenize_word(std::u32string_view word, std::vector<int32_t>& ids, size_t* lookups = nullptr) const;

  std::optional<int32_t> find(std::string_view token) const;
  const std::vector<std::string>& tokens() const { return id_to_token_; }
  int32_t unk_id() const { return unk_id_; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> id_to_token_;
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> token_to_id_;
  std::string prefix_;
  size_t max_chars_;
  // The longest entry in bytes, and the longest continuing one without its prefix: no longer
  // candidate can match.
  size_t max_first_bytes_ = 0, max_continuing_bytes_ = 0;
  int32_t unk_id_;
};

}  // namespace vkformer::text
