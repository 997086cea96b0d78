#pragma once
// A GGUF vocabulary as llama.cpp reads it from the metadata (tokenizer.ggml.*): byte-level BPE
// ("gpt2"), SentencePiece-style BPE ("gemma4") or SentencePiece ("llama": scores, byte
// fallback, the U+2581 space): tokens, their types, merges or scores, the special ids and the
// flags encode() needs, every inconsistency a format error naming the key.
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
  kAttrLstrip = 1 << 6,  // spaces before the token are dropped when it is split off the text
  kAttrRstrip = 1 << 7,  // spaces after it likewise
};

enum class VocabKind : uint8_t {
  bpe,  // merges by rank (gpt2, gemma4)
  spm,  // SentencePiece: merges by the merged token's score (llama)
};

struct BpeVocab {
  std::string source;  // the file, for messages
  std::string model;   // tokenizer.ggml.model
  VocabKind kind = VocabKind::bpe;
  std::vector<float> scores;  // spm: per token (tokenizer.ggml.scores, 0 when absent)
  bool add_space_prefix = false;    // spm: a space before text that follows BOS or a special token
  bool escape_whitespaces = false;  // spaces become U+2581 before tokenizing (spm, gemma4)
  int32_t byte_token[256];          // spm, gemma4: the <0xNN> token of each byte, or -1
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
