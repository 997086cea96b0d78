#pragma once
// The KV slots the scheduler decodes in: `count` sequences, each with its own cache of
// `context` tokens, filled in prompt chunks and then one token per step.
//
// One BatchedLanguageModel holds the weights once and a slot per sequence; decode() runs every
// decoding slot of the step in one batched pass (one matmul with a row per slot, attention over
// each slot's own length), so a step costs about one sequence's pass, not the sum of them.
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "vkformer/batched_llm.hpp"
#include "vkformer/device.hpp"

namespace vkformer::server {

class SequenceSlots {
 public:
  SequenceSlots(Device& device, const std::filesystem::path& gguf, int count, int64_t context);

  int count() const { return model_.slots(); }
  int64_t context() const { return model_.context(); }
  int64_t position(int slot) const { return model_.position(slot); }
  const BatchedLanguageModel& model() const { return model_; }

  void reset(int slot) { model_.reset(slot); }  // the slot's cache empty, for a new sequence
  // Appends prompt tokens to the slot's cache; the last one's logits [vocab].
  std::vector<float> prefill(int slot, std::span<const int32_t> tokens) { return model_.append(slot, tokens); }
  using Next = BatchedLanguageModel::Next;
  // One token for each listed slot, in one pass; their logits, in the same order.
  std::vector<std::vector<float>> decode(std::span<const Next> batch);

 private:
  BatchedLanguageModel model_;
};

}  // namespace vkformer::server
