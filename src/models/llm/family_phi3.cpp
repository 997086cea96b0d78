// phi3: Phi-3 and Phi-3.5 mini (4k context; the 128k models' longrope factors are not supported).
// q, k and v in one attn_qkv projection and gate and up in one ffn_up, as the checkpoints store
// them; sliding-window attention on every layer where the file sets a window.
#include "llm/family.hpp"

namespace vkformer::models::llm {

extern const Family kPhi3Family = {
    .architecture = "phi3",
    .models = "Phi-3, Phi-3.5 mini",
    .fused_qkv = true,
    .fused_gate_up = true,
};

}  // namespace vkformer::models::llm
