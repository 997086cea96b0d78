#pragma once
// SentencePiece BPE as llama.cpp runs it (llm_tokenizer_spm_session): start from the text's
// UTF-8 characters, repeatedly merge the adjacent pair whose joined text is a token with the
// highest score (the leftmost of equal scores), then emit each piece: its token, else the two
// pieces it was merged from, else its bytes through the byte fallback (<0xNN>).
#include <cstdint>
#include <string_view>
#include <vector>

#include "bpe_vocab.hpp"

namespace vkformer::text::bpe {

// Appends the ids of `text` (spaces already written as U+2581) to `out`.
void spm_tokenize(std::string_view text, const BpeVocab& vocab, std::vector<int32_t>& out);

}  // namespace vkformer::text::bpe
