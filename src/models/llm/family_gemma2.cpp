// gemma2: Gemma 2. GeGLU (tanh GELU), embeddings times sqrt(d_model), RMS norms after attention and
// FFN as well as before, attention scores and final logits soft-capped (tanh), and sliding-window
// attention on the even layers. The norms' +1 (Gemma's RMSNorm multiplies by 1 + weight) is in the
// file: convert_hf_to_gguf.py adds it.
#include <cmath>

#include "llm/family.hpp"

namespace vkformer::models::llm {

namespace {

// Hugging Face scales by query_pre_attn_scalar^-1/2, which the GGUF does not store; llama.cpp
// knows it by size: d_model / n_heads for the 27B (46 layers), the head size for 2B and 9B.
double gemma2_attention_scale(const LanguageModelConfig& c) {
  const double d = c.n_layers == 46 ? static_cast<double>(c.d_model / c.n_heads) : static_cast<double>(c.head_dim);
  return 1.0 / std::sqrt(d);
}

}  // namespace

extern const Family kGemma2Family = {
    .architecture = "gemma2",
    .models = "Gemma 2",
    .ffn_activation = Activation::gelu_tanh,
    .post_norms = true,
    .scale_embedding = true,
    .sliding = SlidingLayers::even,
    .attention_scale = gemma2_attention_scale,
};

}  // namespace vkformer::models::llm
