#pragma once
// BERT's tensors as Hugging Face names them (BertModel's state_dict, with or without the "bert."
// prefix of BertFor* heads), checked against the config and uploaded once.
#include <filesystem>
#include <string>

#include "bert/bert_config.hpp"
#include "vkformer/device.hpp"
#include "weight_store.hpp"

namespace vkformer::models::bert {

// Names the graph binds: the embedding tables and norms under "embeddings.", and per layer
// i "layer.<i>." plus one of the suffixes below. Query, key and value are fused at load time
// into one projection ("attention.qkv.weight" [3H, H], ".bias" [3H]), so each layer makes one
// matmul for all three.
std::string layer_name(int64_t layer, const std::string& suffix);

// Reads dir/model.safetensors: every tensor the config needs, converted to `dtype` (f32 or
// f16). Errors (format) name the file, the tensor and both shapes for a mis-shaped tensor, the
// tensor and the prefixes tried for a missing one. Tensors the encoder does not use (the pooler,
// position_ids, heads of BertFor* models) are ignored.
WeightStore load_weights(Device& device, const BertConfig& config,
                         const std::filesystem::path& file, DType dtype);

}  // namespace vkformer::models::bert
