#pragma once
// What LanguageModel and BatchedLanguageModel load alike from a decoder-only GGUF: its config
// (read and checked by its family), tokenizer, chat templates and weights on the device, the context it holds
// and KV caches of [kv_batches, n_kv_heads, cache_rows, head_dim] per block, cache_rows being
// context + prompt_chunk (a prompt chunk always starts below the context and writes
// prompt_chunk rows, padding included).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
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
  DType activations = DType::f32;  // f32 or f16: activations and (by default) the KV caches
  std::optional<DType> cache_type_k, cache_type_v;  // the caches' types; unset: activations
  int64_t context = 0;             // 0: the model's context_length capped at kDefaultMaxContext
  int64_t kv_batches = 1;          // sequences the caches hold
  int64_t prompt_chunk = 64;       // rows one prompt pass writes
  bool kv_rotation = true;         // the attention rotation of quantized caches (kv_rotation_for)
};

// The LoadOptions of a LanguageModelOptions or BatchedLanguageModelOptions (what both have), for
// prompt passes of `prompt_chunk` rows and caches of `kv_batches` sequences.
template <class ModelOptions>
LoadOptions load_options(const ModelOptions& o, int64_t prompt_chunk, int64_t kv_batches = 1) {
  return {.activations = o.activations,
          .cache_type_k = o.cache_type_k,
          .cache_type_v = o.cache_type_v,
          .context = o.context,
          .kv_batches = kv_batches,
          .prompt_chunk = prompt_chunk,
          .kv_rotation = o.kv_rotation};
}

// llama.cpp's choice (PR 21038, llama_kv_cache): a quantized K cache of a head dim that is a
// multiple of 64 rotates q and k by the Hadamard block of the largest power of two dividing the
// head dim, a quantized V cache v by blocks of 64; float caches and other head dims not at all.
KvRotation kv_rotation_for(const LoadOptions& o, int64_t head_dim);

// The caches' types these options ask for (the activations' where unset).
inline DType cache_type_k(const LoadOptions& o) { return o.cache_type_k.value_or(o.activations); }
inline DType cache_type_v(const LoadOptions& o) { return o.cache_type_v.value_or(o.activations); }

struct LoadedModel {
  LanguageModelConfig config;
  std::unique_ptr<GgufTokenizer> tokenizer;
  ModelChatTemplates chat_templates;  // read with the rest, so that no front door reopens the file
  LanguageModelWeights weights;
  KvCaches caches;
  int64_t context = 0, cache_rows = 0;
  LoadMemory memory;  // what it needs: for the error of a compile that runs out (load_memory.hpp)
  KvCacheInfo kv_cache;  // the caches' types and sizes, from their allocations
};

// Throws invalid_argument naming `what` (the caller, "LanguageModel::load") for activations
// that are not a float type, a cache type that is not one of parse_kv_cache_type's (or quantized
// with a head dim that is not a multiple of 32) and a context beyond the model's; the file's own errors as
// read_config, GgufTokenizer::from_gguf and load_weights give them; out_of_memory with what was
// needed and what would fit (rethrow_out_of_memory), with nothing of this load left on the device.
LoadedModel load_model(Device& device, const std::filesystem::path& path, const LoadOptions& options,
                       const std::string& what);

}  // namespace vkformer::models::llm
