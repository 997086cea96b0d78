// qwen3: Qwen3 (dense). No biases; q and k get a per-head RMS norm before RoPE.
#include "llm/family.hpp"

namespace vkformer::models::llm {

extern const Family kQwen3Family = {
    .architecture = "qwen3",
    .models = "Qwen3",
    .qk_norm = true,
};

}  // namespace vkformer::models::llm
