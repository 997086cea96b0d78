#pragma once
// The GGUF tokenizer's first name, from when it read byte-level BPE only. It reads SentencePiece
// vocabularies too now, so it is vkformer::GgufTokenizer (vkformer/gguf_tokenizer.hpp); this
// alias keeps code written against the old name compiling, with a deprecation warning.
#include "vkformer/gguf_tokenizer.hpp"

namespace vkformer {

using BpeTokenizer [[deprecated("renamed vkformer::GgufTokenizer (vkformer/gguf_tokenizer.hpp)")]] = GgufTokenizer;

}  // namespace vkformer
