// llama: Llama 2 and 3 (3.1's rope_freqs tensor), Mistral (llama.cpp writes it as llama, with
// <arch>.attention.sliding_window where the model has one), SmolLM2, TinyLlama. Interleaved RoPE:
// convert_hf_to_gguf.py permutes q and k so that llama.cpp's "normal" rotation computes
// Hugging Face's rotate_half.
#include "llm/family.hpp"

namespace vkformer::models::llm {

extern const Family kLlamaFamily = {
    .architecture = "llama",
    .models = "Llama 2/3, Mistral, SmolLM2, TinyLlama",
    .rope_style = RopeStyle::interleaved,
};

}  // namespace vkformer::models::llm
