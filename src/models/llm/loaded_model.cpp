#include "llm/loaded_model.hpp"

#include <algorithm>

#include "kv_cache_types.hpp"
#include "llm/config.hpp"
#include "vkformer/error.hpp"
#include "vkformer/gguf.hpp"

namespace vkformer::models::llm {

LoadedModel load_model(Device& device, const std::filesystem::path& path, const LoadOptions& o,
                       const std::string& what) {
  if (!is_float(o.activations))
    throw Error(ErrorCode::invalid_argument, what + ": activations must be f32 or f16, got " +
                                                 std::string(dtype_name(o.activations)));
  for (const auto& [type, field] : {std::pair{o.cache_type_k, "cache_type_k"}, {o.cache_type_v, "cache_type_v"}})
    if (type && !ops::is_kv_cache_type(*type))
      throw Error(ErrorCode::invalid_argument, what + ": " + field + " is " + std::string(dtype_name(*type)) +
                                                   ", expected f32, f16, q8_0 or q4_0");
  GgufFile file(path);
  LoadedModel m;
  m.config = read_config(file);
  for (const auto& [type, field] : {std::pair{cache_type_k(o), "cache_type_k"}, {cache_type_v(o), "cache_type_v"}})
    if (type != o.activations && m.config.head_dim % 32 != 0)  // the KV_QUANT kernels' blocks
      throw Error(ErrorCode::invalid_argument,
                  what + ": " + field + " " + std::string(dtype_name(type)) +
                      " (not the activations' type) is read in whole blocks of 32 values a row, and this model's head dim is " +
                      std::to_string(m.config.head_dim) + ": leave it to the activations' type (" +
                      std::string(dtype_name(o.activations)) + ")");
  const int64_t default_context = std::min(m.config.context_length, kDefaultMaxContext);
  if (o.context < 0 || o.context > m.config.context_length)
    throw Error(ErrorCode::invalid_argument,
                what + ": context is " + std::to_string(o.context) + ", expected 0 (" +
                    std::to_string(default_context) + " for this model) to the model's context_length " +
                    std::to_string(m.config.context_length));
  m.context = o.context > 0 ? o.context : default_context;
  m.tokenizer = std::make_unique<GgufTokenizer>(GgufTokenizer::from_gguf(file));
  m.chat_templates = ModelChatTemplates::from_gguf(file);
  m.memory = load_memory(file, m.config, o, m.context);
  try {
    m.weights = load_weights(device, file, m.config, o.activations,
                             o.kv_rotation && is_quantized(cache_type_k(o)));
    m.cache_rows = m.context + o.prompt_chunk;
    const Shape cache{o.kv_batches, m.config.n_kv_heads, m.cache_rows, m.config.head_dim};
    for (int64_t i = 0; i < m.config.n_layers; ++i) {
      m.caches.k.push_back(device.allocate(cache, cache_type_k(o)));
      m.caches.v.push_back(device.allocate(cache, cache_type_v(o)));
      m.kv_cache.bytes += m.caches.k.back().nbytes() + m.caches.v.back().nbytes();
    }
    m.caches.rotation = kv_rotation_for(o, m.config.head_dim);
    m.kv_cache.rotation_k = m.caches.rotation.k;
    m.kv_cache.rotation_v = m.caches.rotation.v;
    m.kv_cache.type_k = cache_type_k(o);
    m.kv_cache.type_v = cache_type_v(o);
    m.kv_cache.bytes_per_token = m.kv_cache.bytes / static_cast<uint64_t>(m.cache_rows * o.kv_batches);
    m.kv_cache.context_that_fits = context_that_fits(device, m.memory, m.kv_cache.bytes);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::out_of_memory) throw;
    m.caches = {};
    m.weights = {};
    rethrow_out_of_memory(device, m.memory, o, what, e);
  }
  return m;
}

KvRotation kv_rotation_for(const LoadOptions& o, int64_t head_dim) {
  KvRotation r;
  if (!o.kv_rotation || head_dim % 64 != 0) return r;
  if (is_quantized(cache_type_k(o))) {
    r.k = 64;
    while (head_dim % (2 * r.k) == 0 && 2 * r.k <= 1024) r.k *= 2;
  }
  if (is_quantized(cache_type_v(o))) r.v = 64;
  return r;
}

}  // namespace vkformer::models::llm

namespace vkformer {

DType parse_kv_cache_type(std::string_view name, std::string_view option) {
  for (DType t : {DType::f32, DType::f16, DType::q8_0, DType::q4_0})
    if (name == dtype_name(t)) return t;
  throw Error(ErrorCode::invalid_argument, std::string(option) + ": unknown cache type '" + std::string(name) +
                                               "': expected f32, f16, q8_0 or q4_0");
}

}  // namespace vkformer
