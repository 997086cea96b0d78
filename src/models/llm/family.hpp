#pragma once
// What sets one decoder-only family apart, as llama.cpp's GGUF files store it: one Family per
// general.architecture, each in its own family_<arch>.cpp. config.cpp reads a file's keys with it,
// weights.cpp loads the tensors it names and forward.cpp builds the graph it describes; nothing
// else asks which architecture a file has. A new family is one more family_<arch>.cpp, its line in
// families.def, and its tiny model and golden data (tests/fixtures/make_family_models.py into
// tests/golden_families, which tests/llm_families_test.cpp runs).
#include <string>
#include <string_view>

#include "vkformer/graph.hpp"
#include "vkformer/llm.hpp"

namespace vkformer::models::llm {

// Which layers use <arch>.attention.sliding_window where the file sets one and has no
// <arch>.attention.sliding_window_pattern.
enum class SlidingLayers : uint8_t {
  all,          // every layer (Mistral, Phi-3)
  even,         // 0, 2, 4, ...; the odd ones see everything (Gemma 2)
  five_of_six,  // all but layers 5, 11, 17, ... (Gemma 3)
};

struct Family {
  std::string_view architecture;  // general.architecture
  std::string_view models;        // what it covers, for docs and messages
  RopeStyle rope_style = RopeStyle::neox;
  Activation ffn_activation = Activation::silu;  // of the gated FFN's gate
  bool qkv_bias = false;         // blk.N.attn_{q,k,v}.bias (Qwen2)
  bool qk_norm = false;          // blk.N.attn_{q,k}_norm.weight [head_dim] (Qwen3, Gemma 3)
  bool key_scaling = false;      // quantized, rotated K caches: scale_key_channels (Gemma 3)
  bool post_norms = false;       // blk.N.post_attention_norm and post_ffw_norm (Gemma 2, 3)
  bool fused_qkv = false;        // blk.N.attn_qkv [(H + 2 Hkv) hd, d] instead of attn_q/k/v (Phi-3)
  bool fused_gate_up = false;    // blk.N.ffn_up [2 d_ff, d] holds gate then up; no ffn_gate (Phi-3)
  bool scale_embedding = false;  // token embeddings times sqrt(d_model) (Gemma)
  SlidingLayers sliding = SlidingLayers::all;
  double rope_base_sliding = 0.0;  // sliding layers' default base (Gemma 3: 10000); 0: rope_base
  // The softmax scale where the family's differs from 1/sqrt(head_dim) (Gemma 2 27B), or null.
  double (*attention_scale)(const LanguageModelConfig&) = nullptr;
};

// The family of `architecture`, or null.
const Family* find_family(std::string_view architecture);
// "llama, qwen2, ...": for the error that names a file's unsupported architecture.
std::string supported_architectures();

}  // namespace vkformer::models::llm
