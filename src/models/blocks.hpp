#pragma once
// Transformer blocks as graph builders, with the exact math of PyTorch's modules
// (nn.MultiheadAttention, nn.TransformerEncoderLayer, nn.TransformerDecoderLayer, their stacks).
#include <map>
#include <optional>
#include <string>

#include "vkformer/graph.hpp"
#include "vkformer/model.hpp"
#include "weight_store.hpp"

namespace vkformer::models {

// What one attention sees besides Q, K and V.
struct AttentionMasks {
  bool causal = false;
  std::optional<Tensor> mask;              // additive [Sq, Sk]
  std::optional<Tensor> key_padding_mask;  // i32 [B, Sk]
};

// K/V caches of one decoder layer's self-attention, [B, H, T, Dh] each.
struct LayerCache {
  Tensor k, v;
};

class BlockBuilder {
 public:
  BlockBuilder(Graph& graph, const ModelConfig& config, const WeightStore& weights,
               AttentionOptions::Path path);

  // The weight as an external of this graph (bound once per name).
  Tensor weight(const std::string& name) { return weights_(name); }

  Tensor encoder_stack(const std::string& prefix, Tensor x, const AttentionMasks& self);
  Tensor decoder_stack(const std::string& prefix, Tensor x, Tensor memory,
                       const AttentionMasks& self, const AttentionMasks& cross);
  // Token embedding * sqrt(d_model) + sinusoidal positions (the original paper's inputs).
  Tensor embed(const std::string& table, Tensor ids, std::optional<Tensor> position = {});
  // Linear generator + log-softmax over the target vocabulary.
  Tensor generator(Tensor x);

  // Incremental decoding: the K/V of `memory` for every decoder layer's cross-attention.
  std::pair<Tensor, Tensor> cross_keys_values(const std::string& layer_prefix, Tensor memory);
  // One decoder stack step for one new token per sequence, x [B, 1, E] at `position`:
  // self-attention appends its K/V to `caches` and attends the first `key_length` cached rows;
  // cross-attention uses precomputed K/V.
  Tensor decoder_stack_step(const std::string& prefix, Tensor x,
                            const std::vector<LayerCache>& caches,
                            const std::vector<std::pair<Tensor, Tensor>>& cross_kv,
                            Tensor position, Tensor key_length);

 private:
  Tensor self_attention(const std::string& prefix, Tensor x, const AttentionMasks& m);
  Tensor cross_attention(const std::string& prefix, Tensor x, Tensor memory, const AttentionMasks& m);
  Tensor attend(const std::string& prefix, Tensor q, Tensor k, Tensor v, const AttentionMasks& m,
                std::optional<Tensor> key_length = {});
  Tensor feed_forward(const std::string& prefix, Tensor x);
  Tensor norm(const std::string& prefix, Tensor x);
  Tensor encoder_layer(const std::string& prefix, Tensor x, const AttentionMasks& self);
  Tensor decoder_layer(const std::string& prefix, Tensor x, Tensor memory,
                       const AttentionMasks& self, const AttentionMasks& cross);
  // The residual wiring shared by every sublayer: post-norm norm(x + f(x)), pre-norm
  // x + f(norm(x)).
  template <class Sublayer>
  Tensor residual(const std::string& norm_prefix, Tensor x, Sublayer&& f);

  Graph& g_;
  const ModelConfig& c_;
  BoundWeights weights_;
  AttentionOptions::Path path_;
};

}  // namespace vkformer::models
