#include "blocks.hpp"

#include <cmath>

namespace vkformer::models {

BlockBuilder::BlockBuilder(Graph& graph, const ModelConfig& config, const WeightStore& weights,
                           AttentionOptions::Path path)
    : g_(graph), c_(config), weights_(graph, weights), path_(path) {}

// Pre-norm: x + f(LN(x)), the sum is the residual stream. Post-norm: LN(x + f(x)) in one
// add_layer_norm dispatch, since nothing else reads the sum.
template <class Sublayer>
Tensor BlockBuilder::residual(const std::string& norm_prefix, Tensor x, Sublayer&& f) {
  if (c_.norm_first) return g_.add(x, f(norm(norm_prefix, x)));
  return g_.add_layer_norm(x, f(x), weight(norm_prefix + ".weight"), weight(norm_prefix + ".bias"),
                           c_.layer_norm_eps);
}

Tensor BlockBuilder::norm(const std::string& prefix, Tensor x) {
  return g_.layer_norm(x, weight(prefix + ".weight"), weight(prefix + ".bias"), c_.layer_norm_eps);
}

Tensor BlockBuilder::attend(const std::string& prefix, Tensor q, Tensor k, Tensor v,
                            const AttentionMasks& m, std::optional<Tensor> key_length) {
  // Ops are labelled "<layer>/<self_attn|multihead_attn>/<op>" (the layer scope is outside).
  Graph::Scope scope(g_, prefix.substr(prefix.rfind('.') + 1));
  AttentionOptions opts;  // scale 1/sqrt(head_dim), as nn.MultiheadAttention
  opts.causal = m.causal;
  opts.mask = m.mask;
  opts.key_padding_mask = m.key_padding_mask;
  opts.key_length = key_length;
  opts.path = path_;
  Tensor heads = g_.attention(q, k, v, opts);
  return g_.linear(g_.concat_heads(heads), weight(prefix + ".out_proj.weight"),
                   weight(prefix + ".out_proj.bias"));
}

// nn.MultiheadAttention with query = key = value = x: one packed projection [B, S, 3E] whose
// column blocks are Q, K and V.
Tensor BlockBuilder::self_attention(const std::string& prefix, Tensor x, const AttentionMasks& m) {
  const int h = static_cast<int>(c_.nhead);
  const int64_t e = c_.d_model;
  Tensor qkv = g_.linear(x, weight(prefix + ".in_proj_weight"), weight(prefix + ".in_proj_bias"));
  return attend(prefix, g_.split_heads(qkv, h, e, 0), g_.split_heads(qkv, h, e, e),
                g_.split_heads(qkv, h, e, 2 * e), m);
}

std::pair<Tensor, Tensor> BlockBuilder::cross_keys_values(const std::string& prefix, Tensor memory) {
  const int h = static_cast<int>(c_.nhead);
  const int64_t e = c_.d_model;
  Tensor kv = g_.linear(memory, weight(prefix + ".kv_weight"), weight(prefix + ".kv_bias"));
  return {g_.split_heads(kv, h, e, 0), g_.split_heads(kv, h, e, e)};
}

// Cross-attention: Q from the decoder, K and V from the encoder output (rows E..3E of the
// packed projection, split off at load time).
Tensor BlockBuilder::cross_attention(const std::string& prefix, Tensor x, Tensor memory,
                                     const AttentionMasks& m) {
  const int h = static_cast<int>(c_.nhead);
  Tensor q = g_.linear(x, weight(prefix + ".q_weight"), weight(prefix + ".q_bias"));
  auto [k, v] = cross_keys_values(prefix, memory);
  return attend(prefix, g_.split_heads(q, h), k, v, m);
}

Tensor BlockBuilder::feed_forward(const std::string& prefix, Tensor x) {
  Tensor hidden = g_.linear(x, weight(prefix + ".linear1.weight"), weight(prefix + ".linear1.bias"),
                            c_.activation);
  return g_.linear(hidden, weight(prefix + ".linear2.weight"), weight(prefix + ".linear2.bias"));
}

Tensor BlockBuilder::encoder_layer(const std::string& p, Tensor x, const AttentionMasks& self) {
  x = residual(p + ".norm1", x, [&](Tensor y) { return self_attention(p + ".self_attn", y, self); });
  return residual(p + ".norm2", x, [&](Tensor y) { return feed_forward(p, y); });
}

Tensor BlockBuilder::decoder_layer(const std::string& p, Tensor x, Tensor memory,
                                   const AttentionMasks& self, const AttentionMasks& cross) {
  x = residual(p + ".norm1", x, [&](Tensor y) { return self_attention(p + ".self_attn", y, self); });
  x = residual(p + ".norm2", x,
               [&](Tensor y) { return cross_attention(p + ".multihead_attn", y, memory, cross); });
  return residual(p + ".norm3", x, [&](Tensor y) { return feed_forward(p, y); });
}

Tensor BlockBuilder::encoder_stack(const std::string& prefix, Tensor x, const AttentionMasks& self) {
  for (int64_t i = 0; i < c_.num_encoder_layers; ++i) {
    std::string p = prefix + "layers." + std::to_string(i);
    Graph::Scope scope(g_, p);
    x = encoder_layer(p, x, self);
  }
  return c_.final_norm ? norm(prefix + "norm", x) : x;
}

Tensor BlockBuilder::decoder_stack(const std::string& prefix, Tensor x, Tensor memory,
                                   const AttentionMasks& self, const AttentionMasks& cross) {
  for (int64_t i = 0; i < c_.num_decoder_layers; ++i) {
    std::string p = prefix + "layers." + std::to_string(i);
    Graph::Scope scope(g_, p);
    x = decoder_layer(p, x, memory, self, cross);
  }
  return c_.final_norm ? norm(prefix + "norm", x) : x;
}

Tensor BlockBuilder::decoder_stack_step(const std::string& prefix, Tensor x,
                                        const std::vector<LayerCache>& caches,
                                        const std::vector<std::pair<Tensor, Tensor>>& cross_kv,
                                        Tensor position, Tensor key_length) {
  const int h = static_cast<int>(c_.nhead);
  const int64_t e = c_.d_model;
  if (x.shape[1] != 1)
    throw Error(ErrorCode::internal, "decoder_stack_step takes one new token per sequence");
  for (int64_t i = 0; i < c_.num_decoder_layers; ++i) {
    std::string p = prefix + "layers." + std::to_string(i);
    Graph::Scope scope(g_, p);
    const LayerCache& cache = caches[i];
    auto cached_self = [&](Tensor y) {
      std::string a = p + ".self_attn";
      Tensor qkv = g_.linear(y, weight(a + ".in_proj_weight"), weight(a + ".in_proj_bias"));
      Tensor k = g_.update_cache(cache.k, g_.split_heads(qkv, h, e, e), position);
      Tensor v = g_.update_cache(cache.v, g_.split_heads(qkv, h, e, 2 * e), position);
      // The one new query sees every position up to its own: no causal mask, just key_length.
      return attend(a, g_.split_heads(qkv, h, e, 0), k, v, {}, key_length);
    };
    auto cached_cross = [&](Tensor y) {
      std::string a = p + ".multihead_attn";
      Tensor q = g_.linear(y, weight(a + ".q_weight"), weight(a + ".q_bias"));
      return attend(a, g_.split_heads(q, h), cross_kv[i].first, cross_kv[i].second, {});
    };
    x = residual(p + ".norm1", x, cached_self);
    x = residual(p + ".norm2", x, cached_cross);
    x = residual(p + ".norm3", x, [&](Tensor y) { return feed_forward(p, y); });
  }
  return c_.final_norm ? norm(prefix + "norm", x) : x;
}

Tensor BlockBuilder::embed(const std::string& table, Tensor ids, std::optional<Tensor> position) {
  PositionalEncodingOptions pe;
  pe.input_scale = static_cast<float>(std::sqrt(static_cast<double>(c_.d_model)));
  pe.offset_tensor = position;
  pe.max_len = c_.max_len;
  return g_.positional_encoding(g_.embedding(ids, weight(table)), pe);
}

Tensor BlockBuilder::generator(Tensor x) {
  SoftmaxOptions log_softmax;
  log_softmax.log = true;
  return g_.softmax(g_.linear(x, weight("generator.weight"), weight("generator.bias")), log_softmax);
}

}  // namespace vkformer::models
