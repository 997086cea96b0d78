#pragma once
// LanguageModelConfig from a GGUF file's metadata: general.architecture (its Family, family.hpp)
// and the "<arch>.*" keys, each checked (present where llama.cpp requires it, positive,
// consistent with the others and with the tensors), and the tensors that config implies.
#include <string>
#include <vector>

#include "llm/family.hpp"
#include "vkformer/gguf.hpp"
#include "vkformer/llm.hpp"

namespace vkformer::models::llm {

// Throws format naming the file and key for a missing, mistyped or inconsistent value, and
// unsupported naming the key or tensor for a feature the file asks for that vkformer lacks
// (YaRN or longrope scaling, an unknown tensor). The vocabulary size comes from token_embd.weight.
LanguageModelConfig read_config(const GgufFile& file);

// The family config.architecture names (read_config has checked that there is one).
const Family& family_of(const LanguageModelConfig& config);

struct TensorSpec {
  std::string name;  // blk.N.<suffix> or a model tensor's
  Shape shape;       // as llama.cpp's loader expects it ([rows, cols] of a matrix)
};

// Every tensor of block `i` the config implies, in load order.
std::vector<TensorSpec> block_tensors(const LanguageModelConfig& config, int64_t i);

}  // namespace vkformer::models::llm
