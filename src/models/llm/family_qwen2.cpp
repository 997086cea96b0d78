// qwen2: Qwen2 and Qwen2.5. Llama's block with biases on the q, k and v projections and neox RoPE.
#include "llm/family.hpp"

namespace vkformer::models::llm {

extern const Family kQwen2Family = {
    .architecture = "qwen2",
    .models = "Qwen2, Qwen2.5",
    .qkv_bias = true,
};

}  // namespace vkformer::models::llm
