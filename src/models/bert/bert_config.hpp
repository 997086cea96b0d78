#pragma once
// config.json of a Hugging Face BERT model (model_type "bert"), as transformers' BertConfig
// reads it, restricted to what changes the math of an encoder forward pass.
#include <cstdint>
#include <filesystem>
#include <string>

#include "vkformer/graph.hpp"

namespace vkformer::models::bert {

struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  Activation hidden_act = Activation::gelu;
  std::string hidden_act_name = "gelu";
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  float layer_norm_eps = 1e-12f;

  int64_t head_dim() const { return hidden_size / num_attention_heads; }

  // Keys that only describe the checkpoint (_name_or_path, architectures, dropout rates, ...) are
  // accepted and ignored. A key whose value would change the math in a way vkformer does not
  // implement (position_embedding_type "relative_key", hidden_act "silu", is_decoder true, ...)
  // or that vkformer does not know is an Error(unsupported) naming the key and the value;
  // malformed values are Error(format).
  static BertConfig parse(const std::string& json_text, const std::string& source = "config.json");
  static BertConfig load(const std::filesystem::path& path);
};

}  // namespace vkformer::models::bert
