#pragma once
// A double-precision CPU implementation of vkformer's models, written from PyTorch's definitions
// with plain loops (reference.cpp): the independent reference the demo reports agreement
// with. Slow by design; meant for small models.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "reference.hpp"
#include "vkformer/model.hpp"

namespace vkformer::ref {

class ReferenceModel {
 public:
  ReferenceModel(const ModelConfig& config, const std::map<std::string, HostTensor>& weights);

  // Encoder stack on features x [B, S, E] (key_padding: [B, S], nonzero = ignore, or empty).
  Vec encoder(const Vec& x, int64_t b, int64_t s, const std::vector<int32_t>& key_padding = {}) const;
  // Decoder stack with causal self-attention; memory [B, S, E].
  Vec decoder(const Vec& y, int64_t b, int64_t t, const Vec& memory, int64_t s,
              const std::vector<int32_t>& memory_key_padding = {}) const;

  // seq2seq: ids -> embeddings * sqrt(d) + positional encoding.
  Vec embed(const std::string& table, const std::vector<int32_t>& ids, int64_t b, int64_t s) const;
  // seq2seq: log-probabilities [B, T, V] of target ids given source ids (teacher forcing).
  Vec log_probs(const std::vector<int32_t>& src, const std::vector<int32_t>& tgt, int64_t b,
                int64_t s, int64_t t) const;
  // seq2seq: uncached greedy decoding of one source; also the smallest gap between the best and
  // second-best log-probability over the steps (how safe the token choices are).
  std::vector<int32_t> greedy(const std::vector<int32_t>& src, int steps, int32_t bos, int32_t eos,
                              double* min_margin = nullptr) const;

 private:
  const Vec& w(const std::string& name) const;
  Vec linear(const Vec& x, int64_t rows, const std::string& prefix) const;
  Vec linear_rows(const Vec& x, int64_t rows, const Vec& weight, const Vec& bias, int64_t out,
                  int64_t in) const;
  Vec attention(const std::string& prefix, const Vec& xq, int64_t b, int64_t sq, const Vec& xkv,
                int64_t sk, bool causal, const std::vector<int32_t>& key_padding) const;
  Vec feed_forward(const std::string& prefix, const Vec& x, int64_t rows) const;
  Vec norm(const std::string& prefix, const Vec& x, int64_t rows) const;
  Vec add(const Vec& a, const Vec& b) const;
  std::string encoder_prefix() const;
  std::string decoder_prefix() const;

  ModelConfig c_;
  std::map<std::string, Vec> w_;
};

}  // namespace vkformer::ref
