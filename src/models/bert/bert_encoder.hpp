#pragma once
// BertModel's forward pass (embeddings, then post-LayerNorm encoder layers) written into a graph,
// with the math of Hugging Face's modeling_bert.py.
#include <map>
#include <string>

#include "bert/bert_config.hpp"
#include "vkformer/graph.hpp"
#include "weight_store.hpp"

namespace vkformer::models::bert {

struct BertInputs {
  Tensor ids;               // i32 [B, S]
  Tensor type_ids;          // i32 [B, S]
  Tensor key_padding_mask;  // i32 [B, S], nonzero = padding (the graph's attention convention)
};

class BertEncoder {
 public:
  BertEncoder(Graph& graph, const BertConfig& config, const WeightStore& weights,
              AttentionOptions::Path path = AttentionOptions::Path::automatic);
  // The last hidden state [B, S, hidden_size], in the weights' dtype.
  Tensor build(const BertInputs& in);

 private:
  Tensor weight(const std::string& name) { return weights_(name); }
  Tensor embeddings(const BertInputs& in);
  Tensor layer(int64_t i, Tensor x, Tensor key_padding_mask);

  Graph& g_;
  const BertConfig& c_;
  BoundWeights weights_;
  AttentionOptions::Path path_;
};

}  // namespace vkformer::models::bert
