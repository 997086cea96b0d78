#pragma once
// The pre-tokenizers of llama.cpp's byte-level BPE (tokenizer.ggml.pre): how a text is cut into
// words before merges. Each is a list of splitting steps, each applied to every piece the last
// one left, exactly as llama.cpp applies its regex lists: hand-written scanners where llama.cpp
// has them (and for the simple character classes), the standard regex engine for the rest
// (regex_split.hpp), as llama.cpp does.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vkformer::text::bpe {

enum class SplitStep : uint8_t {
  gpt2,            // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  llama3,          // (?i:'s|'t|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*
                   //   |\s*[\r\n]+|\s+(?!\S)|\s+
  qwen2,           // llama3 with \p{N} one digit at a time
  each_number,     // \p{N}: every number character alone
  number_runs,     // \p{N}+
  punct_runs,      // [\p{P}\$\+<=>\^~\|]+ (the default pre-tokenizer)
  punct_runs_tick, // [\p{P}\$\+<=>\^~\|`]+ (falcon)
  ascii_digits3,   // [0-9][0-9][0-9]
  qwen35,          // qwen2 with \p{M} joining letters: [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+ ...
  newlines,        // [^\n]+|[\n]+
  regex,           // Step::regex through std::regex (regex_split.hpp)
};

struct Step {
  SplitStep kind;
  std::string_view regex;  // for SplitStep::regex
  Step(SplitStep k) : kind(k) {}  // NOLINT: a list of steps reads as a list of kinds
  Step(const char* pattern) : kind(SplitStep::regex), regex(pattern) {}  // NOLINT
};

struct PreTokenizerSpec {
  std::string_view family;  // the llama.cpp pre-tokenizer type the names map to
  std::vector<Step> steps;
  bool ignore_merges = false;    // a word that is a token is taken whole (llama3)
  bool add_bos_default = false;  // BOS unless tokenizer.ggml.add_bos_token says otherwise
  // SentencePiece-style BPE (gemma4): spaces become U+2581 before splitting, the words' UTF-8
  // is merged as it is (no GPT-2 byte map), missing bytes fall back to <0xNN> tokens, and a word
  // of newlines that is a token is taken whole.
  bool spm_style = false;
};

// The spec for a tokenizer.ggml.pre value (an empty name is llama.cpp's "default"), or nullptr.
const PreTokenizerSpec* find_pre_tokenizer(std::string_view name);
// The names find_pre_tokenizer knows, comma-separated, for error messages.
std::string supported_pre_tokenizers();

// Cuts `text` (code points) into words: the lengths of consecutive pieces, summing to its size.
std::vector<size_t> pre_tokenize(std::u32string_view text, const std::vector<Step>& steps);

}  // namespace vkformer::text::bpe
