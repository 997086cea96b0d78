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
// `scale_keys`: the K cache is quantized and rotated (LoadOptions::kv_rotation); a family with
// key_scaling then gets its q/k norms through scale_key_channels.
LanguageModelWeights load_weights(Device& device, const GgufFile& file, const LanguageModelConfig& config,
                                  DType activations, bool scale_keys = false);

// The key scaling of quantized K caches (Family::key_scaling, Gemma 3): per channel
// s = sqrt(clamp(g_q / g_k, 1/16, 16)), g a norm's gain over the channel's rope pair
// (sqrt((w_a² + w_b²) / 2); a channel rope leaves alone is its own pair), and then k_norm times s,
// q_norm over s. Scores are unchanged (q/s · k s = q · k), and so is the rope (s is the same on
// both channels of a pair, which rope turns together), so a context shift turns the stored keys
// as before. What changes is the keys' q4_0 rounding: channels of large keys that the queries
// hardly read (Gemma 3 270M: k-norm gains up to 9 where the q norm's are 0.6) no longer set the
// scale of the blocks the Hadamard rotation spreads them over (bench/RESULTS.md, "Gemma 3's q4_0
// keys"). q_norm and k_norm: [head_dim] each, changed in place.
void scale_key_channels(std::vector<float>& q_norm, std::vector<float>& k_norm, int64_t rope_dims, RopeStyle style);

}  // namespace vkformer::models::llm
