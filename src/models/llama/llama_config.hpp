#pragma once
// LlamaConfig from a GGUF file's metadata: general.architecture and the "<arch>.*" keys, each
// checked (present where llama.cpp requires it, positive, consistent with the others).
#include "vkformer/gguf.hpp"
#include "vkformer/llm.hpp"

namespace vkformer::models::llama {

// The architectures this folder builds; any other is a format error naming it and these.
inline constexpr const char* kSupportedArchitectures = "llama";

// Throws format naming the file and key for a missing, mistyped or inconsistent value. The
// vocabulary size comes from token_embd.weight (the tensor is checked later, with the others).
LlamaConfig read_config(const GgufFile& file);

}  // namespace vkformer::models::llama
