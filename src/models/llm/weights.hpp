#pragma once
// A decoder-only model's tensors as llama.cpp's GGUF names them (token_embd, blk.<i>.attn_q, ...;
// which ones, config.hpp's block_tensors), checked for presence, shape and type before anything is
// uploaded, then uploaded once as device tensors that every graph of the model binds
// (Graph::external).
#include <vector>

#include "vkformer/device.hpp"
#include "vkformer/gguf.hpp"
#include "vkformer/llm.hpp"

namespace vkformer::models::llm {

struct LayerWeights {
  DeviceTensor attn_norm;  // [d]
  // The q, k and v projections as one [(H + 2·Hkv)·hd, d] matrix where the file stores them so
  // (Phi-3's attn_qkv) or they can be stacked (one type, no q/k norms between), else the three.
  std::vector<DeviceTensor> qkv;
  std::vector<DeviceTensor> qkv_bias;  // as qkv, [(H + 2·Hkv)·hd] or three; empty without biases
  DeviceTensor q_norm, k_norm;         // [hd], with qk_norm
  DeviceTensor attn_out;               // [d, H·hd]
  DeviceTensor attn_post_norm;         // [d], with post_norms
  DeviceTensor ffn_norm;               // [d]
  // Gate and up [d_ff, d] as one [2·d_ff, d] (a gated linear's weight) where stored so (Phi-3's
  // ffn_up) or stackable, else the two.
  std::vector<DeviceTensor> gate_up;
  DeviceTensor down;                   // [d, d_ff]
  DeviceTensor ffn_post_norm;          // [d], with post_norms
};

struct LanguageModelWeights {
  DeviceTensor token_embd;   // [vocab, d]
  DeviceTensor output_norm;  // [d]
  DeviceTensor output;       // [vocab, d]: output.weight, or token_embd itself when tied
  std::vector<float> rope_freqs;  // rope_dims / 2 frequency divisors, or none
  std::vector<LayerWeights> layers;
};

// Throws format naming the file and tensor (missing, or its shape or type and what was
// expected) before the first upload. Matrices must be a weight type (ggml_weight_type_names())
// and are uploaded in that type (kKeepQuantized in the .cpp); norms and biases in the
// activations' type.
LanguageModelWeights load_weights(Device& device, const GgufFile& file, const LanguageModelConfig& config,
                                  DType activations);

}  // namespace vkformer::models::llm
