#pragma once
// Incremental decoding of a seq2seq model with KV caches. For a batch of `rows` sequences (beams),
// a source length and a longest target it owns:
//   - per decoder layer, self-attention K/V caches [rows, H, max_steps, Dh] and the cross-attention
//     K/V of the encoder output [rows, H, S, Dh], all device tensors;
//   - three executors, each recorded once: `prepare` (encoder + cross K/V, once per source),
//     `step` (one token per row: appends K/V at `position`, returns log-probs [rows, 1, V]) and
//     `reorder` (beam search: gathers cache rows by parent index).
// Every step replays `step`; nothing is recorded after construction.
#include <memory>
#include <vector>

#include "model_impl.hpp"

namespace vkformer::models {

class CachedDecoder {
 public:
  CachedDecoder(ModelImpl& model, int64_t rows, int64_t src_len, int64_t max_steps);

  void prepare(const HostTensor& src_ids);  // [rows, S]
  // Log-probs [rows, vocab] of the next token after `tokens` (one per row) at `position`.
  std::vector<float> step(const std::vector<int32_t>& tokens, int64_t position);
  // Row r of every self-attention cache becomes the old row parents[r].
  void reorder(const std::vector<int32_t>& parents);

  int64_t rows() const { return rows_; }
  int64_t max_steps() const { return max_steps_; }

 private:
  ModelImpl& model_;
  int64_t rows_, src_len_, max_steps_;
  std::vector<DeviceTensor> self_k_, self_v_, cross_k_, cross_v_;
  std::unique_ptr<Executor> prepare_, step_, reorder_;
};

}  // namespace vkformer::models
