#pragma once
// The check a model's entry points make of the token ids they are given (Model::generate's
// source, LanguageModel's and BatchedLanguageModel's tokens): each within [0, vocab), or
// Error(invalid_argument) "<what>: <noun> <id> at <place> <i> is outside the vocabulary [0, <vocab>)".
#include <cstdint>
#include <span>
#include <string>

#include "vkformer/error.hpp"

namespace vkformer::models {

inline void check_token_ids(std::span<const int32_t> ids, int64_t vocab, const std::string& what,
                            const char* noun = "token", const char* place = "index") {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      throw Error(ErrorCode::invalid_argument, what + ": " + noun + " " + std::to_string(ids[i]) + " at " + place +
                                                   " " + std::to_string(i) + " is outside the vocabulary [0, " +
                                                   std::to_string(vocab) + ")");
}

}  // namespace vkformer::models
