#pragma once
// Reading a WordPiece tokenizer's files: Hugging Face's tokenizer.json, or BERT's vocab.txt with
// transformers' tokenizer_config.json and special_tokens_map.json. Every problem is an Error
// naming the file and the key (format), or the file and what it is (io): each file must be a
// regular file (not a FIFO, device or directory) of at most kMaxTokenizerFileBytes.
#include <filesystem>
#include <string>
#include <vector>

#include "vkformer/tokenizer.hpp"

namespace vkformer::text {

struct TokenizerFiles {
  std::vector<std::string> vocab;  // token i has id i
  WordPieceConfig config;
  std::string source;  // the file read, for messages
};

// A WordPiece model with BertNormalizer, BertPreTokenizer and a [CLS] $A [SEP] post-processor.
TokenizerFiles read_tokenizer_json(const std::filesystem::path& path);

// vocab.txt, with the settings of tokenizer_config.json and special_tokens_map.json when they
// are in `config_dir`.
TokenizerFiles read_vocab_txt(const std::filesystem::path& vocab_path,
                              const std::filesystem::path& config_dir);

// Whether something is at `path` (following links), for the files a tokenizer may have: false
// when nothing is; io naming the path when it cannot be told (a link loop, no permission).
bool file_present(const std::filesystem::path& path);

// tokenizer_config.json's model_max_length, 0 when absent or transformers' "no limit" (1e30).
size_t read_model_max_length(const std::filesystem::path& tokenizer_config);

}  // namespace vkformer::text
