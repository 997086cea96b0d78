#pragma once
// What LanguageModel and BatchedLanguageModel load alike from a decoder-only GGUF: its config
// (read and checked by its family), tokenizer, chat templates and weights on the device, the context it holds
// and KV caches of [kv_batches, n_kv_heads, cache_rows, head_dim] per block, cache_rows being
// context + prompt_chunk (a prompt chunk always starts below the context and writes
// prompt_chunk rows, padding included).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "llm/forward.hpp"
#include "llm/load_memory.hpp"
#include "llm/weights.hpp"
#include "vkformer/chat.hpp"
#include "vkformer/device.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/llm.hpp"

namespace vkformer::models::llm {

// The context when the options leave it to the model: its context_length, capped at this.
constexpr int64_t kDefaultMaxContext = 4096;

struct LoadOptions {
  DType activations = DType::f32;  // f32 or f16: activations and the KV caches
  int64_t context = 0;             // 0: the model's context_length capped at kDefaultMaxContext
  int64_t kv_batches = 1;          // sequences the caches hold
  int64_t prompt_chunk = 64;       // rows one prompt pass writes
};

struct LoadedModel {
  LanguageModelConfig config;
  std::unique_ptr<GgufTokenizer> tokenizer;
  ModelChatTemplates chat_templates;  // read with the rest, so that no front door reopens the file
  LanguageModelWeights weights;
  KvCaches caches;
  int64_t context = 0, cache_rows = 0;
  LoadMemory memory;  // what it needs: for the error of a compile that runs out (load_memory.hpp)
};

// Throws invalid_argument naming `what` (the caller, "LanguageModel::load") for activations
// that are not a float type and a context beyond the model's; the file's own errors as
// read_config, GgufTokenizer::from_gguf and load_weights give them; out_of_memory with what was
// needed and what would fit (rethrow_out_of_memory), with nothing of this load left on the device.
LoadedModel load_model(Device& device, const std::filesystem::path& path, const LoadOptions& options,
                       const std::string& what);

}  // namespace vkformer::models::llm
