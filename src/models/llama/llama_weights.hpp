#pragma once
// A llama model's tensors as llama.cpp's GGUF names them (token_embd, blk.<i>.attn_q, ...),
// checked for presence, shape and type before anything is uploaded, then uploaded once as
// device tensors that every graph of the model binds (Graph::external).
#include <vector>

#include "vkformer/device.hpp"
#include "vkformer/gguf.hpp"
#include "vkformer/llm.hpp"

namespace vkformer::models::llama {

struct LayerWeights {
  DeviceTensor attn_norm;  // [d]
  // attn_q, attn_k and attn_v stacked by rows into one [(H + 2·Hkv)·hd, d] projection where
  // they are stored in one type, else the three.
  std::vector<DeviceTensor> qkv;
  DeviceTensor attn_out;   // [d, H·hd]
  DeviceTensor ffn_norm;   // [d]
  // ffn_gate and ffn_up [d_ff, d] stacked by rows into one [2·d_ff, d] (a gated linear's
  // weight) where they are stored in one type, else the two.
  std::vector<DeviceTensor> gate_up;
  DeviceTensor down;       // [d, d_ff]
};

struct LlamaWeights {
  DeviceTensor token_embd;   // [vocab, d]
  DeviceTensor output_norm;  // [d]
  DeviceTensor output;       // [vocab, d]: output.weight, or token_embd itself when tied
  std::vector<LayerWeights> layers;
};

// Throws format naming the file and tensor (missing, or its shape or type and what was
// expected) before the first upload. Matrices must be a weight type
// (ggml_weight_type_names()) and are uploaded in that type (kKeepQuantized in the .cpp); the norms in the
// activations' type.
LlamaWeights load_weights(Device& device, const GgufFile& file, const LlamaConfig& config,
                          DType activations);

}  // namespace vkformer::models::llama
