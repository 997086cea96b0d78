#include "wordpiece_model.hpp"

#include <algorithm>

#include "utf8.hpp"
#include "vkformer/error.hpp"

namespace vkformer::text {

WordPieceModel::WordPieceModel(std::vector<std::string> vocab, int32_t unk_id,
                               std::string continuing_subword_prefix,
                               size_t max_input_chars_per_word)
    : id_to_token_(std::move(vocab)),
      prefix_(std::move(continuing_subword_prefix)),
      max_chars_(max_input_chars_per_word),
      unk_id_(unk_id) {
  if (unk_id < 0 || static_cast<size_t>(unk_id) >= id_to_token_.size())
    throw Error(ErrorCode::internal, "WordPieceModel: unk_id outside the vocabulary");
  token_to_id_.reserve(id_to_token_.size());
  for (size_t i = 0; i < id_to_token_.size(); ++i) {
    const std::string& t = id_to_token_[i];
    token_to_id_.insert_or_assign(t, static_cast<int32_t>(i));
    max_first_bytes_ = std::max(max_first_bytes_, t.size());
    if (t.size() > prefix_.size() && t.starts_with(prefix_))
      max_continuing_bytes_ = std::max(max_continuing_bytes_, t.size() - prefix_.size());
  }
}

std::optional<int32_t> WordPieceModel::find(std::string_view token) const {
  auto it = token_to_id_.find(token);
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

void WordPieceModel::tokenize_word(std::u32string_view word, std::vector<int32_t>& ids,
                                   size_t* lookups) const {
  if (word.size() > max_chars_) {
    ids.push_back(unk_id_);
    return;
  }
  // The word in UTF-8 and where each of its characters starts, so pieces are byte ranges.
  std::string utf8;
  std::vector<size_t> char_start;
  char_start.reserve(word.size() + 1);
  for (char32_t c : word) {
    char_start.push_back(utf8.size());
    append_utf8(utf8, c);
  }
  char_start.push_back(utf8.size());

  size_t first_id = ids.size();
  std::string candidate;
  size_t looked_up = 0;
  for (size_t start = 0; start < word.size();) {
    std::optional<int32_t> piece;
    // The last end whose piece is no longer than the longest entry that could match it.
    const size_t limit = char_start[start] + (start == 0 ? max_first_bytes_ : max_continuing_bytes_);
    size_t end = static_cast<size_t>(std::upper_bound(char_start.begin() + static_cast<ptrdiff_t>(start),
                                                      char_start.end(), limit) -
                                     char_start.begin()) - 1;
    for (; end > start; --end) {
      ++looked_up;
      std::string_view bytes(utf8.data() + char_start[start], char_start[end] - char_start[start]);
      if (start == 0) {
        piece = find(bytes);
      } else {
        candidate.assign(prefix_);
        candidate.append(bytes);
        piece = find(candidate);
      }
      if (piece) break;
    }
    if (!piece) {  // some rest of the word matches nothing: the whole word is unknown
      ids.resize(first_id);
      ids.push_back(unk_id_);
      break;
    }
    ids.push_back(*piece);
    start = end;
  }
  if (lookups) *lookups += looked_up;
}

}  // namespace vkformer::text
