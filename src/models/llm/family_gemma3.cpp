// gemma3: Gemma 3 (text). Gemma 2's block with per-head q/k RMS norms instead of soft-capping,
// five sliding-window layers to one global, and the sliding layers' own RoPE base (10000; the
// global layers' base and linear scaling come from the file).
#include "llm/family.hpp"

namespace vkformer::models::llm {

extern const Family kGemma3Family = {
    .architecture = "gemma3",
    .models = "Gemma 3 (text)",
    .ffn_activation = Activation::gelu_tanh,
    .qk_norm = true,
    .key_scaling = true,
    .post_norms = true,
    .scale_embedding = true,
    .sliding = SlidingLayers::five_of_six,
    .rope_base_sliding = 10000.0,
};

}  // namespace vkformer::models::llm
