#include "llm/loaded_model.hpp"

#include <algorithm>

#include "llm/config.hpp"
#include "vkformer/error.hpp"
#include "vkformer/gguf.hpp"

namespace vkformer::models::llm {

LoadedModel load_model(Device& device, const std::filesystem::path& path, const LoadOptions& o,
                       const std::string& what) {
  if (!is_float(o.activations))
    throw Error(ErrorCode::invalid_argument, what + ": activations must be f32 or f16, got " +
                                                 std::string(dtype_name(o.activations)));
  GgufFile file(path);
  LoadedModel m;
  m.config = read_config(file);
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
    m.weights = load_weights(device, file, m.config, o.activations);
    m.cache_rows = m.context + o.prompt_chunk;
    const Shape cache{o.kv_batches, m.config.n_kv_heads, m.cache_rows, m.config.head_dim};
    for (int64_t i = 0; i < m.config.n_layers; ++i) {
      m.caches.k.push_back(device.allocate(cache, o.activations));
      m.caches.v.push_back(device.allocate(cache, o.activations));
    }
  } catch (const Error& e) {
    if (e.code() != ErrorCode::out_of_memory) throw;
    m.caches = {};
    m.weights = {};
    rethrow_out_of_memory(device, m.memory, o, what, e);
  }
  return m;
}

}  // namespace vkformer::models::llm
