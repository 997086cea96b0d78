#pragma once
// A sentence-transformers directory's modules around its encoder: modules.json (which modules,
// in which folders), 1_Pooling/config.json (how tokens become one vector), Normalize, and
// sentence_bert_config.json (max_seq_length). A plain Hugging Face model directory (no
// modules.json) gets what sentence-transformers gives it: mean pooling, no normalization.
#include <cstdint>
#include <filesystem>
#include <string>

#include "vkformer/graph.hpp"

namespace vkformer::models {

struct SentenceConfig {
  std::filesystem::path encoder_dir;  // the Transformer module's folder (config.json, weights)
  PoolMode pooling = PoolMode::mean;
  bool normalize = false;
  int64_t max_seq_length = 0;  // 0: not given (the tokenizer's or the model's limit applies)
  bool lower_case = false;     // sentence_bert_config.json's do_lower_case

  // Errors: io for unreadable files, format for malformed ones, unsupported (naming the module
  // type or the pooling key) for modules vkformer does not run (Dense, several pooling modes
  // concatenated, weighted-mean or last-token pooling, ...).
  static SentenceConfig load(const std::filesystem::path& dir);
};

const char* pool_mode_name(PoolMode mode);

}  // namespace vkformer::models
