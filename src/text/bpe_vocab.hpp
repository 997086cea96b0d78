#pragma once
// A byte-level BPE vocabulary as llama.cpp reads it from GGUF metadata (tokenizer.ggml.*):
// tokens, their types, merges, the special ids and the flags encode() needs, every
// inconsistency a format error naming the key.
#include <cstdint>
#include <string>
#include <vector>

#include "bpe_merge.hpp"
#include "bpe_pre_tokenizer.hpp"

namespace vkformer {
class GgufFile;
}

namespace vkformer::text::bpe {

// llama.cpp's token attributes (a token can gain control when its text marks an end of turn).
enum TokenAttr : uint8_t {
  kAttrUnknown = 1 << 0,
  kAttrUnused = 1 << 1,
  kAttrNormal = 1 << 2,
  kAttrControl = 1 << 3,
  kAttrUserDefined = 1 << 4,
  kAttrByte = 1 << 5,
};

struct BpeVocab {
  std::string source;  // the file, for messages
  std::vector<std::string> tokens;
  std::vector<uint8_t> attrs;
  std::vector<std::string> bytes;  // what each token stands for (llama.cpp's token_to_piece)
  TokenIndex index;
  MergeTable merges;
  std::string pre_name;
  const PreTokenizerSpec* pre = nullptr;
  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
  bool add_bos = false, add_eos = false;
  std::vector<int32_t> special_tokens;  // found in raw text: longest first, then by id
  std::vector<uint8_t> end_of_generation;  // per token
};

BpeVocab read_bpe_vocab(const GgufFile& file);

}  // namespace vkformer::text::bpe
