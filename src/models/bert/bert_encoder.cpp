#include "bert/bert_encoder.hpp"

#include <numeric>
#include <vector>

#include "bert/bert_weights.hpp"

namespace vkformer::models::bert {

BertEncoder::BertEncoder(Graph& graph, const BertConfig& config, const WeightStore& weights,
                         AttentionOptions::Path path)
    : g_(graph), c_(config), weights_(graph, weights), path_(path) {}

// LayerNorm(word[ids] + position[0..S) + token_type[type_ids]). The positions are a constant of
// this graph: every sequence of a batch starts at position 0 (padding sits at the end).
Tensor BertEncoder::embeddings(const BertInputs& in) {
  Graph::Scope scope(g_, "embeddings");
  const int64_t s = in.ids.shape[1];
  std::vector<int32_t> positions(static_cast<size_t>(s));
  std::iota(positions.begin(), positions.end(), 0);
  Tensor pos = g_.embedding(g_.constant("position_ids", HostTensor::from_i32({s}, positions)),
                            weight("embeddings.position_embeddings.weight"));
  Tensor words = g_.embedding(in.ids, weight("embeddings.word_embeddings.weight"));
  Tensor types = g_.embedding(in.type_ids, weight("embeddings.token_type_embeddings.weight"));
  return g_.add_layer_norm(g_.add(words, pos), types, weight("embeddings.LayerNorm.weight"),
                           weight("embeddings.LayerNorm.bias"), c_.layer_norm_eps);
}

// BertLayer: self-attention with one fused QKV projection, output dense + residual + LayerNorm,
// intermediate dense with the activation fused, output dense + residual + LayerNorm.
Tensor BertEncoder::layer(int64_t i, Tensor x, Tensor key_padding_mask) {
  Graph::Scope scope(g_, "layer." + std::to_string(i));
  auto w = [&](const std::string& suffix) { return weight(layer_name(i, suffix)); };
  const int heads = static_cast<int>(c_.num_attention_heads);
  const int64_t h = c_.hidden_size;
  Tensor qkv = g_.linear(x, w("attention.qkv.weight"), w("attention.qkv.bias"));
  AttentionOptions opts;  // scale 1/sqrt(head_dim), as BertSelfAttention
  opts.key_padding_mask = key_padding_mask;
  opts.path = path_;
  Tensor context = g_.concat_heads(g_.attention(g_.split_heads(qkv, heads, h, 0),
                                                g_.split_heads(qkv, heads, h, h),
                                                g_.split_heads(qkv, heads, h, 2 * h), opts));
  Tensor attn = g_.linear(context, w("attention.output.dense.weight"), w("attention.output.dense.bias"));
  x = g_.add_layer_norm(attn, x, w("attention.output.LayerNorm.weight"),
                        w("attention.output.LayerNorm.bias"), c_.layer_norm_eps);
  Tensor hidden = g_.linear(x, w("intermediate.dense.weight"), w("intermediate.dense.bias"),
                            c_.hidden_act);
  Tensor out = g_.linear(hidden, w("output.dense.weight"), w("output.dense.bias"));
  return g_.add_layer_norm(out, x, w("output.LayerNorm.weight"), w("output.LayerNorm.bias"),
                           c_.layer_norm_eps);
}

Tensor BertEncoder::build(const BertInputs& in) {
  Tensor x = embeddings(in);
  for (int64_t i = 0; i < c_.num_hidden_layers; ++i) x = layer(i, x, in.key_padding_mask);
  return x;
}

}  // namespace vkformer::models::bert
